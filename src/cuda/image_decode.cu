/*  image_decode.cu: the kernels around nvJPEG and NPP's resize (image_decode.h): 8-bit pixels
 *  widened to RGBA in Float32, the one-axis resize passes NPP refuses (the filter of
 *  docs/images.md, its taps as the host's src/media/image.c computes them), and the resized image
 *  divided by 255 and cut into patches. Planted
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

/* One output pixel of a pass along one axis (across: the width changes, else the height), in
 * Float32 RGBA: the area average of the input interval it covers when the axis shrinks, bilinear
 * with half-pixel centres and clamped edges when it grows; taps in Float64, weights and sums in
 * Float32, in the host's order. */
__global__ void resize_axis_kernel(float const *from, size_t in_width, size_t in_height, float *to, size_t out_width,
                                   size_t out_height, int across) {
    size_t pixel = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (pixel >= out_width * out_height) return;
    size_t y = pixel / out_width, x = pixel % out_width;
    size_t in = across ? in_width : in_height, out = across ? out_width : out_height, o = across ? x : y;
    size_t stride = across ? 1 : in_width; /* between taps, in pixels */
    float4 const *base = reinterpret_cast<float4 const *>(from) + (across ? y * in_width : x);
    double scale = (double)in / (double)out;
    float4 sum = make_float4(0, 0, 0, 0);
    if (scale >= 1.0) {
        double low = ((double)o) * scale, high = ((double)o + 1.0) * scale;
        size_t first = (size_t)floor(low), last = (size_t)ceil(high);
        if (last > in) last = in;
        for (size_t i = first; i < last; ++i) {
            float w = (float)((fmin(high, (double)(i + 1)) - fmax(low, (double)i)) / scale);
            float4 v = base[i * stride];
            sum.x += w * v.x, sum.y += w * v.y, sum.z += w * v.z, sum.w += w * v.w;
        }
    } else {
        double position = ((double)o + 0.5) * scale - 0.5;
        size_t i = position <= 0 ? 0 : (size_t)floor(position);
        if (position <= 0 || i + 1 >= in) {
            sum = base[(position <= 0 ? 0 : in - 1) * stride];
        } else {
            double fraction = position - (double)i;
            float w0 = (float)(1.0 - fraction), w1 = (float)fraction;
            float4 a = base[i * stride], b = base[(i + 1) * stride];
            sum.x += w0 * a.x, sum.y += w0 * a.y, sum.z += w0 * a.z, sum.w += w0 * a.w;
            sum.x += w1 * b.x, sum.y += w1 * b.y, sum.z += w1 * b.z, sum.w += w1 * b.w;
        }
    }
    reinterpret_cast<float4 *>(to)[pixel] = sum;
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

extern "C" uform_status_t uform_cuda_resize_axis(float const *from, size_t from_width, size_t from_height, float *to,
                                                 size_t to_width, size_t to_height, void *stream) {
    if (!to_width || !to_height) return uform_ok_k;
    size_t blocks = (to_width * to_height + widen_threads - 1) / widen_threads;
    resize_axis_kernel<<<(unsigned)blocks, widen_threads, 0, (cudaStream_t)stream>>>(from, from_width, from_height, to, to_width,
                                                                                   to_height, to_width != from_width);
    return uform_cuda_launched("resize_axis");
}
