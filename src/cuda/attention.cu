/*  attention.cu: attention restricted to each segment of packed rows, forward and backward, on
 *  tensor cores (mma.sync m16n8k16, BF16 in, Float32 accumulation) in the FlashAttention-2 way:
 *  a block of four warps owns 64 rows, walks 64-cell tiles of the other side through shared memory
 *  (double-buffered with cp.async), and keeps scores in registers. A segment mask compares the
 *  segment ids of query and key, so one tile may straddle several segments. The backward pass
 *  recomputes the scores twice (one kernel for dq, one for dk and dv) instead of adding dq with
 *  atomics: every output has one owner that sums in a fixed order, so results repeat bitwise.
 *  Requirements: head width 64, segments are contiguous runs listed in cell order. */
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "cuda/check.h"
#include "cuda/common.cuh"
#include "cuda/cuda.h"
#include "cuda/plant.h"

namespace {

constexpr unsigned head_width = 64, tile = 64, threads = 128, pitch = 72; /* 72: rows land on distinct banks */
/* Scores run in base 2: q.k / 8 * log2(e), so each weight is one ex2.approx (2 ulp) instead of expf. */
constexpr float score_scale = 0.125f * 1.44269504088896341f, log2_e = 1.44269504088896341f, ln_2 = 0.693147180559945309f;

__device__ __forceinline__ float exp2_approx(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ uint32_t shared_address(void const *pointer) {
    return (uint32_t)__cvta_generic_to_shared(pointer);
}

/* 16 bytes global -> shared, zero-filled when `valid` is false. */
__device__ __forceinline__ void copy16(void *target, void const *source, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(target)), "l"(source),
                 "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void copy_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int pending> __device__ __forceinline__ void copy_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(pending)); }

__device__ __forceinline__ void load_matrix(uint32_t *r, void const *address) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(address)));
}
__device__ __forceinline__ void load_matrix_transposed(uint32_t *r, void const *address) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(address)));
}

/* c += a b, a 16x16 (row), b 16x8 (column), BF16 in, Float32 accumulation. */
__device__ __forceinline__ void mma(float *c, uint32_t const *a, uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack(float low, float high) {
    __nv_bfloat162 pair = __floats2bfloat162_rn(low, high); /* round to nearest even, as uform_f32_to_bf16 */
    return *reinterpret_cast<uint32_t *>(&pair);
}

/* The A fragments of a 16 x 64 product held as C fragments [8][4] (the FlashAttention-2 register reuse). */
__device__ __forceinline__ void to_operand(float const (*c)[4], uint32_t (*a)[4]) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        a[k][0] = pack(c[2 * k][0], c[2 * k][1]);
        a[k][1] = pack(c[2 * k][2], c[2 * k][3]);
        a[k][2] = pack(c[2 * k + 1][0], c[2 * k + 1][1]);
        a[k][3] = pack(c[2 * k + 1][2], c[2 * k + 1][3]);
    }
}

/* A fragments [4][4] of the warp's 16 rows x 64 columns of a shared tile. */
__device__ __forceinline__ void load_rows(uint16_t const *tile_base, unsigned warp, unsigned lane, uint32_t (*a)[4]) {
#pragma unroll
    for (int k = 0; k < 4; ++k) load_matrix(a[k], tile_base + (warp * 16 + (lane & 15)) * pitch + k * 16 + (lane >> 4) * 8);
}

/* c [8][4] += a (16 x 64) times the shared tile's rows as columns: a t^T. */
__device__ __forceinline__ void multiply_transposed(float (*c)[4], uint32_t const (*a)[4], uint16_t const *t, unsigned lane) {
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int k = 0; k < 4; k += 2) {
            uint32_t b[4];
            load_matrix(b, t + (j * 8 + (lane & 7)) * pitch + k * 16 + (lane >> 3) * 8);
            mma(c[j], a[k], b[0], b[1]);
            mma(c[j], a[k + 1], b[2], b[3]);
        }
}

