/* fuzz_replay.c - runs every file of the committed fuzz corpus
 * (tests/data/fuzz/reader) through the fuzz target once: a plain regression
 * test that needs no clang/libFuzzer. Optional argv[1]: another folder. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : MKS_TEST_DATA "/fuzz/reader";
    DIR *d = opendir(dir);
    if (!d) {
        perror(dir);
        return 1;
    }
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        FILE *f = fopen(p, "rb");
        if (!f) continue;
        fseek(f, 0, SEEK_END);
        long sz = ftell(f);
        fseek(f, 0, SEEK_SET);
        uint8_t *buf = malloc(sz > 0 ? (size_t)sz : 1);
        size_t got = buf ? fread(buf, 1, (size_t)sz, f) : 0;
        fclose(f);
        if (!buf) return 1;
        LLVMFuzzerTestOneInput(buf, got);
        free(buf);
        n++;
    }
    closedir(d);
    printf("replayed %d inputs from %s\n", n, dir);
    return n > 0 ? 0 : 1;
}
