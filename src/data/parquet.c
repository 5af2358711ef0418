/*  parquet.c: Parquet files into records. The footer and page headers are Thrift compact protocol,
 *  read by a small decoder whose every length and count is checked against the bytes left; each
 *  offset and size from the file is checked against the column data before use. Only the columns a
 *  record needs are decoded, one row group at a time: values point into the mapped file, a
 *  decompressed page or the dictionary until the row group's records copy them into the corpus.
 */
#include "data/parquet.h"

#include <errno.h>
#include <fcntl.h>
#include <snappy-c.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "core/status.h"

/* --- Thrift compact protocol ------------------------------------------------------------------ */

enum {
    uform_thrift_stop_k = 0,
    uform_thrift_true_k = 1,
    uform_thrift_false_k = 2,
    uform_thrift_byte_k = 3,
    uform_thrift_i16_k = 4,
    uform_thrift_i32_k = 5,
    uform_thrift_i64_k = 6,
    uform_thrift_double_k = 7,
    uform_thrift_binary_k = 8,
    uform_thrift_list_k = 9,
    uform_thrift_set_k = 10,
    uform_thrift_map_k = 11,
    uform_thrift_struct_k = 12,
    uform_thrift_depth_k = 32, /* Parquet's structs nest a few levels; more is a hostile file */
};

typedef struct uform_thrift_t {
    uint8_t const *base; /* the file's first byte, so that messages give file offsets */
    uint8_t const *cursor, *end;
    char const *problem; /* the first problem met, NULL while none */
    size_t problem_offset;
} uform_thrift_t;

/* Records the first problem and empties the input, so every later read fails too. */
static int uform_thrift_fail_(uform_thrift_t *thrift, char const *problem) {
    if (!thrift->problem) {
        thrift->problem = problem;
        thrift->problem_offset = (size_t)(thrift->cursor - thrift->base);
    }
    thrift->cursor = thrift->end;
    return 0;
}

static size_t uform_thrift_left_(uform_thrift_t const *thrift) { return (size_t)(thrift->end - thrift->cursor); }

static int uform_thrift_take_(uform_thrift_t *thrift, size_t bytes) {
    if (bytes > uform_thrift_left_(thrift)) return uform_thrift_fail_(thrift, "ends inside a value");
    thrift->cursor += bytes;
    return 1;
}

static int uform_thrift_varint_(uform_thrift_t *thrift, uint64_t *value) {
    uint64_t result = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (thrift->cursor >= thrift->end) return uform_thrift_fail_(thrift, "ends inside a number");
        uint8_t byte = *thrift->cursor++;
        result |= (uint64_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80)) {
            *value = result;
            return 1;
        }
    }
    return uform_thrift_fail_(thrift, "a number longer than 10 bytes");
}

static int64_t uform_zigzag_(uint64_t raw) { return (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1); }

static int uform_thrift_i64_(uform_thrift_t *thrift, uint8_t type, int64_t *value) {
    uint64_t raw;
    if (type != uform_thrift_i64_k) return uform_thrift_fail_(thrift, "an i64 field has another type");
    if (!uform_thrift_varint_(thrift, &raw)) return 0;
    *value = uform_zigzag_(raw);
    return 1;
}

static int uform_thrift_i32_(uform_thrift_t *thrift, uint8_t type, int32_t *value) {
    uint64_t raw;
    if (type != uform_thrift_i32_k) return uform_thrift_fail_(thrift, "an i32 field has another type");
    if (!uform_thrift_varint_(thrift, &raw)) return 0;
    int64_t wide = uform_zigzag_(raw);
    if (wide < INT32_MIN || wide > INT32_MAX) return uform_thrift_fail_(thrift, "an i32 field out of range");
    *value = (int32_t)wide;
    return 1;
}

static int uform_thrift_binary_(uform_thrift_t *thrift, uint8_t type, uint8_t const **data, size_t *length) {
    uint64_t raw;
    if (type != uform_thrift_binary_k) return uform_thrift_fail_(thrift, "a string field has another type");
    if (!uform_thrift_varint_(thrift, &raw)) return 0;
    if (raw > uform_thrift_left_(thrift)) return uform_thrift_fail_(thrift, "a string longer than the bytes left");
    *data = thrift->cursor;
    *length = (size_t)raw;
    thrift->cursor += raw;
    return 1;
}

/* A list or set header. Every element takes at least one byte, so a count above the bytes left is a lie. */
static int uform_thrift_list_(uform_thrift_t *thrift, uint8_t type, uint8_t *element, size_t *count) {
    if (type != uform_thrift_list_k && type != uform_thrift_set_k)
        return uform_thrift_fail_(thrift, "a list field has another type");
    if (thrift->cursor >= thrift->end) return uform_thrift_fail_(thrift, "ends inside a list header");
    uint8_t byte = *thrift->cursor++;
    uint64_t size = byte >> 4;
    *element = byte & 0x0f;
    if (size == 15 && !uform_thrift_varint_(thrift, &size)) return 0;
    if (size > uform_thrift_left_(thrift)) return uform_thrift_fail_(thrift, "a list longer than the bytes left");
    if (size && (*element == uform_thrift_stop_k || *element > uform_thrift_struct_k))
        return uform_thrift_fail_(thrift, "a list of an unknown type");
    *count = (size_t)size;
    return 1;
}

/* A field header; `*type` is stop at the end of the struct. `last` carries the previous field id. */
static int uform_thrift_field_(uform_thrift_t *thrift, int *last, uint8_t *type, int *id) {
    if (thrift->cursor >= thrift->end) return uform_thrift_fail_(thrift, "ends inside a struct");
    uint8_t byte = *thrift->cursor++;
    *type = byte & 0x0f;
    if (*type == uform_thrift_stop_k) return 1;
    if (*type > uform_thrift_struct_k) return uform_thrift_fail_(thrift, "a field of an unknown type");
    if (byte >> 4) *id = *last + (byte >> 4);
    else {
        uint64_t raw;
        if (!uform_thrift_varint_(thrift, &raw)) return 0;
        int64_t wide = uform_zigzag_(raw);
        if (wide < INT16_MIN || wide > INT16_MAX) return uform_thrift_fail_(thrift, "a field id out of range");
        *id = (int)wide;
    }
    *last = *id;
    return 1;
}

/* Skips one value. In a list or map a boolean is a byte; as a field its value is in the type. */
static int uform_thrift_skip_(uform_thrift_t *thrift, uint8_t type, int in_collection, int depth) {
    if (depth > uform_thrift_depth_k) return uform_thrift_fail_(thrift, "nested too deeply");
    uint64_t raw;
    size_t count;
    uint8_t element;
    switch (type) {
    case uform_thrift_true_k:
    case uform_thrift_false_k: return in_collection ? uform_thrift_take_(thrift, 1) : 1;
    case uform_thrift_byte_k: return uform_thrift_take_(thrift, 1);
    case uform_thrift_i16_k:
    case uform_thrift_i32_k:
    case uform_thrift_i64_k: return uform_thrift_varint_(thrift, &raw);
    case uform_thrift_double_k: return uform_thrift_take_(thrift, 8);
    case uform_thrift_binary_k:
        if (!uform_thrift_varint_(thrift, &raw)) return 0;
        if (raw > uform_thrift_left_(thrift)) return uform_thrift_fail_(thrift, "a string longer than the bytes left");
        thrift->cursor += raw;
        return 1;
    case uform_thrift_list_k:
    case uform_thrift_set_k:
        if (!uform_thrift_list_(thrift, type, &element, &count)) return 0;
        for (size_t i = 0; i < count; ++i)
            if (!uform_thrift_skip_(thrift, element, 1, depth + 1)) return 0;
        return 1;
    case uform_thrift_map_k: {
        if (!uform_thrift_varint_(thrift, &raw)) return 0;
        if (!raw) return 1;
        if (raw > uform_thrift_left_(thrift) / 2) return uform_thrift_fail_(thrift, "a map longer than the bytes left");
        if (thrift->cursor >= thrift->end) return uform_thrift_fail_(thrift, "ends inside a map header");
        uint8_t types = *thrift->cursor++, key = types >> 4, value = types & 0x0f;
        if (!key || key > uform_thrift_struct_k || !value || value > uform_thrift_struct_k)
            return uform_thrift_fail_(thrift, "a map of an unknown type");
        for (uint64_t i = 0; i < raw; ++i)
            if (!uform_thrift_skip_(thrift, key, 1, depth + 1) || !uform_thrift_skip_(thrift, value, 1, depth + 1))
                return 0;
        return 1;
    }
    case uform_thrift_struct_k: {
        int last = 0, id = 0;
        for (;;) {
            if (!uform_thrift_field_(thrift, &last, &element, &id)) return 0;
            if (element == uform_thrift_stop_k) return 1;
            if (!uform_thrift_skip_(thrift, element, 0, depth + 1)) return 0;
        }
    }
    }
    return uform_thrift_fail_(thrift, "a value of an unknown type");
}

