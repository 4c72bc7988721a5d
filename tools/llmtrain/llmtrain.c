/* llmtrain - train a GPT-2 on token shards without ever hitting OOM.
 * The whole command line lives in train/tr_cli.c (shared with
 * `mkshards plan`); see `llmtrain --help`. */
#include "tr.h"

int main(int argc, char **argv) { return tr_cli_main("llmtrain", argc, argv, 0); }
