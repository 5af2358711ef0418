/*  contract.h: what every file of the CUDA kernel contract suite shares: the host pieces of
 *  contract_host.h, device buffers and the record step that folds each kernel's worst error /
 *  bound into its report line (definitions in contract.c). */
#ifndef UFORM_TEST_CUDA_CONTRACT_H
#define UFORM_TEST_CUDA_CONTRACT_H

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract_host.h"
#include "cuda/cuda.h"
#include "cuda/plant.h"
#include "cuda_ok.h"

void *device_(size_t bytes);
void upload_(void *target, void const *source, size_t bytes);
void download_(void *target, void const *source, size_t bytes);
/** Records a kernel's worst ratio; with plant > 0 it is a control, which passes when the check rejects it. */
void record_(char const *name, double worst, int plant);

/** KERNEL_OK(call) with control `plant` (0: none) planted in the entry point named `entry` for that call alone. */
#define PLANTED_OK(entry, plant, call)                                                                                \
    do {                                                                                                              \
        uform_cuda_plant_set((entry), (plant));                                                                       \
        KERNEL_OK(call);                                                                                              \
        uform_cuda_plant_set(NULL, 0);                                                                                \
    } while (0)

/* The loss heads' checks (contract_objectives.c); plant as the groups table of contract.c's main. */
void check_siglip_(int plant);
void check_maxsim_(int plant);
void check_spectral_(int plant);
/* The media frontends' and the masked modelling heads' (contract_frontend.c). */
void check_image_(int plant);
void check_video_(int plant);
void check_audio_(int plant);
void check_mae_(int plant);
void check_mae_audio_(int plant);
void check_mae_video_(int plant);

#endif
