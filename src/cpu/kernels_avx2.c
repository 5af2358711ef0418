/*  kernels_avx2.c: BF16 kernels for CPUs with AVX2 and FMA but no AVX-512 (Haswell and later, Zen 1-3):
 *  kernels_widen.h over 8-lane vectors, tiles of up to 5 rows of A against one panel of 16 columns of
 *  B (10 accumulators, 4 widened B vectors and 2 broadcasts: the 16 registers). Compiled with -mavx2 -mfma and
 *  only called after a CPU check (kernels.c). Also the E4M3 widening of every x86 table, and the int8
 *  product of the avx2 and avx512f tables (VPMADDWD on widened codes, 3 rows x 16 columns). */
#include <immintrin.h>
#include <stdint.h>

typedef __m256 uform_v_t;
#define UFORM_LANES 8
#define UFORM_TILE_ROWS_MOST 5
#define UFORM_TILE_PANELS_MOST 1
#define UFORM_WIDEN_TABLE uform_kernels_avx2
#define UFORM_WIDEN_NAME "avx2"
#define UFORM_WIDEN_E4M3 uform_widen_e4m3_avx2
#define UFORM_WIDEN_INT8 uform_quantize_int8_avx2, uform_gemm_int8_avx2

static inline __m256 uform_v_zero(void) { return _mm256_setzero_ps(); }
static inline __m256 uform_v_set1(float x) { return _mm256_set1_ps(x); }
static inline __m256 uform_v_load(float const *p) { return _mm256_loadu_ps(p); }
static inline void uform_v_store(float *p, __m256 x) { _mm256_storeu_ps(p, x); }
static inline __m256 uform_v_add(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
static inline __m256 uform_v_sub(__m256 a, __m256 b) { return _mm256_sub_ps(a, b); }
static inline __m256 uform_v_mul(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
static inline __m256 uform_v_div(__m256 a, __m256 b) { return _mm256_div_ps(a, b); }
static inline __m256 uform_v_max(__m256 a, __m256 b) { return _mm256_max_ps(a, b); }
static inline __m256 uform_v_min(__m256 a, __m256 b) { return _mm256_min_ps(a, b); }
static inline __m256 uform_v_fma(__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); }
static inline __m256 uform_v_fnma(__m256 a, __m256 b, __m256 c) { return _mm256_fnmadd_ps(a, b, c); }
static inline __m256 uform_v_round(__m256 x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
static inline __m256 uform_v_split(__m256 x, __m256 *whole) {
    *whole = uform_v_round(x);
    return _mm256_sub_ps(x, *whole);
}
/* 2^n built in the exponent field: n stays in [-126, 127] for the clamped arguments of exp. */
static inline __m256 uform_v_scale(__m256 p, __m256 n) {
    __m256i exponent = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(exponent));
}
static inline float uform_v_sum(__m256 x) {
    __m128 half = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    half = _mm_add_ps(half, _mm_movehl_ps(half, half));
    return _mm_cvtss_f32(_mm_add_ss(half, _mm_movehdup_ps(half)));
}
static inline float uform_v_largest(__m256 x) {
    __m128 half = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    half = _mm_max_ps(half, _mm_movehl_ps(half, half));
    return _mm_cvtss_f32(_mm_max_ss(half, _mm_movehdup_ps(half)));
}
/* E4M3 rounding in Float32's bits: a normal keeps 3 mantissa bits (ties to even), a value under 2^-6
 * goes to a multiple of 2^-9 by the add-and-subtract of 2^23, then the magnitude is capped at 448. */
static inline __m256 uform_v_e4m3(__m256 x) {
    __m256i bits = _mm256_castps_si256(x);
    __m256i sign = _mm256_and_si256(bits, _mm256_set1_epi32((int)0x80000000u));
    __m256i magnitude = _mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff));
    __m256i odd = _mm256_and_si256(_mm256_srli_epi32(magnitude, 20), _mm256_set1_epi32(1));
    __m256i normal = _mm256_and_si256(_mm256_add_epi32(magnitude, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7ffff))),
                                      _mm256_set1_epi32((int)0xfff00000u));
    __m256 shifted = _mm256_add_ps(_mm256_mul_ps(_mm256_castsi256_ps(magnitude), _mm256_set1_ps(512.0f)), _mm256_set1_ps(8388608.0f));
    __m256 subnormal = _mm256_mul_ps(_mm256_sub_ps(shifted, _mm256_set1_ps(8388608.0f)), _mm256_set1_ps(0x1p-9f));
    __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(0x3c800000), magnitude);
    __m256i chosen = _mm256_blendv_epi8(normal, _mm256_castps_si256(subnormal), small);
    chosen = _mm256_min_epi32(chosen, _mm256_set1_epi32(0x43e00000));
    return _mm256_castsi256_ps(_mm256_or_si256(chosen, sign));
}
static inline __m256 uform_v_even(uint16_t const *pairs) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_loadu_si256((__m256i const *)pairs), 16));
}
static inline __m256 uform_v_odd(uint16_t const *pairs) {
    __m256i high = _mm256_set1_epi32((int)0xffff0000u);
    return _mm256_castsi256_ps(_mm256_and_si256(_mm256_loadu_si256((__m256i const *)pairs), high));
}
static inline void uform_v_store_bf16(uint16_t *target, __m256 x) {
    __m256i bits = _mm256_castps_si256(x);
    __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
    __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7fff))), 16);
    __m256i magnitude = _mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff));
    __m256i nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7f800000));
    __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x0040));
    __m256i chosen = _mm256_blendv_epi8(rounded, quiet, nan);
    __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(chosen), _mm256_extracti128_si256(chosen, 1));
    _mm_storeu_si128((__m128i *)target, packed);
}

