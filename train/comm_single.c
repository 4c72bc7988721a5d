/* comm_single.c - the world-1 engine (comm.h): one process, no library.
 * Every collective of a host engine at world 1 is the identity, answered by
 * the dispatcher (comm.c), so this engine only opens and closes. */
#include "comm_engine.h"

#include "tr.h"

#include <stddef.h>

static int single_open(tr_comm *c, tr_comm *host, int device, char *err, size_t errlen) {
    (void)host;
    (void)device;
    (void)err;
    (void)errlen;
    c->rank = c->local_rank = 0;
    c->world = c->local_size = 1;
    c->serialized = 1;
    return TR_OK;
}

static void single_close(tr_comm *c) { (void)c; }

const tr_comm_engine tr_comm_engine_single = {
    .name = "single",
    .device = 0,
    .detect = NULL, /* the default of tr_comm_open(NULL) */
    .open = single_open,
    .close = single_close,
};
