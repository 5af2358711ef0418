/*  safetensors.h: a validating SafeTensors reader, over memory or a mapped file, and an atomic writer.
 *  Format: 8-byte little-endian header length, a JSON header, then raw little-endian data. */
#ifndef UFORM_MODEL_SAFETENSORS_H
#define UFORM_MODEL_SAFETENSORS_H

#include <jansson.h>
#include <stddef.h>

#include "uform/types.h"

typedef enum uform_dtype_t {
    uform_dtype_bf16_k = 0,
    uform_dtype_f32_k = 1,
    uform_dtype_e4m3_k = 2, /* F8_E4M3: a matrix stored with a Float32 scale per row beside it (docs/checkpoints.md) */
} uform_dtype_t;

enum { uform_max_rank_k = 4, uform_max_name_k = 128 };

typedef struct uform_tensor_view_t {
    char name[uform_max_name_k];
    uform_dtype_t dtype;
    size_t rank;
    size_t shape[uform_max_rank_k];
    void const *data;
    size_t bytes;
} uform_tensor_view_t;

typedef struct uform_safetensors_t {
    char path[4096];
    void *map;
    size_t map_bytes;
    uform_tensor_view_t *tensors;
    size_t count;
    json_t *metadata; /* the __metadata__ object (string values), or NULL */
} uform_safetensors_t;

/** Maps and validates the whole file; every failure names `path` and the problem. */
uform_status_t uform_safetensors_open(char const *path, uform_safetensors_t *file);
/** The same over `size` bytes the caller holds, unchanged, until close (which does not free them);
 *  `path` only names them in messages. The views point into `bytes`. */
uform_status_t uform_safetensors_parse(char const *path, void const *bytes, size_t size, uform_safetensors_t *file);
void uform_safetensors_close(uform_safetensors_t *file);
uform_tensor_view_t const *uform_safetensors_find(uform_safetensors_t const *file, char const *name);

/** Writes `count` tensors and the string-valued `metadata` object (may be NULL) to `path`
 *  through a temporary file, fsync and rename, so that `path` is never seen half-written. */
uform_status_t uform_safetensors_write(char const *path, uform_tensor_view_t const *tensors, size_t count,
                                       json_t const *metadata);

/** The size in bytes of the file uform_safetensors_write would write for these arguments. */
uform_status_t uform_safetensors_size(uform_tensor_view_t const *tensors, size_t count, json_t const *metadata,
                                      size_t *bytes);

/** Writes `bytes` to `path` atomically (temporary name, fsync, rename, fsync of the folder). */
uform_status_t uform_write_atomic(char const *path, void const *data, size_t bytes);

size_t uform_dtype_size(uform_dtype_t dtype);
/** The dtype's name in a SafeTensors header: "BF16", "F32" or "F8_E4M3". */
char const *uform_dtype_name(uform_dtype_t dtype);
size_t uform_tensor_elements(uform_tensor_view_t const *tensor);

#endif
