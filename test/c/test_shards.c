/*  test_shards.c: the sharded SafeTensors layout. A 64x2 model with its heads, sharded under a small
 *  limit, reopens bit for bit equal to its single-file save; every planted fault in the index or a
 *  shard is refused with a message naming the file and the problem. Prints "N passed, M failed". */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/safetensors.h"
#include "model/shards.h"
#include "uform/uform.h"
#include "check.h"

/* Under the largest tensor of 64x2 (gate_up, 512 x 64 BF16 = 65536 bytes plus a header under 1 KiB)
 * rounded up, so every tensor fits alone and the ~360 KiB of the model need several shards. */
enum { limit_k = 70000 };

static char const *index_in(char const *folder) {
    static char path[600];
    snprintf(path, sizeof(path), "%s/%s/" UFORM_SHARDS_INDEX, folder_, folder);
    return path;
}

static char const *shard_in(char const *folder, size_t number, size_t shards) {
    static char path[600];
    snprintf(path, sizeof(path), "%s/%s/model-%05zu-of-%05zu.safetensors", folder_, folder, number, shards);
    return path;
}

/* A fresh copy of the scratch folder `from` as `to`, for one planted fault. */
static void copy_folder(char const *from, char const *to) {
    char command[1400];
    snprintf(command, sizeof(command), "rm -rf '%s/%s' && cp -r '%s/%s' '%s/%s'", folder_, to, folder_, from, folder_, to);
    if (system(command) != 0) {
        fprintf(stderr, "cannot copy %s\n", from);
        exit(2);
    }
}

static void write_text(char const *name, char const *text) { write_file(name, text, strlen(text)); }

static uform_status_t open_folder(char const *folder) {
    uform_model_t *model = NULL;
    uform_status_t status = uform_model_open(path_in(folder), &model);
    uform_model_close(model);
    return status;
}

/* The distinct shard names of an index's weight_map. */
static size_t count_shards(char const *folder) {
    json_t *index = json_load_file(index_in(folder), 0, NULL);
    json_t *names = json_object(), *value;
    char const *tensor;
    json_object_foreach(json_object_get(index, "weight_map"), tensor, value) json_object_set(names, json_string_value(value), value);
    size_t count = json_object_size(names);
    json_decref(names);
    json_decref(index);
    return count;
}

/* Sets weight_map[tensor] to `shard` in the index (NULL removes the entry). */
static void edit_index(char const *folder, char const *tensor, char const *shard) {
    json_t *index = json_load_file(index_in(folder), 0, NULL);
    json_t *map = json_object_get(index, "weight_map");
    if (shard) json_object_set_new(map, tensor, json_string(shard));
    else json_object_del(map, tensor);
    if (!index || json_dump_file(index, index_in(folder), JSON_INDENT(2) | JSON_PRESERVE_ORDER) != 0) {
        fprintf(stderr, "cannot edit %s\n", index_in(folder));
        exit(2);
    }
    json_decref(index);
}

/* Rewrites a shard with `extra` appended to its tensors and its metadata's config replaced by
 * `config` (NULL keeps it, "" drops the key). */
static void rewrite_shard(char const *path, uform_tensor_view_t const *extra, char const *config) {
    uform_safetensors_t file;
    if (uform_safetensors_open(path, &file) != uform_ok_k) {
        fprintf(stderr, "cannot open %s: %s\n", path, uform_last_error());
        exit(2);
    }
    uform_tensor_view_t *views = calloc(file.count + 1, sizeof(*views));
    memcpy(views, file.tensors, file.count * sizeof(*views));
    if (extra) views[file.count] = *extra;
    json_t *metadata = json_deep_copy(file.metadata);
    if (config && *config) json_object_set_new(metadata, "config", json_string(config));
    else if (config) json_object_del(metadata, "config");
    CHECK(uform_safetensors_write(path, views, file.count + (extra != NULL), metadata) == uform_ok_k);
    json_decref(metadata);
    free(views);
    uform_safetensors_close(&file);
}

