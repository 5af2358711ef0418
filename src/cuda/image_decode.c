/*  image_decode.c: JPEG bytes (or host pixels) into patches on the GPU through nvJPEG and NPP
 *  (image_decode.h; the filter and the bound it is checked to: docs/images.md). */
#include "cuda/image_decode.h"

#include <cuda_runtime_api.h>
#include <nppcore.h>
#include <nppi_geometry_transforms.h>
#include <nvjpeg.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/check.h"
#include "media/jpeg_markers.h"

#define TRY(call)                                                                                                     \
    do {                                                                                                              \
        uform_status_t status_ = (call);                                                                              \
        if (status_ != uform_ok_k) return status_;                                                                    \
    } while (0)

struct uform_cuda_decoder_t {
    nvjpegHandle_t handle;
    nvjpegJpegState_t state;
    cudaStream_t stream;
    NppStreamContext npp;
    unsigned char *scratch; /* the decoded pixels, then the image in Float32 at each step of the resize */
    size_t scratch_bytes;
};

static char const *uform_nvjpeg_name_(nvjpegStatus_t status) {
    switch (status) {
    case NVJPEG_STATUS_NOT_INITIALIZED: return "NVJPEG_STATUS_NOT_INITIALIZED";
    case NVJPEG_STATUS_INVALID_PARAMETER: return "NVJPEG_STATUS_INVALID_PARAMETER";
    case NVJPEG_STATUS_BAD_JPEG: return "NVJPEG_STATUS_BAD_JPEG";
    case NVJPEG_STATUS_JPEG_NOT_SUPPORTED: return "NVJPEG_STATUS_JPEG_NOT_SUPPORTED";
    case NVJPEG_STATUS_ALLOCATOR_FAILURE: return "NVJPEG_STATUS_ALLOCATOR_FAILURE";
    case NVJPEG_STATUS_EXECUTION_FAILED: return "NVJPEG_STATUS_EXECUTION_FAILED";
    case NVJPEG_STATUS_ARCH_MISMATCH: return "NVJPEG_STATUS_ARCH_MISMATCH";
    case NVJPEG_STATUS_INTERNAL_ERROR: return "NVJPEG_STATUS_INTERNAL_ERROR";
    case NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED: return "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED";
    case NVJPEG_STATUS_INCOMPLETE_BITSTREAM: return "NVJPEG_STATUS_INCOMPLETE_BITSTREAM";
    default: return "an unknown nvJPEG status";
    }
}

/* nvJPEG's failures in the file's own terms: the data's fault (format), the layout's (unsupported), else the device's. */
static uform_status_t uform_nvjpeg_(nvjpegStatus_t status, char const *name, char const *call) {
    if (status == NVJPEG_STATUS_SUCCESS) return uform_ok_k;
    if (status == NVJPEG_STATUS_BAD_JPEG || status == NVJPEG_STATUS_INCOMPLETE_BITSTREAM)
        return uform_cuda_note(uform_format_k, "%s: corrupt or truncated JPEG: %s failed: %s", name, call, uform_nvjpeg_name_(status));
    if (status == NVJPEG_STATUS_JPEG_NOT_SUPPORTED || status == NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED)
        return uform_cuda_note(uform_unsupported_k, "%s: a JPEG nvJPEG does not decode: %s failed: %s", name, call,
                               uform_nvjpeg_name_(status));
    return uform_cuda_note(status == NVJPEG_STATUS_ALLOCATOR_FAILURE ? uform_out_of_memory_k : uform_device_k, "%s: %s failed: %s",
                           name, call, uform_nvjpeg_name_(status));
}

static uform_status_t uform_npp_(NppStatus status, char const *name, char const *call) {
    if (status >= NPP_SUCCESS) return uform_ok_k; /* positive: a warning, the result still written */
    return uform_cuda_note(uform_device_k, "%s: %s failed: NPP status %d", name, call, (int)status);
}

