/*  image_decode.c: JPEG decoding on the GPU (src/cuda/image_decode.h, nvJPEG and NPP) against the host
 *  path (uform_image_decode and uform_image_patches, libjpeg-turbo and the Float32 resize) over JPEGs
 *  it writes with libjpeg: smooth and edgy content, sizes that shrink, grow, mix or keep, odd sizes,
 *  a side of one pixel, greyscale, 4:2:0, 4:2:2 and 4:4:4. Three checks, bounds in docs/images.md
 *  ("GPU decoding"): the resize alone (host pixels up, NPP's resize against the host's), the whole
 *  path against the host's with chroma replicated as nvJPEG does (the host's default triangle filter
 *  measured beside it), and planted controls (red and
 *  blue swapped; samples half a pixel late) that the whole-path check must reject. A truncated and a
 *  CMYK JPEG must be refused by name. Then host and GPU images/s on a batch of 640x480 JPEGs, as a
 *  table and JSON. Exits 77 (skipped) without a CUDA device.
 *
 *      uform_image_decode_test [--json FILE] [--batch 256]
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jpeglib.h>

#include "cuda_ok.h"
#include "cuda/image_decode.h"
#include "cuda/plant.h"
#include "uform/image.h"
#include "uform/types.h"

/* The bounds (docs/images.md, "GPU decoding"), in units of a patch value (a level is 1/255). */
#define RESIZE_BOUND (1.0 / (1 << 11)) /* NPP's resize against the host's, both Float32 */
#define DECODE_MAX_FULL (4.0 / 255)    /* the whole path, any one value, against the host with nvJPEG's chroma filter */
#define DECODE_MEAN (1.0 / 255)        /* the whole path, the mean over an image */

static int passed_, failed_;
static void check_(int ok, char const *what) {
    if (ok) passed_++;
    else failed_++, fprintf(stderr, "check failed: %s\n", what);
}

typedef enum { content_smooth_k, content_edgy_k, content_photo_k } content_t;
typedef enum { sampling_444_k, sampling_422_k, sampling_420_k } sampling_t;

typedef struct case_t {
    char const *name;
    size_t width, height;
    int components; /* 1 grey, 3 colour, 4 CMYK */
    sampling_t sampling;
    content_t content;
} case_t;

/* Deterministic content: smooth gradients and waves, or hard edges (squares, stripes, a disc), or both. */
static void paint_(case_t const *c, unsigned seed, uint8_t *pixels) {
    size_t channels = (size_t)c->components;
    for (size_t y = 0; y < c->height; ++y)
        for (size_t x = 0; x < c->width; ++x)
            for (size_t k = 0; k < channels; ++k) {
                double u = (double)x / (double)c->width, v = (double)y / (double)c->height, value;
                double smooth = 127.5 + 100 * sin(6.3 * (u * (1.0 + (double)k) + 0.7 * v) + seed) * cos(4.1 * v - 0.3 * (double)k);
                int square = ((x / 24 + y / 24 + k + seed) & 1), stripe = (x / (3 + k)) & 1;
                double dx = u - 0.5, dy = v - 0.5;
                double edgy = (dx * dx + dy * dy < 0.09 ? 230.0 : 25.0) * 0.5 + (square ? 120.0 : 0.0) * 0.5 + (y % 50 < 8 ? stripe * 127.0 : 0);
                if (c->content == content_smooth_k) value = smooth;
                else if (c->content == content_edgy_k) value = edgy;
                else value = (x < c->width / 2) ? smooth : 0.5 * smooth + 0.5 * edgy;
                pixels[(y * c->width + x) * channels + k] = (uint8_t)(value < 0 ? 0 : value > 255 ? 255 : value + 0.5);
            }
}

