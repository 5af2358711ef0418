/*  kernels_widen.h: the BF16 kernel table for CPUs with Float32 FMA but no BF16 dot product, written
 *  once over a vector of UFORM_LANES floats and included by kernels_avx2.c (8 lanes),
 *  kernels_avx512f.c (16 lanes) and kernels_neon.c (4 lanes), each compiled for its own ISA. BF16 values are widened to Float32
 *  (a shift or a mask of the packed pair) and multiplied with FMA: a BF16 x BF16 product is exact
 *  in Float32, so each step rounds once, as VDPBF16PS's accumulation does.
 *
 *  The including file defines, before including this header:
 *    uform_v_t, UFORM_LANES, UFORM_TILE_ROWS_MOST, UFORM_TILE_PANELS_MOST, UFORM_WIDEN_TABLE, UFORM_WIDEN_NAME,
 *    UFORM_WIDEN_E4M3 (the table's widen_e4m3), UFORM_WIDEN_INT8 (its quantize_int8 and gemm_int8)
 *    uform_v_zero, uform_v_set1, uform_v_load, uform_v_store, uform_v_add, uform_v_sub, uform_v_mul,
 *    uform_v_div, uform_v_max, uform_v_min, uform_v_fma (a * b + c), uform_v_fnma (c - a * b),
 *    uform_v_e4m3 (to the nearest E4M3 value, ties to even, saturated at 448),
 *    uform_v_round (to nearest integer), uform_v_split (x - round(x), exactly, and round(x)),
 *    uform_v_scale (p * 2^n, n integral; 2^n a normal float unless UFORM_V_SCALE_ANY is defined, with
 *    subnormals flushed by MXCSR),
 *    uform_v_sum, uform_v_largest (horizontal), uform_v_even and uform_v_odd (the first and second BF16
 *    of each packed 32-bit pair of the UFORM_LANES pairs at a pointer, widened), uform_v_store_bf16
 *    (UFORM_LANES values rounded to nearest even, NaN kept quiet), and optionally uform_v_store_bf16_two
 *    (two vectors' worth, the first at `target`; UFORM_V_STORE_BF16_TWO defined where it is one step). */
#ifndef UFORM_CPU_KERNELS_WIDEN_H
#define UFORM_CPU_KERNELS_WIDEN_H

#include <math.h>
#include <string.h>

#include "core/numeric.h"
#include "cpu/kernels.h"

#if !defined(UFORM_V_STORE_BF16_TWO)
static inline void uform_v_store_bf16_two(uint16_t *target, uform_v_t first, uform_v_t second) {
    uform_v_store_bf16(target, first);
    uform_v_store_bf16(target + UFORM_LANES, second);
}
#endif

/* Vectors per panel of 16 B rows, and pairs of A widened at a time (a stack buffer, no allocation). */
enum { uform_panel_vectors_k = 16 / UFORM_LANES, uform_widen_pairs_k = 128 };

#define UFORM_WIDEN_TILE(ROWS, PANELS)                                                                              \
    static void uform_tile_##ROWS##_##PANELS##_(uint16_t const *a, size_t a_stride, uint16_t const *b,             \
                                                size_t pairs, float *c, size_t c_stride, size_t last) {            \
        uform_v_t sums[ROWS][PANELS * uform_panel_vectors_k];                                                       \
        float widened[ROWS][2 * uform_widen_pairs_k];                                                               \
        for (int r = 0; r < ROWS; ++r)                                                                              \
            for (int v = 0; v < PANELS * uform_panel_vectors_k; ++v) sums[r][v] = uform_v_zero();                   \
        size_t used = UFORM_PAIRS_USED(pairs);                                                                      \
        for (size_t start = 0; start < used; start += uform_widen_pairs_k) {                                        \
            size_t count = used - start < uform_widen_pairs_k ? used - start : uform_widen_pairs_k;                 \
            for (int r = 0; r < ROWS; ++r)                                                                          \
                for (size_t j = 0; j < 2 * count; ++j) widened[r][j] = uform_bf16_to_f32(a[r * a_stride + 2 * start + j]); \
            for (size_t pair = 0; pair < count; ++pair) {                                                           \
                uform_v_t even[PANELS * uform_panel_vectors_k], odd[PANELS * uform_panel_vectors_k];                \
                for (int v = 0; v < PANELS * uform_panel_vectors_k; ++v) {                                          \
                    uint16_t const *column = b + ((size_t)(v / uform_panel_vectors_k) * pairs + start + pair) * 32 + \
                                             (v % uform_panel_vectors_k) * 2 * UFORM_LANES;                         \
                    even[v] = uform_v_even(column), odd[v] = uform_v_odd(column);                                   \
                }                                                                                                   \
                for (int r = 0; r < ROWS; ++r) {                                                                    \
                    uform_v_t first = uform_v_set1(widened[r][2 * pair]);                                           \
                    uform_v_t second = uform_v_set1(widened[r][2 * pair + 1]);                                      \
                    for (int v = 0; v < PANELS * uform_panel_vectors_k; ++v)                                        \
                        sums[r][v] = uform_v_fma(second, odd[v], uform_v_fma(first, even[v], sums[r][v]));          \
                }                                                                                                   \
            }                                                                                                       \
        }                                                                                                           \
        uform_tile_store_(&sums[0][0], ROWS, PANELS, c, c_stride, last);                                            \
    }

