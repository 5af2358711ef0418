/*  test_eval.c: the evaluation layer against cases small enough to rank by hand: placements and
 *  metrics on tiny similarity matrices with known ranks, ties (each metric the exact average over
 *  the tied orders, with a planted index tie-break that must fail the same checks), copies of one
 *  item counted once (with the old every-copy rule as a planted control), NaN scores; harmonic numbers on both sides of the switch to the asymptotic series;
 *  the TF-IDF baseline's weights, cosines and a toy retrieval whose answers are obvious. Prints
 *  "N passed, M failed" and exits non-zero on any failure.
 *
 *  Build and run from the repository root (needs libuform for uform_fail and uform_last_error):
 *    gcc -std=c11 -O2 -Wall -Wextra -Wshadow -Wstrict-prototypes -Wno-unused-parameter \
 *        -D_POSIX_C_SOURCE=200809L -Iinclude -Isrc test/c/test_eval.c src/eval/metrics.c \
 *        src/eval/tfidf.c -Lbuild -luform -lm -Wl,-rpath,$PWD/build -o build-eval/test_eval && ./build-eval/test_eval
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/metrics.h"
#include "eval/tfidf.h"

static int passed_, failed_;

#define CHECK(condition)                                                                                               \
    do {                                                                                                               \
        if (condition)                                                                                                 \
            passed_++;                                                                                                 \
        else {                                                                                                         \
            failed_++;                                                                                                 \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #condition);                              \
        }                                                                                                              \
    } while (0)

/* Metrics are sums of at most a few hundred double terms: 1e-12 is far above their rounding and
 * far below any difference a wrong rank makes (the smallest, 1/10 - 1/11 in MRR, is 9e-3). */
static int near_(double a, double b) { return fabs(a - b) <= 1e-12 * (1.0 + fabs(b)); }

static uform_metrics_t one_(uform_placement_t placement) {
    uform_metrics_t sums = {0};
    uform_metrics_add(&sums, placement);
    return sums;
}

static int matches_(uform_metrics_t m, double r1, double r5, double r10, double mrr, double ndcg) {
    return near_(m.recall_at_1, r1) && near_(m.recall_at_5, r5) && near_(m.recall_at_10, r10) &&
           near_(m.reciprocal_rank, mrr) && near_(m.ndcg_at_10, ndcg);
}

/* matches_, printing what came out when it does not. */
static int metrics_are_(uform_metrics_t m, double r1, double r5, double r10, double mrr, double ndcg) {
    int ok = matches_(m, r1, r5, r10, mrr, ndcg);
    if (!ok)
        fprintf(stderr, "  got R@1 %.15g R@5 %.15g R@10 %.15g MRR %.15g nDCG %.15g\n", m.recall_at_1, m.recall_at_5,
                m.recall_at_10, m.reciprocal_rank, m.ndcg_at_10);
    return ok;
}

static double gain_(double rank) { return 1.0 / log2(rank + 1.0); }

/* The planted control: the tie rule uform_eval used before, a tie with a lower index counts as
 * better. The tie checks below must reject it. */
static uform_placement_t placement_by_index_(float const *scores, size_t count, size_t gold) {
    uform_placement_t placement = {0, 0};
    for (size_t j = 0; j < count; ++j)
        if (j != gold) placement.better += scores[j] > scores[gold] || (scores[j] == scores[gold] && j < gold);
    return placement;
}

