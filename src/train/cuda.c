/*  cuda.c: the trainer on one GPU (cuda.h) through the step of src/cuda/step.h: the masked-byte,
 *  contrastive or rerank objective, the latter two with the opt-in TCR and Lipschitz terms, over
 *  bytes and the media frontends the model carries (image patches, video tubes, audio frames). The
 *  CPU model and trainer stay the source of truth between syncs: their weights and Adafactor
 *  moments go up once, the batches go up step by step through the step's two pinned slots (one
 *  filled while the other's step runs), and weights and moments come back down at each sync, so a
 *  checkpoint resumes exactly on either device. Built only with the CUDA backend (UFORM_HAVE_CUDA). */
#include "train/cuda.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/numeric.h"
#include "core/status.h"
#include "cuda/batch.h"
#include "cuda/check.h"
#include "cuda/step.h"
#include "model/tensors.h"

struct uform_train_cuda_t {
    uform_trainer_t *trainer; /* its tensors point at the model's BF16 and Float32 masters */
    uform_cuda_step_t *step;
    size_t rows, columns;
    uform_objective_t objective;
    int pairs;                           /* contrastive or rerank: batches of anchors and candidates */
    size_t segments, anchors, candidates; /* pairs: the step's capacities */
    int slot;    /* the slot the next batch goes into */
    int pending; /* the other slot holds a launched step whose loss is not read yet */
    size_t pending_step; /* that step's number */
};

/* A CUDA runtime call's status, its failure (naming `what` and CUDA's error) made the library's. */
static uform_status_t uform_cuda_ok_(cudaError_t code, char const *what) {
    uform_status_t status = uform_cuda_check(code, "CUDA trainer", what);
    return status == uform_ok_k ? status : uform_fail(status, "%s", uform_cuda_noted());
}

/* A step call's status, its message (the call and kernel that failed) made the library's. */
static uform_status_t uform_step_ok_(uform_train_cuda_t const *cuda, uform_status_t status) {
    return status == uform_ok_k ? status : uform_fail(status, "CUDA trainer: %s", uform_cuda_step_error(cuda->step));
}

/* Pairs every GPU tensor with the trainer's tensor of the same checkpoint name and shape. */
static uform_status_t uform_pair_(uform_train_cuda_t *cuda, uform_cuda_tensor_t const *gpu, uform_tensor_t **result) {
    uform_tensor_t *cpu = uform_trainer_tensor(cuda->trainer, gpu->name);
    if (!cpu) return uform_fail(uform_missing_k, "CUDA trainer: the model has no tensor '%s'", gpu->name);
    int matrix = cpu->master_bf16 != NULL;
    if (cpu->rows != gpu->rows || cpu->columns != gpu->columns || matrix != (gpu->is_matrix != 0) ||
        (!matrix && !cpu->master_f32))
        return uform_fail(uform_shape_k, "CUDA trainer: '%s' is %zu x %zu %s on the CPU, %zu x %zu %s on the GPU", gpu->name,
                          cpu->rows, cpu->columns, matrix ? "BF16" : "Float32", gpu->rows, gpu->columns,
                          gpu->is_matrix ? "BF16" : "Float32");
    *result = cpu;
    return uform_ok_k;
}

/* Copies a tensor's Adafactor state (R or V, C, M) between the trainer and the GPU, `upload` choosing
 * the direction: a CUDA run saves and resumes the same optimizer state as a CPU run. */
static cudaError_t uform_moments_(uform_tensor_t *cpu, uform_cuda_tensor_t const *gpu, int upload) {
    size_t elements = cpu->rows * cpu->columns;
    struct { float *host, *device; size_t count; } parts[3] = {
        {cpu->row, gpu->row_moment, cpu->factored ? cpu->rows : elements},
        {cpu->column, gpu->column_moment, cpu->factored ? cpu->columns : 0},
        {cpu->first, gpu->first_moment, elements}};
    for (size_t i = 0; i < 3; ++i) {
        if (!parts[i].count) continue;
        cudaError_t code = upload ? cudaMemcpy(parts[i].device, parts[i].host, parts[i].count * 4, cudaMemcpyHostToDevice)
                                  : cudaMemcpy(parts[i].host, parts[i].device, parts[i].count * 4, cudaMemcpyDeviceToHost);
        if (code != cudaSuccess) return code;
    }
    return cudaSuccess;
}

