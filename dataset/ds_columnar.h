/* ds_columnar.h - Parquet and Arrow IPC inputs (issue 29; docs/reader.md):
 * whether this build reads them, and how much memory Arrow took for them.
 * The readers (ds_reader, hence ds_build, ds_analyze, ds_encode) read
 * .parquet / .arrow row group by row group / record batch by record batch
 * through Apache Arrow (dataset/arrow_reader.cpp); a build without Arrow
 * (MKS_ENABLE_ARROW=OFF or not found) refuses them with DS_ERR_FORMAT. */
#ifndef MKS_DS_COLUMNAR_H
#define MKS_DS_COLUMNAR_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* "Arrow X.Y.Z" when this build reads .parquet / .arrow, NULL when it
 * refuses them. */
const char *ds_columnar_support(void);

/* Totals over every Parquet / Arrow IPC file this process has finished
 * reading (all readers, all threads): Arrow holds one row group's text
 * column (or one record batch) at a time, and these say how much that was. */
typedef struct {
    uint64_t files;               /* .parquet / .arrow files read */
    uint64_t pieces;              /* row groups / record batches in them */
    uint64_t largest_piece_bytes; /* most bytes Arrow held while one piece was loaded */
    uint64_t peak_bytes;          /* most bytes Arrow held for one file (its metadata included) */
} ds_columnar_stats;
void ds_columnar_stats_get(ds_columnar_stats *out);

/* 1 when the file r reads next (or is reading) is Parquet / Arrow IPC:
 * the pipeline fills its first batches smaller for such input (pipeline.c,
 * batch_cap). */
typedef struct ds_reader ds_reader;
int ds_reader_columnar(const ds_reader *r);

#ifdef __cplusplus
}
#endif
#endif
