/* source.c - records from a ds_source callback (ds.h) instead of files: the
 * pipeline's reader stage (pipeline.c) calls ds_source_next_record where it
 * would call ds_reader_next. Items are numbered like JSONL lines so that
 * reports and rejects read "<name>:N" for the Nth item. */
#include <stdio.h>
#include <string.h>

#include "ds_internal.h"
#include "pipeline_internal.h"

#define SOURCE_MAX_RECORD ((size_t)256 << 20) /* the reader's default (reader.c DS_DEFAULT_MAX_RECORD) */

int ds_source_next_record(const ds_source *s, uint64_t *index, size_t max_record_bytes, ds_record *rec, char *err,
                          size_t errlen) {
    ds_source_item it;
    memset(&it, 0, sizeof it);
    memset(rec, 0, sizeof *rec);
    if (err && errlen) err[0] = 0;
    int r = s->next(s->user, &it, err, errlen);
    if (r <= 0) {
        if (r < 0 && err && errlen && !err[0]) snprintf(err, errlen, "%s: %s", s->name, ds_strerror(r));
        return r;
    }
    if (!max_record_bytes) max_record_bytes = SOURCE_MAX_RECORD;
    rec->file = s->name;
    rec->index = *index;
    rec->line = ++*index;
    rec->offset = 0; /* items have no byte position */
    rec->flags = it.flags;
    rec->detail = it.detail;
    switch (it.status) {
    case DS_REC_OK:
        rec->record_bytes = it.len;
        if (it.len > max_record_bytes) { /* as an over-long JSONL line: measured, reported, no text */
            rec->status = DS_REC_OVERLONG;
            rec->detail = NULL;
            return 1;
        }
        rec->status = DS_REC_OK;
        rec->text = it.text ? it.text : (const uint8_t *)"";
        rec->len = it.len;
        return 1;
    case DS_REC_MISSING_FIELD:
    case DS_REC_NOT_STRING: rec->status = it.status; return 1;
    default:
        if (err && errlen) snprintf(err, errlen, "%s: the source gave an item with status %d", s->name, (int)it.status);
        return DS_ERR_INTERNAL;
    }
}
