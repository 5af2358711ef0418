/*  encode_images.c: times `uform_encode_images` (include/uform/encode.h) on one synthetic photo of
 *  --height x --width pixels, given as JPEG bytes, PNG bytes or decoded RGBA pixels: --batch copies a
 *  call, for --seconds. The photo (gradients, a few waves and noise, so that the codecs have work as on
 *  a camera's picture) is encoded here by libjpeg-turbo (quality 90) and libpng. `sized` is the photo
 *  drawn at its patch grid's own size (16 rows x 16 columns pixels), so that the resize keeps the size
 *  and what is left is cutting patches and the model. Prints one JSON line per input with images/s;
 *  bench/encode_images.py runs it on a CPU and a CUDA context.
 *
 *      uform_bench_encode_images --model DIR [--device cpu|cuda] [--threads N] [--batch 32]
 *                                [--seconds 3] [--inputs jpeg,png,pixels,sized] [--height 480] [--width 640]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <png.h>

#include "encode_model.h"

static int uform_fail_(void) {
    fprintf(stderr, "uform_bench_encode_images: %s\n", uform_last_error());
    return 1;
}

/* RGBA, alpha 255: horizontal and vertical ramps, a wave in blue, and noise of +-16. */
static uint8_t *uform_photo_(size_t height, size_t width) {
    uint8_t *rgba = malloc(height * width * 4);
    if (!rgba) return NULL;
    unsigned seed = 7;
    for (size_t y = 0; y < height; ++y)
        for (size_t x = 0; x < width; ++x) {
            uint8_t *p = rgba + (y * width + x) * 4;
            double wave = 128.0 + 90.0 * sin((double)x * 0.05) * cos((double)y * 0.031);
            int noise = (int)(rand_r(&seed) % 33) - 16;
            int values[3] = {(int)(255 * x / width) + noise, (int)(255 * y / height) - noise, (int)wave + noise};
            for (int c = 0; c < 3; ++c) p[c] = (uint8_t)(values[c] < 0 ? 0 : values[c] > 255 ? 255 : values[c]);
            p[3] = 255;
        }
    return rgba;
}

static unsigned char *uform_jpeg_(uint8_t const *rgba, size_t height, size_t width, unsigned long *size) {
    struct jpeg_compress_struct compress;
    struct jpeg_error_mgr errors;
    compress.err = jpeg_std_error(&errors); /* exits on error: the input is our own */
    jpeg_create_compress(&compress);
    unsigned char *data = NULL;
    *size = 0;
    jpeg_mem_dest(&compress, &data, size);
    compress.image_width = (JDIMENSION)width, compress.image_height = (JDIMENSION)height;
    compress.input_components = 3, compress.in_color_space = JCS_RGB;
    jpeg_set_defaults(&compress);
    jpeg_set_quality(&compress, 90, TRUE);
    jpeg_start_compress(&compress, TRUE);
    uint8_t *line = malloc(width * 3);
    while (line && compress.next_scanline < compress.image_height) {
        uint8_t const *source = rgba + (size_t)compress.next_scanline * width * 4;
        for (size_t x = 0; x < width; ++x) memcpy(line + 3 * x, source + 4 * x, 3);
        JSAMPROW row = line;
        jpeg_write_scanlines(&compress, &row, 1);
    }
    jpeg_finish_compress(&compress);
    jpeg_destroy_compress(&compress);
    free(line);
    return data;
}

static void *uform_png_(uint8_t const *rgba, size_t height, size_t width, size_t *size) {
    png_image image = {.version = PNG_IMAGE_VERSION, .width = (png_uint_32)width, .height = (png_uint_32)height,
                       .format = PNG_FORMAT_RGBA};
    png_alloc_size_t bytes = 0;
    if (!png_image_write_to_memory(&image, NULL, &bytes, 0, rgba, 0, NULL)) return NULL; /* the size first */
    void *data = malloc(bytes);
    if (data && !png_image_write_to_memory(&image, data, &bytes, 0, rgba, 0, NULL)) free(data), data = NULL;
    *size = bytes;
    return data;
}

