/*  mixture.c: the mixture file, parsed with Jansson and checked field by field. Unknown keys are
 *  errors, since a misspelt "mask_ratio" would otherwise silently train with the default. */
#include "data/mixture.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/status.h"

static char const *const uform_objective_names_[] = {"mlm", "contrastive", "rerank"};

char const *uform_objective_name(uform_objective_t objective) {
    return (unsigned)objective < 3 ? uform_objective_names_[objective] : NULL;
}

uform_status_t uform_objective_from_name(char const *name, uform_objective_t *objective) {
    for (unsigned i = 0; name && i < 3; ++i)
        if (!strcmp(name, uform_objective_names_[i])) {
            *objective = (uform_objective_t)i;
            return uform_ok_k;
        }
    return uform_fail(uform_invalid_argument_k, "unknown objective '%s' (expected mlm, contrastive or rerank)",
                      name ? name : "(null)");
}

void uform_mixture_close(uform_mixture_t *mixture) {
    if (!mixture) return;
    free(mixture->sources);
    memset(mixture, 0, sizeof(*mixture));
}

/* Fails on the first key of `object` not in the NULL-terminated `allowed` list. */
static uform_status_t uform_check_keys_(char const *path, char const *where, json_t *object,
                                        char const *const *allowed, char const *expected) {
    char const *key;
    json_t *value;
    json_object_foreach(object, key, value) {
        int known = 0;
        for (char const *const *name = allowed; *name; ++name) known |= !strcmp(key, *name);
        if (!known)
            return uform_fail(uform_format_k, "%s: unknown key '%s' in %s (expected %s)", path, key, where, expected);
    }
    return uform_ok_k;
}

/* A number field: absent keeps `*value`; present must be a finite number in [minimum, maximum]. */
static uform_status_t uform_read_number_(char const *path, json_t *object, char const *key, double minimum,
                                         double maximum, int exclusive, double *value) {
    json_t const *field = json_object_get(object, key);
    if (!field) return uform_ok_k;
    double number = json_number_value(field);
    if (!json_is_number(field) || !isfinite(number))
        return uform_fail(uform_format_k, "%s: '%s' must be a number", path, key);
    if (exclusive ? !(number > minimum && number < maximum) : !(number >= minimum && number <= maximum))
        return uform_fail(uform_format_k, "%s: '%s' is %g; it must lie in %s%g, %g%s", path, key, number,
                          exclusive ? "(" : "[", minimum, maximum, exclusive ? ")" : "]");
    *value = number;
    return uform_ok_k;
}