/* The JPEG of a case, quality 90 (written by libjpeg; `*size` bytes, released with free). */
static unsigned char *jpeg_(case_t const *c, unsigned seed, unsigned long *size) {
    uint8_t *pixels = malloc(c->width * c->height * (size_t)c->components);
    if (!pixels) return NULL;
    paint_(c, seed, pixels);
    struct jpeg_compress_struct info;
    struct jpeg_error_mgr error;
    info.err = jpeg_std_error(&error);
    jpeg_create_compress(&info);
    unsigned char *data = NULL;
    *size = 0;
    jpeg_mem_dest(&info, &data, size);
    info.image_width = (JDIMENSION)c->width, info.image_height = (JDIMENSION)c->height;
    info.input_components = c->components;
    info.in_color_space = c->components == 1 ? JCS_GRAYSCALE : c->components == 3 ? JCS_RGB : JCS_CMYK;
    jpeg_set_defaults(&info);
    jpeg_set_quality(&info, 90, TRUE);
    if (c->components == 3) {
        info.comp_info[0].h_samp_factor = c->sampling == sampling_444_k ? 1 : 2;
        info.comp_info[0].v_samp_factor = c->sampling == sampling_420_k ? 2 : 1;
    }
    jpeg_start_compress(&info, TRUE);
    for (size_t y = 0; y < c->height; ++y) {
        JSAMPROW row = pixels + y * c->width * (size_t)c->components;
        jpeg_write_scanlines(&info, &row, 1);
    }
    jpeg_finish_compress(&info);
    jpeg_destroy_compress(&info);
    free(pixels);
    return data;
}

static case_t const cases_[] = {
    {"photo_1200x900_420", 1200, 900, 3, sampling_420_k, content_photo_k},   /* shrinks both ways */
    {"edgy_1200x900_444", 1200, 900, 3, sampling_444_k, content_edgy_k},
    {"smooth_640x480_420", 640, 480, 3, sampling_420_k, content_smooth_k},
    {"edgy_640x480_422", 640, 480, 3, sampling_422_k, content_edgy_k},
    {"grey_640x480", 640, 480, 1, sampling_444_k, content_edgy_k},
    {"odd_1001x667_420", 1001, 667, 3, sampling_420_k, content_photo_k},
    {"keep_256x160_420", 256, 160, 3, sampling_420_k, content_photo_k},      /* its own grid: the decoders alone */
    {"keep_256x160_444", 256, 160, 3, sampling_444_k, content_edgy_k},
    {"grow_90x90_420", 90, 90, 3, sampling_420_k, content_photo_k},          /* grows both ways */
    {"mixed_100x72_444", 100, 72, 3, sampling_444_k, content_edgy_k},        /* shrinks across, grows down */
    {"odd_333x217_420", 333, 217, 3, sampling_420_k, content_edgy_k},
    {"grey_28x28", 28, 28, 1, sampling_444_k, content_smooth_k},
    {"line_1x300_grey", 1, 300, 1, sampling_444_k, content_smooth_k},        /* a side of one pixel */
    {"line_300x1_420", 300, 1, 3, sampling_420_k, content_edgy_k},
};
enum { cases_count_k = sizeof(cases_) / sizeof(cases_[0]) };

typedef struct agreement_t {
    double largest, mean;
} agreement_t;

static agreement_t agreement_(float const *a, float const *b, size_t count) {
    agreement_t result = {0, 0};
    for (size_t i = 0; i < count; ++i) {
        double difference = fabs((double)a[i] - (double)b[i]);
        result.largest = difference > result.largest ? difference : result.largest;
        result.mean += difference;
    }
    result.mean /= (double)(count ? count : 1);
    return result;
}

typedef struct prepared_t {
    unsigned char *jpeg;
    unsigned long size;
    float *host;         /* the host path's patches */
    float *plain;        /* the same with libjpeg-turbo's chroma replicated, not triangle-filtered */
    uform_pixels_t pixels; /* libjpeg-turbo's decode */
    size_t rows, columns;
} prepared_t;

static float *device_patches_, *copied_;
static uform_cuda_decoder_t *decoder_;

/* The GPU path on case `i`'s JPEG: its patches copied back into copied_; 0 on failure. */
static int gpu_(prepared_t const *p, char const *name) {
    size_t rows, columns;
    if (uform_cuda_decode_patches(decoder_, p->jpeg, p->size, name, 0, device_patches_, uform_image_patches_k, &rows, &columns) !=
        uform_ok_k) {
        fprintf(stderr, "%s: %s\n", name, uform_cuda_noted());
        return 0;
    }
    CUDA_OK(cudaMemcpy(copied_, device_patches_, rows * columns * uform_patch_length_k * sizeof(float), cudaMemcpyDeviceToHost));
    return rows == p->rows && columns == p->columns;
}

