/*  test_prefetch.c: the prefetcher against the batcher it wraps: the same batches bit for bit
 *  (MLM and contrastive, 2 and 3 slots, 50 batches each, with a caller slower and faster than the
 *  thread), the saved state of the batches handed out, closing while the thread runs, and a
 *  failure of the source arriving on the caller's thread with its message after the batches
 *  before it. Prints "N passed, M failed" and exits non-zero on any failure.
 *
 *  Build and run from the repository root:
 *    gcc -std=c11 -O2 -Wall -Wextra -Wshadow -Wstrict-prototypes -Wno-unused-parameter \
 *        -D_POSIX_C_SOURCE=200809L -Iinclude -Isrc test/c/test_prefetch.c src/data/prefetch.c \
 *        src/data/jsonl.c src/data/parquet.c src/data/corpus.c src/data/mixture.c src/data/batcher.c \
 *        src/core/status.c src/core/arena.c -ljansson -lz -lzstd -lsnappy -lm -pthread \
 *        -o build-prefetch/test_prefetch && ./build-prefetch/test_prefetch
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
    return same;
}

static void pause_us(long microseconds) {
    struct timespec wait = {0, microseconds * 1000};
    nanosleep(&wait, NULL);
}

/* 50 batches through a prefetcher against 50 straight from a twin batcher. */
static void test_identical(char const *mixture_name, size_t slots, long caller_us) {
    uform_mixture_t mixture;
    CHECK(uform_mixture_read(path_in(mixture_name), &mixture) == uform_ok_k);
    uform_batcher_options_t options = {.rows = 4, .seed = 1234};
    uform_batcher_t *direct = NULL, *wrapped = NULL;
    CHECK(uform_batcher_create(&mixture, &options, &direct) == uform_ok_k);
    CHECK(uform_batcher_create(&mixture, &options, &wrapped) == uform_ok_k);
    uform_prefetcher_t *prefetcher = NULL;
    CHECK(uform_prefetcher_create(wrapped, slots, &prefetcher) == uform_ok_k);
    if (!direct || !prefetcher) return;
    int same = 1, states = 1, pairs = mixture.objective != uform_objective_mlm_k, anchors = 1;
    for (int i = 0; i < 50; ++i) {
        uform_batch_t expected, got;
        CHECK(uform_batcher_next(direct, &expected) == uform_ok_k);
        CHECK(uform_prefetcher_next(prefetcher, &got) == uform_ok_k);
        same &= same_batch(&expected, &got);
        if (pairs) anchors &= got.anchors_count > 0 && got.labels && !got.targets;
        else anchors &= got.targets != NULL && !got.anchors;
        uform_batcher_state_t a, b;
        uform_batcher_save(direct, &a);
        uform_prefetcher_save(prefetcher, &b);
        states &= !memcmp(&a, &b, sizeof(a));
        if (caller_us) pause_us(caller_us); /* the thread runs ahead while the "step" runs */
    }
    if (!same) fprintf(stderr, "  %s, %zu slots: batches differ\n", mixture_name, slots);
    CHECK(same);
    CHECK(states);
    CHECK(anchors);
    uform_prefetcher_close(prefetcher);
    uform_batcher_close(wrapped);
    uform_batcher_close(direct);
    uform_mixture_close(&mixture);
}

static void test_close_while_running(void) {
    uform_mixture_t mixture;
    CHECK(uform_mixture_read(path_in("mlm.json"), &mixture) == uform_ok_k);
    uform_batcher_options_t options = {.rows = 8, .seed = 5};
    for (int round = 0; round < 20; ++round) {
        uform_batcher_t *batcher = NULL;
        uform_prefetcher_t *prefetcher = NULL;
        CHECK(uform_batcher_create(&mixture, &options, &batcher) == uform_ok_k);
        CHECK(uform_prefetcher_create(batcher, 2 + round % 3, &prefetcher) == uform_ok_k);
        uform_batch_t batch;
        for (int i = 0; i < round % 4; ++i) CHECK(uform_prefetcher_next(prefetcher, &batch) == uform_ok_k);
        uform_prefetcher_close(prefetcher); /* the thread may be mid-batch or waiting */
        uform_batcher_close(batcher);
    }
    uform_prefetcher_close(NULL);
    uform_mixture_close(&mixture);
}

/* A source that fails on its fourth batch, as a corrupt shard would. */
typedef struct {
    int produced;
    uint8_t kinds[2 * 8];
    uint32_t values[2 * 8];
    int32_t segments[2 * 8], positions[2 * 8 * 3], targets[2 * 8];
} failing_t;

static uform_status_t failing_produce(void *context, uform_batch_t *batch) {
    failing_t *source = context;
    if (source->produced == 3) return uform_fail(uform_format_k, "shard-7.jsonl:12: not JSON (injected)");
    source->produced++;
    for (int i = 0; i < 16; ++i) {
        source->kinds[i] = 0;
        source->values[i] = (uint32_t)(source->produced * 100 + i);
        source->segments[i] = 0;
        source->targets[i] = -1;
    }
    memset(source->positions, 0, sizeof(source->positions));
    *batch = (uform_batch_t){.grid = {2, 8, source->kinds, source->values, source->segments, source->positions},
                             .targets = source->targets};
    return uform_ok_k;
}

static void test_error(void) {
    failing_t source = {0};
    uform_batch_t shape = {.grid = {.rows = 2, .columns = 8}, .targets = source.targets};
    uform_prefetcher_t *prefetcher = NULL;
    CHECK(uform_prefetcher_create_from(failing_produce, &source, &shape, 3, &prefetcher) == uform_ok_k);
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

    /* A batch larger than the slots is a shape failure, not an overflow. */
    failing_t other = {0};
    uform_batch_t small = {.grid = {.rows = 1, .columns = 8}, .targets = other.targets};
    CHECK(uform_prefetcher_create_from(failing_produce, &other, &small, 2, &prefetcher) == uform_ok_k);
    CHECK(uform_prefetcher_next(prefetcher, &batch) == uform_shape_k);
    CHECK(strstr(uform_last_error(), "exceeds") != NULL);
    uform_prefetcher_close(prefetcher);

    CHECK(uform_prefetcher_create(NULL, 2, &prefetcher) == uform_invalid_argument_k);
    CHECK(uform_prefetcher_create_from(failing_produce, &other, &small, 1, &prefetcher) == uform_invalid_argument_k);
    CHECK(uform_prefetcher_next(NULL, &batch) == uform_invalid_argument_k);
}

int main(void) {
    if (!scratch_open("uform_prefetch")) return 2;
    write_corpora();
    test_identical("mlm.json", 2, 0);
    test_identical("mlm.json", 3, 200);
    test_identical("contrastive.json", 2, 0);
    test_identical("contrastive.json", 3, 200);
    test_close_while_running();
    test_error();
    scratch_close();
    return check_report();
}
