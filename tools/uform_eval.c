/*  uform_eval.c: retrieval quality on held-out pairs (JSONL records with a query and positives):
 *  each query against every pair's first positive and back, as Recall@1/5/10, MRR and nDCG@10,
 *  for chance, a character n-gram TF-IDF baseline, the checkpoint at every Matryoshka width and,
 *  optionally, its top candidates reranked by MaxSim, and at each requested output precision
 *  (quantize.h); overall and per language ("lang" of each record). A table on the terminal, JSON on request. Metrics: src/eval/metrics.h.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/status.h"
#include "core/threads.h"
#include "data/corpus.h"
#include "data/jsonl.h"
#include "eval/metrics.h"
#include "eval/tfidf.h"
#include "uform/uform.h"

static char const *const uform_eval_usage_ =
    "usage: uform_eval [CHECKPOINT] --pairs FILE [--limit N] [--rerank K [--reranker DIR] [--fuse LIST]] [--no-tfidf]\n"
    "                  [--json FILE] [--threads N] [--device cpu|cuda] [--precision bf16|e4m3|int8|f32]\n"
    "                  [--output-precision LIST] [--fps N] [--placements]\n"
    "                  [--quiet]\n"
    "\n"
    "Ranks every pair's first positive for each query (query->positive) and every query for each\n"
    "positive (positive->query) among all pairs of the file, and prints Recall@1/5/10, MRR and\n"
    "nDCG@10 for chance, a TF-IDF baseline and the checkpoint at each Matryoshka width, then per\n"
    "language when the records carry \"lang\". A retrieved text equal to the gold one is a hit; tied\n"
    "scores count as the average over their orders. A side may be an image ({\"image\": PATH}, as\n"
    "uform_base reads): an image is the same gold item as its same path, records that share a\n"
    "caption or an image are one gold item (any caption of the image is a hit, and back), and with\n"
    "images there is no TF-IDF row (chance is the baseline) and no --rerank. Chance is a random order\n"
    "of the candidates, so a gold item of g candidates gives R@1 = g / pairs. Audio and video sides\n"
    "({\"audio\": PATH}, {\"video\": PATH}) are media sides as images are (the first 10.24 s of audio;\n"
    "CPU only).\n"
    "  CHECKPOINT       a checkpoint folder, or a uform_base run folder (its latest checkpoint);\n"
    "                   without it only the baselines run\n"
    "  --pairs FILE     pair records: JSONL {\"query\": ..., \"positives\": [...], \"lang\": ...}, or\n"
    "                   Parquet with columns query, positive and lang\n"
    "  --limit N        the first N pairs only (default: all)\n"
    "  --rerank K       also rescore each query's top K candidates (at every width) by MaxSim\n"
    "                   (uform_rerank's score, from each text's ColBERT vectors computed once; the\n"
    "                   checkpoint needs its rerank head) and report those ranks\n"
    "  --reranker DIR   with --rerank: MaxSim from this checkpoint's rerank head instead (the lineage's\n"
    "                   reranker reranking its embedder's candidates); rows model+maxsim@K as before\n"
    "  --fuse LIST      with --rerank: also rerank the top K by (1 - W) cosine + W symmetric MaxSim\n"
    "                   (the mean from the shorter text's bytes, uform_rerank_symmetric) for each\n"
    "                   weight W in (0, 1] of the comma-separated LIST (at most 4); rows model+fuseW@K.\n"
    "                   An entry W:L gates the fusion: a candidate shorter than L bytes, for a query\n"
    "                   shorter too, keeps its cosine (rows model+fuseWsL@K; uform rerank --fuse-gate)\n"
    "  --no-tfidf       skip the character 3-5-gram TF-IDF baseline\n"
    "  --json FILE      also write every row, per language too, as JSON\n"
    "  --placements     with --json: each row over all pairs also lists every query's placement, in\n"
    "                   pair order, as [better, tied] (candidates scored above the gold, and tied with\n"
    "                   it), so scripts/compare_evals.py can test two runs' difference query by query\n"
    "  --threads N      worker threads (default: all cores)\n"
    "  --device D       where the checkpoint embeds: cpu (default) or cuda (the GPU, BF16 activations,\n"
    "                   as uform encode --device cuda); scoring and reranking's MaxSim stay on the CPU\n"
    "  --precision P    the checkpoint's products (and the reranker's): bf16 (default), e4m3 (the\n"
    "                   blocks' products in E4M3), int8 (in int8, CPU only) or f32 (docs/precision.md)\n"
    "  --output-precision LIST  the model rows at these output precisions, comma-separated, or all:\n"
    "                   float32 (default; the rows \"model\"), int8, uint8, binary, ubinary (rows\n"
    "                   \"model-int8\", ...). Both sides are quantized at each width; int8/uint8 ranges\n"
    "                   are calibrated on the positives' embeddings at that width and score by the dot\n"
    "                   product of the centred buckets, binary/ubinary by minus the Hamming distance\n"
    "                   (docs/quantization.md). --rerank reranks the float32 rows only\n"
    "  --fps N          the rate video sides are sampled at, 0.1 to 1000 (default 25, as a mixture's\n"
    "                   video_fps)\n"
    "  --quiet          no progress on standard error\n";

enum { uform_ngram_shortest_k = 3, uform_ngram_longest_k = 5, uform_tfidf_buckets_k = 1 << 20 };
enum { uform_directions_k = 2, uform_fuse_max_k = 4 };
static char const *const uform_direction_names_[uform_directions_k] = {"query->positive", "positive->query"};

/* ---- progress ---------------------------------------------------------------------------------- */

