/*  ops.cu: the position-wise kernels of the step: byte embedding, RMSNorm, M-RoPE and SwiGLU,
 *  forward and backward. Reductions run in a fixed order (no atomics), so results are bitwise
 *  repeatable. C-style CUDA behind the extern "C" entry points of cuda.h. */
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "cuda/check.h"
#include "cuda/common.cuh"
#include "cuda/cuda.h"
#include "cuda/plant.h"

namespace {

__global__ void embed_forward_kernel(uint16_t const *table, uint32_t const *values, size_t cells, size_t width,
                                     float *x, int plant) {
    size_t cell = blockIdx.x;
    uint32_t value = values[cell];
    if (UFORM_PLANTED(1)) value = (value + 1) % 258; /* planted: a shifted index */
    for (size_t i = threadIdx.x; i < width; i += blockDim.x) x[cell * width + i] = uform_bf16_to_f32(table[value * width + i]);
}

/* The embedding's backward in three kernels, so that a frequent byte's run (MASK's, a space's) is
 * summed by many blocks: its run of `order` is cut into pieces of embed_piece_k cells, each summed
 * in order by one block, then each value's pieces are added in order. Piece p of value v is the
 * first piece of v (pieces[v]) plus its index within the run; pieces[258] is the total. */
__global__ void embed_pieces_kernel(uint32_t const *offsets, uint32_t *pieces) {
    uint32_t total = 0;
    for (int value = 0; value < 258; ++value) {
        pieces[value] = total;
        total += (offsets[value + 1] - offsets[value] + uform_cuda_embed_piece_k - 1) / uform_cuda_embed_piece_k;
    }
    pieces[258] = total;
}

__global__ void embed_partials_kernel(float const *dx, uint32_t const *order, uint32_t const *offsets,
                                      uint32_t const *pieces, size_t width, float *partials, int plant) {
    uint32_t piece = blockIdx.y;
    size_t column = blockIdx.x * blockDim.x + threadIdx.x;
    if (piece >= pieces[258] || column >= width) return;
    uint32_t low = 0, high = 258; /* the value v with pieces[v] <= piece < pieces[v + 1] */
    while (high - low > 1) {
        uint32_t middle = (low + high) / 2;
        if (pieces[middle] <= piece) low = middle;
        else high = middle;
    }
    uint32_t first = offsets[low] + (piece - pieces[low]) * uform_cuda_embed_piece_k, last = offsets[low + 1];
    if (last - first > uform_cuda_embed_piece_k) last = first + uform_cuda_embed_piece_k;
    else if (UFORM_PLANTED(1)) last--; /* planted: the run's last cell dropped */
    float sum = 0;
#pragma unroll 8
    for (uint32_t j = first; j < last; ++j) sum += dx[(size_t)order[j] * width + column];
    partials[(size_t)piece * width + column] = sum;
}

__global__ void embed_reduce_kernel(float const *partials, uint32_t const *pieces, size_t width, float *grad) {
    size_t value = blockIdx.y, column = blockIdx.x * blockDim.x + threadIdx.x;
    if (column >= width || pieces[value] == pieces[value + 1]) return;
    float sum = 0;
    for (uint32_t piece = pieces[value]; piece < pieces[value + 1]; ++piece) sum += partials[(size_t)piece * width + column];
    grad[value * width + column] += sum;
}

/* RMSNorm: one warp per row; lane l holds columns 2 l + 64 j (j < width / 64) as float2, so each
 * j is one 256-byte access for the warp. `Chunks` is a power of two >= width / 64, unused slots
 * zero. Sums run as a pairwise tree over a lane's values, then over the warp: depth
 * log2(2 Chunks) + 5. */
constexpr unsigned norm_warps = 8;
constexpr size_t norm_rows_per_warp = 32; /* the backward's gain partials: one row of them per warp */

/* values [i] += values [i + Half] for i < Half, then the same at Half / 2, down to 1: a template, so
 * that every index is known when compiled and the array stays in registers (a loop over the halves
 * left the widest rows' arrays in local memory). */
template <int Half, int Count> __device__ __forceinline__ void fold_halves(float (&values)[Count]) {
#pragma unroll
    for (int i = 0; i < Half; ++i) values[i] = values[i] + values[i + Half];
    if constexpr (Half > 1) fold_halves<Half / 2>(values);
}

template <int Chunks> __device__ __forceinline__ float lane_tree_sum(float (&values)[2 * Chunks]) {
    fold_halves<Chunks>(values);
    float sum = values[0];
#pragma unroll
    for (int offset = 16; offset >= 1; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    return sum;
}

/* The largest of a warp's values, every lane getting it. */
__device__ __forceinline__ float warp_largest(float value) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
    return value;
}

/* A row's E4M3 scale (max |x| / 448, 1 for a zero row) from its largest magnitude. */
__device__ __forceinline__ float e4m3_scale(float largest) { return largest > 0 ? largest / 448.0f : 1.0f; }

__device__ __forceinline__ uint8_t e4m3_code(float value) {
    return (uint8_t)__nv_cvt_float_to_fp8(value, __NV_SATFINITE, __NV_E4M3);
}

/* Two adjacent values of a row, Float32 or BF16 (widened exactly), as one access. */
__device__ __forceinline__ float2 load_pair(float const *row, size_t pair) { return reinterpret_cast<float2 const *>(row)[pair]; }
__device__ __forceinline__ float2 load_pair(uint16_t const *row, size_t pair) {
    uint32_t bits = reinterpret_cast<uint32_t const *>(row)[pair];
    return make_float2(uform_bf16_to_f32((uint16_t)bits), uform_bf16_to_f32((uint16_t)(bits >> 16)));
}

/* x Float32 (the training step's residual stream) or BF16 (inference's). With `codes`, also the row's
 * BF16 output quantized as uform_cuda_quantize_e4m3 does (the E4M3 product's input, without a pass of
 * its own), at the row's scale or, when `fixed` > 0, at that one. */
template <int Chunks, typename In>
__global__ void rmsnorm_forward_kernel(In const *__restrict__ x, float const *__restrict__ gain, size_t cells,
                                       size_t width, uint16_t *y, float *scales, uint8_t *codes, float *code_scales,
                                       float fixed, int plant) {
    unsigned lane = threadIdx.x % 32;
    size_t cell = (size_t)blockIdx.x * norm_warps + threadIdx.x / 32, chunks = width / 64;
    if (cell >= cells) return;
    In const *row = x + cell * width;
    float2 values[Chunks], gains[Chunks]; /* the gains loaded beside x: their latency off the reduction's path */
    float squares[2 * Chunks];
#pragma unroll
    for (int j = 0; j < Chunks; ++j) {
        size_t column = 2 * lane + 64 * j;
        values[j] = j < (int)chunks ? load_pair(row, lane + 32 * j) : make_float2(0, 0);
        gains[j] = j >= (int)chunks ? make_float2(0, 0)
                   : UFORM_PLANTED(1) ? make_float2(gain[(column + 1) % width], gain[(column + 2) % width]) /* planted: one column off */
                                      : reinterpret_cast<float2 const *>(gain)[lane + 32 * j];
        squares[j] = values[j].x * values[j].x, squares[j + Chunks] = values[j].y * values[j].y;
    }
    float scale = rsqrtf(lane_tree_sum<Chunks>(squares) / (float)width + 1e-6f);
    uint32_t *out = y ? reinterpret_cast<uint32_t *>(y + cell * width) : NULL;
    uint32_t pairs[Chunks];
    float largest = 0;
#pragma unroll
    for (int j = 0; j < Chunks; ++j) {
        if (j >= (int)chunks) break;
        pairs[j] = (uint32_t)uform_f32_to_bf16(values[j].x * scale * gains[j].x) |
                   (uint32_t)uform_f32_to_bf16(values[j].y * scale * gains[j].y) << 16;
        if (y) out[lane + 32 * j] = pairs[j];
        largest = fmaxf(largest, fmaxf(fabsf(uform_bf16_to_f32((uint16_t)pairs[j])), fabsf(uform_bf16_to_f32((uint16_t)(pairs[j] >> 16)))));
    }
    if (lane == 0) scales[cell] = scale;
    if (!codes) return;
    float code_scale = fixed > 0 ? fixed : e4m3_scale(warp_largest(largest)), inverse = 1.0f / code_scale;
    uint16_t *coded = reinterpret_cast<uint16_t *>(codes + cell * width);
#pragma unroll
    for (int j = 0; j < Chunks; ++j) {
        if (j >= (int)chunks) break;
        coded[lane + 32 * j] = (uint16_t)(e4m3_code(uform_bf16_to_f32((uint16_t)pairs[j]) * inverse) |
                                          e4m3_code(uform_bf16_to_f32((uint16_t)(pairs[j] >> 16)) * inverse) << 8);
    }
    if (lane == 0 && code_scales) code_scales[cell] = code_scale;
}

/* Each warp runs norm_rows_per_warp rows and leaves their gain partial sums, in row order, as one
 * row of `partials`. */
template <int Chunks>
__global__ void rmsnorm_backward_kernel(float const *x, float const *gain, float const *scales, float const *dy,
                                        size_t cells, size_t width, float *dx, uint16_t *dx_rounded, float *partials,
                                        int plant) {
    unsigned lane = threadIdx.x % 32;
    size_t warp = (size_t)blockIdx.x * norm_warps + threadIdx.x / 32, chunks = width / 64;
    size_t first = warp * norm_rows_per_warp;
    if (first >= cells) return;
    size_t last = first + norm_rows_per_warp < cells ? first + norm_rows_per_warp : cells;
    float2 g[Chunks], partial[Chunks];
#pragma unroll
    for (int j = 0; j < Chunks; ++j) {
        g[j] = j < (int)chunks ? reinterpret_cast<float2 const *>(gain)[lane + 32 * j] : make_float2(0, 0);
        partial[j] = make_float2(0, 0);
    }
    for (size_t cell = first; cell < last; ++cell) {
        float scale = scales[cell];
        float2 const *row = reinterpret_cast<float2 const *>(x + cell * width);
        float2 const *d_row = reinterpret_cast<float2 const *>(dy + cell * width);
        float2 xs[Chunks], ds[Chunks];
        float dots[2 * Chunks];
#pragma unroll
        for (int j = 0; j < Chunks; ++j) {
            xs[j] = j < (int)chunks ? row[lane + 32 * j] : make_float2(0, 0);
            ds[j] = j < (int)chunks ? d_row[lane + 32 * j] : make_float2(0, 0);
            dots[j] = ds[j].x * g[j].x * xs[j].x, dots[j + Chunks] = ds[j].y * g[j].y * xs[j].y;
        }
        float mean = lane_tree_sum<Chunks>(dots) * scale / (float)width;
        if (UFORM_PLANTED(1)) mean = 0; /* planted: the term through the shared scale dropped */
        float2 *out = reinterpret_cast<float2 *>(dx + cell * width);
        uint32_t *rounded = dx_rounded ? reinterpret_cast<uint32_t *>(dx_rounded + cell * width) : nullptr;
#pragma unroll
        for (int j = 0; j < Chunks; ++j) {
            if (j >= (int)chunks) break;
            float2 old = out[lane + 32 * j], value;
            value.x = old.x + scale * (ds[j].x * g[j].x - xs[j].x * scale * mean);
            value.y = old.y + scale * (ds[j].y * g[j].y - xs[j].y * scale * mean);
            out[lane + 32 * j] = value;
            if (dx_rounded) rounded[lane + 32 * j] = (uint32_t)uform_f32_to_bf16(value.x) | (uint32_t)uform_f32_to_bf16(value.y) << 16;
            partial[j].x += ds[j].x * xs[j].x * scale, partial[j].y += ds[j].y * xs[j].y * scale;
        }
    }
    float2 *partial_row = reinterpret_cast<float2 *>(partials + warp * width);
#pragma unroll
    for (int j = 0; j < Chunks; ++j)
        if (j < (int)chunks) partial_row[lane + 32 * j] = partial[j];
}

/* gain_grad [width] += the sum over the partial rows; thread (x, y) sums rows y, y + 8, ... of its
 * column, then the eight are added in order of y. */
__global__ void rmsnorm_gain_reduce_kernel(float const *partials, size_t rows, size_t width, float *gain_grad) {
    __shared__ float shared[8][33];
    size_t column = blockIdx.x * 32 + threadIdx.x;
    float sum = 0;
    if (column < width)
        for (size_t row = threadIdx.y; row < rows; row += 8) sum += partials[row * width + column];
    shared[threadIdx.y][threadIdx.x] = sum;
    __syncthreads();
    if (threadIdx.y || column >= width) return;
    float total = 0;
    for (int y = 0; y < 8; ++y) total += shared[y][threadIdx.x];
    gain_grad[column] += total;
}

/* table [cells, 32] of (cos, sin): the angle in double, then one rounding each. */
__global__ void rope_table_kernel(int32_t const *positions, size_t cells, float2 *table, int plant) {
    size_t index = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (index >= cells * 32) return;
    size_t slot = index % 32, cell = index / 32;
    int axis = slot < 8 ? 0 : slot < 20 ? 1 : 2;
    if (UFORM_PLANTED(1) && axis) axis = 3 - axis; /* planted: h and w swapped */
    double angle = (double)positions[cell * 3 + axis] * pow(10000.0, -(double)slot / 32.0);
    double sine, cosine;
    sincos(angle, &sine, &cosine);
    table[index] = make_float2((float)cosine, (float)sine);
}

/* q and k rotated as rope_kernel rotates them (BF16), then with v coded as E4M3 at their three scales into
 * codes [cells, 3 width] (FP8 attention's inputs): one thread per (cell, q, k or v, head, eight slots). */
__global__ void rope_e4m3_kernel(uint16_t const *qkv, float2 const *table, size_t cells, size_t width, float3 inverse,
                                 uint8_t *codes, int plant) {
    size_t heads = width / 64, index = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (index >= cells * 3 * heads * 4) return;
    size_t slot = index % 4 * 8, head = index / 4 % heads, part = index / (4 * heads) % 3, cell = index / (12 * heads);
    size_t at = cell * 3 * width + part * width + head * 64;
    uint4 low = *reinterpret_cast<uint4 const *>(qkv + at + slot), high = *reinterpret_cast<uint4 const *>(qkv + at + slot + 32);
    uint16_t *l8 = reinterpret_cast<uint16_t *>(&low), *h8 = reinterpret_cast<uint16_t *>(&high);
    if (part < 2) {
        float4 const *rotations = reinterpret_cast<float4 const *>(table + cell * 32 + slot);
#pragma unroll
        for (int e = 0; e < 8; e += 2) {
            float4 pair = rotations[e / 2];
            uform_rotate_pair(&l8[e], &h8[e], pair.x, pair.y);
            uform_rotate_pair(&l8[e + 1], &h8[e + 1], pair.z, pair.w);
        }
    }
    float scale = part == 0 ? (UFORM_PLANTED(1) ? inverse.y : inverse.x) : part == 1 ? inverse.y : inverse.z; /* planted: k's scale for q */
    uint2 coded[2];
    uint8_t *lo = reinterpret_cast<uint8_t *>(&coded[0]), *hi = reinterpret_cast<uint8_t *>(&coded[1]);
#pragma unroll
    for (int e = 0; e < 8; ++e) lo[e] = e4m3_code(uform_bf16_to_f32(l8[e]) * scale), hi[e] = e4m3_code(uform_bf16_to_f32(h8[e]) * scale);
    *reinterpret_cast<uint2 *>(codes + at + slot) = coded[0], *reinterpret_cast<uint2 *>(codes + at + slot + 32) = coded[1];
}

/* One thread per (cell, q or k, head, eight slots): 16-byte loads of slots s..s+7 and s+32..s+39. */
__global__ void rope_kernel(uint16_t *qkv, float2 const *table, size_t cells, size_t width, int direction) {
    size_t heads = width / 64, index = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (index >= cells * 2 * heads * 4) return;
    size_t slot = index % 4 * 8, head = index / 4 % heads, part = index / (4 * heads) % 2, cell = index / (8 * heads);
    uint16_t *vector = qkv + cell * 3 * width + part * width + head * 64;
    uint4 low = *reinterpret_cast<uint4 const *>(vector + slot), high = *reinterpret_cast<uint4 const *>(vector + slot + 32);
    uint16_t *l8 = reinterpret_cast<uint16_t *>(&low), *h8 = reinterpret_cast<uint16_t *>(&high);
    float4 const *rotations = reinterpret_cast<float4 const *>(table + cell * 32 + slot);
#pragma unroll
    for (int e = 0; e < 8; e += 2) {
        float4 pair = rotations[e / 2]; /* (cos, sin) of slots e and e + 1 */
        float c[2] = {pair.x, pair.z}, s[2] = {pair.y * (float)direction, pair.w * (float)direction};
#pragma unroll
        for (int k = 0; k < 2; ++k) uform_rotate_pair(&l8[e + k], &h8[e + k], c[k], s[k]);
    }
    *reinterpret_cast<uint4 *>(vector + slot) = low, *reinterpret_cast<uint4 *>(vector + slot + 32) = high;
}

/* A thread's eight hidden columns of gate_up [cells, 2 hidden_width]: false past the last. The output's
 * offset goes to `at` (cell * hidden_width + the first column). */
__device__ __forceinline__ bool gate_up_group(uint16_t const *gate_up, size_t cells, size_t hidden_width, uint4 *gate,
                                              uint4 *up, size_t *at) {
    size_t index = blockIdx.x * (size_t)blockDim.x + threadIdx.x, groups = hidden_width / 8;
    if (index >= cells * groups) return false;
    size_t cell = index / groups, i = index % groups * 8;
    *gate = *reinterpret_cast<uint4 const *>(gate_up + cell * 2 * hidden_width + i);
    *up = *reinterpret_cast<uint4 const *>(gate_up + cell * 2 * hidden_width + hidden_width + i);
    *at = cell * hidden_width + i;
    return true;
}

/* Eight hidden columns per thread, through 16-byte loads and stores (hidden_width % 8 == 0). */
__global__ void swiglu_forward_kernel(uint16_t const *gate_up, size_t cells, size_t hidden_width, uint16_t *hidden,
                                      int plant) {
    uint4 gate, up;
    size_t at;
    if (!gate_up_group(gate_up, cells, hidden_width, &gate, &up, &at)) return;
    uint16_t const *g8 = reinterpret_cast<uint16_t const *>(&gate), *u8 = reinterpret_cast<uint16_t const *>(&up);
    uint4 result;
    uint16_t *r8 = reinterpret_cast<uint16_t *>(&result);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
        float g = uform_bf16_to_f32(g8[e]), u = uform_bf16_to_f32(u8[e]);
        float sigmoid = 1.0f / (1.0f + expf(-g));
        float silu = UFORM_PLANTED(1) ? sigmoid : g * sigmoid; /* planted: sigmoid in place of silu */
        r8[e] = uform_f32_to_bf16(silu * u);
    }
    *reinterpret_cast<uint4 *>(hidden + at) = result;
}

