/*  frontend.h (internal): the frontend stage on the CPU, by cell kind (SPEC.md section 1): cells
 *  into the residual stream and, in training, the stream's gradient into the frontend's tensors.
 *  Bytes are its one case so far (a row of embed.bytes); the media frontends add their cases here
 *  and nowhere else. The fast path (cpu/forward.c) and the Float32 trainer (train/backward.c) both
 *  run it: they read the same BF16 masters, widened exactly. */
#ifndef UFORM_CPU_FRONTEND_H
#define UFORM_CPU_FRONTEND_H

#include "model/model.h"

/** The frontend tensors' Float32 gradients, one pointer a tensor (NULL where not carried). */
typedef struct uform_frontend_gradients_t {
    float *bytes; /* embed.bytes [258, d] */
} uform_frontend_gradients_t;

/** Writes the frontend's vector of cells [first, first + count) into rows first.. of `x` ([cells, d]). */
void uform_frontend_forward(uform_model_t const *model, uint32_t const *values, size_t first, size_t count, float *x);
/** Adds each cell's row of `d_x` ([count, d], dL/dx of the stream entering the first block) into the
 *  gradient of the frontend tensor that made it. */
void uform_frontend_backward(uform_model_t const *model, uint32_t const *values, size_t count, float const *d_x,
                             uform_frontend_gradients_t const *gradients);

#endif
