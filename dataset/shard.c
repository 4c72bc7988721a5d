/* shard.c - token shard files: header codec, writer, mmap reader, verifier
 * and the shard-set (manifest) reader. Format: docs/shard-format.md. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include "ds.h"
#include "mks_common.h"
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
static inline uint32_t get16(const uint8_t *p) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint16_t v; /* one 16-bit load the compiler can vectorise */
    memcpy(&v, p, 2);
    return v;
#else
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
#endif
}

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
 *  96 payload_xxh3  104 blocks_xxh3  112 fingerprint[32]
 * 144 loss_bytes (version 2; 0 in version 1)  152..183 zero
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
    put64(o + 144, h->loss_bytes);
    put64(o + 184, XXH3_64bits(o, 184));
}

/* Bad header: the message names the field's offset and value. */
#define HDR_BAD(...)                                                                                                   \
    do {                                                                                                               \
        ds_set_err(err, errlen, __VA_ARGS__);                                                                          \
        return DS_ERR_FORMAT;                                                                                          \
    } while (0)

int ds_shard_header_decode(const uint8_t in[DS_SHARD_HEADER_BYTES], ds_shard_header *h, char *err, size_t errlen) {
    memset(h, 0, sizeof *h);
    if (memcmp(in, DS_SHARD_MAGIC, 8) != 0) HDR_BAD("offset 0: bad magic (not a mkshards shard)");
    uint64_t hx = XXH3_64bits(in, 184);
    if (get64(in + 184) != hx) HDR_BAD("offset 0-191: header checksum mismatch (header corrupt)");
    h->version = get32(in + 8);
    if (h->version != DS_SHARD_VERSION && h->version != DS_SHARD_VERSION_LOSS)
        HDR_BAD("offset 8: unsupported shard version %u (this reader knows %u and %u)", h->version, DS_SHARD_VERSION,
                DS_SHARD_VERSION_LOSS);
    if (get32(in + 12) != DS_SHARD_HEADER_BYTES)
        HDR_BAD("offset 12: header size %u, version %u headers are %u bytes", get32(in + 12), h->version,
                DS_SHARD_HEADER_BYTES);
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
    h->loss_bytes = get64(in + 144);
    /* Every field is bounded before any product or sum of fields is formed,
     * so no size computed below can wrap (the checksum only guards against
     * accidental damage: a crafted header carries a valid one). */
    if (h->dtype_bytes != 2 && h->dtype_bytes != 4)
        HDR_BAD("offset 16: dtype bytes %u (must be 2 or 4)", h->dtype_bytes);
    if (h->flags & ~DS_SHARD_F_KNOWN) HDR_BAD("offset 20: unknown flag bits 0x%x", h->flags & ~DS_SHARD_F_KNOWN);
    if (h->row_len == 0 || h->row_len > DS_SHARD_MAX_ROW_LEN)
        HDR_BAD("offset 24: row length %u (must be 1..%u)", h->row_len, DS_SHARD_MAX_ROW_LEN);
    if (h->vocab_size == 0 || h->vocab_size > DS_SHARD_MAX_VOCAB)
        HDR_BAD("offset 28: vocab size %u (must be 1..%u)", h->vocab_size, DS_SHARD_MAX_VOCAB);
    if (h->dtype_bytes == 2 && h->vocab_size > 65536)
        HDR_BAD("offset 16: dtype u16 cannot hold vocab size %u", h->vocab_size);
    if (h->pad_id >= h->vocab_size) HDR_BAD("offset 32: pad id %u >= vocab size %u", h->pad_id, h->vocab_size);
    if (h->eot_id >= h->vocab_size) HDR_BAD("offset 36: EOT id %u >= vocab size %u", h->eot_id, h->vocab_size);
    if (get32(in + 44) != 0) HDR_BAD("offset 44: reserved field is %u, must be 0", get32(in + 44));
    /* version 2 puts the loss section's size at 144; the rest stays reserved */
    for (int i = h->version == DS_SHARD_VERSION_LOSS ? 152 : 144; i < 184; i++)
        if (in[i]) HDR_BAD("offset %d: reserved byte is %u, must be 0", i, in[i]);
    uint64_t n = h->n_rows, tokens;
    if (n > DS_SHARD_MAX_TOKENS || __builtin_mul_overflow(n, (uint64_t)h->row_len, &tokens) ||
        tokens > DS_SHARD_MAX_TOKENS)
        HDR_BAD("offset 48: %" PRIu64 " rows of %u tokens exceed %" PRIu64 " tokens per shard", n, h->row_len,
                (uint64_t)DS_SHARD_MAX_TOKENS);
    if (h->n_starts > tokens)
        HDR_BAD("offset 64: %" PRIu64 " document starts > %" PRIu64 " token positions", h->n_starts, tokens);
    int zstd = (h->flags & DS_SHARD_F_ZSTD) != 0;
    uint64_t frame_entries = 0;
    if (zstd) {
        if (h->frame_rows == 0) HDR_BAD("offset 40: zstd shard with 0 rows per frame");
        uint64_t fr = h->frame_rows < n ? h->frame_rows : n; /* rows of the largest frame */
        if (fr * h->row_len * (uint64_t)h->dtype_bytes > DS_SHARD_MAX_FRAME_BYTES)
            HDR_BAD("offset 40: zstd frames of %u rows x %u tokens exceed %llu bytes decoded", h->frame_rows,
                    h->row_len, (unsigned long long)DS_SHARD_MAX_FRAME_BYTES);
        if (h->n_frames != (n + h->frame_rows - 1) / h->frame_rows)
            HDR_BAD("offset 56: %" PRIu64 " zstd frames, %" PRIu64 " rows of %u per frame need %" PRIu64, h->n_frames,
                    n, h->frame_rows, (n + h->frame_rows - 1) / h->frame_rows);
        frame_entries = h->n_frames + 1;
    } else {
        if (h->frame_rows != 0 || h->n_frames != 0)
            HDR_BAD("offset 40-63: frame fields (%u rows per frame, %" PRIu64 " frames) on an uncompressed shard",
                    h->frame_rows, h->n_frames);
        if (h->tokens_bytes != tokens * h->dtype_bytes)
            HDR_BAD("offset 72: token section of %" PRIu64 " bytes, %" PRIu64 " rows of %u x u%u need %" PRIu64,
                    h->tokens_bytes, n, h->row_len, 8 * h->dtype_bytes, tokens * h->dtype_bytes);
    }
    /* n, n_starts <= 2^32 and frames <= rows: no wrap in 64 bits */
    uint64_t meta = 4 * (2 * n + 1 + h->n_starts) + 8 * frame_entries;
    if (h->meta_bytes != meta)
        HDR_BAD("offset 80: row-metadata section of %" PRIu64 " bytes, the counts need %" PRIu64, h->meta_bytes, meta);
    /* n <= 2^32, ceil(L / 8) <= 2^21: no wrap */
    uint64_t loss = h->version == DS_SHARD_VERSION_LOSS ? n * ds_shard_loss_row_bytes(h->row_len) : 0;
    if (h->loss_bytes != loss)
        HDR_BAD("offset 144: loss section of %" PRIu64 " bytes, %" PRIu64 " rows of %u tokens need %" PRIu64,
                h->loss_bytes, n, h->row_len, loss);
    uint64_t payload, blocks, total;
    if (__builtin_add_overflow(h->tokens_bytes, meta, &payload) || payload > DS_SHARD_MAX_FILE_BYTES)
        HDR_BAD("offset 72: token section of %" PRIu64 " bytes is too large", h->tokens_bytes);
    payload += loss; /* both <= 2^40 */
    blocks = (payload + DS_SHARD_BLOCK_BYTES - 1) / DS_SHARD_BLOCK_BYTES;
    if (h->n_blocks != blocks)
        HDR_BAD("offset 88: %" PRIu64 " checksum blocks, %" PRIu64 " payload bytes need %" PRIu64, h->n_blocks, payload,
                blocks);
    total = DS_SHARD_HEADER_BYTES + payload + 8 * blocks; /* payload <= 2^40: no wrap */
    if (total > DS_SHARD_MAX_FILE_BYTES)
        HDR_BAD("offset 72-95: shard of %" PRIu64 " bytes exceeds the %llu-byte limit", total,
                (unsigned long long)DS_SHARD_MAX_FILE_BYTES);
    return DS_OK;
}
#undef HDR_BAD

