/*  batcher.c: drawing, packing and masking. All randomness is SplitMix64: one stream draws sources
 *  (its state is saved), each source's epoch order and each batch's masks are seeded from
 *  (seed, source, epoch) and (seed, batch), so skipping a batch needs no masks and restoring needs
 *  no stored permutation. Between batches the only other state is the waiting list of items. */
#include "data/batcher.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/numeric.h"
#include "core/status.h"
#include "core/threads.h"
#include "data/corpus.h"
#include "data/jsonl.h"
#include "model/tensors.h"
#include "uform/av.h"
#include "uform/image.h"

enum { uform_mask_stream_k = 0x6d61736b, uform_image_mask_stream_k = 0x696d6167, uform_flip_stream_k = 0x666c6970 }; /* seed streams: 0 draws sources, 1 + s orders source s */

typedef struct uform_source_t {
    uform_corpus_t corpus;
    uint32_t *order;   /* [records] this epoch's order of record indices */
    uint32_t *lengths; /* [records] cells each record's item takes, after truncation */
    double cumulative; /* running share of the total weight, 1 for the last source */
    float loss_weight; /* its anchors' scale in the pair loss */
    int flip;          /* its image sides mirrored left to right in half the draws */
    /* Media: each side's shape (uform_grid_cells_), 0 for a text; NULL when none. */
    uint32_t *query_grids, *slice_grids; /* [records], [slices] */
} uform_source_t;

/* A media side of the batch being written: decoded into rows [first, first + cells) of its kind's media. */
typedef struct uform_image_job_t {
    uint32_t source;
    uform_slice_t slice;
    uint32_t grid;            /* its shape, as the load found it */
    size_t first, cells;
    size_t cell;              /* its first cell in the batch */
    uint64_t key;             /* its content (uform_side_key_) */
    uint16_t const *cached;   /* its vectors from an earlier batch, or NULL: decode it */
} uform_image_job_t;

/* A decoded media side kept across batches: its BF16 vectors, by content key (open addressing). */
typedef struct uform_cached_image_t {
    uint64_t key;
    uint16_t *patches; /* NULL: an empty slot */
} uform_cached_image_t;

/* What a batch is written into; the batcher's own set, or one per prefetcher slot. */
struct uform_batch_buffers_t {
    uform_batcher_t const *batcher; /* the one it was made for */
    uint8_t *kinds, *labels;
    uint32_t *values, *anchors, *candidates;
    int32_t *segments, *positions, *targets;
    float *anchor_weights;
    uint16_t *media[uform_media_kinds_k]; /* [cells + 1, values] BF16 by media index (+ MLM's blank patch); NULL without */
};

/* A waiting item in the length buckets. */
typedef struct uform_node_t {
    uint32_t source, record, length;
    int32_t next;
} uform_node_t;

struct uform_batcher_t {
    uform_objective_t objective;
    size_t rows, columns, cells;
    uint64_t seed;
    double mask_ratio, mean_span, image_mask_ratio, video_fps, audio_mask_ratio, audio_mean_span, video_mask_ratio;
    uform_source_t *sources;
    size_t sources_count;
    uform_batcher_state_t state;
    size_t records, skipped_lines;
    size_t media_sides[uform_media_kinds_k], decode_threads; /* media queries, positives and negatives over all sources, by kind */
    size_t texts_capacity;      /* most texts one record holds (1 for MLM) */
    size_t anchors_capacity, candidates_capacity;

    /* The pool: nodes chained per exact length, and a bit per non-empty length. */
    uform_node_t nodes[uform_batcher_lookahead_k];
    int32_t free_node;
    size_t unplaced;
    int32_t *heads, *tails; /* [columns + 1] */
    uint64_t *occupied;     /* [columns / 64 + 1] */

    /* What a batch is written into: the set of the call under way (`own` for uform_batcher_next). */
    uform_batch_buffers_t *own;
    uint8_t *kinds, *labels;
    uint32_t *values, *anchors, *candidates;
    int32_t *segments, *positions, *targets;
    float *anchor_weights;
    int weighted; /* some source's loss_weight is not 1: batches carry anchor_weights */
    uint16_t *media[uform_media_kinds_k]; /* [cells + 1, values] */
    /* The batcher's own working memory. */
    uform_arena_t arena;
    uint32_t *anchor_first, *anchor_positives;
    uint64_t *anchor_keys, *candidate_keys; /* each segment's content: equal texts or images, equal keys */
    size_t anchors_count, candidates_count;
    uint32_t *span_lengths; /* [columns] */
    uint32_t *text_lengths; /* [texts_capacity] */

    /* Media: the batch's vectors (BF16 [media_cells[m], values]), decoded by `pool` at the batch's end. */
    size_t most[uform_media_kinds_k]; /* the most cells a side fills: min(512 or 1024, columns) */
    size_t images, media_cells[uform_media_kinds_k], images_skipped; /* this batch's jobs and cells; records dropped at load for a bad file */
    uform_image_job_t *image_jobs; /* [cells] */
    float *decoded;         /* [threads][decoded_values] one side's Float32 vectors per thread */
    size_t decoded_values;
    uform_pool_t *pool;
    uform_cached_image_t *cache; /* [cache_slots], a power of two, at most half full */
    size_t cache_slots, cache_count, cache_bytes, cache_limit;
    uform_status_t image_status;
    char image_error[512];
};

static uint64_t uform_mix_(uint64_t value) {
    uform_rng_t rng = {value};
    return uform_rng_next(&rng);
}

static uint64_t uform_derive_seed_(uint64_t seed, uint64_t stream, uint64_t index) {
    return uform_mix_(uform_mix_(seed ^ uform_mix_(stream)) ^ index);
}

/* A media kind's vector width, by media index (the table of model/tensors.h). */
static size_t uform_media_values_(size_t media) { return uform_media_info((uform_cell_kind_t)(uform_cell_image_k + media))->values; }

static size_t uform_media_of_(uform_slice_t slice) { return (size_t)uform_slice_kind(slice) - uform_cell_image_k; }

/* A media side's shape in 32 bits, as the load found it (0: it did not decode): an image's patch
 * grid rows << 16 | columns; an audio clip's frames; a video's steps << 20 | rows << 10 | columns. */
static size_t uform_grid_cells_(uform_slice_t slice, uint32_t grid) {
    switch (uform_slice_kind(slice)) {
    case uform_cell_audio_k: return grid;
    case uform_cell_video_k: return (size_t)(grid >> 20) * ((grid >> 10) & 0x3ff) * (grid & 0x3ff);
    default: return (size_t)(grid >> 16) * (grid & 0xffff);
    }
}

static uint64_t uform_double_bits_(double value) {
    uint64_t bits;
    memcpy(&bits, &value, sizeof(bits));
    return bits;
}

/* Cuts lengths (each already <= budget) to a common cap, longest first, so that they sum to at
 * most `budget` (>= count); the cap's remainder goes one cell each to the first cut texts. */
static size_t uform_water_fill_(uint32_t *lengths, size_t count, size_t budget) {
    size_t total = 0, longest = 0;
    for (size_t i = 0; i < count; ++i) {
        total += lengths[i];
        if (lengths[i] > longest) longest = lengths[i];
    }
    if (total <= budget) return total;
    size_t low = 1, high = longest; /* sum(min(l, low)) <= budget < sum(min(l, high)) */
    while (high - low > 1) {
        size_t middle = low + (high - low) / 2, sum = 0;
        for (size_t i = 0; i < count; ++i) sum += lengths[i] < middle ? lengths[i] : middle;
        if (sum <= budget) low = middle;
        else high = middle;
    }
    size_t used = 0;
    for (size_t i = 0; i < count; ++i) used += lengths[i] < low ? lengths[i] : low;
    size_t extra = budget - used;
    for (size_t i = 0; i < count; ++i)
        if (lengths[i] > low) {
            lengths[i] = (uint32_t)(low + (extra ? 1 : 0));
            if (extra) extra--;
        }
    return budget;
}

