/*  image_decode.h (internal): JPEG decoding and the resize into patches on the GPU, the device twin
 *  of src/media/image.c (docs/images.md, "GPU decoding"): nvJPEG decodes to RGB, a kernel widens it
 *  to RGBA in Float32 (alpha 255), the resize follows the host's filter (one NPPI_INTER_SUPER area
 *  pass where both axes shrink; else our kernel per axis that changes: area average when it shrinks,
 *  bilinear with half-pixel centres when it grows), and a kernel divides by 255 and lays the result out as patches, value (y, x, c) of a patch at
 *  (16 y + x) 4 + c. The grid is the host's (uform_image_grid). Built only where nvJPEG and NPP are
 *  found (UFORM_HAVE_NVJPEG). Failures note a message naming the image (error.h). */
#ifndef UFORM_CUDA_IMAGE_DECODE_H
#define UFORM_CUDA_IMAGE_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "uform/image.h"
#include "uform/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A decoder on the current device: one nvJPEG handle and state and one scratch buffer, grown as
 *  images need, reused from image to image; its work runs on `stream` (NULL: the default stream).
 *  One thread at a time. */
typedef struct uform_cuda_decoder_t uform_cuda_decoder_t;
uform_status_t uform_cuda_decoder_create(void *stream, uform_cuda_decoder_t **decoder);
void uform_cuda_decoder_free(uform_cuda_decoder_t *decoder);

/** Decodes the JPEG `data[size]` (greyscale or YCbCr; `name` names it in messages, may be NULL) and
 *  writes its patches, Float32 [rows * columns, 1024] in device memory, into `patches`, which holds
 *  `capacity` of them; `rows` and `columns` receive the grid (at most `max_patches`, 0: 512).
 *  Corrupt or truncated data fails with uform_format_k, CMYK and other layouts with
 *  uform_unsupported_k. Returns once the work is queued on the decoder's stream. */
uform_status_t uform_cuda_decode_patches(uform_cuda_decoder_t *decoder, void const *data, size_t size, char const *name,
                                         size_t max_patches, float *patches, size_t capacity, size_t *rows, size_t *columns);

/** The same resize and layout for RGBA pixels decoded on the host (any format): they go up, then
 *  as above. */
uform_status_t uform_cuda_pixels_patches(uform_cuda_decoder_t *decoder, uform_pixels_t const *pixels, size_t max_patches,
                                         float *patches, size_t capacity, size_t *rows, size_t *columns);

/* The kernels (image_decode.cu), on the decoder's stream. */

/** rgba [height, width, 4] (Float32, dense) = `pixels` (8 bits, `channels` 3 or 4, rows `pitch`
 *  bytes apart, source_height x source_width) with alpha 255 where it has none; a target larger than
 *  the source repeats its last row or column (a side of one pixel doubled for NPP). */
uform_status_t uform_cuda_rgba_widen(uint8_t const *pixels, size_t pitch, size_t channels, size_t source_height,
                                     size_t source_width, size_t height, size_t width, float *rgba, void *stream);
/** One resize pass along one axis of a Float32 RGBA image (dense rows), from_height == to_height
 *  (across) or from_width == to_width (down): the filter of docs/images.md, as the host computes it. */
uform_status_t uform_cuda_resize_axis(float const *from, size_t from_width, size_t from_height, float *to, size_t to_width,
                                      size_t to_height, void *stream);
/** patches [rows * columns, 1024] = rgba [rows * 16, columns * 16, 4] / 255, cut into patches row by row. */
uform_status_t uform_cuda_rgba_patches(float const *rgba, size_t rows, size_t columns, float *patches, void *stream);

#ifdef __cplusplus
}
#endif
#endif
