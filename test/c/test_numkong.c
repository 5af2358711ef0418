/*  test_numkong.c: the E4M3 products uform_bench_gemm compares, each against one float64 product of
 *  the same codes and scales: ours (uform_cpu_linear_e4m3 with every kernel table this CPU runs) and
 *  each NumKong backend this CPU runs (bench/numkong_e4m3.h), at the encoder's four product shapes for
 *  widths 512 and 1024 with 128-row tiles, and at width 64 for all (the plain-C ones, generic and
 *  serial, only there); every quantized input row bit for bit the reference's codes and scale.
 *  Controls the same check must reject: a row's scale dropped, NumKong's product short of its last
 *  depth column. Without NumKong's headers (scripts/setup.sh fetches them) it says so and exits 77,
 *  which ctest counts as skipped. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#if !defined(UFORM_HAVE_NUMKONG)

int main(void) {
    printf("numkong: NumKong's headers were not found at build time (scripts/setup.sh fetches them into "
           "third_party/numkong): skipped\n");
    return 77;
}

#else

#include "../../bench/numkong_e4m3.h"
#include "core/numeric.h"
#include "cpu/forward.h"
#include "cpu/kernels.h"
#include "e4m3_reference.h"

/* One product's inputs as the forward pass has them, and the reference's view of them. */
typedef struct case_t {
    size_t rows, width, depth;
    float *a;               /* [rows, depth] Float32 activations */
    uint8_t *codes_a;       /* [rows, depth] the reference's codes of each row */
    float *scales_a;        /* [rows] */
    uint8_t *codes_w;       /* [width, depth] row-major (uform_e4m3_rows) */
    uint8_t *packed_w;      /* the same codes in our layout (uform_pack_e4m3) */
    float *scales_w;        /* [width] */
    double *sums, *magnitudes; /* [rows, width]: sum of the codes' products and of their magnitudes, in float64 */
} case_t;

static void *aligned(size_t bytes) { return aligned_alloc(64, (bytes + 63) / 64 * 64); }

/* Activations with a scale that varies by row (and one zero row, scale 1); weights the BF16 of normals. */
static case_t case_make(size_t rows, size_t width, size_t depth, uint64_t seed) {
    case_t k = {.rows = rows, .width = width, .depth = depth};
    k.a = malloc(rows * depth * sizeof(float));
    k.codes_a = malloc(rows * depth);
    k.scales_a = malloc(rows * sizeof(float));
    k.codes_w = malloc(width * depth);
    k.packed_w = aligned(uform_packed_e4m3_size(width, depth));
    k.scales_w = malloc(width * sizeof(float));
    k.sums = malloc(rows * width * sizeof(double));
    k.magnitudes = malloc(rows * width * sizeof(double));
    uint16_t *w = malloc(width * depth * sizeof(uint16_t));
    uform_rng_t rng = {seed};
    for (size_t r = 0; r < rows; ++r)
        for (size_t j = 0; j < depth; ++j)
            k.a[r * depth + j] = r == 3 ? 0.0f : (float)ldexp(uform_rng_normal(&rng), (int)(r % 9) - 4);
    for (size_t i = 0; i < width * depth; ++i) w[i] = uform_f32_to_bf16((float)uform_rng_normal(&rng));
    uform_e4m3_rows(w, width, depth, k.scales_w, k.codes_w);
    float *unused = malloc(width * sizeof(float));
    uform_pack_e4m3(w, width, depth, unused, k.packed_w);
    free(unused), free(w);
    /* The scheme of docs/precision.md in scalar Float32, as every quantizer must reproduce it. */
    for (size_t r = 0; r < rows; ++r) {
        float largest = 0;
        for (size_t j = 0; j < depth; ++j) largest = fmaxf(largest, fabsf(k.a[r * depth + j]));
        float scale = largest > 0 ? largest / UFORM_E4M3_LARGEST : 1.0f, inverse = 1.0f / scale;
        k.scales_a[r] = scale;
        for (size_t j = 0; j < depth; ++j) k.codes_a[r * depth + j] = uform_f32_to_e4m3(k.a[r * depth + j] * inverse);
    }
    double values[256];
    for (unsigned code = 0; code < 256; ++code) values[code] = e4m3_definition(code);
    double *x = malloc(depth * sizeof(double));
    for (size_t r = 0; r < rows; ++r) {
        for (size_t j = 0; j < depth; ++j) x[j] = values[k.codes_a[r * depth + j]];
        for (size_t i = 0; i < width; ++i) {
            uint8_t const *y = k.codes_w + i * depth;
            double sum = 0, magnitude = 0;
            for (size_t j = 0; j < depth; ++j) {
                double term = x[j] * values[y[j]];
                sum += term, magnitude += fabs(term);
            }
            k.sums[r * width + i] = sum, k.magnitudes[r * width + i] = magnitude;
        }
    }
    free(x);
    return k;
}

