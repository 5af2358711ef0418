/*  trainer.c: the trainer's life cycle, batch checks, the gradient and step verbs (a world of one
 *  rank, or of several simulated by world.c), Adafactor with a first moment (SPEC.md section 5),
 *  the learning-rate schedule, and reading and saving the optimizer state. */
#include "train/trainer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/numeric.h"
#include "core/status.h"
#include "cpu/frontend.h"
#include "model/context.h"
#include "model/grid.h"
#if defined(UFORM_HAVE_CUDA)
#include "train/cuda.h"
#endif

void uform_train_options_default(uform_train_options_t *options) {
    memset(options, 0, sizeof(*options));
    options->objective = uform_objective_mlm_k;
    options->beta1 = 0.9;
    options->beta2 = 0.999;
    options->clip = 1.0;
    options->lipschitz_iterations = 8;
    options->device = uform_device_cpu_k;
    options->recompute = 1;
}

/* One trained tensor over the model's weight: a Float32 working copy, its gradient and moments. */
static uform_status_t uform_add_tensor_(uform_trainer_t *trainer, uform_tensor_info_t const *info, uform_weight_t *weight) {
    uform_tensor_t *tensor = &trainer->tensors[trainer->tensors_count++];
    snprintf(tensor->name, sizeof(tensor->name), "%s", info->name);
    tensor->rows = info->rows;
    tensor->columns = info->columns;
    tensor->factored = info->matrix;
    tensor->master_bf16 = info->matrix ? weight->bf16 : NULL;
    tensor->master_f32 = info->matrix ? NULL : weight->f32;
    size_t count = info->rows * info->columns, factored = (size_t)info->matrix;
    tensor->parameter = malloc(count * sizeof(float));
    tensor->gradient = calloc(count, sizeof(float));
    tensor->first = calloc(count, sizeof(float));
    tensor->row = calloc(factored ? info->rows : count, sizeof(float));
    tensor->column = factored ? calloc(info->columns, sizeof(float)) : NULL;
    if (!tensor->parameter || !tensor->gradient || !tensor->first || !tensor->row || (factored && !tensor->column))
        return uform_fail(uform_out_of_memory_k, "cannot allocate the training state of '%s'", info->name);
    if (tensor->master_bf16) uform_f32_from_bf16_array(tensor->master_bf16, tensor->parameter, count);
    else memcpy(tensor->parameter, tensor->master_f32, count * sizeof(float));
    return uform_ok_k;
}

/* The trained tensor of `kind` (of `block`), NULL when the model does not carry its part. */
static uform_tensor_t *uform_trained_(uform_trainer_t *trainer, uform_tensor_kind_t kind, size_t block) {
    return trainer->by_index[uform_tensor_index(&trainer->model->config, kind, block)];
}

void uform_trainer_close(uform_trainer_t *trainer) {
    if (!trainer) return;
#if defined(UFORM_HAVE_CUDA)
    uform_train_cuda_close(trainer->cuda);
#endif
    for (size_t i = 0; trainer->tensors && i < trainer->tensors_count; ++i) {
        uform_tensor_t *tensor = &trainer->tensors[i];
        free(tensor->parameter), free(tensor->gradient), free(tensor->first), free(tensor->row), free(tensor->column);
    }
    free(trainer->tensors);
    free(trainer->by_index);
    free(trainer->blocks);
    float *buffers[] = {trainer->inputs,   trainer->scales1,    trainer->scales2,      trainer->qkv,
                        trainer->attended, trainer->middle,     trainer->gate_up,      trainer->hidden,
                        trainer->final_scales, trainer->d_stream, trainer->d_normed,   trainer->d_qkv,
                        trainer->d_gate_up, trainer->d_hidden,  trainer->d_attended,   trainer->normed,
                        trainer->swiglu,   trainer->pooled,     trainer->pool_weights, trainer->embeddings,
                        trainer->d_embeddings, trainer->d_pooled, trainer->colbert_raw, trainer->colbert,
                        trainer->d_colbert, trainer->logits, trainer->update};
    for (size_t i = 0; i < sizeof(buffers) / sizeof(buffers[0]); ++i) free(buffers[i]);
    free(trainer->world_memory);
    for (size_t i = 0; i < uform_media_kinds_k; ++i)
        free(trainer->reconstructions[i].cells), free(trainer->reconstructions[i].targets), free(trainer->reconstructions[i].predictions);
    for (size_t i = 0; i < uform_media_kinds_k; ++i) free(trainer->media[i]);
    free(trainer->scored), free(trainer->kinds), free(trainer->values), free(trainer->positions), free(trainer->targets);
    free(trainer->destinations), free(trainer->spans);
    for (size_t i = 0; trainer->attention && i < trainer->attention_threads; ++i) {
        free(trainer->attention[i].probabilities);
        free(trainer->attention[i].gradient);
    }
    free(trainer->attention);
    free(trainer);
}

