/*  check.h (internal): a CUDA runtime result in the backend's convention (error.h), for the kernel
 *  files and the host units alike: a status of types.h, and on failure a noted message naming where
 *  (the entry point or step), the call and CUDA's error. */
#ifndef UFORM_CUDA_CHECK_H
#define UFORM_CUDA_CHECK_H

#include <cuda_runtime_api.h>

#include "cuda/error.h"

/** uform_ok_k, else out_of_memory (cudaErrorMemoryAllocation) or device, noting "where: call failed: cudaErrorName (text)". */
static inline uform_status_t uform_cuda_check(cudaError_t code, char const *where, char const *call) {
    if (code == cudaSuccess) return uform_ok_k;
    if (code == cudaErrorMemoryAllocation) cudaGetLastError(); /* not sticky: the next launch's check must not report it */
    return uform_cuda_note(code == cudaErrorMemoryAllocation ? uform_out_of_memory_k : uform_device_k,
                           "%s: %s failed: %s (%s)", where, call, cudaGetErrorName(code), cudaGetErrorString(code));
}

/** The status of the kernels entry point `entry` has just launched. */
static inline uform_status_t uform_cuda_launched(char const *entry) {
    return uform_cuda_check(cudaGetLastError(), entry, "launch");
}

#endif
