/* comm_engine.h - the engine interface behind comm.h (internal to the
 * communicator: train/comm.c, the dispatcher, and the engines
 * train/comm_<name>.{c,cu}).
 *
 * An engine is one const tr_comm_engine tr_comm_engine_<name>, defined in
 * its own file and registered by one line in train/CMakeLists.txt
 * (tr_comm_engine(NAME BUILT HINT)): the build lists the engines it has in a
 * generated table, tr_comm_engine_table, and the ones it lacks with what to
 * configure, tr_comm_engine_absent_table; comm.c picks from them by name and
 * knows no engine. The dispatcher owns the object (rank, world, deadline,
 * communication buffer, message), the argument checks, the small folds
 * (over allgather_bytes, in rank order) and world 1 of host engines (every
 * collective the identity, no engine call); an engine sets the world at
 * open and moves the bytes. */
#ifndef TR_COMM_ENGINE_H
#define TR_COMM_ENGINE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* comm.h's handle, declared again (not included) so that the engine
 * interface stands below the API it serves: the dispatcher includes both,
 * an engine includes comm.h only for the shard arithmetic it uses. */
typedef struct tr_comm tr_comm;
typedef struct tr_comm_engine tr_comm_engine;

struct tr_comm {
    const tr_comm_engine *engine;
    int rank, world, local_rank, local_size;
    double timeout; /* seconds per collective */
    size_t bucket;  /* elements per bucket of the float collectives */
    float *scratch; /* receive buffer: bucket floats (host engines, world > 1) */
    int serialized; /* another thread may drive it (MPI_THREAD_SERIALIZED or more) */
    void *impl;     /* the engine's state */
    char err[1024];
};

struct tr_comm_engine {
    const char *name;
    /* 1: buffers are device memory and the engine is opened over a host
     * communicator (tr_comm_open_device); 0: a host engine (tr_comm_open) */
    int device;
    /* Optional (host engines): 1 when this process was started for this
     * engine (launch_env.h); tr_comm_open(NULL) takes the first engine
     * that says so. Its open refuses a world other than the launcher's. */
    int (*detect)(void);
    /* Set c->rank, world, local_rank, local_size (and serialized, impl);
     * c->timeout is set. host and device: a device engine's bootstrap
     * (NULL and -1 for host engines). Returns TR_OK or TR_ERR_* with err;
     * on failure the engine has released what it took. */
    int (*open)(tr_comm *c, tr_comm *host, int device, char *err, size_t errlen);
    void (*close)(tr_comm *c);
    /* Optional: end the whole job (does not return); none: returns. */
    void (*abort)(tr_comm *c, int code);
    /* Optional: tr_comm_exit_agree for more than one rank; none: code. */
    int (*exit_agree)(tr_comm *c, int code, double timeout_s);
    /* The collectives, each optional (none: TR_ERR_ARG naming the engine).
     * Arguments are checked, n > 0, and a host engine is called at world
     * > 1 only. reduce_range: the range [a, b) of a buffer of n elements,
     * owned in the units layout (unit 0: the range cut in world shards of
     * its own); gather 1: all-reduce, 0: reduce-scatter. */
    int (*reduce_range)(tr_comm *c, float *buf, size_t n, size_t unit, size_t a, size_t b, int gather);
    int (*allgather)(tr_comm *c, float *buf, size_t n, size_t unit);
    int (*p2p)(tr_comm *c, int is_send, float *buf, size_t n, int peer);
    /* bytes 0: a barrier (mine and all NULL); `what` names the call in
     * messages */
    int (*allgather_bytes)(tr_comm *c, const void *mine, void *all, size_t bytes, const char *what);
    int (*bcast)(tr_comm *c, void *buf, size_t bytes, int root);
    /* Optional: the asynchronous all-reduce of [a, b) after `after`, and
     * the wait for all of them (none: reduce_range at once, nothing to
     * wait for). */
    int (*reduce_async)(tr_comm *c, float *buf, size_t a, size_t b, void *after);
    int (*wait)(tr_comm *c);
};

/* An engine this build does not have: its name and what to configure. */
typedef struct {
    const char *name, *hint;
} tr_comm_engine_absent;

/* Generated (train/comm_engines.c.in): NULL-terminated. */
extern const tr_comm_engine *const tr_comm_engine_table[];
extern const tr_comm_engine_absent tr_comm_engine_absent_table[];

#ifdef __cplusplus
}
#endif
#endif
