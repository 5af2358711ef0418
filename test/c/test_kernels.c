/*  test_kernels.c: every BF16 kernel table this CPU runs (cpu/kernels.h), its product against a
 *  float64 product of the same BF16 inputs, on shapes that reach each tail of each table's tiling
 *  (rows, columns and depth pairs short of a whole tile, odd depth). Prints "N passed, M failed"
 *  and exits non-zero on any failure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/numeric.h"
#include "cpu/kernels.h"
#include "check.h"

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

int main(void) {
    test_products();
    return check_report();
}
