/* comm_shard.c - the arithmetic of a data-parallel split (comm.h): which
 * part of n items rank r of world owns, and the communication buffer the
 * planner counts. No communication here: the planner (plan.c) needs these,
 * and `mkshards plan` must not link the communicator or MPI. */
#include "comm.h"

#include <stddef.h>
#include <stdint.h>

uint64_t tr_comm_buffer_bytes(int world, size_t bucket) {
    if (world <= 1) return 0;
    return (uint64_t)bucket * sizeof(float);
}

size_t tr_comm_padded(size_t n, int world) {
    if (world < 1) world = 1;
    size_t w = (size_t)world, per = n / w + (n % w != 0);
    return per * w;
}

void tr_comm_shard(size_t n, int world, int r, size_t *lo, size_t *hi) {
    if (world < 1) world = 1;
    size_t per = n / (size_t)world + (n % (size_t)world != 0);
    size_t a = per * (size_t)r;
    if (r < 0 || (per && a / per != (size_t)r) || a > n) a = n;
    size_t b = n - a < per ? n : a + per;
    *lo = a;
    *hi = b;
}

void tr_comm_shard_units(size_t n, size_t unit, int world, int r, size_t *lo, size_t *hi) {
    if (unit == 0) {
        tr_comm_shard(n, world, r, lo, hi);
        return;
    }
    if (world < 1) world = 1;
    if (r < 0 || r >= world) {
        *lo = *hi = n;
        return;
    }
    unsigned __int128 U = n / unit + (n % unit != 0);
    unsigned __int128 u0 = U * (unsigned)r / (unsigned)world, u1 = U * (unsigned)(r + 1) / (unsigned)world;
    unsigned __int128 a = u0 * unit, b = u1 * unit;
    *lo = a > n ? n : (size_t)a;
    *hi = b > n ? n : (size_t)b;
}
