/* fuzz_shard.c - libFuzzer target for the shard reader: ds_shard_open (cheap
 * and VERIFY), ds_shard_read(_msg) of every row (its metadata and id checks
 * with their messages), ds_shard_row_starts and
 * ds_shard_verify on arbitrary bytes as a file. The first input byte picks
 * which checksums the harness recomputes before opening (bit 0: header,
 * bit 1: block table + payload), so the fuzzer reaches the structural checks
 * behind them; the rest is the file. Seeds: hostile_shards_gen corpus-shard. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hostile_shards_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint8_t mode = data[0];
    data++, size--;
    uint8_t *img = malloc(size ? size : 1);
    if (!img) return 0;
    memcpy(img, data, size);
    if (size >= DS_SHARD_HEADER_BYTES) {
        if (mode & 2) hs_fix_payload(img, size);
        else if (mode & 1) hs_fix_header(img);
    }
    int fd = memfd_create("fuzz_shard", 0);
    if (fd < 0) {
        free(img);
        return 0;
    }
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(fd, img + off, size - off);
        if (w <= 0) break;
        off += (size_t)w;
    }
    free(img);
    char path[64], err[512];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    for (int flags = 0; flags <= DS_SHARD_OPEN_VERIFY; flags += DS_SHARD_OPEN_VERIFY) {
        ds_shard *s = NULL;
        if (ds_shard_open(path, flags, &s, err, sizeof err) != DS_OK) continue;
        const ds_shard_header *h = ds_shard_get_header(s);
        /* caller buffers hold row_len entries; rows exist only if the file holds them */
        uint32_t L = h->row_len;
        uint32_t *buf = h->n_rows ? malloc((size_t)L * 4 * 4) : NULL;
        uint8_t *mask = h->n_rows ? malloc(L) : NULL;
        for (uint64_t r = 0; buf && mask && r < h->n_rows; r++) {
            uint32_t nv = 0, ns = 0;
            ds_shard_read_msg(s, r, buf, buf + L, buf + 2 * (size_t)L, mask, &nv, err, sizeof err);
            ds_shard_row_starts(s, r, buf + 3 * (size_t)L, &ns);
        }
        ds_shard_read(s, h->n_rows, NULL, NULL, NULL, NULL, NULL); /* out of range */
        free(buf), free(mask);
        ds_shard_close(s);
    }
    uint64_t xx = 0;
    ds_shard_verify(path, &xx, err, sizeof err);
    close(fd);
    return 0;
}
