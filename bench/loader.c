/*  loader.c: how fast the data loader packs. Reads a mixture, makes a batcher of ROWS x the
 *  mixture's columns and, for SECONDS each, pulls batches straight from the batcher ("direct") and
 *  through the prefetcher ("prefetch"; 2 slots, the caller doing nothing else, so this is the
 *  thread's rate, batches written in place). Packed bytes are non-padding cells (media cells among them);
 *  images/s, videos/s and audios/s count media segments, each decoded and cut on the batcher's threads
 *  (with the decoded audio seconds/s, 20 ms a frame, and video frames/s, two a tube step). One JSON
 *  line per mode, with the CPU time of all threads per batch (steady where other work shares the
 *  cores). CACHE_MB is the batcher's image_cache_mb: 0 its default, "none" no cache (every
 *  batch decodes its images).
 *
 *    build/uform_bench_loader mixtures/default_mlm.json [ROWS=8] [SECONDS=3] [SEED=0] [CACHE_MB=0]
 *    python3 bench/loader.py     (both mixtures, a table beside the GPU step's consumption)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data/batcher.h"
#include "data/mixture.h"
#include "data/prefetch.h"

static double clock_(clockid_t clock) {
    struct timespec time;
    clock_gettime(clock, &time);
    return (double)time.tv_sec + (double)time.tv_nsec * 1e-9;
}

static double now_(void) { return clock_(CLOCK_MONOTONIC); }

static size_t packed_(uform_batch_t const *batch) {
    size_t cells = batch->grid.rows * batch->grid.columns, packed = 0;
    for (size_t i = 0; i < cells; ++i) packed += batch->grid.segments[i] >= 0;
    return packed;
}

/* Media segments of a batch by kind (runs of one kind's cells sharing a segment id), its audio
 * frames and its video tube steps (changes of t within a video segment). */
typedef struct media_count_t {
    size_t segments[uform_media_kinds_k], audio_frames, video_steps;
} media_count_t;

static void media_(uform_batch_t const *batch, media_count_t *count) {
    uform_grid_t const *g = &batch->grid;
    size_t cells = g->rows * g->columns;
    for (size_t i = 0; i < cells; ++i) {
        uint8_t kind = g->kinds[i];
        if (kind < uform_cell_image_k || kind > uform_cell_audio_k) continue;
        int first = i % g->columns == 0 || g->kinds[i - 1] != kind || g->segments[i - 1] != g->segments[i];
        count->segments[kind - uform_cell_image_k] += first;
        count->audio_frames += kind == uform_cell_audio_k;
        count->video_steps += kind == uform_cell_video_k && (first || g->positions[3 * i] != g->positions[3 * (i - 1)]);
    }
}

static int fail_(char const *what) {
    fprintf(stderr, "bench_loader: %s: %s\n", what, uform_last_error());
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_loader MIXTURE [ROWS=8] [SECONDS=3] [SEED=0] [CACHE_MB=0|none]\n");
        return 2;
    }
    size_t rows = argc > 2 ? strtoul(argv[2], NULL, 10) : 8;
    double seconds = argc > 3 ? atof(argv[3]) : 3;
    uint64_t seed = argc > 4 ? strtoull(argv[4], NULL, 10) : 0;
    size_t cache_mb = argc <= 5 ? 0 : !strcmp(argv[5], "none") ? SIZE_MAX : strtoul(argv[5], NULL, 10);
    uform_mixture_t mixture;
    if (uform_mixture_read(argv[1], &mixture) != uform_ok_k) return fail_(argv[1]);
    uform_batcher_options_t options = {.rows = rows, .seed = seed, .image_cache_mb = cache_mb};
    char const *modes[] = {"direct", "prefetch"};
    for (int mode = 0; mode < 2; ++mode) {
        uform_batcher_t *batcher;
        double load_start = now_();
        if (uform_batcher_create(&mixture, &options, &batcher) != uform_ok_k) return fail_("batcher");
        double load_seconds = now_() - load_start;
        uform_prefetcher_t *prefetcher = NULL;
        if (mode == 1 && uform_prefetcher_create(batcher, 2, &prefetcher) != uform_ok_k) return fail_("prefetcher");
        size_t batches = 0, packed = 0, cells = 0;
        media_count_t media = {{0}, 0, 0};
        double start = now_(), elapsed = 0, cpu_start = clock_(CLOCK_PROCESS_CPUTIME_ID);
        while (elapsed < seconds) {
            uform_batch_t batch;
            uform_status_t status = prefetcher ? uform_prefetcher_next(prefetcher, &batch)
                                               : uform_batcher_next(batcher, &batch);
            if (status != uform_ok_k) return fail_("next");
            packed += packed_(&batch);
            media_(&batch, &media);
            cells += batch.grid.rows * batch.grid.columns;
            batches++;
            elapsed = now_() - start;
        }
        double cpu = clock_(CLOCK_PROCESS_CPUTIME_ID) - cpu_start; /* every thread's: steady on a shared machine */
        printf("{\"mixture\": \"%s\", \"objective\": \"%s\", \"mode\": \"%s\", \"rows\": %zu, \"columns\": %zu, "
               "\"seconds\": %.3f, \"batches\": %zu, \"packed_bytes\": %zu, \"fill\": %.4f, "
               "\"packed_bytes_per_s\": %.0f, \"batches_per_s\": %.1f, \"images_per_s\": %.1f, \"videos_per_s\": %.1f, "
               "\"audios_per_s\": %.1f, \"audio_seconds_per_s\": %.1f, \"video_frames_per_s\": %.1f, \"load_seconds\": %.3f, "
               "\"image_cache_mb\": %lld, \"cpu_ms_per_batch\": %.2f}\n",
               argv[1], uform_objective_name(mixture.objective), modes[mode], rows, mixture.columns, elapsed, batches,
               packed, cells ? (double)packed / (double)cells : 0.0, (double)packed / elapsed,
               (double)batches / elapsed, (double)media.segments[0] / elapsed, (double)media.segments[1] / elapsed,
               (double)media.segments[2] / elapsed, 0.02 * (double)media.audio_frames / elapsed,
               2.0 * (double)media.video_steps / elapsed, load_seconds,
               cache_mb == SIZE_MAX ? -1ll : (long long)cache_mb, batches ? 1e3 * cpu / (double)batches : 0.0);
        fflush(stdout);
        uform_prefetcher_close(prefetcher);
        uform_batcher_close(batcher);
    }
    uform_mixture_close(&mixture);
    return 0;
}
