/*  test_kernels.c: every BF16 kernel table this CPU runs (cpu/kernels.h), its product against a
 *  float64 product of the same BF16 inputs, on shapes that reach each tail of each table's tiling
 *  (rows, columns and depth pairs short of a whole tile, odd depth); E4M3's codes, rounding, packing
 *  and each table's widening against the format's definition, with broken copies the same checks
 *  must reject. Prints "N passed, M failed" and exits non-zero on any failure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/numeric.h"
#include "cpu/kernels.h"
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

int main(void) {
    test_products();
    test_e4m3();
    return check_report();
}
