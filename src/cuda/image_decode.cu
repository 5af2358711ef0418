/*  image_decode.cu: the two kernels around nvJPEG and NPP's resize (image_decode.h): 8-bit pixels
 *  widened to RGBA in Float32, and the resized image divided by 255 and cut into patches. Planted
 *  controls for test/cuda/image_decode.c: red and blue swapped, and the samples half a pixel late.
 *  C-style CUDA behind extern "C" entry points. */
#include <cuda_runtime.h>

#include "cuda/check.h"
#include "cuda/image_decode.h"
#include "cuda/plant.h"

namespace {

constexpr unsigned widen_threads = 256;
constexpr unsigned patch_threads = 256; /* one thread a pixel of the patch, its four channels */

__global__ void rgba_widen_kernel(uint8_t const *pixels, size_t pitch, unsigned channels, size_t source_height,
                                  size_t source_width, size_t height, size_t width, float *rgba) {
    size_t pixel = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (pixel >= height * width) return;
    size_t y = pixel / width, x = pixel % width;
    y = y < source_height ? y : source_height - 1, x = x < source_width ? x : source_width - 1;
    uint8_t const *source = pixels + y * pitch + x * channels;
    float4 value = make_float4(source[0], source[1], source[2], channels == 4 ? source[3] : 255.0f);
    reinterpret_cast<float4 *>(rgba)[pixel] = value;
}

__global__ void rgba_patches_kernel(float const *rgba, size_t rows, size_t columns, float *patches, int plant) {
    size_t patch = blockIdx.x, width = columns * 16;
    unsigned y = threadIdx.x / 16, x = threadIdx.x % 16;
    size_t image_y = patch / columns * 16 + y, image_x = patch % columns * 16 + x;
    float4 value = reinterpret_cast<float4 const *>(rgba)[image_y * width + image_x];
    if (UFORM_PLANTED(1)) value = make_float4(value.z, value.y, value.x, value.w); /* planted: red and blue swapped */
    if (UFORM_PLANTED(2)) { /* planted: sampled half a pixel late, between this pixel and the next across */
        float4 next = reinterpret_cast<float4 const *>(rgba)[image_y * width + (image_x + 1 < width ? image_x + 1 : image_x)];
        value = make_float4((value.x + next.x) / 2, (value.y + next.y) / 2, (value.z + next.z) / 2, (value.w + next.w) / 2);
    }
    float4 scaled = make_float4(value.x / 255.0f, value.y / 255.0f, value.z / 255.0f, value.w / 255.0f);
    reinterpret_cast<float4 *>(patches + patch * 1024)[threadIdx.x] = scaled;
}

} // namespace

extern "C" uform_status_t uform_cuda_rgba_widen(uint8_t const *pixels, size_t pitch, size_t channels, size_t source_height,
                                                size_t source_width, size_t height, size_t width, float *rgba,
                                                void *stream) {
    if (!height || !width) return uform_ok_k;
    size_t blocks = (height * width + widen_threads - 1) / widen_threads;
    rgba_widen_kernel<<<(unsigned)blocks, widen_threads, 0, (cudaStream_t)stream>>>(
        pixels, pitch, (unsigned)channels, source_height, source_width, height, width, rgba);
    return uform_cuda_launched("rgba_widen");
}

extern "C" uform_status_t uform_cuda_rgba_patches(float const *rgba, size_t rows, size_t columns, float *patches,
                                                  void *stream) {
    if (!rows || !columns) return uform_ok_k;
    rgba_patches_kernel<<<(unsigned)(rows * columns), patch_threads, 0, (cudaStream_t)stream>>>(
        rgba, rows, columns, patches, uform_cuda_planted("rgba_patches"));
    return uform_cuda_launched("rgba_patches");
}
