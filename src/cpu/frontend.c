/*  frontend.c: the CPU's frontend stage (frontend.h). */
#include "cpu/frontend.h"

#include "core/numeric.h"
#include "cpu/forward.h"

#if defined(UFORM_PLANT_PATCH_TRANSPOSED)
static void uform_plant_transpose_(float *out) {
    for (size_t y = 0; y < 16; ++y) /* planted: the patch's pixels read column by column */
        for (size_t x = y + 1; x < 16; ++x)
            for (size_t channel = 0; channel < 4; ++channel) {
                float swap = out[(y * 16 + x) * 4 + channel];
                out[(y * 16 + x) * 4 + channel] = out[(x * 16 + y) * 4 + channel];
                out[(x * 16 + y) * 4 + channel] = swap;
            }
}
#endif

/* Media row `row` of cells of `kind`, widened into `out`: a patch (16x16 RGBA), a tube (two 16x16
 * RGB frames) or an audio frame (320 samples), each as av_cells.c and image.c lay it out. */
static void uform_media_row_(uform_media_t const *all, uform_cell_kind_t kind, size_t row, float *out) {
    uform_media_t const *media = &all[kind - uform_cell_image_k];
    size_t width = uform_media_info(kind)->values;
    if (media->dtype == uform_media_bf16_k) uform_f32_from_bf16_array((uint16_t const *)media->data + row * width, out, width);
    else
        for (size_t i = 0; i < width; ++i) out[i] = ((float const *)media->data)[row * width + i];
#if defined(UFORM_PLANT_PATCH_TRANSPOSED)
    if (kind == uform_cell_image_k) uform_plant_transpose_(out);
#endif
#if defined(UFORM_PLANT_TUBE_FRAMES_SWAPPED)
    if (kind == uform_cell_video_k) /* planted: the tube's second frame read as its first */
        for (size_t i = 0; i < uform_tube_values_k / 2; ++i) {
            float swap = out[i];
            out[i] = out[i + uform_tube_values_k / 2], out[i + uform_tube_values_k / 2] = swap;
        }
#endif
#if defined(UFORM_PLANT_FRAME_OFFSET)
    if (kind == uform_cell_audio_k) { /* planted: the frame's samples read one sample late */
        for (size_t i = 0; i + 1 < uform_frame_values_k; ++i) out[i] = out[i + 1];
        out[uform_frame_values_k - 1] = 0;
    }
#endif
}

/* The end of the run of cells of the same kind as `first`, within [first, end). */
static size_t uform_kind_run_(uform_cells_t const *cells, size_t first, size_t end) {
    uint8_t kind = cells->kinds[first];
    while (first < end && cells->kinds[first] == kind) first++;
    return first;
}

static void uform_add_bias_(float *x, size_t rows, float const *bias, size_t d) {
    for (size_t r = 0; r < rows; ++r)
        for (size_t i = 0; i < d; ++i) x[r * d + i] += bias[i];
}

void uform_frontend_forward(uform_model_t const *model, uform_cells_t const *cells, size_t first, size_t count, float *x,
                            uform_scratch_t *scratch) {
    size_t d = model->config.width, end = first + count;
    for (size_t c = first; c < end;) {
        uform_cell_kind_t kind = (uform_cell_kind_t)cells->kinds[c];
        if (kind == uform_cell_byte_k) {
            uform_f32_from_bf16_array(model->embed->bf16 + (size_t)cells->values[c] * d, x + c * d, d);
            c++;
            continue;
        }
        size_t last = uform_kind_run_(cells, c, end), rows = last - c, values = uform_media_info(kind)->values;
        for (size_t r = 0; r < rows; ++r) uform_media_row_(cells->media, kind, cells->values[c + r], scratch->hidden + r * values);
        uform_cpu_linear(model, uform_model_weight(model, uform_media_info(kind)->weight, 0), scratch->hidden, values, rows,
                         x + c * d, d, scratch);
        uform_add_bias_(x + c * d, rows, uform_model_weight(model, uform_media_info(kind)->bias, 0)->f32, d);
        c = last;
    }
}

size_t uform_frontend_count(uform_cells_t const *cells, size_t count, uform_cell_kind_t kind) {
    size_t found = 0;
    for (size_t c = 0; c < count; ++c) found += cells->kinds[c] == kind;
    return found;
}

void uform_frontend_gather(uform_cells_t const *cells, size_t count, uform_cell_kind_t kind, float *rows) {
    size_t values = uform_media_info(kind)->values;
    for (size_t c = 0, gathered = 0; c < count; ++c)
        if (cells->kinds[c] == kind) uform_media_row_(cells->media, kind, cells->values[c], rows + gathered++ * values);
}

void uform_frontend_train_forward(uform_model_t const *model, uform_cells_t const *cells, size_t count,
                                  uform_frontend_trainer_t const *trainer, float *x) {
    size_t d = model->config.width, gathered[uform_media_kinds_k] = {0};
    for (size_t c = 0; c < count;) {
        uform_cell_kind_t kind = (uform_cell_kind_t)cells->kinds[c];
        if (kind == uform_cell_byte_k) {
            uform_f32_from_bf16_array(model->embed->bf16 + (size_t)cells->values[c] * d, x + c * d, d);
            c++;
            continue;
        }
        size_t media = kind - uform_cell_image_k, values = uform_media_info(kind)->values;
        size_t last = uform_kind_run_(cells, c, count), rows = last - c;
        float const *inputs = trainer->media[media] + gathered[media] * values;
        trainer->gemm(trainer->context, 0, 1, rows, d, values, inputs, values, trainer->weights[media], values, 0.0f, x + c * d, d);
        uform_add_bias_(x + c * d, rows, trainer->biases[media], d);
        gathered[media] += rows, c = last;
    }
}

void uform_frontend_train_backward(uform_model_t const *model, uform_cells_t const *cells, size_t count, float const *d_x,
                                   uform_frontend_trainer_t const *trainer) {
    size_t d = model->config.width, gathered[uform_media_kinds_k] = {0};
    for (size_t c = 0; c < count;) { /* in cell order, so that a byte's sum is the same every run */
        float const *dy = d_x + c * d;
        uform_cell_kind_t kind = (uform_cell_kind_t)cells->kinds[c];
        if (kind == uform_cell_byte_k) {
            float *row = trainer->d_bytes + (size_t)cells->values[c] * d;
            for (size_t i = 0; i < d; ++i) row[i] += dy[i];
            c++;
            continue;
        }
        size_t media = kind - uform_cell_image_k, values = uform_media_info(kind)->values;
        size_t last = uform_kind_run_(cells, c, count), rows = last - c;
        /* d weight [d, values] += dY^T P; d bias += the rows of dY. */
        trainer->gemm(trainer->context, 1, 0, d, values, rows, dy, d, trainer->media[media] + gathered[media] * values, values,
                      1.0f, trainer->d_weights[media], values);
        float *d_bias = trainer->d_biases[media];
        for (size_t r = 0; r < rows; ++r)
            for (size_t i = 0; i < d; ++i) d_bias[i] += dy[r * d + i];
        gathered[media] += rows, c = last;
    }
}