/* c [8][4] += a (16 x 64) times the shared tile: a t. */
__device__ __forceinline__ void multiply(float (*c)[4], uint32_t const (*a)[4], uint16_t const *t, unsigned lane) {
#pragma unroll
    for (int k = 0; k < 4; ++k)
#pragma unroll
        for (int j = 0; j < 8; j += 2) {
            uint32_t b[4];
            load_matrix_transposed(b, t + (k * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * pitch + j * 8 + (lane >> 4) * 8);
            mma(c[j], a[k], b[0], b[1]);
            mma(c[j + 1], a[k], b[2], b[3]);
        }
}

/* Starts copying 64 rows of one head's 64 columns (at `column` of rows `stride` apart) into a tile. */
__device__ __forceinline__ void fetch(uint16_t *target, uint16_t const *source, size_t stride, size_t column,
                                      size_t first, size_t cells) {
    for (unsigned chunk = threadIdx.x; chunk < tile * 8; chunk += threads) {
        unsigned row = chunk / 8, part = chunk % 8;
        bool valid = first + row < cells;
        uint16_t const *from = valid ? source + (first + row) * stride + column + part * 8 : source;
        copy16(target + row * pitch + part * 8, from, valid);
    }
}

/* Segment ids of a tile's 64 cells; -2 past the end never matches a row's (-1 past the end). */
__device__ __forceinline__ void fetch_segments(int *target, uint32_t const *segment_of, size_t first, size_t cells) {
    if (threadIdx.x < tile) target[threadIdx.x] = first + threadIdx.x < cells ? (int)segment_of[first + threadIdx.x] : -2;
}

/* The cells [begin, end) that rows [first, first + 64) attend to: the union of their segments. */
__device__ __forceinline__ void partner_range(uint32_t const *spans, uint32_t const *segment_of, size_t first,
                                              size_t cells, size_t *begin, size_t *end) {
    size_t last = first + tile < cells ? first + tile - 1 : cells - 1;
    *begin = spans[2 * segment_of[first]];
    uint32_t final_segment = segment_of[last];
    *end = spans[2 * final_segment] + spans[2 * final_segment + 1];
}

/* 1 when rows [first, first + 64) all lie in one segment (segments are contiguous runs): its id, else -1. */
__device__ __forceinline__ int block_segment(uint32_t const *segment_of, size_t first, size_t cells) {
    if (first + tile > cells) return -1;
    uint32_t segment = segment_of[first];
    return segment_of[first + tile - 1] == segment ? (int)segment : -1;
}

/* A partner tile wholly inside the block's one segment needs no mask. */
__device__ __forceinline__ bool whole_tile(int const *segments, int segment) {
    return segment >= 0 && segments[0] == segment && segments[tile - 1] == segment;
}

struct tiles_t {
    uint16_t rows[2][tile * pitch];     /* the block's own rows: q (and dO), or k and v */
    uint16_t other[2][2][tile * pitch]; /* double-buffered partner tiles: k and v, or q and dO */
    int other_segment[2][tile];
    float other_log_sum[2][tile], other_delta[2][tile];
};

/* The forward's and the dq kernel's partner tiles: k, v and their segments. */
__device__ __forceinline__ void fetch_keys(tiles_t &s, uint16_t const *qkv, uint32_t const *segment_of, size_t cells,
                                           size_t width, size_t head, unsigned buffer, size_t first) {
    fetch(s.other[buffer][0], qkv, 3 * width, width + head * head_width, first, cells);
    fetch(s.other[buffer][1], qkv, 3 * width, 2 * width + head * head_width, first, cells);
    fetch_segments(s.other_segment[buffer], segment_of, first, cells);
}

/* q or k rows of a landed tile rotated in place by M-RoPE's table [cells, 32] (cos, sin), as uform_cuda_rope
 * rotates them (uform_rotate_pair): the tile's row r is cell first + r; rows past the last stay zero.
 * Planted 3: the sine's sign flipped. */
__device__ __forceinline__ void rotate_tile(uint16_t *rows, float2 const *rotations, size_t first, size_t cells, int plant) {
    for (unsigned index = threadIdx.x; index < tile * 32; index += threads) {
        unsigned row = index / 32, slot = index % 32;
        if (first + row >= cells) break; /* later indices are later rows */
        float2 rotation = rotations[(first + row) * 32 + slot];
        uform_rotate_pair(rows + row * pitch + slot, rows + row * pitch + slot + 32, rotation.x,
                          UFORM_PLANTED(3) ? -rotation.y : rotation.y);
    }
}

/* Waits for tile i while tile i + 1 (when there is one) streams in behind it. */
__device__ __forceinline__ void await_tile(bool more) {
    if (more) {
        copy_commit();
        copy_wait<1>();
    } else {
        copy_wait<0>();
    }
    __syncthreads();
}

/* `rotations` NULL: q and k rotated already (uform_cuda_rope); else rotated here as each tile lands. With
 * `codes`, the output is E4M3 codes of its BF16 values times `inverse` instead (log_sums may then be NULL). */
__global__ void __launch_bounds__(threads) attention_forward_kernel(uint16_t const *qkv, float2 const *rotations,
                                                                    uint32_t const *spans, uint32_t const *segment_of,
                                                                    size_t cells, size_t width, uint16_t *attended,
                                                                    float *log_sums, uint8_t *codes, float inverse,
                                                                    int plant) {
    extern __shared__ __align__(16) unsigned char memory[];
    tiles_t &s = *reinterpret_cast<tiles_t *>(memory);
    unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    size_t head = blockIdx.y, heads = width / head_width, first = (size_t)blockIdx.x * tile, stride = 3 * width;
    size_t begin, end;
    partner_range(spans, segment_of, first, cells, &begin, &end);
    int uniform = block_segment(segment_of, first, cells);
    if (UFORM_PLANTED(1) && end < cells) end += 1; /* planted: the mask leaks one cell past the segment */
    fetch(s.rows[0], qkv, stride, head * head_width, first, cells);
    copy_commit();
    int row_segment[2];
    size_t row_end[2];
    for (int r = 0; r < 2; ++r) {
        size_t row = first + warp * 16 + g + 8 * r;
        row_segment[r] = row < cells ? (int)segment_of[row] : -1;
        row_end[r] = row < cells ? spans[2 * row_segment[r]] + spans[2 * row_segment[r] + 1] : 0;
    }
    size_t start = begin / tile * tile, count = (end - start + tile - 1) / tile;
    fetch_keys(s, qkv, segment_of, cells, width, head, 0, start);
    copy_commit();
    copy_wait<1>();
    __syncthreads();
    if (rotations) {
        rotate_tile(s.rows[0], rotations, first, cells, plant);
        __syncthreads();
    }
    uint32_t q[4][4];
    load_rows(s.rows[0], warp, lane, q);
    float output[8][4] = {}, largest[2] = {-INFINITY, -INFINITY}, sum[2] = {0, 0};
    for (size_t i = 0; i < count; ++i) {
        unsigned buffer = i & 1;
        size_t key_first = start + i * tile;
        if (i + 1 < count) fetch_keys(s, qkv, segment_of, cells, width, head, buffer ^ 1, key_first + tile);
        await_tile(i + 1 < count);
        if (rotations) {
            rotate_tile(s.other[buffer][0], rotations, key_first, cells, plant);
            __syncthreads();
        }
        float score[8][4] = {};
        multiply_transposed(score, q, s.other[buffer][0], lane);
        float tile_largest[2] = {-INFINITY, -INFINITY};
        bool whole = !UFORM_PLANTED(1) && whole_tile(s.other_segment[buffer], uniform);
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                unsigned column = j * 8 + 2 * t + (e & 1);
                int r = e >> 1;
                bool seen = whole || s.other_segment[buffer][column] == row_segment[r] ||
                            (UFORM_PLANTED(1) && key_first + column == row_end[r] && row_segment[r] >= 0);
                score[j][e] = seen ? score[j][e] * score_scale : -INFINITY;
                tile_largest[r] = fmaxf(tile_largest[r], score[j][e]);
            }
        float rescale[2], base[2];
        for (int r = 0; r < 2; ++r) {
            tile_largest[r] = fmaxf(tile_largest[r], __shfl_xor_sync(0xffffffffu, tile_largest[r], 1));
            tile_largest[r] = fmaxf(tile_largest[r], __shfl_xor_sync(0xffffffffu, tile_largest[r], 2));
            float next = fmaxf(largest[r], tile_largest[r]);
            base[r] = next == -INFINITY ? 0.0f : next; /* a row with no key seen yet stays at zero weight */
            rescale[r] = exp2_approx(largest[r] - base[r]);
            largest[r] = next;
            sum[r] *= rescale[r];
        }
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                score[j][e] = exp2_approx(score[j][e] - base[e >> 1]);
                sum[e >> 1] += score[j][e];
            }
        if (rescale[0] != 1.0f || rescale[1] != 1.0f) /* the running maximum moved */
#pragma unroll
            for (int j = 0; j < 8; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) output[j][e] *= rescale[e >> 1];
        uint32_t p[4][4];
        to_operand(score, p);
        multiply(output, p, s.other[buffer][1], lane);
        __syncthreads();
    }
    for (int r = 0; r < 2; ++r) { /* the quad's partial sums, in a fixed order */
        sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 1);
        sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 2);
    }
    for (int r = 0; r < 2; ++r) {
        size_t row = first + warp * 16 + g + 8 * r;
        if (row >= cells) continue;
        if (codes) {
            uint16_t *target = reinterpret_cast<uint16_t *>(codes + row * width + head * head_width);
            for (int j = 0; j < 8; ++j) {
                float2 value = __bfloat1622float2(__floats2bfloat162_rn(output[j][2 * r] / sum[r], output[j][2 * r + 1] / sum[r]));
                target[j * 4 + t] = (uint16_t)(__nv_cvt_float_to_fp8(value.x * inverse, __NV_SATFINITE, __NV_E4M3) |
                                               __nv_cvt_float_to_fp8(value.y * inverse, __NV_SATFINITE, __NV_E4M3) << 8);
            }
        } else {
            __nv_bfloat162 *target = reinterpret_cast<__nv_bfloat162 *>(attended + row * width + head * head_width);
            for (int j = 0; j < 8; ++j)
                target[j * 4 + t] = __floats2bfloat162_rn(output[j][2 * r] / sum[r], output[j][2 * r + 1] / sum[r]);
        }
        if (t == 0 && log_sums) log_sums[row * heads + head] = largest[r] * ln_2 + logf(sum[r]);
    }
}

