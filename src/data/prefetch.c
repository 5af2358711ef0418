/*  prefetch.c: a ring of slots between one producer thread and the caller, under one mutex.
 *  `ready` slots wait from `head` on; the caller holds at most one more (`held`, the slot before
 *  `head`); the thread fills `tail` whenever ready + held < slots, outside the mutex, as no one else
 *  touches that slot. The batcher is touched only by the thread once started, so its order of
 *  calls, and with it the stream, is exactly the caller's would have been. */
#include "data/prefetch.h"

#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"

typedef struct uform_prefetch_slot_t {
    uform_batch_t batch;         /* pointing into the slot's buffers */
    uform_batcher_state_t state; /* the batcher's state right after this batch */
} uform_prefetch_slot_t;

struct uform_prefetcher_t {
    uform_produce_t produce;
    void *context;
    uform_batcher_t *batcher;        /* NULL for a custom source */
    uform_batch_buffers_t **buffers; /* [slots_count] the batcher's batches, one set per slot */

    uform_prefetch_slot_t *slots;
    size_t slots_count, head, tail, ready;
    int held, stop, failed, started;
    uform_status_t error;
    char message[1024];
    uform_batcher_state_t returned; /* state after the last batch handed out */

    pthread_mutex_t mutex;
    pthread_cond_t changed;
    pthread_t thread;
};

static uform_status_t uform_batcher_produce_(void *context, size_t slot, uform_batch_t *batch) {
    uform_prefetcher_t *prefetcher = context;
    return uform_batcher_next_into(prefetcher->batcher, prefetcher->buffers[slot], batch);
}

/* Produces one batch into slot `index`; the caller has checked that the slot is free. */
static uform_status_t uform_produce_one_(uform_prefetcher_t *prefetcher, size_t index) {
    uform_prefetch_slot_t *slot = &prefetcher->slots[index];
    UFORM_TRY(prefetcher->produce(prefetcher->context, index, &slot->batch));
    if (prefetcher->batcher) uform_batcher_save(prefetcher->batcher, &slot->state);
    else memset(&slot->state, 0, sizeof(slot->state));
    return uform_ok_k;
}

static void *uform_prefetch_thread_(void *argument) {
    uform_prefetcher_t *prefetcher = argument;
    pthread_mutex_lock(&prefetcher->mutex);
    for (;;) {
        while (!prefetcher->stop && prefetcher->ready + (size_t)prefetcher->held >= prefetcher->slots_count)
            pthread_cond_wait(&prefetcher->changed, &prefetcher->mutex);
        if (prefetcher->stop) break;
        size_t index = prefetcher->tail;
        pthread_mutex_unlock(&prefetcher->mutex); /* the slot is ours: neither ready nor held */
        uform_status_t status = uform_produce_one_(prefetcher, index);
        pthread_mutex_lock(&prefetcher->mutex);
        if (status != uform_ok_k) {
            /* The message lives in this thread's storage: copy it for the caller's thread. */
            prefetcher->failed = 1;
            prefetcher->error = status;
            snprintf(prefetcher->message, sizeof(prefetcher->message), "%s", uform_last_error());
            pthread_cond_broadcast(&prefetcher->changed);
            break;
        }
        prefetcher->tail = (prefetcher->tail + 1) % prefetcher->slots_count;
        prefetcher->ready++;
        pthread_cond_broadcast(&prefetcher->changed);
    }
    pthread_mutex_unlock(&prefetcher->mutex);
    return NULL;
}

void uform_prefetcher_close(uform_prefetcher_t *prefetcher) {
    if (!prefetcher) return;
    if (prefetcher->started) {
        pthread_mutex_lock(&prefetcher->mutex);
        prefetcher->stop = 1;
        pthread_cond_broadcast(&prefetcher->changed);
        pthread_mutex_unlock(&prefetcher->mutex);
        pthread_join(prefetcher->thread, NULL);
    }
    pthread_cond_destroy(&prefetcher->changed);
    pthread_mutex_destroy(&prefetcher->mutex);
    for (size_t i = 0; prefetcher->buffers && i < prefetcher->slots_count; ++i)
        uform_batch_buffers_close(prefetcher->buffers[i]);
    free(prefetcher->buffers);
    free(prefetcher->slots);
    free(prefetcher);
}