/* The texts of a record as slices: a text record has one, a pair its query, positives, negatives. */
static size_t uform_record_texts_(uform_corpus_t const *corpus, uform_record_t const *record, size_t index,
                                  uform_slice_t *slice) {
    if (slice) *slice = index == 0 ? record->text : corpus->slices[record->first_candidate + index - 1];
    return record->kind == uform_record_text_k ? 1 : 1 + (size_t)record->positives_count + record->negatives_count;
}

/* The shape (uform_grid_cells_) of side `index` of record `r` of `source`; 0 for a text. */
static uint32_t uform_side_grid_(uform_source_t const *source, size_t r, size_t index) {
    if (!source->query_grids) return 0;
    if (!index) return source->query_grids[r];
    return source->slice_grids[source->corpus.records[r].first_candidate + index - 1];
}

/* Lengths of a record's segments into `lengths`; returns their sum and counts the cut texts. An
 * media side keeps all its cells; the texts share what the media leave of the row. */
static size_t uform_item_lengths_(uform_batcher_t const *batcher, uform_source_t const *source, size_t r,
                                  uint32_t *lengths, size_t *truncated) {
    uform_corpus_t const *corpus = &source->corpus;
    uform_record_t const *record = &corpus->records[r];
    size_t count = uform_record_texts_(corpus, record, 0, NULL), cut = 0, images = 0, texts = 0;
    for (size_t i = 0; i < count; ++i) {
        uform_slice_t slice;
        uform_record_texts_(corpus, record, i, &slice);
        if (slice.image) images += uform_grid_cells_(slice, uform_side_grid_(source, r, i));
    }
    size_t budget = batcher->columns - images; /* the load checked that a record's media fit a row */
    for (size_t i = 0; i < count; ++i) {
        uform_slice_t slice;
        uform_record_texts_(corpus, record, i, &slice);
        if (slice.image) continue;
        lengths[texts++] = (uint32_t)(slice.length < budget ? slice.length : budget);
    }
    size_t total = images + uform_water_fill_(lengths, texts, budget);
    /* Spread back to side order: media their cells, texts their cut lengths. */
    for (size_t i = count, t = texts; i-- > 0;) {
        uform_slice_t slice;
        uform_record_texts_(corpus, record, i, &slice);
        uint32_t grid = uform_side_grid_(source, r, i);
        if (slice.image) lengths[i] = (uint32_t)uform_grid_cells_(slice, grid);
        else {
            lengths[i] = lengths[--t];
            cut += lengths[i] < slice.length;
        }
    }
    if (truncated) *truncated += cut;
    return total;
}

static void uform_shuffle_(uform_batcher_t *batcher, size_t source) {
    uform_source_t *entry = &batcher->sources[source];
    size_t count = entry->corpus.records_count;
    for (size_t i = 0; i < count; ++i) entry->order[i] = (uint32_t)i;
    uform_rng_t rng = {uform_derive_seed_(batcher->seed, 1 + source, batcher->state.epochs[source])};
    for (size_t i = count; i > 1; --i) {
        size_t j = (size_t)(uform_rng_next(&rng) % i); /* bias <= i / 2^64, far below any test */
        uint32_t swap = entry->order[i - 1];
        entry->order[i - 1] = entry->order[j];
        entry->order[j] = swap;
    }
}

/* --- the pool ------------------------------------------------------------------------------- */

static void uform_pool_insert_(uform_batcher_t *batcher, uint32_t source, uint32_t record) {
    int32_t index = batcher->free_node;
    uform_node_t *node = &batcher->nodes[index];
    batcher->free_node = node->next;
    uint32_t length = batcher->sources[source].lengths[record];
    *node = (uform_node_t){source, record, length, -1};
    if (batcher->tails[length] >= 0) batcher->nodes[batcher->tails[length]].next = index;
    else batcher->heads[length] = index;
    batcher->tails[length] = index;
    batcher->occupied[length / 64] |= 1ull << (length % 64);
    batcher->unplaced++;
}

static uform_node_t uform_pool_pop_(uform_batcher_t *batcher, size_t length) {
    int32_t index = batcher->heads[length];
    uform_node_t node = batcher->nodes[index];
    batcher->heads[length] = node.next;
    if (node.next < 0) {
        batcher->tails[length] = -1;
        batcher->occupied[length / 64] &= ~(1ull << (length % 64));
    }
    batcher->nodes[index].next = batcher->free_node;
    batcher->free_node = index;
    batcher->unplaced--;
    return node;
}

/* The longest waiting length <= `limit`, or 0 when nothing fits. */
static size_t uform_pool_longest_(uform_batcher_t const *batcher, size_t limit) {
    size_t word = limit / 64;
    uint64_t bits = batcher->occupied[word] & (limit % 64 == 63 ? ~0ull : (2ull << (limit % 64)) - 1);
    while (!bits) {
        if (!word) return 0;
        bits = batcher->occupied[--word];
    }
    return word * 64 + 63 - (size_t)__builtin_clzll(bits);
}

static void uform_draw_(uform_batcher_t *batcher) {
    uform_batcher_state_t *state = &batcher->state;
    uform_rng_t rng = {state->rng};
    double draw = uform_rng_uniform(&rng);
    state->rng = rng.state;
    size_t source = 0;
    while (source + 1 < batcher->sources_count && draw >= batcher->sources[source].cumulative) source++;
    if (state->cursors[source] == batcher->sources[source].corpus.records_count) {
        state->epochs[source]++;
        state->cursors[source] = 0;
        uform_shuffle_(batcher, source);
    }
    uint32_t record = batcher->sources[source].order[state->cursors[source]++];
    uform_pool_insert_(batcher, (uint32_t)source, record);
}

/* --- writing a batch ----------------------------------------------------------------------- */

/* Masks about mask_ratio of a segment's cells: floor(ratio n + u) of them, u uniform, so the
 * expectation is exact; spans break after each masked cell with probability 1 / mean_span
 * (geometric lengths, the last one cut by the count) and sit in distinct gaps of the unmasked
 * cells, so no two spans touch. */
static void uform_mask_spans_(uform_batcher_t *batcher, size_t first, size_t length, double ratio, double mean_span,
                              uint32_t replacement, uform_rng_t *rng) {
    size_t masked = (size_t)floor(ratio * (double)length + uform_rng_uniform(rng));
    if (masked > length) masked = length;
    if (!masked) return;
    double breaking = 1.0 / mean_span;
    size_t spans = 0, current = 1;
    for (size_t i = 1; i < masked; ++i) {
        if (uform_rng_uniform(rng) < breaking) batcher->span_lengths[spans++] = (uint32_t)current, current = 1;
        else current++;
    }
    batcher->span_lengths[spans++] = (uint32_t)current;
    size_t gaps = length - masked;
    /* Only at ratios near 1 are there more spans than gaps to hold them apart: join the last ones. */
    while (spans > gaps + 1) batcher->span_lengths[spans - 2] += batcher->span_lengths[spans - 1], spans--;
    size_t cell = first, span = 0;
    for (size_t slot = 0; slot <= gaps; ++slot) {
        size_t needed = spans - span;
        /* Selection sampling: `needed` of the remaining gaps + 1 - slot slots, each subset equally likely. */
        if (needed && uform_rng_uniform(rng) * (double)(gaps + 1 - slot) < (double)needed) {
            for (size_t i = 0; i < batcher->span_lengths[span]; ++i, ++cell) {
                batcher->targets[cell] = (int32_t)batcher->values[cell];
                batcher->values[cell] = replacement;
            }
            span++;
        }
        if (slot < gaps) cell++;
    }
}

static void uform_write_segment_(uform_batcher_t *batcher, size_t first, uint8_t const *bytes, size_t length,
                                 int32_t segment) {
    for (size_t i = 0; i < length; ++i) {
        size_t cell = first + i;
        batcher->kinds[cell] = uform_cell_byte_k;
        batcher->values[cell] = bytes[i];
        batcher->segments[cell] = segment;
        batcher->positions[3 * cell] = batcher->positions[3 * cell + 1] = batcher->positions[3 * cell + 2] = (int32_t)i;
        if (batcher->targets) batcher->targets[cell] = -1;
    }
}

