/* shard.c - token shard files: header codec, writer, mmap reader, verifier
 * and the shard-set (manifest) reader. Format: docs/shard-format.md. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include "ds.h"
#include "ds_internal.h"
#include "shard_internal.h"

uint64_t ds_xxh3(const void *data, size_t len) { return XXH3_64bits(data, len); }

/* ---------------------------------------------------------- LE helpers */
static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32; }

void ds_shard_hex(const uint8_t *b, size_t n, char *out) {
    static const char hx[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hx[b[i] >> 4];
        out[2 * i + 1] = hx[b[i] & 15];
    }
    out[2 * n] = 0;
}

int ds_shard_unhex(const char *hex, uint8_t *b, size_t n) {
    if (!hex || strlen(hex) != 2 * n) return -1;
    for (size_t i = 0; i < 2 * n; i++) {
        char c = hex[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0) return -1;
        if (i & 1) b[i / 2] |= (uint8_t)v;
        else b[i / 2] = (uint8_t)(v << 4);
    }
    return 0;
}

/* ---------------------------------------------------------- header */
/* Byte layout (docs/shard-format.md):
 *   0 magic[8]  8 version  12 header_bytes  16 dtype_bytes  20 flags  24 row_len
 *  28 vocab_size  32 pad_id  36 eot_id  40 frame_rows  44 reserved(0)
 *  48 n_rows  56 n_frames  64 n_starts  72 tokens_bytes  80 meta_bytes  88 n_blocks
 *  96 payload_xxh3  104 blocks_xxh3  112 fingerprint[32]  144..183 zero
 * 184 header_xxh3 (XXH3-64 of bytes 0..183) */
void ds_shard_header_encode(const ds_shard_header *h, uint8_t o[DS_SHARD_HEADER_BYTES]) {
    memset(o, 0, DS_SHARD_HEADER_BYTES);
    memcpy(o, DS_SHARD_MAGIC, 8);
    put32(o + 8, h->version);
    put32(o + 12, DS_SHARD_HEADER_BYTES);
    put32(o + 16, h->dtype_bytes);
    put32(o + 20, h->flags);
    put32(o + 24, h->row_len);
    put32(o + 28, h->vocab_size);
    put32(o + 32, h->pad_id);
    put32(o + 36, h->eot_id);
    put32(o + 40, h->frame_rows);
    put64(o + 48, h->n_rows);
    put64(o + 56, h->n_frames);
    put64(o + 64, h->n_starts);
    put64(o + 72, h->tokens_bytes);
    put64(o + 80, h->meta_bytes);
    put64(o + 88, h->n_blocks);
    put64(o + 96, h->payload_xxh3);
    put64(o + 104, h->blocks_xxh3);
    memcpy(o + 112, h->fingerprint, 32);
    put64(o + 184, XXH3_64bits(o, 184));
}

int ds_shard_header_decode(const uint8_t in[DS_SHARD_HEADER_BYTES], ds_shard_header *h, char *err,
                           size_t errlen) {
    memset(h, 0, sizeof *h);
    if (memcmp(in, DS_SHARD_MAGIC, 8) != 0) {
        ds_set_err(err, errlen, "offset 0: bad magic (not a mkshards shard)");
        return DS_ERR_FORMAT;
    }
    uint64_t hx = XXH3_64bits(in, 184);
    if (get64(in + 184) != hx) {
        ds_set_err(err, errlen, "offset 0-191: header checksum mismatch (header corrupt)");
        return DS_ERR_FORMAT;
    }
    h->version = get32(in + 8);
    if (h->version != DS_SHARD_VERSION || get32(in + 12) != DS_SHARD_HEADER_BYTES) {
        ds_set_err(err, errlen, "offset 8: unsupported shard version %u (this reader knows %u)", h->version,
                   DS_SHARD_VERSION);
        return DS_ERR_FORMAT;
    }
    h->dtype_bytes = get32(in + 16);
    h->flags = get32(in + 20);
    h->row_len = get32(in + 24);
    h->vocab_size = get32(in + 28);
    h->pad_id = get32(in + 32);
    h->eot_id = get32(in + 36);
    h->frame_rows = get32(in + 40);
    h->n_rows = get64(in + 48);
    h->n_frames = get64(in + 56);
    h->n_starts = get64(in + 64);
    h->tokens_bytes = get64(in + 72);
    h->meta_bytes = get64(in + 80);
    h->n_blocks = get64(in + 88);
    h->payload_xxh3 = get64(in + 96);
    h->blocks_xxh3 = get64(in + 104);
    memcpy(h->fingerprint, in + 112, 32);
    /* structural sanity (the checksum already guards against random damage) */
    int zstd = (h->flags & DS_SHARD_F_ZSTD) != 0;
    if ((h->dtype_bytes != 2 && h->dtype_bytes != 4) || h->row_len == 0 ||
        (h->dtype_bytes == 2 && h->vocab_size > 65536) || h->n_rows > (1ull << 40) ||
        h->n_starts > h->n_rows * (uint64_t)h->row_len || (zstd && h->frame_rows == 0) ||
        (zstd && h->n_frames != (h->n_rows + h->frame_rows - 1) / h->frame_rows) ||
        (!zstd && h->tokens_bytes != h->n_rows * h->row_len * (uint64_t)h->dtype_bytes) ||
        h->meta_bytes != 4 * (2 * h->n_rows + 1 + h->n_starts) + (zstd ? 8 * (h->n_frames + 1) : 0) ||
        h->n_blocks != (h->tokens_bytes + h->meta_bytes + DS_SHARD_BLOCK_BYTES - 1) / DS_SHARD_BLOCK_BYTES ||
        h->pad_id >= h->vocab_size) {
        ds_set_err(err, errlen, "offset 16-111: inconsistent header fields");
        return DS_ERR_FORMAT;
    }
    return DS_OK;
}

