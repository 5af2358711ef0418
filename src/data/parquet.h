/*  parquet.h: a Parquet file read into the same records as a JSONL file (data/jsonl.h). Flat
 *  schemas only: top-level BYTE_ARRAY columns (strings or binary), required or optional. A column
 *  "text" gives text records; "query" and "positive" (and an optional "negative") give pair records
 *  of one positive and at most one negative; an optional "lang" fills `record.language`; other
 *  columns are never decoded. `record.line` is the 1-based row of the file; `corpus->lines` counts
 *  the file's rows. Encodings: PLAIN and dictionary; data pages v1 and v2; codecs: none, Snappy,
 *  gzip, Zstandard. Everything read from the file is bounds-checked: a malformed file fails with
 *  uform_format_k "PATH: problem", a valid file using what this reader lacks with uform_unsupported_k.
 */
#ifndef UFORM_DATA_PARQUET_H
#define UFORM_DATA_PARQUET_H

#include <stddef.h>
#include <stdint.h>

#include "data/jsonl.h"

/** Caps that keep a small hostile file from claiming unbounded memory or time: run-length encoding
 *  lets a few bytes stand for billions of rows, and a compressed page names its own size. */
typedef struct uform_parquet_limits_t {
    size_t rows;  /* rows in the file; the batcher takes at most UINT32_MAX records a source */
    size_t bytes; /* one page's uncompressed size, and the corpus's string bytes */
} uform_parquet_limits_t;

/** The limits `uform_parquet_read` uses: UINT32_MAX rows, SIZE_MAX / 2 bytes. */
uform_parquet_limits_t uform_parquet_default_limits(void);

/** Reads `path` (memory-mapped) into `corpus`. A row whose needed value is null or empty fails with
 *  "PATH: row group G, row R (file row F): problem" unless `options->skip_malformed`, which counts
 *  it in `corpus->skipped` instead. `options` may be NULL. */
uform_status_t uform_parquet_read(char const *path, uform_jsonl_options_t const *options, uform_corpus_t *corpus);

/** The same from `length` bytes in memory; `path` only names them in messages. `limits` may be NULL
 *  for the defaults. The bytes are not kept: the corpus owns copies of every string. */
uform_status_t uform_parquet_parse(char const *path, void const *data, size_t length,
                                   uform_jsonl_options_t const *options, uform_parquet_limits_t const *limits,
                                   uform_corpus_t *corpus);

#endif
