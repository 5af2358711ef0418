/*  gemm.c: single-thread GFLOP/s of every BF16 kernel table this CPU runs (kernels.h: amx, avx512bf16,
 *  avx512f, avx2, generic) against OpenBLAS sgemm, at the encoder's product shapes for a width, with
 *  128-row tiles as the forward pass issues them. Prints the CPU class, a table with a column per
 *  table, and one JSON line per shape and table (stderr).
 *
 *      uform_bench_gemm [--width 512] [--seconds 1] [--kernels avx2,generic]
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

enum { uform_tables_most_k = 8 };

/* GFLOP/s of C [rows, width] = A B^T by one table, or by OpenBLAS where `kernels` is NULL. */
static double uform_rate_(uform_kernels_t const *kernels, float const *a, float const *b, uint16_t const *a16,
                          uint16_t const *packed, float *c, size_t rows, size_t width, size_t depth, double seconds) {
    size_t calls = 0;
    double start = uform_now_(), elapsed = 0;
    while (elapsed < seconds) {
        if (kernels) kernels->gemm(a16, depth, packed, c, width, rows, width, depth);
        else uform_gemm_f32_nt(a, depth, b, depth, c, width, rows, width, depth);
        calls++;
        elapsed = uform_now_() - start;
    }
    return 2.0 * (double)(rows * width * depth) * (double)calls / elapsed / 1e9;
}

int main(int argc, char **argv) {
    size_t d = 512, rows = 128;
    double seconds = 1.0;
    char const *only = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--width")) d = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--kernels")) only = argv[i + 1];
    }
    struct { char const *name; size_t width, depth; } const shapes[] = {
        {"qkv", 3 * d, d}, {"out", d, d}, {"gate_up", 8 * d, d}, {"down", d, 4 * d}};
    uform_kernels_t const *tables[uform_tables_most_k];
    size_t count = 0;
    for (size_t i = 0; uform_kernels_all[i] && count < uform_tables_most_k; ++i) {
        char const *name = uform_kernels_all[i]->name;
        size_t length = strlen(name);
        char const *found = only ? strstr(only, name) : name;
        int listed = found && (found == only || !only || found[-1] == ',') && (found[length] == ',' || !found[length]);
        if (listed && uform_kernels_runs(name)) tables[count++] = uform_kernels_all[i];
    }
    char class[256];
    uform_cpu_class(class, sizeof(class));
    printf("CPU class: %s; default kernels: %s; single thread, %zu-row tiles\n\n| product | width x depth |", class,
           uform_kernels()->name, rows);
    for (size_t t = 0; t < count; ++t) printf(" %s GFLOP/s |", tables[t]->name);
    printf(" OpenBLAS F32 GFLOP/s |\n|---|---|");
    for (size_t t = 0; t <= count; ++t) printf("---|");
    printf("\n");
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
        printf("| %s | %zu x %zu |", shapes[s].name, width, depth);
        for (size_t t = 0; t <= count; ++t) {
            uform_kernels_t const *kernels = t < count ? tables[t] : NULL;
            double rate = uform_rate_(kernels, a, b, a16, packed, c, rows, width, depth, seconds);
            printf(" %.1f |", rate);
            fflush(stdout);
            fprintf(stderr, "{\"product\": \"%s\", \"width\": %zu, \"depth\": %zu, \"rows\": %zu, \"cpu_class\": \"%s\", "
                            "\"kernels\": \"%s\", \"gflops\": %.1f}\n",
                    shapes[s].name, width, depth, rows, class, kernels ? kernels->name : "openblas_f32", rate);
        }
        printf("\n");
        free(a), free(b), free(c), free(a16), free(b16), free(packed);
    }
    return 0;
}
