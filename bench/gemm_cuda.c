/*  gemm_cuda.c: TFLOP/s of the encoder's four block products on the GPU under each E4M3 scaling scheme
 *  cuBLASLt offers on sm_90, beside BF16, at one pass's rows: which scheme's kernels are fastest decides
 *  how the E4M3 precision scales its operands (docs/precision.md). Each product is laid out as
 *  uform_cuda_gemm_e4m3 lays it out (TN, the weights cuBLASLt's A), with the encoder's output types: BF16
 *  for qkv and gate_up, added into the residual stream for out and down (BF16 as inference keeps it, or
 *  Float32 with --residual f32, as the training step does). Each scheme is timed
 *  over every candidate the heuristic offers (up to 8), the best and the heuristic's first reported.
 *  Operands hold valid codes; the values do not matter to the time. Schemes:
 *    bf16         BF16 operands (the BF16 precision)
 *    outer        E4M3, a Float32 scale per weight row and per input row (the E4M3 precision today)
 *    tensor       E4M3, one Float32 scale per operand
 *    tensor+alpha E4M3, one scale per operand and a per-output-column alpha vector (the weight rows' scales)
 *    block        E4M3, 128x128 blocks of the weights and 1x128 blocks of the inputs (Float32 scales)
 *    tensor+codes E4M3 as `tensor`, the output E4M3 codes at one scale (UFORM_CUDA_GATE_UP=e4m3's gate_up;
 *                 qkv and gate_up only: out and down add into the residual stream)
 *
 *      uform_bench_gemm_cuda [--tier tiny|small] [--rows 262144] [--schemes bf16,outer,tensor] [--residual bf16|f32]
 *                            [--json FILE]
 */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "listed.h"

enum { candidates_most_k = 8, repeats_k = 3 };

static int wide_residual_; /* --residual f32: the residual stream in Float32 */

typedef struct scheme_t {
    char const *name;
    int e4m3, scale_a, scale_b, alpha_vector; /* scale modes as cublasLtMatmulMatrixScale_t, -1 for none */
    int codes_out;                            /* D as E4M3 codes (a D scale, C BF16 and unread) */
} scheme_t;

static scheme_t const schemes_k[] = {
    {"bf16", 0, -1, -1, 0, 0},
    {"outer", 1, CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, 0, 0},
    {"tensor", 1, CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F, CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F, 0, 0},
    {"tensor+alpha", 1, CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F, CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F, 1, 0},
    {"block", 1, CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, 0, 0},
    {"tensor+codes", 1, CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F, CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F, 0, 1},
};
enum { schemes_count_k = sizeof(schemes_k) / sizeof(schemes_k[0]) };

typedef struct product_t {
    char const *name;
    size_t width_per_d, depth_per_d; /* n and k in units of d */
    int residual;                    /* output added into the residual stream (out, down) */
} product_t;

static product_t const products_k[] = {{"qkv", 3, 1, 0}, {"out", 1, 1, 1}, {"gate_up", 8, 1, 0}, {"down", 1, 4, 1}};

