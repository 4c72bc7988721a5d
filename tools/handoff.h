/* handoff.h - two slots passed back and forth between a producer thread and
 * a consumer (double buffering). Slot k is "full" when the producer has
 * filled it and the consumer has not yet released it. Used by the reader
 * threads of `encode` and `build` and by the writer thread of `encode`. */
#ifndef MKSHARDS_HANDOFF_H
#define MKSHARDS_HANDOFF_H

#include <pthread.h>

typedef struct {
    int full[2];
    int stop; /* the other side gave up: waits return at once */
    pthread_mutex_t mu;
    pthread_cond_t cv;
} handoff;

void handoff_init(handoff *h);
void handoff_destroy(handoff *h);
/* Producer: wait until slot k is free. 0 = go ahead, -1 = stopped. */
int handoff_wait_free(handoff *h, unsigned k);
/* Producer: slot k is filled. */
void handoff_publish(handoff *h, unsigned k);
/* Consumer: wait until slot k is filled. 0 = filled, -1 = stopped first. */
int handoff_wait_full(handoff *h, unsigned k);
/* Consumer: slot k may be refilled. */
void handoff_release(handoff *h, unsigned k);
/* A producer thread's whole loop: fill slots 0, 1, 0, ... in turn with
 * fill(ctx, k), which returns nonzero for the last one; stops early if the
 * consumer gave up. */
void handoff_produce(handoff *h, int (*fill)(void *ctx, unsigned k), void *ctx);
/* Either side: make every wait return (error paths). */
void handoff_stop(handoff *h);

#endif