/* Freezes every tensor outside the comma-separated parts of `train_only` (NULL or "": none frozen). */
static uform_status_t uform_freeze_(uform_trainer_t *trainer, char const *train_only) {
    if (!train_only || !*train_only) return uform_ok_k;
    uform_model_t const *model = trainer->model;
    unsigned trained = 0;
    for (char const *name = train_only; *name;) {
        size_t length = strcspn(name, ",");
        char part_name[32] = "";
        if (length < sizeof(part_name)) memcpy(part_name, name, length);
        uform_part_t part = uform_part_from_name(part_name);
        if (part == uform_parts_k)
            return uform_fail(uform_invalid_argument_k, "train_only: unknown part '%.*s' (bytes, vision, video, audio, encoder, "
                                                        "pool, rerank, mlm, siglip, mae, mae_audio or mae_video)", (int)length, name);
        if (!uform_model_carries(model, part))
            return uform_fail(uform_missing_k, "train_only: the model carries no %s part", part_name);
        trained |= 1u << part;
        name += length + (name[length] == ',');
    }
    for (size_t i = 0; i < model->tensors_count; ++i)
        if (trainer->by_index[i]) trainer->by_index[i]->frozen = !(trained & (1u << model->tensors[i].part));
    return uform_ok_k;
}

uform_status_t uform_trainer_create(uform_model_t *model, uform_train_options_t const *options, size_t cells,
                                    uform_trainer_t **result) {
    if (!model || !options || !result) return uform_fail(uform_invalid_argument_k, "uform_trainer_create: NULL argument");
    if (!cells || cells > uform_max_cells_k)
        return uform_fail(uform_invalid_argument_k, "uform_trainer_create: %zu cells is outside 1..%d", cells, uform_max_cells_k);
    if (options->objective > uform_objective_rerank_k)
        return uform_fail(uform_invalid_argument_k, "uform_trainer_create: unknown objective %d", (int)options->objective);
    if (options->beta1 < 0 || options->beta1 >= 1 || options->beta2 <= 0 || options->beta2 >= 1 || options->clip <= 0 ||
        options->learning_rate < 0 || options->tcr_lambda < 0 || options->lipschitz_lambda < 0)
        return uform_fail(uform_invalid_argument_k,
                          "uform_trainer_create: need 0 <= beta1 < 1, 0 < beta2 < 1, clip > 0, learning rate and lambdas >= 0");
    if (options->device != uform_device_cpu_k && options->device != uform_device_cuda_k)
        return uform_fail(uform_invalid_argument_k, "uform_trainer_create: unknown device %d (cpu %d or cuda %d)",
                          (int)options->device, (int)uform_device_cpu_k, (int)uform_device_cuda_k);
#if !defined(UFORM_HAVE_CUDA)
    if (options->device == uform_device_cuda_k)
        return uform_fail(uform_unsupported_k, "uform_trainer_create: this build has no CUDA backend (it is built where "
                                               "CMake finds nvcc, with UFORM_CUDA=ON)");
#endif
    if (options->total_steps && options->total_steps <= options->warmup_steps)
        return uform_fail(uform_invalid_argument_k, "uform_trainer_create: total steps %zu must exceed warm-up %zu",
                          options->total_steps, options->warmup_steps);
    char const *needed = options->objective == uform_objective_mlm_k ? "mlm"
                         : options->objective == uform_objective_contrastive_k ? "pool" : "rerank";
    if (!uform_model_has_head(model, needed))
        return uform_fail(uform_missing_k, "uform_trainer_create: the objective needs the %s head, which the model lacks", needed);
    if ((options->tcr_lambda > 0 || options->lipschitz_lambda > 0) && !uform_model_has_head(model, "pool"))
        return uform_fail(uform_missing_k, "uform_trainer_create: TCR and Lipschitz need the pool head, which the model lacks");

    uform_trainer_t *trainer = calloc(1, sizeof(*trainer));
    if (!trainer) return uform_fail(uform_out_of_memory_k, "cannot allocate a trainer");
    trainer->model = model;
    trainer->ranks = 1;
    trainer->options = *options;
    if (!trainer->options.learning_rate) trainer->options.learning_rate = model->config.learning_rate;
    if (!trainer->options.lipschitz_iterations) trainer->options.lipschitz_iterations = 8;
    uform_config_t const *config = &model->config;
    size_t d = config->width, depth = config->depth, widest = config->embedding_widths[config->embedding_widths_count - 1];
    /* Every tensor the model carries is trained, in the table's order. */
    trainer->tensors = calloc(model->tensors_count, sizeof(uform_tensor_t));
    trainer->by_index = calloc(model->tensors_count, sizeof(uform_tensor_t *));
    trainer->blocks = calloc(depth, sizeof(uform_block_tensors_t));
    uform_status_t status = trainer->tensors && trainer->by_index && trainer->blocks ? uform_ok_k : uform_fail(uform_out_of_memory_k, "trainer");
    for (size_t i = 0; status == uform_ok_k && i < model->tensors_count; ++i) {
        if (!uform_model_carries(model, model->tensors[i].part)) continue;
        trainer->by_index[i] = &trainer->tensors[trainer->tensors_count];
        status = uform_add_tensor_(trainer, &model->tensors[i], &model->weights[i]);
    }
    if (status == uform_ok_k) status = uform_freeze_(trainer, options->train_only);
    trainer->options.train_only = NULL; /* the caller's string; the tensors' flags hold it now */
    if (status == uform_ok_k) {
#define UFORM_BIND_(field, kind) trainer->field = uform_trained_(trainer, kind, 0);
        UFORM_NAMED_TENSORS(UFORM_BIND_)
#undef UFORM_BIND_
        for (size_t i = 0; i < depth; ++i)
            for (size_t k = 0; k < uform_block_kinds_k; ++k)
                trainer->blocks[i].kinds[k] = uform_trained_(trainer, (uform_tensor_kind_t)(uform_tensor_attn_norm_k + k), i);
    }

    size_t largest = 0;
    for (size_t i = 0; i < trainer->tensors_count; ++i)
        if (trainer->tensors[i].rows * trainer->tensors[i].columns > largest) largest = trainer->tensors[i].rows * trainer->tensors[i].columns;
    /* On the GPU the host keeps the masters and moments only: activations for one cell. */
    int host = options->device == uform_device_cpu_k;
    size_t gpu_cells = cells;
    if (!host) cells = 1;
    trainer->cells = cells;
    size_t heads = config->heads, colbert = config->colbert_width;
#define UFORM_TAKE_(field, count)                                                                                   \
    if (status == uform_ok_k && !(trainer->field = malloc((count) * sizeof(*trainer->field))))                      \
        status = uform_fail(uform_out_of_memory_k, "cannot allocate training activations for %zu cells", cells);
    UFORM_TAKE_(update, largest)
    UFORM_TAKE_(inputs, (depth + 1) * cells * d)
    UFORM_TAKE_(scales1, depth * cells)
    UFORM_TAKE_(scales2, depth * cells)
    UFORM_TAKE_(qkv, depth * cells * 3 * d)
    UFORM_TAKE_(attended, depth * cells * d)
    UFORM_TAKE_(middle, depth * cells * d)
    UFORM_TAKE_(gate_up, depth * cells * 8 * d)
    UFORM_TAKE_(hidden, cells * d)
    UFORM_TAKE_(final_scales, cells)
    UFORM_TAKE_(d_stream, cells * d)
    UFORM_TAKE_(d_normed, cells * d)
    UFORM_TAKE_(d_qkv, cells * 3 * d)
    UFORM_TAKE_(d_gate_up, cells * 8 * d)
    UFORM_TAKE_(d_hidden, cells * 4 * d)
    UFORM_TAKE_(d_attended, cells * d)
    UFORM_TAKE_(normed, cells * d)
    UFORM_TAKE_(swiglu, cells * 4 * d)
    UFORM_TAKE_(pooled, cells * d)
    UFORM_TAKE_(pool_weights, cells * heads)
    UFORM_TAKE_(embeddings, cells * widest)
    UFORM_TAKE_(d_embeddings, cells * widest)
    UFORM_TAKE_(d_pooled, cells * d)
    UFORM_TAKE_(colbert_raw, cells * colbert)
    UFORM_TAKE_(colbert, cells * colbert)
    UFORM_TAKE_(d_colbert, cells * colbert)
    UFORM_TAKE_(logits, cells * uform_vocabulary_k)
    UFORM_TAKE_(scored, cells)
    UFORM_TAKE_(kinds, cells)
    UFORM_TAKE_(values, cells)
    UFORM_TAKE_(positions, cells * 3)
    UFORM_TAKE_(targets, cells)
    UFORM_TAKE_(destinations, cells)
    UFORM_TAKE_(spans, cells)
#undef UFORM_TAKE_
#if defined(UFORM_HAVE_CUDA)
    if (status == uform_ok_k && !host) status = uform_train_cuda_create(trainer, gpu_cells, &trainer->cuda);
#else
    (void)gpu_cells;
#endif
    if (status != uform_ok_k) {
        uform_trainer_close(trainer);
        return status;
    }
    *result = trainer;
    return uform_ok_k;
}

