/*  kernels.c: packing (BF16, E4M3 and int8), the run-time choice of kernel table, and the generic (plain C) kernels. */
#include "cpu/kernels.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/numeric.h"
#include "cpu/ops.h"

size_t uform_packed_size(size_t width, size_t depth) {
    return ((width + 15) / 16) * ((depth + 1) / 2) * 32 * sizeof(uint16_t);
}

/* Layout: for each panel of 16 B rows, for each depth pair, 16 x (B[i][2k], B[i][2k+1]). */
#define UFORM_PACK_BODY(TYPE, CONVERT)                                                                              \
    size_t pairs = (depth + 1) / 2, panels = (width + 15) / 16;                                                     \
    for (size_t panel = 0; panel < panels; ++panel)                                                                 \
        for (size_t pair = 0; pair < pairs; ++pair) {                                                               \
            uint16_t *target = packed + (panel * pairs + pair) * 32;                                                \
            if (panel * 16 + 16 <= width && 2 * pair + 2 <= depth) { /* a whole panel and pair: no tests */         \
                TYPE const *first = b + panel * 16 * width_stride + 2 * pair * depth_stride;                        \
                for (size_t lane = 0; lane < 16; ++lane) {                                                          \
                    target[lane * 2] = CONVERT(first[lane * width_stride]);                                         \
                    target[lane * 2 + 1] = CONVERT(first[lane * width_stride + depth_stride]);                      \
                }                                                                                                   \
                continue;                                                                                           \
            }                                                                                                       \
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
    UFORM_PACK_BODY(float, uform_f32_to_bf16)
}

/* The layout's element (panel, pair, lane, half) from B, zero past its edges: the general case. */
static void uform_pack_bf16_generic_(uint16_t const *b, size_t width, size_t depth, size_t width_stride,
                                     size_t depth_stride, uint16_t *packed) {
    UFORM_PACK_BODY(uint16_t, UFORM_SAME_)
}

#if defined(__SSE2__)
#include <emmintrin.h>
/* Attention packs K (row-major, depth_stride 1) and V^T (width_stride 1) per segment and head, at every
 * layer: in SSE2 (every x86-64) a whole panel at a time. K: 4 x 4 blocks of 32-bit pairs transposed
 * (keys to lanes); V^T: two keys' rows of 8 lanes interleaved, a zero row past an odd depth. Returns
 * the whole panels packed; the caller packs the rest. */