#include "cpu/kernels_widen.h"

/* Eight codes at a time: a normal code's exponent and mantissa moved into Float32's fields with the
 * bias changed, a subnormal's mantissa m converted and scaled by 2^-9 (no denormal operand), then
 * the sign; the top half of each Float32 is the exact BF16. Shared by the AVX-512 tables. */
void uform_widen_e4m3_avx2(uint8_t const *source, uint16_t *target, size_t count) {
    __m256i const magnitude_mask = _mm256_set1_epi32(0x7f), sign_mask = _mm256_set1_epi32(0x80);
    __m256i const bias = _mm256_set1_epi32((127 - UFORM_E4M3_DECODE_BIAS) << 23), first_normal = _mm256_set1_epi32(8);
    __m256 const subnormal_unit = _mm256_set1_ps(ldexpf(1.0f, 1 - UFORM_E4M3_DECODE_BIAS - 3));
    size_t i = 0;
    for (; i + 8 <= count; i += 8) {
        __m256i wide = _mm256_cvtepu8_epi32(_mm_loadl_epi64((__m128i const *)(source + i)));
        __m256i magnitude = _mm256_and_si256(wide, magnitude_mask);
        __m256i normal = _mm256_add_epi32(_mm256_slli_epi32(magnitude, 20), bias);
        __m256i subnormal = _mm256_castps_si256(_mm256_mul_ps(_mm256_cvtepi32_ps(magnitude), subnormal_unit));
        __m256i value = _mm256_blendv_epi8(normal, subnormal, _mm256_cmpgt_epi32(first_normal, magnitude));
        value = _mm256_or_si256(value, _mm256_slli_epi32(_mm256_and_si256(wide, sign_mask), 24));
        __m256i high = _mm256_srli_epi32(value, 16);
        _mm_storeu_si128((__m128i *)(target + i), _mm_packus_epi32(_mm256_castsi256_si128(high), _mm256_extracti128_si256(high, 1)));
    }
    if (i < count) uform_widen_e4m3_generic(source + i, target + i, count - i);
}

UFORM_WIDEN_TILE(1, 1)
UFORM_WIDEN_TILE(2, 1)
UFORM_WIDEN_TILE(3, 1)
UFORM_WIDEN_TILE(4, 1)
UFORM_WIDEN_TILE(5, 1)
static uform_tile_t const uform_tiles_[UFORM_TILE_ROWS_MOST][UFORM_TILE_PANELS_MOST] = {
    {uform_tile_1_1_}, {uform_tile_2_1_}, {uform_tile_3_1_}, {uform_tile_4_1_}, {uform_tile_5_1_}};
UFORM_WIDEN_GEMM(uform_tiles_)

/* ---- The int8 product: VPMADDUBSW's int16 sum of two u8 x s8 products (up to 2 x 255 x 127) would
 * saturate, so both sides widen to int16 and VPMADDWD sums pairs into int32, exactly. ---- */