/* delta [cells, heads] = dO . O per row and head, the softmax backward's shared term (serial, 16-byte loads). */
__global__ void attention_delta_kernel(uint16_t const *attended, uint16_t const *d_attended, size_t cells, size_t width,
                                       float *deltas, int plant) {
    size_t heads = width / head_width, index = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (index >= cells * heads) return;
    size_t cell = index / heads, head = index % heads;
    uint4 const *o = reinterpret_cast<uint4 const *>(attended + cell * width + head * head_width);
    uint4 const *d = reinterpret_cast<uint4 const *>(d_attended + cell * width + head * head_width);
    float delta = 0;
    for (unsigned part = 0; part < head_width / 8; ++part) {
        uint4 a = o[part], b = d[part];
        uint16_t const *a8 = reinterpret_cast<uint16_t const *>(&a), *b8 = reinterpret_cast<uint16_t const *>(&b);
        for (unsigned i = 0; i < 8; ++i) delta += uform_bf16_to_f32(b8[i]) * uform_bf16_to_f32(a8[i]);
    }
    deltas[index] = UFORM_PLANTED(2) ? 0.0f : delta; /* planted: the softmax's shared term dropped */
}

/* dq for 64 query rows: recompute P = exp(q k^T / 8 - lse), dP = dO v^T, dS = P (dP - delta) / 8, dq = dS k. */
__global__ void __launch_bounds__(threads) attention_query_kernel(uint16_t const *qkv, float const *log_sums,
                                                                  float const *deltas, uint16_t const *d_attended,
                                                                  uint32_t const *spans, uint32_t const *segment_of,
                                                                  size_t cells, size_t width, uint16_t *d_qkv) {
    extern __shared__ __align__(16) unsigned char memory[];
    tiles_t &s = *reinterpret_cast<tiles_t *>(memory);
    unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    size_t head = blockIdx.y, heads = width / head_width, first = (size_t)blockIdx.x * tile, stride = 3 * width;
    size_t begin, end;
    partner_range(spans, segment_of, first, cells, &begin, &end);
    int uniform = block_segment(segment_of, first, cells);
    fetch(s.rows[0], qkv, stride, head * head_width, first, cells);
    fetch(s.rows[1], d_attended, width, head * head_width, first, cells);
    copy_commit();
    int row_segment[2];
    float row_log_sum[2], row_delta[2];
    for (int r = 0; r < 2; ++r) {
        size_t row = first + warp * 16 + g + 8 * r;
        row_segment[r] = row < cells ? (int)segment_of[row] : -1;
        row_log_sum[r] = row < cells ? log_sums[row * heads + head] * log2_e : 0.0f; /* base 2 */
        row_delta[r] = row < cells ? deltas[row * heads + head] : 0.0f;
    }
    size_t start = begin / tile * tile, count = (end - start + tile - 1) / tile;
    fetch_keys(s, qkv, segment_of, cells, width, head, 0, start);
    copy_commit();
    copy_wait<1>();
    __syncthreads();
    uint32_t q[4][4], d_out[4][4];
    load_rows(s.rows[0], warp, lane, q);
    load_rows(s.rows[1], warp, lane, d_out);
    float dq[8][4] = {};
    for (size_t i = 0; i < count; ++i) {
        unsigned buffer = i & 1;
        size_t key_first = start + i * tile;
        if (i + 1 < count) fetch_keys(s, qkv, segment_of, cells, width, head, buffer ^ 1, key_first + tile);
        await_tile(i + 1 < count);
        float score[8][4] = {}, d_p[8][4] = {};
        bool whole = whole_tile(s.other_segment[buffer], uniform);
        multiply_transposed(score, q, s.other[buffer][0], lane);
        multiply_transposed(d_p, d_out, s.other[buffer][1], lane);
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                int r = e >> 1;
                bool seen = whole || s.other_segment[buffer][j * 8 + 2 * t + (e & 1)] == row_segment[r];
                float p = seen ? exp2_approx(fmaf(score[j][e], score_scale, -row_log_sum[r])) : 0.0f;
                score[j][e] = p * (d_p[j][e] - row_delta[r]) * 0.125f;
            }
        uint32_t d_score[4][4];
        to_operand(score, d_score);
        multiply(dq, d_score, s.other[buffer][0], lane);
        __syncthreads();
    }
    for (int r = 0; r < 2; ++r) {
        size_t row = first + warp * 16 + g + 8 * r;
        if (row >= cells) continue;
        __nv_bfloat162 *target = reinterpret_cast<__nv_bfloat162 *>(d_qkv + row * stride + head * head_width);
        for (int j = 0; j < 8; ++j) target[j * 4 + t] = __floats2bfloat162_rn(dq[j][2 * r], dq[j][2 * r + 1]);
    }
}

