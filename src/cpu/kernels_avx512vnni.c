/*  kernels_avx512vnni.c: the int8 product for CPUs with AVX-512 VNNI (Cascade Lake and later, Zen 4):
 *  VPDPBUSD, an outer-product micro-kernel of up to 6 rows of A against up to 64 columns of B, 24
 *  int32 accumulators held in registers, one VPDPBUSD per accumulator per depth quad; the inputs'
 *  quantization over 16 lanes. The amx and avx512bf16 tables take these too. Also the "avx512vnni"
 *  table: these beside the avx512f table's BF16 kernels (kernels_avx512f.c, compiled again here), for
 *  CPUs with VNNI but no AVX512-BF16 (Cascade Lake, Ice Lake), and on Intel, where the FMA kernels are
 *  preferred. Compiled with AVX-512 F, BW, VL and VNNI flags and only called after a CPU check (kernels.c). */
#include <immintrin.h>
#include <string.h>

#include "cpu/kernels.h"

/* Whole blocks of 64 values take four maxima in flight and leave as one 64-byte store (each vector's
 * codes narrowed in registers, + 128 as a flip of the sign bit); the rest a masked vector at a time. */
float uform_quantize_int8_avx512(float const *source, size_t count, uint8_t *target) {
    size_t whole = count - count % 64, i = 0;
    __m512 largest[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (; i < whole; i += 64)
        for (int k = 0; k < 4; ++k) largest[k] = _mm512_max_ps(largest[k], _mm512_abs_ps(_mm512_loadu_ps(source + i + 16 * k)));
    for (; i < count; i += 16) {
        __mmask16 lanes = count - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (count - i)) - 1);
        largest[0] = _mm512_max_ps(largest[0], _mm512_abs_ps(_mm512_maskz_loadu_ps(lanes, source + i)));
    }
    float most = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(largest[0], largest[1]), _mm512_max_ps(largest[2], largest[3])));
    float scale = most > 0 ? most / 127.0f : 1.0f, inverse = 1.0f / scale;
    __m512 const factor = _mm512_set1_ps(inverse);
    __m512i const low = _mm512_set1_epi32(-127), high = _mm512_set1_epi32(127), offset = _mm512_set1_epi32(128);
    for (i = 0; i < whole; i += 64) {
        __m128i codes[4];
        for (int k = 0; k < 4; ++k) {
            __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(source + i + 16 * k), factor)); /* nearest even */
            codes[k] = _mm512_cvtepi32_epi8(_mm512_min_epi32(_mm512_max_epi32(q, low), high));
        }
        __m512i block = _mm512_castsi128_si512(codes[0]);
        block = _mm512_inserti32x4(block, codes[1], 1);
        block = _mm512_inserti32x4(block, codes[2], 2);
        block = _mm512_inserti32x4(block, codes[3], 3);
        _mm512_storeu_si512(target + i, _mm512_xor_si512(block, _mm512_set1_epi8((char)0x80)));
    }
    for (; i < count; i += 16) {
        __mmask16 lanes = count - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (count - i)) - 1);
        __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(lanes, source + i), factor)); /* nearest even */
        q = _mm512_add_epi32(_mm512_min_epi32(_mm512_max_epi32(q, low), high), offset);
        _mm512_mask_cvtepi32_storeu_epi8(target + i, lanes, q);
    }
    for (size_t j = count; j < uform_int8_stride(count); ++j) target[j] = 128;
    return scale;
}

enum { uform_int8_rows_most_k = 6, uform_int8_panels_most_k = 4 };

/* The epilogue's loops are unrolled by request: left as loops over the accumulators, the compiler would
 * keep those in memory through the depth loop too. */