/* The whole-path check over every case: 1 when every case keeps within both bounds against the host
 * path with chroma replicated (nvJPEG's upsampling); the host's default (libjpeg-turbo's triangle
 * filter) beside it, measured, not bounded. Prints a table. */
static int whole_path_(prepared_t const *prepared, char const *label, FILE *json) {
    int all = 1;
    printf("\n%s: the GPU path against the host's with chroma replicated (bounds: max %.0f/255, mean %.0f/255), and against "
           "the host's default (triangle-filtered chroma), measured\n", label, DECODE_MAX_FULL * 255, DECODE_MEAN * 255);
    printf("| case | grid | max |diff| | mean |diff| | max (levels) | within | default host: max (levels) | mean (levels) |\n"
           "|---|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < cases_count_k; ++i) {
        prepared_t const *p = &prepared[i];
        int ok = gpu_(p, cases_[i].name);
        agreement_t a = {INFINITY, INFINITY}, d = {INFINITY, INFINITY};
        size_t count = p->rows * p->columns * uform_patch_length_k;
        if (ok) a = agreement_(p->plain, copied_, count), d = agreement_(p->host, copied_, count);
        int within = ok && a.largest <= DECODE_MAX_FULL && a.mean <= DECODE_MEAN;
        all &= within;
        printf("| %s | %zux%zu | %.5f | %.6f | %.2f | %s | %.2f | %.3f |\n", cases_[i].name, p->rows, p->columns, a.largest, a.mean,
               a.largest * 255, within ? "yes" : "NO", d.largest * 255, d.mean * 255);
        if (json)
            fprintf(json, "%s{\"case\": \"%s\", \"rows\": %zu, \"columns\": %zu, \"max\": %.9g, \"mean\": %.9g, "
                          "\"default_host_max\": %.9g, \"default_host_mean\": %.9g}", i ? ", " : "",
                    cases_[i].name, p->rows, p->columns, a.largest, a.mean, d.largest, d.mean);
    }
    return all;
}

/* libjpeg-turbo's decode with chroma replicated (do_fancy_upsampling off) into RGBA, then the host's
 * resize into `patches`: the host path with the GPU decoder's chroma filter. 1 on success. */
static int plain_patches_(unsigned char const *jpeg, unsigned long size, float *patches, size_t *rows, size_t *columns) {
    struct jpeg_decompress_struct info;
    struct jpeg_error_mgr manager;
    info.err = jpeg_std_error(&manager);
    jpeg_create_decompress(&info);
    jpeg_mem_src(&info, jpeg, size);
    jpeg_read_header(&info, TRUE);
    info.out_color_space = JCS_EXT_RGBA, info.do_fancy_upsampling = FALSE;
    jpeg_start_decompress(&info);
    size_t stride = (size_t)info.output_width * 4;
    uint8_t *rgba = malloc(stride * info.output_height);
    if (!rgba) return 0;
    while (info.output_scanline < info.output_height) {
        JSAMPROW row = rgba + (size_t)info.output_scanline * stride;
        jpeg_read_scanlines(&info, &row, 1);
    }
    uform_pixels_t pixels = {rgba, info.output_height, info.output_width, stride};
    jpeg_finish_decompress(&info);
    jpeg_destroy_decompress(&info);
    int ok = uform_image_patches(&pixels, 0, patches, uform_image_patches_k, rows, columns) == uform_ok_k;
    free(rgba);
    return ok;
}

