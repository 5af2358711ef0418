/*  error.c: the CUDA backend's failure messages (error.h). */
#include "cuda/error.h"

#include <stdarg.h>
#include <stdio.h>

uform_status_t uform_cuda_fail(char *error, size_t size, uform_status_t status, char const *format, ...) {
    if (error && size) {
        va_list arguments;
        va_start(arguments, format);
        vsnprintf(error, size, format, arguments);
        va_end(arguments);
    }
    return status;
}
