/* comm_mpi.c - the MPI engine of the communicator (comm.h, comm_engine.h),
 * compiled and registered only where CMake finds MPI (train/CMakeLists.txt).
 *
 * Every collective is built from nonblocking point-to-point messages on a
 * private duplicate of MPI_COMM_WORLD whose error handler is
 * MPI_ERRORS_RETURN, and completed by polling (MPI_Testsome) against the
 * communicator's deadline. So a collective never blocks for ever, and when
 * it fails the message names the peer whose message is missing or whose
 * link reported the error. Floats are folded in rank order by the shard's
 * owner (comm.h), independent of the MPI library's collective algorithms.
 */
#include "mks_common.h"
#include "comm.h"
#include "comm_engine.h"

#include "launch_env.h"
#include "tr.h"

#include <mpi.h>

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    MPI_Comm comm; /* duplicate of MPI_COMM_WORLD (our tags only) */
    int own_init;  /* mpi_open called MPI_Init */
    uint64_t seq;  /* collectives issued (message tags) */
    int nreq;
    MPI_Request *req; /* 2 * world */
    int *peer;        /* peer of each request */
    int *done;
    int *idx;
    MPI_Status *st;
} mpi_state;

static void mpi_msg(int code, char *out, size_t len) {
    char s[MPI_MAX_ERROR_STRING];
    int n = 0;
    if (MPI_Error_string(code, s, &n) != MPI_SUCCESS) snprintf(s, sizeof s, "MPI error %d", code);
    snprintf(out, len, "%s", s);
}

static void mpi_close(tr_comm *c);

static int mpi_open(tr_comm *c, tr_comm *host, int device, char *err, size_t errlen) {
    (void)host;
    (void)device;
    /* the launcher's word, before MPI_Init adds its own variables (a
     * singleton OpenMPI sets PMIX_RANK) */
    tr_launch_env le;
    tr_launch_env_read(&le);
    int init = 0, fin = 0, own_init = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (fin) {
        snprintf(err, errlen, "MPI was already finalised in this process");
        return TR_ERR_ARG;
    }
    if (!init) {
        int prov = 0;
        /* SERIALIZED: the data-parallel backend's communication thread
         * drives the collectives while backward runs (never two threads at
         * once) */
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &prov) != MPI_SUCCESS) {
            snprintf(err, errlen, "MPI_Init failed (started by a launcher that this MPI does not understand?)");
            return TR_ERR_IO;
        }
        own_init = 1;
    }
    {
        int prov = MPI_THREAD_SINGLE;
        MPI_Query_thread(&prov);
        c->serialized = prov >= MPI_THREAD_SERIALIZED;
    }
    mpi_state *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    m->own_init = own_init;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &m->comm);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_rank(m->comm, &c->rank);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_size(m->comm, &c->world);
    if (rc == MPI_SUCCESS) {
        MPI_Comm node;
        if (MPI_Comm_split_type(m->comm, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
            MPI_Comm_rank(node, &c->local_rank);
            MPI_Comm_size(node, &c->local_size);
            MPI_Comm_free(&node);
        } else if (le.local_rank >= 0 && le.local_size > le.local_rank) {
            /* the launcher's word (OpenMPI, MPICH's MPI_LOCALRANKID, Slurm's SLURM_LOCALID) */
            c->local_rank = le.local_rank;
            c->local_size = le.local_size;
        }
    }
    if (rc != MPI_SUCCESS) {
        char s[256];
        mpi_msg(rc, s, sizeof s);
        snprintf(err, errlen, "MPI setup failed: %s", s);
        free(m);
        m = NULL;
        goto fail;
    }
    size_t w = (size_t)c->world;
    m->req = calloc(2 * w, sizeof *m->req);
    m->peer = calloc(2 * w, sizeof *m->peer);
    m->done = calloc(2 * w, sizeof *m->done);
    m->idx = calloc(2 * w, sizeof *m->idx);
    m->st = calloc(2 * w, sizeof *m->st);
    c->impl = m;
    if (!m->req || !m->peer || !m->done || !m->idx || !m->st) {
        snprintf(err, errlen, "out of memory");
        mpi_close(c);
        return TR_ERR_NOMEM;
    }
    /* a launcher this MPI does not speak to (srun without the PMI plugin
     * OpenMPI was built with, another MPI's mpiexec) leaves every process
     * a world of its own: N copies of one run, not one run */
    if (le.world > 1 && le.world != c->world) {
        snprintf(err, errlen,
                 "the launcher (%s environment) started %d processes but MPI sees a world of %d: this MPI library "
                 "does not understand the launcher (srun: pass --mpi=pmix or --mpi=pmi2, whichever this MPI was "
                 "built with, see srun --mpi=list; or use this MPI's own mpirun)",
                 le.source, le.world, c->world);
        mpi_close(c);
        return TR_ERR_ARG;
    }
    return TR_OK;
fail:
    free(m);
    if (own_init) MPI_Finalize();
    return TR_ERR_IO;
}