/* Writes a tile's sums; the last panel holds `last` (1..16) columns of C. */
static inline void uform_tile_store_(uform_v_t const *sums, int rows, int panels, float *c, size_t c_stride,
                                     size_t last) {
    size_t vectors = (size_t)panels * uform_panel_vectors_k, columns = (size_t)(panels - 1) * 16 + last;
    for (int r = 0; r < rows; ++r)
        for (size_t v = 0; v < vectors; ++v) {
            float *target = c + r * c_stride + v * UFORM_LANES;
            if ((v + 1) * UFORM_LANES <= columns) {
                uform_v_store(target, sums[r * vectors + v]);
            } else if (v * UFORM_LANES < columns) {
                float spill[UFORM_LANES];
                uform_v_store(spill, sums[r * vectors + v]);
                memcpy(target, spill, (columns - v * UFORM_LANES) * sizeof(float));
            }
        }
}

typedef void (*uform_tile_t)(uint16_t const *, size_t, uint16_t const *, size_t, float *, size_t, size_t);

/* exp(x) for x in [-87, 88]: x = n ln2 + r, |r| <= ln2 / 2, a degree-6 Taylor polynomial, then 2^n
 * (the same steps as kernels_avx512.c's). */
static inline uform_v_t uform_v_exp_(uform_v_t x) {
    x = uform_v_min(uform_v_max(x, uform_v_set1(-87.0f)), uform_v_set1(88.0f));
    uform_v_t n = uform_v_round(uform_v_mul(x, uform_v_set1(1.44269504088896341f)));
    uform_v_t r = uform_v_fnma(n, uform_v_set1(0.693145751953125f), x);
    r = uform_v_fnma(n, uform_v_set1(1.428606765330187045e-06f), r);
    uform_v_t p = uform_v_set1(1.0f / 720.0f);
    p = uform_v_fma(p, r, uform_v_set1(1.0f / 120.0f));
    p = uform_v_fma(p, r, uform_v_set1(1.0f / 24.0f));
    p = uform_v_fma(p, r, uform_v_set1(1.0f / 6.0f));
    p = uform_v_fma(p, r, uform_v_set1(0.5f));
    p = uform_v_fma(p, r, uform_v_set1(1.0f));
    p = uform_v_fma(p, r, uform_v_set1(1.0f));
    return uform_v_scale(p, n);
}

/* Loads `count` (< UFORM_LANES) floats, the rest `fill`. */
static inline uform_v_t uform_v_load_part_(float const *source, size_t count, float fill) {
    float part[UFORM_LANES];
    for (size_t i = 0; i < UFORM_LANES; ++i) part[i] = i < count ? source[i] : fill;
    return uform_v_load(part);
}

/* Stores the first `count` (< UFORM_LANES) lanes as BF16. */
static inline void uform_v_store_bf16_part_(uint16_t *target, uform_v_t value, size_t count) {
    uint16_t part[UFORM_LANES];
    uform_v_store_bf16(part, value);
    memcpy(target, part, count * sizeof(uint16_t));
}

static void uform_round_bf16_widen_(float const *source, uint16_t *target, size_t count) {
    size_t i = 0;
    for (; i + UFORM_LANES <= count; i += UFORM_LANES) uform_v_store_bf16(target + i, uform_v_load(source + i));
    if (i < count) uform_v_store_bf16_part_(target + i, uform_v_load_part_(source + i, count - i, 0.0f), count - i);
}

