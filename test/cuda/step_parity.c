/*  step_parity.c: the CUDA training step (src/cuda/step.h) against the CPU reference trainer
 *  (include/uform/train.h) from one start, for masked bytes, contrastive (Matryoshka SigLIP over the
 *  attention pool) and rerank (rerank.proj per cell, rows normalized, the ranked sigmoid over MaxSim),
 *  the pair objectives also with the opt-in TCR and Lipschitz terms, masked bytes and contrastive also
 *  over grids that pack image segments beside texts (a model with the vision frontend; masked bytes
 *  once more with half the patches masked for the mae head), and over mixed grids of image, video
 *  and audio segments beside texts (every media frontend; masked bytes with every masked modelling
 *  head, half of each kind's vectors masked): every tensor's gradient on one
 *  batch, the loss, the loss curve of full Adafactor steps, bitwise repeatability of a second GPU
 *  step, and a planted control (the step's RMSNorm backward with a dropped term) that the gradient
 *  check must reject. Runs without recomputation, with it, and with it but the last block kept and
 *  the others' attention outputs kept (all three bitwise equal). Exits 77 (skipped) without a CUDA device; nonzero when a check fails or a
 *  control is missed.
 *
 *      uform_step_parity [--json FILE] [--objective mlm|contrastive|rerank|images|media|all] [--width 128] [--depth 2]
 *                        [--rows 4] [--columns 256] [--steps 20]
 */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../c/check.h"
#include "cuda_ok.h"
#include "cuda/batch.h"
#include "cuda/plant.h"
#include "cuda/step.h"
#include "core/numeric.h"
#include "model/tensors.h"
#include "uform/uform.h"


/* A step call: its status and the step's message (the call and kernel that failed). */
#define STEP_OK(step, call)                                                                                           \
    do {                                                                                                              \
        if ((call) != uform_ok_k) {                                                                                   \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, uform_cuda_step_error(step));      \
            exit(1);                                                                                                  \
        }                                                                                                             \
    } while (0)

#define UFORM_OK(call)                                                                                                \
    do {                                                                                                              \
        uform_status_t status_ = (call);                                                                              \
        if (status_ != uform_ok_k) {                                                                                  \
            fprintf(stderr, "%s:%d: %s failed (%s): %s\n", __FILE__, __LINE__, #call, uform_status_name(status_),     \
                    uform_last_error());                                                                              \
            exit(1);                                                                                                  \
        }                                                                                                             \
    } while (0)

static double const bf16_unit_ = 1.0 / 256.0; /* BF16 unit roundoff: 8 significant bits, round to nearest */
static double const learning_rate_ = 1e-3;    /* twice the custom tiers' 5e-4: the loss moves visibly in 20 steps */
static uint64_t const batch_seed_ = 20240607, model_seed_ = 7;

/* ---------------------------------------------------------------------------------------------
 * What is compared
 * ------------------------------------------------------------------------------------------- */

typedef struct variant_t {
    char const *name; /* printed, and the JSON key of a pair objective */
    uform_objective_t objective;
    double tcr_lambda, lipschitz_lambda;
    unsigned media; /* the media kinds (bit k: kind uform_cell_image_k + k) whose frontends the model carries and
                     * whose segments the batches pack beside texts; 0: texts alone */
    int mae;        /* 1 (masked bytes with media): the model carries each kind's masked modelling head and half
                     * of each kind's vectors are masked */
} variant_t;

enum { image_bit_k = 1, video_bit_k = 2, audio_bit_k = 4, every_medium_k = 7 };

/* The spectral runs weigh TCR and Lipschitz at 0.1 as test_uform_base_cuda.py does; power iteration
 * at the trainer's default steps on both sides. */
static variant_t const variants_[] = {
    {"mlm", uform_objective_mlm_k, 0, 0, 0, 0},
    {"mlm+images", uform_objective_mlm_k, 0, 0, image_bit_k, 0},
    {"mlm+images+mae", uform_objective_mlm_k, 0, 0, image_bit_k, 1},
    {"mlm+media+mae", uform_objective_mlm_k, 0, 0, every_medium_k, 1},
    {"contrastive", uform_objective_contrastive_k, 0, 0, 0, 0},
    {"contrastive+tcr+lipschitz", uform_objective_contrastive_k, 0.1, 0.1, 0, 0},
    {"contrastive+images", uform_objective_contrastive_k, 0, 0, image_bit_k, 0},
    {"contrastive+media", uform_objective_contrastive_k, 0, 0, every_medium_k, 0},
    {"rerank", uform_objective_rerank_k, 0, 0, 0, 0},
    {"rerank+tcr+lipschitz", uform_objective_rerank_k, 0.1, 0.1, 0, 0},
};

static int pairs_(variant_t const *v) { return v->objective != uform_objective_mlm_k; }
static int rerank_(variant_t const *v) { return v->objective == uform_objective_rerank_k; }
static int spectral_(variant_t const *v) { return v->tcr_lambda > 0 || v->lipschitz_lambda > 0; }
/* Whether the attention pool feeds the loss: SigLIP's embeddings, or those the spectral terms read. */
static int pooled_(variant_t const *v) { return v->objective == uform_objective_contrastive_k || spectral_(v); }

/* ---------------------------------------------------------------------------------------------
 * Deterministic batches
 * ------------------------------------------------------------------------------------------- */

