/*  plant.h (internal): the contract suite's planted controls, copies of a kernel entry point with
 *  one deliberate break (test/cuda/contract.c, step_parity.c), selected by the entry's name. Only
 *  the uform_cuda_plants build (UFORM_CUDA_PLANTS) has them: in production a plant is the constant
 *  0, so no planted branch is compiled. C, C++ and CUDA. */
#ifndef UFORM_CUDA_PLANT_H
#define UFORM_CUDA_PLANT_H

#if defined(UFORM_CUDA_PLANTS)
#ifdef __cplusplus
extern "C" {
#endif
/** Plants control `plant` in the entry point named `entry` (cuda.h's name less uform_cuda_, e.g.
 *  "embed_forward"), replacing any other; plant 0 or a NULL entry clears it. */
void uform_cuda_plant_set(char const *entry, int plant);
/** The plant set for `entry`, else 0. */
int uform_cuda_planted(char const *entry);
#ifdef __cplusplus
}
#endif
/* Whether control `number` is planted, where an `int plant` (from uform_cuda_planted) is in scope. */
#define UFORM_PLANTED(number) (plant == (number))
#else
#define uform_cuda_planted(entry) 0
#define UFORM_PLANTED(number) 0
#endif

#ifdef __cplusplus
extern "C" {
#endif
/** uform_cuda_planted for the host units built once for both flavours (uform_cuda_host, e.g. cudnn_attention.cpp),
 *  where the macro above would always be 0: the linked flavour's plant_host.c answers (0 in production). */
int uform_cuda_host_planted(char const *entry);
#ifdef __cplusplus
}
#endif

#endif
