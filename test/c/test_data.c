/*  test_data.c: the data layer against facts that can be checked exactly or bounded in advance:
 *  JSONL parsing (escapes, \u0000, malformed lines), mixture validation, batch determinism and
 *  resume, packing invariants and fill, masking ratio and span lengths, pair labels, the JPEG colour
 *  markers the GPU decoder reads (against libjpeg-turbo's reading). Prints
 *  "N passed, M failed" and exits non-zero on any failure.
 *
 *  Build and run from the repository root (no model, no BLAS):
 *    gcc -std=c11 -O2 -Wall -Wextra -Wshadow -Wstrict-prototypes -Wno-unused-parameter \
 *        -D_POSIX_C_SOURCE=200809L -Iinclude -Isrc test/c/test_data.c src/data/jsonl.c \
 *        src/data/mixture.c src/data/batcher.c src/core/status.c src/core/arena.c \
 *        -ljansson -lm -o build-data/test_data && ./build-data/test_data
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jpeglib.h>

#include "core/numeric.h"
#include "data/batcher.h"
#include "data/jsonl.h"
#include "data/mixture.h"
#include "media/jpeg_markers.h"
#include "uform/av.h"
#include "uform/image.h"
#include "check.h"
#include "png_file.h"

static void write_text(char const *name, char const *text) { write_file(name, text, strlen(text)); }

/* A growing string for building files. */
typedef struct {
    char *data;
    size_t length, capacity;
} buffer_t;

static void append(buffer_t *buffer, char const *format, ...) {
    va_list args;
    for (;;) {
        va_start(args, format);
        int needed = vsnprintf(buffer->data ? buffer->data + buffer->length : NULL,
                               buffer->data ? buffer->capacity - buffer->length : 0, format, args);
        va_end(args);
        if (buffer->data && buffer->length + (size_t)needed < buffer->capacity) {
            buffer->length += (size_t)needed;
            return;
        }
        buffer->capacity = (buffer->capacity + (size_t)needed + 1) * 2;
        buffer->data = realloc(buffer->data, buffer->capacity);
    }
}

/* Appends `bytes` (7-bit) as a JSON string body, escaping what JSON requires. */
static void append_json_bytes(buffer_t *buffer, uint8_t const *bytes, size_t length) {
    for (size_t i = 0; i < length; ++i) {
        if (bytes[i] == '"' || bytes[i] == '\\') append(buffer, "\\%c", bytes[i]);
        else if (bytes[i] < 0x20) append(buffer, "\\u%04x", bytes[i]);
        else append(buffer, "%c", bytes[i]);
    }
}

/* --- JSONL ------------------------------------------------------------------------------------ */

static void test_jsonl_records(void) {
    char const *text =
        "{\"text\": \"a\\\"b\\\\c\\n\\u00e9\\u0000z\", \"lang\": \"xx\"}\n"
        "\n"
        "   \r\n"
        "{\"query\": \"q\", \"positives\": [\"p1\", \"p2\\ud83d\\ude00\"], \"negatives\": [\"n1\"], \"id\": 7}\r\n"
        "{\"query\": \"only\", \"positives\": [\"one\"]}";
    write_text("records.jsonl", text);
    uform_corpus_t corpus;
    CHECK(uform_jsonl_read(path_in("records.jsonl"), NULL, &corpus) == uform_ok_k);
    CHECK(corpus.records_count == 3 && corpus.text_records == 1 && corpus.pair_records == 2);
    CHECK(corpus.lines == 5 && corpus.skipped == 0);
    uform_record_t const *record = &corpus.records[0];
    uint8_t const expected[] = {'a', '"', 'b', '\\', 'c', '\n', 0xc3, 0xa9, 0x00, 'z'};
    CHECK(record->kind == uform_record_text_k && record->line == 1);
    CHECK(record->text.length == sizeof(expected) &&
          !memcmp(uform_corpus_data(&corpus, record->text), expected, sizeof(expected)));
    record = &corpus.records[1];
    CHECK(record->kind == uform_record_pair_k && record->line == 4);
    CHECK(record->positives_count == 2 && record->negatives_count == 1);
    uform_slice_t positive = corpus.slices[record->first_candidate + 1];
    CHECK(positive.length == 6 && !memcmp(uform_corpus_data(&corpus, positive), "p2\xf0\x9f\x98\x80", 6));
    uform_slice_t negative = corpus.slices[record->first_candidate + 2];
    CHECK(negative.length == 2 && !memcmp(uform_corpus_data(&corpus, negative), "n1", 2));
    record = &corpus.records[2];
    CHECK(record->line == 5 && record->negatives_count == 0 && record->positives_count == 1);
    CHECK(record->text.length == 4 && !memcmp(uform_corpus_data(&corpus, record->text), "only", 4));
    CHECK(corpus.bytes_count <= strlen(text));
    uform_corpus_close(&corpus);

    /* A byte order mark is dropped; a file of blank lines holds no records and is not an error here. */
    CHECK(uform_jsonl_parse("bom.jsonl", "\xef\xbb\xbf{\"text\": \"x\"}\n", 17, NULL, &corpus) == uform_ok_k);
    CHECK(corpus.records_count == 1);
    uform_corpus_close(&corpus);
    CHECK(uform_jsonl_parse("blank.jsonl", "\n \n\t\n", 5, NULL, &corpus) == uform_ok_k && !corpus.records_count);
    uform_corpus_close(&corpus);
}