static void test_placements(void) {
    float const scores[3] = {0.9f, 0.5f, 0.7f};
    uform_placement_t p = uform_placement(scores, 3, 1, NULL, NULL);
    CHECK(p.better == 2 && p.tied == 0); /* 0.9 and 0.7 beat 0.5: rank 3 */
    CHECK(metrics_are_(one_(p), 0, 1, 1, 1.0 / 3, 0.5));
    p = uform_placement(scores, 3, 0, NULL, NULL);
    CHECK(p.better == 0 && p.tied == 0 && metrics_are_(one_(p), 1, 1, 1, 1, 1));
    p = uform_placement(scores, 3, 2, NULL, NULL);
    CHECK(p.better == 1 && metrics_are_(one_(p), 0, 1, 1, 0.5, gain_(2)));
    p = uform_placement(scores, 3, 7, NULL, NULL); /* a gold outside the candidates places nowhere, harmlessly */
    CHECK(p.better == 0 && p.tied == 0);

    /* Rank 6 of 20: inside @10, outside @5. */
    float twenty[20];
    for (int j = 0; j < 20; ++j) twenty[j] = (float)(20 - j);
    p = uform_placement(twenty, 20, 5, NULL, NULL);
    CHECK(p.better == 5 && metrics_are_(one_(p), 0, 0, 1, 1.0 / 6, gain_(6)));
    p = uform_placement(twenty, 20, 10, NULL, NULL); /* rank 11: past every cutoff, nDCG@10 gives nothing */
    CHECK(p.better == 10 && metrics_are_(one_(p), 0, 0, 0, 1.0 / 11, 0));
}

static void test_ties(void) {
    /* All four alike: the gold is at rank 1..4 with equal chance, whichever index it has. */
    float const alike[4] = {0.5f, 0.5f, 0.5f, 0.5f};
    double const mrr4 = (1 + 1.0 / 2 + 1.0 / 3 + 1.0 / 4) / 4, ndcg4 = (gain_(1) + gain_(2) + gain_(3) + gain_(4)) / 4;
    for (size_t gold = 0; gold < 4; ++gold) {
        uform_placement_t p = uform_placement(alike, 4, gold, NULL, NULL);
        CHECK(p.better == 0 && p.tied == 3);
        CHECK(metrics_are_(one_(p), 0.25, 1, 1, mrr4, ndcg4));
    }
    /* The planted index tie-break gives gold 0 rank 1 and gold 3 rank 4: both must miss the expectation. */
    CHECK(!matches_(one_(placement_by_index_(alike, 4, 0)), 0.25, 1, 1, mrr4, ndcg4));
    CHECK(!matches_(one_(placement_by_index_(alike, 4, 3)), 0.25, 1, 1, mrr4, ndcg4));

    /* One better, one tied: ranks 2 or 3. */
    float const partly[4] = {0.9f, 0.4f, 0.4f, 0.1f};
    uform_placement_t p = uform_placement(partly, 4, 2, NULL, NULL);
    CHECK(p.better == 1 && p.tied == 1);
    CHECK(metrics_are_(one_(p), 0, 1, 1, (1.0 / 2 + 1.0 / 3) / 2, (gain_(2) + gain_(3)) / 2));

    /* A tie straddling a cutoff: ranks 5, 6, 7 count a third toward R@5 and fully toward R@10. */
    CHECK(metrics_are_(one_((uform_placement_t){4, 2}), 0, 1.0 / 3, 1, (1.0 / 5 + 1.0 / 6 + 1.0 / 7) / 3,
                       (gain_(5) + gain_(6) + gain_(7)) / 3));
    /* ... and one straddling 10: ranks 9..12. */
    CHECK(metrics_are_(one_((uform_placement_t){8, 3}), 0, 0, 0.5, (1.0 / 9 + 1.0 / 10 + 1.0 / 11 + 1.0 / 12) / 4,
                       (gain_(9) + gain_(10)) / 4));

    /* Chance with one gold is the all-tied placement: R@k = k / n exactly, MRR = H(n) / n. */
    uform_metrics_t chance = uform_metrics_chance_among(1000, 1);
    double gains = 0;
    for (int rank = 1; rank <= 10; ++rank) gains += gain_(rank);
    CHECK(metrics_are_(chance, 1e-3, 5e-3, 1e-2, uform_harmonic(1000) / 1000, gains / 1000));
    CHECK(metrics_are_(uform_metrics_chance_among(1, 1), 1, 1, 1, 1, 1));
    CHECK(uform_metrics_chance_among(0, 1).queries == 0);
}

/* Chance with a gold group, against every placement of `golds` golds among `count` ranks enumerated
 * (a bitmask per placement, float64 sums): `chance` must match to 1e-12. */
