/*  corpus.c: picks the reader of a source file by its extension. Extensions, not magic bytes, so
 *  that a JSONL file is never probed and a misnamed file fails with its format's own message. */
#include "data/corpus.h"

#include <string.h>

#include "core/status.h"
#include "data/parquet.h"

static int uform_ends_with_(char const *path, char const *suffix) {
    size_t length = strlen(path), suffix_length = strlen(suffix);
    if (length < suffix_length) return 0;
    for (size_t i = 0; i < suffix_length; ++i) {
        char letter = path[length - suffix_length + i];
        if (letter >= 'A' && letter <= 'Z') letter = (char)(letter - 'A' + 'a');
        if (letter != suffix[i]) return 0;
    }
    return 1;
}

int uform_corpus_is_parquet(char const *path) {
    return path && (uform_ends_with_(path, ".parquet") || uform_ends_with_(path, ".pq"));
}

uform_status_t uform_corpus_read(char const *path, uform_jsonl_options_t const *options, uform_corpus_t *corpus) {
    if (!path || !corpus) return uform_fail(uform_invalid_argument_k, "uform_corpus_read: NULL path or corpus");
    return uform_corpus_is_parquet(path) ? uform_parquet_read(path, options, corpus)
                                         : uform_jsonl_read(path, options, corpus);
}