/* A media side's cells and its decoding job, media rows from its kind's next free one. Coordinates:
 * an image's t = 0, h = patch row, w = patch column; audio t = h = w = frame index; a video's t =
 * the tick of its step's first frame (round(25 f / fps), as av.c times frames), h, w as an image's. */
static void uform_write_media_(uform_batcher_t *batcher, uint32_t source, uform_slice_t slice, uint64_t key, size_t first,
                               uint32_t grid, int32_t segment) {
    uform_cell_kind_t kind = uform_slice_kind(slice);
    size_t media = uform_media_of_(slice), row = batcher->media_cells[media], cells = uform_grid_cells_(slice, grid);
    size_t columns = kind == uform_cell_video_k ? grid & 0x3ff : grid & 0xffff;
    size_t step_cells = kind == uform_cell_video_k ? ((grid >> 10) & 0x3ff) * columns : cells;
    for (size_t i = 0; i < cells; ++i) {
        size_t cell = first + i, within = i % step_cells;
        int32_t *position = batcher->positions + 3 * cell;
        batcher->kinds[cell] = (uint8_t)kind;
        batcher->values[cell] = (uint32_t)(row + i);
        batcher->segments[cell] = segment;
        if (kind == uform_cell_audio_k) position[0] = position[1] = position[2] = (int32_t)i;
        else {
            double frame = (double)(i / step_cells * uform_tube_depth_k);
            position[0] = kind == uform_cell_video_k ? (int32_t)llround(frame * (1000.0 / uform_tick_ms_k) / batcher->video_fps) : 0;
            position[1] = (int32_t)(within / columns), position[2] = (int32_t)(within % columns);
        }
        if (batcher->targets) batcher->targets[cell] = -1;
    }
    batcher->image_jobs[batcher->images++] = (uform_image_job_t){source, slice, grid, row, cells, first, key, NULL};
    batcher->media_cells[media] += cells;
}

/* The cache's slot for `key`: where it is, or the empty slot where it would go. */
static uform_cached_image_t *uform_cache_slot_(uform_batcher_t *batcher, uint64_t key) {
    size_t mask = batcher->cache_slots - 1, slot = (size_t)key & mask;
    while (batcher->cache[slot].patches && batcher->cache[slot].key != key) slot = (slot + 1) & mask;
    return &batcher->cache[slot];
}

/* Keeps `patches` (malloc'd, `bytes` long) under `key`, growing the table past half full; 0 when the
 * table cannot grow (the caller frees the patches). */
static int uform_cache_insert_(uform_batcher_t *batcher, uint64_t key, uint16_t *patches, size_t bytes) {
    if (2 * (batcher->cache_count + 1) > batcher->cache_slots) {
        size_t slots = batcher->cache_slots ? 2 * batcher->cache_slots : 1024;
        uform_cached_image_t *grown = calloc(slots, sizeof(uform_cached_image_t)), *old = batcher->cache;
        if (!grown) return 0;
        size_t old_slots = batcher->cache_slots;
        batcher->cache = grown, batcher->cache_slots = slots;
        for (size_t i = 0; i < old_slots; ++i)
            if (old[i].patches) *uform_cache_slot_(batcher, old[i].key) = old[i];
        free(old);
    }
    *uform_cache_slot_(batcher, key) = (uform_cached_image_t){key, patches};
    batcher->cache_count++, batcher->cache_bytes += bytes;
    return 1;
}

/* A media side decoded and cut into the calling pool thread's Float32 buffer (`*vectors`), and its
 * shape (uform_grid_cells_): an image's patches, an audio clip's first frames, a video's tubes. */
static uform_status_t uform_side_vectors_(uform_batcher_t *batcher, uform_corpus_t const *corpus, uform_slice_t slice,
                                          size_t thread, float **vectors, uint32_t *grid) {
    size_t media = uform_media_of_(slice), most = batcher->most[media];
    *vectors = batcher->decoded + thread * batcher->decoded_values;
    uform_status_t status;
    if (uform_slice_kind(slice) == uform_cell_image_k) {
        uform_pixels_t pixels = {0};
        size_t rows = 0, columns = 0;
        UFORM_TRY(uform_corpus_image_read(corpus, slice, &pixels));
        status = uform_image_patches(&pixels, most, *vectors, most, &rows, &columns);
        uform_pixels_free(&pixels);
        *grid = (uint32_t)(rows << 16 | columns);
        return status;
    }
    char path[4096];
    UFORM_TRY(uform_corpus_image_path(corpus, slice, path, sizeof(path)));
    if (uform_slice_kind(slice) == uform_cell_audio_k) {
        uform_audio_t audio;
        size_t frames = 0;
        UFORM_TRY(uform_audio_read(path, (double)(most * uform_audio_frame_length_k) / uform_audio_rate_k, &audio));
        status = uform_audio_frames(audio.samples, audio.count, most, *vectors, NULL, most, &frames);
        uform_audio_free(&audio);
        *grid = (uint32_t)frames;
        return status;
    }
    uform_video_t video;
    size_t steps = 0, rows = 0, columns = 0;
    UFORM_TRY(uform_video_read(path, batcher->video_fps, most * uform_tube_depth_k, &video));
    status = uform_video_tubes(&video, most, *vectors, NULL, most, &steps, &rows, &columns);
    uform_video_free(&video);
    *grid = (uint32_t)(steps << 20 | rows << 10 | columns);
    return status;
}

static void uform_decode_task_(void *context, size_t index, size_t thread) {
    uform_batcher_t *batcher = context;
    uform_image_job_t const *job = &batcher->image_jobs[index];
    size_t media = uform_media_of_(job->slice), values = uform_media_values_(media);
    uint16_t *rows = batcher->media[media] + job->first * values;
    if (job->cached) { /* decoded for an earlier batch: the same bits */
        memcpy(rows, job->cached, job->cells * values * sizeof(uint16_t));
        return;
    }
    uform_corpus_t const *corpus = &batcher->sources[job->source].corpus;
    float *decoded = NULL;
    uint32_t grid = 0;
    uform_status_t status = uform_side_vectors_(batcher, corpus, job->slice, thread, &decoded, &grid);
    if (status == uform_ok_k && grid != job->grid)
        status = uform_fail(uform_format_k, "%s: a media file changed since the batcher read it (%zu cells, not %zu)",
                            corpus->path, uform_grid_cells_(job->slice, grid), job->cells);
    if (status != uform_ok_k) { /* the first failure of the batch is kept; its message is this thread's */
        if (__atomic_exchange_n(&batcher->image_status, status, __ATOMIC_ACQ_REL) == uform_ok_k)
            snprintf(batcher->image_error, sizeof(batcher->image_error), "%s", uform_last_error());
        return;
    }
    uform_bf16_from_f32_array(decoded, rows, job->cells * values);
}

/* An image's BF16 patches (rows x columns, each 16 x 16 RGBA in row-major order) mirrored left to right
 * in place: each line of pixels across the image reversed. */
static void uform_mirror_patches_(uint16_t *patches, size_t rows, size_t columns) {
    size_t side = uform_patch_side_k, width = columns * side;
    for (size_t row = 0; row < rows; ++row)
        for (size_t y = 0; y < side; ++y)
            for (size_t x = 0; x < width / 2; ++x) {
                size_t mirrored = width - 1 - x;
                uint16_t *a = patches + ((row * columns + x / side) * side * side + y * side + x % side) * 4;
                uint16_t *b = patches + ((row * columns + mirrored / side) * side * side + y * side + mirrored % side) * 4;
                for (size_t channel = 0; channel < 4; ++channel) {
                    uint16_t kept = a[channel];
                    a[channel] = b[channel], b[channel] = kept;
                }
            }
}

/* The batch's image sides from sources with flip_images, each mirrored with probability 1/2 (after
 * the cache took its copies, which stay as the file is). */