/* --- Parquet's footer ------------------------------------------------------------------------- */

enum {
    uform_parquet_byte_array_k = 6, /* physical type BYTE_ARRAY */
    uform_parquet_required_k = 0,   /* FieldRepetitionType */
    uform_parquet_optional_k = 1,
    uform_parquet_repeated_k = 2,
    uform_parquet_data_page_k = 0, /* PageType */
    uform_parquet_dictionary_page_k = 2,
    uform_parquet_data_page_v2_k = 3,
    uform_parquet_plain_k = 0, /* Encoding */
    uform_parquet_plain_dictionary_k = 2,
    uform_parquet_rle_k = 3,
    uform_parquet_rle_dictionary_k = 8,
    uform_parquet_uncompressed_k = 0, /* CompressionCodec */
    uform_parquet_snappy_k = 1,
    uform_parquet_gzip_k = 2,
    uform_parquet_zstd_k = 6,
    uform_parquet_schema_depth_k = 64,
};

static char const *uform_parquet_type_name_(int32_t type) {
    static char const *const names[] = {"BOOLEAN", "INT32",      "INT64",
                                        "INT96",   "FLOAT",      "DOUBLE",
                                        "BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY"};
    return type >= 0 && type < 8 ? names[type] : "an unknown type";
}

static char const *uform_parquet_codec_name_(int32_t codec) {
    static char const *const names[] = {"UNCOMPRESSED", "SNAPPY", "GZIP", "LZO", "BROTLI", "LZ4", "ZSTD", "LZ4_RAW"};
    return codec >= 0 && codec < 8 ? names[codec] : "an unknown codec";
}

static char const *uform_parquet_encoding_name_(int32_t encoding) {
    static char const *const names[] = {"PLAIN",         "GROUP_VAR_INT",       "PLAIN_DICTIONARY",
                                        "RLE",           "BIT_PACKED",          "DELTA_BINARY_PACKED",
                                        "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY", "RLE_DICTIONARY",
                                        "BYTE_STREAM_SPLIT"};
    return encoding >= 0 && encoding < 10 ? names[encoding] : "an unknown encoding";
}

/* The columns a record reads, in the order records list them. */
typedef enum uform_parquet_role_t {
    uform_parquet_text_k = 0,
    uform_parquet_query_k,
    uform_parquet_positive_k,
    uform_parquet_negative_k,
    uform_parquet_language_k,
    uform_parquet_query_image_k, /* encoded image bytes (PNG, JPEG, WebP) in place of a text: one of each pair */
    uform_parquet_positive_image_k,
    uform_parquet_negative_image_k,
    uform_parquet_roles_k,
} uform_parquet_role_t;

static char const *const uform_parquet_role_names_[uform_parquet_roles_k] = {
    "text", "query", "positive", "negative", "lang", "query_image", "positive_image", "negative_image"};

/* A pair side's image column (query_image for query, ...). */
static int uform_parquet_image_role_(int role) { return role - uform_parquet_query_k + uform_parquet_query_image_k; }

typedef struct uform_parquet_element_t {
    uint8_t const *name;
    size_t name_length;
    int32_t type, repetition, children;
    int has_type, has_repetition, has_name;
} uform_parquet_element_t;

/* A role's column in the schema. */
typedef struct uform_parquet_column_t {
    int found, nested;
    size_t leaf; /* index among the leaves, which is the column chunk's index in every row group */
    int32_t type, repetition;
} uform_parquet_column_t;

/* A column chunk's metadata, as much as the reader uses. */
typedef struct uform_parquet_chunk_t {
    int present, has_metadata, external, encrypted, has_dictionary_offset;
    int32_t type, codec;
    int64_t compressed_size, data_offset, dictionary_offset;
} uform_parquet_chunk_t;

typedef struct uform_parquet_page_t {
    int32_t type, uncompressed, compressed, crc;
    int has_type, has_uncompressed, has_compressed, has_crc, has_data, has_dictionary, has_data_v2;
    int32_t values, encoding, definition_encoding, nulls, definition_length, repetition_length;
    int is_compressed;
} uform_parquet_page_t;

/* A value of a decoded column: bytes in the file, a page buffer or the dictionary; NULL data is null. */
typedef struct uform_parquet_value_t {
    uint8_t const *data;
    size_t length;
    int image; /* 2: encoded image bytes (the slice's `image`) */
} uform_parquet_value_t;

typedef struct uform_parquet_reader_t {
    char const *path;
    uint8_t const *data;
    size_t length, metadata_offset; /* column data lies in [4, metadata_offset) */
    uform_parquet_limits_t limits;
    int skip, pairs;
    uform_corpus_t *corpus;
    size_t bytes_capacity, records_capacity, slices_capacity;
    uform_parquet_element_t *elements;
    size_t elements_count, leaves;
    uform_parquet_column_t columns[uform_parquet_roles_k];
    /* the row group being read, for messages and decoding */
    int in_group;
    size_t group, group_rows, rows_before, page_offset;
    int role; /* -1 outside a column chunk */
    uform_parquet_value_t *values[uform_parquet_roles_k];
    size_t values_count[uform_parquet_roles_k], values_capacity[uform_parquet_roles_k];
    uint8_t **buffers; /* decompressed pages of the row group, freed when its records are copied */
    size_t buffers_count, buffers_capacity;
    uform_parquet_value_t *dictionary;
    size_t dictionary_count;
} uform_parquet_reader_t;

/* Fails with "PATH: row group G, column 'C', page at byte B: problem", naming as much as is known. */
static uform_status_t uform_parquet_fail_(uform_parquet_reader_t const *reader, uform_status_t status,
                                          char const *format, ...) __attribute__((format(printf, 3, 4)));
static uform_status_t uform_parquet_fail_(uform_parquet_reader_t const *reader, uform_status_t status,
                                          char const *format, ...) {
    char problem[512], where[192] = "";
    va_list args;
    va_start(args, format);
    vsnprintf(problem, sizeof(problem), format, args);
    va_end(args);
    if (reader->in_group) {
        size_t used = (size_t)snprintf(where, sizeof(where), "row group %zu, ", reader->group);
        if (reader->role >= 0 && used < sizeof(where))
            used += (size_t)snprintf(where + used, sizeof(where) - used, "column '%s', ",
                                     uform_parquet_role_names_[reader->role]);
        if (reader->page_offset && used < sizeof(where))
            snprintf(where + used, sizeof(where) - used, "page at byte %zu, ", reader->page_offset);
    }
    return uform_fail(status, "%s: %s%s", reader->path, where, problem);
}

static uform_status_t uform_parquet_thrift_failed_(uform_parquet_reader_t const *reader, uform_thrift_t const *thrift,
                                                   char const *what) {
    return uform_parquet_fail_(reader, uform_format_k, "%s %s at byte %zu", what,
                               thrift->problem ? thrift->problem : "is malformed", thrift->problem_offset);
}

static int uform_parquet_element_(uform_thrift_t *thrift, uform_parquet_element_t *element) {
    int last = 0, id = 0;
    uint8_t type;
    for (;;) {
        if (!uform_thrift_field_(thrift, &last, &type, &id)) return 0;
        if (type == uform_thrift_stop_k) break;
        int ok;
        switch (id) {
        case 1: ok = uform_thrift_i32_(thrift, type, &element->type), element->has_type = 1; break;
        case 3: ok = uform_thrift_i32_(thrift, type, &element->repetition), element->has_repetition = 1; break;
        case 4: ok = uform_thrift_binary_(thrift, type, &element->name, &element->name_length), element->has_name = 1; break;
        case 5: ok = uform_thrift_i32_(thrift, type, &element->children); break;
        default: ok = uform_thrift_skip_(thrift, type, 0, 1);
        }
        if (!ok) return 0;
    }
    if (!element->has_name) return uform_thrift_fail_(thrift, "a schema element without a name");
    return 1;
}

