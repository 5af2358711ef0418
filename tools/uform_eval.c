/*  uform_eval.c: retrieval quality of a checkpoint on held-out pairs (JSONL records with a query
 *  and positives): each query against every pair's first positive and back, per Matryoshka width,
 *  as Recall@1/5/10, MRR and nDCG@10, beside chance. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/jsonl.h"
#include "uform/uform.h"

static char const *const uform_eval_usage_ =
    "usage: uform_eval CHECKPOINT --pairs FILE [--limit N] [--json FILE] [--threads N] [--quiet]\n"
    "\n"
    "Embeds each pair's query and first positive, ranks all positives for every query (and all\n"
    "queries for every positive) by cosine, and prints Recall@1/5/10, MRR and nDCG@10 for each\n"
    "Matryoshka width beside chance. A retrieved text equal to the gold one counts as a hit.\n"
    "  CHECKPOINT       a checkpoint folder, or a uform_base run folder (its latest checkpoint)\n"
    "  --pairs FILE     JSONL pair records {\"query\": ..., \"positives\": [...]}\n"
    "  --limit N        the first N pairs only (default: all)\n"
    "  --json FILE      also write the results as JSON\n"
    "  --threads N      worker threads (default: all cores)\n"
    "  --quiet          no progress on standard error\n";

typedef struct {
    double recall[3], reciprocal_rank, ndcg;
} uform_scores_t;

/* Scores one direction: `rows` embeddings against `columns`, gold of row i is column i; texts
 * equal to the gold text also count as hits (duplicates in the set). */
static void uform_rank_(float const *rows, float const *columns, size_t count, size_t width, size_t stride,
                        uform_text_t const *column_texts, uform_scores_t *scores) {
    memset(scores, 0, sizeof(*scores));
    for (size_t i = 0; i < count; ++i) {
        float const *query = rows + i * stride;
        double gold = 0;
        for (size_t k = 0; k < width; ++k) gold += (double)query[k] * columns[i * stride + k];
        size_t better = 0;
        for (size_t j = 0; j < count; ++j) {
            if (j == i) continue;
            int same = column_texts[j].length == column_texts[i].length &&
                       !memcmp(column_texts[j].data, column_texts[i].data, column_texts[i].length);
            if (same) continue;
            double similarity = 0;
            for (size_t k = 0; k < width; ++k) similarity += (double)query[k] * columns[j * stride + k];
            better += similarity > gold || (similarity == gold && j < i);
        }
        size_t rank = better + 1;
        scores->recall[0] += rank <= 1, scores->recall[1] += rank <= 5, scores->recall[2] += rank <= 10;
        scores->reciprocal_rank += 1.0 / (double)rank;
        scores->ndcg += rank <= 10 ? 1.0 / log2((double)rank + 1.0) : 0.0;
    }
    for (int k = 0; k < 3; ++k) scores->recall[k] /= (double)count;
    scores->reciprocal_rank /= (double)count;
    scores->ndcg /= (double)count;
}

/* Renormalizes the first `width` values of each row in place (a Matryoshka prefix). */
static void uform_prefix_(float const *full, size_t count, size_t stride, size_t width, float *target) {
    for (size_t i = 0; i < count; ++i) {
        double norm = 0;
        for (size_t k = 0; k < width; ++k) norm += (double)full[i * stride + k] * full[i * stride + k];
        float scale = norm > 0 ? (float)(1.0 / sqrt(norm)) : 0.0f;
        for (size_t k = 0; k < width; ++k) target[i * stride + k] = full[i * stride + k] * scale;
    }
}

static uform_status_t uform_embed_all_(uform_model_t *model, uform_text_t const *texts, size_t count, size_t width,
                                       float *embeddings, int quiet, char const *what) {
    enum { batch_k = 256 };
    for (size_t first = 0; first < count; first += batch_k) {
        size_t batch = count - first < batch_k ? count - first : batch_k;
        uform_status_t status = uform_encode(model, texts + first, batch, width, embeddings + first * width, NULL);
        if (status != uform_ok_k) return status;
        if (!quiet) fprintf(stderr, "\ruform_eval: %s %zu/%zu", what, first + batch, count);
    }
    if (!quiet) fputc('\n', stderr);
    return uform_ok_k;
}

