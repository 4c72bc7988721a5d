/* record_batch.c - see record_batch.h. */
#include "record_batch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int batch_next_record(ds_reader *rd, ds_record *rec, char *err, size_t errlen) {
    int r = ds_reader_next(rd, rec, err, errlen);
    if (r > 0) return 1;
    if (r == 0) return 0;
    if (!err[0]) snprintf(err, errlen, "%s", ds_strerror(r));
    return -1;
}

int batch_arena_append(uint8_t **arena, size_t *cap, size_t *used, const void *p, size_t n) {
    if (*used + n > *cap) {
        size_t nc = *cap ? *cap : (size_t)1 << 20;
        while (nc < *used + n) nc *= 2;
        uint8_t *na = realloc(*arena, nc);
        if (!na) return -1;
        *arena = na;
        *cap = nc;
    }
    if (n) memcpy(*arena + *used, p, n);
    *used += n;
    return 0;
}
