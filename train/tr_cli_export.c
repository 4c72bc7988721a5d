/* tr_cli_export.c - `llmtrain export`: a checkpoint as a Hugging Face model
 * folder (train/export.h). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "export.h"
#include "tr.h"
#include "tr_cli_internal.h"

static const char *usage_export =
    "Usage: %s export --ckpt DIR --out MODEL_DIR [--dtype fp32|bf16] [--data DIR] [--tokenizer SPEC]\n"
    "\n"
    "Writes the checkpoint DIR/ckpt.bin as a Hugging Face model folder: model.safetensors,\n"
    "config.json (GPT2LMHeadModel), generation_config.json and the run's tokenizer\n"
    "(tokenizer.json + tokenizer_config.json), loadable by transformers'\n"
    "AutoModelForCausalLM / AutoTokenizer.from_pretrained(MODEL_DIR).\n"
    "\n"
    "  --ckpt DIR         the run's --ckpt-dir\n"
    "  --out MODEL_DIR    the folder to write (created; never inside the data or over an input)\n"
    "  --dtype fp32|bf16  weights' type (default fp32)\n"
    "  --data DIR         the run's shard set: its tokenizer and framing (BOS/EOS)\n"
    "  --tokenizer SPEC   the run's tokenizer (default: the one the shard set names); must\n"
    "                     have the checkpoint's fingerprint (else exit 2 naming both)\n"
    "\n"
    "Exit codes: 0 ok, 1 failure, 2 bad input (corrupt checkpoint, wrong tokenizer), 64 usage.\n";

int tr_cli_export(const char *prog, int argc, char **argv) {
    static const struct option opts[] = {{"ckpt", required_argument, 0, 'c'},
                                         {"out", required_argument, 0, 'o'},
                                         {"dtype", required_argument, 0, 'd'},
                                         {"data", required_argument, 0, 'D'},
                                         {"tokenizer", required_argument, 0, 't'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    tr_export_opts o = {0};
    o.out = stdout;
    optind = 1;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case 'c': o.ckpt_dir = optarg; break;
        case 'o': o.out_dir = optarg; break;
        case 'D': o.data_dir = optarg; break;
        case 't': o.tokenizer = optarg; break;
        case 'd':
            if (tr_cli_export_dtype(prog, "export --dtype", optarg, &o.bf16)) return X_USAGE;
            break;
        case 'h': printf(usage_export, prog); return X_OK;
        default:
            return tr_cli_uerr(prog, "export: unknown or incomplete option '%s' (see 'export --help')",
                               argv[optind - 1]);
        }
    }
    if (optind < argc) return tr_cli_uerr(prog, "export: unexpected argument '%s'", argv[optind]);
    if (!o.ckpt_dir || !o.out_dir)
        return tr_cli_uerr(prog, "%s", "export needs --ckpt DIR and --out MODEL_DIR (see 'export --help')");
    char err[1024] = "";
    int rc = tr_export_run(&o, err, sizeof err);
    if (rc == TR_OK) return X_OK;
    fprintf(stderr, "%s export: %s\n", prog, err[0] ? err : tr_strerror(rc));
    switch (rc) {
    case TR_ERR_CORRUPT:
    case TR_ERR_FINGERPRINT:
    case TR_ERR_IO: return X_INPUT;
    case TR_ERR_ARG: return X_USAGE;
    default: return X_FAIL;
    }
}
