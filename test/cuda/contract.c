/*  contract.c: the CUDA kernel contract suite. Every kernel of src/cuda runs on seeded random
 *  inputs and is compared, element by element, with a float64 reference computed here on the host,
 *  against a bound derived from the kernel's own arithmetic (written beside each check). The
 *  report prints how close each kernel came to its bound (worst error / bound per element), then
 *  runs each kernel group's planted controls (plant > 0: a shifted index, a dropped term, a missing
 *  mask, ...), which the same check must reject. A control is planted in one entry point of the
 *  uform_cuda_plants build, by name, for one call (PLANTED_OK), or in a kernel's input. Exits 77
 *  (skipped) without a CUDA device.
 *
 *      uform_contract [--json FILE]
 */
#include "contract.h"
#include "../c/e4m3_reference.h"
#include "attention_reference.h"
#include "cuda/cudnn_attention.h"

typedef struct {
    char name[64];
    double worst; /* max over elements of |error| / bound */
    int plant, passed;
} check_t;

static check_t checks_[256];
static size_t checks_count_;
static FILE *json_;

void *device_(size_t bytes) {
    void *pointer;
    CUDA_OK(cudaMalloc(&pointer, bytes));
    return pointer;
}

void upload_(void *target, void const *source, size_t bytes) { CUDA_OK(cudaMemcpy(target, source, bytes, cudaMemcpyHostToDevice)); }
void download_(void *target, void const *source, size_t bytes) { CUDA_OK(cudaMemcpy(target, source, bytes, cudaMemcpyDeviceToHost)); }

void record_(char const *name, double worst, int plant) {
    check_t *check = &checks_[checks_count_++];
    snprintf(check->name, sizeof(check->name), "%s", name);
    check->worst = worst;
    check->plant = plant;
    check->passed = plant ? worst > 1.0 : worst <= 1.0; /* a control passes when the check rejects it */
}

/* --- embedding: forward is an exact widening (bound 0); backward sums value v's n_v terms in
 *     P_v = ceil(n_v / C) pieces of at most C each, in order from zero, then the pieces in order,
 *     then adds them to the gradient: depth (min(n_v, C) - 1) + (P_v - 1) + 1, so
 *     |error| <= (min(n_v, C) + P_v) u (|g0| + sum |dx|). 40% of cells share one value, a run of
 *     many pieces (as MASK's is in a masked batch). */
static void check_embedding_(int plant) {
    size_t cells = 3000, width = 192, vocabulary = 258;
    uint16_t *table = malloc(vocabulary * width * 2);
    uint32_t *values = malloc(cells * 4), *order = malloc(cells * 4), offsets[259] = {0};
    float *x = malloc(cells * width * 4), *dx = malloc(cells * width * 4), *grad = malloc(vocabulary * width * 4);
    fill_bf16_(table, vocabulary * width, 1.0);
    for (size_t c = 0; c < cells; ++c) values[c] = uniform_() < -0.2 ? 256 : (uint32_t)((uniform_() + 1) * 0.5 * 200) % 258;
    for (size_t c = 0; c < cells; ++c) offsets[values[c] + 1]++;
    for (size_t v = 0; v < vocabulary; ++v) offsets[v + 1] += offsets[v];
    uint32_t cursor[258];
    memcpy(cursor, offsets, sizeof(cursor));
    for (size_t c = 0; c < cells; ++c) order[cursor[values[c]]++] = (uint32_t)c;
    fill_f32_(dx, cells * width, 1.0);
    fill_f32_(grad, vocabulary * width, 1.0);
    uint16_t *d_table = device_(vocabulary * width * 2);
    uint32_t *d_values = device_(cells * 4), *d_order = device_(cells * 4), *d_offsets = device_(259 * 4);
    float *d_x = device_(cells * width * 4), *d_dx = device_(cells * width * 4), *d_grad = device_(vocabulary * width * 4);
    float *d_partials = device_(uform_cuda_embed_partials(cells, width) * 4);
    upload_(d_table, table, vocabulary * width * 2), upload_(d_values, values, cells * 4), upload_(d_order, order, cells * 4);
    upload_(d_offsets, offsets, 259 * 4), upload_(d_dx, dx, cells * width * 4), upload_(d_grad, grad, vocabulary * width * 4);
    PLANTED_OK("embed_forward", plant, uform_cuda_embed_forward(d_table, d_values, cells, width, d_x, NULL));
    PLANTED_OK("embed_backward", plant,
               uform_cuda_embed_backward(d_dx, d_order, d_offsets, cells, width, d_partials, d_grad, NULL));
    float *out = malloc(cells * width * 4), *grad_out = malloc(vocabulary * width * 4);
    download_(out, d_x, cells * width * 4), download_(grad_out, d_grad, vocabulary * width * 4);
    double worst = 0;
    for (size_t c = 0; c < cells; ++c)
        for (size_t i = 0; i < width; ++i) compare_(&worst, out[c * width + i], bf16_to_f32_(table[values[c] * width + i]), 0);
    record_("embed_forward", worst, plant);
    worst = 0;
    for (size_t v = 0; v < vocabulary; ++v)
        for (size_t i = 0; i < width; ++i) {
            double sum = grad[v * width + i], magnitude = fabs(grad[v * width + i]);
            for (uint32_t j = offsets[v]; j < offsets[v + 1]; ++j) {
                sum += dx[order[j] * width + i];
                magnitude += fabs(dx[order[j] * width + i]);
            }
            size_t run = offsets[v + 1] - offsets[v], piece = uform_cuda_embed_piece_k;
            double depth = (double)(run < piece ? run : piece) + (double)((run + piece - 1) / piece);
            compare_(&worst, grad_out[v * width + i], sum, depth * unit_ * magnitude + 1e-300);
        }
    record_("embed_backward", worst, plant);
    free(table), free(values), free(order), free(x), free(dx), free(grad), free(out), free(grad_out);
    cudaFree(d_table), cudaFree(d_values), cudaFree(d_order), cudaFree(d_offsets), cudaFree(d_x), cudaFree(d_dx), cudaFree(d_grad);
    cudaFree(d_partials);
}

/* --- RMSNorm. Forward: the sum of squares is a pairwise tree over each lane's 2 c values (c the
 *     power of two >= width/64), then a 5-level tree over the warp: depth k = log2(2 c) + 5, so its
 *     relative error is at most k u; rsqrtf adds 2 ulp, the mean and
 *     epsilon 2 rounding; so the scale is within (k/2 + 4) u, the product x scale g two more u, and
 *     the BF16 store 2^-8: |y - y*| <= 2^-8 |y*| + (1 + 2^-8)(k/2 + 6) u |y*|.
 *     Backward: dot = sum dy g x has error <= (k + 2) u S with S = sum |dy g x|; the element adds 4
 *     roundings and the += one more:
 *     |dx - dx*| <= r (4u |dy g| + r |x| (5u |mean| + (k + 3) u S r / width)) + u (|dx*| + |dx0|). */
static void rmsnorm_at_(size_t width, int plant, double *worst_forward, double *worst_backward) {
    size_t cells = 700; /* not a multiple of the 32 rows a warp takes in the backward */
    float *x = malloc(cells * width * 4), *gain = malloc(width * 4), *dy = malloc(cells * width * 4), *dx = malloc(cells * width * 4);
    fill_f32_(x, cells * width, 2.0), fill_f32_(gain, width, 1.5), fill_f32_(dy, cells * width, 1.0), fill_f32_(dx, cells * width, 0.5);
    float *d_x = device_(cells * width * 4), *d_gain = device_(width * 4), *d_dy = device_(cells * width * 4), *d_dx = device_(cells * width * 4);
    float *d_scales = device_(cells * 4), *d_partials = device_(uform_cuda_rmsnorm_partials(cells, width) * 4), *d_gain_grad = device_(width * 4);
    uint16_t *d_y = device_(cells * width * 2), *d_dx16 = device_(cells * width * 2);
    upload_(d_x, x, cells * width * 4), upload_(d_gain, gain, width * 4), upload_(d_dy, dy, cells * width * 4), upload_(d_dx, dx, cells * width * 4);
    CUDA_OK(cudaMemset(d_gain_grad, 0, width * 4));
    PLANTED_OK("rmsnorm_forward", plant == 1 ? 1 : 0,
               uform_cuda_rmsnorm_forward(d_x, d_gain, cells, width, d_y, d_scales, NULL));
    PLANTED_OK("rmsnorm_backward", plant == 2 ? 1 : 0,
               uform_cuda_rmsnorm_backward(d_x, d_gain, d_scales, d_dy, cells, width, d_dx, d_dx16, d_partials, NULL));
    KERNEL_OK(uform_cuda_rmsnorm_gain_reduce(d_partials, cells, width, d_gain_grad, NULL));
    uint16_t *y = malloc(cells * width * 2);
    float *scales = malloc(cells * 4), *dx_out = malloc(cells * width * 4), *gain_grad = malloc(width * 4);
    download_(y, d_y, cells * width * 2), download_(scales, d_scales, cells * 4), download_(dx_out, d_dx, cells * width * 4);
    download_(gain_grad, d_gain_grad, width * 4);
    uint16_t *dx16 = malloc(cells * width * 2);
    download_(dx16, d_dx16, cells * width * 2);
    double chunks = 1;
    while (chunks * 64 < (double)width) chunks *= 2;
    double k = log2(2 * chunks) + 5, worst_y = 0, worst_scale = 0, worst_dx = 0, worst_gain = 0;
    for (size_t c = 0; c < cells; ++c) {
        double squares = 0;
        for (size_t i = 0; i < width; ++i) squares += (double)x[c * width + i] * x[c * width + i];
        double r = 1.0 / sqrt(squares / (double)width + 1e-6);
        compare_(&worst_scale, scales[c], r, (k / 2 + 4) * unit_ * r);
        for (size_t i = 0; i < width; ++i) {
            double expected = x[c * width + i] * r * gain[i];
            compare_(&worst_y, bf16_to_f32_(y[c * width + i]), expected,
                     bf16_unit_ * fabs(expected) + (1 + bf16_unit_) * (k / 2 + 6) * unit_ * fabs(expected) + 1e-300);
        }
        /* The backward's reference uses the kernel's own scale, an input to it. */
        double s = scales[c], dot = 0, magnitude = 0;
        for (size_t i = 0; i < width; ++i) {
            dot += (double)dy[c * width + i] * gain[i] * x[c * width + i];
            magnitude += fabs((double)dy[c * width + i] * gain[i] * x[c * width + i]);
        }
        double mean = dot * s / (double)width;
        for (size_t i = 0; i < width; ++i) {
            double expected = dx[c * width + i] + s * ((double)dy[c * width + i] * gain[i] - x[c * width + i] * s * mean);
            double bound = s * (4 * unit_ * fabs((double)dy[c * width + i] * gain[i]) +
                                s * fabs(x[c * width + i]) * (5 * unit_ * fabs(mean) + (k + 3) * unit_ * magnitude * s / (double)width)) +
                           unit_ * (fabs(expected) + fabs(dx[c * width + i]));
            compare_(&worst_dx, dx_out[c * width + i], expected, bound + 1e-300);
            /* The BF16 copy is the kernel's own Float32 result rounded to nearest even, exactly. */
            compare_(&worst_dx, bf16_to_f32_(dx16[c * width + i]), bf16_to_f32_(f32_to_bf16_(dx_out[c * width + i])), 0);
        }
    }
    /* The gain's gradient: sum over cells of dy x scale, cells-long Float32 sums in fixed order:
     * |error| <= (cells + 2) u sum |dy x scale|. */
    for (size_t i = 0; i < width; ++i) {
        double sum = 0, magnitude = 0;
        for (size_t c = 0; c < cells; ++c) {
            sum += (double)dy[c * width + i] * x[c * width + i] * scales[c];
            magnitude += fabs((double)dy[c * width + i] * x[c * width + i] * scales[c]);
        }
        compare_(&worst_gain, gain_grad[i], sum, (double)(cells + 2) * unit_ * magnitude + 1e-300);
    }
    *worst_forward = fmax(*worst_forward, fmax(worst_y, worst_scale));
    *worst_backward = fmax(*worst_backward, fmax(worst_dx, worst_gain));
    free(x), free(gain), free(dy), free(dx), free(y), free(scales), free(dx_out), free(gain_grad), free(dx16);
    cudaFree(d_x), cudaFree(d_gain), cudaFree(d_dy), cudaFree(d_dx), cudaFree(d_scales), cudaFree(d_partials);
    cudaFree(d_gain_grad), cudaFree(d_y), cudaFree(d_dx16);
}

/* Two widths: a power of two of 64s, and one (192) whose lanes leave slots unused. */
static void check_rmsnorm_(int plant) {
    double worst_forward = 0, worst_backward = 0;
    rmsnorm_at_(512, plant, &worst_forward, &worst_backward);
    rmsnorm_at_(192, plant, &worst_forward, &worst_backward);
    if (plant != 2) record_("rmsnorm_forward", worst_forward, plant);
    if (plant != 1) record_("rmsnorm_backward", worst_backward, plant);
}