#define CUDA_OR_DIE(call)                                                                                      \
    do {                                                                                                       \
        cudaError_t error_ = (call);                                                                           \
        if (error_ != cudaSuccess) {                                                                           \
            fprintf(stderr, "uform_bench_gemm_cuda: %s: %s\n", #call, cudaGetErrorString(error_));              \
            exit(1);                                                                                           \
        }                                                                                                      \
    } while (0)

/* Fills `bytes` of device memory from a repeated host pattern of valid E4M3 or BF16 values. */
static void fill_(void *device, size_t bytes, int e4m3) {
    size_t chunk = (size_t)16 << 20;
    uint8_t *host = malloc(chunk);
    if (!host) fprintf(stderr, "uform_bench_gemm_cuda: out of host memory\n"), exit(1);
    uint32_t state = 12345u;
    for (size_t i = 0; i < chunk; i += 2) {
        state = state * 1664525u + 1013904223u;
        uint16_t value = e4m3 ? (uint16_t)((state >> 8) & 0x3737u)            /* positive E4M3, no NaN code */
                              : (uint16_t)(0x3c00u | ((state >> 9) & 0x3ffu)); /* small positive BF16 */
        memcpy(host + i, &value, 2);
    }
    for (size_t done = 0; done < bytes; done += chunk)
        CUDA_OR_DIE(cudaMemcpy((uint8_t *)device + done, host, bytes - done < chunk ? bytes - done : chunk, cudaMemcpyHostToDevice));
    free(host);
}

typedef struct timing_t {
    int found, status; /* candidates the heuristic gave; nonzero where the scheme has none here */
    double best_ms, first_ms;
} timing_t;

static timing_t time_product_(cublasLtHandle_t handle, scheme_t const *scheme, product_t const *product, size_t d,
                              size_t rows, void *workspace, size_t workspace_bytes, void *weights, void *inputs,
                              void *output, float *scales, cudaStream_t stream) {
    timing_t timing = {0, 0, 0, 0};
    if (scheme->codes_out && product->residual) return (timing_t){0, -3, 0, 0}; /* not a scheme for the residual's adds */
    size_t n = product->width_per_d * d, k = product->depth_per_d * d, m = rows;
    cudaDataType_t operand = scheme->e4m3 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
    cudaDataType_t out = scheme->codes_out ? CUDA_R_8F_E4M3 : product->residual && wide_residual_ ? CUDA_R_32F : CUDA_R_16BF;
    cublasOperation_t transposed = CUBLAS_OP_T, plain = CUBLAS_OP_N;
    cublasLtMatmulDesc_t operation = NULL;
    cublasLtMatrixLayout_t layout_w = NULL, layout_a = NULL, layout_c = NULL, layout_d = NULL;
    cublasStatus_t code = cublasLtMatmulDescCreate(&operation, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (!code) code = cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_TRANSA, &transposed, sizeof(transposed));
    if (!code) code = cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_TRANSB, &plain, sizeof(plain));
    if (scheme->e4m3) {
        int8_t fast = 1;
        cublasLtMatmulMatrixScale_t mode_w = (cublasLtMatmulMatrixScale_t)scheme->scale_a,
                                    mode_a = (cublasLtMatmulMatrixScale_t)scheme->scale_b;
        float const *scale_w = scales, *scale_a = scales; /* every scale 1: large enough for any scheme's count */
        if (!code) code = cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast));
        if (!code) code = cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode_w, sizeof(mode_w));
        if (!code) code = cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode_a, sizeof(mode_a));
        if (!code) code = cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale_w, sizeof(scale_w));
        if (!code) code = cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scale_a, sizeof(scale_a));
        if (scheme->codes_out && !code) /* D's scale 1: the values do not matter to the time */
            code = cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, &scale_w, sizeof(scale_w));
        if (scheme->alpha_vector) {
            cublasLtPointerMode_t mode = CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST;
            if (!code) code = cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_POINTER_MODE, &mode, sizeof(mode));
        }
    }
    if (!code) code = cublasLtMatrixLayoutCreate(&layout_w, operand, k, n, k);
    if (!code) code = cublasLtMatrixLayoutCreate(&layout_a, operand, k, m, k);
    if (!code) code = cublasLtMatrixLayoutCreate(&layout_d, out, n, m, n);
    if (!code) code = cublasLtMatrixLayoutCreate(&layout_c, scheme->codes_out ? CUDA_R_16BF : out, n, m, n);
    void *c = scheme->codes_out ? NULL : output; /* C may alias D only with D's layout */
    cublasLtMatmulPreference_t preference = NULL;
    if (!code) code = cublasLtMatmulPreferenceCreate(&preference);
    if (!code)
        code = cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                                                    sizeof(workspace_bytes));
    cublasLtMatmulHeuristicResult_t candidates[candidates_most_k];
    if (!code)
        code = cublasLtMatmulAlgoGetHeuristic(handle, operation, layout_w, layout_a, layout_c, layout_d, preference,
                                              candidates_most_k, candidates, &timing.found);
    if (code || !timing.found) {
        timing.status = code ? (int)code : -1;
        timing.found = 0;
    }
    float one = 1.0f, beta = product->residual ? 1.0f : 0.0f;
    void const *alpha = scheme->alpha_vector ? (void const *)scales : (void const *)&one;
    cudaEvent_t start, stop;
    CUDA_OR_DIE(cudaEventCreate(&start));
    CUDA_OR_DIE(cudaEventCreate(&stop));
    timing.best_ms = 1e30;
    for (int i = 0; i < timing.found; ++i) {
        int failed = 0;
        float ms = 0;
        failed |= cublasLtMatmul(handle, operation, alpha, weights, layout_w, inputs, layout_a, &beta, c, layout_c, output,
                                 layout_d, &candidates[i].algo, workspace, workspace_bytes, stream) != CUBLAS_STATUS_SUCCESS;
        cudaEventRecord(start, stream);
        for (int r = 0; r < repeats_k; ++r)
            failed |= cublasLtMatmul(handle, operation, alpha, weights, layout_w, inputs, layout_a, &beta, c, layout_c,
                                     output, layout_d, &candidates[i].algo, workspace, workspace_bytes,
                                     stream) != CUBLAS_STATUS_SUCCESS;
        cudaEventRecord(stop, stream);
        failed |= cudaEventSynchronize(stop) != cudaSuccess || cudaEventElapsedTime(&ms, start, stop) != cudaSuccess;
        failed |= cudaGetLastError() != cudaSuccess;
        if (failed) continue;
        double each = ms / repeats_k;
        if (i == 0) timing.first_ms = each;
        if (each < timing.best_ms) timing.best_ms = each;
    }
    if (timing.found && timing.best_ms >= 1e29) timing.status = -2, timing.found = 0;
    cudaEventDestroy(start), cudaEventDestroy(stop);
    if (preference) cublasLtMatmulPreferenceDestroy(preference);
    if (layout_d) cublasLtMatrixLayoutDestroy(layout_d);
    if (layout_c) cublasLtMatrixLayoutDestroy(layout_c);
    if (layout_a) cublasLtMatrixLayoutDestroy(layout_a);
    if (layout_w) cublasLtMatrixLayoutDestroy(layout_w);
    if (operation) cublasLtMatmulDescDestroy(operation);
    return timing;
}

