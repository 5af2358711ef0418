/*  attention_reference_test.c: the contract suite's attention reference (attention_reference.c)
 *  on the host, no GPU: an exact attention (float64, stored as the kernels store: O and gradients
 *  in BF16, lse in Float32) must pass both checks, whole and sampled, and three broken ones must
 *  fail them: the last key of each segment dropped, the softmax's shared term D dropped from dS,
 *  and one output row never written (NaN). So the bounds the GPU kernels are held to neither
 *  reject the exact answer nor let a wrong one through.
 *
 *      uform_attention_reference_test
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_reference.h"
#include "contract_host.h"

enum { exact_k, drop_last_key_k, drop_delta_k, unwritten_row_k };

/* Attention within `spans` in float64 over BF16 inputs, outputs rounded as the kernels store them. */
static void exact_(uint16_t const *qkv, uint16_t const *d_out, uint32_t const *spans, size_t segments, size_t width,
                   int broken, uint16_t *out, float *lse, uint16_t *d_qkv) {
    size_t heads = width / 64, stride = 3 * width, cells = spans[2 * segments - 2] + spans[2 * segments - 1];
    double *grad = calloc(cells * stride, 8), *score = malloc(cells * 8);
#define Q(c, h, d) ((double)bf16_to_f32_(qkv[(c) * stride + (h) * 64 + (d)]))
#define K(c, h, d) ((double)bf16_to_f32_(qkv[(c) * stride + width + (h) * 64 + (d)]))
#define V(c, h, d) ((double)bf16_to_f32_(qkv[(c) * stride + 2 * width + (h) * 64 + (d)]))
#define G(c, h, d) ((double)bf16_to_f32_(d_out[(c) * width + (h) * 64 + (d)]))
    for (size_t s = 0; s < segments; ++s) {
        size_t first = spans[2 * s], length = spans[2 * s + 1] - (broken == drop_last_key_k && spans[2 * s + 1] > 1);
        for (size_t i = first; i < first + spans[2 * s + 1]; ++i)
            for (size_t h = 0; h < heads; ++h) {
                double largest = -INFINITY, total = 0, o[64] = {0}, delta = 0;
                for (size_t j = 0; j < length; ++j) {
                    double dot = 0;
                    for (size_t d = 0; d < 64; ++d) dot += Q(i, h, d) * K(first + j, h, d);
                    score[j] = dot / 8, largest = fmax(largest, score[j]);
                }
                for (size_t j = 0; j < length; ++j) total += exp(score[j] - largest);
                double l = largest + log(total);
                for (size_t j = 0; j < length; ++j)
                    for (size_t d = 0; d < 64; ++d) o[d] += exp(score[j] - l) * V(first + j, h, d);
                lse[i * heads + h] = (float)l;
                for (size_t d = 0; d < 64; ++d) {
                    out[i * width + h * 64 + d] = f32_to_bf16_((float)o[d]);
                    delta += G(i, h, d) * (double)bf16_to_f32_(out[i * width + h * 64 + d]);
                }
                if (broken == drop_delta_k) delta = 0;
                for (size_t j = 0; j < length; ++j) {
                    double dp = 0, p = exp(score[j] - l);
                    for (size_t d = 0; d < 64; ++d) dp += G(i, h, d) * V(first + j, h, d);
                    double ds = p * (dp - delta) / 8;
                    for (size_t d = 0; d < 64; ++d) {
                        grad[i * stride + h * 64 + d] += ds * K(first + j, h, d);
                        grad[(first + j) * stride + width + h * 64 + d] += ds * Q(i, h, d);
                        grad[(first + j) * stride + 2 * width + h * 64 + d] += p * G(i, h, d);
                    }
                }
            }
    }
#undef Q
#undef K
#undef V
#undef G
    for (size_t x = 0; x < cells * stride; ++x) d_qkv[x] = f32_to_bf16_((float)grad[x]);
    if (broken == unwritten_row_k) memset(out + (cells / 2) * width, 0xff, width * 2); /* 0xffff: a BF16 NaN */
    free(grad), free(score);
}

/* One kernel, exact or broken, through the whole check and the sampled one: the two worst ratios. */
static void run_(uint32_t const *spans, size_t segments, size_t width, size_t sampled_length, int broken, double worst[2]) {
    size_t cells = spans[2 * segments - 2] + spans[2 * segments - 1], heads = width / 64;
    uint16_t *qkv = malloc(cells * 3 * width * 2), *d_out = malloc(cells * width * 2), *out = malloc(cells * width * 2);
    uint16_t *d_qkv = malloc(cells * 3 * width * 2);
    float *lse = malloc(cells * heads * 4);
    fill_bf16_(qkv, cells * 3 * width, 2.0), fill_bf16_(d_out, cells * width, 1.0);
    exact_(qkv, d_out, spans, segments, width, broken, out, lse, d_qkv);
    attention_view_t view = {qkv, out, d_out, d_qkv, lse, width, heads};
    double forward = 0, backward = 0;
    if (sampled_length) worst[1] = attention_check_sampled(&view, segments, sampled_length);
    else {
        attention_check_full(&view, spans, segments, (double)((cells + 63) / 64 + 1), 0, &forward, &backward);
        worst[0] = fmax(forward, backward);
    }
    free(qkv), free(d_out), free(out), free(d_qkv), free(lse);
}

int main(void) {
    /* The contract's irregular segments (whole check) and 4 segments of 128 cells, 8 heads (sampled). */
    size_t lengths[] = {1, 7, 64, 150, 33, 2, 97, 260, 5, 80}, segments = 10;
    uint32_t spans[20], even[8];
    for (size_t s = 0, first = 0; s < segments; first += lengths[s], ++s) spans[2 * s] = (uint32_t)first, spans[2 * s + 1] = (uint32_t)lengths[s];
    for (size_t s = 0; s < 4; ++s) even[2 * s] = (uint32_t)(s * 128), even[2 * s + 1] = 128;
    char const *names[] = {"exact", "last key of each segment dropped", "dS without D", "a row of O never written"};
    int failures = 0;
    printf("| kernel | whole check | sampled check | expected |\n|---|---|---|---|\n");
    for (int broken = exact_k; broken <= unwritten_row_k; ++broken) {
        double worst[2] = {0, 0};
        run_(spans, segments, 128, 0, broken, worst);
        run_(even, 4, 512, 128, broken, worst);
        int pass = broken == exact_k ? worst[0] <= 1 && worst[1] <= 1 : worst[0] > 1 && worst[1] > 1;
        failures += !pass;
        printf("| %s | %.3g | %.3g | %s: %s |\n", names[broken], worst[0], worst[1], broken == exact_k ? "within" : "beyond",
               pass ? "ok" : "FAIL");
    }
    printf("%s\n", failures ? "attention reference: FAILED" : "attention reference: exact passes, every broken kernel caught");
    return failures ? 1 : 0;
}