/* Valid only after ds_shard_header_decode accepted h (no wrap). */
static uint64_t payload_of(const ds_shard_header *h) { return h->tokens_bytes + h->meta_bytes + h->loss_bytes; }
static uint64_t file_size_of(const ds_shard_header *h) {
    return DS_SHARD_HEADER_BYTES + payload_of(h) + 8 * h->n_blocks;
}

/* ---------------------------------------------------------- writer */
void ds_shard_image_free(ds_shard_image *img) {
    free(img->data);
    img->data = NULL;
    img->len = 0;
}

/* 1 when row `bits` (lb bytes) has a bit set at a position >= nv. */
static int loss_bits_past(const uint8_t *bits, uint64_t lb, uint32_t nv) {
    uint64_t k = nv / 8;
    if (k < lb && (bits[k] >> (nv % 8))) return 1;
    for (k++; k < lb; k++)
        if (bits[k]) return 1;
    return 0;
}

int ds_shard_build_image(const ds_shard_header *hin, const uint32_t *rows, const uint32_t *perm, const uint32_t *valid,
                         const uint32_t *sidx, const uint32_t *starts, int zstd_level, ds_shard_image *out, char *err,
                         size_t errlen) {
    return ds_shard_build_image_loss(hin, rows, perm, valid, sidx, starts, NULL, zstd_level, out, err, errlen);
}

/* The whole shard file in memory, in the order docs/shard-format.md lays it
 * out (header, token section plain or in zstd frames, row metadata, loss
 * bits, checksums). Long (~145 lines) because the sections' sizes, offsets
 * and checksums depend on each other and are written in one pass. */
