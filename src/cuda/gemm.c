/*  gemm.c: row-major BF16 products C = A B^T through cuBLASLt, Float32 accumulation. Row-major
 *  C [m, n] is column-major C^T [n, m] = B A^T, so cuBLASLt sees A := B (transposed) and B := A. */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdlib.h>

#include "cuda/cuda.h"

struct uform_cuda_gemm_t {
    cublasLtHandle_t handle;
    void *workspace;
    size_t workspace_bytes;
};

int uform_cuda_gemm_create(uform_cuda_gemm_t **result, size_t workspace_bytes) {
    uform_cuda_gemm_t *gemm = calloc(1, sizeof(*gemm));
    if (!gemm) return (int)cudaErrorMemoryAllocation;
    if (cublasLtCreate(&gemm->handle) != CUBLAS_STATUS_SUCCESS) {
        free(gemm);
        return (int)cudaErrorUnknown;
    }
    gemm->workspace_bytes = workspace_bytes;
    if (workspace_bytes && cudaMalloc(&gemm->workspace, workspace_bytes) != cudaSuccess) {
        cublasLtDestroy(gemm->handle);
        free(gemm);
        return (int)cudaErrorMemoryAllocation;
    }
    *result = gemm;
    return 0;
}

void uform_cuda_gemm_destroy(uform_cuda_gemm_t *gemm) {
    if (!gemm) return;
    cudaFree(gemm->workspace);
    cublasLtDestroy(gemm->handle);
    free(gemm);
}

int uform_cuda_gemm_nt(uform_cuda_gemm_t *gemm, uint16_t const *a, uint16_t const *b, void *c, int c_is_f32, size_t m,
                       size_t n, size_t k, void *stream, int plant) {
    cublasLtMatmulDesc_t operation = NULL;
    cublasLtMatrixLayout_t layout_a = NULL, layout_b = NULL, layout_c = NULL;
    cublasLtMatmulPreference_t preference = NULL;
    cublasOperation_t transpose = CUBLAS_OP_T, plain = CUBLAS_OP_N;
    cudaDataType_t c_type = c_is_f32 ? CUDA_R_32F : CUDA_R_16BF;
    float alpha = 1.0f, beta = plant == 1 ? 1.0f : 0.0f; /* planted: C accumulated, not overwritten */
    int status = 0;
    if (cublasLtMatmulDescCreate(&operation, CUBLAS_COMPUTE_32F, CUDA_R_32F) ||
        cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof(transpose)) ||
        cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_TRANSB, &plain, sizeof(plain)) ||
        cublasLtMatrixLayoutCreate(&layout_a, CUDA_R_16BF, k, n, k) ||
        cublasLtMatrixLayoutCreate(&layout_b, CUDA_R_16BF, k, m, k) ||
        cublasLtMatrixLayoutCreate(&layout_c, c_type, n, m, n) || cublasLtMatmulPreferenceCreate(&preference) ||
        cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                             &gemm->workspace_bytes, sizeof(gemm->workspace_bytes)))
        status = (int)cudaErrorUnknown;
    cublasLtMatmulHeuristicResult_t heuristic;
    int found = 0;
    if (!status && (cublasLtMatmulAlgoGetHeuristic(gemm->handle, operation, layout_a, layout_b, layout_c, layout_c,
                                                   preference, 1, &heuristic, &found) ||
                    !found))
        status = (int)cudaErrorNotSupported;
    if (!status && cublasLtMatmul(gemm->handle, operation, &alpha, b, layout_a, a, layout_b, &beta, c, layout_c, c,
                                  layout_c, &heuristic.algo, gemm->workspace, gemm->workspace_bytes,
                                  (cudaStream_t)stream))
        status = (int)cudaErrorUnknown;
    if (preference) cublasLtMatmulPreferenceDestroy(preference);
    if (layout_c) cublasLtMatrixLayoutDestroy(layout_c);
    if (layout_b) cublasLtMatrixLayoutDestroy(layout_b);
    if (layout_a) cublasLtMatrixLayoutDestroy(layout_a);
    if (operation) cublasLtMatmulDescDestroy(operation);
    return status;
}
