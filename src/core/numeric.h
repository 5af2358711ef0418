/*  numeric.h: BF16 <-> Float32 conversion (round to nearest even) and the seeded RNG. */
#ifndef UFORM_CORE_NUMERIC_H
#define UFORM_CORE_NUMERIC_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float uform_bf16_to_f32(uint16_t value) {
    uint32_t bits = (uint32_t)value << 16;
    float result;
    memcpy(&result, &bits, sizeof(result));
    return result;
}

/** Round to nearest, ties to even; NaN stays a quiet NaN. */
static inline uint16_t uform_f32_to_bf16(float value) {
    uint32_t bits;
    memcpy(&bits, &value, sizeof(bits));
    if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x0040u);
    uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)((bits + rounding) >> 16);
}

void uform_bf16_from_f32_array(float const *source, uint16_t *target, size_t count);
void uform_f32_from_bf16_array(uint16_t const *source, float *target, size_t count);

/** SplitMix64 state: one 64-bit word, seeded directly. */
typedef struct uform_rng_t {
    uint64_t state;
} uform_rng_t;

static inline uint64_t uform_rng_next(uform_rng_t *rng) {
    uint64_t z = (rng->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/** Uniform in (0, 1), never 0 so that logarithms are finite. */
static inline double uform_rng_uniform(uform_rng_t *rng) {
    return ((double)(uform_rng_next(rng) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/** Standard normal by Box-Muller (one draw per call, the pair's second half discarded for simplicity). */
static inline double uform_rng_normal(uform_rng_t *rng) {
    double u = uform_rng_uniform(rng), v = uform_rng_uniform(rng);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

#endif