static void uform_flip_images_(uform_batcher_t *batcher) {
    uform_rng_t rng = {uform_derive_seed_(batcher->seed, uform_flip_stream_k, batcher->state.batches - 1)};
    for (size_t j = 0; j < batcher->images; ++j) {
        uform_image_job_t const *job = &batcher->image_jobs[j];
        if (!batcher->sources[job->source].flip || uform_slice_kind(job->slice) != uform_cell_image_k) continue;
        if (uform_rng_uniform(&rng) < 0.5)
            uform_mirror_patches_(batcher->media[uform_media_of_(job->slice)] + job->first * uform_patch_length_k,
                                  job->grid >> 16, job->grid & 0xffff);
    }
}

static void uform_write_padding_(uform_batcher_t *batcher, size_t first, size_t count) {
    for (size_t cell = first; cell < first + count; ++cell) {
        batcher->kinds[cell] = uform_cell_padding_k;
        batcher->values[cell] = uform_pad_k;
        batcher->segments[cell] = -1;
        batcher->positions[3 * cell] = batcher->positions[3 * cell + 1] = batcher->positions[3 * cell + 2] = 0;
        if (batcher->targets) batcher->targets[cell] = -1;
    }
}

/* A side's content as 64 bits (FNV-1a): its kind, for a path its source (paths are relative to the
 * source's folder), and its bytes. Equal texts or images share a key; unequal ones collide with
 * probability about 2^-64. */
static uint64_t uform_side_key_(uint32_t source, uform_corpus_t const *corpus, uform_slice_t slice) {
    uint64_t key = 0xcbf29ce484222325ull;
    uint8_t const *bytes = uform_corpus_data(corpus, slice);
    key = (key ^ (uint64_t)slice.image) * 0x100000001b3ull;
    if (slice.image != uform_slice_image_bytes_k && slice.image) key = (key ^ source) * 0x100000001b3ull; /* a path */
    for (size_t i = 0; i < slice.length; ++i) key = (key ^ bytes[i]) * 0x100000001b3ull;
    return key;
}

/* Places one item at `cell`; its segments get row-local ids from `*local` and batch numbers from
 * `*segment`. Without `write` only the counts move, exactly as they would with it. */
static void uform_place_(uform_batcher_t *batcher, uform_node_t const *node, size_t cell, int32_t *local,
                         uint32_t *segment, uform_rng_t *mask_rng, int write) {
    uform_source_t const *source = &batcher->sources[node->source];
    uform_corpus_t const *corpus = &source->corpus;
    uform_record_t const *record = &corpus->records[node->record];
    size_t truncated = 0;
    size_t count = uform_record_texts_(corpus, record, 0, NULL);
    uform_item_lengths_(batcher, source, node->record, batcher->text_lengths, &truncated);
    batcher->state.truncated += truncated;
    batcher->state.segments += count;
    int pairs = record->kind == uform_record_pair_k;
    if (pairs) {
        if (write) {
            batcher->anchors[batcher->anchors_count] = *segment;
            batcher->anchor_first[batcher->anchors_count] = (uint32_t)batcher->candidates_count;
            batcher->anchor_positives[batcher->anchors_count] = record->positives_count;
            batcher->anchor_keys[batcher->anchors_count] = uform_side_key_(node->source, corpus, record->text);
            batcher->anchor_weights[batcher->anchors_count] = source->loss_weight;
        }
        batcher->anchors_count++;
    }
    for (size_t i = 0; i < count; ++i) {
        uform_slice_t slice;
        uform_record_texts_(corpus, record, i, &slice);
        size_t length = batcher->text_lengths[i];
        if (write && slice.image) {
            uform_write_media_(batcher, node->source, slice, uform_side_key_(node->source, corpus, slice), cell,
                               uform_side_grid_(source, node->record, i), *local);
            if (pairs && i > 0) batcher->candidates[batcher->candidates_count] = *segment;
        } else if (write) {
            uform_write_segment_(batcher, cell, uform_corpus_data(corpus, slice), length, *local);
            if (!pairs) uform_mask_spans_(batcher, cell, length, batcher->mask_ratio, batcher->mean_span, uform_mask_k, mask_rng);
            else if (i > 0) batcher->candidates[batcher->candidates_count] = *segment;
        }
        if (write && pairs && i > 0) batcher->candidate_keys[batcher->candidates_count] = uform_side_key_(node->source, corpus, slice);
        if (pairs && i > 0) batcher->candidates_count++;
        cell += length;
        ++*local;
        ++*segment;
    }
}

/* One batch: the waiting items, topped up to the lookahead before each choice, fill each row
 * with the longest item that fits; what is left waits for the next batch. */
static void uform_pack_(uform_batcher_t *batcher, int write) {
    uform_batcher_state_t *state = &batcher->state;
    for (uint32_t i = 0; i < state->waiting_count; ++i)
        uform_pool_insert_(batcher, state->waiting_sources[i], state->waiting_records[i]);
    state->waiting_count = 0;
    uform_rng_t mask_rng = {uform_derive_seed_(batcher->seed, uform_mask_stream_k, state->batches)};
    int pairs = batcher->objective != uform_objective_mlm_k, full = 0;
    uint32_t segment = 0;
    batcher->anchors_count = batcher->candidates_count = 0;
    batcher->images = 0;
    memset(batcher->media_cells, 0, sizeof(batcher->media_cells));
    for (size_t row = 0; row < batcher->rows; ++row) {
        size_t column = 0;
        int32_t local = 0;
        while (!full) {
            while (batcher->unplaced < uform_batcher_lookahead_k) uform_draw_(batcher);
            size_t length = uform_pool_longest_(batcher, batcher->columns - column);
            if (!length) break;
            if (pairs && batcher->anchors_count == batcher->anchors_capacity) {
                full = 1;
                break;
            }
            uform_node_t node = uform_pool_pop_(batcher, length);
            uform_place_(batcher, &node, row * batcher->columns + column, &local, &segment, &mask_rng, write);
            column += length;
        }
        if (write) uform_write_padding_(batcher, row * batcher->columns + column, batcher->columns - column);
    }
    /* The waiting list, longest first and in arrival order within a length: inserting it again
     * rebuilds the same buckets, which is what makes a saved state exact. */
    for (size_t length = uform_pool_longest_(batcher, batcher->columns); length;
         length = uform_pool_longest_(batcher, length - 1))
        while (batcher->heads[length] >= 0) {
            uform_node_t node = uform_pool_pop_(batcher, length);
            state->waiting_sources[state->waiting_count] = node.source;
            state->waiting_records[state->waiting_count++] = node.record;
        }
    state->batches++;
    if (write && pairs) {
        /* A candidate is a positive of anchor a when it is a positive of a's record, or equals one
         * of the positives of any anchor whose query equals a's (the same image or caption twice
         * in a batch is not a negative of itself). */
        size_t anchors = batcher->anchors_count, candidates = batcher->candidates_count;
        memset(batcher->labels, 0, anchors * candidates);
        for (size_t a = 0; a < anchors; ++a)
            for (size_t other = 0; other < anchors; ++other) {
                if (batcher->anchor_keys[other] != batcher->anchor_keys[a]) continue;
                for (size_t p = 0; p < batcher->anchor_positives[other]; ++p) {
                    size_t own = batcher->anchor_first[other] + p;
                    uint64_t key = batcher->candidate_keys[own];
                    batcher->labels[a * candidates + own] = 1;
                    for (size_t c = 0; c < candidates; ++c)
                        if (batcher->candidate_keys[c] == key) batcher->labels[a * candidates + c] = 1;
                }
            }
    }
}

/* MLM's media, each masked cell showing its kind's blank (a zero row after the batch's rows) and
 * targeting the media row of its true vector: of an image's n patches floor(ratio n + u), a uniform
 * subset; of an audio clip's frames spans, as the bytes' (audio_mask_ratio, audio_mean_span); of a
 * video's rows x columns positions floor(ratio rows columns + u), each masked at every step (whole
 * tubes across time). Seeded from (seed, batch), so a skipped batch needs no masks. */
