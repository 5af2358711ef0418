/*  cuda_ok.h: the CUDA test programs' and benchmarks' one way to stop on a failed call, naming it and
 *  where: CUDA_OK for a CUDA runtime call, KERNEL_OK for an entry point of src/cuda (cuda.h,
 *  cudnn_attention.h), whose status comes with a noted message. */
#ifndef UFORM_TEST_CUDA_OK_H
#define UFORM_TEST_CUDA_OK_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda/error.h"

static inline void cuda_ok_stop_(char const *file, int line, char const *call, char const *why) {
    fprintf(stderr, "%s:%d: %s failed: %s\n", file, line, call, why);
    exit(1);
}

#define CUDA_OK(call)                                                                                                 \
    do {                                                                                                              \
        cudaError_t status_ = (call);                                                                                 \
        if (status_ != cudaSuccess) cuda_ok_stop_(__FILE__, __LINE__, #call, cudaGetErrorString(status_));            \
    } while (0)

#define KERNEL_OK(call)                                                                                               \
    do {                                                                                                              \
        if ((call) != uform_ok_k) cuda_ok_stop_(__FILE__, __LINE__, #call, uform_cuda_noted());                       \
    } while (0)

#endif