static void mpi_close(tr_comm *c) {
    mpi_state *m = c->impl;
    if (!m) return;
    if (m->comm != MPI_COMM_NULL && m->comm != 0) MPI_Comm_free(&m->comm);
    free(m->req);
    free(m->peer);
    free(m->done);
    free(m->idx);
    free(m->st);
    if (m->own_init) {
        int fin = 0;
        MPI_Finalized(&fin);
        if (!fin) MPI_Finalize();
    }
    free(m);
    c->impl = NULL;
}

static void mpi_abort(tr_comm *c, int code) {
    (void)c;
    fflush(stdout);
    fflush(stderr);
    /* the message this rank just wrote travels to the launcher through its
     * I/O forwarding; MPI_Abort tears that down at once, and the launcher
     * may drop what it has not read yet (then no rank's reason is shown):
     * give it a quarter second */
    struct timespec pause = {0, 250000000L};
    nanosleep(&pause, NULL);
    MPI_Abort(MPI_COMM_WORLD, code ? code : 1);
}

static int mpi_exit_agree(tr_comm *c, int code, double timeout_s) {
    (void)c;
    /* the highest code in a nonblocking reduction, polled against the
     * deadline: a rank that never comes leaves it pending, and MPI_Abort
     * ends it with the job */
    int all = 0;
    MPI_Request req;
    if (MPI_Iallreduce(&code, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &req) != MPI_SUCCESS) return -1;
    double end = mc_now_s() + timeout_s;
    for (;;) {
        int done = 0;
        if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return -1;
        if (done) return all;
        if (mc_now_s() > end) return -1;
        struct timespec pause = {0, 1000000L}; /* leave the core to the other ranks */
        nanosleep(&pause, NULL);
    }
}

/* ---- requests and the deadline ------------------------------------------ */

/* The next collective's tag (and its number, for messages). */
static int next_tag(tr_comm *c) {
    mpi_state *m = c->impl;
    m->seq++;
    return 1 + (int)(m->seq % 30000u);
}

static int post(tr_comm *c, int is_send, void *buf, size_t count, MPI_Datatype type, int peer, int tag,
                const char *what) {
    mpi_state *m = c->impl;
    if (count > (size_t)INT_MAX) {
        snprintf(c->err, sizeof c->err, "rank %d: %s: message of %zu elements", c->rank, what, count);
        return TR_ERR_INTERNAL;
    }
    MPI_Request *r = &m->req[m->nreq];
    int rc = is_send ? MPI_Isend(buf, (int)count, type, peer, tag, m->comm, r)
                     : MPI_Irecv(buf, (int)count, type, peer, tag, m->comm, r);
    if (rc != MPI_SUCCESS) {
        char s[256];
        mpi_msg(rc, s, sizeof s);
        snprintf(c->err, sizeof c->err, "rank %d: %s: cannot %s rank %d: %s", c->rank, what,
                 is_send ? "send to" : "receive from", peer, s);
        return TR_ERR_IO;
    }
    m->peer[m->nreq] = peer;
    m->done[m->nreq] = 0;
    m->nreq++;
    return TR_OK;
}