/* Attention scratch for segments up to `longest` cells on every pool thread; grows between passes. */
static uform_status_t uform_reserve_attention_(uform_trainer_t *trainer, size_t longest) {
    size_t threads = uform_pool_threads(trainer->model->context->pool);
    if (longest <= trainer->longest && threads == trainer->attention_threads) return uform_ok_k;
    if (longest < trainer->longest) longest = trainer->longest;
    for (size_t i = 0; trainer->attention && i < trainer->attention_threads; ++i) {
        free(trainer->attention[i].probabilities);
        free(trainer->attention[i].gradient);
    }
    free(trainer->attention);
    trainer->attention = calloc(threads, sizeof(uform_attention_scratch_t));
    trainer->attention_threads = trainer->attention ? threads : 0;
    trainer->longest = 0;
    for (size_t i = 0; i < trainer->attention_threads; ++i) {
        trainer->attention[i].probabilities = malloc(longest * longest * sizeof(float));
        trainer->attention[i].gradient = malloc((longest * longest + 2 * longest) * sizeof(float)); /* also holds size_t indices */
        if (!trainer->attention[i].probabilities || !trainer->attention[i].gradient)
            return uform_fail(uform_out_of_memory_k, "cannot allocate attention scratch for %zu-cell segments", longest);
    }
    if (!trainer->attention) return uform_fail(uform_out_of_memory_k, "cannot allocate attention scratch");
    trainer->longest = longest;
    return uform_ok_k;
}