/* 2^t for softmax's exponents in base 2 (t <= 0): n = round(t), then 2^(t - n) by a degree-5
 * polynomial fitted for relative error on [-1/2, 1/2] (at most 3.3e-7 in Float32 arithmetic, far under
 * BF16's 2^-9), scaled by 2^n. Where the scaling builds 2^n in the exponent field, t is clamped at
 * -126; where it takes any n (UFORM_V_SCALE_ANY), the softmax runs with subnormals flushed instead. */
static inline uform_v_t uform_v_exp2_nonpositive_(uform_v_t t) {
#if !defined(UFORM_V_SCALE_ANY)
    t = uform_v_max(t, uform_v_set1(-126.0f));
#endif
    uform_v_t n, f = uform_v_split(t, &n);
    uform_v_t p = uform_v_set1(1.2943458277732134e-3f);
    p = uform_v_fma(p, f, uform_v_set1(9.669600054621696e-3f));
    p = uform_v_fma(p, f, uform_v_set1(5.551628768444061e-2f));
    p = uform_v_fma(p, f, uform_v_set1(2.4022245407104492e-1f));
    p = uform_v_fma(p, f, uform_v_set1(6.931464672088623e-1f));
    p = uform_v_fma(p, f, uform_v_set1(1.0f));
    return uform_v_scale(p, n);
}

/* Four maxima and two sums in flight: each loop is otherwise one chain of dependent vector operations. */
static void uform_softmax_bf16_widen_(float const *scores, size_t rows, size_t columns, size_t stride, float scale,
                                      uint16_t *probabilities, size_t probabilities_stride, float *sums) {
    float const log2_e = 1.44269504088896341f;
#if defined(UFORM_V_SCALE_ANY)
    /* A subnormal e (t < -126) would cost a microcode assist each: flushed to zero, within the bound. */
    unsigned int control = _mm_getcsr();
    _mm_setcsr(control | 0x8040); /* FTZ | DAZ */
#endif
    for (size_t r = 0; r < rows; ++r) {
        float const *row = scores + r * stride;
        uint16_t *target = probabilities + r * probabilities_stride;
        size_t whole = columns - columns % UFORM_LANES, tail = columns - whole, j = 0;
        uform_v_t largest[4] = {uform_v_set1(-INFINITY), uform_v_set1(-INFINITY), uform_v_set1(-INFINITY),
                                uform_v_set1(-INFINITY)};
        for (; j + 4 * UFORM_LANES <= whole; j += 4 * UFORM_LANES)
            for (int i = 0; i < 4; ++i) largest[i] = uform_v_max(largest[i], uform_v_load(row + j + i * UFORM_LANES));
        for (; j < whole; j += UFORM_LANES) largest[0] = uform_v_max(largest[0], uform_v_load(row + j));
        if (tail) largest[0] = uform_v_max(largest[0], uform_v_load_part_(row + whole, tail, -INFINITY));
        float top = uform_v_largest(uform_v_max(uform_v_max(largest[0], largest[1]), uform_v_max(largest[2], largest[3])));
        uform_v_t factor = uform_v_set1(scale * log2_e), offset = uform_v_set1(-top * (scale * log2_e));
        uform_v_t total[2] = {uform_v_zero(), uform_v_zero()};
        for (j = 0; j + 2 * UFORM_LANES <= whole; j += 2 * UFORM_LANES) {
            uform_v_t e[2];
            for (int i = 0; i < 2; ++i) {
                e[i] = uform_v_exp2_nonpositive_(uform_v_fma(uform_v_load(row + j + i * UFORM_LANES), factor, offset));
                total[i] = uform_v_add(total[i], e[i]);
            }
            uform_v_store_bf16_two(target + j, e[0], e[1]);
        }
        for (; j < whole; j += UFORM_LANES) {
            uform_v_t e = uform_v_exp2_nonpositive_(uform_v_fma(uform_v_load(row + j), factor, offset));
            total[0] = uform_v_add(total[0], e);
            uform_v_store_bf16(target + j, e);
        }
        if (tail) {
            float e[UFORM_LANES];
            uform_v_store(e, uform_v_exp2_nonpositive_(uform_v_fma(uform_v_load_part_(row + whole, tail, top), factor, offset)));
            uform_v_t kept = uform_v_load_part_(e, tail, 0.0f);  /* the padding lanes add nothing */
            total[0] = uform_v_add(total[0], kept);
            uform_v_store_bf16_part_(target + whole, kept, tail);
        }
        if (columns % 2) target[columns] = 0;
        sums[r] = uform_v_sum(uform_v_add(total[0], total[1]));
    }
#if defined(UFORM_V_SCALE_ANY)
    _mm_setcsr(control);
#endif
}

