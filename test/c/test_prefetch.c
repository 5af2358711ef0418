/*  test_prefetch.c: the prefetcher against the batcher it wraps: the same batches bit for bit, image
 *  patches included (MLM and contrastive, texts and images, 2 to 4 slots, 50 to 200 batches each,
 *  with a caller slower and faster than the thread, releasing early or not), the saved state of the
 *  batches handed out, a lent batch left untouched while the thread runs ahead and its slot refilled
 *  only once handed back, closing while the thread runs, and a failure of the source arriving on
 *  the caller's thread with its message after the batches before it. Prints "N passed, M failed"
 *  and exits non-zero on any failure.
 *
 *  Build and run: cmake --build build --target test_prefetch && ./build/test_prefetch
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/numeric.h"
#include "core/status.h"
#include "data/batcher.h"
#include "data/mixture.h"
#include "data/prefetch.h"
#include "check.h"
#include "png_file.h"

/* Random lowercase words, `low`..`high` bytes per text. */
static void random_text(FILE *file, uform_rng_t *rng, size_t low, size_t high) {
    size_t length = low + (size_t)(uform_rng_next(rng) % (high - low + 1));
    for (size_t i = 0; i < length; ++i)
        fputc(i % 7 == 6 ? ' ' : 'a' + (int)(uform_rng_next(rng) % 26), file);
}

static void write_corpora(void) {
    uform_rng_t rng = {7};
    FILE *texts = fopen(path_in("texts.jsonl"), "w"), *pairs = fopen(path_in("pairs.jsonl"), "w");
    if (!texts || !pairs) {
        perror("fopen");
        exit(2);
    }
    for (int i = 0; i < 400; ++i) {
        fputs("{\"text\": \"", texts);
        random_text(texts, &rng, 1, 300);
        fputs("\"}\n", texts);
        fputs("{\"query\": \"", pairs);
        random_text(pairs, &rng, 4, 60);
        fputs("\", \"positives\": [\"", pairs);
        random_text(pairs, &rng, 4, 80);
        fputs("\"]", pairs);
        if (i % 3 == 0) {
            fputs(", \"negatives\": [\"", pairs);
            random_text(pairs, &rng, 4, 80);
            fputs("\"]", pairs);
        }
        fputs("}\n", pairs);
    }
    fclose(texts);
    fclose(pairs);
    FILE *mlm = fopen(path_in("mlm.json"), "w"), *contrastive = fopen(path_in("contrastive.json"), "w");
    fputs("{\"objective\": \"mlm\", \"columns\": 256, \"sources\": [{\"path\": \"texts.jsonl\"}]}", mlm);
    fputs("{\"objective\": \"contrastive\", \"columns\": 256, \"sources\": [{\"path\": \"pairs.jsonl\"}]}", contrastive);
    fclose(mlm);
    fclose(contrastive);
}

/* Twelve images of 1 to 16 patches (some resized), pair records with image queries, positives and
 * negatives, and MLM records mixing images with texts. */
static void write_image_corpora(void) {
    uform_rng_t rng = {11};
    char name[32];
    for (unsigned i = 0; i < 12; ++i) {
        snprintf(name, sizeof(name), "p%u.png", i);
        write_png(name, 16 + 8 * (i % 5), 16 + 12 * (i % 4), i);
    }
    FILE *pairs = fopen(path_in("image_pairs.jsonl"), "w"), *texts = fopen(path_in("image_texts.jsonl"), "w");
    if (!pairs || !texts) {
        perror("fopen");
        exit(2);
    }
    for (int i = 0; i < 120; ++i) {
        if (i % 2) fprintf(pairs, "{\"query\": {\"image\": \"p%d.png\"}, \"positives\": [\"", i % 12);
        else {
            fputs("{\"query\": \"", pairs);
            random_text(pairs, &rng, 4, 40);
            fprintf(pairs, "\", \"positives\": [{\"image\": \"p%d.png\"}, \"", (i * 5) % 12);
        }
        random_text(pairs, &rng, 4, 30);
        fputs("\"]", pairs);
        if (i % 3 == 0) fprintf(pairs, ", \"negatives\": [{\"image\": \"p%d.png\"}]", (i * 7 + 1) % 12);
        fputs("}\n", pairs);
        if (i % 3) fprintf(texts, "{\"image\": \"p%d.png\"}\n", (i * 11) % 12);
        else {
            fputs("{\"text\": \"", texts);
            random_text(texts, &rng, 1, 60);
            fputs("\"}\n", texts);
        }
    }
    fclose(pairs);
    fclose(texts);
    FILE *mlm = fopen(path_in("image_mlm.json"), "w"), *contrastive = fopen(path_in("image_contrastive.json"), "w");
    fputs("{\"objective\": \"mlm\", \"columns\": 64, \"sources\": [{\"path\": \"image_texts.jsonl\"}]}", mlm);
    fputs("{\"objective\": \"contrastive\", \"columns\": 64, \"sources\": [{\"path\": \"image_pairs.jsonl\"}]}",
          contrastive);
    fclose(mlm);
    fclose(contrastive);
}