/* SwiGLU into E4M3 codes for the down product, a warp a row: the BF16 hidden values as
 * swiglu_forward_kernel rounds them (not stored), their largest magnitude, then the same values
 * again quantized as uform_cuda_quantize_e4m3 does. */
__device__ __forceinline__ float swiglu_value(uint16_t gate, uint16_t up) {
    float g = uform_bf16_to_f32(gate), u = uform_bf16_to_f32(up);
    return uform_bf16_to_f32(uform_f32_to_bf16(g * (1.0f / (1.0f + expf(-g))) * u));
}

__global__ void swiglu_e4m3_kernel(uint16_t const *gate_up, size_t cells, size_t hidden_width, uint8_t *codes,
                                   float *scales, int plant) {
    unsigned lane = threadIdx.x % 32;
    size_t cell = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, groups = hidden_width / 8;
    if (cell >= cells) return;
    uint4 const *gates = reinterpret_cast<uint4 const *>(gate_up + cell * 2 * hidden_width);
    uint4 const *ups = reinterpret_cast<uint4 const *>(gate_up + cell * 2 * hidden_width + hidden_width);
    float largest = 0;
    for (size_t g = lane; g < groups; g += 32) {
        uint4 gate = gates[g], up = ups[g];
        uint16_t const *g8 = reinterpret_cast<uint16_t const *>(&gate), *u8 = reinterpret_cast<uint16_t const *>(&up);
#pragma unroll
        for (int e = 0; e < 8; ++e) largest = fmaxf(largest, fabsf(swiglu_value(g8[e], u8[e])));
    }
    float scale = e4m3_scale(warp_largest(largest)), inverse = 1.0f / scale;
    uint2 *output = reinterpret_cast<uint2 *>(codes + cell * hidden_width);
    for (size_t g = lane; g < groups; g += 32) {
        uint4 gate = gates[g], up = ups[g];
        uint16_t const *g8 = reinterpret_cast<uint16_t const *>(&gate), *u8 = reinterpret_cast<uint16_t const *>(&up);
        uint2 coded;
        uint8_t *bytes = reinterpret_cast<uint8_t *>(&coded);
#pragma unroll
        for (int e = 0; e < 8; ++e) bytes[e] = e4m3_code(swiglu_value(g8[e], UFORM_PLANTED(1) ? g8[e] : u8[e]) * inverse); /* planted: gate for up */
        output[g] = coded;
    }
    if (lane == 0) scales[cell] = scale;
}

