/*  gemm.h: the Float32 matrix products, through OpenBLAS (single-threaded calls: callers tile
 *  rows over the model's pool). The BF16 products are in kernels.h. */
#ifndef UFORM_CPU_GEMM_H
#define UFORM_CPU_GEMM_H

#include <stddef.h>

/** C [height, width] = A [height, depth] B^T; B is [width, depth]. Strides in elements. */
void uform_gemm_f32_nt(float const *a, size_t a_stride, float const *b, size_t b_stride, float *c, size_t c_stride,
                       size_t height, size_t width, size_t depth);
/** C [height, width] = A [height, depth] B; B is [depth, width]. Strides in elements. */
void uform_gemm_f32_nn(float const *a, size_t a_stride, float const *b, size_t b_stride, float *c, size_t c_stride,
                       size_t height, size_t width, size_t depth);

/** C [m, n] = op(A) op(B) + beta C, op transposing when asked; row-major, strides in elements. */
void uform_gemm_f32(int transpose_a, int transpose_b, size_t m, size_t n, size_t k, float const *a, size_t a_stride,
                    float const *b, size_t b_stride, float beta, float *c, size_t c_stride);

#endif
