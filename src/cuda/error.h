/*  error.h (internal): how the CUDA backend reports a failure: a status of types.h and a message
 *  naming the call and the kernel or step. Kernel entry points (cuda.h, cudnn_attention.h) note it
 *  in a thread-local buffer their callers read; host code that takes an error buffer writes it there
 *  (the library turns it into uform_last_error's message; the CUDA units never touch that themselves). */
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
/** The calling thread's last noted message ("" before any): the entry point, the call and its error. */
char const *uform_cuda_noted(void);
/** The calling thread's note, uform_cuda_note_bytes_k bytes, which uform_cuda_note writes. */
enum { uform_cuda_note_bytes_k = 512 };
char *uform_cuda_note_buffer(void);
/** uform_cuda_note(status, format, ...): notes the printf-style message for uform_cuda_noted, returns `status`. */
#define uform_cuda_note(...) uform_cuda_fail(uform_cuda_note_buffer(), uform_cuda_note_bytes_k, __VA_ARGS__)

#ifdef __cplusplus
}
#endif
#endif