/* The same at a fixed scale (an input bound known ahead, docs/precision.md): no row's largest value to
 * find, so eight hidden columns a thread as swiglu_forward_kernel runs them, gate_up read once. */
__global__ void swiglu_e4m3_fixed_kernel(uint16_t const *gate_up, size_t cells, size_t hidden_width, uint8_t *codes,
                                         float fixed, int plant) {
    uint4 gate, up;
    size_t at;
    if (!gate_up_group(gate_up, cells, hidden_width, &gate, &up, &at)) return;
    uint16_t const *g8 = reinterpret_cast<uint16_t const *>(&gate), *u8 = reinterpret_cast<uint16_t const *>(&up);
    float inverse = 1.0f / fixed;
    uint2 coded;
    uint8_t *bytes = reinterpret_cast<uint8_t *>(&coded);
#pragma unroll
    for (int e = 0; e < 8; ++e) bytes[e] = e4m3_code(swiglu_value(g8[e], UFORM_PLANTED(1) ? g8[e] : u8[e]) * inverse); /* planted: gate for up */
    *reinterpret_cast<uint2 *>(codes + at) = coded;
}

/* SwiGLU over gate_up as E4M3 codes at one scale (uform_cuda_gemm_e4m3_codes wrote them) into the down
 * product's codes at `fixed`: sixteen hidden columns a thread, in Float32, nothing rounded between. */