static uint64_t file_size_of(const ds_shard_header *h) {
    return DS_SHARD_HEADER_BYTES + h->tokens_bytes + h->meta_bytes + 8 * h->n_blocks;
}

/* ---------------------------------------------------------- writer */
void ds_shard_image_free(ds_shard_image *img) {
    free(img->data);
    img->data = NULL;
    img->len = 0;
}

int ds_shard_build_image(const ds_shard_header *hin, const uint32_t *rows, const uint32_t *perm,
                         const uint32_t *valid, const uint32_t *sidx, const uint32_t *starts, int zstd_level,
                         ds_shard_image *out, char *err, size_t errlen) {
    ds_shard_header h = *hin;
    h.version = DS_SHARD_VERSION;
    int zstd = (h.flags & DS_SHARD_F_ZSTD) != 0;
    uint64_t L = h.row_len, n = h.n_rows, dt = h.dtype_bytes;
    if (n * L >= (1ull << 32)) {
        ds_set_err(err, errlen, "a shard holds at most 2^32-1 tokens (use a smaller --shard-tokens)");
        return DS_ERR_ARG;
    }
    /* metadata in output row order */
    uint64_t n_starts = 0;
    for (uint64_t j = 0; j < n; j++) {
        uint64_t r = perm ? perm[j] : j;
        n_starts += sidx[r + 1] - sidx[r];
    }
    h.n_starts = n_starts;
    h.n_frames = zstd ? (n + h.frame_rows - 1) / h.frame_rows : 0;
    if (!zstd) h.frame_rows = 0;
    uint64_t raw_bytes = n * L * dt;
    uint64_t *foff = NULL;
    uint64_t tok_bytes = 0;
    size_t bound = 0;
    if (zstd) {
        bound = ZSTD_compressBound((size_t)(h.frame_rows * L * dt));
        tok_bytes = h.n_frames * bound; /* upper bound for the allocation */
        foff = malloc((h.n_frames + 1) * sizeof *foff);
        if (!foff) return DS_ERR_NOMEM;
    } else {
        tok_bytes = raw_bytes;
    }
    uint64_t meta_bytes = 4 * (2 * n + 1 + n_starts) + (zstd ? 8 * (h.n_frames + 1) : 0);
    uint64_t max_payload = tok_bytes + meta_bytes;
    uint64_t max_blocks = (max_payload + DS_SHARD_BLOCK_BYTES - 1) / DS_SHARD_BLOCK_BYTES;
    uint8_t *img = malloc((size_t)(DS_SHARD_HEADER_BYTES + max_payload + 8 * max_blocks));
    uint8_t *rawbuf = zstd ? malloc((size_t)(h.frame_rows * L * dt) + 1) : NULL;
    if (!img || (zstd && !rawbuf)) {
        free(img), free(rawbuf), free(foff);
        return DS_ERR_NOMEM;
    }
    /* tokens: gather rows through perm, convert to the dtype */
    uint8_t *tp = img + DS_SHARD_HEADER_BYTES;
    ZSTD_CCtx *cc = NULL;
    if (zstd) {
        cc = ZSTD_createCCtx();
        if (!cc) {
            free(img), free(rawbuf), free(foff);
            return DS_ERR_NOMEM;
        }
        ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, zstd_level);
        ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 0);
        ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 1);
    }
    uint64_t zused = 0;
    uint64_t fr = zstd ? h.frame_rows : (n ? n : 1);
    for (uint64_t r0 = 0, f = 0; r0 < n; r0 += fr, f++) {
        uint64_t r1 = r0 + fr < n ? r0 + fr : n;
        uint8_t *dst = zstd ? rawbuf : tp + r0 * L * dt;
        for (uint64_t j = r0; j < r1; j++) {
            const uint32_t *src = rows + (uint64_t)(perm ? perm[j] : j) * L;
            uint8_t *d = dst + (j - r0) * L * dt;
            if (dt == 2)
                for (uint64_t i = 0; i < L; i++) {
                    d[2 * i] = (uint8_t)src[i];
                    d[2 * i + 1] = (uint8_t)(src[i] >> 8);
                }
            else
                for (uint64_t i = 0; i < L; i++) put32(d + 4 * i, src[i]);
        }
        if (zstd) {
            foff[f] = zused;
            size_t z = ZSTD_compress2(cc, tp + zused, bound, rawbuf, (size_t)((r1 - r0) * L * dt));
            if (ZSTD_isError(z)) {
                ds_set_err(err, errlen, "zstd: %s", ZSTD_getErrorName(z));
                free(img), free(rawbuf), free(foff), ZSTD_freeCCtx(cc);
                return DS_ERR_INTERNAL;
            }
            zused += z;
        }
    }
    if (zstd) {
        foff[h.n_frames] = zused;
        tok_bytes = zused;
        ZSTD_freeCCtx(cc);
        free(rawbuf);
    }
    h.tokens_bytes = tok_bytes;
    h.meta_bytes = meta_bytes;
    uint64_t payload = tok_bytes + meta_bytes;
    h.n_blocks = (payload + DS_SHARD_BLOCK_BYTES - 1) / DS_SHARD_BLOCK_BYTES;
    size_t total = (size_t)(DS_SHARD_HEADER_BYTES + payload + 8 * h.n_blocks);
    uint8_t *p = img + DS_SHARD_HEADER_BYTES + tok_bytes;
    for (uint64_t j = 0; j < n; j++, p += 4) put32(p, valid[perm ? perm[j] : j]);
    uint64_t acc = 0;
    for (uint64_t j = 0; j < n; j++, p += 4) {
        put32(p, (uint32_t)acc);
        uint64_t r = perm ? perm[j] : j;
        acc += sidx[r + 1] - sidx[r];
    }
    put32(p, (uint32_t)acc);
    p += 4;
    for (uint64_t j = 0; j < n; j++) {
        uint64_t r = perm ? perm[j] : j;
        for (uint32_t k = sidx[r]; k < sidx[r + 1]; k++, p += 4) put32(p, starts[k]);
    }
    if (zstd)
        for (uint64_t i = 0; i <= h.n_frames; i++, p += 8) put64(p, foff[i]);
    free(foff);
    const uint8_t *pay = img + DS_SHARD_HEADER_BYTES;
    for (uint64_t b = 0; b < h.n_blocks; b++, p += 8) {
        uint64_t o = b * DS_SHARD_BLOCK_BYTES;
        uint64_t l = payload - o < DS_SHARD_BLOCK_BYTES ? payload - o : DS_SHARD_BLOCK_BYTES;
        put64(p, XXH3_64bits(pay + o, (size_t)l));
    }
    h.payload_xxh3 = XXH3_64bits(pay, (size_t)payload);
    h.blocks_xxh3 = XXH3_64bits(pay + payload, (size_t)(8 * h.n_blocks));
    ds_shard_header_encode(&h, img);
    out->data = img;
    out->len = total;
    out->file_xxh3 = XXH3_64bits(img, total);
    return DS_OK;
}

