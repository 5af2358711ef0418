/*  image.c: decoding PNG, JPEG and WebP into RGBA, and the resize into patches (the grid: grid.c)
 *  (include/uform/image.h; the rule and the filter: docs/images.md). */
#include "uform/image.h"

#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h> /* after jpeglib.h, which it needs */
#include <png.h>
#include <webp/decode.h>

#include "core/file.h"
#include "core/status.h"

static char const *uform_name_(char const *name) { return name ? name : "image"; }

static uform_status_t uform_pixels_alloc_(uform_pixels_t *pixels, size_t height, size_t width, char const *name) {
    if (!height || !width) return uform_fail(uform_format_k, "%s: the image has no pixels (%zux%zu)", name, width, height);
    if (height > uform_image_pixels_max_k / width)
        return uform_fail(uform_unsupported_k, "%s: %zux%zu pixels exceed the largest image decoded (%d pixels)", name, width,
                          height, uform_image_pixels_max_k);
    uint8_t *rgba = malloc(height * width * 4);
    if (!rgba) return uform_fail(uform_out_of_memory_k, "%s: cannot hold %zux%zu RGBA pixels", name, width, height);
    *pixels = (uform_pixels_t){rgba, height, width, width * 4};
    return uform_ok_k;
}

void uform_pixels_free(uform_pixels_t *pixels) {
    if (!pixels) return;
    free((void *)pixels->rgba);
    *pixels = (uform_pixels_t){0};
}

/* --- PNG, through libpng's simplified API (palettes, grey, 16 bits and tRNS become RGBA8). */

static uform_status_t uform_png_(void const *data, size_t size, char const *name, uform_pixels_t *pixels) {
    png_image image;
    memset(&image, 0, sizeof(image));
    image.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&image, data, size))
        return uform_fail(uform_format_k, "%s: not a readable PNG: %s", name, image.message);
    image.format = PNG_FORMAT_RGBA;
    uform_status_t status = uform_pixels_alloc_(pixels, image.height, image.width, name);
    if (status != uform_ok_k) {
        png_image_free(&image);
        return status;
    }
    if (!png_image_finish_read(&image, NULL, (void *)pixels->rgba, (png_int_32)pixels->stride, NULL)) {
        uform_pixels_free(pixels);
        return uform_fail(uform_format_k, "%s: corrupt or truncated PNG: %s", name, image.message);
    }
    return uform_ok_k;
}

/* --- JPEG, through libjpeg-turbo (its RGBA output extension); libjpeg reports errors by longjmp. */

typedef struct uform_jpeg_error_t {
    struct jpeg_error_mgr manager;
    jmp_buf escape;
    char message[JMSG_LENGTH_MAX];
    int truncated; /* the data ended inside the image (libjpeg warns and fills the rest with grey) */
} uform_jpeg_error_t;

static void uform_jpeg_exit_(j_common_ptr info) {
    uform_jpeg_error_t *error = (uform_jpeg_error_t *)info->err;
    info->err->format_message(info, error->message);
    longjmp(error->escape, 1);
}

/* Warnings are kept quiet; the one of a truncated file is remembered (a broken file here). */
static void uform_jpeg_warn_(j_common_ptr info, int level) {
    uform_jpeg_error_t *error = (uform_jpeg_error_t *)info->err;
    if (level >= 0) return;
    info->err->num_warnings++;
    if (info->err->msg_code == JWRN_JPEG_EOF && !error->truncated) {
        error->truncated = 1;
        info->err->format_message(info, error->message);
    }
}

static uform_status_t uform_jpeg_(void const *data, size_t size, char const *name, uform_pixels_t *pixels) {
    struct jpeg_decompress_struct info;
    uform_jpeg_error_t error;
    info.err = jpeg_std_error(&error.manager);
    error.manager.error_exit = uform_jpeg_exit_;
    error.manager.emit_message = uform_jpeg_warn_;
    error.truncated = 0;
    uform_pixels_t volatile decoded = {0};
    if (setjmp(error.escape)) {
        jpeg_destroy_decompress(&info);
        uform_pixels_t done = decoded;
        uform_pixels_free(&done);
        return uform_fail(uform_format_k, "%s: corrupt or truncated JPEG: %s", name, error.message);
    }
    jpeg_create_decompress(&info);
    jpeg_mem_src(&info, data, (unsigned long)size);
    jpeg_read_header(&info, TRUE);
    if (info.jpeg_color_space == JCS_CMYK || info.jpeg_color_space == JCS_YCCK) {
        jpeg_destroy_decompress(&info);
        return uform_fail(uform_unsupported_k, "%s: a CMYK JPEG; only greyscale and colour (YCbCr, RGB) JPEGs are read", name);
    }
    info.out_color_space = JCS_EXT_RGBA;
    jpeg_start_decompress(&info);
    uform_pixels_t allocated;
    uform_status_t status = uform_pixels_alloc_(&allocated, info.output_height, info.output_width, name);
    if (status != uform_ok_k) {
        jpeg_destroy_decompress(&info);
        return status;
    }
    decoded = allocated;
    while (info.output_scanline < info.output_height) {
        JSAMPROW row = (JSAMPROW)(allocated.rgba + (size_t)info.output_scanline * allocated.stride);
        jpeg_read_scanlines(&info, &row, 1);
    }
    jpeg_finish_decompress(&info);
    jpeg_destroy_decompress(&info);
    if (error.truncated) {
        uform_pixels_free(&allocated);
        return uform_fail(uform_format_k, "%s: corrupt or truncated JPEG: %s", name, error.message);
    }
    *pixels = allocated;
    return uform_ok_k;
}

