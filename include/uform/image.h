/*  image.h: images into the grid (SPEC.md section 1). Decoding (PNG through libpng, JPEG through
 *  libjpeg-turbo, WebP through libwebp, the format found from the bytes) gives RGBA with 8 bits a
 *  channel, alpha 255 where the codec has none. An image is then resized, its aspect kept, to a
 *  grid of at most 512 patches of 16x16 pixels (docs/images.md gives the rule and the filter) and
 *  cut into patches of 1024 values (RGBA, channel-last, pixels row by row, each value / 255).
 */
#ifndef UFORM_IMAGE_H
#define UFORM_IMAGE_H

#include "uform/types.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    uform_patch_side_k = 16,         /* pixels a patch side */
    uform_patch_length_k = 1024,     /* values a patch: 16 x 16 x RGBA */
    uform_image_patches_k = 512,     /* the most patches an image fills */
    uform_image_pixels_max_k = 1 << 28, /* the largest image decoded (pixels), against hostile headers */
};

/** Decoded RGBA pixels: `height` rows of `width` pixels, 4 bytes each, rows `stride` bytes apart. */
typedef struct uform_pixels_t {
    uint8_t const *rgba;
    size_t height, width, stride;
} uform_pixels_t;

/** An image to encode: encoded bytes (`data`, `size`: PNG, JPEG or WebP) when `pixels.rgba` is NULL,
 *  else decoded pixels. `name` names it in error messages (may be NULL). */
typedef struct uform_image_t {
    void const *data;
    size_t size;
    uform_pixels_t pixels;
    char const *name;
} uform_image_t;

/** Decodes PNG, JPEG or WebP bytes into `pixels` (stride 4 width), allocated here and released with
 *  uform_pixels_free. A truncated, corrupt or unsupported image fails with uform_format_k or
 *  uform_unsupported_k and a message naming `name` and the problem. */
UFORM_API uform_status_t uform_image_decode(void const *data, size_t size, char const *name, uform_pixels_t *pixels);
/** Reads and decodes the file at `path`. */
UFORM_API uform_status_t uform_image_read(char const *path, uform_pixels_t *pixels);
UFORM_API void uform_pixels_free(uform_pixels_t *pixels);

/** The patch grid an image of `height` x `width` pixels is resized to: `rows` x `columns` patches,
 *  at most `max_patches` (0: uform_image_patches_k) of them, the aspect kept as closely as whole
 *  patches allow. */
UFORM_API void uform_image_grid(size_t height, size_t width, size_t max_patches, size_t *rows, size_t *columns);

/** Resizes `pixels` to its grid and writes the patches, row by row: `patches[rows * columns * 1024]`
 *  (values / 255). `capacity` is how many patches `patches` holds; `rows` and `columns` receive the
 *  grid (the cells' h and w coordinates: t = 0, h = patch row, w = patch column). */
UFORM_API uform_status_t uform_image_patches(uform_pixels_t const *pixels, size_t max_patches, float *patches,
                                             size_t capacity, size_t *rows, size_t *columns);

#ifdef __cplusplus
}
#endif
#endif