/* --- RMSNorm over a BF16 x (inference's residual stream): each value widens exactly, so its outputs
 *     must equal, bit for bit, the Float32 entries' over x widened (themselves held to float64 above):
 *     y and the scales, and the E4M3 codes at row scales and at a fixed one. */
static void check_rmsnorm_bf16_(int plant) {
    double worst = 0;
    for (size_t t = 0; t < 2; ++t) {
        size_t cells = 700, width = t ? 192 : 1024, count = cells * width;
        float *x = malloc(count * 4), *gain = malloc(width * 4), *scales = malloc(cells * 4), *expected_scales = malloc(cells * 4);
        float *code_scales = malloc(cells * 4), *expected_code_scales = malloc(cells * 4);
        uint16_t *x16 = malloc(count * 2), *y = malloc(count * 2), *expected = malloc(count * 2);
        uint8_t *codes = malloc(count), *expected_codes = malloc(count);
        fill_f32_(x, count, 3.0), fill_f32_(gain, width, 1.5);
        for (size_t i = 0; i < count; ++i) x16[i] = f32_to_bf16_(x[i]), x[i] = bf16_to_f32_(x16[i]);
        float *g_x = device_(count * 4), *g_gain = device_(width * 4), *g_scales = device_(cells * 4), *g_code_scales = device_(cells * 4);
        uint16_t *g_x16 = device_(count * 2), *g_y = device_(count * 2);
        uint8_t *g_codes = device_(count);
        upload_(g_x, x, count * 4), upload_(g_x16, x16, count * 2), upload_(g_gain, gain, width * 4);
        for (int fixed = -1; fixed < 2; ++fixed) { /* -1: y alone; 0: codes at row scales; 1: codes at a fixed scale */
            float scale = fixed == 1 ? 0.01f : 0;
            if (fixed < 0) KERNEL_OK(uform_cuda_rmsnorm_forward(g_x, g_gain, cells, width, g_y, g_scales, NULL));
            else KERNEL_OK(uform_cuda_rmsnorm_forward_e4m3(g_x, g_gain, cells, width, NULL, g_scales, g_codes, g_code_scales, scale, NULL));
            download_(expected, g_y, count * 2), download_(expected_scales, g_scales, cells * 4);
            download_(expected_codes, g_codes, count), download_(expected_code_scales, g_code_scales, cells * 4);
            PLANTED_OK("rmsnorm_forward_bf16", plant,
                       uform_cuda_rmsnorm_forward_bf16(g_x16, g_gain, cells, width, fixed < 0 ? g_y : NULL, g_scales,
                                                       fixed < 0 ? NULL : g_codes, g_code_scales, scale, NULL));
            download_(y, g_y, count * 2), download_(scales, g_scales, cells * 4);
            download_(codes, g_codes, count), download_(code_scales, g_code_scales, cells * 4);
            for (size_t c = 0; c < cells; ++c) compare_(&worst, scales[c], expected_scales[c], 0);
            for (size_t i = 0; fixed < 0 && i < count; ++i) compare_(&worst, bf16_to_f32_(y[i]), bf16_to_f32_(expected[i]), 0);
            for (size_t i = 0; fixed >= 0 && i < count; ++i)
                compare_(&worst, e4m3_definition(codes[i]), e4m3_definition(expected_codes[i]), 0);
            for (size_t c = 0; fixed == 0 && c < cells; ++c) compare_(&worst, code_scales[c], expected_code_scales[c], 0);
        }
        free(x), free(gain), free(scales), free(expected_scales), free(code_scales), free(expected_code_scales);
        free(x16), free(y), free(expected), free(codes), free(expected_codes);
        cudaFree(g_x), cudaFree(g_gain), cudaFree(g_scales), cudaFree(g_code_scales), cudaFree(g_x16), cudaFree(g_y), cudaFree(g_codes);
    }
    record_("rmsnorm_forward_bf16", worst, plant);
}

/* --- M-RoPE on BF16 q and k: cosine and sine from double, rounded once to Float32 (u each); the
 *     rotation a c - b s has two products and a sum (3 u): the Float32 value v is within
 *     4 u (|a| + |b|) of the exact rotation r*, and the BF16 store adds 2^-8 |v|:
 *     |out - r*| <= 2^-8 |r*| + (1 + 2^-8) 4 u (|a| + |b|). Both directions are checked. */
static void check_rope_(int plant) {
    size_t cells = 600, width = 256, heads = width / 64;
    uint16_t *qkv = malloc(cells * 3 * width * 2), *out = malloc(cells * 3 * width * 2);
    int32_t *positions = malloc(cells * 3 * 4);
    fill_bf16_(qkv, cells * 3 * width, 2.0);
    for (size_t c = 0; c < cells; ++c) /* image- and video-like coordinates: every axis differs */
        positions[c * 3] = (int32_t)(c % 7), positions[c * 3 + 1] = (int32_t)(c / 23), positions[c * 3 + 2] = (int32_t)(c % 23 + 3);
    uint16_t *d_qkv = device_(cells * 3 * width * 2);
    int32_t *d_positions = device_(cells * 3 * 4);
    float *d_table = device_(cells * 32 * 8);
    upload_(d_positions, positions, cells * 3 * 4);
    PLANTED_OK("rope_table", plant, uform_cuda_rope_table(d_positions, cells, d_table, NULL));
    double worst = 0;
    for (int direction = -1; direction <= 1; direction += 2) {
        upload_(d_qkv, qkv, cells * 3 * width * 2);
        KERNEL_OK(uform_cuda_rope(d_qkv, d_table, cells, width, direction, NULL));
        download_(out, d_qkv, cells * 3 * width * 2);
        for (size_t c = 0; c < cells; ++c)
            for (size_t part = 0; part < 2; ++part)
                for (size_t h = 0; h < heads; ++h)
                    for (size_t j = 0; j < 32; ++j) {
                        size_t base = c * 3 * width + part * width + h * 64;
                        int axis = j < 8 ? 0 : j < 20 ? 1 : 2;
                        double angle = positions[c * 3 + axis] * pow(10000.0, -(double)j / 32.0);
                        double co = cos(angle), si = sin(angle) * direction;
                        double a = bf16_to_f32_(qkv[base + j]), b = bf16_to_f32_(qkv[base + j + 32]);
                        double first = a * co - b * si, second = b * co + a * si, spread = 4 * unit_ * (fabs(a) + fabs(b)) * (1 + bf16_unit_);
                        compare_(&worst, bf16_to_f32_(out[base + j]), first, bf16_unit_ * fabs(first) + spread + 1e-300);
                        compare_(&worst, bf16_to_f32_(out[base + j + 32]), second, bf16_unit_ * fabs(second) + spread + 1e-300);
                    }
        for (size_t c = 0; c < cells; ++c) /* v untouched */
            for (size_t i = 0; i < width; ++i) compare_(&worst, out[c * 3 * width + 2 * width + i], qkv[c * 3 * width + 2 * width + i], 0);
    }
    record_("rope", worst, plant);
    free(qkv), free(out), free(positions), cudaFree(d_qkv), cudaFree(d_positions), cudaFree(d_table);
}

#if defined(UFORM_HAVE_CUDNN)
/* cuDNN's forward and backward (deterministic) on device operands, every plan timed as the benchmark
 * times them (each runs several times on one set of operands, the chosen one last); its stats
 * [segment, head, position] come back as our lse [cell, head] over the true `spans` (host). */
static void cudnn_attention_run_(uint16_t const *g_qkv, uint16_t *g_out, uint16_t const *g_d_out, uint16_t *g_d_qkv,
                                 uint32_t const *g_spans, uint32_t const *spans, size_t segments, size_t longest,
                                 size_t width, float *lse) {
    uform_cudnn_attention_t *attention;
    KERNEL_OK(uform_cudnn_attention_create(&attention, segments, longest, width, 1, 1));
    size_t heads = width / 64, floats = uform_cudnn_attention_stats_floats(attention);
    float *stats = device_(floats * 4), *host_stats = malloc(floats * 4);
    size_t cells = 0;
    for (size_t s = 0; s < segments; ++s) cells = spans[2 * s] + spans[2 * s + 1] > cells ? spans[2 * s] + spans[2 * s + 1] : cells;
    KERNEL_OK(uform_cudnn_attention_prepare(attention, g_spans, cells, NULL));
    KERNEL_OK(uform_cudnn_attention_forward(attention, g_qkv, g_out, stats, NULL));
    KERNEL_OK(uform_cudnn_attention_backward(attention, g_qkv, g_out, stats, g_d_out, g_d_qkv, NULL));
    download_(host_stats, stats, floats * 4);
    for (size_t seg = 0; seg < segments; ++seg)
        for (size_t h = 0; h < heads; ++h)
            for (size_t i = 0; i < spans[2 * seg + 1]; ++i)
                lse[(spans[2 * seg] + i) * heads + h] = host_stats[(seg * heads + h) * longest + i];
    free(host_stats), cudaFree(stats), uform_cudnn_attention_destroy(attention);
}
#endif

/* Runs our attention (with its plants) or cuDNN's on host operands and brings back O, lse and the
 * gradients, which start as NaN on the device so a row left unwritten shows. `given` [count] are
 * the spans the kernel is given (perhaps planted), `spans` [segments] the true ones. */
static void attention_device_(int cudnn, uint16_t const *qkv, uint16_t const *d_out, size_t cells, size_t width,
                              uint32_t const *given, size_t count, uint32_t const *segment_of, uint32_t const *spans,
                              size_t segments, size_t longest, int plant, uint16_t *out, uint16_t *d_qkv, float *lse) {
    size_t heads = width / 64, stride = 3 * width;
    uint16_t *g_qkv = device_(cells * stride * 2), *g_out = device_(cells * width * 2), *g_d_qkv = device_(cells * stride * 2);
    uint16_t *g_d_out = device_(cells * width * 2);
    uint32_t *g_spans = device_(count * 8), *g_segment_of = device_(cells * 4);
    float *g_lse = device_(cells * heads * 4), *g_deltas = device_(cells * heads * 4);
    upload_(g_qkv, qkv, cells * stride * 2), upload_(g_d_out, d_out, cells * width * 2);
    upload_(g_spans, given, count * 8), upload_(g_segment_of, segment_of, cells * 4);
    CUDA_OK(cudaMemset(g_out, 0xff, cells * width * 2));
    CUDA_OK(cudaMemset(g_d_qkv, 0xff, cells * stride * 2));
    if (cudnn) {
#if defined(UFORM_HAVE_CUDNN)
        cudnn_attention_run_(g_qkv, g_out, g_d_out, g_d_qkv, g_spans, spans, segments, longest, width, lse);
#endif
    } else {
        PLANTED_OK("attention_forward", plant == 1,
                   uform_cuda_attention_forward(g_qkv, g_spans, g_segment_of, cells, width, g_out, g_lse, NULL));
        PLANTED_OK("attention_backward", plant == 2 ? 2 : 0,
                   uform_cuda_attention_backward(g_qkv, g_out, g_lse, g_d_out, g_spans, g_segment_of, cells, width,
                                                 g_deltas, g_d_qkv, NULL));
        download_(lse, g_lse, cells * heads * 4);
    }
    download_(out, g_out, cells * width * 2), download_(d_qkv, g_d_qkv, cells * stride * 2);
    cudaFree(g_qkv), cudaFree(g_out), cudaFree(g_d_qkv), cudaFree(g_spans), cudaFree(g_segment_of), cudaFree(g_lse);
    cudaFree(g_d_out), cudaFree(g_deltas);
}

/* Random operands for `cells` cells of `width`: qkv in (-2, 2), dO in (-1, 1); the outputs' room. */
typedef struct attention_host_t {
    uint16_t *qkv, *d_out, *out, *d_qkv;
    float *lse;
} attention_host_t;

static attention_host_t attention_host_(size_t cells, size_t width) {
    attention_host_t h = {malloc(cells * 3 * width * 2), malloc(cells * width * 2), malloc(cells * width * 2),
                          malloc(cells * 3 * width * 2), malloc(cells * (width / 64) * 4)};
    fill_bf16_(h.qkv, cells * 3 * width, 2.0), fill_bf16_(h.d_out, cells * width, 1.0);
    return h;
}

static void attention_host_free_(attention_host_t *h) { free(h->qkv), free(h->d_out), free(h->out), free(h->d_qkv), free(h->lse); }

/* --- Attention within segments (heads of 64): the float64 reference and the bounds derived from
 *     the kernels' arithmetic are in attention_reference.c (tested on the host by
 *     attention_reference_test.c). The segments here (lengths up to 260, 699 cells) straddle tiles
 *     and end mid-tile, and some tiles lie wholly inside one segment (the kernels' unmasked path).
 *     `cudnn`: the same check of cuDNN's fused attention (cudnn_attention.cpp), whose control is a
 *     segment given one cell too many (a leaking mask), planted in its input. */
