/*  tfidf.c: hashed character n-gram TF-IDF (see tfidf.h). Each text's n-grams are hashed with
 *  FNV-1a (the length mixed in, so "abc" as a 3-gram and inside a 4-gram differ), sorted and
 *  counted; no per-text allocation beyond one scratch array sized for the longest text.
 */
#include "eval/tfidf.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"

static uint32_t uform_ngram_hash_(uint8_t const *bytes, size_t length, size_t buckets) {
    uint64_t hash = 1469598103934665603ull ^ (uint64_t)length;
    for (size_t i = 0; i < length; ++i) hash = (hash ^ bytes[i]) * 1099511628211ull;
    hash ^= hash >> 29; /* FNV's low bits mix poorly; fold the high ones in before masking */
    return (uint32_t)(hash & (buckets - 1));
}

static int uform_compare_features_(void const *left, void const *right) {
    uint32_t a = *(uint32_t const *)left, b = *(uint32_t const *)right;
    return (a > b) - (a < b);
}

/* The sorted hashed features of one text (with repeats), into `scratch`; returns how many. */
static size_t uform_ngrams_(uform_text_t text, size_t shortest, size_t longest, size_t buckets, uint32_t *scratch) {
    size_t count = 0;
    if (text.length < shortest) {
        if (text.length) scratch[count++] = uform_ngram_hash_(text.data, text.length, buckets);
    } else {
        for (size_t length = shortest; length <= longest && length <= text.length; ++length)
            for (size_t start = 0; start + length <= text.length; ++start)
                scratch[count++] = uform_ngram_hash_(text.data + start, length, buckets);
    }
    qsort(scratch, count, sizeof(uint32_t), uform_compare_features_);
    return count;
}

static size_t uform_ngrams_bound_(uform_text_t const *texts, size_t count, size_t shortest, size_t longest) {
    size_t most = 1;
    for (size_t i = 0; i < count; ++i) {
        size_t grams = texts[i].length < shortest ? 1 : 0;
        for (size_t length = shortest; length <= longest && length <= texts[i].length; ++length)
            grams += texts[i].length - length + 1;
        if (grams > most) most = grams;
    }
    return most;
}

uform_status_t uform_tfidf_fit(uform_text_t const *texts, size_t count, size_t shortest, size_t longest, size_t buckets,
                               uform_tfidf_t *model) {
    if (!model) return uform_fail(uform_invalid_argument_k, "uform_tfidf_fit: no model to fill");
    memset(model, 0, sizeof(*model));
    if ((!texts && count) || !shortest || shortest > longest || !buckets || (buckets & (buckets - 1)) ||
        buckets > (1ull << 31))
        return uform_fail(uform_invalid_argument_k,
                          "uform_tfidf_fit: n-grams %zu..%zu over %zu buckets (want 1 <= shortest <= longest, buckets "
                          "a power of two)",
                          shortest, longest, buckets);
    uint32_t *frequency = calloc(buckets, sizeof(uint32_t));
    uint32_t *scratch = malloc(uform_ngrams_bound_(texts, count, shortest, longest) * sizeof(uint32_t));
    model->idf = malloc(buckets * sizeof(float));
    if (!frequency || !scratch || !model->idf) {
        free(frequency), free(scratch), free(model->idf), model->idf = NULL;
        return uform_fail(uform_out_of_memory_k, "uform_tfidf_fit: %zu buckets", buckets);
    }
    for (size_t i = 0; i < count; ++i) {
        size_t grams = uform_ngrams_(texts[i], shortest, longest, buckets, scratch);
        for (size_t gram = 0; gram < grams; ++gram)
            if (!gram || scratch[gram] != scratch[gram - 1]) frequency[scratch[gram]]++;
    }
    for (size_t feature = 0; feature < buckets; ++feature)
        model->idf[feature] = (float)(log((1.0 + (double)count) / (1.0 + (double)frequency[feature])) + 1.0);
    model->shortest = shortest, model->longest = longest, model->buckets = buckets, model->documents = count;
    free(frequency), free(scratch);
    return uform_ok_k;
}

