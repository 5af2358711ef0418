/*  gemm.c: Float32 products through OpenBLAS, kept to one thread per call. */
#include "cpu/gemm.h"

#include <cblas.h>
#include <pthread.h>

static pthread_once_t uform_blas_once_ = PTHREAD_ONCE_INIT;

/* Our own row tiling spreads work over the pool: OpenBLAS must not start threads of its own. */
static void uform_blas_single_thread_(void) { openblas_set_num_threads(1); }

void uform_gemm_f32_nt(float const *a, size_t a_stride, float const *b, size_t b_stride, float *c, size_t c_stride,
                       size_t height, size_t width, size_t depth) {
    pthread_once(&uform_blas_once_, uform_blas_single_thread_);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)height, (int)width, (int)depth, 1.0f, a, (int)a_stride,
                b, (int)b_stride, 0.0f, c, (int)c_stride);
}

void uform_gemm_f32_nn(float const *a, size_t a_stride, float const *b, size_t b_stride, float *c, size_t c_stride,
                       size_t height, size_t width, size_t depth) {
    pthread_once(&uform_blas_once_, uform_blas_single_thread_);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)height, (int)width, (int)depth, 1.0f, a,
                (int)a_stride, b, (int)b_stride, 0.0f, c, (int)c_stride);
}

void uform_gemm_f32(int transpose_a, int transpose_b, size_t m, size_t n, size_t k, float const *a, size_t a_stride,
                    float const *b, size_t b_stride, float beta, float *c, size_t c_stride) {
    pthread_once(&uform_blas_once_, uform_blas_single_thread_);
    cblas_sgemm(CblasRowMajor, transpose_a ? CblasTrans : CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans, (int)m,
                (int)n, (int)k, 1.0f, a, (int)a_stride, b, (int)b_stride, beta, c, (int)c_stride);
}
