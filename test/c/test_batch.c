/*  test_batch.c: the grid-to-segments step against spans written out by hand: the run walker of
 *  model/grid.h, the CPU's compaction over it, and the CUDA step's slot filling (src/cuda/batch.c, host
 *  code that needs no GPU), which must agree with each other on every text, and which packs an image
 *  batch's patches and image cells for the vision frontend. Prints "N passed, M failed". */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cuda/batch.h"
#include "model/grid.h"
#include "model/tensors.h"
#include "check.h"

enum { rows_k = 2, columns_k = 8, cells_k = rows_k * columns_k, capacity_k = 8 };

/* Row 0: segment 0 (3 cells), segment 1 (2), padding (3). Row 1: padding (1), segment 0 (4), segment 5 (3). */
static int32_t const segments_[cells_k] = {0, 0, 0, 1, 1, -1, -1, -1, -1, 0, 0, 0, 0, 5, 5, 5};
static uint32_t const texts_[4][2] = {{0, 3}, {3, 2}, {9, 4}, {13, 3}}, padding_[2][2] = {{5, 3}, {8, 1}};

/* The grid of segments_ as texts: bytes 'a' + cell, every third cell a target, t = h = w = cell. */
static void texts_grid_(uint8_t *kinds, uint32_t *values, int32_t *positions, int32_t *targets) {
    for (size_t c = 0; c < cells_k; ++c) {
        kinds[c] = segments_[c] < 0 ? uform_cell_padding_k : uform_cell_byte_k;
        values[c] = segments_[c] < 0 ? uform_pad_k : 'a' + (uint32_t)c;
        targets[c] = segments_[c] < 0 || c % 3 ? -1 : (int32_t)('a' + c);
        for (int axis = 0; axis < 3; ++axis) positions[3 * c + axis] = (int32_t)c;
    }
}

typedef struct slot_t {
    uint32_t values[cells_k], segment_of[cells_k], spans[2 * cells_k], anchors[4], candidates[4], counts[3];
    int32_t targets[cells_k], positions[3 * cells_k];
    uint8_t labels[16];
    float anchor_weights[4];
    uint32_t media_counts[uform_media_kinds_k][3], media_cells[uform_media_kinds_k][cells_k], mae_cells[uform_media_kinds_k][cells_k];
    float media_rows[uform_media_kinds_k][cells_k * uform_tube_values_k]; /* room for Float32 rows of any kind */
    float mae_rows[uform_media_kinds_k][cells_k * uform_tube_values_k];
} slot_t;

static uform_cuda_batch_t view_(slot_t *slot) {
    memset(slot, 0xff, sizeof(*slot)); /* whatever the fill leaves alone shows */
    uform_cuda_batch_t view = {.values = slot->values, .targets = slot->targets, .positions = slot->positions,
                               .segment_of = slot->segment_of, .spans = slot->spans, .anchors = slot->anchors,
                               .candidates = slot->candidates, .counts = slot->counts, .labels = slot->labels,
                               .anchor_weights = slot->anchor_weights};
    for (size_t k = 0; k < uform_media_kinds_k; ++k)
        view.media[k] = (uform_cuda_batch_media_t){slot->media_counts[k], slot->media_cells[k], slot->mae_cells[k],
                                                   slot->media_rows[k], slot->mae_rows[k]};
    return view;
}

/* Image segments beside texts (segment 1 of row 0 and segment 0 of row 1), their patches rows of a
 * media buffer named out of order: the slot packs them in cell order, its values PAD there, and
 * refuses what the step cannot take. */