/* MLM's masked media cells, kind by kind: their cells and their true vectors (widened from the
 * batch's media rows). */
static uform_status_t uform_gather_reconstruction_(uform_trainer_t *trainer, uform_batch_t const *batch,
                                                   size_t const masked[uform_media_kinds_k], char const *verb) {
    for (size_t media = 0; media < uform_media_kinds_k; ++media) {
        uform_reconstruction_t *r = &trainer->reconstructions[media];
        uform_cell_kind_t kind = (uform_cell_kind_t)(uform_cell_image_k + media);
        size_t values = uform_media_info(kind)->values;
        r->count = 0;
        if (!masked[media]) continue;
        if (masked[media] > r->capacity) {
            size_t *cells = realloc(r->cells, masked[media] * sizeof(size_t));
            if (cells) r->cells = cells;
            float *targets = cells ? realloc(r->targets, masked[media] * values * sizeof(float)) : NULL;
            if (targets) r->targets = targets;
            float *predictions = targets ? realloc(r->predictions, masked[media] * values * sizeof(float)) : NULL;
            if (!predictions) return uform_fail(uform_out_of_memory_k, "%s: cannot hold %zu masked media cells", verb, masked[media]);
            r->predictions = predictions, r->capacity = masked[media];
        }
        uform_media_t const *rows = &batch->grid.media[media];
        for (size_t c = 0; c < trainer->active; ++c) {
            int32_t target = batch->targets[trainer->destinations[c]];
            if (trainer->kinds[c] != kind || target < 0) continue;
            float *row = r->targets + r->count * values;
            if (rows->dtype == uform_media_bf16_k)
                uform_f32_from_bf16_array((uint16_t const *)rows->data + (size_t)target * values, row, values);
            else memcpy(row, (float const *)rows->data + (size_t)target * values, values * sizeof(float));
            r->cells[r->count++] = c;
        }
    }
    return uform_ok_k;
}