static int fsync_dir_of(const char *path) {
    char *d = strdup(path);
    if (!d) return -1;
    int fd = open(dirname(d), O_RDONLY | O_DIRECTORY);
    free(d);
    if (fd < 0) return -1;
    int r = fsync(fd);
    close(fd);
    return r;
}

static int same_file_content(const char *path, const void *data, size_t len) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    struct stat st;
    int same = 0;
    if (fstat(fd, &st) == 0 && (uint64_t)st.st_size == len) {
        if (len == 0) same = 1;
        else {
            void *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
            if (m != MAP_FAILED) {
                same = memcmp(m, data, len) == 0;
                munmap(m, len);
            }
        }
    }
    close(fd);
    return same;
}

int ds_write_file_atomic(const char *path, const void *data, size_t len, int *skipped, char *err,
                         size_t errlen) {
    if (skipped) *skipped = 0;
    if (same_file_content(path, data, len)) {
        if (skipped) *skipped = 1;
        return DS_OK;
    }
    size_t pl = strlen(path);
    char *tmp = malloc(pl + 5);
    if (!tmp) return DS_ERR_NOMEM;
    memcpy(tmp, path, pl);
    memcpy(tmp + pl, ".tmp", 5);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        ds_set_err(err, errlen, "cannot create '%s': %s", tmp, strerror(errno));
        free(tmp);
        return DS_ERR_IO;
    }
    const uint8_t *p = data;
    size_t left = len;
    while (left) {
        ssize_t w = write(fd, p, left > (1u << 30) ? (1u << 30) : left);
        if (w < 0) {
            if (errno == EINTR) continue;
            ds_set_err(err, errlen, "cannot write '%s': %s", tmp, strerror(errno));
            close(fd);
            unlink(tmp);
            free(tmp);
            return DS_ERR_IO;
        }
        p += w;
        left -= (size_t)w;
    }
    if (fsync(fd) != 0 || close(fd) != 0) {
        ds_set_err(err, errlen, "cannot sync '%s': %s", tmp, strerror(errno));
        unlink(tmp);
        free(tmp);
        return DS_ERR_IO;
    }
    if (rename(tmp, path) != 0) {
        ds_set_err(err, errlen, "cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
        unlink(tmp);
        free(tmp);
        return DS_ERR_IO;
    }
    free(tmp);
    fsync_dir_of(path);
    return DS_OK;
}

