/*  world.c: the loss and gradients of a world of N ranks, simulated one rank at a time in one
 *  process with the gathers and reductions of a data-parallel GPU run (docs/training.md, "World N
 *  on the CPU"): every rank's forward pass, the all-gather of its pooled embeddings or ColBERT
 *  vectors, each rank's band of the pair objective against every candidate of the world, the
 *  reduce-scatter of the gathered rows' gradient to their owners, the spectral terms over the
 *  world, then each rank's backward pass adding into the one set of parameter gradients (the
 *  all-reduce). uform_trainer_gradients is the world of one rank. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "train/trainer.h"

/* Bump allocation from one block; with `base` NULL it only measures. Nothing asked, NULL given. */
typedef struct uform_carve_t {
    char *base;
    size_t used;
} uform_carve_t;

static void *uform_carve_(uform_carve_t *carve, size_t count, size_t size) {
    void *pointer = carve->base && count ? carve->base + carve->used : NULL;
    carve->used += (count * size + 63) / 64 * 64;
    return pointer;
}

/* The four offset arrays come first, so that they survive the block growing once the counts are known. */
static void uform_world_offsets_(uform_world_t *world, uform_carve_t *carve) {
    world->segment_offsets = uform_carve_(carve, world->ranks + 1, sizeof(size_t));
    world->cell_offsets = uform_carve_(carve, world->ranks + 1, sizeof(size_t));
    world->anchor_offsets = uform_carve_(carve, world->ranks + 1, sizeof(size_t));
    world->candidate_offsets = uform_carve_(carve, world->ranks + 1, sizeof(size_t));
}

/* The rest of the world's buffers, for the counts the offsets hold. */
static void uform_world_buffers_(uform_trainer_t const *trainer, uform_world_t *world, uform_carve_t *carve) {
    uform_train_options_t const *options = &trainer->options;
    size_t ranks = world->ranks, segments = world->segment_offsets[ranks], cells = world->cell_offsets[ranks];
    size_t widest = trainer->pool_proj ? trainer->pool_proj->rows : 0, colbert = trainer->model->config.colbert_width;
    int contrastive = options->objective == uform_objective_contrastive_k, rerank = options->objective == uform_objective_rerank_k;
    int spectral = options->tcr_lambda > 0 || options->lipschitz_lambda > 0;
    size_t pooled = contrastive || spectral ? segments * widest : 0, vectors = rerank ? cells * colbert : 0;
    size_t band_rows = contrastive ? (world->most_anchors + world->candidates) * 2 * widest : 0;
    size_t spectral_rows = spectral ? world->most_segments * 2 * widest : 0;
    size_t norms = world->most_anchors + world->candidates;
    if (norms < world->most_segments) norms = world->most_segments;
    world->embeddings = uform_carve_(carve, pooled, sizeof(float));
    world->d_embeddings = uform_carve_(carve, pooled, sizeof(float));
    world->colbert = uform_carve_(carve, vectors, sizeof(float));
    world->d_colbert = uform_carve_(carve, vectors, sizeof(float));
    world->d_gathered = uform_carve_(carve, rerank ? vectors : contrastive ? pooled : 0, sizeof(float));
    world->spans = uform_carve_(carve, segments, sizeof(uform_span_t));
    world->candidates_list = uform_carve_(carve, world->candidates, sizeof(uint32_t));
    world->band_anchors = uform_carve_(carve, world->most_anchors, sizeof(uint32_t));
    world->band_labels = uform_carve_(carve, world->most_anchors * world->candidates, sizeof(uint8_t));
    world->scratch = uform_carve_(carve, band_rows > spectral_rows ? band_rows : spectral_rows, sizeof(float));
    world->norms = uform_carve_(carve, norms, sizeof(double));
    world->spectral = uform_carve_(carve, spectral ? 2 * widest * widest + (ranks + 1) * widest : 0, sizeof(double));
}