static double seconds_(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

/* A refused JPEG: the status wanted, and the message naming the file. */
static void refused_(unsigned char const *data, size_t size, char const *name, uform_status_t wanted) {
    size_t rows, columns;
    uform_status_t status = uform_cuda_decode_patches(decoder_, data, size, name, 0, device_patches_, uform_image_patches_k, &rows, &columns);
    char const *message = uform_cuda_noted();
    printf("%s: status %d: %s\n", name, (int)status, message);
    check_(status == wanted && strstr(message, name), name);
}

int main(int argc, char **argv) {
    char const *json_path = NULL;
    size_t batch = 256;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) batch = (size_t)strtoul(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: %s [--json FILE] [--batch 256]\n", argv[0]);
            return 2;
        }
    }
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        printf("image_decode: skipped: no CUDA device\n");
        return 77;
    }
    FILE *json = json_path ? fopen(json_path, "w") : NULL;
    if (json_path && !json) {
        fprintf(stderr, "cannot write %s\n", json_path);
        return 1;
    }
    KERNEL_OK(uform_cuda_decoder_create(NULL, &decoder_));
    size_t most = uform_image_patches_k * uform_patch_length_k;
    CUDA_OK(cudaMalloc((void **)&device_patches_, most * sizeof(float)));
    copied_ = malloc(most * sizeof(float));
    prepared_t prepared[cases_count_k];
    for (size_t i = 0; i < cases_count_k; ++i) {
        prepared_t *p = &prepared[i];
        p->jpeg = jpeg_(&cases_[i], (unsigned)i, &p->size);
        p->host = malloc(most * sizeof(float)), p->plain = malloc(most * sizeof(float));
        size_t plain_rows = 0, plain_columns = 0;
        if (!p->jpeg || !p->host || !p->plain || !copied_ || uform_image_decode(p->jpeg, p->size, cases_[i].name, &p->pixels) != uform_ok_k ||
            uform_image_patches(&p->pixels, 0, p->host, uform_image_patches_k, &p->rows, &p->columns) != uform_ok_k ||
            !plain_patches_(p->jpeg, p->size, p->plain, &plain_rows, &plain_columns) || plain_rows != p->rows ||
            plain_columns != p->columns) {
            fprintf(stderr, "%s: the host path failed: %s\n", cases_[i].name, uform_last_error());
            return 1;
        }
    }
    if (json) fprintf(json, "{\"bounds\": {\"resize\": %.9g, \"max\": %.9g, \"mean\": %.9g},\n \"resize\": [",
                      RESIZE_BOUND, DECODE_MAX_FULL, DECODE_MEAN);

    /* 1. The resize alone: libjpeg-turbo's pixels through NPP against the host's resize of them. */
    printf("the resize alone: host pixels through NPP against the host's resize (bound %.3g)\n", RESIZE_BOUND);
    printf("| case | grid | max |diff| | within |\n|---|---|---|---|\n");
    for (size_t i = 0; i < cases_count_k; ++i) {
        prepared_t const *p = &prepared[i];
        size_t rows = 0, columns = 0;
        KERNEL_OK(uform_cuda_pixels_patches(decoder_, &p->pixels, 0, device_patches_, uform_image_patches_k, &rows, &columns));
        CUDA_OK(cudaMemcpy(copied_, device_patches_, rows * columns * uform_patch_length_k * sizeof(float), cudaMemcpyDeviceToHost));
        check_(rows == p->rows && columns == p->columns, "the GPU's grid is the host's");
        agreement_t a = agreement_(p->host, copied_, p->rows * p->columns * uform_patch_length_k);
        check_(a.largest <= RESIZE_BOUND, cases_[i].name);
        printf("| %s | %zux%zu | %.3g | %s |\n", cases_[i].name, p->rows, p->columns, a.largest, a.largest <= RESIZE_BOUND ? "yes" : "NO");
        if (json) fprintf(json, "%s{\"case\": \"%s\", \"max\": %.9g}", i ? ", " : "", cases_[i].name, a.largest);
    }

    /* 2. The whole path, and 3. the planted controls, which the same check must reject. */
    if (json) fprintf(json, "],\n \"whole\": [");
    check_(whole_path_(prepared, "the whole path", json), "the whole path within its bounds");
    static char const *const plants[] = {"", "red and blue swapped", "samples half a pixel late"};
    if (json) fprintf(json, "],\n \"controls\": [");
    for (int plant = 1; plant <= 2; ++plant) {
        uform_cuda_plant_set("rgba_patches", plant);
        char label[96];
        snprintf(label, sizeof(label), "planted control %d (%s)", plant, plants[plant]);
        if (json) fprintf(json, "%s{\"control\": \"%s\", \"cases\": [", plant > 1 ? ", " : "", plants[plant]);
        int accepted = whole_path_(prepared, label, json);
        if (json) fprintf(json, "], \"rejected\": %s}", accepted ? "false" : "true");
        printf("%s: %s\n", label, accepted ? "MISSED (accepted)" : "rejected");
        check_(!accepted, label);
    }
    uform_cuda_plant_set(NULL, 0);
    if (json) fprintf(json, "],\n");

    /* Refused by name: a JPEG cut in half, and a CMYK one. */
    refused_(prepared[2].jpeg, prepared[2].size / 2, "truncated_640x480.jpg", uform_format_k);
    case_t const cmyk = {"cmyk_64x48", 64, 48, 4, sampling_444_k, content_smooth_k};
    unsigned long cmyk_size;
    unsigned char *cmyk_jpeg = jpeg_(&cmyk, 0, &cmyk_size);
    refused_(cmyk_jpeg, cmyk_size, "cmyk_64x48.jpg", uform_unsupported_k);
    free(cmyk_jpeg);

    /* Images/s on a batch of 640x480 JPEGs: the host (one thread) and the GPU (one decoder, one stream). */
    case_t const timed = {"timed_640x480", 640, 480, 3, sampling_420_k, content_photo_k};
    enum { distinct_k = 8 };
    unsigned char *jpegs[distinct_k];
    unsigned long sizes[distinct_k];
    for (unsigned i = 0; i < distinct_k; ++i) jpegs[i] = jpeg_(&timed, i, &sizes[i]);
    float *host = malloc(most * sizeof(float));
    size_t rows, columns;
    double start = seconds_();
    for (size_t i = 0; i < batch; ++i) {
        uform_pixels_t pixels;
        if (uform_image_decode(jpegs[i % distinct_k], sizes[i % distinct_k], "timed", &pixels) != uform_ok_k) return 1;
        uform_status_t status = uform_image_patches(&pixels, 0, host, uform_image_patches_k, &rows, &columns);
        uform_pixels_free(&pixels);
        if (status != uform_ok_k) return 1;
    }
    double host_seconds = seconds_() - start;
    for (unsigned i = 0; i < distinct_k; ++i) /* warm: the decoder's state and scratch sized */
        KERNEL_OK(uform_cuda_decode_patches(decoder_, jpegs[i], sizes[i], "timed", 0, device_patches_, uform_image_patches_k, &rows, &columns));
    CUDA_OK(cudaDeviceSynchronize());
    start = seconds_();
    for (size_t i = 0; i < batch; ++i)
        KERNEL_OK(uform_cuda_decode_patches(decoder_, jpegs[i % distinct_k], sizes[i % distinct_k], "timed", 0, device_patches_,
                                            uform_image_patches_k, &rows, &columns));
    CUDA_OK(cudaDeviceSynchronize());
    double gpu_seconds = seconds_() - start;
    double host_rate = (double)batch / host_seconds, gpu_rate = (double)batch / gpu_seconds;
    printf("\n%zu JPEGs of 640x480 (4:2:0, quality 90) into %zux%zu patches:\n", batch, rows, columns);
    printf("| path | images/s | ms per image |\n|---|---|---|\n");
    printf("| host: libjpeg-turbo + Float32 resize, one thread | %.1f | %.3f |\n", host_rate, 1e3 / host_rate);
    printf("| GPU: nvJPEG + NPP, one decoder | %.1f | %.3f |\n", gpu_rate, 1e3 / gpu_rate);
    if (json) {
        fprintf(json, " \"timing\": {\"batch\": %zu, \"width\": 640, \"height\": 480, \"host_images_per_second\": %.6g, "
                      "\"gpu_images_per_second\": %.6g},\n \"passed\": %d, \"failed\": %d}\n",
                batch, host_rate, gpu_rate, passed_, failed_);
        fclose(json);
    }
    for (unsigned i = 0; i < distinct_k; ++i) free(jpegs[i]);
    for (size_t i = 0; i < cases_count_k; ++i) free(prepared[i].jpeg), free(prepared[i].host), free(prepared[i].plain), uform_pixels_free(&prepared[i].pixels);
    free(host), free(copied_);
    cudaFree(device_patches_);
    uform_cuda_decoder_free(decoder_);
    printf("\n%d passed, %d failed\n", passed_, failed_);
    return failed_ ? 1 : 0;
}
