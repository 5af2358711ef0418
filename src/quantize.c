/*  quantize.c: the output precisions of quantize.h: calibration ranges, quantization and the
 *  matching scores. The bucket arithmetic is Float32 in sentence-transformers' order of operations
 *  (x - min, then / ((max - min) / 255)), so the same ranges give the same buckets as NumPy. */
#include "uform/quantize.h"

#include <math.h>
#include <string.h>

#include "core/status.h"

static char const *const uform_output_names_[] = {"float32", "int8", "uint8", "binary", "ubinary"};
enum { uform_output_precisions_k = sizeof(uform_output_names_) / sizeof(uform_output_names_[0]) };

char const *uform_output_precision_name(uform_output_precision_t precision) {
    return (unsigned)precision < uform_output_precisions_k ? uform_output_names_[precision] : NULL;
}

uform_status_t uform_output_precision_parse(char const *name, uform_output_precision_t *precision) {
    if (!name || !precision) return uform_fail(uform_invalid_argument_k, "uform_output_precision_parse: name and precision are needed");
    for (size_t i = 0; i < uform_output_precisions_k; ++i)
        if (!strcmp(name, uform_output_names_[i])) {
            *precision = (uform_output_precision_t)i;
            return uform_ok_k;
        }
    return uform_fail(uform_invalid_argument_k, "output precision is float32, int8, uint8, binary or ubinary, not '%s'", name);
}

static uform_status_t uform_check_precision_(uform_output_precision_t precision, char const *verb) {
    if ((unsigned)precision < uform_output_precisions_k) return uform_ok_k;
    return uform_fail(uform_invalid_argument_k, "%s: output precision %d is not one of uform_output_precision_t", verb, (int)precision);
}

static size_t uform_row_bytes_(uform_output_precision_t precision, size_t width) {
    switch (precision) {
    case uform_output_float32_k: return width * sizeof(float);
    case uform_output_int8_k:
    case uform_output_uint8_k: return width;
    default: return (width + 7) / 8;
    }
}

uform_status_t uform_output_bytes(uform_output_precision_t precision, size_t width, size_t *bytes) {
    UFORM_TRY(uform_check_precision_(precision, "uform_output_bytes"));
    if (!bytes || !width) return uform_fail(uform_invalid_argument_k, "uform_output_bytes: bytes is needed, width > 0");
    *bytes = uform_row_bytes_(precision, width);
    return uform_ok_k;
}

uform_status_t uform_calibrate(float const *embeddings, size_t count, size_t width, uform_ranges_t *ranges) {
    if (!embeddings || !ranges || !count || !width)
        return uform_fail(uform_invalid_argument_k, "uform_calibrate: embeddings and ranges are needed, count > 0, width > 0");
    if (!ranges->minimums || !ranges->maximums)
        return uform_fail(uform_invalid_argument_k, "uform_calibrate: ranges need their minimums and maximums arrays");
    if (ranges->width != width)
        return uform_fail(uform_shape_k, "uform_calibrate: ranges hold %zu dimensions, the embeddings %zu", ranges->width, width);
    for (size_t row = 0; row < count; ++row)
        for (size_t column = 0; column < width; ++column)
            if (isnan(embeddings[row * width + column]))
                return uform_fail(uform_invalid_argument_k, "uform_calibrate: embedding %zu is NaN in dimension %zu", row, column);
    for (size_t column = 0; column < width; ++column) {
        float lowest = embeddings[column], highest = embeddings[column];
        for (size_t row = 1; row < count; ++row) {
            float value = embeddings[row * width + column];
            lowest = value < lowest ? value : lowest, highest = value > highest ? value : highest;
        }
        ranges->minimums[column] = lowest, ranges->maximums[column] = highest;
    }
    return uform_ok_k;
}

static uform_status_t uform_check_ranges_(uform_ranges_t const *ranges, size_t width, uform_output_precision_t precision) {
    char const *name = uform_output_names_[precision];
    if (!ranges)
        return uform_fail(uform_invalid_argument_k, "uform_quantize: %s needs calibration ranges (uform_calibrate computes them)", name);
    if (!ranges->minimums || !ranges->maximums)
        return uform_fail(uform_invalid_argument_k, "uform_quantize: the ranges need their minimums and maximums arrays");
    if (ranges->width != width)
        return uform_fail(uform_shape_k, "uform_quantize: the ranges hold %zu dimensions, the embeddings %zu", ranges->width, width);
    for (size_t column = 0; column < width; ++column) {
        float lowest = ranges->minimums[column], highest = ranges->maximums[column];
        if (!isfinite(lowest) || !isfinite(highest))
            return uform_fail(uform_invalid_argument_k, "uform_quantize: the range of dimension %zu is not finite", column);
        if (lowest > highest)
            return uform_fail(uform_invalid_argument_k, "uform_quantize: the range of dimension %zu has minimum %.9g > maximum %.9g",
                              column, lowest, highest);
    }
    return uform_ok_k;
}

