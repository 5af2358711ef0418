/*  kernels_avx512f.c: BF16 kernels for CPUs with AVX-512F but no AVX512-BF16 (Skylake-SP to Ice Lake,
 *  Zen 4 takes kernels_avx512.c): kernels_widen.h over 16-lane vectors, one vector per panel, tiles
 *  of up to 6 rows of A against 3 panels of B (18 accumulators, 6 widened B vectors); the int8 product
 *  by VPMADDWD on both sides widened to int16, 6 rows against 2 panels. AVX-512 F and BW instructions
 *  only; compiled with -mavx512f -mavx512bw -mfma and only called after a CPU check (kernels.c). */
#define UFORM_TILE_ROWS_MOST 6
#define UFORM_TILE_PANELS_MOST 3
#if !defined(UFORM_WIDEN_TABLE) /* kernels_avx512vnni.c names its own table over these kernels */
#define UFORM_WIDEN_TABLE uform_kernels_avx512f
#define UFORM_WIDEN_NAME "avx512f"
/* AVX2's input quantization, and 512-bit VPMADDWD (AVX512-BW, which every AVX-512 CPU but Xeon Phi has). */
#define UFORM_WIDEN_INT8 uform_quantize_int8_avx2, uform_gemm_int8_avx512bw_
#define UFORM_AVX512F_INT8
#include <stddef.h>
#include <stdint.h>
static void uform_gemm_int8_avx512bw_(uint8_t const *a, size_t a_stride, int8_t const *packed, int32_t const *corrections,
                                      float const *row_scales, float const *scales, float *c, size_t c_stride, size_t rows,
                                      size_t width, size_t depth);
#endif
#define UFORM_WIDEN_E4M3 uform_widen_e4m3_avx2

#include "cpu/kernels_avx512_vector.h"
#include "cpu/kernels_widen.h"

#define UFORM_WIDEN_TILE_ROW(R) UFORM_WIDEN_TILE(R, 1) UFORM_WIDEN_TILE(R, 2) UFORM_WIDEN_TILE(R, 3)
UFORM_WIDEN_TILE_ROW(1)
UFORM_WIDEN_TILE_ROW(2)
UFORM_WIDEN_TILE_ROW(3)
UFORM_WIDEN_TILE_ROW(4)
UFORM_WIDEN_TILE_ROW(5)
UFORM_WIDEN_TILE_ROW(6)
#define UFORM_WIDEN_TILE_ENTRY(R) {uform_tile_##R##_1_, uform_tile_##R##_2_, uform_tile_##R##_3_}
static uform_tile_t const uform_tiles_[UFORM_TILE_ROWS_MOST][UFORM_TILE_PANELS_MOST] = {
    UFORM_WIDEN_TILE_ENTRY(1), UFORM_WIDEN_TILE_ENTRY(2), UFORM_WIDEN_TILE_ENTRY(3),
    UFORM_WIDEN_TILE_ENTRY(4), UFORM_WIDEN_TILE_ENTRY(5), UFORM_WIDEN_TILE_ENTRY(6)};
UFORM_WIDEN_GEMM(uform_tiles_)

#if defined(UFORM_AVX512F_INT8)
/* ---- The int8 product, as kernels_avx2.c's over 512-bit vectors: both sides widened to int16 on the
 * stack a chunk of the depth at a time (B's chunk of two panels once for every row of A, A's rows once a
 * tile), then VPMADDWD and VPADDD alone; 6 rows x 2 panels, 24 accumulators, each a pair of partial
 * sums for 8 columns; between chunks a tile's int32 sums wait in C's cells. Every loop over the
 * accumulators is unrolled by request: left as a loop, the compiler keeps them in memory throughout. ---- */
enum { uform_bw_rows_k = 6, uform_bw_panels_k = 2, uform_bw_quads_k = 128 };

/* Widens `bytes` (a multiple of 4) codes to int16, 32 at a time where whole, then a quad at a time. */
static inline void uform_bw_widen_(uint8_t const *source, size_t bytes, int16_t *target) {
    size_t i = 0;
    for (; i + 32 <= bytes; i += 32)
        _mm512_storeu_si512(target + i, _mm512_cvtepu8_epi16(_mm256_loadu_si256((__m256i const *)(source + i))));
    for (; i < bytes; i += 4) {
        uint32_t four;
        memcpy(&four, source + i, sizeof(four));
        _mm_storel_epi64((__m128i *)(target + i), _mm_cvtepu8_epi16(_mm_cvtsi32_si128((int)four)));
    }
}

/* A row's int32 sums of one panel's 16 columns from its two pair-sum vectors, in column order. */
static inline __m512i uform_bw_totals_(__m512i low, __m512i high) {
    __m512i const even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    __m512i const odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    return _mm512_add_epi32(_mm512_permutex2var_epi32(low, even, high), _mm512_permutex2var_epi32(low, odd, high));
}