uform_status_t uform_trainer_check_batch(uform_trainer_t *trainer, uform_batch_t const *batch, char const *verb) {
    size_t widest_row = 0;
    unsigned frontends = trainer->options.device == uform_device_cuda_k ? UFORM_FRONTENDS_CUDA : UFORM_FRONTENDS_CPU;
    UFORM_TRY(uform_grid_check(&batch->grid, trainer->model->parts, frontends, verb, &widest_row));
    size_t active = 0;
    for (size_t i = 0; i < batch->grid.rows * batch->grid.columns; ++i) active += batch->grid.segments[i] != -1;
    if (active > trainer->cells)
        return uform_fail(uform_shape_k, "%s: the batch has %zu cells, the trainer was made for %zu", verb, active, trainer->cells);
    trainer->segments = uform_grid_compact(&batch->grid, 0, batch->grid.rows, trainer->kinds, trainer->values,
                                           trainer->positions, trainer->destinations, trainer->spans, &trainer->active);
    if (!trainer->active) return uform_fail(uform_invalid_argument_k, "%s: the batch has no cells", verb);
    uform_cells_t const cells = {trainer->kinds, trainer->values, batch->grid.media};
    for (size_t media = 0; media < uform_media_kinds_k; ++media) {
        uform_cell_kind_t kind = (uform_cell_kind_t)(uform_cell_image_k + media);
        size_t found = uform_frontend_count(&cells, trainer->active, kind), values = uform_media_info(kind)->values;
        if (found > trainer->media_capacity[media]) {
            float *grown = realloc(trainer->media[media], found * values * sizeof(float));
            if (!grown) return uform_fail(uform_out_of_memory_k, "%s: cannot hold the batch's %zu media vectors", verb, found);
            trainer->media[media] = grown, trainer->media_capacity[media] = found;
        }
        if (found) uform_frontend_gather(&cells, trainer->active, kind, trainer->media[media]);
    }
    size_t longest = 0;
    for (size_t s = 0; s < trainer->segments; ++s) longest = trainer->spans[s].length > longest ? trainer->spans[s].length : longest;
    UFORM_TRY(uform_reserve_attention_(trainer, longest));
    if (trainer->options.objective == uform_objective_mlm_k) {
        if (!batch->targets) return uform_fail(uform_invalid_argument_k, "%s: masked modelling needs targets", verb);
        for (size_t cell = 0; cell < batch->grid.rows * batch->grid.columns; ++cell)
            if (batch->targets[cell] >= 0 && batch->grid.segments[cell] < 0)
                return uform_fail(uform_invalid_argument_k, "%s: grid cell %zu is padding but has target %d", verb, cell,
                                  batch->targets[cell]);
        static char const *const nouns[uform_media_kinds_k] = {"image patches", "video tubes", "audio frames"};
        static char const *const cell_names[uform_media_kinds_k] = {"image", "video", "audio"};
        size_t scored = 0, masked[uform_media_kinds_k] = {0}, masked_total = 0;
        for (size_t c = 0; c < trainer->active; ++c) {
            int32_t target = batch->targets[trainer->destinations[c]];
            uform_cell_kind_t kind = (uform_cell_kind_t)trainer->kinds[c];
            int media = kind != uform_cell_byte_k;
            trainer->targets[c] = media ? -1 : target; /* the byte head's targets */
            if (media && target >= 0) { /* a masked media cell: the target is the media row of its true vector */
                size_t m = kind - uform_cell_image_k;
                if ((size_t)target >= batch->grid.media[m].count)
                    return uform_fail(uform_invalid_argument_k, "%s: %s cell %zu's target names row %d of %zu %s rows", verb,
                                      cell_names[m], trainer->destinations[c], target, batch->grid.media[m].count, cell_names[m]);
                uform_part_t head = uform_media_info(kind)->mae;
                if (!uform_model_carries(trainer->model, head))
                    return uform_fail(uform_missing_k, "%s: the batch masks %s and the model has no %s head "
                                      "(uform_model_init_head(model, \"%s\", seed))", verb, nouns[m], uform_part_name(head),
                                      uform_part_name(head));
                masked[m]++, masked_total++;
                continue;
            }
            if (target < -1 || (media ? target != -1 : target > 255))
                return uform_fail(uform_invalid_argument_k, "%s: target %d at grid cell %zu is outside -1..%s", verb, target,
                                  trainer->destinations[c], media ? "(a media row)" : "255");
            if (target >= 0) trainer->scored[scored++] = c;
        }
        if (!scored && !masked_total) return uform_fail(uform_invalid_argument_k, "%s: the batch has no masked cells to score", verb);
        UFORM_TRY(uform_gather_reconstruction_(trainer, batch, masked, verb));
    } else {
        if (!batch->anchors || !batch->anchors_count || !batch->candidates || !batch->candidates_count || !batch->labels)
            return uform_fail(uform_invalid_argument_k, "%s: pair objectives need anchors, candidates and labels", verb);
        for (size_t a = 0; a < batch->anchors_count; ++a)
            if (batch->anchors[a] >= trainer->segments)
                return uform_fail(uform_invalid_argument_k, "%s: anchor %zu is segment %u of %zu", verb, a, batch->anchors[a],
                                  trainer->segments);
        for (size_t c = 0; c < batch->candidates_count; ++c)
            if (batch->candidates[c] >= trainer->segments)
                return uform_fail(uform_invalid_argument_k, "%s: candidate %zu is segment %u of %zu", verb, c,
                                  batch->candidates[c], trainer->segments);
        for (size_t a = 0; batch->anchor_weights && a < batch->anchors_count; ++a)
            if (!isfinite(batch->anchor_weights[a]) || batch->anchor_weights[a] < 0)
                return uform_fail(uform_invalid_argument_k, "%s: anchor %zu's loss weight is %g; it must be finite and >= 0",
                                  verb, a, (double)batch->anchor_weights[a]);
    }
    return uform_ok_k;
}

/* Verbs that need the host's state: refused on a GPU trainer, or while the GPU holds newer state. */
static uform_status_t uform_host_only_(uform_trainer_t const *trainer, char const *verb) {
    if (trainer->options.device != uform_device_cpu_k)
        return uform_fail(uform_unsupported_k, "%s runs on a CPU trainer; a CUDA trainer takes whole steps "
                                               "(uform_trainer_step, uform_trainer_submit)", verb);
    return uform_ok_k;
}

static uform_status_t uform_host_current_(uform_trainer_t const *trainer, char const *verb) {
    if (trainer->device_ahead)
        return uform_fail(uform_invalid_argument_k, "%s: the GPU holds newer weights and moments than the host: call "
                                                    "uform_trainer_sync first", verb);
    return uform_ok_k;
}

uform_status_t uform_trainer_gradients(uform_trainer_t *trainer, uform_batch_t const *batch, uform_losses_t *losses) {
    if (!trainer || !batch || !losses) return uform_fail(uform_invalid_argument_k, "uform_trainer_gradients: NULL argument");
    UFORM_TRY(uform_host_only_(trainer, "uform_trainer_gradients"));
    return uform_train_world(trainer, batch, 1, losses, "uform_trainer_gradients");
}