/* uform_rmsnorm (ops.c) bit for bit: its eight partial sums of squares in double are lane i % 8 of one
 * vector of 8 doubles (two with AVX2; a square of a Float32 is exact in double, so the fused add
 * rounds as its add does), summed in its order; y = x scale gain in Float32 as there. */
static float uform_rmsnorm_widen_(float const *x, float const *gain, float *y, size_t width) {
    double partial[8];
    size_t i = 0;
#if UFORM_LANES == 16
    __m512d sums = _mm512_setzero_pd();
    for (; i + 8 <= width; i += 8) {
        __m512d v = _mm512_cvtps_pd(_mm256_loadu_ps(x + i));
        sums = _mm512_fmadd_pd(v, v, sums);
    }
    _mm512_storeu_pd(partial, sums);
#elif UFORM_LANES == 8
    __m256d low = _mm256_setzero_pd(), high = _mm256_setzero_pd();
    for (; i + 8 <= width; i += 8) {
        __m256d first = _mm256_cvtps_pd(_mm_loadu_ps(x + i)), second = _mm256_cvtps_pd(_mm_loadu_ps(x + i + 4));
        low = _mm256_fmadd_pd(first, first, low), high = _mm256_fmadd_pd(second, second, high);
    }
    _mm256_storeu_pd(partial, low), _mm256_storeu_pd(partial + 4, high);
#else /* NEON: four vectors of two doubles */
    float64x2_t sums[4] = {vdupq_n_f64(0), vdupq_n_f64(0), vdupq_n_f64(0), vdupq_n_f64(0)};
    for (; i + 8 <= width; i += 8)
        for (int half = 0; half < 2; ++half) {
            float32x4_t v = vld1q_f32(x + i + 4 * half);
            float64x2_t first = vcvt_f64_f32(vget_low_f32(v)), second = vcvt_high_f64_f32(v);
            sums[2 * half] = vfmaq_f64(sums[2 * half], first, first);
            sums[2 * half + 1] = vfmaq_f64(sums[2 * half + 1], second, second);
        }
    for (int v = 0; v < 4; ++v) vst1q_f64(partial + 2 * v, sums[v]);
#endif
    for (; i < width; ++i) partial[0] += (double)x[i] * x[i];
    double squares = 0;
    for (size_t lane = 0; lane < 8; ++lane) squares += partial[lane];
    float scale = (float)(1.0 / sqrt(squares / (double)width + 1e-6));
    uform_v_t factor = uform_v_set1(scale);
    for (i = 0; i + UFORM_LANES <= width; i += UFORM_LANES)
        uform_v_store(y + i, uform_v_mul(uform_v_mul(uform_v_load(x + i), factor), uform_v_load(gain + i)));
    for (; i < width; ++i) y[i] = x[i] * scale * gain[i];
    return scale;
}

/* silu(gate) * up of the `count` (at most UFORM_LANES) values at i. */
static inline uform_v_t uform_swiglu_v_(float const *gate, float const *up, size_t count) {
    uform_v_t g = count == UFORM_LANES ? uform_v_load(gate) : uform_v_load_part_(gate, count, 0.0f);
    uform_v_t u = count == UFORM_LANES ? uform_v_load(up) : uform_v_load_part_(up, count, 0.0f);
    uform_v_t e = uform_v_exp_(uform_v_sub(uform_v_zero(), g));
    return uform_v_mul(uform_v_div(g, uform_v_add(uform_v_set1(1.0f), e)), u);
}