static void attention_run_(int plant, int cudnn) {
    size_t width = 128, heads = 2, lengths[] = {1, 7, 64, 150, 33, 2, 97, 260, 5, 80}, segments = 10, cells = 0, longest = 260;
    for (size_t s = 0; s < segments; ++s) cells += lengths[s];
    double tiles = (double)((cells + 63) / 64 + 1); /* an upper bound on the tiles a row visits */
    uint32_t spans[20], given[20], *segment_of = malloc(cells * 4);
    for (size_t s = 0, first = 0; s < segments; first += lengths[s], ++s) {
        spans[2 * s] = (uint32_t)first, spans[2 * s + 1] = (uint32_t)lengths[s];
        for (size_t c = first; c < first + lengths[s]; ++c) segment_of[c] = (uint32_t)s;
    }
    memcpy(given, spans, sizeof(spans));
    if (cudnn && plant == 1) given[7] += 1; /* planted: segment 3 one cell longer, so its rows see the next segment's first key */
    attention_host_t h = attention_host_(cells, width);
    attention_device_(cudnn, h.qkv, h.d_out, cells, width, given, segments, segment_of, spans, segments, longest,
                      cudnn ? 0 : plant, h.out, h.d_qkv, h.lse);
    attention_view_t view = {h.qkv, h.out, h.d_out, h.d_qkv, h.lse, width, heads};
    double worst_forward = 0, worst_backward = 0;
    attention_check_full(&view, spans, segments, tiles, plant == 1, &worst_forward, &worst_backward);
    if (plant != 2) record_(cudnn ? "attention_forward (cuDNN)" : "attention_forward", worst_forward, plant);
    if (plant != 1) record_(cudnn ? "attention_backward (cuDNN)" : "attention_backward", worst_backward, plant);
    free(segment_of), attention_host_free_(&h);
}

static void check_attention_(int plant) { attention_run_(plant, 0); }

#if defined(UFORM_HAVE_CUDNN)
static void check_cudnn_attention_(int plant) { attention_run_(plant, 1); }
#endif

/* --- Attention rotating q and k as they load (inference's fused rotary): rope (direction 1) then the
 *     forward, both held to float64 above, must give its outputs bit for bit, O and the log-sum-exps,
 *     and leave qkv as it was. Segments of 1 to 300 cells, tiles straddling them, a last tile past the
 *     end, and image-like coordinates (every axis differs). Control: the sine's sign flipped in the load. */
/* Seven segments of 1 to 300 cells in cell order, as spans [2 segments] and segment_of [cells]; returns the cells. */
static size_t seven_segments_(uint32_t **spans, uint32_t **segment_of) {
    static size_t const lengths[] = {130, 1, 64, 300, 17, 77, 110};
    size_t segments = 7, cells = 0;
    for (size_t i = 0; i < segments; ++i) cells += lengths[i];
    *spans = malloc(segments * 8), *segment_of = malloc(cells * 4);
    for (size_t i = 0, first = 0; i < segments; first += lengths[i], ++i) {
        (*spans)[2 * i] = (uint32_t)first, (*spans)[2 * i + 1] = (uint32_t)lengths[i];
        for (size_t c = first; c < first + lengths[i]; ++c) (*segment_of)[c] = (uint32_t)i;
    }
    return cells;
}

static void check_attention_rotating_(int plant) {
    size_t width = 256, heads = 4, stride = 3 * width, segments = 7;
    uint32_t *spans, *segment_of;
    size_t cells = seven_segments_(&spans, &segment_of);
    int32_t *positions = malloc(cells * 3 * 4);
    for (size_t c = 0; c < cells; ++c)
        positions[c * 3] = (int32_t)(c % 5), positions[c * 3 + 1] = (int32_t)(c / 19), positions[c * 3 + 2] = (int32_t)(c % 19 + 2);
    uint16_t *qkv = malloc(cells * stride * 2), *after = malloc(cells * stride * 2), *out = malloc(cells * width * 2);
    uint16_t *expected = malloc(cells * width * 2);
    float *lse = malloc(cells * heads * 4), *expected_lse = malloc(cells * heads * 4);
    fill_bf16_(qkv, cells * stride, 2.0);
    uint16_t *g_qkv = device_(cells * stride * 2), *g_out = device_(cells * width * 2);
    uint32_t *g_spans = device_(segments * 8), *g_segment_of = device_(cells * 4);
    int32_t *g_positions = device_(cells * 3 * 4);
    float *g_table = device_(cells * 32 * 8), *g_lse = device_(cells * heads * 4);
    upload_(g_spans, spans, segments * 8), upload_(g_segment_of, segment_of, cells * 4), upload_(g_positions, positions, cells * 3 * 4);
    KERNEL_OK(uform_cuda_rope_table(g_positions, cells, g_table, NULL));
    upload_(g_qkv, qkv, cells * stride * 2);
    KERNEL_OK(uform_cuda_rope(g_qkv, g_table, cells, width, 1, NULL));
    KERNEL_OK(uform_cuda_attention_forward(g_qkv, g_spans, g_segment_of, cells, width, g_out, g_lse, NULL));
    download_(expected, g_out, cells * width * 2), download_(expected_lse, g_lse, cells * heads * 4);
    upload_(g_qkv, qkv, cells * stride * 2);
    CUDA_OK(cudaMemset(g_out, 0xff, cells * width * 2));
    PLANTED_OK("attention_forward_rotating", plant,
               uform_cuda_attention_forward_rotating(g_qkv, g_table, g_spans, g_segment_of, cells, width, g_out, g_lse, NULL));
    download_(out, g_out, cells * width * 2), download_(lse, g_lse, cells * heads * 4), download_(after, g_qkv, cells * stride * 2);
    double worst = 0;
    for (size_t i = 0; i < cells * width; ++i) compare_(&worst, bf16_to_f32_(out[i]), bf16_to_f32_(expected[i]), 0);
    for (size_t i = 0; i < cells * heads; ++i) compare_(&worst, lse[i], expected_lse[i], 0);
    for (size_t i = 0; i < cells * stride; ++i) compare_(&worst, after[i], qkv[i], 0);
    record_("attention_forward_rotating", worst, plant);
    free(spans), free(segment_of), free(positions), free(qkv), free(after), free(out), free(expected), free(lse), free(expected_lse);
    cudaFree(g_qkv), cudaFree(g_out), cudaFree(g_spans), cudaFree(g_segment_of), cudaFree(g_positions), cudaFree(g_table);
    cudaFree(g_lse);
}

/* --- Attention writing the out product's E4M3 input at a bounded scale (inference): the BF16 forward then
 *     uform_cuda_quantize_e4m3 at that scale, both held to float64 and their own checks above, bit for bit.
 *     Segments of 1 to 300 cells. Control: the mask leaking past the segment. */
static void check_attention_e4m3_(int plant) {
    size_t width = 256, heads = 4, stride = 3 * width, segments = 7;
    uint32_t *spans, *segment_of;
    size_t cells = seven_segments_(&spans, &segment_of);
    uint16_t *qkv = malloc(cells * stride * 2);
    uint8_t *codes = malloc(cells * width), *expected = malloc(cells * width);
    fill_bf16_(qkv, cells * stride, 2.0);
    float const fixed = 0.004f; /* the outputs reach about 2: the largest saturate, the smallest go subnormal */
    uint16_t *g_qkv = device_(cells * stride * 2), *g_out = device_(cells * width * 2);
    uint8_t *g_codes = device_(cells * width);
    uint32_t *g_spans = device_(segments * 8), *g_segment_of = device_(cells * 4);
    float *g_lse = device_(cells * heads * 4);
    upload_(g_spans, spans, segments * 8), upload_(g_segment_of, segment_of, cells * 4), upload_(g_qkv, qkv, cells * stride * 2);
    KERNEL_OK(uform_cuda_attention_forward(g_qkv, g_spans, g_segment_of, cells, width, g_out, g_lse, NULL));
    KERNEL_OK(uform_cuda_quantize_e4m3(g_out, cells, width, g_codes, NULL, fixed, NULL));
    download_(expected, g_codes, cells * width);
    CUDA_OK(cudaMemset(g_codes, 0x7f, cells * width));
    PLANTED_OK("attention_forward_e4m3", plant,
               uform_cuda_attention_forward_e4m3(g_qkv, g_spans, g_segment_of, cells, width, g_codes, fixed, NULL));
    download_(codes, g_codes, cells * width);
    double worst = 0;
    for (size_t i = 0; i < cells * width; ++i) compare_(&worst, e4m3_definition(codes[i]), e4m3_definition(expected[i]), 0);
    record_("attention_forward_e4m3 (codes at a fixed scale)", worst, plant);
    free(spans), free(segment_of), free(qkv), free(codes), free(expected);
    cudaFree(g_qkv), cudaFree(g_out), cudaFree(g_codes), cudaFree(g_spans), cudaFree(g_segment_of), cudaFree(g_lse);
}

/* sum_l a[l] b[l] of two rows of E4M3 codes in float64 (each product exact), with sum_l |a[l] b[l]| in *magnitude. */
static double e4m3_dot_(uint8_t const *a, uint8_t const *b, size_t count, double *magnitude) {
    double sum = 0;
    *magnitude = 0;
    for (size_t l = 0; l < count; ++l) {
        double term = e4m3_definition(a[l]) * e4m3_definition(b[l]);
        sum += term, *magnitude += fabs(term);
    }
    return sum;
}

/* --- FP8 attention's inputs: rope_e4m3's codes against the rope pass then each value coded on the host at
 *     its part's scale (bit for bit), qkv left as it was. Control: k's scale used for q. */
static void check_rope_e4m3_(int plant) {
    size_t width = 256, stride = 3 * width, cells = 333;
    int32_t *positions = malloc(cells * 3 * 4);
    for (size_t c = 0; c < cells; ++c)
        positions[c * 3] = (int32_t)(c % 5), positions[c * 3 + 1] = (int32_t)(c / 19), positions[c * 3 + 2] = (int32_t)(c % 19 + 2);
    uint16_t *qkv = malloc(cells * stride * 2), *rotated = malloc(cells * stride * 2), *after = malloc(cells * stride * 2);
    uint8_t *codes = malloc(cells * stride);
    fill_bf16_(qkv, cells * stride, 3.0);
    float const scales[3] = {0.004f, 0.01f, 0.002f}; /* some q and v values saturate, small ones go subnormal */
    uint16_t *g_qkv = device_(cells * stride * 2);
    uint8_t *g_codes = device_(cells * stride);
    int32_t *g_positions = device_(cells * 3 * 4);
    float *g_table = device_(cells * 32 * 8);
    upload_(g_positions, positions, cells * 3 * 4), upload_(g_qkv, qkv, cells * stride * 2);
    KERNEL_OK(uform_cuda_rope_table(g_positions, cells, g_table, NULL));
    PLANTED_OK("rope_e4m3", plant, uform_cuda_rope_e4m3(g_qkv, g_table, cells, width, scales, g_codes, NULL));
    download_(codes, g_codes, cells * stride), download_(after, g_qkv, cells * stride * 2);
    KERNEL_OK(uform_cuda_rope(g_qkv, g_table, cells, width, 1, NULL));
    download_(rotated, g_qkv, cells * stride * 2);
    double worst = 0;
    for (size_t i = 0; i < cells * stride; ++i) {
        float inverse = 1.0f / scales[i % stride / width];
        compare_(&worst, e4m3_definition(codes[i]), e4m3_nearest((double)(bf16_to_f32_(rotated[i]) * inverse)), 0);
        compare_(&worst, after[i], qkv[i], 0);
    }
    record_("rope_e4m3 (FP8 attention's codes)", worst, plant);
    free(positions), free(qkv), free(rotated), free(after), free(codes);
    cudaFree(g_qkv), cudaFree(g_codes), cudaFree(g_positions), cudaFree(g_table);
}

/* --- cuDNN's ragged layout (ragged_offsets) of spans padded as the forward pads a plan (five segments, then
 *     length 0 from span 0) against the host, exactly: lengths, and offsets in qkv rows and in rows that never
 *     fall, the padding at the cell past the last (length 0, or 1 for FP8 plans) and the end after it. Control:
 *     the padding at its span's start, 0. */
static void ragged_offsets_run_(int plant, size_t padding, char const *name) {
    size_t const width = 192, segments = 64, used = 5, lengths[5] = {12, 40, 1, 64, 30};
    uint32_t spans[2 * 64] = {0};
    size_t cells = 0;
    for (size_t i = 0; i < used; ++i) spans[2 * i] = (uint32_t)cells, spans[2 * i + 1] = (uint32_t)lengths[i], cells += lengths[i];
    int32_t out[3 * 64 + 2];
    uint32_t *g_spans = device_(sizeof(spans));
    int32_t *g_out = device_(sizeof(out));
    upload_(g_spans, spans, sizeof(spans));
    PLANTED_OK("ragged_offsets", plant,
               uform_cuda_ragged_offsets(g_spans, segments, cells, width, padding, g_out, g_out + segments,
                                         g_out + 2 * segments + 1, NULL));
    download_(out, g_out, sizeof(out));
    double worst = 0;
    for (size_t s = 0; s <= segments; ++s) {
        size_t first = s < used ? spans[2 * s] : s < segments ? cells : cells + padding;
        if (s < segments) compare_(&worst, out[s], s < used ? (double)lengths[s] : (double)padding, 0);
        compare_(&worst, out[segments + s], (double)(first * 3 * width), 0);
        compare_(&worst, out[2 * segments + 1 + s], (double)(first * width), 0);
    }
    record_(name, worst, plant);
    cudaFree(g_spans), cudaFree(g_out);
}

