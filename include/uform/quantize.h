/*  quantize.h: embedding outputs at lower precision, as sentence-transformers' `quantize_embeddings`
 *  defines them: float32, int8 and uint8 (each dimension mapped linearly from a calibration range
 *  into 256 buckets), binary and ubinary (sign bits packed eight to a byte). Quantize after the
 *  Matryoshka prefix is taken and renormalized: `uform_encode` at that width gives such rows.
 *  Definitions, and where they differ from sentence-transformers: docs/quantization.md.
 */
#ifndef UFORM_QUANTIZE_H
#define UFORM_QUANTIZE_H

#include "uform/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum uform_output_precision_t {
    uform_output_float32_k = 0, /* float[width], the embedding as it is */
    uform_output_int8_k = 1,    /* int8_t[width]: place - 128 rounded toward zero, -128..127 */
    uform_output_uint8_k = 2,   /* uint8_t[width]: place rounded down, 0..255; place = (x - min) / ((max - min) / 255) */
    uform_output_binary_k = 3,  /* int8_t[(width + 7) / 8]: the ubinary byte - 128 */
    uform_output_ubinary_k = 4, /* uint8_t[(width + 7) / 8]: bit x > 0, first dimension in the top bit, zero-padded */
} uform_output_precision_t;

/** Per-dimension calibration ranges for int8 and uint8: dimension i maps [minimums[i], maximums[i]]
 *  onto the 256 buckets. Caller-owned arrays of `width` floats each. */
typedef struct uform_ranges_t {
    float *minimums;
    float *maximums;
    size_t width;
} uform_ranges_t;

/** "float32", "int8", "uint8", "binary" or "ubinary"; NULL for a value outside the enum. */
UFORM_API char const *uform_output_precision_name(uform_output_precision_t precision);
/** The precision of one of those names; an unknown name is an invalid argument listing them. */
UFORM_API uform_status_t uform_output_precision_parse(char const *name, uform_output_precision_t *precision);
/** Bytes one quantized embedding of `width` dimensions takes: 4 x width, width, or (width + 7) / 8. */
UFORM_API uform_status_t uform_output_bytes(uform_output_precision_t precision, size_t width, size_t *bytes);

/** Ranges from calibration embeddings `embeddings[count * width]`: the minimum and maximum of each
 *  dimension over the rows. `ranges->width` must be `width`; a NaN in the embeddings is refused. */
UFORM_API uform_status_t uform_calibrate(float const *embeddings, size_t count, size_t width, uform_ranges_t *ranges);

/** Quantizes `embeddings[count * width]` into `output`, `count` rows of uform_output_bytes each.
 *  int8 and uint8 need `ranges` of the same width with minimums <= maximums, all finite; the other
 *  precisions ignore it (it may be NULL). In range, the buckets are sentence-transformers' to the bit
 *  (its Float32 arithmetic and casts); values outside a range saturate to the end bucket, and a
 *  NaN and every value of a dimension whose range is one point (min == max) go to the lowest. */
UFORM_API uform_status_t uform_quantize(float const *embeddings, size_t count, size_t width,
                                        uform_output_precision_t precision, uform_ranges_t const *ranges, void *output);

/** Scores of one quantized query against `count` quantized documents of the same precision and
 *  width, higher is closer: the dot product for float32 and int8, the dot product of the buckets
 *  centred by -128 for uint8, minus the Hamming distance for
 *  binary and ubinary. Integer scores are exact in a float up to 2^24. */
UFORM_API uform_status_t uform_quantized_scores(uform_output_precision_t precision, size_t width, void const *query,
                                                void const *documents, size_t count, float *scores);

#ifdef __cplusplus
}
#endif
#endif
