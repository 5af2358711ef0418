/*  shards.h (internal): a checkpoint's tensors in one SafeTensors file or in Hugging Face's sharded
 *  layout (model-0000N-of-0000M.safetensors beside model.safetensors.index.json), read and written. */
#ifndef UFORM_MODEL_SHARDS_H
#define UFORM_MODEL_SHARDS_H

#include <jansson.h>
#include <stddef.h>

#include "model/safetensors.h"

#define UFORM_SHARDS_INDEX "model.safetensors.index.json"

typedef struct uform_shards_t {
    char path[4096];            /* the single file or the index: what messages about the whole checkpoint name */
    uform_safetensors_t *files; /* [count], each opened by uform_safetensors_open */
    size_t count;
} uform_shards_t;

/** Opens `path`: a SafeTensors file, or an index (a name ending in `.index.json`) and every shard
 *  its weight_map names, checking that index and shards agree tensor by tensor and that every shard
 *  carries the same `config`. Every failure names the file and the problem. */
uform_status_t uform_shards_open(char const *path, uform_shards_t *shards);
void uform_shards_close(uform_shards_t *shards);
/** The tensor called `name` and, in `*file` (may be NULL), the file holding it; NULL where none does. */
uform_tensor_view_t const *uform_shards_find(uform_shards_t const *shards, char const *name,
                                             uform_safetensors_t const **file);

/** Writes `tensors`, in order, into the existing folder `directory` as shards of at most `max_bytes`
 *  bytes each (a tensor that alone exceeds it gets a shard of its own and a warning on stderr), each
 *  carrying `metadata`, then the index (metadata with total_size, and the weight_map), every file
 *  atomically, the index last; then removes shards of an earlier layout the new index does not name. */
uform_status_t uform_shards_write(char const *directory, uform_tensor_view_t const *tensors, size_t count,
                                  json_t const *metadata, size_t max_bytes);

#endif