__device__ __forceinline__ float e4m3_value(uint8_t code) {
    return __half2float(__half(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)code, __NV_E4M3)));
}

__global__ void swiglu_codes_kernel(uint8_t const *gate_up, size_t cells, size_t hidden_width, float scale, float fixed,
                                    uint8_t *codes, int plant) {
    size_t index = blockIdx.x * (size_t)blockDim.x + threadIdx.x, groups = hidden_width / 16;
    if (index >= cells * groups) return;
    size_t cell = index / groups, i = index % groups * 16;
    uint4 gate = *reinterpret_cast<uint4 const *>(gate_up + cell * 2 * hidden_width + i);
    uint4 up = *reinterpret_cast<uint4 const *>(gate_up + cell * 2 * hidden_width + hidden_width + i);
    uint8_t const *g16 = reinterpret_cast<uint8_t const *>(&gate), *u16 = reinterpret_cast<uint8_t const *>(&up);
    float inverse = 1.0f / fixed;
    uint4 result;
    uint8_t *r16 = reinterpret_cast<uint8_t *>(&result);
#pragma unroll
    for (int e = 0; e < 16; ++e) {
        float g = e4m3_value(g16[e]) * scale, u = e4m3_value(UFORM_PLANTED(1) ? g16[e] : u16[e]) * scale; /* planted: gate for up */
        r16[e] = e4m3_code(g * (1.0f / (1.0f + expf(-g))) * u * inverse);
    }
    *reinterpret_cast<uint4 *>(codes + cell * hidden_width + i) = result;
}

