/*  test_kernels.c: every BF16 kernel table this CPU runs (cpu/kernels.h), its product against a
 *  float64 product of the same BF16 inputs, on shapes that reach each tail of each table's tiling
 *  (rows, columns and depth pairs short of a whole tile, odd depth); E4M3's codes, rounding, packing
 *  and each table's widening against the format's definition, with broken copies the same checks
 *  must reject; int8's rounding, packing, each table's quantization of an input row and its product
 *  against an int64 sum of the same codes (bit for bit) and a float64 product (a derived bound), at
 *  each tail of each table's tiling; each table's softmax against float64 exponentials (a derived
 *  bound), its SwiGLU (Float32 and BF16) against float64 (a derived bound) and its RMSNorm against
 *  uform_rmsnorm (bit for bit), with planted copies the checks must reject; BF16 packing in both
 *  orientations against the layout's definition. Prints "N passed, M failed" and exits non-zero on any failure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/numeric.h"
#include "cpu/kernels.h"
#include "cpu/ops.h"
#include "check.h"
#include "e4m3_reference.h"

/* The largest |C - C64| / (depth u sum |a b|) of one table on one shape: BF16 x BF16 is exact in
 * Float32, and a sum of `depth` terms in any order rounds at most depth - 1 times, each by u = 2^-24
 * of a partial sum no larger than sum |a b|; so the ratio is at most 1. */
static double product_ratio(uform_kernels_t const *kernels, size_t rows, size_t width, size_t depth, uint64_t seed) {
    size_t even = depth + depth % 2;
    uint16_t *a = calloc(rows * even, sizeof(uint16_t)), *b = calloc(width * depth, sizeof(uint16_t));
    uint16_t *packed = malloc(uform_packed_size(width, depth));
    float *c = malloc(rows * width * sizeof(float));
    uform_rng_t rng = {seed};
    for (size_t r = 0; r < rows; ++r)
        for (size_t k = 0; k < depth; ++k) a[r * even + k] = uform_f32_to_bf16((float)uform_rng_normal(&rng));
    for (size_t i = 0; i < width * depth; ++i) b[i] = uform_f32_to_bf16((float)uform_rng_normal(&rng));
    uform_pack_bf16(b, width, depth, depth, 1, packed);
    kernels->gemm(a, even, packed, c, width, rows, width, depth);
    double worst = 0;
    for (size_t r = 0; r < rows; ++r)
        for (size_t j = 0; j < width; ++j) {
            double sum = 0, magnitude = 0;
            for (size_t k = 0; k < depth; ++k) {
                double term = (double)uform_bf16_to_f32(a[r * even + k]) * uform_bf16_to_f32(b[j * depth + k]);
                sum += term, magnitude += fabs(term);
            }
            double ratio = fabs(c[r * width + j] - sum) / (ldexp((double)depth, -24) * magnitude + 1e-300);
            worst = ratio > worst ? ratio : worst;
        }
    free(a), free(b), free(packed), free(c);
    return worst;
}

/* ---- BF16 packing ----------------------------------------------------------------------------- */

typedef void (*pack_fn_t)(uint16_t const *, size_t, size_t, size_t, size_t, uint16_t *);

/* Planted: each depth pair's two halves swapped (V^T's interleave in the wrong order). */
static void pack_swapped(uint16_t const *b, size_t width, size_t depth, size_t width_stride, size_t depth_stride,
                         uint16_t *packed) {
    uform_pack_bf16(b, width, depth, width_stride, depth_stride, packed);
    for (size_t i = 0; i < uform_packed_size(width, depth) / sizeof(uint16_t); i += 2) {
        uint16_t first = packed[i];
        packed[i] = packed[i + 1], packed[i + 1] = first;
    }
}

/* Elements of the packing of B [width, depth] (at b[i * width_stride + j * depth_stride], both
 * orientations: row-major as weights and K, column-major as V^T) that differ from the layout's
 * definition, zeros past B's edges included. */
static size_t pack_mistakes(pack_fn_t pack, size_t width, size_t depth, int transposed, uint64_t seed) {
    size_t width_stride = transposed ? 1 : depth + 3, depth_stride = transposed ? width + 5 : 1;
    size_t pairs = (depth + 1) / 2, count = uform_packed_size(width, depth) / sizeof(uint16_t);
    uint16_t *b = malloc(((width + 1) * width_stride + (depth + 1) * depth_stride) * sizeof(uint16_t));
    uint16_t *packed = malloc(count * sizeof(uint16_t));
    uform_rng_t rng = {seed};
    for (size_t i = 0; i < (width + 1) * width_stride + (depth + 1) * depth_stride; ++i)
        b[i] = (uint16_t)(uform_rng_next(&rng) | 1); /* no zeros: a pad read from B shows */
    pack(b, width, depth, width_stride, depth_stride, packed);
    size_t mistakes = 0;
    for (size_t k = 0; k < count; ++k) {
        size_t panel = k / (pairs * 32), pair = k / 32 % pairs, lane = k % 32 / 2, half = k % 2;
        size_t i = panel * 16 + lane, j = 2 * pair + half;
        mistakes += packed[k] != (i < width && j < depth ? b[i * width_stride + j * depth_stride] : 0);
    }
    free(b), free(packed);
    return mistakes;
}

