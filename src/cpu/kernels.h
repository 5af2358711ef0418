/*  kernels.h: the CPU kernels behind the BF16 path, in one table chosen once at run time (kernels.c),
 *  the first this CPU runs of: "amx" (TDPBF16PS on AMX tiles, where Linux grants the tile state),
 *  "avx512bf16" (VDPBF16PS), "avx512vnni", "avx512f" and "avx2" (BF16 widened to Float32, FMA;
 *  kernels_widen.h), on AArch64 "neon" (the same over 4 lanes), "generic" (plain C); on Intel
 *  "avx512f" goes ahead of "avx512bf16", which measured slower there. All share one packed layout of
 *  B. Each table also has the int8 precision's product (gemm_int8): TDPBUSD on tiles in amx, VPDPBUSD
 *  in avx512bf16 and avx512vnni, VPMADDWD in avx512f and avx2, SMLAL in neon, plain C in generic; all
 *  exact in int32, so they agree bit for bit. `UFORM_CPU=<name>` in the environment picks a table by
 *  name (one the CPU cannot run is refused with a note on stderr), so tests and benchmarks can run each. */
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
    /** target[i] = the BF16 of E4M3 code source[i], exact (E4M3's values are BF16's); NaN codes not handled. */
    void (*widen_e4m3)(uint8_t const *source, uint16_t *target, size_t count);
    /** An E4M3 product's input row: s = max |source| / 448 (1 for a zero row), target[i] = the BF16 of
     *  E4M3(source[i] * (1 / s)), ties to even, saturated at 448; returns s. */
    float (*quantize_e4m3)(float const *source, size_t count, uint16_t *target);
    /** hidden [rows, width] = silu(gate) * up in Float32 (the E4M3 and int8 precisions' down input). */
    void (*swiglu_f32)(float const *gate_up, size_t rows, size_t width, float *hidden);
    /** An int8 product's input row: s = max |source| / 127 (1 for a zero row), target[i] = 128 +
     *  clamp(round(source[i] * (1 / s)), -127, 127), ties to even, then 128s up to a multiple of 4
     *  (uform_int8_stride); returns s. */
    float (*quantize_int8)(float const *source, size_t count, uint8_t *target);
    /** C [rows, width] = ((float)(sum_j a[r][j] w[i][j] - corrections[i]) * row_scales[r]) * scales[i]:
     *  a's rows the codes of quantize_int8 (value + 128, `a_stride` bytes apart), w and corrections
     *  (128 sum_j w[i][j]) packed by uform_pack_int8, the sum exact in int32. */
    void (*gemm_int8)(uint8_t const *a, size_t a_stride, int8_t const *packed, int32_t const *corrections,
                      float const *row_scales, float const *scales, float *c, size_t c_stride, size_t rows,
                      size_t width, size_t depth);
    /** uform_rmsnorm (cpu/ops.h), bit for bit: y = x / rms(x) * gain, returning the scale. */
    float (*rmsnorm)(float const *x, float const *gain, float *y, size_t width);
} uform_kernels_t;

uform_kernels_t const *uform_kernels(void);
/** The tables in order of preference (amx first; on Intel, avx512vnni and avx512f before avx512bf16), ending with NULL,
 *  whether or not this CPU runs them. */
extern uform_kernels_t const *const uform_kernels_all[];
/** Whether this CPU (and its OS) runs the named table. */
int uform_kernels_runs(char const *name);
/** This CPU's class: its vendor's ISA extensions that matter here, e.g. "x86-64 avx2 fma avx512f
 *  avx512vnni avx512bf16 amx", into `text`. */
void uform_cpu_class(char *text, size_t capacity);

/* The planted control of the test build (UFORM_PLANT_GEMM_LAST_PAIR): every table's product
 * skips the last depth pair. */
#if defined(UFORM_PLANT_GEMM_LAST_PAIR)
#define UFORM_PAIRS_USED(pairs) ((pairs) - ((pairs) > 1))
#else
#define UFORM_PAIRS_USED(pairs) (pairs)
#endif

/** Bytes of B [width, depth] packed: panels of 16 rows of B, depth in pairs. */
size_t uform_packed_size(size_t width, size_t depth);
/** Packs B where element (i, j) is at b[i * width_stride + j * depth_stride], rounding to BF16. */
void uform_pack_f32(float const *b, size_t width, size_t depth, size_t width_stride, size_t depth_stride,
                    uint16_t *packed);
void uform_pack_bf16(uint16_t const *b, size_t width, size_t depth, size_t width_stride, size_t depth_stride,
                     uint16_t *packed);
/** Bytes of B [width, depth] packed as E4M3 codes: the BF16 layout, a byte an element. */
size_t uform_packed_e4m3_size(size_t width, size_t depth);
/** Packs the row-major BF16 B [width, depth] as E4M3 with a Float32 scale per row of B:
 *  scales[i] = max_j |B[i][j]| / 448 (1 for a zero row), codes E4M3(B[i][j] / scales[i]). */