/* The prefetcher and its slots (and for a batcher, each slot's buffers), its thread started. */
static uform_status_t uform_prefetcher_start_(uform_produce_t produce, void *context, uform_batcher_t *batcher,
                                              size_t slots, uform_prefetcher_t **result) {
    if (slots == 0) slots = 2;
    if (slots < 2) return uform_fail(uform_invalid_argument_k, "uform_prefetcher_create: %zu slots, need >= 2", slots);
    uform_prefetcher_t *prefetcher = calloc(1, sizeof(*prefetcher));
    if (!prefetcher) return uform_fail(uform_out_of_memory_k, "uform_prefetcher_create: out of memory");
    *prefetcher = (uform_prefetcher_t){.produce = produce, .context = context, .batcher = batcher, .slots_count = slots};
    pthread_mutex_init(&prefetcher->mutex, NULL);
    pthread_cond_init(&prefetcher->changed, NULL);
    uform_status_t status = uform_ok_k;
    prefetcher->slots = calloc(slots, sizeof(uform_prefetch_slot_t));
    if (!prefetcher->slots) status = uform_fail(uform_out_of_memory_k, "uform_prefetcher_create: out of memory for %zu slots", slots);
    if (batcher && status == uform_ok_k) {
        prefetcher->context = prefetcher;
        uform_batcher_save(batcher, &prefetcher->returned);
        prefetcher->buffers = calloc(slots, sizeof(uform_batch_buffers_t *));
        if (!prefetcher->buffers) status = uform_fail(uform_out_of_memory_k, "uform_prefetcher_create: out of memory");
        for (size_t i = 0; status == uform_ok_k && i < slots; ++i)
            status = uform_batch_buffers_create(batcher, &prefetcher->buffers[i]);
    }
    if (status == uform_ok_k && pthread_create(&prefetcher->thread, NULL, uform_prefetch_thread_, prefetcher) != 0)
        status = uform_fail(uform_out_of_memory_k, "uform_prefetcher_create: cannot start the thread");
    if (status != uform_ok_k) {
        uform_prefetcher_close(prefetcher);
        return status;
    }
    prefetcher->started = 1;
    *result = prefetcher;
    return uform_ok_k;
}

uform_status_t uform_prefetcher_create(uform_batcher_t *batcher, size_t slots, uform_prefetcher_t **result) {
    if (!batcher || !result) return uform_fail(uform_invalid_argument_k, "uform_prefetcher_create: NULL argument");
    *result = NULL;
    return uform_prefetcher_start_(uform_batcher_produce_, NULL, batcher, slots, result);
}

uform_status_t uform_prefetcher_create_from(uform_produce_t produce, void *context, size_t slots,
                                            uform_prefetcher_t **result) {
    if (!produce || !result) return uform_fail(uform_invalid_argument_k, "uform_prefetcher_create_from: NULL argument");
    *result = NULL;
    return uform_prefetcher_start_(produce, context, NULL, slots, result);
}

void uform_prefetcher_release(uform_prefetcher_t *prefetcher) {
    if (!prefetcher) return;
    pthread_mutex_lock(&prefetcher->mutex);
    if (prefetcher->held) { /* its slot may be filled again */
        prefetcher->held = 0;
        pthread_cond_broadcast(&prefetcher->changed);
    }
    pthread_mutex_unlock(&prefetcher->mutex);
}

uform_status_t uform_prefetcher_next(uform_prefetcher_t *prefetcher, uform_batch_t *batch) {
    if (!prefetcher || !batch) return uform_fail(uform_invalid_argument_k, "uform_prefetcher_next: NULL argument");
    uform_prefetcher_release(prefetcher);
    pthread_mutex_lock(&prefetcher->mutex);
    while (!prefetcher->ready && !prefetcher->failed) pthread_cond_wait(&prefetcher->changed, &prefetcher->mutex);
    if (!prefetcher->ready) {
        uform_status_t error = prefetcher->error;
        pthread_mutex_unlock(&prefetcher->mutex);
        return uform_fail(error, "%s", prefetcher->message);
    }
    uform_prefetch_slot_t *slot = &prefetcher->slots[prefetcher->head];
    prefetcher->head = (prefetcher->head + 1) % prefetcher->slots_count;
    prefetcher->ready--;
    prefetcher->held = 1;
    prefetcher->returned = slot->state;
    *batch = slot->batch;
    pthread_mutex_unlock(&prefetcher->mutex);
    return uform_ok_k;
}

void uform_prefetcher_save(uform_prefetcher_t const *prefetcher, uform_batcher_state_t *state) {
    *state = prefetcher->returned; /* written only by the caller's own thread, in next */
}