uform_status_t uform_train_cuda_create(uform_trainer_t *trainer, size_t cells, uform_train_cuda_t **result) {
    *result = NULL;
    uform_train_options_t const *options = &trainer->options;
    size_t rows = options->rows, anchors = options->anchors, candidates = options->candidates;
    int recompute = options->recompute;
    if (!rows || cells % rows)
        return uform_fail(uform_invalid_argument_k, "CUDA trainer: %zu cells do not split into %zu rows (options.rows)", cells, rows);
    size_t columns = cells / rows;
    int rerank = options->objective == uform_objective_rerank_k;
    int pairs = rerank || options->objective == uform_objective_contrastive_k;
    int spectral = options->tcr_lambda > 0 || options->lipschitz_lambda > 0;
    if (!pairs && spectral)
        return uform_fail(uform_unsupported_k, "CUDA trainer: TCR and Lipschitz train with the contrastive and rerank "
                                               "objectives; with mlm they run on the CPU only so far");
    if (pairs && (!anchors || !candidates || ((!rerank || spectral) && !trainer->pool_proj) || (rerank && !trainer->rerank_proj)))
        return uform_fail(uform_invalid_argument_k, "CUDA trainer: the %s step needs the %s head and the batcher's "
                                                    "anchors and candidates capacities (options.anchors, options.candidates)",
                          rerank ? "rerank" : "contrastive", rerank ? (spectral ? "rerank and pool" : "rerank") : "pool");
    /* MaxSim's kernel keeps each query cell's best document cell for up to 4096 cells a text; a text
     * is at most one row long. */
    if (rerank && columns > 4096)
        return uform_fail(uform_unsupported_k, "CUDA trainer: the rerank step holds texts of at most 4096 cells, the "
                                               "rows hold %zu", columns);
    if (recompute < 0 || recompute > 2)
        return uform_fail(uform_invalid_argument_k, "CUDA trainer: recompute is 0, 1 or 2, not %d", recompute);
    uform_config_t const *config = &trainer->model->config;
    uform_train_cuda_t *cuda = calloc(1, sizeof(*cuda));
    if (!cuda) return uform_fail(uform_out_of_memory_k, "cannot allocate the CUDA trainer");
    cuda->trainer = trainer, cuda->rows = rows, cuda->columns = columns, cuda->pairs = pairs;
    cuda->objective = options->objective;
    *result = cuda;
    /* The kernels' attention: cuDNN's plan would need the same segment count in every batch. No
     * timing of product algorithms: the heuristic's choice repeats across processes, so a resumed run
     * takes the steps the uninterrupted one would. */
    uform_cuda_step_config_t step_config = {.width = config->width, .depth = config->depth, .cells = cells,
                                            .objective = rerank  ? uform_cuda_rerank_k
                                                         : pairs ? uform_cuda_contrastive_k
                                                                 : uform_cuda_mlm_k,
                                            .recompute = recompute != 0, .keep_attention = recompute == 2, .beta1 = options->beta1, .beta2 = options->beta2,
                                            .clip = options->clip, .weight_decay = options->weight_decay};
    /* Each media frontend the model carries: any batch may be all cells of that kind. Its masked
     * vectors, as the CPU trainer scores them, where the model carries the kind's masked modelling head. */
    for (size_t k = 0; k < uform_media_kinds_k; ++k) {
        uform_media_info_t const *info = uform_media_info((uform_cell_kind_t)(uform_cell_image_k + k));
        int carried = trainer->by_index[uform_tensor_index(config, info->weight, 0)] != NULL;
        step_config.media[k] = carried ? cells : 0;
        step_config.mae[k] = !pairs && carried && trainer->by_index[uform_tensor_index(config, info->mae_head, 0)] != NULL;
    }
    if (pairs) {
        /* The batcher's bounds: every text of a pair batch is an anchor or a candidate, each at least
         * one cell, and padding adds at most one run per row (the tail the packing leaves). */
        cuda->anchors = anchors < cells ? anchors : cells;
        cuda->candidates = candidates < cells ? candidates : cells;
        cuda->segments = anchors + candidates + rows < cells ? anchors + candidates + rows : cells;
        step_config.segments = cuda->segments, step_config.anchors = cuda->anchors, step_config.candidates = cuda->candidates;
        /* pool.proj: contrastive's head, and with rerank where TCR or Lipschitz read its embeddings. */
        if (!rerank || spectral) step_config.embedding_width = trainer->pool_proj->rows;
        if (rerank) step_config.colbert_width = trainer->rerank_proj->rows;
        else {
            step_config.widths_count = config->embedding_widths_count;
            for (size_t w = 0; w < config->embedding_widths_count; ++w) step_config.widths[w] = config->embedding_widths[w];
        }
        step_config.tcr_lambda = options->tcr_lambda, step_config.lipschitz_lambda = options->lipschitz_lambda;
        step_config.lipschitz_iterations = options->lipschitz_iterations;
    }
    char error[512] = "";
    uform_status_t status = uform_cuda_step_create(&cuda->step, &step_config, error, sizeof(error));
    if (status != uform_ok_k) return uform_fail(status, "CUDA trainer: %s", error);
    size_t count = 0;
    uform_cuda_tensor_t *tensors = uform_cuda_step_tensors(cuda->step, &count);
    for (size_t i = 0; i < count; ++i) {
        uform_tensor_t *cpu;
        UFORM_TRY(uform_pair_(cuda, &tensors[i], &cpu));
        tensors[i].frozen = cpu->frozen;
    }
    return uform_train_cuda_upload(cuda);
}

/* Copies every tensor's master and moments between the trainer and the GPU, `upload` choosing the
 * direction; coming down, the trainer's Float32 working copies follow their masters. */
