/*  kernels.c: packing, the run-time choice of kernel table, and the generic (plain C) kernels. */
#include "cpu/kernels.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/numeric.h"

size_t uform_packed_size(size_t width, size_t depth) {
    return ((width + 15) / 16) * ((depth + 1) / 2) * 32 * sizeof(uint16_t);
}

/* Layout: for each panel of 16 B rows, for each depth pair, 16 x (B[i][2k], B[i][2k+1]). */
#define UFORM_PACK_BODY(CONVERT)                                                                                    \
    size_t pairs = (depth + 1) / 2, panels = (width + 15) / 16;                                                     \
    for (size_t panel = 0; panel < panels; ++panel)                                                                 \
        for (size_t pair = 0; pair < pairs; ++pair) {                                                               \
            uint16_t *target = packed + (panel * pairs + pair) * 32;                                                \
            for (size_t lane = 0; lane < 16; ++lane)                                                                \
                for (size_t half = 0; half < 2; ++half) {                                                           \
                    size_t row = panel * 16 + lane, column = 2 * pair + half;                                       \
                    target[lane * 2 + half] =                                                                       \
                        row < width && column < depth ? CONVERT(b[row * width_stride + column * depth_stride]) : 0; \
                }                                                                                                   \
        }

#define UFORM_SAME_(x) (x)
void uform_pack_f32(float const *b, size_t width, size_t depth, size_t width_stride, size_t depth_stride,
                    uint16_t *packed) {
    UFORM_PACK_BODY(uform_f32_to_bf16)
}

void uform_pack_bf16(uint16_t const *b, size_t width, size_t depth, size_t width_stride, size_t depth_stride,
                     uint16_t *packed) {
    UFORM_PACK_BODY(UFORM_SAME_)
}

static void uform_gemm_generic_(uint16_t const *a, size_t a_stride, uint16_t const *packed, float *c, size_t c_stride,
                                size_t rows, size_t width, size_t depth) {
    size_t pairs = (depth + 1) / 2, panels = (width + 15) / 16;
    for (size_t row = 0; row < rows; ++row)
        for (size_t panel = 0; panel < panels; ++panel) {
            float sums[16] = {0};
            for (size_t pair = 0; pair < pairs; ++pair) {
                uint16_t const *b = packed + (panel * pairs + pair) * 32;
                float first = uform_bf16_to_f32(a[row * a_stride + 2 * pair]);
                float second = uform_bf16_to_f32(a[row * a_stride + 2 * pair + 1]);
                for (size_t lane = 0; lane < 16; ++lane)
                    sums[lane] += first * uform_bf16_to_f32(b[2 * lane]) + second * uform_bf16_to_f32(b[2 * lane + 1]);
            }
            size_t count = width - panel * 16 < 16 ? width - panel * 16 : 16;
            memcpy(c + row * c_stride + panel * 16, sums, count * sizeof(float));
        }
}

static void uform_softmax_bf16_generic_(float const *scores, size_t rows, size_t columns, size_t stride, float scale,
                                        uint16_t *probabilities, size_t probabilities_stride, float *sums) {
    for (size_t r = 0; r < rows; ++r) {
        float const *row = scores + r * stride;
        uint16_t *target = probabilities + r * probabilities_stride;
        float largest = -INFINITY, sum = 0;
        for (size_t j = 0; j < columns; ++j) largest = row[j] > largest ? row[j] : largest;
        for (size_t j = 0; j < columns; ++j) {
            float e = expf(scale * (row[j] - largest));
            sum += e;
            target[j] = uform_f32_to_bf16(e);
        }
        if (columns % 2) target[columns] = 0;
        sums[r] = sum;
    }
}

static void uform_swiglu_bf16_generic_(float const *gate_up, size_t rows, size_t width, uint16_t *hidden) {
    for (size_t r = 0; r < rows; ++r) {
        float const *gate = gate_up + r * 2 * width, *up = gate + width;
        for (size_t i = 0; i < width; ++i) hidden[r * width + i] = uform_f32_to_bf16(gate[i] / (1.0f + expf(-gate[i])) * up[i]);
    }
}

uform_kernels_t const uform_kernels_generic = {"generic", uform_gemm_generic_, uform_softmax_bf16_generic_,
                                                uform_swiglu_bf16_generic_, uform_bf16_from_f32_array};

static uform_kernels_t const *uform_kernels_chosen_;
static pthread_once_t uform_kernels_once_ = PTHREAD_ONCE_INIT;

static void uform_kernels_choose_(void) {
    char const *forced = getenv("UFORM_CPU");
    uform_kernels_chosen_ = &uform_kernels_generic;
#if defined(UFORM_HAVE_AVX512BF16)
    __builtin_cpu_init();
    if (!(forced && !strcmp(forced, "generic")) && __builtin_cpu_supports("avx512bf16"))
        uform_kernels_chosen_ = &uform_kernels_avx512bf16;
#else
    (void)forced;
#endif
}

uform_kernels_t const *uform_kernels(void) {
    pthread_once(&uform_kernels_once_, uform_kernels_choose_);
    return uform_kernels_chosen_;
}