/* ---------------------------------------------------------- reader */
struct ds_shard {
    ds_shard_header h;
    const uint8_t *map;
    size_t map_len;
    const uint8_t *tok;   /* token section */
    const uint8_t *valid; /* u32[n_rows] */
    const uint8_t *sidx;  /* u32[n_rows+1] */
    const uint8_t *starts;/* u32[n_starts] */
    const uint8_t *foff;  /* u64[n_frames+1] (zstd) */
    char *path;
};

const ds_shard_header *ds_shard_get_header(const ds_shard *s) { return &s->h; }

void ds_shard_close(ds_shard *s) {
    if (!s) return;
    if (s->map) munmap((void *)s->map, s->map_len);
    free(s->path);
    free(s);
}

static int check_blocks(const ds_shard_header *h, const uint8_t *map, char *err, size_t errlen) {
    const uint8_t *pay = map + DS_SHARD_HEADER_BYTES;
    uint64_t payload = h->tokens_bytes + h->meta_bytes;
    const uint8_t *tab = pay + payload;
    if (XXH3_64bits(tab, (size_t)(8 * h->n_blocks)) != h->blocks_xxh3) {
        ds_set_err(err, errlen, "offset %" PRIu64 "-%" PRIu64 ": block checksum table corrupt",
                   (uint64_t)DS_SHARD_HEADER_BYTES + payload,
                   (uint64_t)DS_SHARD_HEADER_BYTES + payload + 8 * h->n_blocks - 1);
        return DS_ERR_FORMAT;
    }
    for (uint64_t b = 0; b < h->n_blocks; b++) {
        uint64_t o = b * DS_SHARD_BLOCK_BYTES;
        uint64_t l = payload - o < DS_SHARD_BLOCK_BYTES ? payload - o : DS_SHARD_BLOCK_BYTES;
        if (XXH3_64bits(pay + o, (size_t)l) != get64(tab + 8 * b)) {
            ds_set_err(err, errlen, "offset %" PRIu64 "-%" PRIu64 ": checksum mismatch (%s section)",
                       DS_SHARD_HEADER_BYTES + o, DS_SHARD_HEADER_BYTES + o + l - 1,
                       o < h->tokens_bytes ? "token" : "row-metadata");
            return DS_ERR_FORMAT;
        }
    }
    if (XXH3_64bits(pay, (size_t)payload) != h->payload_xxh3) {
        ds_set_err(err, errlen, "offset %u-%" PRIu64 ": payload checksum mismatch", DS_SHARD_HEADER_BYTES,
                   DS_SHARD_HEADER_BYTES + payload - 1);
        return DS_ERR_FORMAT;
    }
    return DS_OK;
}

