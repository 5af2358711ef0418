/*  safetensors.c: reading from memory or through mmap with every header field checked, writing atomically. */
#define _GNU_SOURCE
#include "model/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/status.h"

enum { uform_max_header_bytes_k = 100 * 1024 * 1024 };

size_t uform_dtype_size(uform_dtype_t dtype) { return dtype == uform_dtype_bf16_k ? 2 : dtype == uform_dtype_e4m3_k ? 1 : 4; }

char const *uform_dtype_name(uform_dtype_t dtype) {
    return dtype == uform_dtype_bf16_k ? "BF16" : dtype == uform_dtype_e4m3_k ? "F8_E4M3" : "F32";
}

size_t uform_tensor_elements(uform_tensor_view_t const *tensor) {
    size_t elements = 1;
    for (size_t i = 0; i < tensor->rank; ++i) elements *= tensor->shape[i];
    return elements;
}

/* a * b, or SIZE_MAX where that overflows: no buffer holds SIZE_MAX bytes, so a saturated size never matches. */
static size_t uform_multiply_saturating_(size_t a, size_t b) { return b && a > SIZE_MAX / b ? SIZE_MAX : a * b; }

static int uform_compare_offsets_(void const *a, void const *b) {
    uform_tensor_view_t const *x = a, *y = b;
    return x->data < y->data ? -1 : x->data > y->data;
}

void uform_safetensors_close(uform_safetensors_t *file) {
    if (!file) return;
    if (file->map) munmap(file->map, file->map_bytes);
    free(file->tensors);
    if (file->metadata) json_decref(file->metadata);
    memset(file, 0, sizeof(*file));
}

/* Parses one tensor entry of the header; `data` and `data_bytes` bound the data section. */
static uform_status_t uform_parse_entry_(char const *path, char const *name, json_t const *entry,
                                         unsigned char const *data, size_t data_bytes, uform_tensor_view_t *tensor) {
    if (strlen(name) >= uform_max_name_k)
        return uform_fail(uform_format_k, "%s: tensor name longer than %d bytes", path, uform_max_name_k - 1);
    strcpy(tensor->name, name);
    if (!json_is_object(entry)) return uform_fail(uform_format_k, "%s: tensor '%s' is not a JSON object", path, name);
    char const *dtype = json_string_value(json_object_get(entry, "dtype"));
    json_t const *shape = json_object_get(entry, "shape");
    json_t const *offsets = json_object_get(entry, "data_offsets");
    if (!dtype || !json_is_array(shape) || !json_is_array(offsets) || json_array_size(offsets) != 2)
        return uform_fail(uform_format_k, "%s: tensor '%s' needs string 'dtype', array 'shape' and two 'data_offsets'",
                          path, name);
    if (!strcmp(dtype, "BF16")) tensor->dtype = uform_dtype_bf16_k;
    else if (!strcmp(dtype, "F32")) tensor->dtype = uform_dtype_f32_k;
    else if (!strcmp(dtype, "F8_E4M3")) tensor->dtype = uform_dtype_e4m3_k;
    else return uform_fail(uform_format_k, "%s: tensor '%s' has dtype %s; UForm reads BF16, F32 and F8_E4M3", path, name, dtype);
    tensor->rank = json_array_size(shape);
    if (tensor->rank > uform_max_rank_k)
        return uform_fail(uform_format_k, "%s: tensor '%s' has rank %zu, more than %d", path, name, tensor->rank,
                          uform_max_rank_k);
    size_t elements = 1;
    for (size_t i = 0; i < tensor->rank; ++i) {
        json_t const *extent = json_array_get(shape, i);
        if (!json_is_integer(extent) || json_integer_value(extent) < 0 || json_integer_value(extent) > (1ll << 40))
            return uform_fail(uform_format_k, "%s: tensor '%s' has a bad extent in its shape", path, name);
        tensor->shape[i] = (size_t)json_integer_value(extent);
        elements = uform_multiply_saturating_(elements, tensor->shape[i]); /* four extents of 2^40 would wrap */
    }
    json_t const *begin = json_array_get(offsets, 0), *end = json_array_get(offsets, 1);
    if (!json_is_integer(begin) || !json_is_integer(end) || json_integer_value(begin) < 0 ||
        json_integer_value(end) < json_integer_value(begin))
        return uform_fail(uform_format_k, "%s: tensor '%s' has malformed data_offsets", path, name);
    size_t first = (size_t)json_integer_value(begin), last = (size_t)json_integer_value(end);
    if (last > data_bytes)
        return uform_fail(uform_format_k,
                          "%s: tensor '%s' ends at byte %zu of a %zu-byte data section (file truncated?)", path, name,
                          last, data_bytes);
    tensor->bytes = last - first;
    size_t const needed = uform_multiply_saturating_(elements, uform_dtype_size(tensor->dtype));
    if (needed == SIZE_MAX)
        return uform_fail(uform_format_k, "%s: tensor '%s' has a shape of more bytes than memory holds", path, name);
    if (tensor->bytes != needed)
        return uform_fail(uform_format_k, "%s: tensor '%s' holds %zu bytes but its shape and dtype need %zu", path,
                          name, tensor->bytes, needed);
    tensor->data = data + first;
    return uform_ok_k;
}