static void image_batch_(void) {
    static slot_t slot;
    enum { media_rows_k = 8 };
    static float media_f32[media_rows_k * uform_patch_values_k];
    static uint16_t media_bf16[media_rows_k * uform_patch_values_k];
    for (size_t i = 0; i < media_rows_k * uform_patch_values_k; ++i) {
        media_f32[i] = (float)(i % 255) / 255.0f + (float)(i / uform_patch_values_k);
        media_bf16[i] = (uint16_t)(0x3f80 + i); /* any bit patterns: copied, not converted */
    }
    uint8_t kinds[cells_k];
    uint32_t values[cells_k];
    int32_t positions[3 * cells_k], targets[cells_k];
    uint32_t const image_cells[6] = {3, 4, 9, 10, 11, 12}, rows[6] = {7, 2, 0, 1, 5, 3};
    texts_grid_(kinds, values, positions, targets);
    for (size_t i = 0; i < 6; ++i) {
        size_t c = image_cells[i], first = i < 2 ? 3 : 9, columns = 2; /* a 1x2 and a 2x2 image */
        kinds[c] = uform_cell_image_k, values[c] = rows[i], targets[c] = -1;
        positions[3 * c] = 0, positions[3 * c + 1] = (int32_t)((c - first) / columns), positions[3 * c + 2] = (int32_t)((c - first) % columns);
    }
    uint32_t anchors[2] = {0, 2}, candidates[2] = {1, 3};
    uint8_t labels[4] = {1, 0, 0, 1};
    uform_batch_t batch = {.grid = {rows_k, columns_k, kinds, values, segments_, positions,
                                    {{media_f32, media_rows_k, uform_media_f32_k}}},
                           .targets = targets};
    char error[256] = "";

    /* Masked bytes with Float32 patches: the spans as for texts, the image cells listed in cell order. */
    uform_cuda_batch_t view = view_(&slot);
    uform_cuda_step_config_t config = {.cells = cells_k, .objective = uform_cuda_mlm_k, .media = {cells_k}};
    CHECK(uform_cuda_batch_fill(&view, &config, &batch, error, sizeof(error)) == uform_ok_k);
    CHECK(slot.media_counts[0][0] == 6 && slot.media_counts[0][1] == uform_media_f32_k && slot.media_counts[0][2] == 0 &&
          !memcmp(slot.media_cells[0], image_cells, sizeof(image_cells)));
    for (size_t i = 0; i < 6; ++i) {
        CHECK(slot.values[image_cells[i]] == uform_pad_k && slot.targets[image_cells[i]] == -1);
        CHECK(!memcmp(slot.media_rows[0] + i * uform_patch_values_k, media_f32 + rows[i] * uform_patch_values_k,
                      uform_patch_values_k * sizeof(float)));
        CHECK(slot.positions[3 * image_cells[i]] == 0 && slot.positions[3 * image_cells[i] + 1] == positions[3 * image_cells[i] + 1]);
    }
    CHECK(slot.values[0] == 'a' && slot.values[13] == 'a' + 13 && slot.targets[0] == 'a');
    CHECK(slot.spans[2] == 3 && slot.spans[3] == 2 && slot.segment_of[3] == 1 && slot.segment_of[12] == 4);

    /* Contrastive with BF16 patches: rows packed at 2 bytes a value; the images are texts 1 and 2. */
    view = view_(&slot);
    batch.grid.media[0] = (uform_media_t){media_bf16, media_rows_k, uform_media_bf16_k};
    batch.targets = NULL, batch.anchors = anchors, batch.anchors_count = 2, batch.candidates = candidates;
    batch.candidates_count = 2, batch.labels = labels;
    config = (uform_cuda_step_config_t){.cells = cells_k, .objective = uform_cuda_contrastive_k, .segments = capacity_k,
                                        .anchors = 2, .candidates = 2, .media = {6}};
    CHECK(uform_cuda_batch_fill(&view, &config, &batch, error, sizeof(error)) == uform_ok_k);
    CHECK(slot.media_counts[0][0] == 6 && slot.media_counts[0][1] == uform_media_bf16_k && !memcmp(slot.media_cells[0], image_cells, sizeof(image_cells)));
    uint16_t const *packed = (uint16_t const *)slot.media_rows[0];
    for (size_t i = 0; i < 6; ++i)
        CHECK(!memcmp(packed + i * uform_patch_values_k, media_bf16 + rows[i] * uform_patch_values_k, uform_patch_values_k * 2));
    for (size_t s = 0; s < 4; ++s) CHECK(slot.spans[2 * s] == texts_[s][0] && slot.spans[2 * s + 1] == texts_[s][1]);
    CHECK(slot.counts[2] == 4 && slot.values[10] == uform_pad_k);

    /* A byte batch leaves the image count 0. */
    uint8_t byte_kinds[cells_k];
    for (size_t c = 0; c < cells_k; ++c) byte_kinds[c] = kinds[c] == uform_cell_image_k ? uform_cell_byte_k : kinds[c];
    batch.grid.kinds = byte_kinds;
    view = view_(&slot);
    CHECK(uform_cuda_batch_fill(&view, &config, &batch, error, sizeof(error)) == uform_ok_k && slot.media_counts[0][0] == 0);
    batch.grid.kinds = kinds;

    /* Refused, each with what is wrong: no vision frontend, more image cells than the capacity, a row
     * the buffer lacks, a bad dtype, a byte target on an image cell. */
    config.media[0] = 0;
    CHECK(uform_cuda_batch_fill(&view, &config, &batch, error, sizeof(error)) == uform_unsupported_k && strstr(error, "cell 3") &&
          strstr(error, "vision"));
    config.media[0] = 5;
    CHECK(uform_cuda_batch_fill(&view, &config, &batch, error, sizeof(error)) == uform_shape_k && strstr(error, "more than 5"));
    config.media[0] = 6;
    values[11] = media_rows_k;
    CHECK(uform_cuda_batch_fill(&view, &config, &batch, error, sizeof(error)) == uform_invalid_argument_k &&
          strstr(error, "image cell 11"));
    values[11] = rows[4];
    batch.grid.media[0].dtype = (uform_media_dtype_t)7;
    CHECK(uform_cuda_batch_fill(&view, &config, &batch, error, sizeof(error)) == uform_invalid_argument_k && strstr(error, "dtype 7"));
    batch.grid.media[0].dtype = uform_media_bf16_k;
    config = (uform_cuda_step_config_t){.cells = cells_k, .objective = uform_cuda_mlm_k, .media = {6}};
    batch.targets = targets;
    targets[9] = 4; /* a masked patch: its target is the media row of its true pixels */
    CHECK(uform_cuda_batch_fill(&view, &config, &batch, error, sizeof(error)) == uform_missing_k && strstr(error, "cell 9") &&
          strstr(error, "masked modelling head"));

    /* With the mae head: the masked patch listed with its true row, no byte target; a row the buffer lacks refused. */
    config.mae[0] = 1;
    view = view_(&slot);
    CHECK(uform_cuda_batch_fill(&view, &config, &batch, error, sizeof(error)) == uform_ok_k);
    CHECK(slot.media_counts[0][0] == 6 && slot.media_counts[0][2] == 1 && slot.mae_cells[0][0] == 9 && slot.targets[9] == -1);
    CHECK(!memcmp(slot.mae_rows[0], media_bf16 + 4 * uform_patch_values_k, uform_patch_values_k * 2));
    CHECK(!memcmp(slot.media_rows[0], media_bf16 + rows[0] * uform_patch_values_k, uform_patch_values_k * 2));
    targets[9] = media_rows_k;
    CHECK(uform_cuda_batch_fill(&view, &config, &batch, error, sizeof(error)) == uform_invalid_argument_k &&
          strstr(error, "image cell 9's target names row 8"));
    /* Masked patches alone are something to score. */
    for (size_t c = 0; c < cells_k; ++c) targets[c] = -1;
    targets[10] = 2;
    view = view_(&slot);
    CHECK(uform_cuda_batch_fill(&view, &config, &batch, error, sizeof(error)) == uform_ok_k && slot.media_counts[0][2] == 1 &&
          slot.mae_cells[0][0] == 10);
}

