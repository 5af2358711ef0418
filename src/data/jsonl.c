/*  jsonl.c: JSONL records, one Jansson parse per line, every string copied into one buffer.
 *  The buffer is sized by the file: unescaping never makes a string longer than its JSON. */
#include "data/jsonl.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/file.h"
#include "core/status.h"
#include "uform/image.h"

void uform_corpus_close(uform_corpus_t *corpus) {
    if (!corpus) return;
    free(corpus->bytes);
    free(corpus->records);
    free(corpus->slices);
    memset(corpus, 0, sizeof(*corpus));
}

/* Copies a JSON string's bytes into the buffer; `problem` is set when it is not a non-empty string. */
static int uform_take_string_(uform_corpus_t *corpus, json_t const *value, uform_slice_t *slice) {
    if (!json_is_string(value)) return 0;
    size_t length = json_string_length(value);
    if (!length) return 0;
    memcpy(corpus->bytes + corpus->bytes_count, json_string_value(value), length);
    *slice = (uform_slice_t){corpus->bytes_count, length, 0};
    corpus->bytes_count += length;
    return 1;
}

/* A pair's side: a non-empty string, or one of {"image": PATH}, {"audio": PATH}, {"video": PATH}
 * with a non-empty path and nothing else. */
static int uform_take_side_(uform_corpus_t *corpus, json_t const *value, uform_slice_t *slice) {
    if (!json_is_object(value)) return uform_take_string_(corpus, value, slice);
    static char const *const keys[] = {"image", "audio", "video"};
    static int const kinds[] = {uform_slice_image_path_k, uform_slice_audio_path_k, uform_slice_video_path_k};
    for (size_t k = 0; k < 3; ++k) {
        json_t const *path = json_object_get(value, keys[k]);
        if (!path) continue;
        if (json_object_size(value) != 1 || !uform_take_string_(corpus, path, slice)) return 0;
        slice->image = kinds[k];
        return 1;
    }
    return 0;
}

uform_status_t uform_corpus_image_path(uform_corpus_t const *corpus, uform_slice_t slice, char *path, size_t size) {
    char const *name = (char const *)uform_corpus_data(corpus, slice);
    char const *slash = strrchr(corpus->path, '/');
    int folder = name[0] != '/' && slash ? (int)(slash - corpus->path) + 1 : 0;
    int written = snprintf(path, size, "%.*s%.*s", folder, corpus->path, (int)slice.length, name);
    if (written < 0 || (size_t)written >= size || memchr(name, 0, slice.length))
        return uform_fail(uform_format_k, "%s: the image path '%.*s' is too long or holds a NUL byte", corpus->path,
                          (int)(slice.length < 200 ? slice.length : 200), name);
    return uform_ok_k;
}

uform_status_t uform_corpus_image_read(uform_corpus_t const *corpus, uform_slice_t slice, uform_pixels_t *pixels) {
    if (slice.image == 2) {
        char name[4200];
        snprintf(name, sizeof(name), "%s (an image column)", corpus->path);
        return uform_image_decode(uform_corpus_data(corpus, slice), slice.length, name, pixels);
    }
    char path[4096];
    UFORM_TRY(uform_corpus_image_path(corpus, slice, path, sizeof(path)));
    return uform_image_read(path, pixels);
}

static int uform_reserve_slices_(uform_corpus_t *corpus, size_t *capacity, size_t more) {
    if (corpus->slices_count + more <= *capacity) return 1;
    size_t grown = *capacity ? *capacity : 1024;
    while (grown < corpus->slices_count + more) grown *= 2;
    uform_slice_t *slices = realloc(corpus->slices, grown * sizeof(*slices));
    if (!slices) return 0;
    corpus->slices = slices;
    *capacity = grown;
    return 1;
}

/* Parses one non-blank line into a record, or writes why it is malformed into `problem`.
 * On failure the corpus's counts are left as they were. */
