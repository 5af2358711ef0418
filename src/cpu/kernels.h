/*  kernels.h: the CPU kernels behind the BF16 path, in one table chosen once at run time:
 *  "avx512bf16" (VDPBF16PS micro-kernels) where the CPU has AVX512-BF16, else "generic" (plain C).
 *  `UFORM_CPU=generic` in the environment forces the generic table, so tests can check both. */
#ifndef UFORM_CPU_KERNELS_H
#define UFORM_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

typedef struct uform_kernels_t {
    char const *name;
    /** C [rows, width] = A [rows, depth] B^T, B packed by `uform_pack_*`. A's rows hold `depth`
     *  values rounded up to even (a zero in the pad). Strides in elements. */
    void (*gemm)(uint16_t const *a, size_t a_stride, uint16_t const *packed, float *c, size_t c_stride, size_t rows,
                 size_t width, size_t depth);
    /** Per row: e = exp(scale * (s - max s)), written as BF16 into `probabilities` (zero-padded to
     *  even length), with the Float32 sum of e into `sums`. */
    void (*softmax_bf16)(float const *scores, size_t rows, size_t columns, size_t stride, float scale,
                         uint16_t *probabilities, size_t probabilities_stride, float *sums);
    /** hidden [rows, width] = BF16(silu(gate) * up), where gate_up rows are [gate (width), up (width)]. */
    void (*swiglu_bf16)(float const *gate_up, size_t rows, size_t width, uint16_t *hidden);
    /** target[i] = BF16(source[i]), round to nearest even. */
    void (*round_bf16)(float const *source, uint16_t *target, size_t count);
} uform_kernels_t;

uform_kernels_t const *uform_kernels(void);

/** Bytes of B [width, depth] packed: panels of 16 rows of B, depth in pairs. */
size_t uform_packed_size(size_t width, size_t depth);
/** Packs B where element (i, j) is at b[i * width_stride + j * depth_stride], rounding to BF16. */
void uform_pack_f32(float const *b, size_t width, size_t depth, size_t width_stride, size_t depth_stride,
                    uint16_t *packed);
void uform_pack_bf16(uint16_t const *b, size_t width, size_t depth, size_t width_stride, size_t depth_stride,
                     uint16_t *packed);

extern uform_kernels_t const uform_kernels_generic;
extern uform_kernels_t const uform_kernels_avx512bf16;

#endif