int ds_shard_open(const char *path, int flags, ds_shard **out, char *err, size_t errlen) {
    *out = NULL;
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        ds_set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return DS_ERR_IO;
    }
    struct stat st;
    uint8_t hb[DS_SHARD_HEADER_BYTES];
    if (fstat(fd, &st) != 0 || st.st_size < (off_t)DS_SHARD_HEADER_BYTES ||
        pread(fd, hb, sizeof hb, 0) != (ssize_t)sizeof hb) {
        ds_set_err(err, errlen, "%s: offset 0: file too short for a shard header (%lld bytes)", path,
                   (long long)st.st_size);
        close(fd);
        return DS_ERR_FORMAT;
    }
    ds_shard *s = calloc(1, sizeof *s);
    if (!s) {
        close(fd);
        return DS_ERR_NOMEM;
    }
    char e2[256];
    int rc = ds_shard_header_decode(hb, &s->h, e2, sizeof e2);
    if (rc != DS_OK) {
        ds_set_err(err, errlen, "%s: %s", path, e2);
        close(fd);
        free(s);
        return rc;
    }
    uint64_t want = file_size_of(&s->h);
    if ((uint64_t)st.st_size != want) {
        ds_set_err(err, errlen, "%s: offset %" PRIu64 ": file size %lld, header says %" PRIu64 " (%s)", path,
                   (uint64_t)st.st_size < want ? (uint64_t)st.st_size : want, (long long)st.st_size, want,
                   (uint64_t)st.st_size < want ? "truncated" : "trailing bytes");
        close(fd);
        free(s);
        return DS_ERR_FORMAT;
    }
    s->map_len = (size_t)want;
    void *m = mmap(NULL, s->map_len, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        ds_set_err(err, errlen, "%s: mmap failed: %s", path, strerror(errno));
        free(s);
        return DS_ERR_IO;
    }
    s->map = m;
    s->path = strdup(path);
    s->tok = s->map + DS_SHARD_HEADER_BYTES;
    s->valid = s->tok + s->h.tokens_bytes;
    s->sidx = s->valid + 4 * s->h.n_rows;
    s->starts = s->sidx + 4 * (s->h.n_rows + 1);
    s->foff = s->starts + 4 * s->h.n_starts;
    if (flags & DS_SHARD_OPEN_VERIFY) {
        rc = check_blocks(&s->h, s->map, e2, sizeof e2);
        if (rc != DS_OK) {
            ds_set_err(err, errlen, "%s: %s", path, e2);
            ds_shard_close(s);
            return rc;
        }
    }
    *out = s;
    return DS_OK;
}

int ds_shard_read(const ds_shard *s, uint64_t row, uint32_t *tokens, uint32_t *pos_ids, uint32_t *doc_ids,
                  uint8_t *loss_mask, uint32_t *n_valid) {
    const ds_shard_header *h = &s->h;
    if (row >= h->n_rows) return DS_ERR_ARG;
    uint32_t L = h->row_len, dt = h->dtype_bytes;
    uint32_t nv = get32(s->valid + 4 * row);
    uint32_t a = get32(s->sidx + 4 * row), b = get32(s->sidx + 4 * (row + 1));
    if (nv > L || a > b || b > h->n_starts) return DS_ERR_FORMAT;
    if (n_valid) *n_valid = nv;
    if (tokens) {
        const uint8_t *src;
        uint8_t *frame = NULL;
        if (h->flags & DS_SHARD_F_ZSTD) {
            uint64_t f = row / h->frame_rows, r0 = f * h->frame_rows;
            uint64_t rows_in = h->n_rows - r0 < h->frame_rows ? h->n_rows - r0 : h->frame_rows;
            uint64_t o0 = get64(s->foff + 8 * f), o1 = get64(s->foff + 8 * (f + 1));
            if (o0 > o1 || o1 > h->tokens_bytes) return DS_ERR_FORMAT;
            size_t fb = (size_t)(rows_in * L * dt);
            frame = malloc(fb ? fb : 1);
            if (!frame) return DS_ERR_NOMEM;
            size_t z = ZSTD_decompress(frame, fb, s->tok + o0, (size_t)(o1 - o0));
            if (ZSTD_isError(z) || z != fb) {
                free(frame);
                return DS_ERR_FORMAT;
            }
            src = frame + (row - r0) * L * dt;
        } else {
            src = s->tok + row * (uint64_t)L * dt;
        }
        if (dt == 2)
            for (uint32_t i = 0; i < L; i++) tokens[i] = (uint32_t)src[2 * i] | (uint32_t)src[2 * i + 1] << 8;
        else
            for (uint32_t i = 0; i < L; i++) tokens[i] = get32(src + 4 * i);
        free(frame);
    }
    if (pos_ids || doc_ids) {
        uint32_t seg = 0, seg_start = 0, k = a;
        for (uint32_t i = 0; i < L; i++) {
            if (i == nv) {
                if (i > 0) seg++;
                seg_start = i;
            } else if (i < nv && k < b && get32(s->starts + 4 * k) == i) {
                if (i > 0) seg++;
                seg_start = i;
                k++;
            }
            if (pos_ids) pos_ids[i] = i - seg_start;
            if (doc_ids) doc_ids[i] = seg;
        }
    }
    if (loss_mask)
        for (uint32_t i = 0; i < L; i++) loss_mask[i] = i < nv;
    return DS_OK;
}

