/* comm.c - the communicator's dispatcher (comm.h): picks an engine from the
 * build's table (comm_engine.h), owns the object, checks arguments, answers
 * world 1 of host engines itself and folds the small reductions in rank
 * order. It names no engine: what this build has is the generated table. */
#include "comm.h"
#include "comm_engine.h"

#include "tr.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The engine of that name in this build, or NULL. */
static const tr_comm_engine *find_engine(const char *name) {
    for (const tr_comm_engine *const *e = tr_comm_engine_table; *e; e++)
        if (strcmp((*e)->name, name) == 0) return *e;
    return NULL;
}

int tr_comm_have(const char *engine) { return engine && find_engine(engine) != NULL; }

/* Why the engine of that name is not here, into err. */
static void absent(const char *name, int device, char *err, size_t errlen) {
    for (const tr_comm_engine_absent *a = tr_comm_engine_absent_table; a->name; a++)
        if (strcmp(a->name, name) == 0) {
            snprintf(err, errlen, "this build has no %s communicator engine (%s)", name, a->hint);
            return;
        }
    snprintf(err, errlen, "unknown %s communicator engine '%s'", device ? "device" : "host", name);
}

/* The environment's deadline, or 60 s. */
static double env_timeout(void) {
    const char *v = getenv("MKS_COMM_TIMEOUT");
    if (v && *v) {
        char *end;
        double t = strtod(v, &end);
        if (*end == 0 && isfinite(t) && t > 0 && t <= 1e7) return t;
    }
    return 60.0;
}

static int alloc_scratch(tr_comm *c, size_t bucket) {
    if (c->world > 1 && !c->engine->device) {
        if (bucket > (size_t)1 << 28) return TR_ERR_ARG;
        float *s = malloc(bucket * sizeof(float));
        if (!s) return TR_ERR_NOMEM;
        free(c->scratch);
        c->scratch = s;
    }
    c->bucket = bucket;
    return TR_OK;
}

static tr_comm *new_comm(const tr_comm_engine *e, char *err, size_t errlen) {
    tr_comm *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->engine = e;
    c->world = c->local_size = 1;
    c->serialized = 1;
    return c;
}

int tr_comm_open(const char *engine, tr_comm **out, char *err, size_t errlen) {
    *out = NULL;
    if (errlen) err[0] = 0;
    const tr_comm_engine *e = NULL;
    if (!engine) {
        for (const tr_comm_engine *const *t = tr_comm_engine_table; *t && !e; t++)
            if (!(*t)->device && (*t)->detect && (*t)->detect()) e = *t;
        engine = e ? e->name : "single";
    }
    if (!e) e = find_engine(engine);
    if (!e || e->device) {
        if (e) snprintf(err, errlen, "the %s communicator engine runs on a device (tr_comm_open_device)", engine);
        else absent(engine, 0, err, errlen);
        return TR_ERR_ARG;
    }
    tr_comm *c = new_comm(e, err, errlen);
    if (!c) return TR_ERR_NOMEM;
    c->timeout = env_timeout();
    int rc = e->open(c, NULL, -1, err, errlen);
    if (rc) {
        free(c);
        return rc;
    }
    rc = alloc_scratch(c, TR_COMM_DEFAULT_BUCKET);
    if (rc) {
        snprintf(err, errlen, "cannot allocate the communication buffer (%zu bytes)",
                 TR_COMM_DEFAULT_BUCKET * sizeof(float));
        tr_comm_close(c);
        return rc;
    }
    *out = c;
    return TR_OK;
}

int tr_comm_open_device(tr_comm *host, const char *engine, int device, tr_comm **out, char *err, size_t errlen) {
    *out = NULL;
    if (errlen) err[0] = 0;
    if (!host) {
        snprintf(err, errlen, "a device communicator needs a host communicator to bootstrap it");
        return TR_ERR_ARG;
    }
    const tr_comm_engine *e = engine ? find_engine(engine) : NULL;
    if (!e || !e->device) {
        if (e) snprintf(err, errlen, "the %s communicator engine is a host engine (tr_comm_open)", engine);
        else absent(engine ? engine : "(none)", 1, err, errlen);
        return e ? TR_ERR_ARG : TR_ERR_NODEVICE;
    }
    tr_comm *c = new_comm(e, err, errlen);
    if (!c) return TR_ERR_NOMEM;
    c->timeout = tr_comm_timeout(host);
    c->bucket = host->bucket;
    int rc = e->open(c, host, device, err, errlen);
    if (rc) {
        free(c);
        return rc;
    }
    *out = c;
    return TR_OK;
}

void tr_comm_close(tr_comm *c) {
    if (!c) return;
    c->engine->close(c);
    free(c->scratch);
    free(c);
}

void tr_comm_abort(tr_comm *c, int code) {
    if (c && c->engine->abort) c->engine->abort(c, code);
}

int tr_comm_exit_agree(tr_comm *c, int code, double timeout_s) {
    if (c && c->engine->exit_agree) return c->engine->exit_agree(c, code, timeout_s);
    return code;
}

