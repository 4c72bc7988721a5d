/* fuzz_ckpt.c - libFuzzer target for the checkpoint reader (train/ckpt.c):
 * arbitrary bytes as ckpt.bin. The bytes go to a memfd opened through
 * /proc/self/fd/N; the header is read alone first (what tr_train does), then,
 * when it names 3 sections, a full load into sections of a fixed small size
 * (never sized from the header: the reader must refuse any other size). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_ckpt.h"
#include "tr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int fd = memfd_create("ckpt", MFD_CLOEXEC);
    if (fd < 0) return 0;
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(fd, data + off, size - off);
        if (w <= 0) {
            close(fd);
            return 0;
        }
        off += (size_t)w;
    }
    char path[64], err[1024];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    tr_ckpt_meta m;
    if (tr_ckpt_load_path(path, &m, NULL, 0, err, sizeof err) == TR_OK && m.n_sections == 3) {
        static float p[FUZZ_CKPT_PARAMS], am[FUZZ_CKPT_PARAMS], av[FUZZ_CKPT_PARAMS];
        tr_ckpt_section sec[3] = {{"params", p, sizeof p}, {"adam_m", am, sizeof am}, {"adam_v", av, sizeof av}};
        (void)tr_ckpt_load_path(path, &m, sec, 3, err, sizeof err);
    }
    close(fd);
    return 0;
}