/* ---------------------------------------------------------- verify */
int ds_shard_verify(const char *path, uint64_t *file_xxh3, char *err, size_t errlen) {
    ds_shard *s = NULL;
    int rc = ds_shard_open(path, 0, &s, err, errlen);
    if (rc != DS_OK) return rc;
    char e2[256];
    if (file_xxh3) *file_xxh3 = XXH3_64bits(s->map, s->map_len);
    rc = check_blocks(&s->h, s->map, e2, sizeof e2);
    if (rc != DS_OK) {
        ds_set_err(err, errlen, "%s: %s", path, e2);
        ds_shard_close(s);
        return rc;
    }
    /* metadata invariants */
    const ds_shard_header *h = &s->h;
    uint64_t meta0 = DS_SHARD_HEADER_BYTES + h->tokens_bytes;
    uint32_t L = h->row_len;
    uint32_t *row = malloc((size_t)L * sizeof *row);
    if (!row) {
        ds_shard_close(s);
        return DS_ERR_NOMEM;
    }
    if (get32(s->sidx) != 0 || get32(s->sidx + 4 * h->n_rows) != h->n_starts) {
        ds_set_err(err, errlen, "%s: offset %" PRIu64 ": document-start index does not span the table", path,
                   meta0 + 4 * h->n_rows);
        rc = DS_ERR_FORMAT;
    }
    if (rc == DS_OK && (h->flags & DS_SHARD_F_ZSTD)) {
        uint64_t prev = 0;
        for (uint64_t f = 0; f <= h->n_frames && rc == DS_OK; f++) {
            uint64_t o = get64(s->foff + 8 * f);
            if (o < prev || o > h->tokens_bytes || (f == 0 && o != 0) || (f == h->n_frames && o != h->tokens_bytes)) {
                ds_set_err(err, errlen, "%s: offset %" PRIu64 ": bad zstd frame offset", path,
                           (uint64_t)(s->foff - s->map) + 8 * f);
                rc = DS_ERR_FORMAT;
            }
            prev = o;
        }
    }
    for (uint64_t r = 0; r < h->n_rows && rc == DS_OK; r++) {
        uint32_t nv = get32(s->valid + 4 * r);
        uint32_t a = get32(s->sidx + 4 * r), b = get32(s->sidx + 4 * (r + 1));
        if (nv > L) {
            ds_set_err(err, errlen, "%s: offset %" PRIu64 ": row %" PRIu64 " claims %u valid tokens > row length %u",
                       path, meta0 + 4 * r, r, nv, L);
            rc = DS_ERR_FORMAT;
            break;
        }
        if (a > b || b > h->n_starts) {
            ds_set_err(err, errlen, "%s: offset %" PRIu64 ": row %" PRIu64 " document-start index out of order", path,
                       meta0 + 4 * (h->n_rows + r + 1), r);
            rc = DS_ERR_FORMAT;
            break;
        }
        for (uint32_t k = a; k < b; k++) {
            uint32_t p = get32(s->starts + 4 * k);
            if (p >= nv || (k > a && p <= get32(s->starts + 4 * (k - 1)))) {
                ds_set_err(err, errlen, "%s: offset %" PRIu64 ": row %" PRIu64 " document start %u invalid", path,
                           meta0 + 4 * (2 * h->n_rows + 1 + k), r, p);
                rc = DS_ERR_FORMAT;
                break;
            }
        }
        if (rc != DS_OK) break;
        int r2 = ds_shard_read(s, r, row, NULL, NULL, NULL, NULL);
        if (r2 != DS_OK) {
            ds_set_err(err, errlen, "%s: row %" PRIu64 ": zstd frame %" PRIu64 " does not decode (offset %" PRIu64 ")",
                       path, r, h->frame_rows ? r / h->frame_rows : 0,
                       h->frame_rows ? DS_SHARD_HEADER_BYTES + get64(s->foff + 8 * (r / h->frame_rows)) : 0);
            rc = DS_ERR_FORMAT;
            break;
        }
        for (uint32_t i = 0; i < L; i++) {
            int bad = row[i] >= h->vocab_size || (i >= nv && row[i] != h->pad_id);
            if (bad) {
                uint64_t off = (h->flags & DS_SHARD_F_ZSTD)
                                   ? 0
                                   : DS_SHARD_HEADER_BYTES + (r * L + i) * (uint64_t)h->dtype_bytes;
                if (off)
                    ds_set_err(err, errlen, "%s: offset %" PRIu64 ": row %" PRIu64 " position %u: %s %u", path, off, r,
                               i, row[i] >= h->vocab_size ? "token id >= vocab size," : "padding is not the pad id, got",
                               row[i]);
                else
                    ds_set_err(err, errlen, "%s: row %" PRIu64 " position %u (compressed): %s %u", path, r, i,
                               row[i] >= h->vocab_size ? "token id >= vocab size," : "padding is not the pad id, got",
                               row[i]);
                rc = DS_ERR_FORMAT;
                break;
            }
        }
    }
    free(row);
    ds_shard_close(s);
    return rc;
}