static int uform_parquet_column_metadata_(uform_thrift_t *thrift, uform_parquet_chunk_t *chunk) {
    int last = 0, id = 0;
    uint8_t type;
    for (;;) {
        if (!uform_thrift_field_(thrift, &last, &type, &id)) return 0;
        if (type == uform_thrift_stop_k) return 1;
        int ok;
        switch (id) {
        case 1: ok = uform_thrift_i32_(thrift, type, &chunk->type); break;
        case 4: ok = uform_thrift_i32_(thrift, type, &chunk->codec); break;
        case 7: ok = uform_thrift_i64_(thrift, type, &chunk->compressed_size); break;
        case 9: ok = uform_thrift_i64_(thrift, type, &chunk->data_offset); break;
        case 11: ok = uform_thrift_i64_(thrift, type, &chunk->dictionary_offset), chunk->has_dictionary_offset = 1; break;
        default: ok = uform_thrift_skip_(thrift, type, 0, 2);
        }
        if (!ok) return 0;
    }
}

static int uform_parquet_chunk_(uform_thrift_t *thrift, uform_parquet_chunk_t *chunk) {
    int last = 0, id = 0;
    uint8_t type;
    memset(chunk, 0, sizeof(*chunk));
    chunk->present = 1;
    chunk->compressed_size = -1;
    chunk->data_offset = -1;
    for (;;) {
        if (!uform_thrift_field_(thrift, &last, &type, &id)) return 0;
        if (type == uform_thrift_stop_k) return 1;
        int ok;
        if (id == 1) ok = uform_thrift_skip_(thrift, type, 0, 1), chunk->external = 1;
        else if (id == 3 && type == uform_thrift_struct_k)
            ok = uform_parquet_column_metadata_(thrift, chunk), chunk->has_metadata = 1;
        else if (id == 3) ok = uform_thrift_fail_(thrift, "column metadata that is not a struct");
        else {
            if (id == 8 || id == 9) chunk->encrypted = 1;
            ok = uform_thrift_skip_(thrift, type, 0, 1);
        }
        if (!ok) return 0;
    }
}

/* A row group's row count and the chunks of the role columns; other columns are parsed and dropped. */
static uform_status_t uform_parquet_row_group_(uform_parquet_reader_t *reader, uform_thrift_t *thrift,
                                               uform_parquet_chunk_t chunks[uform_parquet_roles_k], int64_t *rows) {
    int last = 0, id = 0, has_rows = 0, has_columns = 0;
    uint8_t type, element;
    size_t count;
    memset(chunks, 0, sizeof(uform_parquet_chunk_t) * uform_parquet_roles_k);
    for (;;) {
        if (!uform_thrift_field_(thrift, &last, &type, &id)) return uform_parquet_thrift_failed_(reader, thrift, "footer");
        if (type == uform_thrift_stop_k) break;
        int ok;
        if (id == 1) {
            if (has_columns++) return uform_parquet_fail_(reader, uform_format_k, "two lists of column chunks");
            ok = uform_thrift_list_(thrift, type, &element, &count);
            if (ok && count && element != uform_thrift_struct_k)
                ok = uform_thrift_fail_(thrift, "column chunks that are not structs");
            if (ok && count != reader->leaves)
                return uform_parquet_fail_(reader, uform_format_k, "%zu column chunks, but the schema has %zu columns",
                                           count, reader->leaves);
            for (size_t c = 0; ok && c < count; ++c) {
                uform_parquet_chunk_t chunk;
                ok = uform_parquet_chunk_(thrift, &chunk);
                for (int role = 0; ok && role < uform_parquet_roles_k; ++role)
                    if (reader->columns[role].found && reader->columns[role].leaf == c) chunks[role] = chunk;
            }
        } else if (id == 3) ok = uform_thrift_i64_(thrift, type, rows), has_rows = 1;
        else ok = uform_thrift_skip_(thrift, type, 0, 1);
        if (!ok) return uform_parquet_thrift_failed_(reader, thrift, "footer");
    }
    if (!has_rows || !has_columns)
        return uform_parquet_fail_(reader, uform_format_k, "footer: a row group without %s",
                                   has_rows ? "column chunks" : "a row count");
    if (*rows < 0) return uform_parquet_fail_(reader, uform_format_k, "a row count of %lld", (long long)*rows);
    return uform_ok_k;
}

/* Numbers the leaves depth-first (a leaf's number is its column chunk's index) and finds the role
 * columns among the top-level fields. Each element is visited once, so the walk is linear. */
static uform_status_t uform_parquet_walk_(uform_parquet_reader_t *reader, size_t *index, size_t depth, int top_role) {
    if (*index >= reader->elements_count)
        return uform_parquet_fail_(reader, uform_format_k, "schema: the tree needs more than its %zu elements",
                                   reader->elements_count);
    if (depth > uform_parquet_schema_depth_k)
        return uform_parquet_fail_(reader, uform_format_k, "schema: nested more than %d levels", uform_parquet_schema_depth_k);
    uform_parquet_element_t const *element = &reader->elements[(*index)++];
    int role = top_role;
    if (depth == 1) {
        role = -1;
        for (int r = 0; r < uform_parquet_roles_k; ++r)
            if (strlen(uform_parquet_role_names_[r]) == element->name_length &&
                !memcmp(uform_parquet_role_names_[r], element->name, element->name_length))
                role = r;
        if (role >= 0 && reader->columns[role].found)
            return uform_parquet_fail_(reader, uform_format_k, "schema: two columns named '%s'",
                                       uform_parquet_role_names_[role]);
        if (role >= 0) {
            reader->columns[role].found = 1;
            reader->columns[role].repetition = element->has_repetition ? element->repetition : uform_parquet_required_k;
        }
    }
    if (element->children < 0)
        return uform_parquet_fail_(reader, uform_format_k, "schema: an element with %d children", element->children);
    if (element->children > 0 || !element->has_type) { /* a group, possibly empty */
        if (role >= 0 && depth == 1) reader->columns[role].nested = 1;
        if ((size_t)element->children > reader->elements_count - *index)
            return uform_parquet_fail_(reader, uform_format_k, "schema: an element claims %d children of %zu elements left",
                                       element->children, reader->elements_count - *index);
        for (int32_t child = 0; child < element->children; ++child)
            UFORM_TRY(uform_parquet_walk_(reader, index, depth + 1, role));
        return uform_ok_k;
    }
    if (role >= 0 && depth == 1) {
        reader->columns[role].leaf = reader->leaves;
        reader->columns[role].type = element->type;
    }
    reader->leaves++;
    return uform_ok_k;
}

/* Checks that a role's column is a top-level, non-repeated BYTE_ARRAY column. */
static uform_status_t uform_parquet_check_column_(uform_parquet_reader_t const *reader, int role) {
    uform_parquet_column_t const *column = &reader->columns[role];
    char const *name = uform_parquet_role_names_[role];
    if (column->nested)
        return uform_parquet_fail_(reader, uform_unsupported_k,
                                   "column '%s' is nested (a list, map or struct); only flat columns are read", name);
    if (column->repetition == uform_parquet_repeated_k)
        return uform_parquet_fail_(reader, uform_unsupported_k, "column '%s' is repeated; only flat columns are read", name);
    if (column->repetition != uform_parquet_required_k && column->repetition != uform_parquet_optional_k)
        return uform_parquet_fail_(reader, uform_format_k, "column '%s' has repetition %d", name, (int)column->repetition);
    if (column->type != uform_parquet_byte_array_k)
        return uform_parquet_fail_(reader, uform_unsupported_k,
                                   "column '%s' has physical type %s; only BYTE_ARRAY (string or binary) columns are read",
                                   name, uform_parquet_type_name_(column->type));
    return uform_ok_k;
}

