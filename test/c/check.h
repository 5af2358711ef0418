/*  check.h: the counting CHECK of the C test programs; each ends with `return check_report();`,
 *  which prints the "N passed, M failed" line CI reads. */
#ifndef UFORM_TEST_CHECK_H
#define UFORM_TEST_CHECK_H

#include <stdio.h>

#include "uform/types.h"

static int passed_, failed_;

/* On failure, also prints the library's last message, which usually says why. */
#define CHECK(condition)                                                                                              \
    do {                                                                                                              \
        if (condition) passed_++;                                                                                     \
        else {                                                                                                        \
            failed_++;                                                                                                \
            fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__, __LINE__, #condition,             \
                    uform_last_error());                                                                              \
        }                                                                                                             \
    } while (0)

static inline int check_report(void) {
    printf("%d passed, %d failed\n", passed_, failed_);
    return failed_ ? 1 : 0;
}

#endif