/* Widths around a panel, depths around 8 (the row-major fast path's 4 pairs) and odd ones. */
static void test_packing(void) {
    static size_t const widths[] = {1, 15, 16, 17, 32, 64, 70};
    static size_t const depths[] = {1, 2, 7, 8, 9, 16, 63, 64, 2049};
    size_t mistakes = 0, planted = 0;
    for (size_t w = 0; w < sizeof(widths) / sizeof(widths[0]); ++w)
        for (size_t d = 0; d < sizeof(depths) / sizeof(depths[0]); ++d)
            for (int transposed = 0; transposed < 2; ++transposed) {
                mistakes += pack_mistakes(uform_pack_bf16, widths[w], depths[d], transposed, 100 + w * 10 + d);
                planted += pack_mistakes(pack_swapped, widths[w], depths[d], transposed, 100 + w * 10 + d) > 0;
            }
    CHECK(mistakes == 0);
    CHECK(planted == 2 * (sizeof(widths) / sizeof(widths[0])) * (sizeof(depths) / sizeof(depths[0])));
    printf("bf16 packing: both orientations against the layout, %zu mistakes; the planted swap caught in %zu shapes\n",
           mistakes, planted);
}

/* Rows around 6 (the AVX tiles), 16 and 32 (AMX's); widths around a panel of 16 and pairs of them;
 * depths around 32 (an AMX tile of 16 pairs), odd ones and the encoder's 512. */
static void test_products(void) {
    static size_t const rows[] = {1, 5, 7, 16, 17, 31, 32, 33, 50, 64};
    static size_t const widths[] = {1, 15, 16, 17, 32, 33, 48, 49, 70};
    static size_t const depths[] = {1, 2, 3, 31, 32, 33, 64, 65, 100, 512};
    for (size_t t = 0; uform_kernels_all[t]; ++t) {
        uform_kernels_t const *kernels = uform_kernels_all[t];
        if (!uform_kernels_runs(kernels->name)) {
            printf("kernels %s: this CPU cannot run them, skipped\n", kernels->name);
            continue;
        }
        double worst = 0;
        for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); ++r)
            for (size_t w = 0; w < sizeof(widths) / sizeof(widths[0]); ++w)
                for (size_t d = 0; d < sizeof(depths) / sizeof(depths[0]); ++d) {
                    double ratio = product_ratio(kernels, rows[r], widths[w], depths[d], 1 + r * 100 + w * 10 + d);
                    if (!(ratio <= 1))
                        fprintf(stderr, "kernels %s: %zu x %zu x %zu at %.3g of the bound\n", kernels->name, rows[r],
                                widths[w], depths[d], ratio);
                    CHECK(ratio <= 1);
                    worst = ratio > worst ? ratio : worst;
                }
        printf("kernels %s: products within %.3f of their bound\n", kernels->name, worst);
    }
}

/* Rounding toward zero: a broken copy the rounding check must reject. */
static float e4m3_truncated(float x) {
    double magnitude = fabs((double)x), result = 0;
    for (unsigned code = 0; code < 127; ++code)
        if (e4m3_definition(code) <= magnitude) result = e4m3_definition(code);
    return (float)(x < 0 ? -result : result);
}

/* How many of many floats (every binade E4M3 reaches and past it, the midpoints between its values
 * and their neighbours) `round` gets wrong. */
static size_t rounding_mistakes(float (*round)(float)) {
    size_t mistakes = 0;
    uform_rng_t rng = {7};
    for (int i = 0; i < 20000; ++i) {
        float x = (float)(ldexp(uform_rng_uniform(&rng) + 0.5, (int)(uform_rng_next(&rng) % 24) - 14));
        if (i % 2) x = -x;
        mistakes += (double)round(x) != e4m3_nearest(x);
    }
    for (unsigned code = 0; code + 1 < 127; ++code) {
        double middle = (e4m3_definition(code) + e4m3_definition(code + 1)) / 2;
        float probes[3] = {(float)middle, nextafterf((float)middle, 0), nextafterf((float)middle, 1000)};
        for (int p = 0; p < 3; ++p) mistakes += (double)round(probes[p]) != e4m3_nearest(probes[p]);
    }
    return mistakes;
}

/* A widening decoded with bias 8: a broken copy the widening check must reject. */
static void widen_biased(uint8_t const *source, uint16_t *target, size_t count) {
    for (size_t i = 0; i < count; ++i) target[i] = uform_f32_to_bf16((float)(e4m3_definition(source[i]) / 2));
}

/* How many of the 254 finite codes (laid out twice, then 5 more, so that every tail is reached)
 * `widen` turns into a BF16 other than the code's exact value. */
static size_t widening_mistakes(void (*widen)(uint8_t const *, uint16_t *, size_t)) {
    uint8_t codes[2 * 254 + 5];
    uint16_t widened[2 * 254 + 5];
    size_t count = 0;
    for (unsigned code = 0; code < 256; ++code)
        if (!isnan(e4m3_definition(code))) codes[count++] = (uint8_t)code;
    memcpy(codes + count, codes, count), memcpy(codes + 2 * count, codes + 100, 5);
    count = 2 * count + 5;
    widen(codes, widened, count);
    size_t mistakes = 0;
    for (size_t i = 0; i < count; ++i) mistakes += (double)uform_bf16_to_f32(widened[i]) != e4m3_definition(codes[i]);
    return mistakes;
}