uform_status_t uform_safetensors_parse(char const *path, void const *bytes, size_t size, uform_safetensors_t *file) {
    memset(file, 0, sizeof(*file));
    if (!path || (!bytes && size))
        return uform_fail(uform_invalid_argument_k, "uform_safetensors_parse: NULL path or bytes");
    snprintf(file->path, sizeof(file->path), "%s", path);
    if (size < 8)
        return uform_fail(uform_format_k, "%s: %zu bytes is too short for a SafeTensors header length", path, size);
    unsigned char const *start = bytes;
    uint64_t header_bytes = 0;
    for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | start[i];
    if (header_bytes > uform_max_header_bytes_k || header_bytes > size - 8)
        return uform_fail(uform_format_k, "%s: header claims %llu bytes but the file has %zu after the length", path,
                          (unsigned long long)header_bytes, size - 8);
    json_error_t error;
    json_t *header = json_loadb((char const *)start + 8, header_bytes, JSON_REJECT_DUPLICATES, &error);
    if (!header || !json_is_object(header)) {
        if (header) json_decref(header);
        return uform_fail(uform_format_k, "%s: header is not a JSON object (%s at byte %d)", path,
                          header ? "not an object" : error.text, header ? 0 : error.position);
    }
    unsigned char const *data = start + 8 + header_bytes;
    size_t data_bytes = size - 8 - header_bytes;
    size_t capacity = json_object_size(header);
    file->tensors = calloc(capacity ? capacity : 1, sizeof(uform_tensor_view_t));
    uform_status_t status_code = file->tensors ? uform_ok_k : uform_fail(uform_out_of_memory_k, "%s: header", path);
    char const *name;
    json_t *entry;
    json_object_foreach(header, name, entry) {
        if (status_code != uform_ok_k) break;
        if (!strcmp(name, "__metadata__")) {
            char const *key;
            json_t *value;
            if (!json_is_object(entry)) {
                status_code = uform_fail(uform_format_k, "%s: __metadata__ is not an object", path);
                break;
            }
            json_object_foreach(entry, key, value) if (!json_is_string(value)) {
                status_code = uform_fail(uform_format_k, "%s: __metadata__ value '%s' is not a string", path, key);
                break;
            }
            file->metadata = json_incref(entry);
            continue;
        }
        status_code = uform_parse_entry_(path, name, entry, data, data_bytes, &file->tensors[file->count]);
        if (status_code == uform_ok_k) file->count++;
    }
    json_decref(header);
    if (status_code == uform_ok_k && file->count > 1) {
        /* Overlap check on a sorted copy, so the tensors keep the header's order. */
        uform_tensor_view_t *sorted = malloc(file->count * sizeof(*sorted));
        if (!sorted) status_code = uform_fail(uform_out_of_memory_k, "%s: header", path);
        else {
            memcpy(sorted, file->tensors, file->count * sizeof(*sorted));
            qsort(sorted, file->count, sizeof(*sorted), uform_compare_offsets_);
            for (size_t i = 1; i < file->count && status_code == uform_ok_k; ++i)
                if ((unsigned char const *)sorted[i - 1].data + sorted[i - 1].bytes >
                    (unsigned char const *)sorted[i].data)
                    status_code = uform_fail(uform_format_k, "%s: tensors '%s' and '%s' overlap", path,
                                             sorted[i - 1].name, sorted[i].name);
            free(sorted);
        }
    }
    if (status_code != uform_ok_k) uform_safetensors_close(file);
    return status_code;
}

