/* analyze_cli.h - option parsing shared by `mkshards lint` and `mkshards hist`. */
#ifndef MKS_ANALYZE_CLI_H
#define MKS_ANALYZE_CLI_H

#include "cli.h"
#include "cli_chat.h"
#include "ds.h"

typedef struct {
    const char *tokenizer, *pattern, *svg;
    int json, hist, lint;
    const char **inputs;
    size_t n_inputs;
    ds_reader_opts ro;
    ds_analyze_opts ao;
    tk_tokenizer *tok;
    cli_chat_args chat; /* --format, --chat-template, --messages-field, --loss-on */
} analyze_args;

/* Parse argv for `cmd` ("lint" or "hist"). Returns -1 to continue, or an
 * exit status (help printed, usage error). */
int analyze_parse(const char *cmd, const char *usage, int argc, char **argv, analyze_args *a);
void analyze_args_free(analyze_args *a);
/* Load the tokenizer (if any), run, print. Returns the exit status. */
int analyze_run(const char *cmd, analyze_args *a);

#endif
