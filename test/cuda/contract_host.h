/*  contract_host.h: the contract suite's host-only pieces (contract_host.c): unit roundoffs, the
 *  seeded generator, BF16 conversions, random fills, the tensor-core error model and the compare
 *  step that folds an element's error / bound into a running worst. No CUDA here, so the host tests
 *  of the suite's references build without it. */
#ifndef UFORM_TEST_CUDA_CONTRACT_HOST_H
#define UFORM_TEST_CUDA_CONTRACT_HOST_H

#include <stddef.h>
#include <stdint.h>

#define unit_ (1.0 / 16777216.0)  /* Float32 unit roundoff, 2^-24 */
#define bf16_unit_ (1.0 / 256.0)  /* BF16 unit roundoff, 2^-8 (8 significant bits) */

/** SplitMix64 uniform in (-1, 1). */
double uniform_(void);
float bf16_to_f32_(uint16_t value);
uint16_t f32_to_bf16_(float value);
/** Folds one element into a running worst ratio; a NaN or an error with a zero bound counts as infinite. */
void compare_(double *worst, double got, double expected, double bound);
/** Random BF16 (or Float32) values in (-scale, scale). */
void fill_bf16_(uint16_t *values, size_t count, double scale);
void fill_f32_(float *values, size_t count, double scale);
/** A tensor-core sum of n products: each accumulated term errs by one ulp, g(n) = 2 n u / (1 - 2 n u). */
double tensor_gamma_(double terms);

#endif