/* Complete every posted request or fail at the deadline, naming peers. */
static int wait_all(tr_comm *c, const char *what) {
    mpi_state *m = c->impl;
    int n = m->nreq, left = n;
    double t0 = mc_now_s();
    long spins = 0;
    m->nreq = 0;
    while (left > 0) {
        int out = 0;
        int rc = MPI_Testsome(n, m->req, &out, m->idx, m->st);
        if (rc != MPI_SUCCESS) {
            char s[256] = "", who[256] = "";
            size_t wl = 0;
            if (rc == MPI_ERR_IN_STATUS && out != MPI_UNDEFINED) {
                for (int k = 0; k < out; k++) {
                    int e = m->st[k].MPI_ERROR;
                    if (e != MPI_SUCCESS && e != MPI_ERR_PENDING) {
                        if (!s[0]) mpi_msg(e, s, sizeof s);
                        if (wl < sizeof who - 16)
                            wl +=
                                (size_t)snprintf(who + wl, sizeof who - wl, "%s%d", wl ? ", " : "", m->peer[m->idx[k]]);
                    }
                }
            } else {
                mpi_msg(rc, s, sizeof s);
            }
            snprintf(c->err, sizeof c->err,
                     "rank %d: %s failed on the link to rank %s: %s (that rank died or its "
                     "host is unreachable)",
                     c->rank, what, who[0] ? who : "?", s);
            return TR_ERR_IO;
        }
        if (out == MPI_UNDEFINED) break;
        for (int k = 0; k < out; k++) m->done[m->idx[k]] = 1;
        left -= out;
        if (left <= 0) break;
        double el = mc_now_s() - t0;
        if (el > c->timeout) {
            char who[256] = "";
            size_t wl = 0;
            int last = -1;
            for (int i = 0; i < n; i++)
                if (!m->done[i] && m->peer[i] != last && wl < sizeof who - 16) {
                    wl += (size_t)snprintf(who + wl, sizeof who - wl, "%s%d", wl ? ", " : "", m->peer[i]);
                    last = m->peer[i];
                }
            snprintf(c->err, sizeof c->err,
                     "rank %d: %s #%llu: nothing from rank %s after %.1f s (the deadline; that rank died, hangs or "
                     "is far behind; MKS_COMM_TIMEOUT sets the deadline)",
                     c->rank, what, (unsigned long long)m->seq, who, el);
            return TR_ERR_IO;
        }
        if (++spins > 200) {
            /* poll, but leave the core to the other ranks and threads */
            struct timespec ts = {0, spins > 5000 ? 1000000 : 20000};
            nanosleep(&ts, NULL);
        }
    }
    return TR_OK;
}

/* ---- collectives ---------------------------------------------------------- */

/* Rank s's elements of the range [ra, rb) of a buffer of n: unit 0 cuts the
 * range itself into world shards (tr_comm_shard of rb - ra, from ra); unit
 * > 0 keeps the units layout of the whole buffer (ZeRO-1: each element's
 * owner is its global shard's). */
static void owned(size_t n, size_t unit, int world, int s, size_t ra, size_t rb, size_t *lo, size_t *hi) {
    if (unit == 0) {
        tr_comm_shard(rb - ra, world, s, lo, hi);
        *lo += ra;
        *hi += ra;
        return;
    }
    tr_comm_shard_units(n, unit, world, s, lo, hi);
    if (*lo < ra) *lo = ra;
    if (*hi > rb) *hi = rb;
    if (*hi < *lo) *hi = *lo;
}

