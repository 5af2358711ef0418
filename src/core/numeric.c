/*  numeric.c: bulk BF16 conversions, E4M3 codes. */
#include "core/numeric.h"

#include <stddef.h>

void uform_bf16_from_f32_array(float const *source, uint16_t *target, size_t count) {
    for (size_t i = 0; i < count; ++i) target[i] = uform_f32_to_bf16(source[i]);
}

void uform_f32_from_bf16_array(uint16_t const *source, float *target, size_t count) {
    for (size_t i = 0; i < count; ++i) target[i] = uform_bf16_to_f32(source[i]);
}

uint8_t uform_f32_to_e4m3(float x) {
    if (x != x) return 0x7f;
    float rounded = uform_e4m3_round(x), magnitude = fabsf(rounded);
    uint8_t sign = signbit(rounded) ? 0x80 : 0;
    if (magnitude < 0x1p-6f) return (uint8_t)(sign | (uint8_t)(magnitude * 512.0f));
    uint32_t bits;
    memcpy(&bits, &magnitude, sizeof(bits));
    return (uint8_t)(sign | (((bits >> 23) - 127 + 7) << 3) | ((bits >> 20) & 7u));
}

float uform_e4m3_to_f32(uint8_t code) {
    if ((code & 0x7f) == 0x7f) return NAN;
    int exponent = (code >> 3) & 15, mantissa = code & 7;
    float magnitude = exponent ? ldexpf(1.0f + (float)mantissa / 8.0f, exponent - UFORM_E4M3_DECODE_BIAS)
                               : ldexpf((float)mantissa, 1 - UFORM_E4M3_DECODE_BIAS - 3);
    return code & 0x80 ? -magnitude : magnitude;
}
