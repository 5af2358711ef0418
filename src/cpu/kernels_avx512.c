/*  kernels_avx512.c: BF16 kernels for CPUs with AVX512-BF16 (Zen 4, Cooper Lake, Sapphire Rapids).
 *  The product is an outer-product micro-kernel: up to 6 rows of A against up to 64 columns of B,
 *  24 Float32 accumulators held in registers, one VDPBF16PS per accumulator per depth pair.
 *  Compiled with AVX-512 flags and only called after a CPU check (kernels.c). */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu/kernels.h"

enum { uform_tile_rows_most_k = 6, uform_tile_panels_most_k = 4 };

#define UFORM_TILE(ROWS, PANELS)                                                                                   \
    static void uform_tile_##ROWS##_##PANELS##_(uint16_t const *a, size_t a_stride, uint16_t const *b,            \
                                                size_t pairs, float *c, size_t c_stride, __mmask16 last) {         \
        __m512 sums[ROWS][PANELS];                                                                                 \
        for (int r = 0; r < ROWS; ++r)                                                                             \
            for (int p = 0; p < PANELS; ++p) sums[r][p] = _mm512_setzero_ps();                                     \
        for (size_t pair = 0; pair < pairs; ++pair) {                                                              \
            __m512bh columns[PANELS];                                                                              \
            for (int p = 0; p < PANELS; ++p)                                                                       \
                columns[p] = (__m512bh)_mm512_loadu_si512(b + ((size_t)p * pairs + pair) * 32);                    \
            for (int r = 0; r < ROWS; ++r) {                                                                       \
                uint32_t two;                                                                                      \
                memcpy(&two, a + r * a_stride + 2 * pair, sizeof(two));                                            \
                __m512bh row = (__m512bh)_mm512_set1_epi32((int)two);                                              \
                for (int p = 0; p < PANELS; ++p) sums[r][p] = _mm512_dpbf16_ps(sums[r][p], row, columns[p]);      \
            }                                                                                                      \
        }                                                                                                          \
        for (int r = 0; r < ROWS; ++r)                                                                             \
            for (int p = 0; p < PANELS; ++p) {                                                                     \
                if (p == PANELS - 1) _mm512_mask_storeu_ps(c + r * c_stride + 16 * p, last, sums[r][p]);           \
                else _mm512_storeu_ps(c + r * c_stride + 16 * p, sums[r][p]);                                      \
            }                                                                                                      \
    }

#define UFORM_TILE_ROW(R) UFORM_TILE(R, 1) UFORM_TILE(R, 2) UFORM_TILE(R, 3) UFORM_TILE(R, 4)
UFORM_TILE_ROW(1)
UFORM_TILE_ROW(2)
UFORM_TILE_ROW(3)
UFORM_TILE_ROW(4)
UFORM_TILE_ROW(5)
UFORM_TILE_ROW(6)

typedef void (*uform_tile_t)(uint16_t const *, size_t, uint16_t const *, size_t, float *, size_t, __mmask16);
#define UFORM_TILE_ENTRY(R) {uform_tile_##R##_1_, uform_tile_##R##_2_, uform_tile_##R##_3_, uform_tile_##R##_4_}
static uform_tile_t const uform_tiles_[uform_tile_rows_most_k][uform_tile_panels_most_k] = {
    UFORM_TILE_ENTRY(1), UFORM_TILE_ENTRY(2), UFORM_TILE_ENTRY(3),
    UFORM_TILE_ENTRY(4), UFORM_TILE_ENTRY(5), UFORM_TILE_ENTRY(6)};

static void uform_gemm_avx512_(uint16_t const *a, size_t a_stride, uint16_t const *packed, float *c, size_t c_stride,
                               size_t rows, size_t width, size_t depth) {
    size_t pairs = (depth + 1) / 2, panels = (width + 15) / 16;
    for (size_t panel = 0; panel < panels; panel += uform_tile_panels_most_k) {
        size_t group = panels - panel < uform_tile_panels_most_k ? panels - panel : uform_tile_panels_most_k;
        size_t valid = width - (panel + group - 1) * 16; /* columns of the group's last panel */
        __mmask16 last = valid >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << valid) - 1);
        for (size_t row = 0; row < rows; row += uform_tile_rows_most_k) {
            size_t count = rows - row < uform_tile_rows_most_k ? rows - row : uform_tile_rows_most_k;
            uform_tiles_[count - 1][group - 1](a + row * a_stride, a_stride, packed + panel * pairs * 32, pairs,
                                               c + row * c_stride + panel * 16, c_stride, last);
        }
    }
}