int ds_shard_build_image_loss(const ds_shard_header *hin, const uint32_t *rows, const uint32_t *perm,
                              const uint32_t *valid, const uint32_t *sidx, const uint32_t *starts, const uint8_t *loss,
                              int zstd_level, ds_shard_image *out, char *err, size_t errlen) {
    ds_shard_header h = *hin;
    h.version = loss ? DS_SHARD_VERSION_LOSS : DS_SHARD_VERSION;
    int zstd = (h.flags & DS_SHARD_F_ZSTD) != 0;
    uint64_t L = h.row_len, n = h.n_rows, dt = h.dtype_bytes;
    if (L == 0 || L > DS_SHARD_MAX_ROW_LEN || h.vocab_size == 0 || h.vocab_size > DS_SHARD_MAX_VOCAB ||
        h.pad_id >= h.vocab_size || h.eot_id >= h.vocab_size || (dt != 2 && dt != 4) ||
        (dt == 2 && h.vocab_size > 65536) || (h.flags & ~DS_SHARD_F_KNOWN)) {
        ds_set_err(err, errlen, "shard header out of range (row length %u, vocab %u, dtype %u bytes)", h.row_len,
                   h.vocab_size, h.dtype_bytes);
        return DS_ERR_ARG;
    }
    if (n > DS_SHARD_MAX_TOKENS || n * L > DS_SHARD_MAX_TOKENS) {
        ds_set_err(err, errlen, "a shard holds at most 2^32-1 tokens (use a smaller --shard-tokens)");
        return DS_ERR_ARG;
    }
    /* the reader refuses frames it would have to decode into more than
     * DS_SHARD_MAX_FRAME_BYTES, so the writer never produces them */
    uint64_t frame_rows_max = zstd ? (h.frame_rows < n ? h.frame_rows : n) : 0;
    if (zstd && (h.frame_rows == 0 || frame_rows_max * L * dt > DS_SHARD_MAX_FRAME_BYTES)) {
        ds_set_err(err, errlen,
                   "zstd frames of %u rows x %u tokens exceed %llu MiB decoded (use a smaller --frame-rows)",
                   h.frame_rows, h.row_len, (unsigned long long)(DS_SHARD_MAX_FRAME_BYTES >> 20));
        return DS_ERR_ARG;
    }
    /* metadata in output row order */
    uint64_t n_starts = 0, lb = ds_shard_loss_row_bytes(h.row_len);
    for (uint64_t j = 0; j < n; j++) {
        uint64_t r = perm ? perm[j] : j;
        n_starts += sidx[r + 1] - sidx[r];
        if (loss && (valid[r] > L || loss_bits_past(loss + r * lb, lb, valid[r]))) {
            ds_set_err(err, errlen, "row %" PRIu64 ": a loss bit is set on padding (valid %u of %u)", r, valid[r],
                       h.row_len);
            return DS_ERR_ARG;
        }
    }
    h.loss_bytes = loss ? n * lb : 0;
    h.n_starts = n_starts;
    h.n_frames = zstd ? (n + h.frame_rows - 1) / h.frame_rows : 0;
    if (!zstd) h.frame_rows = 0;
    uint64_t raw_bytes = n * L * dt;
    uint64_t *foff = NULL;
    uint64_t tok_bytes = 0;
    size_t bound = 0;
    if (zstd) {
        bound = ZSTD_compressBound((size_t)((frame_rows_max ? frame_rows_max : 1) * L * dt));
        tok_bytes = h.n_frames * bound; /* upper bound for the allocation */
        foff = malloc((h.n_frames + 1) * sizeof *foff);
        if (!foff) return DS_ERR_NOMEM;
    } else {
        tok_bytes = raw_bytes;
    }
    uint64_t meta_bytes = 4 * (2 * n + 1 + n_starts) + (zstd ? 8 * (h.n_frames + 1) : 0);
    uint64_t max_payload = tok_bytes + meta_bytes + h.loss_bytes;
    uint64_t max_blocks = (max_payload + DS_SHARD_BLOCK_BYTES - 1) / DS_SHARD_BLOCK_BYTES;
    uint8_t *img = malloc((size_t)(DS_SHARD_HEADER_BYTES + max_payload + 8 * max_blocks));
    uint8_t *rawbuf = zstd ? malloc((size_t)(frame_rows_max * L * dt) + 1) : NULL;
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
    uint64_t payload = tok_bytes + meta_bytes + h.loss_bytes;
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
    if (loss)
        for (uint64_t j = 0; j < n; j++, p += lb) memcpy(p, loss + (uint64_t)(perm ? perm[j] : j) * lb, (size_t)lb);
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

static int same_file_content(const char *path, const void *data, size_t len) {
    /* non-blocking: a FIFO planted under the name must not hang the writer;
     * anything but a regular file is simply "not the same" and gets replaced */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return 0;
    struct stat st;
    int same = 0;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == len) {
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

int ds_write_file_atomic(const char *path, const void *data, size_t len, int *skipped, char *err, size_t errlen) {
    if (skipped) *skipped = 0;
    if (same_file_content(path, data, len)) {
        if (skipped) *skipped = 1;
        return DS_OK;
    }
    /* the common layer's one policy: PATH.tmp, fsync, rename, fsync of the folder */
    const void *part[1] = {data};
    int rc = mc_atomic_write(path, NULL, 0644, part, &len, 1, err, errlen);
    return rc == MC_OK ? DS_OK : rc == MC_ERR_NOMEM ? DS_ERR_NOMEM : DS_ERR_IO;
}

/* ---------------------------------------------------------- reader */
struct ds_shard {
    ds_shard_header h;
    const uint8_t *map;
    size_t map_len;
    const uint8_t *tok;    /* token section */
    const uint8_t *valid;  /* u32[n_rows] */
    const uint8_t *sidx;   /* u32[n_rows+1] */
    const uint8_t *starts; /* u32[n_starts] */
    const uint8_t *foff;   /* u64[n_frames+1] (zstd) */
    const uint8_t *loss;   /* version 2: n_rows x ceil(L / 8) bytes of loss bits; NULL in version 1 */
    char *path;
    dev_t dev; /* identity of the file (a shard set refuses one file listed twice) */
    ino_t ino;
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
    uint64_t payload = payload_of(h);
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
            /* the sections the damaged block overlaps */
            uint64_t e = o + l, t = h->tokens_bytes, m = t + h->meta_bytes;
            int in_t = o < t, in_m = o < m && e > t, in_l = e > m;
            ds_set_err(err, errlen, "offset %" PRIu64 "-%" PRIu64 ": checksum mismatch (%s%s%s%s%s section%s)",
                       DS_SHARD_HEADER_BYTES + o, DS_SHARD_HEADER_BYTES + e - 1, in_t ? "token" : "",
                       in_t && in_m ? " / " : "", in_m ? "row-metadata" : "", (in_t || in_m) && in_l ? " / " : "",
                       in_l ? "loss" : "", in_t + in_m + in_l > 1 ? "s" : "");
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
    char e0[512];
    int fd = ds_open_regular(path, e0, sizeof e0); /* a FIFO or device in its place must not block */
    if (fd < 0) {
        ds_set_err(err, errlen, "cannot open shard %s", e0);
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
    s->dev = st.st_dev;
    s->ino = st.st_ino;
    s->path = strdup(path);
    s->tok = s->map + DS_SHARD_HEADER_BYTES;
    s->valid = s->tok + s->h.tokens_bytes;
    s->sidx = s->valid + 4 * s->h.n_rows;
    s->starts = s->sidx + 4 * (s->h.n_rows + 1);
    s->foff = s->starts + 4 * s->h.n_starts;
    s->loss = s->h.loss_bytes ? s->tok + s->h.tokens_bytes + s->h.meta_bytes : NULL;
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

/* ---------------------------------------------------------- row checks
 * What `mkshards verify` checks about one row, made by every read that
 * returns it (a crafted shard may carry valid checksums): the row's valid
 * count, its span of the document-start table, its starts (strictly
 * increasing, inside the valid tokens) and, where the ids are read, every id
 * below the vocabulary size and the pad id at every padding position. */

/* Row r's valid count and document-start span [*a, *b). DS_OK or
 * DS_ERR_FORMAT with the offset of the bad entry in err (may be NULL). */
static int row_meta(const ds_shard *s, uint64_t r, uint32_t *nv_out, uint32_t *a_out, uint32_t *b_out, char *err,
                    size_t errlen) {
    const ds_shard_header *h = &s->h;
    uint64_t meta0 = DS_SHARD_HEADER_BYTES + h->tokens_bytes;
    uint32_t L = h->row_len, nv = get32(s->valid + 4 * r);
    uint32_t a = get32(s->sidx + 4 * r), b = get32(s->sidx + 4 * (r + 1));
    if (nv > L) {
        ds_set_err(err, errlen, "offset %" PRIu64 ": row %" PRIu64 " claims %u valid tokens > row length %u",
                   meta0 + 4 * r, r, nv, L);
        return DS_ERR_FORMAT;
    }
    if (a > b || b > h->n_starts) {
        ds_set_err(err, errlen, "offset %" PRIu64 ": row %" PRIu64 " document-start index out of order",
                   meta0 + 4 * (h->n_rows + r + 1), r);
        return DS_ERR_FORMAT;
    }
    /* strictly increasing and below nv <= L: b - a <= L follows */
    for (uint32_t k = a, prev = 0; k < b; k++) {
        uint32_t p = get32(s->starts + 4 * k);
        if (p >= nv || (k > a && p <= prev)) {
            ds_set_err(err, errlen, "offset %" PRIu64 ": row %" PRIu64 " document start %u invalid",
                       meta0 + 4 * (2 * h->n_rows + 1 + k), r, p);
            return DS_ERR_FORMAT;
        }
        prev = p;
    }
    if (s->loss) { /* a target on padding: the trainer would learn to predict the pad id */
        uint64_t lb = ds_shard_loss_row_bytes(L);
        if (loss_bits_past(s->loss + r * lb, lb, nv)) {
            ds_set_err(err, errlen, "offset %" PRIu64 ": row %" PRIu64 " has a loss bit set on padding (valid %u)",
                       (uint64_t)(s->loss - s->map) + r * lb + nv / 8, r, nv);
            return DS_ERR_FORMAT;
        }
    }
    *nv_out = nv;
    *a_out = a;
    *b_out = b;
    return DS_OK;
}

/* The message for the first bad id of row r (t: its L ids). */
static int row_ids_bad(const ds_shard *s, uint64_t r, const uint32_t *t, uint32_t nv, char *err, size_t errlen) {
    const ds_shard_header *h = &s->h;
    uint32_t L = h->row_len, i = 0;
    while (i < L && t[i] < h->vocab_size && (i < nv || t[i] == h->pad_id)) i++;
    if (i == L) return DS_OK; /* not reached: the caller saw a bad id */
    const char *what = t[i] >= h->vocab_size ? "is outside the vocabulary of" : "is padding that is not the pad id,";
    uint32_t ref = t[i] >= h->vocab_size ? h->vocab_size : h->pad_id;
    const char *unit = t[i] >= h->vocab_size ? " ids" : "";
    if (h->flags & DS_SHARD_F_ZSTD)
        ds_set_err(err, errlen, "row %" PRIu64 " position %u (compressed): token id %u %s %u%s", r, i, t[i], what, ref,
                   unit);
    else
        ds_set_err(err, errlen, "offset %" PRIu64 ": row %" PRIu64 " position %u: token id %u %s %u%s",
                   DS_SHARD_HEADER_BYTES + (r * L + i) * (uint64_t)h->dtype_bytes, r, i, t[i], what, ref, unit);
    return DS_ERR_FORMAT;
}

/* The conversion and checks of row_ids for ids of w bytes (2 or 4, a
 * constant at each call so the loads and loops specialise). */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("vect-cost-model=dynamic"))) /* as row_ids, which inlines it */
#endif
static inline __attribute__((always_inline)) void
convert_ids(const uint8_t *restrict src, size_t w, size_t n, size_t L, uint32_t pad, int32_t lim,
            uint32_t *restrict tokens, uint32_t *over_out, uint32_t *px_out) {
    uint32_t over = 0, px = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t v = w == 2 ? get16(src + 2 * i) : get32(src + 4 * i);
        tokens[i] = v;
        over |= (int32_t)(v ^ 0x80000000u) >= lim;
    }
    for (size_t i = n; i < L; i++) {
        uint32_t v = w == 2 ? get16(src + 2 * i) : get32(src + 4 * i);
        tokens[i] = v;
        px |= v ^ pad;
    }
    *over_out = over;
    *px_out = px;
}

/* Row r's L ids from the token section (src: u16 or u32 little-endian) into
 * tokens, checked on the way in the same pass. The checks are written so
 * that they vectorise with the conversion on any x86-64 (SSE2 has no
 * unsigned 32-bit compare or max): a signed compare of biased values ORed
 * into `over` for the real tokens, an OR of differences from the pad id for
 * the padding. */
#if defined(__GNUC__) && !defined(__clang__)
/* -O2's "very cheap" vectoriser model leaves these loops scalar (a loop with
 * an epilogue); with the dynamic model they run 16 bytes a step and the
 * checks cost nothing measurable over the conversion alone */
__attribute__((optimize("vect-cost-model=dynamic")))
#endif
static int
row_ids(const ds_shard *s, uint64_t r, const uint8_t *restrict src, uint32_t nv, uint32_t *restrict tokens, char *err,
        size_t errlen) {
    const ds_shard_header *h = &s->h;
    size_t L = h->row_len, n = nv; /* size_t indices: no wrap for the vectoriser to rule out */
    uint32_t pad = h->pad_id, over = 0, px = 0;
    const int32_t lim = (int32_t)(h->vocab_size ^ 0x80000000u); /* v >= vocab <=> (v ^ 2^31) >= lim, signed */
    /* one body, instantiated per id width (always_inline with a constant w) */
    if (h->dtype_bytes == 2) convert_ids(src, 2, n, L, pad, lim, tokens, &over, &px);
    else convert_ids(src, 4, n, L, pad, lim, tokens, &over, &px);
    if (!over && !px) return DS_OK; /* pad < vocab_size (header checked) */
    return row_ids_bad(s, r, tokens, nv, err, errlen);
}

#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("vect-cost-model=dynamic"))) /* as row_ids */
#endif
int ds_shard_check_ids(const void *ids, uint32_t dtype_bytes, uint32_t row_len, uint32_t n_valid,
                       uint32_t vocab_size, uint32_t pad_id) {
    if ((dtype_bytes != 2 && dtype_bytes != 4) || n_valid > row_len || pad_id >= vocab_size) return DS_ERR_FORMAT;
    const uint8_t *src = ids;
    size_t L = row_len, n = n_valid;
    uint32_t over = 0, px = 0;
    const int32_t lim = (int32_t)(vocab_size ^ 0x80000000u);
    if (dtype_bytes == 2) {
        for (size_t i = 0; i < n; i++) over |= (int32_t)(get16(src + 2 * i) ^ 0x80000000u) >= lim;
        for (size_t i = n; i < L; i++) px |= get16(src + 2 * i) ^ pad_id;
    } else {
        for (size_t i = 0; i < n; i++) over |= (int32_t)(get32(src + 4 * i) ^ 0x80000000u) >= lim;
        for (size_t i = n; i < L; i++) px |= get32(src + 4 * i) ^ pad_id;
    }
    return over || px ? DS_ERR_FORMAT : DS_OK;
}

int ds_shard_read_msg(const ds_shard *s, uint64_t row, uint32_t *tokens, uint32_t *pos_ids, uint32_t *doc_ids,
                      uint8_t *loss_mask, uint32_t *n_valid, char *err, size_t errlen) {
    const ds_shard_header *h = &s->h;
    if (row >= h->n_rows) {
        ds_set_err(err, errlen, "row %" PRIu64 " out of range (%" PRIu64 " rows)", row, h->n_rows);
        return DS_ERR_ARG;
    }
    uint32_t L = h->row_len, dt = h->dtype_bytes, nv, a, b;
    int rc = row_meta(s, row, &nv, &a, &b, err, errlen);
    if (rc != DS_OK) return rc;
    if (n_valid) *n_valid = nv;
    if (tokens) {
        if (h->flags & DS_SHARD_F_ZSTD) {
            uint64_t f = row / h->frame_rows, r0 = f * h->frame_rows;
            uint64_t rows_in = h->n_rows - r0 < h->frame_rows ? h->n_rows - r0 : h->frame_rows;
            uint64_t o0 = get64(s->foff + 8 * f), o1 = get64(s->foff + 8 * (f + 1));
            size_t fb = (size_t)(rows_in * L * dt);
            uint8_t *frame = o0 <= o1 && o1 <= h->tokens_bytes ? malloc(fb ? fb : 1) : NULL;
            if (o0 <= o1 && o1 <= h->tokens_bytes && !frame) return DS_ERR_NOMEM;
            size_t z = frame ? ZSTD_decompress(frame, fb, s->tok + o0, (size_t)(o1 - o0)) : 0;
            if (!frame || ZSTD_isError(z) || z != fb) {
                free(frame);
                ds_set_err(err, errlen, "row %" PRIu64 ": zstd frame %" PRIu64 " does not decode (offset %" PRIu64 ")",
                           row, f, (uint64_t)DS_SHARD_HEADER_BYTES + o0);
                return DS_ERR_FORMAT;
            }
            rc = row_ids(s, row, frame + (row - r0) * L * dt, nv, tokens, err, errlen);
            free(frame);
        } else {
            rc = row_ids(s, row, s->tok + row * (uint64_t)L * dt, nv, tokens, err, errlen);
        }
        if (rc != DS_OK) return rc;
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
    if (loss_mask && s->loss) {
        const uint8_t *bits = s->loss + row * ds_shard_loss_row_bytes(L);
        for (uint32_t i = 0; i < L; i++) loss_mask[i] = (uint8_t)((bits[i >> 3] >> (i & 7)) & 1);
    } else if (loss_mask) {
        for (uint32_t i = 0; i < L; i++) loss_mask[i] = i < nv;
    }
    return DS_OK;
}

int ds_shard_read(const ds_shard *s, uint64_t row, uint32_t *tokens, uint32_t *pos_ids, uint32_t *doc_ids,
                  uint8_t *loss_mask, uint32_t *n_valid) {
    return ds_shard_read_msg(s, row, tokens, pos_ids, doc_ids, loss_mask, n_valid, NULL, 0);
}

/* ---------------------------------------------------------- verify */
int ds_shard_verify(const char *path, uint64_t *file_xxh3, char *err, size_t errlen) {
    ds_shard *s = NULL;
    int rc = ds_shard_open(path, 0, &s, err, errlen);
    if (rc != DS_OK) return rc;
    char e2[512];
    if (file_xxh3) *file_xxh3 = XXH3_64bits(s->map, s->map_len);
    rc = check_blocks(&s->h, s->map, e2, sizeof e2);
    if (rc != DS_OK) {
        ds_set_err(err, errlen, "%s: %s", path, e2);
        ds_shard_close(s);
        return rc;
    }
    /* the tables as a whole (a read checks the entries of its own row) */
    const ds_shard_header *h = &s->h;
    uint64_t meta0 = DS_SHARD_HEADER_BYTES + h->tokens_bytes;
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
    /* every row as a reader reads it (metadata, frame, ids), each zstd frame
     * decoded once for all of its rows */
    uint32_t *row = rc == DS_OK ? malloc((size_t)h->row_len * sizeof *row) : NULL;
    if (rc == DS_OK && !row) rc = DS_ERR_NOMEM;
    int zstd = (h->flags & DS_SHARD_F_ZSTD) != 0;
    uint64_t L = h->row_len, dt = h->dtype_bytes, fr = zstd ? h->frame_rows : (h->n_rows ? h->n_rows : 1);
    uint8_t *frame = rc == DS_OK && zstd ? malloc((size_t)(fr * L * dt)) : NULL; /* <= DS_SHARD_MAX_FRAME_BYTES */
    if (rc == DS_OK && zstd && !frame) rc = DS_ERR_NOMEM;
    for (uint64_t r0 = 0, f = 0; r0 < h->n_rows && rc == DS_OK; r0 += fr, f++) {
        uint64_t r1 = r0 + fr < h->n_rows ? r0 + fr : h->n_rows;
        const uint8_t *src = s->tok + r0 * L * dt;
        if (zstd) {
            uint64_t o0 = get64(s->foff + 8 * f), o1 = get64(s->foff + 8 * (f + 1)); /* checked above */
            size_t z = ZSTD_decompress(frame, (size_t)((r1 - r0) * L * dt), s->tok + o0, (size_t)(o1 - o0));
            if (ZSTD_isError(z) || z != (r1 - r0) * L * dt) {
                ds_set_err(err, errlen,
                           "%s: row %" PRIu64 ": zstd frame %" PRIu64 " does not decode (offset %" PRIu64 ")", path, r0,
                           f, (uint64_t)DS_SHARD_HEADER_BYTES + o0);
                rc = DS_ERR_FORMAT;
                break;
            }
            src = frame;
        }
        for (uint64_t r = r0; r < r1 && rc == DS_OK; r++) {
            uint32_t nv, a, b;
            rc = row_meta(s, r, &nv, &a, &b, e2, sizeof e2);
            if (rc == DS_OK) rc = row_ids(s, r, src + (r - r0) * L * dt, nv, row, e2, sizeof e2);
            if (rc != DS_OK) ds_set_err(err, errlen, "%s: %s", path, e2);
        }
    }
    free(frame);
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

/* ---------------------------------------------------------- manifest */
int ds_shard_name_check(const char *name, size_t len, char *why, size_t whylen) {
    const char *bad = NULL;
    if (!name || len == 0) bad = "empty";
    else if (len > NAME_MAX) bad = "longer than NAME_MAX bytes";
    else if (memchr(name, 0, len)) bad = "holds a NUL byte";
    else if (memchr(name, '/', len)) bad = "holds '/' (shards are plain file names in the set's folder)";
    else if (strstr(name, "..")) bad = "holds '..'";
    else if (name[0] == '.') bad = "starts with '.'";
    else
        for (size_t i = 0; i < len; i++)
            if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f) bad = "holds a control byte";
    if (bad) ds_set_err(why, whylen, "%s", bad);
    return bad ? -1 : 0;
}

/* An integer field in 0..max. */
static int json_u64_in(json_t *j, uint64_t max, uint64_t *out) {
    if (!json_is_integer(j) || json_integer_value(j) < 0 || (uint64_t)json_integer_value(j) > max) return -1;
    *out = (uint64_t)json_integer_value(j);
    return 0;
}

static int parse_hex64(const char *hx, uint64_t *out) {
    uint8_t b[8];
    if (ds_shard_unhex(hx, b, 8) != 0) return -1;
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | b[i];
    *out = v;
    return 0;
}

void ds_manifest_free(ds_manifest *m) {
    if (!m) return;
    json_decref(m->root);
    free(m->path);
    free(m->shards);
    memset(m, 0, sizeof *m);
}

typedef struct {
    const char *name;
    size_t idx;
} name_idx;

static int cmp_name_idx(const void *a, const void *b) {
    const name_idx *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->idx > y->idx) - (x->idx < y->idx);
}

/* Read the whole regular file at path (at most max bytes) into a buffer. */
static int read_small_file(const char *path, size_t max, char **out, size_t *len, char *err, size_t errlen) {
    char e0[512];
    int fd = ds_open_regular(path, e0, sizeof e0);
    if (fd < 0) {
        ds_set_err(err, errlen, "%s", e0);
        return DS_ERR_IO;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_size > max) {
        ds_set_err(err, errlen, "%s: %lld bytes, more than the %zu-byte limit", path, (long long)st.st_size, max);
        close(fd);
        return DS_ERR_FORMAT;
    }
    size_t n = (size_t)st.st_size, got = 0;
    char *buf = malloc(n + 1);
    if (!buf) {
        close(fd);
        return DS_ERR_NOMEM;
    }
    while (got < n) { /* a file that shrinks meanwhile ends early; one that grows is cut at n */
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            ds_set_err(err, errlen, "%s: %s", path, strerror(errno));
            free(buf);
            close(fd);
            return DS_ERR_IO;
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    close(fd);
    buf[got] = 0;
    *out = buf;
    *len = got;
    return DS_OK;
}

#define MAN_BAD(...)                                                                                                   \
    do {                                                                                                               \
        char msg_[384];                                                                                                \
        snprintf(msg_, sizeof msg_, __VA_ARGS__);                                                                      \
        ds_set_err(err, errlen, "%s: %s", m->path, msg_);                                                              \
        ds_manifest_free(m);                                                                                           \
        return DS_ERR_FORMAT;                                                                                          \
    } while (0)

/* Reads and checks manifest.json against the limits and itself. Long (~140
 * lines) but flat: one check per field, each message naming the field. */
int ds_manifest_load(const char *dir, ds_manifest *m, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    /* the folder itself: O_DIRECTORY fails at once on a FIFO or a file */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC);
    if (dfd < 0) {
        ds_set_err(err, errlen, "%s: %s", dir, errno == ENOTDIR ? "not a directory" : strerror(errno));
        return DS_ERR_IO;
    }
    close(dfd);
    size_t dl = strlen(dir);
    m->path = malloc(dl + sizeof "/manifest.json");
    if (!m->path) return DS_ERR_NOMEM;
    memcpy(m->path, dir, dl);
    memcpy(m->path + dl, "/manifest.json", sizeof "/manifest.json");
    char *txt = NULL;
    size_t len = 0;
    int rc = read_small_file(m->path, DS_MANIFEST_MAX_BYTES, &txt, &len, err, errlen);
    if (rc != DS_OK) {
        ds_manifest_free(m);
        return rc;
    }
    json_error_t je;
    m->root = json_loadb(txt, len, JSON_REJECT_DUPLICATES, &je);
    free(txt);
    if (!m->root) MAN_BAD("%s (line %d, column %d)", je.text, je.line, je.column);
    json_t *r = m->root;
    if (!json_is_object(r)) MAN_BAD("not a JSON object");
    if (!json_is_string(json_object_get(r, "format")) ||
        strcmp(json_string_value(json_object_get(r, "format")), "mkshards-manifest") != 0)
        MAN_BAD("not a mkshards manifest (\"format\" is not \"mkshards-manifest\")");
    uint64_t v;
    if (json_u64_in(json_object_get(r, "version"), UINT32_MAX, &v) || v != 1)
        MAN_BAD("\"version\" must be 1 (this reader knows version 1)");
    if (json_u64_in(json_object_get(r, "shard_format_version"), UINT32_MAX, &v) ||
        (v != DS_SHARD_VERSION && v != DS_SHARD_VERSION_LOSS))
        MAN_BAD("\"shard_format_version\" must be %u or %u", DS_SHARD_VERSION, DS_SHARD_VERSION_LOSS);
    m->shard_version = (uint32_t)v;
    if (json_u64_in(json_object_get(r, "seq_len"), DS_SHARD_MAX_ROW_LEN, &v) || v == 0)
        MAN_BAD("\"seq_len\" must be an integer 1..%u", DS_SHARD_MAX_ROW_LEN);
    m->seq_len = (uint32_t)v;
    json_t *tk = json_object_get(r, "tokenizer");
    if (!json_is_object(tk)) MAN_BAD("\"tokenizer\" missing or not an object");
    json_t *jn = json_object_get(tk, "name");
    if (!json_is_string(jn) || json_string_length(jn) == 0 || json_string_length(jn) >= 64 ||
        strlen(json_string_value(jn)) != json_string_length(jn))
        MAN_BAD("\"tokenizer.name\" must be a string of 1..63 bytes");
    m->tokenizer_name = json_string_value(jn);
    const char *fp = json_string_value(json_object_get(tk, "fingerprint"));
    if (!fp || ds_shard_unhex(fp, m->fingerprint, 32) != 0)
        MAN_BAD("\"tokenizer.fingerprint\" must be 64 lowercase hex digits");
    if (json_u64_in(json_object_get(tk, "vocab_size"), DS_SHARD_MAX_VOCAB, &v) || v == 0)
        MAN_BAD("\"tokenizer.vocab_size\" must be an integer 1..%u", DS_SHARD_MAX_VOCAB);
    m->vocab_size = (uint32_t)v;
    if (json_u64_in(json_object_get(tk, "eot_id"), m->vocab_size - 1, &v))
        MAN_BAD("\"tokenizer.eot_id\" must be an integer below vocab_size %u", m->vocab_size);
    m->eot_id = (uint32_t)v;
    if (json_u64_in(json_object_get(tk, "pad_id"), m->vocab_size - 1, &v))
        MAN_BAD("\"tokenizer.pad_id\" must be an integer below vocab_size %u", m->vocab_size);
    m->pad_id = (uint32_t)v;
    /* framing (optional; absent: no BOS, EOS = eot_id as before it was configurable) */
    m->bos_id = -1;
    m->eos_id = m->eot_id;
    for (int k = 0; k < 2; k++) {
        const char *key = k ? "eos_id" : "bos_id";
        json_t *x = json_object_get(tk, key);
        if (!x) continue;
        int64_t *dst = k ? &m->eos_id : &m->bos_id;
        if (json_is_null(x)) {
            *dst = -1;
        } else {
            if (json_u64_in(x, m->vocab_size - 1, &v))
                MAN_BAD("\"tokenizer.%s\" must be null or an integer below vocab_size %u", key, m->vocab_size);
            *dst = (int64_t)v;
        }
    }
    if (m->eos_id >= 0 && m->eos_id != m->eot_id)
        MAN_BAD("\"tokenizer.eos_id\" %lld differs from eot_id %u", (long long)m->eos_id, m->eot_id);
    const char *dtype = json_string_value(json_object_get(r, "dtype"));
    m->dtype_bytes = m->vocab_size <= 65536 ? 2 : 4;
    if (!dtype || strcmp(dtype, m->dtype_bytes == 2 ? "u16" : "u32") != 0)
        MAN_BAD("\"dtype\" must be \"%s\" for vocab_size %u", m->dtype_bytes == 2 ? "u16" : "u32", m->vocab_size);
    json_t *sh = json_object_get(r, "shards");
    if (!json_is_array(sh)) MAN_BAD("\"shards\" missing or not an array");
    size_t ns = json_array_size(sh);
    if (ns > DS_MANIFEST_MAX_SHARDS) MAN_BAD("%zu shards listed, at most %u", ns, DS_MANIFEST_MAX_SHARDS);
    m->shards = calloc(ns ? ns : 1, sizeof *m->shards);
    if (!m->shards) {
        ds_manifest_free(m);
        return DS_ERR_NOMEM;
    }
    m->n_shards = ns;
    for (size_t i = 0; i < ns; i++) {
        json_t *e = json_array_get(sh, i);
        ds_manifest_shard *d = &m->shards[i];
        if (!json_is_object(e)) MAN_BAD("shards[%zu] is not an object", i);
        json_t *jf = json_object_get(e, "file");
        char why[128];
        if (!json_is_string(jf)) MAN_BAD("shards[%zu].file missing or not a string", i);
        if (ds_shard_name_check(json_string_value(jf), json_string_length(jf), why, sizeof why))
            MAN_BAD("shards[%zu].file '%.80s' is not a plain file name: %s", i, json_string_value(jf), why);
        d->file = json_string_value(jf);
        ds_split split;
        if (ds_split_parse(json_string_value(json_object_get(e, "split")), &split))
            MAN_BAD("shards[%zu] (%s): \"split\" must be \"train\" or \"val\"", i, d->file);
        d->split = split;
        if (json_u64_in(json_object_get(e, "rows"), DS_SHARD_MAX_TOKENS / m->seq_len, &d->rows))
            MAN_BAD("shards[%zu] (%s): \"rows\" must be an integer 0..%" PRIu64, i, d->file,
                    (uint64_t)DS_SHARD_MAX_TOKENS / m->seq_len);
        if (json_u64_in(json_object_get(e, "tokens"), d->rows * m->seq_len, &d->tokens))
            MAN_BAD("shards[%zu] (%s): \"tokens\" must be an integer 0..rows x seq_len", i, d->file);
        /* targets: recorded for version-2 sets (readers that ignore the key keep working) */
        json_t *jl = json_object_get(e, "loss_tokens");
        d->loss_tokens = d->tokens;
        if ((jl || m->shard_version == DS_SHARD_VERSION_LOSS) && json_u64_in(jl, d->tokens, &d->loss_tokens))
            MAN_BAD("shards[%zu] (%s): \"loss_tokens\" must be an integer 0..tokens", i, d->file);
        if (json_u64_in(json_object_get(e, "bytes"), DS_SHARD_MAX_FILE_BYTES, &d->bytes) ||
            d->bytes < DS_SHARD_HEADER_BYTES)
            MAN_BAD("shards[%zu] (%s): \"bytes\" must be an integer %u..%llu", i, d->file, DS_SHARD_HEADER_BYTES,
                    (unsigned long long)DS_SHARD_MAX_FILE_BYTES);
        if (parse_hex64(json_string_value(json_object_get(e, "xxh3")), &d->xxh3))
            MAN_BAD("shards[%zu] (%s): \"xxh3\" must be 16 lowercase hex digits", i, d->file);
    }
    /* a shard listed twice would be read (trained on) twice */
    name_idx *ix = malloc((ns ? ns : 1) * sizeof *ix);
    if (!ix) {
        ds_manifest_free(m);
        return DS_ERR_NOMEM;
    }
    for (size_t i = 0; i < ns; i++) ix[i] = (name_idx){m->shards[i].file, i};
    qsort(ix, ns, sizeof *ix, cmp_name_idx);
    for (size_t i = 1; i < ns; i++)
        if (!strcmp(ix[i - 1].name, ix[i].name)) {
            char nm[96];
            snprintf(nm, sizeof nm, "%s", ix[i].name);
            size_t a = ix[i - 1].idx, b = ix[i].idx;
            free(ix);
            MAN_BAD("shard %s is listed twice (shards[%zu] and shards[%zu])", nm, a, b);
        }
    free(ix);
    return DS_OK;
}
#undef MAN_BAD

static int cmp_file_id(const void *a, const void *b) {
    const set_entry *const *x = a, *const *y = b;
    const ds_shard *p = (*x)->sh, *q = (*y)->sh;
    if (p->dev != q->dev) return p->dev < q->dev ? -1 : 1;
    return (p->ino > q->ino) - (p->ino < q->ino);
}

int ds_shardset_open_files(const char *dir, int flags, ds_shardset **out, char *err, size_t errlen) {
    *out = NULL;
    ds_manifest man;
    int rc = ds_manifest_load(dir, &man, err, errlen);
    if (rc != DS_OK) return rc;
    ds_shardset *s = calloc(1, sizeof *s);
    set_entry **byid = NULL;
    if (!s) {
        rc = DS_ERR_NOMEM;
        goto fail;
    }
    snprintf(s->info.tokenizer, sizeof s->info.tokenizer, "%s", man.tokenizer_name);
    memcpy(s->info.fingerprint, man.fingerprint, 32);
    s->info.row_len = man.seq_len;
    s->info.vocab_size = man.vocab_size;
    s->info.eot_id = man.eot_id;
    s->info.pad_id = man.pad_id;
    s->info.bos_id = man.bos_id;
    s->info.eos_id = man.eos_id;
    s->info.dtype_bytes = man.dtype_bytes;
    s->info.shard_version = man.shard_version;
    size_t ns = man.n_shards;
    for (int k = 0; k < 2; k++) {
        s->e[k] = calloc(ns ? ns : 1, sizeof *s->e[k]);
        if (!s->e[k]) {
            rc = DS_ERR_NOMEM;
            goto fail;
        }
    }
    size_t dl = strlen(dir);
    for (size_t i = 0; i < ns; i++) {
        const ds_manifest_shard *ms = &man.shards[i];
        int k = ms->split;
        set_entry *e = &s->e[k][s->n[k]];
        size_t pl = dl + strlen(ms->file) + 2;
        e->path = malloc(pl);
        if (!e->path) {
            rc = DS_ERR_NOMEM;
            goto fail;
        }
        snprintf(e->path, pl, "%s/%s", dir, ms->file);
        s->n[k]++;
        rc = ds_shard_open(e->path, 0, &e->sh, err, errlen);
        if (rc != DS_OK) goto fail;
        const ds_shard_header *h = &e->sh->h;
        const char *what = h->version != man.shard_version                    ? "shard version"
                           : h->n_rows != ms->rows                            ? "rows"
                           : e->sh->map_len != ms->bytes                      ? "file size"
                           : h->row_len != man.seq_len                        ? "row length"
                           : h->vocab_size != man.vocab_size                  ? "vocabulary size"
                           : h->dtype_bytes != man.dtype_bytes                ? "dtype"
                           : h->eot_id != man.eot_id                          ? "EOT id"
                           : h->pad_id != man.pad_id                          ? "pad id"
                           : memcmp(h->fingerprint, man.fingerprint, 32) != 0 ? "tokenizer fingerprint"
                           : ((h->flags & DS_SHARD_F_VAL) != 0) != (k == 1)   ? "split"
                                                                              : NULL;
        if (what) {
            ds_set_err(err, errlen, "%s: %s in the header disagrees with %s", e->path, what, man.path);
            rc = DS_ERR_FORMAT;
            goto fail;
        }
        if (flags & DS_SHARD_OPEN_VERIFY) {
            uint64_t v = XXH3_64bits(e->sh->map, e->sh->map_len);
            if (v != ms->xxh3) {
                ds_set_err(err, errlen, "%s: file checksum %016" PRIx64 " differs from the manifest's %016" PRIx64,
                           e->path, v, ms->xxh3);
                rc = DS_ERR_FORMAT;
                goto fail;
            }
        }
        e->first_row = s->info.rows[k];
        if (__builtin_add_overflow(s->info.rows[k], ms->rows, &s->info.rows[k]) ||
            __builtin_add_overflow(s->info.tokens[k], ms->tokens, &s->info.tokens[k]) ||
            __builtin_add_overflow(s->info.loss_tokens[k], ms->loss_tokens, &s->info.loss_tokens[k])) {
            ds_set_err(err, errlen, "%s: row or token totals overflow", man.path);
            rc = DS_ERR_FORMAT;
            goto fail;
        }
    }
    /* one file under two names (hard or symbolic link) would be read twice */
    byid = malloc((ns ? ns : 1) * sizeof *byid);
    if (!byid) {
        rc = DS_ERR_NOMEM;
        goto fail;
    }
    size_t nb = 0;
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < s->n[k]; i++) byid[nb++] = &s->e[k][i];
    qsort(byid, nb, sizeof *byid, cmp_file_id);
    for (size_t i = 1; i < nb; i++)
        if (cmp_file_id(&byid[i - 1], &byid[i]) == 0) {
            ds_set_err(err, errlen, "%s and %s are the same file: a shard is listed twice in %s", byid[i - 1]->path,
                       byid[i]->path, man.path);
            rc = DS_ERR_FORMAT;
            goto fail;
        }
    free(byid);
    s->info.n_shards[0] = s->n[0];
    s->info.n_shards[1] = s->n[1];
    ds_manifest_free(&man);
    *out = s;
    return DS_OK;
fail:
    free(byid);
    ds_manifest_free(&man);
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
    return ds_shardset_read_msg(s, split, row, tokens, pos_ids, doc_ids, loss_mask, NULL, 0);
}