static uform_status_t uform_read_source_(uform_mixture_t const *mixture, char const *folder, size_t index,
                                         json_t *entry, uform_mixture_source_t *source) {
    char const *path = mixture->path;
    static char const *const allowed[] = {"path", "weight", "loss_weight", "name", "skip_malformed", "flip_images", NULL};
    if (!json_is_object(entry))
        return uform_fail(uform_format_k, "%s: source %zu must be an object with 'path' and 'weight'", path, index);
    char where[64];
    snprintf(where, sizeof(where), "source %zu", index);
    UFORM_TRY(uform_check_keys_(path, where, entry, allowed, "path, weight, loss_weight, name, skip_malformed, flip_images"));
    char const *file = json_string_value(json_object_get(entry, "path"));
    if (!file || !*file) return uform_fail(uform_format_k, "%s: source %zu needs a non-empty string 'path'", path, index);
    int written = file[0] == '/' ? snprintf(source->path, sizeof(source->path), "%s", file)
                                 : snprintf(source->path, sizeof(source->path), "%s%s", folder, file);
    if (written < 0 || (size_t)written >= sizeof(source->path))
        return uform_fail(uform_format_k, "%s: source %zu: path '%s' is too long", path, index, file);
    json_t const *weight = json_object_get(entry, "weight");
    source->weight = 1.0;
    if (weight) {
        source->weight = json_number_value(weight);
        if (!json_is_number(weight) || !isfinite(source->weight) || !(source->weight > 0))
            return uform_fail(uform_format_k, "%s: source %zu ('%s'): 'weight' must be a positive number", path,
                              index, file);
    }
    json_t const *loss_weight = json_object_get(entry, "loss_weight");
    source->loss_weight = 1.0;
    if (loss_weight) {
        source->loss_weight = json_number_value(loss_weight);
        if (!json_is_number(loss_weight) || !isfinite(source->loss_weight) || !(source->loss_weight > 0) ||
            source->loss_weight > 1000)
            return uform_fail(uform_format_k, "%s: source %zu ('%s'): 'loss_weight' must be a number in (0, 1000]", path,
                              index, file);
    }
    json_t const *skip = json_object_get(entry, "skip_malformed");
    if (skip && !json_is_boolean(skip))
        return uform_fail(uform_format_k, "%s: source %zu ('%s'): 'skip_malformed' must be true or false", path,
                          index, file);
    source->skip_malformed = skip && json_is_true(skip);
    json_t const *flip = json_object_get(entry, "flip_images");
    if (flip && !json_is_boolean(flip))
        return uform_fail(uform_format_k, "%s: source %zu ('%s'): 'flip_images' must be true or false", path, index, file);
    source->flip_images = flip && json_is_true(flip);
    json_t const *name = json_object_get(entry, "name");
    if (name && (!json_is_string(name) || !json_string_length(name) || json_string_length(name) >= sizeof(source->name)))
        return uform_fail(uform_format_k, "%s: source %zu ('%s'): 'name' must be a string of 1 to %zu bytes", path,
                          index, file, sizeof(source->name) - 1);
    char const *base = strrchr(file, '/');
    snprintf(source->name, sizeof(source->name), "%s", name ? json_string_value(name) : base ? base + 1 : file);
    if (access(source->path, R_OK) != 0)
        return uform_fail(uform_io_k, "%s: source %zu: cannot read '%s' (resolved to %s): %s", path, index, file,
                          source->path, strerror(errno));
    struct stat status;
    /* A folder passes access(), and "/" would leave the source no file name to be named after. */
    if (stat(source->path, &status) == 0 && S_ISDIR(status.st_mode))
        return uform_fail(uform_io_k, "%s: source %zu: '%s' (resolved to %s) is a folder, not a file", path, index,
                          file, source->path);
    return uform_ok_k;
}

static uform_status_t uform_mixture_fill_(uform_mixture_t *mixture, json_t *root) {
    char const *path = mixture->path;
    static char const *const allowed[] = {"objective", "columns", "mask_ratio", "mean_span", "image_mask_ratio",
                                          "video_fps", "audio_mask_ratio", "audio_mean_span", "video_mask_ratio",
                                          "sources", "description", NULL};
    if (!json_is_object(root)) return uform_fail(uform_format_k, "%s: a mixture must be a JSON object", path);
    UFORM_TRY(uform_check_keys_(path, "the mixture", root, allowed,
                                "objective, columns, mask_ratio, mean_span, image_mask_ratio, video_fps, audio_mask_ratio, "
                                "audio_mean_span, video_mask_ratio, sources, description"));
    json_t const *objective = json_object_get(root, "objective");
    if (!json_is_string(objective))
        return uform_fail(uform_format_k, "%s: 'objective' must be one of \"mlm\", \"contrastive\", \"rerank\"", path);
    if (uform_objective_from_name(json_string_value(objective), &mixture->objective) != uform_ok_k)
        return uform_fail(uform_format_k, "%s: 'objective' is \"%s\"; expected \"mlm\", \"contrastive\" or \"rerank\"",
                          path, json_string_value(objective));
    json_t const *columns = json_object_get(root, "columns");
    mixture->columns = uform_mixture_default_columns_k;
    if (columns) {
        if (!json_is_integer(columns) || json_integer_value(columns) < 1 ||
            json_integer_value(columns) > uform_mixture_max_columns_k)
            return uform_fail(uform_format_k, "%s: 'columns' must be an integer from 1 to %d", path,
                              uform_mixture_max_columns_k);
        mixture->columns = (size_t)json_integer_value(columns);
    }
    json_t const *description = json_object_get(root, "description");
    if (description && !json_is_string(description))
        return uform_fail(uform_format_k, "%s: 'description' must be a string", path);
    mixture->mask_ratio = 0.15;
    mixture->mean_span = 8.0;
    UFORM_TRY(uform_read_number_(path, root, "mask_ratio", 0.0, 1.0, 1, &mixture->mask_ratio));
    UFORM_TRY(uform_read_number_(path, root, "mean_span", 1.0, 1e6, 0, &mixture->mean_span));
    mixture->image_mask_ratio = 0.5;
    UFORM_TRY(uform_read_number_(path, root, "image_mask_ratio", 0.0, 1.0, 1, &mixture->image_mask_ratio));
    mixture->video_fps = 25.0;
    UFORM_TRY(uform_read_number_(path, root, "video_fps", 0.1, 1000.0, 0, &mixture->video_fps));
    mixture->audio_mask_ratio = 0.5, mixture->audio_mean_span = 4.0, mixture->video_mask_ratio = 0.75;
    UFORM_TRY(uform_read_number_(path, root, "audio_mask_ratio", 0.0, 1.0, 1, &mixture->audio_mask_ratio));
    UFORM_TRY(uform_read_number_(path, root, "audio_mean_span", 1.0, 1e6, 0, &mixture->audio_mean_span));
    UFORM_TRY(uform_read_number_(path, root, "video_mask_ratio", 0.0, 1.0, 1, &mixture->video_mask_ratio));

    json_t *sources = json_object_get(root, "sources");
    if (!json_is_array(sources) || !json_array_size(sources))
        return uform_fail(uform_format_k, "%s: 'sources' must be a non-empty array of {\"path\", \"weight\"}", path);
    if (json_array_size(sources) > uform_mixture_max_sources_k)
        return uform_fail(uform_format_k, "%s: %zu sources; a mixture holds at most %d", path,
                          json_array_size(sources), uform_mixture_max_sources_k);
    char folder[4096] = "";
    char const *slash = strrchr(path, '/');
    if (slash) snprintf(folder, sizeof(folder), "%.*s/", (int)(slash - path), path);
    mixture->sources_count = json_array_size(sources);
    mixture->sources = calloc(mixture->sources_count, sizeof(uform_mixture_source_t));
    if (!mixture->sources) return uform_fail(uform_out_of_memory_k, "%s: cannot hold the sources", path);
    for (size_t i = 0; i < mixture->sources_count; ++i)
        UFORM_TRY(uform_read_source_(mixture, folder, i, json_array_get(sources, i), &mixture->sources[i]));
    return uform_ok_k;
}