/* Every tensor of `a` in `b` with the same dtype, shape and bytes, and no other. */
static int same_tensors(uform_shards_t const *a, uform_shards_t const *b) {
    size_t count_a = 0, count_b = 0;
    for (size_t f = 0; f < b->count; ++f) count_b += b->files[f].count;
    for (size_t f = 0; f < a->count; ++f)
        for (size_t i = 0; i < a->files[f].count; ++i, ++count_a) {
            uform_tensor_view_t const *x = &a->files[f].tensors[i], *y = uform_shards_find(b, x->name, NULL);
            if (!y || y->dtype != x->dtype || y->rank != x->rank || y->bytes != x->bytes ||
                memcmp(y->shape, x->shape, sizeof(x->shape)) || memcmp(y->data, x->data, x->bytes)) {
                fprintf(stderr, "  tensor '%s' differs\n", x->name);
                return 0;
            }
        }
    return count_a == count_b;
}

static void test_round_trip(void) {
    uform_config_t config;
    uform_model_t *model = NULL, *opened = NULL;
    CHECK(uform_config_from_tier("64x2", &config) == uform_ok_k && uform_model_init(&config, 9, &model) == uform_ok_k);
    CHECK(uform_model_has_head(model, "pool") && uform_model_has_head(model, "rerank") && uform_model_has_head(model, "mlm"));
    CHECK(uform_model_save(model, path_in("single"), NULL) == uform_ok_k);
    CHECK(uform_model_save_sharded(model, path_in("sharded"), limit_k) == uform_ok_k);
    size_t shards = count_shards("sharded");
    CHECK(shards >= 4);
    struct stat status;
    int within = 1;
    for (size_t s = 1; s <= shards; ++s) within &= stat(shard_in("sharded", s, shards), &status) == 0 && status.st_size <= limit_k;
    CHECK(within);
    /* The shards hold the single file's tensors bit for bit, and so does the model reopened from them. */
    uform_shards_t single, sharded, again;
    char path[600];
    snprintf(path, sizeof(path), "%s/single/model.safetensors", folder_);
    CHECK(uform_shards_open(path, &single) == uform_ok_k && single.count == 1);
    CHECK(uform_shards_open(index_in("sharded"), &sharded) == uform_ok_k && sharded.count == shards);
    CHECK(same_tensors(&single, &sharded) && same_tensors(&sharded, &single));
    CHECK(uform_model_open(path_in("sharded"), &opened) == uform_ok_k);
    uform_model_close(model);
    CHECK(uform_model_open(index_in("sharded"), &model) == uform_ok_k); /* the index named directly */
    uform_model_close(model);
    CHECK(opened && uform_model_save(opened, path_in("again"), NULL) == uform_ok_k);
    snprintf(path, sizeof(path), "%s/again/model.safetensors", folder_);
    CHECK(uform_shards_open(path, &again) == uform_ok_k && same_tensors(&single, &again) && same_tensors(&again, &single));
    for (size_t s = 0; s < sharded.count; ++s)
        CHECK(!strcmp(json_string_value(json_object_get(sharded.files[s].metadata, "config")),
                      json_string_value(json_object_get(single.files[0].metadata, "config"))));
    /* A limit of one byte gives every tensor a shard of its own (with a warning each). */
    CHECK(uform_model_save_sharded(opened, path_in("tiny"), 1) == uform_ok_k);
    CHECK(count_shards("tiny") == single.files[0].count && open_folder("tiny") == uform_ok_k);
    /* Resharding in place under a larger limit leaves only the new layout's shards. */
    CHECK(uform_model_save_sharded(opened, path_in("tiny"), 1 << 20) == uform_ok_k && count_shards("tiny") == 1);
    CHECK(stat(shard_in("tiny", 1, 1), &status) == 0 && stat(shard_in("tiny", 2, single.files[0].count), &status) != 0);
    CHECK(open_folder("tiny") == uform_ok_k);
    /* model.safetensors beside shards shadows them, so the writer refuses such a folder. */
    CHECK(fails_with(uform_model_save_sharded(opened, path_in("single"), limit_k), uform_invalid_argument_k,
                     "model.safetensors", "readers prefer it"));
    uform_shards_close(&single), uform_shards_close(&sharded), uform_shards_close(&again);
    uform_model_close(opened);
}