#define UFORM_BW_TILE(ROWS, PANELS)                                                                                 \
    static void uform_bw_tile_##ROWS##_##PANELS##_(uint8_t const *a, size_t a_stride, int16_t const *w, size_t quads, \
                                                   int resume, int last, int32_t const *corrections,               \
                                                   float const *row_scales, float const *scales, float *c,         \
                                                   size_t c_stride, size_t columns) {                              \
        __m512i sums[ROWS][2 * PANELS];                                                                             \
        int16_t x[ROWS][4 * uform_bw_quads_k];                                                                      \
        _Pragma("GCC unroll 6") for (int r = 0; r < ROWS; ++r) {                                                    \
            uform_bw_widen_(a + r * a_stride, 4 * quads, x[r]);                                                     \
            _Pragma("GCC unroll 4") for (int v = 0; v < 2 * PANELS; ++v) {                                          \
                int32_t part[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                                         \
                size_t first = 8 * (size_t)v;                                                                       \
                if (resume && first < columns)                                                                      \
                    memcpy(part, c + r * c_stride + first, (columns - first < 8 ? columns - first : 8) * sizeof(int32_t)); \
                sums[r][v] = _mm512_cvtepu32_epi64(_mm256_loadu_si256((__m256i const *)part));                      \
            }                                                                                                       \
        }                                                                                                           \
        for (size_t quad = 0; quad < quads; ++quad)                                                                 \
            _Pragma("GCC unroll 4") for (int v = 0; v < 2 * PANELS; ++v) {                                          \
                __m512i weights = _mm512_loadu_si512(w + ((size_t)(v / 2) * quads + quad) * 64 + 32 * (v % 2));     \
                _Pragma("GCC unroll 6") for (int r = 0; r < ROWS; ++r) {                                            \
                    long long pairs;                                                                                \
                    memcpy(&pairs, x[r] + 4 * quad, sizeof(pairs));                                                 \
                    sums[r][v] = _mm512_add_epi32(sums[r][v], _mm512_madd_epi16(_mm512_set1_epi64(pairs), weights)); \
                }                                                                                                   \
            }                                                                                                       \
        _Pragma("GCC unroll 6") for (int r = 0; r < ROWS; ++r)                                                      \
            _Pragma("GCC unroll 2") for (int p = 0; p < PANELS; ++p)                                                \
                uform_bw_finish_(uform_bw_totals_(sums[r][2 * p], sums[r][2 * p + 1]), last, corrections + 16 * p,  \
                                 row_scales[r], scales + 16 * p, c + r * c_stride + 16 * p,                         \
                                 columns > 16 * (size_t)p ? columns - 16 * (size_t)p : 0);                          \
    }

/* One row's 16 (or `columns` < 16) int32 sums of a panel into C: the correction taken back and both
 * scales applied when `last`, else left as they are for the next chunk. */
static inline void uform_bw_finish_(__m512i totals, int last, int32_t const *corrections, float row_scale,
                                    float const *scales, float *target, size_t columns) {
    if (!columns) return;
    __mmask16 lanes = columns >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << columns) - 1);
    if (!last) {
        _mm512_mask_storeu_epi32(target, lanes, totals);
        return;
    }
    __m512i total = _mm512_sub_epi32(totals, _mm512_maskz_loadu_epi32(lanes, corrections));
    __m512 value = _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(total), _mm512_set1_ps(row_scale)),
                                 _mm512_maskz_loadu_ps(lanes, scales));
    _mm512_mask_storeu_ps(target, lanes, value);
}

#define UFORM_BW_TILE_ROW(R) UFORM_BW_TILE(R, 1) UFORM_BW_TILE(R, 2)
UFORM_BW_TILE_ROW(1)
UFORM_BW_TILE_ROW(2)
UFORM_BW_TILE_ROW(3)
UFORM_BW_TILE_ROW(4)
UFORM_BW_TILE_ROW(5)
UFORM_BW_TILE_ROW(6)

typedef void (*uform_bw_tile_t)(uint8_t const *, size_t, int16_t const *, size_t, int, int, int32_t const *, float const *,
                                float const *, float *, size_t, size_t);
#define UFORM_BW_TILE_ENTRY(R) {uform_bw_tile_##R##_1_, uform_bw_tile_##R##_2_}
static uform_bw_tile_t const uform_bw_tiles_[uform_bw_rows_k][uform_bw_panels_k] = {
    UFORM_BW_TILE_ENTRY(1), UFORM_BW_TILE_ENTRY(2), UFORM_BW_TILE_ENTRY(3),
    UFORM_BW_TILE_ENTRY(4), UFORM_BW_TILE_ENTRY(5), UFORM_BW_TILE_ENTRY(6)};

static void uform_gemm_int8_avx512bw_(uint8_t const *a, size_t a_stride, int8_t const *packed, int32_t const *corrections,
                                      float const *row_scales, float const *scales, float *c, size_t c_stride, size_t rows,
                                      size_t width, size_t depth) {
    size_t quads = uform_int8_stride(depth) / 4, panels = (width + 15) / 16;
    int16_t wide[uform_bw_panels_k * 64 * uform_bw_quads_k];
    for (size_t panel = 0; panel < panels; panel += uform_bw_panels_k) {
        size_t group = panels - panel < uform_bw_panels_k ? panels - panel : uform_bw_panels_k;
        size_t first = panel * 16, columns = width - first < 16 * group ? width - first : 16 * group;
        for (size_t start = 0; start < quads; start += uform_bw_quads_k) {
            size_t count = quads - start < uform_bw_quads_k ? quads - start : uform_bw_quads_k;
            for (size_t p = 0; p < group; ++p)
                for (size_t i = 0; i < 64 * count; i += 32)
                    _mm512_storeu_si512(wide + p * 64 * count + i,
                                        _mm512_cvtepi8_epi16(_mm256_loadu_si256(
                                            (__m256i const *)(packed + (panel + p) * quads * 64 + 64 * start + i))));
            for (size_t row = 0; row < rows; row += uform_bw_rows_k) {
                size_t tile = rows - row < uform_bw_rows_k ? rows - row : uform_bw_rows_k;
                uform_bw_tiles_[tile - 1][group - 1](a + row * a_stride + 4 * start, a_stride, wide, count, start > 0,
                                                     start + count == quads, corrections + first, row_scales + row,
                                                     scales + first, c + row * c_stride + first, c_stride, columns);
            }
        }
    }
}
#endif