uform_status_t uform_mixture_parse(char const *path, char const *text, size_t length, uform_mixture_t *mixture) {
    memset(mixture, 0, sizeof(*mixture));
    if (!path || !text) return uform_fail(uform_invalid_argument_k, "uform_mixture_parse: NULL path or text");
    snprintf(mixture->path, sizeof(mixture->path), "%s", path);
    json_error_t error;
    json_t *root = json_loadb(text, length, JSON_REJECT_DUPLICATES, &error);
    if (!root)
        return uform_fail(uform_format_k, "%s:%d:%d: not JSON: %s", path, error.line, error.column, error.text);
    uform_status_t status = uform_mixture_fill_(mixture, root);
    json_decref(root);
    if (status != uform_ok_k) {
        free(mixture->sources);
        mixture->sources = NULL;
        mixture->sources_count = 0;
    }
    return status;
}

uform_status_t uform_mixture_read(char const *path, uform_mixture_t *mixture) {
    memset(mixture, 0, sizeof(*mixture));
    if (!path) return uform_fail(uform_invalid_argument_k, "uform_mixture_read: NULL path");
    enum { uform_max_mixture_bytes_k = 1 << 20 };
    FILE *file = fopen(path, "rb");
    if (!file) return uform_fail(uform_io_k, "%s: cannot open: %s", path, strerror(errno));
    char *text = malloc(uform_max_mixture_bytes_k);
    if (!text) {
        fclose(file);
        return uform_fail(uform_out_of_memory_k, "%s: cannot allocate a read buffer", path);
    }
    size_t length = fread(text, 1, uform_max_mixture_bytes_k, file);
    int failed = ferror(file), more = !failed && fgetc(file) != EOF;
    fclose(file);
    uform_status_t status = failed ? uform_fail(uform_io_k, "%s: cannot read", path)
                            : more ? uform_fail(uform_format_k, "%s: larger than %d bytes; is this a mixture?", path,
                                                uform_max_mixture_bytes_k)
                                   : uform_mixture_parse(path, text, length, mixture);
    free(text);
    return status;
}
