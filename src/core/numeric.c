/*  numeric.c: bulk BF16 conversions. */
#include "core/numeric.h"

#include <stddef.h>

void uform_bf16_from_f32_array(float const *source, uint16_t *target, size_t count) {
    for (size_t i = 0; i < count; ++i) target[i] = uform_f32_to_bf16(source[i]);
}

void uform_f32_from_bf16_array(uint16_t const *source, float *target, size_t count) {
    for (size_t i = 0; i < count; ++i) target[i] = uform_bf16_to_f32(source[i]);
}