/* exp(x) for x in [-87, 88]: x = n ln2 + r, |r| <= ln2 / 2, a degree-6 Taylor polynomial, then 2^n. */
static inline __m512 uform_exp_avx512_(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.0f)), _mm512_set1_ps(88.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-06f), r);
    __m512 p = _mm512_set1_ps(1.0f / 720.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

static void uform_round_bf16_avx512_(float const *source, uint16_t *target, size_t count) {
    size_t i = 0;
    for (; i + 16 <= count; i += 16)
        _mm256_storeu_si256((__m256i *)(target + i), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(source + i)));
    if (i < count) {
        __mmask16 mask = (__mmask16)((1u << (count - i)) - 1);
        __m256i rounded = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mask, source + i));
        _mm256_mask_storeu_epi16(target + i, mask, rounded);
    }
}

static void uform_softmax_bf16_avx512_(float const *scores, size_t rows, size_t columns, size_t stride, float scale,
                                       uint16_t *probabilities, size_t probabilities_stride, float *sums) {
    for (size_t r = 0; r < rows; ++r) {
        float const *row = scores + r * stride;
        uint16_t *target = probabilities + r * probabilities_stride;
        __m512 largest = _mm512_set1_ps(-INFINITY);
        size_t j = 0;
        for (; j + 16 <= columns; j += 16) largest = _mm512_max_ps(largest, _mm512_loadu_ps(row + j));
        __mmask16 tail = (__mmask16)((1u << (columns - j)) - 1);
        if (tail) largest = _mm512_max_ps(largest, _mm512_mask_loadu_ps(largest, tail, row + j));
        __m512 offset = _mm512_set1_ps(-_mm512_reduce_max_ps(largest) * scale), factor = _mm512_set1_ps(scale);
        __m512 total = _mm512_setzero_ps();
        for (j = 0; j + 16 <= columns; j += 16) {
            __m512 e = uform_exp_avx512_(_mm512_fmadd_ps(_mm512_loadu_ps(row + j), factor, offset));
            total = _mm512_add_ps(total, e);
            _mm256_storeu_si256((__m256i *)(target + j), (__m256i)_mm512_cvtneps_pbh(e));
        }
        if (tail) {
            __m512 e = uform_exp_avx512_(_mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, row + j), factor, offset));
            e = _mm512_maskz_mov_ps(tail, e);
            total = _mm512_add_ps(total, e);
            _mm256_mask_storeu_epi16(target + j, tail, (__m256i)_mm512_cvtneps_pbh(e));
        }
        if (columns % 2) target[columns] = 0;
        sums[r] = _mm512_reduce_add_ps(total);
    }
}

static void uform_swiglu_bf16_avx512_(float const *gate_up, size_t rows, size_t width, uint16_t *hidden) {
    __m512 one = _mm512_set1_ps(1.0f);
    for (size_t r = 0; r < rows; ++r) {
        float const *gate = gate_up + r * 2 * width, *up = gate + width;
        uint16_t *target = hidden + r * width;
        for (size_t i = 0; i < width; i += 16) {
            __mmask16 mask = width - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (width - i)) - 1);
            __m512 g = _mm512_maskz_loadu_ps(mask, gate + i), u = _mm512_maskz_loadu_ps(mask, up + i);
            __m512 e = uform_exp_avx512_(_mm512_sub_ps(_mm512_setzero_ps(), g));
            __m512 value = _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), u);
            _mm256_mask_storeu_epi16(target + i, mask, (__m256i)_mm512_cvtneps_pbh(value));
        }
    }
}

uform_kernels_t const uform_kernels_avx512bf16 = {"avx512bf16", uform_gemm_avx512_, uform_softmax_bf16_avx512_,
                                                   uform_swiglu_bf16_avx512_, uform_round_bf16_avx512_};