/* Text or pairs, by the columns present; fails naming the top-level columns when neither fits. */
static uform_status_t uform_parquet_choose_records_(uform_parquet_reader_t *reader) {
    uform_parquet_column_t const *columns = reader->columns;
    int has_query = columns[uform_parquet_query_k].found || columns[uform_parquet_query_image_k].found;
    if (columns[uform_parquet_text_k].found && has_query)
        return uform_parquet_fail_(reader, uform_format_k,
                                   "has both a 'text' and a 'query' column; a file holds text records or pair records");
    for (int role = uform_parquet_query_k; role <= uform_parquet_negative_k; ++role)
        if (columns[role].found && columns[uform_parquet_image_role_(role)].found)
            return uform_parquet_fail_(reader, uform_format_k, "has both '%s' and '%s'; a side is a text or an image",
                                       uform_parquet_role_names_[role], uform_parquet_role_names_[uform_parquet_image_role_(role)]);
    if (!columns[uform_parquet_text_k].found && !has_query) {
        char names[256] = "";
        size_t used = 0, listed = 0;
        /* the walk has checked the tree: each top-level element is followed by its subtree */
        for (size_t index = 1; index < reader->elements_count && used < sizeof(names); ++listed) {
            uform_parquet_element_t const *element = &reader->elements[index];
            int length = (int)(element->name_length > 64 ? 64 : element->name_length);
            used += (size_t)snprintf(names + used, sizeof(names) - used, "%s'%.*s'", listed ? ", " : "", length,
                                     (char const *)element->name);
            for (size_t pending = 1; pending && index < reader->elements_count; --pending, ++index)
                if (reader->elements[index].children > 0) pending += (size_t)reader->elements[index].children;
        }
        return uform_parquet_fail_(reader, uform_format_k,
                                   "needs a column 'text' (masked modelling) or 'query' and 'positive' (pairs); it has %s",
                                   used ? names : "no columns");
    }
    reader->pairs = has_query;
    if (reader->pairs && !columns[uform_parquet_positive_k].found && !columns[uform_parquet_positive_image_k].found)
        return uform_parquet_fail_(reader, uform_format_k, "has a 'query' column but no 'positive' (or 'positive_image') column");
    for (int role = 0; role < uform_parquet_roles_k; ++role)
        if (columns[role].found && (reader->pairs ? role != uform_parquet_text_k : role == uform_parquet_text_k ||
                                                                                       role == uform_parquet_language_k))
            UFORM_TRY(uform_parquet_check_column_(reader, role));
    return uform_ok_k;
}

/* --- pages -------------------------------------------------------------------------------------- */

static int uform_parquet_data_header_(uform_thrift_t *thrift, uform_parquet_page_t *page, int version) {
    int last = 0, id = 0;
    uint8_t type;
    for (;;) {
        if (!uform_thrift_field_(thrift, &last, &type, &id)) return 0;
        if (type == uform_thrift_stop_k) return 1;
        int ok;
        if (id == 1) ok = uform_thrift_i32_(thrift, type, &page->values);
        else if (version != 2 && id == 2) ok = uform_thrift_i32_(thrift, type, &page->encoding);
        else if (version == 1 && id == 3) ok = uform_thrift_i32_(thrift, type, &page->definition_encoding);
        else if (version == 2 && id == 2) ok = uform_thrift_i32_(thrift, type, &page->nulls);
        else if (version == 2 && id == 4) ok = uform_thrift_i32_(thrift, type, &page->encoding);
        else if (version == 2 && id == 5) ok = uform_thrift_i32_(thrift, type, &page->definition_length);
        else if (version == 2 && id == 6) ok = uform_thrift_i32_(thrift, type, &page->repetition_length);
        else if (version == 2 && id == 7) {
            ok = type == uform_thrift_true_k || type == uform_thrift_false_k ||
                 uform_thrift_fail_(thrift, "a boolean field has another type");
            page->is_compressed = type == uform_thrift_true_k;
        } else ok = uform_thrift_skip_(thrift, type, 0, 2);
        if (!ok) return 0;
    }
}

static int uform_parquet_page_header_(uform_thrift_t *thrift, uform_parquet_page_t *page) {
    int last = 0, id = 0;
    uint8_t type;
    memset(page, 0, sizeof(*page));
    page->is_compressed = 1; /* DataPageHeaderV2's default */
    page->definition_encoding = uform_parquet_rle_k;
    for (;;) {
        if (!uform_thrift_field_(thrift, &last, &type, &id)) return 0;
        if (type == uform_thrift_stop_k) break;
        int ok, is_struct = type == uform_thrift_struct_k;
        switch (id) {
        case 1: ok = uform_thrift_i32_(thrift, type, &page->type), page->has_type = 1; break;
        case 2: ok = uform_thrift_i32_(thrift, type, &page->uncompressed), page->has_uncompressed = 1; break;
        case 3: ok = uform_thrift_i32_(thrift, type, &page->compressed), page->has_compressed = 1; break;
        case 4: ok = uform_thrift_i32_(thrift, type, &page->crc), page->has_crc = 1; break;
        case 5: ok = is_struct && uform_parquet_data_header_(thrift, page, 1), page->has_data = 1; break;
        case 7: ok = is_struct && uform_parquet_data_header_(thrift, page, 0), page->has_dictionary = 1; break;
        case 8: ok = is_struct && uform_parquet_data_header_(thrift, page, 2), page->has_data_v2 = 1; break;
        default: ok = uform_thrift_skip_(thrift, type, 0, 1);
        }
        if (!ok) return thrift->problem ? 0 : uform_thrift_fail_(thrift, "a page header field that is not a struct");
    }
    if (!page->has_type || !page->has_uncompressed || !page->has_compressed)
        return uform_thrift_fail_(thrift, "a page header without its type or sizes");
    return 1;
}

/* Remembers a buffer until the row group's records are copied. */
static uform_status_t uform_parquet_keep_(uform_parquet_reader_t *reader, uint8_t *buffer) {
    if (reader->buffers_count == reader->buffers_capacity) {
        size_t grown = reader->buffers_capacity ? reader->buffers_capacity * 2 : 16;
        uint8_t **buffers = realloc(reader->buffers, grown * sizeof(*buffers));
        if (!buffers) {
            free(buffer);
            return uform_parquet_fail_(reader, uform_out_of_memory_k, "cannot grow the page list");
        }
        reader->buffers = buffers;
        reader->buffers_capacity = grown;
    }
    reader->buffers[reader->buffers_count++] = buffer;
    return uform_ok_k;
}

/* `source_length` bytes compressed with `codec` into exactly `expected` bytes at `*output`, which points
 * into the file when there is nothing to undo. The expected size is checked against what the codec
 * can produce from the input before anything is allocated. */
static uform_status_t uform_parquet_decompress_(uform_parquet_reader_t *reader, int32_t codec, uint8_t const *source,
                                                size_t source_length, size_t expected, uint8_t const **output) {
    if (codec == uform_parquet_uncompressed_k) {
        if (source_length != expected)
            return uform_parquet_fail_(reader, uform_format_k, "an uncompressed page of %zu bytes claims %zu",
                                       source_length, expected);
        *output = source;
        return uform_ok_k;
    }
    if (expected > reader->limits.bytes)
        return uform_parquet_fail_(reader, uform_unsupported_k, "a page of %zu bytes is above the limit of %zu",
                                   expected, reader->limits.bytes);
    /* The most each codec can expand: a Snappy copy writes at most 64 bytes for 3 (<= 22x); a deflate
     * match 258 bytes for 2 bits (1032x); a Zstandard block at most 128 KiB for 4 bytes (32768x). */
    size_t ratio = codec == uform_parquet_snappy_k ? 22 : codec == uform_parquet_gzip_k ? 1032 : 32768;
    if (expected / ratio > source_length + 64)
        return uform_parquet_fail_(reader, uform_format_k, "%zu compressed bytes cannot hold the %zu the page claims",
                                   source_length, expected);
    uint8_t *buffer = malloc(expected ? expected : 1);
    if (!buffer) return uform_parquet_fail_(reader, uform_out_of_memory_k, "cannot hold a page of %zu bytes", expected);
    UFORM_TRY(uform_parquet_keep_(reader, buffer));
    size_t produced = 0;
    int ok = 0;
    if (codec == uform_parquet_snappy_k) {
        size_t claimed = 0;
        produced = expected;
        ok = snappy_uncompressed_length((char const *)source, source_length, &claimed) == SNAPPY_OK &&
             claimed == expected &&
             snappy_uncompress((char const *)source, source_length, (char *)buffer, &produced) == SNAPPY_OK;
    } else if (codec == uform_parquet_gzip_k) {
        z_stream stream;
        memset(&stream, 0, sizeof(stream));
        if (source_length > UINT32_MAX || expected > UINT32_MAX || inflateInit2(&stream, 15 + 32) != Z_OK)
            return uform_parquet_fail_(reader, uform_out_of_memory_k, "cannot start gzip");
        stream.next_in = (Bytef *)(uintptr_t)source;
        stream.avail_in = (uInt)source_length;
        stream.next_out = buffer;
        stream.avail_out = (uInt)expected;
        ok = inflate(&stream, Z_FINISH) == Z_STREAM_END;
        produced = stream.total_out;
        inflateEnd(&stream);
    } else if (codec == uform_parquet_zstd_k) {
        size_t result = ZSTD_decompress(buffer, expected, source, source_length);
        ok = !ZSTD_isError(result);
        produced = ok ? result : 0;
    } else
        return uform_parquet_fail_(reader, uform_unsupported_k,
                                   "codec %s is not supported (UNCOMPRESSED, SNAPPY, GZIP and ZSTD are)",
                                   uform_parquet_codec_name_(codec));
    if (!ok || produced != expected)
        return uform_parquet_fail_(reader, uform_format_k, "%s data does not decompress to the %zu bytes the page claims",
                                   uform_parquet_codec_name_(codec), expected);
    *output = buffer;
    return uform_ok_k;
}