float uform_quantize_int8_avx2(float const *source, size_t count, uint8_t *target) {
    size_t whole = count - count % 8;
    __m256 const magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 largest = _mm256_setzero_ps();
    for (size_t i = 0; i < whole; i += 8) largest = _mm256_max_ps(largest, _mm256_and_ps(_mm256_loadu_ps(source + i), magnitude));
    float most = uform_v_largest(largest);
    for (size_t i = whole; i < count; ++i) most = fabsf(source[i]) > most ? fabsf(source[i]) : most;
    float scale = most > 0 ? most / 127.0f : 1.0f, inverse = 1.0f / scale;
    __m256 const factor = _mm256_set1_ps(inverse);
    __m256i const low = _mm256_set1_epi32(-127), high = _mm256_set1_epi32(127), offset = _mm256_set1_epi32(128);
    for (size_t i = 0; i < whole; i += 8) {
        __m256i q = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(source + i), factor)); /* nearest even */
        q = _mm256_add_epi32(_mm256_min_epi32(_mm256_max_epi32(q, low), high), offset);
        __m128i words = _mm_packus_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
        _mm_storel_epi64((__m128i *)(target + i), _mm_packus_epi16(words, words));
    }
    for (size_t i = whole; i < count; ++i) target[i] = (uint8_t)(128 + uform_int8_round(source[i] * inverse));
    for (size_t i = count; i < uform_int8_stride(count); ++i) target[i] = 128;
    return scale;
}

/* Three rows a tile: 12 accumulators and three temporaries of the 16 registers (four rows would
 * spill). Both sides are widened to int16 on the stack first, a chunk of the depth at a time: B's
 * chunk once for every row of A, A's rows once a panel, so the inner loop is loads, VPMADDWD and
 * VPADDD alone. Between chunks a tile's int32 sums wait in C's own cells. */
enum { uform_int8_rows_most_k = 3, uform_int8_chunk_quads_k = 256 };

/* Widens `bytes` (a multiple of 4) codes to int16, 16 at a time where whole, then a quad at a time. */
static inline void uform_int8_widen_u8_(uint8_t const *source, size_t bytes, int16_t *target) {
    size_t i = 0;
    for (; i + 16 <= bytes; i += 16)
        _mm256_storeu_si256((__m256i *)(target + i), _mm256_cvtepu8_epi16(_mm_loadu_si128((__m128i const *)(source + i))));
    for (; i < bytes; i += 4) {
        uint32_t four;
        memcpy(&four, source + i, sizeof(four));
        _mm_storel_epi64((__m128i *)(target + i), _mm_cvtepu8_epi16(_mm_cvtsi32_si128((int)four)));
    }
}

/* A tile's sums for the columns from `column` on (of `columns`) as they were left in C: each int32 in
 * the first of its column's pair of lanes. */
static inline __m256i uform_int8_resume_(float const *cells, size_t column, size_t columns) {
    int32_t part[4] = {0, 0, 0, 0};
    if (column < columns) memcpy(part, cells + column, (columns - column < 4 ? columns - column : 4) * sizeof(int32_t));
    return _mm256_cvtepu32_epi64(_mm_loadu_si128((__m128i const *)part));
}

/* Up to 3 rows against one widened chunk of a panel: per row four vectors of 8 int32, a pair of
 * partial sums per column, added pairwise at the chunk's end; then C, or the sums left in C for the
 * next chunk. The epilogue's loops are unrolled by request: left as loops over the accumulators, the
 * compiler would keep those in memory through the depth loop too. */
