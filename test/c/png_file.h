/*  png_file.h: a test image written by libpng into the scratch folder (check.h), for the suites
 *  that read images through the batcher. */
#ifndef UFORM_TEST_PNG_FILE_H
#define UFORM_TEST_PNG_FILE_H

#include <png.h>
#include <stdint.h>

#include "check.h"

/* A PNG of `height` x `width` RGBA pixels whose values follow (x, y, channel). */
static inline void write_png(char const *name, size_t height, size_t width, unsigned salt) {
    uint8_t *rgba = malloc(height * width * 4);
    for (size_t i = 0; i < height * width * 4; ++i) rgba[i] = (uint8_t)(i * 7 + salt * 31 + (i / (width * 4)) * 3);
    png_image image;
    memset(&image, 0, sizeof(image));
    image.version = PNG_IMAGE_VERSION;
    image.width = (png_uint_32)width, image.height = (png_uint_32)height, image.format = PNG_FORMAT_RGBA;
    CHECK(png_image_write_to_file(&image, path_in(name), 0, rgba, 0, NULL));
    free(rgba);
}

#endif
