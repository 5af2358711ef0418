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

enum { uform_plans_k = 64, uform_candidates_k = 8, uform_candidates_most_k = 64 };

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
    int tune; /* candidates timed for a new shape: 0 takes the heuristic's first */
    size_t plans_count;
    uform_gemm_plan_t plans[uform_plans_k];
};

/* A failed cuBLASLt call, noted with the product's shape. */
static uform_status_t uform_gemm_failed_(size_t m, size_t n, size_t k, char const *call, cublasStatus_t code) {
    return uform_cuda_note(code == CUBLAS_STATUS_ALLOC_FAILED ? uform_out_of_memory_k : uform_device_k,
                           "gemm %zux%zux%zu: %s failed: %s", m, n, k, call, cublasLtGetStatusName(code));
}

void uform_cuda_gemm_tune(uform_cuda_gemm_t *gemm, int candidates) {
    gemm->tune = candidates == 1 ? uform_candidates_k : candidates > uform_candidates_most_k ? uform_candidates_most_k
                                                                                              : candidates > 0 ? candidates : 0;
}

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

static uform_gemm_plan_t const *uform_gemm_find_(uform_cuda_gemm_t const *gemm, size_t const key[9]) {
    for (size_t i = 0; i < gemm->plans_count; ++i)
        if (!memcmp(gemm->plans[i].key, key, sizeof(gemm->plans[i].key))) return &gemm->plans[i];
    return NULL;
}

/* Remembers a shape's algorithm while the table has room. */
static void uform_gemm_keep_(uform_cuda_gemm_t *gemm, size_t const key[9], cublasLtMatmulAlgo_t const *algo) {
    if (gemm->plans_count == uform_plans_k) return;
    uform_gemm_plan_t *plan = &gemm->plans[gemm->plans_count++];
    memcpy(plan->key, key, sizeof(plan->key));
    plan->algo = *algo;
}

/* One product's call, as the choice below times it and the caller runs it. */
typedef struct uform_gemm_call_t {
    cublasLtMatmulDesc_t operation;
    cublasLtMatrixLayout_t layout_first, layout_second, layout_c, layout_d; /* layout_c NULL: D's */
    void const *first, *second, *c;
    void *d;
    float alpha, beta;
} uform_gemm_call_t;

static cublasStatus_t uform_gemm_run_(uform_cuda_gemm_t *gemm, uform_gemm_call_t const *call, cublasLtMatmulAlgo_t const *algo,
                                      void *stream) {
    return cublasLtMatmul(gemm->handle, call->operation, &call->alpha, call->first, call->layout_first, call->second,
                          call->layout_second, &call->beta, call->c, call->layout_c ? call->layout_c : call->layout_d, call->d,
                          call->layout_d, algo,
                          gemm->workspace, gemm->workspace_bytes, (cudaStream_t)stream);
}

/* The algorithm for `key`: the kept plan, else the heuristic's first choice or, when tuning outside a
 * capture, the fastest of its top candidates timed three times each on the call's own operands. */
static uform_status_t uform_gemm_choose_(uform_cuda_gemm_t *gemm, size_t const key[9], uform_gemm_call_t const *call,
                                         size_t m, size_t n, size_t k, char const *what, cublasLtMatmulAlgo_t *algo,
                                         void *stream) {
    uform_gemm_plan_t const *plan = uform_gemm_find_(gemm, key);
    if (plan) return *algo = plan->algo, uform_ok_k;
    cublasLtMatmulPreference_t preference = NULL;
    cublasStatus_t code = cublasLtMatmulPreferenceCreate(&preference);
    if (!code)
        code = cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &gemm->workspace_bytes, sizeof(gemm->workspace_bytes));
    if (code) {
        if (preference) cublasLtMatmulPreferenceDestroy(preference);
        return uform_gemm_failed_(m, n, k, "describing the preference", code);
    }
    cublasLtMatmulHeuristicResult_t candidates[uform_candidates_most_k];
    int found = 0;
    enum cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    cudaStreamIsCapturing((cudaStream_t)stream, &capturing);
    /* a full table keeps nothing: timing then would repeat at every call */
    int tune = gemm->tune && capturing == cudaStreamCaptureStatusNone && gemm->plans_count < uform_plans_k;
    code = cublasLtMatmulAlgoGetHeuristic(gemm->handle, call->operation, call->layout_first, call->layout_second,
                                          call->layout_c ? call->layout_c : call->layout_d, call->layout_d, preference,
                                          tune ? gemm->tune : 1,
                                          candidates, &found);
    cublasLtMatmulPreferenceDestroy(preference);
    if (code) return uform_gemm_failed_(m, n, k, "cublasLtMatmulAlgoGetHeuristic", code);
    if (!found) return uform_cuda_note(uform_device_k, "gemm %zux%zux%zu: cuBLASLt has no algorithm for %s here", m, n, k, what);
    int best = 0;
    if (tune && found > 1) {
        cudaEvent_t start, stop;
        float fastest = INFINITY;
        cudaEventCreate(&start), cudaEventCreate(&stop);
        cudaGetLastError(); /* an earlier call's error must not count against the first candidate */
        for (int i = 0; i < found; ++i) {
            float ms = 0;
            int failed = 0;
            cudaEventRecord(start, (cudaStream_t)stream);
            for (int r = 0; r < 3; ++r) failed |= uform_gemm_run_(gemm, call, &candidates[i].algo, stream) != CUBLAS_STATUS_SUCCESS;
            cudaEventRecord(stop, (cudaStream_t)stream);
            /* A candidate whose kernels failed to launch would time as fast as nothing: skip it, clear its error. */
            failed |= cudaEventSynchronize(stop) != cudaSuccess || cudaEventElapsedTime(&ms, start, stop) != cudaSuccess;
            failed |= cudaGetLastError() != cudaSuccess;
            if (!failed && ms < fastest) fastest = ms, best = i;
        }
        cudaEventDestroy(start), cudaEventDestroy(stop);
    }
    *algo = candidates[best].algo;
    uform_gemm_keep_(gemm, key, algo);
    return uform_ok_k;
}