/* The key kernel's partner tiles: q, dO, and the rows' segments, log-sum-exps and deltas. */
__device__ __forceinline__ void fetch_queries(tiles_t &s, uint16_t const *qkv, uint16_t const *d_attended,
                                              float const *log_sums, float const *deltas, uint32_t const *segment_of,
                                              size_t cells, size_t width, size_t head, unsigned buffer, size_t first) {
    size_t heads = width / head_width;
    fetch(s.other[buffer][0], qkv, 3 * width, head * head_width, first, cells);
    fetch(s.other[buffer][1], d_attended, width, head * head_width, first, cells);
    fetch_segments(s.other_segment[buffer], segment_of, first, cells);
    if (threadIdx.x < tile) {
        size_t query = first + threadIdx.x;
        s.other_log_sum[buffer][threadIdx.x] = query < cells ? log_sums[query * heads + head] * log2_e : 0.0f;
        s.other_delta[buffer][threadIdx.x] = query < cells ? deltas[query * heads + head] : 0.0f;
    }
}

/* dk and dv for 64 key rows: transposed scores S^T = k q^T, dP^T = v dO^T; dv = P^T dO, dk = dS^T q. */
__global__ void __launch_bounds__(threads) attention_key_kernel(uint16_t const *qkv, float const *log_sums,
                                                                float const *deltas, uint16_t const *d_attended,
                                                                uint32_t const *spans, uint32_t const *segment_of,
                                                                size_t cells, size_t width, uint16_t *d_qkv) {
    extern __shared__ __align__(16) unsigned char memory[];
    tiles_t &s = *reinterpret_cast<tiles_t *>(memory);
    unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    size_t head = blockIdx.y, first = (size_t)blockIdx.x * tile, stride = 3 * width;
    size_t begin, end;
    partner_range(spans, segment_of, first, cells, &begin, &end);
    int uniform = block_segment(segment_of, first, cells);
    fetch(s.rows[0], qkv, stride, width + head * head_width, first, cells);
    fetch(s.rows[1], qkv, stride, 2 * width + head * head_width, first, cells);
    copy_commit();
    int row_segment[2];
    for (int r = 0; r < 2; ++r) {
        size_t row = first + warp * 16 + g + 8 * r;
        row_segment[r] = row < cells ? (int)segment_of[row] : -1;
    }
    size_t start = begin / tile * tile, count = (end - start + tile - 1) / tile;
    fetch_queries(s, qkv, d_attended, log_sums, deltas, segment_of, cells, width, head, 0, start);
    copy_commit();
    copy_wait<1>();
    __syncthreads();
    uint32_t k[4][4], v[4][4];
    load_rows(s.rows[0], warp, lane, k);
    load_rows(s.rows[1], warp, lane, v);
    float dk[8][4] = {}, dv[8][4] = {};
    for (size_t i = 0; i < count; ++i) {
        unsigned buffer = i & 1;
        size_t query_first = start + i * tile;
        if (i + 1 < count)
            fetch_queries(s, qkv, d_attended, log_sums, deltas, segment_of, cells, width, head, buffer ^ 1,
                          query_first + tile);
        await_tile(i + 1 < count);
        float p[8][4] = {}, d_score[8][4] = {};
        bool whole = whole_tile(s.other_segment[buffer], uniform);
        multiply_transposed(p, k, s.other[buffer][0], lane);
        multiply_transposed(d_score, v, s.other[buffer][1], lane);
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                unsigned column = j * 8 + 2 * t + (e & 1);
                bool seen = whole || s.other_segment[buffer][column] == row_segment[e >> 1];
                p[j][e] = seen ? exp2_approx(fmaf(p[j][e], score_scale, -s.other_log_sum[buffer][column])) : 0.0f;
                d_score[j][e] = p[j][e] * (d_score[j][e] - s.other_delta[buffer][column]) * 0.125f;
            }
        uint32_t a[4][4];
        to_operand(p, a);
        multiply(dv, a, s.other[buffer][1], lane);
        to_operand(d_score, a);
        multiply(dk, a, s.other[buffer][0], lane);
        __syncthreads();
    }
    for (int r = 0; r < 2; ++r) {
        size_t row = first + warp * 16 + g + 8 * r;
        if (row >= cells) continue;
        __nv_bfloat162 *target_k = reinterpret_cast<__nv_bfloat162 *>(d_qkv + row * stride + width + head * head_width);
        __nv_bfloat162 *target_v = reinterpret_cast<__nv_bfloat162 *>(d_qkv + row * stride + 2 * width + head * head_width);
        for (int j = 0; j < 8; ++j) {
            target_k[j * 4 + t] = __floats2bfloat162_rn(dk[j][2 * r], dk[j][2 * r + 1]);
            target_v[j * 4 + t] = __floats2bfloat162_rn(dv[j][2 * r], dv[j][2 * r + 1]);
        }
    }
}