static void test_e4m3(void) {
    size_t code_mistakes = 0;
    for (unsigned code = 0; code < 256; ++code) {
        double value = e4m3_definition(code);
        if (isnan(value)) {
            code_mistakes += !isnan(uform_e4m3_to_f32((uint8_t)code));
            continue;
        }
        code_mistakes += (double)uform_e4m3_to_f32((uint8_t)code) != value || uform_f32_to_e4m3((float)value) != code;
    }
    CHECK(code_mistakes == 0);
    CHECK(uform_f32_to_e4m3(1e6f) == 0x7e && uform_f32_to_e4m3(-500.0f) == 0xfe && uform_f32_to_e4m3(NAN) == 0x7f);
    size_t mistakes = rounding_mistakes(uform_e4m3_round);
    if (mistakes) fprintf(stderr, "uform_e4m3_round: %zu values rounded wrongly\n", mistakes);
    CHECK(mistakes == 0);
    CHECK(rounding_mistakes(e4m3_truncated) > 0); /* the control */
    for (size_t t = 0; uform_kernels_all[t]; ++t) {
        uform_kernels_t const *kernels = uform_kernels_all[t];
        if (!uform_kernels_runs(kernels->name)) continue;
        size_t wrong = widening_mistakes(kernels->widen_e4m3);
        if (wrong) fprintf(stderr, "kernels %s: %zu E4M3 codes widened wrongly\n", kernels->name, wrong);
        CHECK(wrong == 0);
    }
    CHECK(widening_mistakes(widen_biased) > 0); /* the control */
    /* Packing: a row's scale is its largest |b| / 448, each code the rounding of b / scale, at the
     * BF16 layout's place; a zero row has scale 1. Widths and depths reach a panel's and a pair's tail. */
    size_t width = 37, depth = 21, pairs = (depth + 1) / 2, layout_mistakes = 0;
    uint16_t *b = malloc(width * depth * sizeof(uint16_t));
    uint8_t *packed = malloc(uform_packed_e4m3_size(width, depth));
    float *scales = malloc(width * sizeof(float));
    uform_rng_t rng = {11};
    for (size_t i = 0; i < width * depth; ++i)
        b[i] = uform_f32_to_bf16(i / depth == 3 ? 0.0f : (float)(uform_rng_normal(&rng) * ldexp(1.0, (int)(i / depth) % 9 - 4)));
    uform_pack_e4m3(b, width, depth, scales, packed);
    for (size_t i = 0; i < width; ++i) {
        float largest = 0;
        for (size_t j = 0; j < depth; ++j) largest = fmaxf(largest, fabsf(uform_bf16_to_f32(b[i * depth + j])));
        layout_mistakes += scales[i] != (largest > 0 ? largest / 448.0f : 1.0f);
        for (size_t j = 0; j < depth; ++j) {
            double expected = e4m3_nearest((double)(uform_bf16_to_f32(b[i * depth + j]) / scales[i]));
            uint8_t code = packed[(i / 16 * pairs + j / 2) * 32 + (i % 16) * 2 + j % 2];
            layout_mistakes += e4m3_definition(code) != expected;
        }
    }
    CHECK(layout_mistakes == 0);
    printf("e4m3: codes, rounding, packing and each table's widening checked (%zu, %zu, %zu mistakes)\n", code_mistakes,
           mistakes, layout_mistakes);
    free(b), free(packed), free(scales);
}

/* The nearest integer to x, ties to even, clamped to [-127, 127], found apart from the library's. */
static int32_t int8_nearest(double x) {
    double below = floor(x), fraction = x - below;
    double chosen = fraction > 0.5 || (fraction == 0.5 && fmod(below, 2.0) != 0) ? below + 1 : below;
    return chosen > 127 ? 127 : chosen < -127 ? -127 : (int32_t)chosen;
}

/* Rounding toward zero: a broken copy the rounding check must reject. */
static int32_t int8_truncated(float x) { return x > 127 ? 127 : x < -127 ? -127 : (int32_t)x; }

/* How many of many floats (uniform over [-140, 140], every midpoint and its neighbours) `round` gets wrong. */
static size_t int8_rounding_mistakes(int32_t (*round)(float)) {
    size_t mistakes = 0;
    uform_rng_t rng = {13};
    for (int i = 0; i < 20000; ++i) {
        float x = (float)((uform_rng_uniform(&rng) - 0.5) * 280.0);
        mistakes += round(x) != int8_nearest(x);
    }
    for (int n = -130; n < 130; ++n) {
        float middle = (float)n + 0.5f, probes[3] = {middle, nextafterf(middle, -1000), nextafterf(middle, 1000)};
        for (int p = 0; p < 3; ++p) mistakes += round(probes[p]) != int8_nearest(probes[p]);
    }
    return mistakes;
}