static uform_status_t uform_npp_context_(cudaStream_t stream, NppStreamContext *npp) {
    memset(npp, 0, sizeof(*npp)); /* the workspace handle (or the reserved field of older NPPs) stays 0 */
    npp->hStream = stream;
    int device, shared;
    char const *where = "decoder_create";
    TRY(uform_cuda_check(cudaGetDevice(&device), where, "cudaGetDevice"));
    npp->nCudaDeviceId = device;
    struct {
        int *value;
        enum cudaDeviceAttr attribute;
    } const wanted[] = {
        {&npp->nMultiProcessorCount, cudaDevAttrMultiProcessorCount},
        {&npp->nMaxThreadsPerMultiProcessor, cudaDevAttrMaxThreadsPerMultiProcessor},
        {&npp->nMaxThreadsPerBlock, cudaDevAttrMaxThreadsPerBlock},
        {&shared, cudaDevAttrMaxSharedMemoryPerBlock},
        {&npp->nCudaDevAttrComputeCapabilityMajor, cudaDevAttrComputeCapabilityMajor},
        {&npp->nCudaDevAttrComputeCapabilityMinor, cudaDevAttrComputeCapabilityMinor},
    };
    for (size_t i = 0; i < sizeof(wanted) / sizeof(wanted[0]); ++i)
        TRY(uform_cuda_check(cudaDeviceGetAttribute(wanted[i].value, wanted[i].attribute, device), where,
                                   "cudaDeviceGetAttribute"));
    npp->nSharedMemPerBlock = (size_t)shared;
    return uform_cuda_check(cudaStreamGetFlags(stream, &npp->nStreamFlags), where, "cudaStreamGetFlags");
}

uform_status_t uform_cuda_decoder_create(void *stream, uform_cuda_decoder_t **decoder) {
    if (!decoder) return uform_cuda_note(uform_invalid_argument_k, "decoder_create: NULL argument");
    *decoder = NULL;
    uform_cuda_decoder_t *made = calloc(1, sizeof(*made));
    if (!made) return uform_cuda_note(uform_out_of_memory_k, "decoder_create: cannot hold the decoder");
    made->stream = (cudaStream_t)stream;
    uform_status_t status = uform_npp_context_(made->stream, &made->npp);
    if (status == uform_ok_k) status = uform_nvjpeg_(nvjpegCreateSimple(&made->handle), "decoder_create", "nvjpegCreateSimple");
    if (status == uform_ok_k)
        status = uform_nvjpeg_(nvjpegJpegStateCreate(made->handle, &made->state), "decoder_create", "nvjpegJpegStateCreate");
    if (status != uform_ok_k) {
        uform_cuda_decoder_free(made);
        return status;
    }
    *decoder = made;
    return uform_ok_k;
}

void uform_cuda_decoder_free(uform_cuda_decoder_t *decoder) {
    if (!decoder) return;
    if (decoder->state) nvjpegJpegStateDestroy(decoder->state);
    if (decoder->handle) nvjpegDestroy(decoder->handle);
    cudaFree(decoder->scratch);
    free(decoder);
}

/* Where each step's image lies in the scratch buffer: pieces 256 bytes apart. */
typedef struct uform_scratch_t {
    unsigned char *source;
    float *rgba, *across, *resized;
} uform_scratch_t;

static size_t uform_piece_(size_t bytes) { return (bytes + 255) / 256 * 256; }

/* The scratch for a source of `source_bytes` widened to height x width, resized to out_height x out_width. */
static uform_status_t uform_scratch_(uform_cuda_decoder_t *decoder, size_t source_bytes, size_t height, size_t width,
                                     size_t out_height, size_t out_width, char const *name, uform_scratch_t *scratch) {
    size_t pixel = 4 * sizeof(float), source = uform_piece_(source_bytes), rgba = uform_piece_(height * width * pixel);
    size_t across = uform_piece_(height * out_width * pixel), resized = uform_piece_(out_height * out_width * pixel);
    size_t bytes = source + rgba + across + resized;
    if (bytes > decoder->scratch_bytes) {
        cudaFree(decoder->scratch); /* waits for the work still reading it */
        decoder->scratch = NULL, decoder->scratch_bytes = 0;
        cudaError_t code = cudaMalloc((void **)&decoder->scratch, bytes);
        if (code != cudaSuccess) {
            cudaGetLastError(); /* not sticky: the next launch's check must not report it */
            return uform_cuda_note(code == cudaErrorMemoryAllocation ? uform_out_of_memory_k : uform_device_k,
                                   "%s: cannot hold %zux%zu pixels on the device for the resize: cudaMalloc of %zu bytes failed: %s", name,
                                   width, height, bytes, cudaGetErrorName(code));
        }
        decoder->scratch_bytes = bytes;
    }
    scratch->source = decoder->scratch;
    scratch->rgba = (float *)(decoder->scratch + source);
    scratch->across = (float *)(decoder->scratch + source + rgba);
    scratch->resized = (float *)(decoder->scratch + source + rgba + across);
    return uform_ok_k;
}

