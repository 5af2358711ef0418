/*  cudnn_attention.h (internal): attention within segments through cuDNN's fused flash attention
 *  (cudnn_attention.cpp), the alternative to attention.cu's kernels; the same layouts: qkv
 *  [cells, 3 width] and attended [cells, width] in BF16, segments as spans in cell order. The
 *  log-sum-exps live in cuDNN's own layout, `stats` [segments, heads, longest] (Float32). Built
 *  where CMake finds cuDNN and its frontend headers (UFORM_HAVE_CUDNN). */
#ifndef UFORM_CUDA_CUDNN_ATTENTION_H
#define UFORM_CUDA_CUDNN_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include "uform/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct uform_cudnn_attention_t uform_cudnn_attention_t;

/** The least cuDNN (cudnnGetVersion's major 10000 + minor 100 + patch) whose FP8 attention the forward runs: 9.14's
 *  fails the float64 check over ragged segments (docs/precision.md, "FP8 attention on a GPU"), and 9.23 is the first
 *  with which TransformerEngine runs FP8 attention over ragged (THD) layouts. */
enum { uform_cudnn_fp8_attention_least_k = 92300 };

#if defined(UFORM_HAVE_CUDNN) || defined(__cplusplus)

/** Plans forward and backward for `segments` segments (every batch lists exactly that many) of
 *  at most `longest` cells; `deterministic` asks for a backward that repeats bitwise; `tune` builds
 *  every plan cuDNN offers and keeps the fastest, timed on the first call outside a graph capture.
 *  As every entry here, returns a status with a message noted on failure (cuda.h's convention):
 *  unsupported where cuDNN builds no plan for the shape. */
uform_status_t uform_cudnn_attention_create(uform_cudnn_attention_t **attention, size_t segments, size_t longest,
                                            size_t width, int deterministic, int tune);
/** The forward pass alone, without log-sum-exps (inference): `stats` of the forward call is ignored. */
uform_status_t uform_cudnn_attention_create_inference(uform_cudnn_attention_t **attention, size_t segments, size_t longest,
                                                      size_t width);
/** The FP8 forward alone (inference, sm_90): q, k and v as E4M3 codes in codes [cells + 1, 3 width], the output as E4M3
 *  codes [cells + 1, width]; unsupported where cuDNN plans no FP8 attention for the shape. Its padding segments have
 *  length 1 at the spare row `cells` (cuDNN's FP8 kernel faults on empty ones): the caller keeps that row's codes
 *  finite (zero) and the row after the output free. */
uform_status_t uform_cudnn_attention_create_fp8(uform_cudnn_attention_t **attention, size_t segments, size_t longest,
                                                size_t width);
/** cudnnGetVersion() of the library loaded (0 in a build without cuDNN). */
size_t uform_cudnn_version(void);
/** One line naming the plans in use and their timed milliseconds (after the first calls). */
char const *uform_cudnn_attention_plans(uform_cudnn_attention_t *attention);
void uform_cudnn_attention_destroy(uform_cudnn_attention_t *attention);
size_t uform_cudnn_attention_stats_floats(uform_cudnn_attention_t const *attention);
size_t uform_cudnn_attention_device_bytes(uform_cudnn_attention_t const *attention);
/** Reads the batch's spans (device) of its `cells` cells into cuDNN's lengths and ragged offsets; once per step. */
uform_status_t uform_cudnn_attention_prepare(uform_cudnn_attention_t *attention, uint32_t const *spans, size_t cells,
                                             void *stream);
uform_status_t uform_cudnn_attention_forward(uform_cudnn_attention_t *attention, uint16_t const *qkv, uint16_t *attended,
                                             float *stats, void *stream);
uform_status_t uform_cudnn_attention_backward(uform_cudnn_attention_t *attention, uint16_t const *qkv,
                                              uint16_t const *attended, float const *stats, uint16_t const *d_attended,
                                              uint16_t *d_qkv, void *stream);
/** A plan of uform_cudnn_attention_create_fp8: `scales` (device) holds q's, k's and v's code scales 16 bytes apart
 *  (scales [0], [4], [8]), `output_scale` (device) what the output is multiplied by before it is coded
 *  (the inverse of its code scale). */
uform_status_t uform_cudnn_attention_forward_fp8(uform_cudnn_attention_t *attention, uint8_t const *codes, float const *scales,
                                                 float const *output_scale, uint8_t *attended, void *stream);

#else
/* Without cuDNN no plan is ever made (creation fails), so these stand-ins are never reached. */
static inline uform_status_t uform_cudnn_attention_create(uform_cudnn_attention_t **attention, size_t segments,
                                                          size_t longest, size_t width, int deterministic, int tune) {
    (void)segments, (void)longest, (void)width, (void)deterministic, (void)tune;
    *attention = NULL;
    return uform_unsupported_k;
}
static inline uform_status_t uform_cudnn_attention_create_inference(uform_cudnn_attention_t **attention, size_t segments,
                                                                    size_t longest, size_t width) {
    (void)segments, (void)longest, (void)width;
    *attention = NULL;
    return uform_unsupported_k;
}
static inline uform_status_t uform_cudnn_attention_create_fp8(uform_cudnn_attention_t **attention, size_t segments,
                                                              size_t longest, size_t width) {
    (void)segments, (void)longest, (void)width;
    *attention = NULL;
    return uform_unsupported_k;
}
static inline uform_status_t uform_cudnn_attention_forward_fp8(uform_cudnn_attention_t *attention, uint8_t const *codes,
                                                               float const *scales, float const *output_scale,
                                                               uint8_t *attended, void *stream) {
    (void)attention, (void)codes, (void)scales, (void)output_scale, (void)attended, (void)stream;
    return uform_unsupported_k;
}
static inline size_t uform_cudnn_version(void) { return 0; }
static inline void uform_cudnn_attention_destroy(uform_cudnn_attention_t *attention) { (void)attention; }
static inline char const *uform_cudnn_attention_plans(uform_cudnn_attention_t *attention) { (void)attention; return ""; }
static inline size_t uform_cudnn_attention_stats_floats(uform_cudnn_attention_t const *attention) { (void)attention; return 0; }
static inline size_t uform_cudnn_attention_device_bytes(uform_cudnn_attention_t const *attention) { (void)attention; return 0; }
static inline uform_status_t uform_cudnn_attention_prepare(uform_cudnn_attention_t *attention, uint32_t const *spans,
                                                           size_t cells, void *stream) {
    (void)attention, (void)spans, (void)cells, (void)stream;
    return uform_unsupported_k;
}
static inline uform_status_t uform_cudnn_attention_forward(uform_cudnn_attention_t *attention, uint16_t const *qkv,
                                                           uint16_t *attended, float *stats, void *stream) {
    (void)attention, (void)qkv, (void)attended, (void)stats, (void)stream;
    return uform_unsupported_k;
}
static inline uform_status_t uform_cudnn_attention_backward(uform_cudnn_attention_t *attention, uint16_t const *qkv,
                                                            uint16_t const *attended, float const *stats,
                                                            uint16_t const *d_attended, uint16_t *d_qkv, void *stream) {
    (void)attention, (void)qkv, (void)attended, (void)stats, (void)d_attended, (void)d_qkv, (void)stream;
    return uform_unsupported_k;
}
#endif

#ifdef __cplusplus
}
#endif
#endif