/* An int8 input row's scale and codes, found apart from the library's: s = max |x| / 127 in Float32,
 * codes 128 + nearest(x * (1 / s)). */
static float int8_quantize_reference(float const *x, size_t count, uint8_t *codes) {
    float largest = 0;
    for (size_t i = 0; i < count; ++i) largest = fmaxf(largest, fabsf(x[i]));
    float scale = largest > 0 ? largest / 127.0f : 1.0f, inverse = 1.0f / scale;
    for (size_t i = 0; i < count; ++i) codes[i] = (uint8_t)(128 + int8_nearest((double)(x[i] * inverse)));
    return scale;
}

/* One table's int8 product on one shape: mismatches against the int64 sum of the same codes with
 * the same Float32 steps (must be 0: the int32 sums are exact), and the largest |C - C64| / (3 u |C64|),
 * C64 the float64 product of the codes and both scales: the conversion of the sum and the two
 * products by the scales round once each, so the ratio is at most 1. `extreme`: every input code
 * 255 and every weight 127 or -127, the largest sums. */
static size_t int8_product_mistakes(uform_kernels_t const *kernels, size_t rows, size_t width, size_t depth,
                                    uint64_t seed, int extreme, double *worst) {
    size_t stride = uform_int8_stride(depth);
    uint8_t *a = malloc(rows * stride);
    uint16_t *b = malloc(width * depth * sizeof(uint16_t));
    int8_t *packed = malloc(uform_packed_int8_size(width, depth));
    int32_t *corrections = malloc(width * sizeof(int32_t));
    float *x = malloc(depth * sizeof(float)), *row_scales = malloc(rows * sizeof(float));
    float *scales = malloc(width * sizeof(float)), *c = malloc(rows * width * sizeof(float));
    uform_rng_t rng = {seed};
    for (size_t i = 0; i < width * depth; ++i)
        b[i] = uform_f32_to_bf16(extreme ? (i % 3 ? 1.0f : -1.0f) : (float)uform_rng_normal(&rng));
    uform_pack_int8(b, width, depth, scales, corrections, packed);
    for (size_t r = 0; r < rows; ++r) {
        for (size_t k = 0; k < depth; ++k) x[k] = extreme ? 1.0f : (float)(uform_rng_normal(&rng) * (1.0 + (double)r));
        row_scales[r] = kernels->quantize_int8(x, depth, a + r * stride);
    }
    kernels->gemm_int8(a, stride, packed, corrections, row_scales, scales, c, width, rows, width, depth);
    size_t mistakes = 0;
    for (size_t r = 0; r < rows; ++r)
        for (size_t j = 0; j < width; ++j) {
            float largest = 0;
            for (size_t k = 0; k < depth; ++k) largest = fmaxf(largest, fabsf(uform_bf16_to_f32(b[j * depth + k])));
            float scale = largest > 0 ? largest / 127.0f : 1.0f;
            int64_t sum = 0;
            for (size_t k = 0; k < depth; ++k)
                sum += ((int64_t)a[r * stride + k] - 128) * int8_nearest((double)(uform_bf16_to_f32(b[j * depth + k]) / scale));
            float expected = (float)sum * row_scales[r] * scale;
            double exact = (double)sum * row_scales[r] * scale, value = c[r * width + j];
            mistakes += value != expected;
            double ratio = exact == 0 ? (value == 0 ? 0 : INFINITY) : fabs(value - exact) / (3 * ldexp(fabs(exact), -24));
            *worst = ratio > *worst ? ratio : *worst;
        }
    free(a), free(b), free(packed), free(corrections), free(x), free(row_scales), free(scales), free(c);
    return mistakes;
}

