/*  shards.c: the sharded SafeTensors layout: the index checked against every shard it names, and the
 *  writer that packs tensors greedily, in checkpoint order, into shards under a size limit. */
#define _GNU_SOURCE
#include "model/shards.h"

#include <dirent.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/file.h"
#include "core/status.h"

enum { uform_max_shards_k = 99999 }; /* the five digits of model-NNNNN-of-MMMMM */

void uform_shards_close(uform_shards_t *shards) {
    if (!shards) return;
    for (size_t i = 0; shards->files && i < shards->count; ++i) uform_safetensors_close(&shards->files[i]);
    free(shards->files);
    memset(shards, 0, sizeof(*shards));
}

uform_tensor_view_t const *uform_shards_find(uform_shards_t const *shards, char const *name,
                                             uform_safetensors_t const **file) {
    for (size_t i = 0; i < shards->count; ++i) {
        uform_tensor_view_t const *tensor = uform_safetensors_find(&shards->files[i], name);
        if (!tensor) continue;
        if (file) *file = &shards->files[i];
        return tensor;
    }
    return NULL;
}

static int uform_ends_with_(char const *text, char const *suffix) {
    size_t length = strlen(text), tail = strlen(suffix);
    return length >= tail && !strcmp(text + length - tail, suffix);
}

/* A shard is a plain file name in the index's folder: no path can reach outside it. */
static int uform_plain_name_(char const *name) {
    return *name && !strchr(name, '/') && strcmp(name, ".") && strcmp(name, "..");
}

/* The file name part of a shard's path, for messages about which shard the index names. */
static char const *uform_base_name_(uform_safetensors_t const *file) {
    char const *slash = strrchr(file->path, '/');
    return slash ? slash + 1 : file->path;
}

/* Whether two config texts are the same JSON value (the same text where either does not parse). */
static int uform_same_config_(char const *a, char const *b) {
    json_t *x = json_loads(a, 0, NULL), *y = json_loads(b, 0, NULL);
    int same = x && y ? json_equal(x, y) : !strcmp(a, b);
    if (x) json_decref(x);
    if (y) json_decref(y);
    return same;
}

/* Every tensor of every shard is in the weight_map under that shard, and every shard has the first's config. */
static uform_status_t uform_check_shards_(char const *path, json_t const *map, json_t const *metadata,
                                          uform_shards_t const *shards) {
    char const *first = json_string_value(json_object_get(shards->files[0].metadata, "config"));
    for (size_t s = 0; s < shards->count; ++s) {
        uform_safetensors_t const *file = &shards->files[s];
        char const *config = json_string_value(json_object_get(file->metadata, "config"));
        if (!config)
            return uform_fail(uform_format_k, "%s: __metadata__ has no 'config' (every shard of %s carries the checkpoint's)",
                              file->path, path);
        if (!uform_same_config_(config, first))
            return uform_fail(uform_format_k, "%s: its config differs from %s's (the shards of %s must agree)", file->path,
                              shards->files[0].path, path);
        for (size_t t = 0; t < file->count; ++t) {
            char const *listed = json_string_value(json_object_get(map, file->tensors[t].name));
            if (!listed)
                return uform_fail(uform_format_k, "%s: tensor '%s' is not in the weight_map of %s", file->path,
                                  file->tensors[t].name, path);
            if (strcmp(listed, uform_base_name_(file)))
                return uform_fail(uform_format_k, "%s: tensor '%s' is also in %s, where %s puts it (a tensor lives in one shard)",
                                  file->path, file->tensors[t].name, listed, path);
        }
    }
    json_t const *indexed = json_object_get(metadata, "config");
    if (indexed && (!json_is_string(indexed) || !uform_same_config_(json_string_value(indexed), first)))
        return uform_fail(uform_format_k, "%s: metadata's config differs from the shards' (%s)", path, shards->files[0].path);
    return uform_ok_k;
}

