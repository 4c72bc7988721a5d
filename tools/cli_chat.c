/* cli_chat.c - the fine-tuning record options of encode, build, lint and
 * hist (cli_chat.h). */
#include "cli_chat.h"

#include <string.h>

#include "cli.h"

void cli_chat_init(cli_chat_args *a) {
    memset(a, 0, sizeof *a);
    a->format = DS_FMT_TEXT;
    a->loss_on = DS_LOSS_DEFAULT;
}

int cli_chat_option(const char *cmd, int ch, const char *arg, cli_chat_args *a) {
    switch (ch) {
    case CLI_OPT_FORMAT:
        if (ds_format_parse(arg, &a->format)) {
            char names[96];
            cli_usage_error(cmd, "--format expects %s, got '%s'", ds_names_list(ds_format_name, names, sizeof names),
                            arg);
            return EXIT_USAGE;
        }
        return 1;
    case CLI_OPT_CHAT_TEMPLATE: a->chat_template = arg; return 1;
    case CLI_OPT_MESSAGES_FIELD: a->messages_field = arg; return 1;
    case CLI_OPT_LOSS_ON:
        /* "default" is the library's own value, not an option value */
        if (ds_loss_on_parse(arg, &a->loss_on) || a->loss_on == DS_LOSS_DEFAULT) {
            cli_usage_error(cmd, "--loss-on expects assistant, completion or all, got '%s'", arg);
            return EXIT_USAGE;
        }
        return 1;
    }
    return 0;
}

int cli_chat_check(const char *cmd, const cli_chat_args *a) {
    if (a->format == DS_FMT_TEXT && (a->chat_template || a->messages_field || a->loss_on != DS_LOSS_DEFAULT))
        return cli_usage_error(cmd, "--chat-template, --messages-field and --loss-on need --format chat, "
                                    "prompt-completion or auto");
    return EXIT_OK;
}

int cli_chat_template(const char *cmd, const cli_chat_args *a, const char *tokenizer_spec,
                      const ds_chat_template **out) {
    *out = NULL;
    if (a->format == DS_FMT_TEXT) return EXIT_OK;
    char terr[1200];
    int trc = ds_chat_template_resolve(a->chat_template, tokenizer_spec, out, terr, sizeof terr);
    if (trc == DS_ERR_ARG) return cli_usage_error(cmd, "%s", terr);
    if (trc != DS_OK) {
        cli_error(cmd, "--chat-template: %s", terr);
        return EXIT_BAD_INPUT;
    }
    return EXIT_OK;
}