static int chance_among_matches_(uform_metrics_t (*chance)(size_t, size_t), size_t count, size_t golds) {
    double sums[5] = {0, 0, 0, 0, 0}, placements = 0;
    for (unsigned mask = 0; mask < 1u << count; ++mask) {
        if ((size_t)__builtin_popcount(mask) != golds) continue;
        size_t rank = (size_t)__builtin_ctz(mask) + 1;
        sums[0] += rank <= 1, sums[1] += rank <= 5, sums[2] += rank <= 10, sums[3] += 1.0 / (double)rank;
        sums[4] += rank <= 10 ? gain_((int)rank) : 0;
        placements++;
    }
    uform_metrics_t m = chance(count, golds);
    return m.queries == 1 && matches_(m, sums[0] / placements, sums[1] / placements, sums[2] / placements,
                                      sums[3] / placements, sums[4] / placements);
}

/* Planted: the gold group ignored (one gold whatever `golds` says). */
static uform_metrics_t planted_chance_one_gold_(size_t count, size_t golds) {
    (void)golds;
    return uform_metrics_chance_among(count, 1);
}

static void test_chance_among(void) {
    size_t wrong = 0, caught = 0;
    for (size_t count = 1; count <= 14; ++count)
        for (size_t golds = 1; golds <= count; ++golds) {
            wrong += !chance_among_matches_(uform_metrics_chance_among, count, golds);
            caught += golds > 1 && golds < count && !chance_among_matches_(planted_chance_one_gold_, count, golds);
        }
    CHECK(wrong == 0);
    CHECK(caught == 78); /* every case with 1 < golds < count (1 + 2 + ... + 12 of them): the control rejected */
    /* One gold is the all-tied placement of uform_metrics_add; R@1 is golds / count whatever the size. */
    uform_metrics_t one = uform_metrics_chance_among(1000, 1), tied = one_((uform_placement_t){0, 999});
    CHECK(metrics_are_(one, tied.recall_at_1, tied.recall_at_5, tied.recall_at_10, tied.reciprocal_rank, tied.ndcg_at_10));
    CHECK(near_(uform_metrics_chance_among(403, 31).recall_at_1, 31.0 / 403));
    CHECK(uform_metrics_chance_among(5, 0).queries == 0 && uform_metrics_chance_among(5, 6).queries == 0);
    CHECK(uform_metrics_chance_among(7, 7).recall_at_1 == 1);
}

/* The planted control: the duplicates rule uform_eval used before 2026-12-05, each copy of a rival
 * item a rival of its own. The item checks below must reject it. */
static uform_placement_t placement_by_copies_(float const *scores, size_t count, size_t gold, uint32_t const *groups) {
    uform_placement_t placement = {0, 0};
    float gold_score = scores[gold];
    for (size_t j = 0; j < count; ++j)
        if (groups[j] == groups[gold] && scores[j] > gold_score) gold_score = scores[j];
    for (size_t j = 0; j < count; ++j)
        if (groups[j] != groups[gold]) placement.better += scores[j] > gold_score, placement.tied += scores[j] == gold_score;
    return placement;
}