/* A mixed batch: a video segment (row 0's segment 1) and an audio segment (row 1's segment 0) beside
 * texts. Each kind's cells are listed and its vectors packed apart from the other's, at its own
 * width (1536 and 320), the values PAD there; masked vectors go to their own kind's head, and a kind
 * masked without its head is refused by name. */
static void av_batch_(void) {
    static slot_t slot;
    enum { media_rows_k = 6 };
    static float tubes[media_rows_k * uform_tube_values_k], frames[media_rows_k * uform_frame_values_k];
    for (size_t i = 0; i < media_rows_k * uform_tube_values_k; ++i) tubes[i] = (float)i;
    for (size_t i = 0; i < media_rows_k * uform_frame_values_k; ++i) frames[i] = -(float)i;
    uint8_t kinds[cells_k];
    uint32_t values[cells_k];
    int32_t positions[3 * cells_k], targets[cells_k];
    texts_grid_(kinds, values, positions, targets);
    uint32_t const video_cells[2] = {3, 4}, video_rows[2] = {5, 1}, audio_cells[4] = {9, 10, 11, 12}, audio_rows[4] = {2, 0, 3, 4};
    for (size_t i = 0; i < 2; ++i) kinds[video_cells[i]] = uform_cell_video_k, values[video_cells[i]] = video_rows[i], targets[video_cells[i]] = -1;
    for (size_t i = 0; i < 4; ++i) kinds[audio_cells[i]] = uform_cell_audio_k, values[audio_cells[i]] = audio_rows[i], targets[audio_cells[i]] = -1;
    targets[10] = 5; /* a masked audio frame: its true samples are audio row 5 */
    uform_batch_t batch = {.grid = {rows_k, columns_k, kinds, values, segments_, positions,
                                    {{NULL, 0, uform_media_f32_k}, {tubes, media_rows_k, uform_media_f32_k},
                                     {frames, media_rows_k, uform_media_f32_k}}},
                           .targets = targets};
    char error[256] = "";
    uform_cuda_step_config_t config = {.cells = cells_k, .objective = uform_cuda_mlm_k, .media = {0, cells_k, cells_k},
                                       .mae = {0, 0, 1}};
    uform_cuda_batch_t view = view_(&slot);
    CHECK(uform_cuda_batch_fill(&view, &config, &batch, error, sizeof(error)) == uform_ok_k);
    CHECK(slot.media_counts[1][0] == 2 && slot.media_counts[1][2] == 0 && !memcmp(slot.media_cells[1], video_cells, sizeof(video_cells)));
    CHECK(slot.media_counts[2][0] == 4 && slot.media_counts[2][1] == uform_media_f32_k && slot.media_counts[2][2] == 1 &&
          !memcmp(slot.media_cells[2], audio_cells, sizeof(audio_cells)) && slot.mae_cells[2][0] == 10);
    for (size_t i = 0; i < 2; ++i)
        CHECK(!memcmp(slot.media_rows[1] + i * uform_tube_values_k, tubes + video_rows[i] * uform_tube_values_k,
                      uform_tube_values_k * sizeof(float)) && slot.values[video_cells[i]] == uform_pad_k);
    for (size_t i = 0; i < 4; ++i)
        CHECK(!memcmp(slot.media_rows[2] + i * uform_frame_values_k, frames + audio_rows[i] * uform_frame_values_k,
                      uform_frame_values_k * sizeof(float)) && slot.values[audio_cells[i]] == uform_pad_k);
    CHECK(!memcmp(slot.mae_rows[2], frames + 5 * uform_frame_values_k, uform_frame_values_k * sizeof(float)) &&
          slot.targets[10] == -1 && slot.targets[0] == 'a');
    /* A masked tube and no video head; then no audio frontend; then more audio cells than the capacity. */
    targets[4] = 0;
    CHECK(uform_cuda_batch_fill(&view, &config, &batch, error, sizeof(error)) == uform_missing_k && strstr(error, "video cell 4") &&
          strstr(error, "masked modelling head"));
    targets[4] = -1;
    config.media[2] = 0, config.mae[2] = 0;
    CHECK(uform_cuda_batch_fill(&view, &config, &batch, error, sizeof(error)) == uform_unsupported_k && strstr(error, "cell 9") &&
          strstr(error, "audio"));
    config.media[2] = 3, config.mae[2] = 1;
    CHECK(uform_cuda_batch_fill(&view, &config, &batch, error, sizeof(error)) == uform_shape_k && strstr(error, "more than 3 audio"));
}