static size_t uform_pack_bf16_sse2_(uint16_t const *b, size_t width, size_t depth, size_t width_stride,
                                    size_t depth_stride, uint16_t *packed) {
    size_t pairs = (depth + 1) / 2, panels = width / 16;
    if (depth_stride == 1 && depth % 8 == 0) {
        for (size_t panel = 0; panel < panels; ++panel)
            for (size_t lane = 0; lane < 16; lane += 4)
                for (size_t pair = 0; pair < pairs; pair += 4) {
                    uint16_t const *row = b + (panel * 16 + lane) * width_stride + 2 * pair;
                    __m128i r0 = _mm_loadu_si128((__m128i const *)row);
                    __m128i r1 = _mm_loadu_si128((__m128i const *)(row + width_stride));
                    __m128i r2 = _mm_loadu_si128((__m128i const *)(row + 2 * width_stride));
                    __m128i r3 = _mm_loadu_si128((__m128i const *)(row + 3 * width_stride));
                    __m128i t0 = _mm_unpacklo_epi32(r0, r1), t1 = _mm_unpacklo_epi32(r2, r3);
                    __m128i t2 = _mm_unpackhi_epi32(r0, r1), t3 = _mm_unpackhi_epi32(r2, r3);
                    uint16_t *target = packed + (panel * pairs + pair) * 32 + lane * 2;
                    _mm_storeu_si128((__m128i *)target, _mm_unpacklo_epi64(t0, t1));
                    _mm_storeu_si128((__m128i *)(target + 32), _mm_unpackhi_epi64(t0, t1));
                    _mm_storeu_si128((__m128i *)(target + 64), _mm_unpacklo_epi64(t2, t3));
                    _mm_storeu_si128((__m128i *)(target + 96), _mm_unpackhi_epi64(t2, t3));
                }
        return panels;
    }
    if (width_stride == 1) {
        for (size_t panel = 0; panel < panels; ++panel)
            for (size_t pair = 0; pair < pairs; ++pair) {
                uint16_t const *even = b + 2 * pair * depth_stride + panel * 16;
                int whole = 2 * pair + 1 < depth;
                __m128i e0 = _mm_loadu_si128((__m128i const *)even), e1 = _mm_loadu_si128((__m128i const *)(even + 8));
                __m128i o0 = whole ? _mm_loadu_si128((__m128i const *)(even + depth_stride)) : _mm_setzero_si128();
                __m128i o1 = whole ? _mm_loadu_si128((__m128i const *)(even + depth_stride + 8)) : _mm_setzero_si128();
                uint16_t *target = packed + (panel * pairs + pair) * 32;
                _mm_storeu_si128((__m128i *)target, _mm_unpacklo_epi16(e0, o0));
                _mm_storeu_si128((__m128i *)(target + 8), _mm_unpackhi_epi16(e0, o0));
                _mm_storeu_si128((__m128i *)(target + 16), _mm_unpacklo_epi16(e1, o1));
                _mm_storeu_si128((__m128i *)(target + 24), _mm_unpackhi_epi16(e1, o1));
            }
        return panels;
    }
    return 0;
}
#endif

void uform_pack_bf16(uint16_t const *b, size_t width, size_t depth, size_t width_stride, size_t depth_stride,
                     uint16_t *packed) {
    size_t done = 0;
#if defined(__SSE2__)
    done = uform_pack_bf16_sse2_(b, width, depth, width_stride, depth_stride, packed);
#endif
    /* The panels left (a partial one, or all where no fast path fits) start at their own row of B. */
    size_t pairs = (depth + 1) / 2;
    if (done * 16 < width)
        uform_pack_bf16_generic_(b + done * 16 * width_stride, width - done * 16, depth, width_stride, depth_stride,
                                 packed + done * pairs * 32);
}

size_t uform_packed_e4m3_size(size_t width, size_t depth) { return ((width + 15) / 16) * ((depth + 1) / 2) * 32; }

/* A row's scale: its largest magnitude / 448, 1 for a zero row. */
static void uform_e4m3_scales_(uint16_t const *b, size_t width, size_t depth, float *scales) {
    for (size_t row = 0; row < width; ++row) {
        float largest = 0;
        for (size_t j = 0; j < depth; ++j) largest = fmaxf(largest, fabsf(uform_bf16_to_f32(b[row * depth + j])));
        scales[row] = largest > 0 ? largest / UFORM_E4M3_LARGEST : 1.0f;
    }
}

void uform_e4m3_rows(uint16_t const *b, size_t width, size_t depth, float *scales, uint8_t *codes) {
    uform_e4m3_scales_(b, width, depth, scales);
    for (size_t row = 0; row < width; ++row)
        for (size_t j = 0; j < depth; ++j) codes[row * depth + j] = uform_f32_to_e4m3(uform_bf16_to_f32(b[row * depth + j]) / scales[row]);
}

void uform_pack_e4m3(uint16_t const *b, size_t width, size_t depth, float *scales, uint8_t *packed) {
    uform_e4m3_scales_(b, width, depth, scales);
    size_t pairs = (depth + 1) / 2, panels = (width + 15) / 16;
    for (size_t panel = 0; panel < panels; ++panel)
        for (size_t pair = 0; pair < pairs; ++pair)
            for (size_t lane = 0; lane < 16; ++lane)
                for (size_t half = 0; half < 2; ++half) {
                    size_t row = panel * 16 + lane, column = 2 * pair + half;
                    packed[(panel * pairs + pair) * 32 + lane * 2 + half] =
                        row < width && column < depth ? uform_f32_to_e4m3(uform_bf16_to_f32(b[row * depth + column]) / scales[row]) : 0;
                }
}