/* Where both axes shrink, one 2D NPP pass, NPPI_INTER_SUPER (the area average is separable, so it is
 * the filter of the host's two passes). Else one axis at a time, across then down, as the host resizes,
 * each by our kernel: NPP's supersampling takes only images shrinking in both axes, and its bilinear
 * pass that keeps one axis was refused too (NPP_INTERPOLATION_ERROR on the H200). An axis of the same
 * size is left as it is. Returns the image of out_height x out_width (Float32 RGBA, dense). */
static uform_status_t uform_resize_(uform_cuda_decoder_t *decoder, uform_scratch_t const *scratch, size_t height, size_t width,
                                    size_t out_height, size_t out_width, char const *name, float const **result) {
    float const *image = scratch->rgba;
    if (out_width < width && out_height < height) {
        int pixel = 4 * (int)sizeof(float);
        NppiSize from_size = {(int)width, (int)height}, to_size = {(int)out_width, (int)out_height};
        NppiRect from_roi = {0, 0, from_size.width, from_size.height}, to_roi = {0, 0, to_size.width, to_size.height};
        TRY(uform_npp_(nppiResize_32f_C4R_Ctx(image, from_size.width * pixel, from_size, from_roi, scratch->resized,
                                              to_size.width * pixel, to_size, to_roi, NPPI_INTER_SUPER, decoder->npp),
                       name, "nppiResize_32f_C4R_Ctx"));
        *result = scratch->resized;
        return uform_ok_k;
    }
    if (out_width != width) {
        TRY(uform_cuda_resize_axis(image, width, height, scratch->across, out_width, height, decoder->stream));
        image = scratch->across;
    }
    if (out_height != height) {
        TRY(uform_cuda_resize_axis(image, out_width, height, scratch->resized, out_width, out_height, decoder->stream));
        image = scratch->resized;
    }
    *result = image;
    return uform_ok_k;
}

/* The grid of a source of height x width; the working size doubles a side of one pixel (NPP resizes
 * from two or more, and bilinear from two equal pixels is the one pixel's value). */
static uform_status_t uform_plan_(size_t height, size_t width, size_t max_patches, size_t capacity, char const *name, size_t *rows,
                                  size_t *columns, size_t *work_height, size_t *work_width) {
    uform_image_grid(height, width, max_patches, rows, columns);
    *work_height = height > 1 ? height : 2, *work_width = width > 1 ? width : 2;
    if (*rows * *columns > capacity)
        return uform_cuda_note(uform_shape_k, "%s: the image fills %zux%zu patches, the buffer holds %zu", name, *rows, *columns, capacity);
    return uform_ok_k;
}

/* From the 8-bit source in scratch to the patches: widen, resize, lay out. */
static uform_status_t uform_finish_(uform_cuda_decoder_t *decoder, uform_scratch_t const *scratch, size_t channels, size_t pitch,
                                    size_t height, size_t width, size_t work_height, size_t work_width, size_t rows, size_t columns,
                                    char const *name, float *patches) {
    size_t side = uform_patch_side_k;
    TRY(uform_cuda_rgba_widen(scratch->source, pitch, channels, height, width, work_height, work_width, scratch->rgba,
                                    decoder->stream));
    float const *resized;
    TRY(uform_resize_(decoder, scratch, work_height, work_width, rows * side, columns * side, name, &resized));
    return uform_cuda_rgba_patches(resized, rows, columns, patches, decoder->stream);
}

/* Whether the data after the last start-of-scan holds an end-of-image marker (entropy-coded data
 * cannot: its 0xff bytes are stuffed), as a complete JPEG's does; nvJPEG may decode a cut one. */
static int uform_jpeg_complete_(unsigned char const *bytes, size_t size) {
    size_t scan = 0;
    for (size_t i = 0; i + 1 < size; ++i)
        if (bytes[i] == 0xff && bytes[i + 1] == 0xda) scan = i + 2;
    if (!scan) return 0;
    for (size_t i = scan; i + 1 < size; ++i)
        if (bytes[i] == 0xff && bytes[i + 1] == 0xd9) return 1;
    return 0;
}