/* The RLE / bit-packed hybrid of levels and dictionary indices, decoded one value at a time. */
typedef struct uform_hybrid_t {
    uint8_t const *cursor, *end;
    unsigned width;
    uint64_t remaining; /* values left in the current run */
    int packed;
    uint32_t value;                  /* an RLE run's value */
    uint8_t const *packed_start;     /* a bit-packed run's bytes */
    size_t packed_bytes, packed_index;
} uform_hybrid_t;

static int uform_hybrid_next_(uform_hybrid_t *hybrid, uint32_t *value) {
    while (!hybrid->remaining) {
        uint64_t header = 0;
        unsigned shift = 0;
        for (;; shift += 7) {
            if (hybrid->cursor >= hybrid->end || shift >= 64) return 0;
            uint8_t byte = *hybrid->cursor++;
            header |= (uint64_t)(byte & 0x7f) << shift;
            if (!(byte & 0x80)) break;
        }
        size_t left = (size_t)(hybrid->end - hybrid->cursor);
        if (header & 1) {
            uint64_t groups = header >> 1;
            if (groups > UINT64_MAX / 8) return 0;
            /* the last run may stop short of its padded groups: its bytes end with the data */
            uint64_t bytes = hybrid->width && groups > left / hybrid->width ? left : groups * hybrid->width;
            hybrid->packed = 1;
            hybrid->remaining = groups * 8;
            hybrid->packed_start = hybrid->cursor;
            hybrid->packed_bytes = (size_t)bytes;
            hybrid->packed_index = 0;
            hybrid->cursor += bytes;
        } else {
            size_t bytes = (hybrid->width + 7) / 8;
            if (bytes > left) return 0;
            uint32_t run_value = 0;
            for (size_t b = 0; b < bytes; ++b) run_value |= (uint32_t)hybrid->cursor[b] << (8 * b);
            hybrid->cursor += bytes;
            hybrid->packed = 0;
            hybrid->value = run_value;
            hybrid->remaining = header >> 1;
        }
    }
    if (hybrid->packed) {
        uint64_t bit = (uint64_t)hybrid->packed_index * hybrid->width;
        size_t first = (size_t)(bit / 8), shift = (size_t)(bit % 8), bytes = (shift + hybrid->width + 7) / 8;
        if (hybrid->width && (first >= hybrid->packed_bytes || bytes > hybrid->packed_bytes - first)) return 0;
        uint64_t window = 0;
        for (size_t b = 0; b < bytes && hybrid->width; ++b) window |= (uint64_t)hybrid->packed_start[first + b] << (8 * b);
        *value = (uint32_t)((window >> shift) & ((1ull << hybrid->width) - 1));
        hybrid->packed_index++;
    } else *value = hybrid->value;
    hybrid->remaining--;
    return 1;
}

static uint32_t uform_load_u32_(uint8_t const *bytes) {
    return (uint32_t)bytes[0] | (uint32_t)bytes[1] << 8 | (uint32_t)bytes[2] << 16 | (uint32_t)bytes[3] << 24;
}

static uform_status_t uform_parquet_reserve_values_(uform_parquet_reader_t *reader, int role, size_t more) {
    size_t needed = reader->values_count[role] + more;
    if (needed <= reader->values_capacity[role]) return uform_ok_k;
    size_t grown = reader->values_capacity[role] ? reader->values_capacity[role] : 1024;
    while (grown < needed) grown *= 2;
    uform_parquet_value_t *values = realloc(reader->values[role], grown * sizeof(*values));
    if (!values) return uform_parquet_fail_(reader, uform_out_of_memory_k, "cannot hold %zu values", needed);
    reader->values[role] = values;
    reader->values_capacity[role] = grown;
    return uform_ok_k;
}

/* Decodes `count` values of a page: the definition levels (an optional column's nulls), then the
 * values, PLAIN (a 4-byte length before each) or dictionary indices (a bit width, then the hybrid). */
static uform_status_t uform_parquet_values_(uform_parquet_reader_t *reader, int role, uint8_t const *levels,
                                            size_t levels_length, uint8_t const *values, size_t values_length,
                                            size_t count, int32_t encoding) {
    int optional = reader->columns[role].repetition == uform_parquet_optional_k;
    int dictionary = encoding == uform_parquet_plain_dictionary_k || encoding == uform_parquet_rle_dictionary_k;
    if (encoding != uform_parquet_plain_k && !dictionary)
        return uform_parquet_fail_(reader, uform_unsupported_k,
                                   "encoding %s is not supported (PLAIN and dictionary encodings are)",
                                   uform_parquet_encoding_name_(encoding));
    if (dictionary && !reader->dictionary)
        return uform_parquet_fail_(reader, uform_format_k, "a dictionary-encoded page without a dictionary page");
    if (!count) return uform_ok_k;
    UFORM_TRY(uform_parquet_reserve_values_(reader, role, count));
    uform_hybrid_t definitions = {.width = 1};
    if (optional && levels) definitions.cursor = levels, definitions.end = levels + levels_length;
    uform_hybrid_t indices = {0};
    int indices_started = 0;
    size_t position = 0;
    uform_parquet_value_t *output = reader->values[role] + reader->values_count[role];
    for (size_t i = 0; i < count; ++i) {
        uint32_t level = 1;
        if (optional && !uform_hybrid_next_(&definitions, &level))
            return uform_parquet_fail_(reader, uform_format_k, "definition levels end after %zu of %zu values", i, count);
        if (level > 1)
            return uform_parquet_fail_(reader, uform_format_k, "definition level %u above the column's maximum 1", level);
        if (!level) {
            output[i] = (uform_parquet_value_t){NULL, 0, 0};
            continue;
        }
        if (!dictionary) {
            if (values_length - position < 4)
                return uform_parquet_fail_(reader, uform_format_k, "value %zu's length runs past the page's end", i);
            size_t length = uform_load_u32_(values + position);
            position += 4;
            if (length > values_length - position)
                return uform_parquet_fail_(reader, uform_format_k, "value %zu of %zu bytes runs past the page's end", i,
                                           length);
            output[i] = (uform_parquet_value_t){values + position, length, 0};
            position += length;
            continue;
        }
        if (!indices_started) {
            if (!values_length)
                return uform_parquet_fail_(reader, uform_format_k, "a dictionary-encoded page without its index width");
            indices = (uform_hybrid_t){.cursor = values + 1, .end = values + values_length, .width = values[0]};
            if (indices.width > 32)
                return uform_parquet_fail_(reader, uform_format_k, "dictionary indices of %u bits", indices.width);
            indices_started = 1;
        }
        uint32_t index;
        if (!uform_hybrid_next_(&indices, &index))
            return uform_parquet_fail_(reader, uform_format_k, "dictionary indices end after %zu of %zu values", i, count);
        if (index >= reader->dictionary_count)
            return uform_parquet_fail_(reader, uform_format_k, "dictionary index %u of a dictionary of %zu", index,
                                       reader->dictionary_count);
        output[i] = reader->dictionary[index];
    }
    reader->values_count[role] += count;
    return uform_ok_k;
}