uform_status_t uform_trainer_gradients_world(uform_trainer_t *trainer, uform_batch_t const *batches, size_t ranks,
                                             uform_losses_t *losses) {
    if (!trainer || !batches || !losses)
        return uform_fail(uform_invalid_argument_k, "uform_trainer_gradients_world: NULL argument (trainer, batches and losses "
                                                    "are needed)");
    if (trainer->options.device != uform_device_cpu_k)
        return uform_fail(uform_unsupported_k, "uform_trainer_gradients_world simulates the ranks on the CPU: a CUDA "
                                               "trainer has no world step yet (make the trainer with device cpu)");
    if (!ranks) return uform_fail(uform_invalid_argument_k, "uform_trainer_gradients_world: 0 ranks: a world has at least one");
    return uform_train_world(trainer, batches, ranks, losses, "uform_trainer_gradients_world");
}

double uform_trainer_learning_rate(uform_trainer_t const *trainer) {
    uform_train_options_t const *options = &trainer->options;
    double step = (double)(trainer->steps + 1), peak = options->learning_rate;
    if (step <= (double)options->warmup_steps) return peak * step / (double)options->warmup_steps;
    if (!options->total_steps) return peak;
    double progress = (step - (double)options->warmup_steps) / (double)(options->total_steps - options->warmup_steps);
    if (progress > 1) progress = 1;
    return peak * 0.5 * (1.0 + cos(3.14159265358979323846 * progress));
}

size_t uform_trainer_steps(uform_trainer_t const *trainer) { return trainer ? trainer->steps : 0; }

/* One tensor's Adafactor update; `t` is the 1-based step. */
static void uform_adafactor_(uform_tensor_t *tensor, uform_train_options_t const *options, double rate, double t,
                             float *update) {
    size_t rows = tensor->rows, columns = tensor->columns, count = rows * columns;
    float const *g = tensor->gradient;
    double b1 = options->beta1, b2 = options->beta2, correction2 = 1.0 - pow(b2, t), correction1 = 1.0 - pow(b1, t);
    if (tensor->factored) {
        double row_mean_total = 0;
        for (size_t r = 0; r < rows; ++r) {
            double sum = 0;
            for (size_t c = 0; c < columns; ++c) sum += (double)g[r * columns + c] * g[r * columns + c] + 1e-30;
            tensor->row[r] = (float)(b2 * tensor->row[r] + (1 - b2) * (sum / (double)columns));
            row_mean_total += tensor->row[r];
        }
        for (size_t c = 0; c < columns; ++c) {
            double sum = 0;
            for (size_t r = 0; r < rows; ++r) sum += (double)g[r * columns + c] * g[r * columns + c] + 1e-30;
            tensor->column[c] = (float)(b2 * tensor->column[c] + (1 - b2) * (sum / (double)rows));
        }
        double row_mean = row_mean_total / (double)rows;
        for (size_t r = 0; r < rows; ++r)
            for (size_t c = 0; c < columns; ++c) {
                double v = (double)tensor->row[r] * tensor->column[c] / row_mean / correction2;
                update[r * columns + c] = (float)(g[r * columns + c] / sqrt(v));
            }
    } else {
        for (size_t i = 0; i < count; ++i) {
            tensor->row[i] = (float)(b2 * tensor->row[i] + (1 - b2) * ((double)g[i] * g[i] + 1e-30));
            update[i] = (float)(g[i] / sqrt(tensor->row[i] / correction2));
        }
    }
    double squares = 0;
    for (size_t i = 0; i < count; ++i) squares += (double)update[i] * update[i];
    double shrink = sqrt(squares / (double)count) / options->clip;
    if (shrink < 1) shrink = 1;
    for (size_t i = 0; i < count; ++i) {
        tensor->first[i] = (float)(b1 * tensor->first[i] + (1 - b1) * (update[i] / shrink));
        double step = rate * (tensor->first[i] / correction1 + options->weight_decay * tensor->parameter[i]);
        float value = (float)(tensor->parameter[i] - step);
        if (tensor->master_bf16) {
            tensor->master_bf16[i] = uform_f32_to_bf16(value);
            tensor->parameter[i] = uform_bf16_to_f32(tensor->master_bf16[i]);
        } else {
            tensor->master_f32[i] = tensor->parameter[i] = value;
        }
    }
}

uform_status_t uform_trainer_apply(uform_trainer_t *trainer) {
    if (!trainer) return uform_fail(uform_invalid_argument_k, "uform_trainer_apply: NULL trainer");
    UFORM_TRY(uform_host_only_(trainer, "uform_trainer_apply"));
    if (!trainer->has_gradients)
        return uform_fail(uform_invalid_argument_k, "uform_trainer_apply: no gradients: call uform_trainer_gradients first");
    double rate = uform_trainer_learning_rate(trainer), t = (double)(trainer->steps + 1);
    for (size_t i = 0; i < trainer->tensors_count; ++i)
        if (!trainer->tensors[i].frozen) uform_adafactor_(&trainer->tensors[i], &trainer->options, rate, t, trainer->update);
    trainer->steps++;
    trainer->has_gradients = 0; /* one step per gradient */
    uform_model_changed(trainer->model);
    return uform_ok_k;
}

