/*  gemm.c: single-thread GFLOP/s of the encoder's product shapes for each width, with 128-row tiles
 *  as the forward pass issues them. BF16: every kernel table this CPU runs (kernels.h: amx,
 *  avx512bf16, avx512f, avx2, generic) against OpenBLAS sgemm. E4M3: ours as the forward pass runs it
 *  (uform_cpu_linear_e4m3: codes packed once; per call the input rows quantized with a scale per row,
 *  the codes widened and multiplied by the table's BF16 product, both scales applied) with each table,
 *  beside each NumKong E4M3 backend this CPU runs, doing the same work (bench/numkong_e4m3.h: its
 *  layout made once, outside the timing; its quantization of the input rows, its product and the same
 *  scales inside), where the build found NumKong. int8: ours as the forward pass runs it
 *  (uform_cpu_linear_int8: codes packed once; per call the input rows quantized with a scale per row,
 *  the table's int8 product and both scales), with each table, beside the best BF16 and E4M3 rates
 *  of the same run. Prints the CPU class and a table per precision, and one JSON line per shape and
 *  column (stderr). test_numkong checks every E4M3 column's numbers, test_kernels the int8 ones.
 *
 *      uform_bench_gemm [--width 512,1024] [--seconds 1] [--precisions bf16,e4m3,int8] [--kernels avx2,numkong_genoa]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/numeric.h"
#include "cpu/forward.h"
#include "cpu/gemm.h"
#include "cpu/kernels.h"
#include "listed.h"
#include "numkong_e4m3.h"

static double uform_now_(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

enum { uform_tables_most_k = 8, uform_columns_most_k = 24, uform_widths_most_k = 8 };
enum { uform_shapes_most_k = 4 * uform_widths_most_k };

/* One timed column on one shape: what its call runs and on what. */
typedef struct uform_job_t {
    uform_kernels_t const *kernels; /* ours (BF16 or E4M3), or NULL */
#if defined(UFORM_HAVE_NUMKONG)
    uform_numkong_e4m3_t const *backend; /* NumKong's E4M3, or NULL */
    void const *numkong_weights;
    float const *numkong_scales;
    uform_numkong_scratch_t numkong_scratch;
#endif
    int e4m3, int8, product_alone;
    size_t rows, width, depth;
    float const *a, *b;
    uint16_t const *a16, *packed;   /* BF16 */
    uform_weight_t const *matrix;   /* E4M3 or int8: our codes and scales */
    uform_scratch_t *scratch;
    float *c;
} uform_job_t;

static void uform_call_(uform_job_t const *job) {
    size_t rows = job->rows, width = job->width, depth = job->depth;
#if defined(UFORM_HAVE_NUMKONG)
    if (job->backend) {
        if (job->product_alone)
            uform_numkong_product(job->backend, job->numkong_weights, job->numkong_scratch.codes, rows, width, depth,
                                  job->c, width);
        else
            uform_numkong_linear(job->backend, job->numkong_weights, job->numkong_scales, job->a, depth, rows, width,
                                 depth, job->c, width, &job->numkong_scratch);
        return;
    }
#endif
    if (job->int8) uform_cpu_linear_int8(job->kernels, job->matrix, job->a, depth, rows, job->c, width, job->scratch);
    else if (job->e4m3) uform_cpu_linear_e4m3(job->kernels, job->matrix, job->a, depth, rows, job->c, width, job->scratch);
    else if (job->kernels) job->kernels->gemm(job->a16, depth, job->packed, job->c, width, rows, width, depth);
    else uform_gemm_f32_nt(job->a, depth, job->b, depth, job->c, width, rows, width, depth);
}

/* GFLOP/s of the job's call, repeated for at least `seconds`. */
static double uform_rate_(uform_job_t const *job, double seconds) {
    size_t calls = 0;
    double start = uform_now_(), elapsed = 0;
    while (elapsed < seconds) {
        uform_call_(job);
        calls++;
        elapsed = uform_now_() - start;
    }
    return 2.0 * (double)(job->rows * job->width * job->depth) * (double)calls / elapsed / 1e9;
}

static void *uform_aligned_(size_t bytes) { return aligned_alloc(64, (bytes + 63) / 64 * 64); }