static double uform_clock_(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

/* A line on standard error, redrawn in place on a terminal; in a log, one line every 10 s. */
typedef struct uform_progress_t {
    int quiet, interactive;
    char what[96];
    size_t total;
    double start, last;
} uform_progress_t;

static void uform_progress_begin_(uform_progress_t *progress, char const *what, size_t total) {
    snprintf(progress->what, sizeof(progress->what), "%s", what);
    progress->total = total, progress->start = progress->last = uform_clock_();
}

static void uform_progress_show_(uform_progress_t *progress, size_t done, int final) {
    if (progress->quiet) return;
    double now = uform_clock_(), elapsed = now - progress->start;
    if (!final && now - progress->last < (progress->interactive ? 0.25 : 10.0)) return;
    progress->last = now;
    double left = done ? elapsed * (double)(progress->total - done) / (double)done : 0;
    fprintf(stderr, "%suform_eval: %s %zu/%zu, %.1f s", progress->interactive ? "\r\033[K" : "", progress->what, done,
            progress->total, elapsed);
    if (!final && done) fprintf(stderr, ", about %.0f s left", left);
    if (final || !progress->interactive) fputc('\n', stderr);
}

/* ---- inputs ------------------------------------------------------------------------------------ */

static int uform_parse_count_(char const *flag, char const *text, size_t minimum, size_t *value) {
    char *end = NULL;
    errno = 0;
    unsigned long long parsed = strtoull(text, &end, 10);
    if (!*text || *end || errno || text[0] == '-' || text[0] == '+' || parsed < minimum) {
        fprintf(stderr, "uform_eval: %s wants a whole number >= %zu, got '%s'\n", flag, minimum, text);
        return 0;
    }
    *value = (size_t)parsed;
    return 1;
}

/* Text ids: equal texts share one id and are one item (uform_placement counts each once). */
static uform_text_t const *uform_sorting_texts_;

static int uform_compare_texts_(void const *left, void const *right) {
    uform_text_t const *first = &uform_sorting_texts_[*(uint32_t const *)left],
                       *second = &uform_sorting_texts_[*(uint32_t const *)right];
    if (first->length != second->length) return first->length < second->length ? -1 : 1;
    int order = memcmp(first->data, second->data, first->length);
    if (order) return order;
    return *(uint32_t const *)left < *(uint32_t const *)right ? -1 : 1;
}

static void uform_text_groups_(uform_text_t const *texts, size_t count, uint32_t *order, uint32_t *groups) {
    for (size_t i = 0; i < count; ++i) order[i] = (uint32_t)i;
    uform_sorting_texts_ = texts;
    qsort(order, count, sizeof(uint32_t), uform_compare_texts_);
    uint32_t group = 0;
    for (size_t i = 0; i < count; ++i) {
        uform_text_t const *now = &texts[order[i]], *before = i ? &texts[order[i - 1]] : NULL;
        if (before && (before->length != now->length || memcmp(before->data, now->data, now->length))) ++group;
        groups[order[i]] = group;
    }
}

/* With images, one gold item is every record joined to another by an equal query or an equal
 * positive (union-find over both sides' groups): any caption of the same image, and any image of
 * the same caption, is a hit in either direction. Both groups become the component's root. */
static uint32_t uform_root_(uint32_t *parent, uint32_t i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
}

static void uform_join_groups_(uint32_t *groups[2], size_t count) {
    uint32_t *parent = malloc(count * sizeof(uint32_t)), *first = malloc(count * sizeof(uint32_t));
    if (!parent || !first) { /* out of memory: the stricter text groups stay */
        free(parent), free(first);
        return;
    }
    for (size_t i = 0; i < count; ++i) parent[i] = (uint32_t)i;
    for (int side = 0; side < 2; ++side) {
        for (size_t g = 0; g < count; ++g) first[g] = UINT32_MAX;
        for (size_t i = 0; i < count; ++i) {
            uint32_t group = groups[side][i];
            if (first[group] == UINT32_MAX) first[group] = (uint32_t)i;
            else parent[uform_root_(parent, (uint32_t)i)] = uform_root_(parent, first[group]);
        }
    }
    for (size_t i = 0; i < count; ++i) groups[0][i] = groups[1][i] = uform_root_(parent, (uint32_t)i);
    free(parent), free(first);
}

/* ---- ranking ----------------------------------------------------------------------------------- */

/* One ranking pass: every row's gold placement among all columns, and optionally its top `top`
 * columns with their scores (for reranking). Scores come from dense prefixes or TF-IDF rows. */
typedef struct uform_ranking_job_t {
    size_t count;
    float const *rows, *columns; /* dense: `count` vectors of `width` floats, `stride` apart */
    size_t width, stride;
    uform_sparse_t const *sparse_rows, *sparse_index; /* TF-IDF instead, when set */
    uint8_t const *quantized_rows, *quantized_columns; /* quantized embeddings instead, when set: */
    uform_output_precision_t precision;                /* `count` rows of `row_bytes` at this precision */
    size_t row_bytes;
    uint32_t const *groups; /* column text ids */
    uform_placement_t *placements; /* [count] */
    size_t top;
    uint32_t *top_columns; /* [count * top] */
    float *top_scores; /* [count * top] */
    float *gold_scores; /* [count] the best score among the gold's equals */
    float *scratch; /* [threads * count] */
    double *best; /* [threads * count] uform_placement's item scores */
    atomic_size_t done;
    uform_progress_t *progress;
} uform_ranking_job_t;

static float uform_dot_(float const *left, float const *right, size_t width) {
    float sums[4] = {0, 0, 0, 0}; /* four partial sums, so the loop vectorizes without -ffast-math */
    size_t place = 0;
    for (; place + 4 <= width; place += 4)
        for (int lane = 0; lane < 4; ++lane) sums[lane] += left[place + lane] * right[place + lane];
    for (; place < width; ++place) sums[0] += left[place] * right[place];
    return (sums[0] + sums[1]) + (sums[2] + sums[3]);
}

static void uform_ranking_task_(void *context, size_t row, size_t thread) {
    uform_ranking_job_t *job = context;
    float *scores = job->scratch + thread * job->count;
    if (job->sparse_rows)
        uform_tfidf_scores(job->sparse_rows, row, job->sparse_index, scores, job->count);
    else if (job->quantized_rows) /* arguments checked by the caller's uform_quantize */
        uform_quantized_scores(job->precision, job->width, job->quantized_rows + row * job->row_bytes,
                               job->quantized_columns, job->count, scores);
    else
        for (size_t column = 0; column < job->count; ++column)
            scores[column] = uform_dot_(job->rows + row * job->stride, job->columns + column * job->stride, job->width);
    job->placements[row] = uform_placement(scores, job->count, row, job->groups, job->best + thread * job->count);
    if (job->top) {
        float gold = isnan(scores[row]) ? -INFINITY : scores[row];
        for (size_t column = 0; column < job->count; ++column)
            if (job->groups[column] == job->groups[row] && scores[column] > gold) gold = scores[column];
        job->gold_scores[row] = gold;
        /* The top `top` by score, ties to the lower index: insertion into a short sorted list. */
        uint32_t *columns = job->top_columns + row * job->top;
        float *best = job->top_scores + row * job->top;
        size_t kept = 0;
        for (size_t column = 0; column < job->count; ++column) {
            float score = isnan(scores[column]) ? -INFINITY : scores[column];
            if (kept == job->top && !(score > best[kept - 1])) continue;
            size_t at = kept < job->top ? kept++ : kept - 1;
            while (at > 0 && score > best[at - 1]) best[at] = best[at - 1], columns[at] = columns[at - 1], --at;
            best[at] = score, columns[at] = (uint32_t)column;
        }
    }
    size_t done = atomic_fetch_add_explicit(&job->done, 1, memory_order_relaxed) + 1;
    if (thread == 0) uform_progress_show_(job->progress, done, 0);
}

static void uform_rank_(uform_pool_t *pool, uform_ranking_job_t *job, char const *what) {
    atomic_store(&job->done, 0);
    uform_progress_begin_(job->progress, what, job->count);
    uform_pool_for(pool, job->count, uform_ranking_task_, job);
    uform_progress_show_(job->progress, job->count, 1);
}

/* Renormalizes the first `width` values of each row in place (a Matryoshka prefix). */
static void uform_prefix_(float const *full, size_t count, size_t stride, size_t width, float *target) {
    for (size_t i = 0; i < count; ++i) {
        double norm = 0;
        for (size_t place = 0; place < width; ++place)
            norm += (double)full[i * stride + place] * full[i * stride + place];
        float scale = norm > 0 ? (float)(1.0 / sqrt(norm)) : 0.0f;
        for (size_t place = 0; place < width; ++place) target[i * stride + place] = full[i * stride + place] * scale;
    }
}

/* One audio or video side (its path resolved against the corpus) through uform_encode_audio or
 * uform_encode_video: the first 10.24 s of audio, video sampled at `fps` frames a second. */
static uform_status_t uform_embed_clip_(uform_model_t *model, uform_corpus_t const *corpus, uform_slice_t slice, double fps,
                                        size_t width, float *embedding) {
    char path[4096];
    UFORM_TRY(uform_corpus_image_path(corpus, slice, path, sizeof(path)));
    uform_status_t status;
    if (slice.image == uform_slice_audio_path_k) {
        uform_audio_t audio;
        UFORM_TRY(uform_audio_read(path, (double)uform_audio_frames_k * uform_audio_frame_length_k / uform_audio_rate_k, &audio));
        uform_audio_clip_t clip = {.samples = audio.samples, .count = audio.count, .name = path};
        status = uform_encode_audio(model, &clip, 1, width, embedding);
        uform_audio_free(&audio);
        return status;
    }
    uform_video_clip_t clip = {.name = path};
    UFORM_TRY(uform_video_read(path, fps, uform_video_tubes_k * uform_tube_depth_k, &clip.video));
    status = uform_encode_video(model, &clip, 1, width, embedding);
    uform_video_free(&clip.video);
    return status;
}

/* Embeds one side: its texts in batches through uform_encode, its images (`images[i]` set: the
 * text is the image's path, resolved against the corpus) a few at a time through uform_encode_images. */
static uform_status_t uform_embed_all_(uform_model_t *model, uform_corpus_t const *corpus, uform_text_t const *texts,
                                       uform_slice_t const *slices, size_t count, double fps, size_t width, float *embeddings,
                                       size_t *truncated, uform_progress_t *progress, char const *what) {
    enum { batch_k = 256, images_k = 16 };
    uform_text_t batch_texts[batch_k];
    size_t batch_rows[batch_k], batch_count = 0, done = 0;
    uform_image_t images[images_k];
    uform_pixels_t pixels[images_k];
    size_t image_rows[images_k], images_count = 0;
    float *scratch = malloc(batch_k * width * sizeof(float));
    if (!scratch) return uform_fail(uform_out_of_memory_k, "uform_eval: out of memory");
    uform_status_t status = uform_ok_k;
    uform_progress_begin_(progress, what, count);
    for (size_t i = 0; status == uform_ok_k && i <= count; ++i) {
        int last = i == count, image = !last && slices[i].image;
        if (image && uform_slice_kind(slices[i]) != uform_cell_image_k) { /* a clip: one at a time */
            status = uform_embed_clip_(model, corpus, slices[i], fps, width, embeddings + i * width);
            done++;
            continue;
        }
        if (!last && !image) batch_rows[batch_count] = i, batch_texts[batch_count++] = texts[i];
        if (image) {
            status = uform_corpus_image_read(corpus, slices[i], &pixels[images_count]);
            if (status != uform_ok_k) break;
            images[images_count] = (uform_image_t){.pixels = pixels[images_count], .name = NULL};
            image_rows[images_count++] = i;
        }
        if (batch_count == batch_k || (last && batch_count)) {
            size_t cut = 0;
            status = uform_encode(model, batch_texts, batch_count, width, scratch, &cut);
            for (size_t b = 0; status == uform_ok_k && b < batch_count; ++b)
                memcpy(embeddings + batch_rows[b] * width, scratch + b * width, width * sizeof(float));
            *truncated += cut, done += batch_count, batch_count = 0;
        }
        if (images_count == images_k || (last && images_count)) {
            if (status == uform_ok_k) status = uform_encode_images(model, images, images_count, width, scratch);
            for (size_t b = 0; b < images_count; ++b) {
                if (status == uform_ok_k) memcpy(embeddings + image_rows[b] * width, scratch + b * width, width * sizeof(float));
                uform_pixels_free(&pixels[b]);
            }
            done += images_count, images_count = 0;
        }
        uform_progress_show_(progress, done, 0);
    }
    for (size_t b = 0; b < images_count; ++b) uform_pixels_free(&pixels[b]);
    free(scratch);
    if (status == uform_ok_k) uform_progress_show_(progress, count, 1);
    return status;
}

/* ---- output precisions ------------------------------------------------------------------------- */

enum { uform_output_precisions_k = 5 };

/* "all", or names of quantize.h's precisions, comma-separated, each once. */
static int uform_parse_precisions_(char const *list, uform_output_precision_t *precisions, size_t *count) {
    if (!strcmp(list, "all")) list = "float32,int8,uint8,binary,ubinary";
    *count = 0;
    for (char const *name = list; *name; name += strcspn(name, ","), name += *name == ',') {
        char word[32];
        snprintf(word, sizeof(word), "%.*s", (int)strcspn(name, ","), name);
        uform_output_precision_t precision;
        int seen = 0;
        if (uform_output_precision_parse(word, &precision) != uform_ok_k) {
            fprintf(stderr, "uform_eval: --output-precision: %s, or all\n", uform_last_error());
            return 0;
        }
        for (size_t i = 0; i < *count; ++i) seen |= precisions[i] == precision;
        if (seen || *count == uform_output_precisions_k) {
            fprintf(stderr, "uform_eval: --output-precision names %s twice\n", word);
            return 0;
        }
        precisions[(*count)++] = precision;
    }
    if (!*count) fprintf(stderr, "uform_eval: --output-precision needs at least one precision\n");
    return *count > 0;
}

/* Both directions at one width and output precision: each side's prefixes packed, quantized with
 * ranges calibrated on the positives (side 1), and ranked by uform_quantized_scores. */
static uform_status_t uform_quantized_rows_(uform_pool_t *pool, float *const prefixes[uform_directions_k], size_t count,
                                            size_t stride, size_t width, uform_output_precision_t precision,
                                            uint32_t *const groups[uform_directions_k], float *scratch, double *best,
                                            uform_progress_t *progress, uform_placement_t *placements[uform_directions_k]) {
    size_t row_bytes = 0;
    UFORM_TRY(uform_output_bytes(precision, width, &row_bytes));
    float *packed = malloc(count * width * sizeof(float)), *minimums = malloc(width * sizeof(float)),
          *maximums = malloc(width * sizeof(float));
    uint8_t *quantized[uform_directions_k] = {malloc(count * row_bytes), malloc(count * row_bytes)};
    uform_status_t status = packed && minimums && maximums && quantized[0] && quantized[1]
                                ? uform_ok_k
                                : uform_fail(uform_out_of_memory_k, "uform_eval: out of memory quantizing");
    uform_ranges_t ranges = {minimums, maximums, width};
    for (int side = uform_directions_k - 1; status == uform_ok_k && side >= 0; --side) { /* positives first: they calibrate */
        for (size_t i = 0; i < count; ++i) memcpy(packed + i * width, prefixes[side] + i * stride, width * sizeof(float));
        if (side == 1) status = uform_calibrate(packed, count, width, &ranges);
        if (status == uform_ok_k) status = uform_quantize(packed, count, width, precision, &ranges, quantized[side]);
    }
    for (int direction = 0; status == uform_ok_k && direction < uform_directions_k; ++direction) {
        placements[direction] = malloc(count * sizeof(uform_placement_t));
        if (!placements[direction]) {
            status = uform_fail(uform_out_of_memory_k, "uform_eval: out of memory ranking");
            break;
        }
        uform_ranking_job_t job = {.count = count,
                                   .width = width,
                                   .quantized_rows = quantized[direction],
                                   .quantized_columns = quantized[1 - direction],
                                   .precision = precision,
                                   .row_bytes = row_bytes,
                                   .groups = groups[direction],
                                   .placements = placements[direction],
                                   .scratch = scratch,
                                   .best = best,
                                   .progress = progress};
        char what[64];
        snprintf(what, sizeof(what), "width %zu %s %s", width, uform_output_precision_name(precision),
                 uform_direction_names_[direction]);
        uform_rank_(pool, &job, what);
    }
    free(packed), free(minimums), free(maximums), free(quantized[0]), free(quantized[1]);
    return status;
}

/* ---- reranking --------------------------------------------------------------------------------- */

/* The reranked placement of one row at one width: the top columns reordered by MaxSim go first,
 * every other column keeps its place after them. `maxsim` holds the score of each top column. Copies
 * of one item in the top are one rival (at the best of their MaxSims), as uform_placement counts
 * items; the top is in falling order of `scores`, so an item's first copy has its best score. */
static uform_placement_t uform_reranked_(uform_placement_t first_stage, size_t top, uint32_t const *columns,
                                         float const *scores, float gold_score, float const *maxsim,
                                         uint32_t const *groups, uint32_t gold_group, float *rivals,
                                         uint32_t *rival_groups) {
    int gold_inside = 0;
    float gold_maxsim = -INFINITY;
    size_t rivals_count = 0, above = 0, level = 0;
    for (size_t place = 0; place < top; ++place) {
        uint32_t group = groups[columns[place]];
        float value = isnan(maxsim[place]) ? -INFINITY : maxsim[place];
        if (group == gold_group) {
            if (!gold_inside || value > gold_maxsim) gold_maxsim = value;
            gold_inside = 1;
            continue;
        }
        size_t seen = 0;
        while (seen < rivals_count && rival_groups[seen] != group) ++seen;
        if (seen < rivals_count) {
            if (value > rivals[seen]) rivals[seen] = value;
            continue;
        }
        rival_groups[rivals_count] = group, rivals[rivals_count++] = value;
        above += scores[place] > gold_score, level += scores[place] == gold_score;
    }
    if (gold_inside) return uform_placement_among(rivals, rivals_count, gold_maxsim);
    return (uform_placement_t){rivals_count + first_stage.better - above, first_stage.tied - level};
}

/* Every text's ColBERT vectors from `model`, one after another (uform_colbert_many, a chunk of texts a
 * call for the progress line): text i's `offsets[i + 1] - offsets[i]` cells (at most a row) from
 * `(*vectors)[offsets[i] * width]`. */
static uform_status_t uform_colbert_all_(uform_model_t *model, uform_text_t const *texts, size_t count, size_t columns,
                                         size_t width, float **vectors, size_t **offsets, uform_progress_t *progress,
                                         char const *what) {
    enum { chunk_k = 256 };
    *offsets = malloc((count + 1) * sizeof(size_t));
    size_t *chunk_offsets = malloc((chunk_k + 1) * sizeof(size_t));
    if (!*offsets || !chunk_offsets) {
        free(chunk_offsets);
        return uform_fail(uform_out_of_memory_k, "uform_eval: out of memory for %zu texts' MaxSim vectors", count);
    }
    (*offsets)[0] = 0;
    for (size_t i = 0; i < count; ++i) (*offsets)[i + 1] = (*offsets)[i] + (texts[i].length < columns ? texts[i].length : columns);
    *vectors = malloc((*offsets)[count] * width * sizeof(float));
    uform_status_t status = *vectors ? uform_ok_k
                                     : uform_fail(uform_out_of_memory_k, "uform_eval: out of memory for %zu cells of MaxSim vectors",
                                                  (*offsets)[count]);
    uform_progress_begin_(progress, what, count);
    for (size_t first = 0; first < count && status == uform_ok_k; first += chunk_k) {
        size_t chunk = count - first < chunk_k ? count - first : chunk_k;
        status = uform_colbert_many(model, texts + first, chunk, *vectors + (*offsets)[first] * width,
                                    (*offsets)[first + chunk] - (*offsets)[first], chunk_offsets);
        uform_progress_show_(progress, first + chunk, 0);
    }
    if (status == uform_ok_k) uform_progress_show_(progress, count, 1);
    free(chunk_offsets);
    return status;
}

/* Reranking one direction's rows: each row's top candidates at every width, rescored by MaxSim of
 * the stored vectors (side 0 the queries', side 1 the positives'). */
typedef struct uform_rerank_job_t {
    size_t count, top, widths, fuses_count, colbert_width;
    double const *fuses;
    size_t const *gates; /* fusion f keeps the cosine of a query and candidate both shorter than gates[f] bytes */
    int direction;
    uint32_t const *groups;
    uform_text_t const *row_texts, *column_texts;
    float *vectors[uform_directions_k];
    size_t *offsets[uform_directions_k];
    uform_placement_t const *model_placements[uform_max_embedding_widths_k];
    uint32_t const *top_columns[uform_max_embedding_widths_k];
    float const *top_scores[uform_max_embedding_widths_k], *gold_scores[uform_max_embedding_widths_k];
    uform_placement_t *rerank_placements[uform_max_embedding_widths_k];
    uform_placement_t *fused_placements[uform_max_embedding_widths_k][uform_fuse_max_k];
    float *floats; /* [threads * scratch_floats] */
    uint32_t *words; /* [threads * scratch_words] */
    size_t scratch_floats, scratch_words;
    atomic_size_t done, truncated;
    uform_progress_t *progress;
} uform_rerank_job_t;

static void uform_rerank_task_(void *context, size_t row, size_t thread) {
    uform_rerank_job_t *job = context;
    size_t top = job->top, most = top * job->widths, width = job->colbert_width;
    float *union_maxsim = job->floats + thread * job->scratch_floats, *union_symmetric = union_maxsim + most,
          *maxsim = union_symmetric + most, *symmetric = maxsim + top, *rivals = symmetric + top, *fused = rivals + top;
    uint32_t *union_columns = job->words + thread * job->scratch_words, *rival_groups = union_columns + most;
    int rows_side = job->direction, columns_side = 1 - job->direction;
    size_t const *row_offsets = job->offsets[rows_side], *column_offsets = job->offsets[columns_side];
    float const *query = job->vectors[rows_side] + row_offsets[row] * width;
    size_t query_cells = row_offsets[row + 1] - row_offsets[row], union_count = 0;
    size_t cut = job->row_texts[row].length > query_cells;
    for (size_t slot = 0; slot < job->widths; ++slot)
        for (size_t place = 0; place < top; ++place) {
            uint32_t column = job->top_columns[slot][row * top + place];
            size_t seen = 0;
            while (seen < union_count && union_columns[seen] != column) ++seen;
            if (seen < union_count) continue;
            float const *document = job->vectors[columns_side] + column_offsets[column] * width;
            size_t document_cells = column_offsets[column + 1] - column_offsets[column];
            cut += job->column_texts[column].length > document_cells;
            /* arguments are never NULL or empty here (texts are checked non-empty when read) */
            uform_maxsim(query, query_cells, document, document_cells, width, 0, &union_maxsim[union_count]);
            if (job->fuses_count)
                uform_maxsim(query, query_cells, document, document_cells, width, 1, &union_symmetric[union_count]);
            union_columns[union_count++] = column;
        }
    for (size_t slot = 0; slot < job->widths; ++slot) {
        uint32_t const *columns = job->top_columns[slot] + row * top;
        float const *scores = job->top_scores[slot] + row * top;
        for (size_t place = 0; place < top; ++place) {
            size_t at = 0;
            while (union_columns[at] != columns[place]) ++at;
            maxsim[place] = union_maxsim[at];
            if (job->fuses_count) symmetric[place] = union_symmetric[at];
        }
        job->rerank_placements[slot][row] = uform_reranked_(job->model_placements[slot][row], top, columns, scores,
                                                            job->gold_scores[slot][row], maxsim, job->groups, job->groups[row],
                                                            rivals, rival_groups);
        /* Symmetric MaxSim is a mean cosine, on the pooled cosine's scale. */
        for (size_t f = 0; f < job->fuses_count; ++f) {
            size_t gate = job->gates[f];
            for (size_t place = 0; place < top; ++place)
                fused[place] = job->row_texts[row].length < gate && job->column_texts[columns[place]].length < gate
                                   ? scores[place]
                                   : (float)((1 - job->fuses[f]) * scores[place] + job->fuses[f] * symmetric[place]);
            job->fused_placements[slot][f][row] = uform_reranked_(job->model_placements[slot][row], top, columns, scores,
                                                                  job->gold_scores[slot][row], fused, job->groups,
                                                                  job->groups[row], rivals, rival_groups);
        }
    }
    atomic_fetch_add_explicit(&job->truncated, cut, memory_order_relaxed);
    size_t done = atomic_fetch_add_explicit(&job->done, 1, memory_order_relaxed) + 1;
    if (thread == 0) uform_progress_show_(job->progress, done, 0);
}

/* ---- reporting --------------------------------------------------------------------------------- */

/* One row of the table: a method at a width in a direction, with one placement per pair. */
typedef struct uform_row_t {
    char method[64];
    char const *output_precision; /* the model rows' (quantize.h), NULL for the baselines */
    size_t width; /* 0: not a model width */
    int direction; /* -1: both (chance) */
    uform_placement_t const *placements;
} uform_row_t;

static void uform_metrics_json_(json_t *object, uform_metrics_t const *mean) {
    json_object_set_new(object, "recall@1", json_real(mean->recall_at_1));
    json_object_set_new(object, "recall@5", json_real(mean->recall_at_5));
    json_object_set_new(object, "recall@10", json_real(mean->recall_at_10));
    json_object_set_new(object, "mrr", json_real(mean->reciprocal_rank));
    json_object_set_new(object, "ndcg@10", json_real(mean->ndcg_at_10));
}

static json_t *uform_row_json_(uform_row_t const *row, char const *language, uform_metrics_t const *mean) {
    json_t *object = json_object();
    json_object_set_new(object, "method", json_string(row->method));
    json_object_set_new(object, "output_precision", row->output_precision ? json_string(row->output_precision) : json_null());
    json_object_set_new(object, "width", row->width ? json_integer((json_int_t)row->width) : json_null());
    json_object_set_new(object, "direction",
                        json_string(row->direction < 0 ? "both" : uform_direction_names_[row->direction]));
    json_object_set_new(object, "language", json_string(language));
    json_object_set_new(object, "queries", json_integer((json_int_t)mean->queries));
    uform_metrics_json_(object, mean);
    return object;
}

int main(int argc, char **argv) {
    char const *checkpoint = NULL, *reranker_checkpoint = NULL, *pairs = NULL, *json_path = NULL, *device = "cpu";
    uform_precision_t model_precision = uform_precision_bf16_k;
    double fps = uform_video_fps_k;
    uform_output_precision_t precisions[uform_output_precisions_k] = {uform_output_float32_k};
    size_t precisions_count = 1;
    size_t limit = 0, threads = 0, top = 0, fuses_count = 0;
    double fuses[uform_fuse_max_k];
    size_t gates[uform_fuse_max_k];
    int quiet = 0, use_tfidf = 1, with_placements = 0;
    for (int i = 1; i < argc; ++i) {
        char const *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(uform_eval_usage_, stdout);
            return 0;
        } else if (!strcmp(argv[i], "--quiet"))
            quiet = 1;
        else if (!strcmp(argv[i], "--placements"))
            with_placements = 1;
        else if (!strcmp(argv[i], "--no-tfidf"))
            use_tfidf = 0;
        else if (value && !strcmp(argv[i], "--pairs"))
            pairs = argv[++i];
        else if (value && !strcmp(argv[i], "--json"))
            json_path = argv[++i];
        else if (value && !strcmp(argv[i], "--fps")) {
            char *end = NULL;
            fps = strtod(argv[++i], &end);
            if (!end || *end || !(fps >= 0.1 && fps <= 1000)) {
                fprintf(stderr, "uform_eval: --fps needs a rate from 0.1 to 1000 frames a second, got '%s'\n", argv[i]);
                return 2;
            }
        }
        else if (value && !strcmp(argv[i], "--device")) {
            device = argv[++i];
            if (strcmp(device, "cpu") && strcmp(device, "cuda")) {
                fprintf(stderr, "uform_eval: --device is cpu or cuda, not '%s'\n", device);
                return 2;
            }
        }
        else if (value && !strcmp(argv[i], "--precision")) {
            if (uform_precision_parse(argv[++i], &model_precision) != uform_ok_k) {
                fprintf(stderr, "uform_eval: --precision: %s\n", uform_last_error());
                return 2;
            }
        }
        else if (value && !strcmp(argv[i], "--output-precision")) {
            if (!uform_parse_precisions_(argv[++i], precisions, &precisions_count)) return 2;
        } else if (value && !strcmp(argv[i], "--limit")) {
            if (!uform_parse_count_("--limit", argv[++i], 2, &limit)) return 2;
        } else if (value && !strcmp(argv[i], "--threads")) {
            if (!uform_parse_count_("--threads", argv[++i], 1, &threads)) return 2;
        } else if (value && !strcmp(argv[i], "--rerank")) {
            if (!uform_parse_count_("--rerank", argv[++i], 1, &top)) return 2;
        } else if (value && !strcmp(argv[i], "--fuse")) {
            char const *cursor = argv[++i];
            while (*cursor) {
                char *end = NULL;
                double weight = strtod(cursor, &end);
                unsigned long long gate = 0;
                int valid = end != cursor && weight > 0 && weight <= 1;
                if (valid && *end == ':') {
                    char const *at = end + 1;
                    gate = strtoull(at, &end, 10);
                    valid = end != at && *at != '-' && gate > 0 && gate <= 1u << 20;
                }
                if (!valid || (*end && *end != ',') || fuses_count == uform_fuse_max_k) {
                    fprintf(stderr, "uform_eval: --fuse takes at most %d comma-separated weights in (0, 1], each with an "
                            "optional :BYTES gate in [1, 1048576], not '%s'\n", uform_fuse_max_k, argv[i]);
                    return 2;
                }
                gates[fuses_count] = (size_t)gate, fuses[fuses_count++] = weight;
                cursor = *end ? end + 1 : end;
            }
        } else if (value && !strcmp(argv[i], "--reranker"))
            reranker_checkpoint = argv[++i]; else if (argv[i][0] != '-' && !checkpoint)
            checkpoint = argv[i];
        else {
            fprintf(stderr, "uform_eval: unexpected argument '%s'%s (see --help)\n", argv[i],
                    !value && argv[i][0] == '-' ? " or a missing value" : "");
            return 2;
        }
    }
    if (!pairs) {
        fprintf(stderr, "uform_eval: --pairs FILE is required (see --help)\n");
        return 2;
    }
    if (top && !checkpoint) {
        fprintf(stderr, "uform_eval: --rerank needs a CHECKPOINT\n");
        return 2;
    }
    if (fuses_count && !top) {
        fprintf(stderr, "uform_eval: --fuse needs --rerank K\n");
        return 2;
    }
    if (with_placements && !json_path) {
        fprintf(stderr, "uform_eval: --placements needs --json FILE\n");
        return 2;
    }
    if (reranker_checkpoint && !top) {
        fprintf(stderr, "uform_eval: --reranker needs --rerank K\n");
        return 2;
    }
    if (!checkpoint && (precisions_count > 1 || precisions[0] != uform_output_float32_k)) {
        fprintf(stderr, "uform_eval: --output-precision needs a CHECKPOINT\n");
        return 2;
    }
    if (!checkpoint && !use_tfidf) {
        fprintf(stderr, "uform_eval: nothing to evaluate: no CHECKPOINT and --no-tfidf\n");
        return 2;
    }
    uform_progress_t progress = {.quiet = quiet, .interactive = isatty(fileno(stderr))};

    char folder[4096] = "", reranker_folder[4096] = "";
    uform_model_t *model = NULL, *reranker = NULL;
    uform_corpus_t corpus;
    uform_status_t status = uform_ok_k;
    if (checkpoint) {
        status = uform_checkpoint_resolve(checkpoint, folder, sizeof(folder));
        if (status == uform_ok_k) status = uform_model_open(folder, &model);
        if (status == uform_ok_k && threads) status = uform_model_set_threads(model, threads);
        if (status == uform_ok_k) status = uform_model_set_precision(model, model_precision);
        if (status == uform_ok_k && !strcmp(device, "cuda")) status = uform_model_set_device(model, uform_device_cuda_k);
        reranker = model;
        if (status == uform_ok_k && reranker_checkpoint) { /* a second model scores MaxSim */
            status = uform_checkpoint_resolve(reranker_checkpoint, reranker_folder, sizeof(reranker_folder));
            if (status == uform_ok_k) status = uform_model_open(reranker_folder, &reranker);
            if (status == uform_ok_k && threads) status = uform_model_set_threads(reranker, threads);
            if (status == uform_ok_k) status = uform_model_set_precision(reranker, model_precision);
            if (status == uform_ok_k && !strcmp(device, "cuda")) status = uform_model_set_device(reranker, uform_device_cuda_k);
        }
        if (status == uform_ok_k && top && !uform_model_has_head(reranker, "rerank")) {
            fprintf(stderr,
                    "uform_eval: --rerank: %s has no rerank head (train or warm-start one with --objective rerank)\n",
                    reranker_checkpoint ? reranker_folder : folder);
            return 1;
        }
    }
    if (status == uform_ok_k) status = uform_corpus_read(pairs, NULL, &corpus);
    if (status != uform_ok_k) {
        fprintf(stderr, "uform_eval: %s\n", uform_last_error());
        return 1;
    }

    /* Pairs, their languages, and the text ids of both sides. */
    size_t count = 0, languages_count = 0;
    uform_text_t *queries = calloc(corpus.records_count + 1, sizeof(uform_text_t));
    uform_text_t *documents = calloc(corpus.records_count + 1, sizeof(uform_text_t));
    uint32_t *language_of = calloc(corpus.records_count + 1, sizeof(uint32_t));
    uform_slice_t *languages = calloc(corpus.records_count + 1, sizeof(uform_slice_t));
    uform_slice_t *query_slices = calloc(corpus.records_count + 1, sizeof(uform_slice_t));
    uform_slice_t *document_slices = calloc(corpus.records_count + 1, sizeof(uform_slice_t));
    size_t images_count = 0;
    for (size_t i = 0; i < corpus.records_count && (!limit || count < limit); ++i) {
        uform_record_t const *record = &corpus.records[i];
        if (record->kind != uform_record_pair_k) {
            fprintf(stderr,
                    "uform_eval: %s:%zu: a text record; --pairs needs pair records {\"query\": ..., \"positives\": "
                    "[...]}\n",
                    pairs, record->line);
            return 1;
        }
        uform_slice_t positive = corpus.slices[record->first_candidate], language = record->language;
        size_t found = 0;
        while (found < languages_count && (languages[found].length != language.length ||
                                           memcmp(uform_corpus_data(&corpus, languages[found]),
                                                  uform_corpus_data(&corpus, language), language.length)))
            ++found;
        if (found == languages_count) languages[languages_count++] = language;
        language_of[count] = (uint32_t)found;
        /* An image side's "text" is its path: identical paths are one gold item, as identical texts are. */
        query_slices[count] = record->text, document_slices[count] = positive;
        images_count += (record->text.image != 0) + (positive.image != 0);
        queries[count] = (uform_text_t){uform_corpus_data(&corpus, record->text), record->text.length};
        documents[count++] = (uform_text_t){uform_corpus_data(&corpus, positive), positive.length};
    }
    if (images_count && top) {
        fprintf(stderr, "uform_eval: --rerank scores texts by MaxSim; %s holds %zu images\n", pairs, images_count);
        return 2;
    }
    if (images_count && use_tfidf) { /* character n-grams of a path say nothing of an image */
        if (!quiet) fprintf(stderr, "uform_eval: %s holds %zu images: no TF-IDF row (chance is the baseline)\n", pairs, images_count);
        use_tfidf = 0;
    }
    if (images_count && !model) {
        fprintf(stderr, "uform_eval: %s holds images and no CHECKPOINT was given: nothing to evaluate\n", pairs);
        return 2;
    }
    if (count < 2) {
        fprintf(stderr, "uform_eval: %s has %zu pairs; at least 2 are needed to rank anything\n", pairs, count);
        return 1;
    }
    { /* Languages in byte order, so tables and JSON list them alike on every run. */
        uint32_t *rank = malloc((languages_count + 1) * sizeof(uint32_t));
        for (size_t language = 0; language < languages_count; ++language) {
            rank[language] = 0;
            for (size_t other = 0; other < languages_count; ++other) {
                size_t shorter = languages[language].length < languages[other].length ? languages[language].length
                                                                                      : languages[other].length;
                int order = memcmp(uform_corpus_data(&corpus, languages[other]),
                                   uform_corpus_data(&corpus, languages[language]), shorter);
                rank[language] += order < 0 || (order == 0 && languages[other].length < languages[language].length);
            }
        }
        uform_slice_t *sorted = calloc(languages_count + 1, sizeof(uform_slice_t));
        for (size_t language = 0; language < languages_count; ++language) sorted[rank[language]] = languages[language];
        for (size_t i = 0; i < count; ++i) language_of[i] = rank[language_of[i]];
        memcpy(languages, sorted, languages_count * sizeof(uform_slice_t));
        free(sorted), free(rank);
    }
    uint32_t *order = malloc(count * sizeof(uint32_t));
    uint32_t *groups[uform_directions_k] = {malloc(count * sizeof(uint32_t)), malloc(count * sizeof(uint32_t))};
    uform_text_groups_(documents, count, order, groups[0]); /* query->positive ranks positives */
    uform_text_groups_(queries, count, order, groups[1]);
    if (images_count) uform_join_groups_(groups, count);
    uform_text_t const *row_texts[uform_directions_k] = {queries, documents};
    uform_text_t const *column_texts[uform_directions_k] = {documents, queries};

    uform_pool_t *pool = NULL;
    if (uform_pool_create(threads, &pool) != uform_ok_k) {
        fprintf(stderr, "uform_eval: %s\n", uform_last_error());
        return 1;
    }
    size_t pool_threads = uform_pool_threads(pool);
    float *scratch = malloc(pool_threads * count * sizeof(float));
    double *best = malloc(pool_threads * count * sizeof(double));
    uform_row_t rows[3 + uform_directions_k * uform_max_embedding_widths_k * (uform_output_precisions_k + 1 + uform_fuse_max_k)];
    size_t rows_count = 0;
    /* Chance per pair, the mean of its two directions': the gold item in a uniformly random order of
     * the distinct items of that direction's candidates (equal texts; with images, a picture and its
     * captions, are one item, as uform_placement counts them). */
    uform_metrics_t *chance = calloc(count, sizeof(uform_metrics_t));
    uint8_t *counted = calloc(count, 1);
    if (!chance || !counted || !scratch || !best) {
        fprintf(stderr, "uform_eval: out of memory for %zu pairs\n", count);
        return 1;
    }
    for (int direction = 0; direction < uform_directions_k; ++direction) {
        size_t items = 0;
        memset(counted, 0, count);
        for (size_t i = 0; i < count; ++i) items += !counted[groups[direction][i]], counted[groups[direction][i]] = 1;
        uform_metrics_t among = uform_metrics_chance_among(items, 1);
        for (size_t i = 0; i < count; ++i) uform_metrics_merge(&chance[i], &among);
    }
    for (size_t i = 0; i < count; ++i) chance[i] = uform_metrics_mean(&chance[i]), chance[i].queries = 1;
    free(counted);
    rows[rows_count++] = (uform_row_t){"chance", NULL, 0, -1, NULL};

    /* The TF-IDF baseline, fitted on both sides of the evaluated pairs. */
    uform_placement_t *tfidf_placements[uform_directions_k] = {NULL, NULL};
    if (use_tfidf) {
        uform_text_t *both = malloc(2 * count * sizeof(uform_text_t));
        memcpy(both, queries, count * sizeof(uform_text_t));
        memcpy(both + count, documents, count * sizeof(uform_text_t));
        uform_tfidf_t tfidf;
        uform_sparse_t vectors[uform_directions_k], index[uform_directions_k];
        status = uform_tfidf_fit(both, 2 * count, uform_ngram_shortest_k, uform_ngram_longest_k, uform_tfidf_buckets_k,
                                 &tfidf);
        for (int direction = 0; direction < uform_directions_k && status == uform_ok_k; ++direction)
            status = uform_tfidf_vectors(&tfidf, row_texts[direction], count, &vectors[direction]);
        /* Each direction scores the other side: its index is the other side's vectors, transposed. */
        for (int direction = 0; direction < uform_directions_k && status == uform_ok_k; ++direction)
            status = uform_sparse_transpose(&vectors[1 - direction], tfidf.buckets, &index[direction]);
        if (status != uform_ok_k) {
            fprintf(stderr, "uform_eval: %s\n", uform_last_error());
            return 1;
        }
        for (int direction = 0; direction < uform_directions_k; ++direction) {
            tfidf_placements[direction] = malloc(count * sizeof(uform_placement_t));
            uform_ranking_job_t job = {.count = count,
                                       .sparse_rows = &vectors[direction],
                                       .sparse_index = &index[direction],
                                       .groups = groups[direction],
                                       .placements = tfidf_placements[direction],
                                       .scratch = scratch,
                                       .best = best,
                                       .progress = &progress};
            char what[64];
            snprintf(what, sizeof(what), "tf-idf %s", uform_direction_names_[direction]);
            uform_rank_(pool, &job, what);
            rows[rows_count++] = (uform_row_t){"tfidf", NULL, 0, direction, tfidf_placements[direction]};
        }
        for (int direction = 0; direction < uform_directions_k; ++direction)
            uform_sparse_free(&vectors[direction]), uform_sparse_free(&index[direction]);
        uform_tfidf_free(&tfidf);
        free(both);
    }

    /* The model at every width, keeping each row's top candidates when reranking. */
    uform_config_t config = {0};
    size_t widths_count = 0, truncated = 0, rerank_truncated = 0;
    uform_placement_t *model_placements[uform_max_embedding_widths_k][uform_directions_k] = {{NULL}};
    uform_placement_t *rerank_placements[uform_max_embedding_widths_k][uform_directions_k] = {{NULL}};
    uform_placement_t *fused_placements[uform_max_embedding_widths_k][uform_fuse_max_k][uform_directions_k] = {{{NULL}}};
    uform_placement_t *quantized_placements[uform_max_embedding_widths_k][uform_output_precisions_k][uform_directions_k] = {{{NULL}}};
    uint32_t *top_columns[uform_max_embedding_widths_k][uform_directions_k] = {{NULL}};
    float *top_scores[uform_max_embedding_widths_k][uform_directions_k] = {{NULL}};
    float *gold_scores[uform_max_embedding_widths_k][uform_directions_k] = {{NULL}};
    if (top > count) top = count;
    if (model) {
        uform_model_config(model, &config);
        widths_count = config.embedding_widths_count;
        int float_rows = 0;
        for (size_t index = 0; index < precisions_count; ++index) float_rows |= precisions[index] == uform_output_float32_k;
        size_t widest = config.embedding_widths[widths_count - 1];
        float *embeddings[uform_directions_k] = {malloc(count * widest * sizeof(float)),
                                                 malloc(count * widest * sizeof(float))};
        float *prefixes[uform_directions_k] = {malloc(count * widest * sizeof(float)),
                                               malloc(count * widest * sizeof(float))};
        status = uform_embed_all_(model, &corpus, queries, query_slices, count, fps, widest, embeddings[0], &truncated,
                                  &progress, "embedding queries");
        if (status == uform_ok_k)
            status = uform_embed_all_(model, &corpus, documents, document_slices, count, fps, widest, embeddings[1],
                                      &truncated, &progress, "embedding positives");
        if (status != uform_ok_k) {
            fprintf(stderr, "uform_eval: %s\n", uform_last_error());
            return 1;
        }
        for (size_t slot = 0; slot < widths_count; ++slot) {
            size_t width = config.embedding_widths[slot];
            for (int side = 0; side < uform_directions_k; ++side)
                uform_prefix_(embeddings[side], count, widest, width, prefixes[side]);
            for (int direction = 0; direction < uform_directions_k; ++direction) {
                model_placements[slot][direction] = malloc(count * sizeof(uform_placement_t));
                if (top) {
                    top_columns[slot][direction] = malloc(count * top * sizeof(uint32_t));
                    top_scores[slot][direction] = malloc(count * top * sizeof(float));
                    gold_scores[slot][direction] = malloc(count * sizeof(float));
                }
                uform_ranking_job_t job = {.count = count,
                                           .rows = prefixes[direction],
                                           .columns = prefixes[1 - direction],
                                           .width = width,
                                           .stride = widest,
                                           .groups = groups[direction],
                                           .placements = model_placements[slot][direction],
                                           .top = top,
                                           .top_columns = top_columns[slot][direction],
                                           .top_scores = top_scores[slot][direction],
                                           .gold_scores = gold_scores[slot][direction],
                                           .scratch = scratch,
                                           .best = best,
                                           .progress = &progress};
                char what[64];
                snprintf(what, sizeof(what), "width %zu %s", width, uform_direction_names_[direction]);
                uform_rank_(pool, &job, what);
                if (float_rows)
                    rows[rows_count++] = (uform_row_t){"model", "float32", width, direction, model_placements[slot][direction]};
            }
            for (size_t index = 0; index < precisions_count; ++index) {
                if (precisions[index] == uform_output_float32_k) continue;
                status = uform_quantized_rows_(pool, prefixes, count, widest, width, precisions[index], groups, scratch, best,
                                               &progress, quantized_placements[slot][index]);
                if (status != uform_ok_k) {
                    fprintf(stderr, "uform_eval: %s\n", uform_last_error());
                    return 1;
                }
                for (int direction = 0; direction < uform_directions_k; ++direction) {
                    uform_row_t row = {"", uform_output_precision_name(precisions[index]), width, direction,
                                       quantized_placements[slot][index][direction]};
                    snprintf(row.method, sizeof(row.method), "model-%s", row.output_precision);
                    rows[rows_count++] = row;
                }
            }
        }
        for (int side = 0; side < uform_directions_k; ++side) free(embeddings[side]), free(prefixes[side]);
    }

    /* MaxSim over the union of each row's top candidates across widths, from each text's ColBERT
     * vectors computed once (uform_maxsim), the rows on the pool's threads. */
    if (top) {
        uform_rerank_job_t job = {.count = count, .top = top, .widths = widths_count, .fuses = fuses, .gates = gates,
                                  .fuses_count = fuses_count,
                                  .progress = &progress};
        uform_config_t rerank_config = {0};
        uform_model_config(reranker, &rerank_config);
        job.colbert_width = rerank_config.colbert_width;
        for (int side = 0; side < uform_directions_k && status == uform_ok_k; ++side)
            status = uform_colbert_all_(reranker, row_texts[side], count, rerank_config.columns, job.colbert_width,
                                        &job.vectors[side], &job.offsets[side], &progress,
                                        side ? "MaxSim vectors of positives" : "MaxSim vectors of queries");
        size_t most = top * widths_count;
        job.scratch_floats = 2 * most + 4 * top, job.scratch_words = most + top;
        job.floats = malloc(pool_threads * job.scratch_floats * sizeof(float));
        job.words = malloc(pool_threads * job.scratch_words * sizeof(uint32_t));
        if (status == uform_ok_k && (!job.floats || !job.words))
            status = uform_fail(uform_out_of_memory_k, "uform_eval: out of memory for MaxSim's scratch");
        if (status != uform_ok_k) {
            fprintf(stderr, "uform_eval: %s\n", uform_last_error());
            return 1;
        }
        for (int direction = 0; direction < uform_directions_k; ++direction) {
            for (size_t slot = 0; slot < widths_count; ++slot) {
                rerank_placements[slot][direction] = malloc(count * sizeof(uform_placement_t));
                for (size_t f = 0; f < fuses_count; ++f) fused_placements[slot][f][direction] = malloc(count * sizeof(uform_placement_t));
                job.model_placements[slot] = model_placements[slot][direction];
                job.top_columns[slot] = top_columns[slot][direction], job.top_scores[slot] = top_scores[slot][direction];
                job.gold_scores[slot] = gold_scores[slot][direction];
                job.rerank_placements[slot] = rerank_placements[slot][direction];
                for (size_t f = 0; f < fuses_count; ++f) job.fused_placements[slot][f] = fused_placements[slot][f][direction];
            }
            job.direction = direction, job.groups = groups[direction];
            job.row_texts = row_texts[direction], job.column_texts = column_texts[direction];
            atomic_store(&job.done, 0);
            char what[64];
            snprintf(what, sizeof(what), "MaxSim top %zu %s", top, uform_direction_names_[direction]);
            uform_progress_begin_(&progress, what, count);
            uform_pool_for(pool, count, uform_rerank_task_, &job);
            uform_progress_show_(&progress, count, 1);
        }
        rerank_truncated = atomic_load(&job.truncated);
        for (int side = 0; side < uform_directions_k; ++side) free(job.vectors[side]), free(job.offsets[side]);
        free(job.floats), free(job.words);
        for (size_t slot = 0; slot < widths_count; ++slot)
            for (int direction = 0; direction < uform_directions_k; ++direction) {
                uform_row_t row = {"", "float32", config.embedding_widths[slot], direction, rerank_placements[slot][direction]};
                snprintf(row.method, sizeof(row.method), "model+maxsim@%zu", top);
                rows[rows_count++] = row;
                for (size_t f = 0; f < fuses_count; ++f) {
                    uform_row_t fused_row = {"", "float32", config.embedding_widths[slot], direction, fused_placements[slot][f][direction]};
                    if (gates[f])
                        snprintf(fused_row.method, sizeof(fused_row.method), "model+fuse%.3gs%zu@%zu", fuses[f], gates[f], top);
                    else
                        snprintf(fused_row.method, sizeof(fused_row.method), "model+fuse%.3g@%zu", fuses[f], top);
                    rows[rows_count++] = fused_row;
                }
            }
    }

    /* Means per row, overall (index 0) and per language (1 + language). */
    size_t groups_of_means = 1 + languages_count;
    uform_metrics_t *means = calloc(rows_count * groups_of_means, sizeof(uform_metrics_t));
    size_t *pairs_per_language = calloc(languages_count + 1, sizeof(size_t));
    for (size_t i = 0; i < count; ++i) pairs_per_language[language_of[i]]++;
    for (size_t entry = 0; entry < rows_count; ++entry) {
        uform_metrics_t *sums = means + entry * groups_of_means;
        for (size_t i = 0; i < count; ++i) {
            if (rows[entry].placements) {
                uform_metrics_add(&sums[0], rows[entry].placements[i]);
                uform_metrics_add(&sums[1 + language_of[i]], rows[entry].placements[i]);
            } else {
                uform_metrics_merge(&sums[0], &chance[i]), uform_metrics_merge(&sums[1 + language_of[i]], &chance[i]);
            }
        }
        for (size_t group = 0; group < groups_of_means; ++group) sums[group] = uform_metrics_mean(&sums[group]);
    }

    /* The table. */
    printf("%s on %s: %zu pairs", model ? folder : "baselines", pairs, count);
    if (languages_count > 1 || (languages_count == 1 && languages[0].length))
        printf(", %zu language%s", languages_count, languages_count > 1 ? "s" : "");
    if (truncated) printf(", %zu texts cut to a row of %zu", truncated, config.columns);
    printf(
        "\n\n| method | width | direction | R@1 | R@5 | R@10 | MRR | nDCG@10 |\n|---|---|---|---|---|---|---|---|\n");
    for (size_t entry = 0; entry < rows_count; ++entry) {
        uform_metrics_t const *mean = &means[entry * groups_of_means];
        char width[24] = "-";
        if (rows[entry].width) snprintf(width, sizeof(width), "%zu", rows[entry].width);
        printf("| %s | %s | %s | %.4f | %.4f | %.4f | %.4f | %.4f |\n", rows[entry].method, width,
               rows[entry].direction < 0 ? "both" : uform_direction_names_[rows[entry].direction], mean->recall_at_1,
               mean->recall_at_5, mean->recall_at_10, mean->reciprocal_rank, mean->ndcg_at_10);
    }
    /* Per language: R@1 of each method at the widest width, both directions, against all pairs. */
    int per_language = languages_count > 1;
    if (per_language) {
        printf("\nRecall@1 per language (query->positive / positive->query; all %zu pairs are candidates%s):\n\n| lang "
               "| pairs |",
               count, model ? ", model at its widest width" : "");
        size_t shown[sizeof(rows) / sizeof(rows[0])], backward[sizeof(rows) / sizeof(rows[0])], shown_count = 0;
        for (size_t entry = 1; entry < rows_count; ++entry) {
            if (rows[entry].direction != 0 || (rows[entry].width && rows[entry].width != config.embedding_widths[widths_count - 1]))
                continue;
            size_t partner = 0; /* the same method (its name carries the output precision) and width, positive->query */
            for (size_t other = 1; other < rows_count && !partner; ++other)
                if (rows[other].direction == 1 && rows[other].width == rows[entry].width && !strcmp(rows[other].method, rows[entry].method))
                    partner = other;
            if (partner) shown[shown_count] = entry, backward[shown_count++] = partner, printf(" %s |", rows[entry].method);
        }
        printf("\n|---|---|");
        for (size_t shown_index = 0; shown_index < shown_count; ++shown_index) printf("---|");
        printf("\n");
        for (size_t language = 0; language < languages_count; ++language) {
            printf("| %.*s | %zu |", languages[language].length ? (int)languages[language].length : 1,
                   languages[language].length ? (char const *)uform_corpus_data(&corpus, languages[language]) : "-",
                   pairs_per_language[language]);
            for (size_t shown_index = 0; shown_index < shown_count; ++shown_index)
                printf(" %.4f / %.4f |", means[shown[shown_index] * groups_of_means + 1 + language].recall_at_1,
                       means[backward[shown_index] * groups_of_means + 1 + language].recall_at_1);
            printf("\n");
        }
    }
    if (rerank_truncated) printf("\nMaxSim: %zu texts cut to a row\n", rerank_truncated);

    if (json_path) {
        json_t *root = json_object(), *rows_json = json_array(), *widths_json = json_array(),
               *languages_json = json_object();
        json_object_set_new(root, "checkpoint", model ? json_string(folder) : json_null());
        json_object_set_new(root, "precision", model ? json_string(uform_precision_name(model_precision)) : json_null());
        json_object_set_new(root, "pairs", json_string(pairs));
        json_object_set_new(root, "count", json_integer((json_int_t)count));
        json_object_set_new(root, "truncated", json_integer((json_int_t)truncated));
        json_object_set_new(root, "rerank_top", json_integer((json_int_t)top));
        json_object_set_new(root, "reranker", top ? json_string(reranker_checkpoint ? reranker_folder : folder) : json_null());
        json_object_set_new(root, "tfidf",
                            use_tfidf ? json_pack("{s:i, s:i, s:i}", "shortest", uform_ngram_shortest_k, "longest",
                                                  uform_ngram_longest_k, "buckets", uform_tfidf_buckets_k)
                                      : json_null());
        json_t *chance_json = json_object();
        uform_metrics_json_(chance_json, &means[0]);
        json_object_set_new(root, "chance", chance_json);
        for (size_t language = 0; language < languages_count; ++language) {
            char code[64];
            snprintf(code, sizeof(code), "%.*s", (int)languages[language].length,
                     (char const *)uform_corpus_data(&corpus, languages[language]));
            json_object_set_new(languages_json, languages[language].length ? code : "-",
                                json_integer((json_int_t)pairs_per_language[language]));
        }
        json_object_set_new(root, "languages", languages_json);
        for (size_t entry = 0; entry < rows_count; ++entry) {
            json_t *row_json = uform_row_json_(&rows[entry], "all", &means[entry * groups_of_means]);
            if (with_placements && rows[entry].placements) {
                json_t *placements_json = json_array();
                for (size_t pair = 0; pair < count; ++pair)
                    json_array_append_new(placements_json, json_pack("[I, I]", (json_int_t)rows[entry].placements[pair].better,
                                                                     (json_int_t)rows[entry].placements[pair].tied));
                json_object_set_new(row_json, "placements", placements_json);
            }
            json_array_append_new(rows_json, row_json);
            if (!strcmp(rows[entry].method, "model")) { /* the rows earlier versions wrote, for their readers */
                json_t *legacy = json_object();
                json_object_set_new(legacy, "width", json_integer((json_int_t)rows[entry].width));
                json_object_set_new(legacy, "direction", json_string(uform_direction_names_[rows[entry].direction]));
                uform_metrics_json_(legacy, &means[entry * groups_of_means]);
                json_array_append_new(widths_json, legacy);
            }
            for (size_t language = 0; per_language && language < languages_count; ++language) {
                char code[64];
                snprintf(code, sizeof(code), "%.*s", (int)languages[language].length,
                         (char const *)uform_corpus_data(&corpus, languages[language]));
                json_array_append_new(rows_json, uform_row_json_(&rows[entry], languages[language].length ? code : "-",
                                                                 &means[entry * groups_of_means + 1 + language]));
            }
        }
        json_object_set_new(root, "widths", widths_json);
        json_object_set_new(root, "rows", rows_json);
        if (json_dump_file(root, json_path, JSON_INDENT(1) | JSON_REAL_PRECISION(6)) != 0) {
            fprintf(stderr, "uform_eval: %s: cannot write\n", json_path);
            return 1;
        }
        json_decref(root);
    }

    for (size_t slot = 0; slot < uform_max_embedding_widths_k; ++slot)
        for (int direction = 0; direction < uform_directions_k; ++direction)
            for (size_t index = 0; index < uform_output_precisions_k; ++index) free(quantized_placements[slot][index][direction]);
    for (size_t slot = 0; slot < uform_max_embedding_widths_k; ++slot)
        for (int direction = 0; direction < uform_directions_k; ++direction)
            free(model_placements[slot][direction]), free(rerank_placements[slot][direction]),
                free(top_columns[slot][direction]), free(top_scores[slot][direction]),
                free(gold_scores[slot][direction]);
    for (size_t slot = 0; slot < uform_max_embedding_widths_k; ++slot)
        for (size_t f = 0; f < uform_fuse_max_k; ++f)
            for (int direction = 0; direction < uform_directions_k; ++direction) free(fused_placements[slot][f][direction]);
    for (int direction = 0; direction < uform_directions_k; ++direction)
        free(tfidf_placements[direction]), free(groups[direction]);
    free(means), free(pairs_per_language), free(scratch), free(best), free(order), free(chance);
    free(queries), free(documents), free(language_of), free(languages);
    uform_pool_destroy(pool);
    uform_corpus_close(&corpus);
    if (reranker && reranker != model) uform_model_close(reranker);
    if (model) uform_model_close(model);
    return 0;
}
