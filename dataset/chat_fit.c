/* chat_fit.c - a conversation fitted into a row (ds_chat_fit, ds_chat.h):
 * render (chat_template.c), encode (chat.c), and under --over-long drop
 * the oldest turns or truncate the last assistant message until it fits.
 * Its own file because it sits above both: the renderer uses the record
 * parser, so fitting cannot live beside the parser without a call circle. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ds.h"
#include "ds_chat.h"
#include "ds_internal.h"
#include "tk.h"

static size_t count_targets(const ds_chat_ids *v) {
    size_t n = 0;
    for (size_t i = 0; i < v->len; i++) n += v->mask[i] != 0;
    return n;
}

static int render_encode(const tk_tokenizer *tok, const ds_chat_template *t, const ds_chat *c,
                         const ds_chat_render_opts *ro, ds_chat_rendered *r, ds_chat_ids *out, char *why,
                         size_t whylen) {
    int rc = ds_chat_render(t, c, ro, r, why, whylen);
    if (rc != DS_CHAT_OK) return rc;
    out->len = 0;
    rc = ds_chat_encode(tok, r, out, why, whylen);
    /* a text record (format auto): every token is a target, as in a text build */
    if (rc == DS_OK && c->format == DS_FMT_TEXT) memset(out->mask, 1, out->len);
    return rc;
}

/* [*s, *e): the oldest turn after the system message that may go: a user
 * message and what follows up to the next user message. 0 when none may:
 * the last turn (the one that ends the conversation, or the prompt before a
 * completion) always stays. */
static int oldest_turn(const ds_chat *c, size_t *s, size_t *e) {
    size_t a = c->n && c->msgs[0].role == DS_ROLE_SYSTEM ? 1 : 0;
    if (a >= c->n || c->msgs[a].completion) return 0;
    size_t b = a + 1;
    while (b < c->n && c->msgs[b].role != DS_ROLE_USER && !c->msgs[b].completion) b++;
    if (b >= c->n || c->msgs[b].completion) return 0;
    *s = a;
    *e = b;
    return 1;
}

/* The first token of the last run of assistant targets in v (the last
 * assistant message's content under loss_on assistant); v->len when none. */
static size_t last_assistant_start(const ds_chat_ids *v) {
    size_t i = v->len;
    while (i > 0 && !v->mask[i - 1]) i--;
    if (!i) return v->len;
    while (i > 0 && v->mask[i - 1]) i--;
    return i;
}

static int fit_out(ds_chat_fit_result *res, ds_chat_fate fate, ds_chat_ids *out, char *why, size_t whylen,
                   const char *fmt, size_t a, size_t b) {
    res->fate = fate;
    if (fate == DS_CHAT_FATE_DROPPED || fate == DS_CHAT_FATE_NO_LOSS) out->len = 0;
    res->loss_tokens = count_targets(out);
    if (fmt && why && whylen) snprintf(why, whylen, fmt, a, b);
    return DS_CHAT_OK;
}

int ds_chat_fit(const tk_tokenizer *tok, const ds_chat_template *t, ds_chat *c, const ds_chat_render_opts *ro,
                ds_chat_fit_policy policy, size_t budget, ds_chat_rendered *r, ds_chat_ids *out,
                ds_chat_fit_result *res, char *why, size_t whylen) {
    memset(res, 0, sizeof *res);
    if (why && whylen) why[0] = 0;
    int rc = render_encode(tok, t, c, ro, r, out, why, whylen);
    if (rc != DS_OK) return rc;
    res->tokens = out->len;
    if (out->len <= budget || policy == DS_CHAT_FIT_KEEP) {
        if (!count_targets(out))
            return fit_out(res, DS_CHAT_FATE_NO_LOSS, out, why, whylen, "%zu tokens, none of them a target%.0zu",
                           res->tokens, 0);
        return fit_out(res, DS_CHAT_FATE_WHOLE, out, why, whylen, NULL, 0, 0);
    }
    if (policy == DS_CHAT_FIT_DROP)
        return fit_out(res, DS_CHAT_FATE_DROPPED, out, why, whylen, "%zu tokens > %zu (--over-long drop)", res->tokens,
                       budget);
    if (policy == DS_CHAT_FIT_DROP_TURNS) {
        size_t s, e;
        while (out->len > budget && oldest_turn(c, &s, &e)) {
            memmove(c->msgs + s, c->msgs + e, (c->n - e) * sizeof *c->msgs);
            c->n -= e - s;
            res->turns_dropped++;
            if ((rc = render_encode(tok, t, c, ro, r, out, why, whylen)) != DS_OK) return rc;
        }
        if (out->len > budget)
            return fit_out(res, DS_CHAT_FATE_DROPPED, out, why, whylen,
                           "its last turn alone is %zu tokens > %zu (--over-long drop-turns)", out->len, budget);
        if (!count_targets(out))
            return fit_out(res, DS_CHAT_FATE_NO_LOSS, out, why, whylen,
                           "no target token left after dropping %zu turn(s)%.0zu", res->turns_dropped, 0);
        return fit_out(res, res->turns_dropped ? DS_CHAT_FATE_TURNS_DROPPED : DS_CHAT_FATE_WHOLE, out, why, whylen,
                       NULL, 0, 0);
    }
    /* truncate: a token prefix, so no special token is ever split and the ids
     * are those of the whole conversation; the cut must fall inside the last
     * assistant message or after it (its end-of-turn then stays when it fits) */
    size_t start;
    if (c->format == DS_FMT_TEXT) {
        start = 0;
    } else if (ro->loss_on == DS_LOSS_ASSISTANT || (ro->loss_on == DS_LOSS_DEFAULT && c->format == DS_FMT_CHAT)) {
        start = last_assistant_start(out);
    } else { /* the mask in force is not the assistant's: find its last message with one */
        ds_chat_render_opts ao = *ro;
        ao.loss_on = DS_LOSS_ASSISTANT;
        ds_chat_rendered r2 = {0};
        ds_chat_ids v2 = {0};
        rc = render_encode(tok, t, c, &ao, &r2, &v2, why, whylen);
        start = rc == DS_OK ? last_assistant_start(&v2) : 0;
        ds_chat_rendered_free(&r2);
        ds_chat_ids_free(&v2);
        if (rc != DS_OK) return rc;
    }
    if (start >= budget)
        return fit_out(res, DS_CHAT_FATE_DROPPED, out, why, whylen,
                       "%zu tokens before its last assistant message, not < %zu (--over-long truncate)", start, budget);
    out->len = budget;
    if (!count_targets(out))
        return fit_out(res, DS_CHAT_FATE_NO_LOSS, out, why, whylen, "no target token in its first %zu tokens%.0zu",
                       budget, 0);
    return fit_out(res, DS_CHAT_FATE_TRUNCATED, out, why, whylen, NULL, 0, 0);
}