/* Piece k of rank s's part of the range: [lo_s + k*chunk, min(hi_s, lo_s + (k+1)*chunk)). */
static void piece_r(size_t n, size_t unit, int world, int s, size_t ra, size_t rb, size_t k, size_t chunk, size_t *a,
                    size_t *len) {
    size_t lo, hi;
    owned(n, unit, world, s, ra, rb, &lo, &hi);
    size_t off = k * chunk;
    if (off >= hi - lo) {
        *a = hi;
        *len = 0;
        return;
    }
    *a = lo + off;
    *len = hi - lo - off < chunk ? hi - lo - off : chunk;
}

static void piece(size_t n, size_t unit, int world, int s, size_t k, size_t chunk, size_t *a, size_t *len) {
    piece_r(n, unit, world, s, 0, n, k, chunk, a, len);
}

/* Rounds of `chunk` elements that cover the longest part of the range. */
static size_t rounds_range(size_t n, size_t unit, int W, size_t ra, size_t rb, size_t chunk) {
    size_t most = 0;
    for (int r = 0; r < W; r++) {
        size_t lo, hi;
        owned(n, unit, W, r, ra, rb, &lo, &hi);
        if (hi - lo > most) most = hi - lo;
    }
    return (most + chunk - 1) / chunk;
}

/* Rounds of `chunk` elements that cover the longest shard. */
static size_t rounds_of(size_t n, size_t unit, int W, size_t chunk) {
    size_t most = 0;
    for (int r = 0; r < W; r++) {
        size_t lo, hi;
        tr_comm_shard_units(n, unit, W, r, &lo, &hi);
        if (hi - lo > most) most = hi - lo;
    }
    return (most + chunk - 1) / chunk;
}

static int mpi_reduce_range(tr_comm *c, float *buf, size_t n, size_t unit, size_t ra, size_t rb, int gather) {
    const char *what = gather ? "all-reduce" : "reduce-scatter";
    int W = c->world, me = c->rank;
    size_t chunk = c->bucket / (size_t)W;
    size_t rounds = rounds_range(n, unit, W, ra, rb, chunk);
    int tag = next_tag(c), rc = TR_OK;
    for (size_t k = 0; k < rounds && !rc; k++) {
        size_t ma, ml;
        piece_r(n, unit, W, me, ra, rb, k, chunk, &ma, &ml);
        for (int p = 0; p < W && !rc; p++) {
            if (p == me) continue;
            size_t a, l;
            piece_r(n, unit, W, p, ra, rb, k, chunk, &a, &l);
            if (ml) rc = post(c, 0, c->scratch + (size_t)p * chunk, ml, MPI_FLOAT, p, tag, what);
            if (!rc && l) rc = post(c, 1, buf + a, l, MPI_FLOAT, p, tag, what);
        }
        if (!rc) rc = wait_all(c, what);
        if (rc) break;
        /* the owner folds its piece in rank order: ((x_0 + x_1) + x_2) ... */
        float *dst = buf + ma;
        for (size_t i = 0; i < ml; i++) {
            float v = me == 0 ? dst[i] : c->scratch[i];
            for (int r = 1; r < W; r++) v += r == me ? dst[i] : c->scratch[(size_t)r * chunk + i];
            dst[i] = v;
        }
        if (!gather) continue;
        for (int p = 0; p < W && !rc; p++) {
            if (p == me) continue;
            size_t a, l;
            piece_r(n, unit, W, p, ra, rb, k, chunk, &a, &l);
            if (l) rc = post(c, 0, buf + a, l, MPI_FLOAT, p, tag, what);
            if (!rc && ml) rc = post(c, 1, dst, ml, MPI_FLOAT, p, tag, what);
        }
        if (!rc) rc = wait_all(c, what);
    }
    return rc;
}