/* Opens every shard the weight_map names, once each, in the order first named. */
static uform_status_t uform_open_named_(char const *path, json_t const *map, uform_shards_t *shards) {
    char copy[4096], folder[4096];
    snprintf(copy, sizeof(copy), "%s", path);
    snprintf(folder, sizeof(folder), "%s", dirname(copy)); /* dirname may write into copy */
    shards->files = calloc(json_object_size(map), sizeof(uform_safetensors_t));
    if (!shards->files) return uform_fail(uform_out_of_memory_k, "%s: cannot list the shards", path);
    char const *tensor;
    json_t *value;
    json_object_foreach((json_t *)map, tensor, value) {
        char const *name = json_string_value(value);
        if (!name) return uform_fail(uform_format_k, "%s: weight_map's '%s' is not a shard's file name (a string)", path, tensor);
        if (!uform_plain_name_(name))
            return uform_fail(uform_format_k, "%s: weight_map puts '%s' in '%s', which is not a file name in the index's folder",
                              path, tensor, name);
        int opened = 0;
        for (size_t s = 0; s < shards->count && !opened; ++s) opened = !strcmp(uform_base_name_(&shards->files[s]), name);
        if (opened) continue;
        char shard[8192];
        if (snprintf(shard, sizeof(shard), "%s/%s", folder, name) >= (int)sizeof(shard))
            return uform_fail(uform_invalid_argument_k, "%s: path of shard '%s' too long", path, name);
        uform_status_t status = uform_safetensors_open(shard, &shards->files[shards->count]);
        if (status != uform_ok_k) {
            char reason[1024];
            snprintf(reason, sizeof(reason), "%s", uform_last_error());
            return uform_fail(status, "%s (a shard named by %s)", reason, path);
        }
        shards->count++;
    }
    json_object_foreach((json_t *)map, tensor, value) {
        uform_safetensors_t const *holder = NULL;
        for (size_t s = 0; s < shards->count && !holder; ++s)
            if (!strcmp(uform_base_name_(&shards->files[s]), json_string_value(value))) holder = &shards->files[s];
        if (holder && !uform_safetensors_find(holder, tensor))
            return uform_fail(uform_missing_k, "%s: weight_map puts tensor '%s' in %s, which does not hold it", path, tensor,
                              holder->path);
    }
    return uform_ok_k;
}

static uform_status_t uform_open_index_(char const *path, uform_shards_t *shards) {
    unsigned char *bytes;
    size_t size;
    UFORM_TRY(uform_file_read(path, &bytes, &size));
    json_error_t error;
    json_t *index = json_loadb((char const *)bytes, size, JSON_REJECT_DUPLICATES, &error);
    free(bytes);
    if (!index) return uform_fail(uform_format_k, "%s: index is not JSON (%s at line %d)", path, error.text, error.line);
    if (!json_is_object(index)) {
        json_decref(index);
        return uform_fail(uform_format_k, "%s: index is not a JSON object", path);
    }
    json_t const *map = json_object_get(index, "weight_map"), *metadata = json_object_get(index, "metadata");
    uform_status_t status = uform_ok_k;
    if (!json_is_object(map)) status = uform_fail(uform_format_k, "%s: 'weight_map' is missing or not an object", path);
    else if (!json_object_size(map)) status = uform_fail(uform_format_k, "%s: 'weight_map' names no tensors", path);
    else if (metadata && !json_is_object(metadata)) status = uform_fail(uform_format_k, "%s: 'metadata' is not an object", path);
    if (status == uform_ok_k) status = uform_open_named_(path, map, shards);
    if (status == uform_ok_k) status = uform_check_shards_(path, map, metadata, shards);
    json_decref(index);
    return status;
}

uform_status_t uform_shards_open(char const *path, uform_shards_t *shards) {
    memset(shards, 0, sizeof(*shards));
    if (!path) return uform_fail(uform_invalid_argument_k, "uform_shards_open: NULL path");
    snprintf(shards->path, sizeof(shards->path), "%s", path);
    uform_status_t status;
    if (uform_ends_with_(path, ".index.json")) status = uform_open_index_(path, shards);
    else {
        shards->files = calloc(1, sizeof(uform_safetensors_t));
        status = shards->files ? uform_safetensors_open(path, shards->files) : uform_fail(uform_out_of_memory_k, "%s", path);
        shards->count = status == uform_ok_k;
    }
    if (status != uform_ok_k) uform_shards_close(shards);
    return status;
}

