/*  plant.c: the planted-control switch of the uform_cuda_plants build (plant.h): one control at a time. */
#include "cuda/plant.h"

#include <stdio.h>
#include <string.h>

static char uform_planted_entry_[64];
static int uform_plant_;

void uform_cuda_plant_set(char const *entry, int plant) {
    uform_plant_ = entry ? plant : 0;
    snprintf(uform_planted_entry_, sizeof(uform_planted_entry_), "%s", uform_plant_ ? entry : "");
}

int uform_cuda_planted(char const *entry) {
    return uform_plant_ && !strcmp(entry, uform_planted_entry_) ? uform_plant_ : 0;
}