/* Once per kernel (and so never inside a graph capture after the first eager launch). */
uform_status_t configure(void const *kernel, bool *done, char const *entry) {
    if (*done) return uform_ok_k;
    uform_status_t status = uform_cuda_check(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sizeof(tiles_t)), entry,
        "cudaFuncSetAttribute");
    *done = status == uform_ok_k;
    return status;
}

bool forward_configured, query_configured, key_configured;

/* lengths [b]: each segment's length; offsets [b + 1] of each segment's first cell in qkv rows and in w rows. */
__global__ void ragged_kernel(uint32_t const *spans, size_t segments, size_t cells, size_t width, size_t padding,
                              int32_t *lengths, int32_t *qkv_offsets, int32_t *row_offsets, int plant) {
    size_t s = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (s > segments) return;
    int real = s < segments && spans[2 * s + 1];
    size_t first = real ? spans[2 * s] : s < segments ? cells : cells + padding; /* padding at the end keeps offsets rising */
    if (UFORM_PLANTED(1) && s < segments) first = spans[2 * s]; /* planted: padding where its span says, at 0 */
    qkv_offsets[s] = (int32_t)(first * 3 * width);
    row_offsets[s] = (int32_t)(first * width);
    if (s < segments) lengths[s] = (int32_t)(real ? spans[2 * s + 1] : padding);
}

} // namespace