static void test_jsonl_malformed(void) {
    static char const *const cases[][2] = {
        {"{\"text\": \"ok\"}\n{\"text\": \"unterminated}\n", "not JSON"},
        {"{\"text\": \"ok\"}\n[1, 2]\n", "must be a JSON object"},
        {"{\"text\": \"ok\"}\n{\"text\": \"\"}\n", "'text' must be a non-empty string"},
        {"{\"text\": \"ok\"}\n{\"text\": 5}\n", "'text' must be a non-empty string"},
        {"{\"text\": \"ok\"}\n{\"query\": \"q\", \"positives\": []}\n", "'positives' must be an array of at least one"},
        {"{\"text\": \"ok\"}\n{\"query\": \"q\"}\n", "'positives' must be an array"},
        {"{\"text\": \"ok\"}\n{\"query\": \"q\", \"positives\": [\"p\", 3]}\n", "positive 1 must be a non-empty string"},
        {"{\"text\": \"ok\"}\n{\"query\": \"q\", \"positives\": [\"p\"], \"negatives\": \"n\"}\n", "'negatives' must be an array"},
        {"{\"text\": \"ok\"}\n{\"query\": \"q\", \"positives\": [\"p\"], \"negatives\": [\"\"]}\n", "negative 0 must be"},
        {"{\"text\": \"ok\"}\n{\"text\": \"t\", \"query\": \"q\"}\n", "one or the other"},
        {"{\"text\": \"ok\"}\n{\"lang\": \"de\"}\n", "needs 'text'"},
        {"{\"text\": \"ok\"}\n{\"text\": \"a\", \"text\": \"b\"}\n", "not JSON"},
        {"{\"text\": \"ok\"}\n{\"text\": \"a\"} trailing\n", "not JSON"},
        {"{\"text\": \"ok\"}\n{\"text\": \"\\ud800\"}\n", "not JSON"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        write_text("bad.jsonl", cases[i][0]);
        uform_corpus_t corpus;
        uform_status_t status = uform_jsonl_read(path_in("bad.jsonl"), NULL, &corpus);
        char location[600];
        snprintf(location, sizeof(location), "%s:2: ", path_in("bad.jsonl"));
        if (!fails_with(status, uform_format_k, location, cases[i][1])) fprintf(stderr, "  (case %zu)\n", i);
        CHECK(status == uform_format_k && strstr(uform_last_error(), location) && strstr(uform_last_error(), cases[i][1]));
        CHECK(corpus.records == NULL && corpus.records_count == 0);
    }
    /* Skip mode: malformed lines are counted, the good ones kept, the first problem remembered. */
    char const *mixed = "{\"text\": \"one\"}\nnot json\n{\"text\": \"two\"}\n\n{\"query\": \"q\"}\n{\"text\": \"three\"}\n";
    write_text("mixed.jsonl", mixed);
    uform_corpus_t corpus;
    uform_jsonl_options_t skip = {.skip_malformed = 1};
    CHECK(uform_jsonl_read(path_in("mixed.jsonl"), &skip, &corpus) == uform_ok_k);
    CHECK(corpus.records_count == 3 && corpus.skipped == 2 && corpus.first_skipped_line == 2);
    CHECK(strstr(corpus.first_problem, "not JSON") != NULL);
    CHECK(corpus.records[2].line == 6 && corpus.records[2].text.length == 5);
    CHECK(!memcmp(uform_corpus_data(&corpus, corpus.records[2].text), "three", 5));
    uform_corpus_close(&corpus);
    CHECK(fails_with(uform_jsonl_read(path_in("mixed.jsonl"), NULL, &corpus), uform_format_k, "mixed.jsonl:2:", "not JSON"));
    CHECK(fails_with(uform_jsonl_read(path_in("missing.jsonl"), NULL, &corpus), uform_io_k, "missing.jsonl", "cannot open"));
}

/* --- mixtures --------------------------------------------------------------------------------- */

static void test_mixture(void) {
    write_text("texts.jsonl", "{\"text\": \"hello\"}\n");
    write_text("mixture.json", "{\"objective\": \"mlm\", \"sources\": [{\"path\": \"texts.jsonl\", \"weight\": 2},"
                               " {\"path\": \"texts.jsonl\", \"name\": \"again\", \"skip_malformed\": true}]}");
    uform_mixture_t mixture;
    CHECK(uform_mixture_read(path_in("mixture.json"), &mixture) == uform_ok_k);
    CHECK(mixture.objective == uform_objective_mlm_k && mixture.columns == 4096);
    CHECK(mixture.mask_ratio == 0.15 && mixture.mean_span == 8.0 && mixture.sources_count == 2);
    CHECK(!strcmp(mixture.sources[0].path, path_in("texts.jsonl")) && mixture.sources[0].weight == 2.0);
    CHECK(!strcmp(mixture.sources[0].name, "texts.jsonl") && !strcmp(mixture.sources[1].name, "again"));
    CHECK(mixture.sources[1].weight == 1.0 && mixture.sources[1].skip_malformed && !mixture.sources[0].skip_malformed);
    uform_mixture_close(&mixture);

    static char const *const cases[][3] = {
        {"{\"objective\": \"mlm\", \"sources\": [", "not JSON", NULL},
        {"[1]", "must be a JSON object", NULL},
        {"{\"sources\": [{\"path\": \"texts.jsonl\"}]}", "'objective' must be one of", NULL},
        {"{\"objective\": \"mlm2\", \"sources\": [{\"path\": \"texts.jsonl\"}]}", "\"mlm2\"", NULL},
        {"{\"objective\": \"mlm\", \"colums\": 8, \"sources\": [{\"path\": \"texts.jsonl\"}]}", "unknown key 'colums'", NULL},
        {"{\"objective\": \"mlm\", \"columns\": 0, \"sources\": [{\"path\": \"texts.jsonl\"}]}", "'columns' must be an integer", NULL},
        {"{\"objective\": \"mlm\", \"columns\": 12.5, \"sources\": [{\"path\": \"texts.jsonl\"}]}", "'columns'", NULL},
        {"{\"objective\": \"mlm\", \"mask_ratio\": 1.5, \"sources\": [{\"path\": \"texts.jsonl\"}]}", "'mask_ratio' is 1.5", NULL},
        {"{\"objective\": \"mlm\", \"mask_ratio\": 0, \"sources\": [{\"path\": \"texts.jsonl\"}]}", "'mask_ratio' is 0", NULL},
        {"{\"objective\": \"mlm\", \"mask_ratio\": \"a\", \"sources\": [{\"path\": \"texts.jsonl\"}]}", "'mask_ratio' must be a number", NULL},
        {"{\"objective\": \"mlm\", \"mean_span\": 0.5, \"sources\": [{\"path\": \"texts.jsonl\"}]}", "'mean_span' is 0.5", NULL},
        {"{\"objective\": \"mlm\", \"sources\": []}", "'sources' must be a non-empty array", NULL},
        {"{\"objective\": \"mlm\"}", "'sources' must be a non-empty array", NULL},
        {"{\"objective\": \"mlm\", \"sources\": [\"texts.jsonl\"]}", "source 0 must be an object", NULL},
        {"{\"objective\": \"mlm\", \"sources\": [{\"weight\": 1}]}", "source 0 needs a non-empty string 'path'", NULL},
        {"{\"objective\": \"mlm\", \"sources\": [{\"path\": \"texts.jsonl\", \"weight\": -1}]}", "'weight' must be a positive", NULL},
        {"{\"objective\": \"mlm\", \"sources\": [{\"path\": \"texts.jsonl\", \"weight\": 0}]}", "'weight' must be a positive", NULL},
        {"{\"objective\": \"mlm\", \"sources\": [{\"path\": \"texts.jsonl\", \"wieght\": 1}]}", "unknown key 'wieght' in source 0", NULL},
        {"{\"objective\": \"mlm\", \"sources\": [{\"path\": \"texts.jsonl\", \"loss_weight\": 0}]}", "'loss_weight' must be a number in (0, 1000]", NULL},
        {"{\"objective\": \"mlm\", \"sources\": [{\"path\": \"texts.jsonl\", \"loss_weight\": \"2\"}]}", "'loss_weight' must be a number", NULL},
        {"{\"objective\": \"mlm\", \"sources\": [{\"path\": \"texts.jsonl\", \"loss_weight\": 1001}]}", "'loss_weight' must be a number", NULL},
        {"{\"objective\": \"mlm\", \"sources\": [{\"path\": \"texts.jsonl\", \"skip_malformed\": 1}]}", "'skip_malformed' must be true or false", NULL},
        {"{\"objective\": \"mlm\", \"sources\": [{\"path\": \"texts.jsonl\", \"flip_images\": \"yes\"}]}", "'flip_images' must be true or false", NULL},
        {"{\"objective\": \"mlm\", \"sources\": [{\"path\": \"texts.jsonl\"}, {\"path\": \"nowhere.jsonl\"}]}", "source 1: cannot read 'nowhere.jsonl'", "nowhere.jsonl"},
        {"{\"objective\": \"mlm\", \"sources\": [{\"path\": \"/\"}]}", "source 0: '/' (resolved to /) is a folder", NULL},
        {"{\"objective\": \"mlm\", \"description\": 3, \"sources\": [{\"path\": \"texts.jsonl\"}]}", "'description' must be a string", NULL},
        {"{\"objective\": \"mlm\", \"objective\": \"rerank\", \"sources\": [{\"path\": \"texts.jsonl\"}]}", "not JSON", NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        write_text("bad.json", cases[i][0]);
        uform_status_t status = uform_mixture_read(path_in("bad.json"), &mixture);
        uform_status_t expected = strstr(cases[i][1], "cannot read") || strstr(cases[i][1], "is a folder") ? uform_io_k : uform_format_k;
        int ok = fails_with(status, expected, cases[i][1], cases[i][2]) && strstr(uform_last_error(), path_in("bad.json"));
        if (!ok) fprintf(stderr, "  (mixture case %zu)\n", i);
        CHECK(ok);
        CHECK(mixture.sources == NULL);
    }
    /* Too many sources. */
    buffer_t many = {0};
    append(&many, "{\"objective\": \"mlm\", \"sources\": [");
    for (int i = 0; i <= uform_mixture_max_sources_k; ++i) append(&many, "%s{\"path\": \"texts.jsonl\"}", i ? ", " : "");
    append(&many, "]}");
    CHECK(fails_with(uform_mixture_parse(path_in("many.json"), many.data, many.length, &mixture), uform_format_k,
                     "65 sources", "at most 64"));
    free(many.data);
    /* Absolute source paths stay as they are; relative ones join the mixture's folder. */
    char text[1024];
    snprintf(text, sizeof(text), "{\"objective\": \"rerank\", \"columns\": 64, \"sources\": [{\"path\": \"%s\"}]}",
             path_in("texts.jsonl"));
    CHECK(uform_mixture_parse("/elsewhere/m.json", text, strlen(text), &mixture) == uform_ok_k);
    CHECK(!strcmp(mixture.sources[0].path, path_in("texts.jsonl")) && mixture.objective == uform_objective_rerank_k);
    CHECK(mixture.columns == 64);
    uform_mixture_close(&mixture);
    CHECK(fails_with(uform_mixture_read(path_in("absent.json"), &mixture), uform_io_k, "absent.json", "cannot open"));
}

/* --- corpora for the batcher ------------------------------------------------------------------ */

typedef struct {
    uint8_t **texts;
    size_t *lengths;
    size_t count;
} texts_t;

/* `count` texts of 7-bit bytes (control bytes and NUL included) with lengths uniform in
 * [shortest, longest], written as {"text"} lines to `name`. */
static texts_t make_texts(char const *name, size_t count, size_t shortest, size_t longest, uint64_t seed) {
    texts_t texts = {calloc(count, sizeof(uint8_t *)), calloc(count, sizeof(size_t)), count};
    uform_rng_t rng = {seed};
    buffer_t file = {0};
    for (size_t i = 0; i < count; ++i) {
        size_t length = shortest + (size_t)(uform_rng_next(&rng) % (longest - shortest + 1));
        texts.texts[i] = malloc(length);
        texts.lengths[i] = length;
        for (size_t j = 0; j < length; ++j) texts.texts[i][j] = (uint8_t)(uform_rng_next(&rng) % 128);
        append(&file, "{\"text\": \"");
        append_json_bytes(&file, texts.texts[i], length);
        append(&file, "\"}\n");
    }
    write_file(name, file.data, file.length);
    free(file.data);
    return texts;
}

static void free_texts(texts_t *texts) {
    for (size_t i = 0; i < texts->count; ++i) free(texts->texts[i]);
    free(texts->texts);
    free(texts->lengths);
}

/* Whether `bytes` is one of the texts, or the first `columns` bytes of a longer one. */
static int known_text(texts_t const *texts, uint8_t const *bytes, size_t length, size_t columns) {
    for (size_t i = 0; i < texts->count; ++i)
        if ((texts->lengths[i] == length || (length == columns && texts->lengths[i] > columns)) &&
            !memcmp(texts->texts[i], bytes, length))
            return 1;
    return 0;
}

static uform_mixture_t make_mixture(char const *name, char const *body) {
    write_text(name, body);
    uform_mixture_t mixture;
    if (uform_mixture_read(path_in(name), &mixture) != uform_ok_k) {
        fprintf(stderr, "mixture %s: %s\n", name, uform_last_error());
        exit(2);
    }
    return mixture;
}

/* A segment found by scanning the grid as uform_forward numbers segments. */
typedef struct {
    size_t row, first, length;
} found_segment_t;

/* Checks the layout of a grid, returns the segments in uform_forward's order (caller frees).
 * `bad` counts violations: padding not (kind padding, value 257, segment -1, position 0); a
 * segment id reused in a row; positions not (i, i, i); ids not 0, 1, 2, ... along the row. */
static found_segment_t *scan_grid(uform_batch_t const *batch, size_t *count, size_t *bad) {
    uform_grid_t const *grid = &batch->grid;
    found_segment_t *segments = malloc(grid->rows * grid->columns * sizeof(found_segment_t));
    *count = 0;
    for (size_t row = 0; row < grid->rows; ++row) {
        int32_t expected_id = 0;
        int seen_padding = 0;
        for (size_t column = 0; column < grid->columns; ++column) {
            size_t cell = row * grid->columns + column;
            int32_t const *position = grid->positions + 3 * cell;
            if (grid->segments[cell] < 0) {
                *bad += grid->kinds[cell] != uform_cell_padding_k || grid->values[cell] != uform_pad_k ||
                        grid->segments[cell] != -1 || position[0] || position[1] || position[2] ||
                        (batch->targets && batch->targets[cell] != -1);
                seen_padding = 1;
                continue;
            }
            *bad += seen_padding; /* padding only closes a row: segments are packed from column 0 */
            *bad += grid->kinds[cell] != uform_cell_byte_k || grid->values[cell] > uform_mask_k;
            int starts = column == 0 || grid->segments[cell - 1] != grid->segments[cell];
            if (starts) {
                *bad += grid->segments[cell] != expected_id++;
                segments[(*count)++] = (found_segment_t){row, cell, 0};
            }
            found_segment_t *segment = &segments[*count - 1];
            *bad += position[0] != (int32_t)segment->length || position[1] != position[0] || position[2] != position[0];
            segment->length++;
        }
    }
    return segments;
}

/* The original bytes of a segment: the grid's values, with each masked cell's target. */
static void segment_bytes(uform_batch_t const *batch, found_segment_t const *segment, uint8_t *bytes) {
    for (size_t i = 0; i < segment->length; ++i) {
        size_t cell = segment->first + i;
        int masked = batch->targets && batch->targets[cell] >= 0;
        bytes[i] = (uint8_t)(masked ? (uint32_t)batch->targets[cell] : batch->grid.values[cell]);
    }
}

/* A copy of everything a batch holds, for comparing streams. */
typedef struct {
    size_t cells, anchors, candidates;
    uint8_t *data;
    size_t bytes;
} snapshot_t;

static snapshot_t snapshot(uform_batch_t const *batch) {
    size_t cells = batch->grid.rows * batch->grid.columns;
    snapshot_t copy = {cells, batch->anchors_count, batch->candidates_count, NULL, 0};
    copy.bytes = cells * (1 + 4 + 4 + 12 + 4) + (batch->anchors_count + batch->candidates_count) * 4 +
                 batch->anchors_count * batch->candidates_count;
    copy.data = calloc(copy.bytes, 1);
    uint8_t *cursor = copy.data;
#define COPY(pointer, size) do { if (pointer) memcpy(cursor, pointer, size); cursor += size; } while (0)
    COPY(batch->grid.kinds, cells);
    COPY(batch->grid.values, cells * 4);
    COPY(batch->grid.segments, cells * 4);
    COPY(batch->grid.positions, cells * 12);
    COPY(batch->targets, cells * 4);
    COPY(batch->anchors, batch->anchors_count * 4);
    COPY(batch->candidates, batch->candidates_count * 4);
    COPY(batch->labels, batch->anchors_count * batch->candidates_count);
#undef COPY
    return copy;
}

static int same_snapshot(snapshot_t const *a, snapshot_t const *b) {
    return a->bytes == b->bytes && a->anchors == b->anchors && a->candidates == b->candidates &&
           !memcmp(a->data, b->data, a->bytes);
}

/* --- determinism and resume ------------------------------------------------------------------- */

static void test_determinism(void) {
    texts_t texts = make_texts("determinism.jsonl", 300, 1, 200, 11);
    texts_t long_texts = make_texts("determinism2.jsonl", 50, 100, 700, 12);
    uform_mixture_t mixture = make_mixture("determinism.json",
        "{\"objective\": \"mlm\", \"columns\": 512, \"sources\": [{\"path\": \"determinism.jsonl\", \"weight\": 3},"
        " {\"path\": \"determinism2.jsonl\", \"weight\": 1}]}");
    enum { batches = 40, skipped = 17 };
    uform_batcher_options_t options = {.rows = 4, .seed = 42};
    uform_batcher_t *first, *second, *other, *resumed;
    CHECK(uform_batcher_create(&mixture, &options, &first) == uform_ok_k);
    CHECK(uform_batcher_create(&mixture, &options, &second) == uform_ok_k);
    uform_batcher_options_t other_options = options;
    other_options.seed = 43;
    CHECK(uform_batcher_create(&mixture, &other_options, &other) == uform_ok_k);
    snapshot_t reference[batches];
    int same = 1, differs = 0;
    uform_batcher_state_t saved;
    for (int i = 0; i < batches; ++i) {
        if (i == skipped) uform_batcher_save(first, &saved);
        uform_batch_t batch;
        uform_batcher_next(first, &batch);
        reference[i] = snapshot(&batch);
        uform_batcher_next(second, &batch);
        snapshot_t copy = snapshot(&batch);
        same &= same_snapshot(&reference[i], &copy);
        free(copy.data);
        uform_batcher_next(other, &batch);
        copy = snapshot(&batch);
        differs |= !same_snapshot(&reference[i], &copy);
        free(copy.data);
    }
    CHECK(same);    /* same seed: bitwise the same batches */
    CHECK(differs); /* another seed: another stream */

    /* Skipping N batches, and restoring a state saved after N, both continue the same stream. */
    CHECK(uform_batcher_create(&mixture, &options, &resumed) == uform_ok_k);
    CHECK(uform_batcher_skip(resumed, skipped) == uform_ok_k);
    int skip_same = 1;
    for (int i = skipped; i < batches; ++i) {
        uform_batch_t batch;
        uform_batcher_next(resumed, &batch);
        snapshot_t copy = snapshot(&batch);
        skip_same &= same_snapshot(&reference[i], &copy);
        free(copy.data);
    }
    CHECK(skip_same);
    uform_batcher_state_t after_skip, after_next;
    uform_batcher_save(resumed, &after_skip);
    uform_batcher_save(first, &after_next);
    CHECK(!memcmp(&after_skip, &after_next, sizeof(after_skip)));
    uform_batcher_close(resumed);

    CHECK(uform_batcher_create(&mixture, &options, &resumed) == uform_ok_k);
    uform_batch_t batch;
    uform_batcher_next(resumed, &batch); /* move away first: restore must rewind the stream too */
    CHECK(uform_batcher_restore(resumed, &saved) == uform_ok_k);
    int restore_same = 1;
    for (int i = skipped; i < batches; ++i) {
        uform_batcher_next(resumed, &batch);
        snapshot_t copy = snapshot(&batch);
        restore_same &= same_snapshot(&reference[i], &copy);
        free(copy.data);
    }
    CHECK(restore_same);
    CHECK(saved.batches == skipped && saved.waiting_count == uform_batcher_lookahead_k);
    CHECK(fails_with(uform_batcher_restore(other, &saved), uform_invalid_argument_k, "another mixture", NULL));
    uform_batcher_state_t broken = saved;
    broken.waiting_records[0] = 1000000;
    CHECK(fails_with(uform_batcher_restore(resumed, &broken), uform_invalid_argument_k, "out of range", NULL));

    uform_batcher_stats_t stats;
    uform_batcher_stats(first, &stats);
    CHECK(stats.batches == batches && stats.records == 350 && stats.segments > 0);
    /* Texts of up to 700 bytes in 512 columns: the long ones are cut and counted. */
    CHECK(stats.truncated > 0);
    for (int i = 0; i < batches; ++i) free(reference[i].data);
    uform_batcher_close(first);
    uform_batcher_close(second);
    uform_batcher_close(other);
    uform_batcher_close(resumed);
    uform_mixture_close(&mixture);
    free_texts(&texts);
    free_texts(&long_texts);
}

/* --- packing ---------------------------------------------------------------------------------- */

/* Fill guarantee: a row closes only when none of the lookahead waiting items fits its free cells,
 * so its padding is shorter than the shortest waiting item, hence shorter than the longest item:
 * with items of at most L cells every row is more than 1 - L / columns full. The last row of a
 * batch closes when the batch ends, so the waiting list saved after it must all be too long for
 * that row's padding: this checks the mechanism itself, not only the bound. */
static void check_packing(size_t shortest, size_t longest, uint64_t seed) {
    enum { columns = 1024, rows = 8, batches = 60 };
    texts_t texts = make_texts("packing.jsonl", 2000, shortest, longest, seed);
    uform_mixture_t mixture = make_mixture("packing.json",
        "{\"objective\": \"mlm\", \"columns\": 1024, \"sources\": [{\"path\": \"packing.jsonl\"}]}");
    uform_batcher_options_t options = {.rows = rows, .seed = seed};
    uform_batcher_t *batcher;
    CHECK(uform_batcher_create(&mixture, &options, &batcher) == uform_ok_k);
    size_t bad = 0, unknown = 0, worst_padding = 0, used = 0, segments_total = 0, last_row_fits = 0;
    uint8_t bytes[columns];
    for (int b = 0; b < batches; ++b) {
        uform_batch_t batch;
        CHECK(uform_batcher_next(batcher, &batch) == uform_ok_k);
        CHECK(batch.grid.rows == rows && batch.grid.columns == columns && batch.targets && !batch.anchors);
        size_t count;
        found_segment_t *segments = scan_grid(&batch, &count, &bad);
        size_t row_used[rows] = {0};
        for (size_t s = 0; s < count; ++s) {
            segment_bytes(&batch, &segments[s], bytes);
            unknown += !known_text(&texts, bytes, segments[s].length, columns);
            row_used[segments[s].row] += segments[s].length;
        }
        for (size_t row = 0; row < rows; ++row) {
            if (columns - row_used[row] > worst_padding) worst_padding = columns - row_used[row];
            used += row_used[row];
        }
        uform_batcher_state_t state;
        uform_batcher_save(batcher, &state);
        for (uint32_t i = 0; i < state.waiting_count; ++i)
            last_row_fits += texts.lengths[state.waiting_records[i]] <= columns - row_used[rows - 1];
        segments_total += count;
        free(segments);
    }
    CHECK(bad == 0);
    CHECK(unknown == 0);
    CHECK(worst_padding < longest);
    CHECK(last_row_fits == 0);
    double fill = (double)used / ((double)batches * rows * columns);
    printf("packing %zu..%zu bytes in %d columns: %zu segments, fill %.4f, worst row padding %zu (bound < %zu)\n",
           shortest, longest, columns, segments_total, fill, worst_padding, longest);
    uform_batcher_stats_t stats;
    uform_batcher_stats(batcher, &stats);
    CHECK(stats.segments == segments_total && stats.truncated == 0);
    uform_batcher_close(batcher);
    uform_mixture_close(&mixture);
    free_texts(&texts);
}

static void test_packing(void) {
    enum { columns = 1024, rows = 8 };
    uint8_t bytes[columns];
    check_packing(1, 64, 21);    /* short texts: every row > 93.75 % full */
    check_packing(100, 300, 22); /* long ones: every row > 70.7 % full by the bound */
    check_packing(1, 1024, 23);  /* anything up to a whole row: no bound, still checked */

    /* A text longer than a row is cut to the row and counted. */
    texts_t texts = make_texts("long.jsonl", 3, 100, 140, 3);
    uform_mixture_t mixture =
        make_mixture("long.json", "{\"objective\": \"mlm\", \"columns\": 64, \"sources\": [{\"path\": \"long.jsonl\"}]}");
    uform_batcher_options_t options = {.rows = rows, .seed = 5};
    uform_batcher_t *batcher;
    CHECK(uform_batcher_create(&mixture, &options, &batcher) == uform_ok_k);
    uform_batch_t batch;
    uform_batcher_next(batcher, &batch);
    size_t count, bad = 0, unknown = 0;
    found_segment_t *segments = scan_grid(&batch, &count, &bad);
    CHECK(count == rows && bad == 0);
    for (size_t s = 0; s < count; ++s) {
        segment_bytes(&batch, &segments[s], bytes);
        unknown += segments[s].length != 64 || !known_text(&texts, bytes, 64, 64);
    }
    CHECK(unknown == 0);
    uform_batcher_stats_t stats;
    uform_batcher_stats(batcher, &stats);
    CHECK(stats.truncated == rows);
    free(segments);
    uform_batcher_close(batcher);
    uform_mixture_close(&mixture);
    free_texts(&texts);
}

/* --- masking ---------------------------------------------------------------------------------- */

/* Per segment of n cells, floor(r n + u) cells are masked (u uniform): within one cell of r n, and
 * the total over S segments deviates from r sum(n) by a sum of independent terms of variance
 * f (1 - f), f = frac(r n); we allow 5 standard deviations. Spans break after each masked cell
 * with probability p = 1 / mean_span, so a segment with m masked cells has 1 + Binomial(m - 1, p)
 * spans: the span count is bounded the same way, which bounds the mean span length. */
static void check_masking(double ratio, double mean_span, size_t shortest, size_t longest, int batches) {
    char body[512];
    snprintf(body, sizeof(body),
             "{\"objective\": \"mlm\", \"columns\": 1024, \"mask_ratio\": %.17g, \"mean_span\": %.17g,"
             " \"sources\": [{\"path\": \"masking.jsonl\"}]}", ratio, mean_span);
    texts_t texts = make_texts("masking.jsonl", 3000, shortest, longest, 31);
    uform_mixture_t mixture = make_mixture("masking.json", body);
    uform_batcher_options_t options = {.rows = 16, .seed = 77};
    uform_batcher_t *batcher;
    CHECK(uform_batcher_create(&mixture, &options, &batcher) == uform_ok_k);
    double p = 1.0 / mean_span, deviation = 0, deviation_variance = 0, spans = 0, spans_expected = 0,
           spans_variance = 0, masked_total = 0, cells_total = 0;
    size_t outside = 0, bad = 0, mismatched = 0, segments_count = 0;
    for (int b = 0; b < batches; ++b) {
        uform_batch_t batch;
        uform_batcher_next(batcher, &batch);
        size_t count;
        found_segment_t *segments = scan_grid(&batch, &count, &bad);
        for (size_t s = 0; s < count; ++s) {
            size_t masked = 0, runs = 0;
            for (size_t i = 0; i < segments[s].length; ++i) {
                size_t cell = segments[s].first + i;
                int is_masked = batch.targets[cell] >= 0;
                mismatched += is_masked != (batch.grid.values[cell] == uform_mask_k);
                masked += is_masked;
                runs += is_masked && (i == 0 || batch.targets[cell - 1] < 0);
            }
            double exact = ratio * (double)segments[s].length, fraction = exact - floor(exact);
            outside += masked != (size_t)floor(exact) && masked != (size_t)floor(exact) + 1;
            deviation += (double)masked - exact;
            deviation_variance += fraction * (1 - fraction);
            if (masked) {
                spans += (double)runs;
                spans_expected += 1 + (double)(masked - 1) * p;
                spans_variance += (double)(masked - 1) * p * (1 - p);
            }
            masked_total += (double)masked;
            cells_total += (double)segments[s].length;
        }
        segments_count += count;
        free(segments);
    }
    CHECK(bad == 0 && mismatched == 0);
    CHECK(outside == 0);
    CHECK(fabs(deviation) <= 5 * sqrt(deviation_variance) + 1e-9);
    CHECK(fabs(spans - spans_expected) <= 5 * sqrt(spans_variance) + 1e-9);
    printf("masking r=%.2f span=%.1f: %zu segments, ratio %.5f (target %.5f), mean span %.3f (expected %.3f; "
           "%.1f sigma)\n", ratio, mean_span, segments_count, masked_total / cells_total, ratio, masked_total / spans,
           masked_total / spans_expected, spans_variance > 0 ? (spans - spans_expected) / sqrt(spans_variance) : 0.0);
    uform_batcher_close(batcher);
    uform_mixture_close(&mixture);
    free_texts(&texts);
}

static void test_masking(void) {
    check_masking(0.15, 8, 1, 1000, 60);   /* the defaults, over short and long segments */
    check_masking(0.15, 8, 800, 1000, 40); /* long segments: mean span close to 8 itself */
    check_masking(0.4, 3, 1, 300, 30);
    check_masking(0.15, 1, 1, 300, 30);    /* mean_span 1: every span a single cell */
}

/* --- pairs ------------------------------------------------------------------------------------ */

/* Record i: query "q<i>..." (varied lengths), positives "p<i>a..." and for i % 3 == 0 "p<i>b",
 * negatives "n<i>" for even i; records 3 and 5 also share the positive "shared positive", so each
 * one's copy is a positive of both anchors (labels follow content: docs/data.md). */
enum { pair_records = 40 };

static size_t record_texts(size_t i, char texts[][96], size_t *positives) {
    size_t count = 0;
    snprintf(texts[count++], 96, "q%03zu%.*s", i, (int)(i * 7 % 40), "????????????????????????????????????????");
    snprintf(texts[count++], 96, "p%03zua%.*s", i, (int)(i * 5 % 30), "++++++++++++++++++++++++++++++");
    if (i % 3 == 0) snprintf(texts[count++], 96, "p%03zub", i);
    if (i == 3 || i == 5) snprintf(texts[count++], 96, "shared positive");
    *positives = count - 1;
    if (i % 2 == 0) snprintf(texts[count++], 96, "n%03zu", i);
    return count;
}

static void test_pairs(uform_objective_t objective) {
    buffer_t file = {0};
    for (size_t i = 0; i < pair_records; ++i) {
        char texts[8][96];
        size_t positives, count = record_texts(i, texts, &positives);
        append(&file, "{\"query\": \"%s\", \"positives\": [", texts[0]);
        for (size_t t = 1; t <= positives; ++t) append(&file, "%s\"%s\"", t > 1 ? ", " : "", texts[t]);
        append(&file, "]");
        if (count > positives + 1) append(&file, ", \"negatives\": [\"%s\"]", texts[positives + 1]);
        append(&file, ", \"lang\": \"xx\"}\n");
    }
    write_file("pairs.jsonl", file.data, file.length);
    free(file.data);
    char body[256];
    snprintf(body, sizeof(body), "{\"objective\": \"%s\", \"columns\": 256, \"sources\": [{\"path\": \"pairs.jsonl\"}]}",
             uform_objective_name(objective));
    uform_mixture_t mixture = make_mixture("pairs.json", body);
    for (int limited = 0; limited < 2; ++limited) {
        uform_batcher_options_t options = {.rows = 3, .seed = 9, .anchors_limit = limited ? 5 : 0};
        uform_batcher_t *batcher;
        CHECK(uform_batcher_create(&mixture, &options, &batcher) == uform_ok_k);
        size_t bad = 0, wrong_anchor = 0, wrong_group = 0, wrong_label = 0, wrong_list = 0, shared_together = 0;
        for (int b = 0; b < 30; ++b) {
            uform_batch_t batch;
            uform_batcher_next(batcher, &batch);
            CHECK(batch.targets == NULL && batch.anchors && batch.candidates && batch.labels);
            CHECK(!limited || batch.anchors_count <= 5);
            size_t count;
            found_segment_t *segments = scan_grid(&batch, &count, &bad);
            /* Anchors: exactly the query segments; candidates: all the others; both ascending. */
            int *is_anchor = calloc(count, sizeof(int)), *candidate_index = malloc(count * sizeof(int));
            wrong_list += batch.anchors_count + batch.candidates_count != count;
            for (size_t a = 0; a < batch.anchors_count; ++a) {
                wrong_list += batch.anchors[a] >= count || (a && batch.anchors[a] <= batch.anchors[a - 1]);
                if (batch.anchors[a] < count) is_anchor[batch.anchors[a]] = 1;
            }
            for (size_t s = 0; s < count; ++s) candidate_index[s] = -1;
            for (size_t c = 0; c < batch.candidates_count; ++c) {
                wrong_list += batch.candidates[c] >= count || (c && batch.candidates[c] <= batch.candidates[c - 1]);
                if (batch.candidates[c] < count) candidate_index[batch.candidates[c]] = (int)c;
            }
            uint8_t bytes[256];
            size_t anchor_number = 0, shared_seen = 0;
            for (size_t s = 0; s < count;) {
                segment_bytes(&batch, &segments[s], bytes);
                wrong_anchor += (bytes[0] == 'q') != is_anchor[s] || (is_anchor[s] && candidate_index[s] >= 0);
                if (!is_anchor[s]) {
                    s++;
                    continue;
                }
                /* The group: this anchor's record's texts, in order, in the segments that follow. */
                size_t record = (size_t)atoi((char const *)bytes + 1), positives;
                char texts[8][96];
                size_t texts_count = record_texts(record, texts, &positives);
                for (size_t t = 0; t < texts_count; ++t) {
                    if (s + t >= count) {
                        wrong_group++;
                        break;
                    }
                    found_segment_t const *segment = &segments[s + t];
                    segment_bytes(&batch, segment, bytes);
                    wrong_group += segment->row != segments[s].row ||
                                   segment->length != strlen(texts[t]) || memcmp(bytes, texts[t], segment->length);
                }
                /* Its labels: 1 exactly at its own positives and at any text equal to one of them. */
                for (size_t c = 0; c < batch.candidates_count; ++c) {
                    size_t segment = batch.candidates[c];
                    int positive = segment > s && segment <= s + positives;
                    uint8_t other[256];
                    segment_bytes(&batch, &segments[segment], other);
                    for (size_t t = 1; t <= positives; ++t)
                        positive |= segments[segment].length == strlen(texts[t]) && !memcmp(other, texts[t], segments[segment].length);
                    wrong_label += batch.labels[anchor_number * batch.candidates_count + c] != positive;
                }
                shared_seen += record == 3 || record == 5;
                anchor_number++;
                s += texts_count;
            }
            shared_together += shared_seen == 2;
            free(is_anchor);
            free(candidate_index);
            free(segments);
        }
        CHECK(bad == 0 && wrong_list == 0 && wrong_anchor == 0 && wrong_group == 0 && wrong_label == 0);
        if (!limited) CHECK(shared_together > 0); /* the shared positive was tested against the other anchor */
        uform_batcher_close(batcher);
    }
    uform_mixture_close(&mixture);
}

/* A source's loss_weight: every anchor of the batch carries its source's; without one, no weights. */
static void test_loss_weights(void) {
    buffer_t file = {0};
    for (char source = 'a'; source <= 'b'; ++source) {
        for (int i = 0; i < 40; ++i) append(&file, "{\"query\": \"q%c%d\", \"positives\": [\"p%c%d\"]}\n", source, i, source, i);
        write_file(source == 'a' ? "weighted_a.jsonl" : "weighted_b.jsonl", file.data, file.length);
        file.length = 0;
    }
    free(file.data);
    uform_mixture_t mixture = make_mixture("weighted.json", "{\"objective\": \"contrastive\", \"columns\": 64, \"sources\": ["
                                                            "{\"path\": \"weighted_a.jsonl\", \"loss_weight\": 0.25},"
                                                            " {\"path\": \"weighted_b.jsonl\"}]}");
    CHECK(mixture.sources[0].loss_weight == 0.25 && mixture.sources[1].loss_weight == 1.0);
    uform_batcher_options_t options = {.rows = 4, .seed = 3};
    uform_batcher_t *batcher;
    CHECK(uform_batcher_create(&mixture, &options, &batcher) == uform_ok_k);
    size_t wrong = 0, bad = 0, seen[2] = {0, 0};
    for (int b = 0; b < 10; ++b) {
        uform_batch_t batch;
        CHECK(uform_batcher_next(batcher, &batch) == uform_ok_k && batch.anchor_weights);
        size_t count;
        found_segment_t *segments = scan_grid(&batch, &count, &bad);
        for (size_t a = 0; a < batch.anchors_count; ++a) {
            uint8_t bytes[256];
            segment_bytes(&batch, &segments[batch.anchors[a]], bytes);
            int first = bytes[1] == 'a';
            seen[first]++;
            wrong += batch.anchor_weights[a] != (first ? 0.25f : 1.0f);
        }
        free(segments);
    }
    CHECK(wrong == 0 && bad == 0 && seen[0] && seen[1]);
    uform_batcher_close(batcher);
    uform_mixture_close(&mixture);
    /* Without a loss_weight the batches carry none (the loss as SPEC.md has it). */
    mixture = make_mixture("unweighted.json", "{\"objective\": \"rerank\", \"columns\": 64, \"sources\": [{\"path\": \"weighted_a.jsonl\"}]}");
    CHECK(uform_batcher_create(&mixture, &options, &batcher) == uform_ok_k);
    uform_batch_t batch;
    CHECK(uform_batcher_next(batcher, &batch) == uform_ok_k && batch.anchors_count && !batch.anchor_weights);
    uform_batcher_close(batcher);
    uform_mixture_close(&mixture);
    /* MLM has no anchors to weigh: refused, not ignored. */
    write_text("texts_w.jsonl", "{\"text\": \"hello\"}\n");
    mixture = make_mixture("mlm_weighted.json", "{\"objective\": \"mlm\", \"sources\": [{\"path\": \"texts_w.jsonl\", \"loss_weight\": 2}]}");
    CHECK(fails_with(uform_batcher_create(&mixture, &options, &batcher), uform_invalid_argument_k, "mlm_weighted.json",
                     "'loss_weight' scales a pair objective's anchors"));
    uform_mixture_close(&mixture);
}

/* A pair group longer than a row: its texts are cut to a common length so that it fits. */
static void test_pair_truncation(void) {
    write_text("wide.jsonl", "{\"query\": \"QQQQQQQQQQQQQQQQQQQQ\", \"positives\": [\"PPPPPPPPPP\"], \"negatives\": [\"N\"]}\n");
    uform_mixture_t mixture = make_mixture("wide.json",
        "{\"objective\": \"contrastive\", \"columns\": 16, \"sources\": [{\"path\": \"wide.jsonl\"}]}");
    uform_batcher_options_t options = {.rows = 2, .seed = 1};
    uform_batcher_t *batcher;
    CHECK(uform_batcher_create(&mixture, &options, &batcher) == uform_ok_k);
    uform_batch_t batch;
    uform_batcher_next(batcher, &batch);
    size_t count, bad = 0;
    found_segment_t *segments = scan_grid(&batch, &count, &bad);
    /* 20 + 10 + 1 cells into 16: a cap of 7 gives 7 + 7 + 1 = 15, the spare cell goes to the query. */
    CHECK(bad == 0 && count == 6 && segments[0].length == 8 && segments[1].length == 7 && segments[2].length == 1);
    CHECK(batch.anchors_count == 2 && batch.candidates_count == 4);
    /* The record twice: each copy of its positive is a positive of both anchors, its negatives of neither. */
    CHECK(batch.labels[0] == 1 && batch.labels[1] == 0 && batch.labels[2] == 1 && batch.labels[3] == 0);
    CHECK(batch.labels[4] == 1 && batch.labels[5] == 0 && batch.labels[6] == 1 && batch.labels[7] == 0);
    uform_batcher_stats_t stats;
    uform_batcher_stats(batcher, &stats);
    CHECK(stats.truncated == 4 && stats.segments == 6);
    free(segments);
    uform_batcher_close(batcher);
    uform_mixture_close(&mixture);
}

static void test_batcher_errors(void) {
    write_text("pairs_only.jsonl", "{\"text\": \"fine\"}\n{\"query\": \"q\", \"positives\": [\"p\"]}\n");
    uform_mixture_t mixture = make_mixture("wrong_kind.json",
        "{\"objective\": \"mlm\", \"sources\": [{\"path\": \"pairs_only.jsonl\"}]}");
    uform_batcher_options_t options = {.rows = 2, .seed = 1};
    uform_batcher_t *batcher = (uform_batcher_t *)&options;
    CHECK(fails_with(uform_batcher_create(&mixture, &options, &batcher), uform_format_k, "pairs_only.jsonl:2:",
                     "a pair record, but an mlm mixture reads"));
    CHECK(batcher == NULL);
    uform_mixture_close(&mixture);

    write_text("many_texts.jsonl", "{\"query\": \"q\", \"positives\": [\"a\", \"b\", \"c\", \"d\"]}\n");
    mixture = make_mixture("narrow.json",
        "{\"objective\": \"rerank\", \"columns\": 4, \"sources\": [{\"path\": \"many_texts.jsonl\"}]}");
    CHECK(fails_with(uform_batcher_create(&mixture, &options, &batcher), uform_format_k, "many_texts.jsonl:1:",
                     "5 texts cannot fit a row of 4 columns"));
    uform_mixture_close(&mixture);

    write_text("empty.jsonl", "\nnot json\n");
    mixture = make_mixture("empty.json",
        "{\"objective\": \"mlm\", \"sources\": [{\"path\": \"empty.jsonl\", \"skip_malformed\": true}]}");
    CHECK(fails_with(uform_batcher_create(&mixture, &options, &batcher), uform_format_k, "empty.jsonl: no records",
                     "1 skipped"));
    options.rows = 0;
    CHECK(fails_with(uform_batcher_create(&mixture, &options, &batcher), uform_invalid_argument_k, "0 rows", NULL));
    uform_mixture_close(&mixture);
}

/* 1 with the next image segment at or after `*first`: its first cell and `*length` cells; 0 when none is left. */
static int next_image_segment(uform_grid_t const *grid, size_t *first, size_t *length) {
    size_t cells = grid->rows * grid->columns, cell = *first;
    while (cell < cells && grid->kinds[cell] != uform_cell_image_k) cell++;
    if (cell == cells) return 0;
    *first = cell;
    while (cell < cells && grid->kinds[cell] == uform_cell_image_k && grid->segments[cell] == grid->segments[*first]) cell++;
    *length = cell - *first;
    return 1;
}

/* Image sides of pair records: their cells (t = 0, h = patch row, w = patch column), their media
 * rows exactly the file's patches in BF16, texts beside them cut to what the images leave; a
 * broken image fails the batcher naming file and line, or with skip_malformed drops its record. */
static void test_image_records(void) {
    write_png("a.png", 40, 24, 1);  /* 3x2 patches (rounded), at its own size */
    write_png("b.png", 16, 16, 2);  /* 1x1 */
    mkdir(path_in("img"), 0755);
    write_png("img/c.png", 64, 32, 3);   /* 4x2 */
    write_png("img/d.png", 200, 100, 4); /* shrunk to at most the row: 9x4 patches of a 40-column row */
    write_text("images.jsonl",
               "{\"query\": \"a red fox\", \"positives\": [{\"image\": \"a.png\"}]}\n"
               "{\"query\": {\"image\": \"b.png\"}, \"positives\": [\"green\"], \"negatives\": [{\"image\": \"img/c.png\"}]}\n");
    uform_mixture_t mixture = make_mixture("images.json",
        "{\"objective\": \"contrastive\", \"columns\": 40, \"sources\": [{\"path\": \"images.jsonl\"}]}");
    uform_batcher_options_t options = {.rows = 2, .seed = 3};
    uform_batcher_t *batcher = NULL;
    CHECK(uform_batcher_create(&mixture, &options, &batcher) == uform_ok_k);
    uform_batcher_stats_t stats;
    if (batcher) uform_batcher_stats(batcher, &stats);
    CHECK(batcher && stats.image_sides == 3);
    uform_batch_t batch;
    size_t images_seen = 0, seen[3] = {0}; /* over batches: the longest waiting items go first */
    for (int b = 0; b < 40 && !(seen[0] && seen[1] && seen[2]); ++b) {
    CHECK(batcher && uform_batcher_next(batcher, &batch) == uform_ok_k);
    if (!batcher) return;
    uform_grid_t const *grid = &batch.grid;
    CHECK(grid->media[0].data && grid->media[0].dtype == uform_media_bf16_k);
    /* Each image segment against its own file, decoded and cut here. */
    size_t image_cells = 0;
    for (size_t first = 0, length = 0; next_image_segment(grid, &first, &length); first += length) {
        size_t which = length == 6 ? 0 : length == 1 ? 1 : 2; /* 8 cells: c.png */
        char const *name = (char const *[]){"a.png", "b.png", "img/c.png"}[which];
        seen[which]++;
        uform_pixels_t pixels;
        size_t rows = 0, columns = 0;
        float patches[40 * 1024];
        CHECK(uform_image_read(path_in(name), &pixels) == uform_ok_k);
        CHECK(uform_image_patches(&pixels, 40, patches, 40, &rows, &columns) == uform_ok_k && rows * columns == length);
        uform_pixels_free(&pixels);
        uint16_t const *media = grid->media[0].data;
        size_t wrong = 0;
        for (size_t i = 0; i < length; ++i) {
            int32_t const *position = grid->positions + (first + i) * 3;
            wrong += position[0] != 0 || position[1] != (int32_t)(i / columns) || position[2] != (int32_t)(i % columns);
            for (size_t v = 0; v < 1024; ++v)
                wrong += media[(size_t)grid->values[first + i] * 1024 + v] != uform_f32_to_bf16(patches[i * 1024 + v]);
        }
        CHECK(wrong == 0);
        images_seen++, image_cells += length;
    }
    CHECK(grid->media[0].count == image_cells);
    }
    CHECK(seen[0] && seen[1] && seen[2] && images_seen == seen[0] + seen[1] + seen[2]);
    uform_batcher_close(batcher);
    uform_mixture_close(&mixture);

    /* A record's text shares its row with its images: cut to what they leave. */
    write_text("long_caption.jsonl",
               "{\"query\": \"a caption far longer than the four cells the image leaves of the row\", \"positives\": [{\"image\": \"img/d.png\"}]}\n");
    mixture = make_mixture("long_caption.json",
        "{\"objective\": \"contrastive\", \"columns\": 40, \"sources\": [{\"path\": \"long_caption.jsonl\"}]}");
    CHECK(uform_batcher_create(&mixture, &options, &batcher) == uform_ok_k && uform_batcher_next(batcher, &batch) == uform_ok_k);
    size_t text_cells = 0;
    for (size_t cell = 0; batcher && cell < batch.grid.columns; ++cell) text_cells += batch.grid.kinds[cell] == uform_cell_byte_k;
    CHECK(text_cells == 40 - 36);
    uform_batcher_close(batcher);
    uform_mixture_close(&mixture);

    /* A broken image: named with its record's line, or its record dropped and counted. */
    write_text("broken.png", "\x89PNG\r\n\x1a\n not really");
    write_text("broken.jsonl", "{\"query\": \"fine\", \"positives\": [{\"image\": \"b.png\"}]}\n"
                               "{\"query\": \"broken\", \"positives\": [{\"image\": \"broken.png\"}]}\n"
                               "{\"query\": \"absent\", \"positives\": [{\"image\": \"absent.png\"}]}\n");
    mixture = make_mixture("broken.json",
        "{\"objective\": \"contrastive\", \"columns\": 40, \"sources\": [{\"path\": \"broken.jsonl\"}]}");
    batcher = NULL;
    CHECK(fails_with(uform_batcher_create(&mixture, &options, &batcher), uform_format_k, "broken.jsonl:2:", "broken.png"));
    uform_mixture_close(&mixture);
    mixture = make_mixture("skipped.json",
        "{\"objective\": \"contrastive\", \"columns\": 40, \"sources\": [{\"path\": \"broken.jsonl\", \"skip_malformed\": true}]}");
    CHECK(uform_batcher_create(&mixture, &options, &batcher) == uform_ok_k);
    if (batcher) uform_batcher_stats(batcher, &stats);
    CHECK(batcher && stats.images_skipped == 2 && stats.records == 1 && stats.image_sides == 1);
    uform_batcher_close(batcher);
    uform_mixture_close(&mixture);

    /* Image sides in JSONL: an object of one "image" string, nothing else. */
    uform_corpus_t corpus;
    char const *bad = "{\"query\": \"q\", \"positives\": [{\"image\": \"a.png\", \"alt\": \"x\"}]}\n";
    CHECK(fails_with(uform_jsonl_parse("bad.jsonl", bad, strlen(bad), NULL, &corpus), uform_format_k, "bad.jsonl:1:",
                     "positive 0 must be a non-empty string or {\"image\" | \"audio\" | \"video\": PATH}"));
}

/* A 16-bit mono WAV at 16 kHz of `count` samples of a ramp (exact as PCM / 32768). */
static void write_wave(char const *name, size_t count) {
    uint8_t file[44 + 2 * 4096] = "RIFF\0\0\0\0WAVEfmt \x10\0\0\0\x01\0\x01\0\x80\x3e\0\0\0\x7d\0\0\x02\0\x10\0data";
    uint32_t bytes = (uint32_t)(2 * count), riff = 36 + bytes;
    memcpy(file + 4, &riff, 4), memcpy(file + 40, &bytes, 4);
    for (size_t i = 0; i < count; ++i) {
        int16_t sample = (int16_t)((int)(i * 37 % 2000) - 1000) * 16;
        memcpy(file + 44 + 2 * i, &sample, 2);
    }
    write_file(name, file, 44 + bytes);
}

/* A Y4M clip (4:4:4, 5 fps) of `frames` frames of 32x16, each frame its own pattern. */
static void write_y4m(char const *name, size_t frames) {
    static uint8_t file[64 + 8 * (6 + 3 * 32 * 16)];
    size_t used = (size_t)snprintf((char *)file, 64, "YUV4MPEG2 W32 H16 F5:1 Ip A1:1 C444\n");
    for (size_t f = 0; f < frames; ++f) {
        memcpy(file + used, "FRAME\n", 6), used += 6;
        for (size_t i = 0; i < 3 * 32 * 16; ++i) file[used++] = (uint8_t)(16 + (i * 7 + f * 61) % 220);
    }
    write_file(name, file, used);
}

/* Audio and video sides in a pair batch: their cells' media rows are exactly uform_audio_frames' and
 * uform_video_tubes' of the decoded files in BF16, audio at t = h = w = frame index, video at t = the
 * step's first frame's tick at the mixture's video_fps (5: 10 ticks a step); a file that does not
 * decode fails naming file and line, or with skip_malformed its record is dropped and counted. */
static void test_av_records(void) {
    write_wave("tone.wav", 1000); /* 4 frames, the last zero-padded */
    write_y4m("clip.y4m", 3);      /* 2 steps (the odd frame repeated) of 1x2 tubes */
    /* 14 and 12 cells: two of the first and one of the second fill a row of 40, so both are packed */
    write_text("av.jsonl", "{\"query\": \"a sawtooth\", \"positives\": [{\"audio\": \"tone.wav\"}]}\n"
                           "{\"query\": {\"video\": \"clip.y4m\"}, \"positives\": [\"patterns\"]}\n");
    uform_mixture_t mixture = make_mixture("av.json", "{\"objective\": \"contrastive\", \"columns\": 40, \"video_fps\": 5, "
                                                      "\"sources\": [{\"path\": \"av.jsonl\"}]}");
    uform_batcher_options_t options = {.rows = 2, .seed = 3};
    uform_batcher_t *batcher = NULL;
    uform_batcher_stats_t stats = {0};
    if (uform_batcher_create(&mixture, &options, &batcher) == uform_ok_k) uform_batcher_stats(batcher, &stats);
    CHECK(batcher && stats.audio_sides == 1 && stats.video_sides == 1 && stats.image_sides == 0);
    uform_audio_t audio;
    uform_video_t video;
    float frames[4 * 320], tubes[4 * 1536];
    size_t cells = 0, steps = 0, rows = 0, columns = 0;
    CHECK(uform_audio_read(path_in("tone.wav"), 0, &audio) == uform_ok_k);
    CHECK(uform_audio_frames(audio.samples, audio.count, 40, frames, NULL, 4, &cells) == uform_ok_k && cells == 4);
    uform_audio_free(&audio);
    CHECK(uform_video_read(path_in("clip.y4m"), 5, 0, &video) == uform_ok_k);
    CHECK(uform_video_tubes(&video, 40, tubes, NULL, 4, &steps, &rows, &columns) == uform_ok_k && steps * rows * columns == 4);
    uform_video_free(&video);
    uform_batch_t batch;
    size_t seen_audio = 0, seen_video = 0, wrong = 0;
    for (int b = 0; batcher && b < 6; ++b) {
        CHECK(uform_batcher_next(batcher, &batch) == uform_ok_k);
        uform_grid_t const *grid = &batch.grid;
        for (size_t cell = 0; cell < grid->rows * grid->columns; ++cell) {
            uint8_t kind = grid->kinds[cell];
            if (kind != uform_cell_audio_k && kind != uform_cell_video_k) continue;
            int is_audio = kind == uform_cell_audio_k;
            size_t first = cell, values = is_audio ? 320 : 1536;
            while (cell < grid->rows * grid->columns && grid->kinds[cell] == kind) cell++;
            wrong += cell - first != 4;
            uform_media_t const *media = &grid->media[kind - uform_cell_image_k];
            wrong += media->dtype != uform_media_bf16_k || !media->data;
            for (size_t i = 0; i < 4 && cell - first == 4; ++i) {
                int32_t const *position = grid->positions + (first + i) * 3;
                int32_t t = is_audio ? (int32_t)i : (int32_t)(10 * (i / 2)), h = is_audio ? (int32_t)i : 0,
                        w = is_audio ? (int32_t)i : (int32_t)(i % 2);
                wrong += position[0] != t || position[1] != h || position[2] != w;
                uint16_t const *row = (uint16_t const *)media->data + (size_t)grid->values[first + i] * values;
                for (size_t v = 0; v < values; ++v)
                    wrong += row[v] != uform_f32_to_bf16((is_audio ? frames : tubes)[i * values + v]);
            }
            *(is_audio ? &seen_audio : &seen_video) += 1;
            cell--;
        }
    }
    fprintf(stderr, "av records: %zu audio and %zu video segments, %zu wrong values or positions\n", seen_audio, seen_video, wrong);
    CHECK(wrong == 0 && seen_audio && seen_video);
    uform_batcher_close(batcher);
    uform_mixture_close(&mixture);

    /* A broken clip: named with its record's line, or its record dropped and counted. */
    write_text("broken.wav", "RIFF\x10\0\0\0WAVE not really");
    write_text("av_broken.jsonl", "{\"query\": \"fine\", \"positives\": [{\"audio\": \"tone.wav\"}]}\n"
                                  "{\"query\": \"broken\", \"positives\": [{\"audio\": \"broken.wav\"}]}\n"
                                  "{\"query\": \"absent\", \"positives\": [{\"video\": \"absent.webm\"}]}\n");
    for (int skip = 0; skip < 2; ++skip) {
        char body[256];
        snprintf(body, sizeof(body), "{\"objective\": \"contrastive\", \"columns\": 40, \"sources\": "
                                     "[{\"path\": \"av_broken.jsonl\", \"skip_malformed\": %s}]}", skip ? "true" : "false");
        mixture = make_mixture("av_broken.json", body);
        batcher = NULL;
        uform_status_t status = uform_batcher_create(&mixture, &options, &batcher);
        if (!skip) CHECK(status == uform_format_k && strstr(uform_last_error(), "av_broken.jsonl:2:") && strstr(uform_last_error(), "broken.wav"));
        else {
            if (batcher) uform_batcher_stats(batcher, &stats);
            CHECK(status == uform_ok_k && stats.images_skipped == 2 && stats.records == 1 && stats.audio_sides == 1);
        }
        uform_batcher_close(batcher);
        uform_mixture_close(&mixture);
    }
}

/* Masked modelling of clips: {"audio": PATH} and {"video": PATH} records; of an audio clip's n frames
 * floor(r n + u) are masked (spans), of a video's positions floor(r rows columns + u), each at every
 * step; a masked cell shows its kind's blank (a zero row after the batch's rows) and targets its own
 * true row; nothing else has a target. */
static void test_av_masking(void) {
    /* both 4 cells long, so that longest-first packing takes both */
    write_wave("four.wav", 1280);  /* 4 frames: 2 masked at 0.5 */
    write_y4m("four.y4m", 4);      /* 2 steps of 1x2 tubes: 1 position masked at 0.5, at both steps */
    write_text("av_mlm.jsonl", "{\"audio\": \"four.wav\"}\n{\"video\": \"four.y4m\"}\n");
    uform_mixture_t mixture = make_mixture("av_mlm.json", "{\"objective\": \"mlm\", \"columns\": 40, \"video_fps\": 5, "
                                                          "\"audio_mask_ratio\": 0.5, \"audio_mean_span\": 2, "
                                                          "\"video_mask_ratio\": 0.5, \"sources\": [{\"path\": \"av_mlm.jsonl\"}]}");
    uform_batcher_options_t options = {.rows = 2, .seed = 5};
    uform_batcher_t *batcher = NULL;
    CHECK(uform_batcher_create(&mixture, &options, &batcher) == uform_ok_k);
    size_t clips[2] = {0}, wrong = 0;
    for (int b = 0; batcher && b < 4; ++b) {
        uform_batch_t batch;
        CHECK(uform_batcher_next(batcher, &batch) == uform_ok_k);
        uform_grid_t const *grid = &batch.grid;
        for (size_t m = 1; m < 3; ++m) { /* video, audio: the blank row is zeros */
            uform_media_t const *media = &grid->media[m];
            size_t values = m == 1 ? 1536 : 320;
            for (size_t v = 0; media->count && v < values; ++v) wrong += ((uint16_t const *)media->data)[(media->count - 1) * values + v] != 0;
        }
        for (size_t cell = 0; cell < grid->rows * grid->columns;) {
            uint8_t kind = grid->kinds[cell];
            if (kind != uform_cell_audio_k && kind != uform_cell_video_k) {
                wrong += batch.targets[cell] >= 0 && kind != uform_cell_byte_k;
                cell++;
                continue;
            }
            size_t first = cell, masked = 0;
            uint32_t blank = (uint32_t)grid->media[kind - uform_cell_image_k].count - 1;
            while (cell < grid->rows * grid->columns && grid->kinds[cell] == kind && grid->segments[cell] == grid->segments[first]) {
                if (batch.targets[cell] >= 0) masked++, wrong += grid->values[cell] != blank || (uint32_t)batch.targets[cell] >= blank;
                cell++;
            }
            if (kind == uform_cell_audio_k) wrong += cell - first != 4 || masked != 2;
            else wrong += cell - first != 4 || masked != 2 || (batch.targets[first] >= 0) != (batch.targets[first + 2] >= 0) ||
                          (batch.targets[first + 1] >= 0) != (batch.targets[first + 3] >= 0);
            clips[kind == uform_cell_audio_k]++;
        }
    }
    fprintf(stderr, "av masking: %zu video and %zu audio clips, %zu wrong\n", clips[0], clips[1], wrong);
    CHECK(wrong == 0 && clips[0] && clips[1]);
    uform_batcher_close(batcher);
    uform_mixture_close(&mixture);
}

/* Masked modelling of images: {"image": PATH} records; floor(ratio n + u) of each image's patches
 * show the blank patch (the last media row, all zeros) and target their true row; the same batch
 * twice (a fresh batcher) masks alike. */
static void test_image_masking(void) {
    write_png("m.png", 64, 64, 5); /* 4x4 patches */
    write_text("image_text.jsonl", "{\"image\": \"m.png\"}\n{\"text\": \"some bytes to mask as usual\"}\n");
    uform_mixture_t mixture = make_mixture("image_mlm.json",
        "{\"objective\": \"mlm\", \"columns\": 64, \"image_mask_ratio\": 0.4, \"sources\": [{\"path\": \"image_text.jsonl\"}]}");
    uform_batcher_options_t options = {.rows = 2, .seed = 5};
    size_t images = 0, masked = 0, wrong = 0, first_masks[2][16] = {{0}};
    for (int copy = 0; copy < 2; ++copy) {
        uform_batcher_t *batcher = NULL;
        CHECK(uform_batcher_create(&mixture, &options, &batcher) == uform_ok_k);
        if (!batcher) return;
        for (int b = 0; b < 20; ++b) {
            uform_batch_t batch;
            CHECK(uform_batcher_next(batcher, &batch) == uform_ok_k);
            uform_grid_t const *grid = &batch.grid;
            size_t blank = grid->media[0].count - 1;
            uint16_t const *media = grid->media[0].data;
            for (size_t v = 0; media && v < 1024; ++v) wrong += media[blank * 1024 + v] != 0;
            for (size_t cell = 0; cell < grid->rows * grid->columns; ++cell) {
                if (grid->kinds[cell] != uform_cell_image_k) continue;
                size_t patch = (size_t)(grid->positions[cell * 3 + 1] * 4 + grid->positions[cell * 3 + 2]);
                if (patch == 0) images += copy == 0;
                int is_masked = batch.targets[cell] >= 0;
                if (copy == 0) masked += is_masked;
                if (b == 0 && patch < 16) first_masks[copy][patch] += (size_t)is_masked;
                wrong += is_masked ? grid->values[cell] != blank || (size_t)batch.targets[cell] >= blank
                                   : grid->values[cell] >= blank;
            }
        }
        uform_batcher_close(batcher);
    }
    CHECK(wrong == 0 && images > 0);
    /* 0.4 of 16 patches: 6 or 7 each (floor(6.4 + u)). */
    CHECK(masked >= images * 6 && masked <= images * 7);
    CHECK(!memcmp(first_masks[0], first_masks[1], sizeof(first_masks[0])));
    uform_mixture_close(&mixture);
}

/* Decoded images kept across batches (and from the load) give the same batches bit for bit as
 * decoding every time, with a budget that holds all of them or only some, written into the
 * batcher's own buffers or alternately into two sets of the caller's (as the prefetcher does). */
static void test_image_cache(char const *name, char const *body) {
    uform_mixture_t mixture = make_mixture(name, body);
    size_t const budgets[] = {SIZE_MAX, 1, 0}; /* none, 1 MiB, the default (1 GiB) */
    uint16_t *first = NULL;
    size_t first_count = 0, mismatched = 0;
    for (size_t run = 0; run < 6; ++run) {
        uform_batcher_options_t options = {.rows = 2, .seed = 7, .image_cache_mb = budgets[run % 3]};
        uform_batcher_t *batcher = NULL;
        CHECK(uform_batcher_create(&mixture, &options, &batcher) == uform_ok_k);
        if (!batcher) return;
        uform_batch_buffers_t *sets[2] = {NULL, NULL};
        for (int i = 0; run >= 3 && i < 2; ++i) CHECK(uform_batch_buffers_create(batcher, &sets[i]) == uform_ok_k);
        size_t count = 0;
        uint16_t *all = malloc(12 * 80 * 1024 * sizeof(uint16_t) + 1);
        for (int batch_index = 0; batch_index < 12; ++batch_index) {
            uform_batch_t batch;
            uform_batch_buffers_t *set = sets[batch_index % 2];
            CHECK((set ? uform_batcher_next_into(batcher, set, &batch) : uform_batcher_next(batcher, &batch)) == uform_ok_k);
            size_t rows = batch.grid.media[0].count;
            if (batch.grid.media[0].data && count + rows <= 12 * 80)
                memcpy(all + count * 1024, batch.grid.media[0].data, rows * 1024 * sizeof(uint16_t)), count += rows;
        }
        if (!first) first = all, first_count = count;
        else {
            mismatched += count != first_count || memcmp(all, first, count * 1024 * sizeof(uint16_t));
            free(all);
        }
        uform_batch_buffers_close(sets[0]), uform_batch_buffers_close(sets[1]);
        uform_batcher_close(batcher);
    }
    CHECK(first_count > 0 && mismatched == 0);
    free(first);
    uform_mixture_close(&mixture);
}

/* 1: `rows` (BF16) are exactly `patches` (Float32) rounded to BF16. */
static int same_patches(uint16_t const *const *rows, float const *patches, size_t count) {
    for (size_t i = 0; i < count; ++i)
        for (size_t v = 0; v < 1024; ++v)
            if (rows[i][v] != uform_f32_to_bf16(patches[i * 1024 + v])) return 0;
    return 1;
}

/* `name`'s patches as the batcher would cut them (it fills exactly whole patches: no resampling),
 * from the file's pixels or from its pixels mirrored left to right here, line by line. */
static void patches_of(char const *name, int mirrored, float *patches, size_t *count) {
    uform_pixels_t pixels;
    size_t rows = 0, columns = 0;
    CHECK(uform_image_read(path_in(name), &pixels) == uform_ok_k);
    for (size_t y = 0; mirrored && y < pixels.height; ++y)
        for (size_t x = 0; x < pixels.width / 2; ++x)
            for (size_t c = 0; c < 4; ++c) {
                uint8_t *line = (uint8_t *)pixels.rgba + y * pixels.stride, kept = line[x * 4 + c]; /* the test's own copy */
                line[x * 4 + c] = line[(pixels.width - 1 - x) * 4 + c], line[(pixels.width - 1 - x) * 4 + c] = kept;
            }
    CHECK(uform_image_patches(&pixels, 40, patches, 40, &rows, &columns) == uform_ok_k);
    uform_pixels_free(&pixels);
    *count = rows * columns;
}

/* A source with flip_images: each image side is the file's patches or those of its mirror image,
 * both seen over the batches in about equal numbers; a mirror that reverses the patches but not the
 * pixels inside each (the planted control) matches neither. */
static void test_image_flips(void) {
    write_png("e.png", 32, 48, 5); /* 2x3 patches: the middle column mirrors onto itself */
    write_text("flips.jsonl", "{\"query\": \"c\", \"positives\": [{\"image\": \"img/c.png\"}]}\n"
                              "{\"query\": \"e\", \"positives\": [{\"image\": \"e.png\"}]}\n");
    uform_mixture_t mixture = make_mixture("flips.json",
        "{\"objective\": \"contrastive\", \"columns\": 40, \"sources\": [{\"path\": \"flips.jsonl\", \"flip_images\": true}]}");
    static float plain[2][40 * 1024], mirrored[2][40 * 1024], wrong_mirror[40 * 1024];
    size_t counts[2] = {0, 0}, mirrored_count = 0, kinds[3] = {0, 0, 0};
    char const *names[2] = {"img/c.png", "e.png"};
    for (int i = 0; i < 2; ++i) {
        patches_of(names[i], 0, plain[i], &counts[i]);
        patches_of(names[i], 1, mirrored[i], &mirrored_count);
        CHECK(mirrored_count == counts[i] && memcmp(plain[i], mirrored[i], counts[i] * 1024 * sizeof(float)));
    }
    CHECK(counts[0] == 8 && counts[1] == 6);
    /* The planted control: e.png's patch columns reversed, each patch left as it is. */
    uint16_t wrong_bf16[6][1024];
    uint16_t const *wrong_rows[6];
    for (size_t p = 0; p < 6; ++p) {
        size_t row = p / 3, column = 2 - p % 3;
        memcpy(wrong_mirror + p * 1024, plain[1] + (row * 3 + column) * 1024, 1024 * sizeof(float));
        for (size_t v = 0; v < 1024; ++v) wrong_bf16[p][v] = uform_f32_to_bf16(wrong_mirror[p * 1024 + v]);
        wrong_rows[p] = wrong_bf16[p];
    }
    CHECK(!same_patches(wrong_rows, mirrored[1], 6) && !same_patches(wrong_rows, plain[1], 6));

    uform_batcher_options_t options = {.rows = 2, .seed = 11};
    uform_batcher_t *batcher = NULL;
    CHECK(uform_batcher_create(&mixture, &options, &batcher) == uform_ok_k);
    for (int b = 0; batcher && b < 60; ++b) {
        uform_batch_t batch;
        CHECK(uform_batcher_next(batcher, &batch) == uform_ok_k);
        uform_grid_t const *grid = &batch.grid;
        for (size_t first = 0, length = 0; next_image_segment(grid, &first, &length); first += length) {
            int which = length == 8 ? 0 : 1;
            uint16_t const *rows[8];
            for (size_t i = 0; i < length && i < 8; ++i)
                rows[i] = (uint16_t const *)grid->media[0].data + (size_t)grid->values[first + i] * 1024;
            kinds[same_patches(rows, plain[which], counts[which]) ? 0 : same_patches(rows, mirrored[which], counts[which]) ? 1 : 2]++;
        }
    }
    CHECK(kinds[2] == 0 && kinds[0] >= 20 && kinds[1] >= 20);
    uform_batcher_close(batcher);
    uform_mixture_close(&mixture);
}

/* A 16x16 colour JPEG written by libjpeg-turbo with `space` as its components (JCS_YCbCr or JCS_RGB),
 * and its JFIF and Adobe markers on or off; malloc'd (free it). */
static unsigned char *jpeg_written_(J_COLOR_SPACE space, int jfif, int adobe, size_t *size) {
    struct jpeg_compress_struct info;
    struct jpeg_error_mgr error;
    info.err = jpeg_std_error(&error);
    jpeg_create_compress(&info);
    unsigned char *out = NULL;
    unsigned long written = 0;
    jpeg_mem_dest(&info, &out, &written);
    info.image_width = 16, info.image_height = 16, info.input_components = 3, info.in_color_space = JCS_RGB;
    jpeg_set_defaults(&info);
    jpeg_set_colorspace(&info, space);
    info.write_JFIF_header = (boolean)jfif, info.write_Adobe_marker = (boolean)adobe;
    jpeg_start_compress(&info, TRUE);
    unsigned char row[16 * 3];
    for (int y = 0; y < 16; ++y) {
        for (int x = 0; x < 16 * 3; ++x) row[x] = (unsigned char)(x * 5 + y * 9);
        JSAMPROW rows[1] = {row};
        jpeg_write_scanlines(&info, rows, 1);
    }
    jpeg_finish_compress(&info);
    jpeg_destroy_compress(&info);
    *size = written;
    return out;
}

/* libjpeg-turbo's own reading of a header: whether it takes the components as untransformed RGB. */
static int jpeg_read_as_rgb_(unsigned char const *bytes, size_t size) {
    struct jpeg_decompress_struct info;
    struct jpeg_error_mgr error;
    info.err = jpeg_std_error(&error);
    jpeg_create_decompress(&info);
    jpeg_mem_src(&info, bytes, (unsigned long)size);
    jpeg_read_header(&info, TRUE);
    int rgb = info.jpeg_color_space == JCS_RGB;
    jpeg_destroy_decompress(&info);
    return rgb;
}

/* uform_jpeg_stores_rgb (the GPU decoder's test for JPEGs it must leave to the host) agrees with
 * libjpeg-turbo's reading on every marker combination libjpeg writes, and on copies with the Adobe
 * transform byte flipped; it reads no byte past any prefix of the file. */
static void test_jpeg_colour_markers(void) {
    struct {
        J_COLOR_SPACE space;
        int jfif, adobe, rgb;
    } const cases[] = {
        {JCS_YCbCr, 1, 0, 0}, /* the usual JFIF file */
        {JCS_YCbCr, 0, 0, 0}, /* no markers, component ids 1, 2, 3 */
        {JCS_YCbCr, 0, 1, 0}, /* Adobe, transform 1 */
        {JCS_RGB, 0, 1, 1},   /* Adobe, transform 0 (what jpeg_set_colorspace writes for RGB) */
        {JCS_RGB, 0, 0, 1},   /* no markers, component ids 'R', 'G', 'B' */
        {JCS_RGB, 1, 1, 0},   /* a JFIF marker says YCbCr whatever else does */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        size_t size = 0;
        unsigned char *bytes = jpeg_written_(cases[i].space, cases[i].jfif, cases[i].adobe, &size);
        CHECK(jpeg_read_as_rgb_(bytes, size) == cases[i].rgb);
        CHECK(uform_jpeg_stores_rgb(bytes, size) == cases[i].rgb);
        if (cases[i].adobe) { /* the transform byte flipped 0 <-> 1: both readings follow it */
            for (size_t at = 2; at + 16 < size; ++at)
                if (bytes[at] == 0xff && bytes[at + 1] == 0xee && !memcmp(bytes + at + 4, "Adobe", 5)) {
                    bytes[at + 15] ^= 1;
                    CHECK(jpeg_read_as_rgb_(bytes, size) == (cases[i].jfif ? 0 : !cases[i].rgb)); /* JFIF: YCbCr still */
                    CHECK(uform_jpeg_stores_rgb(bytes, size) == jpeg_read_as_rgb_(bytes, size));
                    bytes[at + 15] ^= 1;
                    break;
                }
        }
        for (size_t cut = 0; cut < size; ++cut) { /* each prefix in a buffer of its own size, for the sanitizers */
            unsigned char *prefix = malloc(cut ? cut : 1);
            memcpy(prefix, bytes, cut);
            int rgb = uform_jpeg_stores_rgb(prefix, cut);
            CHECK(rgb == 0 || rgb == cases[i].rgb);
            free(prefix);
        }
        free(bytes);
    }
}

int main(void) {
    if (!scratch_open("uform_test_data")) return 2;
    test_image_records();
    test_jpeg_colour_markers();
    test_av_records();
    test_av_masking();
    test_image_cache("cached.json", "{\"objective\": \"contrastive\", \"columns\": 40, \"sources\": [{\"path\": \"images.jsonl\"}]}");
    test_image_cache("cached_flipped.json", /* the cache keeps each file as it is; mirrors are drawn per batch */
                     "{\"objective\": \"contrastive\", \"columns\": 40, \"sources\": [{\"path\": \"images.jsonl\", \"flip_images\": true}]}");
    test_image_flips();
    test_image_masking();
    test_jsonl_records();
    test_jsonl_malformed();
    test_mixture();
    test_batcher_errors();
    test_determinism();
    test_packing();
    test_masking();
    test_pairs(uform_objective_contrastive_k);
    test_pairs(uform_objective_rerank_k);
    test_pair_truncation();
    test_loss_weights();
    scratch_close();
    return check_report();
}
