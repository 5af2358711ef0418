/*  numkong_e4m3.h: NumKong's E4M3 products (its headers in third_party/numkong, fetched by
 *  scripts/setup.sh; UFORM_HAVE_NUMKONG where CMake found them) run as the forward pass runs ours:
 *  the weights' codes laid out once by NumKong; per product, each input row quantized with a scale
 *  per row by NumKong's own reduction, scaling and cast at the backend's ISA, NumKong's product on
 *  the codes, then both scales. One entry per backend: its packed product (`nk_dots_packed_e4m3_*`)
 *  or, for the ISAs with only a vector dot (`nk_dot_e4m3_*`), one dot per output. For
 *  uform_bench_gemm and test_numkong; the library does not use NumKong. */
#ifndef UFORM_BENCH_NUMKONG_E4M3_H
#define UFORM_BENCH_NUMKONG_E4M3_H

#if defined(UFORM_HAVE_NUMKONG)

#include <stdint.h>
#include <string.h>

/* The x86 backends compiled in: NumKong sets each ISA per function, so no build flag is needed, and
 * each runs only after the check below. Off x86 its headers turn these off. */
#define NK_TARGET_HASWELL 1
#define NK_TARGET_SKYLAKE 1
#define NK_TARGET_ICELAKE 1
#define NK_TARGET_GENOA 1
#define NK_TARGET_SAPPHIRE 1
#define NK_TARGET_SAPPHIREAMX 1
#include <numkong/capabilities.h>
#include <numkong/cast.h>
#include <numkong/dot.h>
#include <numkong/dots.h>
#include <numkong/each.h>
#include <numkong/reduce.h>

#include "core/numeric.h"
#include "cpu/kernels.h"

typedef struct uform_numkong_e4m3_t {
    char const *name;      /* numkong_ISA: its packed product; numkong_dot_ISA: a vector dot per output */
    nk_capability_t needs; /* what NumKong must find on this CPU */
    int amx;               /* needs Linux's grant of the AMX tile state */
    nk_size_t (*packed_size)(nk_size_t width, nk_size_t depth);
    void (*pack)(nk_e4m3_t const *b, nk_size_t width, nk_size_t depth, nk_size_t b_stride, void *packed);
    void (*packed)(nk_e4m3_t const *a, void const *packed, nk_f32_t *c, nk_size_t rows, nk_size_t width,
                   nk_size_t depth, nk_size_t a_stride, nk_size_t c_stride);
    void (*dot)(nk_e4m3_t const *a, nk_e4m3_t const *b, nk_size_t count, nk_f32_t *result);
    /* the input rows' quantization, at the same ISA */
    void (*minmax)(nk_f32_t const *data, nk_size_t count, nk_size_t stride, nk_f32_t *least, nk_size_t *least_index,
                   nk_f32_t *most, nk_size_t *most_index);
    void (*scale)(nk_f32_t const *a, nk_size_t count, nk_f32_t const *alpha, nk_f32_t const *beta, nk_f32_t *result);
    void (*cast)(void const *from, nk_dtype_t from_type, nk_size_t count, void *to, nk_dtype_t to_type);
} uform_numkong_e4m3_t;

/* Every NumKong pack takes each weight row's norm through nk_reduce_moments_e4m3, whose ISA is the best
 * one compiled in (its order below), chosen at build time, not at run time: a packed backend needs it too. */
#if NK_TARGET_GENOA
#define UFORM_NUMKONG_PACK_NEEDS_ nk_cap_genoa_k
#elif NK_TARGET_SKYLAKE
#define UFORM_NUMKONG_PACK_NEEDS_ nk_cap_skylake_k
#elif NK_TARGET_HASWELL
#define UFORM_NUMKONG_PACK_NEEDS_ nk_cap_haswell_k
#elif NK_TARGET_NEONFHM
#define UFORM_NUMKONG_PACK_NEEDS_ nk_cap_neonfhm_k
#elif NK_TARGET_NEON
#define UFORM_NUMKONG_PACK_NEEDS_ nk_cap_neon_k
#elif NK_TARGET_RVV
#define UFORM_NUMKONG_PACK_NEEDS_ nk_cap_rvv_k
#elif NK_TARGET_V128RELAXED
#define UFORM_NUMKONG_PACK_NEEDS_ nk_cap_v128relaxed_k
#else
#define UFORM_NUMKONG_PACK_NEEDS_ nk_cap_serial_k
#endif