static void check_ragged_offsets_(int plant) {
    ragged_offsets_run_(plant, 0, "ragged_offsets (padded segments)");
    ragged_offsets_run_(plant, 1, "ragged_offsets (padded, length 1: FP8 plans)");
}

#if defined(UFORM_HAVE_CUDNN)
/* --- cuDNN's FP8 attention forward over ragged segments against float64 from the same codes: o = sum_s p_s v_s /
 *     sum_s p_s with p = exp(s - max), each output code within its correct rounding's distance plus twice
 *     what the FP8 path may move it: the softmax's weights coded at 448 (2^-4 relative, 2^-9 / 448 absolute
 *     under the normal range) in the sum and its weights, the scores' and P v's fast accumulation (2^-14 of
 *     their magnitude a term, the scores' through exp), and Float32 rounding. Control: v read at k's scale. */
static void cudnn_attention_fp8_run_(int plant, size_t const *lengths, size_t segments, size_t longest, size_t width,
                                     float sharpness, char const *name) {
    size_t heads = width / 64, stride = 3 * width, cells = 0;
    for (size_t i = 0; i < segments; ++i) cells += lengths[i];
    uint32_t *spans = malloc(segments * 8);
    for (size_t i = 0, first = 0; i < segments; first += lengths[i], ++i) spans[2 * i] = lengths[i] ? (uint32_t)first : 0, spans[2 * i + 1] = (uint32_t)lengths[i]; /* padding as the forward pads */
    uint8_t *codes = calloc(cells + 1, stride), *out = malloc(cells * width); /* + the padding's spare row, zero */
    for (size_t i = 0; i < cells * stride; ++i) {
        codes[i] = (uint8_t)((unsigned)(uniform_() * 1e6) % 256);
        if ((codes[i] & 0x7f) > 0x70) codes[i] &= 0xbf; /* no NaN, magnitudes up to 15 codes' worth of binades */
        if (i % stride >= 2 * width) codes[i] &= 0x7f; /* v positive: o near its spread, so a wrong v scale shows */
    }
    float const scale_o = 1.0f / 0.0125f;
    float host_scales[12] = {0.004f * sharpness, 0, 0, 0, 0.002f * sharpness, 0, 0, 0, 0.0005f, 0, 0, 0}; /* q, k, v 16 bytes apart */
    uint8_t *g_codes = device_((cells + 1) * stride), *g_out = device_((cells + 1) * width);
    float *g_scales = device_(sizeof(host_scales)), *g_scale_o = device_(16);
    uint32_t *g_spans = device_(segments * 8);
    upload_(g_codes, codes, (cells + 1) * stride), upload_(g_scales, host_scales, sizeof(host_scales));
    upload_(g_scale_o, &scale_o, 4), upload_(g_spans, spans, segments * 8);
    uform_cudnn_attention_t *plan = NULL;
    KERNEL_OK(uform_cudnn_attention_create_fp8(&plan, segments, longest, width));
    KERNEL_OK(uform_cudnn_attention_prepare(plan, g_spans, cells, NULL));
    CUDA_OK(cudaMemset(g_out, 0x7f, cells * width));
    PLANTED_OK("cudnn_attention_fp8", plant, uform_cudnn_attention_forward_fp8(plan, g_codes, g_scales, g_scale_o, g_out, NULL));
    download_(out, g_out, cells * width);
    double worst = 0, *p = malloc(longest * 8);
    for (size_t i = 0, first = 0; i < segments; first += lengths[i], ++i)
        for (size_t h = 0; h < heads; ++h)
            for (size_t t = first; t < first + lengths[i]; ++t) {
                double largest = -INFINITY, score_error = 0;
                for (size_t u = first; u < first + lengths[i]; ++u) {
                    double magnitude, dot = e4m3_dot_(codes + t * stride + h * 64, codes + u * stride + width + h * 64, 64, &magnitude);
                    double product = (double)host_scales[0] * host_scales[4] * 0.125;
                    p[u - first] = dot * product;
                    score_error = fmax(score_error, (64 * ldexp(1.0, -14) * magnitude + 4 * unit_ * magnitude) * product);
                    largest = fmax(largest, p[u - first]);
                }
                double sum = 0;
                for (size_t u = 0; u < lengths[i]; ++u) sum += (p[u] = exp(p[u] - largest));
                /* a weight's relative error, with P v's fast accumulation over the segment */
                double moved = ldexp(1.0, -4) + 2 * expm1(2 * score_error) + ldexp(1.0, -14) * lengths[i] + 8 * unit_;
                for (size_t c = 0; c < 64; ++c) {
                    double o = 0, spread = 0, floor = 0;
                    for (size_t u = 0; u < lengths[i]; ++u) {
                        double v = e4m3_definition(codes[(first + u) * stride + 2 * width + h * 64 + c]) * host_scales[8];
                        o += p[u] * v, spread += p[u] * fabs(v), floor += fabs(v);
                    }
                    double value = o / sum * scale_o;
                    double allowed = (moved * (spread + fabs(o)) + ldexp(1.0, -9) / 448 * floor) / sum * scale_o + 8 * unit_ * fabs(value);
                    compare_(&worst, e4m3_definition(out[t * width + h * 64 + c]), value, fabs(e4m3_nearest(value) - value) + 2 * allowed + 1e-300);
                }
            }
    record_(name, worst, plant);
    uform_cudnn_attention_destroy(plan);
    free(spans), free(codes), free(out), free(p);
    cudaFree(g_codes), cudaFree(g_out), cudaFree(g_scales), cudaFree(g_scale_o), cudaFree(g_spans);
}

static void check_cudnn_attention_fp8_(int plant) {
    size_t version = uform_cudnn_version();
    if (version < uform_cudnn_fp8_attention_least_k && !getenv("UFORM_CONTRACT_FP8_ATTENTION")) { /* the forward refuses it there */
        if (!plant)
            printf("cudnn_attention_forward_fp8: skipped: cuDNN %zu.%zu, below 9.23, where the forward refuses FP8 attention "
                   "(UFORM_CONTRACT_FP8_ATTENTION=1 checks it anyway)\n", version / 10000, version / 100 % 100);
        return;
    }
    size_t const lengths[] = {37, 128, 5, 90};
    cudnn_attention_fp8_run_(plant, lengths, 4, 128, 128, 1, "cudnn_attention_forward_fp8 (ragged, E4M3 in and out)");
    size_t const padded[64] = {12, 40, 1, 64, 30}; /* the forward's plans: 64 segments at least, the unused of length 0 */
    cudnn_attention_fp8_run_(plant, padded, 64, 64, 128, 1, "cudnn_attention_forward_fp8 (padded, spare row)");
    /* three heads, as the 192x3 test model, and scores 16 times larger: where the forward's test fails */
    cudnn_attention_fp8_run_(plant, padded, 64, 64, 192, 4, "cudnn_attention_forward_fp8 (3 heads, sharp)");
    /* long segments just before short ones: a last query tile stored past its segment would land on the next */
    size_t const after_long[] = {150, 1, 2, 250, 5, 3};
    cudnn_attention_fp8_run_(plant, after_long, 6, 256, 192, 4, "cudnn_attention_forward_fp8 (short after long)");
}
#endif

/* --- Attention at the benchmark's shape (attention_reference.c says how it is checked). Control:
 *     segment 3 cut to half its length (cuDNN) or split in two (ours), so its rows see other keys
 *     than the reference's. */
static void attention_shape_run_(int plant, int cudnn, size_t segments, size_t length) {
    size_t width = 512, heads = 8, cells = segments * length, count = segments;
    uint32_t *spans = malloc((segments + 1) * 8), *given = malloc((segments + 1) * 8), *segment_of = malloc(cells * 4);
    for (size_t s = 0; s < segments; ++s) spans[2 * s] = (uint32_t)(s * length), spans[2 * s + 1] = (uint32_t)length;
    memcpy(given, spans, segments * 8);
    if (plant && cudnn) given[7] = (uint32_t)(length / 2); /* planted: segment 3 cut to half its length */
    if (plant && !cudnn) { /* planted: segment 3 split in two */
        memmove(given + 8, given + 6, (segments - 3) * 8);
        given[7] = given[9] = (uint32_t)(length / 2), given[8] = (uint32_t)(3 * length + length / 2);
        count = segments + 1;
    }
    for (size_t s = 0; s < count; ++s)
        for (size_t c = given[2 * s]; c < given[2 * s] + given[2 * s + 1]; ++c) segment_of[c] = (uint32_t)s;
    attention_host_t h = attention_host_(cells, width);
    attention_device_(cudnn, h.qkv, h.d_out, cells, width, given, count, segment_of, spans, segments, length, 0, h.out,
                      h.d_qkv, h.lse);
    attention_view_t view = {h.qkv, h.out, h.d_out, h.d_qkv, h.lse, width, heads};
    double worst = attention_check_sampled(&view, segments, length);
    char name[64];
    snprintf(name, sizeof(name), "attention at %zu x %zu, sampled%s", segments, length, cudnn ? " (cuDNN)" : "");
    record_(name, worst, plant);
    free(spans), free(given), free(segment_of), attention_host_free_(&h);
}

static void check_attention_shape_(int plant) {
    attention_shape_run_(plant, 0, 16, 4096);
#if defined(UFORM_HAVE_CUDNN)
    attention_shape_run_(plant, 1, 16, 4096);
#endif
}

/* --- The attention pool, one block per (segment, head). Scores are 64-term dot products within
 *     ds = 66 u sum |q h| / 8; the softmax's max and sum are block reductions of T/128 serial terms
 *     and 7 levels, so the weights are within e_a = 2 max ds + 2 (T/128 + 11) u relative; pooled is a
 *     serial sum over T cells: |pooled - pooled*| <= 2^-8 |pooled*| + (1 + 2^-8)(e_a + (T + 2) u) sum a |h|.
 *     Backward, given the kernel's weights a: dalpha within 66 u sum |dp h|; mean = sum a dalpha
 *     within (T/128 + 9) u sum |a dalpha| + sum a |d dalpha|; dS = a (dalpha - mean) / 8 within
 *     E = a (|d dalpha| + |d mean| + 2u |dalpha - mean|) / 8; each d_hidden element (added to its old
 *     value) within 2u a |dp| + E |q| + 2u |dS q| + u (|new| + |old|); the query's gradient sums the
 *     segment's cells serially, then the segments: sum (E |h| + (T + S + 3) u |dS h|). */
