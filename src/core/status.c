/*  status.c: status names and the per-thread last-error message. */
#include "core/status.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char uform_error_message_[1024] = "";

char const *uform_status_name(uform_status_t status) {
    switch (status) {
    case uform_ok_k: return "ok";
    case uform_invalid_argument_k: return "invalid argument";
    case uform_io_k: return "input/output";
    case uform_format_k: return "format";
    case uform_shape_k: return "shape";
    case uform_missing_k: return "missing";
    case uform_out_of_memory_k: return "out of memory";
    case uform_unsupported_k: return "unsupported";
    case uform_device_k: return "device";
    }
    return "unknown";
}

char const *uform_last_error(void) { return uform_error_message_; }

char const *uform_version(void) { return UFORM_VERSION_STRING; }

uform_status_t uform_fail(uform_status_t status, char const *format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(uform_error_message_, sizeof(uform_error_message_), format, args);
    va_end(args);
    return status;
}