/* Grows the trainer's world block to `bytes`, keeping what it holds. */
static uform_status_t uform_world_reserve_(uform_trainer_t *trainer, size_t bytes, char const *verb) {
    if (bytes <= trainer->world_capacity) return uform_ok_k;
    void *grown = realloc(trainer->world_memory, bytes);
    if (!grown) return uform_fail(uform_out_of_memory_k, "%s: cannot allocate %zu bytes for the world's rows", verb, bytes);
    trainer->world_memory = grown, trainer->world_capacity = bytes;
    return uform_ok_k;
}

/* Makes rank r's batch the trainer's, with its forward pass run; `held` and `forwarded` say what the
 * trainer holds, so that a rank whose activations are still there is not run again. */
static uform_status_t uform_world_hold_(uform_trainer_t *trainer, uform_batch_t const *batches, size_t r, size_t *held,
                                        int *forwarded, char const *verb) {
    if (*held != r) {
        UFORM_TRY(uform_trainer_check_batch(trainer, &batches[r], verb));
        *held = r, *forwarded = 0;
    }
    if (!*forwarded) uform_train_forward(trainer);
    *forwarded = 1;
    return uform_ok_k;
}

/* The all-gather: rank r's pooled embeddings, ColBERT vectors, spans and candidates into the world. */
static void uform_world_gather_(uform_trainer_t const *trainer, uform_world_t *world, uform_batch_t const *batch, size_t r) {
    size_t first_segment = world->segment_offsets[r], first_cell = world->cell_offsets[r];
    size_t widest = trainer->pool_proj ? trainer->pool_proj->rows : 0, colbert = trainer->model->config.colbert_width;
    if (world->embeddings)
        memcpy(world->embeddings + first_segment * widest, trainer->embeddings, trainer->segments * widest * sizeof(float));
    if (world->colbert) memcpy(world->colbert + first_cell * colbert, trainer->colbert, trainer->active * colbert * sizeof(float));
    for (size_t s = 0; s < trainer->segments; ++s) {
        world->spans[first_segment + s] = trainer->spans[s];
        world->spans[first_segment + s].start += first_cell;
    }
    for (size_t c = 0; c < world->candidate_offsets[r + 1] - world->candidate_offsets[r]; ++c)
        world->candidates_list[world->candidate_offsets[r] + c] = (uint32_t)(first_segment + batch->candidates[c]);
}

/* Rank r's band: its anchors (as world segments) against every candidate of the world; its labels
 * are the batch's in its own candidates' columns, and a negative everywhere else. */
static double uform_world_band_(uform_trainer_t *trainer, uform_world_t *world, uform_batch_t const *batch, size_t r) {
    size_t anchors = batch->anchors_count, candidates = world->candidates, first = world->candidate_offsets[r];
    for (size_t a = 0; a < anchors; ++a) world->band_anchors[a] = (uint32_t)(world->segment_offsets[r] + batch->anchors[a]);
    memset(world->band_labels, 0, anchors * candidates);
    for (size_t a = 0; a < anchors; ++a)
        for (size_t c = 0; c < batch->candidates_count; ++c)
            world->band_labels[a * candidates + first + c] = batch->labels[a * batch->candidates_count + c] != 0;
    double normalizer = (double)world->anchors;
#if defined(UFORM_PLANT_WORLD_LOCAL_ANCHORS)
    normalizer = (double)anchors; /* planted: the loss a mean over the rank's own anchors */
#endif
    int rerank = trainer->options.objective == uform_objective_rerank_k;
    uform_band_t const band = {
        .rows = rerank ? world->colbert : world->embeddings, .spans = world->spans,
        .anchors = world->band_anchors, .anchors_count = anchors,
        .candidates = world->candidates_list, .candidates_count = candidates,
        .labels = world->band_labels, .weights = batch->anchor_weights, .normalizer = normalizer,
        .d_anchors = rerank ? world->d_colbert : world->d_embeddings, .d_candidates = world->d_gathered};
    return rerank ? uform_objective_rerank(trainer, &band) : uform_objective_siglip(trainer, &band, world->scratch, world->norms);
}