static void check_pool_(int plant) {
    size_t width = 128, heads = 2, lengths[] = {1, 9, 300, 40, 2, 77, 129, 16}, segments = 8, cells = 0;
    for (size_t s = 0; s < segments; ++s) cells += lengths[s];
    uint32_t *spans = malloc(segments * 8);
    for (size_t s = 0, first = 0; s < segments; first += lengths[s], ++s) spans[2 * s] = (uint32_t)first, spans[2 * s + 1] = (uint32_t)lengths[s];
    uint16_t *hidden = malloc((cells + 1) * width * 2), *pooled = malloc(segments * width * 2);
    float *query = malloc(width * 4), *weights = malloc((cells + 1) * heads * 4), *d_pooled = malloc(segments * width * 4);
    float *d_hidden = malloc(cells * width * 4), *d_hidden_out = malloc(cells * width * 4), *d_query = malloc(width * 4);
    fill_bf16_(hidden, (cells + 1) * width, 2.0), fill_f32_(query, width, 3.0), fill_f32_(d_pooled, segments * width, 1.0);
    fill_f32_(d_hidden, cells * width, 0.5);
    uint16_t *g_hidden = device_((cells + 1) * width * 2), *g_pooled = device_(segments * width * 2);
    uint32_t *g_spans = device_(segments * 8);
    float *g_query = device_(width * 4), *g_weights = device_((cells + 1) * heads * 4), *g_d_pooled = device_(segments * width * 4);
    float *g_d_hidden = device_(cells * width * 4), *g_partials = device_(segments * width * 4), *g_d_query = device_(width * 4);
    upload_(g_hidden, hidden, (cells + 1) * width * 2), upload_(g_spans, spans, segments * 8), upload_(g_query, query, width * 4);
    upload_(g_d_pooled, d_pooled, segments * width * 4), upload_(g_d_hidden, d_hidden, cells * width * 4);
    CUDA_OK(cudaMemset(g_d_query, 0, width * 4));
    PLANTED_OK("pool_forward", plant == 1,
               uform_cuda_pool_forward(g_hidden, g_query, g_spans, segments, width, g_pooled, g_weights, NULL));
    PLANTED_OK("pool_backward", plant == 2 ? 2 : 0,
               uform_cuda_pool_backward(g_hidden, g_query, g_weights, g_d_pooled, g_spans, segments, width, g_d_hidden,
                                        g_partials, NULL));
    KERNEL_OK(uform_cuda_pool_query_reduce(g_partials, segments, width, g_d_query, NULL));
    download_(pooled, g_pooled, segments * width * 2), download_(weights, g_weights, cells * heads * 4);
    download_(d_hidden_out, g_d_hidden, cells * width * 4), download_(d_query, g_d_query, width * 4);
    double worst_forward = 0, worst_backward = 0, *query_grad = calloc(width, 8), *query_bound = calloc(width, 8);
#define H(c, h, d) ((double)bf16_to_f32_(hidden[(c) * width + (h) * 64 + (d)]))
    for (size_t s = 0; s < segments; ++s) {
        size_t first = spans[2 * s], length = lengths[s];
        double block = (double)length / 128 + 11;
        for (size_t h = 0; h < heads; ++h) {
            double largest = -INFINITY, total = 0, ds = 0, *score = malloc(length * 8);
            for (size_t t = 0; t < length; ++t) {
                double dot = 0, magnitude = 0;
                for (size_t d = 0; d < 64; ++d) dot += query[h * 64 + d] * H(first + t, h, d), magnitude += fabs(query[h * 64 + d] * H(first + t, h, d));
                score[t] = dot / 8, ds = fmax(ds, 66 * unit_ * magnitude / 8), largest = fmax(largest, score[t]);
            }
            for (size_t t = 0; t < length; ++t) total += exp(score[t] - largest);
            double e_a = 2 * ds + 2 * block * unit_;
            for (size_t d = 0; d < 64; ++d) {
                double value = 0, weighted = 0;
                for (size_t t = 0; t < length; ++t) {
                    double a = exp(score[t] - largest) / total;
                    value += a * H(first + t, h, d), weighted += a * fabs(H(first + t, h, d));
                }
                compare_(&worst_forward, bf16_to_f32_(pooled[s * width + h * 64 + d]), value,
                         bf16_unit_ * fabs(value) + (1 + bf16_unit_) * (e_a + ((double)length + 2) * unit_) * weighted + 1e-300);
            }
            free(score);
            if (plant == 1) continue;
            /* Backward from the kernel's weights. */
            double mean = 0, mean_error = 0, mean_magnitude = 0, *d_alpha = malloc(length * 8), *d_alpha_error = malloc(length * 8);
            for (size_t t = 0; t < length; ++t) {
                double dot = 0, magnitude = 0;
                for (size_t d = 0; d < 64; ++d) dot += d_pooled[s * width + h * 64 + d] * H(first + t, h, d), magnitude += fabs(d_pooled[s * width + h * 64 + d] * H(first + t, h, d));
                double a = weights[(first + t) * heads + h];
                d_alpha[t] = dot, d_alpha_error[t] = 66 * unit_ * magnitude;
                mean += a * dot, mean_magnitude += fabs(a * dot), mean_error += a * d_alpha_error[t];
            }
            mean_error += ((double)length / 128 + 9) * unit_ * mean_magnitude;
            for (size_t t = 0; t < length; ++t) {
                size_t cell = first + t;
                double a = weights[cell * heads + h], d_score = a * (d_alpha[t] - mean) / 8;
                double error = a * (d_alpha_error[t] + mean_error + 2 * unit_ * fabs(d_alpha[t] - mean)) / 8;
                for (size_t d = 0; d < 64; ++d) {
                    double old = d_hidden[cell * width + h * 64 + d], g = d_pooled[s * width + h * 64 + d];
                    double expected = old + a * g + d_score * query[h * 64 + d];
                    double bound = 2 * unit_ * a * fabs(g) + error * fabs(query[h * 64 + d]) + 2 * unit_ * fabs(d_score * query[h * 64 + d]) +
                                   unit_ * (fabs(expected) + fabs(old));
                    compare_(&worst_backward, d_hidden_out[cell * width + h * 64 + d], expected, bound + 1e-300);
                    query_grad[h * 64 + d] += d_score * H(cell, h, d);
                    query_bound[h * 64 + d] += error * fabs(H(cell, h, d)) + ((double)length + (double)segments + 3) * unit_ * fabs(d_score * H(cell, h, d));
                }
            }
            free(d_alpha), free(d_alpha_error);
        }
    }
#undef H
    if (plant != 1)
        for (size_t d = 0; d < width; ++d) compare_(&worst_backward, d_query[d], query_grad[d], query_bound[d] + 1e-300);
    if (plant != 2) record_("pool_forward", worst_forward, plant);
    if (plant != 1) record_("pool_backward", worst_backward, plant);
    free(spans), free(hidden), free(pooled), free(query), free(weights), free(d_pooled), free(d_hidden), free(d_hidden_out), free(d_query);
    free(query_grad), free(query_bound);
    cudaFree(g_hidden), cudaFree(g_pooled), cudaFree(g_spans), cudaFree(g_query), cudaFree(g_weights), cudaFree(g_d_pooled);
    cudaFree(g_d_hidden), cudaFree(g_partials), cudaFree(g_d_query);
}

/* --- SwiGLU. Forward: expf is within 2 ulp; 1 + e, the division, g s and the product with u add
 *     4 roundings, and 1/(1+e) passes e's error through at most once: the Float32 value is within
 *     8 u relative; the BF16 store adds 2^-8. Backward: the slope s (1 + g (1 - s)) adds 4 more
 *     roundings on each of its terms: |d_gate - d*| <= 2^-8 |d*| + 12 u |dh u| s (1 + |g| (1 - s)),
 *     and d_up as the forward: 2^-8 |d*| + 8 u |dh g s|. */
static void check_swiglu_(int plant) {
    size_t cells = 500, hidden = 1024;
    uint16_t *gate_up = malloc(cells * 2 * hidden * 2), *out = malloc(cells * hidden * 2), *d_out = malloc(cells * 2 * hidden * 2);
    uint16_t *d_hidden = malloc(cells * hidden * 2);
    fill_bf16_(gate_up, cells * 2 * hidden, 4.0), fill_bf16_(d_hidden, cells * hidden, 1.0);
    uint16_t *g_gate_up = device_(cells * 2 * hidden * 2), *g_out = device_(cells * hidden * 2), *g_d_out = device_(cells * 2 * hidden * 2);
    uint16_t *g_d_hidden = device_(cells * hidden * 2);
    upload_(g_gate_up, gate_up, cells * 2 * hidden * 2), upload_(g_d_hidden, d_hidden, cells * hidden * 2);
    PLANTED_OK("swiglu_forward", plant == 1, uform_cuda_swiglu_forward(g_gate_up, cells, hidden, g_out, NULL));
    PLANTED_OK("swiglu_backward", plant == 2,
               uform_cuda_swiglu_backward(g_gate_up, g_d_hidden, cells, hidden, g_d_out, NULL));
    download_(out, g_out, cells * hidden * 2), download_(d_out, g_d_out, cells * 2 * hidden * 2);
    double worst_forward = 0, worst_backward = 0;
    for (size_t c = 0; c < cells; ++c)
        for (size_t i = 0; i < hidden; ++i) {
            double g = bf16_to_f32_(gate_up[c * 2 * hidden + i]), u = bf16_to_f32_(gate_up[c * 2 * hidden + hidden + i]);
            double s = 1.0 / (1.0 + exp(-g)), expected = g * s * u, dh = bf16_to_f32_(d_hidden[c * hidden + i]);
            compare_(&worst_forward, bf16_to_f32_(out[c * hidden + i]), expected, (bf16_unit_ + 8 * unit_) * fabs(expected) + 1e-300);
            double d_gate = dh * u * s * (1 + g * (1 - s)), d_up = dh * g * s;
            compare_(&worst_backward, bf16_to_f32_(d_out[c * 2 * hidden + i]), d_gate,
                     bf16_unit_ * fabs(d_gate) + 12 * unit_ * fabs(dh * u) * s * (1 + fabs(g) * (1 - s)) + 1e-300);
            compare_(&worst_backward, bf16_to_f32_(d_out[c * 2 * hidden + hidden + i]), d_up,
                     bf16_unit_ * fabs(d_up) + 8 * unit_ * fabs(d_up) + 1e-300);
        }
    if (plant != 2) record_("swiglu_forward", worst_forward, plant);
    if (plant != 1) record_("swiglu_backward", worst_backward, plant);
    free(gate_up), free(out), free(d_out), free(d_hidden);
    cudaFree(g_gate_up), cudaFree(g_out), cudaFree(g_d_out), cudaFree(g_d_hidden);
}

/* --- Cross-entropy over 258 BF16 logits. The sum of exponentials: 3 serial terms per thread and a
 *     7-level tree, each exp within 2 ulp: relative error <= 12 u; logf 1 ulp; so log_sum is within
 *     E = |max| u + 13 u + u |log_sum| of exact, the loss within E + u |loss|. The gradient
 *     p = exp(v - log_sum) is within (E + u |v - log_sum| + 3 u) relative, then (p - onehot) scale
 *     and the BF16 store: |d - d*| <= 2^-8 |d*| + |scale| p* (E + u |v - log_sum| + 4 u). Unscored
 *     rows must be exactly zero. */
static void check_cross_entropy_(int plant) {
    size_t rows = 800, vocabulary = 258;
    uint16_t *logits = malloc(rows * vocabulary * 2), *d_logits = malloc(rows * vocabulary * 2);
    int32_t *targets = malloc(rows * 4);
    float *losses = malloc(rows * 4), scale = 1.0f / 600.0f;
    fill_bf16_(logits, rows * vocabulary, 8.0);
    for (size_t r = 0; r < rows; ++r) targets[r] = r % 4 == 3 ? -1 : (int32_t)((uniform_() + 1) * 0.5 * 257.99);
    uint16_t *g_logits = device_(rows * vocabulary * 2), *g_d = device_(rows * vocabulary * 2);
    int32_t *g_targets = device_(rows * 4);
    float *g_losses = device_(rows * 4), *g_scale = device_(4);
    upload_(g_logits, logits, rows * vocabulary * 2), upload_(g_targets, targets, rows * 4), upload_(g_scale, &scale, 4);
    PLANTED_OK("cross_entropy", plant,
               uform_cuda_cross_entropy(g_logits, vocabulary, g_targets, rows, g_scale, g_losses, g_d, NULL));
    download_(losses, g_losses, rows * 4), download_(d_logits, g_d, rows * vocabulary * 2);
    double worst = 0;
    for (size_t r = 0; r < rows; ++r) {
        if (targets[r] < 0) {
            compare_(&worst, losses[r], 0, 0);
            for (size_t v = 0; v < vocabulary; ++v) compare_(&worst, bf16_to_f32_(d_logits[r * vocabulary + v]), 0, 0);
            continue;
        }
        double largest = -INFINITY, sum = 0;
        for (size_t v = 0; v < vocabulary; ++v) largest = fmax(largest, bf16_to_f32_(logits[r * vocabulary + v]));
        for (size_t v = 0; v < vocabulary; ++v) sum += exp(bf16_to_f32_(logits[r * vocabulary + v]) - largest);
        double log_sum = largest + log(sum), loss = log_sum - bf16_to_f32_(logits[r * vocabulary + targets[r]]);
        double e = fabs(largest) * unit_ + 13 * unit_ + unit_ * fabs(log_sum);
        compare_(&worst, losses[r], loss, e + unit_ * fabs(loss));
        for (size_t v = 0; v < vocabulary; ++v) {
            double value = bf16_to_f32_(logits[r * vocabulary + v]), p = exp(value - log_sum);
            double expected = (p - (v == (size_t)targets[r])) * scale;
            double bound = bf16_unit_ * fabs(expected) + fabs(scale) * p * (e + unit_ * fabs(value - log_sum) + 4 * unit_);
            compare_(&worst, bf16_to_f32_(d_logits[r * vocabulary + v]), expected, bound + 1e-300);
        }
    }
    record_("cross_entropy", worst, plant);
    free(logits), free(d_logits), free(targets), free(losses);
    cudaFree(g_logits), cudaFree(g_d), cudaFree(g_targets), cudaFree(g_losses), cudaFree(g_scale);
}

