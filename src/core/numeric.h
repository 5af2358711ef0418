/*  numeric.h: BF16 and E4M3 <-> Float32 conversion (round to nearest even) and the seeded RNG. */
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

/* E4M3 (OCP FP8, the "fn" variant): a sign, 4 exponent bits of bias 7, 3 mantissa bits; subnormals
 * m 2^-9; no infinities; 0x7f and 0xff are NaN; the largest finite value is 448. The planted
 * control UFORM_PLANT_E4M3_BIAS decodes with bias 8 (docs/precision.md). */
#if defined(UFORM_PLANT_E4M3_BIAS)
#define UFORM_E4M3_DECODE_BIAS 8
#else
#define UFORM_E4M3_DECODE_BIAS 7
#endif
#define UFORM_E4M3_LARGEST 448.0f

/** x rounded to the nearest E4M3 value, ties to even; magnitudes past 448 saturate to 448, NaN stays. */
static inline float uform_e4m3_round(float x) {
    float magnitude = fabsf(x), rounded;
    if (magnitude != magnitude) return x;
    if (magnitude >= UFORM_E4M3_LARGEST) {
        rounded = UFORM_E4M3_LARGEST;
    } else if (magnitude < 0x1p-6f) { /* subnormal: a multiple of 2^-9, by the add-and-subtract of 2^23 */
        float scaled = magnitude * 512.0f;
        rounded = ((scaled + 8388608.0f) - 8388608.0f) * 0x1p-9f;
    } else { /* normal: keep 3 of Float32's 23 mantissa bits, ties to even */
        uint32_t bits;
        memcpy(&bits, &magnitude, sizeof(bits));
        bits = (bits + 0x7ffffu + ((bits >> 20) & 1u)) & 0xfff00000u;
        memcpy(&rounded, &bits, sizeof(rounded));
    }
    return signbit(x) ? -rounded : rounded;
}

/** The E4M3 code of x rounded as uform_e4m3_round does. */
uint8_t uform_f32_to_e4m3(float x);
/** The value of an E4M3 code (NaN for 0x7f and 0xff). */
float uform_e4m3_to_f32(uint8_t code);

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