static void case_free(case_t *k) {
    free(k->a), free(k->codes_a), free(k->scales_a), free(k->codes_w), free(k->packed_w), free(k->scales_w);
    free(k->sums), free(k->magnitudes);
}

/* The largest |C - R| / bound over C [rows, width], R = s_a s_w sum x y in float64. Each product of two
 * E4M3 values is exact in Float32 (4 + 4 significant bits, far from under- and overflow); a sum of
 * `depth` of them in any order rounds at most depth - 1 times, s_a s_w and the product by it once each,
 * each by u = 2^-24 relative: bound = (depth + 2) u s_a s_w sum |x y| (the float64 reference's own
 * rounding and the second-order terms fit in the last u). At most 1 for a correct kernel. */
static double worst_ratio(case_t const *k, float const *c) {
    double worst = 0, u = ldexp(1.0, -24);
    for (size_t r = 0; r < k->rows; ++r)
        for (size_t i = 0; i < k->width; ++i) {
            size_t index = r * k->width + i;
            double scale = (double)k->scales_a[r] * k->scales_w[i], expected = k->sums[index] * scale;
            double bound = (double)(k->depth + 2) * u * k->magnitudes[index] * scale;
            double ratio = fabs(c[index] - expected) / (bound + 1e-300);
            worst = ratio > worst ? ratio : worst;
        }
    return worst;
}

/* A control: row 0's scale taken out of C (the row is not the zero row, so its scale is not 1). */
static double worst_ratio_scale_dropped(case_t const *k, float const *c) {
    float *broken = malloc(k->rows * k->width * sizeof(float));
    memcpy(broken, c, k->rows * k->width * sizeof(float));
    for (size_t i = 0; i < k->width; ++i) broken[i] /= k->scales_a[0];
    double ratio = worst_ratio(k, broken);
    free(broken);
    return ratio;
}

static int rows_match(case_t const *k, size_t row, float scale, uint8_t const *codes) {
    if (scale != k->scales_a[row]) return 0;
    for (size_t j = 0; j < k->depth; ++j)
        if (uform_e4m3_to_f32(codes[j]) != uform_e4m3_to_f32(k->codes_a[row * k->depth + j])) return 0;
    return 1;
}

/* Ours with one table: the table's quantizer against the reference's codes, then the whole product. */
static double check_ours(uform_kernels_t const *kernels, case_t const *k, size_t *rows_wrong, double *control) {
    size_t rows = k->rows, width = k->width, depth = k->depth;
    uform_weight_t matrix = {.rows = width, .columns = depth, .e4m3 = k->packed_w, .scales = k->scales_w};
    uform_scratch_t scratch = {.inputs_bf16 = aligned(rows * depth * sizeof(uint16_t)),
                               .row_scales = malloc(rows * sizeof(float)),
                               .panels_bf16 = aligned(uform_e4m3_panels_k * uform_packed_size(16, depth))};
    uint8_t *codes = malloc(depth);
    for (size_t r = 0; r < rows; ++r) {
        float scale = kernels->quantize_e4m3(k->a + r * depth, depth, scratch.inputs_bf16);
        for (size_t j = 0; j < depth; ++j) codes[j] = uform_f32_to_e4m3(uform_bf16_to_f32(scratch.inputs_bf16[j]));
        *rows_wrong += !rows_match(k, r, scale, codes);
    }
    float *c = malloc(rows * width * sizeof(float));
    uform_cpu_linear_e4m3(kernels, &matrix, k->a, depth, rows, c, width, &scratch);
    double ratio = worst_ratio(k, c);
    *control = worst_ratio_scale_dropped(k, c);
    free(scratch.inputs_bf16), free(scratch.row_scales), free(scratch.panels_bf16), free(codes), free(c);
    return ratio;
}

/* One NumKong backend: its quantizer against the reference's codes, then the whole product; the
 * controls: row 0's scale dropped, and its product over depth - 1 (the same codes, packed short). */