#define UFORM_INT8_TILE(ROWS, PANELS)                                                                               \
    static void uform_int8_tile_##ROWS##_##PANELS##_(uint8_t const *a, size_t a_stride, int8_t const *b,          \
                                                     size_t quads, int32_t const *corrections,                     \
                                                     float const *row_scales, float const *scales, float *c,       \
                                                     size_t c_stride, __mmask16 last) {                            \
        __m512i sums[ROWS][PANELS];                                                                                 \
        for (int r = 0; r < ROWS; ++r)                                                                              \
            for (int p = 0; p < PANELS; ++p) sums[r][p] = _mm512_setzero_si512();                                   \
        for (size_t quad = 0; quad < quads; ++quad) {                                                               \
            __m512i columns[PANELS];                                                                                \
            for (int p = 0; p < PANELS; ++p) columns[p] = _mm512_loadu_si512(b + ((size_t)p * quads + quad) * 64);  \
            for (int r = 0; r < ROWS; ++r) {                                                                        \
                int32_t four;                                                                                       \
                memcpy(&four, a + r * a_stride + 4 * quad, sizeof(four));                                           \
                __m512i row = _mm512_set1_epi32(four);                                                              \
                for (int p = 0; p < PANELS; ++p) sums[r][p] = _mm512_dpbusd_epi32(sums[r][p], row, columns[p]);     \
            }                                                                                                       \
        }                                                                                                           \
        _Pragma("GCC unroll 32") for (int p = 0; p < PANELS; ++p) {                                                 \
            __mmask16 lanes = p == PANELS - 1 ? last : (__mmask16)0xffff; /* nothing read past the width */         \
            __m512i correction = _mm512_maskz_loadu_epi32(lanes, corrections + 16 * p);                             \
            __m512 scale = _mm512_maskz_loadu_ps(lanes, scales + 16 * p);                                           \
            _Pragma("GCC unroll 32") for (int r = 0; r < ROWS; ++r) {                                               \
                __m512 value = _mm512_cvtepi32_ps(_mm512_sub_epi32(sums[r][p], correction));                        \
                value = _mm512_mul_ps(_mm512_mul_ps(value, _mm512_set1_ps(row_scales[r])), scale);                  \
                _mm512_mask_storeu_ps(c + r * c_stride + 16 * p, lanes, value);                                     \
            }                                                                                                       \
        }                                                                                                           \
    }
#define UFORM_INT8_TILE_ROW(R) UFORM_INT8_TILE(R, 1) UFORM_INT8_TILE(R, 2) UFORM_INT8_TILE(R, 3) UFORM_INT8_TILE(R, 4)
UFORM_INT8_TILE_ROW(1)
UFORM_INT8_TILE_ROW(2)
UFORM_INT8_TILE_ROW(3)
UFORM_INT8_TILE_ROW(4)
UFORM_INT8_TILE_ROW(5)
UFORM_INT8_TILE_ROW(6)

typedef void (*uform_int8_tile_t)(uint8_t const *, size_t, int8_t const *, size_t, int32_t const *, float const *,
                                  float const *, float *, size_t, __mmask16);
#define UFORM_INT8_TILE_ENTRY(R) \
    {uform_int8_tile_##R##_1_, uform_int8_tile_##R##_2_, uform_int8_tile_##R##_3_, uform_int8_tile_##R##_4_}
static uform_int8_tile_t const uform_int8_tiles_[uform_int8_rows_most_k][uform_int8_panels_most_k] = {
    UFORM_INT8_TILE_ENTRY(1), UFORM_INT8_TILE_ENTRY(2), UFORM_INT8_TILE_ENTRY(3),
    UFORM_INT8_TILE_ENTRY(4), UFORM_INT8_TILE_ENTRY(5), UFORM_INT8_TILE_ENTRY(6)};

void uform_gemm_int8_avx512vnni(uint8_t const *a, size_t a_stride, int8_t const *packed, int32_t const *corrections,
                                float const *row_scales, float const *scales, float *c, size_t c_stride, size_t rows,
                                size_t width, size_t depth) {
    size_t quads = uform_int8_stride(depth) / 4, panels = (width + 15) / 16;
    for (size_t panel = 0; panel < panels; panel += uform_int8_panels_most_k) {
        size_t group = panels - panel < uform_int8_panels_most_k ? panels - panel : uform_int8_panels_most_k;
        size_t valid = width - (panel + group - 1) * 16; /* columns of the group's last panel */
        __mmask16 last = valid >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << valid) - 1);
        for (size_t row = 0; row < rows; row += uform_int8_rows_most_k) {
            size_t count = rows - row < uform_int8_rows_most_k ? rows - row : uform_int8_rows_most_k;
            uform_int8_tiles_[count - 1][group - 1](a + row * a_stride, a_stride, packed + panel * quads * 64, quads,
                                                    corrections + panel * 16, row_scales + row, scales + panel * 16,
                                                    c + row * c_stride + panel * 16, c_stride, last);
        }
    }
}

/* The avx512vnni table: the avx512f table's BF16 kernels beside these. */
#define UFORM_WIDEN_TABLE uform_kernels_avx512vnni
#define UFORM_WIDEN_NAME "avx512vnni"
#define UFORM_WIDEN_INT8 uform_quantize_int8_avx512, uform_gemm_int8_avx512vnni
#include "cpu/kernels_avx512f.c"
