/*  plant_host.c: uform_cuda_host_planted (plant.h), built in both flavours of the kernels so that the host
 *  units, built once, see the plants of the flavour they are linked into. */
#include "cuda/plant.h"

int uform_cuda_host_planted(char const *entry) {
    (void)entry;
    return uform_cuda_planted(entry);
}