static void uform_json_(char const *product, size_t width, size_t depth, size_t rows, char const *class,
                        char const *kernels, char const *precision, double rate, double alone, size_t weight_bytes) {
    fprintf(stderr, "{\"product\": \"%s\", \"width\": %zu, \"depth\": %zu, \"rows\": %zu, \"cpu_class\": \"%s\", "
                    "\"kernels\": \"%s\", \"precision\": \"%s\", \"gflops\": %.1f",
            product, width, depth, rows, class, kernels, precision, rate);
    if (alone > 0) fprintf(stderr, ", \"gflops_product_alone\": %.1f", alone);
    if (weight_bytes) fprintf(stderr, ", \"weight_bytes\": %zu", weight_bytes);
    fprintf(stderr, "}\n");
}

/* A narrow product's inputs: A [rows, depth] and the BF16 B [width, depth] normal, room for C. */
static void uform_narrow_inputs_(size_t rows, size_t width, size_t depth, uint64_t seed, float **a, float **c, uint16_t **b16) {
    *a = malloc(rows * depth * sizeof(float)), *c = malloc(rows * width * sizeof(float));
    *b16 = malloc(width * depth * sizeof(uint16_t));
    uform_rng_t rng = {seed};
    for (size_t i = 0; i < rows * depth; ++i) (*a)[i] = (float)uform_rng_normal(&rng);
    for (size_t i = 0; i < width * depth; ++i) (*b16)[i] = uform_f32_to_bf16((float)uform_rng_normal(&rng));
}

/* The encoder's four products at width d: C [rows, width] = A [rows, depth] B^T. */
typedef struct uform_shape_t {
    char const *name;
    size_t width, depth;
} uform_shape_t;
enum { uform_shapes_k = 4 };

static void uform_shapes_(size_t d, uform_shape_t shapes[uform_shapes_k]) {
    shapes[0] = (uform_shape_t){"qkv", 3 * d, d}, shapes[1] = (uform_shape_t){"out", d, d};
    shapes[2] = (uform_shape_t){"gate_up", 8 * d, d}, shapes[3] = (uform_shape_t){"down", d, 4 * d};
}

static void uform_bench_e4m3_(uform_kernels_t const *const *tables, size_t count, char const *only, char const *class,
                              size_t const *widths, size_t widths_count, size_t rows, double seconds, double *best);
static void uform_bench_int8_(uform_kernels_t const *const *tables, size_t count, char const *class, size_t const *widths,
                              size_t widths_count, size_t rows, double seconds, double const *best_bf16,
                              double const *best_e4m3);