extern "C" uform_status_t uform_cuda_ragged_offsets(uint32_t const *spans, size_t segments, size_t cells, size_t width,
                                                    size_t padding, int32_t *lengths, int32_t *qkv_offsets,
                                                    int32_t *row_offsets, void *stream) {
    if (!segments) return uform_ok_k;
    ragged_kernel<<<(unsigned)((segments + 1 + 255) / 256), 256, 0, (cudaStream_t)stream>>>(
        spans, segments, cells, width, padding, lengths, qkv_offsets, row_offsets, uform_cuda_planted("ragged_offsets"));
    return uform_cuda_launched("ragged_offsets");
}

static uform_status_t width_refused(char const *entry, size_t width) {
    return uform_cuda_note(uform_invalid_argument_k, "%s: width %zu is not a multiple of the head width 64", entry, width);
}

/* Both forward entries: `entry` names the failure and the plant (the rotating entry's control is the kernel's 3). */
static uform_status_t forward_(char const *entry, uint16_t const *qkv, float const *rotations, uint32_t const *spans,
                               uint32_t const *segment_of, size_t cells, size_t width, uint16_t *attended, float *log_sums,
                               uint8_t *codes, float inverse, void *stream) {
    if (!cells) return uform_ok_k;
    if (width % head_width) return width_refused(entry, width);
    uform_status_t status = configure((void const *)attention_forward_kernel, &forward_configured, entry);
    if (status != uform_ok_k) return status;
    int plant = uform_cuda_planted(entry);
    dim3 grid((unsigned)((cells + tile - 1) / tile), (unsigned)(width / head_width));
    attention_forward_kernel<<<grid, threads, sizeof(tiles_t), (cudaStream_t)stream>>>(
        qkv, (float2 const *)rotations, spans, segment_of, cells, width, attended, log_sums, codes, inverse,
        rotations && plant ? 3 : plant);
    return uform_cuda_launched(entry);
}

