/*  frontend.c: the CPU's frontend stage (frontend.h). */
#include "cpu/frontend.h"

#include "core/numeric.h"

void uform_frontend_forward(uform_model_t const *model, uint32_t const *values, size_t first, size_t count, float *x) {
    size_t d = model->config.width;
    for (size_t c = first; c < first + count; ++c)
        uform_f32_from_bf16_array(model->embed->bf16 + (size_t)values[c] * d, x + c * d, d);
}

void uform_frontend_backward(uform_model_t const *model, uint32_t const *values, size_t count, float const *d_x,
                             uform_frontend_gradients_t const *gradients) {
    size_t d = model->config.width;
    for (size_t c = 0; c < count; ++c) { /* in cell order, so that a byte's sum is the same every run */
        float *row = gradients->bytes + (size_t)values[c] * d;
        for (size_t i = 0; i < d; ++i) row[i] += d_x[c * d + i];
    }
}