int main(int argc, char **argv) {
    char const *model_path = NULL, *device = "cpu", *inputs = "jpeg,png,pixels,sized";
    double seconds = 3.0;
    size_t threads = 0, batch = 32, height = 480, width = 640;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model")) model_path = argv[i + 1];
        else if (!strcmp(argv[i], "--device")) device = argv[i + 1];
        else if (!strcmp(argv[i], "--inputs")) inputs = argv[i + 1];
        else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch")) batch = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--height")) height = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--width")) width = (size_t)atol(argv[i + 1]);
        else {
            fprintf(stderr, "uform_bench_encode_images: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (!model_path || !batch || !height || !width || (strcmp(device, "cpu") && strcmp(device, "cuda"))) {
        fprintf(stderr, "usage: uform_bench_encode_images --model DIR [--device cpu|cuda] [--threads N] [--batch 32] "
                        "[--seconds 3] [--inputs jpeg,png,pixels,sized] [--height 480] [--width 640]\n");
        return 2;
    }
    uform_model_t *model = NULL;
    uform_status_t status = uform_bench_open(model_path, threads, uform_precision_bf16_k, device, &model);
    uform_config_t config;
    if (status == uform_ok_k) uform_model_config(model, &config);
    /* A whole call in one pass: every image fills at most 512 patches. */
    if (status == uform_ok_k) status = uform_model_reserve(model, batch * uform_image_patches_k);
    if (status != uform_ok_k) return uform_fail_();
    size_t embedding_width = config.embedding_widths[config.embedding_widths_count - 1], rows, columns;
    uform_image_grid(height, width, 0, &rows, &columns);
    uint8_t *rgba = uform_photo_(height, width), *sized = uform_photo_(rows * uform_patch_side_k, columns * uform_patch_side_k);
    unsigned long jpeg_size = 0;
    size_t png_size = 0;
    unsigned char *jpeg = rgba ? uform_jpeg_(rgba, height, width, &jpeg_size) : NULL;
    void *png = rgba ? uform_png_(rgba, height, width, &png_size) : NULL;
    uform_image_t *images = malloc(batch * sizeof(uform_image_t));
    float *embeddings = malloc(batch * embedding_width * sizeof(float));
    if (!rgba || !sized || !jpeg || !png || !images || !embeddings) {
        fprintf(stderr, "uform_bench_encode_images: out of memory making the photo\n");
        return 1;
    }
    char const *cursor = inputs;
    while (*cursor) {
        size_t length = strcspn(cursor, ",");
        char input[16] = "";
        snprintf(input, sizeof(input), "%.*s", (int)length, cursor);
        cursor += length + (cursor[length] == ',');
        size_t sized_height = rows * uform_patch_side_k, sized_width = columns * uform_patch_side_k;
        size_t size = !strcmp(input, "jpeg") ? jpeg_size : !strcmp(input, "png") ? png_size
                    : !strcmp(input, "sized") ? sized_height * sized_width * 4 : height * width * 4;
        for (size_t i = 0; i < batch; ++i) {
            if (!strcmp(input, "jpeg")) images[i] = (uform_image_t){.data = jpeg, .size = jpeg_size};
            else if (!strcmp(input, "png")) images[i] = (uform_image_t){.data = png, .size = png_size};
            else if (!strcmp(input, "pixels")) images[i] = (uform_image_t){.pixels = {rgba, height, width, width * 4}};
            else if (!strcmp(input, "sized"))
                images[i] = (uform_image_t){.pixels = {sized, sized_height, sized_width, sized_width * 4}};
            else {
                fprintf(stderr, "uform_bench_encode_images: --inputs are jpeg, png, pixels or sized, not %s\n", input);
                return 2;
            }
        }
        status = uform_encode_images(model, images, batch, embedding_width, embeddings); /* warm-up */
        size_t calls = 0;
        double start = uform_bench_now(), elapsed = 0;
        while (status == uform_ok_k && elapsed < seconds) {
            status = uform_encode_images(model, images, batch, embedding_width, embeddings);
            calls++;
            elapsed = uform_bench_now() - start;
        }
        if (status != uform_ok_k) return uform_fail_();
        printf("{\"system\": \"uform\", \"version\": \"%s\", \"device\": \"%s\", \"threads\": %zu, \"input\": \"%s\", "
               "\"height\": %zu, \"width\": %zu, \"input_bytes\": %zu, \"grid\": \"%zux%zu\", \"batch\": %zu, "
               "\"images_per_s\": %.1f, \"ms_per_image\": %.3f}\n",
               uform_version(), device, threads, input, height, width, size, rows, columns, batch,
               (double)(calls * batch) / elapsed, elapsed * 1e3 / (double)(calls * batch));
        fflush(stdout);
    }
    free(rgba), free(sized), free(jpeg), free(png), free(images), free(embeddings);
    uform_model_close(model);
    return 0;
}