void uform_pack_e4m3(uint16_t const *b, size_t width, size_t depth, float *scales, uint8_t *packed);
/** The same scales and codes row-major: codes [i * depth + j] (the GPU's layout). */
void uform_e4m3_rows(uint16_t const *b, size_t width, size_t depth, float *scales, uint8_t *codes);
/** An int8 row's bytes: depth rounded up to a multiple of 4 (VPDPBUSD's quad). */
static inline size_t uform_int8_stride(size_t depth) { return (depth + 3) / 4 * 4; }
/** The deepest int8 product whose sum stays exact in int32: 255 x 127 x depth < 2^31. */
enum { uform_int8_depth_most_k = 66000 };
/** Bytes of B [width, depth] packed as int8 codes: panels of 16 rows of B, depth in quads (64 bytes a
 *  panel's quad, one VPDPBUSD operand), zeros in the pads. */
size_t uform_packed_int8_size(size_t width, size_t depth);
/** Packs the row-major BF16 B [width, depth] as int8 with a Float32 scale per row of B:
 *  scales[i] = max_j |B[i][j]| / 127 (1 for a zero row), codes clamp(round(B[i][j] / scales[i]),
 *  -127, 127) ties to even (division in Float32), corrections[i] = 128 sum_j codes[i][j]. */
void uform_pack_int8(uint16_t const *b, size_t width, size_t depth, float *scales, int32_t *corrections, int8_t *packed);
/** The nearest integer to x, ties to even, clamped to [-127, 127] (|x| < 2^22; NaN not handled). */
static inline int32_t uform_int8_round(float x) {
    float shifted = x + 12582912.0f; /* 1.5 x 2^23: the sum's last bit is the units, so it rounds there */
    float rounded = shifted - 12582912.0f;
    return rounded > 127.0f ? 127 : rounded < -127.0f ? -127 : (int32_t)rounded;
}
/** The generic table's int8 kernels, and the x86 ones the other tables share. */
float uform_quantize_int8_generic(float const *source, size_t count, uint8_t *target);
void uform_gemm_int8_generic(uint8_t const *a, size_t a_stride, int8_t const *packed, int32_t const *corrections,
                             float const *row_scales, float const *scales, float *c, size_t c_stride, size_t rows,
                             size_t width, size_t depth);
float uform_quantize_int8_avx2(float const *source, size_t count, uint8_t *target);
void uform_gemm_int8_avx2(uint8_t const *a, size_t a_stride, int8_t const *packed, int32_t const *corrections,
                          float const *row_scales, float const *scales, float *c, size_t c_stride, size_t rows,
                          size_t width, size_t depth);
float uform_quantize_int8_avx512(float const *source, size_t count, uint8_t *target);
void uform_gemm_int8_avx512vnni(uint8_t const *a, size_t a_stride, int8_t const *packed, int32_t const *corrections,
                                float const *row_scales, float const *scales, float *c, size_t c_stride, size_t rows,
                                size_t width, size_t depth);

/** The E4M3 widening of the generic table (a table of 256 BF16s) and of the AVX2 and AVX-512 tables. */
void uform_widen_e4m3_generic(uint8_t const *source, uint16_t *target, size_t count);
void uform_widen_e4m3_avx2(uint8_t const *source, uint16_t *target, size_t count);

/* The avx512bf16 and amx tables' elementwise kernels (kernels_avx512_elementwise.c). */
void uform_softmax_bf16_avx512bf16(float const *scores, size_t rows, size_t columns, size_t stride, float scale,
                                   uint16_t *probabilities, size_t probabilities_stride, float *sums);
void uform_swiglu_bf16_avx512bf16(float const *gate_up, size_t rows, size_t width, uint16_t *hidden);
void uform_round_bf16_avx512bf16(float const *source, uint16_t *target, size_t count);
float uform_rmsnorm_avx512bf16(float const *x, float const *gain, float *y, size_t width);
float uform_quantize_e4m3_avx512bf16(float const *source, size_t count, uint16_t *target);
void uform_swiglu_f32_avx512bf16(float const *gate_up, size_t rows, size_t width, float *hidden);

extern uform_kernels_t const uform_kernels_generic;
extern uform_kernels_t const uform_kernels_avx2;
extern uform_kernels_t const uform_kernels_avx512vnni;
extern uform_kernels_t const uform_kernels_avx512f;
extern uform_kernels_t const uform_kernels_avx512bf16;
extern uform_kernels_t const uform_kernels_amx;
extern uform_kernels_t const uform_kernels_neon;
/** Whether Linux granted this process the AMX tile state (asked once; kernels_amx.c). */
int uform_amx_permitted(void);

#endif