extern "C" uform_status_t uform_cuda_attention_forward(uint16_t const *qkv, uint32_t const *spans,
                                                       uint32_t const *segment_of, size_t cells, size_t width,
                                                       uint16_t *attended, float *log_sums, void *stream) {
    return forward_("attention_forward", qkv, NULL, spans, segment_of, cells, width, attended, log_sums, NULL, 0, stream);
}

extern "C" uform_status_t uform_cuda_attention_forward_e4m3(uint16_t const *qkv, uint32_t const *spans,
                                                            uint32_t const *segment_of, size_t cells, size_t width,
                                                            uint8_t *codes, float fixed, void *stream) {
    if (!(fixed > 0)) return uform_cuda_note(uform_invalid_argument_k, "attention_forward_e4m3: the codes' scale must be positive");
    return forward_("attention_forward_e4m3", qkv, NULL, spans, segment_of, cells, width, NULL, NULL, codes, 1.0f / fixed, stream);
}

extern "C" uform_status_t uform_cuda_attention_forward_rotating(uint16_t const *qkv, float const *rotations,
                                                                uint32_t const *spans, uint32_t const *segment_of,
                                                                size_t cells, size_t width, uint16_t *attended,
                                                                float *log_sums, void *stream) {
    if (!rotations) return uform_cuda_note(uform_invalid_argument_k, "attention_forward_rotating: no rotation table");
    return forward_("attention_forward_rotating", qkv, rotations, spans, segment_of, cells, width, attended, log_sums, NULL, 0,
                    stream);
}

extern "C" uform_status_t uform_cuda_attention_backward(uint16_t const *qkv, uint16_t const *attended,
                                                        float const *log_sums, uint16_t const *d_attended,
                                                        uint32_t const *spans, uint32_t const *segment_of, size_t cells,
                                                        size_t width, float *deltas, uint16_t *d_qkv, void *stream) {
    if (!cells) return uform_ok_k;
    if (width % head_width) return width_refused("attention_backward", width);
    uform_status_t status = configure((void const *)attention_query_kernel, &query_configured, "attention_backward");
    if (status == uform_ok_k) status = configure((void const *)attention_key_kernel, &key_configured, "attention_backward");
    if (status != uform_ok_k) return status;
    cudaStream_t s = (cudaStream_t)stream;
    size_t rows = cells * (width / head_width);
    attention_delta_kernel<<<(unsigned)((rows + 255) / 256), 256, 0, s>>>(attended, d_attended, cells, width, deltas,
                                                                           uform_cuda_planted("attention_backward"));
    dim3 grid((unsigned)((cells + tile - 1) / tile), (unsigned)(width / head_width));
    attention_query_kernel<<<grid, threads, sizeof(tiles_t), s>>>(qkv, log_sums, deltas, d_attended, spans, segment_of,
                                                                  cells, width, d_qkv);
    attention_key_kernel<<<grid, threads, sizeof(tiles_t), s>>>(qkv, log_sums, deltas, d_attended, spans, segment_of,
                                                                cells, width, d_qkv);
    return uform_cuda_launched("attention_backward");
}
