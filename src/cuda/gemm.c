/*  gemm.c: row-major BF16 products C = A B^T through cuBLASLt, Float32 accumulation. Row-major
 *  C [m, n] is column-major C^T [n, m] = B A^T, so cuBLASLt sees A := B (transposed) and B := A. */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/check.h"
#include "cuda/cuda.h"
#include "cuda/plant.h"

enum { uform_plans_k = 64, uform_candidates_k = 8 };

/* A product's shape and the algorithm chosen for it, kept so that later calls (and graph capture)
 * skip the heuristic query and, when tuning, the timing. */
typedef struct uform_gemm_plan_t {
    size_t key[9];
    cublasLtMatmulAlgo_t algo;
} uform_gemm_plan_t;

struct uform_cuda_gemm_t {
    cublasLtHandle_t handle;
    void *workspace;
    size_t workspace_bytes;
    int tune;
    size_t plans_count;
    uform_gemm_plan_t plans[uform_plans_k];
};

/* A failed cuBLASLt call, noted with the product's shape. */
static uform_status_t uform_gemm_failed_(size_t m, size_t n, size_t k, char const *call, cublasStatus_t code) {
    return uform_cuda_note(code == CUBLAS_STATUS_ALLOC_FAILED ? uform_out_of_memory_k : uform_device_k,
                           "gemm %zux%zux%zu: %s failed: %s", m, n, k, call, cublasLtGetStatusName(code));
}

void uform_cuda_gemm_tune(uform_cuda_gemm_t *gemm, int enabled) { gemm->tune = enabled; }

uform_status_t uform_cuda_gemm_create(uform_cuda_gemm_t **result, size_t workspace_bytes) {
    uform_cuda_gemm_t *gemm = calloc(1, sizeof(*gemm));
    if (!gemm) return uform_cuda_note(uform_out_of_memory_k, "gemm_create: out of host memory");
    cublasStatus_t code = cublasLtCreate(&gemm->handle);
    if (code != CUBLAS_STATUS_SUCCESS) {
        free(gemm);
        return uform_cuda_note(uform_device_k, "gemm_create: cublasLtCreate failed: %s", cublasLtGetStatusName(code));
    }
    gemm->workspace_bytes = workspace_bytes;
    /* Zeroed once, so that nothing cuBLASLt reads there depends on what the memory held before. */
    uform_status_t status = uform_ok_k;
    if (workspace_bytes) {
        status = uform_cuda_check(cudaMalloc(&gemm->workspace, workspace_bytes), "gemm_create", "cudaMalloc");
        if (status == uform_ok_k)
            status = uform_cuda_check(cudaMemset(gemm->workspace, 0, workspace_bytes), "gemm_create", "cudaMemset");
    }
    if (status != uform_ok_k) {
        cudaFree(gemm->workspace);
        cublasLtDestroy(gemm->handle);
        free(gemm);
        return status;
    }
    *result = gemm;
    return uform_ok_k;
}

void uform_cuda_gemm_destroy(uform_cuda_gemm_t *gemm) {
    if (!gemm) return;
    cudaFree(gemm->workspace);
    cublasLtDestroy(gemm->handle);
    free(gemm);
}

