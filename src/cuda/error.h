/*  error.h (internal): how the CUDA backend's host code reports a failure: a status of types.h
 *  and a message, naming the call and the kernel or step, in the caller's buffer (the library turns
 *  it into uform_last_error's message; the CUDA units never touch that thread-local themselves). */
#ifndef UFORM_CUDA_ERROR_H
#define UFORM_CUDA_ERROR_H

#include <stddef.h>

#include "uform/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Writes the printf-style message into `error` (of `size` bytes; NULL or 0 writes nothing), returns `status`. */
uform_status_t uform_cuda_fail(char *error, size_t size, uform_status_t status, char const *format, ...)
    __attribute__((format(printf, 4, 5)));

#ifdef __cplusplus
}
#endif
#endif
