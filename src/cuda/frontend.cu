/*  frontend.cu: the vision frontend's kernels (SPEC.md section 1, docs/images.md) around its
 *  cuBLASLt product, x = vision.patch p + vision.bias over 16x16 RGBA patches: the patches rounded
 *  to BF16, the product's rows scattered into the image cells' rows of x with the bias, and back:
 *  the image cells' dL/dx gathered in BF16 and the bias's gradient summed in pieces in a fixed order.
 *  The live image count is read from device memory and the capacity sizes the launches, so one
 *  captured graph serves any batch; rows past the live ones cost one early return. No atomics:
 *  results repeat bitwise. Also the mae head's kernels around its two products (masked patches'
 *  pixels, docs/images.md). C-style CUDA behind the extern "C" entry points of cuda.h. */
#include <cuda_runtime.h>

#include "cuda/check.h"
#include "cuda/common.cuh"
#include "cuda/cuda.h"
#include "cuda/plant.h"

namespace {

constexpr unsigned patch_threads = 128; /* each thread writes 8 of a patch's 1024 values: two pixels */
constexpr unsigned row_threads = 128;

__device__ __forceinline__ size_t live_images(uint32_t const *images, size_t capacity) {
    return images[0] < capacity ? images[0] : capacity;
}

/* Patch value (y, x, c) sits at (16 y + x) 4 + c of its 1024 (channel-last, pixels row by row). */
__global__ void image_patches_kernel(void const *rows, uint32_t const *images, size_t capacity, uint16_t *patches,
                                     int plant) {
    size_t row = blockIdx.x, live = live_images(images, capacity);
    int bf16 = images[1] == (uint32_t)uform_media_bf16_k;
    uint16_t values[8];
    for (unsigned e = 0; e < 8; ++e) {
        unsigned index = threadIdx.x * 8 + e, pixel = index / 4, channel = index % 4;
        unsigned y = pixel / 16, x = pixel % 16;
        unsigned source = UFORM_PLANTED(1) ? (x * 16 + y) * 4 + channel : index; /* planted: the patch read transposed */
        float value = 0;
        if (row < live)
            value = bf16 ? uform_bf16_to_f32(static_cast<uint16_t const *>(rows)[row * 1024 + source])
                         : static_cast<float const *>(rows)[row * 1024 + source];
        if (UFORM_PLANTED(2) && channel == 3) value = 0; /* planted: alpha dropped */
        values[e] = uform_f32_to_bf16(value);
    }
    uint4 packed;
    packed.x = (uint32_t)values[0] | (uint32_t)values[1] << 16, packed.y = (uint32_t)values[2] | (uint32_t)values[3] << 16;
    packed.z = (uint32_t)values[4] | (uint32_t)values[5] << 16, packed.w = (uint32_t)values[6] | (uint32_t)values[7] << 16;
    reinterpret_cast<uint4 *>(patches + row * 1024)[threadIdx.x] = packed;
}

__global__ void image_scatter_kernel(float const *product, float const *bias, uint32_t const *cells,
                                     uint32_t const *images, size_t capacity, size_t width, float *x, int plant) {
    size_t row = blockIdx.x;
    if (row >= live_images(images, capacity)) return;
    float *target = x + (size_t)cells[row] * width;
    for (size_t i = threadIdx.x; i < width; i += blockDim.x)
        target[i] = UFORM_PLANTED(1) ? product[row * width + i] : product[row * width + i] + bias[i]; /* planted: bias dropped */
}

/* Rows past the live ones are zeroed, so that the weight product over the capacity adds nothing for them. */
__global__ void image_gather_kernel(float const *d_x, uint32_t const *cells, uint32_t const *images, size_t capacity,
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

/* The bias's gradient: piece p sums rows [p C, (p + 1) C) of the live ones (C = image_piece_k), in
 * order, then each column's pieces are added in order. */
__global__ void image_bias_partials_kernel(float const *d_x, uint32_t const *cells, uint32_t const *images,
                                           size_t capacity, size_t width, float *partials, int plant) {
    size_t piece = blockIdx.y, column = blockIdx.x * blockDim.x + threadIdx.x;
    size_t live = live_images(images, capacity);
    if (UFORM_PLANTED(1) && live) live--; /* planted: the last image cell dropped */
    size_t first = piece * uform_cuda_image_piece_k;
    if (first >= live || column >= width) return;
    size_t last = first + uform_cuda_image_piece_k < live ? first + uform_cuda_image_piece_k : live;
    float sum = 0;
    for (size_t i = first; i < last; ++i) sum += d_x[(size_t)cells[i] * width + column];
    partials[piece * width + column] = sum;
}

__global__ void image_bias_reduce_kernel(float const *partials, uint32_t const *images, size_t capacity, size_t width,
                                         float *bias_grad, int plant) {
    size_t column = blockIdx.x * blockDim.x + threadIdx.x;
    size_t live = live_images(images, capacity);
    if (UFORM_PLANTED(1) && live) live--;
    if (column >= width || !live) return;
    size_t pieces = (live + uform_cuda_image_piece_k - 1) / uform_cuda_image_piece_k;
    float sum = 0;
    for (size_t piece = 0; piece < pieces; ++piece) sum += partials[piece * width + column];
    bias_grad[column] += sum;
}

/* --- The mae head: images [3] holds the live image cells, the rows' dtype, then the masked patches. */

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

/* Piece p of rows [p C, (p + 1) C), one thread a column: e = p + b - t, the gradient 2 e / (M 1024)
 * rounded to BF16 for the products, its Float32 value and e^2 summed in row order into partials
 * ([pieces, 1024] of gradient sums, then [pieces, 1024] of squares). */
__global__ void mae_loss_partials_kernel(float const *predictions, float const *bias, void const *targets,
                                         uint32_t const *images, size_t capacity, uint16_t *d_predictions,
                                         float *partials, int plant) {
    size_t piece = blockIdx.y, column = blockIdx.x * blockDim.x + threadIdx.x, pieces = gridDim.y;
    size_t masked = masked_patches(images, capacity), live = masked;
    if (UFORM_PLANTED(2) && live) live--; /* planted: the last masked patch dropped from the loss */
    int bf16 = images[1] == (uint32_t)uform_media_bf16_k;
    float scale = masked ? 2.0f / ((float)masked * 1024.0f) : 0.0f;
    if (UFORM_PLANTED(1)) scale /= 2; /* planted: d(p - t)^2 / dp taken as (p - t) */
    size_t first = piece * uform_cuda_image_piece_k;
    size_t last = first + uform_cuda_image_piece_k < capacity ? first + uform_cuda_image_piece_k : capacity;
    float gradient_sum = 0, square_sum = 0;
    for (size_t row = first; row < last; ++row) {
        size_t at = row * 1024 + column;
        float gradient = 0;
        if (row < live) {
            float truth = bf16 ? uform_bf16_to_f32(static_cast<uint16_t const *>(targets)[at]) : static_cast<float const *>(targets)[at];
            float e = predictions[at] + bias[column] - truth;
            gradient = e * scale, gradient_sum += gradient, square_sum += e * e;
        }
        d_predictions[at] = uform_f32_to_bf16(gradient);
    }
    partials[piece * 1024 + column] = gradient_sum;
    partials[(pieces + piece) * 1024 + column] = square_sum;
}

/* One block of 1024 threads, a column each: the pieces in order, then the squares' columns in a
 * fixed tree (Float64) into the mean. */
__global__ void mae_loss_reduce_kernel(float const *partials, uint32_t const *images, size_t capacity, size_t pieces,
                                       float *bias_grad, float *loss) {
    __shared__ double shared[1024];
    size_t column = threadIdx.x, masked = masked_patches(images, capacity);
    size_t live_pieces = (masked + uform_cuda_image_piece_k - 1) / uform_cuda_image_piece_k;
    float gradient = 0;
    double square = 0;
    for (size_t piece = 0; piece < live_pieces; ++piece)
        gradient += partials[piece * 1024 + column], square += partials[(pieces + piece) * 1024 + column];
    if (masked) bias_grad[column] += gradient;
    shared[column] = square;
    __syncthreads();
    for (unsigned half = 512; half > 0; half /= 2) {
        if (column < half) shared[column] += shared[column + half];
        __syncthreads();
    }
    if (column == 0) *loss = masked ? (float)(shared[0] / ((double)masked * 1024.0)) : 0.0f;
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

extern "C" uform_status_t uform_cuda_image_patches(void const *rows, uint32_t const *images, size_t capacity,
                                                   uint16_t *patches, void *stream) {
    if (!capacity) return uform_ok_k;
    image_patches_kernel<<<(unsigned)capacity, patch_threads, 0, (cudaStream_t)stream>>>(
        rows, images, capacity, patches, uform_cuda_planted("image_patches"));
    return uform_cuda_launched("image_patches");
}

extern "C" uform_status_t uform_cuda_image_scatter(float const *product, float const *bias, uint32_t const *cells,
                                                   uint32_t const *images, size_t capacity, size_t width, float *x,
                                                   void *stream) {
    if (!capacity) return uform_ok_k;
    image_scatter_kernel<<<(unsigned)capacity, row_threads, 0, (cudaStream_t)stream>>>(
        product, bias, cells, images, capacity, width, x, uform_cuda_planted("image_scatter"));
    return uform_cuda_launched("image_scatter");
}

extern "C" uform_status_t uform_cuda_image_gather(float const *d_x, uint32_t const *cells, uint32_t const *images,
                                                  size_t capacity, size_t width, uint16_t *d_product, void *stream) {
    if (!capacity) return uform_ok_k;
    image_gather_kernel<<<(unsigned)capacity, row_threads, 0, (cudaStream_t)stream>>>(
        d_x, cells, images, capacity, width, d_product, uform_cuda_planted("image_gather"));
    return uform_cuda_launched("image_gather");
}

extern "C" size_t uform_cuda_image_bias_partials(size_t capacity, size_t width) {
    return (capacity + uform_cuda_image_piece_k - 1) / uform_cuda_image_piece_k * width;
}

extern "C" uform_status_t uform_cuda_image_bias_backward(float const *d_x, uint32_t const *cells, uint32_t const *images,
                                                         size_t capacity, size_t width, float *partials,
                                                         float *bias_grad, void *stream) {
    if (!capacity) return uform_ok_k;
    cudaStream_t s = (cudaStream_t)stream;
    int plant = uform_cuda_planted("image_bias_backward");
    unsigned pieces = blocks_for(capacity, uform_cuda_image_piece_k);
    image_bias_partials_kernel<<<dim3(blocks_for(width, row_threads), pieces), row_threads, 0, s>>>(
        d_x, cells, images, capacity, width, partials, plant);
    image_bias_reduce_kernel<<<blocks_for(width, row_threads), row_threads, 0, s>>>(partials, images, capacity, width,
                                                                                     bias_grad, plant);
    return uform_cuda_launched("image_bias_backward");
}

extern "C" uform_status_t uform_cuda_mae_gather(uint16_t const *h, uint32_t const *cells, uint32_t const *images,
                                                size_t capacity, size_t width, uint16_t *gathered, void *stream) {
    if (!capacity) return uform_ok_k;
    mae_gather_kernel<<<(unsigned)capacity, row_threads, 0, (cudaStream_t)stream>>>(h, cells, images, capacity, width,
                                                                                 gathered, uform_cuda_planted("mae_gather"));
    return uform_cuda_launched("mae_gather");
}

extern "C" size_t uform_cuda_mae_partials(size_t capacity) {
    return 2 * ((capacity + uform_cuda_image_piece_k - 1) / uform_cuda_image_piece_k) * 1024;
}

extern "C" uform_status_t uform_cuda_mae_loss(float const *predictions, float const *bias, void const *targets,
                                              uint32_t const *images, size_t capacity, uint16_t *d_predictions,
                                              float *partials, float *bias_grad, float *loss, void *stream) {
    if (!capacity) return uform_ok_k;
    cudaStream_t s = (cudaStream_t)stream;
    unsigned pieces = blocks_for(capacity, uform_cuda_image_piece_k);
    mae_loss_partials_kernel<<<dim3(1024 / row_threads, pieces), row_threads, 0, s>>>(
        predictions, bias, targets, images, capacity, d_predictions, partials, uform_cuda_planted("mae_loss"));
    mae_loss_reduce_kernel<<<1, 1024, 0, s>>>(partials, images, capacity, pieces, bias_grad, loss);
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