static void test_duplicates_and_nan(void) {
    /* Candidates 0 and 2 are one item (group 0), 1 and 4 another (group 1): each item counts once, at
     * its best score. The scratch starts as garbage and is reused, as uform_eval's threads reuse it. */
    float const scores[5] = {0.1f, 0.5f, 0.9f, 0.3f, 0.6f};
    uint32_t const groups[5] = {0, 1, 0, 2, 1};
    double best[5] = {NAN, -1, 7, NAN, 0};
    uform_placement_t p = uform_placement(scores, 5, 0, groups, best); /* its copy's 0.9 stands for it: first */
    CHECK(p.better == 0 && p.tied == 0);
    p = uform_placement(scores, 5, 1, groups, best); /* item 1 at 0.6; item 0 (0.9) once, item 2 (0.3) not */
    CHECK(p.better == 1 && p.tied == 0);
    p = uform_placement(scores, 5, 3, groups, best); /* items 0 and 1 above it, each once though two copies */
    CHECK(p.better == 2 && p.tied == 0);
    CHECK(placement_by_copies_(scores, 5, 3, groups).better == 3); /* the control counts three copies */
    /* Ties between items count once too: gold 0 level with item 1 (two copies at 0.4). */
    float const level[4] = {0.4f, 0.4f, 0.4f, 0.2f};
    uint32_t const level_groups[4] = {0, 1, 1, 2};
    p = uform_placement(level, 4, 0, level_groups, best);
    CHECK(p.better == 0 && p.tied == 1 && metrics_are_(one_(p), 0.5, 1, 1, 0.75, (gain_(1) + gain_(2)) / 2));
    CHECK(!matches_(one_(placement_by_copies_(level, 4, 0, level_groups)), 0.5, 1, 1, 0.75, (gain_(1) + gain_(2)) / 2));
    p = uform_placement(level, 4, 3, level_groups, best); /* behind both items: rank 3 */
    CHECK(p.better == 2 && p.tied == 0);
    /* Without groups the copy is a rival: gold 0 (0.1) is last. */
    p = uform_placement(scores, 5, 0, NULL, NULL);
    CHECK(p.better == 4);

    float const broken[3] = {NAN, 0.2f, NAN};
    p = uform_placement(broken, 3, 0, NULL, NULL); /* a NaN gold is last, tied with the other NaN */
    CHECK(p.better == 1 && p.tied == 1);
    p = uform_placement(broken, 3, 1, NULL, NULL);
    CHECK(p.better == 0 && p.tied == 0);

    float const rivals[3] = {0.8f, 0.3f, 0.3f};
    p = uform_placement_among(rivals, 3, 0.3f);
    CHECK(p.better == 1 && p.tied == 2);
    p = uform_placement_among(rivals, 0, 0.3f);
    CHECK(p.better == 0 && p.tied == 0);
}

static void test_matrix_means(void) {
    /* Three queries against three candidates; the gold of query i is candidate i. */
    float const similarity[3][3] = {{0.9f, 0.1f, 0.2f}, {0.3f, 0.2f, 0.8f}, {0.5f, 0.5f, 0.5f}};
    uform_metrics_t sums = {0}, parts[2];
    memset(parts, 0, sizeof(parts));
    for (size_t i = 0; i < 3; ++i) {
        uform_placement_t p = uform_placement(similarity[i], 3, i, NULL, NULL);
        uform_metrics_add(&sums, p);
        uform_metrics_add(&parts[i == 2], p);
    }
    /* Ranks: 1, 3, uniform on 1..3. */
    double const mrr = (1 + 1.0 / 3 + (1 + 1.0 / 2 + 1.0 / 3) / 3) / 3;
    double const ndcg = (1 + gain_(3) + (gain_(1) + gain_(2) + gain_(3)) / 3) / 3;
    uform_metrics_t mean = uform_metrics_mean(&sums);
    CHECK(mean.queries == 3 && metrics_are_(mean, (1 + 0 + 1.0 / 3) / 3, 1, 1, mrr, ndcg));
    uform_metrics_merge(&parts[0], &parts[1]); /* per-language sums add up to the whole */
    CHECK(metrics_are_(uform_metrics_mean(&parts[0]), mean.recall_at_1, 1, 1, mrr, ndcg));
    uform_metrics_t empty = {0};
    CHECK(metrics_are_(uform_metrics_mean(&empty), 0, 0, 0, 0, 0));
}

static void test_harmonic(void) {
    CHECK(uform_harmonic(0) == 0 && uform_harmonic(1) == 1 && uform_harmonic(2) == 1.5);
    CHECK(near_(uform_harmonic(4), 25.0 / 12));
    for (size_t n = 500; n <= 530; ++n) CHECK(near_(uform_harmonic(n + 1) - uform_harmonic(n), 1.0 / (double)(n + 1)));
    double direct = 0; /* summed smallest first, good to about 1e-15 relative */
    for (size_t k = 100000; k >= 1; --k) direct += 1.0 / (double)k;
    CHECK(near_(uform_harmonic(100000), direct));
}

