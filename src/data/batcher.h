/*  batcher.h: a deterministic stream of training batches from a mixture. Sources are drawn by
 *  weight, each source's records in a fresh seeded order per epoch; items (a text, or a pair
 *  record's query with its positives and negatives, each a text or an image) are packed into rows
 *  largest-first from a pool bucketed by length, so rows stay full. Images are decoded once at
 *  creation (their patch grids size the items) and again, on worker threads, into each batch's
 *  BF16 patches (grid.media). MLM masks spans per segment; pair objectives get
 *  anchors, candidates and labels numbered as `uform_forward` numbers segments. The batcher owns
 *  every buffer from creation on: `uform_batcher_next` allocates nothing (but what the image cache
 *  keeps), and `uform_batcher_next_into` writes into a caller's set. docs/data.md has the rules.
 */
#ifndef UFORM_DATA_BATCHER_H
#define UFORM_DATA_BATCHER_H

#include <stddef.h>
#include <stdint.h>

#include "data/mixture.h"
#include "uform/train.h"

/** Items waiting to be placed: a row closes only when none of them fits its free cells. */
enum { uform_batcher_lookahead_k = 64 };

typedef struct uform_batcher_options_t {
    size_t rows;          /* rows per batch; the columns come from the mixture */
    uint64_t seed;
    size_t anchors_limit; /* contrastive / rerank: most anchors per batch; 0: as many as fit */
    size_t decode_threads; /* threads decoding images (at load and per batch); 0: one per core */
    size_t image_cache_mb; /* decoded images kept across batches; 0: uform_batcher_image_cache_mb_k, SIZE_MAX: none */
} uform_batcher_options_t;

enum { uform_batcher_image_cache_mb_k = 1024 };

/** Everything the stream's future depends on, as plain data (no pointers): save it beside a
 *  checkpoint and restore it into a batcher made from the same mixture, rows and seed. */
typedef struct uform_batcher_state_t {
    uint64_t fingerprint; /* of the mixture, corpora, rows, seed and limits; restore checks it */
    uint64_t rng;         /* draws sources */
    uint64_t batches;     /* batches produced (or skipped) so far */
    uint64_t segments;    /* segments placed so far */
    uint64_t truncated;   /* texts cut to fit a row so far */
    uint32_t sources_count;
    uint32_t waiting_count;
    uint64_t epochs[uform_mixture_max_sources_k];  /* per source: completed passes */
    uint64_t cursors[uform_mixture_max_sources_k]; /* per source: records drawn in this pass */
    uint32_t waiting_sources[uform_batcher_lookahead_k];
    uint32_t waiting_records[uform_batcher_lookahead_k];
} uform_batcher_state_t;

typedef struct uform_batcher_stats_t {
    uint64_t batches, segments, truncated;
    size_t records;             /* usable records over all sources */
    size_t skipped_lines;       /* malformed lines skipped while reading (sources with skip_malformed) */
    size_t images_skipped;      /* records dropped for a media file (image, audio, video) that does not decode (skip_malformed) */
    size_t image_sides;         /* image queries, positives and negatives of the usable records */
    size_t video_sides, audio_sides; /* the same for video and audio clips */
    size_t anchors_capacity;    /* most anchors a batch can hold (pairs) */
    size_t candidates_capacity; /* most candidates a batch can hold (pairs) */
} uform_batcher_stats_t;

typedef struct uform_batcher_t uform_batcher_t;

/** Reads every source of `mixture` (which may be closed afterwards) and takes all the memory the
 *  batches need. Fails on a source with no records of the objective's kind, naming file and line. */
uform_status_t uform_batcher_create(uform_mixture_t const *mixture, uform_batcher_options_t const *options,
                                    uform_batcher_t **batcher);
void uform_batcher_close(uform_batcher_t *batcher);

/** Fills `batch` with pointers into the batcher's buffers, valid until the next call on it.
 *  MLM: `targets` set, no anchors. Pairs: `targets` NULL; anchors, candidates, labels set. */
uform_status_t uform_batcher_next(uform_batcher_t *batcher, uform_batch_t *batch);

/** Memory for one batch of one batcher (its cells, anchors, candidates, labels and image patches),
 *  so that several batches can be alive at once without copying them. */
typedef struct uform_batch_buffers_t uform_batch_buffers_t;
uform_status_t uform_batch_buffers_create(uform_batcher_t const *batcher, uform_batch_buffers_t **buffers);
void uform_batch_buffers_close(uform_batch_buffers_t *buffers);
/** `uform_batcher_next`, written into `buffers` (made for this batcher): the batch's pointers stay
 *  valid until `buffers` is written again or closed, whatever else the batcher does meanwhile. */
uform_status_t uform_batcher_next_into(uform_batcher_t *batcher, uform_batch_buffers_t *buffers, uform_batch_t *batch);
/** Advances past `batches` batches exactly as `uform_batcher_next` would, without writing them. */
uform_status_t uform_batcher_skip(uform_batcher_t *batcher, size_t batches);

void uform_batcher_save(uform_batcher_t const *batcher, uform_batcher_state_t *state);
/** Continues the stream from a saved state; fails if it belongs to another mixture, seed or shape. */
uform_status_t uform_batcher_restore(uform_batcher_t *batcher, uform_batcher_state_t const *state);

void uform_batcher_stats(uform_batcher_t const *batcher, uform_batcher_stats_t *stats);

#endif
