/*  frontend.cu: the media frontends' kernels (SPEC.md section 1, docs/images.md,
 *  docs/audio_video.md) around their cuBLASLt product, x = W v + b over one media kind's vectors
 *  (16x16 RGBA patches: vision.patch, 16x16x2 RGB tubes: video.tube, 320-sample frames:
 *  audio.frame): the vectors rounded to BF16, the product's rows scattered into that kind's cells'
 *  rows of x with the bias, and back: the cells' dL/dx gathered in BF16 and the bias's gradient
 *  summed in pieces in a fixed order. The live count is read from device memory and the capacity
 *  sizes the launches, so one captured graph serves any batch; rows past the live ones cost one
 *  early return. No atomics: results repeat bitwise. Also the masked modelling heads' kernels
 *  around their two products (a masked vector's true values). C-style CUDA behind the extern "C"
 *  entry points of cuda.h. */
#include <cuda_runtime.h>

#include "cuda/check.h"
#include "cuda/common.cuh"
#include "cuda/cuda.h"
#include "cuda/plant.h"

namespace {

constexpr unsigned row_threads = 128;
constexpr unsigned tube_half = 16 * 16 * 3; /* a tube's first frame; its second follows */

__device__ __forceinline__ size_t live_images(uint32_t const *images, size_t capacity) {
    return images[0] < capacity ? images[0] : capacity;
}

/* Where value `index` of a vector of kind `kind` is read from: itself, but for the planted controls.
 * A patch's value (y, x, c) sits at (16 y + x) 4 + c (channel-last, pixels row by row); a tube's
 * second frame follows its first; a frame's samples are in time order. Returns values for "read 0". */
__device__ __forceinline__ unsigned source_index(unsigned index, unsigned values, int kind, int plant) {
    if (kind == uform_cell_image_k && UFORM_PLANTED(1)) { /* planted: the patch read transposed */
        unsigned pixel = index / 4, channel = index % 4, y = pixel / 16, x = pixel % 16;
        return (x * 16 + y) * 4 + channel;
    }
    if (kind == uform_cell_image_k && UFORM_PLANTED(2) && index % 4 == 3) return values; /* planted: alpha dropped */
    if (kind == uform_cell_video_k && UFORM_PLANTED(3)) return index < tube_half ? index + tube_half : index - tube_half; /* planted: frames swapped */
    if (kind == uform_cell_audio_k && UFORM_PLANTED(4)) return index + 1; /* planted: one sample late (the last reads 0) */
    return index;
}

/* Each thread writes 8 of a vector's values (every media width is a multiple of 8). */
__global__ void media_vectors_kernel(void const *rows, uint32_t const *images, size_t capacity, unsigned values, int kind,
                                     uint16_t *vectors, int plant) {
    size_t row = blockIdx.x, live = live_images(images, capacity);
    int bf16 = images[1] == (uint32_t)uform_media_bf16_k;
    uint16_t packed_values[8];
    for (unsigned e = 0; e < 8; ++e) {
        unsigned index = threadIdx.x * 8 + e, source = source_index(index, values, kind, plant);
        float value = 0;
        if (row < live && source < values)
            value = bf16 ? uform_bf16_to_f32(static_cast<uint16_t const *>(rows)[row * values + source])
                         : static_cast<float const *>(rows)[row * values + source];
        packed_values[e] = uform_f32_to_bf16(value);
    }
    uint4 packed;
    packed.x = (uint32_t)packed_values[0] | (uint32_t)packed_values[1] << 16;
    packed.y = (uint32_t)packed_values[2] | (uint32_t)packed_values[3] << 16;
    packed.z = (uint32_t)packed_values[4] | (uint32_t)packed_values[5] << 16;
    packed.w = (uint32_t)packed_values[6] | (uint32_t)packed_values[7] << 16;
    reinterpret_cast<uint4 *>(vectors + row * values)[threadIdx.x] = packed;
}

__global__ void media_scatter_kernel(float const *product, float const *bias, uint32_t const *cells,
                                     uint32_t const *images, size_t capacity, size_t width, float *x, int plant) {
    size_t row = blockIdx.x;
    if (row >= live_images(images, capacity)) return;
    float *target = x + (size_t)cells[row] * width;
    for (size_t i = threadIdx.x; i < width; i += blockDim.x)
        target[i] = UFORM_PLANTED(1) ? product[row * width + i] : product[row * width + i] + bias[i]; /* planted: bias dropped */
}

/* Rows past the live ones are zeroed, so that the weight product over the capacity adds nothing for them. */
__global__ void media_gather_kernel(float const *d_x, uint32_t const *cells, uint32_t const *images, size_t capacity,
                                    size_t width, uint16_t *d_product, int plant) {
    size_t row = blockIdx.x, live = live_images(images, capacity);
    uint16_t *target = d_product + row * width;
    if (row >= live) {
        for (size_t i = threadIdx.x; i < width; i += blockDim.x) target[i] = 0;
        return;
    }
    uint32_t cell = cells[row] + (UFORM_PLANTED(1) ? 1u : 0u); /* planted: each row read from the cell after its own */
    for (size_t i = threadIdx.x; i < width; i += blockDim.x) target[i] = uform_f32_to_bf16(d_x[(size_t)cell * width + i]);
}

/* The bias's gradient: piece p sums rows [p C, (p + 1) C) of the live ones (C = uform_cuda_media_piece_k), in
 * order, then each column's pieces are added in order. */
__global__ void media_bias_partials_kernel(float const *d_x, uint32_t const *cells, uint32_t const *images,
                                           size_t capacity, size_t width, float *partials, int plant) {
    size_t piece = blockIdx.y, column = blockIdx.x * blockDim.x + threadIdx.x;
    size_t live = live_images(images, capacity);
    if (UFORM_PLANTED(1) && live) live--; /* planted: the last cell dropped */
    size_t first = piece * uform_cuda_media_piece_k;
    if (first >= live || column >= width) return;
    size_t last = first + uform_cuda_media_piece_k < live ? first + uform_cuda_media_piece_k : live;
    float sum = 0;
    for (size_t i = first; i < last; ++i) sum += d_x[(size_t)cells[i] * width + column];
    partials[piece * width + column] = sum;
}

__global__ void media_bias_reduce_kernel(float const *partials, uint32_t const *images, size_t capacity, size_t width,
                                         float *bias_grad, int plant) {
    size_t column = blockIdx.x * blockDim.x + threadIdx.x;
    size_t live = live_images(images, capacity);
    if (UFORM_PLANTED(1) && live) live--;
    if (column >= width || !live) return;
    size_t pieces = (live + uform_cuda_media_piece_k - 1) / uform_cuda_media_piece_k;
    float sum = 0;
    for (size_t piece = 0; piece < pieces; ++piece) sum += partials[piece * width + column];
    bias_grad[column] += sum;
}

/* --- The masked modelling heads: counts [3] holds the live cells, the rows' dtype, then the masked vectors. */

__device__ __forceinline__ size_t masked_patches(uint32_t const *images, size_t capacity) {
    return images[2] < capacity ? images[2] : capacity;
}

/* Rows past the masked ones are zeroed: the products over the capacity then add nothing for them. */
__global__ void mae_gather_kernel(uint16_t const *h, uint32_t const *cells, uint32_t const *images, size_t capacity,
                                  size_t width, uint16_t *gathered, int plant) {
    size_t row = blockIdx.x;
    uint16_t *target = gathered + row * width;
    if (row >= masked_patches(images, capacity)) {
        for (size_t i = threadIdx.x; i < width; i += blockDim.x) target[i] = 0;
        return;
    }
    uint32_t cell = cells[row] + (UFORM_PLANTED(1) ? 1u : 0u); /* planted: each row read from the cell after its own */
    for (size_t i = threadIdx.x; i < width; i += blockDim.x) target[i] = h[(size_t)cell * width + i];
}

/* Piece p of rows [p C, (p + 1) C), one thread a column of the `values`: e = p + b - t, the gradient
 * 2 e / (M values) rounded to BF16 for the products, its Float32 value and e^2 summed in row order
 * into partials ([pieces, values] of gradient sums, then [pieces, values] of squares). */
__global__ void mae_loss_partials_kernel(float const *predictions, float const *bias, void const *targets,
                                         uint32_t const *images, size_t capacity, size_t values, uint16_t *d_predictions,
                                         float *partials, int plant) {
    size_t piece = blockIdx.y, column = blockIdx.x * blockDim.x + threadIdx.x, pieces = gridDim.y;
    if (column >= values) return;
    size_t masked = masked_patches(images, capacity), live = masked;
    if (UFORM_PLANTED(2) && live) live--; /* planted: the last masked vector dropped from the loss */
    int bf16 = images[1] == (uint32_t)uform_media_bf16_k;
    float scale = masked ? 2.0f / ((float)masked * (float)values) : 0.0f;
    if (UFORM_PLANTED(1)) scale /= 2; /* planted: d(p - t)^2 / dp taken as (p - t) */
    size_t first = piece * uform_cuda_media_piece_k;
    size_t last = first + uform_cuda_media_piece_k < capacity ? first + uform_cuda_media_piece_k : capacity;
    float gradient_sum = 0, square_sum = 0;
    for (size_t row = first; row < last; ++row) {
        size_t at = row * values + column;
        float gradient = 0;
        if (row < live) {
            float truth = bf16 ? uform_bf16_to_f32(static_cast<uint16_t const *>(targets)[at]) : static_cast<float const *>(targets)[at];
            float e = predictions[at] + bias[column] - truth;
            gradient = e * scale, gradient_sum += gradient, square_sum += e * e;
        }
        d_predictions[at] = uform_f32_to_bf16(gradient);
    }
    partials[piece * values + column] = gradient_sum;
    partials[(pieces + piece) * values + column] = square_sum;
}

/* One block of 1024 threads, each the columns c, c + 1024, ... of the `values`: each column's pieces in
 * order, the thread's squares in column order, then the threads' in a fixed tree (Float64) into the mean. */
__global__ void mae_loss_reduce_kernel(float const *partials, uint32_t const *images, size_t capacity, size_t values,
                                       size_t pieces, float *bias_grad, float *loss) {
    __shared__ double shared[1024];
    size_t masked = masked_patches(images, capacity);
    size_t live_pieces = (masked + uform_cuda_media_piece_k - 1) / uform_cuda_media_piece_k;
    double square = 0;
    for (size_t column = threadIdx.x; column < values; column += 1024) {
        float gradient = 0;
        for (size_t piece = 0; piece < live_pieces; ++piece)
            gradient += partials[piece * values + column], square += partials[(pieces + piece) * values + column];
        if (masked) bias_grad[column] += gradient;
    }
    shared[threadIdx.x] = square;
    __syncthreads();
    for (unsigned half = 512; half > 0; half /= 2) {
        if (threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) *loss = masked ? (float)(shared[0] / ((double)masked * (double)values)) : 0.0f;
}

__global__ void mae_scatter_add_kernel(float const *d_gathered, uint32_t const *cells, uint32_t const *images,
                                       size_t capacity, size_t width, float *d_h, int plant) {
    size_t row = blockIdx.x;
    if (row >= masked_patches(images, capacity)) return;
    float *target = d_h + (size_t)cells[row] * width;
    for (size_t i = threadIdx.x; i < width; i += blockDim.x)
        target[i] = UFORM_PLANTED(1) ? d_gathered[row * width + i] : target[i] + d_gathered[row * width + i]; /* planted: written, not added */
}

unsigned blocks_for(size_t count, unsigned threads) { return (unsigned)((count + threads - 1) / threads); }

} // namespace

extern "C" uform_status_t uform_cuda_media_vectors(void const *rows, uint32_t const *counts, size_t capacity,
                                                   size_t values, int kind, uint16_t *vectors, void *stream) {
    if (!capacity) return uform_ok_k;
    if (!values || values % 8 || values > 8 * 1024)
        return uform_cuda_note(uform_invalid_argument_k, "media_vectors: vectors of %zu values (a multiple of 8 is needed)", values);
    media_vectors_kernel<<<(unsigned)capacity, (unsigned)(values / 8), 0, (cudaStream_t)stream>>>(
        rows, counts, capacity, (unsigned)values, kind, vectors, uform_cuda_planted("media_vectors"));
    return uform_cuda_launched("media_vectors");
}

extern "C" uform_status_t uform_cuda_media_scatter(float const *product, float const *bias, uint32_t const *cells,
                                                   uint32_t const *counts, size_t capacity, size_t width, float *x,
                                                   void *stream) {
    if (!capacity) return uform_ok_k;
    media_scatter_kernel<<<(unsigned)capacity, row_threads, 0, (cudaStream_t)stream>>>(
        product, bias, cells, counts, capacity, width, x, uform_cuda_planted("media_scatter"));
    return uform_cuda_launched("media_scatter");
}

extern "C" uform_status_t uform_cuda_media_gather(float const *d_x, uint32_t const *cells, uint32_t const *counts,
                                                  size_t capacity, size_t width, uint16_t *d_product, void *stream) {
    if (!capacity) return uform_ok_k;
    media_gather_kernel<<<(unsigned)capacity, row_threads, 0, (cudaStream_t)stream>>>(
        d_x, cells, counts, capacity, width, d_product, uform_cuda_planted("media_gather"));
    return uform_cuda_launched("media_gather");
}

extern "C" size_t uform_cuda_media_bias_partials(size_t capacity, size_t width) {
    return (capacity + uform_cuda_media_piece_k - 1) / uform_cuda_media_piece_k * width;
}

extern "C" uform_status_t uform_cuda_media_bias_backward(float const *d_x, uint32_t const *cells, uint32_t const *counts,
                                                         size_t capacity, size_t width, float *partials,
                                                         float *bias_grad, void *stream) {
    if (!capacity) return uform_ok_k;
    cudaStream_t s = (cudaStream_t)stream;
    int plant = uform_cuda_planted("media_bias_backward");
    unsigned pieces = blocks_for(capacity, uform_cuda_media_piece_k);
    media_bias_partials_kernel<<<dim3(blocks_for(width, row_threads), pieces), row_threads, 0, s>>>(
        d_x, cells, counts, capacity, width, partials, plant);
    media_bias_reduce_kernel<<<blocks_for(width, row_threads), row_threads, 0, s>>>(partials, counts, capacity, width,
                                                                                     bias_grad, plant);
    return uform_cuda_launched("media_bias_backward");
}

extern "C" uform_status_t uform_cuda_mae_gather(uint16_t const *h, uint32_t const *cells, uint32_t const *images,
                                                size_t capacity, size_t width, uint16_t *gathered, void *stream) {
    if (!capacity) return uform_ok_k;
    mae_gather_kernel<<<(unsigned)capacity, row_threads, 0, (cudaStream_t)stream>>>(h, cells, images, capacity, width,
                                                                                 gathered, uform_cuda_planted("mae_gather"));
    return uform_cuda_launched("mae_gather");
}

extern "C" size_t uform_cuda_mae_partials(size_t capacity, size_t values) {
    return 2 * ((capacity + uform_cuda_media_piece_k - 1) / uform_cuda_media_piece_k) * values;
}

extern "C" uform_status_t uform_cuda_mae_loss(float const *predictions, float const *bias, void const *targets,
                                              uint32_t const *counts, size_t capacity, size_t values,
                                              uint16_t *d_predictions, float *partials, float *bias_grad, float *loss,
                                              void *stream) {
    if (!capacity) return uform_ok_k;
    cudaStream_t s = (cudaStream_t)stream;
    unsigned pieces = blocks_for(capacity, uform_cuda_media_piece_k);
    mae_loss_partials_kernel<<<dim3(blocks_for(values, row_threads), pieces), row_threads, 0, s>>>(
        predictions, bias, targets, counts, capacity, values, d_predictions, partials, uform_cuda_planted("mae_loss"));
    mae_loss_reduce_kernel<<<1, 1024, 0, s>>>(partials, counts, capacity, values, pieces, bias_grad, loss);
    return uform_cuda_launched("mae_loss");
}

extern "C" uform_status_t uform_cuda_mae_scatter_add(float const *d_gathered, uint32_t const *cells,
                                                     uint32_t const *images, size_t capacity, size_t width, float *d_h,
                                                     void *stream) {
    if (!capacity) return uform_ok_k;
    mae_scatter_add_kernel<<<(unsigned)capacity, row_threads, 0, (cudaStream_t)stream>>>(
        d_gathered, cells, images, capacity, width, d_h, uform_cuda_planted("mae_scatter_add"));
    return uform_cuda_launched("mae_scatter_add");
}
