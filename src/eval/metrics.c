/*  metrics.c: placements of gold candidates and the expected ranking metrics they give (see
 *  metrics.h for the tie rule). A placement (better b, tied t) puts the gold at a rank uniform on
 *  b + 1 .. b + t + 1, so every metric is an average of that many terms, summed in closed form.
 */
#include "eval/metrics.h"

#include <math.h>

static double uform_score_key_(float score) { return isnan(score) ? -INFINITY : (double)score; }

uform_placement_t uform_placement(float const *scores, size_t count, size_t gold, uint32_t const *groups, double *best) {
    uform_placement_t placement = {0, 0};
    if (gold >= count) return placement;
    double gold_score = uform_score_key_(scores[gold]);
    if (!groups) {
        for (size_t candidate = 0; candidate < count; ++candidate) {
            if (candidate == gold) continue;
            double score = uform_score_key_(scores[candidate]);
            placement.better += score > gold_score;
            placement.tied += score == gold_score;
        }
        return placement;
    }
    /* Each item's best score, then each rival item counted once (its best marked NaN when done). */
    uint32_t const mine = groups[gold];
    for (size_t candidate = 0; candidate < count; ++candidate)
        if (groups[candidate] != mine) best[groups[candidate]] = -INFINITY;
        else if (uform_score_key_(scores[candidate]) > gold_score) gold_score = uform_score_key_(scores[candidate]);
    for (size_t candidate = 0; candidate < count; ++candidate) {
        uint32_t group = groups[candidate];
        double score = uform_score_key_(scores[candidate]);
        if (group != mine && score > best[group]) best[group] = score;
    }
    for (size_t candidate = 0; candidate < count; ++candidate) {
        uint32_t group = groups[candidate];
        if (group == mine || isnan(best[group])) continue;
        placement.better += best[group] > gold_score;
        placement.tied += best[group] == gold_score;
        best[group] = NAN;
    }
    return placement;
}

uform_placement_t uform_placement_among(float const *scores, size_t count, float gold_score) {
    uform_placement_t placement = {0, 0};
    double gold = uform_score_key_(gold_score);
    for (size_t candidate = 0; candidate < count; ++candidate) {
        double score = uform_score_key_(scores[candidate]);
        placement.better += score > gold;
        placement.tied += score == gold;
    }
    return placement;
}

double uform_harmonic(size_t count) {
    /* Summed exactly while cheap; beyond, the asymptotic series is exact to double precision. */
    if (count <= 512) {
        double sum = 0;
        for (size_t term = count; term >= 1; --term) sum += 1.0 / (double)term; /* smallest terms first */
        return sum;
    }
    double size = (double)count, inverse_square = 1.0 / (size * size);
    return log(size) + 0.57721566490153286061 + 0.5 / size - inverse_square / 12.0 +
           inverse_square * inverse_square / 120.0;
}

void uform_metrics_add(uform_metrics_t *sums, uform_placement_t placement) {
    double choices = (double)placement.tied + 1.0;
    size_t last = placement.better + placement.tied + 1;
    /* Recall@k: the share of the equally likely ranks first..last that are <= k. */
    size_t const cutoffs[3] = {1, 5, 10};
    double recall[3];
    for (int index = 0; index < 3; ++index) {
        size_t cutoff = cutoffs[index];
        size_t hits = cutoff <= placement.better ? 0 : (last < cutoff ? last : cutoff) - placement.better;
        recall[index] = (double)hits / choices;
    }
    sums->recall_at_1 += recall[0], sums->recall_at_5 += recall[1], sums->recall_at_10 += recall[2];
    sums->reciprocal_rank += (uform_harmonic(last) - uform_harmonic(placement.better)) / choices;
    double gain = 0; /* one relevant item: DCG = 1 / log2(rank + 1), ideal DCG = 1 */
    for (size_t rank = placement.better + 1; rank <= last && rank <= 10; ++rank) gain += 1.0 / log2((double)rank + 1.0);
    sums->ndcg_at_10 += gain / choices;
    sums->queries += 1;
}

void uform_metrics_merge(uform_metrics_t *sums, uform_metrics_t const *other) {
    sums->recall_at_1 += other->recall_at_1, sums->recall_at_5 += other->recall_at_5;
    sums->recall_at_10 += other->recall_at_10, sums->reciprocal_rank += other->reciprocal_rank;
    sums->ndcg_at_10 += other->ndcg_at_10, sums->queries += other->queries;
}

uform_metrics_t uform_metrics_mean(uform_metrics_t const *sums) {
    uform_metrics_t mean = {0, 0, 0, 0, 0, sums->queries};
    if (!sums->queries) return mean;
    double scale = 1.0 / (double)sums->queries;
    mean.recall_at_1 = sums->recall_at_1 * scale, mean.recall_at_5 = sums->recall_at_5 * scale;
    mean.recall_at_10 = sums->recall_at_10 * scale, mean.reciprocal_rank = sums->reciprocal_rank * scale;
    mean.ndcg_at_10 = sums->ndcg_at_10 * scale;
    return mean;
}

uform_metrics_t uform_metrics_chance_among(size_t count, size_t golds) {
    uform_metrics_t sums = {0, 0, 0, 0, 0, 0};
    if (!count || !golds || golds > count) return sums;
    /* The first gold's rank r: P(r) = P(no gold in ranks 1..r-1) golds / (count - r + 1). */
    double survive = 1;
    for (size_t rank = 1; rank + golds <= count + 1 && survive > 0; ++rank) {
        double left = (double)(count - rank + 1), here = survive * (double)golds / left;
        survive *= (left - (double)golds) / left;
        sums.recall_at_1 += rank <= 1 ? here : 0;
        sums.recall_at_5 += rank <= 5 ? here : 0;
        sums.recall_at_10 += rank <= 10 ? here : 0;
        sums.reciprocal_rank += here / (double)rank;
        sums.ndcg_at_10 += rank <= 10 ? here / log2((double)rank + 1.0) : 0;
    }
    sums.queries = 1;
    return sums;
}