static uform_status_t uform_parse_line_(uform_corpus_t *corpus, char const *line, size_t length, size_t number,
                                        size_t *slices_capacity, char *problem, size_t problem_capacity) {
    json_error_t error;
    json_t *root = json_loadb(line, length, JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &error);
    if (!root) {
        snprintf(problem, problem_capacity, "not JSON: %s at column %d", error.text, error.column);
        return uform_format_k;
    }
    size_t bytes_before = corpus->bytes_count, slices_before = corpus->slices_count;
    uform_record_t record = {.line = number};
    json_t const *text = json_object_get(root, "text"), *query = json_object_get(root, "query");
    /* A media record: masked modelling of an image's patches, an audio clip's frames or a video's tubes. */
    static char const *const media_keys[] = {"image", "audio", "video"};
    static int const media_kinds[] = {uform_slice_image_path_k, uform_slice_audio_path_k, uform_slice_video_path_k};
    json_t const *image = NULL;
    char const *media_key = NULL;
    int media_kind = 0, media_count = 0;
    for (size_t k = 0; json_is_object(root) && k < 3; ++k)
        if (json_object_get(root, media_keys[k]))
            image = json_object_get(root, media_keys[k]), media_key = media_keys[k], media_kind = media_kinds[k], media_count++;
    json_t const *positives = json_object_get(root, "positives"), *negatives = json_object_get(root, "negatives");
    uform_status_t status = uform_format_k;
    if (!json_is_object(root)) snprintf(problem, problem_capacity, "a record must be a JSON object");
    else if (text && (query || positives || negatives))
        snprintf(problem, problem_capacity, "has 'text' beside 'query', 'positives' or 'negatives'; a record is one or the other");
    else if (image && (text || query || positives || negatives))
        snprintf(problem, problem_capacity, "has '%s' beside 'text', 'query', 'positives' or 'negatives'; a media record is "
                                            "{\"%s\": PATH}", media_key, media_key);
    else if (media_count > 1)
        snprintf(problem, problem_capacity, "has more than one of 'image', 'audio' and 'video'; a media record is one of them");
    else if (image) {
        record.kind = uform_record_text_k;
        if (!uform_take_string_(corpus, image, &record.text))
            snprintf(problem, problem_capacity, "'%s' must be a non-empty string (a path)", media_key);
        else record.text.image = media_kind, status = uform_ok_k;
    } else if (text) {
        record.kind = uform_record_text_k;
        if (!uform_take_string_(corpus, text, &record.text))
            snprintf(problem, problem_capacity, "'text' must be a non-empty string");
        else status = uform_ok_k;
    } else if (!query) {
        snprintf(problem, problem_capacity, "needs 'text' or 'image' (masked modelling) or 'query' and 'positives' (pairs)");
    } else {
        record.kind = uform_record_pair_k;
        size_t positives_count = json_is_array(positives) ? json_array_size(positives) : 0;
        size_t negatives_count = json_is_array(negatives) ? json_array_size(negatives) : 0;
        if (!uform_take_side_(corpus, query, &record.text))
            snprintf(problem, problem_capacity, "'query' must be a non-empty string or {\"image\" | \"audio\" | \"video\": PATH}");
        else if (!positives_count)
            snprintf(problem, problem_capacity, "'positives' must be an array of at least one string");
        else if (negatives && !json_is_array(negatives))
            snprintf(problem, problem_capacity, "'negatives' must be an array of strings");
        else if (positives_count + negatives_count > UINT32_MAX)
            snprintf(problem, problem_capacity, "too many positives and negatives");
        else if (!uform_reserve_slices_(corpus, slices_capacity, positives_count + negatives_count)) {
            json_decref(root);
            return uform_fail(uform_out_of_memory_k, "%s: cannot grow the record table", corpus->path);
        } else {
            record.first_candidate = corpus->slices_count;
            record.positives_count = (uint32_t)positives_count;
            record.negatives_count = (uint32_t)negatives_count;
            status = uform_ok_k;
            for (size_t i = 0; i < positives_count + negatives_count && status == uform_ok_k; ++i) {
                int positive = i < positives_count;
                json_t const *value = json_array_get(positive ? positives : negatives,
                                                     positive ? i : i - positives_count);
                if (!uform_take_side_(corpus, value, &corpus->slices[corpus->slices_count])) {
                    snprintf(problem, problem_capacity, "%s %zu must be a non-empty string or {\"image\" | \"audio\" | \"video\": PATH}",
                             positive ? "positive" : "negative", positive ? i : i - positives_count);
                    status = uform_format_k;
                } else corpus->slices_count++;
            }
        }
    }
    json_t const *language = json_is_object(root) ? json_object_get(root, "lang") : NULL;
    if (status == uform_ok_k && language && !uform_take_string_(corpus, language, &record.language)) {
        snprintf(problem, problem_capacity, "'lang' must be a non-empty string");
        status = uform_format_k;
    }
    json_decref(root);
    if (status != uform_ok_k) {
        corpus->bytes_count = bytes_before;
        corpus->slices_count = slices_before;
        return status;
    }
    corpus->records[corpus->records_count++] = record;
    if (record.kind == uform_record_text_k) corpus->text_records++;
    else corpus->pair_records++;
    return uform_ok_k;
}