static uform_status_t uform_parquet_dictionary_page_(uform_parquet_reader_t *reader, uform_parquet_page_t const *page,
                                                     int32_t codec, uint8_t const *bytes) {
    if (reader->dictionary || reader->values_count[reader->role])
        return uform_parquet_fail_(reader, uform_format_k, "a dictionary page that is not the chunk's first page");
    if (page->encoding != uform_parquet_plain_k && page->encoding != uform_parquet_plain_dictionary_k)
        return uform_parquet_fail_(reader, uform_unsupported_k, "a dictionary page in encoding %s (PLAIN is read)",
                                   uform_parquet_encoding_name_(page->encoding));
    uint8_t const *data;
    size_t length = (size_t)page->uncompressed;
    UFORM_TRY(uform_parquet_decompress_(reader, codec, bytes, (size_t)page->compressed, length, &data));
    if (page->values < 0 || (size_t)page->values > length / 4)
        return uform_parquet_fail_(reader, uform_format_k, "a dictionary of %d values cannot fit its %zu bytes",
                                   (int)page->values, length);
    reader->dictionary_count = (size_t)page->values;
    reader->dictionary = malloc((reader->dictionary_count ? reader->dictionary_count : 1) * sizeof(uform_parquet_value_t));
    if (!reader->dictionary)
        return uform_parquet_fail_(reader, uform_out_of_memory_k, "cannot hold a dictionary of %zu values",
                                   reader->dictionary_count);
    size_t position = 0;
    for (size_t i = 0; i < reader->dictionary_count; ++i) {
        if (length - position < 4)
            return uform_parquet_fail_(reader, uform_format_k, "dictionary entry %zu's length runs past the page's end", i);
        size_t entry = uform_load_u32_(data + position);
        position += 4;
        if (entry > length - position)
            return uform_parquet_fail_(reader, uform_format_k, "dictionary entry %zu of %zu bytes runs past the page's end",
                                       i, entry);
        reader->dictionary[i] = (uform_parquet_value_t){data + position, entry, 0};
        position += entry;
    }
    return uform_ok_k;
}

static uform_status_t uform_parquet_data_page_(uform_parquet_reader_t *reader, uform_parquet_page_t const *page,
                                               int32_t codec, uint8_t const *bytes) {
    int role = reader->role, optional = reader->columns[role].repetition == uform_parquet_optional_k;
    size_t left = reader->group_rows - reader->values_count[role];
    if (page->values < 0 || (size_t)page->values > left)
        return uform_parquet_fail_(reader, uform_format_k, "a page of %d values, but %zu rows of the row group are left",
                                   (int)page->values, left);
    size_t count = (size_t)page->values, compressed = (size_t)page->compressed, uncompressed = (size_t)page->uncompressed;
    uint8_t const *levels = NULL, *values;
    size_t levels_length = 0, values_length;
    if (page->type == uform_parquet_data_page_k) {
        UFORM_TRY(uform_parquet_decompress_(reader, codec, bytes, compressed, uncompressed, &values));
        values_length = uncompressed;
        if (optional) {
            if (page->definition_encoding != uform_parquet_rle_k)
                return uform_parquet_fail_(reader, uform_unsupported_k, "definition levels in encoding %s (RLE is read)",
                                           uform_parquet_encoding_name_(page->definition_encoding));
            if (values_length < 4)
                return uform_parquet_fail_(reader, uform_format_k, "a page too short for its definition levels");
            levels_length = uform_load_u32_(values);
            if (levels_length > values_length - 4)
                return uform_parquet_fail_(reader, uform_format_k, "definition levels of %zu bytes in a page of %zu",
                                           levels_length, values_length);
            levels = values + 4;
            values += 4 + levels_length;
            values_length -= 4 + levels_length;
        }
    } else {
        /* v2: repetition and definition levels lie uncompressed before the (maybe compressed) values */
        if (page->repetition_length < 0 || page->definition_length < 0)
            return uform_parquet_fail_(reader, uform_format_k, "negative level lengths");
        size_t prefix = (size_t)page->repetition_length + (size_t)page->definition_length;
        if (page->repetition_length)
            return uform_parquet_fail_(reader, uform_format_k, "repetition levels in a flat column");
        if (prefix > compressed || prefix > uncompressed)
            return uform_parquet_fail_(reader, uform_format_k, "levels of %zu bytes in a page of %zu", prefix, compressed);
        levels = bytes;
        levels_length = optional ? (size_t)page->definition_length : 0;
        values_length = uncompressed - prefix;
        UFORM_TRY(uform_parquet_decompress_(reader, page->is_compressed ? codec : uform_parquet_uncompressed_k,
                                            bytes + prefix, compressed - prefix, values_length, &values));
    }
    return uform_parquet_values_(reader, role, levels, levels_length, values, values_length, count, page->encoding);
}

/* Decodes one role's column chunk of the current row group into `reader->values[role]`. */
static uform_status_t uform_parquet_column_chunk_(uform_parquet_reader_t *reader, uform_parquet_chunk_t const *chunk) {
    int role = reader->role;
    if (!chunk->present) return uform_parquet_fail_(reader, uform_format_k, "no column chunk");
    if (chunk->external)
        return uform_parquet_fail_(reader, uform_unsupported_k,
                                   "the chunk's data lies in another file (file_path); single-file Parquet is read");
    if (chunk->encrypted || !chunk->has_metadata)
        return uform_parquet_fail_(reader, uform_unsupported_k, "an encrypted column chunk (or one without metadata)");
    if (chunk->type != reader->columns[role].type)
        return uform_parquet_fail_(reader, uform_format_k, "the chunk's type %s differs from the schema's %s",
                                   uform_parquet_type_name_(chunk->type), uform_parquet_type_name_(reader->columns[role].type));
    if (chunk->codec != uform_parquet_uncompressed_k && chunk->codec != uform_parquet_snappy_k &&
        chunk->codec != uform_parquet_gzip_k && chunk->codec != uform_parquet_zstd_k)
        return uform_parquet_fail_(reader, uform_unsupported_k,
                                   "codec %s is not supported (UNCOMPRESSED, SNAPPY, GZIP and ZSTD are)",
                                   uform_parquet_codec_name_(chunk->codec));
    int64_t start = chunk->data_offset;
    if (chunk->has_dictionary_offset && chunk->dictionary_offset > 0 && chunk->dictionary_offset < start)
        start = chunk->dictionary_offset;
    int64_t limit = (int64_t)reader->metadata_offset;
    if (start < 4 || start > limit || chunk->compressed_size < 0 || chunk->compressed_size > limit - start)
        return uform_parquet_fail_(reader, uform_format_k,
                                   "a chunk of %lld bytes at byte %lld lies outside the column data (bytes 4 to %lld)",
                                   (long long)chunk->compressed_size, (long long)start, (long long)limit);
    size_t position = (size_t)start, end = (size_t)(start + chunk->compressed_size);
    while (reader->values_count[role] < reader->group_rows) {
        reader->page_offset = 0;
        if (position >= end)
            return uform_parquet_fail_(reader, uform_format_k, "the chunk ends after %zu of %zu values",
                                       reader->values_count[role], reader->group_rows);
        reader->page_offset = position;
        uform_thrift_t thrift = {reader->data, reader->data + position, reader->data + end, NULL, 0};
        uform_parquet_page_t page;
        if (!uform_parquet_page_header_(&thrift, &page)) return uform_parquet_thrift_failed_(reader, &thrift, "page header");
        position = (size_t)(thrift.cursor - reader->data);
        if (page.compressed < 0 || page.uncompressed < 0 || (size_t)page.compressed > end - position)
            return uform_parquet_fail_(reader, uform_format_k,
                                       "a page of %d bytes (%d uncompressed), but the chunk has %zu bytes left",
                                       (int)page.compressed, (int)page.uncompressed, end - position);
        uint8_t const *bytes = reader->data + position;
        position += (size_t)page.compressed;
        if (page.has_crc && (uint32_t)crc32(0, bytes, (uInt)page.compressed) != (uint32_t)page.crc)
            return uform_parquet_fail_(reader, uform_format_k, "the page's checksum does not match its bytes");
        if (page.type == uform_parquet_dictionary_page_k && page.has_dictionary)
            UFORM_TRY(uform_parquet_dictionary_page_(reader, &page, chunk->codec, bytes));
        else if ((page.type == uform_parquet_data_page_k && page.has_data) ||
                 (page.type == uform_parquet_data_page_v2_k && page.has_data_v2))
            UFORM_TRY(uform_parquet_data_page_(reader, &page, chunk->codec, bytes));
        else if (page.type == uform_parquet_dictionary_page_k || page.type == uform_parquet_data_page_k ||
                 page.type == uform_parquet_data_page_v2_k)
            return uform_parquet_fail_(reader, uform_format_k, "a page of type %d without its header", (int)page.type);
        /* other pages (index pages) hold nothing a record reads */
    }
    reader->page_offset = 0;
    free(reader->dictionary);
    reader->dictionary = NULL;
    reader->dictionary_count = 0;
    return uform_ok_k;
}