/* The same, a block of swiglu_threads a row, each thread keeping its Groups groups of 8 hidden values
 * (BF16, as rounded) in registers between the block's largest magnitude and the codes: gate_up is
 * read and SwiGLU computed once (rows of up to 8 x Groups x swiglu_threads hidden columns). */
constexpr int swiglu_threads = 256, swiglu_groups_most = 4;

template <int Groups>
__global__ void swiglu_e4m3_row_kernel(uint16_t const *gate_up, size_t cells, size_t hidden_width, uint8_t *codes,
                                       float *scales, int plant) {
    __shared__ float warps_largest[swiglu_threads / 32];
    size_t cell = blockIdx.x, groups = hidden_width / 8;
    uint4 const *gates = reinterpret_cast<uint4 const *>(gate_up + cell * 2 * hidden_width);
    uint4 const *ups = reinterpret_cast<uint4 const *>(gate_up + cell * 2 * hidden_width + hidden_width);
    uint4 kept[Groups];
    float largest = 0;
#pragma unroll
    for (int j = 0; j < Groups; ++j) {
        size_t g = threadIdx.x + (size_t)j * swiglu_threads;
        if (g >= groups) break;
        uint4 gate = gates[g], up = ups[g];
        uint16_t const *g8 = reinterpret_cast<uint16_t const *>(&gate), *u8 = reinterpret_cast<uint16_t const *>(&up);
        uint16_t *k8 = reinterpret_cast<uint16_t *>(&kept[j]);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            k8[e] = uform_f32_to_bf16(swiglu_value(g8[e], UFORM_PLANTED(1) ? g8[e] : u8[e])); /* planted: gate for up */
            largest = fmaxf(largest, fabsf(uform_bf16_to_f32(k8[e])));
        }
    }
    largest = warp_largest(largest);
    if (threadIdx.x % 32 == 0) warps_largest[threadIdx.x / 32] = largest;
    __syncthreads();
    largest = threadIdx.x % 32 < swiglu_threads / 32 ? warps_largest[threadIdx.x % 32] : 0;
    largest = warp_largest(largest); /* every warp reduces the 8 partials itself: no second barrier */
    float scale = e4m3_scale(largest), inverse = 1.0f / scale;
    uint2 *output = reinterpret_cast<uint2 *>(codes + cell * hidden_width);
#pragma unroll
    for (int j = 0; j < Groups; ++j) {
        size_t g = threadIdx.x + (size_t)j * swiglu_threads;
        if (g >= groups) break;
        uint16_t const *k8 = reinterpret_cast<uint16_t const *>(&kept[j]);
        uint2 coded;
        uint8_t *bytes = reinterpret_cast<uint8_t *>(&coded);
#pragma unroll
        for (int e = 0; e < 8; ++e) bytes[e] = e4m3_code(uform_bf16_to_f32(k8[e]) * inverse);
        output[g] = coded;
    }
    if (threadIdx.x == 0) scales[cell] = scale;
}


__global__ void swiglu_backward_kernel(uint16_t const *gate_up, uint16_t const *d_hidden, size_t cells,
                                       size_t hidden_width, uint16_t *d_gate_up, int plant) {
    size_t index = blockIdx.x * (size_t)blockDim.x + threadIdx.x, groups = hidden_width / 8;
    if (index >= cells * groups) return;
    size_t cell = index / groups, i = index % groups * 8;
    uint4 gate = *reinterpret_cast<uint4 const *>(gate_up + cell * 2 * hidden_width + i);
    uint4 up = *reinterpret_cast<uint4 const *>(gate_up + cell * 2 * hidden_width + hidden_width + i);
    uint4 dh = *reinterpret_cast<uint4 const *>(d_hidden + cell * hidden_width + i);
    uint16_t const *dh8 = reinterpret_cast<uint16_t const *>(&dh);
    uint16_t const *g8 = reinterpret_cast<uint16_t const *>(&gate), *u8 = reinterpret_cast<uint16_t const *>(&up);
    uint4 d_gate, d_up;
    uint16_t *dg8 = reinterpret_cast<uint16_t *>(&d_gate), *du8 = reinterpret_cast<uint16_t *>(&d_up);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
        float g = uform_bf16_to_f32(g8[e]), u = uform_bf16_to_f32(u8[e]), dh = uform_bf16_to_f32(dh8[e]);
        float sigmoid = 1.0f / (1.0f + expf(-g));
        float slope = UFORM_PLANTED(1) ? sigmoid : sigmoid * (1.0f + g * (1.0f - sigmoid)); /* planted: a dropped term */
        dg8[e] = uform_f32_to_bf16(dh * u * slope);
        du8[e] = uform_f32_to_bf16(dh * g * sigmoid);
    }
    *reinterpret_cast<uint4 *>(d_gate_up + cell * 2 * hidden_width + i) = d_gate;
    *reinterpret_cast<uint4 *>(d_gate_up + cell * 2 * hidden_width + hidden_width + i) = d_up;
}

__global__ void round_kernel(float const *x, size_t count, uint16_t *y, int plant) {
    size_t index = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (index >= count) return;
    float value = x[index];
    y[index] = UFORM_PLANTED(1) ? (uint16_t)(__float_as_uint(value) >> 16) : uform_f32_to_bf16(value); /* planted: truncation */
}

/* result[0] = scale * sum(x), one block, a fixed order. */
__global__ void sum_kernel(float const *x, size_t count, float const *scale, float *result) {
    __shared__ float shared[1024];
    float sum = 0;
    for (size_t i = threadIdx.x; i < count; i += blockDim.x) sum += x[i];
    sum = uform_block_reduce(sum, shared, 0);
    if (threadIdx.x == 0) result[0] = sum * (scale ? *scale : 1.0f);
}

unsigned blocks_for(size_t count, unsigned threads) { return (unsigned)((count + threads - 1) / threads); }

} // namespace

