/*  gemm.h: the matrix products of the CPU path, C = A B^T, all single-threaded (callers tile rows
 *  over the pool). BF16 products run NumKong's packed kernels picked once for this CPU; Float32
 *  products run OpenBLAS. This is the one place that talks to either library. */
#ifndef UFORM_CPU_GEMM_H
#define UFORM_CPU_GEMM_H

#include <stddef.h>
#include <stdint.h>

/** Name of the BF16 kernel family chosen for this CPU ("genoa", "skylake", "haswell", "serial"). */
char const *uform_gemm_backend(void);
/** Bytes NumKong needs to hold B [width, depth] packed. */
size_t uform_gemm_packed_size(size_t width, size_t depth);
/** Packs B [width, depth] (row stride in elements) for `uform_gemm_bf16`. */
void uform_gemm_pack(uint16_t const *b, size_t width, size_t depth, size_t b_stride, void *packed);
/** C [height, width] = A [height, depth] B^T with BF16 inputs and Float32 accumulation. Strides in elements. */
void uform_gemm_bf16(uint16_t const *a, size_t a_stride, void const *b_packed, float *c, size_t c_stride,
                     size_t height, size_t width, size_t depth);
/** C [height, width] = A [height, depth] B^T in Float32; B is [width, depth]. Strides in elements. */
void uform_gemm_f32_nt(float const *a, size_t a_stride, float const *b, size_t b_stride, float *c, size_t c_stride,
                       size_t height, size_t width, size_t depth);
/** C [height, width] = A [height, depth] B in Float32; B is [depth, width]. Strides in elements. */
void uform_gemm_f32_nn(float const *a, size_t a_stride, float const *b, size_t b_stride, float *c, size_t c_stride,
                       size_t height, size_t width, size_t depth);

#endif