#define UFORM_INT8_TILE(ROWS)                                                                                       \
    static void uform_int8_tile_##ROWS##_(uint8_t const *a, size_t a_stride, int16_t const *w, size_t quads,       \
                                          int resume, int last, int32_t const *corrections,                        \
                                          float const *row_scales, float const *scales, float *c, size_t c_stride, \
                                          size_t columns) {                                                        \
        __m256i sums[ROWS][4];                                                                                      \
        int16_t x[ROWS][4 * uform_int8_chunk_quads_k];                                                              \
        for (int r = 0; r < ROWS; ++r) {                                                                            \
            uform_int8_widen_u8_(a + r * a_stride, 4 * quads, x[r]);                                                \
            for (int v = 0; v < 4; ++v)                                                                             \
                sums[r][v] = resume ? uform_int8_resume_(c + r * c_stride, 4 * (size_t)v, columns) : _mm256_setzero_si256(); \
        }                                                                                                           \
        for (size_t quad = 0; quad < quads; ++quad)                                                                 \
            _Pragma("GCC unroll 4") for (int v = 0; v < 4; ++v) {                                                   \
                __m256i weights = _mm256_loadu_si256((__m256i const *)(w + quad * 64 + 16 * v));                    \
                _Pragma("GCC unroll 3") for (int r = 0; r < ROWS; ++r) {                                            \
                    long long pairs;                                                                                \
                    memcpy(&pairs, x[r] + 4 * quad, sizeof(pairs));                                                 \
                    sums[r][v] = _mm256_add_epi32(sums[r][v], _mm256_madd_epi16(_mm256_set1_epi64x(pairs), weights)); \
                }                                                                                                   \
            }                                                                                                       \
        int32_t totals[ROWS][16];                                                                                   \
        _Pragma("GCC unroll 16") for (int r = 0; r < ROWS; ++r)                                                     \
            _Pragma("GCC unroll 2") for (int half = 0; half < 2; ++half) { /* columns 8 half .. 8 half + 7 */       \
                __m256i pairs = _mm256_hadd_epi32(sums[r][2 * half], sums[r][2 * half + 1]);                        \
                _mm256_storeu_si256((__m256i *)(totals[r] + 8 * half), _mm256_permute4x64_epi64(pairs, 0xd8));      \
            }                                                                                                       \
        if (last)                                                                                                   \
            uform_int8_finish_(&totals[0][0], ROWS, corrections, row_scales, scales, c, c_stride, columns);         \
        else                                                                                                        \
            for (int r = 0; r < ROWS; ++r) memcpy(c + r * c_stride, totals[r], columns * sizeof(int32_t));          \
    }

/* C of a tile from its int32 sums [rows][16]: the correction taken back, both scales applied. */
static inline void uform_int8_finish_(int32_t const *totals, int rows, int32_t const *corrections,
                                      float const *row_scales, float const *scales, float *c, size_t c_stride,
                                      size_t columns) {
    for (int r = 0; r < rows; ++r) {
        float *target = c + r * c_stride;
        if (columns == 16) {
            __m256 row_scale = _mm256_set1_ps(row_scales[r]);
            for (int half = 0; half < 2; ++half) {
                __m256i total = _mm256_sub_epi32(_mm256_loadu_si256((__m256i const *)(totals + 16 * r + 8 * half)),
                                                 _mm256_loadu_si256((__m256i const *)(corrections + 8 * half)));
                __m256 value = _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(total), row_scale), _mm256_loadu_ps(scales + 8 * half));
                _mm256_storeu_ps(target + 8 * half, value);
            }
        } else {  /* the same operations one column at a time, so as not to read past the last column */
            for (size_t i = 0; i < columns; ++i) target[i] = (float)(totals[16 * r + i] - corrections[i]) * row_scales[r] * scales[i];
        }
    }
}

UFORM_INT8_TILE(1)
UFORM_INT8_TILE(2)
UFORM_INT8_TILE(3)

typedef void (*uform_int8_tile_t)(uint8_t const *, size_t, int16_t const *, size_t, int, int, int32_t const *,
                                  float const *, float const *, float *, size_t, size_t);
static uform_int8_tile_t const uform_int8_tiles_[uform_int8_rows_most_k] = {uform_int8_tile_1_, uform_int8_tile_2_,
                                                                          uform_int8_tile_3_};

void uform_gemm_int8_avx2(uint8_t const *a, size_t a_stride, int8_t const *packed, int32_t const *corrections,
                          float const *row_scales, float const *scales, float *c, size_t c_stride, size_t rows,
                          size_t width, size_t depth) {
    size_t quads = uform_int8_stride(depth) / 4;
    int16_t panel[64 * uform_int8_chunk_quads_k];
    for (size_t first = 0; first < width; first += 16) {
        size_t columns = width - first < 16 ? width - first : 16;
        int8_t const *b = packed + first * quads * 4;
        for (size_t start = 0; start < quads; start += uform_int8_chunk_quads_k) {
            size_t count = quads - start < uform_int8_chunk_quads_k ? quads - start : uform_int8_chunk_quads_k;
            for (size_t i = 0; i < 64 * count; i += 16)
                _mm256_storeu_si256((__m256i *)(panel + i), _mm256_cvtepi8_epi16(_mm_loadu_si128((__m128i const *)(b + 64 * start + i))));
            for (size_t row = 0; row < rows; row += uform_int8_rows_most_k) {
                size_t tile = rows - row < uform_int8_rows_most_k ? rows - row : uform_int8_rows_most_k;
                uform_int8_tiles_[tile - 1](a + row * a_stride + 4 * start, a_stride, panel, count, start > 0,
                                            start + count == quads, corrections + first, row_scales + row, scales + first,
                                            c + row * c_stride + first, c_stride, columns);
            }
        }
    }
}
