/*  fuzz_jsonl.c: a libFuzzer harness over uform_jsonl_parse, the JSONL reader's in-memory entry
 *  point. Each input is read twice, failing on a malformed line and skipping it. A corpus the reader
 *  accepts must have every slice inside its bytes, non-empty strings, records in line order and
 *  counts that add up; skipping must accept every input, and keep what the strict read kept.
 *  test/fuzz/run.sh builds and runs it.
 */
#include <stdlib.h>
#include <string.h>

#include "data/jsonl.h"

static void uform_check_slice_(uform_corpus_t const *corpus, uform_slice_t slice, int may_be_empty) {
    if (slice.offset > corpus->bytes_count || slice.length > corpus->bytes_count - slice.offset) abort();
    if (!slice.length && !may_be_empty) abort();
}

static void uform_check_corpus_(uform_corpus_t const *corpus, size_t size, int skip) {
    if (corpus->bytes_count > size) abort(); /* unescaping never lengthens a string */
    if (corpus->records_count + corpus->skipped > corpus->lines) abort();
    if (corpus->text_records + corpus->pair_records != corpus->records_count) abort();
    if (!skip && corpus->skipped) abort();
    if (!corpus->skipped != !corpus->first_skipped_line || corpus->first_skipped_line > corpus->lines) abort();
    if (corpus->skipped && !corpus->first_problem[0]) abort();
    size_t previous_line = 0, candidates = 0;
    for (size_t r = 0; r < corpus->records_count; ++r) {
        uform_record_t const *record = &corpus->records[r];
        if (record->line <= previous_line || record->line > corpus->lines) abort();
        previous_line = record->line;
        uform_check_slice_(corpus, record->text, 0);
        uform_check_slice_(corpus, record->language, 1);
        if (record->kind == uform_record_text_k) {
            if (record->positives_count || record->negatives_count) abort();
            continue;
        }
        if (record->kind != uform_record_pair_k || !record->positives_count) abort();
        size_t const count = (size_t)record->positives_count + record->negatives_count;
        if (record->first_candidate != candidates || count > corpus->slices_count - candidates) abort();
        for (size_t i = 0; i < count; ++i) uform_check_slice_(corpus, corpus->slices[record->first_candidate + i], 0);
        candidates += count;
    }
    if (candidates != corpus->slices_count) abort(); /* a skipped line leaves no slices behind */
}

int LLVMFuzzerTestOneInput(uint8_t const *data, size_t size);

int LLVMFuzzerTestOneInput(uint8_t const *data, size_t size) {
    uform_corpus_t strict, skipping;
    uform_jsonl_options_t const strict_options = {.skip_malformed = 0}, skipping_options = {.skip_malformed = 1};
    char const *text = (char const *)data;
    uform_status_t const strict_status = uform_jsonl_parse("fuzz.jsonl", text, size, &strict_options, &strict);
    if (uform_jsonl_parse("fuzz.jsonl", text, size, &skipping_options, &skipping) != uform_ok_k) abort();
    uform_check_corpus_(&skipping, size, 1);
    if (strict_status == uform_ok_k) {
        uform_check_corpus_(&strict, size, 0);
        if (skipping.skipped || skipping.records_count != strict.records_count ||
            skipping.bytes_count != strict.bytes_count || memcmp(skipping.bytes, strict.bytes, strict.bytes_count))
            abort();
        uform_corpus_close(&strict);
    } else if (strict_status != uform_format_k || !skipping.skipped) {
        abort(); /* the strict read fails only on a line that skipping skips */
    }
    uform_corpus_close(&skipping);
    return 0;
}