uform_status_t uform_cuda_gemm(uform_cuda_gemm_t *gemm, int transpose_a, int transpose_b, size_t m, size_t n, size_t k,
                               uint16_t const *a, size_t lda, uint16_t const *b, size_t ldb, void const *c, void *d,
                               size_t ldd, int d_is_f32, void *stream) {
    cublasLtMatmulDesc_t operation = NULL;
    cublasLtMatrixLayout_t layout_b = NULL, layout_a = NULL, layout_d = NULL;
    cublasLtMatmulPreference_t preference = NULL;
    /* cuBLASLt's first operand is our B, its second our A (see the top of this file). */
    cublasOperation_t op_b = transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N, op_a = transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cudaDataType_t d_type = d_is_f32 ? CUDA_R_32F : CUDA_R_16BF;
    /* planted: D accumulated, not overwritten */
    float alpha = 1.0f, beta = c || uform_cuda_planted("gemm") == 1 ? 1.0f : 0.0f;
    size_t adds = c ? 2 : 0;
    if (!c) c = d;
    cublasStatus_t code = cublasLtMatmulDescCreate(&operation, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (!code) code = cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_TRANSA, &op_b, sizeof(op_b));
    if (!code) code = cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_TRANSB, &op_a, sizeof(op_a));
    if (!code) code = cublasLtMatrixLayoutCreate(&layout_b, CUDA_R_16BF, transpose_b ? k : n, transpose_b ? n : k, ldb);
    if (!code) code = cublasLtMatrixLayoutCreate(&layout_a, CUDA_R_16BF, transpose_a ? m : k, transpose_a ? k : m, lda);
    if (!code) code = cublasLtMatrixLayoutCreate(&layout_d, d_type, n, m, ldd);
    if (!code) code = cublasLtMatmulPreferenceCreate(&preference);
    if (!code)
        code = cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &gemm->workspace_bytes, sizeof(gemm->workspace_bytes));
    uform_status_t status = code ? uform_gemm_failed_(m, n, k, "describing the product", code) : uform_ok_k;
    size_t key[9] = {(size_t)transpose_a, (size_t)transpose_b, m, n, k, lda, ldb, ldd, (size_t)d_is_f32 | adds};
    uform_gemm_plan_t *plan = NULL;
    for (size_t i = 0; i < gemm->plans_count && !plan; ++i)
        if (!memcmp(gemm->plans[i].key, key, sizeof(key))) plan = &gemm->plans[i];
    cublasLtMatmulAlgo_t algo;
    if (plan) algo = plan->algo;
    else if (status == uform_ok_k) {
        cublasLtMatmulHeuristicResult_t candidates[uform_candidates_k];
        int found = 0;
        enum cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
        cudaStreamIsCapturing((cudaStream_t)stream, &capturing);
        int tune = gemm->tune && capturing == cudaStreamCaptureStatusNone;
        code = cublasLtMatmulAlgoGetHeuristic(gemm->handle, operation, layout_b, layout_a, layout_d, layout_d, preference,
                                              tune ? uform_candidates_k : 1, candidates, &found);
        if (code) status = uform_gemm_failed_(m, n, k, "cublasLtMatmulAlgoGetHeuristic", code);
        else if (!found)
            status = uform_cuda_note(uform_device_k, "gemm %zux%zux%zu: cublasLtMatmulAlgoGetHeuristic found no algorithm", m,
                                     n, k);
        int best = 0;
        if (status == uform_ok_k && tune && found > 1) { /* time each candidate three times on this call's own operands */
            cudaEvent_t start, stop;
            float fastest = INFINITY;
            cudaEventCreate(&start), cudaEventCreate(&stop);
            cudaGetLastError(); /* an earlier call's error must not count against the first candidate */
            for (int i = 0; i < found; ++i) {
                float ms = 0;
                int failed = 0;
                cudaEventRecord(start, (cudaStream_t)stream);
                for (int r = 0; r < 3; ++r)
                    failed |= cublasLtMatmul(gemm->handle, operation, &alpha, b, layout_b, a, layout_a, &beta, c, layout_d,
                                             d, layout_d, &candidates[i].algo, gemm->workspace, gemm->workspace_bytes,
                                             (cudaStream_t)stream) != CUBLAS_STATUS_SUCCESS;
                cudaEventRecord(stop, (cudaStream_t)stream);
                /* A candidate whose kernels failed to launch would time as fast as nothing: skip it, clear its error. */
                failed |= cudaEventSynchronize(stop) != cudaSuccess || cudaEventElapsedTime(&ms, start, stop) != cudaSuccess;
                failed |= cudaGetLastError() != cudaSuccess;
                if (!failed && ms < fastest) fastest = ms, best = i;
            }
            cudaEventDestroy(start), cudaEventDestroy(stop);
        }
        if (status == uform_ok_k) {
            algo = candidates[best].algo;
            if (gemm->plans_count < uform_plans_k) {
                plan = &gemm->plans[gemm->plans_count++];
                memcpy(plan->key, key, sizeof(key));
                plan->algo = algo;
            }
        }
    }
    if (status == uform_ok_k) {
        code = cublasLtMatmul(gemm->handle, operation, &alpha, b, layout_b, a, layout_a, &beta, c, layout_d, d, layout_d,
                              &algo, gemm->workspace, gemm->workspace_bytes, (cudaStream_t)stream);
        if (code) status = uform_gemm_failed_(m, n, k, "cublasLtMatmul", code);
    }
    if (preference) cublasLtMatmulPreferenceDestroy(preference);
    if (layout_d) cublasLtMatrixLayoutDestroy(layout_d);
    if (layout_a) cublasLtMatrixLayoutDestroy(layout_a);
    if (layout_b) cublasLtMatrixLayoutDestroy(layout_b);
    if (operation) cublasLtMatmulDescDestroy(operation);
    return status;
}

size_t uform_cuda_gemm_describe(uform_cuda_gemm_t const *gemm, char *text, size_t size) {
    size_t used = 0, split = 0;
    if (size) text[0] = 0;
    for (size_t i = 0; i < gemm->plans_count; ++i) {
        uform_gemm_plan_t const *plan = &gemm->plans[i];
        int32_t id = 0;
        uint32_t tile = 0, splits = 1, reduction = 0;
        size_t written;
        cublasLtMatmulAlgoConfigGetAttribute(&plan->algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof(id), &written);
        cublasLtMatmulAlgoConfigGetAttribute(&plan->algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile), &written);
        cublasLtMatmulAlgoConfigGetAttribute(&plan->algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits, sizeof(splits), &written);
        cublasLtMatmulAlgoConfigGetAttribute(&plan->algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &reduction,
                                             sizeof(reduction), &written);
        split += splits > 1;
        int n = snprintf(text + used, used < size ? size - used : 0, "%s%zu%zu %zux%zux%zu%s: algo %d tile %u split %u reduction %u",
                         i ? "; " : "", plan->key[0], plan->key[1], plan->key[2], plan->key[3], plan->key[4],
                         plan->key[8] & 1 ? " f32" : "", (int)id, tile, splits, reduction);
        if (n > 0) used += (size_t)n;
    }
    return split;
}

uform_status_t uform_cuda_gemm_nt(uform_cuda_gemm_t *gemm, uint16_t const *a, uint16_t const *b, void *c, int c_is_f32,
                                  size_t m, size_t n, size_t k, void *stream) {
    return uform_cuda_gemm(gemm, 0, 1, m, n, k, a, k, b, k, NULL, c, n, c_is_f32, stream);
}