uform_status_t uform_cuda_decode_patches(uform_cuda_decoder_t *decoder, void const *data, size_t size, char const *name,
                                         size_t max_patches, float *patches, size_t capacity, size_t *rows, size_t *columns) {
    name = name ? name : "image";
    if (!decoder || !data || !patches || !rows || !columns)
        return uform_cuda_note(uform_invalid_argument_k, "decode_patches: NULL argument (%s)", name);
    unsigned char const *bytes = data;
    if (size < 3 || bytes[0] != 0xff || bytes[1] != 0xd8 || bytes[2] != 0xff)
        return uform_cuda_note(uform_unsupported_k, "%s: not a JPEG (the GPU decodes JPEG alone)", name);
    if (!uform_jpeg_complete_(bytes, size))
        return uform_cuda_note(uform_format_k, "%s: corrupt or truncated JPEG: the data ends before its end-of-image marker", name);
    int components = 0, widths[NVJPEG_MAX_COMPONENT] = {0}, heights[NVJPEG_MAX_COMPONENT] = {0};
    nvjpegChromaSubsampling_t subsampling;
    TRY(uform_nvjpeg_(nvjpegGetImageInfo(decoder->handle, bytes, size, &components, &subsampling, widths, heights), name,
                            "nvjpegGetImageInfo"));
    if (components == 4)
        return uform_cuda_note(uform_unsupported_k, "%s: a CMYK JPEG; only greyscale and colour (YCbCr, RGB) JPEGs are read", name);
    if (components == 3 && uform_jpeg_stores_rgb(bytes, size))
        return uform_cuda_note(uform_unsupported_k, "%s: a JPEG of untransformed RGB components, which nvJPEG may read as YCbCr", name);
    if ((components != 1 && components != 3) || subsampling == NVJPEG_CSS_UNKNOWN)
        return uform_cuda_note(uform_unsupported_k, "%s: a JPEG of %d components in a layout nvJPEG does not name", name, components);
    size_t height = (size_t)heights[0], width = (size_t)widths[0];
    if (!height || !width) return uform_cuda_note(uform_format_k, "%s: the image has no pixels (%zux%zu)", name, width, height);
    if (height > uform_image_pixels_max_k / width)
        return uform_cuda_note(uform_unsupported_k, "%s: %zux%zu pixels exceed the largest image decoded (%d pixels)", name, width, height,
                               uform_image_pixels_max_k);
    size_t work_height, work_width, side = uform_patch_side_k;
    TRY(uform_plan_(height, width, max_patches, capacity, name, rows, columns, &work_height, &work_width));
    uform_scratch_t scratch;
    TRY(uform_scratch_(decoder, height * width * 3, work_height, work_width, *rows * side, *columns * side, name, &scratch));
    nvjpegImage_t target;
    memset(&target, 0, sizeof(target));
    target.channel[0] = scratch.source, target.pitch[0] = width * 3;
    TRY(uform_nvjpeg_(nvjpegDecode(decoder->handle, decoder->state, bytes, size, NVJPEG_OUTPUT_RGBI, &target, decoder->stream),
                            name, "nvjpegDecode"));
    return uform_finish_(decoder, &scratch, 3, width * 3, height, width, work_height, work_width, *rows, *columns, name, patches);
}

uform_status_t uform_cuda_pixels_patches(uform_cuda_decoder_t *decoder, uform_pixels_t const *pixels, size_t max_patches,
                                         float *patches, size_t capacity, size_t *rows, size_t *columns) {
    char const *name = "pixels_patches";
    if (!decoder || !pixels || !pixels->rgba || !patches || !rows || !columns)
        return uform_cuda_note(uform_invalid_argument_k, "%s: NULL argument", name);
    size_t height = pixels->height, width = pixels->width;
    if (!height || !width || pixels->stride < width * 4)
        return uform_cuda_note(uform_invalid_argument_k, "%s: %zux%zu pixels with a stride of %zu bytes", name, width, height,
                               pixels->stride);
    size_t work_height, work_width, side = uform_patch_side_k;
    TRY(uform_plan_(height, width, max_patches, capacity, name, rows, columns, &work_height, &work_width));
    uform_scratch_t scratch;
    TRY(uform_scratch_(decoder, height * width * 4, work_height, work_width, *rows * side, *columns * side, name, &scratch));
    TRY(uform_cuda_check(cudaMemcpy2DAsync(scratch.source, width * 4, pixels->rgba, pixels->stride, width * 4, height,
                                                 cudaMemcpyHostToDevice, decoder->stream),
                               name, "cudaMemcpy2DAsync"));
    return uform_finish_(decoder, &scratch, 4, width * 4, height, width, work_height, work_width, *rows, *columns, name, patches);
}