#define UFORM_NUMKONG_PACKED_(isa) \
    nk_dots_packed_size_e4m3_##isa, nk_dots_pack_e4m3_##isa, nk_dots_packed_e4m3_##isa, NULL
#define UFORM_NUMKONG_DOT_(isa) NULL, NULL, NULL, nk_dot_e4m3_##isa
#define UFORM_NUMKONG_QUANTIZE_(isa) nk_reduce_minmax_f32_##isa, nk_each_scale_f32_##isa, nk_cast_##isa

/* The E4M3 backends of NumKong 7.8.6 for x86 (its Diamond Rapids ones need GCC 14), serial last; a
 * name ending in "serial" is plain C, measured only where asked for by name. */
static uform_numkong_e4m3_t const uform_numkong_e4m3_all[] = {
#if NK_TARGET_X8664_
    {"numkong_sapphireamx", nk_cap_sapphireamx_k | nk_cap_sapphire_k | nk_cap_skylake_k, 1,
     UFORM_NUMKONG_PACKED_(sapphireamx), UFORM_NUMKONG_QUANTIZE_(skylake)},
    {"numkong_genoa", nk_cap_genoa_k | nk_cap_skylake_k, 0, UFORM_NUMKONG_PACKED_(genoa),
     UFORM_NUMKONG_QUANTIZE_(skylake)},
    {"numkong_skylake", nk_cap_skylake_k, 0, UFORM_NUMKONG_PACKED_(skylake), UFORM_NUMKONG_QUANTIZE_(skylake)},
    {"numkong_haswell", nk_cap_haswell_k, 0, UFORM_NUMKONG_PACKED_(haswell), UFORM_NUMKONG_QUANTIZE_(haswell)},
    {"numkong_dot_icelake", nk_cap_icelake_k | nk_cap_skylake_k, 0, UFORM_NUMKONG_DOT_(icelake),
     UFORM_NUMKONG_QUANTIZE_(skylake)},
    {"numkong_dot_skylake", nk_cap_skylake_k, 0, UFORM_NUMKONG_DOT_(skylake), UFORM_NUMKONG_QUANTIZE_(skylake)},
    {"numkong_dot_haswell", nk_cap_haswell_k, 0, UFORM_NUMKONG_DOT_(haswell), UFORM_NUMKONG_QUANTIZE_(haswell)},
#endif
    {"numkong_serial", nk_cap_serial_k, 0, UFORM_NUMKONG_PACKED_(serial), UFORM_NUMKONG_QUANTIZE_(serial)},
    {"numkong_dot_serial", nk_cap_serial_k, 0, UFORM_NUMKONG_DOT_(serial), UFORM_NUMKONG_QUANTIZE_(serial)},
};
enum { uform_numkong_e4m3_count_k = sizeof(uform_numkong_e4m3_all) / sizeof(uform_numkong_e4m3_all[0]) };

/** Why this CPU cannot run the backend, or NULL where it can (for AMX, the tile state asked for as the amx
 *  table asks). */
static inline char const *uform_numkong_why_not(uform_numkong_e4m3_t const *backend) {
    nk_capability_t found = nk_capabilities();
    if ((found & backend->needs) != backend->needs) return "this CPU lacks its ISA";
    if (backend->pack && (found & UFORM_NUMKONG_PACK_NEEDS_) != UFORM_NUMKONG_PACK_NEEDS_)
        return "its pack's row norms run the best ISA compiled in (NumKong picks it at build time), which this CPU lacks";
    if (backend->amx && !uform_kernels_runs("amx")) return "Linux did not grant the AMX tile state";
    return NULL;
}