int main(int argc, char **argv) {
    size_t widths[uform_widths_most_k] = {512}, widths_count = 1, rows = 128;
    double seconds = 1.0;
    char const *only = NULL, *precisions = "bf16,e4m3,int8";
    static char const usage[] =
        "usage: uform_bench_gemm [--width 512,1024] [--seconds 1] [--precisions bf16,e4m3,int8] [--kernels avx2,...]\n";
    for (int i = 1; i < argc; i += 2) {
        char const *flag = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
        int known = !strcmp(flag, "--width") || !strcmp(flag, "--seconds") || !strcmp(flag, "--kernels") ||
                    !strcmp(flag, "--precisions");
        if (!known || !value) {  /* a misspelled flag must not silently run everything */
            fprintf(stderr, "uform_bench_gemm: %s %s\n%s", flag, known ? "needs a value" : "is not a flag", usage);
            return 2;
        }
        if (!strcmp(flag, "--width")) {
            widths_count = 0;
            for (char const *p = value; *p;) {
                char *end;
                unsigned long width = strtoul(p, &end, 10);
                if (end == p || width == 0 || (*end && *end != ',') || widths_count == uform_widths_most_k) {
                    fprintf(stderr, "uform_bench_gemm: --width %s: want at most %d positive widths, comma-separated\n",
                            value, (int)uform_widths_most_k);
                    return 2;
                }
                widths[widths_count++] = (size_t)width;
                p = *end ? end + 1 : end;
            }
            if (!widths_count) {
                fprintf(stderr, "uform_bench_gemm: --width is empty\n");
                return 2;
            }
        } else if (!strcmp(flag, "--seconds")) {
            char *end;
            seconds = strtod(value, &end);
            if (end == value || *end || !(seconds > 0)) {
                fprintf(stderr, "uform_bench_gemm: --seconds %s: want a positive number\n", value);
                return 2;
            }
        } else if (!strcmp(flag, "--kernels")) only = value;
        else precisions = value;
    }
    uform_kernels_t const *tables[uform_tables_most_k];
    size_t count = 0;
    for (size_t i = 0; uform_kernels_all[i] && count < uform_tables_most_k; ++i)
        if (uform_listed(only, uform_kernels_all[i]->name) && uform_kernels_runs(uform_kernels_all[i]->name))
            tables[count++] = uform_kernels_all[i];
    char class[256];
    uform_cpu_class(class, sizeof(class));
    printf("CPU class: %s; default kernels: %s; single thread, %zu-row tiles\n", class, uform_kernels()->name, rows);
    double best_bf16[uform_shapes_most_k] = {0}, best_e4m3[uform_shapes_most_k] = {0}; /* our best table's, by shape */

    if (uform_listed(precisions, "bf16")) {
        printf("\nBF16 products (inputs rounded to BF16, Float32 accumulation):\n\n| product | width x depth |");
        for (size_t t = 0; t < count; ++t) printf(" %s GFLOP/s |", tables[t]->name);
        printf(" OpenBLAS F32 GFLOP/s |\n|---|---|");
        for (size_t t = 0; t <= count; ++t) printf("---|");
        printf("\n");
        for (size_t w = 0; w < widths_count; ++w) {
            size_t d = widths[w];
            uform_shape_t shapes[uform_shapes_k];
            uform_shapes_(d, shapes);
            for (size_t s = 0; s < uform_shapes_k; ++s) {
                size_t width = shapes[s].width, depth = shapes[s].depth;
                float *a = malloc(rows * depth * sizeof(float)), *b = malloc(width * depth * sizeof(float));
                float *c = malloc(rows * width * sizeof(float));
                uint16_t *a16 = malloc(rows * depth * sizeof(uint16_t));
                uint16_t *b16 = malloc(width * depth * sizeof(uint16_t));
                uint16_t *packed = uform_aligned_(uform_packed_size(width, depth));
                uform_rng_t rng = {s + 1};
                for (size_t i = 0; i < rows * depth; ++i) a[i] = (float)uform_rng_normal(&rng);
                for (size_t i = 0; i < width * depth; ++i) b[i] = (float)uform_rng_normal(&rng);
                uform_bf16_from_f32_array(a, a16, rows * depth);
                uform_bf16_from_f32_array(b, b16, width * depth);
                uform_pack_bf16(b16, width, depth, depth, 1, packed);
                printf("| %s | %zu x %zu |", shapes[s].name, width, depth);
                for (size_t t = 0; t <= count; ++t) {
                    uform_job_t job = {.kernels = t < count ? tables[t] : NULL, .rows = rows, .width = width,
                                       .depth = depth, .a = a, .b = b, .a16 = a16, .packed = packed, .c = c};
                    double rate = uform_rate_(&job, seconds);
                    if (job.kernels && rate > best_bf16[w * uform_shapes_k + s]) best_bf16[w * uform_shapes_k + s] = rate;
                    printf(" %.1f |", rate);
                    fflush(stdout);
                    char const *name = job.kernels ? job.kernels->name : "openblas_f32";
                    uform_json_(shapes[s].name, width, depth, rows, class, name, "bf16", rate, 0, 0);
                }
                printf("\n");
                free(a), free(b), free(c), free(a16), free(b16), free(packed);
            }
        }
    }

    if (uform_listed(precisions, "e4m3")) uform_bench_e4m3_(tables, count, only, class, widths, widths_count, rows,
                                                             seconds, best_e4m3);
    if (uform_listed(precisions, "int8")) uform_bench_int8_(tables, count, class, widths, widths_count, rows, seconds,
                                                             best_bf16, best_e4m3);
    return 0;
}