/* --- Adafactor on a BF16 matrix, one step t, against the same step in float64. Relative errors:
 *     R: (columns/256 + 13) u (a tree sum and the blend); C: (64 + rows/64 + 5) u (serial sums of 64
 *     rows, then of the partials);
 *     mean(R): e_R + (rows/256 + 10) u; U = g rsqrt(R / mean) rsqrt(C / c2): e_U = (e_R + e_C + e_mean)/2
 *     + 11.5u (two quotients and c2's rounding, halved: 1.5u; two rsqrtf at 2 ulp: 8u; two products: 2u);
 *     the clipping factor from sum U^2: e_s = e_U + (count/(256 B) + 8 + B/256 + 8) u / 2 + 3u for B
 *     block partials summed by one more block;
 *     M: (1 - b1) |U/s| (e_U + e_s + u) + 3u (b1 |M0| + (1 - b1) |U/s|);
 *     W: the Float32 value is within d = lr (|M - M*| / c1 + 5u (|M*| / c1 + wd |w|)) (five roundings: the rate, c1, the quotient, the sum, the product) + 2u |W*| of
 *     W*, and the BF16 store adds 2^-8 of it: |W - W*| <= 2^-8 (|W*| + d) + d. Run with clip 1 (the
 *     clipping active) and clip 100 (inactive, where a missing bias correction shows); and `quiet`: on
 *     step 1 from zero moments, 16 rows and 16 columns of G are zero, so R and C there hold only
 *     (1 - b2) 1e-30 and their product underflows Float32 (U must be 0 there, not NaN). */
static double adafactor_run_(int plant, double clip, size_t step, int quiet) {
    size_t rows = 192, columns = 320, count = rows * columns;
    double b1 = 0.9, b2 = 0.999, rate = 1e-2, decay = 0.01;
    uint16_t *w = malloc(count * 2), *w_out = malloc(count * 2);
    float *g = malloc(count * 4), *r0 = malloc(rows * 4), *c0 = malloc(columns * 4), *m0 = malloc(count * 4);
    float *r1 = malloc(rows * 4), *c1 = malloc(columns * 4), *m1 = malloc(count * 4);
    fill_bf16_(w, count, 0.5), fill_f32_(g, count, 1e-2), fill_f32_(m0, count, 0.3);
    for (size_t r = 0; r < rows; ++r) r0[r] = (float)(1e-4 * (1.5 + uniform_()));
    for (size_t c = 0; c < columns; ++c) c0[c] = (float)(1e-4 * (1.5 + uniform_()));
    for (size_t i = 0; i < count; i += 7) g[i] *= 30; /* heavy entries make rms(U) exceed 1 */
    for (size_t i = 0; quiet && i < count; ++i)
        if (i / columns < 16 || i % columns < 16) g[i] = 0;
    if (quiet) memset(r0, 0, rows * 4), memset(c0, 0, columns * 4), memset(m0, 0, count * 4);
    uint16_t *d_w = device_(count * 2);
    float *d_g = device_(count * 4), *d_r = device_(rows * 4), *d_c = device_(columns * 4), *d_m = device_(count * 4);
    float *d_scratch = device_(uform_cuda_adafactor_scratch(rows, columns) * 4), schedule[3], *d_schedule = device_(sizeof(schedule));
    uform_cuda_adafactor_schedule(rate, b1, b2, step, schedule);
    upload_(d_schedule, schedule, sizeof(schedule));
    upload_(d_w, w, count * 2), upload_(d_g, g, count * 4), upload_(d_r, r0, rows * 4), upload_(d_c, c0, columns * 4), upload_(d_m, m0, count * 4);
    PLANTED_OK("adafactor_matrix", plant,
               uform_cuda_adafactor_matrix(d_w, d_g, d_r, d_c, d_m, rows, columns, d_schedule, b1, b2, clip, decay,
                                           d_scratch, NULL));
    download_(w_out, d_w, count * 2), download_(r1, d_r, rows * 4), download_(c1, d_c, columns * 4), download_(m1, d_m, count * 4);
    double *rr = malloc(rows * 8), *cc = malloc(columns * 8), mean = 0, squares = 0, worst = 0;
    double c2 = 1 - pow(b2, (double)step), c1_ = 1 - pow(b1, (double)step);
    double e_r = ((double)columns / 256 + 13) * unit_, e_c = ((rows < 64 ? (double)rows : 64.0) + (double)((rows + 63) / 64) + 5) * unit_;
    double e_mean = e_r + ((double)rows / 256 + 10) * unit_, e_u = (e_r + e_c + e_mean) / 2 + 11.5 * unit_;
    size_t blocks = (count + 255) / 256 > rows + columns ? rows + columns : (count + 255) / 256;
    double e_s = e_u + ((double)count / (256.0 * blocks) + 8 + (double)((blocks + 255) / 256) + 8) * unit_ / 2 + 3 * unit_;
    for (size_t r = 0; r < rows; ++r) {
        double sum = 0;
        for (size_t c = 0; c < columns; ++c) sum += (double)g[r * columns + c] * g[r * columns + c] + 1e-30;
        rr[r] = b2 * r0[r] + (1 - b2) * sum / (double)columns;
        compare_(&worst, r1[r], rr[r], e_r * rr[r]);
        mean += rr[r] / (double)rows;
    }
    for (size_t c = 0; c < columns; ++c) {
        double sum = 0;
        for (size_t r = 0; r < rows; ++r) sum += (double)g[r * columns + c] * g[r * columns + c] + 1e-30;
        cc[c] = b2 * c0[c] + (1 - b2) * sum / (double)rows;
        compare_(&worst, c1[c], cc[c], e_c * cc[c]);
    }
    for (size_t i = 0; i < count; ++i) {
        double u = g[i] / sqrt(rr[i / columns] * cc[i % columns] / mean / c2);
        squares += u * u;
    }
    double shrink = fmax(1.0, sqrt(squares / (double)count) / clip);
    for (size_t i = 0; i < count; ++i) {
        double u = g[i] / sqrt(rr[i / columns] * cc[i % columns] / mean / c2) / shrink;
        double m = b1 * m0[i] + (1 - b1) * u, weight = bf16_to_f32_(w[i]);
        double m_bound = (1 - b1) * fabs(u) * (e_u + e_s + unit_) + 3 * unit_ * (b1 * fabs(m0[i]) + (1 - b1) * fabs(u));
        compare_(&worst, m1[i], m, m_bound + 1e-300);
        double expected = weight - rate * (m / c1_ + decay * weight);
        double d = rate * (m_bound / c1_ + 5 * unit_ * (fabs(m) / c1_ + decay * fabs(weight))) + 2 * unit_ * fabs(expected);
        compare_(&worst, bf16_to_f32_(w_out[i]), expected, bf16_unit_ * (fabs(expected) + d) + d + 1e-300);
    }
    free(w), free(w_out), free(g), free(r0), free(c0), free(m0), free(r1), free(c1), free(m1), free(rr), free(cc);
    cudaFree(d_w), cudaFree(d_g), cudaFree(d_r), cudaFree(d_c), cudaFree(d_m), cudaFree(d_scratch), cudaFree(d_schedule);
    return worst;
}

/* --- Adafactor on a Float32 vector (one block): V = b2 V0 + (1 - b2) (g^2 + 1e-30) within 3u relative;
 *     U = g rsqrt(V / c2) within e_U = 3u/2 + 6u (rsqrtf 2 ulp, the quotient, the product); the
 *     clipping factor from a tree sum of count/256 serial terms and 8 levels: e_s = e_U + (count/256
 *     + 8) u / 2 + 3u; M and W as for the matrix, W stored in Float32 (within d, no BF16 term). */
static double adafactor_vector_run_(int plant, double clip, size_t step) {
    size_t count = 1000;
    double b1 = 0.9, b2 = 0.999, rate = 1e-2, decay = 0.01;
    float *w = malloc(count * 4), *g = malloc(count * 4), *v0 = malloc(count * 4), *m0 = malloc(count * 4);
    float *w1 = malloc(count * 4), *v1 = malloc(count * 4), *m1 = malloc(count * 4), schedule[3];
    fill_f32_(w, count, 1.0), fill_f32_(g, count, 1e-2), fill_f32_(m0, count, 0.3);
    for (size_t i = 0; i < count; ++i) v0[i] = (float)(1e-4 * (1.5 + uniform_()));
    for (size_t i = 0; i < count; i += 7) g[i] *= 30;
    float *d_w = device_(count * 4), *d_g = device_(count * 4), *d_v = device_(count * 4), *d_m = device_(count * 4);
    float *d_schedule = device_(sizeof(schedule));
    uform_cuda_adafactor_schedule(rate, b1, b2, step, schedule);
    upload_(d_schedule, schedule, sizeof(schedule)), upload_(d_w, w, count * 4), upload_(d_g, g, count * 4);
    upload_(d_v, v0, count * 4), upload_(d_m, m0, count * 4);
    PLANTED_OK("adafactor_vector", plant,
               uform_cuda_adafactor_vector(d_w, d_g, d_v, d_m, count, d_schedule, b1, b2, clip, decay, NULL));
    download_(w1, d_w, count * 4), download_(v1, d_v, count * 4), download_(m1, d_m, count * 4);
    double c2 = 1 - pow(b2, (double)step), c1 = 1 - pow(b1, (double)step), squares = 0, worst = 0;
    double e_u = 1.5 * unit_ + 6 * unit_, e_s = e_u + ((double)count / 256 + 8) * unit_ / 2 + 3 * unit_;
    double *v = malloc(count * 8);
    for (size_t i = 0; i < count; ++i) {
        v[i] = b2 * v0[i] + (1 - b2) * ((double)g[i] * g[i] + 1e-30);
        compare_(&worst, v1[i], v[i], 3 * unit_ * v[i]);
        squares += (double)g[i] * g[i] / (v[i] / c2);
    }
    double shrink = fmax(1.0, sqrt(squares / (double)count) / clip);
    for (size_t i = 0; i < count; ++i) {
        double u = g[i] / sqrt(v[i] / c2) / shrink, m = b1 * m0[i] + (1 - b1) * u;
        double m_bound = (1 - b1) * fabs(u) * (e_u + e_s + unit_) + 3 * unit_ * (b1 * fabs(m0[i]) + (1 - b1) * fabs(u));
        compare_(&worst, m1[i], m, m_bound + 1e-300);
        double expected = w[i] - rate * (m / c1 + decay * w[i]);
        double d = rate * (m_bound / c1 + 5 * unit_ * (fabs(m) / c1 + decay * fabs(w[i]))) + 2 * unit_ * fabs(expected);
        compare_(&worst, w1[i], expected, d + 1e-300);
    }
    free(w), free(g), free(v0), free(m0), free(w1), free(v1), free(m1), free(v);
    cudaFree(d_w), cudaFree(d_g), cudaFree(d_v), cudaFree(d_m), cudaFree(d_schedule);
    return worst;
}

static void check_adafactor_(int plant) {
    double clipped = adafactor_run_(plant, 1.0, 3, 0), free_running = adafactor_run_(plant, 100.0, 3, 0);
    double quiet = adafactor_run_(plant, 1.0, 1, 1), worst = clipped > free_running ? clipped : free_running;
    record_("adafactor_matrix", quiet > worst ? quiet : worst, plant);
    if (plant == 2) return; /* that control is the matrix's alone */
    clipped = adafactor_vector_run_(plant, 1.0, 3), free_running = adafactor_vector_run_(plant, 100.0, 3);
    record_("adafactor_vector", clipped > free_running ? clipped : free_running, plant);
}

/* --- Rounding to BF16: exactly the nearest even value (bound 0), NaN and infinity kept; the
 *     planted control truncates instead. */
static void check_round_(int plant) {
    size_t count = 50000;
    float *x = malloc(count * 4);
    uint16_t *y = malloc(count * 2);
    fill_f32_(x, count, 1e3);
    x[0] = INFINITY, x[1] = -INFINITY, x[2] = 0.0f, x[3] = -0.0f;
    float *g_x = device_(count * 4);
    uint16_t *g_y = device_(count * 2);
    upload_(g_x, x, count * 4);
    PLANTED_OK("round_bf16", plant, uform_cuda_round_bf16(g_x, count, g_y, NULL));
    download_(y, g_y, count * 2);
    double worst = 0;
    for (size_t i = 0; i < count; ++i) compare_(&worst, bf16_to_f32_(y[i]), bf16_to_f32_(f32_to_bf16_(x[i])), 0);
    record_("round_bf16", worst, plant);
    free(x), free(y), cudaFree(g_x), cudaFree(g_y);
}

/* --- The loss total: one block of 1024 threads, count/1024 serial terms each, then a 10-level tree,
 *     then the product by the scale: |error| <= (count/1024 + 11) u scale sum |x| + u |result*|. */
static void check_sum_(int plant) {
    size_t count = 100000;
    float *x = malloc(count * 4), scale = 1.0f / 3000.0f, result = 0;
    fill_f32_(x, count, 4.0);
    float *g_x = device_(count * 4), *g_scale = device_(4), *g_result = device_(4);
    upload_(g_x, x, count * 4), upload_(g_scale, &scale, 4);
    KERNEL_OK(uform_cuda_sum(g_x, plant == 1 ? count - 1000 : count, g_scale, g_result, NULL)); /* planted: a tail dropped */
    download_(&result, g_result, 4);
    double sum = 0, magnitude = 0, worst = 0;
    for (size_t i = 0; i < count; ++i) sum += x[i], magnitude += fabs(x[i]);
    sum *= scale, magnitude *= scale;
    compare_(&worst, result, sum, ((double)count / 1024 + 11) * unit_ * magnitude + unit_ * fabs(sum));
    record_("sum (loss total)", worst, plant);
    free(x), cudaFree(g_x), cudaFree(g_scale), cudaFree(g_result);
}