static void test_int8(void) {
    size_t mistakes = int8_rounding_mistakes(uform_int8_round);
    if (mistakes) fprintf(stderr, "uform_int8_round: %zu values rounded wrongly\n", mistakes);
    CHECK(mistakes == 0);
    CHECK(int8_rounding_mistakes(int8_truncated) > 0); /* the control */
    /* Packing: a row's scale is its largest |b| / 127, each code the rounding of b / scale at the
     * layout's place (panels of 16 rows, depth in quads), the correction 128 x the row's sum of codes;
     * a zero row has scale 1. Width and depth reach a panel's and a quad's tail. */
    size_t width = 37, depth = 21, quads = uform_int8_stride(depth) / 4, layout_mistakes = 0;
    uint16_t *b = malloc(width * depth * sizeof(uint16_t));
    int8_t *packed = malloc(uform_packed_int8_size(width, depth));
    int32_t *corrections = malloc(width * sizeof(int32_t));
    float *scales = malloc(width * sizeof(float));
    uform_rng_t rng = {17};
    for (size_t i = 0; i < width * depth; ++i)
        b[i] = uform_f32_to_bf16(i / depth == 3 ? 0.0f : (float)(uform_rng_normal(&rng) * ldexp(1.0, (int)(i / depth) % 9 - 4)));
    uform_pack_int8(b, width, depth, scales, corrections, packed);
    for (size_t i = 0; i < width; ++i) {
        float largest = 0;
        for (size_t j = 0; j < depth; ++j) largest = fmaxf(largest, fabsf(uform_bf16_to_f32(b[i * depth + j])));
        layout_mistakes += scales[i] != (largest > 0 ? largest / 127.0f : 1.0f);
        int32_t sum = 0;
        for (size_t j = 0; j < 4 * quads; ++j) {
            int32_t expected = j < depth ? int8_nearest((double)(uform_bf16_to_f32(b[i * depth + j]) / scales[i])) : 0;
            int32_t code = packed[(i / 16 * quads + j / 4) * 64 + (i % 16) * 4 + j % 4];
            layout_mistakes += code != expected;
            sum += expected;
        }
        layout_mistakes += corrections[i] != 128 * sum;
    }
    CHECK(layout_mistakes == 0);
    free(b), free(packed), free(corrections), free(scales);
    /* Each table's input rows (lengths around its vectors of 8 and 16 and a quad's tail) against the
     * reference's scale and codes, the pad to the quad all 128. */
    static size_t const lengths[] = {1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 100, 127, 128, 130, 512};
    static size_t const rows[] = {1, 2, 3, 4, 5, 6, 7, 12, 13, 17, 32, 33, 45};
    static size_t const widths[] = {1, 15, 16, 17, 33, 48, 63, 64, 65, 80};
    static size_t const depths[] = {1, 2, 3, 4, 5, 8, 31, 33, 100, 512};
    for (size_t t = 0; uform_kernels_all[t]; ++t) {
        uform_kernels_t const *kernels = uform_kernels_all[t];
        if (!uform_kernels_runs(kernels->name)) continue;
        size_t quantize_mistakes = 0;
        for (size_t l = 0; l < sizeof(lengths) / sizeof(lengths[0]); ++l) {
            size_t count = lengths[l];
            float x[512];
            uint8_t expected[512], codes[512 + 4];
            for (size_t i = 0; i < count; ++i) x[i] = (float)(uform_rng_normal(&rng) * ldexp(1.0, (int)l - 6));
            if (l == 0) x[0] = 0.0f; /* a zero row: scale 1, every code 128 */
            float scale = int8_quantize_reference(x, count, expected);
            memset(codes, 0, sizeof(codes));
            quantize_mistakes += kernels->quantize_int8(x, count, codes) != scale;
            for (size_t i = 0; i < uform_int8_stride(count); ++i) quantize_mistakes += codes[i] != (i < count ? expected[i] : 128);
        }
        if (quantize_mistakes) fprintf(stderr, "kernels %s: %zu int8 input codes or scales wrong\n", kernels->name, quantize_mistakes);
        CHECK(quantize_mistakes == 0);
        size_t product_mistakes = 0;
        double worst = 0;
        for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); ++r)
            for (size_t w = 0; w < sizeof(widths) / sizeof(widths[0]); ++w)
                for (size_t d = 0; d < sizeof(depths) / sizeof(depths[0]); ++d)
                    product_mistakes += int8_product_mistakes(kernels, rows[r], widths[w], depths[d], 1 + r * 100 + w * 10 + d, 0, &worst);
        product_mistakes += int8_product_mistakes(kernels, 7, 33, 4096, 3, 1, &worst); /* 255 x 127 x 4096: near 2^27 */
        product_mistakes += int8_product_mistakes(kernels, 8, 40, 1100, 4, 0, &worst); /* depths past a chunk, and its tail */
        if (product_mistakes) fprintf(stderr, "kernels %s: %zu int8 outputs differ from the int64 sums'\n", kernels->name, product_mistakes);
        CHECK(product_mistakes == 0);
        CHECK(worst <= 1);
        if (!quantize_mistakes && !product_mistakes)
            printf("kernels %s: int8 inputs exact, products bit for bit the int64 sums', within %.3f of the float64 bound\n",
                   kernels->name, worst);
    }
    /* The control: the generic product without the +128 correction must be caught. */
    size_t wrong = 0;
    {
        size_t rows_count = 3, columns = 17, deep = 9, stride = uform_int8_stride(deep);
        uint8_t codes[3 * 12];
        uint16_t weights[17 * 9];
        int8_t packs[2 * 12 * 16];
        int32_t sums[17], zero[17] = {0};
        float x[9], row_scales[3], weight_scales[17], with[3 * 17], without[3 * 17];
        for (size_t i = 0; i < columns * deep; ++i) weights[i] = uform_f32_to_bf16((float)uform_rng_normal(&rng));
        uform_pack_int8(weights, columns, deep, weight_scales, sums, packs);
        for (size_t r = 0; r < rows_count; ++r) {
            for (size_t k = 0; k < deep; ++k) x[k] = (float)uform_rng_normal(&rng);
            row_scales[r] = uform_quantize_int8_generic(x, deep, codes + r * stride);
        }
        uform_gemm_int8_generic(codes, stride, packs, sums, row_scales, weight_scales, with, columns, rows_count, columns, deep);
        uform_gemm_int8_generic(codes, stride, packs, zero, row_scales, weight_scales, without, columns, rows_count, columns, deep);
        for (size_t i = 0; i < rows_count * columns; ++i) wrong += with[i] != without[i];
    }
    CHECK(wrong > 0);
    printf("int8: rounding, packing checked (%zu, %zu mistakes); the correction's control differs in %zu outputs\n",
           mistakes, layout_mistakes, wrong);
}