uform_status_t uform_safetensors_open(char const *path, uform_safetensors_t *file) {
    memset(file, 0, sizeof(*file));
    snprintf(file->path, sizeof(file->path), "%s", path);
    int descriptor = open(path, O_RDONLY | O_CLOEXEC);
    if (descriptor < 0) return uform_fail(uform_io_k, "%s: cannot open: %s", path, strerror(errno));
    struct stat status;
    if (fstat(descriptor, &status) != 0 || !S_ISREG(status.st_mode)) {
        close(descriptor);
        return uform_fail(uform_io_k, "%s: not a regular file", path);
    }
    size_t file_bytes = (size_t)status.st_size;
    /* An empty file cannot be mapped; the parse refuses it for its length. */
    void *map = file_bytes ? mmap(NULL, file_bytes, PROT_READ, MAP_PRIVATE, descriptor, 0) : NULL;
    close(descriptor);
    if (map == MAP_FAILED) return uform_fail(uform_io_k, "%s: cannot map: %s", path, strerror(errno));
    uform_status_t status_code = uform_safetensors_parse(path, map, file_bytes, file);
    if (status_code != uform_ok_k) {
        if (map) munmap(map, file_bytes);
        return status_code;
    }
    file->map = map; /* the views point into it: close unmaps it */
    file->map_bytes = file_bytes;
    return uform_ok_k;
}

uform_tensor_view_t const *uform_safetensors_find(uform_safetensors_t const *file, char const *name) {
    for (size_t i = 0; i < file->count; ++i)
        if (!strcmp(file->tensors[i].name, name)) return &file->tensors[i];
    return NULL;
}

static uform_status_t uform_write_all_(int descriptor, char const *path, void const *data, size_t bytes) {
    unsigned char const *cursor = data;
    while (bytes) {
        ssize_t written = write(descriptor, cursor, bytes);
        if (written < 0 && errno == EINTR) continue;
        if (written <= 0) return uform_fail(uform_io_k, "%s: write failed: %s", path, strerror(errno));
        cursor += written;
        bytes -= (size_t)written;
    }
    return uform_ok_k;
}

/* Opens a fresh temporary file beside `path`; the caller renames it into place. */
static uform_status_t uform_open_temporary_(char const *path, char *temporary, size_t capacity, int *descriptor) {
    snprintf(temporary, capacity, "%s.tmp.%ld", path, (long)getpid());
    *descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (*descriptor < 0) return uform_fail(uform_io_k, "%s: cannot create: %s", temporary, strerror(errno));
    return uform_ok_k;
}