extern "C" uform_status_t uform_cuda_embed_forward(uint16_t const *table, uint32_t const *values, size_t cells,
                                                   size_t width, float *x, void *stream) {
    if (!cells) return uform_ok_k;
    embed_forward_kernel<<<(unsigned)cells, 128, 0, (cudaStream_t)stream>>>(table, values, cells, width, x,
                                                                            uform_cuda_planted("embed_forward"));
    return uform_cuda_launched("embed_forward");
}

extern "C" size_t uform_cuda_embed_partials(size_t cells, size_t width) {
    return (cells / uform_cuda_embed_piece_k + 258) * width + 260; /* pieces' sums, then their index [259] */
}

extern "C" uform_status_t uform_cuda_embed_backward(float const *dx, uint32_t const *order, uint32_t const *offsets,
                                                    size_t cells, size_t width, float *partials, float *grad,
                                                    void *stream) {
    size_t most = cells / uform_cuda_embed_piece_k + 258; /* at most one short piece per value */
    uint32_t *pieces = (uint32_t *)(partials + most * width);
    cudaStream_t s = (cudaStream_t)stream;
    embed_pieces_kernel<<<1, 1, 0, s>>>(offsets, pieces);
    embed_partials_kernel<<<dim3(blocks_for(width, 128), (unsigned)most), 128, 0, s>>>(
        dx, order, offsets, pieces, width, partials, uform_cuda_planted("embed_backward"));
    embed_reduce_kernel<<<dim3(blocks_for(width, 128), 258), 128, 0, s>>>(partials, pieces, width, grad);
    return uform_cuda_launched("embed_backward");
}

/* The smallest power of two >= width / 64 (width a multiple of 64, at most 2048), or 0. */
static int norm_chunks(size_t width) {
    if (!width || width % 64 || width > 2048) return 0;
    int chunks = 1;
    while (chunks * 64 < (int)width) chunks *= 2;
    return chunks;
}

#define UFORM_NORM_DISPATCH(chunks, kernel, grid, ...)                                                                \
    switch (chunks) {                                                                                                 \
    case 1: kernel<1><<<grid, norm_warps * 32, 0, (cudaStream_t)stream>>>(__VA_ARGS__); break;                        \
    case 2: kernel<2><<<grid, norm_warps * 32, 0, (cudaStream_t)stream>>>(__VA_ARGS__); break;                        \
    case 4: kernel<4><<<grid, norm_warps * 32, 0, (cudaStream_t)stream>>>(__VA_ARGS__); break;                        \
    case 8: kernel<8><<<grid, norm_warps * 32, 0, (cudaStream_t)stream>>>(__VA_ARGS__); break;                        \
    case 16: kernel<16><<<grid, norm_warps * 32, 0, (cudaStream_t)stream>>>(__VA_ARGS__); break;                      \
    default: kernel<32><<<grid, norm_warps * 32, 0, (cudaStream_t)stream>>>(__VA_ARGS__); break;                      \
    }

#define UFORM_NORM_FORWARD_DISPATCH(chunks, In, grid, ...)                                                           \
    switch (chunks) {                                                                                                 \
    case 1: rmsnorm_forward_kernel<1, In><<<grid, norm_warps * 32, 0, (cudaStream_t)stream>>>(__VA_ARGS__); break;    \
    case 2: rmsnorm_forward_kernel<2, In><<<grid, norm_warps * 32, 0, (cudaStream_t)stream>>>(__VA_ARGS__); break;    \
    case 4: rmsnorm_forward_kernel<4, In><<<grid, norm_warps * 32, 0, (cudaStream_t)stream>>>(__VA_ARGS__); break;    \
    case 8: rmsnorm_forward_kernel<8, In><<<grid, norm_warps * 32, 0, (cudaStream_t)stream>>>(__VA_ARGS__); break;    \
    case 16: rmsnorm_forward_kernel<16, In><<<grid, norm_warps * 32, 0, (cudaStream_t)stream>>>(__VA_ARGS__); break;  \
    default: rmsnorm_forward_kernel<32, In><<<grid, norm_warps * 32, 0, (cudaStream_t)stream>>>(__VA_ARGS__); break;  \
    }

static uform_status_t norm_width_refused(char const *entry, size_t width) {
    return uform_cuda_note(uform_invalid_argument_k, "%s: width %zu is not a multiple of 64 up to 2048", entry, width);
}

extern "C" size_t uform_cuda_rmsnorm_partials(size_t cells, size_t width) {
    return (cells + norm_rows_per_warp - 1) / norm_rows_per_warp * width;
}

/* The three forward entries: `entry` names the failure and the plant. */
template <typename In>
static uform_status_t norm_forward_(char const *entry, In const *x, float const *gain, size_t cells, size_t width, uint16_t *y,
                                    float *scales, uint8_t *codes, float *code_scales, float fixed, void *stream) {
    int chunks = norm_chunks(width);
    if (!chunks) return norm_width_refused(entry, width);
    if (!(fixed >= 0) || (codes && fixed == 0 && !code_scales) || (!codes && !y))
        return uform_cuda_note(uform_invalid_argument_k, "%s: nothing to write, row scales with nowhere to go, or a negative scale", entry);
    if (!cells) return uform_ok_k;
    unsigned grid = blocks_for(cells, norm_warps);
    UFORM_NORM_FORWARD_DISPATCH(chunks, In, grid, x, gain, cells, width, y, scales, codes, code_scales, fixed, uform_cuda_planted(entry))
    return uform_cuda_launched(entry);
}

extern "C" uform_status_t uform_cuda_rmsnorm_forward(float const *x, float const *gain, size_t cells, size_t width,
                                                     uint16_t *y, float *scales, void *stream) {
    return norm_forward_("rmsnorm_forward", x, gain, cells, width, y, scales, NULL, NULL, 0.0f, stream);
}

extern "C" uform_status_t uform_cuda_rmsnorm_forward_e4m3(float const *x, float const *gain, size_t cells, size_t width,
                                                          uint16_t *y, float *scales, uint8_t *codes, float *code_scales,
                                                          float fixed, void *stream) {
    return norm_forward_("rmsnorm_forward_e4m3", x, gain, cells, width, y, scales, codes, code_scales, fixed, stream);
}

