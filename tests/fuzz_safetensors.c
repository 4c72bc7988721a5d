/* fuzz_safetensors.c - libFuzzer target for the safetensors reader
 * (train/safetensors.c): arbitrary bytes as a .safetensors file. The bytes
 * go to a memfd opened through /proc/self/fd/N (tr_st_open: size word,
 * header bound, header parser, tiling of the byte buffer); a file that opens
 * has each float tensor read back (tr_st_read_f32), bounded by the input's
 * size since the checks tie every tensor to bytes of the file. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int fd = memfd_create("st", MFD_CLOEXEC);
    if (fd < 0) return 0;
    for (size_t off = 0; off < size;) {
        ssize_t w = write(fd, data + off, size - off);
        if (w <= 0) {
            close(fd);
            return 0;
        }
        off += (size_t)w;
    }
    char path[64], err[1024];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    tr_st_file f;
    if (tr_st_open(path, &f, err, sizeof err) == 0) {
        for (size_t i = 0; i < f.n; i++) {
            const tr_st_tensor *t = tr_st_find(&f, f.t[i].name);
            if (t != &f.t[i]) __builtin_trap(); /* the table is sorted and names are unique */
            if (t->numel > size) continue;
            float *v = malloc((size_t)t->numel * sizeof *v + 1);
            if (v) (void)tr_st_read_f32(&f, t, v, t->numel, err, sizeof err);
            free(v);
        }
        (void)tr_st_meta(&f, "format");
        tr_st_close(&f);
    }
    close(fd);
    return 0;
}