/* Two batches equal in every array, padding included. */
static int same_batch(uform_batch_t const *a, uform_batch_t const *b) {
    size_t cells = a->grid.rows * a->grid.columns;
    if (a->grid.rows != b->grid.rows || a->grid.columns != b->grid.columns) return 0;
    if (a->anchors_count != b->anchors_count || a->candidates_count != b->candidates_count) return 0;
    if (!a->targets != !b->targets || !a->anchors != !b->anchors || !a->candidates != !b->candidates ||
        !a->labels != !b->labels)
        return 0;
    int same = !memcmp(a->grid.kinds, b->grid.kinds, cells) &&
               !memcmp(a->grid.values, b->grid.values, cells * 4) &&
               !memcmp(a->grid.segments, b->grid.segments, cells * 4) &&
               !memcmp(a->grid.positions, b->grid.positions, cells * 12);
    if (a->targets) same = same && !memcmp(a->targets, b->targets, cells * 4);
    if (a->anchors_count) same = same && !memcmp(a->anchors, b->anchors, a->anchors_count * 4);
    if (a->candidates_count) same = same && !memcmp(a->candidates, b->candidates, a->candidates_count * 4);
    if (a->labels) same = same && !memcmp(a->labels, b->labels, a->anchors_count * a->candidates_count);
    uform_media_t const *x = &a->grid.media[0], *y = &b->grid.media[0];
    if (!x->data != !y->data || x->count != y->count || x->dtype != y->dtype) return 0;
    if (x->data) same = same && !memcmp(x->data, y->data, x->count * 1024 * (x->dtype == uform_media_bf16_k ? 2 : 4));
    return same;
}

static void pause_us(long microseconds) {
    struct timespec wait = {0, microseconds * 1000};
    nanosleep(&wait, NULL);
}

/* `batches` batches through a prefetcher against as many straight from a twin batcher; with
 * `release` each batch is handed back as soon as it is compared. */
static void test_identical(char const *mixture_name, size_t slots, long caller_us, int batches, int release) {
    uform_mixture_t mixture;
    CHECK(uform_mixture_read(path_in(mixture_name), &mixture) == uform_ok_k);
    uform_batcher_options_t options = {.rows = 4, .seed = 1234};
    uform_batcher_t *direct = NULL, *wrapped = NULL;
    CHECK(uform_batcher_create(&mixture, &options, &direct) == uform_ok_k);
    CHECK(uform_batcher_create(&mixture, &options, &wrapped) == uform_ok_k);
    uform_prefetcher_t *prefetcher = NULL;
    CHECK(uform_prefetcher_create(wrapped, slots, &prefetcher) == uform_ok_k);
    if (!direct || !prefetcher) return;
    int same = 1, states = 1, pairs = mixture.objective != uform_objective_mlm_k, anchors = 1, images = 0;
    for (int i = 0; i < batches; ++i) {
        uform_batch_t expected, got;
        CHECK(uform_batcher_next(direct, &expected) == uform_ok_k);
        CHECK(uform_prefetcher_next(prefetcher, &got) == uform_ok_k);
        same &= same_batch(&expected, &got);
        images += got.grid.media[0].data != NULL;
        if (pairs) anchors &= got.anchors_count > 0 && got.labels && !got.targets;
        else anchors &= got.targets != NULL && !got.anchors;
        uform_batcher_state_t a, b;
        uform_batcher_save(direct, &a);
        uform_prefetcher_save(prefetcher, &b);
        states &= !memcmp(&a, &b, sizeof(a));
        if (release) uform_prefetcher_release(prefetcher);
        if (caller_us) pause_us(caller_us); /* the thread runs ahead while the "step" runs */
    }
    if (!same) fprintf(stderr, "  %s, %zu slots: batches differ\n", mixture_name, slots);
    CHECK(same);
    CHECK(states);
    CHECK(anchors);
    CHECK(images > 0 || !strstr(mixture_name, "image"));
    uform_prefetcher_close(prefetcher);
    uform_batcher_close(wrapped);
    uform_batcher_close(direct);
    uform_mixture_close(&mixture);
}