/* Removes model-NNNNN-of-MMMMM.safetensors files that a layout of `shards` shards does not name. */
static void uform_remove_stale_(char const *directory, size_t shards) {
    DIR *folder = opendir(directory);
    if (!folder) return;
    struct dirent *entry;
    while ((entry = readdir(folder))) {
        unsigned number, total;
        char tail[16] = "";
        if (strlen(entry->d_name) != strlen("model-00001-of-00001.safetensors") ||
            sscanf(entry->d_name, "model-%5u-of-%5u%15s", &number, &total, tail) != 3 || strcmp(tail, ".safetensors"))
            continue;
        if (total == shards && number >= 1 && number <= shards) continue;
        char path[8192];
        snprintf(path, sizeof(path), "%s/%s", directory, entry->d_name);
        unlink(path);
    }
    closedir(folder);
}

/* Splits the tensors into runs whose files fit `max_bytes`: `firsts[s]` starts shard s, `firsts[*shards]` is `count`. */
static uform_status_t uform_plan_shards_(uform_tensor_view_t const *tensors, size_t count, json_t const *metadata,
                                         size_t max_bytes, size_t *firsts, size_t *shards) {
    *shards = 0;
    for (size_t first = 0, last; first < count; first = last) {
        size_t bytes;
        UFORM_TRY(uform_safetensors_size(tensors + first, 1, metadata, &bytes));
        if (bytes > max_bytes)
            fprintf(stderr, "uform: warning: tensor '%s' makes a %zu-byte shard, over the %zu-byte limit; it gets a shard of its own\n",
                    tensors[first].name, bytes, max_bytes);
        for (last = first + 1; bytes <= max_bytes && last < count; ++last) {
            UFORM_TRY(uform_safetensors_size(tensors + first, last + 1 - first, metadata, &bytes));
            if (bytes > max_bytes) break;
        }
        firsts[(*shards)++] = first;
    }
    firsts[*shards] = count;
    if (*shards > uform_max_shards_k)
        return uform_fail(uform_invalid_argument_k, "%zu shards of at most %zu bytes: more than %d", *shards, max_bytes,
                          uform_max_shards_k);
    return uform_ok_k;
}

/* The index: HF's total_size, then the checkpoint's own metadata, and every tensor's shard. */
static uform_status_t uform_write_index_(char const *directory, uform_tensor_view_t const *tensors, size_t const *firsts,
                                         size_t shards, json_t const *metadata) {
    json_t *index = json_object(), *described = json_object(), *map = json_object();
    size_t total = 0;
    for (size_t i = 0; i < firsts[shards]; ++i) total += tensors[i].bytes;
    json_object_set_new(described, "total_size", json_integer((json_int_t)total));
    if (metadata) json_object_update(described, (json_t *)metadata);
    for (size_t s = 0; s < shards; ++s) {
        char name[64];
        snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", s + 1, shards);
        for (size_t i = firsts[s]; i < firsts[s + 1]; ++i) json_object_set_new(map, tensors[i].name, json_string(name));
    }
    json_object_set_new(index, "metadata", described);
    json_object_set_new(index, "weight_map", map);
    char *text = json_dumps(index, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(index);
    char path[8192];
    snprintf(path, sizeof(path), "%s/%s", directory, UFORM_SHARDS_INDEX);
    uform_status_t status = text ? uform_write_atomic(path, text, strlen(text)) : uform_fail(uform_out_of_memory_k, "%s", path);
    free(text);
    return status;
}

uform_status_t uform_shards_write(char const *directory, uform_tensor_view_t const *tensors, size_t count,
                                  json_t const *metadata, size_t max_bytes) {
    if (!directory || !tensors || !count || !max_bytes)
        return uform_fail(uform_invalid_argument_k, "uform_shards_write: no folder, no tensors or a zero size limit");
    size_t *firsts = malloc((count + 1) * sizeof(size_t)), shards = 0;
    if (!firsts) return uform_fail(uform_out_of_memory_k, "%s: cannot plan the shards", directory);
    uform_status_t status = uform_plan_shards_(tensors, count, metadata, max_bytes, firsts, &shards);
    for (size_t s = 0; status == uform_ok_k && s < shards; ++s) {
        char path[8192];
        snprintf(path, sizeof(path), "%s/model-%05zu-of-%05zu.safetensors", directory, s + 1, shards);
        status = uform_safetensors_write(path, tensors + firsts[s], firsts[s + 1] - firsts[s], metadata);
    }
    if (status == uform_ok_k) status = uform_write_index_(directory, tensors, firsts, shards, metadata);
    if (status == uform_ok_k) uform_remove_stale_(directory, shards);
    free(firsts);
    return status;
}