const char *tr_comm_engine_name(const tr_comm *c) { return c->engine->name; }
int tr_comm_on_device(const tr_comm *c) { return c->engine->device; }
int tr_comm_rank(const tr_comm *c) { return c->rank; }
int tr_comm_world(const tr_comm *c) { return c->world; }
int tr_comm_local_rank(const tr_comm *c) { return c->local_rank; }
int tr_comm_local_size(const tr_comm *c) { return c->local_size; }
int tr_comm_serialized(const tr_comm *c) { return c->serialized; }
const char *tr_comm_error(const tr_comm *c) { return c->err; }
double tr_comm_timeout(const tr_comm *c) { return c->timeout; }

int tr_comm_failed(tr_comm *c, int rc, const char *what, char *err, size_t errlen) {
    snprintf(err, errlen, "%s: %s", what, c && c->err[0] ? c->err : tr_strerror(rc));
    return rc == TR_ERR_NOMEM || rc == TR_ERR_ARG ? rc : TR_ERR_INTERNAL;
}

void tr_comm_set_timeout(tr_comm *c, double seconds) {
    if (isfinite(seconds) && seconds > 0) c->timeout = seconds;
}

int tr_comm_set_bucket(tr_comm *c, size_t elems) {
    if (elems < (size_t)c->world || elems < 1) {
        snprintf(c->err, sizeof c->err, "bucket of %zu elements is smaller than the world (%d)", elems, c->world);
        return TR_ERR_ARG;
    }
    int rc = alloc_scratch(c, elems);
    if (rc) snprintf(c->err, sizeof c->err, "cannot allocate a %zu-element communication buffer", elems);
    return rc;
}

/* ---- calls -------------------------------------------------------------- */

/* World 1 of a host engine: every collective is the identity. A device
 * engine is called even then (its stream orders the call with the GPU's
 * work; one-rank NCCL runs check the NCCL path). */
static int identity(const tr_comm *c) { return c->world == 1 && !c->engine->device; }

/* The engine has no such call. */
static int missing(tr_comm *c, const char *what) {
    snprintf(c->err, sizeof c->err, "the %s communicator engine has no %s", c->engine->name, what);
    return TR_ERR_ARG;
}

static int reduce_range(tr_comm *c, float *buf, size_t n, size_t unit, size_t a, size_t b, int gather) {
    if (!c->engine->reduce_range) return missing(c, gather ? "all-reduce" : "reduce-scatter");
    return c->engine->reduce_range(c, buf, n, unit, a, b, gather);
}

int tr_comm_allreduce_f32(tr_comm *c, float *buf, size_t n) {
    c->err[0] = 0;
    if (identity(c) || n == 0) return TR_OK;
    if (!buf) return TR_ERR_ARG;
    return reduce_range(c, buf, n, 0, 0, n, 1);
}

int tr_comm_reduce_scatter_units_f32(tr_comm *c, float *buf, size_t n, size_t unit) {
    c->err[0] = 0;
    if (identity(c) || n == 0) return TR_OK;
    if (!buf) return TR_ERR_ARG;
    return reduce_range(c, buf, n, unit, 0, n, 0);
}

int tr_comm_allgather_units_f32(tr_comm *c, float *buf, size_t n, size_t unit) {
    c->err[0] = 0;
    if (identity(c) || n == 0) return TR_OK;
    if (!buf) return TR_ERR_ARG;
    if (!c->engine->allgather) return missing(c, "all-gather");
    return c->engine->allgather(c, buf, n, unit);
}

int tr_comm_allreduce_range_f32(tr_comm *c, float *buf, size_t a, size_t b) {
    c->err[0] = 0;
    if (identity(c) || a >= b) return TR_OK;
    if (!buf) return TR_ERR_ARG;
    return reduce_range(c, buf, b, 0, a, b, 1);
}

int tr_comm_reduce_scatter_units_range_f32(tr_comm *c, float *buf, size_t n, size_t unit, size_t a, size_t b) {
    c->err[0] = 0;
    if (b > n || a > b) {
        snprintf(c->err, sizeof c->err, "range [%zu, %zu) of %zu elements", a, b, n);
        return TR_ERR_ARG;
    }
    if (identity(c) || a == b) return TR_OK;
    if (!buf) return TR_ERR_ARG;
    return reduce_range(c, buf, n, unit, a, b, 0);
}

int tr_comm_allreduce_range_async_f32(tr_comm *c, float *buf, size_t a, size_t b, void *after) {
    c->err[0] = 0;
    if (identity(c) || a >= b) return TR_OK;
    if (!buf) return TR_ERR_ARG;
    if (!c->engine->reduce_async)
        return after ? missing(c, "asynchronous all-reduce after a stream") : reduce_range(c, buf, b, 0, a, b, 1);
    return c->engine->reduce_async(c, buf, a, b, after);
}

int tr_comm_wait(tr_comm *c) {
    c->err[0] = 0;
    if (identity(c) || !c->engine->wait) return TR_OK;
    return c->engine->wait(c);
}

