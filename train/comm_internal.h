/* comm_internal.h - the communicator object shared by comm_single.c (the
 * dispatch and the world-1 engine) and comm_mpi.c (the MPI engine, built
 * with MKS_HAVE_MPI). Not part of any public interface. */
#ifndef TR_COMM_INTERNAL_H
#define TR_COMM_INTERNAL_H

#include "comm.h"

struct tr_comm {
    int kind;
    int rank, world, local_rank, local_size;
    double timeout;       /* seconds per collective */
    size_t bucket;        /* elements per bucket of the float collectives */
    float *scratch;       /* receive buffer: bucket floats (world > 1) */
    uint64_t seq;         /* collectives issued (message tags) */
    int own_init;         /* tr_comm_open called MPI_Init */
    int serialized;       /* MPI provides MPI_THREAD_SERIALIZED (or more): another thread may drive it */
    void *mpi;            /* engine state (comm_mpi.c) */
    char err[1024];
};

#ifdef MKS_HAVE_MPI
int tr_comm_mpi_open(tr_comm *c, char *err, size_t errlen);
void tr_comm_mpi_close(tr_comm *c);
void tr_comm_mpi_abort(tr_comm *c, int code);
int tr_comm_mpi_exit_agree(tr_comm *c, int code, double timeout_s);
int tr_comm_mpi_reduce_scatter(tr_comm *c, float *buf, size_t n, size_t unit, int gather);
int tr_comm_mpi_reduce_range(tr_comm *c, float *buf, size_t n, size_t unit, size_t a, size_t b, int gather);
int tr_comm_mpi_p2p(tr_comm *c, int is_send, float *buf, size_t n, int peer);
int tr_comm_mpi_allgather(tr_comm *c, float *buf, size_t n, size_t unit);
int tr_comm_mpi_allgather_bytes(tr_comm *c, const void *mine, void *all, size_t bytes, const char *what);
int tr_comm_mpi_bcast(tr_comm *c, void *buf, size_t bytes, int root);
#endif

#endif