extern "C" uform_status_t uform_cuda_rmsnorm_forward_bf16(uint16_t const *x, float const *gain, size_t cells, size_t width,
                                                          uint16_t *y, float *scales, uint8_t *codes, float *code_scales,
                                                          float fixed, void *stream) {
    return norm_forward_("rmsnorm_forward_bf16", x, gain, cells, width, y, scales, codes, code_scales, fixed, stream);
}

extern "C" uform_status_t uform_cuda_rmsnorm_backward(float const *x, float const *gain, float const *scales,
                                                      float const *dy, size_t cells, size_t width, float *dx,
                                                      uint16_t *dx_rounded, float *gain_partials, void *stream) {
    int chunks = norm_chunks(width);
    if (!chunks) return norm_width_refused("rmsnorm_backward", width);
    if (!cells) return uform_ok_k;
    unsigned grid = blocks_for(blocks_for(cells, norm_rows_per_warp), norm_warps);
    UFORM_NORM_DISPATCH(chunks, rmsnorm_backward_kernel, grid, x, gain, scales, dy, cells, width, dx, dx_rounded,
                        gain_partials, uform_cuda_planted("rmsnorm_backward"))
    return uform_cuda_launched("rmsnorm_backward");
}

extern "C" uform_status_t uform_cuda_rmsnorm_gain_reduce(float const *gain_partials, size_t cells, size_t width,
                                                         float *gain_grad, void *stream) {
    if (!cells) return uform_ok_k;
    rmsnorm_gain_reduce_kernel<<<blocks_for(width, 32), dim3(32, 8), 0, (cudaStream_t)stream>>>(
        gain_partials, blocks_for(cells, norm_rows_per_warp), width, gain_grad);
    return uform_cuda_launched("rmsnorm_gain_reduce");
}

extern "C" uform_status_t uform_cuda_rope_table(int32_t const *positions, size_t cells, float *table, void *stream) {
    if (!cells) return uform_ok_k;
    rope_table_kernel<<<blocks_for(cells * 32, 256), 256, 0, (cudaStream_t)stream>>>(positions, cells, (float2 *)table,
                                                                                   uform_cuda_planted("rope_table"));
    return uform_cuda_launched("rope_table");
}

extern "C" uform_status_t uform_cuda_rope_e4m3(uint16_t const *qkv, float const *table, size_t cells, size_t width,
                                               float const scales[3], uint8_t *codes, void *stream) {
    size_t count = cells * 3 * (width / 64) * 4;
    if (!count) return uform_ok_k;
    if (!(scales[0] > 0 && scales[1] > 0 && scales[2] > 0))
        return uform_cuda_note(uform_invalid_argument_k, "rope_e4m3: q's, k's and v's scales must be positive");
    float3 inverse = make_float3(1.0f / scales[0], 1.0f / scales[1], 1.0f / scales[2]);
    rope_e4m3_kernel<<<blocks_for(count, 256), 256, 0, (cudaStream_t)stream>>>(qkv, (float2 const *)table, cells, width, inverse,
                                                                              codes, uform_cuda_planted("rope_e4m3"));
    return uform_cuda_launched("rope_e4m3");
}

extern "C" uform_status_t uform_cuda_rope(uint16_t *qkv, float const *table, size_t cells, size_t width, int direction,
                                          void *stream) {
    size_t count = cells * 2 * (width / 64) * 4;
    if (!count) return uform_ok_k;
    rope_kernel<<<blocks_for(count, 256), 256, 0, (cudaStream_t)stream>>>(qkv, (float2 const *)table, cells, width, direction);
    return uform_cuda_launched("rope");
}

static uform_status_t hidden_width_refused(char const *entry, size_t hidden_width) {
    return uform_cuda_note(uform_invalid_argument_k, "%s: hidden width %zu is not a multiple of 8", entry, hidden_width);
}

extern "C" uform_status_t uform_cuda_swiglu_forward(uint16_t const *gate_up, size_t cells, size_t hidden_width,
                                                    uint16_t *hidden, void *stream) {
    size_t count = cells * hidden_width / 8;
    if (!count) return uform_ok_k;
    if (hidden_width % 8) return hidden_width_refused("swiglu_forward", hidden_width);
    swiglu_forward_kernel<<<blocks_for(count, 256), 256, 0, (cudaStream_t)stream>>>(gate_up, cells, hidden_width, hidden,
                                                                                   uform_cuda_planted("swiglu_forward"));
    return uform_cuda_launched("swiglu_forward");
}

extern "C" uform_status_t uform_cuda_swiglu_e4m3(uint16_t const *gate_up, size_t cells, size_t hidden_width,
                                                 uint8_t *codes, float *scales, float fixed, void *stream) {
    if (!cells) return uform_ok_k;
    if (hidden_width % 8) return hidden_width_refused("swiglu_e4m3", hidden_width);
    if (!(fixed >= 0) || (fixed == 0 && !scales))
        return uform_cuda_note(uform_invalid_argument_k, "swiglu_e4m3: row scales need somewhere to go, a fixed scale must be positive");
    size_t per_thread = (hidden_width / 8 + swiglu_threads - 1) / swiglu_threads;
    int plant = uform_cuda_planted("swiglu_e4m3");
    cudaStream_t s = (cudaStream_t)stream;
    if (fixed > 0) {
        swiglu_e4m3_fixed_kernel<<<blocks_for(cells * hidden_width / 8, 256), 256, 0, s>>>(gate_up, cells, hidden_width, codes,
                                                                                          fixed, plant);
        return uform_cuda_launched("swiglu_e4m3");
    }
    unsigned rows = (unsigned)cells;
    if (per_thread == 1) swiglu_e4m3_row_kernel<1><<<rows, swiglu_threads, 0, s>>>(gate_up, cells, hidden_width, codes, scales, plant);
    else if (per_thread == 2) swiglu_e4m3_row_kernel<2><<<rows, swiglu_threads, 0, s>>>(gate_up, cells, hidden_width, codes, scales, plant);
    else if (per_thread <= swiglu_groups_most)
        swiglu_e4m3_row_kernel<swiglu_groups_most><<<rows, swiglu_threads, 0, s>>>(gate_up, cells, hidden_width, codes, scales, plant);
    else swiglu_e4m3_kernel<<<blocks_for(cells, 8), 256, 0, s>>>(gate_up, cells, hidden_width, codes, scales, plant); /* wider rows */
    return uform_cuda_launched("swiglu_e4m3");
}

