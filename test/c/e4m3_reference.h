/*  e4m3_reference.h: E4M3 from the format's definition, in double, apart from any library: the
 *  reference of test_kernels.c (the CPU's codes, rounding and widening) and of the CUDA contract
 *  (the GPU's quantization). */
#ifndef UFORM_TEST_E4M3_REFERENCE_H
#define UFORM_TEST_E4M3_REFERENCE_H

#include <math.h>

/* The value of E4M3 code `code` from the format's definition (OCP FP8): NaN for S.1111.111. */
static inline double e4m3_definition(unsigned code) {
    unsigned exponent = (code >> 3) & 15, mantissa = code & 7;
    if (exponent == 15 && mantissa == 7) return NAN;
    double magnitude = exponent ? ldexp(1.0 + mantissa / 8.0, (int)exponent - 7) : ldexp((double)mantissa, -9);
    return code & 0x80 ? -magnitude : magnitude;
}

/* The nearest finite E4M3 value to x by search, ties to the even code; past 448 saturated. */
static inline double e4m3_nearest(double x) {
    double best = 0, distance = INFINITY;
    unsigned best_code = 0;
    for (unsigned code = 0; code < 128; ++code) {
        double value = e4m3_definition(code);
        if (isnan(value)) continue;
        double gap = fabs(fabs(x) - value);
        if (gap < distance || (gap == distance && !(code & 1) && (best_code & 1))) best = value, distance = gap, best_code = code;
    }
    return x < 0 ? -best : best;
}

#endif