static double check_numkong(uform_numkong_e4m3_t const *backend, case_t const *k, size_t *rows_wrong,
                            double *control_scale, double *control_depth) {
    size_t rows = k->rows, width = k->width, depth = k->depth;
    uform_numkong_scratch_t scratch = {malloc(rows * depth), malloc(rows * sizeof(float)),
                                       malloc(depth * sizeof(float))};
    void *weights = aligned(uform_numkong_weights_size(backend, width, depth));
    uform_numkong_prepare(backend, k->codes_w, width, depth, weights);
    float *c = malloc(rows * width * sizeof(float));
    uform_numkong_linear(backend, weights, k->scales_w, k->a, depth, rows, width, depth, c, width, &scratch);
    for (size_t r = 0; r < rows; ++r)
        *rows_wrong += !rows_match(k, r, scratch.row_scales[r], scratch.codes + r * depth);
    double ratio = worst_ratio(k, c);
    *control_scale = worst_ratio_scale_dropped(k, c);
    /* the short product: each weight row's first depth - 1 codes, the input rows read at their stride */
    uint8_t *short_codes = malloc(width * (depth - 1));
    for (size_t i = 0; i < width; ++i) memcpy(short_codes + i * (depth - 1), k->codes_w + i * depth, depth - 1);
    void *short_weights = aligned(uform_numkong_weights_size(backend, width, depth - 1));
    uform_numkong_prepare(backend, short_codes, width, depth - 1, short_weights);
    if (backend->packed)
        backend->packed((nk_e4m3_t const *)scratch.codes, short_weights, c, rows, width, depth - 1, depth,
                        width * sizeof(float));
    else
        for (size_t i = 0; i < width; ++i)
            for (size_t r = 0; r < rows; ++r)
                backend->dot((nk_e4m3_t const *)(scratch.codes + r * depth),
                             (nk_e4m3_t const *)(short_codes + i * (depth - 1)), depth - 1, c + r * width + i);
    for (size_t r = 0; r < rows; ++r)
        for (size_t i = 0; i < width; ++i) c[r * width + i] *= scratch.row_scales[r] * k->scales_w[i];
    *control_depth = worst_ratio(k, c);
    free(scratch.codes), free(scratch.row_scales), free(scratch.scaled), free(weights), free(c), free(short_codes);
    free(short_weights);
    return ratio;
}

/* Plain C: too slow for the wide shapes. */
static int slow(char const *name) { return strstr(name, "serial") || !strcmp(name, "generic"); }

int main(void) {
    static size_t const widths[] = {64, 512, 1024};
    size_t const rows = 128;
    for (size_t w = 0; w < sizeof(widths) / sizeof(widths[0]); ++w) {
        size_t d = widths[w];
        struct { char const *name; size_t width, depth; } const shapes[] = {
            {"qkv", 3 * d, d}, {"out", d, d}, {"gate_up", 8 * d, d}, {"down", d, 4 * d}};
        for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); ++s) {
            case_t k = case_make(rows, shapes[s].width, shapes[s].depth, 1000 * d + s);
            printf("%s %zu x %zu, %zu rows: worst |C - R| / bound (controls' in brackets)\n", shapes[s].name,
                   shapes[s].width, shapes[s].depth, rows);
            for (size_t t = 0; uform_kernels_all[t]; ++t) {
                uform_kernels_t const *kernels = uform_kernels_all[t];
                if (!uform_kernels_runs(kernels->name) || (slow(kernels->name) && d > 64)) continue;
                size_t wrong = 0;
                double control, ratio = check_ours(kernels, &k, &wrong, &control);
                printf("  ours %-20s %.4f [scale dropped %.3g]; input rows wrong %zu\n", kernels->name, ratio, control,
                       wrong);
                CHECK(ratio <= 1 && wrong == 0 && control > 1);
            }
            for (size_t b = 0; b < uform_numkong_e4m3_count_k; ++b) {
                uform_numkong_e4m3_t const *backend = &uform_numkong_e4m3_all[b];
                if (!uform_numkong_runs(backend) || (slow(backend->name) && d > 64)) continue;
                size_t wrong = 0;
                double control_scale, control_depth;
                double ratio = check_numkong(backend, &k, &wrong, &control_scale, &control_depth);
                printf("  %-25s %.4f [scale dropped %.3g, last depth column dropped %.3g]; input rows wrong %zu\n",
                       backend->name, ratio, control_scale, control_depth, wrong);
                CHECK(ratio <= 1 && wrong == 0 && control_scale > 1 && control_depth > 1);
            }
            case_free(&k);
        }
    }
    for (size_t b = 0; b < uform_numkong_e4m3_count_k; ++b)
        if (!uform_numkong_runs(&uform_numkong_e4m3_all[b]))
            printf("%s: skipped: %s\n", uform_numkong_e4m3_all[b].name, uform_numkong_why_not(&uform_numkong_e4m3_all[b]));
    return check_report();
}

#endif