/* --- WebP, through libwebp (still images; an animation is refused by name). */

static uform_status_t uform_webp_(void const *data, size_t size, char const *name, uform_pixels_t *pixels) {
    WebPBitstreamFeatures features;
    VP8StatusCode code = WebPGetFeatures(data, size, &features);
    if (code != VP8_STATUS_OK)
        return uform_fail(uform_format_k, "%s: not a readable WebP (libwebp status %d)", name, (int)code);
    if (features.has_animation) return uform_fail(uform_unsupported_k, "%s: an animated WebP; only still images are read", name);
    UFORM_TRY(uform_pixels_alloc_(pixels, (size_t)features.height, (size_t)features.width, name));
    if (!WebPDecodeRGBAInto(data, size, (uint8_t *)pixels->rgba, pixels->stride * pixels->height, (int)pixels->stride)) {
        uform_pixels_free(pixels);
        return uform_fail(uform_format_k, "%s: corrupt or truncated WebP", name);
    }
    return uform_ok_k;
}

uform_status_t uform_image_decode(void const *data, size_t size, char const *name, uform_pixels_t *pixels) {
    name = uform_name_(name);
    if (!data || !pixels) return uform_fail(uform_invalid_argument_k, "uform_image_decode: NULL argument (%s)", name);
    *pixels = (uform_pixels_t){0};
    unsigned char const *bytes = data;
    if (size >= 8 && !memcmp(bytes, "\x89PNG\r\n\x1a\n", 8)) return uform_png_(data, size, name, pixels);
    if (size >= 3 && bytes[0] == 0xff && bytes[1] == 0xd8 && bytes[2] == 0xff) return uform_jpeg_(data, size, name, pixels);
    if (size >= 12 && !memcmp(bytes, "RIFF", 4) && !memcmp(bytes + 8, "WEBP", 4)) return uform_webp_(data, size, name, pixels);
    if (!size) return uform_fail(uform_format_k, "%s: empty: no image", name);
    return uform_fail(uform_unsupported_k, "%s: not a PNG, JPEG or WebP image (its first bytes: %02x %02x %02x %02x)", name,
                      bytes[0], size > 1 ? bytes[1] : 0, size > 2 ? bytes[2] : 0, size > 3 ? bytes[3] : 0);
}

uform_status_t uform_image_read(char const *path, uform_pixels_t *pixels) {
    if (!path || !pixels) return uform_fail(uform_invalid_argument_k, "uform_image_read: NULL argument");
    unsigned char *data;
    size_t size;
    UFORM_TRY(uform_file_read(path, &data, &size));
    uform_status_t status = uform_image_decode(data, size, path, pixels);
    free(data);
    return status;
}

/* --- The resize (the grid: grid.c). */

/* One output sample along an axis: `count` input taps from `first` with their weights. */
typedef struct uform_taps_t {
    size_t first, count;
    float const *weights;
} uform_taps_t;

/* The taps of every output index of an axis resized from `in` to `out` samples: the area average
 * of the input interval it covers when shrinking (or equal), bilinear with half-pixel centres
 * when growing. `weights` holds out * (in / out + 2) floats. */
