/*  file.c: reading a whole file (file.h). */
#include "core/file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/status.h"

uform_status_t uform_file_read(char const *path, unsigned char **data, size_t *size) {
    *data = NULL, *size = 0;
    struct stat status_buffer;
    if (stat(path, &status_buffer) == 0 && !S_ISREG(status_buffer.st_mode))
        return uform_fail(uform_io_k, "%s: not a regular file", path); /* a folder's ftell reports LONG_MAX */
    FILE *file = fopen(path, "rb");
    if (!file) return uform_fail(uform_io_k, "%s: cannot open: %s", path, strerror(errno));
    long length = -1;
    if (fseek(file, 0, SEEK_END) == 0) length = ftell(file);
    if (length < 0 || fseek(file, 0, SEEK_SET) != 0) {
        fclose(file);
        return uform_fail(uform_io_k, "%s: cannot find its size (not a regular file?)", path);
    }
    unsigned char *bytes = malloc(length ? (size_t)length : 1);
    if (!bytes) {
        fclose(file);
        return uform_fail(uform_out_of_memory_k, "%s: cannot hold %ld bytes in memory", path, length);
    }
    size_t read = fread(bytes, 1, (size_t)length, file);
    int failed = ferror(file);
    fclose(file);
    if (failed || read != (size_t)length) {
        free(bytes);
        return uform_fail(uform_io_k, "%s: read %zu of %ld bytes", path, read, length);
    }
    *data = bytes, *size = (size_t)length;
    return uform_ok_k;
}
