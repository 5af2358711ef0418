/*  ops.h (internal): the small Float32 operations the inference pass and the trainer share. */
#ifndef UFORM_CPU_OPS_H
#define UFORM_CPU_OPS_H

#include "model/model.h"

/** y = x / sqrt(mean(x^2) + 1e-6) * gain; returns the inverse scale 1 / sqrt(mean(x^2) + 1e-6). */
float uform_rmsnorm(float const *x, float const *gain, float *y, size_t width);
/** Rotates every head of q and k of one cell by its (t, h, w) coordinates (M-RoPE);
 *  `direction` -1 applies the inverse rotation (the backward pass). */
void uform_rope(uform_model_t const *model, int32_t const *position, float *q, float *k, int direction);
/** Softmax of each row, in place. */
void uform_softmax_rows(float *scores, size_t rows, size_t columns, size_t stride);

#endif