static inline int uform_numkong_runs(uform_numkong_e4m3_t const *backend) { return !uform_numkong_why_not(backend); }

/** Bytes of the weights [width, depth] as the backend reads them: its packed layout, or the codes row-major. */
static inline size_t uform_numkong_weights_size(uform_numkong_e4m3_t const *backend, size_t width, size_t depth) {
    return backend->packed_size ? backend->packed_size(width, depth) : width * depth;
}

/** Lays out the row-major codes [width, depth] (uform_e4m3_rows) for the backend, once. */
static inline void uform_numkong_prepare(uform_numkong_e4m3_t const *backend, uint8_t const *codes, size_t width,
                                         size_t depth, void *weights) {
    if (backend->pack) backend->pack((nk_e4m3_t const *)codes, width, depth, depth, weights);
    else memcpy(weights, codes, width * depth);
}

/** One input row: s = max |source| / 448 (1 for a zero row), codes[i] = E4M3(source[i] * (1 / s)) by
 *  NumKong's cast; `scaled` [count] holds the scaled row between the two. Returns s. */
static inline float uform_numkong_quantize(uform_numkong_e4m3_t const *backend, float const *source, size_t count,
                                           float *scaled, uint8_t *codes) {
    nk_f32_t least, most, zero = 0;
    nk_size_t least_index, most_index;
    backend->minmax(source, count, sizeof(float), &least, &least_index, &most, &most_index);
    float largest = -least > most ? -least : most;
    float scale = largest > 0 ? largest / UFORM_E4M3_LARGEST : 1.0f, inverse = 1.0f / scale;
    backend->scale(source, count, &inverse, &zero, scaled);
    backend->cast(scaled, nk_f32_k, count, codes, nk_e4m3_k);
    return scale;
}

/** C [rows, width] = codes_a [rows, depth] W^T in Float32, before any scale. */
static inline void uform_numkong_product(uform_numkong_e4m3_t const *backend, void const *weights,
                                         uint8_t const *codes, size_t rows, size_t width, size_t depth, float *c,
                                         size_t c_stride) {
    if (backend->packed) {
        backend->packed((nk_e4m3_t const *)codes, weights, c, rows, width, depth, depth, c_stride * sizeof(float));
        return;
    }
    uint8_t const *columns = weights;
    for (size_t i = 0; i < width; ++i)  /* a weight row stays in L1 for every input row */
        for (size_t r = 0; r < rows; ++r)
            backend->dot((nk_e4m3_t const *)(codes + r * depth), (nk_e4m3_t const *)(columns + i * depth), depth,
                         c + r * c_stride + i);
}

/** What a product of the forward pass needs besides the weights: codes [rows * depth], row_scales
 *  [rows], scaled [depth]. */
typedef struct uform_numkong_scratch_t {
    uint8_t *codes;
    float *row_scales, *scaled;
} uform_numkong_scratch_t;

/** The whole E4M3 product as uform_cpu_linear_e4m3 makes it: C = (Q(A / s_a) Q(W / s_w)^T) s_a s_w,
 *  the input rows quantized here, W's codes laid out by uform_numkong_prepare with scales s_w. */
static inline void uform_numkong_linear(uform_numkong_e4m3_t const *backend, void const *weights,
                                        float const *weight_scales, float const *a, size_t a_stride, size_t rows,
                                        size_t width, size_t depth, float *c, size_t c_stride,
                                        uform_numkong_scratch_t const *scratch) {
    for (size_t r = 0; r < rows; ++r)
        scratch->row_scales[r] =
            uform_numkong_quantize(backend, a + r * a_stride, depth, scratch->scaled, scratch->codes + r * depth);
    uform_numkong_product(backend, weights, scratch->codes, rows, width, depth, c, c_stride);
    for (size_t r = 0; r < rows; ++r) {
        float *target = c + r * c_stride, scale = scratch->row_scales[r];
        for (size_t i = 0; i < width; ++i) target[i] *= scale * weight_scales[i];
    }
}

#endif
#endif