/* The E4M3 table: ours with each table, then NumKong's backends; our best rate by shape into `best`. */
static void uform_bench_e4m3_(uform_kernels_t const *const *tables, size_t count, char const *only, char const *class,
                              size_t const *widths, size_t widths_count, size_t rows, double seconds, double *best) {
    /* NumKong's backends this CPU runs; plain C only where named */
#if defined(UFORM_HAVE_NUMKONG)
    uform_numkong_e4m3_t const *backends[uform_columns_most_k];
    size_t backends_count = 0;
    for (size_t i = 0; i < uform_numkong_e4m3_count_k && backends_count < uform_columns_most_k; ++i) {
        uform_numkong_e4m3_t const *backend = &uform_numkong_e4m3_all[i];
        int asked = only ? uform_listed(only, backend->name) : !strstr(backend->name, "serial");
        char const *why = uform_numkong_why_not(backend);
        if (asked && !why) backends[backends_count++] = backend;
        else if (asked && only) printf("%s: not measured: %s\n", backend->name, why);
    }
#else
    size_t const backends_count = 0;
#endif
    printf("\nE4M3 products (a scale per row of each side; input rows quantized in every call; docs/precision.md):\n\n"
           "| product | width x depth |");
    for (size_t t = 0; t < count; ++t) printf(" ours, %s GFLOP/s |", tables[t]->name);
#if defined(UFORM_HAVE_NUMKONG)
    for (size_t n = 0; n < backends_count; ++n) printf(" %s GFLOP/s |", backends[n]->name);
    if (count && backends_count) printf(" best NumKong / best ours |");
#endif
    printf("\n|---|---|");
    for (size_t t = 0; t < count + backends_count + (count && backends_count); ++t) printf("---|");
    printf("\n");
    for (size_t w = 0; w < widths_count; ++w) {
        size_t d = widths[w];
        uform_shape_t shapes[uform_shapes_k];
        uform_shapes_(d, shapes);
        for (size_t s = 0; s < uform_shapes_k; ++s) {
            size_t width = shapes[s].width, depth = shapes[s].depth;
            float *a, *c;
            uint16_t *b16;
            uform_narrow_inputs_(rows, width, depth, s + 1, &a, &c, &b16);
            uform_weight_t matrix = {.rows = width, .columns = depth,
                                     .e4m3 = uform_aligned_(uform_packed_e4m3_size(width, depth)),
                                     .scales = malloc(width * sizeof(float))};
            uform_pack_e4m3(b16, width, depth, matrix.scales, matrix.e4m3);
            uform_scratch_t scratch = {.inputs_bf16 = uform_aligned_(rows * depth * sizeof(uint16_t)),
                                       .row_scales = malloc(rows * sizeof(float)),
                                       .panels_bf16 = uform_aligned_(uform_e4m3_panels_k *
                                                                     uform_packed_size(16, depth))};
            printf("| %s | %zu x %zu |", shapes[s].name, width, depth);
            double best_ours = 0;
            for (size_t t = 0; t < count; ++t) {
                uform_job_t job = {.kernels = tables[t], .e4m3 = 1, .rows = rows, .width = width, .depth = depth,
                                   .a = a, .matrix = &matrix, .scratch = &scratch, .c = c};
                double rate = uform_rate_(&job, seconds);
                best_ours = rate > best_ours ? rate : best_ours;
                best[w * uform_shapes_k + s] = best_ours;
                printf(" %.1f |", rate);
                fflush(stdout);
                uform_json_(shapes[s].name, width, depth, rows, class, tables[t]->name, "e4m3", rate, 0,
                            uform_packed_e4m3_size(width, depth));
            }
#if defined(UFORM_HAVE_NUMKONG)
            double best_numkong = 0;
            uint8_t *codes = malloc(width * depth);
            float *scales = malloc(width * sizeof(float));
            uform_e4m3_rows(b16, width, depth, scales, codes);  /* the same codes and scales as ours, row-major */
            for (size_t n = 0; n < backends_count; ++n) {
                size_t weight_bytes = uform_numkong_weights_size(backends[n], width, depth);
                void *weights = uform_aligned_(weight_bytes);
                uform_numkong_prepare(backends[n], codes, width, depth, weights);
                uform_job_t job = {.backend = backends[n], .numkong_weights = weights, .numkong_scales = scales,
                                   .numkong_scratch = {malloc(rows * depth), malloc(rows * sizeof(float)),
                                                       malloc(depth * sizeof(float))},
                                   .e4m3 = 1, .rows = rows, .width = width, .depth = depth, .a = a, .c = c};
                double rate = uform_rate_(&job, seconds);
                job.product_alone = 1;  /* its codes from the call above */
                double alone = uform_rate_(&job, seconds);
                best_numkong = rate > best_numkong ? rate : best_numkong;
                printf(" %.1f |", rate);
                fflush(stdout);
                uform_json_(shapes[s].name, width, depth, rows, class, backends[n]->name, "e4m3", rate, alone,
                            weight_bytes);
                free(weights), free(job.numkong_scratch.codes), free(job.numkong_scratch.row_scales);
                free(job.numkong_scratch.scaled);
            }
            if (count && backends_count) printf(" %.2fx |", best_numkong / best_ours);
            free(codes), free(scales);
#endif
            printf("\n");
            free(a), free(c), free(b16), free(matrix.e4m3), free(matrix.scales);
            free(scratch.inputs_bf16), free(scratch.row_scales), free(scratch.panels_bf16);
        }
    }
#if !defined(UFORM_HAVE_NUMKONG)
    printf("\nNo NumKong column: its headers were not found at build time (scripts/setup.sh fetches them).\n");
#endif
}