/* --- cuBLASLt products, BF16 inputs (products exact in Float32), Float32 accumulation. Tensor
 *     cores may truncate rather than round while accumulating, so each addition errs by up to one
 *     ulp, 2u: |C - C*| <= g_k sum_j |a_ij b_kj|, g_k = 2 k u / (1 - 2 k u); a BF16 C adds 2^-8 |C*|;
 *     an added C (Float32) one more rounding, u |C*|. Checked for the three forms the step uses:
 *     A B^T (forward), A^T B (weight gradients), A B (input gradients, added to a residual). The
 *     output starts filled with noise, which a correct product overwrites. */
static double gemm_form_(int plant, int transpose_a, int transpose_b, int add, int d_is_f32) {
    size_t m = 384, n = 320, k = 512;
    uint16_t *a = malloc(m * k * 2), *b = malloc(n * k * 2), *d16 = malloc(m * n * 2);
    float *d32 = malloc(m * n * 4), *noise = malloc(m * n * 4), *c = malloc(m * n * 4);
    fill_bf16_(a, m * k, 1.0), fill_bf16_(b, n * k, 1.0), fill_f32_(noise, m * n, 100.0), fill_f32_(c, m * n, 10.0);
    for (size_t i = 0; i < m * n; ++i) d16[i] = f32_to_bf16_(noise[i]);
    uint16_t *g_a = device_(m * k * 2), *g_b = device_(n * k * 2);
    void *g_d = device_(m * n * 4), *g_c = device_(m * n * 4);
    upload_(g_a, a, m * k * 2), upload_(g_b, b, n * k * 2), upload_(g_c, c, m * n * 4);
    upload_(g_d, d_is_f32 ? (void *)noise : (void *)d16, m * n * (d_is_f32 ? 4 : 2));
    uform_cuda_gemm_t *gemm;
    KERNEL_OK(uform_cuda_gemm_create(&gemm, 32u << 20));
    /* Element (i, l) of op(A) sits at a[i k + l] (A [m, k]) or a[l m + i] (A [k, m], transposed). */
    size_t lda = transpose_a ? m : k, ldb = transpose_b ? k : n;
    PLANTED_OK("gemm", plant,
               uform_cuda_gemm(gemm, transpose_a, transpose_b, m, n, k, g_a, lda, g_b, ldb, add ? g_c : NULL, g_d, n,
                               d_is_f32, NULL));
    download_(d_is_f32 ? (void *)d32 : (void *)d16, g_d, m * n * (d_is_f32 ? 4 : 2));
    double gamma = tensor_gamma_((double)k), worst = 0;
    for (size_t i = 0; i < m; ++i)
        for (size_t j = 0; j < n; ++j) {
            double sum = add ? c[i * n + j] : 0, magnitude = 0;
            for (size_t l = 0; l < k; ++l) {
                double x = bf16_to_f32_(transpose_a ? a[l * m + i] : a[i * k + l]);
                double y = bf16_to_f32_(transpose_b ? b[j * k + l] : b[l * n + j]);
                sum += x * y, magnitude += fabs(x * y);
            }
            double bound = gamma * magnitude + (add ? unit_ * (fabs(sum) + fabs(c[i * n + j])) : 0);
            if (d_is_f32) compare_(&worst, d32[i * n + j], sum, bound + 1e-300);
            else compare_(&worst, bf16_to_f32_(d16[i * n + j]), sum, bf16_unit_ * fabs(sum) + (1 + bf16_unit_) * bound + 1e-300);
        }
    uform_cuda_gemm_destroy(gemm);
    free(a), free(b), free(d16), free(d32), free(noise), free(c);
    cudaFree(g_a), cudaFree(g_b), cudaFree(g_d), cudaFree(g_c);
    return worst;
}

static void check_gemm_(int plant) {
    double forms[] = {gemm_form_(plant, 0, 1, 0, 1), gemm_form_(plant, 0, 1, 0, 0), gemm_form_(plant, 1, 0, 0, 1),
                      gemm_form_(plant, 0, 0, 1, 1)}, worst = 0;
    for (size_t i = 0; i < 4; ++i) worst = forms[i] > worst ? forms[i] : worst;
    record_("gemm (cuBLASLt: A B^T, A^T B, A B + C)", worst, plant);
}

/* --- E4M3 (docs/precision.md), against e4m3_reference.h's definition and nearest value. */
/* Rows of BF16 (one zero row, magnitudes from 2^-12 to 2^3): each scale exactly max |x| / 448 in
 * Float32, each code's value the nearest to x * (1 / scale) (bound 0); at a fixed scale (bounded
 * per-tensor scales) the same with that scale, the largest values saturated and the smallest
 * subnormal. The norm's fused codes must be
 * the separate kernel's of the norm's own output, bit for bit, and SwiGLU's fused codes those of
 * swiglu_forward's output, at row scales and at a fixed one. The E4M3 product, with outer-vector
 * and with per-tensor scales, against the float64
 * sum of the codes' products times both scales: E4M3 x E4M3 is exact in Float32, and Hopper's FP8
 * tensor cores accumulate with fewer bits than Float32 between promotions (the bound's unit 2^-14
 * per term, not 2^-24), plus the two scalings and a BF16 or Float32 output. */
static void check_e4m3_(int plant) {
    size_t rows = 96, width = 512, n = 320;
    uint16_t *x = malloc(rows * width * 2);
    uint8_t *codes = malloc(rows * width), *fused = malloc(rows * width), *w = malloc(n * width);
    float *scales = malloc(rows * 4), *fused_scales = malloc(rows * 4), *w_scales = malloc(n * 4), *xf = malloc(rows * width * 4);
    float *gain = malloc(width * 4), *norm_scales = malloc(rows * 4), *d = malloc(rows * n * 4), *noise = malloc(rows * n * 4);
    for (size_t r = 0; r < rows; ++r)
        for (size_t j = 0; j < width; ++j) {
            double magnitude = ldexp(1.0, (int)(r % 16) - 12);
            x[r * width + j] = f32_to_bf16_(r == 5 ? 0.0f : (float)(uniform_() * magnitude * (j % 7 == 0 ? 8 : 1)));
            xf[r * width + j] = (float)(uniform_() * (1 + r % 5));
        }
    for (size_t i = 0; i < width; ++i) gain[i] = (float)(0.5 + 0.5 * uniform_() + 1.0);
    for (size_t i = 0; i < n * width; ++i) w[i] = (uint8_t)((unsigned)(uniform_() * 1e6) % 256), w[i] = (w[i] & 0x7f) == 0x7f ? 0x3c : w[i];
    for (size_t i = 0; i < n; ++i) w_scales[i] = (float)(0.001 * (1.5 + uniform_()));
    fill_f32_(noise, rows * n, 100.0);
    uint16_t *g_x = device_(rows * width * 2), *g_y = device_(rows * width * 2);
    uint8_t *g_codes = device_(rows * width), *g_fused = device_(rows * width), *g_w = device_(n * width);
    float *g_scales = device_(rows * 4), *g_fused_scales = device_(rows * 4), *g_w_scales = device_(n * 4), *g_xf = device_(rows * width * 4);
    float *g_gain = device_(width * 4), *g_norm = device_(rows * 4), *g_d = device_(rows * n * 4);
    upload_(g_x, x, rows * width * 2), upload_(g_xf, xf, rows * width * 4), upload_(g_gain, gain, width * 4);
    upload_(g_w, w, n * width), upload_(g_w_scales, w_scales, n * 4), upload_(g_d, noise, rows * n * 4);
    double worst = 0;
    float const fixed = 0.05f; /* a bounded per-tensor scale: x / 0.05 saturates past 22.4, is subnormal under 7.8e-4 */
    if (plant == 0 || plant == 1) {
        PLANTED_OK("quantize_e4m3", plant == 1, uform_cuda_quantize_e4m3(g_x, rows, width, g_codes, g_scales, 0, NULL));
        download_(codes, g_codes, rows * width), download_(scales, g_scales, rows * 4);
        for (size_t r = 0; r < rows; ++r) {
            float largest = 0;
            for (size_t j = 0; j < width; ++j) largest = fmaxf(largest, fabsf(bf16_to_f32_(x[r * width + j])));
            float scale = largest > 0 ? largest / 448.0f : 1.0f, inverse = 1.0f / scale;
            compare_(&worst, scales[r], scale, 0);
            for (size_t j = 0; j < width; ++j)
                compare_(&worst, e4m3_definition(codes[r * width + j]), e4m3_nearest((double)(bf16_to_f32_(x[r * width + j]) * inverse)), 0);
        }
        record_("quantize_e4m3", worst, plant == 1);
        worst = 0;
        PLANTED_OK("quantize_e4m3", plant == 1, uform_cuda_quantize_e4m3(g_x, rows, width, g_codes, NULL, fixed, NULL));
        download_(codes, g_codes, rows * width);
        for (size_t i = 0; i < rows * width; ++i)
            compare_(&worst, e4m3_definition(codes[i]), e4m3_nearest((double)(bf16_to_f32_(x[i]) * (1.0f / fixed))), 0);
        record_("quantize_e4m3 (fixed scale)", worst, plant == 1);
    }
    if (plant == 0 || plant == 2) { /* the norm's fused codes against the separate kernel over its output */
        worst = 0;
        KERNEL_OK(uform_cuda_rmsnorm_forward(g_xf, g_gain, rows, width, g_y, g_norm, NULL));
        KERNEL_OK(uform_cuda_quantize_e4m3(g_y, rows, width, g_codes, g_scales, 0, NULL));
        PLANTED_OK("rmsnorm_forward_e4m3", plant == 2,
                   uform_cuda_rmsnorm_forward_e4m3(g_xf, g_gain, rows, width, NULL, g_norm, g_fused, g_fused_scales, 0, NULL)); /* y unstored, as inference runs it */
        download_(codes, g_codes, rows * width), download_(fused, g_fused, rows * width);
        download_(scales, g_scales, rows * 4), download_(fused_scales, g_fused_scales, rows * 4);
        for (size_t i = 0; i < rows * width; ++i) compare_(&worst, e4m3_definition(fused[i]), e4m3_definition(codes[i]), 0);
        for (size_t r = 0; r < rows; ++r) compare_(&worst, fused_scales[r], scales[r], 0);
        record_("rmsnorm_forward_e4m3 (codes)", worst, plant == 2);
        worst = 0; /* the norm's outputs reach a few units: a scale of 0.005 saturates the largest */
        KERNEL_OK(uform_cuda_quantize_e4m3(g_y, rows, width, g_codes, NULL, fixed / 10, NULL));
        PLANTED_OK("rmsnorm_forward_e4m3", plant == 2,
                   uform_cuda_rmsnorm_forward_e4m3(g_xf, g_gain, rows, width, NULL, g_norm, g_fused, NULL, fixed / 10, NULL));
        download_(codes, g_codes, rows * width), download_(fused, g_fused, rows * width);
        for (size_t i = 0; i < rows * width; ++i) compare_(&worst, e4m3_definition(fused[i]), e4m3_definition(codes[i]), 0);
        record_("rmsnorm_forward_e4m3 (codes, fixed scale)", worst, plant == 2);
    }
    if (plant == 0 || plant == 4) { /* SwiGLU's fused codes against the separate kernels over its output */
        /* x's values as gate_up rows of four shapes: one, several and a partial group a thread, and a row
         * past the register-kept width (the two-pass kernel); at row scales, then at a fixed 1 (SwiGLU of
         * values up to 64 reaches about 4096: the largest saturate) */
        size_t const shapes[4][2] = {{96, 256}, {12, 2040}, {4, 6136}, {2, 12288}};
        for (int at_fixed = 0; at_fixed < 2; ++at_fixed) {
            float scale = at_fixed ? 1.0f : 0.0f;
            float *rows_scales = at_fixed ? NULL : g_scales, *fused_rows_scales = at_fixed ? NULL : g_fused_scales;
            worst = 0;
            for (size_t t = 0; t < 4; ++t) {
                size_t cells = shapes[t][0], hidden = shapes[t][1];
                KERNEL_OK(uform_cuda_swiglu_forward(g_x, cells, hidden, g_y, NULL));
                KERNEL_OK(uform_cuda_quantize_e4m3(g_y, cells, hidden, g_codes, rows_scales, scale, NULL));
                PLANTED_OK("swiglu_e4m3", plant == 4, uform_cuda_swiglu_e4m3(g_x, cells, hidden, g_fused, fused_rows_scales, scale, NULL));
                download_(codes, g_codes, cells * hidden), download_(fused, g_fused, cells * hidden);
                for (size_t i = 0; i < cells * hidden; ++i) compare_(&worst, e4m3_definition(fused[i]), e4m3_definition(codes[i]), 0);
                if (at_fixed) continue;
                download_(scales, g_scales, cells * 4), download_(fused_scales, g_fused_scales, cells * 4);
                for (size_t r = 0; r < cells; ++r) compare_(&worst, fused_scales[r], scales[r], 0);
            }
            record_(at_fixed ? "swiglu_e4m3 (codes, fixed scale)" : "swiglu_e4m3 (codes)", worst, plant == 4);
        }
        /* From gate_up as E4M3 codes (any but NaN's) at a scale of 1/100 against Float64: each code within its
         * correct rounding's distance plus twice a Float32 evaluation's error (distance to the E4M3 grid moves
         * at most as far as its argument) */
        size_t const cells = 24, hidden = 1024;
        float const gate_up_scale = 0.01f;
        uint8_t *gate_up = malloc(cells * 2 * hidden), *g_gate_up = device_(cells * 2 * hidden);
        for (size_t i = 0; i < cells * 2 * hidden; ++i) {
            gate_up[i] = (uint8_t)((unsigned)(uniform_() * 1e6) % 256);
            if ((gate_up[i] & 0x7f) == 0x7f) gate_up[i] = 0x3c;
        }
        upload_(g_gate_up, gate_up, cells * 2 * hidden);
        worst = 0;
        PLANTED_OK("swiglu_e4m3", plant == 4, uform_cuda_swiglu_e4m3_codes(g_gate_up, gate_up_scale, cells, hidden, g_fused, fixed, NULL));
        download_(fused, g_fused, cells * hidden);
        for (size_t c = 0; c < cells; ++c)
            for (size_t j = 0; j < hidden; ++j) {
                double g = e4m3_definition(gate_up[c * 2 * hidden + j]) * (double)gate_up_scale;
                double u = e4m3_definition(gate_up[c * 2 * hidden + hidden + j]) * (double)gate_up_scale;
                double v = g / (1.0 + exp(-g)) * u / (double)fixed, evaluation = 16 * unit_ * fabs(v);
                compare_(&worst, e4m3_definition(fused[c * hidden + j]), v, fabs(e4m3_nearest(v) - v) + 2 * evaluation + 1e-300);
            }
        record_("swiglu_e4m3 (from gate_up's E4M3 codes)", worst, plant == 4);
        free(gate_up), cudaFree(g_gate_up);
    }
    if (plant == 0 || plant == 3) { /* the E4M3 product, Float32 out, over the codes just checked */
        worst = 0;
        uform_cuda_gemm_t *gemm;
        KERNEL_OK(uform_cuda_gemm_create(&gemm, 32u << 20));
        for (int scalar = 0; scalar < 2; ++scalar) { /* outer-vector scales, then one an operand (w_scales[0]) */
            worst = 0;
            upload_(g_d, noise, rows * n * 4);
            if (scalar) upload_(g_scales, &fixed, 4);
            KERNEL_OK(uform_cuda_quantize_e4m3(g_x, rows, width, g_codes, g_scales, scalar ? fixed : 0, NULL));
            PLANTED_OK("gemm_e4m3", plant == 3 ? 1 : 0,
                       uform_cuda_gemm_e4m3(gemm, rows, n, width, g_codes, g_scales, g_w, g_w_scales, NULL, g_d, 1, scalar, NULL));
            download_(d, g_d, rows * n * 4), download_(codes, g_codes, rows * width), download_(scales, g_scales, rows * 4);
            for (size_t r = 0; r < rows; ++r)
                for (size_t j = 0; j < n; ++j) {
                    double magnitude, sum = e4m3_dot_(codes + r * width, w + j * width, width, &magnitude);
                    double scale = scalar ? (double)fixed * w_scales[0] : (double)scales[r] * w_scales[j];
                    double bound = ((double)width * ldexp(1.0, -14) * magnitude + 3 * unit_ * fabs(sum)) * scale;
                    compare_(&worst, d[r * n + j], sum * scale, bound + 1e-300);
                }
            record_(scalar ? "gemm_e4m3 (cuBLASLt FP8, per-tensor scales)" : "gemm_e4m3 (cuBLASLt FP8, outer-vector scales)", worst,
                    plant == 3);
        }
        /* E4M3 out at one scale (gate_up's codes for SwiGLU), x's codes at `fixed` as just made: each code
         * within its correct rounding's distance plus twice the product's bound at that scale */
        worst = 0;
        double largest = 0;
        for (size_t r = 0; r < rows; ++r)
            for (size_t j = 0; j < n; ++j) largest = fmax(largest, fabs((double)d[r * n + j]));
        float inverse = (float)(400.0 / largest); /* the largest code near 400, none past 448 */
        if (inverse > 0.25f && inverse < 4.0f) inverse /= 8; /* far from 1, so that the control (the scale left out) shows */
        float *g_inverse = device_(16);
        upload_(g_inverse, &inverse, 4);
        uint8_t *out = malloc(rows * n), *g_out = device_(rows * n);
        PLANTED_OK("gemm_e4m3", plant == 3 ? 1 : 0,
                   uform_cuda_gemm_e4m3_codes(gemm, rows, n, width, g_codes, g_scales, g_w, g_w_scales, g_inverse, g_out, NULL));
        download_(out, g_out, rows * n);
        for (size_t r = 0; r < rows; ++r)
            for (size_t j = 0; j < n; ++j) {
                double magnitude, sum = e4m3_dot_(codes + r * width, w + j * width, width, &magnitude);
                double scale = (double)fixed * w_scales[0] * inverse, v = sum * scale;
                double product = ((double)width * ldexp(1.0, -14) * magnitude + 3 * unit_ * fabs(sum)) * scale + 4 * unit_ * fabs(v);
                compare_(&worst, e4m3_definition(out[r * n + j]), v, fabs(e4m3_nearest(v) - v) + 2 * product + 1e-300);
            }
        record_("gemm_e4m3_codes (cuBLASLt FP8 out, per-tensor scales)", worst, plant == 3);
        free(out), cudaFree(g_out), cudaFree(g_inverse);
        uform_cuda_gemm_destroy(gemm);
    }
    free(x), free(codes), free(fused), free(w), free(scales), free(fused_scales), free(w_scales), free(xf);
    free(gain), free(norm_scales), free(d), free(noise);
    cudaFree(g_x), cudaFree(g_y), cudaFree(g_codes), cudaFree(g_fused), cudaFree(g_w), cudaFree(g_scales);
    cudaFree(g_fused_scales), cudaFree(g_w_scales), cudaFree(g_xf), cudaFree(g_gain), cudaFree(g_norm), cudaFree(g_d);
}