static void test_faults(void) {
    size_t shards = count_shards("sharded");
    char second[64], first[64];
    snprintf(first, sizeof(first), "model-%05d-of-%05zu.safetensors", 1, shards);
    snprintf(second, sizeof(second), "model-%05d-of-%05zu.safetensors", 2, shards);

    copy_folder("sharded", "missing");
    unlink(shard_in("missing", 2, shards));
    CHECK(fails_with(open_folder("missing"), uform_io_k, second, "cannot open"));

    copy_folder("sharded", "truncated");
    CHECK(truncate(shard_in("truncated", 2, shards), 5000) == 0);
    CHECK(fails_with(open_folder("truncated"), uform_format_k, second, "truncated"));

    /* embed.bytes is the first tensor, so it lives in shard 1. */
    copy_folder("sharded", "moved");
    edit_index("moved", "embed.bytes", second);
    CHECK(fails_with(open_folder("moved"), uform_missing_k, "'embed.bytes'", "does not hold it"));

    copy_folder("sharded", "escape");
    char outside[96];
    snprintf(outside, sizeof(outside), "../sharded/%s", first);
    edit_index("escape", "embed.bytes", outside);
    CHECK(fails_with(open_folder("escape"), uform_format_k, outside, "not a file name in the index's folder"));
    edit_index("escape", "embed.bytes", shard_in("sharded", 1, shards)); /* an absolute path */
    CHECK(fails_with(open_folder("escape"), uform_format_k, "/sharded/", "not a file name"));
    edit_index("escape", "embed.bytes", "..");
    CHECK(fails_with(open_folder("escape"), uform_format_k, "'..'", "not a file name"));

    copy_folder("sharded", "unlisted");
    edit_index("unlisted", "embed.bytes", NULL);
    CHECK(fails_with(open_folder("unlisted"), uform_format_k, "'embed.bytes'", "not in the weight_map"));

    /* A copy of shard 1's embed.bytes planted in shard 2 as well. */
    copy_folder("sharded", "duplicate");
    uform_safetensors_t file;
    CHECK(uform_safetensors_open(shard_in("sharded", 1, shards), &file) == uform_ok_k);
    uform_tensor_view_t const *embed = uform_safetensors_find(&file, "embed.bytes");
    CHECK(embed != NULL);
    if (embed) rewrite_shard(shard_in("duplicate", 2, shards), embed, NULL);
    uform_safetensors_close(&file);
    CHECK(fails_with(open_folder("duplicate"), uform_format_k, second, "'embed.bytes' is also in"));

    copy_folder("sharded", "differing");
    rewrite_shard(shard_in("differing", 2, shards), NULL,
                  "{\"tier\":\"64x2\",\"width\":64,\"depth\":2,\"heads\":1,\"embedding_widths\":[64],\"colbert_width\":128,\"columns\":2048}");
    CHECK(fails_with(open_folder("differing"), uform_format_k, second, "config differs"));
    rewrite_shard(shard_in("differing", 2, shards), NULL, "");
    CHECK(fails_with(open_folder("differing"), uform_format_k, second, "no 'config'"));

    copy_folder("sharded", "index");
    write_text("index/" UFORM_SHARDS_INDEX, "{\"weight_map\": ");
    CHECK(fails_with(open_folder("index"), uform_format_k, UFORM_SHARDS_INDEX, "index is not JSON"));
    write_text("index/" UFORM_SHARDS_INDEX, "[1]");
    CHECK(fails_with(open_folder("index"), uform_format_k, UFORM_SHARDS_INDEX, "not a JSON object"));
    write_text("index/" UFORM_SHARDS_INDEX, "{\"metadata\": {}}");
    CHECK(fails_with(open_folder("index"), uform_format_k, UFORM_SHARDS_INDEX, "'weight_map' is missing or not an object"));
    write_text("index/" UFORM_SHARDS_INDEX, "{\"weight_map\": [\"x\"]}");
    CHECK(fails_with(open_folder("index"), uform_format_k, UFORM_SHARDS_INDEX, "'weight_map' is missing or not an object"));
    write_text("index/" UFORM_SHARDS_INDEX, "{\"weight_map\": {\"a\": 1, \"a\": 2}}");
    CHECK(fails_with(open_folder("index"), uform_format_k, UFORM_SHARDS_INDEX, "duplicate"));
    /* model.safetensors is preferred: beside it the broken index is never read. */
    char command[1400];
    snprintf(command, sizeof(command), "cp '%s/single/model.safetensors' '%s/index/'", folder_, folder_);
    CHECK(system(command) == 0 && open_folder("index") == uform_ok_k);
}

int main(void) {
    if (!scratch_open("uform_test_shards")) return 1;
    test_round_trip();
    test_faults();
    scratch_close();
    return check_report();
}
