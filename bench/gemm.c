/*  gemm.c: single-thread GFLOP/s of the BF16 kernel table (avx512bf16, or generic) against
 *  OpenBLAS sgemm, at the encoder's product shapes for a width, with 128-row tiles as the forward
 *  pass issues them. Prints a table and one JSON line per shape.
 *
 *      uform_bench_gemm [--width 512] [--seconds 1]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/numeric.h"
#include "cpu/gemm.h"
#include "cpu/kernels.h"

static double uform_now_(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    size_t d = 512, rows = 128;
    double seconds = 1.0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--width")) d = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
    }
    struct { char const *name; size_t width, depth; } const shapes[] = {
        {"qkv", 3 * d, d}, {"out", d, d}, {"gate_up", 8 * d, d}, {"down", d, 4 * d}};
    uform_kernels_t const *kernels = uform_kernels();
    printf("| product | width x depth | %s BF16 GFLOP/s | OpenBLAS F32 GFLOP/s | ratio |\n|---|---|---|---|---|\n",
           kernels->name);
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); ++s) {
        size_t width = shapes[s].width, depth = shapes[s].depth;
        float *a = malloc(rows * depth * sizeof(float)), *b = malloc(width * depth * sizeof(float));
        float *c = malloc(rows * width * sizeof(float));
        uint16_t *a16 = malloc(rows * depth * sizeof(uint16_t)), *b16 = malloc(width * depth * sizeof(uint16_t));
        uint16_t *packed = aligned_alloc(64, (uform_packed_size(width, depth) + 63) & ~(size_t)63);
        uform_rng_t rng = {s + 1};
        for (size_t i = 0; i < rows * depth; ++i) a[i] = (float)uform_rng_normal(&rng);
        for (size_t i = 0; i < width * depth; ++i) b[i] = (float)uform_rng_normal(&rng);
        uform_bf16_from_f32_array(a, a16, rows * depth);
        uform_bf16_from_f32_array(b, b16, width * depth);
        uform_pack_bf16(b16, width, depth, depth, 1, packed);
        double rates[2];
        for (int library = 0; library < 2; ++library) {
            size_t calls = 0;
            double start = uform_now_(), elapsed = 0;
            while (elapsed < seconds) {
                if (library == 0) kernels->gemm(a16, depth, packed, c, width, rows, width, depth);
                else uform_gemm_f32_nt(a, depth, b, depth, c, width, rows, width, depth);
                calls++;
                elapsed = uform_now_() - start;
            }
            rates[library] = 2.0 * (double)(rows * width * depth) * (double)calls / elapsed / 1e9;
        }
        printf("| %s | %zu x %zu | %.1f | %.1f | %.2fx |\n", shapes[s].name, width, depth, rates[0], rates[1],
               rates[0] / rates[1]);
        fprintf(stderr, "{\"product\": \"%s\", \"width\": %zu, \"depth\": %zu, \"rows\": %zu, \"kernels\": \"%s\", "
                        "\"bf16_gflops\": %.1f, \"openblas_f32_gflops\": %.1f}\n",
                shapes[s].name, width, depth, rows, kernels->name, rates[0], rates[1]);
        free(a), free(b), free(c), free(a16), free(b16), free(packed);
    }
    return 0;
}
