/*  attention_reference.h: the float64 reference of attention within segments and its derived
 *  bounds (attention_reference.c), applied to host copies of a kernel's inputs and outputs. */
#ifndef UFORM_TEST_CUDA_ATTENTION_REFERENCE_H
#define UFORM_TEST_CUDA_ATTENTION_REFERENCE_H

#include <stddef.h>
#include <stdint.h>

/** What a kernel saw and returned: qkv [cells, 3 width] and dO [cells, width] in, O [cells, width],
 *  lse [cells, heads] (natural log) and d_qkv [cells, 3 width] out; heads of 64. */
typedef struct attention_view_t {
    uint16_t const *qkv, *out, *d_out, *d_qkv;
    float const *lse;
    size_t width, heads;
} attention_view_t;

/** Every row and gradient of every segment (`spans`: first cell, length), a row visiting at most
 *  `tiles` key tiles; the worst error / bound of the forward (O, lse) and of the backward (dq, dk,
 *  dv) are raised into the two worsts; `forward_only` skips the backward. */
void attention_check_full(attention_view_t const *a, uint32_t const *spans, size_t segments, double tiles,
                          int forward_only, double *worst_forward, double *worst_backward);
/** `segments` segments of `length` cells each, one after another: 4 sampled query and key rows per
 *  segment and head, and every output finite. Returns the worst error / bound (infinite for a NaN). */
double attention_check_sampled(attention_view_t const *a, size_t segments, size_t length);

#endif
