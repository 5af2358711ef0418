/*  contract_host.c: the contract suite's host-only pieces (no CUDA calls): the seeded generator,
 *  BF16 conversions, random fills and the compare step that folds an element's error / bound into a
 *  running worst; shared by the suite and by the host test of its attention reference. */
#include "contract_host.h"

#include <math.h>
#include <string.h>

static uint64_t seed_ = 1;
double uniform_(void) {
    uint64_t z = (seed_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return ((double)(z >> 11) + 0.5) / 9007199254740992.0 * 2.0 - 1.0;
}

float bf16_to_f32_(uint16_t value) {
    uint32_t bits = (uint32_t)value << 16;
    float result;
    memcpy(&result, &bits, 4);
    return result;
}

uint16_t f32_to_bf16_(float value) {
    uint32_t bits;
    memcpy(&bits, &value, 4);
    return (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

void compare_(double *worst, double got, double expected, double bound) {
    double error = fabs(got - expected), ratio;
    if (isnan(got) || isnan(expected)) ratio = INFINITY;
    else if (bound <= 0) ratio = error > 0 ? INFINITY : 0;
    else ratio = error / bound;
    if (ratio > *worst) *worst = ratio;
}

void fill_bf16_(uint16_t *values, size_t count, double scale) {
    for (size_t i = 0; i < count; ++i) values[i] = f32_to_bf16_((float)(scale * uniform_()));
}

void fill_f32_(float *values, size_t count, double scale) {
    for (size_t i = 0; i < count; ++i) values[i] = (float)(scale * uniform_());
}

double tensor_gamma_(double terms) { return 2 * terms * unit_ / (1 - 2 * terms * unit_); }
