/*  status.h: recording a failure with a readable message, and the early-return helper. */
#ifndef UFORM_CORE_STATUS_H
#define UFORM_CORE_STATUS_H

#include "uform/types.h"

#define UFORM_VERSION_STRING "0.1.0"

/** Records a printf-style message for `uform_last_error()` and returns `status`. */
uform_status_t uform_fail(uform_status_t status, char const *format, ...) __attribute__((format(printf, 2, 3)));

#define UFORM_TRY(expression)                                                                                       \
    do {                                                                                                            \
        uform_status_t uform_try_status_ = (expression);                                                            \
        if (uform_try_status_ != uform_ok_k) return uform_try_status_;                                              \
    } while (0)

#endif
