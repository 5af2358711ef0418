/*  attention.c: times our attention kernels (src/cuda/attention.cu) forward and backward on
 *  equal segments packed into one sequence of cells, for bench/attention.py to set beside cuDNN's
 *  and FlashAttention's fused kernels (through PyTorch) on the same card. TFLOP/s use the usual
 *  count for every system: 4 s d per cell and head forward, 2.5 times that backward.
 *
 *      uform_bench_attention [--cells 65536] [--width 512] [--segment 4096] [--repeats 20]
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../test/cuda/cuda_ok.h"
#include "cuda/cuda.h"

int main(int argc, char **argv) {
    size_t cells = 65536, width = 512, segment = 4096, repeats = 20;
    for (int i = 1; i + 1 < argc; i += 2) {
        size_t value = strtoull(argv[i + 1], NULL, 10);
        if (!strcmp(argv[i], "--cells")) cells = value;
        else if (!strcmp(argv[i], "--width")) width = value;
        else if (!strcmp(argv[i], "--segment")) segment = value;
        else if (!strcmp(argv[i], "--repeats")) repeats = value;
        else { fprintf(stderr, "attention: unknown flag %s\n", argv[i]); return 2; }
    }
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || !devices) { printf("attention: skipped: no CUDA device\n"); return 77; }
    size_t heads = width / 64, segments = (cells + segment - 1) / segment;
    uint16_t *host = malloc(cells * 3 * width * 2);
    uint32_t *spans = malloc(segments * 8), *segment_of = malloc(cells * 4);
    uint32_t state = 12345;
    for (size_t i = 0; i < cells * 3 * width; ++i) { /* BF16 values in (-2, 2): exponent and top mantissa bits */
        state = state * 1664525u + 1013904223u;
        host[i] = (uint16_t)(0x3f00u | ((state >> 16) & 0x7fu) | ((state >> 31) << 15));
    }
    for (size_t s = 0; s < segments; ++s) {
        spans[2 * s] = (uint32_t)(s * segment);
        spans[2 * s + 1] = (uint32_t)(cells - s * segment < segment ? cells - s * segment : segment);
        for (size_t c = s * segment; c < s * segment + spans[2 * s + 1]; ++c) segment_of[c] = (uint32_t)s;
    }
    uint16_t *qkv, *attended, *d_attended, *d_qkv;
    uint32_t *g_spans, *g_segment_of;
    float *log_sums, *deltas;
    CUDA_OK(cudaMalloc((void **)&qkv, cells * 3 * width * 2));
    CUDA_OK(cudaMalloc((void **)&d_qkv, cells * 3 * width * 2));
    CUDA_OK(cudaMalloc((void **)&attended, cells * width * 2));
    CUDA_OK(cudaMalloc((void **)&d_attended, cells * width * 2));
    CUDA_OK(cudaMalloc((void **)&g_spans, segments * 8));
    CUDA_OK(cudaMalloc((void **)&g_segment_of, cells * 4));
    CUDA_OK(cudaMalloc((void **)&log_sums, cells * heads * 4));
    CUDA_OK(cudaMalloc((void **)&deltas, cells * heads * 4));
    CUDA_OK(cudaMemcpy(qkv, host, cells * 3 * width * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d_attended, host, cells * width * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(g_spans, spans, segments * 8, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(g_segment_of, segment_of, cells * 4, cudaMemcpyHostToDevice));
    cudaEvent_t start, middle, stop;
    CUDA_OK(cudaEventCreate(&start));
    CUDA_OK(cudaEventCreate(&middle));
    CUDA_OK(cudaEventCreate(&stop));
    for (int pass = 0; pass < 2; ++pass) { /* a warm-up pass, then the timed one */
        size_t count = pass ? repeats : 2;
        CUDA_OK(cudaEventRecord(start, NULL));
        for (size_t r = 0; r < count; ++r)
            KERNEL_OK(uform_cuda_attention_forward(qkv, g_spans, g_segment_of, cells, width, attended, log_sums, NULL));
        CUDA_OK(cudaEventRecord(middle, NULL));
        for (size_t r = 0; r < count; ++r)
            KERNEL_OK(uform_cuda_attention_backward(qkv, attended, log_sums, d_attended, g_spans, g_segment_of, cells, width,
                                                deltas, d_qkv, NULL));
        CUDA_OK(cudaEventRecord(stop, NULL));
        CUDA_OK(cudaEventSynchronize(stop));
    }
    float forward_ms, backward_ms;
    CUDA_OK(cudaEventElapsedTime(&forward_ms, start, middle));
    CUDA_OK(cudaEventElapsedTime(&backward_ms, middle, stop));
    forward_ms /= (float)repeats, backward_ms /= (float)repeats;
    double flops = 4.0 * (double)cells * (double)segment * 64.0 * (double)heads;
    printf("{\"system\": \"uform\", \"cells\": %zu, \"width\": %zu, \"segment\": %zu, \"forward_ms\": %.3f, "
           "\"backward_ms\": %.3f, \"forward_tflops\": %.1f, \"backward_tflops\": %.1f}\n",
           cells, width, segment, forward_ms, backward_ms, flops / forward_ms / 1e9, 2.5 * flops / backward_ms / 1e9);
    return 0;
}