/* A batch of the image corpus held while the thread fills every other slot stays as it was lent. */
static void test_lent_untouched(void) {
    uform_mixture_t mixture;
    CHECK(uform_mixture_read(path_in("image_contrastive.json"), &mixture) == uform_ok_k);
    uform_batcher_options_t options = {.rows = 2, .seed = 9};
    uform_batcher_t *direct = NULL, *wrapped = NULL;
    CHECK(uform_batcher_create(&mixture, &options, &direct) == uform_ok_k);
    CHECK(uform_batcher_create(&mixture, &options, &wrapped) == uform_ok_k);
    uform_prefetcher_t *prefetcher = NULL;
    CHECK(uform_prefetcher_create(wrapped, 3, &prefetcher) == uform_ok_k);
    if (!direct || !prefetcher) return;
    uform_batch_buffers_t *kept = NULL;
    CHECK(uform_batch_buffers_create(direct, &kept) == uform_ok_k);
    int same = 1;
    for (int i = 0; i < 10; ++i) {
        uform_batch_t expected, got;
        CHECK(uform_batcher_next_into(direct, kept, &expected) == uform_ok_k);
        CHECK(uform_prefetcher_next(prefetcher, &got) == uform_ok_k);
        pause_us(20000); /* the thread fills the two other slots meanwhile */
        same &= same_batch(&expected, &got);
    }
    CHECK(same);
    uform_prefetcher_close(prefetcher);
    uform_batch_t batch; /* buffers serve only the batcher they were made for */
    CHECK(uform_batcher_next_into(wrapped, kept, &batch) == uform_invalid_argument_k);
    CHECK(strstr(uform_last_error(), "another batcher") != NULL);
    uform_batch_buffers_close(kept);
    uform_batcher_close(wrapped);
    uform_batcher_close(direct);
    uform_mixture_close(&mixture);
}

static void test_close_while_running(char const *mixture_name) {
    uform_mixture_t mixture;
    CHECK(uform_mixture_read(path_in(mixture_name), &mixture) == uform_ok_k);
    uform_batcher_options_t options = {.rows = 8, .seed = 5};
    for (int round = 0; round < 20; ++round) {
        uform_batcher_t *batcher = NULL;
        uform_prefetcher_t *prefetcher = NULL;
        CHECK(uform_batcher_create(&mixture, &options, &batcher) == uform_ok_k);
        CHECK(uform_prefetcher_create(batcher, 2 + round % 3, &prefetcher) == uform_ok_k);
        uform_batch_t batch;
        for (int i = 0; i < round % 4; ++i) CHECK(uform_prefetcher_next(prefetcher, &batch) == uform_ok_k);
        if (round % 2) uform_prefetcher_release(prefetcher);
        uform_prefetcher_close(prefetcher); /* the thread may be mid-batch or waiting */
        uform_batcher_close(batcher);
    }
    uform_prefetcher_close(NULL);
    uform_prefetcher_release(NULL);
    uform_mixture_close(&mixture);
}

/* A source with a batch of its own per slot that fails on its fourth batch, as a corrupt shard
 * would, and counts what it was asked for, so the test sees which slots the thread writes. */
enum { failing_slots_k = 3 };
typedef struct {
    int produced, fail_at;
    int lent[failing_slots_k]; /* set by the test while it holds the slot's batch */
    int overwritten;           /* a slot was produced into while lent */
    uint8_t kinds[failing_slots_k][2 * 8];
    uint32_t values[failing_slots_k][2 * 8];
    int32_t segments[failing_slots_k][2 * 8], positions[failing_slots_k][2 * 8 * 3], targets[failing_slots_k][2 * 8];
} failing_t;

static uform_status_t failing_produce(void *context, size_t slot, uform_batch_t *batch) {
    failing_t *source = context;
    if (slot >= failing_slots_k) return uform_fail(uform_shape_k, "slot %zu out of range", slot);
    if (__atomic_load_n(&source->lent[slot], __ATOMIC_ACQUIRE)) __atomic_store_n(&source->overwritten, 1, __ATOMIC_RELEASE);
    int produced = __atomic_load_n(&source->produced, __ATOMIC_ACQUIRE);
    if (produced == source->fail_at) return uform_fail(uform_format_k, "shard-7.jsonl:12: not JSON (injected)");
    for (int i = 0; i < 16; ++i) {
        source->kinds[slot][i] = 0;
        source->values[slot][i] = (uint32_t)((produced + 1) * 100 + i);
        source->segments[slot][i] = 0;
        source->targets[slot][i] = -1;
    }
    memset(source->positions[slot], 0, sizeof(source->positions[slot]));
    *batch = (uform_batch_t){.grid = {2, 8, source->kinds[slot], source->values[slot], source->segments[slot], source->positions[slot]},
                             .targets = source->targets[slot]};
    __atomic_store_n(&source->produced, produced + 1, __ATOMIC_RELEASE);
    return uform_ok_k;
}

/* Waits up to a second for the source to have produced `count` batches; returns how many it has. */
static int wait_produced(failing_t *source, int count) {
    for (int i = 0; i < 1000 && __atomic_load_n(&source->produced, __ATOMIC_ACQUIRE) < count; ++i) pause_us(1000);
    return __atomic_load_n(&source->produced, __ATOMIC_ACQUIRE);
}

