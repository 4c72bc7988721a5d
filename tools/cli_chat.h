/* cli_chat.h - the fine-tuning record options that encode, build, lint and
 * hist share (--format, --chat-template, --messages-field, --loss-on;
 * ds_chat.h, docs/chat.md): one spelling, one validation, one help text. */
#ifndef CLI_CHAT_H
#define CLI_CHAT_H

#include <getopt.h>

#include "ds.h"

/* getopt values of the options (above every command's own OPT_* values) */
enum { CLI_OPT_FORMAT = 3000, CLI_OPT_CHAT_TEMPLATE, CLI_OPT_MESSAGES_FIELD, CLI_OPT_LOSS_ON };
#define CLI_CHAT_LONGOPTS                                                                                              \
    {"format", required_argument, 0, CLI_OPT_FORMAT}, {"chat-template", required_argument, 0, CLI_OPT_CHAT_TEMPLATE},  \
        {"messages-field", required_argument, 0, CLI_OPT_MESSAGES_FIELD}, {                                            \
        "loss-on", required_argument, 0, CLI_OPT_LOSS_ON                                                               \
    }

#define CLI_CHAT_HELP                                                                                                  \
    "      --format F           text (default), chat, prompt-completion, or auto (by each\n"                           \
    "                           record's fields): fine-tuning records (docs/chat.md)\n"                                \
    "      --chat-template T    chat formats: a built-in (chatml, qwen2, qwen2.5, llama3, llama2,\n"                   \
    "                           mistral, gemma, phi3, deepseek), auto (the tokenizer folder's\n"                       \
    "                           tokenizer_config.json chat_template, recognised) or a file\n"                          \
    "                           holding a Jinja template (default: auto)\n"                                            \
    "      --messages-field F   chat records' messages field (default: messages)\n"                                    \
    "      --loss-on WHAT       assistant, completion or all (default: assistant for chat,\n"                          \
    "                           completion for prompt-completion): which tokens are targets\n"

typedef struct {
    ds_format format;           /* DS_FMT_TEXT unless --format */
    const char *chat_template;  /* --chat-template as given (NULL: auto) */
    const char *messages_field; /* NULL: messages */
    ds_loss_on loss_on;         /* DS_LOSS_DEFAULT unless --loss-on */
} cli_chat_args;
void cli_chat_init(cli_chat_args *a);
/* One option of getopt: 1 when ch is one of these (taken), 0 when not,
 * EXIT_USAGE after a message for a bad value. */
int cli_chat_option(const char *cmd, int ch, const char *arg, cli_chat_args *a);
/* After the options: --chat-template / --messages-field / --loss-on without
 * a chat format is a usage error (EXIT_USAGE after a message), else EXIT_OK. */
int cli_chat_check(const char *cmd, const cli_chat_args *a);
/* The template of a chat format (*out NULL for text): EXIT_OK, EXIT_USAGE
 * or EXIT_BAD_INPUT (an unrecognised or unreadable template) after a message. */
int cli_chat_template(const char *cmd, const cli_chat_args *a, const char *tokenizer_spec,
                      const ds_chat_template **out);

#endif
