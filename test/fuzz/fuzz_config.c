/*  fuzz_config.c: a libFuzzer harness over uform_config_parse, the reader of the configuration JSON a
 *  checkpoint keeps in __metadata__["config"]. A configuration it accepts must be one that
 *  uform_model_init would accept too: a width that is a multiple of 64 in 64..8192, one head per 64,
 *  depth, ColBERT width and columns in range, embedding widths ascending up to the width.
 *  test/fuzz/run.sh builds and runs it.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/config.h"

int LLVMFuzzerTestOneInput(uint8_t const *data, size_t size);

int LLVMFuzzerTestOneInput(uint8_t const *data, size_t size) {
    char *text = malloc(size + 1); /* the metadata value is a C string */
    if (!text) abort();
    memcpy(text, data, size);
    text[size] = 0;
    uform_config_t config;
    uform_status_t const status = uform_config_parse("fuzz.json", text, &config);
    free(text);
    if (status != uform_ok_k) return 0;
    if (!memchr(config.tier, 0, sizeof(config.tier))) abort();
    if (config.width < 64 || config.width > 8192 || config.width % 64) abort();
    if (config.heads != config.width / uform_head_width_k) abort();
    if (config.depth < 1 || config.depth > 256) abort();
    if (config.colbert_width < 1 || config.colbert_width > 4096) abort();
    if (config.columns < 1 || config.columns > 65536) abort();
    if (config.embedding_widths_count < 1 || config.embedding_widths_count > uform_max_embedding_widths_k) abort();
    for (size_t i = 0; i < config.embedding_widths_count; ++i) {
        size_t const previous = i ? config.embedding_widths[i - 1] : 0;
        if (config.embedding_widths[i] <= previous || config.embedding_widths[i] > config.width) abort();
    }
    if (!isfinite(config.learning_rate)) abort(); /* JSON has no spelling for infinities or NaN */
    return 0;
}