/* The slot of a lent batch, found by its values' address. */
static int lent_slot(failing_t const *source, uform_batch_t const *batch) {
    for (int s = 0; s < failing_slots_k; ++s)
        if (batch->grid.values == source->values[s]) return s;
    return -1;
}

/* The thread runs `slots - 1` ahead while a batch is held and `slots` once it is released, never
 * into a lent slot; batches arrive in order. */
static void test_ownership(void) {
    failing_t source = {.fail_at = -1};
    uform_prefetcher_t *prefetcher = NULL;
    CHECK(uform_prefetcher_create_from(failing_produce, &source, failing_slots_k, &prefetcher) == uform_ok_k);
    if (!prefetcher) return;
    CHECK(wait_produced(&source, failing_slots_k) == failing_slots_k); /* nothing held: every slot fills */
    pause_us(5000);
    CHECK(__atomic_load_n(&source.produced, __ATOMIC_ACQUIRE) == failing_slots_k);
    int ordered = 1, ahead = 1;
    for (int i = 1; i <= 30; ++i) {
        uform_batch_t batch;
        CHECK(uform_prefetcher_next(prefetcher, &batch) == uform_ok_k);
        int slot = lent_slot(&source, &batch);
        CHECK(slot >= 0);
        if (slot < 0) break;
        __atomic_store_n(&source.lent[slot], 1, __ATOMIC_RELEASE);
        ordered &= batch.grid.values[5] == (uint32_t)(i * 100 + 5);
        /* Held: the thread refills the other slots only, i + slots - 1 batches in all. */
        ahead &= wait_produced(&source, i + failing_slots_k - 1) == i + failing_slots_k - 1;
        if (i % 5 == 0) pause_us(3000), ahead &= __atomic_load_n(&source.produced, __ATOMIC_ACQUIRE) == i + failing_slots_k - 1;
        ordered &= batch.grid.values[5] == (uint32_t)(i * 100 + 5); /* still as lent */
        __atomic_store_n(&source.lent[slot], 0, __ATOMIC_RELEASE);
        if (i % 2) {
            uform_prefetcher_release(prefetcher); /* handed back: its slot fills too */
            ahead &= wait_produced(&source, i + failing_slots_k) == i + failing_slots_k;
        }
    }
    CHECK(ordered);
    CHECK(ahead);
    CHECK(!__atomic_load_n(&source.overwritten, __ATOMIC_ACQUIRE));
    uform_prefetcher_close(prefetcher);
}

static void test_error(void) {
    failing_t source = {.fail_at = 3};
    uform_prefetcher_t *prefetcher = NULL;
    CHECK(uform_prefetcher_create_from(failing_produce, &source, 3, &prefetcher) == uform_ok_k);
    uform_batch_t batch;
    for (int i = 1; i <= 3; ++i) {
        CHECK(uform_prefetcher_next(prefetcher, &batch) == uform_ok_k);
        CHECK(batch.grid.values[5] == (uint32_t)(i * 100 + 5) && batch.targets);
    }
    for (int repeat = 0; repeat < 2; ++repeat) {
        uform_fail(uform_ok_k, "stale");
        CHECK(uform_prefetcher_next(prefetcher, &batch) == uform_format_k);
        CHECK(strstr(uform_last_error(), "shard-7.jsonl:12") != NULL); /* copied across threads */
    }
    uform_prefetcher_close(prefetcher);

    CHECK(uform_prefetcher_create(NULL, 2, &prefetcher) == uform_invalid_argument_k);
    CHECK(uform_prefetcher_create_from(failing_produce, &source, 1, &prefetcher) == uform_invalid_argument_k);
    CHECK(uform_prefetcher_create_from(NULL, &source, 2, &prefetcher) == uform_invalid_argument_k);
    CHECK(uform_prefetcher_next(NULL, &batch) == uform_invalid_argument_k);
}

int main(void) {
    if (!scratch_open("uform_prefetch")) return 2;
    write_corpora();
    write_image_corpora();
    test_identical("mlm.json", 2, 0, 50, 0);
    test_identical("mlm.json", 3, 200, 50, 1);
    test_identical("contrastive.json", 2, 0, 50, 1);
    test_identical("contrastive.json", 3, 200, 50, 0);
    test_identical("image_contrastive.json", 2, 0, 200, 0);
    test_identical("image_contrastive.json", 4, 300, 100, 1);
    test_identical("image_mlm.json", 3, 0, 200, 1);
    test_identical("image_mlm.json", 2, 300, 100, 0);
    test_lent_untouched();
    test_ownership();
    test_close_while_running("mlm.json");
    test_close_while_running("image_contrastive.json");
    test_error();
    scratch_close();
    return check_report();
}
