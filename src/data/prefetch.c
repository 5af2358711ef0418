/*  prefetch.c: a ring of slots between one producer thread and the caller, under one mutex.
 *  `ready` slots wait from `head` on; the caller holds at most one more (`held`); the thread fills
 *  `tail` whenever ready + held < slots. The batcher is touched only by the thread once started, so
 *  its order of calls, and with it the stream, is exactly the caller's would have been. */
#include "data/prefetch.h"

#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"

typedef struct uform_prefetch_slot_t {
    uint8_t *kinds, *labels, *patches; /* patches: the image rows, in the batch's dtype */
    uint32_t *values, *anchors, *candidates;
    int32_t *segments, *positions, *targets;
    uform_batch_t batch;         /* pointing into the buffers above */
    uform_batcher_state_t state; /* the batcher's state right after this batch */
} uform_prefetch_slot_t;

struct uform_prefetcher_t {
    uform_produce_t produce;
    void *context;
    uform_batcher_t *batcher; /* NULL for a custom source */
    size_t rows, columns, anchors_capacity, candidates_capacity;
    int has_targets;
    size_t patch_bytes; /* bytes of one image patch value (2 BF16, 4 Float32); 0: batches hold no images */

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

static uform_status_t uform_batcher_produce_(void *context, uform_batch_t *batch) {
    return uform_batcher_next((uform_batcher_t *)context, batch);
}

/* Deep copy of `source` into `slot`, or a failure when it does not fit the capacities. */
static uform_status_t uform_slot_fill_(uform_prefetcher_t const *prefetcher, uform_prefetch_slot_t *slot,
                                       uform_batch_t const *source) {
    uform_grid_t const *grid = &source->grid;
    if (grid->rows > prefetcher->rows || grid->columns != prefetcher->columns ||
        source->anchors_count > prefetcher->anchors_capacity ||
        source->candidates_count > prefetcher->candidates_capacity || (source->targets && !prefetcher->has_targets))
        return uform_fail(uform_shape_k,
                          "uform_prefetcher: a batch of %zu x %zu cells, %zu anchors, %zu candidates exceeds the "
                          "slots' %zu x %zu, %zu, %zu",
                          grid->rows, grid->columns, source->anchors_count, source->candidates_count, prefetcher->rows,
                          prefetcher->columns, prefetcher->anchors_capacity, prefetcher->candidates_capacity);
    size_t cells = grid->rows * grid->columns;
    memcpy(slot->kinds, grid->kinds, cells);
    memcpy(slot->values, grid->values, cells * sizeof(uint32_t));
    memcpy(slot->segments, grid->segments, cells * sizeof(int32_t));
    memcpy(slot->positions, grid->positions, cells * 3 * sizeof(int32_t));
    if (source->targets) memcpy(slot->targets, source->targets, cells * sizeof(int32_t));
    if (source->anchors_count) memcpy(slot->anchors, source->anchors, source->anchors_count * sizeof(uint32_t));
    if (source->candidates_count)
        memcpy(slot->candidates, source->candidates, source->candidates_count * sizeof(uint32_t));
    size_t labels = source->labels ? source->anchors_count * source->candidates_count : 0;
    if (labels) memcpy(slot->labels, source->labels, labels);
    uform_media_t images = grid->media[0];
    size_t value_bytes = images.dtype == uform_media_bf16_k ? 2 : 4;
    if (images.data && (value_bytes > prefetcher->patch_bytes || images.count > cells + 1))
        return uform_fail(uform_shape_k, "uform_prefetcher: a batch of %zu image patches (%zu-byte values) exceeds the slots' %zu (%zu-byte)",
                          images.count, value_bytes, prefetcher->patch_bytes ? cells + 1 : 0, prefetcher->patch_bytes);
    if (images.data) memcpy(slot->patches, images.data, images.count * 1024 * value_bytes);
    slot->batch = (uform_batch_t){
        .grid = {.rows = grid->rows, .columns = grid->columns, .kinds = slot->kinds, .values = slot->values,
                 .segments = slot->segments, .positions = slot->positions,
                 .media = {{.data = images.data ? slot->patches : NULL, .count = images.count, .dtype = images.dtype}}},
        .targets = source->targets ? slot->targets : NULL,
        .anchors = source->anchors ? slot->anchors : NULL,
        .anchors_count = source->anchors_count,
        .candidates = source->candidates ? slot->candidates : NULL,
        .candidates_count = source->candidates_count,
        .labels = source->labels ? slot->labels : NULL,
    };
    if (prefetcher->batcher) uform_batcher_save(prefetcher->batcher, &slot->state);
    else memset(&slot->state, 0, sizeof(slot->state));
    return uform_ok_k;
}

/* Produces one batch into the tail slot; the caller has checked that the slot is free. */
static uform_status_t uform_produce_one_(uform_prefetcher_t *prefetcher, uform_prefetch_slot_t *slot) {
    uform_batch_t batch;
    uform_status_t status = prefetcher->produce(prefetcher->context, &batch);
    if (status != uform_ok_k) return status;
    return uform_slot_fill_(prefetcher, slot, &batch);
}

static void *uform_prefetch_thread_(void *argument) {
    uform_prefetcher_t *prefetcher = argument;
    pthread_mutex_lock(&prefetcher->mutex);
    for (;;) {
        while (!prefetcher->stop && prefetcher->ready + (size_t)prefetcher->held >= prefetcher->slots_count)
            pthread_cond_wait(&prefetcher->changed, &prefetcher->mutex);
        if (prefetcher->stop) break;
        uform_prefetch_slot_t *slot = &prefetcher->slots[prefetcher->tail];
        pthread_mutex_unlock(&prefetcher->mutex); /* the slot is ours: neither ready nor held */
        uform_status_t status = uform_produce_one_(prefetcher, slot);
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

static void uform_slots_free_(uform_prefetcher_t *prefetcher) {
    if (!prefetcher->slots) return;
    for (size_t i = 0; i < prefetcher->slots_count; ++i) {
        uform_prefetch_slot_t *slot = &prefetcher->slots[i];
        free(slot->kinds), free(slot->values), free(slot->segments), free(slot->positions), free(slot->targets);
        free(slot->anchors), free(slot->candidates), free(slot->labels), free(slot->patches);
    }
    free(prefetcher->slots);
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
    uform_slots_free_(prefetcher);
    free(prefetcher);
}

/* Allocates the prefetcher and its slots from the capacities already set in `template`. */
static uform_status_t uform_prefetcher_alloc_(uform_prefetcher_t const *template, uform_prefetcher_t **result) {
    uform_prefetcher_t *prefetcher = calloc(1, sizeof(*prefetcher));
    if (!prefetcher) return uform_fail(uform_out_of_memory_k, "uform_prefetcher_create: out of memory");
    *prefetcher = *template;
    pthread_mutex_init(&prefetcher->mutex, NULL);
    pthread_cond_init(&prefetcher->changed, NULL);
    prefetcher->slots = calloc(prefetcher->slots_count, sizeof(uform_prefetch_slot_t));
    int ok = prefetcher->slots != NULL;
    size_t cells = prefetcher->rows * prefetcher->columns;
    size_t anchors = prefetcher->anchors_capacity, candidates = prefetcher->candidates_capacity;
    for (size_t i = 0; ok && i < prefetcher->slots_count; ++i) {
        uform_prefetch_slot_t *slot = &prefetcher->slots[i];
        /* +1: a zero-capacity buffer still gets a distinct, freeable pointer */
        slot->kinds = malloc(cells + 1);
        slot->values = malloc(cells * sizeof(uint32_t) + 1);
        slot->segments = malloc(cells * sizeof(int32_t) + 1);
        slot->positions = malloc(cells * 3 * sizeof(int32_t) + 1);
        slot->targets = prefetcher->has_targets ? malloc(cells * sizeof(int32_t) + 1) : NULL;
        slot->anchors = malloc(anchors * sizeof(uint32_t) + 1);
        slot->candidates = malloc(candidates * sizeof(uint32_t) + 1);
        slot->labels = malloc(anchors * candidates + 1);
        slot->patches = prefetcher->patch_bytes ? malloc((cells + 1) * 1024 * prefetcher->patch_bytes) : NULL; /* + MLM's blank */
        ok = (slot->patches || !prefetcher->patch_bytes) && slot->kinds && slot->values && slot->segments && slot->positions &&
             (slot->targets || !prefetcher->has_targets) && slot->anchors && slot->candidates && slot->labels;
    }
    if (!ok) {
        uform_prefetcher_close(prefetcher);
        return uform_fail(uform_out_of_memory_k, "uform_prefetcher_create: out of memory for %zu slots of %zu cells",
                          template->slots_count, cells);
    }
    *result = prefetcher;
    return uform_ok_k;
}

static uform_status_t uform_prefetcher_start_(uform_prefetcher_t *prefetcher) {
    if (pthread_create(&prefetcher->thread, NULL, uform_prefetch_thread_, prefetcher) != 0)
        return uform_fail(uform_out_of_memory_k, "uform_prefetcher_create: cannot start the thread");
    prefetcher->started = 1;
    return uform_ok_k;
}

uform_status_t uform_prefetcher_create(uform_batcher_t *batcher, size_t slots, uform_prefetcher_t **result) {
    if (!batcher || !result) return uform_fail(uform_invalid_argument_k, "uform_prefetcher_create: NULL argument");
    *result = NULL;
    if (slots == 0) slots = 2;
    if (slots < 2) return uform_fail(uform_invalid_argument_k, "uform_prefetcher_create: %zu slots, need >= 2", slots);
    /* The batcher tells its capacities but not its shape: the first batch, taken here on the
     * caller's thread, gives rows, columns and whether there are targets, and is the first one
     * handed out, so the stream is unchanged. */
    uform_batcher_state_t initial;
    uform_batcher_save(batcher, &initial);
    uform_batch_t first;
    UFORM_TRY(uform_batcher_next(batcher, &first));
    uform_batcher_stats_t stats;
    uform_batcher_stats(batcher, &stats);
    uform_prefetcher_t template = {
        .produce = uform_batcher_produce_, .context = batcher, .batcher = batcher,
        .rows = first.grid.rows, .columns = first.grid.columns,
        .anchors_capacity = stats.anchors_capacity, .candidates_capacity = stats.candidates_capacity,
        .has_targets = first.targets != NULL, .slots_count = slots, .returned = initial,
        .patch_bytes = stats.image_sides ? 2 : 0, /* the batcher's patches are BF16 */
    };
    if (first.anchors_count > template.anchors_capacity) template.anchors_capacity = first.anchors_count;
    if (first.candidates_count > template.candidates_capacity) template.candidates_capacity = first.candidates_count;
    uform_prefetcher_t *prefetcher;
    UFORM_TRY(uform_prefetcher_alloc_(&template, &prefetcher));
    uform_status_t status = uform_slot_fill_(prefetcher, &prefetcher->slots[0], &first);
    if (status == uform_ok_k) {
        prefetcher->tail = 1;
        prefetcher->ready = 1;
        status = uform_prefetcher_start_(prefetcher);
    }
    if (status != uform_ok_k) {
        uform_prefetcher_close(prefetcher);
        return status;
    }
    *result = prefetcher;
    return uform_ok_k;
}

uform_status_t uform_prefetcher_create_from(uform_produce_t produce, void *context, uform_batch_t const *shape,
                                            size_t slots, uform_prefetcher_t **result) {
    if (!produce || !shape || !result)
        return uform_fail(uform_invalid_argument_k, "uform_prefetcher_create_from: NULL argument");
    *result = NULL;
    if (slots == 0) slots = 2;
    if (slots < 2)
        return uform_fail(uform_invalid_argument_k, "uform_prefetcher_create_from: %zu slots, need >= 2", slots);
    uform_prefetcher_t template = {
        .produce = produce, .context = context,
        .rows = shape->grid.rows, .columns = shape->grid.columns,
        .anchors_capacity = shape->anchors_count, .candidates_capacity = shape->candidates_count,
        .has_targets = shape->targets != NULL, .slots_count = slots,
        .patch_bytes = !shape->grid.media[0].data ? 0 : shape->grid.media[0].dtype == uform_media_bf16_k ? 2 : 4,
    };
    uform_prefetcher_t *prefetcher;
    UFORM_TRY(uform_prefetcher_alloc_(&template, &prefetcher));
    uform_status_t status = uform_prefetcher_start_(prefetcher);
    if (status != uform_ok_k) {
        uform_prefetcher_close(prefetcher);
        return status;
    }
    *result = prefetcher;
    return uform_ok_k;
}

uform_status_t uform_prefetcher_next(uform_prefetcher_t *prefetcher, uform_batch_t *batch) {
    if (!prefetcher || !batch) return uform_fail(uform_invalid_argument_k, "uform_prefetcher_next: NULL argument");
    pthread_mutex_lock(&prefetcher->mutex);
    if (prefetcher->held) { /* the previous batch is given back: its slot may be filled again */
        prefetcher->held = 0;
        pthread_cond_broadcast(&prefetcher->changed);
    }
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
