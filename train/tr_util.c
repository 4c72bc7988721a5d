/* tr_util.c - status strings, default options, RNG, LR schedule, RSS probes, size parsing,
 * model presets (see tr.h). */
#include "tr.h"
#include "model.h"

#include <ctype.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void tr_train_opts_init(tr_train_opts *o) {
    memset(o, 0, sizeof *o);
    o->model = "tiny";
    o->steps = 100;
    o->seed = 1337;
    o->lr = 1e-3;
    o->lr_min = -1;
    o->warmup = UINT64_MAX;
    o->weight_decay = 0.1f;
    o->grad_clip = 1.0f;
    o->beta1 = 0.9f;
    o->beta2 = 0.95f;
    o->eps = 1e-8f;
    o->sample_temp = 0.8f;
    o->log_every = 1;
    o->nbuf = 2;
}

const char *tr_strerror(int err) {
    switch (err) {
    case TR_OK: return "ok";
    case TR_ERR_NOMEM: return "out of memory";
    case TR_ERR_IO: return "I/O error";
    case TR_ERR_ARG: return "bad argument";
    case TR_ERR_CORRUPT: return "corrupt file";
    case TR_ERR_FINGERPRINT: return "tokenizer fingerprint mismatch";
    case TR_ERR_NOFIT: return "does not fit the memory budget";
    case TR_ERR_NODEVICE: return "device not available";
    case TR_ERR_DATA: return "data cannot serve the request";
    case TR_ERR_INTERNAL: return "internal error";
    default: return "unknown error";
    }
}

/* xoshiro256** seeded with splitmix64. */
static uint64_t splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void tr_rng_seed(tr_rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix(&x);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t tr_rng_u64(tr_rng *r) {
    uint64_t *s = r->s;
    uint64_t res = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return res;
}

double tr_rng_f64(tr_rng *r) { return (double)(tr_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0); }

double tr_lr_at(uint64_t step, uint64_t warmup, uint64_t total, double lr_max, double lr_min) {
    if (warmup > 0 && step < warmup) return lr_max * (double)(step + 1) / (double)warmup;
    if (total <= warmup || step >= total) return total <= warmup ? lr_max : lr_min;
    double p = (double)(step - warmup) / (double)(total - warmup);
    return lr_min + 0.5 * (lr_max - lr_min) * (1.0 + cos(M_PI * p));
}

static uint64_t status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    size_t kl = strlen(key);
    uint64_t v = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl) && line[kl] == ':') {
            v = strtoull(line + kl + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v * 1024;
}

uint64_t tr_peak_rss(void) { return status_kb("VmHWM"); }
uint64_t tr_cur_rss(void) { return status_kb("VmRSS"); }

/* Strict: DIGITS[.DIGITS][K|M|G|T[i][B] | B], nothing else (no sign, space,
 * exponent, hex, nan/inf); the value times its unit must fit in 64 bits. */
int tr_parse_bytes(const char *s, uint64_t *out) {
    if (!s || !(*s >= '0' && *s <= '9')) return TR_ERR_ARG;
    uint64_t whole = 0;
    const char *p = s;
    for (; *p >= '0' && *p <= '9'; p++)
        if (__builtin_mul_overflow(whole, (uint64_t)10, &whole) ||
            __builtin_add_overflow(whole, (uint64_t)(*p - '0'), &whole))
            return TR_ERR_ARG;
    double frac = 0, scale = 0.1;
    if (*p == '.') {
        p++;
        if (!(*p >= '0' && *p <= '9')) return TR_ERR_ARG;
        for (; *p >= '0' && *p <= '9'; p++, scale /= 10) frac += (*p - '0') * scale;
    }
    uint64_t mul = 1;
    char u = (char)toupper((unsigned char)*p);
    if (u == 'K') mul = 1ull << 10;
    else if (u == 'M') mul = 1ull << 20;
    else if (u == 'G') mul = 1ull << 30;
    else if (u == 'T') mul = 1ull << 40;
    else if (u != 'B' && u != 0) return TR_ERR_ARG;
    if (u && u != 'B') {
        p++;
        if (*p == 'i' || *p == 'I') p++;
        if (*p == 'B' || *p == 'b') p++;
    } else if (u == 'B') {
        p++;
    }
    if (*p) return TR_ERR_ARG;
    uint64_t v, part = (uint64_t)(frac * (double)mul + 0.5); /* frac < 1: part <= mul */
    if (__builtin_mul_overflow(whole, mul, &v) || __builtin_add_overflow(v, part, &v)) return TR_ERR_ARG;
    *out = v;
    return TR_OK;
}

int tr_model_preset(const char *name, int *n_layer, int *n_head, int *n_embd) {
    tr_model_config c;
    if (!name || tr_model_config_preset(name, 1, 1, &c) != TR_MODEL_OK) return TR_ERR_ARG;
    *n_layer = c.n_layer;
    *n_head = c.n_head;
    *n_embd = c.d_model;
    return TR_OK;
}

static const char *const k_precision[] = {[TR_FP32] = "fp32", [TR_BF16] = "bf16", [TR_FP16] = "fp16"};
static const char *const k_device[] = {[TR_DEV_CPU] = "cpu", [TR_DEV_CUDA] = "cuda"};
#define N_OF(a) ((int)(sizeof(a) / sizeof(a)[0]))

const char *tr_precision_name(int p) { return p >= 0 && p < N_OF(k_precision) ? k_precision[p] : NULL; }
const char *tr_device_name(int d) { return d >= 0 && d < N_OF(k_device) ? k_device[d] : NULL; }

int tr_precision_parse(const char *name, tr_precision *out) {
    for (int i = 0; name && i < N_OF(k_precision); i++)
        if (!strcmp(name, k_precision[i])) {
            *out = (tr_precision)i;
            return 0;
        }
    return -1;
}

int tr_device_parse(const char *name, tr_device *out) {
    if (name && !strcmp(name, "gpu")) /* the short spelling --device always took */
        name = "cuda";
    for (int i = 0; name && i < N_OF(k_device); i++)
        if (!strcmp(name, k_device[i])) {
            *out = (tr_device)i;
            return 0;
        }
    return -1;
}
