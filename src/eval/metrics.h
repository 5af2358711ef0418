/*  metrics.h: ranking metrics for retrieval with one gold candidate per query: Recall@1/5/10, MRR
 *  and nDCG@10. A query's outcome is its placement: how many candidates score strictly above the
 *  gold and how many tie with it. Ties are not broken by index (which would favour whichever gold
 *  happens to sit first): each metric is its exact expectation over a uniformly random order of
 *  the tied candidates, so a model that scores everything alike gets exactly chance.
 */
#ifndef UFORM_EVAL_METRICS_H
#define UFORM_EVAL_METRICS_H

#include <stddef.h>
#include <stdint.h>

/** Candidates strictly above the gold, and other candidates tied with it. */
typedef struct uform_placement_t {
    size_t better, tied;
} uform_placement_t;

/** Metric sums over `queries` (uform_metrics_add), or their means (uform_metrics_mean). */
typedef struct uform_metrics_t {
    double recall_at_1, recall_at_5, recall_at_10, reciprocal_rank, ndcg_at_10;
    size_t queries;
} uform_metrics_t;

/** The gold candidate's placement among `count` scores. `groups` (NULL: all distinct) gives each
 *  candidate an item id below `count`: candidates sharing an id are one item (equal texts, one
 *  picture), counted once at the best of their scores. So retrieving any copy of the gold is a hit,
 *  and a rival item ranks once above or level with it however many copies it has. `best` is scratch
 *  of `count` doubles, needed with `groups`. A NaN score counts as minus infinity (a broken score
 *  never helps a candidate). */
uform_placement_t uform_placement(float const *scores, size_t count, size_t gold, uint32_t const *groups, double *best);

/** The placement of a gold scoring `gold_score` against the candidates `scores[count]`, none of
 *  which is the gold or its equal (used after reranking a shortlist). */
uform_placement_t uform_placement_among(float const *scores, size_t count, float gold_score);

/** Adds one query's expected metrics at `placement` to `sums`. */
void uform_metrics_add(uform_metrics_t *sums, uform_placement_t placement);

/** Adds the sums of `other` to `sums`. */
void uform_metrics_merge(uform_metrics_t *sums, uform_metrics_t const *other);

/** Means of the sums (all zero when no query was added); `queries` is kept. */
uform_metrics_t uform_metrics_mean(uform_metrics_t const *sums);

/** Chance with `golds` of the `count` candidates counting as a hit: the expected metrics of the first
 *  gold in a uniformly random order of the candidates (uform_eval's chance is (distinct items, 1), the
 *  all-tied placement among items as uform_placement counts them). */
uform_metrics_t uform_metrics_chance_among(size_t count, size_t golds);

/** The harmonic number H(count) = 1 + 1/2 + ... + 1/count, to double precision for every count. */
double uform_harmonic(size_t count);

#endif