static uform_text_t text_(char const *string) { return (uform_text_t){(uint8_t const *)string, strlen(string)}; }

/* The cosine of row a of `left` and row b of `right`, straight from the definition. */
static float cosine_between_(uform_sparse_t const *left, size_t a, uform_sparse_t const *right, size_t b) {
    float sum = 0;
    for (size_t i = left->starts[a]; i < left->starts[a + 1]; ++i)
        for (size_t j = right->starts[b]; j < right->starts[b + 1]; ++j)
            if (left->features[i] == right->features[j]) sum += left->weights[i] * right->weights[j];
    return sum;
}

static float cosine_(uform_sparse_t const *vectors, size_t a, size_t b) {
    return cosine_between_(vectors, a, vectors, b);
}

static void test_tfidf_weights(void) {
    uform_tfidf_t model;
    uform_text_t const three[3] = {text_("aaa"), text_("aaa"), text_("bbb")};
    CHECK(uform_tfidf_fit(three, 3, 3, 3, 1u << 10, &model) == uform_ok_k);
    /* One trigram each: df("aaa") = 2, df("bbb") = 1, every other bucket 0. */
    size_t twice = 0, once = 0, never = 0;
    for (size_t f = 0; f < model.buckets; ++f) {
        twice += fabsf(model.idf[f] - (float)(log(4.0 / 3.0) + 1)) < 1e-6f;
        once += fabsf(model.idf[f] - (float)(log(4.0 / 2.0) + 1)) < 1e-6f;
        never += fabsf(model.idf[f] - (float)(log(4.0) + 1)) < 1e-6f;
    }
    CHECK(twice == 1 && once == 1 && never == model.buckets - 2);
    uform_sparse_t vectors;
    uform_text_t const probes[4] = {text_("aaa"), text_("aaaa"), text_("bbb"), text_("")};
    CHECK(uform_tfidf_vectors(&model, probes, 4, &vectors) == uform_ok_k);
    CHECK(vectors.rows == 4 && vectors.starts[1] - vectors.starts[0] == 1 && fabsf(vectors.weights[0] - 1) < 1e-6f);
    /* "aaaa" holds "aaa" twice: one feature, tf 2, still unit length. */
    CHECK(vectors.starts[2] - vectors.starts[1] == 1 && fabsf(vectors.weights[vectors.starts[1]] - 1) < 1e-6f);
    CHECK(fabsf(cosine_(&vectors, 0, 1) - 1) < 1e-6f && cosine_(&vectors, 0, 2) == 0);
    CHECK(vectors.starts[4] == vectors.starts[3]); /* an empty text has an empty row */
    uform_sparse_free(&vectors);
    uform_tfidf_free(&model);

    /* 3..5-grams: identical texts have cosine 1, texts sharing no byte 0, a short text is itself one feature. */
    uform_text_t const texts[4] = {text_("hello world"), text_("hello world"), text_("qqqq zzzz"), text_("ok")};
    CHECK(uform_tfidf_fit(texts, 4, 3, 5, 1u << 16, &model) == uform_ok_k);
    CHECK(uform_tfidf_vectors(&model, texts, 4, &vectors) == uform_ok_k);
    CHECK(vectors.starts[1] - vectors.starts[0] ==
          9 + 8 + 7); /* 11 bytes: 9 trigrams, 8 4-grams, 7 5-grams, all distinct */
    CHECK(fabsf(cosine_(&vectors, 0, 1) - 1) < 1e-6f && fabsf(cosine_(&vectors, 0, 2)) < 1e-6f);
    CHECK(vectors.starts[4] - vectors.starts[3] == 1 && fabsf(cosine_(&vectors, 3, 3) - 1) < 1e-6f);
    uform_sparse_free(&vectors);
    uform_tfidf_free(&model);
}