/* --- records ------------------------------------------------------------------------------------ */

/* Grows `*items` to hold `needed` items of `item_size` bytes, doubling. */
static uform_status_t uform_parquet_grow_(uform_parquet_reader_t *reader, void **items, size_t *capacity,
                                          size_t needed, size_t item_size) {
    if (needed <= *capacity) return uform_ok_k;
    size_t grown = *capacity ? *capacity : 4096;
    while (grown < needed) grown *= 2;
    void *larger = grown <= SIZE_MAX / item_size ? realloc(*items, grown * item_size) : NULL;
    if (!larger) return uform_parquet_fail_(reader, uform_out_of_memory_k, "cannot hold %zu items of the corpus", needed);
    *items = larger;
    *capacity = grown;
    return uform_ok_k;
}

/* Room for one more record of `bytes` string bytes and two candidate slices. */
static uform_status_t uform_parquet_room_(uform_parquet_reader_t *reader, size_t bytes) {
    uform_corpus_t *corpus = reader->corpus;
    void *items = corpus->bytes;
    uform_status_t status = uform_parquet_grow_(reader, &items, &reader->bytes_capacity, corpus->bytes_count + bytes, 1);
    corpus->bytes = items;
    UFORM_TRY(status);
    items = corpus->records;
    status = uform_parquet_grow_(reader, &items, &reader->records_capacity, corpus->records_count + 1,
                                 sizeof(uform_record_t));
    corpus->records = items;
    UFORM_TRY(status);
    items = corpus->slices;
    status = uform_parquet_grow_(reader, &items, &reader->slices_capacity, corpus->slices_count + 2,
                                 sizeof(uform_slice_t));
    corpus->slices = items;
    return status;
}

static uform_slice_t uform_parquet_copy_(uform_corpus_t *corpus, uform_parquet_value_t value) {
    uform_slice_t slice = {corpus->bytes_count, value.length, value.image};
    memcpy(corpus->bytes + corpus->bytes_count, value.data, value.length);
    corpus->bytes_count += value.length;
    return slice;
}

/* Makes the current row group's records from its decoded columns. */
static uform_status_t uform_parquet_records_(uform_parquet_reader_t *reader) {
    uform_corpus_t *corpus = reader->corpus;
    static int const text_roles[] = {uform_parquet_text_k, uform_parquet_language_k};
    static int const pair_roles[] = {uform_parquet_query_k, uform_parquet_positive_k, uform_parquet_negative_k,
                                     uform_parquet_language_k};
    int const *roles = reader->pairs ? pair_roles : text_roles;
    int roles_count = reader->pairs ? 4 : 2;
    for (size_t row = 0; row < reader->group_rows; ++row) {
        uform_parquet_value_t values[uform_parquet_roles_k] = {{0}};
        char problem[160] = "";
        size_t bytes = 0;
        for (int r = 0; r < roles_count; ++r) {
            int role = roles[r], image = reader->pairs && role != uform_parquet_language_k &&
                                         reader->columns[uform_parquet_image_role_(role)].found;
            if (!reader->columns[role].found && !image) continue;
            values[role] = reader->values[image ? uform_parquet_image_role_(role) : role][row];
            values[role].image = image ? 2 : 0; /* the slice holds the encoded image itself */
            int required = role == uform_parquet_text_k || role == uform_parquet_query_k || role == uform_parquet_positive_k;
            char const *name = uform_parquet_role_names_[image ? uform_parquet_image_role_(role) : role];
            if (!values[role].data && required && !problem[0])
                snprintf(problem, sizeof(problem), "column '%s' is null", name);
            else if (values[role].data && !values[role].length && !problem[0])
                snprintf(problem, sizeof(problem), "column '%s' is empty (a segment needs at least one byte)", name);
            bytes += values[role].length;
        }
        size_t file_row = reader->rows_before + row + 1;
        if (problem[0]) {
            if (!reader->skip)
                return uform_fail(uform_format_k, "%s: row group %zu, row %zu (file row %zu): %s", reader->path,
                                  reader->group, row, file_row, problem);
            if (!corpus->skipped++) {
                corpus->first_skipped_line = file_row;
                snprintf(corpus->first_problem, sizeof(corpus->first_problem), "row group %zu, row %zu: %s",
                         reader->group, row, problem);
            }
            continue;
        }
        if (bytes > reader->limits.bytes - corpus->bytes_count)
            return uform_parquet_fail_(reader, uform_unsupported_k, "more than the limit of %zu bytes of strings",
                                       reader->limits.bytes);
        UFORM_TRY(uform_parquet_room_(reader, bytes));
        uform_record_t record = {.line = file_row};
        if (reader->pairs) {
            record.kind = uform_record_pair_k;
            record.text = uform_parquet_copy_(corpus, values[uform_parquet_query_k]);
            record.first_candidate = corpus->slices_count;
            record.positives_count = 1;
            corpus->slices[corpus->slices_count++] = uform_parquet_copy_(corpus, values[uform_parquet_positive_k]);
            if (values[uform_parquet_negative_k].data) {
                record.negatives_count = 1;
                corpus->slices[corpus->slices_count++] = uform_parquet_copy_(corpus, values[uform_parquet_negative_k]);
            }
            corpus->pair_records++;
        } else {
            record.kind = uform_record_text_k;
            record.text = uform_parquet_copy_(corpus, values[uform_parquet_text_k]);
            corpus->text_records++;
        }
        if (values[uform_parquet_language_k].data) record.language = uform_parquet_copy_(corpus, values[uform_parquet_language_k]);
        corpus->records[corpus->records_count++] = record;
    }
    return uform_ok_k;
}

static void uform_parquet_release_group_(uform_parquet_reader_t *reader) {
    for (size_t i = 0; i < reader->buffers_count; ++i) free(reader->buffers[i]);
    reader->buffers_count = 0;
    free(reader->dictionary);
    reader->dictionary = NULL;
    reader->dictionary_count = 0;
    for (int role = 0; role < uform_parquet_roles_k; ++role) reader->values_count[role] = 0;
}

/* --- the file ----------------------------------------------------------------------------------- */

