/*  kernels_avx512.c: BF16 kernels for CPUs with AVX512-BF16 (Zen 4, Cooper Lake, Sapphire Rapids).
 *  The product is an outer-product micro-kernel: up to 6 rows of A against up to 64 columns of B,
 *  24 Float32 accumulators held in registers, one VDPBF16PS per accumulator per depth pair.
 *  Softmax, SwiGLU and rounding are kernels_avx512_elementwise.c's. Compiled with AVX-512 flags and only called after a
 *  CPU check (kernels.c). */
#include <immintrin.h>
#include <string.h>

#include "cpu/kernels.h"

enum { uform_tile_rows_most_k = 6, uform_tile_panels_most_k = 4 };

#define UFORM_TILE(ROWS, PANELS)                                                                                   \
    static void uform_tile_##ROWS##_##PANELS##_(uint16_t const *a, size_t a_stride, uint16_t const *b,            \
                                                size_t pairs, float *c, size_t c_stride, __mmask16 last) {         \
        __m512 sums[ROWS][PANELS];                                                                                 \
        for (int r = 0; r < ROWS; ++r)                                                                             \
            for (int p = 0; p < PANELS; ++p) sums[r][p] = _mm512_setzero_ps();                                     \
        for (size_t pair = 0; pair < UFORM_PAIRS_USED(pairs); ++pair) {                                            \
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

/* Softmax, SwiGLU, rounding and E4M3 inputs: kernels_avx512_elementwise.c's, with the native BF16 store;
 * int8: kernels_avx512vnni.c's. */
uform_kernels_t const uform_kernels_avx512bf16 = {"avx512bf16", uform_gemm_avx512_, uform_softmax_bf16_avx512bf16,
                                                   uform_swiglu_bf16_avx512bf16, uform_round_bf16_avx512bf16,
                                                   uform_widen_e4m3_avx2,
                                                   uform_quantize_e4m3_avx512bf16, uform_swiglu_f32_avx512bf16,
                                                   uform_quantize_int8_avx512, uform_gemm_int8_avx512vnni,
                                                   uform_rmsnorm_avx512bf16};