static void uform_mask_media_(uform_batcher_t *batcher) {
    for (size_t m = 0; m < uform_media_kinds_k; ++m)
        if (batcher->media_cells[m])
            memset(batcher->media[m] + batcher->media_cells[m] * uform_media_values_(m), 0, uform_media_values_(m) * sizeof(uint16_t));
    uform_rng_t rng = {uform_derive_seed_(batcher->seed, uform_image_mask_stream_k, batcher->state.batches - 1)};
    for (size_t j = 0; j < batcher->images; ++j) {
        uform_image_job_t const *job = &batcher->image_jobs[j];
        uform_cell_kind_t kind = uform_slice_kind(job->slice);
        uint32_t blank = (uint32_t)batcher->media_cells[kind - uform_cell_image_k];
        if (kind == uform_cell_audio_k) {
            uform_mask_spans_(batcher, job->cell, job->cells, batcher->audio_mask_ratio, batcher->audio_mean_span, blank, &rng);
            continue;
        }
        size_t positions = kind == uform_cell_video_k ? ((job->grid >> 10) & 0x3ff) * (job->grid & 0x3ff) : job->cells;
        size_t steps = job->cells / positions;
        double ratio = kind == uform_cell_video_k ? batcher->video_mask_ratio : batcher->image_mask_ratio;
        size_t masked = (size_t)floor(ratio * (double)positions + uform_rng_uniform(&rng));
        if (masked > positions) masked = positions;
        for (size_t i = 0; i < positions && masked; ++i) /* selection sampling: each subset of `masked` equally likely */
            if (uform_rng_uniform(&rng) * (double)(positions - i) < (double)masked) {
                for (size_t step = 0; step < steps; ++step) {
                    size_t cell = job->cell + step * positions + i;
                    batcher->targets[cell] = (int32_t)batcher->values[cell];
                    batcher->values[cell] = blank;
                }
                masked--;
            }
    }
}

uform_status_t uform_batcher_next(uform_batcher_t *batcher, uform_batch_t *batch) {
    if (!batcher || !batch) return uform_fail(uform_invalid_argument_k, "uform_batcher_next: NULL argument");
    return uform_batcher_next_into(batcher, batcher->own, batch);
}

uform_status_t uform_batcher_next_into(uform_batcher_t *batcher, uform_batch_buffers_t *buffers, uform_batch_t *batch) {
    if (!batcher || !buffers || !batch) return uform_fail(uform_invalid_argument_k, "uform_batcher_next_into: NULL argument");
    if (buffers->batcher != batcher)
        return uform_fail(uform_invalid_argument_k, "uform_batcher_next_into: the buffers were made for another batcher");
    batcher->kinds = buffers->kinds, batcher->values = buffers->values, batcher->segments = buffers->segments;
    batcher->positions = buffers->positions, batcher->targets = buffers->targets, batcher->anchors = buffers->anchors;
    batcher->candidates = buffers->candidates, batcher->labels = buffers->labels;
    batcher->anchor_weights = buffers->anchor_weights;
    memcpy(batcher->media, buffers->media, sizeof(batcher->media));
    uform_pack_(batcher, 1);
    int masks = batcher->images && batcher->objective == uform_objective_mlm_k;
    if (masks) uform_mask_media_(batcher);
    if (batcher->images) {
        for (size_t j = 0; batcher->cache_slots && j < batcher->images; ++j) {
            uform_cached_image_t const *slot = uform_cache_slot_(batcher, batcher->image_jobs[j].key);
            batcher->image_jobs[j].cached = slot->patches;
        }
        batcher->image_status = uform_ok_k;
        uform_pool_for(batcher->pool, batcher->images, uform_decode_task_, batcher);
        if (batcher->image_status != uform_ok_k)
            return uform_fail(batcher->image_status, "uform_batcher_next: %s", batcher->image_error);
        /* Keep what was decoded while the budget lasts (a failed allocation only skips keeping it). */
        for (size_t j = 0; j < batcher->images; ++j) {
            uform_image_job_t const *job = &batcher->image_jobs[j];
            size_t values = uform_media_values_(uform_media_of_(job->slice)), bytes = job->cells * values * sizeof(uint16_t);
            if (job->cached || batcher->cache_bytes + bytes > batcher->cache_limit) continue;
            if (batcher->cache_slots && uform_cache_slot_(batcher, job->key)->patches) continue; /* twice in this batch */
            uint16_t *patches = malloc(bytes);
            if (!patches) continue;
            memcpy(patches, batcher->media[uform_media_of_(job->slice)] + job->first * values, bytes);
            if (!uform_cache_insert_(batcher, job->key, patches, bytes)) free(patches);
        }
        uform_flip_images_(batcher);
    }
    int pairs = batcher->objective != uform_objective_mlm_k;
    *batch = (uform_batch_t){
        .grid = {.rows = batcher->rows, .columns = batcher->columns, .kinds = batcher->kinds,
                 .values = batcher->values, .segments = batcher->segments, .positions = batcher->positions},
        .targets = pairs ? NULL : batcher->targets,
        .anchors = pairs ? batcher->anchors : NULL,
        .anchors_count = pairs ? batcher->anchors_count : 0,
        .candidates = pairs ? batcher->candidates : NULL,
        .candidates_count = pairs ? batcher->candidates_count : 0,
        .labels = pairs ? batcher->labels : NULL,
        .anchor_weights = pairs && batcher->weighted ? batcher->anchor_weights : NULL,
    };
    for (size_t m = 0; m < uform_media_kinds_k; ++m)
        batch->grid.media[m] = (uform_media_t){.data = batcher->media_cells[m] ? batcher->media[m] : NULL,
                                               .count = batcher->media_cells[m] + (masks && batcher->media_cells[m] ? 1 : 0),
                                               .dtype = uform_media_bf16_k};
    return uform_ok_k;
}

uform_status_t uform_batcher_skip(uform_batcher_t *batcher, size_t batches) {
    if (!batcher) return uform_fail(uform_invalid_argument_k, "uform_batcher_skip: NULL batcher");
    for (size_t i = 0; i < batches; ++i) uform_pack_(batcher, 0);
    return uform_ok_k;
}

void uform_batcher_save(uform_batcher_t const *batcher, uform_batcher_state_t *state) { *state = batcher->state; }

uform_status_t uform_batcher_restore(uform_batcher_t *batcher, uform_batcher_state_t const *state) {
    if (!batcher || !state) return uform_fail(uform_invalid_argument_k, "uform_batcher_restore: NULL argument");
    if (state->fingerprint != batcher->state.fingerprint || state->sources_count != batcher->sources_count)
        return uform_fail(uform_invalid_argument_k,
                          "uform_batcher_restore: the state belongs to another mixture, corpus, seed, rows or limit");
    if (state->waiting_count > uform_batcher_lookahead_k)
        return uform_fail(uform_invalid_argument_k, "uform_batcher_restore: %u waiting items, more than %d",
                          state->waiting_count, uform_batcher_lookahead_k);
    for (size_t s = 0; s < batcher->sources_count; ++s)
        if (state->cursors[s] > batcher->sources[s].corpus.records_count)
            return uform_fail(uform_invalid_argument_k, "uform_batcher_restore: source %zu cursor %llu is past its %zu records",
                              s, (unsigned long long)state->cursors[s], batcher->sources[s].corpus.records_count);
    for (uint32_t i = 0; i < state->waiting_count; ++i)
        if (state->waiting_sources[i] >= batcher->sources_count ||
            state->waiting_records[i] >= batcher->sources[state->waiting_sources[i]].corpus.records_count)
            return uform_fail(uform_invalid_argument_k, "uform_batcher_restore: waiting item %u is out of range", i);
    batcher->state = *state;
    for (size_t s = 0; s < batcher->sources_count; ++s) uform_shuffle_(batcher, s);
    return uform_ok_k;
}

void uform_batcher_stats(uform_batcher_t const *batcher, uform_batcher_stats_t *stats) {
    *stats = (uform_batcher_stats_t){
        .batches = batcher->state.batches,
        .segments = batcher->state.segments,
        .truncated = batcher->state.truncated,
        .records = batcher->records,
        .skipped_lines = batcher->skipped_lines,
        .images_skipped = batcher->images_skipped,
        .image_sides = batcher->media_sides[0],
        .video_sides = batcher->media_sides[1],
        .audio_sides = batcher->media_sides[2],
        .anchors_capacity = batcher->anchors_capacity,
        .candidates_capacity = batcher->candidates_capacity,
    };
}