static void uform_swiglu_bf16_widen_(float const *gate_up, size_t rows, size_t width, uint16_t *hidden) {
    for (size_t r = 0; r < rows; ++r) {
        float const *gate = gate_up + r * 2 * width, *up = gate + width;
        uint16_t *target = hidden + r * width;
        for (size_t i = 0; i < width; i += UFORM_LANES) {
            size_t count = width - i < UFORM_LANES ? width - i : UFORM_LANES;
            uform_v_t value = uform_swiglu_v_(gate + i, up + i, count);
            if (count == UFORM_LANES) uform_v_store_bf16(target + i, value);
            else uform_v_store_bf16_part_(target + i, value, count);
        }
    }
}

static void uform_swiglu_f32_widen_(float const *gate_up, size_t rows, size_t width, float *hidden) {
    for (size_t r = 0; r < rows; ++r) {
        float const *gate = gate_up + r * 2 * width, *up = gate + width;
        float *target = hidden + r * width;
        for (size_t i = 0; i < width; i += UFORM_LANES) {
            size_t count = width - i < UFORM_LANES ? width - i : UFORM_LANES;
            uform_v_t value = uform_swiglu_v_(gate + i, up + i, count);
            if (count == UFORM_LANES) {
                uform_v_store(target + i, value);
            } else {
                float spill[UFORM_LANES];
                uform_v_store(spill, value);
                memcpy(target + i, spill, count * sizeof(float));
            }
        }
    }
}

static float uform_quantize_e4m3_widen_(float const *source, size_t count, uint16_t *target) {
    size_t whole = count - count % UFORM_LANES, tail = count - whole;
    uform_v_t largest = uform_v_zero();
    for (size_t i = 0; i < whole; i += UFORM_LANES) {
        uform_v_t x = uform_v_load(source + i);
        largest = uform_v_max(largest, uform_v_max(x, uform_v_sub(uform_v_zero(), x)));
    }
    if (tail) {
        uform_v_t x = uform_v_load_part_(source + whole, tail, 0.0f);
        largest = uform_v_max(largest, uform_v_max(x, uform_v_sub(uform_v_zero(), x)));
    }
    float most = uform_v_largest(largest);
    float scale = most > 0 ? most / UFORM_E4M3_LARGEST : 1.0f;
    uform_v_t inverse = uform_v_set1(1.0f / scale);
    for (size_t i = 0; i < whole; i += UFORM_LANES)
        uform_v_store_bf16(target + i, uform_v_e4m3(uform_v_mul(uform_v_load(source + i), inverse)));
    if (tail)
        uform_v_store_bf16_part_(target + whole, uform_v_e4m3(uform_v_mul(uform_v_load_part_(source + whole, tail, 0.0f), inverse)), tail);
    return scale;
}

/* The driver over the tiles the including file instantiated, as kernels_avx512.c's. */
#define UFORM_WIDEN_GEMM(TILES)                                                                                     \
    static void uform_gemm_widen_(uint16_t const *a, size_t a_stride, uint16_t const *packed, float *c,           \
                                  size_t c_stride, size_t rows, size_t width, size_t depth) {                      \
        size_t pairs = (depth + 1) / 2, panels = (width + 15) / 16;                                 \
        for (size_t panel = 0; panel < panels; panel += UFORM_TILE_PANELS_MOST) {                                   \
            size_t group = panels - panel < UFORM_TILE_PANELS_MOST ? panels - panel : UFORM_TILE_PANELS_MOST;       \
            size_t valid = width - (panel + group - 1) * 16;                                                        \
            size_t last = valid >= 16 ? 16 : valid;                                                                 \
            for (size_t row = 0; row < rows; row += UFORM_TILE_ROWS_MOST) {                                         \
                size_t count = rows - row < UFORM_TILE_ROWS_MOST ? rows - row : UFORM_TILE_ROWS_MOST;               \
                TILES[count - 1][group - 1](a + row * a_stride, a_stride, packed + panel * pairs * 32, pairs,       \
                                            c + row * c_stride + panel * 16, c_stride, last);                       \
            }                                                                                                       \
        }                                                                                                           \
    }                                                                                                               \
    uform_kernels_t const UFORM_WIDEN_TABLE = {UFORM_WIDEN_NAME, uform_gemm_widen_, uform_softmax_bf16_widen_,      \
                                               uform_swiglu_bf16_widen_, uform_round_bf16_widen_,               \
                                               UFORM_WIDEN_E4M3, uform_quantize_e4m3_widen_,                    \
                                               uform_swiglu_f32_widen_, UFORM_WIDEN_INT8, uform_rmsnorm_widen_};

#endif