uform_status_t uform_trainer_step(uform_trainer_t *trainer, uform_batch_t const *batch, uform_losses_t *losses) {
    if (!trainer || !batch || !losses) return uform_fail(uform_invalid_argument_k, "uform_trainer_step: NULL argument");
    if (trainer->options.device == uform_device_cpu_k) {
        size_t step = trainer->steps + 1;
        UFORM_TRY(uform_trainer_gradients(trainer, batch, losses));
        UFORM_TRY(uform_trainer_apply(trainer));
        losses->step = step;
        return uform_ok_k;
    }
    if (trainer->device_ahead)
        return uform_fail(uform_invalid_argument_k, "uform_trainer_step: a submitted step is in flight: call uform_trainer_sync first");
    int finished = 0;
    UFORM_TRY(uform_trainer_submit(trainer, batch, &finished, losses));
    return uform_trainer_sync(trainer, &finished, losses);
}

uform_status_t uform_trainer_step_world(uform_trainer_t *trainer, uform_batch_t const *batches, size_t ranks,
                                        uform_losses_t *losses) {
    size_t step = trainer ? trainer->steps + 1 : 0;
    UFORM_TRY(uform_trainer_gradients_world(trainer, batches, ranks, losses));
    UFORM_TRY(uform_trainer_apply(trainer));
    losses->step = step;
    return uform_ok_k;
}

uform_status_t uform_trainer_submit(uform_trainer_t *trainer, uform_batch_t const *batch, int *finished,
                                    uform_losses_t *losses) {
    if (!trainer || !batch || !finished || !losses) return uform_fail(uform_invalid_argument_k, "uform_trainer_submit: NULL argument");
    *finished = 0;
    if (trainer->options.device == uform_device_cpu_k) {
        UFORM_TRY(uform_trainer_step(trainer, batch, losses));
        *finished = 1;
        return uform_ok_k;
    }
#if defined(UFORM_HAVE_CUDA)
    double rate = uform_trainer_learning_rate(trainer);
    size_t step = trainer->steps + 1;
    memset(losses, 0, sizeof(*losses));
    UFORM_TRY(uform_train_cuda_submit(trainer->cuda, batch, rate, step, finished, losses));
    trainer->steps = step; /* so that uform_trainer_learning_rate gives the next step's rate */
    trainer->device_ahead = 1;
    return uform_ok_k;
#else
    return uform_fail(uform_unsupported_k, "uform_trainer_submit: this build has no CUDA backend");
#endif
}

uform_status_t uform_trainer_sync(uform_trainer_t *trainer, int *finished, uform_losses_t *losses) {
    if (!trainer || !finished || !losses) return uform_fail(uform_invalid_argument_k, "uform_trainer_sync: NULL argument");
    *finished = 0;
#if defined(UFORM_HAVE_CUDA)
    if (trainer->cuda && trainer->device_ahead) {
        UFORM_TRY(uform_train_cuda_sync(trainer->cuda, finished, losses));
        trainer->device_ahead = 0;
    }
#endif
    return uform_ok_k;
}

uform_tensor_t *uform_trainer_tensor(uform_trainer_t const *trainer, char const *name) {
    for (size_t i = 0; i < trainer->tensors_count; ++i)
        if (!strcmp(trainer->tensors[i].name, name)) return &trainer->tensors[i];
    return NULL;
}

uform_status_t uform_trainer_read(uform_trainer_t const *trainer, char const *name, uform_slot_t slot, float *values,
                                  size_t count) {
    if (!trainer || !name || !values) return uform_fail(uform_invalid_argument_k, "uform_trainer_read: NULL argument");
    UFORM_TRY(uform_host_current_(trainer, "uform_trainer_read"));
    uform_tensor_t const *tensor = uform_trainer_tensor(trainer, name);
    if (!tensor) return uform_fail(uform_missing_k, "uform_trainer_read: no trained tensor '%s'", name);
    size_t elements = tensor->rows * tensor->columns;
    float const *source = NULL;
    size_t expected = elements;
    switch (slot) {
    case uform_slot_parameter_k: source = tensor->parameter; break;
    case uform_slot_gradient_k: source = tensor->gradient; break;
    case uform_slot_first_moment_k: source = tensor->first; break;
    case uform_slot_row_moment_k: source = tensor->row, expected = tensor->factored ? tensor->rows : elements; break;
    case uform_slot_column_moment_k:
        if (!tensor->factored) return uform_fail(uform_missing_k, "uform_trainer_read: '%s' is a vector, without C", name);
        source = tensor->column, expected = tensor->columns;
        break;
    default: return uform_fail(uform_invalid_argument_k, "uform_trainer_read: unknown slot %d", (int)slot);
    }
    if (count != expected)
        return uform_fail(uform_shape_k, "uform_trainer_read: '%s' slot %d holds %zu floats, the buffer %zu", name, (int)slot,
                          expected, count);
    memcpy(values, source, count * sizeof(float));
    return uform_ok_k;
}