int main(int argc, char **argv) {
    char const *tier = "small", *only = NULL, *json_path = NULL;
    size_t rows = 262144;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--tier") && i + 1 < argc) tier = argv[++i];
        else if (!strcmp(argv[i], "--rows") && i + 1 < argc) rows = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--schemes") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
        else if (!strcmp(argv[i], "--residual") && i + 1 < argc && (!strcmp(argv[i + 1], "bf16") || !strcmp(argv[i + 1], "f32")))
            wide_residual_ = !strcmp(argv[++i], "f32");
        else {
            fprintf(stderr, "usage: uform_bench_gemm_cuda [--tier tiny|small] [--rows 262144] "
                            "[--schemes bf16,outer,tensor,tensor+alpha,block] [--residual bf16|f32] [--json FILE]\n");
            return 2;
        }
    }
    size_t d = !strcmp(tier, "tiny") ? 512 : !strcmp(tier, "small") ? 1024 : 0;
    if (!d || rows < 128 || rows % 128) {
        fprintf(stderr, "uform_bench_gemm_cuda: --tier is tiny or small, --rows a multiple of 128 (got %s, %zu)\n", tier, rows);
        return 2;
    }
    int device_count = 0;
    if (cudaGetDeviceCount(&device_count) != cudaSuccess || !device_count) {
        fprintf(stderr, "uform_bench_gemm_cuda: no CUDA device\n");
        return 77;
    }
    struct cudaDeviceProp properties;
    CUDA_OR_DIE(cudaGetDeviceProperties(&properties, 0));
    size_t depth_most = 4 * d, width_most = 8 * d, workspace_bytes = (size_t)32 << 20;
    void *weights, *inputs, *output, *workspace;
    float *scales;
    size_t scale_count = rows * (depth_most / 128 + 1) + width_most; /* the largest scheme's scale count */
    CUDA_OR_DIE(cudaMalloc(&weights, width_most * d * 2));
    CUDA_OR_DIE(cudaMalloc(&inputs, rows * depth_most * 2));
    CUDA_OR_DIE(cudaMalloc(&output, rows * width_most * 2 > rows * d * 4 ? rows * width_most * 2 : rows * d * 4));
    CUDA_OR_DIE(cudaMalloc(&workspace, workspace_bytes));
    CUDA_OR_DIE(cudaMalloc((void **)&scales, scale_count * sizeof(float)));
    CUDA_OR_DIE(cudaMemset(workspace, 0, workspace_bytes));
    float *ones = malloc(scale_count * sizeof(float));
    if (!ones) return fprintf(stderr, "uform_bench_gemm_cuda: out of host memory\n"), 1;
    for (size_t i = 0; i < scale_count; ++i) ones[i] = 1.0f;
    CUDA_OR_DIE(cudaMemcpy(scales, ones, scale_count * sizeof(float), cudaMemcpyHostToDevice));
    free(ones);
    cublasLtHandle_t handle;
    if (cublasLtCreate(&handle) != CUBLAS_STATUS_SUCCESS) return fprintf(stderr, "uform_bench_gemm_cuda: cublasLtCreate failed\n"), 1;
    cudaStream_t stream;
    CUDA_OR_DIE(cudaStreamCreate(&stream));
    FILE *json = json_path ? fopen(json_path, "w") : NULL;
    if (json_path && !json) return fprintf(stderr, "uform_bench_gemm_cuda: cannot write %s\n", json_path), 1;
    int cublas_version = (int)cublasLtGetVersion();
    printf("%s, cuBLASLt %d, tier %s (d %zu), %zu rows a product, residual stream %s, TFLOP/s of the best of up to %d "
           "candidates (the heuristic's first in parentheses)\n\n", properties.name, cublas_version, tier, d, rows,
           wide_residual_ ? "Float32" : "BF16", candidates_most_k);
    printf("| product | n x k |");
    for (size_t s = 0; s < schemes_count_k; ++s)
        if (uform_listed(only, schemes_k[s].name)) printf(" %s |", schemes_k[s].name);
    printf("\n|---|---|");
    for (size_t s = 0; s < schemes_count_k; ++s)
        if (uform_listed(only, schemes_k[s].name)) printf("---|");
    printf("\n");
    double total_ms[schemes_count_k] = {0};
    int complete[schemes_count_k];
    for (size_t s = 0; s < schemes_count_k; ++s) complete[s] = 1;
    for (size_t p = 0; p < sizeof(products_k) / sizeof(products_k[0]); ++p) {
        product_t const *product = &products_k[p];
        size_t n = product->width_per_d * d, k = product->depth_per_d * d;
        double flop = 2.0 * (double)rows * (double)n * (double)k;
        printf("| %s | %zu x %zu |", product->name, n, k);
        for (size_t s = 0; s < schemes_count_k; ++s) {
            scheme_t const *scheme = &schemes_k[s];
            if (!uform_listed(only, scheme->name)) continue;
            fill_(weights, n * k * (scheme->e4m3 ? 1 : 2), scheme->e4m3);
            fill_(inputs, rows * k * (scheme->e4m3 ? 1 : 2), scheme->e4m3);
            CUDA_OR_DIE(cudaMemset(output, 0, rows * n * (product->residual && wide_residual_ ? 4 : 2)));
            timing_t t = time_product_(handle, scheme, product, d, rows, workspace, workspace_bytes, weights, inputs, output,
                                       scales, stream);
            if (!t.found) {
                t.status == -3 ? printf(" - |") : printf(" none (%d) |", t.status);
                complete[s] = 0;
            } else {
                printf(" %.0f (%.0f) |", flop / t.best_ms * 1e-9, flop / t.first_ms * 1e-9);
                total_ms[s] += t.best_ms;
            }
            if (json)
                fprintf(json, "{\"tier\": \"%s\", \"rows\": %zu, \"residual\": \"%s\", \"product\": \"%s\", \"n\": %zu, \"k\": %zu, \"scheme\": \"%s\", "
                              "\"candidates\": %d, \"status\": %d, \"best_ms\": %.4f, \"first_ms\": %.4f, \"best_tflops\": %.1f}\n",
                        tier, rows, wide_residual_ ? "f32" : "bf16", product->name, n, k, scheme->name, t.found, t.status, t.found ? t.best_ms : 0,
                        t.found ? t.first_ms : 0, t.found ? flop / t.best_ms * 1e-9 : 0);
            fflush(stdout);
        }
        printf("\n");
    }
    printf("| four products, ms | |");
    for (size_t s = 0; s < schemes_count_k; ++s)
        if (uform_listed(only, schemes_k[s].name)) complete[s] ? printf(" %.3f |", total_ms[s]) : printf(" - |");
    printf("\n| against bf16 | |");
    for (size_t s = 0; s < schemes_count_k; ++s)
        if (uform_listed(only, schemes_k[s].name))
            complete[s] && complete[0] && total_ms[0] > 0 ? printf(" %.2fx |", total_ms[0] / total_ms[s]) : printf(" - |");
    printf("\n");
    if (json) fclose(json);
    cublasLtDestroy(handle);
    cudaStreamDestroy(stream);
    cudaFree(weights), cudaFree(inputs), cudaFree(output), cudaFree(workspace), cudaFree(scales);
    return 0;
}