/* The int8 table: ours with each table, and our best int8 rate over the best BF16 and E4M3 ones of
 * this run (where those ran). */
static void uform_bench_int8_(uform_kernels_t const *const *tables, size_t count, char const *class, size_t const *widths,
                              size_t widths_count, size_t rows, double seconds, double const *best_bf16,
                              double const *best_e4m3) {
    printf("\nint8 products (a scale per row of each side; input rows quantized in every call; exact int32 sums;\n"
           "docs/precision.md):\n\n| product | width x depth |");
    for (size_t t = 0; t < count; ++t) printf(" ours, %s GFLOP/s |", tables[t]->name);
    printf(" best int8 / best bf16 | best int8 / best e4m3 |\n|---|---|");
    for (size_t t = 0; t < count + 2; ++t) printf("---|");
    printf("\n");
    for (size_t w = 0; w < widths_count; ++w) {
        uform_shape_t shapes[uform_shapes_k];
        uform_shapes_(widths[w], shapes);
        for (size_t s = 0; s < uform_shapes_k; ++s) {
            size_t width = shapes[s].width, depth = shapes[s].depth;
            float *a, *c;
            uint16_t *b16;
            uform_narrow_inputs_(rows, width, depth, s + 1, &a, &c, &b16);
            uform_weight_t matrix = {.rows = width, .columns = depth,
                                     .int8 = uform_aligned_(uform_packed_int8_size(width, depth)),
                                     .corrections = malloc(width * sizeof(int32_t)), .scales = malloc(width * sizeof(float))};
            uform_pack_int8(b16, width, depth, matrix.scales, matrix.corrections, matrix.int8);
            uform_scratch_t scratch = {.inputs_int8 = uform_aligned_(rows * uform_int8_stride(depth)),
                                       .row_scales = malloc(rows * sizeof(float))};
            printf("| %s | %zu x %zu |", shapes[s].name, width, depth);
            double best = 0;
            for (size_t t = 0; t < count; ++t) {
                uform_job_t job = {.kernels = tables[t], .int8 = 1, .rows = rows, .width = width, .depth = depth,
                                   .a = a, .matrix = &matrix, .scratch = &scratch, .c = c};
                double rate = uform_rate_(&job, seconds);
                best = rate > best ? rate : best;
                printf(" %.1f |", rate);
                fflush(stdout);
                uform_json_(shapes[s].name, width, depth, rows, class, tables[t]->name, "int8", rate, 0,
                            uform_packed_int8_size(width, depth) + width * (sizeof(int32_t) + sizeof(float)));
            }
            double bf16 = best_bf16[w * uform_shapes_k + s], e4m3 = best_e4m3[w * uform_shapes_k + s];
            if (bf16 > 0) printf(" %.2fx |", best / bf16);
            else printf(" - |");
            if (e4m3 > 0) printf(" %.2fx |\n", best / e4m3);
            else printf(" - |\n");
            free(a), free(c), free(b16), free(matrix.int8), free(matrix.corrections), free(matrix.scales);
            free(scratch.inputs_int8), free(scratch.row_scales);
        }
    }
}