static uint64_t state_;
static uint64_t next_(void) { /* SplitMix64 */
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double uniform_(void) { return (double)(next_() >> 11) / 9007199254740992.0; }

/* One batch as both sides take it: the grid of uform_batch_t and the GPU slot's cell lists. A pair
 * batch also lists anchors, candidates and labels, and its spans are the texts in uform_forward's
 * numbering, then the padding runs, as src/cuda/batch.c lays them out (which batch_gpu_ checks). */
typedef struct host_batch_t {
    size_t rows, columns, cells, segments; /* segments: the spans the GPU gets */
    size_t texts, anchors_count, candidates_count;
    uint8_t *kinds, *labels;
    float *anchor_weights; /* a mixture's loss_weight per anchor: every third anchor's row at half */
    uint32_t *values, *segment_of, *spans, *anchors, *candidates, *positives;
    int32_t *row_segments, *positions, *targets;
    /* Media variants, by kind: the cells' vectors (grid.media's rows, one per cell in cell order), in
     * Float32 and their BF16 values; `bf16` says which the batch gives both sides. */
    size_t media_rows[uform_media_kinds_k];
    float *rows32[uform_media_kinds_k];
    uint16_t *rows16[uform_media_kinds_k];
    unsigned kinds_mask;
    int bf16;
    int mae; /* each kind's media row 0 is the blank vector that masked cells show; their targets name their true rows */
} host_batch_t;

/* The width of media kind index k's vectors (1024, 1536, 320). */
static size_t values_of_(size_t k) { return uform_media_info((uform_cell_kind_t)(uform_cell_image_k + k))->values; }
/* The batch's media cells of every kind (less the blank rows). */
static size_t media_cells_(host_batch_t const *b) {
    size_t total = 0;
    for (size_t k = 0; k < uform_media_kinds_k; ++k)
        if (b->media_rows[k]) total += b->media_rows[k] - (b->mae ? 1 : 0);
    return total;
}

static void batch_alloc_(host_batch_t *b, size_t rows, size_t columns, unsigned media) {
    size_t n = rows * columns;
    *b = (host_batch_t){.rows = rows, .columns = columns, .cells = n};
    b->kinds = malloc(n), b->values = malloc(n * 4), b->segment_of = malloc(n * 4), b->spans = malloc(2 * n * 4);
    b->row_segments = malloc(n * 4), b->positions = malloc(3 * n * 4), b->targets = malloc(n * 4);
    b->anchors = malloc(n * 4), b->candidates = malloc(n * 4), b->positives = malloc(n * 4), b->anchor_weights = malloc(n * 4);
    int rows_ok = 1;
    b->kinds_mask = media;
    for (size_t k = 0; k < uform_media_kinds_k; ++k) {
        if (!(media >> k & 1)) continue; /* a row per cell, and the blank one */
        b->rows32[k] = malloc((n + 1) * values_of_(k) * 4), b->rows16[k] = malloc((n + 1) * values_of_(k) * 2);
        rows_ok &= b->rows32[k] && b->rows16[k];
    }
    if (!b->kinds || !b->values || !b->segment_of || !b->spans || !b->row_segments || !b->positions || !b->targets ||
        !b->anchors || !b->candidates || !b->positives || !rows_ok) {
        fprintf(stderr, "step_parity: out of host memory for a %zu-cell batch\n", n);
        exit(1);
    }
}

static void batch_free_(host_batch_t *b) {
    free(b->kinds), free(b->values), free(b->segment_of), free(b->spans), free(b->row_segments), free(b->positions);
    free(b->targets), free(b->anchors), free(b->candidates), free(b->positives), free(b->labels), free(b->anchor_weights);
    for (size_t k = 0; k < uform_media_kinds_k; ++k) free(b->rows32[k]), free(b->rows16[k]);
}

/* Text-like bytes (skewed letters and spaces, 10% uniform over 0..255) so the loss falls within 20 steps
 * and every embedding row can be touched. */
static uint32_t byte_(void) {
    double u = uniform_();
    if (u < 0.10) return (uint32_t)(next_() & 255);
    if (u < 0.25) return ' ';
    uint32_t k = 0;
    while (k < 25 && uniform_() > 0.25) k++;
    return 'a' + k;
}

/* The image segments' patch grids (rows x columns): 6 to 72 cells, under, at and over the 64-cell tile. */
static size_t const image_grids_[][2] = {{2, 3}, {3, 3}, {4, 5}, {5, 5}, {3, 11}, {5, 13}, {8, 9}};
enum { image_grids_count_k = sizeof(image_grids_) / sizeof(image_grids_[0]) };

/* A media segment of `grid` cells (rows x columns) of kind index k at `cell`, row-local segment
 * `local`, each cell's media row the next one, as the decoders give them. An image: t = 0, h = patch
 * row, w = patch column (docs/images.md), 16x16 RGBA values k / 255, alpha mostly opaque. A video:
 * the grid's rows are tube steps, t = 2 ticks a step, h and w the column's place in a 2-wide frame
 * of tubes, RGB values k / 255. Audio: t = h = w = the frame's index, samples in [-1, 1). */
static void media_write_(host_batch_t *b, size_t k, size_t cell, size_t const grid[2], int32_t local) {
    size_t values = values_of_(k);
    for (size_t i = 0; i < grid[0] * grid[1]; ++i) {
        size_t at = cell + i, row = b->media_rows[k]++;
        b->kinds[at] = (uint8_t)(uform_cell_image_k + k), b->values[at] = (uint32_t)row, b->targets[at] = -1;
        b->row_segments[at] = local;
        if (b->mae && uniform_() < 0.5) b->values[at] = 0, b->targets[at] = (int32_t)row; /* masked: shows the blank */
        int32_t *p = b->positions + 3 * at, column = (int32_t)(i % grid[1]);
        if (k == 0) p[0] = 0, p[1] = (int32_t)(i / grid[1]), p[2] = column;
        else if (k == 1) p[0] = 2 * (int32_t)(i / grid[1]), p[1] = column / 2, p[2] = column % 2;
        else p[0] = p[1] = p[2] = (int32_t)i;
        for (size_t v = 0; v < values; ++v) {
            uint32_t level = (uint32_t)(next_() & 255);
            if (k == 0 && v % 4 == 3 && uniform_() < 0.8) level = 255;
            float value = k == 2 ? (float)(2 * uniform_() - 1) : (float)level / 255.0f;
            b->rows32[k][row * values + v] = value;
            b->rows16[k][row * values + v] = uform_f32_to_bf16(value);
        }
    }
}

/* A media kind index drawn from the batch's kinds. */
static size_t media_kind_(host_batch_t const *b) {
    size_t kinds[uform_media_kinds_k], count = 0;
    for (size_t k = 0; k < uform_media_kinds_k; ++k)
        if (b->kinds_mask >> k & 1) kinds[count++] = k;
    return kinds[next_() % count];
}

/* Batch `index`: rows filled wholly by segments of mixed lengths (under, at and over the 64-cell tile,
 * starting and ending mid-tile, the last one cut at the row's end), ~15% of cells masked, text
 * positions t = h = w = index in the segment (as src/data/batcher.c and src/encode.c set them). With
 * media, about half the segments are media segments (of a kind drawn from the batch's) where their
 * grid fits (never scored by the byte head: media cells have no byte targets), the vectors in
 * Float32 on even batches and BF16 on odd ones. */
static void batch_make_(host_batch_t *b, size_t index, int mae) {
    static size_t const lengths[] = {1, 9, 17, 33, 48, 64, 65, 100, 130, 200};
    state_ = batch_seed_ * 0x100000001b3ull + index;
    size_t masked = 0;
    b->segments = 0, b->bf16 = (int)(index % 2), b->mae = mae;
    for (size_t k = 0; k < uform_media_kinds_k; ++k) {
        b->media_rows[k] = 0;
        if (mae && b->kinds_mask >> k & 1) { /* the blank vector, media row 0 */
            memset(b->rows32[k], 0, values_of_(k) * 4), memset(b->rows16[k], 0, values_of_(k) * 2);
            b->media_rows[k] = 1;
        }
    }
    for (size_t row = 0; row < b->rows; ++row) {
        size_t column = 0;
        int32_t local = 0;
        while (column < b->columns) {
            if (b->kinds_mask && next_() % 2) {
                size_t const *grid = image_grids_[next_() % image_grids_count_k];
                if (grid[0] * grid[1] <= b->columns - column) {
                    size_t first = row * b->columns + column, length = grid[0] * grid[1];
                    media_write_(b, media_kind_(b), first, grid, local);
                    for (size_t i = 0; i < length; ++i) b->segment_of[first + i] = (uint32_t)b->segments;
                    b->spans[2 * b->segments] = (uint32_t)first, b->spans[2 * b->segments + 1] = (uint32_t)length;
                    b->segments++, local++, column += length;
                    continue;
                }
            }
            size_t length = lengths[next_() % (sizeof(lengths) / sizeof(lengths[0]))];
            if (length > b->columns - column) length = b->columns - column;
            size_t first = row * b->columns + column;
            for (size_t i = 0; i < length; ++i) {
                size_t cell = first + i;
                uint32_t byte = byte_();
                int mask = uniform_() < 0.15;
                b->kinds[cell] = uform_cell_byte_k;
                b->values[cell] = mask ? uform_mask_k : byte;
                b->targets[cell] = mask ? (int32_t)byte : -1;
                b->row_segments[cell] = local;
                b->segment_of[cell] = (uint32_t)b->segments;
                for (int axis = 0; axis < 3; ++axis) b->positions[3 * cell + axis] = (int32_t)i;
                masked += (size_t)mask;
            }
            b->spans[2 * b->segments] = (uint32_t)first, b->spans[2 * b->segments + 1] = (uint32_t)length;
            b->segments++, local++, column += length;
        }
    }
    if (!masked) b->targets[0] = (int32_t)b->values[0], b->values[0] = uform_mask_k; /* both sides need a scored cell */
}

/* Writes `length` bytes as one text at `cell`, row-local segment `local`, positions t = h = w = index
 * (as src/data/batcher.c writes them). */
static void text_write_(host_batch_t *b, size_t cell, uint32_t const *bytes, size_t length, int32_t local) {
    for (size_t i = 0; i < length; ++i) {
        size_t at = cell + i;
        b->kinds[at] = uform_cell_byte_k, b->values[at] = bytes[i], b->targets[at] = -1, b->row_segments[at] = local;
        for (int axis = 0; axis < 3; ++axis) b->positions[3 * at + axis] = (int32_t)i;
    }
}

/* Padding as src/data/batcher.c writes it: PAD, segment -1, positions 0. */
static void padding_write_(host_batch_t *b, size_t cell, size_t count) {
    for (size_t at = cell; at < cell + count; ++at) {
        b->kinds[at] = uform_cell_padding_k, b->values[at] = uform_pad_k, b->targets[at] = -1, b->row_segments[at] = -1;
        for (int axis = 0; axis < 3; ++axis) b->positions[3 * at + axis] = 0;
    }
}

/* The GPU's spans as src/cuda/batch.c should make them, laid out here independently: each run of one
 * segment id a span, the texts first (0..texts-1, cell order, the CPU's numbering), then the padding runs. */
static void pair_spans_(host_batch_t *b) {
    size_t next_text = 0, next_padding = b->texts, span = 0;
    for (size_t row = 0; row < b->rows; ++row) {
        int32_t previous = -1;
        for (size_t column = 0; column < b->columns; ++column) {
            size_t cell = row * b->columns + column;
            int32_t segment = b->row_segments[cell];
            int padding = segment < 0;
            if (!column || (padding ? -1 : segment) != previous) {
                span = padding ? next_padding++ : next_text++;
                b->spans[2 * span] = (uint32_t)cell, b->spans[2 * span + 1] = 0;
            }
            b->spans[2 * span + 1]++;
            b->segment_of[cell] = (uint32_t)span;
            previous = padding ? -1 : segment;
        }
    }
    b->segments = next_padding;
}

enum { letters_k = 27, text_longest_k = 256 }; /* the space and 'a'..'z'; the longest text a pair batch writes */

/* byte_() without its uniform tail: the space or a letter. */
static uint32_t letter_(void) {
    uint32_t byte;
    do byte = byte_();
    while (byte != ' ' && (byte < 'a' || byte > 'z'));
    return byte;
}

/* A rerank document: the space and every letter once, then distinct other bytes, shuffled. Each query
 * cell (a letter or the space) then has exactly one same-byte cell in every document, and MaxSim one
 * clear best cell, since at initialization same-byte ColBERT rows agree far better than any others;
 * text-like documents repeat and lack bytes, leaving unlike cells within rounding of the best. */
static void document_(uint32_t *bytes, size_t length) {
    uint32_t others[256 - letters_k];
    size_t count = 0;
    bytes[0] = ' ';
    for (uint32_t k = 0; k < 26; ++k) bytes[1 + k] = 'a' + k;
    for (uint32_t v = 0; v < 256; ++v)
        if (v != ' ' && (v < 'a' || v > 'z')) others[count++] = v;
    for (size_t i = letters_k; i < length; ++i) { /* a partial Fisher-Yates draw of distinct others */
        size_t pick = (i - letters_k) + next_() % (count - (i - letters_k));
        uint32_t chosen = others[pick];
        others[pick] = others[i - letters_k], bytes[i] = chosen;
    }
    for (size_t i = length; i > 1; --i) {
        size_t j = next_() % i;
        uint32_t swap = bytes[i - 1];
        bytes[i - 1] = bytes[j], bytes[j] = swap;
    }
}

/* One record's texts: the query, its positive and (`lengths[2]` > 0) a hard negative. Contrastive: text-like
 * bytes, the positive related (the query's bytes, 1 in 5 redrawn, repeated to its length). Rerank: a
 * text-like query of letters and spaces, documents as document_() makes them. */
static void record_texts_(int rerank, size_t const lengths[3], uint32_t texts[3][text_longest_k]) {
    for (size_t i = 0; i < lengths[0]; ++i) texts[0][i] = rerank ? letter_() : byte_();
    for (size_t part = 1; part < 3 && lengths[part]; ++part) {
        if (rerank) {
            document_(texts[part], lengths[part]);
            continue;
        }
        for (size_t i = 0; i < lengths[part]; ++i) {
            uint32_t byte = byte_();
            texts[part][i] = part == 1 && uniform_() < 0.8 ? texts[0][i % lengths[0]] : byte;
        }
    }
}

/* Pair batch `index`: records of a query (the anchor), its positive and, one time in three, a hard
 * negative, each record whole in one row as src/data/batcher.c places items, a row closed by padding
 * once the next record does not fit; texts under, at and over the 64-cell tile. With media (not
 * with rerank), even records pair a text query with media documents and odd ones a media query
 * with text documents, each media part of a kind drawn from the batch's, the vectors as batch_make_'s. */
static void pair_batch_make_(host_batch_t *b, size_t index, int rerank) {
    static size_t const queries[] = {5, 9, 17, 33, 48, 64, 65};
    static size_t const documents[] = {5, 17, 33, 64, 65, 100, 130, 200}; /* rerank: from 33, at least letters_k */
    size_t const first_document = rerank ? 2 : 0, query_kinds = sizeof(queries) / sizeof(queries[0]);
    size_t const document_kinds = sizeof(documents) / sizeof(documents[0]) - first_document;
    uint32_t texts[3][text_longest_k];
    state_ = (batch_seed_ + 1 + (uint64_t)rerank) * 0x100000001b3ull + index;
    b->texts = b->anchors_count = b->candidates_count = 0, b->bf16 = (int)(index % 2);
    for (size_t k = 0; k < uform_media_kinds_k; ++k) b->media_rows[k] = 0;
    for (size_t row = 0; row < b->rows; ++row) {
        size_t column = 0;
        int32_t local = 0;
        for (;;) {
            size_t lengths[3] = {0, 0, 0};
            size_t const *grids[3] = {NULL, NULL, NULL}; /* the media parts' grids */
            size_t part_kinds[3] = {0, 0, 0};
            int fits = 0;
            for (int tries = 0; tries < 8 && !fits; ++tries) {
                lengths[0] = queries[next_() % query_kinds];
                lengths[1] = documents[first_document + next_() % document_kinds];
                lengths[2] = next_() % 3 == 0 ? documents[first_document + next_() % document_kinds] : 0;
                for (size_t part = 0; b->kinds_mask && part < 3 && lengths[part]; ++part) {
                    grids[part] = (part == 0) == (b->anchors_count % 2 == 1) ? image_grids_[next_() % image_grids_count_k] : NULL;
                    if (grids[part]) lengths[part] = grids[part][0] * grids[part][1], part_kinds[part] = media_kind_(b);
                }
                fits = lengths[0] + lengths[1] + lengths[2] <= b->columns - column;
            }
            if (!fits) break;
            record_texts_(rerank, lengths, texts);
            b->positives[b->anchors_count] = (uint32_t)b->candidates_count;
            b->anchors[b->anchors_count++] = (uint32_t)b->texts;
            for (size_t part = 0; part < 3 && lengths[part]; ++part) {
                if (grids[part]) media_write_(b, part_kinds[part], row * b->columns + column, grids[part], local++);
                else text_write_(b, row * b->columns + column, texts[part], lengths[part], local++);
                if (part) b->candidates[b->candidates_count++] = (uint32_t)b->texts;
                b->texts++, column += lengths[part];
            }
        }
        padding_write_(b, row * b->columns + column, b->columns - column);
    }
    free(b->labels);
    if (!(b->labels = calloc(b->anchors_count * b->candidates_count + 1, 1))) exit(1);
    for (size_t a = 0; a < b->anchors_count; ++a) b->labels[a * b->candidates_count + b->positives[a]] = 1;
    for (size_t a = 0; a < b->anchors_count; ++a) b->anchor_weights[a] = a % 3 ? 1.0f : 0.5f;
    pair_spans_(b);
}

static uform_batch_t batch_cpu_(host_batch_t const *b) {
    int pairs = b->anchors_count > 0;
    uform_media_t media[uform_media_kinds_k] = {{0}};
    for (size_t k = 0; k < uform_media_kinds_k; ++k)
        if (b->media_rows[k])
            media[k] = (uform_media_t){b->bf16 ? (void const *)b->rows16[k] : (void const *)b->rows32[k], b->media_rows[k],
                                       b->bf16 ? uform_media_bf16_k : uform_media_f32_k};
    return (uform_batch_t){.grid = {b->rows, b->columns, b->kinds, b->values, b->row_segments, b->positions,
                                    {media[0], media[1], media[2]}},
                           .targets = pairs ? NULL : b->targets,
                           .anchors = pairs ? b->anchors : NULL,
                           .anchors_count = b->anchors_count,
                           .candidates = pairs ? b->candidates : NULL,
                           .candidates_count = b->candidates_count,
                           .labels = pairs ? b->labels : NULL,
                           .anchor_weights = pairs ? b->anchor_weights : NULL};
}

/* Fills a GPU slot's pinned batch through the library's span step (cuda/batch.h), as uform_base
 * does; the slot must be idle (waited on). The spans and each cell's span must be the ones this test
 * laid out by hand as it wrote the batch: the texts in uform_forward's numbering, then the padding
 * runs, and with `capacity` (the step's segments) the spans past the batch's own of length 0. */
static void batch_gpu_(uform_cuda_step_t *step, int slot, host_batch_t const *b, size_t capacity, size_t t) {
    uform_cuda_batch_t view = uform_cuda_step_batch(step, slot);
    uform_batch_t batch = batch_cpu_(b);
    char error[512] = "";
    uform_status_t status = uform_cuda_batch_fill(&view, uform_cuda_step_config(step), &batch, error, sizeof(error));
    CHECK(status == uform_ok_k);
    if (status != uform_ok_k) fprintf(stderr, "step_parity: uform_cuda_batch_fill: %s\n", error);
    CHECK(!memcmp(view.spans, b->spans, 2 * b->segments * 4) && !memcmp(view.segment_of, b->segment_of, b->cells * 4));
    int rest_empty = 1;
    for (size_t i = 2 * b->segments; i < 2 * capacity; ++i) rest_empty &= view.spans[i] == 0;
    CHECK(rest_empty && !memcmp(view.positions, b->positions, 3 * b->cells * 4));
    /* Media cells go up as PAD (the byte lookup's row, which their frontend overwrites), listed by kind
     * in cell order with their vectors packed in the batch's dtype; every other cell's value as it is.
     * Masked vectors: their cells and true rows listed in cell order too, and no byte target. */
    size_t listed[uform_media_kinds_k] = {0}, masked[uform_media_kinds_k] = {0};
    int values_ok = 1, media_ok = 1, targets_ok = 1;
    for (size_t c = 0; c < b->cells; ++c) {
        int is_media = b->kinds[c] >= uform_cell_image_k && b->kinds[c] <= uform_cell_audio_k;
        values_ok &= view.values[c] == (is_media ? uform_pad_k : b->values[c]);
        if (!b->anchors_count) targets_ok &= view.targets[c] == (is_media ? -1 : b->targets[c]);
        if (!is_media) continue;
        size_t k = b->kinds[c] - uform_cell_image_k, values = values_of_(k), row_bytes = values * (b->bf16 ? 2 : 4);
        uform_cuda_batch_media_t const *out = &view.media[k];
        if (b->targets[c] >= 0) {
            void const *truth = b->bf16 ? (void const *)(b->rows16[k] + b->targets[c] * values)
                                        : (void const *)(b->rows32[k] + b->targets[c] * values);
            media_ok &= out->mae_cells[masked[k]] == c &&
                        !memcmp((unsigned char const *)out->mae_rows + masked[k] * row_bytes, truth, row_bytes);
            masked[k]++;
        }
        void const *expected = b->bf16 ? (void const *)(b->rows16[k] + b->values[c] * values)
                                       : (void const *)(b->rows32[k] + b->values[c] * values);
        media_ok &= listed[k] < b->media_rows[k] && out->cells[listed[k]] == c &&
                    !memcmp((unsigned char const *)out->rows + listed[k] * row_bytes, expected, row_bytes);
        listed[k]++;
    }
    CHECK(values_ok && media_ok && targets_ok);
    for (size_t k = 0; k < uform_media_kinds_k; ++k) {
        if (!(b->kinds_mask >> k & 1)) continue;
        uint32_t const *counts = view.media[k].counts;
        size_t cells = b->media_rows[k] ? b->media_rows[k] - (b->mae ? 1 : 0) : 0; /* media rows less the blank one */
        CHECK(counts[0] == cells && listed[k] == cells);
        CHECK(counts[2] == masked[k] && (masked[k] > 0) == (b->mae && listed[k] > 0));
        if (cells) CHECK(counts[1] == (uint32_t)(b->bf16 ? uform_media_bf16_k : uform_media_f32_k));
    }
    if (b->anchors_count) CHECK(view.counts[0] == b->anchors_count && view.counts[1] == b->candidates_count && view.counts[2] == b->texts);
    uform_cuda_batch_finish(step, slot, learning_rate_, t);
}

/* ---------------------------------------------------------------------------------------------
 * Parameters and gradients
 * ------------------------------------------------------------------------------------------- */

typedef struct tensor_list_t {
    size_t count;
    char (*names)[48];
    size_t *elements;
    int *is_matrix;
} tensor_list_t;

static uint16_t bf16_bits_(float value) {
    uint32_t bits;
    memcpy(&bits, &value, 4);
    return (uint16_t)(bits >> 16);
}

/* The CPU trainer's parameters by the step's names; matrices must be BF16-exact (they are BF16 masters). */
static float **snapshot_(uform_trainer_t const *trainer, tensor_list_t const *list) {
    float **values = calloc(list->count, sizeof(float *));
    for (size_t i = 0; values && i < list->count; ++i) {
        if (!(values[i] = malloc(list->elements[i] * sizeof(float)))) exit(1);
        UFORM_OK(uform_trainer_read(trainer, list->names[i], uform_slot_parameter_k, values[i], list->elements[i]));
        for (size_t e = 0; list->is_matrix[i] && e < list->elements[i]; ++e) {
            uint32_t bits;
            memcpy(&bits, &values[i][e], 4);
            if (bits & 0xffffu) {
                fprintf(stderr,
                        "step_parity: CPU parameter %s[%zu] = %.9g is not BF16-exact; the GPU master cannot hold it\n",
                        list->names[i], e, values[i][e]);
                exit(1);
            }
        }
    }
    if (!values) exit(1);
    return values;
}

static void upload_parameters_(uform_cuda_step_t *step, tensor_list_t const *list, float *const *values) {
    size_t count;
    uform_cuda_tensor_t *tensors = uform_cuda_step_tensors(step, &count);
    for (size_t i = 0; i < count; ++i) {
        size_t n = list->elements[i];
        if (tensors[i].is_matrix) {
            uint16_t *bits = malloc(n * 2);
            if (!bits) exit(1);
            for (size_t e = 0; e < n; ++e) bits[e] = bf16_bits_(values[i][e]);
            CUDA_OK(cudaMemcpy(tensors[i].parameter, bits, n * 2, cudaMemcpyHostToDevice));
            free(bits);
        } else {
            CUDA_OK(cudaMemcpy(tensors[i].parameter, values[i], n * 4, cudaMemcpyHostToDevice));
        }
    }
}

/* Raw device bytes of every parameter, for bitwise comparison. */
static unsigned char **download_parameters_(uform_cuda_step_t *step, tensor_list_t const *list) {
    size_t count;
    uform_cuda_tensor_t *tensors = uform_cuda_step_tensors(step, &count);
    unsigned char **bytes = calloc(count, sizeof(unsigned char *));
    for (size_t i = 0; bytes && i < count; ++i) {
        size_t size = list->elements[i] * (tensors[i].is_matrix ? 2 : 4);
        if (!(bytes[i] = malloc(size))) exit(1);
        CUDA_OK(cudaMemcpy(bytes[i], tensors[i].parameter, size, cudaMemcpyDeviceToHost));
    }
    if (!bytes) exit(1);
    return bytes;
}

static float **download_gradients_(uform_cuda_step_t *step, tensor_list_t const *list) {
    size_t count;
    uform_cuda_tensor_t *tensors = uform_cuda_step_tensors(step, &count);
    float **values = calloc(count, sizeof(float *));
    for (size_t i = 0; values && i < count; ++i) {
        if (!(values[i] = malloc(list->elements[i] * 4))) exit(1);
        CUDA_OK(cudaMemcpy(values[i], tensors[i].gradient, list->elements[i] * 4, cudaMemcpyDeviceToHost));
    }
    if (!values) exit(1);
    return values;
}

static void free_all_(void *arrays, size_t count) {
    void **list = arrays;
    for (size_t i = 0; list && i < count; ++i) free(list[i]);
    free(list);
}

/* ||got - expected|| / ||expected||; a zero reference gives 0 or infinity, a NaN stays NaN (and fails). */
static double relative_error_(float const *got, float const *expected, size_t count) {
    double difference = 0, norm = 0;
    for (size_t i = 0; i < count; ++i) {
        double d = (double)got[i] - (double)expected[i];
        difference += d * d, norm += (double)expected[i] * expected[i];
    }
    if (norm == 0) return difference == 0 ? 0 : INFINITY;
    return sqrt(difference / norm);
}

static int all_zero_(float const *values, size_t count) {
    for (size_t i = 0; i < count; ++i)
        if (values[i] != 0) return 0;
    return 1;
}

/* ---------------------------------------------------------------------------------------------
 * The bounds: masked bytes
 *
 * What is derived. The CPU trainer is Float32 throughout (its weights are the same BF16 values
 * widened exactly), so the reference's own error is Float32 roundoff, negligible here. The GPU
 * step stores activations and gradient operands in BF16 and accumulates in Float32: each BF16
 * store replaces v by v (1 + delta), |delta| <= u = 2^-8, element by element; its Float32 sums
 * add at most k 2^-24 <= 1024 * 6e-8 < 1e-4 relative, also negligible. Reading step.c and the
 * kernels, the BF16 rounding points are (L blocks):
 *   forward, per block 8: normed1, qkv product, rotated q and k, attention weights P entering the
 *     P v product, attended, normed2, gate_up product, SwiGLU hidden; then h and the logits: 2.
 *     The loss reads the logits, so every gradient depends on all F = 8 L + 2 of them.
 *   backward, from the loss: d_logits (1); the final norm's dL/dx rounded for the down products
 *     (1); then per block, top down: d_hidden (the down product's BF16 output), d_gate_up, dL/dx
 *     rounded after mlp_norm, d_attended (the out product's BF16 output), P entering dV = P^T dO,
 *     dS entering dQ and dK, d_qkv, d_q and d_k after the inverse rotation, dL/dx rounded after
 *     attn_norm (9; block 0's last is Float32).
 *   A tensor's count N is F plus the backward points before its gradient's product:
 *     mlm.head and final_norm 1; in block l, with e = 2 + 9 (L - 1 - l) above it: down e,
 *     gate_up and mlp_norm e + 2, out e + 3, qkv and attn_norm e + 8; embed.bytes 2 + 9 (L-1) + 8.
 *   (For L = 2: 19 for the heads, 20..28 for block 1, 29..37 for block 0 and the embedding.)
 * To first order the gradient's error is the sum over these points of each point's perturbation
 * carried to the gradient by a linear map, and each point perturbs norm-wise by at most u.
 *
 * What is assumed. (1) Conditioning allowance C = 1: a relative perturbation e at any one point
 * moves the gradient by at most e relative (at this initialization the residual stream, the RMS
 * norms and the nearly uniform attention neither amplify nor cancel). (2) Distinct points round
 * different values independently, so their contributions are uncorrelated and add in quadrature:
 *     ||g_gpu - g_cpu|| / ||g_cpu|| <= sqrt(N) u C.
 * The worst case with every error aligned, N u C (0.14 at N = 37), is not used: it exceeds what
 * the planted control changes (dropping the norm's shared-scale term moves a norm's dL/dx by about
 * 1/sqrt(d), 2..4% of these gradients), so it could not tell a wrong formula from rounding. Using u
 * rather than the rounding error's RMS (about 0.42 u over many elements) leaves a factor 2.4.
 * Calibration, not proof: a NumPy emulation of exactly these rounding points on this program's
 * start and batch 0 (d = 128) put every honest error at <= 0.17 of sqrt(N) u and the control's
 * block tensors at 0.9..2.0 of it (the largest only 1.6 at d = 256, hence the default width 128).
 * The loss reads the F forward points only: |L_gpu - L_cpu| / L_cpu <= sqrt(F) u, assuming the mean
 * cross-entropy is no more sensitive to a relative perturbation of the logits than the perturbation
 * itself (it moves by at most 2 max|dz|; logits are O(1) and the loss near ln 258).
 * ------------------------------------------------------------------------------------------- */

/* ---------------------------------------------------------------------------------------------
 * The bounds: contrastive and rerank (with and without TCR and Lipschitz)
 *
 * What is derived, as above, from step.c, pool.cu and objectives.cu. The encoder's points are the
 * same; the heads differ. The pool's scores and weights, pool.proj's output (the embeddings),
 * SigLIP, rerank.proj's raw rows, their normalization, MaxSim and the spectral terms (Float64) all
 * stay Float32 or wider. The BF16 stores:
 *   contrastive, forward: the encoder's 8 L, h (entering the pool), the pooled rows (entering
 *     pool.proj): F = 8 L + 2. Backward: d_embeddings rounded before pool.proj's two products (1),
 *     which SigLIP's and the spectral terms' gradients both pass; the pool's backward into dL/dh is
 *     Float32; then the final norm and the blocks as with masked bytes (e = 2 + 9 (L - 1 - l)).
 *   rerank, forward: the encoder's 8 L and h (entering rerank.proj): F = 8 L + 1. Backward: d_colbert
 *     rounded before rerank.proj's two products (1), then as above.
 *   rerank with TCR or Lipschitz: both heads read h; the pool adds the pooled rows (F = 8 L + 2) and
 *     d_embeddings (a second head point, so e = 3 + 9 (L - 1 - l) for the blocks).
 *   A head tensor counts the points on its own path: pool.proj and pool.query 8 L + 2 + 1;
 *   rerank.proj 8 L + 1 + 1; siglip.scale and siglip.bias, which the objective sums from its
 *   Float32 inputs, the forward points of what it reads: 8 L + 2 (SigLIP), 8 L + 1 (MaxSim);
 *   final_norm F plus the head points; the blocks and embed.bytes as with masked bytes from there.
 *   (L = 2, contrastive: 19 for pool.proj, pool.query and final_norm, 18 for the scalars, 20..37 in
 *   the encoder; rerank: 18 for rerank.proj and final_norm, 17 for the scalars, 19..36; rerank with
 *   the spectral terms: 20 for final_norm, 21..38 in the encoder, the heads as before.)
 * What is assumed: the same two assumptions (conditioning allowance 1, independent roundings in
 * quadrature), and one more for rerank: MaxSim's gradient follows each query cell's best document
 * cell, a choice, not a smooth function. Where two unlike document cells come within rounding of
 * each other the GPU may pick the other one and move that query cell's share of the gradient to
 * a different cell: no rounding bound covers it. Text-like documents tie constantly (a byte that
 * recurs, or one a document lacks, leaves cells close to the best), so rerank's documents hold the
 * space and each letter once, with distinct other bytes (document_()), and the queries are letters
 * and spaces: every query cell has one same-byte cell in every document. The check then verifies
 * the choice is stable: each unit ColBERT row is off by at most e = sqrt(8 L + 1) u, a similarity by
 * at most 2 e, a best-minus-runner-up margin by 4 e; the CPU's own rows of every batch at the start
 * weights must show margins above 4 e (maxsim_margins_()).
 * Calibration, not proof: the emulation of these points (PyTorch in float64, its exact run within
 * 1e-6 of the CPU trainer's gradients) on this program's start and batch 0 (d = 128) put every
 * honest error at <= 0.34 of sqrt(N) u (the SigLIP scalars the largest; rerank <= 0.31), and the
 * control's block tensors at 1.1..5 (contrastive, 9 of 12 out) and 1.7..30 (rerank, 8 of 12 out),
 * planting the blocks' norms alone (block 1's down, gate_up and mlp_norm then come before any planted
 * term; the control here plants the final norm's too). With text-like rerank
 * documents a handful of best cells moved to unlike cells and put the encoder's gradients at
 * several times the bound (docs/cuda.md), which is why the documents above.
 *
 * The loss, from test_uform_base_cuda.py's derivation of the first GPU loss: each row the loss reads
 * (an embedding, a ColBERT row) is off by at most e = sqrt(F') u relative, F' its forward points
 * (8 L + 2 or 8 L + 1). A cosine of two unit rows moves only by the part of each row's error along
 * the other; assumed isotropic, by at most 2 e / sqrt(m) (m: the narrowest Matryoshka width, or the
 * ColBERT width 128; MaxSim's mean of maxima moves no more, the max being 1-Lipschitz). With
 * z = s c + b, s = exp(siglip.scale), each term log(1 + exp(-y z)) moves by at most itself times
 * |dz|, so the head's loss relatively by at most 2 s e / sqrt(m). Lipschitz (lambda sigma, the power
 * iteration taken as converged): |d| <= lambda 2 sqrt(sigma) e. TCR (-lambda/2 log det(I + a Z^T Z),
 * a = m / (N 0.5), m = E here): |d| <= lambda sqrt(2 m min(N, m)) e / 2. The total within the sum.
 * ------------------------------------------------------------------------------------------- */

/* ---------------------------------------------------------------------------------------------
 * The bounds: media segments (mlm+images, contrastive+images; mlm+media+mae, contrastive+media)
 *
 * What is derived, from encoder.c and frontend.cu. The CPU trainer reads the patches in Float32
 * (widened exactly where the media is BF16); the GPU rounds them to BF16 before the patch product
 * (docs/images.md), one more forward point on every image cell's x where the media is Float32
 * (batch 0's is; a BF16 batch's rounding is exact). The product is a sum of K = 1024 products, one
 * ulp per term on the GPU's tensor cores (2 K 2^-24 = 1.2e-4 relative at most) and K 2^-24 on the
 * CPU: under 1% of the smallest bound here (sqrt(18) 2^-8 = 0.017), negligible as the other Float32
 * sums are; the bias adds one Float32 rounding. So with contrastive F gains 1 (8 L + 3, and the
 * pooled rows' e = sqrt(8 L + 3) u in the loss bound). Backward: the image cells' dL/dx leaves block
 * 0 in Float32, as the byte cells' does: vision.bias, summed from it in Float32, counts embed.bytes'
 * points; vision.patch's product reads it rounded to BF16 (dY) beside P~ (a forward point, counted
 * in F): one more. (L = 2, contrastive + images: 38 for embed.bytes and vision.bias, 39 for
 * vision.patch, 21..38 in the blocks, 20 for pool.proj, pool.query and final_norm, 19 the scalars.)
 * With masked bytes the image segments reach no loss: attention stays within a segment and image
 * cells are never scored, so every vision gradient is exactly 0 on both sides and F keeps 8 L + 2;
 * what that run checks is that image cells change nothing else (the byte gradients within their
 * bounds, embed.bytes free of the image cells' rows, which the step's sort leaves out).
 * What is assumed: the two assumptions above, the conditioning allowance 1 now also for the image
 * tensors' sums over many cells (vision.bias sums dL/dx over every image cell, as embed.bytes' MASK
 * row does over every masked cell).
 *
 * With the mae head (mlm+images+mae: half the patches masked, each cell showing the blank patch, its
 * target its true pixels; docs/images.md) the image cells reach the loss: the patch point counts (F =
 * 8 L + 3). The head's prediction p = h mae.head^T + mae.bias reads h (a forward point) through a
 * Float32 product and the loss stays Float32 (encoder.c, frontend.cu); backward, the gradient
 * enters its two products rounded to BF16 (d_pred, a head point like d_logits). So mae.head counts
 * F + 1, mae.bias (summed from the Float32 gradient) F, and the rest as with masked bytes.
 * The loss: the bytes' part as above; the reconstruction R = mean (p - t)^2 moves, with each
 * prediction's product part off by at most e = sqrt(F) u of its root mean square q (assumed, as the
 * rows above), by |dR| <= 2 sqrt(R) e q + (e q)^2 (Cauchy-Schwarz), where q <= sqrt(R) + rms(t) +
 * rms(mae.bias), all read from the CPU's side (pixels_rms_, bias_rms_).
 *
 * Video tubes and audio frames enter as patches do (a BF16 rounding of Float32 vectors, a K = 1536
 * or 320 product, the bias), so every statement above holds with their weight and bias in the
 * patch's and the bias's places: one media point, whichever kinds a batch mixes. With several
 * masked modelling heads R = sum_k R_k, each bounded as above with its own targets and bias and
 * sqrt(R_k) <= sqrt(R): |dR| <= sum_k 2 sqrt(R) e q_k + (e q_k)^2.
 * ------------------------------------------------------------------------------------------- */

static char const *const heads_[] = {"mlm.head",       "pool.query",     "pool.proj",      "rerank.proj",
                                     "siglip.scale",   "siglip.bias",    "mae.head",       "mae.bias",
                                     "mae_video.head", "mae_video.bias", "mae_audio.head", "mae_audio.bias"};
enum { heads_count_k = sizeof(heads_) / sizeof(heads_[0]) };

/* The vectors' rounding point, where media cells reach the loss (the media bounds above). */
static size_t image_point_(variant_t const *v) { return v->media && (pairs_(v) || v->mae) ? 1 : 0; }

/* Whether `name` is a masked modelling head's tensor (mae.head, mae_video.bias, ...). */
static int mae_tensor_(char const *name) { return !strncmp(name, "mae.", 4) || !strncmp(name, "mae_", 4); }

/* F: the forward points the loss reads. */
static size_t forward_points_(variant_t const *v, size_t depth) {
    return 8 * depth + (rerank_(v) && !spectral_(v) ? 1 : 2) + image_point_(v);
}

/* The backward points where the heads' gradients enter dL/dh: d_logits, d_embeddings, d_colbert. */
static size_t head_points_(variant_t const *v) { return rerank_(v) && spectral_(v) ? 2 : 1; }

/* N for a head tensor the objective trains; 0 for one it does not. */
static size_t head_tensor_points_(char const *name, variant_t const *v, size_t depth) {
    size_t pool = 8 * depth + 2 + image_point_(v), colbert = 8 * depth + 1 + image_point_(v);
    if (!strcmp(name, "mlm.head")) return pairs_(v) ? 0 : forward_points_(v, depth) + 1;
    if (mae_tensor_(name)) return !v->mae ? 0 : strstr(name, ".head") ? forward_points_(v, depth) + 1 : forward_points_(v, depth);
    if (!strcmp(name, "pool.query") || !strcmp(name, "pool.proj")) return pairs_(v) && pooled_(v) ? pool + 1 : 0;
    if (!strcmp(name, "rerank.proj")) return rerank_(v) ? colbert + 1 : 0;
    if (!strcmp(name, "siglip.scale") || !strcmp(name, "siglip.bias"))
        return !pairs_(v) ? 0 : rerank_(v) ? colbert : pool;
    return 0;
}

/* N of the derivations above for one tensor; 0 for a name it does not know. */
static size_t points_(char const *name, variant_t const *v, size_t depth) {
    size_t forward = forward_points_(v, depth), head = head_points_(v);
    for (size_t i = 0; i < heads_count_k; ++i)
        if (!strcmp(name, heads_[i])) return head_tensor_points_(name, v, depth);
    if (!strcmp(name, "final_norm")) return forward + head;
    int media_bias = !strcmp(name, "vision.bias") || !strcmp(name, "video.bias") || !strcmp(name, "audio.bias");
    int media_weight = !strcmp(name, "vision.patch") || !strcmp(name, "video.tube") || !strcmp(name, "audio.frame");
    if (!strcmp(name, "embed.bytes") || media_bias) return forward + head + 1 + 9 * (depth - 1) + 8;
    if (media_weight) return forward + head + 1 + 9 * (depth - 1) + 8 + 1;
    unsigned block;
    char part[32];
    if (sscanf(name, "blocks.%u.%31s", &block, part) != 2 || block >= depth) return 0;
    size_t above = head + 1 + 9 * (depth - 1 - block);
    if (!strcmp(part, "down")) return forward + above;
    if (!strcmp(part, "gate_up") || !strcmp(part, "mlp_norm")) return forward + above + 2;
    if (!strcmp(part, "out")) return forward + above + 3;
    if (!strcmp(part, "qkv") || !strcmp(part, "attn_norm")) return forward + above + 8;
    return 0;
}

static double gradient_bound_(char const *name, variant_t const *v, size_t depth) {
    return sqrt((double)points_(name, v, depth)) * bf16_unit_;
}

typedef struct loss_bounds_t {
    double head, tcr, lipschitz, reconstruction, total; /* absolute */
} loss_bounds_t;

/* The batch's masked vectors' true values of kind index k, their root mean square (0 without any). */
static double pixels_rms_(host_batch_t const *b, size_t k) {
    double sum = 0;
    size_t count = 0, values = values_of_(k);
    for (size_t c = 0; b->mae && c < b->cells; ++c) {
        if (b->kinds[c] != uform_cell_image_k + k || b->targets[c] < 0) continue;
        for (size_t v = 0; v < values; ++v) {
            double t = b->bf16 ? uform_bf16_to_f32(b->rows16[k][b->targets[c] * values + v]) : b->rows32[k][b->targets[c] * values + v];
            sum += t * t, count++;
        }
    }
    return count ? sqrt(sum / (double)count) : 0;
}

/* The same for every kind. */
static void pixels_rms_all_(host_batch_t const *b, double rms[uform_media_kinds_k]) {
    for (size_t k = 0; k < uform_media_kinds_k; ++k) rms[k] = pixels_rms_(b, k);
}

/* The loss bounds above from the CPU's loss in parts, s = exp(siglip.scale), the batch's texts (N)
 * and, with masked modelling heads, each kind's masked values' and head bias's root mean squares. */
static loss_bounds_t loss_bounds_(variant_t const *v, uform_config_t const *config, size_t depth,
                                  uform_losses_t const *cpu, double scale, size_t texts,
                                  double const pixels[uform_media_kinds_k], double const bias[uform_media_kinds_k]) {
    loss_bounds_t b = {0, 0, 0, 0, 0};
    double pooled_row = sqrt(8.0 * depth + 2 + image_point_(v)) * bf16_unit_;
    double colbert_row = sqrt(8.0 * depth + 1 + image_point_(v)) * bf16_unit_;
    if (!pairs_(v)) {
        double e = sqrt((double)forward_points_(v, depth)) * bf16_unit_, r = sqrt(fabs(cpu->reconstruction));
        b.head = e * cpu->mlm;
        /* The mae bound above: |dR| <= 2 sqrt(R) e q + (e q)^2, q = sqrt(R) + rms(t) + rms(b) >= rms(h W). */
        for (size_t k = 0; v->mae && k < uform_media_kinds_k; ++k)
            if (v->media >> k & 1) {
                double q = r + pixels[k] + bias[k];
                b.reconstruction += 2 * r * e * q + pow(e * q, 2);
            }
        b.total = b.head + b.reconstruction;
        return b;
    }
    else if (rerank_(v)) b.head = 2 * scale * colbert_row / sqrt((double)config->colbert_width) * cpu->rerank;
    else b.head = 2 * scale * pooled_row / sqrt((double)config->embedding_widths[0]) * cpu->siglip;
    double m = (double)config->embedding_widths[config->embedding_widths_count - 1];
    double smaller = (double)texts < m ? (double)texts : m;
    if (v->lipschitz_lambda > 0)
        b.lipschitz = v->lipschitz_lambda * 2 * sqrt(fabs(cpu->lipschitz) / v->lipschitz_lambda) * pooled_row;
    if (v->tcr_lambda > 0) b.tcr = v->tcr_lambda * sqrt(2 * m * smaller) / 2 * pooled_row;
    b.total = b.head + b.tcr + b.lipschitz;
    return b;
}

/* ---------------------------------------------------------------------------------------------
 * JSON
 * ------------------------------------------------------------------------------------------- */

static FILE *json_;
static void json_number_(double value) {
    if (isfinite(value)) fprintf(json_, "%.9g", value);
    else fprintf(json_, "null");
}

/* ---------------------------------------------------------------------------------------------
 * One objective's setup and CPU reference
 * ------------------------------------------------------------------------------------------- */

typedef struct setup_t {
    size_t width, depth, rows, columns, steps;
    variant_t const *variant;
    uform_config_t config;
    uform_model_t *model;
    uform_trainer_t *trainer;
    uform_train_options_t options;
    tensor_list_t list;
    float **start;
    host_batch_t *batches;                /* [steps + 1]: 0 for the gradient check, t for step t */
    size_t anchors, candidates, segments; /* the pair step's capacities */
} setup_t;

typedef struct reference_t { /* what the CPU computed once, from the start */
    double loss0;
    uform_losses_t parts0; /* batch 0's loss in parts */
    float **gradients;     /* on batch 0 */
    double *losses;        /* [steps + 1], 1-based: step t's loss on batch t, before its update */
    uform_losses_t *parts; /* [steps + 1]: the same in parts */
    double *scales;        /* [steps + 1]: exp(siglip.scale) before step t; [0] at the start */
    double (*bias_rms)[uform_media_kinds_k]; /* [steps + 1]: the same of each masked modelling head's bias's root
                                              * mean square (0 without the head) */
    double *progress;      /* [steps + 1]: sum of |change| of batch 0's loss over the updates before step t */
    size_t untrained_count;
    char const *untrained[heads_count_k]; /* the CPU's heads the step does not hold */
    int untrained_zero[heads_count_k];    /* whether the CPU's gradient of each is exactly 0 */
} reference_t;

/* The CPU side of one objective: a WIDTHxDEPTH model from the fixed seed, its trainer at a constant
 * rate, and the batches; pair capacities one above the largest batch's, so every step has dead slots. */
static void setup_cpu_(setup_t *s, variant_t const *variant) {
    s->variant = variant;
    char tier[32];
    snprintf(tier, sizeof(tier), "%zux%zu", s->width, s->depth);
    UFORM_OK(uform_config_from_tier(tier, &s->config));
    UFORM_OK(uform_model_init(&s->config, model_seed_, &s->model));
    for (size_t k = 0; k < uform_media_kinds_k; ++k) { /* trained like every tensor */
        if (!(variant->media >> k & 1)) continue;
        uform_media_info_t const *info = uform_media_info((uform_cell_kind_t)(uform_cell_image_k + k));
        UFORM_OK(uform_model_init_head(s->model, uform_part_name(info->part), model_seed_ + 1 + 2 * k));
        if (variant->mae) UFORM_OK(uform_model_init_head(s->model, uform_part_name(info->mae), model_seed_ + 2 + 2 * k));
    }
    uform_train_options_default(&s->options);
    s->options.objective = variant->objective;
    s->options.learning_rate = learning_rate_;
    s->options.warmup_steps = 0, s->options.total_steps = 0;
    s->options.tcr_lambda = variant->tcr_lambda, s->options.lipschitz_lambda = variant->lipschitz_lambda;
    size_t cells = s->rows * s->columns;
    UFORM_OK(uform_trainer_create(s->model, &s->options, cells, &s->trainer));
    if (!(s->batches = calloc(s->steps + 1, sizeof(host_batch_t)))) exit(1);
    s->anchors = s->candidates = s->segments = 0;
    for (size_t t = 0; t <= s->steps; ++t) {
        host_batch_t *b = &s->batches[t];
        batch_alloc_(b, s->rows, s->columns, variant->media);
        if (!pairs_(variant)) {
            batch_make_(b, t, variant->mae);
            continue;
        }
        pair_batch_make_(b, t, rerank_(variant));
        if (!b->anchors_count) {
            fprintf(stderr, "step_parity: rows of %zu cells hold no pair record; use --columns 64 or more\n",
                    s->columns);
            exit(2);
        }
        s->anchors = b->anchors_count + 1 > s->anchors ? b->anchors_count + 1 : s->anchors;
        s->candidates = b->candidates_count + 1 > s->candidates ? b->candidates_count + 1 : s->candidates;
    }
    if (!pairs_(variant)) return;
    s->anchors = s->anchors < cells ? s->anchors : cells, s->candidates = s->candidates < cells ? s->candidates : cells;
    s->segments = s->anchors + s->candidates + s->rows < cells ? s->anchors + s->candidates + s->rows : cells;
}

static void setup_close_(setup_t *s) {
    free_all_(s->start, s->list.count);
    for (size_t t = 0; s->batches && t <= s->steps; ++t) batch_free_(&s->batches[t]);
    free(s->batches);
    free(s->list.names), free(s->list.elements), free(s->list.is_matrix);
    uform_trainer_close(s->trainer);
    uform_model_close(s->model);
    s->start = NULL, s->batches = NULL, s->trainer = NULL, s->model = NULL;
    s->list = (tensor_list_t){0, NULL, NULL, NULL};
}

/* The step's configuration for this objective, as src/train/cuda.c fills it. */
static uform_cuda_step_config_t step_config_(setup_t const *s, int recompute) {
    variant_t const *v = s->variant;
    uform_cuda_step_config_t c = {.width = s->width, .depth = s->depth, .cells = s->rows * s->columns,
                                  .recompute = recompute != 0, .kept_blocks = recompute == 2,
                                  .keep_attention = recompute == 2, .tune = 0,
                                  .beta1 = s->options.beta1, .beta2 = s->options.beta2, .clip = s->options.clip,
                                  .weight_decay = s->options.weight_decay};
    for (size_t k = 0; k < uform_media_kinds_k; ++k) /* as src/train/cuda.c */
        c.media[k] = v->media >> k & 1 ? s->rows * s->columns : 0, c.mae[k] = v->mae && (v->media >> k & 1);
    if (!pairs_(v)) return c;
    c.objective = rerank_(v) ? uform_cuda_rerank_k : uform_cuda_contrastive_k;
    c.segments = s->segments, c.anchors = s->anchors, c.candidates = s->candidates;
    if (pooled_(v)) c.embedding_width = s->config.embedding_widths[s->config.embedding_widths_count - 1];
    if (rerank_(v)) c.colbert_width = s->config.colbert_width;
    else {
        c.widths_count = s->config.embedding_widths_count;
        for (size_t w = 0; w < c.widths_count; ++w) c.widths[w] = s->config.embedding_widths[w];
    }
    c.tcr_lambda = s->options.tcr_lambda, c.lipschitz_lambda = s->options.lipschitz_lambda;
    c.lipschitz_iterations = s->options.lipschitz_iterations;
    return c;
}

/* The step's tensor names and shapes (from a first step), each with a rounding-point count. */
static void tensor_list_(setup_t *s) {
    uform_cuda_step_config_t config = step_config_(s, 0);
    uform_cuda_step_t *probe = NULL;
    char error[256] = "";
    if (uform_cuda_step_create(&probe, &config, error, sizeof(error))) {
        fprintf(stderr, "step_parity: %s\n", error);
        exit(1);
    }
    uform_cuda_tensor_t *tensors = uform_cuda_step_tensors(probe, &s->list.count);
    s->list.names = calloc(s->list.count, sizeof(*s->list.names));
    s->list.elements = calloc(s->list.count, sizeof(size_t));
    s->list.is_matrix = calloc(s->list.count, sizeof(int));
    if (!s->list.names || !s->list.elements || !s->list.is_matrix) exit(1);
    for (size_t i = 0; i < s->list.count; ++i) {
        snprintf(s->list.names[i], sizeof(s->list.names[i]), "%s", tensors[i].name);
        s->list.elements[i] = tensors[i].rows * tensors[i].columns;
        s->list.is_matrix[i] = tensors[i].is_matrix;
        if (!points_(tensors[i].name, s->variant, s->depth)) {
            fprintf(stderr, "step_parity: %s: no rounding-point count for the step's tensor %s; extend points_()\n",
                    s->variant->name, tensors[i].name);
            exit(1);
        }
    }
    uform_cuda_step_destroy(probe);
}

static size_t head_elements_(setup_t const *s, char const *name) {
    size_t d = s->width, widest = s->config.embedding_widths[s->config.embedding_widths_count - 1];
    if (!strcmp(name, "mlm.head")) return (size_t)uform_vocabulary_k * d;
    if (!strcmp(name, "pool.query")) return d;
    if (!strcmp(name, "pool.proj")) return widest * d;
    if (!strcmp(name, "rerank.proj")) return s->config.colbert_width * d;
    for (size_t k = 0; k < uform_media_kinds_k; ++k) {
        uform_media_info_t const *info = uform_media_info((uform_cell_kind_t)(uform_cell_image_k + k));
        char head[48], bias[48];
        snprintf(head, sizeof(head), "%s.head", uform_part_name(info->mae)), snprintf(bias, sizeof(bias), "%s.bias", uform_part_name(info->mae));
        if (!strcmp(name, head)) return info->values * d;
        if (!strcmp(name, bias)) return info->values;
    }
    return 1;
}

/* The CPU's heads the step does not hold must get no gradient from this objective: exactly 0. */
static void untrained_(setup_t const *s, reference_t *cpu) {
    cpu->untrained_count = 0;
    for (size_t h = 0; h < heads_count_k; ++h) {
        int held = 0;
        for (size_t i = 0; i < s->list.count; ++i) held |= !strcmp(s->list.names[i], heads_[h]);
        char part[48];
        snprintf(part, sizeof(part), "%s", heads_[h]);
        if (strchr(part, '.')) *strchr(part, '.') = 0;
        if (held || (mae_tensor_(heads_[h]) && !uform_model_has_head(s->model, part))) continue;
        size_t count = head_elements_(s, heads_[h]);
        float *gradient = malloc(count * 4);
        if (!gradient) exit(1);
        UFORM_OK(uform_trainer_read(s->trainer, heads_[h], uform_slot_gradient_k, gradient, count));
        cpu->untrained[cpu->untrained_count] = heads_[h];
        cpu->untrained_zero[cpu->untrained_count++] = all_zero_(gradient, count);
        free(gradient);
    }
}

static double scale_of_(uform_trainer_t const *trainer) {
    float scale;
    UFORM_OK(uform_trainer_read(trainer, "siglip.scale", uform_slot_parameter_k, &scale, 1));
    return exp((double)scale);
}

/* Each masked modelling head's bias's root mean square; 0 where the model has no such head. */
static void bias_rms_(uform_trainer_t const *trainer, double rms[uform_media_kinds_k]) {
    for (size_t k = 0; k < uform_media_kinds_k; ++k) {
        uform_media_info_t const *info = uform_media_info((uform_cell_kind_t)(uform_cell_image_k + k));
        float bias[uform_tube_values_k];
        char name[48];
        snprintf(name, sizeof(name), "%s.bias", uform_part_name(info->mae));
        rms[k] = 0;
        if (uform_trainer_read(trainer, name, uform_slot_parameter_k, bias, info->values) != uform_ok_k) continue;
        double sum = 0;
        for (size_t v = 0; v < info->values; ++v) sum += (double)bias[v] * bias[v];
        rms[k] = sqrt(sum / (double)info->values);
    }
}

/* The CPU reference, once: gradients on batch 0, then the loss curve of `steps` steps. */
static void reference_(setup_t const *s, reference_t *cpu) {
    size_t count = s->list.count, steps = s->steps;
    cpu->gradients = calloc(count, sizeof(float *));
    cpu->losses = calloc(steps + 1, sizeof(double)), cpu->progress = calloc(steps + 1, sizeof(double));
    cpu->scales = calloc(steps + 1, sizeof(double)), cpu->parts = calloc(steps + 1, sizeof(uform_losses_t));
    cpu->bias_rms = calloc(steps + 1, sizeof(*cpu->bias_rms));
    if (!cpu->gradients || !cpu->losses || !cpu->progress || !cpu->scales || !cpu->parts || !cpu->bias_rms) exit(1);
    uform_losses_t losses;
    uform_batch_t batch = batch_cpu_(&s->batches[0]);
    cpu->scales[0] = scale_of_(s->trainer), bias_rms_(s->trainer, cpu->bias_rms[0]);
    UFORM_OK(uform_trainer_gradients(s->trainer, &batch, &losses));
    cpu->loss0 = losses.total, cpu->parts0 = losses;
    for (size_t i = 0; i < count; ++i) {
        if (!(cpu->gradients[i] = malloc(s->list.elements[i] * 4))) exit(1);
        UFORM_OK(uform_trainer_read(s->trainer, s->list.names[i], uform_slot_gradient_k, cpu->gradients[i],
                                    s->list.elements[i]));
    }
    untrained_(s, cpu);
    /* Batch 0's loss after each update measures what the updates did, free of batch-to-batch noise. */
    double fixed = cpu->loss0;
    uform_batch_t fixed_batch = batch_cpu_(&s->batches[0]);
    for (size_t t = 1; t <= steps; ++t) {
        batch = batch_cpu_(&s->batches[t]);
        cpu->scales[t] = scale_of_(s->trainer), bias_rms_(s->trainer, cpu->bias_rms[t]);
        UFORM_OK(uform_trainer_step(s->trainer, &batch, &losses));
        cpu->losses[t] = losses.total, cpu->parts[t] = losses;
        if (t == steps) break;
        UFORM_OK(uform_trainer_gradients(s->trainer, &fixed_batch, &losses));
        cpu->progress[t + 1] = cpu->progress[t] + fabs(losses.total - fixed);
        fixed = losses.total;
    }
}

/* The smallest gap, over a batch's anchors, candidates and query cells, between a query cell's best
 * document cell and the runner-up, on `colbert` (normalized rows by grid cell). */
static double batch_margin_(host_batch_t const *b, float const *colbert, size_t width) {
    double smallest = INFINITY;
    for (size_t a = 0; a < b->anchors_count; ++a) {
        uint32_t const *query = &b->spans[2 * b->anchors[a]];
        for (size_t c = 0; c < b->candidates_count; ++c) {
            uint32_t const *document = &b->spans[2 * b->candidates[c]];
            for (size_t i = 0; i < query[1]; ++i) {
                double best = -INFINITY, second = -INFINITY;
                float const *q = colbert + (query[0] + i) * width;
                for (size_t j = 0; j < document[1]; ++j) {
                    float const *cell = colbert + (document[0] + j) * width;
                    double dot = 0;
                    for (size_t k = 0; k < width; ++k) dot += (double)q[k] * cell[k];
                    if (dot > best) second = best, best = dot;
                    else if (dot > second) second = dot;
                }
                smallest = best - second < smallest ? best - second : smallest;
            }
        }
    }
    return smallest;
}

/* MaxSim's margins on the CPU's own ColBERT rows at the start weights (uform_forward at Float32, the
 * trainer's arithmetic): margins[0] batch 0's, margins[1] the smallest over every batch. */
static void maxsim_margins_(setup_t const *s, double margins[2]) {
    size_t width = s->config.colbert_width;
    float *colbert = malloc(s->rows * s->columns * width * 4);
    if (!colbert) exit(1);
    UFORM_OK(uform_model_set_precision(s->model, uform_precision_f32_k));
    margins[1] = INFINITY;
    for (size_t t = 0; t <= s->steps; ++t) {
        uform_outputs_t outputs = {.colbert = colbert};
        uform_batch_t batch = batch_cpu_(&s->batches[t]);
        UFORM_OK(uform_forward(s->model, &batch.grid, &outputs));
        double margin = batch_margin_(&s->batches[t], colbert, width);
        if (!t) margins[0] = margin;
        margins[1] = margin < margins[1] ? margin : margins[1];
    }
    UFORM_OK(uform_model_set_precision(s->model, uform_precision_bf16_k));
    free(colbert);
}

static void reference_free_(reference_t *cpu, size_t count) {
    free_all_(cpu->gradients, count);
    free(cpu->losses), free(cpu->progress), free(cpu->scales), free(cpu->parts), free(cpu->bias_rms);
}

/* ---------------------------------------------------------------------------------------------
 * One run: recompute 0 (off), 1 (on) or 2 (on, the last block keeping its activations and the replayed
 * ones their attention outputs)
 * ------------------------------------------------------------------------------------------- */

static uform_cuda_step_t *step_create_(setup_t const *s, int recompute) {
    uform_cuda_step_config_t config = step_config_(s, recompute);
    uform_cuda_step_t *step = NULL;
    char error[256] = "";
    if (uform_cuda_step_create(&step, &config, error, sizeof(error))) {
        fprintf(stderr, "step_parity: %s\n", error);
        exit(1);
    }
    size_t count;
    uform_cuda_tensor_t *tensors = uform_cuda_step_tensors(step, &count);
    if (count != s->list.count) {
        fprintf(stderr, "step_parity: the step lists %zu tensors, the first step %zu\n", count, s->list.count);
        exit(1);
    }
    for (size_t i = 0; i < count; ++i)
        if (strcmp(tensors[i].name, s->list.names[i])) {
            fprintf(stderr, "step_parity: tensor %zu is %s here, %s in the first step\n", i, tensors[i].name,
                    s->list.names[i]);
            exit(1);
        }
    upload_parameters_(step, &s->list, s->start);
    return step;
}

/* Forward and backward of batch 0 on the GPU: the loss in parts, and every gradient downloaded. */
static float **gpu_gradients_(uform_cuda_step_t *step, setup_t const *s, float parts[4]) {
    batch_gpu_(step, 0, &s->batches[0], s->segments, 1);
    STEP_OK(step, uform_cuda_step_gradients(step, 0));
    STEP_OK(step, uform_cuda_step_wait(step, 0, NULL));
    uform_cuda_step_losses(step, 0, parts);
    return download_gradients_(step, &s->list);
}

/* Prints the table of gradient errors; returns how many tensors exceed their bound (`blocks_only`: block tensors). */
static size_t gradient_table_(setup_t const *s, float *const *gpu, reference_t const *cpu, double *errors, int blocks_only) {
    size_t failed = 0;
    printf("  %-22s %6s %10s %10s %8s  %s\n", "tensor", "points", "rel.error", "bound", "ratio", "result");
    for (size_t i = 0; i < s->list.count; ++i) {
        char const *name = s->list.names[i];
        size_t points = points_(name, s->variant, s->depth);
        double error = relative_error_(gpu[i], cpu->gradients[i], s->list.elements[i]);
        double bound = gradient_bound_(name, s->variant, s->depth), ratio = error / bound;
        int pass = points > 0 && error <= bound;
        int zero = pass && all_zero_(cpu->gradients[i], s->list.elements[i]); /* then the GPU's is exactly 0 too */
        errors[i] = error;
        if (!pass && (!blocks_only || !strncmp(name, "blocks.", 7))) failed++;
        printf("  %-22s %6zu %10.3e %10.3e %8.3f  %s\n", name, points, error, bound, ratio,
               zero ? "pass (0 on both)" : pass ? "pass" : "FAIL");
    }
    return failed;
}

/* 20 (or --steps) full steps from the start, slots alternating; fills losses [1..steps]. */
static void gpu_trajectory_(uform_cuda_step_t *step, setup_t const *s, float *losses) {
    for (size_t t = 1; t <= s->steps; ++t) {
        int slot = (int)((t - 1) & 1);
        STEP_OK(step, uform_cuda_step_wait(step, slot, t > 2 ? &losses[t - 2] : NULL)); /* the slot's last step, t - 2 */
        batch_gpu_(step, slot, &s->batches[t], s->segments, t);
        STEP_OK(step, uform_cuda_step_run(step, slot));
    }
    for (size_t t = s->steps > 1 ? s->steps - 1 : 1; t <= s->steps; ++t)
        STEP_OK(step, uform_cuda_step_wait(step, (int)((t - 1) & 1), &losses[t]));
}

typedef struct run_result_t {
    float **gradients; /* kept to compare recompute modes */
    float *losses;
} run_result_t;

static void json_loss_(char const *key, double cpu, double gpu, double error, double bound) {
    fprintf(json_, "\"%s\": {\"cpu\": ", key), json_number_(cpu);
    fprintf(json_, ", \"gpu\": "), json_number_(gpu);
    fprintf(json_, ", \"error\": "), json_number_(error);
    fprintf(json_, ", \"bound\": "), json_number_(bound);
    fprintf(json_, "}");
}

/* Masked bytes: batch 0's loss by relative error within sqrt(F) u; with the mae head its parts by
 * absolute error within their bounds. */
static void loss_check_mlm_(setup_t const *s, reference_t const *cpu, float const gpu[4]) {
    size_t forward = forward_points_(s->variant, s->depth);
    if (s->variant->mae) {
        double pixels[uform_media_kinds_k];
        pixels_rms_all_(&s->batches[0], pixels);
        loss_bounds_t b = loss_bounds_(s->variant, &s->config, s->depth, &cpu->parts0, cpu->scales[0], 0, pixels,
                                       cpu->bias_rms[0]);
        struct { char const *name; double cpu, gpu, bound; } parts[3] = {
            {"loss.mlm", cpu->parts0.mlm, gpu[1], b.head},
            {"loss.reconstruction", cpu->parts0.reconstruction, gpu[2], b.reconstruction},
            {"loss", cpu->loss0, gpu[0], b.total}};
        CHECK(cpu->parts0.reconstructed > 0); /* the batch masks patches */
        for (size_t p = 0; p < 3; ++p) {
            double error = fabs(parts[p].gpu - parts[p].cpu);
            printf("  %-22s %6s %10.3e %10.3e %8.3f  %s   (cpu %.6f, gpu %.6f)\n", parts[p].name, "", error, parts[p].bound,
                   error / parts[p].bound, error <= parts[p].bound ? "pass" : "FAIL", parts[p].cpu, parts[p].gpu);
            CHECK(error <= parts[p].bound);
            if (json_) fprintf(json_, ", "), json_loss_(parts[p].name, parts[p].cpu, parts[p].gpu, error, parts[p].bound);
        }
        return;
    }
    double error = fabs((double)gpu[0] - cpu->loss0) / cpu->loss0, bound = sqrt((double)forward) * bf16_unit_;
    printf("  %-22s %6zu %10.3e %10.3e %8.3f  %s   (cpu %.6f, gpu %.6f)\n", "loss", forward, error, bound,
           error / bound, error <= bound ? "pass" : "FAIL", cpu->loss0, (double)gpu[0]);
    CHECK(error <= bound);
    if (json_) fprintf(json_, ", "), json_loss_("loss", cpu->loss0, gpu[0], error, bound);
}

/* Pair objectives: batch 0's loss and each part by absolute error within the derived bounds. */
static void loss_check_pairs_(setup_t const *s, reference_t const *cpu, float const gpu[4]) {
    variant_t const *v = s->variant;
    loss_bounds_t b = loss_bounds_(v, &s->config, s->depth, &cpu->parts0, cpu->scales[0], s->batches[0].texts, 0, 0);
    struct { char const *name; double cpu, gpu, bound; int on; } parts[4] = {
        {rerank_(v) ? "loss.rerank" : "loss.siglip", rerank_(v) ? cpu->parts0.rerank : cpu->parts0.siglip, gpu[1],
         b.head, 1},
        {"loss.tcr", cpu->parts0.tcr, gpu[2], b.tcr, v->tcr_lambda > 0},
        {"loss.lipschitz", cpu->parts0.lipschitz, gpu[3], b.lipschitz, v->lipschitz_lambda > 0},
        {"loss", cpu->loss0, gpu[0], b.total, 1}};
    printf("  %-22s %6s %10s %10s %8s  %s\n", "loss (absolute)", "", "error", "bound", "ratio", "result");
    for (size_t p = 0; p < 4; ++p) {
        if (!parts[p].on) continue;
        double error = fabs(parts[p].gpu - parts[p].cpu);
        printf("  %-22s %6s %10.3e %10.3e %8.3f  %s   (cpu %.6f, gpu %.6f)\n", parts[p].name, "", error, parts[p].bound,
               error / parts[p].bound, error <= parts[p].bound ? "pass" : "FAIL", parts[p].cpu, parts[p].gpu);
        CHECK(error <= parts[p].bound);
        if (json_) fprintf(json_, ", "), json_loss_(parts[p].name, parts[p].cpu, parts[p].gpu, error, parts[p].bound);
    }
}

/* Step t's trajectory bound: the loss bound at step t plus 2 e_g times batch 0's progress before it. */
static double trajectory_bound_(setup_t const *s, reference_t const *cpu, size_t t, double largest_gradient_bound) {
    double pixels[uform_media_kinds_k];
    pixels_rms_all_(&s->batches[t], pixels);
    loss_bounds_t b =
        loss_bounds_(s->variant, &s->config, s->depth, &cpu->parts[t], cpu->scales[t], s->batches[t].texts, pixels,
                     cpu->bias_rms[t]);
    return b.total + 2 * largest_gradient_bound * cpu->progress[t];
}

static int run_(setup_t const *s, reference_t const *cpu, int recompute, run_result_t *result) {
    size_t count = s->list.count;
    printf("\n== %s, recompute %d%s ==\n", s->variant->name, recompute, recompute == 2 ? " (the last block kept, attention kept)" : "");
    if (json_) fprintf(json_, "%s{\"recompute\": %d", recompute ? ", " : "", recompute);
    int failures_before = failed_;

    /* 1. Gradient parity on batch 0. */
    uform_cuda_step_t *step = step_create_(s, recompute);
    float loss0[4];
    float **gradients = gpu_gradients_(step, s, loss0);
    double *errors = calloc(count, sizeof(double));
    if (!errors) exit(1);
    printf("gradients on one batch (bound sqrt(points) x 2^-8, see the derivation in the source):\n");
    size_t failed = gradient_table_(s, gradients, cpu, errors, 0);
    CHECK(failed == 0);
    if (pairs_(s->variant)) loss_check_pairs_(s, cpu, loss0);
    else loss_check_mlm_(s, cpu, loss0);
    if (json_) {
        fprintf(json_, ", \"gradients\": [");
        for (size_t i = 0; i < count; ++i) {
            double bound = gradient_bound_(s->list.names[i], s->variant, s->depth);
            fprintf(json_, "%s{\"tensor\": \"%s\", \"points\": %zu, \"error\": ", i ? ", " : "", s->list.names[i],
                    points_(s->list.names[i], s->variant, s->depth));
            json_number_(errors[i]);
            fprintf(json_, ", \"bound\": "), json_number_(bound);
            fprintf(json_, ", \"pass\": %s}", errors[i] <= bound ? "true" : "false");
        }
        fprintf(json_, "]");
    }

    /* 2. Trajectory: the loss of each full step against the CPU's from the same start.
     * Derived: Adafactor's U = G / sqrt(V) does not depend on G's scale, so a relative gradient
     * error e changes the update by at most 2 e to first order (e through G, e through sqrt(V),
     * V ~ G^2); clipping divides by rms(U) and keeps that. The BF16 store of each master rounds the
     * two sides apart only where they straddle a rounding midpoint, with probability |dw| / ulp at a
     * cost of one ulp: in expectation the same |dw|. Assumed: (a) an update error changes the loss
     * by at most the same fraction of the loss change the update makes, measured on the CPU as
     * batch 0's loss before and after each update, E_j (a fixed batch, so no batch-to-batch noise);
     * (b) no compounding over these few steps (first order). With e_g the largest gradient bound and
     * B_k the loss bound above at step k (e_L L_cpu(k) with masked bytes, e_L = sqrt(F) u; the
     * parts' bounds with the pair objectives), step k's bound (k - 1 updates behind it) is
     *     |L_gpu(k) - L_cpu(k)| <= B_k + 2 e_g sum_(j = 1..k-1) |E_j - E_(j-1)|.
     * The same emulation (masked bytes): honest steps at <= 0.007 of it; a doubled learning rate
     * reaches 3.7, M's bias correction dropped 11 (both within the first three steps). Rerank's
     * later steps rest on MaxSim's margins, checked on every batch at the start weights. */
    double largest_gradient_bound = 0;
    for (size_t i = 0; i < count; ++i) {
        double bound = gradient_bound_(s->list.names[i], s->variant, s->depth);
        largest_gradient_bound = bound > largest_gradient_bound ? bound : largest_gradient_bound;
    }
    float *losses = calloc(s->steps + 1, sizeof(float));
    if (!losses) exit(1);
    gpu_trajectory_(step, s, losses);
    printf("trajectory (%zu Adafactor steps, learning rate %g; bound B_k + 2 e_g sum |dE|, e_g = %.4f):\n", s->steps,
           learning_rate_, largest_gradient_bound);
    printf("  %4s %10s %10s %10s %10s %8s  %s\n", "step", "cpu", "gpu", "|diff|", "bound", "ratio", "result");
    size_t trajectory_failed = 0;
    if (json_) fprintf(json_, ", \"trajectory\": [");
    for (size_t t = 1; t <= s->steps; ++t) {
        double difference = fabs((double)losses[t] - cpu->losses[t]);
        double bound = trajectory_bound_(s, cpu, t, largest_gradient_bound);
        int pass = difference <= bound;
        trajectory_failed += !pass;
        printf("  %4zu %10.6f %10.6f %10.3e %10.3e %8.3f  %s\n", t, cpu->losses[t], (double)losses[t], difference, bound,
               difference / bound, pass ? "pass" : "FAIL");
        if (json_) {
            fprintf(json_, "%s{\"step\": %zu, \"cpu\": ", t > 1 ? ", " : "", t), json_number_(cpu->losses[t]);
            fprintf(json_, ", \"gpu\": "), json_number_(losses[t]);
            fprintf(json_, ", \"bound\": "), json_number_(bound);
            fprintf(json_, ", \"fixed_batch_progress\": "), json_number_(cpu->progress[t]);
            fprintf(json_, ", \"pass\": %s}", pass ? "true" : "false");
        }
    }
    if (json_) fprintf(json_, "]");
    CHECK(trajectory_failed == 0);

    /* 3. Determinism: a second step from the same start, the same batches: bitwise the same. */
    unsigned char **parameters = download_parameters_(step, &s->list);
    uform_cuda_step_t *again = step_create_(s, recompute);
    float *losses_again = calloc(s->steps + 1, sizeof(float));
    if (!losses_again) exit(1);
    gpu_trajectory_(again, s, losses_again);
    unsigned char **parameters_again = download_parameters_(again, &s->list);
    int same_losses = !memcmp(losses + 1, losses_again + 1, s->steps * sizeof(float));
    size_t differing = 0;
    for (size_t i = 0; i < count; ++i) {
        size_t size = s->list.elements[i] * (s->list.is_matrix[i] ? 2 : 4);
        if (memcmp(parameters[i], parameters_again[i], size)) {
            if (!differing) printf("  first differing tensor after replay: %s\n", s->list.names[i]);
            differing++;
        }
    }
    printf("determinism (a second step replaying the %zu steps): losses %s, parameters %s\n", s->steps,
           same_losses ? "bitwise identical" : "DIFFER", differing ? "DIFFER" : "bitwise identical");
    CHECK(same_losses);
    CHECK(differing == 0);
    if (json_)
        fprintf(json_, ", \"determinism\": {\"losses_identical\": %s, \"parameters_differing_tensors\": %zu}",
                same_losses ? "true" : "false", differing);
    uform_cuda_step_destroy(again);
    free(losses_again);
    free_all_(parameters, count), free_all_(parameters_again, count);
    uform_cuda_step_destroy(step);

    /* 4. The planted control: the same gradient check must reject a dropped RMSNorm term, planted in
     *    every RMSNorm backward the step launches while it is set. */
    uform_cuda_plant_set("rmsnorm_backward", 1);
    uform_cuda_step_t *planted = step_create_(s, recompute);
    float planted_loss[4];
    float **planted_gradients = gpu_gradients_(planted, s, planted_loss);
    uform_cuda_plant_set(NULL, 0);
    double *planted_errors = calloc(count, sizeof(double));
    if (!planted_errors) exit(1);
    printf("planted control (every RMSNorm backward, the blocks' and the final norm's, without its shared-scale term; "
           "FAIL expected):\n");
    size_t rejected = gradient_table_(s, planted_gradients, cpu, planted_errors, 1);
    printf("  %s: %zu block tensor(s) out of bound\n", rejected ? "control caught" : "MISSED", rejected);
    CHECK(rejected > 0);
    if (json_) {
        fprintf(json_, ", \"control\": {\"caught\": %s, \"rejected_block_tensors\": %zu, \"errors\": [",
                rejected ? "true" : "false", rejected);
        for (size_t i = 0; i < count; ++i) {
            fprintf(json_, "%s{\"tensor\": \"%s\", \"error\": ", i ? ", " : "", s->list.names[i]);
            json_number_(planted_errors[i]);
            fprintf(json_, "}");
        }
        fprintf(json_, "]}");
    }
    uform_cuda_step_destroy(planted);
    free_all_(planted_gradients, count);
    free(planted_errors), free(errors);

    /* Recomputation replays the same kernels on the same inputs, so it must repeat bitwise. */
    if (result->gradients) {
        size_t differ = 0;
        for (size_t i = 0; i < count; ++i)
            differ += memcmp(result->gradients[i], gradients[i], s->list.elements[i] * 4) != 0;
        int same = !differ && !memcmp(result->losses + 1, losses + 1, s->steps * sizeof(float));
        printf("recompute: gradients and losses %s those of recompute %d\n", same ? "bitwise equal to" : "DIFFER from",
               recompute - 1);
        CHECK(same);
        if (json_) fprintf(json_, ", \"bitwise_equal_to_recompute_%d\": %s", recompute - 1, same ? "true" : "false");
        free_all_(result->gradients, count);
        free(result->losses);
    }
    result->gradients = gradients, result->losses = losses;
    int ok = failed_ == failures_before;
    if (json_) fprintf(json_, ", \"passed\": %s}", ok ? "true" : "false");
    return ok;
}

/* ---------------------------------------------------------------------------------------------
 * One objective: setup, reference, the three recompute modes
 * ------------------------------------------------------------------------------------------- */

static void describe_batch_(setup_t const *s) {
    host_batch_t const *b = &s->batches[0];
    if (b->kinds_mask)
        printf("batch 0: %zu image, %zu video, %zu audio cells (%s vectors)\n", b->media_rows[0], b->media_rows[1],
               b->media_rows[2], b->bf16 ? "BF16" : "Float32");
    if (!pairs_(s->variant)) {
        printf("batch 0's segments:");
        for (size_t i = 0; i < b->segments; ++i) printf(" %u", b->spans[2 * i + 1]);
        printf("\n");
        return;
    }
    printf("batch 0: %zu anchors, %zu candidates, %zu padding runs (capacities: %zu anchors, %zu candidates, %zu "
           "segments); text lengths:", b->anchors_count, b->candidates_count, b->segments - b->texts, s->anchors,
           s->candidates, s->segments);
    for (size_t i = 0; i < b->texts; ++i) printf(" %u", b->spans[2 * i + 1]);
    printf("\n");
}

/* The CPU's heads that the step does not hold: each must have an exactly zero CPU gradient. */
static void untrained_report_(reference_t const *cpu) {
    for (size_t u = 0; u < cpu->untrained_count; ++u) {
        printf("  %-22s not trained by this objective: CPU gradient %s\n", cpu->untrained[u],
               cpu->untrained_zero[u] ? "exactly 0, the step holds no such tensor" : "NONZERO, but the step lacks it");
        CHECK(cpu->untrained_zero[u]);
    }
    if (!json_) return;
    fprintf(json_, "\"untrained\": [");
    for (size_t u = 0; u < cpu->untrained_count; ++u)
        fprintf(json_, "%s{\"tensor\": \"%s\", \"cpu_gradient_zero\": %s}", u ? ", " : "", cpu->untrained[u],
                cpu->untrained_zero[u] ? "true" : "false");
    fprintf(json_, "]");
}

static int objective_run_(setup_t *s, variant_t const *variant) {
    int failures_before = failed_;
    setup_cpu_(s, variant);
    tensor_list_(s);
    s->start = snapshot_(s->trainer, &s->list);
    printf("\n==== %s: %zu tensors", variant->name, s->list.count);
    if (spectral_(variant))
        printf(", TCR lambda %g, Lipschitz lambda %g (%zu power steps)", variant->tcr_lambda, variant->lipschitz_lambda,
               s->options.lipschitz_iterations);
    printf(" ====\n");
    describe_batch_(s);
    double margins[2] = {INFINITY, INFINITY}, required = 4 * sqrt(8.0 * s->depth + 1) * bf16_unit_;
    if (rerank_(variant)) { /* before the reference moves the weights */
        maxsim_margins_(s, margins);
        printf("MaxSim's margins (best minus runner-up document cell, CPU ColBERT rows at the start): batch 0 %.4f, "
               "all batches %.4f; over 4 e = %.4f no rounding can change a choice: %s\n", margins[0], margins[1],
               required, margins[1] > required ? "pass" : "FAIL");
        CHECK(margins[1] > required);
    }
    reference_t cpu = {0};
    reference_(s, &cpu);
    if (json_ && pairs_(variant)) {
        fprintf(json_, ", \"%s\": {\"tcr_lambda\": %g, \"lipschitz_lambda\": %g, \"lipschitz_iterations\": %zu, "
                       "\"anchors\": %zu, \"candidates\": %zu, \"segments\": %zu, ",
                variant->name, variant->tcr_lambda, variant->lipschitz_lambda, s->options.lipschitz_iterations,
                s->anchors, s->candidates, s->segments);
        if (rerank_(variant)) {
            fprintf(json_, "\"maxsim_margin\": {\"batch_0\": "), json_number_(margins[0]);
            fprintf(json_, ", \"all_batches\": "), json_number_(margins[1]);
            fprintf(json_, ", \"required\": "), json_number_(required);
            fprintf(json_, "}, ");
        }
    } else if (json_ && variant->media) {
        fprintf(json_, ", \"%s\": {", variant->name); /* the plain masked-byte run's keys stay at the top level */
    } else if (json_) fprintf(json_, ", ");
    if (json_ && variant->media)
        fprintf(json_, "\"media_cells_batch_0\": %zu, \"media_rows_batch_0\": [%zu, %zu, %zu], ", media_cells_(&s->batches[0]),
                s->batches[0].media_rows[0], s->batches[0].media_rows[1], s->batches[0].media_rows[2]);
    untrained_report_(&cpu);
    if (json_) fprintf(json_, ", \"runs\": [");
    run_result_t kept = {0};
    int ok = 1;
    for (int recompute = 0; recompute <= 2; ++recompute) ok &= run_(s, &cpu, recompute, &kept);
    ok &= failed_ == failures_before;
    if (json_)
        fprintf(json_, pairs_(variant) || variant->media ? "], \"passed\": %s}" : "], \"mlm_passed\": %s", ok ? "true" : "false");
    free_all_(kept.gradients, s->list.count);
    free(kept.losses);
    reference_free_(&cpu, s->list.count);
    setup_close_(s);
    return ok;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* tables interleave with stderr's messages in the order they happened */
    char const *json_path = NULL, *objective = "all";
    setup_t s = {.width = 128, .depth = 2, .rows = 4, .columns = 256, .steps = 20};
    for (int i = 1; i < argc; ++i) {
        char const *flag = argv[i];
        if (i + 1 >= argc) {
            fprintf(stderr, "step_parity: %s needs a value\n", flag);
            return 2;
        }
        char const *value = argv[++i];
        size_t number = strtoull(value, NULL, 10);
        if (!strcmp(flag, "--json")) json_path = value;
        else if (!strcmp(flag, "--objective")) objective = value;
        else if (!strcmp(flag, "--width")) s.width = number;
        else if (!strcmp(flag, "--depth")) s.depth = number;
        else if (!strcmp(flag, "--rows")) s.rows = number;
        else if (!strcmp(flag, "--columns")) s.columns = number;
        else if (!strcmp(flag, "--steps")) s.steps = number;
        else {
            fprintf(stderr, "step_parity: unknown flag %s (--json, --objective, --width, --depth, --rows, --columns, "
                            "--steps)\n", flag);
            return 2;
        }
    }
    if (!s.width || s.width % 64 || !s.depth || !s.rows || !s.columns || !s.steps) {
        fprintf(stderr, "step_parity: need a width that is a positive multiple of 64, and positive depth, rows, columns "
                        "and steps\n");
        return 2;
    }
    int all = !strcmp(objective, "all"), images = !strcmp(objective, "images"), media = !strcmp(objective, "media");
    if (!all && !images && !media && strcmp(objective, "mlm") && strcmp(objective, "contrastive") && strcmp(objective, "rerank")) {
        fprintf(stderr, "step_parity: --objective takes mlm, contrastive, rerank, images (the image variants), media "
                        "(every media variant) or all, not %s\n", objective);
        return 2;
    }
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        printf("step_parity: skipped: no CUDA device\n");
        return 77;
    }
    struct cudaDeviceProp properties;
    CUDA_OK(cudaGetDeviceProperties(&properties, 0));
    printf("step parity on %s: width %zu, depth %zu, %zu x %zu cells, objective %s; u = 2^-8\n", properties.name,
           s.width, s.depth, s.rows, s.columns, objective);
    if (json_path && !(json_ = fopen(json_path, "w"))) {
        fprintf(stderr, "step_parity: cannot write %s\n", json_path);
        return 1;
    }
    if (json_)
        fprintf(json_,
                "{\"device\": \"%s\", \"width\": %zu, \"depth\": %zu, \"rows\": %zu, \"columns\": %zu, \"steps\": %zu, "
                "\"learning_rate\": %g, \"unit_roundoff\": %.9g, \"objective\": \"%s\"",
                properties.name, s.width, s.depth, s.rows, s.columns, s.steps, learning_rate_, bf16_unit_, objective);
    int ok = 1;
#if defined(UFORM_HAVE_CUDNN)
    { /* a step past cuDNN's 32-bit ragged offsets is refused before it takes device memory */
        uform_cuda_step_config_t wide = {.width = 1024, .depth = 1, .cells = 699051, .objective = uform_cuda_mlm_k,
                                         .cudnn_attention = 1, .segments = 171, .longest = 4096};
        uform_cuda_step_t *refused = NULL;
        char error[256] = "";
        uform_status_t status = uform_cuda_step_create(&refused, &wide, error, sizeof(error));
        int passed = status == uform_invalid_argument_k && strstr(error, "699050");
        printf("%s: a step of 699,051 cells at width 1024 with cuDNN attention refused (%s)\n", passed ? "ok" : "FAILED",
               error);
        uform_cuda_step_destroy(refused);
        ok &= passed;
    }
#endif
    for (size_t v = 0; v < sizeof(variants_) / sizeof(variants_[0]); ++v) {
        static char const *const objective_names[] = {"mlm", "contrastive", "rerank"};
        unsigned kinds = variants_[v].media;
        if (all || (images && kinds == image_bit_k) || (media && kinds) || !strcmp(objective, objective_names[variants_[v].objective]))
            ok &= objective_run_(&s, &variants_[v]);
    }
    if (json_) {
        fprintf(json_, ", \"passed\": %s}\n", ok ? "true" : "false");
        fclose(json_);
    }
    printf("\nstep parity: %s\n", ok ? "all checks passed, controls caught" : "FAILED");
    return check_report();
}