size_t uform_packed_int8_size(size_t width, size_t depth) { return (width + 15) / 16 * uform_int8_stride(depth) * 16; }

void uform_pack_int8(uint16_t const *b, size_t width, size_t depth, float *scales, int32_t *corrections, int8_t *packed) {
    size_t quads = uform_int8_stride(depth) / 4;
    memset(packed, 0, uform_packed_int8_size(width, depth));
    for (size_t row = 0; row < width; ++row) {
        float largest = 0;
        for (size_t j = 0; j < depth; ++j) largest = fmaxf(largest, fabsf(uform_bf16_to_f32(b[row * depth + j])));
        scales[row] = largest > 0 ? largest / 127.0f : 1.0f;
#if defined(UFORM_PLANT_INT8_WEIGHT_SCALE)
        scales[row] = 1.0f; /* planted: the row's scale dropped after it made the codes (below) */
        float divisor = largest > 0 ? largest / 127.0f : 1.0f;
#else
        float divisor = scales[row];
#endif
        int32_t sum = 0;
        int8_t *panel = packed + row / 16 * quads * 64 + row % 16 * 4;
        for (size_t j = 0; j < depth; ++j) {
#if defined(UFORM_PLANT_INT8_TRUNCATE)
            int32_t code = (int32_t)(uform_bf16_to_f32(b[row * depth + j]) / divisor); /* planted: toward zero */
#else
            int32_t code = uform_int8_round(uform_bf16_to_f32(b[row * depth + j]) / divisor);
#endif
            panel[j / 4 * 64 + j % 4] = (int8_t)code;
            sum += code;
        }
#if defined(UFORM_PLANT_INT8_CORRECTION)
        sum = 0; /* planted: the +128 offset of the inputs left in the sums */
#endif
        corrections[row] = 128 * sum;
    }
}

float uform_quantize_int8_generic(float const *source, size_t count, uint8_t *target) {
    float largest = 0;
    for (size_t i = 0; i < count; ++i) largest = fabsf(source[i]) > largest ? fabsf(source[i]) : largest;
    float scale = largest > 0 ? largest / 127.0f : 1.0f, inverse = 1.0f / scale;
    for (size_t i = 0; i < count; ++i) target[i] = (uint8_t)(128 + uform_int8_round(source[i] * inverse));
    for (size_t i = count; i < uform_int8_stride(count); ++i) target[i] = 128;
    return scale;
}

void uform_gemm_int8_generic(uint8_t const *a, size_t a_stride, int8_t const *packed, int32_t const *corrections,
                             float const *row_scales, float const *scales, float *c, size_t c_stride, size_t rows,
                             size_t width, size_t depth) {
    size_t quads = uform_int8_stride(depth) / 4;
    for (size_t row = 0; row < rows; ++row)
        for (size_t column = 0; column < width; ++column) {
            int8_t const *w = packed + column / 16 * quads * 64 + column % 16 * 4;
            uint8_t const *x = a + row * a_stride;
            int32_t sum = 0;
            for (size_t quad = 0; quad < quads; ++quad)
                for (size_t k = 0; k < 4; ++k) sum += (int32_t)x[4 * quad + k] * w[quad * 64 + k];
            c[row * c_stride + column] = (float)(sum - corrections[column]) * row_scales[row] * scales[column];
        }
}

static uint16_t uform_e4m3_bf16_[256];
static pthread_once_t uform_e4m3_once_ = PTHREAD_ONCE_INIT;

static void uform_e4m3_table_(void) {
    for (unsigned code = 0; code < 256; ++code) uform_e4m3_bf16_[code] = uform_f32_to_bf16(uform_e4m3_to_f32((uint8_t)code));
}

