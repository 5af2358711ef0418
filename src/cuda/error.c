/*  error.c: the CUDA backend's failure messages (error.h); free of CUDA headers, so the CPU-only
 *  build compiles it too. */
#include "cuda/error.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char uform_cuda_noted_[uform_cuda_note_bytes_k] = "";

uform_status_t uform_cuda_fail(char *error, size_t size, uform_status_t status, char const *format, ...) {
    if (error && size) {
        va_list arguments;
        va_start(arguments, format);
        vsnprintf(error, size, format, arguments);
        va_end(arguments);
    }
    return status;
}

char *uform_cuda_note_buffer(void) { return uform_cuda_noted_; }

char const *uform_cuda_noted(void) { return uform_cuda_noted_; }
