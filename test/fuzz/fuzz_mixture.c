/*  fuzz_mixture.c: a libFuzzer harness over uform_mixture_parse, the mixture reader's in-memory entry
 *  point. The reader only checks that each source is readable (access, R_OK) and opens nothing, so the
 *  harness names a mixture in test/fuzz/ (run from the repository root, as run.sh does) and relative
 *  sources resolve to files that exist there. A mixture it accepts must have every field in its
 *  documented range and every source a path, a name and a positive weight. test/fuzz/run.sh builds
 *  and runs it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/mixture.h"

static char const uform_fuzz_path_[] = "test/fuzz/fuzz.json";
static char const uform_fuzz_folder_[] = "test/fuzz/";

int LLVMFuzzerTestOneInput(uint8_t const *data, size_t size);

int LLVMFuzzerTestOneInput(uint8_t const *data, size_t size) {
    uform_mixture_t mixture;
    if (uform_mixture_parse(uform_fuzz_path_, (char const *)data, size, &mixture) != uform_ok_k) {
        if (mixture.sources || mixture.sources_count) abort(); /* a failure leaves nothing to close */
        return 0;
    }
    if (!uform_objective_name(mixture.objective)) abort();
    if (mixture.columns < 1 || mixture.columns > uform_mixture_max_columns_k) abort();
    if (!(mixture.mask_ratio > 0 && mixture.mask_ratio < 1)) abort();
    if (!(mixture.mean_span >= 1 && mixture.mean_span <= 1e6)) abort();
    if (!mixture.sources || mixture.sources_count < 1 || mixture.sources_count > uform_mixture_max_sources_k) abort();
    for (size_t i = 0; i < mixture.sources_count; ++i) {
        uform_mixture_source_t const *source = &mixture.sources[i];
        if (!memchr(source->path, 0, sizeof(source->path)) || !memchr(source->name, 0, sizeof(source->name))) abort();
        if (!source->name[0]) abort();
        size_t const folder = sizeof(uform_fuzz_folder_) - 1; /* a relative source names a file in it */
        if (source->path[0] != '/' && (strncmp(source->path, uform_fuzz_folder_, folder) || !source->path[folder]))
            abort();
        if (!isfinite(source->weight) || !(source->weight > 0)) abort();
        if (source->skip_malformed != 0 && source->skip_malformed != 1) abort();
    }
    uform_mixture_close(&mixture);
    return 0;
}