uform_status_t uform_tfidf_vectors(uform_tfidf_t const *model, uform_text_t const *texts, size_t count,
                                   uform_sparse_t *vectors) {
    if (!model || !model->idf || !vectors || (!texts && count))
        return uform_fail(uform_invalid_argument_k,
                          "uform_tfidf_vectors: a fitted model, texts and vectors are needed");
    memset(vectors, 0, sizeof(*vectors));
    size_t total = 0;
    for (size_t i = 0; i < count; ++i) total += uform_ngrams_bound_(texts + i, 1, model->shortest, model->longest);
    vectors->starts = malloc((count + 1) * sizeof(size_t));
    vectors->features = malloc((total ? total : 1) * sizeof(uint32_t));
    vectors->weights = malloc((total ? total : 1) * sizeof(float));
    uint32_t *scratch = malloc(uform_ngrams_bound_(texts, count, model->shortest, model->longest) * sizeof(uint32_t));
    if (!vectors->starts || !vectors->features || !vectors->weights || !scratch) {
        free(scratch);
        uform_sparse_free(vectors);
        return uform_fail(uform_out_of_memory_k, "uform_tfidf_vectors: %zu features of %zu texts", total, count);
    }
    size_t filled = 0;
    for (size_t i = 0; i < count; ++i) {
        vectors->starts[i] = filled;
        size_t grams = uform_ngrams_(texts[i], model->shortest, model->longest, model->buckets, scratch);
        double norm = 0;
        for (size_t gram = 0; gram < grams;) {
            size_t run = 1;
            while (gram + run < grams && scratch[gram + run] == scratch[gram]) ++run;
            float weight = (float)((1.0 + log((double)run)) * model->idf[scratch[gram]]);
            vectors->features[filled] = scratch[gram], vectors->weights[filled++] = weight;
            norm += (double)weight * weight;
            gram += run;
        }
        float scale = norm > 0 ? (float)(1.0 / sqrt(norm)) : 0.0f;
        for (size_t entry = vectors->starts[i]; entry < filled; ++entry) vectors->weights[entry] *= scale;
    }
    vectors->starts[count] = filled;
    vectors->rows = count;
    free(scratch);
    return uform_ok_k;
}

uform_status_t uform_sparse_transpose(uform_sparse_t const *vectors, size_t columns, uform_sparse_t *transposed) {
    if (!vectors || !transposed || !columns)
        return uform_fail(uform_invalid_argument_k,
                          "uform_sparse_transpose: vectors, a target and columns > 0 are needed");
    memset(transposed, 0, sizeof(*transposed));
    size_t entries = vectors->rows ? vectors->starts[vectors->rows] : 0;
    transposed->starts = calloc(columns + 1, sizeof(size_t));
    transposed->features = malloc((entries ? entries : 1) * sizeof(uint32_t));
    transposed->weights = malloc((entries ? entries : 1) * sizeof(float));
    if (!transposed->starts || !transposed->features || !transposed->weights) {
        uform_sparse_free(transposed);
        return uform_fail(uform_out_of_memory_k, "uform_sparse_transpose: %zu entries", entries);
    }
    for (size_t entry = 0; entry < entries; ++entry) {
        if (vectors->features[entry] >= columns) {
            uform_sparse_free(transposed);
            return uform_fail(uform_invalid_argument_k, "uform_sparse_transpose: feature %u is outside %zu columns",
                              vectors->features[entry], columns);
        }
        transposed->starts[vectors->features[entry] + 1]++;
    }
    for (size_t column = 0; column < columns; ++column) transposed->starts[column + 1] += transposed->starts[column];
    size_t *cursor = malloc((columns ? columns : 1) * sizeof(size_t));
    if (!cursor) {
        uform_sparse_free(transposed);
        return uform_fail(uform_out_of_memory_k, "uform_sparse_transpose: %zu columns", columns);
    }
    memcpy(cursor, transposed->starts, columns * sizeof(size_t));
    for (size_t row = 0; row < vectors->rows; ++row) /* rows in order, so each posting list ascends */
        for (size_t entry = vectors->starts[row]; entry < vectors->starts[row + 1]; ++entry) {
            size_t at = cursor[vectors->features[entry]]++;
            transposed->features[at] = (uint32_t)row, transposed->weights[at] = vectors->weights[entry];
        }
    free(cursor);
    transposed->rows = columns;
    return uform_ok_k;
}

void uform_tfidf_scores(uform_sparse_t const *queries, size_t row, uform_sparse_t const *index, float *scores,
                        size_t candidates) {
    memset(scores, 0, candidates * sizeof(float));
    for (size_t entry = queries->starts[row]; entry < queries->starts[row + 1]; ++entry) {
        uint32_t feature = queries->features[entry];
        float weight = queries->weights[entry];
        if (feature >= index->rows) continue;
        for (size_t posting = index->starts[feature]; posting < index->starts[feature + 1]; ++posting)
            if (index->features[posting] < candidates)
                scores[index->features[posting]] += weight * index->weights[posting];
    }
}

void uform_tfidf_free(uform_tfidf_t *model) {
    if (!model) return;
    free(model->idf);
    memset(model, 0, sizeof(*model));
}

void uform_sparse_free(uform_sparse_t *vectors) {
    if (!vectors) return;
    free(vectors->starts), free(vectors->features), free(vectors->weights);
    memset(vectors, 0, sizeof(*vectors));
}