static void uform_axis_taps_(size_t in, size_t out, uform_taps_t *taps, float *weights) {
    double scale = (double)in / (double)out, centre = 0.5;
#if defined(UFORM_PLANT_RESIZE_SHIFT)
    centre = 0.0; /* planted: samples taken half an output pixel early */
#endif
    size_t most = (size_t)ceil(scale) + 2;
    for (size_t o = 0; o < out; ++o) {
        float *w = weights + o * most;
        if (scale >= 1.0) {
            double low = (o + centre - 0.5) * scale, high = (o + centre + 0.5) * scale;
            if (low < 0) low = 0;
            size_t first = (size_t)floor(low), last = (size_t)ceil(high);
            if (last > in) last = in;
            for (size_t i = first; i < last; ++i) {
                double covered = fmin(high, (double)(i + 1)) - fmax(low, (double)i);
                w[i - first] = (float)(covered / scale);
            }
            taps[o] = (uform_taps_t){first, last - first, w};
        } else {
            double x = (o + centre) * scale - 0.5;
            if (x <= 0) {
                w[0] = 1.0f;
                taps[o] = (uform_taps_t){0, 1, w};
                continue;
            }
            size_t i = (size_t)floor(x);
            if (i + 1 >= in) {
                w[0] = 1.0f;
                taps[o] = (uform_taps_t){in - 1, 1, w};
                continue;
            }
            double fraction = x - (double)i;
            w[0] = (float)(1.0 - fraction), w[1] = (float)fraction;
            taps[o] = (uform_taps_t){i, 2, w};
        }
    }
}

uform_status_t uform_image_patches(uform_pixels_t const *pixels, size_t max_patches, float *patches, size_t capacity,
                                   size_t *rows, size_t *columns) {
    if (!pixels || !pixels->rgba || !patches || !rows || !columns)
        return uform_fail(uform_invalid_argument_k, "uform_image_patches: NULL argument");
    if (!pixels->height || !pixels->width || pixels->stride < pixels->width * 4)
        return uform_fail(uform_invalid_argument_k, "uform_image_patches: %zux%zu pixels with a stride of %zu bytes", pixels->width,
                          pixels->height, pixels->stride);
    size_t r, c;
    uform_image_grid(pixels->height, pixels->width, max_patches, &r, &c);
    if (r * c > capacity)
        return uform_fail(uform_shape_k, "uform_image_patches: the image fills %zux%zu patches, the buffer holds %zu", r, c, capacity);
    size_t side = uform_patch_side_k, out_h = r * side, out_w = c * side, in_h = pixels->height, in_w = pixels->width;
    size_t most_h = (size_t)ceil((double)in_h / out_h) + 2, most_w = (size_t)ceil((double)in_w / out_w) + 2;
    uform_taps_t *taps_h = malloc(out_h * sizeof(*taps_h)), *taps_w = malloc(out_w * sizeof(*taps_w));
    float *weights_h = malloc(out_h * most_h * sizeof(float)), *weights_w = malloc(out_w * most_w * sizeof(float));
    float *across = malloc(in_h * out_w * 4 * sizeof(float)); /* each input row resized across */
    uform_status_t status = uform_ok_k;
    if (!taps_h || !taps_w || !weights_h || !weights_w || !across)
        status = uform_fail(uform_out_of_memory_k, "uform_image_patches: cannot resize %zux%zu pixels", in_w, in_h);
    if (status == uform_ok_k) {
        uform_axis_taps_(in_h, out_h, taps_h, weights_h);
        uform_axis_taps_(in_w, out_w, taps_w, weights_w);
        for (size_t y = 0; y < in_h; ++y) {
            uint8_t const *line = pixels->rgba + y * pixels->stride;
            for (size_t x = 0; x < out_w; ++x) {
                float sum[4] = {0, 0, 0, 0};
                for (size_t t = 0; t < taps_w[x].count; ++t)
                    for (size_t channel = 0; channel < 4; ++channel)
                        sum[channel] += taps_w[x].weights[t] * line[(taps_w[x].first + t) * 4 + channel];
                memcpy(across + (y * out_w + x) * 4, sum, sizeof(sum));
            }
        }
        for (size_t y = 0; y < out_h; ++y)
            for (size_t x = 0; x < out_w; ++x) {
                float *target = patches + ((y / side) * c + x / side) * uform_patch_length_k + ((y % side) * side + x % side) * 4;
                float sum[4] = {0, 0, 0, 0};
                for (size_t t = 0; t < taps_h[y].count; ++t)
                    for (size_t channel = 0; channel < 4; ++channel)
                        sum[channel] += taps_h[y].weights[t] * across[((taps_h[y].first + t) * out_w + x) * 4 + channel];
                for (size_t channel = 0; channel < 4; ++channel) target[channel] = sum[channel] / 255.0f;
            }
        *rows = r, *columns = c;
    }
    free(taps_h), free(taps_w), free(weights_h), free(weights_w), free(across);
    return status;
}