static uform_status_t uform_copy_(uform_train_cuda_t *cuda, int upload) {
    cudaError_t code;
    size_t count = 0;
    uform_cuda_tensor_t *tensors = uform_cuda_step_tensors(cuda->step, &count);
    for (size_t i = 0; i < count; ++i) {
        uform_tensor_t *cpu;
        UFORM_TRY(uform_pair_(cuda, &tensors[i], &cpu));
        size_t elements = cpu->rows * cpu->columns, bytes = elements * (cpu->master_bf16 ? 2 : 4);
        void *master = cpu->master_bf16 ? (void *)cpu->master_bf16 : (void *)cpu->master_f32;
        code = upload ? cudaMemcpy(tensors[i].parameter, master, bytes, cudaMemcpyHostToDevice)
                      : cudaMemcpy(master, tensors[i].parameter, bytes, cudaMemcpyDeviceToHost);
        if (code == cudaSuccess) code = uform_moments_(cpu, &tensors[i], upload);
        if (code != cudaSuccess) {
            char what[96];
            snprintf(what, sizeof(what), "%s %s", upload ? "uploading" : "downloading", tensors[i].name);
            return uform_cuda_ok_(code, what);
        }
        if (upload) continue;
        if (cpu->master_bf16) uform_f32_from_bf16_array(cpu->master_bf16, cpu->parameter, elements);
        else memcpy(cpu->parameter, cpu->master_f32, bytes);
    }
    /* The step runs on streams that do not wait for the legacy one these copies went through. */
    UFORM_TRY(uform_cuda_ok_(cudaDeviceSynchronize(), upload ? "uploading the weights" : "downloading the weights"));
    if (!upload) uform_model_changed(cuda->trainer->model); /* the contexts' copies catch up before their next pass */
    return uform_ok_k;
}

uform_status_t uform_train_cuda_upload(uform_train_cuda_t *cuda) { return uform_copy_(cuda, 1); }

/* The finished step's loss in the CPU trainer's parts. */
static void uform_losses_(uform_train_cuda_t const *cuda, int slot, uform_losses_t *losses) {
    float parts[4];
    uform_cuda_step_losses(cuda->step, slot, parts);
    *losses = (uform_losses_t){.total = parts[0]};
    if (!cuda->pairs) { /* masked bytes: [2] holds the masked vectors' reconstruction (0 without a masked modelling head) */
        losses->mlm = parts[1], losses->reconstruction = parts[2];
        return;
    }
    losses->tcr = parts[2], losses->lipschitz = parts[3];
    if (cuda->objective == uform_objective_rerank_k) losses->rerank = parts[1];
    else losses->siglip = parts[1];
}

uform_status_t uform_train_cuda_submit(uform_train_cuda_t *cuda, uform_batch_t const *batch, double learning_rate, size_t t,
                                       int *finished, uform_losses_t *losses) {
    *finished = 0;
    int slot = cuda->slot;
    /* The slot's last step finished when it was reported; the wait is what makes refilling it safe. */
    UFORM_TRY(uform_step_ok_(cuda, uform_cuda_step_wait(cuda->step, slot, NULL)));
    if (batch->grid.rows != cuda->rows || batch->grid.columns != cuda->columns)
        return uform_fail(uform_shape_k, "CUDA trainer: a batch of %zu x %zu cells, the step was made for %zu x %zu",
                          batch->grid.rows, batch->grid.columns, cuda->rows, cuda->columns);
    char error[512] = "";
    uform_cuda_batch_t view = uform_cuda_step_batch(cuda->step, slot);
    uform_status_t status = uform_cuda_batch_fill(&view, uform_cuda_step_config(cuda->step), batch, error, sizeof(error));
    if (status != uform_ok_k) return uform_fail(status, "CUDA trainer: %s", error);
    uform_cuda_batch_finish(cuda->step, slot, learning_rate, t);
    UFORM_TRY(uform_step_ok_(cuda, uform_cuda_step_run(cuda->step, slot)));
    if (cuda->pending) {
        UFORM_TRY(uform_step_ok_(cuda, uform_cuda_step_wait(cuda->step, slot ^ 1, NULL)));
        uform_losses_(cuda, slot ^ 1, losses);
        losses->step = cuda->pending_step;
        *finished = 1;
    }
    cuda->pending = 1, cuda->pending_step = t;
    cuda->slot = slot ^ 1;
    return uform_ok_k;
}

uform_status_t uform_train_cuda_sync(uform_train_cuda_t *cuda, int *finished, uform_losses_t *losses) {
    *finished = 0;
    if (cuda->pending) {
        UFORM_TRY(uform_step_ok_(cuda, uform_cuda_step_wait(cuda->step, cuda->slot ^ 1, NULL)));
        uform_losses_(cuda, cuda->slot ^ 1, losses);
        losses->step = cuda->pending_step;
        cuda->pending = 0;
        *finished = 1;
    }
    UFORM_TRY(uform_cuda_ok_(cudaDeviceSynchronize(), "finishing the steps"));
    return uform_copy_(cuda, 0);
}

void uform_train_cuda_close(uform_train_cuda_t *cuda) {
    if (!cuda) return;
    uform_cuda_step_destroy(cuda->step);
    free(cuda);
}