/* The optimizer state as SafeTensors: "{name}.first", "{name}.row" and, for matrices,
 * "{name}.column", all F32; the step count and objective in __metadata__. */
uform_status_t uform_trainer_save_state(uform_trainer_t const *trainer, char const *path) {
    if (!trainer || !path) return uform_fail(uform_invalid_argument_k, "uform_trainer_save_state: NULL argument");
    UFORM_TRY(uform_host_current_(trainer, "uform_trainer_save_state"));
    uform_tensor_view_t *views = calloc(3 * trainer->tensors_count, sizeof(uform_tensor_view_t));
    if (!views) return uform_fail(uform_out_of_memory_k, "cannot list the optimizer state");
    size_t count = 0;
    for (size_t i = 0; i < trainer->tensors_count; ++i) {
        uform_tensor_t const *tensor = &trainer->tensors[i];
        size_t elements = tensor->rows * tensor->columns;
        struct { char const *suffix; float const *data; size_t count; } const slots[3] = {
            {"first", tensor->first, elements},
            {"row", tensor->row, tensor->factored ? tensor->rows : elements},
            {"column", tensor->column, tensor->factored ? tensor->columns : 0}};
        for (size_t s = 0; s < 3; ++s) {
            if (!slots[s].count) continue;
            uform_tensor_view_t *view = &views[count++];
            if (snprintf(view->name, sizeof(view->name), "%s.%s", tensor->name, slots[s].suffix) >= (int)sizeof(view->name)) {
                free(views);
                return uform_fail(uform_invalid_argument_k, "optimizer tensor name too long: %s", tensor->name);
            }
            view->dtype = uform_dtype_f32_k;
            view->rank = 1;
            view->shape[0] = slots[s].count;
            view->data = slots[s].data;
            view->bytes = slots[s].count * sizeof(float);
        }
    }
    char steps[32];
    snprintf(steps, sizeof(steps), "%zu", trainer->steps);
    char const *objective = trainer->options.objective == uform_objective_mlm_k           ? "mlm"
                            : trainer->options.objective == uform_objective_contrastive_k ? "contrastive"
                                                                                          : "rerank";
    json_t *metadata = json_pack("{s:s, s:s, s:s}", "format", "uform-optimizer", "steps", steps, "objective", objective);
    uform_status_t status = metadata ? uform_safetensors_write(path, views, count, metadata)
                                     : uform_fail(uform_out_of_memory_k, "cannot build the optimizer header");
    if (metadata) json_decref(metadata);
    free(views);
    return status;
}

uform_status_t uform_trainer_load_state(uform_trainer_t *trainer, char const *path) {
    if (!trainer || !path) return uform_fail(uform_invalid_argument_k, "uform_trainer_load_state: NULL argument");
    if (trainer->device_ahead)
        return uform_fail(uform_invalid_argument_k, "uform_trainer_load_state: a submitted step is in flight: call uform_trainer_sync first");
    uform_safetensors_t file;
    UFORM_TRY(uform_safetensors_open(path, &file));
    uform_status_t status = uform_ok_k;
    char const *steps = file.metadata ? json_string_value(json_object_get(file.metadata, "steps")) : NULL;
    char *end = NULL;
    unsigned long long step_count = steps ? strtoull(steps, &end, 10) : 0;
    if (!steps || !end || *end) status = uform_fail(uform_format_k, "%s: no 'steps' in __metadata__ (not an optimizer state?)", path);
    for (size_t i = 0; status == uform_ok_k && i < trainer->tensors_count; ++i) {
        uform_tensor_t *tensor = &trainer->tensors[i];
        size_t elements = tensor->rows * tensor->columns;
        struct { char const *suffix; float *data; size_t count; } const slots[3] = {
            {"first", tensor->first, elements},
            {"row", tensor->row, tensor->factored ? tensor->rows : elements},
            {"column", tensor->column, tensor->factored ? tensor->columns : 0}};
        for (size_t s = 0; status == uform_ok_k && s < 3; ++s) {
            if (!slots[s].count) continue;
            char name[uform_max_name_k + 16];
            snprintf(name, sizeof(name), "%s.%s", tensor->name, slots[s].suffix);
            uform_tensor_view_t const *view = uform_safetensors_find(&file, name);
            if (!view) status = uform_fail(uform_missing_k, "%s: optimizer tensor '%s' is missing", path, name);
            else if (view->dtype != uform_dtype_f32_k || uform_tensor_elements(view) != slots[s].count)
                status = uform_fail(uform_shape_k, "%s: optimizer tensor '%s' must be F32 with %zu elements", path, name,
                                    slots[s].count);
            else memcpy(slots[s].data, view->data, slots[s].count * sizeof(float));
        }
    }
    if (status == uform_ok_k) trainer->steps = (size_t)step_count;
    uform_safetensors_close(&file);
#if defined(UFORM_HAVE_CUDA)
    if (status == uform_ok_k && trainer->cuda) status = uform_train_cuda_upload(trainer->cuda); /* the GPU resumes too */
#endif
    return status;
}