/* ---- softmax_bf16 ---------------------------------------------------------------------------- */

typedef void (*softmax_fn_t)(float const *, size_t, size_t, size_t, float, uint16_t *, size_t, float *);

/* Planted: exp without the scale (e = exp(s - max s)). */
static void softmax_unscaled(float const *scores, size_t rows, size_t columns, size_t stride, float scale,
                             uint16_t *probabilities, size_t probabilities_stride, float *sums) {
    (void)scale;
    uform_kernels()->softmax_bf16(scores, rows, columns, stride, 1.0f, probabilities, probabilities_stride, sums);
}

/* A scalar softmax over an exponential in base 2, for the planted copies below. */
static void softmax_scalar(float (*exp2_of)(float), float const *scores, size_t rows, size_t columns, size_t stride,
                           float scale, uint16_t *probabilities, size_t probabilities_stride, float *sums) {
    for (size_t r = 0; r < rows; ++r) {
        float const *row = scores + r * stride;
        float top = -INFINITY, sum = 0;
        for (size_t j = 0; j < columns; ++j) top = row[j] > top ? row[j] : top;
        for (size_t j = 0; j < columns; ++j) {
            float e = exp2_of((row[j] - top) * scale * 1.44269504088896341f);
            sum += e;
            probabilities[r * probabilities_stride + j] = uform_f32_to_bf16(e);
        }
        sums[r] = sum;
    }
}

/* 2^t with 2^f by a degree-3 polynomial (relative error 2e-4). */
static float exp2_degree3(float t) {
    float n = rintf(t), f = t - n;
    return ldexpf(((0.0530274361f * f + 0.242214084f) * f + 0.69357264f) * f + 0.99995905f, (int)n);
}

/* Planted: a degree-3 exp (inside BF16's rounding of an element, outside the Float32 sum's bound). */
static void softmax_degree3(float const *scores, size_t rows, size_t columns, size_t stride, float scale,
                            uint16_t *probabilities, size_t probabilities_stride, float *sums) {
    softmax_scalar(exp2_degree3, scores, rows, columns, stride, scale, probabilities, probabilities_stride, sums);
}

/* Planted: e = 2^t from libm in Float32, neither clamped at -126 nor flushed: subnormal results, each a
 * microcode assist on x86 (rows of them ran 13-48x slower). */
static void softmax_subnormal(float const *scores, size_t rows, size_t columns, size_t stride, float scale,
                              uint16_t *probabilities, size_t probabilities_stride, float *sums) {
    softmax_scalar(exp2f, scores, rows, columns, stride, scale, probabilities, probabilities_stride, sums);
}

/* The largest ratio of a softmax's error to its bound over rows of `columns` scores. Each e carries the
 * exponent's Float32 rounding (t = s f - top f with f = scale log2(e) rounded: |dt| <= 4 u max|s f|)
 * and the polynomial's 2^-21 (3.3e-7) before BF16's rounding (u_bf16 = 2^-8); below 2^-126 it is held
 * at 2^-126 or flushed to zero (an absolute 2^-125), never subnormal. The sum adds Float32's rounding of `columns` terms in any order. */
static double softmax_ratio(softmax_fn_t softmax, size_t columns, float spread, uint64_t seed) {
    enum { rows = 5 };
    size_t stride = columns + 3, target_stride = columns + 1 + columns % 2;
    float *scores = malloc(rows * stride * sizeof(float)), sums[rows];
    uint16_t *p = calloc(rows * target_stride, sizeof(uint16_t));
    uform_rng_t rng = {seed};
    for (size_t i = 0; i < rows * stride; ++i) scores[i] = (float)(uform_rng_normal(&rng) * spread);
    float const scale = 0.125f;
    softmax(scores, rows, columns, stride, scale, p, target_stride, sums);
    double worst = 0;
    for (size_t r = 0; r < rows; ++r) {
        double top = -INFINITY, largest = 0, total = 0;
        for (size_t j = 0; j < columns; ++j) {
            double s = scores[r * stride + j];
            top = s > top ? s : top, largest = fabs(s) > largest ? fabs(s) : largest;
        }
        double eta = ldexp(1.0, -21) + 0.693147180559945309 * 4 * ldexp(largest * scale * 1.44269504088896341, -24);
        for (size_t j = 0; j < columns; ++j) {
            double e = exp(scale * ((double)scores[r * stride + j] - top));
            double bound = e * (ldexp(1.0, -8) * (1 + eta) + eta) + ldexp(1.0, -125);
            double ratio = fabs(uform_bf16_to_f32(p[r * target_stride + j]) - e) / bound;
            worst = ratio > worst ? ratio : worst;
            total += e;
        }
        double bound = total * (eta + (double)columns * ldexp(1.0, -24)) + columns * ldexp(1.0, -125);
        double ratio = fabs(sums[r] - total) / bound;
        worst = ratio > worst ? ratio : worst;
        if (columns % 2 && p[r * target_stride + columns] != 0) worst = INFINITY; /* the pad must be zero */
        for (size_t j = 0; j < columns; ++j) /* no subnormal: clamped at 2^-126 or flushed to zero */
            if ((p[r * target_stride + j] & 0x7f80) == 0 && (p[r * target_stride + j] & 0x7f)) worst = INFINITY;
    }
    free(scores), free(p);
    return worst;
}