int main(int argc, char **argv) {
    char const *checkpoint = NULL, *pairs = NULL, *json_path = NULL;
    size_t limit = 0, threads = 0;
    int quiet = 0;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(uform_eval_usage_, stdout);
            return 0;
        } else if (!strcmp(argv[i], "--quiet")) quiet = 1;
        else if (i + 1 < argc && !strcmp(argv[i], "--pairs")) pairs = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--json")) json_path = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--limit")) limit = (size_t)strtoull(argv[++i], NULL, 10);
        else if (i + 1 < argc && !strcmp(argv[i], "--threads")) threads = (size_t)strtoull(argv[++i], NULL, 10);
        else if (argv[i][0] != '-' && !checkpoint) checkpoint = argv[i];
        else {
            fprintf(stderr, "uform_eval: unexpected argument '%s' (see --help)\n", argv[i]);
            return 2;
        }
    }
    if (!checkpoint || !pairs) {
        fprintf(stderr, "uform_eval: a CHECKPOINT and --pairs FILE are required (see --help)\n");
        return 2;
    }
    char folder[4096];
    uform_model_t *model = NULL;
    uform_corpus_t corpus;
    uform_status_t status = uform_checkpoint_resolve(checkpoint, folder, sizeof(folder));
    if (status == uform_ok_k) status = uform_model_open(folder, &model);
    if (status == uform_ok_k && threads) status = uform_model_set_threads(model, threads);
    if (status == uform_ok_k) status = uform_jsonl_read(pairs, NULL, &corpus);
    if (status != uform_ok_k) {
        fprintf(stderr, "uform_eval: %s\n", uform_last_error());
        return 1;
    }
    size_t count = 0;
    uform_text_t *queries = calloc(corpus.records_count + 1, sizeof(uform_text_t));
    uform_text_t *documents = calloc(corpus.records_count + 1, sizeof(uform_text_t));
    for (size_t i = 0; i < corpus.records_count && (!limit || count < limit); ++i) {
        uform_record_t const *record = &corpus.records[i];
        if (record->kind != uform_record_pair_k || !record->text.length) continue;
        uform_slice_t positive = corpus.slices[record->first_candidate];
        if (!positive.length) continue;
        queries[count] = (uform_text_t){uform_corpus_data(&corpus, record->text), record->text.length};
        documents[count++] = (uform_text_t){uform_corpus_data(&corpus, positive), positive.length};
    }
    if (count < 2) {
        fprintf(stderr, "uform_eval: %s has %zu usable pairs; at least 2 are needed\n", pairs, count);
        return 1;
    }
    uform_config_t config;
    uform_model_config(model, &config);
    size_t widest = config.embedding_widths[config.embedding_widths_count - 1];
    float *query_embeddings = malloc(count * widest * sizeof(float)), *document_embeddings = malloc(count * widest * sizeof(float));
    float *query_prefix = malloc(count * widest * sizeof(float)), *document_prefix = malloc(count * widest * sizeof(float));
    status = uform_embed_all_(model, queries, count, widest, query_embeddings, quiet, "queries");
    if (status == uform_ok_k) status = uform_embed_all_(model, documents, count, widest, document_embeddings, quiet, "positives");
    if (status != uform_ok_k) {
        fprintf(stderr, "uform_eval: %s\n", uform_last_error());
        return 1;
    }
    double chance_mrr = 0, chance_ndcg = 0;
    for (size_t r = 1; r <= count; ++r) chance_mrr += 1.0 / (double)r / (double)count;
    for (size_t r = 1; r <= 10 && r <= count; ++r) chance_ndcg += 1.0 / log2((double)r + 1.0) / (double)count;
    printf("%s on %s: %zu pairs\n\n", folder, pairs, count);
    printf("| width | direction | R@1 | R@5 | R@10 | MRR | nDCG@10 |\n|---|---|---|---|---|---|---|\n");
    printf("| - | chance | %.4f | %.4f | %.4f | %.4f | %.4f |\n", 1.0 / (double)count, fmin(1.0, 5.0 / (double)count),
           fmin(1.0, 10.0 / (double)count), chance_mrr, chance_ndcg);
    FILE *json = json_path ? fopen(json_path, "w") : NULL;
    if (json_path && !json) {
        fprintf(stderr, "uform_eval: %s: cannot write\n", json_path);
        return 1;
    }
    if (json)
        fprintf(json, "{\"checkpoint\": \"%s\", \"pairs\": \"%s\", \"count\": %zu, \"chance\": {\"recall@1\": %.6f, \"mrr\": %.6f}, \"widths\": [",
                folder, pairs, count, 1.0 / (double)count, chance_mrr);
    for (size_t w = 0; w < config.embedding_widths_count; ++w) {
        size_t width = config.embedding_widths[w];
        uform_prefix_(query_embeddings, count, widest, width, query_prefix);
        uform_prefix_(document_embeddings, count, widest, width, document_prefix);
        uform_scores_t forward, backward;
        uform_rank_(query_prefix, document_prefix, count, width, widest, documents, &forward);
        uform_rank_(document_prefix, query_prefix, count, width, widest, queries, &backward);
        uform_scores_t const *both[2] = {&forward, &backward};
        for (int direction = 0; direction < 2; ++direction) {
            uform_scores_t const *s = both[direction];
            printf("| %zu | %s | %.4f | %.4f | %.4f | %.4f | %.4f |\n", width, direction ? "positive->query" : "query->positive",
                   s->recall[0], s->recall[1], s->recall[2], s->reciprocal_rank, s->ndcg);
            if (json)
                fprintf(json, "%s{\"width\": %zu, \"direction\": \"%s\", \"recall@1\": %.6f, \"recall@5\": %.6f, \"recall@10\": %.6f, \"mrr\": %.6f, \"ndcg@10\": %.6f}",
                        w || direction ? ", " : "", width, direction ? "positive->query" : "query->positive", s->recall[0],
                        s->recall[1], s->recall[2], s->reciprocal_rank, s->ndcg);
        }
    }
    if (json) {
        fprintf(json, "]}\n");
        fclose(json);
    }
    free(query_embeddings), free(document_embeddings), free(query_prefix), free(document_prefix);
    free(queries), free(documents);
    uform_corpus_close(&corpus);
    uform_model_close(model);
    return 0;
}
