/*  tfidf.h: the lexical baseline beside a trained model: character n-grams of the bytes (3 to 5 by
 *  default, so it needs no tokenizer either), hashed into a fixed number of buckets, weighted by
 *  sublinear term frequency times smoothed inverse document frequency, L2-normalized, compared by
 *  cosine through an inverted index. What it cannot find (translations sharing no spelling,
 *  paraphrases) is what a trained encoder has to add.
 */
#ifndef UFORM_EVAL_TFIDF_H
#define UFORM_EVAL_TFIDF_H

#include <stddef.h>
#include <stdint.h>

#include "uform/uform.h"

/** Feature weights and the n-gram shape. */
typedef struct uform_tfidf_t {
    size_t shortest, longest; /* n-gram lengths in bytes, inclusive */
    size_t buckets; /* hashed feature space, a power of two */
    size_t documents; /* texts the weights were fitted on */
    float *idf; /* [buckets] ln((1 + documents) / (1 + frequency)) + 1 */
} uform_tfidf_t;

/** Sparse rows in compressed form: row r holds features[starts[r] .. starts[r + 1]), ascending. */
typedef struct uform_sparse_t {
    size_t rows;
    size_t *starts; /* [rows + 1] */
    uint32_t *features;
    float *weights;
} uform_sparse_t;

/** Fits the document frequencies on `texts` (a feature counts once per text). A text shorter than
 *  `shortest` bytes is one feature, itself. `buckets` must be a power of two; 1 <= shortest <= longest. */
uform_status_t uform_tfidf_fit(uform_text_t const *texts, size_t count, size_t shortest, size_t longest, size_t buckets,
                               uform_tfidf_t *model);

/** The TF-IDF rows of `texts`: weight (1 + ln tf) * idf, each row L2-normalized (an empty row stays empty). */
uform_status_t uform_tfidf_vectors(uform_tfidf_t const *model, uform_text_t const *texts, size_t count,
                                   uform_sparse_t *vectors);

/** The inverted index of `vectors`: row f of `transposed` lists the rows holding feature f
 *  (`features` then holds row numbers). `columns` is the feature space (the model's buckets). */
uform_status_t uform_sparse_transpose(uform_sparse_t const *vectors, size_t columns, uform_sparse_t *transposed);

/** Cosines of row `row` of `queries` against every row of the index's source: `scores[candidates]`. */
void uform_tfidf_scores(uform_sparse_t const *queries, size_t row, uform_sparse_t const *index, float *scores,
                        size_t candidates);

void uform_tfidf_free(uform_tfidf_t *model);
void uform_sparse_free(uform_sparse_t *vectors);

#endif