void uform_batcher_close(uform_batcher_t *batcher) {
    if (!batcher) return;
    for (size_t s = 0; s < batcher->sources_count; ++s) {
        uform_corpus_close(&batcher->sources[s].corpus);
        free(batcher->sources[s].order);
        free(batcher->sources[s].lengths);
        free(batcher->sources[s].query_grids);
        free(batcher->sources[s].slice_grids);
    }
    free(batcher->sources);
    for (size_t slot = 0; batcher->cache && slot < batcher->cache_slots; ++slot) free(batcher->cache[slot].patches);
    free(batcher->cache);
    free(batcher->image_jobs);
    uform_batch_buffers_close(batcher->own);
    free(batcher->decoded);
    uform_pool_destroy(batcher->pool);
    uform_arena_destroy(&batcher->arena);
    free(batcher);
}

/* --- creation -------------------------------------------------------------------------------- */

void uform_batch_buffers_close(uform_batch_buffers_t *buffers) {
    if (!buffers) return;
    free(buffers->kinds), free(buffers->values), free(buffers->segments), free(buffers->positions), free(buffers->targets);
    free(buffers->anchors), free(buffers->candidates), free(buffers->labels), free(buffers->anchor_weights);
    for (size_t m = 0; m < uform_media_kinds_k; ++m) free(buffers->media[m]);
    free(buffers);
}

uform_status_t uform_batch_buffers_create(uform_batcher_t const *batcher, uform_batch_buffers_t **result) {
    if (!batcher || !result) return uform_fail(uform_invalid_argument_k, "uform_batch_buffers_create: NULL argument");
    *result = NULL;
    uform_batch_buffers_t *buffers = calloc(1, sizeof(*buffers));
    if (!buffers) return uform_fail(uform_out_of_memory_k, "uform_batch_buffers_create: out of memory");
    size_t cells = batcher->cells, anchors = batcher->anchors_capacity, candidates = batcher->candidates_capacity;
    int pairs = batcher->objective != uform_objective_mlm_k;
    buffers->batcher = batcher;
    buffers->kinds = malloc(cells);
    buffers->values = malloc(cells * sizeof(uint32_t));
    buffers->segments = malloc(cells * sizeof(int32_t));
    buffers->positions = malloc(cells * 3 * sizeof(int32_t));
    buffers->targets = pairs ? NULL : malloc(cells * sizeof(int32_t));
    buffers->anchors = malloc(anchors * sizeof(uint32_t) + 1); /* +1: text runs have none, and malloc(0) may be NULL */
    buffers->candidates = malloc(candidates * sizeof(uint32_t) + 1);
    buffers->labels = malloc(anchors * candidates + 1);
    buffers->anchor_weights = malloc(anchors * sizeof(float) + 1);
    int missing = 0;
    for (size_t m = 0; m < uform_media_kinds_k; ++m) {
        buffers->media[m] = batcher->media_sides[m] ? malloc((cells + 1) * uform_media_values_(m) * sizeof(uint16_t)) : NULL;
        missing |= batcher->media_sides[m] && !buffers->media[m];
    }
    if (!buffers->kinds || !buffers->values || !buffers->segments || !buffers->positions || (!pairs && !buffers->targets) ||
        !buffers->anchors || !buffers->candidates || !buffers->labels || !buffers->anchor_weights || missing) {
        uform_batch_buffers_close(buffers);
        return uform_fail(uform_out_of_memory_k, "uform_batch_buffers_create: out of memory for a batch of %zu cells", cells);
    }
    *result = buffers;
    return uform_ok_k;
}

/* What reading a source's images at load finds: each image side's grid, or why it failed. */
typedef struct uform_probe_t {
    uform_batcher_t *batcher;
    uform_source_t *entry;
    uform_slice_t const **sides; /* [images] */
    uint32_t *grids;             /* [images] rows << 16 | columns, 0 when it failed */
    char (*problems)[320];       /* [images] */
    uint16_t **patches;          /* [images] its BF16 patches while the cache's budget lasts, else NULL */
    size_t budget;               /* bytes of patches the probe may still keep (taken atomically) */
} uform_probe_t;