/* Column counts around each table's vector (8, 16 lanes) and its unrolled loops (2 and 4 vectors),
 * an attention segment's 2048; spreads from flat rows to ones where a single key dominates. */
static double softmax_worst(softmax_fn_t softmax) {
    static size_t const columns[] = {1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 2048, 2051};
    static float const spreads[] = {0.5f, 8.0f, 200.0f};
    double worst = 0;
    for (size_t c = 0; c < sizeof(columns) / sizeof(columns[0]); ++c)
        for (size_t s = 0; s < sizeof(spreads) / sizeof(spreads[0]); ++s) {
            double ratio = softmax_ratio(softmax, columns[c], spreads[s], 7 + c * 10 + s);
            worst = ratio > worst ? ratio : worst;
        }
    return worst;
}

static void test_softmax(void) {
    for (size_t t = 0; uform_kernels_all[t]; ++t) {
        uform_kernels_t const *kernels = uform_kernels_all[t];
        if (!uform_kernels_runs(kernels->name)) continue; /* test_products said so */
        double worst = softmax_worst(kernels->softmax_bf16);
        if (!(worst <= 1)) fprintf(stderr, "kernels %s: softmax at %.3g of its bound\n", kernels->name, worst);
        CHECK(worst <= 1);
        printf("kernels %s: softmax within %.3f of its bound\n", kernels->name, worst);
    }
    double unscaled = softmax_worst(softmax_unscaled), degree3 = softmax_worst(softmax_degree3);
    double subnormal = softmax_worst(softmax_subnormal);
    CHECK(unscaled > 1);
    CHECK(degree3 > 1);
    CHECK(subnormal > 1);
    printf("softmax controls: the scale dropped at %.3g of the bound, a degree-3 exp at %.3g, subnormal e at %.3g\n",
           unscaled, degree3, subnormal);
}

/* ---- rmsnorm --------------------------------------------------------------------------------- */

/* Planted: the last value left out of the sum of squares. */
static float rmsnorm_short(float const *x, float const *gain, float *y, size_t width) {
    float scale = uform_rmsnorm(x, gain, y, width > 1 ? width - 1 : width);
    y[width - 1] = x[width - 1] * scale * gain[width - 1];
    return scale;
}

typedef float (*rmsnorm_fn_t)(float const *, float const *, float *, size_t);

/* Values (and scales) that differ from uform_rmsnorm's, over widths around the vectors (8, 16) and
 * the encoder's (512, 2048). */
static size_t rmsnorm_mistakes(rmsnorm_fn_t rmsnorm) {
    static size_t const widths[] = {1, 7, 8, 9, 15, 16, 17, 64, 100, 512, 515, 2048};
    size_t mistakes = 0;
    uform_rng_t rng = {5};
    for (size_t w = 0; w < sizeof(widths) / sizeof(widths[0]); ++w) {
        size_t width = widths[w];
        float *x = malloc(width * sizeof(float)), *gain = malloc(width * sizeof(float));
        float *expected = malloc(width * sizeof(float)), *y = malloc(width * sizeof(float));
        for (size_t i = 0; i < width; ++i)
            x[i] = (float)ldexp(uform_rng_normal(&rng), (int)(w % 5) * 3 - 6), gain[i] = (float)(1 + 0.1 * uform_rng_normal(&rng));
        float scale = uform_rmsnorm(x, gain, expected, width);
        mistakes += rmsnorm(x, gain, y, width) != scale;
        for (size_t i = 0; i < width; ++i) mistakes += memcmp(&y[i], &expected[i], sizeof(float)) != 0;
        free(x), free(gain), free(expected), free(y);
    }
    return mistakes;
}

static void test_rmsnorm(void) {
    for (size_t t = 0; uform_kernels_all[t]; ++t) {
        uform_kernels_t const *kernels = uform_kernels_all[t];
        if (!uform_kernels_runs(kernels->name)) continue;
        size_t mistakes = rmsnorm_mistakes(kernels->rmsnorm);
        if (mistakes) fprintf(stderr, "kernels %s: rmsnorm differs from uform_rmsnorm in %zu values\n", kernels->name, mistakes);
        CHECK(mistakes == 0);
    }
    size_t planted = rmsnorm_mistakes(rmsnorm_short);
    CHECK(planted > 0);
    printf("rmsnorm: every table bit for bit uform_rmsnorm; the short-sum control differs in %zu values\n", planted);
}

/* ---- SwiGLU ----------------------------------------------------------------------------------- */

/* silu(g) u = g u / (1 + exp(-g)) in Float32, against float64. A table's exponential is within 8 u
 * (u = 2^-24: the widen tables' two-step reduction, degree-6 polynomial and Horner steps; expf under
 * 1 u); 1 + e, the quotient and the product add 3 u, and exp's error passes into silu(g) at most once
 * (the factor e / (1 + e) <= 1): 11 u in all, stated as 16 u. The BF16 kernel rounds that to
 * nearest (2^-8 relative: 8 significant bits). |g| <= 60: past -87 the tables clamp exp's argument,
 * where |silu(g) u| is under 2^-118 |u| anyway. */