int main(void) {
    uint8_t kinds[cells_k];
    uint32_t values[cells_k];
    int32_t positions[3 * cells_k], targets[cells_k];
    texts_grid_(kinds, values, positions, targets);
    uint32_t anchors[2] = {0, 2}, candidates[2] = {1, 3};
    uint8_t labels[4] = {1, 0, 0, 1};
    uform_batch_t batch = {.grid = {rows_k, columns_k, kinds, values, segments_, positions},
                           .anchors = anchors, .anchors_count = 2, .candidates = candidates, .candidates_count = 2,
                           .labels = labels};

    /* The walker: runs in cell order, padding marked. */
    uint32_t const order[6][2] = {{0, 3}, {3, 2}, {5, 3}, {8, 1}, {9, 4}, {13, 3}};
    uform_runs_t runs = uform_runs_begin(&batch.grid, 0, rows_k);
    size_t count = 0;
    for (uform_run_t run; uform_runs_next(&runs, &run); ++count)
        CHECK(count < 6 && run.start == order[count][0] && run.length == order[count][1] &&
              run.padding == (count == 2 || count == 3));
    CHECK(count == 6);

    /* The pair objectives: texts first in uform_forward's numbering, padding runs after, the rest empty. */
    slot_t slot;
    uform_cuda_batch_t view = view_(&slot);
    uform_cuda_step_config_t config = {.cells = cells_k, .objective = uform_cuda_contrastive_k, .segments = capacity_k,
                                       .anchors = 2, .candidates = 2};
    char error[256] = "";
    CHECK(uform_cuda_batch_fill(&view, &config, &batch, error, sizeof(error)) == uform_ok_k);
    for (size_t s = 0; s < 4; ++s) CHECK(slot.spans[2 * s] == texts_[s][0] && slot.spans[2 * s + 1] == texts_[s][1]);
    for (size_t s = 0; s < 2; ++s) CHECK(slot.spans[8 + 2 * s] == padding_[s][0] && slot.spans[9 + 2 * s] == padding_[s][1]);
    CHECK(slot.spans[12] == 0 && slot.spans[13] == 0 && slot.spans[14] == 0 && slot.spans[15] == 0);
    uint32_t const span_of[cells_k] = {0, 0, 0, 1, 1, 4, 4, 4, 5, 2, 2, 2, 2, 3, 3, 3};
    CHECK(!memcmp(slot.segment_of, span_of, sizeof(span_of)));
    CHECK(slot.values[5] == uform_pad_k && slot.values[9] == 'a' + 9 && slot.targets[0] == -1 && slot.positions[3 * 15] == 15);
    CHECK(slot.counts[0] == 2 && slot.counts[1] == 2 && slot.counts[2] == 4 && slot.labels[3] == 1);
    CHECK(slot.anchor_weights[0] == 1.0f && slot.anchor_weights[1] == 1.0f); /* no weights: each anchor at 1 */
    float weights[2] = {0.25f, 3.0f};
    batch.anchor_weights = weights;
    view = view_(&slot);
    CHECK(uform_cuda_batch_fill(&view, &config, &batch, error, sizeof(error)) == uform_ok_k);
    CHECK(slot.anchor_weights[0] == 0.25f && slot.anchor_weights[1] == 3.0f);
    weights[1] = -1.0f; /* refused, naming the anchor */
    view = view_(&slot);
    CHECK(uform_cuda_batch_fill(&view, &config, &batch, error, sizeof(error)) == uform_invalid_argument_k &&
          strstr(error, "anchor 1's loss weight is -1"));
    batch.anchor_weights = NULL;

    /* The CPU's compaction finds the same texts: its spans, through its destinations, are the grid's. */
    uint8_t compact_kinds[cells_k];
    uint32_t compact_values[cells_k];
    int32_t compact_positions[3 * cells_k];
    size_t destinations[cells_k], active = 0;
    uform_span_t spans[cells_k];
    size_t segments = uform_grid_compact(&batch.grid, 0, rows_k, compact_kinds, compact_values, compact_positions, destinations, spans, &active);
    CHECK(segments == 4 && active == 12);
    for (size_t s = 0; s < segments && s < 4; ++s)
        CHECK(destinations[spans[s].start] == texts_[s][0] && spans[s].length == texts_[s][1]);
    CHECK(spans[3].row_start == 5 && spans[3].row_length == 7 && spans[0].row_length == 5);

    /* Masked bytes: every run a span, in cell order; the targets go up as they are. */
    view = view_(&slot);
    config = (uform_cuda_step_config_t){.cells = cells_k, .objective = uform_cuda_mlm_k};
    batch.targets = targets;
    CHECK(uform_cuda_batch_fill(&view, &config, &batch, error, sizeof(error)) == uform_ok_k);
    for (size_t s = 0; s < 6; ++s) CHECK(slot.spans[2 * s] == order[s][0] && slot.spans[2 * s + 1] == order[s][1]);
    CHECK(!memcmp(slot.targets, targets, sizeof(targets)));

    /* Refused, each with what is wrong. */
    config = (uform_cuda_step_config_t){.cells = cells_k, .objective = uform_cuda_contrastive_k, .segments = 5,
                                        .anchors = 2, .candidates = 2};
    CHECK(uform_cuda_batch_fill(&view, &config, &batch, error, sizeof(error)) == uform_shape_k && strstr(error, "padding runs"));
    config.segments = capacity_k, config.cells = cells_k - 1;
    CHECK(uform_cuda_batch_fill(&view, &config, &batch, error, sizeof(error)) == uform_shape_k && strstr(error, "cells"));
    config.cells = cells_k;
    anchors[1] = 4; /* there are 4 texts: 0..3 */
    CHECK(uform_cuda_batch_fill(&view, &config, &batch, error, sizeof(error)) == uform_invalid_argument_k && strstr(error, "anchor 1"));
    anchors[1] = 2;
    kinds[10] = uform_cell_video_k; /* a kind the step has no frontend for */
    CHECK(uform_cuda_batch_fill(&view, &config, &batch, error, sizeof(error)) == uform_unsupported_k && strstr(error, "cell 10"));
    kinds[10] = uform_cell_byte_k;
    config.objective = uform_cuda_mlm_k, config.segments = 0;
    targets[6] = 'x'; /* a target on padding */
    CHECK(uform_cuda_batch_fill(&view, &config, &batch, error, sizeof(error)) == uform_invalid_argument_k && strstr(error, "cell 6"));
    image_batch_();
    av_batch_();
    return check_report();
}