/* Takes `bytes` from a budget shared by the pool's threads; 0 when fewer are left. */
static int uform_take_budget_(size_t *budget, size_t bytes) {
    size_t left = __atomic_load_n(budget, __ATOMIC_ACQUIRE);
    do {
        if (left < bytes) return 0;
    } while (!__atomic_compare_exchange_n(budget, &left, left - bytes, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
    return 1;
}

static void uform_probe_task_(void *context, size_t index, size_t thread) {
    uform_probe_t *probe = context;
    uform_slice_t slice = *probe->sides[index];
    float *decoded = NULL;
    uint32_t grid = 0;
    probe->patches[index] = NULL;
    uform_status_t status = uform_side_vectors_(probe->batcher, &probe->entry->corpus, slice, thread, &decoded, &grid);
    probe->grids[index] = status == uform_ok_k ? grid : 0;
    if (status != uform_ok_k) {
        snprintf(probe->problems[index], sizeof(probe->problems[index]), "%s", uform_last_error());
        return;
    }
    /* Decoded already: keep its vectors for the batches while the budget lasts. */
    size_t values = uform_grid_cells_(slice, grid) * uform_media_values_(uform_media_of_(slice));
    if (!uform_take_budget_(&probe->budget, values * sizeof(uint16_t))) return;
    uint16_t *kept = malloc(values * sizeof(uint16_t));
    if (kept) uform_bf16_from_f32_array(decoded, kept, values);
    probe->patches[index] = kept;
}

/* Grows the decoding threads' buffers to hold one side of the widest media kind `slices` hold. */
static uform_status_t uform_reserve_decoded_(uform_batcher_t *batcher, uform_slice_t const *const *slices, size_t count,
                                             char const *path) {
    size_t values = batcher->decoded_values;
    for (size_t i = 0; i < count; ++i) {
        size_t media = uform_media_of_(*slices[i]), needed = batcher->most[media] * uform_media_values_(media);
        values = needed > values ? needed : values;
    }
    if (values == batcher->decoded_values) return uform_ok_k;
    float *grown = realloc(batcher->decoded, uform_pool_threads(batcher->pool) * values * sizeof(float));
    if (!grown) return uform_fail(uform_out_of_memory_k, "%s: cannot hold the decoding threads' vectors", path);
    batcher->decoded = grown, batcher->decoded_values = values;
    return uform_ok_k;
}

/* Decodes every media side a source names once, on the pool: their shapes, for packing; a record
 * with a file that does not decode fails the load, or with skip_malformed is dropped and counted. */
static uform_status_t uform_load_images_(uform_batcher_t *batcher, uform_mixture_source_t const *source,
                                         uform_source_t *entry) {
    uform_corpus_t *corpus = &entry->corpus;
    size_t images = 0;
    for (size_t r = 0; r < corpus->records_count; ++r)
        for (size_t i = 0; i < uform_record_texts_(corpus, &corpus->records[r], 0, NULL); ++i) {
            uform_slice_t slice;
            uform_record_texts_(corpus, &corpus->records[r], i, &slice);
            images += slice.image != 0;
        }
    if (!images) return uform_ok_k;
    if (!batcher->pool) UFORM_TRY(uform_pool_create(batcher->decode_threads, &batcher->pool));
    size_t budget = batcher->cache_limit > batcher->cache_bytes ? batcher->cache_limit - batcher->cache_bytes : 0;
    uform_probe_t probe = {batcher, entry, malloc(images * sizeof(uform_slice_t *)), malloc(images * sizeof(uint32_t)),
                           malloc(images * sizeof(*probe.problems)), calloc(images, sizeof(uint16_t *)), budget};
    entry->query_grids = calloc(corpus->records_count, sizeof(uint32_t));
    entry->slice_grids = calloc(corpus->slices_count ? corpus->slices_count : 1, sizeof(uint32_t));
    uform_status_t status = probe.sides && probe.grids && probe.problems && probe.patches && entry->query_grids && entry->slice_grids
                                ? uform_ok_k
                                : uform_fail(uform_out_of_memory_k, "%s: cannot hold the grids of %zu images", source->path, images);
    size_t found = 0;
    for (size_t r = 0; status == uform_ok_k && r < corpus->records_count; ++r) {
        uform_record_t const *record = &corpus->records[r];
        if (record->text.image) probe.sides[found++] = &record->text;
        for (size_t c = 0; c < (size_t)record->positives_count + record->negatives_count; ++c)
            if (corpus->slices[record->first_candidate + c].image) probe.sides[found++] = &corpus->slices[record->first_candidate + c];
    }
    if (status == uform_ok_k) status = uform_reserve_decoded_(batcher, probe.sides, images, source->path);
    if (status == uform_ok_k) uform_pool_for(batcher->pool, images, uform_probe_task_, &probe);
    /* The kept patches join the cache, once per content. */
    for (size_t i = 0; status == uform_ok_k && i < images; ++i) {
        uint16_t *patches = probe.patches[i];
        if (!patches) continue;
        uint64_t key = uform_side_key_((uint32_t)(entry - batcher->sources), corpus, *probe.sides[i]);
        size_t bytes = uform_grid_cells_(*probe.sides[i], probe.grids[i]) * uform_media_values_(uform_media_of_(*probe.sides[i])) *
                       sizeof(uint16_t);
        if ((batcher->cache_slots && uform_cache_slot_(batcher, key)->patches) || !uform_cache_insert_(batcher, key, patches, bytes))
            free(patches);
        probe.patches[i] = NULL;
    }
    for (size_t i = 0; probe.patches && i < images; ++i) free(probe.patches[i]);
    /* Each record's grids, then the records kept, in order. */
    size_t kept = 0;
    found = 0;
    for (size_t r = 0; status == uform_ok_k && r < corpus->records_count; ++r) {
        uform_record_t const *record = &corpus->records[r];
        size_t sides = uform_record_texts_(corpus, record, 0, NULL), patches = 0, texts = 0, failed = SIZE_MAX;
        for (size_t i = 0; i < sides; ++i) {
            uform_slice_t slice;
            uform_record_texts_(corpus, record, i, &slice);
            if (!slice.image) {
                texts++;
                continue;
            }
            uint32_t grid = probe.grids[found];
            if (!grid && failed == SIZE_MAX) failed = found;
            patches += uform_grid_cells_(slice, grid);
            if (i) entry->slice_grids[record->first_candidate + i - 1] = grid;
            else entry->query_grids[r] = grid;
            found++;
        }
        if (failed == SIZE_MAX && patches + texts > batcher->columns)
            status = uform_fail(uform_format_k, "%s:%zu: the record's media fill %zu cells and its texts need %zu: more than a row of %zu",
                                source->path, record->line, patches, texts, batcher->columns);
        else if (failed != SIZE_MAX && !source->skip_malformed)
            status = uform_fail(uform_format_k, "%s:%zu: %s", source->path, record->line, probe.problems[failed]);
        else if (failed != SIZE_MAX) batcher->images_skipped++;
        else {
            entry->query_grids[kept] = entry->query_grids[r];
            corpus->records[kept++] = *record;
            for (size_t i = 0; i < sides; ++i) {
                uform_slice_t slice;
                uform_record_texts_(corpus, record, i, &slice);
                if (slice.image) batcher->media_sides[uform_media_of_(slice)]++;
            }
        }
    }
    if (status == uform_ok_k) corpus->records_count = kept;
    free(probe.sides), free(probe.grids), free(probe.problems), free(probe.patches);
    return status;
}

/* Reads one source and checks that its records suit the objective. */
static uform_status_t uform_load_source_(uform_batcher_t *batcher, uform_mixture_source_t const *source,
                                         uform_source_t *entry) {
    uform_jsonl_options_t options = {.skip_malformed = source->skip_malformed};
    UFORM_TRY(uform_corpus_read(source->path, &options, &entry->corpus));
    UFORM_TRY(uform_load_images_(batcher, source, entry));
    uform_corpus_t const *corpus = &entry->corpus;
    batcher->skipped_lines += corpus->skipped;
    if (!corpus->records_count)
        return uform_fail(uform_format_k, "%s: no records (%zu lines, %zu skipped as malformed, %zu records dropped for an image that does not decode)",
                          source->path, corpus->lines, corpus->skipped, batcher->images_skipped);
    if (corpus->records_count > UINT32_MAX)
        return uform_fail(uform_unsupported_k, "%s: %zu records; a source holds at most %u", source->path,
                          corpus->records_count, UINT32_MAX);
    int pairs = batcher->objective != uform_objective_mlm_k;
    for (size_t r = 0; r < corpus->records_count; ++r) {
        uform_record_t const *record = &corpus->records[r];
        if ((record->kind == uform_record_pair_k) != pairs)
            return uform_fail(uform_format_k, "%s:%zu: a %s record, but an %s mixture reads %s records", source->path,
                              record->line, pairs ? "text" : "pair", uform_objective_name(batcher->objective),
                              pairs ? "{\"query\", \"positives\"}" : "{\"text\"}");
        size_t texts = uform_record_texts_(corpus, record, 0, NULL);
        if (texts > batcher->columns)
            return uform_fail(uform_format_k, "%s:%zu: a record of %zu texts cannot fit a row of %zu columns",
                              source->path, record->line, texts, batcher->columns);
        if (texts > batcher->texts_capacity) batcher->texts_capacity = texts;
    }
    entry->order = malloc(corpus->records_count * sizeof(uint32_t));
    entry->lengths = malloc(corpus->records_count * sizeof(uint32_t));
    if (!entry->order || !entry->lengths)
        return uform_fail(uform_out_of_memory_k, "%s: cannot hold the order of %zu records", source->path,
                          corpus->records_count);
    return uform_ok_k;
}

static uform_status_t uform_batcher_build_(uform_batcher_t *batcher, uform_mixture_t const *mixture,
                                           uform_batcher_options_t const *options) {
    batcher->objective = mixture->objective;
    batcher->rows = options->rows;
    batcher->columns = mixture->columns;
    batcher->seed = options->seed;
    batcher->mask_ratio = mixture->mask_ratio;
    batcher->mean_span = mixture->mean_span;
    batcher->image_mask_ratio = mixture->image_mask_ratio;
    if (!batcher->rows || !batcher->columns || batcher->columns > uform_mixture_max_columns_k ||
        batcher->rows > (1u << 28) / batcher->columns)
        return uform_fail(uform_invalid_argument_k, "uform_batcher_create: %zu rows of %zu columns (at most 2^28 cells)",
                          batcher->rows, batcher->columns);
    if (!mixture->sources_count || mixture->sources_count > uform_mixture_max_sources_k)
        return uform_fail(uform_invalid_argument_k, "uform_batcher_create: %zu sources (1 to %d)",
                          mixture->sources_count, uform_mixture_max_sources_k);
    if (!(mixture->mask_ratio > 0 && mixture->mask_ratio < 1) || !(mixture->mean_span >= 1))
        return uform_fail(uform_invalid_argument_k, "uform_batcher_create: mask_ratio %g, mean_span %g out of range",
                          mixture->mask_ratio, mixture->mean_span);
    batcher->cells = batcher->rows * batcher->columns;
    batcher->sources_count = mixture->sources_count;
    batcher->sources = calloc(batcher->sources_count, sizeof(uform_source_t));
    if (!batcher->sources) return uform_fail(uform_out_of_memory_k, "uform_batcher_create: sources");
    batcher->texts_capacity = 1;
    size_t const most[uform_media_kinds_k] = {uform_image_patches_k, uform_video_tubes_k, uform_audio_frames_k};
    for (size_t m = 0; m < uform_media_kinds_k; ++m) batcher->most[m] = batcher->columns < most[m] ? batcher->columns : most[m];
    batcher->video_fps = mixture->video_fps > 0 ? mixture->video_fps : uform_video_fps_k;
    batcher->audio_mask_ratio = mixture->audio_mask_ratio, batcher->audio_mean_span = mixture->audio_mean_span;
    batcher->video_mask_ratio = mixture->video_mask_ratio;
    batcher->decode_threads = options->decode_threads;
    batcher->cache_limit = options->image_cache_mb == SIZE_MAX ? 0
                           : (options->image_cache_mb ? options->image_cache_mb : (size_t)uform_batcher_image_cache_mb_k) << 20;
    for (size_t s = 0; s < batcher->sources_count; ++s)
        UFORM_TRY(uform_load_source_(batcher, &mixture->sources[s], &batcher->sources[s]));

    /* Item lengths, and the bounds that size the pair buffers: a batch holds at most
     * columns / shortest item anchors per row, and each brings at most its own candidates. */
    uint32_t *lengths = malloc(batcher->texts_capacity * sizeof(uint32_t));
    if (!lengths) return uform_fail(uform_out_of_memory_k, "uform_batcher_create: lengths");
    size_t shortest = batcher->columns, most_candidates = 0;
    double total_weight = 0;
    uint64_t fingerprint = uform_mix_(options->seed ^ uform_mix_(batcher->rows) ^ uform_mix_(batcher->columns << 8 | batcher->objective));
    fingerprint = uform_mix_(fingerprint ^ uform_double_bits_(batcher->mask_ratio)) ^ uform_double_bits_(batcher->mean_span);
    if (batcher->media_sides[0]) fingerprint = uform_mix_(fingerprint ^ uform_double_bits_(batcher->image_mask_ratio)); /* text runs resume as before */
    if (batcher->media_sides[1])
        fingerprint = uform_mix_(uform_mix_(fingerprint ^ uform_double_bits_(batcher->video_fps)) ^ uform_double_bits_(batcher->video_mask_ratio));
    if (batcher->media_sides[2])
        fingerprint = uform_mix_(uform_mix_(fingerprint ^ uform_double_bits_(batcher->audio_mask_ratio)) ^ uform_double_bits_(batcher->audio_mean_span));
    fingerprint = uform_mix_(fingerprint ^ options->anchors_limit ^ ((uint64_t)uform_batcher_lookahead_k << 48));
    for (size_t s = 0; s < batcher->sources_count; ++s) {
        uform_source_t *entry = &batcher->sources[s];
        for (size_t r = 0; r < entry->corpus.records_count; ++r) {
            uform_record_t const *record = &entry->corpus.records[r];
            size_t length = uform_item_lengths_(batcher, entry, r, lengths, NULL);
            entry->lengths[r] = (uint32_t)length;
            if (length < shortest) shortest = length;
            size_t candidates = uform_record_texts_(&entry->corpus, record, 0, NULL) - 1;
            if (candidates > most_candidates) most_candidates = candidates;
        }
        batcher->records += entry->corpus.records_count;
        total_weight += mixture->sources[s].weight;
        fingerprint = uform_mix_(fingerprint ^ entry->corpus.records_count) ^ entry->corpus.bytes_count;
        fingerprint = uform_mix_(fingerprint ^ uform_double_bits_(mixture->sources[s].weight));
        if (mixture->sources[s].flip_images) fingerprint = uform_mix_(fingerprint ^ uform_flip_stream_k); /* other batches */
    }
    free(lengths);
    double running = 0;
    for (size_t s = 0; s < batcher->sources_count; ++s) {
        running += mixture->sources[s].weight;
        batcher->sources[s].cumulative = s + 1 == batcher->sources_count ? 1.0 : running / total_weight;
        batcher->sources[s].loss_weight = (float)mixture->sources[s].loss_weight;
        batcher->weighted |= mixture->sources[s].loss_weight != 1.0;
        batcher->sources[s].flip = mixture->sources[s].flip_images;
    }
    int pairs = batcher->objective != uform_objective_mlm_k;
    if (!pairs && batcher->weighted)
        return uform_fail(uform_invalid_argument_k, "uform_batcher_create: %s: 'loss_weight' scales a pair objective's "
                          "anchors; the mlm objective has none (drop it, or train contrastive or rerank)", mixture->path);
    if (pairs) {
        batcher->anchors_capacity = batcher->rows * (batcher->columns / shortest);
        if (options->anchors_limit && options->anchors_limit < batcher->anchors_capacity)
            batcher->anchors_capacity = options->anchors_limit;
        batcher->candidates_capacity = batcher->anchors_capacity * most_candidates;
        if (batcher->candidates_capacity > batcher->cells) batcher->candidates_capacity = batcher->cells;
        if (batcher->candidates_capacity && batcher->anchors_capacity > ((size_t)1 << 32) / batcher->candidates_capacity)
            return uform_fail(uform_invalid_argument_k,
                              "uform_batcher_create: labels for %zu anchors x %zu candidates exceed 4 GiB; "
                              "set anchors_limit", batcher->anchors_capacity, batcher->candidates_capacity);
    }

    size_t cells = batcher->cells, columns = batcher->columns, anchors = batcher->anchors_capacity;
    size_t bytes = columns * 4 + batcher->texts_capacity * 4 + 2 * (columns + 1) * 4 + (columns / 64 + 1) * 8 +
                   anchors * 16 + batcher->candidates_capacity * 8 + 12 * 64;
    UFORM_TRY(uform_arena_create(&batcher->arena, bytes));
    uform_arena_t *arena = &batcher->arena;
    batcher->span_lengths = uform_arena_take(arena, columns * 4);
    batcher->text_lengths = uform_arena_take(arena, batcher->texts_capacity * 4);
    batcher->heads = uform_arena_take(arena, (columns + 1) * 4);
    batcher->tails = uform_arena_take(arena, (columns + 1) * 4);
    batcher->occupied = uform_arena_take(arena, (columns / 64 + 1) * 8);
    batcher->anchor_first = uform_arena_take(arena, anchors * 4);
    batcher->anchor_positives = uform_arena_take(arena, anchors * 4);
    batcher->anchor_keys = uform_arena_take(arena, anchors * 8);
    batcher->candidate_keys = uform_arena_take(arena, batcher->candidates_capacity * 8);
    for (size_t i = 0; i <= columns; ++i) batcher->heads[i] = batcher->tails[i] = -1;
    memset(batcher->occupied, 0, (columns / 64 + 1) * 8);
    for (int i = 0; i < uform_batcher_lookahead_k; ++i) batcher->nodes[i].next = i + 1 < uform_batcher_lookahead_k ? i + 1 : -1;
    batcher->free_node = 0;

    if (batcher->decoded) { /* media sides: the batch's jobs (the threads' buffers came with the load) */
        batcher->image_jobs = malloc(cells * sizeof(uform_image_job_t));
        if (!batcher->image_jobs)
            return uform_fail(uform_out_of_memory_k, "uform_batcher_create: cannot hold a batch's media jobs (%zu cells)", cells);
    }
    UFORM_TRY(uform_batch_buffers_create(batcher, &batcher->own));
    batcher->targets = batcher->own->targets; /* skipping packs as writing would: MLM has targets */
    batcher->state.fingerprint = fingerprint;
    batcher->state.rng = uform_derive_seed_(options->seed, 0, 0);
    batcher->state.sources_count = (uint32_t)batcher->sources_count;
    for (size_t s = 0; s < batcher->sources_count; ++s) uform_shuffle_(batcher, s);
    return uform_ok_k;
}

uform_status_t uform_batcher_create(uform_mixture_t const *mixture, uform_batcher_options_t const *options,
                                    uform_batcher_t **batcher) {
    if (!mixture || !options || !batcher)
        return uform_fail(uform_invalid_argument_k, "uform_batcher_create: NULL argument");
    *batcher = NULL;
    uform_batcher_t *created = calloc(1, sizeof(uform_batcher_t));
    if (!created) return uform_fail(uform_out_of_memory_k, "uform_batcher_create: batcher");
    uform_status_t status = uform_batcher_build_(created, mixture, options);
    if (status != uform_ok_k) {
        uform_batcher_close(created);
        return status;
    }
    *batcher = created;
    return uform_ok_k;
}
