/*  batch.c: a training batch (uform_batch_t) into one slot of the step's cell lists (step.h), its
 *  spans found by the run walker of model/grid.h, the one grid-to-segments step of every backend.
 *  Host code only: it writes the slot's pinned memory and calls no device function. */
#include "cuda/batch.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cuda/error.h"
#include "model/grid.h"
#include "model/tensors.h"

/* Every run is a span. Masked bytes: spans in cell order. Contrastive and rerank: the texts take
 * spans 0..live-1 in uform_forward's numbering (which anchors and candidates use, and whose rows TCR
 * and Lipschitz read), the padding runs the spans after them, and the rest of the capacity length 0;
 * each span is one run of cells, which is what MaxSim reads as a query's or a document's cells.
 * Media cells' vectors are copied into the slot as they come: the caller's media buffers need not
 * outlive the call. */
uform_status_t uform_cuda_batch_fill(uform_cuda_batch_t const *slot, uform_cuda_step_config_t const *config,
                                     uform_batch_t const *batch, char *error, size_t error_size) {
    uform_grid_t const *grid = &batch->grid;
    int pairs = config->objective != uform_cuda_mlm_k;
    size_t cells = grid->rows * grid->columns;
    if (cells != config->cells || !grid->kinds || !grid->values || !grid->segments || !grid->positions)
        return uform_cuda_fail(error, error_size, uform_shape_k, "a batch of %zu x %zu cells, the step was made for %zu cells%s",
                     grid->rows, grid->columns, config->cells, cells == config->cells ? " (an array of the grid is NULL)" : "");
    if (!pairs && !batch->targets)
        return uform_cuda_fail(error, error_size, uform_invalid_argument_k, "a masked-byte batch needs targets");
    size_t live = 0, padding_runs = 0, scored = 0;
    uform_runs_t runs = uform_runs_begin(grid, 0, grid->rows);
    for (uform_run_t run; uform_runs_next(&runs, &run);) run.padding ? padding_runs++ : live++;
    size_t capacity = pairs || config->segments ? config->segments : cells;
    if (live + padding_runs > capacity || (config->cudnn_attention && live + padding_runs != capacity))
        return uform_cuda_fail(error, error_size, uform_shape_k,
                     "the batch packs %zu texts and %zu padding runs; the step holds %s %zu segments%s", live, padding_runs,
                     config->cudnn_attention ? "exactly" : "at most", capacity, pairs ? " (anchors + candidates + rows)" : "");
    /* Media cells: their vectors packed in cell order, kind by kind, their value PAD (a row the byte lookup may read). */
    size_t counts[uform_media_kinds_k] = {0}, masked[uform_media_kinds_k] = {0}, any_masked = 0;
    size_t next_text = 0, next_padding = live, next_span = 0;
    runs = uform_runs_begin(grid, 0, grid->rows);
    for (uform_run_t run; uform_runs_next(&runs, &run);) {
        size_t span = !pairs ? next_span++ : run.padding ? next_padding++ : next_text++;
        slot->spans[2 * span] = (uint32_t)run.start, slot->spans[2 * span + 1] = (uint32_t)run.length;
        for (size_t cell = run.start; cell < run.start + run.length; ++cell) {
            int32_t target = pairs ? -1 : batch->targets[cell];
            uint8_t kind = grid->kinds[cell];
            uint32_t value = grid->values[cell];
            int is_media = !run.padding && kind >= uform_cell_image_k && kind <= uform_cell_audio_k;
            if (!run.padding && !is_media && (kind != uform_cell_byte_k || value >= uform_vocabulary_k))
                return uform_cuda_fail(error, error_size, kind == uform_cell_byte_k ? uform_invalid_argument_k : uform_unsupported_k,
                             "cell %zu is not a byte cell with a value in 0..257 or a media cell (image, video, audio): kind %d",
                             cell, (int)kind);
            if (is_media) {
                size_t k = kind - uform_cell_image_k, held = config->media[k];
                uform_media_t const *media = &grid->media[k];
                uform_media_info_t const *info = uform_media_info((uform_cell_kind_t)kind);
                char const *name = kind == uform_cell_image_k ? "image" : kind == uform_cell_video_k ? "video" : "audio";
                uform_cuda_batch_media_t const *out = &slot->media[k];
                size_t row_bytes = info->values * (media->dtype == uform_media_bf16_k ? 2 : 4);
                if (!held)
                    return uform_cuda_fail(error, error_size, uform_unsupported_k,
                                 "cell %zu is an %s cell, and the step has no %s frontend (the model carries no %s)",
                                 cell, name, uform_part_name(info->part), uform_part_name(info->part));
                if (!media->data || (media->dtype != uform_media_f32_k && media->dtype != uform_media_bf16_k) ||
                    (counts[k] && media->dtype != out->counts[1]))
                    return uform_cuda_fail(error, error_size, uform_invalid_argument_k,
                                 "%s cell %zu: a %s buffer of %zu rows of dtype %d (Float32 %d or BF16 %d)", name, cell, name,
                                 media->data ? media->count : 0, (int)media->dtype, (int)uform_media_f32_k, (int)uform_media_bf16_k);
                if (target >= 0) { /* a masked vector: its head's reconstruction (docs/images.md, docs/audio_video.md) */
                    if (!config->mae[k])
                        return uform_cuda_fail(error, error_size, uform_missing_k,
                                     "%s cell %zu is masked (target %d), and the step has no %s masked modelling head", name,
                                     cell, target, name);
                    if ((size_t)target >= media->count)
                        return uform_cuda_fail(error, error_size, uform_invalid_argument_k,
                                     "%s cell %zu's target names row %d of %zu %s rows", name, cell, target, media->count, name);
                    if (masked[k] < held) /* cells past the held are refused below */
                        out->mae_cells[masked[k]] = (uint32_t)cell,
                        memcpy((unsigned char *)out->mae_rows + masked[k] * row_bytes,
                               (unsigned char const *)media->data + (size_t)target * row_bytes, row_bytes);
                    masked[k]++, any_masked++, target = -1; /* no byte target: the byte head skips it */
                }
                if (counts[k] == held)
                    return uform_cuda_fail(error, error_size, uform_shape_k, "the batch has more than %zu %s cells, the step's held",
                                 held, name);
                if (value >= media->count)
                    return uform_cuda_fail(error, error_size, uform_invalid_argument_k, "%s cell %zu names row %u of %zu %s rows",
                                 name, cell, value, media->count, name);
                out->counts[1] = (uint32_t)media->dtype;
                out->cells[counts[k]] = (uint32_t)cell;
                memcpy((unsigned char *)out->rows + counts[k] * row_bytes, (unsigned char const *)media->data + value * row_bytes,
                       row_bytes);
                counts[k]++;
            }
            if (target < -1 || target > 255 || (run.padding && target >= 0))
                return uform_cuda_fail(error, error_size, uform_invalid_argument_k, "target %d at cell %zu is not -1..255 on a byte cell",
                             target, cell);
            slot->segment_of[cell] = (uint32_t)span;
            slot->values[cell] = run.padding || is_media ? uform_pad_k : value;
            slot->targets[cell] = target;
            scored += target >= 0;
            memcpy(slot->positions + 3 * cell, grid->positions + 3 * cell, 3 * sizeof(int32_t));
        }
    }
    for (size_t k = 0; k < uform_media_kinds_k; ++k) {
        if (!config->media[k]) continue;
        slot->media[k].counts[0] = (uint32_t)counts[k], slot->media[k].counts[2] = (uint32_t)masked[k];
        if (!counts[k]) slot->media[k].counts[1] = (uint32_t)uform_media_f32_k;
    }
    size_t spans = pairs ? next_padding : next_span;
    for (size_t s = spans; config->segments && s < capacity; ++s) slot->spans[2 * s] = slot->spans[2 * s + 1] = 0;
    if (!pairs)
        return scored || any_masked ? uform_ok_k : uform_cuda_fail(error, error_size, uform_invalid_argument_k, "the batch has no masked cells to score");
    size_t anchors = batch->anchors_count, candidates = batch->candidates_count;
    if (!batch->anchors || !anchors || !batch->candidates || !candidates || !batch->labels)
        return uform_cuda_fail(error, error_size, uform_invalid_argument_k, "a pair batch needs anchors, candidates and labels");
    if (anchors > config->anchors || candidates > config->candidates)
        return uform_cuda_fail(error, error_size, uform_shape_k,
                     "the batch has %zu anchors and %zu candidates, the step holds at most %zu and %zu (the batcher's capacities)",
                     anchors, candidates, config->anchors, config->candidates);
    for (size_t a = 0; a < anchors; ++a)
        if (batch->anchors[a] >= live)
            return uform_cuda_fail(error, error_size, uform_invalid_argument_k, "anchor %zu is segment %u of %zu", a, batch->anchors[a], live);
    for (size_t c = 0; c < candidates; ++c)
        if (batch->candidates[c] >= live)
            return uform_cuda_fail(error, error_size, uform_invalid_argument_k, "candidate %zu is segment %u of %zu", c, batch->candidates[c], live);
    memcpy(slot->anchors, batch->anchors, anchors * sizeof(uint32_t));
    memcpy(slot->candidates, batch->candidates, candidates * sizeof(uint32_t));
    memcpy(slot->labels, batch->labels, anchors * candidates);
    for (size_t a = 0; a < anchors; ++a) {
        float weight = batch->anchor_weights ? batch->anchor_weights[a] : 1.0f;
        if (!isfinite(weight) || weight < 0)
            return uform_cuda_fail(error, error_size, uform_invalid_argument_k, "anchor %zu's loss weight is %g; it must be finite and >= 0",
                                   a, (double)weight);
        slot->anchor_weights[a] = weight;
    }
    slot->counts[0] = (uint32_t)anchors, slot->counts[1] = (uint32_t)candidates, slot->counts[2] = (uint32_t)live;
    return uform_ok_k;
}