static int p2p(tr_comm *c, int is_send, float *buf, size_t n, int peer) {
    c->err[0] = 0;
    if (peer < 0 || peer >= c->world || peer == c->rank) {
        snprintf(c->err, sizeof c->err, "point-to-point with rank %d (world %d, this rank %d)", peer, c->world,
                 c->rank);
        return TR_ERR_ARG;
    }
    if (n == 0) return TR_OK;
    if (!buf) return TR_ERR_ARG;
    if (!c->engine->p2p) return missing(c, "point-to-point");
    return c->engine->p2p(c, is_send, buf, n, peer);
}

int tr_comm_send_f32(tr_comm *c, const float *buf, size_t n, int peer) {
    return p2p(c, 1, (float *)(uintptr_t)buf, n, peer);
}

int tr_comm_recv_f32(tr_comm *c, float *buf, size_t n, int peer) { return p2p(c, 0, buf, n, peer); }

int tr_comm_reduce_scatter_f32(tr_comm *c, float *buf, size_t n) {
    return tr_comm_reduce_scatter_units_f32(c, buf, n, 0);
}

int tr_comm_allgather_f32(tr_comm *c, float *buf, size_t n) { return tr_comm_allgather_units_f32(c, buf, n, 0); }

static int allgather_bytes(tr_comm *c, const void *mine, void *all, size_t bytes, const char *what) {
    if (!c->engine->allgather_bytes) return missing(c, what);
    return c->engine->allgather_bytes(c, mine, all, bytes, what);
}

int tr_comm_allgather_bytes(tr_comm *c, const void *mine, void *all, size_t bytes) {
    c->err[0] = 0;
    if (bytes > 65536 || (bytes && (!mine || !all))) {
        snprintf(c->err, sizeof c->err, "allgather of %zu bytes (limit 65536)", bytes);
        return TR_ERR_ARG;
    }
    if (identity(c)) {
        if (bytes) memmove(all, mine, bytes);
        return TR_OK;
    }
    return allgather_bytes(c, mine, all, bytes, "allgather");
}

/* Small folds: every rank gathers everyone's values and folds them in rank
 * order, so every rank computes the same bits. */
enum { SMALL_MAX = 4096 };

/* The world's copies of a small array go to the communication buffer (no
 * allocation during training); NULL when they do not fit. */
static void *small_buffer(tr_comm *c, size_t bytes) {
    if (bytes > c->bucket * sizeof(float) / (size_t)c->world) {
        snprintf(c->err, sizeof c->err, "small reduction of %zu bytes x %d ranks over the %zu-byte buffer", bytes,
                 c->world, c->bucket * sizeof(float));
        return NULL;
    }
    return c->scratch;
}

int tr_comm_allreduce_f64(tr_comm *c, double *buf, size_t n) {
    c->err[0] = 0;
    if (identity(c) || n == 0) return TR_OK;
    if (n > SMALL_MAX) {
        snprintf(c->err, sizeof c->err, "allreduce_f64 of %zu values (limit %d)", n, SMALL_MAX);
        return TR_ERR_ARG;
    }
    if (!c->engine->allgather_bytes) return missing(c, "allreduce(f64)");
    double *all = small_buffer(c, n * sizeof(double));
    if (!all) return TR_ERR_ARG;
    int rc = allgather_bytes(c, buf, all, n * sizeof(double), "allreduce(f64)");
    if (!rc)
        for (size_t i = 0; i < n; i++) {
            double s = all[i];
            for (int r = 1; r < c->world; r++) s += all[(size_t)r * n + i];
            buf[i] = s;
        }
    return rc;
}

int tr_comm_allreduce_u64(tr_comm *c, uint64_t *buf, size_t n) {
    c->err[0] = 0;
    if (identity(c) || n == 0) return TR_OK;
    if (n > SMALL_MAX) {
        snprintf(c->err, sizeof c->err, "allreduce_u64 of %zu values (limit %d)", n, SMALL_MAX);
        return TR_ERR_ARG;
    }
    if (!c->engine->allgather_bytes) return missing(c, "allreduce(u64)");
    uint64_t *all = small_buffer(c, n * sizeof(uint64_t));
    if (!all) return TR_ERR_ARG;
    int rc = allgather_bytes(c, buf, all, n * sizeof(uint64_t), "allreduce(u64)");
    if (!rc)
        for (size_t i = 0; i < n; i++) {
            uint64_t s = 0;
            for (int r = 0; r < c->world; r++) s += all[(size_t)r * n + i];
            buf[i] = s;
        }
    return rc;
}

int tr_comm_bcast(tr_comm *c, void *buf, size_t bytes, int root) {
    c->err[0] = 0;
    if (root < 0 || root >= c->world) {
        snprintf(c->err, sizeof c->err, "broadcast from rank %d of a world of %d", root, c->world);
        return TR_ERR_ARG;
    }
    if (identity(c) || bytes == 0) return TR_OK;
    if (!buf) return TR_ERR_ARG;
    if (!c->engine->bcast) return missing(c, "broadcast");
    return c->engine->bcast(c, buf, bytes, root);
}

int tr_comm_barrier(tr_comm *c) {
    c->err[0] = 0;
    if (identity(c)) return TR_OK;
    return allgather_bytes(c, NULL, NULL, 0, "barrier");
}