static uform_status_t uform_commit_temporary_(int descriptor, char const *temporary, char const *path) {
    if (fsync(descriptor) != 0) {
        close(descriptor);
        unlink(temporary);
        return uform_fail(uform_io_k, "%s: fsync failed: %s", temporary, strerror(errno));
    }
    close(descriptor);
    if (rename(temporary, path) != 0) {
        unlink(temporary);
        return uform_fail(uform_io_k, "%s: cannot rename into place: %s", path, strerror(errno));
    }
    char folder[4096];
    snprintf(folder, sizeof(folder), "%s", path);
    int folder_descriptor = open(dirname(folder), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (folder_descriptor >= 0) {
        fsync(folder_descriptor); /* makes the rename itself durable */
        close(folder_descriptor);
    }
    return uform_ok_k;
}

uform_status_t uform_write_atomic(char const *path, void const *data, size_t bytes) {
    char temporary[4200];
    int descriptor;
    UFORM_TRY(uform_open_temporary_(path, temporary, sizeof(temporary), &descriptor));
    uform_status_t status = uform_write_all_(descriptor, temporary, data, bytes);
    if (status != uform_ok_k) {
        close(descriptor);
        unlink(temporary);
        return status;
    }
    return uform_commit_temporary_(descriptor, temporary, path);
}

/* The header uform_safetensors_write writes for these tensors (the caller frees it), unpadded. */
static uform_status_t uform_header_text_(char const *path, uform_tensor_view_t const *tensors, size_t count,
                                         json_t const *metadata, char **text) {
    json_t *header = json_object();
    if (!header) return uform_fail(uform_out_of_memory_k, "%s: header", path);
    if (metadata) json_object_set(header, "__metadata__", (json_t *)metadata);
    size_t offset = 0;
    for (size_t i = 0; i < count; ++i) {
        json_t *shape = json_array();
        for (size_t r = 0; r < tensors[i].rank; ++r) json_array_append_new(shape, json_integer((json_int_t)tensors[i].shape[r]));
        json_t *entry = json_pack("{s:s, s:o, s:[I,I]}", "dtype", uform_dtype_name(tensors[i].dtype),
                                  "shape", shape, "data_offsets", (json_int_t)offset,
                                  (json_int_t)(offset + tensors[i].bytes));
        if (!entry || json_object_set_new(header, tensors[i].name, entry) != 0) {
            json_decref(header);
            return uform_fail(uform_out_of_memory_k, "%s: header", path);
        }
        offset += tensors[i].bytes;
    }
    *text = json_dumps(header, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(header);
    return *text ? uform_ok_k : uform_fail(uform_out_of_memory_k, "%s: header", path);
}

static size_t uform_padded_(size_t text_bytes) { return (text_bytes + 7) & ~(size_t)7; /* data starts 8-aligned */ }

uform_status_t uform_safetensors_size(uform_tensor_view_t const *tensors, size_t count, json_t const *metadata,
                                      size_t *bytes) {
    char *text;
    UFORM_TRY(uform_header_text_("uform_safetensors_size", tensors, count, metadata, &text));
    *bytes = 8 + uform_padded_(strlen(text));
    for (size_t i = 0; i < count; ++i) *bytes += tensors[i].bytes;
    free(text);
    return uform_ok_k;
}

uform_status_t uform_safetensors_write(char const *path, uform_tensor_view_t const *tensors, size_t count,
                                       json_t const *metadata) {
    char *text;
    UFORM_TRY(uform_header_text_(path, tensors, count, metadata, &text));
    size_t text_bytes = strlen(text), padded = uform_padded_(text_bytes);
    unsigned char prefix[8];
    for (int i = 0; i < 8; ++i) prefix[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    char temporary[4200];
    int descriptor;
    uform_status_t status = uform_open_temporary_(path, temporary, sizeof(temporary), &descriptor);
    if (status == uform_ok_k) {
        static char const spaces[8] = "        ";
        status = uform_write_all_(descriptor, temporary, prefix, 8);
        if (status == uform_ok_k) status = uform_write_all_(descriptor, temporary, text, text_bytes);
        if (status == uform_ok_k) status = uform_write_all_(descriptor, temporary, spaces, padded - text_bytes);
        for (size_t i = 0; i < count && status == uform_ok_k; ++i)
            status = uform_write_all_(descriptor, temporary, tensors[i].data, tensors[i].bytes);
        if (status == uform_ok_k) status = uform_commit_temporary_(descriptor, temporary, path);
        else {
            close(descriptor);
            unlink(temporary);
        }
    }
    free(text);
    return status;
}
