/* cmd_pending.c - weak placeholders for subcommands not written yet.
 *
 * To implement a subcommand, add tools/cmd_<name>.c with a normal (strong)
 * definition of cmd_<name>(); the linker then ignores the stub below. No
 * change to this file or to the dispatcher is needed. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static int pending(const char *name, int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("Usage: mkshards %s ...\n\nNot implemented yet (see issue '%s' in the project tracker).\n", name,
               name);
        return EXIT_OK;
    }
    fprintf(stderr, "mkshards %s: not implemented yet (see issue '%s' in the project tracker)\n", name, name);
    return EXIT_USAGE;
}

#define PENDING(name)                                                                                      \
    __attribute__((weak)) int cmd_##name(int argc, char **argv) { return pending(#name, argc, argv); }

PENDING(lint)
PENDING(hist)
PENDING(tokenizer)
PENDING(build)
PENDING(inspect)
PENDING(verify)
PENDING(merge)
PENDING(plan)
