/*  fuzz_parquet.c: a libFuzzer harness over uform_parquet_parse, the Parquet reader's in-memory entry
 *  point. Each input is read twice, failing on a malformed row and skipping it, under limits small
 *  enough that a few bytes of run-length encoding or a Zstandard frame cannot claim gigabytes. A
 *  corpus the reader accepts must have every slice inside its bytes. test/fuzz/run.sh builds and runs it.
 */
#include <stdlib.h>

#include "data/parquet.h"

static void uform_check_slice_(uform_corpus_t const *corpus, uform_slice_t slice) {
    if (slice.offset > corpus->bytes_count || slice.length > corpus->bytes_count - slice.offset) abort();
}

int LLVMFuzzerTestOneInput(uint8_t const *data, size_t size);

int LLVMFuzzerTestOneInput(uint8_t const *data, size_t size) {
    uform_parquet_limits_t const limits = {.rows = 1 << 16, .bytes = 1 << 24};
    for (int skip = 0; skip < 2; ++skip) {
        uform_jsonl_options_t options = {.skip_malformed = skip};
        uform_corpus_t corpus;
        if (uform_parquet_parse("fuzz.parquet", data, size, &options, &limits, &corpus) != uform_ok_k) continue;
        if (corpus.records_count > corpus.lines || corpus.records_count + corpus.skipped != corpus.lines) abort();
        for (size_t r = 0; r < corpus.records_count; ++r) {
            uform_record_t const *record = &corpus.records[r];
            uform_check_slice_(&corpus, record->text);
            uform_check_slice_(&corpus, record->language);
            if (record->first_candidate + record->positives_count + record->negatives_count > corpus.slices_count) abort();
            for (uint32_t i = 0; i < record->positives_count + record->negatives_count; ++i)
                uform_check_slice_(&corpus, corpus.slices[record->first_candidate + i]);
        }
        uform_corpus_close(&corpus);
    }
    return 0;
}