static int mpi_allgather(tr_comm *c, float *buf, size_t n, size_t unit) {
    const char *what = "all-gather";
    int W = c->world, me = c->rank;
    size_t chunk = c->bucket; /* no staging: messages land in buf */
    size_t rounds = rounds_of(n, unit, W, chunk);
    int tag = next_tag(c), rc = TR_OK;
    for (size_t k = 0; k < rounds && !rc; k++) {
        size_t ma, ml;
        piece(n, unit, W, me, k, chunk, &ma, &ml);
        for (int p = 0; p < W && !rc; p++) {
            if (p == me) continue;
            size_t a, l;
            piece(n, unit, W, p, k, chunk, &a, &l);
            if (l) rc = post(c, 0, buf + a, l, MPI_FLOAT, p, tag, what);
            if (!rc && ml) rc = post(c, 1, buf + ma, ml, MPI_FLOAT, p, tag, what);
        }
        if (!rc) rc = wait_all(c, what);
    }
    return rc;
}

static int mpi_allgather_bytes(tr_comm *c, const void *mine, void *all, size_t bytes, const char *what) {
    int W = c->world, me = c->rank;
    static char dummy[1]; /* the barrier's empty messages */
    int tag = next_tag(c), rc = TR_OK;
    char *out = bytes ? all : dummy;
    char *src = bytes ? (char *)(uintptr_t)mine : dummy;
    for (int p = 0; p < W && !rc; p++) {
        if (p == me) continue;
        rc = post(c, 0, bytes ? out + (size_t)p * bytes : dummy, bytes, MPI_BYTE, p, tag, what);
        if (!rc) rc = post(c, 1, src, bytes, MPI_BYTE, p, tag, what);
    }
    if (!rc) rc = wait_all(c, what);
    if (!rc && bytes) memmove(out + (size_t)me * bytes, mine, bytes);
    return rc;
}

static int mpi_bcast(tr_comm *c, void *buf, size_t bytes, int root) {
    const char *what = "broadcast";
    int W = c->world, me = c->rank;
    const size_t chunk = (size_t)1 << 30;
    int tag = next_tag(c), rc = TR_OK;
    for (size_t off = 0; off < bytes && !rc; off += chunk) {
        size_t l = bytes - off < chunk ? bytes - off : chunk;
        char *p0 = (char *)buf + off;
        if (me == root) {
            for (int p = 0; p < W && !rc; p++)
                if (p != me) rc = post(c, 1, p0, l, MPI_BYTE, p, tag, what);
        } else {
            rc = post(c, 0, p0, l, MPI_BYTE, root, tag, what);
        }
        if (!rc) rc = wait_all(c, what);
    }
    return rc;
}

/* Point-to-point (checkpoint shards): a fixed tag outside the collectives'
 * 1..30000, so ranks that make different numbers of these calls keep their
 * collective tags in step (MPI keeps the order of messages between two
 * ranks on one tag). Pieces of c->bucket floats, each against the deadline. */
#define P2P_TAG 30001

static int mpi_p2p(tr_comm *c, int is_send, float *buf, size_t n, int peer) {
    const char *what = is_send ? "send" : "receive";
    int rc = TR_OK;
    for (size_t off = 0; off < n && !rc; off += c->bucket) {
        size_t l = n - off < c->bucket ? n - off : c->bucket;
        rc = post(c, is_send, buf + off, l, MPI_FLOAT, peer, P2P_TAG, what);
        if (!rc) rc = wait_all(c, what);
    }
    return rc;
}

/* MPI_Init reads the launcher's variables: started by one, MPI joins its world. */
static int mpi_detect(void) { return tr_launch_detected(); }

const tr_comm_engine tr_comm_engine_mpi = {
    .name = "mpi",
    .device = 0,
    .detect = mpi_detect,
    .open = mpi_open,
    .close = mpi_close,
    .abort = mpi_abort,
    .exit_agree = mpi_exit_agree,
    .reduce_range = mpi_reduce_range,
    .allgather = mpi_allgather,
    .p2p = mpi_p2p,
    .allgather_bytes = mpi_allgather_bytes,
    .bcast = mpi_bcast,
};
