/* llmtrain - train a GPT-2 on token shards without ever hitting OOM.
 * The whole command line lives in train/tr_cli.c (shared with
 * `mkshards plan`); see `llmtrain --help`. Started by mpirun / srun, every
 * process is one data-parallel rank (tr_dist_init in tr.h, docs/cluster.md): the
 * launcher's communicator is opened first and, when the run fails, the
 * job exits with the status the command gives alone (tr_dist_finish: the
 * ranks agree on it, or the job is aborted with it so that no rank waits
 * for this one). */
#include <stdio.h>

#include "tr.h"

int main(int argc, char **argv) {
    char err[1024];
    if (tr_dist_init(err, sizeof err)) {
        fprintf(stderr, "llmtrain: cannot join the launcher's job: %s\n", err);
        return 1;
    }
    int rc = tr_cli_main("llmtrain", argc, argv, 0);
    fflush(stdout);
    return tr_dist_finish(rc); /* the same exit status under mpirun as alone */
}
