/* record_batch.h - the pieces shared by the batch readers of `encode` and
 * `build`: reading one record with a uniform error message, and appending
 * document text to a growing batch arena. */
#ifndef MKSHARDS_RECORD_BATCH_H
#define MKSHARDS_RECORD_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "ds.h"

/* 1: a record; 0: end of all inputs; -1: fatal reader error, message in err. */
int batch_next_record(ds_reader *rd, ds_record *rec, char *err, size_t errlen);

/* Append n bytes at *used (growing *arena by doubling from 1 MiB); *used
 * advances. 0 ok, -1 out of memory (nothing changed). */
int batch_arena_append(uint8_t **arena, size_t *cap, size_t *used, const void *p, size_t n);

#endif