/* ---------------------------------------------------------- shard set */
typedef struct {
    ds_shard *sh;
    char *path;
    uint64_t first_row; /* prefix within the split */
} set_entry;

struct ds_shardset {
    ds_shardset_info info;
    set_entry *e[2];
    size_t n[2];
};

void ds_shardset_close(ds_shardset *s) {
    if (!s) return;
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; i < s->n[k]; i++) {
            ds_shard_close(s->e[k][i].sh);
            free(s->e[k][i].path);
        }
        free(s->e[k]);
    }
    free(s);
}

int ds_shardset_open(const char *dir, int flags, ds_shardset **out, char *err, size_t errlen) {
    *out = NULL;
    size_t dl = strlen(dir);
    char *mpath = malloc(dl + 32);
    if (!mpath) return DS_ERR_NOMEM;
    snprintf(mpath, dl + 32, "%s/manifest.json", dir);
    json_error_t je;
    json_t *root = json_load_file(mpath, 0, &je);
    if (!root) {
        ds_set_err(err, errlen, "%s: %s (line %d)", mpath, je.text, je.line);
        int exists = access(mpath, R_OK) == 0;
        free(mpath);
        return exists ? DS_ERR_FORMAT : DS_ERR_IO;
    }
    ds_shardset *s = calloc(1, sizeof *s);
    int rc = DS_OK;
    if (!s) {
        rc = DS_ERR_NOMEM;
        goto fail;
    }
    json_t *tk = json_object_get(root, "tokenizer");
    json_t *shards = json_object_get(root, "shards");
    const char *fp = json_string_value(json_object_get(tk, "fingerprint"));
    if (strcmp(json_string_value(json_object_get(root, "format")) ? json_string_value(json_object_get(root, "format")) : "",
               "mkshards-manifest") != 0 ||
        !json_is_array(shards) || !fp || ds_shard_unhex(fp, s->info.fingerprint, 32) != 0) {
        ds_set_err(err, errlen, "%s: not a mkshards manifest (format, tokenizer.fingerprint or shards missing)", mpath);
        rc = DS_ERR_FORMAT;
        goto fail;
    }
    const char *tname = json_string_value(json_object_get(tk, "name"));
    snprintf(s->info.tokenizer, sizeof s->info.tokenizer, "%s", tname ? tname : "?");
    s->info.row_len = (uint32_t)json_integer_value(json_object_get(root, "seq_len"));
    s->info.vocab_size = (uint32_t)json_integer_value(json_object_get(tk, "vocab_size"));
    s->info.eot_id = (uint32_t)json_integer_value(json_object_get(tk, "eot_id"));
    size_t ns = json_array_size(shards);
    for (int k = 0; k < 2; k++) {
        s->e[k] = calloc(ns ? ns : 1, sizeof *s->e[k]);
        if (!s->e[k]) {
            rc = DS_ERR_NOMEM;
            goto fail;
        }
    }
    for (size_t i = 0; i < ns; i++) {
        json_t *j = json_array_get(shards, i);
        const char *file = json_string_value(json_object_get(j, "file"));
        const char *split = json_string_value(json_object_get(j, "split"));
        const char *xx = json_string_value(json_object_get(j, "xxh3"));
        uint64_t rows = (uint64_t)json_integer_value(json_object_get(j, "rows"));
        uint64_t toks = (uint64_t)json_integer_value(json_object_get(j, "tokens"));
        if (!file || !split || strchr(file, '/') || (strcmp(split, "train") && strcmp(split, "val"))) {
            ds_set_err(err, errlen, "%s: shard %zu: bad file or split", mpath, i);
            rc = DS_ERR_FORMAT;
            goto fail;
        }
        int k = !strcmp(split, "val");
        set_entry *e = &s->e[k][s->n[k]];
        size_t pl = dl + strlen(file) + 2;
        e->path = malloc(pl);
        if (!e->path) {
            rc = DS_ERR_NOMEM;
            goto fail;
        }
        snprintf(e->path, pl, "%s/%s", dir, file);
        s->n[k]++;
        rc = ds_shard_open(e->path, 0, &e->sh, err, errlen);
        if (rc != DS_OK) goto fail;
        const ds_shard_header *h = &e->sh->h;
        if (h->n_rows != rows || h->row_len != s->info.row_len || h->vocab_size != s->info.vocab_size ||
            memcmp(h->fingerprint, s->info.fingerprint, 32) != 0 || ((h->flags & DS_SHARD_F_VAL) != 0) != k) {
            ds_set_err(err, errlen, "%s: header disagrees with the manifest (rows, row length, vocabulary, "
                       "tokenizer fingerprint or split)", e->path);
            rc = DS_ERR_FORMAT;
            goto fail;
        }
        if (flags & DS_SHARD_OPEN_VERIFY) {
            char hx[17];
            uint8_t b[8];
            uint64_t v = XXH3_64bits(e->sh->map, e->sh->map_len);
            for (int q = 0; q < 8; q++) b[q] = (uint8_t)(v >> (56 - 8 * q));
            ds_shard_hex(b, 8, hx);
            if (!xx || strcmp(xx, hx) != 0) {
                ds_set_err(err, errlen, "%s: file checksum %s differs from the manifest's %s", e->path, hx,
                           xx ? xx : "(none)");
                rc = DS_ERR_FORMAT;
                goto fail;
            }
        }
        e->first_row = s->info.rows[k];
        s->info.rows[k] += rows;
        s->info.tokens[k] += toks;
        s->info.dtype_bytes = h->dtype_bytes;
        s->info.pad_id = h->pad_id;
        s->info.eot_id = h->eot_id;
    }
    s->info.n_shards[0] = s->n[0];
    s->info.n_shards[1] = s->n[1];
    json_decref(root);
    free(mpath);
    *out = s;
    return DS_OK;
fail:
    json_decref(root);
    free(mpath);
    ds_shardset_close(s);
    return rc;
}