/* The reduce-scatter's scatter: each owner adds the gathered gradient of its own rows (the reduce, the
 * sum over the ranks' bands, is already in d_gathered). */
static void uform_world_scatter_(uform_trainer_t const *trainer, uform_world_t *world) {
    int rerank = trainer->options.objective == uform_objective_rerank_k;
    size_t const *offsets = rerank ? world->cell_offsets : world->segment_offsets;
    size_t width = rerank ? trainer->model->config.colbert_width : trainer->pool_proj->rows;
    float *owned = rerank ? world->d_colbert : world->d_embeddings;
    for (size_t owner = 0; owner < world->ranks; ++owner) {
        size_t source = owner, rows = offsets[owner + 1] - offsets[owner];
#if defined(UFORM_PLANT_WORLD_ROTATED)
        source = (owner + 1) % world->ranks; /* planted: each owner takes the next rank's rows */
        if (offsets[source + 1] - offsets[source] < rows) rows = offsets[source + 1] - offsets[source];
#endif
        float *target = owned + offsets[owner] * width;
        float const *gathered = world->d_gathered + offsets[source] * width;
        for (size_t i = 0; i < rows * width; ++i) target[i] += gathered[i];
    }
}

uform_status_t uform_train_world(uform_trainer_t *trainer, uform_batch_t const *batches, size_t ranks,
                                 uform_losses_t *losses, char const *verb) {
    uform_train_options_t const *options = &trainer->options;
    int pairs = options->objective != uform_objective_mlm_k;
    int spectral = options->tcr_lambda > 0 || options->lipschitz_lambda > 0;
    uform_world_t *world = &trainer->world;
    char rank_verb[160];
    /* Every rank's batch is checked before any pass, counting the world's rows. */
    memset(world, 0, sizeof(*world));
    world->ranks = ranks;
    uform_carve_t carve = {NULL, 0};
    uform_world_offsets_(world, &carve);
    UFORM_TRY(uform_world_reserve_(trainer, carve.used, verb));
    carve = (uform_carve_t){trainer->world_memory, 0};
    uform_world_offsets_(world, &carve);
    world->segment_offsets[0] = world->cell_offsets[0] = world->anchor_offsets[0] = world->candidate_offsets[0] = 0;
    for (size_t r = 0; r < ranks; ++r) {
        if (ranks > 1) snprintf(rank_verb, sizeof(rank_verb), "%s: rank %zu of %zu", verb, r, ranks);
        UFORM_TRY(uform_trainer_check_batch(trainer, &batches[r], ranks > 1 ? rank_verb : verb));
        size_t anchors = pairs ? batches[r].anchors_count : 0, candidates = pairs ? batches[r].candidates_count : 0;
        world->segment_offsets[r + 1] = world->segment_offsets[r] + trainer->segments;
        world->cell_offsets[r + 1] = world->cell_offsets[r] + trainer->active;
        world->anchor_offsets[r + 1] = world->anchor_offsets[r] + anchors;
        world->candidate_offsets[r + 1] = world->candidate_offsets[r] + candidates;
        if (anchors > world->most_anchors) world->most_anchors = anchors;
        if (trainer->segments > world->most_segments) world->most_segments = trainer->segments;
    }
    world->anchors = world->anchor_offsets[ranks], world->candidates = world->candidate_offsets[ranks];
    uform_world_buffers_(trainer, world, &carve);
    UFORM_TRY(uform_world_reserve_(trainer, carve.used, verb));
    carve = (uform_carve_t){trainer->world_memory, 0};
    uform_world_offsets_(world, &carve);
    uform_world_buffers_(trainer, world, &carve);

    for (size_t i = 0; i < trainer->tensors_count; ++i)
        memset(trainer->tensors[i].gradient, 0, trainer->tensors[i].rows * trainer->tensors[i].columns * sizeof(float));
    memset(losses, 0, sizeof(*losses));
    trainer->has_gradients = 0;
    trainer->ranks = ranks;
    size_t held = ranks - 1; /* the check left the last rank's batch in the trainer */
    int forwarded = 0;

    /* Every rank's forward pass, and the all-gather of what the objectives exchange. */
    if (pairs || spectral) {
        size_t widest = trainer->pool_proj ? trainer->pool_proj->rows : 0;
        if (world->d_embeddings) memset(world->d_embeddings, 0, world->segment_offsets[ranks] * widest * sizeof(float));
        if (world->d_colbert)
            memset(world->d_colbert, 0, world->cell_offsets[ranks] * trainer->model->config.colbert_width * sizeof(float));
        for (size_t r = 0; r < ranks; ++r) {
            UFORM_TRY(uform_world_hold_(trainer, batches, r, &held, &forwarded, verb));
            uform_world_gather_(trainer, world, &batches[r], r);
        }
    }
    /* The pair objective: each rank's band, the gathered candidates' gradient summed over the ranks,
     * then scattered to the ranks that own them. */
    if (pairs) {
        size_t width = options->objective == uform_objective_rerank_k ? trainer->model->config.colbert_width : trainer->pool_proj->rows;
        size_t rows = options->objective == uform_objective_rerank_k ? world->cell_offsets[ranks] : world->segment_offsets[ranks];
        memset(world->d_gathered, 0, rows * width * sizeof(float));
        double total = 0;
        for (size_t r = 0; r < ranks; ++r) total += uform_world_band_(trainer, world, &batches[r], r);
        if (options->objective == uform_objective_rerank_k) losses->rerank = total;
        else losses->siglip = total / (double)trainer->model->config.embedding_widths_count;
        losses->scored = world->anchors;
        uform_world_scatter_(trainer, world);
    }
    if (spectral) UFORM_TRY(uform_objective_spectral(trainer, world, losses));

    /* Each rank's backward pass, the last first since its forward pass is still held; every rank adds
     * into the same parameter gradients, which makes their sum over the ranks (the all-reduce). */
    double mlm = 0, reconstruction = 0;
    size_t scored = 0, reconstructed = 0;
    for (size_t r = ranks; r-- > 0;) {
        if (ranks > 1) snprintf(rank_verb, sizeof(rank_verb), "%s: rank %zu of %zu", verb, r, ranks);
        UFORM_TRY(uform_world_hold_(trainer, batches, r, &held, &forwarded, ranks > 1 ? rank_verb : verb));
        if (world->d_embeddings)
            memcpy(trainer->d_embeddings, world->d_embeddings + world->segment_offsets[r] * trainer->pool_proj->rows,
                   trainer->segments * trainer->pool_proj->rows * sizeof(float));
        if (world->d_colbert)
            memcpy(trainer->d_colbert, world->d_colbert + world->cell_offsets[r] * trainer->model->config.colbert_width,
                   trainer->active * trainer->model->config.colbert_width * sizeof(float));
        uform_losses_t own = {0};
        uform_train_backward(trainer, &own);
        forwarded = 0; /* the backward pass reuses the activations' scratch */
        mlm += own.mlm, reconstruction += own.reconstruction;
        scored += own.scored, reconstructed += own.reconstructed;
    }
    if (!pairs) { /* MLM: each rank's mean, averaged over the ranks */
        losses->mlm = mlm / (double)ranks, losses->reconstruction = reconstruction / (double)ranks;
        losses->scored = scored, losses->reconstructed = reconstructed;
    }
    losses->total = losses->mlm + losses->siglip + losses->rerank + losses->tcr + losses->lipschitz + losses->reconstruction;
    trainer->has_gradients = 1;
    return uform_ok_k;
}