typedef void (*swiglu_f32_fn_t)(float const *, size_t, size_t, float *);
typedef void (*swiglu_bf16_fn_t)(float const *, size_t, size_t, uint16_t *);

/* Planted: exp by a degree-3 Taylor polynomial after the same reduction. */
static void swiglu_degree3(float const *gate_up, size_t rows, size_t width, float *hidden) {
    for (size_t r = 0; r < rows; ++r)
        for (size_t i = 0; i < width; ++i) {
            float g = gate_up[r * 2 * width + i], x = -g, n = nearbyintf(x * 1.44269504f), f = x - n * 0.693147181f;
            float e = ldexpf(1.0f + f * (1.0f + f * (0.5f + f / 6.0f)), (int)n);
            hidden[r * width + i] = g / (1.0f + e) * gate_up[r * 2 * width + width + i];
        }
}

/* Planted: gate and up swapped in the BF16 kernel (silu of up, times gate). */
static void swiglu_swapped_bf16(float const *gate_up, size_t rows, size_t width, uint16_t *hidden) {
    for (size_t r = 0; r < rows; ++r)
        for (size_t i = 0; i < width; ++i) {
            float u = gate_up[r * 2 * width + width + i];
            hidden[r * width + i] = uform_f32_to_bf16(u / (1.0f + expf(-u)) * gate_up[r * 2 * width + i]);
        }
}

/* The worst error over the bound of either kernel (one of the two is NULL), over widths around the
 * vectors (4, 8, 16 lanes) and the encoder's (2048), gates from -60 to 60 with exact zeros. */
static double swiglu_worst(swiglu_f32_fn_t f32, swiglu_bf16_fn_t bf16) {
    static size_t const widths[] = {1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 33, 100, 2048};
    static double const spreads[] = {1.0, 8.0, 60.0}; /* the gates' range, a row each */
    size_t const rows = sizeof(spreads) / sizeof(spreads[0]);
    double const u = ldexp(1.0, -24), kernel = 16 * u, rounding = ldexp(1.0, -8);
    double worst = 0;
    uform_rng_t rng = {11};
    for (size_t w = 0; w < sizeof(widths) / sizeof(widths[0]); ++w) {
        size_t width = widths[w];
        float *gate_up = malloc(rows * 2 * width * sizeof(float)), *out = malloc(rows * width * sizeof(float));
        uint16_t *out16 = malloc(rows * width * sizeof(uint16_t));
        for (size_t i = 0; i < rows * width; ++i) {
            size_t r = i / width, j = i % width;
            double g = (j % 13 == 0) ? 0.0 : spreads[r] * (2 * uform_rng_uniform(&rng) - 1);
            gate_up[r * 2 * width + j] = (float)g;
            gate_up[r * 2 * width + width + j] = (float)uform_rng_normal(&rng);
        }
        if (f32) f32(gate_up, rows, width, out);
        if (bf16) bf16(gate_up, rows, width, out16);
        for (size_t i = 0; i < rows * width; ++i) {
            size_t r = i / width, j = i % width;
            double g = gate_up[r * 2 * width + j], up = gate_up[r * 2 * width + width + j];
            double expected = g / (1.0 + exp(-g)) * up, got = f32 ? out[i] : uform_bf16_to_f32(out16[i]);
            double bound = (f32 ? kernel : rounding + (1 + rounding) * kernel) * fabs(expected) + ldexp(fabs(up), -120);
            double ratio = fabs(got - expected) / bound;
            worst = ratio > worst || ratio != ratio ? ratio : worst;
        }
        free(gate_up), free(out), free(out16);
    }
    return worst;
}

static void test_swiglu(void) {
    for (size_t t = 0; uform_kernels_all[t]; ++t) {
        uform_kernels_t const *kernels = uform_kernels_all[t];
        if (!uform_kernels_runs(kernels->name)) continue;
        double f32 = swiglu_worst(kernels->swiglu_f32, NULL), bf16 = swiglu_worst(NULL, kernels->swiglu_bf16);
        if (!(f32 <= 1 && bf16 <= 1))
            fprintf(stderr, "kernels %s: swiglu at %.3g (Float32) and %.3g (BF16) of its bound\n", kernels->name, f32, bf16);
        CHECK(f32 <= 1);
        CHECK(bf16 <= 1);
        printf("kernels %s: swiglu within %.3f (Float32) and %.3f (BF16) of its bound\n", kernels->name, f32, bf16);
    }
    double degree3 = swiglu_worst(swiglu_degree3, NULL), swapped = swiglu_worst(NULL, swiglu_swapped_bf16);
    CHECK(degree3 > 1);
    CHECK(swapped > 1);
    printf("swiglu controls: a degree-3 exp at %.3g of the bound, gate and up swapped at %.3g\n", degree3, swapped);
}

int main(void) {
    test_packing();
    test_products();
    test_e4m3();
    test_int8();
    test_softmax();
    test_rmsnorm();
    test_swiglu();
    return check_report();
}