int ds_shardset_read_msg(const ds_shardset *s, ds_split split, uint64_t row, uint32_t *tokens, uint32_t *pos_ids,
                         uint32_t *doc_ids, uint8_t *loss_mask, char *err, size_t errlen) {
    int k = split != DS_SPLIT_TRAIN;
    if (row >= s->info.rows[k]) {
        ds_set_err(err, errlen, "%s row %" PRIu64 " out of range (%" PRIu64 " rows)", k ? "val" : "train", row,
                   s->info.rows[k]);
        return DS_ERR_ARG;
    }
    size_t lo = 0, hi = s->n[k];
    while (hi - lo > 1) { /* last shard with first_row <= row */
        size_t mid = (lo + hi) / 2;
        if (s->e[k][mid].first_row <= row) lo = mid;
        else hi = mid;
    }
    const set_entry *e = &s->e[k][lo];
    char e2[400];
    int rc = ds_shard_read_msg(e->sh, row - e->first_row, tokens, pos_ids, doc_ids, loss_mask, NULL, err ? e2 : NULL,
                               sizeof e2);
    if (rc != DS_OK) ds_set_err(err, errlen, "%s: %s", e->path, e2);
    return rc;
}

int ds_shard_row_starts(const ds_shard *s, uint64_t row, uint32_t *starts, uint32_t *n_starts) {
    if (row >= s->h.n_rows) return DS_ERR_ARG;
    uint32_t nv, a, b;
    if (row_meta(s, row, &nv, &a, &b, NULL, 0) != DS_OK) return DS_ERR_FORMAT;
    for (uint32_t k = a; k < b; k++) starts[k - a] = get32(s->starts + 4 * k);
    *n_starts = b - a;
    return DS_OK;
}
