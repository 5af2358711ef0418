/*  cuda_ok.h: the CUDA test programs' one way to stop on a failed call, naming it and where. */
#ifndef UFORM_TEST_CUDA_OK_H
#define UFORM_TEST_CUDA_OK_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CUDA_OK(call)                                                                                                 \
    do {                                                                                                              \
        int status_ = (int)(call);                                                                                    \
        if (status_) {                                                                                                \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString((cudaError_t)status_)); \
            exit(1);                                                                                                  \
        }                                                                                                             \
    } while (0)

#endif
