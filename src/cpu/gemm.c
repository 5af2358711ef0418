/*  gemm.c: run-time choice of NumKong's BF16 kernel family, and OpenBLAS for Float32. */
#include "cpu/gemm.h"

#include <cblas.h>
#include <pthread.h>

#include <numkong/capabilities.h>
#include <numkong/dots.h>

typedef nk_size_t (*uform_packed_size_t)(nk_size_t, nk_size_t);
typedef void (*uform_pack_t)(nk_bf16_t const *, nk_size_t, nk_size_t, nk_size_t, void *);
typedef void (*uform_packed_t)(nk_bf16_t const *, void const *, nk_f32_t *, nk_size_t, nk_size_t, nk_size_t,
                               nk_size_t, nk_size_t);

static struct {
    char const *name;
    uform_packed_size_t packed_size;
    uform_pack_t pack;
    uform_packed_t packed;
} uform_gemm_;
static pthread_once_t uform_gemm_once_ = PTHREAD_ONCE_INIT;

static void uform_gemm_choose_(void) {
    nk_capability_t capabilities = nk_capabilities();
    uform_gemm_.name = "serial";
    uform_gemm_.packed_size = nk_dots_packed_size_bf16_serial;
    uform_gemm_.pack = nk_dots_pack_bf16_serial;
    uform_gemm_.packed = nk_dots_packed_bf16_serial;
#if NK_TARGET_HASWELL
    if (capabilities & nk_cap_haswell_k) {
        uform_gemm_.name = "haswell";
        uform_gemm_.packed_size = nk_dots_packed_size_bf16_haswell;
        uform_gemm_.pack = nk_dots_pack_bf16_haswell;
        uform_gemm_.packed = nk_dots_packed_bf16_haswell;
    }
#endif
#if NK_TARGET_SKYLAKE
    if (capabilities & nk_cap_skylake_k) {
        uform_gemm_.name = "skylake";
        uform_gemm_.packed_size = nk_dots_packed_size_bf16_skylake;
        uform_gemm_.pack = nk_dots_pack_bf16_skylake;
        uform_gemm_.packed = nk_dots_packed_bf16_skylake;
    }
#endif
#if NK_TARGET_GENOA
    if (capabilities & nk_cap_genoa_k) {
        uform_gemm_.name = "genoa";
        uform_gemm_.packed_size = nk_dots_packed_size_bf16_genoa;
        uform_gemm_.pack = nk_dots_pack_bf16_genoa;
        uform_gemm_.packed = nk_dots_packed_bf16_genoa;
    }
#endif
    /* Our own row tiling over the pool: OpenBLAS must not start threads of its own. */
    openblas_set_num_threads(1);
}

char const *uform_gemm_backend(void) {
    pthread_once(&uform_gemm_once_, uform_gemm_choose_);
    return uform_gemm_.name;
}

size_t uform_gemm_packed_size(size_t width, size_t depth) {
    pthread_once(&uform_gemm_once_, uform_gemm_choose_);
    return uform_gemm_.packed_size(width, depth);
}

void uform_gemm_pack(uint16_t const *b, size_t width, size_t depth, size_t b_stride, void *packed) {
    pthread_once(&uform_gemm_once_, uform_gemm_choose_);
    uform_gemm_.pack((nk_bf16_t const *)b, width, depth, b_stride * sizeof(uint16_t), packed);
}

void uform_gemm_bf16(uint16_t const *a, size_t a_stride, void const *b_packed, float *c, size_t c_stride,
                     size_t height, size_t width, size_t depth) {
    uform_gemm_.packed((nk_bf16_t const *)a, b_packed, c, height, width, depth, a_stride * sizeof(uint16_t),
                       c_stride * sizeof(float));
}

void uform_gemm_f32_nt(float const *a, size_t a_stride, float const *b, size_t b_stride, float *c, size_t c_stride,
                       size_t height, size_t width, size_t depth) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)height, (int)width, (int)depth, 1.0f, a, (int)a_stride,
                b, (int)b_stride, 0.0f, c, (int)c_stride);
}

void uform_gemm_f32_nn(float const *a, size_t a_stride, float const *b, size_t b_stride, float *c, size_t c_stride,
                       size_t height, size_t width, size_t depth) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)height, (int)width, (int)depth, 1.0f, a,
                (int)a_stride, b, (int)b_stride, 0.0f, c, (int)c_stride);
}