static int uform_is_blank_(char const *line, size_t length) {
    for (size_t i = 0; i < length; ++i)
        if (line[i] != ' ' && line[i] != '\t' && line[i] != '\r') return 0;
    return 1;
}

uform_status_t uform_jsonl_parse(char const *path, char const *text, size_t length,
                                 uform_jsonl_options_t const *options, uform_corpus_t *corpus) {
    memset(corpus, 0, sizeof(*corpus));
    if (!path || (!text && length))
        return uform_fail(uform_invalid_argument_k, "uform_jsonl_parse: NULL path or text");
    snprintf(corpus->path, sizeof(corpus->path), "%s", path);
    int skip = options && options->skip_malformed;
    /* A UTF-8 byte order mark is not JSON; editors add it, so it is dropped rather than refused. */
    if (length >= 3 && !memcmp(text, "\xef\xbb\xbf", 3)) text += 3, length -= 3;
    size_t lines = 0;
    for (char const *cursor = text, *end = text + length; cursor < end; ++lines) {
        char const *newline = memchr(cursor, '\n', (size_t)(end - cursor));
        cursor = newline ? newline + 1 : end;
    }
    corpus->bytes = malloc(length ? length : 1);
    corpus->records = malloc((lines ? lines : 1) * sizeof(uform_record_t));
    if (!corpus->bytes || !corpus->records) {
        uform_corpus_close(corpus);
        return uform_fail(uform_out_of_memory_k, "%s: cannot hold %zu bytes in memory", path, length);
    }
    size_t slices_capacity = 0;
    char problem[256];
    char const *cursor = text, *end = text + length;
    for (size_t line = 1; cursor < end; ++line) {
        char const *newline = memchr(cursor, '\n', (size_t)(end - cursor));
        size_t line_length = (size_t)((newline ? newline : end) - cursor);
        char const *start = cursor;
        cursor = newline ? newline + 1 : end;
        corpus->lines = line;
        if (uform_is_blank_(start, line_length)) continue;
        uform_status_t status =
            uform_parse_line_(corpus, start, line_length, line, &slices_capacity, problem, sizeof(problem));
        if (status == uform_ok_k) continue;
        if (status != uform_format_k || !skip) {
            if (status == uform_format_k) uform_fail(status, "%s:%zu: %s", path, line, problem);
            uform_corpus_close(corpus);
            return status;
        }
        if (!corpus->skipped++) {
            corpus->first_skipped_line = line;
            snprintf(corpus->first_problem, sizeof(corpus->first_problem), "%s", problem);
        }
    }
    return uform_ok_k;
}

uform_status_t uform_jsonl_read(char const *path, uform_jsonl_options_t const *options, uform_corpus_t *corpus) {
    memset(corpus, 0, sizeof(*corpus));
    if (!path) return uform_fail(uform_invalid_argument_k, "uform_jsonl_read: NULL path");
    unsigned char *text;
    size_t size;
    UFORM_TRY(uform_file_read(path, &text, &size));
    uform_status_t status = uform_jsonl_parse(path, (char const *)text, size, options, corpus);
    free(text);
    return status;
}
