/*  check.h: the counting CHECK of the C test programs; each ends with `return check_report();`,
 *  which prints the "N passed, M failed" line CI reads. */
#ifndef UFORM_TEST_CHECK_H
#define UFORM_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* A failure with an expected status whose message contains every given fragment. */
static inline int fails_with(uform_status_t status, uform_status_t expected, char const *first, char const *second) {
    char const *message = uform_last_error();
    int ok = status == expected && strstr(message, first) && (!second || strstr(message, second));
    if (!ok)
        fprintf(stderr, "  got status %d, message \"%s\"; wanted %d with '%s'%s%s\n", status, message, expected, first,
                second ? " and " : "", second ? second : "");
    return ok;
}

/* A scratch folder for the files a test writes: made by scratch_open, removed by scratch_close. */
static char folder_[256];

static inline int scratch_open(char const *name) {
    snprintf(folder_, sizeof(folder_), "/tmp/%s_XXXXXX", name);
    if (mkdtemp(folder_)) return 1;
    perror("mkdtemp");
    return 0;
}

static inline void scratch_close(void) {
    char command[600];
    snprintf(command, sizeof(command), "rm -rf '%s'", folder_);
    if (system(command) != 0) fprintf(stderr, "could not remove %s\n", folder_);
}

/* The path of `name` in the scratch folder; eight stay valid at once. */
static inline char const *path_in(char const *name) {
    static char paths[8][512];
    static int next;
    char *path = paths[next++ % 8];
    snprintf(path, 512, "%s/%s", folder_, name);
    return path;
}

static inline void write_file(char const *name, void const *bytes, size_t length) {
    FILE *file = fopen(path_in(name), "wb");
    if (!file || fwrite(bytes, 1, length, file) != length) {
        fprintf(stderr, "cannot write %s\n", path_in(name));
        exit(2);
    }
    fclose(file);
}

static inline int check_report(void) {
    printf("%d passed, %d failed\n", passed_, failed_);
    return failed_ ? 1 : 0;
}

#endif
