/*  frontend.c: the CPU's frontend stage (frontend.h). */
#include "cpu/frontend.h"

#include "core/numeric.h"
#include "cpu/forward.h"

/* Widens media row `row` of `media` (`width` values) into `out`. */
static void uform_media_row_(uform_media_t const *media, size_t row, size_t width, float *out) {
    if (media->dtype == uform_media_bf16_k) uform_f32_from_bf16_array((uint16_t const *)media->data + row * width, out, width);
    else
        for (size_t i = 0; i < width; ++i) out[i] = ((float const *)media->data)[row * width + i];
}

/* Image row `row`: a 16x16 RGBA patch, channel-last, pixels row by row. */
static void uform_patch_row_(uform_media_t const *images, size_t row, float *out) {
    uform_media_row_(images, row, uform_patch_values_k, out);
#if defined(UFORM_PLANT_PATCH_TRANSPOSED)
    for (size_t y = 0; y < 16; ++y) /* planted: the patch's pixels read column by column */
        for (size_t x = y + 1; x < 16; ++x)
            for (size_t channel = 0; channel < 4; ++channel) {
                float swap = out[(y * 16 + x) * 4 + channel];
                out[(y * 16 + x) * 4 + channel] = out[(x * 16 + y) * 4 + channel];
                out[(x * 16 + y) * 4 + channel] = swap;
            }
#endif
}

/* The end of the run of image cells that starts at `first`, within [first, end). */
static size_t uform_image_run_(uform_cells_t const *cells, size_t first, size_t end) {
    while (first < end && cells->kinds[first] == uform_cell_image_k) first++;
    return first;
}

static void uform_add_bias_(float *x, size_t rows, float const *bias, size_t d) {
    for (size_t r = 0; r < rows; ++r)
        for (size_t i = 0; i < d; ++i) x[r * d + i] += bias[i];
}

void uform_frontend_forward(uform_model_t const *model, uform_cells_t const *cells, size_t first, size_t count, float *x,
                            uform_scratch_t *scratch) {
    size_t d = model->config.width, end = first + count;
    uform_media_t const *images = &cells->media[uform_cell_image_k - uform_cell_image_k];
    for (size_t c = first; c < end;) {
        if (cells->kinds[c] != uform_cell_image_k) {
            uform_f32_from_bf16_array(model->embed->bf16 + (size_t)cells->values[c] * d, x + c * d, d);
            c++;
            continue;
        }
        size_t last = uform_image_run_(cells, c, end), rows = last - c;
        for (size_t r = 0; r < rows; ++r)
            uform_patch_row_(images, cells->values[c + r], scratch->hidden + r * uform_patch_values_k);
        uform_cpu_linear(model, model->vision_patch, scratch->hidden, uform_patch_values_k, rows, x + c * d, d, scratch);
        uform_add_bias_(x + c * d, rows, model->vision_bias->f32, d);
        c = last;
    }
}

size_t uform_frontend_count(uform_cells_t const *cells, size_t count, uform_cell_kind_t kind) {
    size_t found = 0;
    for (size_t c = 0; c < count; ++c) found += cells->kinds[c] == kind;
    return found;
}

void uform_frontend_gather(uform_cells_t const *cells, size_t count, float *patches) {
    uform_media_t const *images = &cells->media[uform_cell_image_k - uform_cell_image_k];
    for (size_t c = 0, gathered = 0; c < count; ++c)
        if (cells->kinds[c] == uform_cell_image_k)
            uform_patch_row_(images, cells->values[c], patches + gathered++ * uform_patch_values_k);
}

void uform_frontend_train_forward(uform_model_t const *model, uform_cells_t const *cells, size_t count,
                                  uform_frontend_trainer_t const *trainer, float *x) {
    size_t d = model->config.width, gathered = 0;
    for (size_t c = 0; c < count;) {
        if (cells->kinds[c] != uform_cell_image_k) {
            uform_f32_from_bf16_array(model->embed->bf16 + (size_t)cells->values[c] * d, x + c * d, d);
            c++;
            continue;
        }
        size_t last = uform_image_run_(cells, c, count), rows = last - c;
        float const *patches = trainer->patches + gathered * uform_patch_values_k;
        trainer->gemm(trainer->context, 0, 1, rows, d, uform_patch_values_k, patches, uform_patch_values_k,
                      trainer->vision_patch, uform_patch_values_k, 0.0f, x + c * d, d);
        uform_add_bias_(x + c * d, rows, trainer->vision_bias, d);
        gathered += rows, c = last;
    }
}

void uform_frontend_train_backward(uform_model_t const *model, uform_cells_t const *cells, size_t count, float const *d_x,
                                   uform_frontend_trainer_t const *trainer) {
    size_t d = model->config.width, gathered = 0;
    for (size_t c = 0; c < count;) { /* in cell order, so that a byte's sum is the same every run */
        float const *dy = d_x + c * d;
        if (cells->kinds[c] != uform_cell_image_k) {
            float *row = trainer->d_bytes + (size_t)cells->values[c] * d;
            for (size_t i = 0; i < d; ++i) row[i] += dy[i];
            c++;
            continue;
        }
        size_t last = uform_image_run_(cells, c, count), rows = last - c;
        /* d vision.patch [d, 1024] += dY^T P; d vision.bias += the rows of dY. */
        trainer->gemm(trainer->context, 1, 0, d, uform_patch_values_k, rows, dy, d,
                      trainer->patches + gathered * uform_patch_values_k, uform_patch_values_k, 1.0f,
                      trainer->d_vision_patch, uform_patch_values_k);
        for (size_t r = 0; r < rows; ++r)
            for (size_t i = 0; i < d; ++i) trainer->d_vision_bias[i] += dy[r * d + i];
        gathered += rows, c = last;
    }
}
