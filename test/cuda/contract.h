/*  contract.h: what every file of the CUDA kernel contract suite shares: unit roundoffs, the
 *  seeded generator, BF16 conversions, device buffers and the compare/record pair that folds each
 *  element's error / bound into a kernel's report line (definitions in contract.c). */
#ifndef UFORM_TEST_CUDA_CONTRACT_H
#define UFORM_TEST_CUDA_CONTRACT_H

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda.h"

#define unit_ (1.0 / 16777216.0)  /* Float32 unit roundoff, 2^-24 */
#define bf16_unit_ (1.0 / 256.0)  /* BF16 unit roundoff, 2^-8 (8 significant bits) */

#include "cuda_ok.h"

/** SplitMix64 uniform in (-1, 1). */
double uniform_(void);
float bf16_to_f32_(uint16_t value);
uint16_t f32_to_bf16_(float value);
void *device_(size_t bytes);
void upload_(void *target, void const *source, size_t bytes);
void download_(void *target, void const *source, size_t bytes);
/** Folds one element into a running worst ratio; a NaN or an error with a zero bound counts as infinite. */
void compare_(double *worst, double got, double expected, double bound);
/** Records a kernel's worst ratio; with plant > 0 it is a control, which passes when the check rejects it. */
void record_(char const *name, double worst, int plant);
/** Random BF16 (or Float32) values in (-scale, scale). */
void fill_bf16_(uint16_t *values, size_t count, double scale);
void fill_f32_(float *values, size_t count, double scale);

/* The loss heads' checks (contract_objectives.c); plant as the groups table of contract.c's main. */
void check_siglip_(int plant);
void check_maxsim_(int plant);
void check_spectral_(int plant);

#endif