extern "C" uform_status_t uform_cuda_swiglu_e4m3_codes(uint8_t const *gate_up, float scale, size_t cells, size_t hidden_width,
                                                       uint8_t *codes, float fixed, void *stream) {
    if (!cells) return uform_ok_k;
    if (hidden_width % 16) return hidden_width_refused("swiglu_e4m3_codes", hidden_width);
    if (!(scale > 0) || !(fixed > 0))
        return uform_cuda_note(uform_invalid_argument_k, "swiglu_e4m3_codes: gate_up's scale and the output's must be positive");
    swiglu_codes_kernel<<<blocks_for(cells * hidden_width / 16, 256), 256, 0, (cudaStream_t)stream>>>(
        gate_up, cells, hidden_width, scale, fixed, codes, uform_cuda_planted("swiglu_e4m3"));
    return uform_cuda_launched("swiglu_e4m3_codes");
}

extern "C" uform_status_t uform_cuda_swiglu_backward(uint16_t const *gate_up, uint16_t const *d_hidden, size_t cells,
                                                     size_t hidden_width, uint16_t *d_gate_up, void *stream) {
    size_t count = cells * hidden_width / 8;
    if (!count) return uform_ok_k;
    if (hidden_width % 8) return hidden_width_refused("swiglu_backward", hidden_width);
    swiglu_backward_kernel<<<blocks_for(count, 256), 256, 0, (cudaStream_t)stream>>>(
        gate_up, d_hidden, cells, hidden_width, d_gate_up, uform_cuda_planted("swiglu_backward"));
    return uform_cuda_launched("swiglu_backward");
}

namespace {

/* At a fixed scale: 8 BF16 a thread, no reduction. */
__global__ void quantize_e4m3_fixed_kernel(uint16_t const *x, size_t count, uint8_t *codes, float fixed, int plant) {
    size_t group = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (group >= count / 8) return;
    uint4 values = reinterpret_cast<uint4 const *>(x)[group];
    uint16_t const *v8 = reinterpret_cast<uint16_t const *>(&values);
    float inverse = UFORM_PLANTED(1) ? 1.0f : 1.0f / fixed; /* planted: the scale dropped */
    uint2 coded;
    uint8_t *bytes = reinterpret_cast<uint8_t *>(&coded);
#pragma unroll
    for (int e = 0; e < 8; ++e) bytes[e] = e4m3_code(uform_bf16_to_f32(v8[e]) * inverse);
    reinterpret_cast<uint2 *>(codes)[group] = coded;
}

/* A warp a row, 8 BF16 a load: the largest magnitude, then the codes (8 a store). */
__global__ void quantize_e4m3_kernel(uint16_t const *x, size_t cells, size_t width, uint8_t *codes, float *scales,
                                     int plant) {
    unsigned lane = threadIdx.x % 32;
    size_t row = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, groups = width / 8;
    if (row >= cells) return;
    uint4 const *input = reinterpret_cast<uint4 const *>(x + row * width);
    float largest = 0;
    for (size_t g = lane; g < groups; g += 32) {
        uint4 group = input[g];
        uint16_t const *values = reinterpret_cast<uint16_t const *>(&group);
#pragma unroll
        for (int e = 0; e < 8; ++e) largest = fmaxf(largest, fabsf(uform_bf16_to_f32(values[e])));
    }
    float scale = e4m3_scale(warp_largest(largest)), inverse = 1.0f / scale;
    uint2 *output = reinterpret_cast<uint2 *>(codes + row * width);
    for (size_t g = lane; g < groups; g += 32) {
        uint4 group = input[g];
        uint16_t const *values = reinterpret_cast<uint16_t const *>(&group);
        uint2 coded;
        uint8_t *bytes = reinterpret_cast<uint8_t *>(&coded);
#pragma unroll
        for (int e = 0; e < 8; ++e) bytes[e] = e4m3_code(uform_bf16_to_f32(values[e]) * inverse);
        output[g] = coded;
    }
    if (UFORM_PLANTED(1)) scale = 1.0f; /* planted: the row's scale dropped */
    if (lane == 0) scales[row] = scale;
}

} // namespace

extern "C" uform_status_t uform_cuda_quantize_e4m3(uint16_t const *x, size_t cells, size_t width, uint8_t *codes,
                                                   float *scales, float fixed, void *stream) {
    if (!cells) return uform_ok_k;
    if (width % 8) return uform_cuda_note(uform_invalid_argument_k, "quantize_e4m3: width %zu is not a multiple of 8", width);
    if (!(fixed >= 0) || (fixed == 0 && !scales))
        return uform_cuda_note(uform_invalid_argument_k, "quantize_e4m3: row scales need somewhere to go, a fixed scale must be positive");
    if (fixed > 0) {
        quantize_e4m3_fixed_kernel<<<blocks_for(cells * width / 8, 256), 256, 0, (cudaStream_t)stream>>>(
            x, cells * width, codes, fixed, uform_cuda_planted("quantize_e4m3"));
        return uform_cuda_launched("quantize_e4m3");
    }
    quantize_e4m3_kernel<<<blocks_for(cells, 8), 256, 0, (cudaStream_t)stream>>>(x, cells, width, codes, scales,
                                                                               uform_cuda_planted("quantize_e4m3"));
    return uform_cuda_launched("quantize_e4m3");
}

extern "C" uform_status_t uform_cuda_round_bf16(float const *x, size_t count, uint16_t *y, void *stream) {
    if (!count) return uform_ok_k;
    round_kernel<<<blocks_for(count, 256), 256, 0, (cudaStream_t)stream>>>(x, count, y, uform_cuda_planted("round_bf16"));
    return uform_cuda_launched("round_bf16");
}

extern "C" uform_status_t uform_cuda_sum(float const *x, size_t count, float const *scale, float *result, void *stream) {
    sum_kernel<<<1, 1024, 0, (cudaStream_t)stream>>>(x, count, scale, result);
    return uform_cuda_launched("sum");
}