static void test_tfidf_retrieval(void) {
    /* Each query shares most of its words with exactly one document; the documents come shuffled. */
    char const *query_strings[5] = {"the quick brown fox jumps over the dog", "lorem ipsum dolor sit amet",
                                    "a byte level multimodal encoder", "matryoshka embeddings of many widths",
                                    "debian packages unpacked without installing"};
    char const *document_strings[5] = {"unpacking debian packages, installing nothing",
                                       "quick brown foxes jumped over dogs", "embeddings of many matryoshka widths",
                                       "dolor sit amet, lorem ipsum", "an encoder, multimodal and byte level"};
    size_t const gold_of[5] = {1, 3, 4, 2, 0};
    uform_text_t all[10], queries[5], documents[5];
    for (int i = 0; i < 5; ++i)
        queries[i] = all[i] = text_(query_strings[i]), documents[i] = all[5 + i] = text_(document_strings[i]);
    uform_tfidf_t model;
    uform_sparse_t query_vectors, document_vectors, index;
    CHECK(uform_tfidf_fit(all, 10, 3, 5, 1u << 20, &model) == uform_ok_k);
    CHECK(uform_tfidf_vectors(&model, queries, 5, &query_vectors) == uform_ok_k);
    CHECK(uform_tfidf_vectors(&model, documents, 5, &document_vectors) == uform_ok_k);
    CHECK(uform_sparse_transpose(&document_vectors, model.buckets, &index) == uform_ok_k);
    uform_metrics_t sums = {0};
    for (size_t i = 0; i < 5; ++i) {
        float scores[5];
        uform_tfidf_scores(&query_vectors, i, &index, scores, 5);
        for (size_t j = 0; j < 5; ++j) /* the inverted index sums the same products as the definition */
            CHECK(fabsf(scores[j] - cosine_between_(&query_vectors, i, &document_vectors, j)) < 1e-6f);
        uform_metrics_add(&sums, uform_placement(scores, 5, gold_of[i], NULL, NULL));
        CHECK(scores[gold_of[i]] > 0.2f && scores[gold_of[i]] <= 1.0f + 1e-6f);
    }
    uform_metrics_t mean = uform_metrics_mean(&sums);
    CHECK(metrics_are_(mean, 1, 1, 1, 1, 1));
    uform_sparse_free(&index);
    uform_sparse_free(&query_vectors), uform_sparse_free(&document_vectors);
    uform_tfidf_free(&model);
}

static void test_tfidf_bad_arguments(void) {
    uform_tfidf_t model;
    uform_text_t const one[1] = {text_("abc")};
    CHECK(uform_tfidf_fit(one, 1, 3, 5, 1000, &model) == uform_invalid_argument_k &&
          strstr(uform_last_error(), "power of two"));
    CHECK(uform_tfidf_fit(one, 1, 5, 3, 1024, &model) == uform_invalid_argument_k &&
          strstr(uform_last_error(), "5..3"));
    CHECK(uform_tfidf_fit(one, 1, 0, 3, 1024, &model) == uform_invalid_argument_k);
    CHECK(uform_tfidf_fit(NULL, 1, 3, 5, 1024, &model) == uform_invalid_argument_k);
    CHECK(uform_tfidf_fit(NULL, 0, 3, 5, 1024, &model) == uform_ok_k && model.documents == 0);
    uform_sparse_t vectors, index;
    CHECK(uform_tfidf_vectors(&model, one, 1, &vectors) == uform_ok_k && vectors.rows == 1);
    uform_sparse_free(&vectors);
    uform_tfidf_free(&model);
    size_t starts[2] = {0, 1};
    uint32_t features[1] = {7};
    float weights[1] = {1};
    uform_sparse_t outside = {1, starts, features, weights};
    CHECK(uform_sparse_transpose(&outside, 4, &index) == uform_invalid_argument_k &&
          strstr(uform_last_error(), "outside"));
    uform_tfidf_t unfitted = {0};
    CHECK(uform_tfidf_vectors(&unfitted, one, 1, &vectors) == uform_invalid_argument_k);
}

int main(void) {
    test_placements();
    test_ties();
    test_chance_among();
    test_duplicates_and_nan();
    test_matrix_means();
    test_harmonic();
    test_tfidf_weights();
    test_tfidf_retrieval();
    test_tfidf_bad_arguments();
    printf("%d passed, %d failed\n", passed_, failed_);
    return failed_ ? 1 : 0;
}