void ds_shardset_get_info(const ds_shardset *s, ds_shardset_info *info) { *info = s->info; }
uint64_t ds_shardset_rows(const ds_shardset *s, ds_split split) { return s->info.rows[split != DS_SPLIT_TRAIN]; }
size_t ds_shardset_n_shards(const ds_shardset *s, ds_split split) { return s->n[split != DS_SPLIT_TRAIN]; }

const ds_shard *ds_shardset_shard(const ds_shardset *s, ds_split split, size_t i, const char **path) {
    int k = split != DS_SPLIT_TRAIN;
    if (i >= s->n[k]) return NULL;
    if (path) *path = s->e[k][i].path;
    return s->e[k][i].sh;
}

int ds_shardset_read(const ds_shardset *s, ds_split split, uint64_t row, uint32_t *tokens, uint32_t *pos_ids,
                     uint32_t *doc_ids, uint8_t *loss_mask) {
    int k = split != DS_SPLIT_TRAIN;
    if (row >= s->info.rows[k]) return DS_ERR_ARG;
    size_t lo = 0, hi = s->n[k];
    while (hi - lo > 1) { /* last shard with first_row <= row */
        size_t mid = (lo + hi) / 2;
        if (s->e[k][mid].first_row <= row) lo = mid;
        else hi = mid;
    }
    const set_entry *e = &s->e[k][lo];
    return ds_shard_read(e->sh, row - e->first_row, tokens, pos_ids, doc_ids, loss_mask, NULL);
}

int ds_shard_row_starts(const ds_shard *s, uint64_t row, uint32_t *starts, uint32_t *n_starts) {
    if (row >= s->h.n_rows) return DS_ERR_ARG;
    uint32_t a = get32(s->sidx + 4 * row), b = get32(s->sidx + 4 * (row + 1));
    if (a > b || b > s->h.n_starts || b - a > s->h.row_len) return DS_ERR_FORMAT;
    for (uint32_t k = a; k < b; k++) starts[k - a] = get32(s->starts + 4 * k);
    *n_starts = b - a;
    return DS_OK;
}