int main(int argc, char **argv) {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        printf("uform_contract: skipped: no CUDA device\n");
        return 77;
    }
    if (argc == 3 && !strcmp(argv[1], "--json")) json_ = fopen(argv[2], "w");
    struct cudaDeviceProp properties;
    CUDA_OK(cudaGetDeviceProperties(&properties, 0));
    /* Each group: production (plant 0), then its planted controls. */
    struct { void (*check)(int); int plants; char const *controls[5]; } const groups[] = {
        {check_embedding_, 1, {"shifted index"}},
        {check_image_, 5, {"patch read transposed (pixel (y, x) as (x, y))", "alpha dropped (channel 3 read as 0)",
                           "bias dropped (scatter)", "each gradient row read from the next cell (gather)",
                           "the last image cell dropped (bias backward)"}},
        {check_mae_, 4, {"each masked row read from the cell after its own (gather)", "the gradient's factor 2 dropped (loss)",
                         "the last masked patch dropped (loss)", "dL/dh written, not added (scatter)"}},
        {check_video_, 1, {"a tube's two frames swapped (vectors)"}},
        {check_audio_, 1, {"a frame's samples read one sample late (vectors)"}},
        {check_mae_video_, 2, {"the gradient's factor 2 dropped (loss, 1536 values)", "the last masked tube dropped (loss)"}},
        {check_mae_audio_, 2, {"the gradient's factor 2 dropped (loss, 320 values)", "the last masked frame dropped (loss)"}},
        {check_rmsnorm_, 2, {"gain read one column off (forward)", "dropped term (backward)"}},
        {check_rmsnorm_bf16_, 1, {"gain read one column off (BF16 x)"}},
        {check_rope_, 1, {"rotary slot on the wrong axis"}},
        {check_attention_, 2, {"mask leaking past the segment (forward)", "softmax's shared term dropped (backward)"}},
#if defined(UFORM_HAVE_CUDNN)
        {check_cudnn_attention_, 1, {"a segment one cell too long (the mask leaks)"}},
#endif
        {check_attention_shape_, 1, {"segment 3 split in two (ours) or cut to half its length (cuDNN)"}},
        {check_attention_rotating_, 1, {"the sine's sign flipped in the load (fused rotary)"}},
        {check_attention_e4m3_, 1, {"mask leaking past the segment (E4M3 output)"}},
        {check_rope_e4m3_, 1, {"k's scale used for q (FP8 attention's codes)"}},
        {check_ragged_offsets_, 1, {"padding at its span's start, 0 (ragged offsets)"}},
#if defined(UFORM_HAVE_CUDNN)
        {check_cudnn_attention_fp8_, 1, {"v read at k's scale (cuDNN's FP8 attention)"}},
#endif
        {check_pool_, 2, {"pool running past its segment (forward)", "softmax's shared term dropped (backward)"}},
        {check_swiglu_, 2, {"sigmoid for silu (forward)", "dropped term of the slope (backward)"}},
        {check_cross_entropy_, 2, {"target's -1 dropped", "mask ignored"}},
        {check_adafactor_, 2, {"bias correction of V dropped", "V as the product R C, which underflows"}},
        {check_sum_, 1, {"the last 1000 terms dropped"}},
        {check_round_, 1, {"truncation for rounding"}},
        {check_gemm_, 1, {"C accumulated, not overwritten"}},
        {check_e4m3_, 4, {"a row's scale dropped (quantize)", "gain read one column off (the norm's codes)",
                          "D accumulated, not overwritten (E4M3 product)", "gate read for up (SwiGLU's codes)"}},
        {check_siglip_, 4, {"label sign flipped", "normalization's projection term dropped (backward)", "live counts ignored, capacities scored",
                             "anchors' loss weights ignored"}},
        {check_maxsim_, 3, {"argmax ties to the later cell", "normalization's projection term dropped (backward)",
                            "anchors' loss weights ignored"}},
        {check_spectral_, 2, {"TCR's 1 / eps^2 dropped", "Lipschitz gradient's factor 2 dropped"}},
    };
    char const *control_names[64];
    size_t controls = 0;
    for (size_t i = 0; i < sizeof(groups) / sizeof(groups[0]); ++i) {
        groups[i].check(0);
        for (int p = 1; p <= groups[i].plants; ++p) {
            size_t before = checks_count_;
            groups[i].check(p);
            for (size_t c = before; c < checks_count_; ++c) control_names[controls++] = groups[i].controls[p - 1];
        }
    }
    printf("CUDA kernel contract on %s (sm_%d%d)\n\n", properties.name, properties.major, properties.minor);
    printf("| kernel | worst error / bound | result |\n|---|---|---|\n");
    size_t kernels_passed = 0, kernels = 0, caught = 0, control_index = 0;
    for (size_t i = 0; i < checks_count_; ++i)
        if (!checks_[i].plant) {
            kernels++, kernels_passed += checks_[i].passed;
            printf("| %s | %.3g | %s |\n", checks_[i].name, checks_[i].worst, checks_[i].passed ? "pass" : "FAIL");
        }
    printf("\n| planted control | kernel | worst error / bound | result |\n|---|---|---|---|\n");
    for (size_t i = 0; i < checks_count_; ++i)
        if (checks_[i].plant) {
            caught += checks_[i].passed;
            printf("| %s | %s | %.3g | %s |\n", control_names[control_index++], checks_[i].name, checks_[i].worst,
                   checks_[i].passed ? "caught" : "MISSED");
        }
    printf("\n%zu of %zu kernels passed, %zu of %zu controls caught\n", kernels_passed, kernels, caught, controls);
    if (json_) {
        fprintf(json_, "{\"device\": \"%s\", \"checks\": [", properties.name);
        for (size_t i = 0; i < checks_count_; ++i)
            fprintf(json_, "%s{\"kernel\": \"%s\", \"plant\": %d, \"worst_ratio\": %.6g, \"passed\": %s}", i ? ", " : "",
                    checks_[i].name, checks_[i].plant, isinf(checks_[i].worst) ? 1e300 : checks_[i].worst,
                    checks_[i].passed ? "true" : "false");
        fprintf(json_, "]}\n");
        fclose(json_);
    }
    size_t failed = (kernels - kernels_passed) + (controls - caught);
    printf("%zu passed, %zu failed\n", kernels_passed + caught, failed);
    return failed ? 1 : 0;
}
