/*  listed.h: the benchmarks' comma-separated choices (--kernels, --precisions, --schemes). */
#ifndef UFORM_BENCH_LISTED_H
#define UFORM_BENCH_LISTED_H

#include <string.h>

/* Whether `name` is in the comma-separated `list` (every name where `list` is NULL). */
static inline int uform_listed(char const *list, char const *name) {
    if (!list) return 1;
    size_t length = strlen(name);
    for (char const *found = strstr(list, name); found; found = strstr(found + 1, name))
        if ((found == list || found[-1] == ',') && (found[length] == ',' || !found[length])) return 1;
    return 0;
}

#endif