void uform_widen_e4m3_generic(uint8_t const *source, uint16_t *target, size_t count) {
    pthread_once(&uform_e4m3_once_, uform_e4m3_table_);
    for (size_t i = 0; i < count; ++i) target[i] = uform_e4m3_bf16_[source[i]];
}

static void uform_gemm_generic_(uint16_t const *a, size_t a_stride, uint16_t const *packed, float *c, size_t c_stride,
                                size_t rows, size_t width, size_t depth) {
    size_t pairs = (depth + 1) / 2, panels = (width + 15) / 16;
    for (size_t row = 0; row < rows; ++row)
        for (size_t panel = 0; panel < panels; ++panel) {
            float sums[16] = {0};
            for (size_t pair = 0; pair < UFORM_PAIRS_USED(pairs); ++pair) {
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
            e = e < 0x1p-126f ? 0x1p-126f : e; /* no subnormal, as the vector tables' clamp; a NaN stays */
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

static float uform_quantize_e4m3_generic_(float const *source, size_t count, uint16_t *target) {
    float largest = 0;
    for (size_t i = 0; i < count; ++i) largest = fabsf(source[i]) > largest ? fabsf(source[i]) : largest;
    float scale = largest > 0 ? largest / UFORM_E4M3_LARGEST : 1.0f, inverse = 1.0f / scale;
    for (size_t i = 0; i < count; ++i) target[i] = uform_f32_to_bf16(uform_e4m3_round(source[i] * inverse));
    return scale;
}

static void uform_swiglu_f32_generic_(float const *gate_up, size_t rows, size_t width, float *hidden) {
    for (size_t r = 0; r < rows; ++r) {
        float const *gate = gate_up + r * 2 * width, *up = gate + width;
        for (size_t i = 0; i < width; ++i) hidden[r * width + i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
    }
}

uform_kernels_t const uform_kernels_generic = {"generic", uform_gemm_generic_, uform_softmax_bf16_generic_,
                                                uform_swiglu_bf16_generic_, uform_bf16_from_f32_array,
                                                uform_widen_e4m3_generic, uform_quantize_e4m3_generic_,
                                                uform_swiglu_f32_generic_, uform_quantize_int8_generic,
                                                uform_gemm_int8_generic, uform_rmsnorm};

/* The one place a table is chosen. A table is listed where this build compiled it (x86-64 with a
 * compiler that takes its flags, or AArch64) and runs where the CPU reports its ISA (GCC's check
 * includes the OS's XSAVE support for the wide registers; every AArch64 CPU has NEON). */
uform_kernels_t const *const uform_kernels_all[] = {
#if defined(UFORM_HAVE_AMX)
    &uform_kernels_amx,
#endif
#if defined(UFORM_HAVE_AVX512BF16)
    &uform_kernels_avx512bf16,
#endif
#if defined(UFORM_HAVE_AVX512VNNI)
    &uform_kernels_avx512vnni,
#endif
#if defined(UFORM_HAVE_AVX512F)
    &uform_kernels_avx512f,
#endif
#if defined(UFORM_HAVE_AVX2)
    &uform_kernels_avx2,
#endif
#if defined(UFORM_HAVE_NEON)
    &uform_kernels_neon,
#endif
    &uform_kernels_generic, NULL};

int uform_kernels_runs(char const *name) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
#if defined(UFORM_HAVE_AMX)
    /* Its softmax, SwiGLU and rounding are avx512bf16's; Linux must also grant the tile state. */
    if (!strcmp(name, "amx")) return __builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-bf16") &&
                                        __builtin_cpu_supports("amx-int8") && uform_kernels_runs("avx512bf16") &&
                                        uform_amx_permitted();
#endif
#if defined(UFORM_HAVE_AVX512BF16)
    /* VNNI for its int8 product, DQ for the softmax's VREDUCEPS: every CPU with AVX512-BF16 has both. */
    if (!strcmp(name, "avx512bf16")) return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
                                                   __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
                                                   __builtin_cpu_supports("avx512dq");
#endif
#if defined(UFORM_HAVE_AVX512VNNI)
    if (!strcmp(name, "avx512vnni")) return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") &&
                                                   __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#endif
#if defined(UFORM_HAVE_AVX512F)
    if (!strcmp(name, "avx512f")) return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
#endif
#if defined(UFORM_HAVE_AVX2)
    if (!strcmp(name, "avx2")) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
#endif
#if defined(UFORM_HAVE_NEON)
    if (!strcmp(name, "neon")) return 1;
#endif
    return !strcmp(name, "generic");
}

void uform_cpu_class(char *text, size_t capacity) {
#if defined(__x86_64__) || defined(__i386__)
    static char const *const features[] = {"avx2", "fma", "avx512f", "avx512bw", "avx512vnni", "avx512bf16", "amx-bf16"};
    __builtin_cpu_init();
    int supported[sizeof(features) / sizeof(features[0])] = {
        __builtin_cpu_supports("avx2"),       __builtin_cpu_supports("fma"),        __builtin_cpu_supports("avx512f"),
        __builtin_cpu_supports("avx512bw"),   __builtin_cpu_supports("avx512vnni"), __builtin_cpu_supports("avx512bf16"),
        __builtin_cpu_supports("amx-bf16")};
    size_t length = (size_t)snprintf(text, capacity, "x86-64");
    for (size_t i = 0; i < sizeof(features) / sizeof(features[0]) && length < capacity; ++i)
        if (supported[i]) length += (size_t)snprintf(text + length, capacity - length, " %s", features[i]);
#elif defined(__aarch64__)
    snprintf(text, capacity, "aarch64 neon");
#else
    snprintf(text, capacity, "neither x86 nor AArch64: generic kernels only");
#endif
}

static uform_kernels_t const *uform_kernels_chosen_;
static pthread_once_t uform_kernels_once_ = PTHREAD_ONCE_INIT;

/* On Intel the avx512f table's FMAs outran VDPBF16PS (1.4x the products, 1.2-1.4x encode, on a
 * Sapphire Rapids-class Xeon: docs/benchmarks.md); on AMD's Zen 4 VDPBF16PS runs at twice the FMA rate. */
static int uform_kernels_prefer_fma_(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return __builtin_cpu_is("intel");
#else
    return 0;
#endif
}

static void uform_kernels_choose_(void) {
    char const *forced = getenv("UFORM_CPU");
    uform_kernels_t const *named = NULL;
    for (size_t i = 0; forced && uform_kernels_all[i]; ++i)
        if (!strcmp(forced, uform_kernels_all[i]->name)) named = uform_kernels_all[i];
    if (forced && *forced && !named) {
        fprintf(stderr, "uform: UFORM_CPU=%s names no kernel table of this build; using the best this CPU runs\n", forced);
    } else if (named && !uform_kernels_runs(named->name)) {
        fprintf(stderr, "uform: UFORM_CPU=%s: this CPU cannot run those kernels; using the best it runs\n", forced);
        named = NULL;
    }
    uform_kernels_chosen_ = named;
    int fma_first = uform_kernels_prefer_fma_();
    for (size_t i = 0; !uform_kernels_chosen_ && uform_kernels_all[i]; ++i) {
        char const *name = uform_kernels_all[i]->name;
        if (fma_first && !strcmp(name, "avx512bf16") && uform_kernels_runs("avx512f")) continue;
        if (uform_kernels_runs(name)) uform_kernels_chosen_ = uform_kernels_all[i];
    }
}

uform_kernels_t const *uform_kernels(void) {
    pthread_once(&uform_kernels_once_, uform_kernels_choose_);
    return uform_kernels_chosen_;
}