static void uform_gemm_release_(uform_gemm_call_t const *call) {
    if (call->layout_d) cublasLtMatrixLayoutDestroy(call->layout_d);
    if (call->layout_c) cublasLtMatrixLayoutDestroy(call->layout_c);
    if (call->layout_second) cublasLtMatrixLayoutDestroy(call->layout_second);
    if (call->layout_first) cublasLtMatrixLayoutDestroy(call->layout_first);
    if (call->operation) cublasLtMatmulDescDestroy(call->operation);
}

uform_status_t uform_cuda_gemm(uform_cuda_gemm_t *gemm, int transpose_a, int transpose_b, size_t m, size_t n, size_t k,
                               uint16_t const *a, size_t lda, uint16_t const *b, size_t ldb, void const *c, void *d,
                               size_t ldd, int d_is_f32, void *stream) {
    /* cuBLASLt's first operand is our B, its second our A (see the top of this file). */
    cublasOperation_t op_b = transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N, op_a = transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cudaDataType_t d_type = d_is_f32 ? CUDA_R_32F : CUDA_R_16BF;
    /* planted: D accumulated, not overwritten */
    uform_gemm_call_t call = {.first = b, .second = a, .c = c ? c : d, .d = d, .alpha = 1.0f,
                              .beta = c || uform_cuda_planted("gemm") == 1 ? 1.0f : 0.0f};
    size_t adds = c ? 2 : 0;
    cublasStatus_t code = cublasLtMatmulDescCreate(&call.operation, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (!code) code = cublasLtMatmulDescSetAttribute(call.operation, CUBLASLT_MATMUL_DESC_TRANSA, &op_b, sizeof(op_b));
    if (!code) code = cublasLtMatmulDescSetAttribute(call.operation, CUBLASLT_MATMUL_DESC_TRANSB, &op_a, sizeof(op_a));
    if (!code) code = cublasLtMatrixLayoutCreate(&call.layout_first, CUDA_R_16BF, transpose_b ? k : n, transpose_b ? n : k, ldb);
    if (!code) code = cublasLtMatrixLayoutCreate(&call.layout_second, CUDA_R_16BF, transpose_a ? m : k, transpose_a ? k : m, lda);
    if (!code) code = cublasLtMatrixLayoutCreate(&call.layout_d, d_type, n, m, ldd);
    uform_status_t status = code ? uform_gemm_failed_(m, n, k, "describing the product", code) : uform_ok_k;
    size_t key[9] = {(size_t)transpose_a, (size_t)transpose_b, m, n, k, lda, ldb, ldd, (size_t)d_is_f32 | adds};
    cublasLtMatmulAlgo_t algo;
    if (status == uform_ok_k) status = uform_gemm_choose_(gemm, key, &call, m, n, k, "BF16", &algo, stream);
    if (status == uform_ok_k) {
        code = uform_gemm_run_(gemm, &call, &algo, stream);
        if (code) status = uform_gemm_failed_(m, n, k, "cublasLtMatmul", code);
    }
    uform_gemm_release_(&call);
    return status;
}

/* Row-major D = A W^T is column-major D^T = W A^T: cuBLASLt's A is W (transposed), its B our A, so its
 * outer-vector scales are W's per row (its M) and A's per row (its N). FP8 on sm_90 wants that form,
 * TN, with K a multiple of 16. D is Float32, BF16, or E4M3 codes at `scale_d` (its reciprocal on the
 * device: cuBLASLt multiplies by it), C then BF16 and unread. */
static uform_status_t uform_gemm_e4m3_(uform_cuda_gemm_t *gemm, size_t m, size_t n, size_t k, uint8_t const *a,
                                       float const *scales_a, uint8_t const *w, float const *scales_w, void const *c,
                                       void *d, cudaDataType_t d_type, float const *scale_d, int scalar, void *stream) {
    if (k % 16 || n % 16)
        return uform_cuda_note(uform_invalid_argument_k, "gemm_e4m3 %zux%zux%zu: n and k must be multiples of 16", m, n, k);
    cublasOperation_t transposed = CUBLAS_OP_T, plain = CUBLAS_OP_N;
    cublasLtMatmulMatrixScale_t mode = scalar ? CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F : CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    int plant = uform_cuda_planted("gemm_e4m3");
    /* C may alias D only with D's layout, which E4M3 codes cannot give (beta 0, C unread); planted: D accumulated */
    uform_gemm_call_t call = {.first = w, .second = a, .c = c ? c : scale_d ? NULL : d, .d = d, .alpha = 1.0f,
                              .beta = c || (plant == 1 && !scale_d) ? 1.0f : 0.0f};
    cublasStatus_t code = cublasLtMatmulDescCreate(&call.operation, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtMatmulDesc_t operation = call.operation;
    if (!code) code = cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_TRANSA, &transposed, sizeof(transposed));
    if (!code) code = cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_TRANSB, &plain, sizeof(plain));
    int8_t fast = 1; /* Hopper's FP8 accumulation without cuBLASLt's periodic promotion: within the contract's bound */
    if (!code) code = cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast));
    if (!code) code = cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof(mode));
    if (!code) code = cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof(mode));
    if (!code) code = cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scales_w, sizeof(scales_w));
    if (!code) code = cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scales_a, sizeof(scales_a));
    if (!code && scale_d && plant != 1) /* planted: D's scale left out (codes of the unscaled product) */
        code = cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, &scale_d, sizeof(scale_d));
    if (!code) code = cublasLtMatrixLayoutCreate(&call.layout_first, CUDA_R_8F_E4M3, k, n, k);
    if (!code) code = cublasLtMatrixLayoutCreate(&call.layout_second, CUDA_R_8F_E4M3, k, m, k);
    if (!code) code = cublasLtMatrixLayoutCreate(&call.layout_d, d_type, n, m, n);
    if (!code && scale_d) code = cublasLtMatrixLayoutCreate(&call.layout_c, CUDA_R_16BF, n, m, n);
    uform_status_t status = code ? uform_gemm_failed_(m, n, k, "describing the E4M3 product", code) : uform_ok_k;
    size_t key[9] = {2, 2, m, n, k, k, k, n,
                     (size_t)(d_type == CUDA_R_32F) | (call.beta != 0 ? 2 : 0) | 4 | (scalar ? 8 : 0) | (scale_d ? 16 : 0)};
    cublasLtMatmulAlgo_t algo;
    char const *what = scale_d ? "E4M3 out of E4M3 with per-tensor scales"
                       : scalar ? "E4M3 with per-tensor scales" : "E4M3 with outer-vector scales";
    if (status == uform_ok_k) status = uform_gemm_choose_(gemm, key, &call, m, n, k, what, &algo, stream);
    if (status == uform_ok_k) {
        code = uform_gemm_run_(gemm, &call, &algo, stream);
        if (code) status = uform_gemm_failed_(m, n, k, "cublasLtMatmul (E4M3)", code);
    }
    uform_gemm_release_(&call);
    return status;
}

uform_status_t uform_cuda_gemm_e4m3(uform_cuda_gemm_t *gemm, size_t m, size_t n, size_t k, uint8_t const *a,
                                    float const *scales_a, uint8_t const *w, float const *scales_w, void const *c,
                                    void *d, int d_is_f32, int scalar, void *stream) {
    return uform_gemm_e4m3_(gemm, m, n, k, a, scales_a, w, scales_w, c, d, d_is_f32 ? CUDA_R_32F : CUDA_R_16BF, NULL, scalar,
                            stream);
}

uform_status_t uform_cuda_gemm_e4m3_codes(uform_cuda_gemm_t *gemm, size_t m, size_t n, size_t k, uint8_t const *a,
                                          float const *scale_a, uint8_t const *w, float const *scale_w,
                                          float const *inverse_scale_d, uint8_t *d, void *stream) {
    if (!inverse_scale_d)
        return uform_cuda_note(uform_invalid_argument_k, "gemm_e4m3_codes %zux%zux%zu: E4M3 output needs its scale", m, n, k);
    return uform_gemm_e4m3_(gemm, m, n, k, a, scale_a, w, scale_w, NULL, d, CUDA_R_8F_E4M3, inverse_scale_d, 1, stream);
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
