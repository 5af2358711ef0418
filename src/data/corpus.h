/*  corpus.h: one entry point for a source file of records, whatever its format: a path ending in
 *  ".parquet" or ".pq" (any case) is read as Parquet (data/parquet.h), any other as JSONL
 *  (data/jsonl.h). Both give the same uform_corpus_t.
 */
#ifndef UFORM_DATA_CORPUS_H
#define UFORM_DATA_CORPUS_H

#include "data/jsonl.h"

/** Reads `path` into `corpus` by its extension; `options` may be NULL. Errors as the format's reader. */
uform_status_t uform_corpus_read(char const *path, uform_jsonl_options_t const *options, uform_corpus_t *corpus);

/** Nonzero when `path` would be read as Parquet. */
int uform_corpus_is_parquet(char const *path);

#endif