/* The bucket of `value` in [lowest, highest] with `step` = (highest - lowest) / 255, as a byte:
 * uint8 rounds the place down; int8 rounds place - 128 toward zero, as NumPy's cast to int8 does. */
static uint8_t uform_bucket_(float value, float lowest, float step, int is_signed) {
    float place = step > 0 ? (value - lowest) / step : NAN;
    if (!is_signed) return !(place > 0) ? 0 : place >= 255 ? 255 : (uint8_t)place; /* NaN fails both tests */
    float shifted = place - 128.0f;
    return (uint8_t)(!(shifted > -128) ? -128 : shifted >= 127 ? 127 : (int8_t)shifted);
}

uform_status_t uform_quantize(float const *embeddings, size_t count, size_t width, uform_output_precision_t precision,
                              uform_ranges_t const *ranges, void *output) {
    UFORM_TRY(uform_check_precision_(precision, "uform_quantize"));
    if (!embeddings || !output || !count || !width)
        return uform_fail(uform_invalid_argument_k, "uform_quantize: embeddings and output are needed, count > 0, width > 0");
    if (precision == uform_output_float32_k) {
        memmove(output, embeddings, count * width * sizeof(float));
        return uform_ok_k;
    }
    uint8_t *bytes = output;
    if (precision == uform_output_int8_k || precision == uform_output_uint8_k) {
        UFORM_TRY(uform_check_ranges_(ranges, width, precision));
        int is_signed = precision == uform_output_int8_k;
        for (size_t column = 0; column < width; ++column) {
            float lowest = ranges->minimums[column], step = (ranges->maximums[column] - lowest) / 255.0f;
            for (size_t row = 0; row < count; ++row)
                bytes[row * width + column] = uform_bucket_(embeddings[row * width + column], lowest, step, is_signed);
        }
        return uform_ok_k;
    }
    size_t row_bytes = (width + 7) / 8;
    uint8_t flip = precision == uform_output_binary_k ? 0x80 : 0; /* ubinary - 128 as int8 flips the top bit */
    for (size_t row = 0; row < count; ++row) {
        float const *embedding = embeddings + row * width;
        for (size_t byte = 0; byte < row_bytes; ++byte) {
            uint8_t packed = 0;
            for (size_t bit = 0; bit < 8; ++bit) {
                size_t column = byte * 8 + bit;
                packed |= (uint8_t)((column < width && embedding[column] > 0) << (7 - bit));
            }
            bytes[row * row_bytes + byte] = packed ^ flip;
        }
    }
    return uform_ok_k;
}

static float uform_float_dot_(float const *left, float const *right, size_t width) {
    float sums[4] = {0, 0, 0, 0}; /* four partial sums, as uform_eval's dot, so float32 rows agree */
    size_t place = 0;
    for (; place + 4 <= width; place += 4)
        for (int lane = 0; lane < 4; ++lane) sums[lane] += left[place + lane] * right[place + lane];
    for (; place < width; ++place) sums[0] += left[place] * right[place];
    return (sums[0] + sums[1]) + (sums[2] + sums[3]);
}

uform_status_t uform_quantized_scores(uform_output_precision_t precision, size_t width, void const *query,
                                      void const *documents, size_t count, float *scores) {
    UFORM_TRY(uform_check_precision_(precision, "uform_quantized_scores"));
    if (!query || !documents || !scores || !count || !width)
        return uform_fail(uform_invalid_argument_k, "uform_quantized_scores: query, documents and scores are needed, count > 0, width > 0");
    size_t row_bytes = uform_row_bytes_(precision, width);
    for (size_t document = 0; document < count; ++document) {
        void const *other = (uint8_t const *)documents + document * row_bytes;
        if (precision == uform_output_float32_k) {
            scores[document] = uform_float_dot_(query, other, width);
        } else if (precision == uform_output_int8_k || precision == uform_output_uint8_k) {
            int centre = precision == uform_output_uint8_k ? 128 : 0;
            int64_t sum = 0;
            for (size_t place = 0; place < width; ++place) {
                int left = precision == uform_output_int8_k ? ((int8_t const *)query)[place] : ((uint8_t const *)query)[place] - centre;
                int right = precision == uform_output_int8_k ? ((int8_t const *)other)[place] : ((uint8_t const *)other)[place] - centre;
                sum += left * right;
            }
            scores[document] = (float)sum;
        } else {
            uint8_t const *left = query, *right = other;
            int distance = 0;
            for (size_t byte = 0; byte < row_bytes; ++byte) distance += __builtin_popcount((unsigned)(left[byte] ^ right[byte]));
            scores[document] = (float)-distance;
        }
    }
    return uform_ok_k;
}