static uform_status_t uform_parquet_file_(uform_parquet_reader_t *reader) {
    uint8_t const *data = reader->data;
    size_t length = reader->length;
    if (length < 12)
        return uform_parquet_fail_(reader, uform_format_k, "%zu bytes are too few for Parquet (magic and footer need 12)",
                                   length);
    if (!memcmp(data + length - 4, "PARE", 4))
        return uform_parquet_fail_(reader, uform_unsupported_k, "an encrypted footer (PARE); plain Parquet is read");
    if (memcmp(data, "PAR1", 4))
        return uform_parquet_fail_(reader, uform_format_k, "does not start with the Parquet magic PAR1");
    if (memcmp(data + length - 4, "PAR1", 4))
        return uform_parquet_fail_(reader, uform_format_k, "does not end with the Parquet magic PAR1 (truncated?)");
    size_t metadata_length = uform_load_u32_(data + length - 8);
    if (metadata_length > length - 12)
        return uform_parquet_fail_(reader, uform_format_k, "a footer of %zu bytes cannot fit a file of %zu (truncated?)",
                                   metadata_length, length);
    reader->metadata_offset = length - 8 - metadata_length;

    /* FileMetaData: the schema first, then the row groups, which need it, whatever order they come in. */
    uform_thrift_t thrift = {data, data + reader->metadata_offset, data + length - 8, NULL, 0};
    int last = 0, id = 0, has_rows = 0, encrypted = 0;
    uint8_t type, element;
    int64_t file_rows = 0;
    uint8_t const *groups_start = NULL;
    size_t groups_count = 0;
    for (;;) {
        if (!uform_thrift_field_(&thrift, &last, &type, &id)) return uform_parquet_thrift_failed_(reader, &thrift, "footer");
        if (type == uform_thrift_stop_k) break;
        int ok = 1;
        size_t count = 0;
        if (id == 2) {
            if (reader->elements) return uform_parquet_fail_(reader, uform_format_k, "footer: two schemas");
            ok = uform_thrift_list_(&thrift, type, &element, &count);
            if (ok && count && element != uform_thrift_struct_k)
                ok = uform_thrift_fail_(&thrift, "schema elements that are not structs");
            if (ok) {
                reader->elements = calloc(count ? count : 1, sizeof(uform_parquet_element_t));
                if (!reader->elements)
                    return uform_parquet_fail_(reader, uform_out_of_memory_k, "cannot hold %zu schema elements", count);
                reader->elements_count = count;
            }
            for (size_t i = 0; ok && i < count; ++i) ok = uform_parquet_element_(&thrift, &reader->elements[i]);
        } else if (id == 3) ok = uform_thrift_i64_(&thrift, type, &file_rows), has_rows = 1;
        else if (id == 4) {
            if (groups_start) return uform_parquet_fail_(reader, uform_format_k, "footer: two lists of row groups");
            ok = uform_thrift_list_(&thrift, type, &element, &count);
            if (ok && count && element != uform_thrift_struct_k)
                ok = uform_thrift_fail_(&thrift, "row groups that are not structs");
            groups_start = thrift.cursor;
            groups_count = count;
            for (size_t i = 0; ok && i < count; ++i) ok = uform_thrift_skip_(&thrift, uform_thrift_struct_k, 0, 1);
        } else {
            if (id == 8) encrypted = 1;
            ok = uform_thrift_skip_(&thrift, type, 0, 1);
        }
        if (!ok) return uform_parquet_thrift_failed_(reader, &thrift, "footer");
    }
    if (encrypted) return uform_parquet_fail_(reader, uform_unsupported_k, "encrypted columns; plain Parquet is read");
    if (!reader->elements_count || !has_rows || !groups_start)
        return uform_parquet_fail_(reader, uform_format_k, "footer: no %s",
                                   !reader->elements_count ? "schema" : !has_rows ? "row count" : "row groups");
    size_t index = 0;
    reader->elements[0].children = reader->elements[0].children > 0 ? reader->elements[0].children : 0;
    reader->elements[0].has_type = 0; /* the root is a group even when a writer gave it a type */
    UFORM_TRY(uform_parquet_walk_(reader, &index, 0, -1));
    if (index != reader->elements_count)
        return uform_parquet_fail_(reader, uform_format_k, "schema: %zu elements, but the tree holds %zu",
                                   reader->elements_count, index);
    UFORM_TRY(uform_parquet_choose_records_(reader));
    if (file_rows < 0 || (uint64_t)file_rows > reader->limits.rows)
        return uform_parquet_fail_(reader, file_rows < 0 ? uform_format_k : uform_unsupported_k,
                                   "%lld rows; a source holds at most %zu", (long long)file_rows, reader->limits.rows);

    thrift = (uform_thrift_t){data, groups_start, data + length - 8, NULL, 0};
    int used_roles[uform_parquet_roles_k] = {0};
    for (int role = 0; role < uform_parquet_roles_k; ++role)
        used_roles[role] = reader->columns[role].found &&
                           (reader->pairs ? role != uform_parquet_text_k
                                          : role == uform_parquet_text_k || role == uform_parquet_language_k);
    for (size_t group = 0; group < groups_count; ++group) {
        uform_parquet_chunk_t chunks[uform_parquet_roles_k];
        int64_t rows = 0;
        reader->in_group = 1;
        reader->group = group;
        reader->role = -1;
        UFORM_TRY(uform_parquet_row_group_(reader, &thrift, chunks, &rows));
        if ((uint64_t)rows > (uint64_t)file_rows - reader->rows_before)
            return uform_parquet_fail_(reader, uform_format_k, "%lld rows, beyond the footer's %lld for the file",
                                       (long long)rows, (long long)file_rows);
        reader->group_rows = (size_t)rows;
        for (int role = 0; role < uform_parquet_roles_k; ++role) {
            if (!used_roles[role]) continue;
            reader->role = role;
            UFORM_TRY(uform_parquet_column_chunk_(reader, &chunks[role]));
        }
        reader->role = -1;
        UFORM_TRY(uform_parquet_records_(reader));
        uform_parquet_release_group_(reader);
        reader->rows_before += reader->group_rows;
    }
    reader->in_group = 0;
    if (reader->rows_before != (uint64_t)file_rows)
        return uform_parquet_fail_(reader, uform_format_k, "the footer counts %lld rows, the row groups %zu",
                                   (long long)file_rows, reader->rows_before);
    reader->corpus->lines = reader->rows_before;
    return uform_ok_k;
}

uform_parquet_limits_t uform_parquet_default_limits(void) {
    return (uform_parquet_limits_t){.rows = UINT32_MAX, .bytes = SIZE_MAX / 2};
}

uform_status_t uform_parquet_parse(char const *path, void const *data, size_t length,
                                   uform_jsonl_options_t const *options, uform_parquet_limits_t const *limits,
                                   uform_corpus_t *corpus) {
    if (!corpus) return uform_fail(uform_invalid_argument_k, "uform_parquet_parse: NULL corpus");
    memset(corpus, 0, sizeof(*corpus));
    if (!path || (!data && length)) return uform_fail(uform_invalid_argument_k, "uform_parquet_parse: NULL path or data");
    snprintf(corpus->path, sizeof(corpus->path), "%s", path);
    uform_parquet_reader_t reader = {
        .path = path,
        .data = data,
        .length = length,
        .limits = limits ? *limits : uform_parquet_default_limits(),
        .skip = options && options->skip_malformed,
        .corpus = corpus,
        .role = -1,
    };
    uform_status_t status = data ? uform_parquet_file_(&reader)
                                 : uform_parquet_fail_(&reader, uform_format_k, "0 bytes are too few for Parquet");
    uform_parquet_release_group_(&reader);
    free(reader.buffers);
    free(reader.elements);
    for (int role = 0; role < uform_parquet_roles_k; ++role) free(reader.values[role]);
    if (status == uform_ok_k && !corpus->bytes) corpus->bytes = malloc(1);
    if (status == uform_ok_k && !corpus->records) corpus->records = malloc(sizeof(uform_record_t));
    if (status == uform_ok_k && (!corpus->bytes || !corpus->records))
        status = uform_fail(uform_out_of_memory_k, "%s: cannot allocate an empty corpus", path);
    if (status != uform_ok_k) uform_corpus_close(corpus);
    return status;
}

uform_status_t uform_parquet_read(char const *path, uform_jsonl_options_t const *options, uform_corpus_t *corpus) {
    if (!corpus) return uform_fail(uform_invalid_argument_k, "uform_parquet_read: NULL corpus");
    memset(corpus, 0, sizeof(*corpus));
    if (!path) return uform_fail(uform_invalid_argument_k, "uform_parquet_read: NULL path");
    int descriptor = open(path, O_RDONLY | O_CLOEXEC);
    if (descriptor < 0) return uform_fail(uform_io_k, "%s: cannot open: %s", path, strerror(errno));
    struct stat info;
    if (fstat(descriptor, &info) != 0 || !S_ISREG(info.st_mode)) {
        close(descriptor);
        return uform_fail(uform_io_k, "%s: not a regular file", path);
    }
    size_t length = (size_t)info.st_size;
    void *map = NULL;
    if (length) {
        map = mmap(NULL, length, PROT_READ, MAP_PRIVATE, descriptor, 0);
        if (map == MAP_FAILED) {
            int error = errno;
            close(descriptor);
            return uform_fail(uform_io_k, "%s: cannot map %zu bytes: %s", path, length, strerror(error));
        }
    }
    close(descriptor);
    uform_status_t status = uform_parquet_parse(path, map ? map : "", length, options, NULL, corpus);
    if (map) munmap(map, length);
    return status;
}
