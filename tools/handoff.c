/* handoff.c - see handoff.h. */
#include "handoff.h"

#include <string.h>

void handoff_init(handoff *h) {
    memset(h->full, 0, sizeof h->full);
    h->stop = 0;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
}

void handoff_destroy(handoff *h) {
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
}

static void set_full(handoff *h, unsigned k, int v) {
    pthread_mutex_lock(&h->mu);
    h->full[k] = v;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

int handoff_wait_free(handoff *h, unsigned k) {
    pthread_mutex_lock(&h->mu);
    while (h->full[k] && !h->stop) pthread_cond_wait(&h->cv, &h->mu);
    int rc = h->stop ? -1 : 0;
    pthread_mutex_unlock(&h->mu);
    return rc;
}

int handoff_wait_full(handoff *h, unsigned k) {
    pthread_mutex_lock(&h->mu);
    while (!h->full[k] && !h->stop) pthread_cond_wait(&h->cv, &h->mu);
    int rc = h->full[k] ? 0 : -1;
    pthread_mutex_unlock(&h->mu);
    return rc;
}

void handoff_publish(handoff *h, unsigned k) { set_full(h, k, 1); }
void handoff_release(handoff *h, unsigned k) { set_full(h, k, 0); }

void handoff_stop(handoff *h) {
    pthread_mutex_lock(&h->mu);
    h->stop = 1;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

void handoff_produce(handoff *h, int (*fill)(void *ctx, unsigned k), void *ctx) {
    for (unsigned k = 0;; k ^= 1) {
        if (handoff_wait_free(h, k)) return; /* the consumer gave up */
        int last = fill(ctx, k);
        handoff_publish(h, k);
        if (last) return;
    }
}
