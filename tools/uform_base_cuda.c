/*  uform_base_cuda.c: `uform_base --device cuda`, the masked-byte, contrastive or rerank objective
 *  (the latter two with the opt-in TCR and Lipschitz terms) on one GPU through the step of src/cuda/step.h. The CPU model
 *  and trainer stay the source of truth between saves: their weights and Adafactor moments go up
 *  once, the batches of the usual batcher go up step by step through the step's two pinned slots
 *  (one filled while the other's step runs), and weights and moments come back down into the
 *  trainer before each checkpoint, so a checkpoint resumes exactly on either device. Built only with
 *  the CUDA backend (UFORM_HAVE_CUDA). */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/numeric.h"
#include "core/status.h"
#include "cuda/step.h"
#include "train/trainer.h"
#include "uform_base_cuda.h"


struct uform_base_cuda_t {
    uform_trainer_t *trainer; /* its tensors point at the model's BF16 and Float32 masters */
    uform_cuda_step_t *step;
    size_t rows, columns;
    uform_objective_t objective;
    int pairs;                           /* contrastive or rerank: batches of anchors and candidates */
    size_t segments, anchors, candidates; /* pairs: the step's capacities */
    int slot;    /* the slot the next batch goes into */
    int pending; /* the other slot holds a launched step whose loss is not read yet */
};

static uform_status_t uform_cuda_fail_(int code, char const *what) {
    return uform_fail(code == (int)cudaErrorMemoryAllocation ? uform_out_of_memory_k : uform_io_k, "--device cuda: %s: %s",
                      what, cudaGetErrorString((cudaError_t)code));
}

uform_status_t uform_base_cuda_available(char *device, size_t capacity) {
    int count = 0, code = (int)cudaGetDeviceCount(&count);
    if (code || count < 1)
        return uform_fail(uform_unsupported_k, "--device cuda: no CUDA device (%s)",
                          code ? cudaGetErrorString((cudaError_t)code) : "the driver lists none");
    struct cudaDeviceProp properties;
    if ((code = (int)cudaGetDeviceProperties(&properties, 0))) return uform_cuda_fail_(code, "cudaGetDeviceProperties");
    if (device && capacity) snprintf(device, capacity, "%s", properties.name);
    return uform_ok_k;
}

static uform_tensor_t *uform_find_(uform_trainer_t *trainer, char const *name) {
    for (size_t i = 0; i < trainer->tensors_count; ++i)
        if (!strcmp(trainer->tensors[i].name, name)) return &trainer->tensors[i];
    return NULL;
}

/* Pairs every GPU tensor with the trainer's tensor of the same checkpoint name and shape. */
static uform_status_t uform_pair_(uform_base_cuda_t *cuda, uform_cuda_tensor_t const *gpu, uform_tensor_t **result) {
    uform_tensor_t *cpu = uform_find_(cuda->trainer, gpu->name);
    if (!cpu) return uform_fail(uform_missing_k, "--device cuda: the model has no tensor '%s'", gpu->name);
    int matrix = cpu->master_bf16 != NULL;
    if (cpu->rows != gpu->rows || cpu->columns != gpu->columns || matrix != (gpu->is_matrix != 0) ||
        (!matrix && !cpu->master_f32))
        return uform_fail(uform_shape_k, "--device cuda: '%s' is %zu x %zu %s on the CPU, %zu x %zu %s on the GPU", gpu->name,
                          cpu->rows, cpu->columns, matrix ? "BF16" : "Float32", gpu->rows, gpu->columns,
                          gpu->is_matrix ? "BF16" : "Float32");
    *result = cpu;
    return uform_ok_k;
}

/* Copies a tensor's Adafactor state (R or V, C, M) between the trainer and the GPU, `upload` choosing
 * the direction: a CUDA run saves and resumes the same optimizer state as a CPU run. */
static int uform_moments_(uform_tensor_t *cpu, uform_cuda_tensor_t const *gpu, int upload) {
    size_t elements = cpu->rows * cpu->columns;
    struct { float *host, *device; size_t count; } parts[3] = {
        {cpu->row, gpu->row_moment, cpu->factored ? cpu->rows : elements},
        {cpu->column, gpu->column_moment, cpu->factored ? cpu->columns : 0},
        {cpu->first, gpu->first_moment, elements}};
    for (size_t i = 0; i < 3; ++i) {
        if (!parts[i].count) continue;
        int code = (int)(upload ? cudaMemcpy(parts[i].device, parts[i].host, parts[i].count * 4, cudaMemcpyHostToDevice)
                                : cudaMemcpy(parts[i].host, parts[i].device, parts[i].count * 4, cudaMemcpyDeviceToHost));
        if (code) return code;
    }
    return 0;
}

uform_status_t uform_base_cuda_create(uform_trainer_t *trainer, size_t rows, size_t columns, size_t anchors,
                                      size_t candidates, int recompute, uform_base_cuda_t **result) {
    *result = NULL;
    uform_train_options_t const *options = &trainer->options;
    int rerank = options->objective == uform_objective_rerank_k;
    int pairs = rerank || options->objective == uform_objective_contrastive_k;
    int spectral = options->tcr_lambda > 0 || options->lipschitz_lambda > 0;
    if (!pairs && spectral)
        return uform_fail(uform_unsupported_k, "--device cuda: TCR and Lipschitz train with the contrastive and rerank "
                                               "objectives; with mlm they run on the CPU only so far");
    if (pairs && (!anchors || !candidates || ((!rerank || spectral) && !trainer->pool_proj) || (rerank && !trainer->rerank_proj)))
        return uform_fail(uform_invalid_argument_k, "--device cuda: the %s step needs the %s head and the batcher's "
                                                    "anchors and candidates capacities",
                          rerank ? "rerank" : "contrastive", rerank ? (spectral ? "rerank and pool" : "rerank") : "pool");
    /* MaxSim's kernel keeps each query cell's best document cell for up to 4096 cells a text; a text
     * is at most one row long. */
    if (rerank && columns > 4096)
        return uform_fail(uform_unsupported_k, "--device cuda: the rerank step holds texts of at most 4096 cells, the "
                                               "mixture's rows hold %zu", columns);
    uform_config_t const *config = &trainer->model->config;
    uform_base_cuda_t *cuda = calloc(1, sizeof(*cuda));
    if (!cuda) return uform_fail(uform_out_of_memory_k, "cannot allocate the CUDA trainer");
    cuda->trainer = trainer, cuda->rows = rows, cuda->columns = columns, cuda->pairs = pairs;
    cuda->objective = options->objective;
    *result = cuda;
    /* The kernels' attention: cuDNN's plan would need the same segment count in every batch. No
     * timing of product algorithms: the heuristic's choice repeats across processes, so a resumed run
     * takes the steps the uninterrupted one would. */
    size_t cells = rows * columns;
    uform_cuda_step_config_t step_config = {.width = config->width, .depth = config->depth, .cells = cells,
                                            .objective = rerank  ? uform_cuda_rerank_k
                                                         : pairs ? uform_cuda_contrastive_k
                                                                 : uform_cuda_mlm_k,
                                            .recompute = recompute != 0, .keep_attention = recompute == 2, .beta1 = options->beta1, .beta2 = options->beta2,
                                            .clip = options->clip, .weight_decay = options->weight_decay};
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
    int code = uform_cuda_step_create(&cuda->step, &step_config, error, sizeof(error));
    if (code)
        return uform_fail(code == (int)cudaErrorMemoryAllocation ? uform_out_of_memory_k : uform_io_k, "--device cuda: %s",
                          error[0] ? error : cudaGetErrorString((cudaError_t)code));
    size_t count = 0;
    uform_cuda_tensor_t *tensors = uform_cuda_step_tensors(cuda->step, &count);
    for (size_t i = 0; i < count; ++i) {
        uform_tensor_t *cpu;
        UFORM_TRY(uform_pair_(cuda, &tensors[i], &cpu));
        size_t elements = cpu->rows * cpu->columns;
        void const *source = cpu->master_bf16 ? (void const *)cpu->master_bf16 : (void const *)cpu->master_f32;
        if ((code = (int)cudaMemcpy(tensors[i].parameter, source, elements * (cpu->master_bf16 ? 2 : 4), cudaMemcpyHostToDevice)) ||
            (code = uform_moments_(cpu, &tensors[i], 1)))
            return uform_cuda_fail_(code, tensors[i].name);
    }
    /* The step runs on streams that do not wait for the legacy one these copies went through. */
    if ((code = (int)cudaDeviceSynchronize())) return uform_cuda_fail_(code, "uploading the weights");
    return uform_ok_k;
}

/* The grid as the step takes it: every run of one segment id (padding included, as runs of its own
 * that nothing scores) becomes a span. Masked bytes: spans in cell order. Contrastive and rerank: the
 * texts take spans 0..live-1 in uform_forward's numbering (which anchors and candidates use, and whose
 * rows TCR and Lipschitz read), padding runs the spans after them, and the rest of the capacity length
 * 0. Each span is one run of cells, which is what MaxSim reads as a query's or a document's cells. */
static uform_status_t uform_fill_(uform_base_cuda_t *cuda, int slot, uform_batch_t const *batch) {
    uform_grid_t const *grid = &batch->grid;
    int pairs = cuda->pairs;
    if (grid->rows != cuda->rows || grid->columns != cuda->columns || (!pairs && !batch->targets))
        return uform_fail(uform_shape_k, "--device cuda: a batch of %zu x %zu cells%s, the step was made for %zu x %zu",
                          grid->rows, grid->columns, pairs || batch->targets ? "" : " without targets", cuda->rows,
                          cuda->columns);
    uform_cuda_batch_t b = uform_cuda_step_batch(cuda->step, slot);
    size_t cells = grid->rows * grid->columns, live = 0, padding_runs = 0, scored = 0;
    for (size_t cell = 0; pairs && cell < cells; ++cell) { /* runs start as uform_grid_compact starts them */
        int32_t segment = grid->segments[cell] < 0 ? -1 : grid->segments[cell];
        int32_t before = cell % grid->columns == 0 ? -2 : grid->segments[cell - 1] < 0 ? -1 : grid->segments[cell - 1];
        if (segment != before && segment < 0) padding_runs++;
        else if (segment != before) live++;
    }
    if (pairs && live + padding_runs > cuda->segments)
        return uform_fail(uform_shape_k, "--device cuda: the batch packs %zu texts and %zu padding runs, more than the "
                                         "%zu segments the step holds (anchors + candidates + rows)",
                          live, padding_runs, cuda->segments);
    size_t next_text = 0, next_padding = live, span = 0;
    for (size_t row = 0; row < grid->rows; ++row) {
        int32_t previous = -1;
        for (size_t column = 0; column < grid->columns; ++column) {
            size_t cell = row * grid->columns + column;
            int32_t segment = grid->segments[cell], target = pairs ? -1 : batch->targets[cell];
            int padding = segment < 0;
            if (!padding && (grid->kinds[cell] != uform_cell_byte_k || grid->values[cell] >= uform_vocabulary_k))
                return uform_fail(uform_unsupported_k, "--device cuda: cell %zu is not a byte cell with a value in 0..257", cell);
            if (target < -1 || target > 255 || (padding && target >= 0))
                return uform_fail(uform_invalid_argument_k, "--device cuda: target %d at cell %zu is not -1..255 on a byte cell",
                                  target, cell);
            if (!column || (padding ? -1 : segment) != previous) {
                span = padding && pairs ? next_padding++ : next_text++;
                b.spans[2 * span] = (uint32_t)cell, b.spans[2 * span + 1] = 0;
            }
            b.spans[2 * span + 1]++;
            b.segment_of[cell] = (uint32_t)span;
            b.values[cell] = padding ? uform_pad_k : grid->values[cell];
            b.targets[cell] = target;
            scored += target >= 0;
            memcpy(b.positions + 3 * cell, grid->positions + 3 * cell, 3 * sizeof(int32_t));
            previous = padding ? -1 : segment;
        }
    }
    if (!pairs) {
        if (!scored) return uform_fail(uform_invalid_argument_k, "--device cuda: the batch has no masked cells to score");
        return uform_ok_k;
    }
    for (size_t s = next_padding; s < cuda->segments; ++s) b.spans[2 * s] = b.spans[2 * s + 1] = 0;
    size_t anchors = batch->anchors_count, candidates = batch->candidates_count;
    if (!batch->anchors || !anchors || !batch->candidates || !candidates || !batch->labels)
        return uform_fail(uform_invalid_argument_k, "--device cuda: a pair batch needs anchors, candidates and labels");
    if (anchors > cuda->anchors || candidates > cuda->candidates)
        return uform_fail(uform_shape_k, "--device cuda: the batch has %zu anchors and %zu candidates, the step holds at most "
                                         "%zu and %zu (the batcher's capacities)",
                          anchors, candidates, cuda->anchors, cuda->candidates);
    for (size_t a = 0; a < anchors; ++a)
        if (batch->anchors[a] >= live)
            return uform_fail(uform_invalid_argument_k, "--device cuda: anchor %zu is segment %u of %zu", a, batch->anchors[a], live);
    for (size_t c = 0; c < candidates; ++c)
        if (batch->candidates[c] >= live)
            return uform_fail(uform_invalid_argument_k, "--device cuda: candidate %zu is segment %u of %zu", c,
                              batch->candidates[c], live);
    memcpy(b.anchors, batch->anchors, anchors * sizeof(uint32_t));
    memcpy(b.candidates, batch->candidates, candidates * sizeof(uint32_t));
    memcpy(b.labels, batch->labels, anchors * candidates);
    b.counts[0] = (uint32_t)anchors, b.counts[1] = (uint32_t)candidates, b.counts[2] = (uint32_t)live;
    return uform_ok_k;
}

/* The finished step's loss in the CPU trainer's parts. */
static void uform_losses_(uform_base_cuda_t const *cuda, int slot, uform_losses_t *losses) {
    float parts[4];
    uform_cuda_step_losses(cuda->step, slot, parts);
    *losses = (uform_losses_t){.total = parts[0], .tcr = parts[2], .lipschitz = parts[3]};
    if (cuda->objective == uform_objective_rerank_k) losses->rerank = parts[1];
    else if (cuda->pairs) losses->siglip = parts[1];
    else losses->mlm = parts[1];
}

uform_status_t uform_base_cuda_step(uform_base_cuda_t *cuda, uform_batch_t const *batch, double learning_rate,
                                    int *finished, uform_losses_t *losses) {
    *finished = 0;
    int slot = cuda->slot, code;
    /* The slot's last step finished when it was reported; the wait is what makes refilling it safe. */
    if ((code = uform_cuda_step_wait(cuda->step, slot, NULL))) return uform_cuda_fail_(code, "a step");
    UFORM_TRY(uform_fill_(cuda, slot, batch));
    size_t t = cuda->trainer->steps + 1;
    uform_cuda_batch_finish(cuda->step, slot, learning_rate, t);
    if ((code = uform_cuda_step_run(cuda->step, slot))) return uform_cuda_fail_(code, "launching a step");
    cuda->trainer->steps = t; /* so that uform_trainer_learning_rate gives the next step's rate */
    if (cuda->pending) {
        if ((code = uform_cuda_step_wait(cuda->step, slot ^ 1, NULL))) return uform_cuda_fail_(code, "a step");
        uform_losses_(cuda, slot ^ 1, losses);
        *finished = 1;
    }
    cuda->pending = 1;
    cuda->slot = slot ^ 1;
    return uform_ok_k;
}

uform_status_t uform_base_cuda_drain(uform_base_cuda_t *cuda, int *finished, uform_losses_t *losses) {
    *finished = 0;
    if (!cuda->pending) return uform_ok_k;
    int code = uform_cuda_step_wait(cuda->step, cuda->slot ^ 1, NULL);
    if (code) return uform_cuda_fail_(code, "a step");
    uform_losses_(cuda, cuda->slot ^ 1, losses);
    cuda->pending = 0;
    *finished = 1;
    return uform_ok_k;
}

uform_status_t uform_base_cuda_download(uform_base_cuda_t *cuda) {
    if (cuda->pending) return uform_fail(uform_invalid_argument_k, "--device cuda: download while a step runs");
    int code;
    if ((code = (int)cudaDeviceSynchronize())) return uform_cuda_fail_(code, "finishing the steps");
    size_t count = 0;
    uform_cuda_tensor_t *tensors = uform_cuda_step_tensors(cuda->step, &count);
    for (size_t i = 0; i < count; ++i) {
        uform_tensor_t *cpu;
        UFORM_TRY(uform_pair_(cuda, &tensors[i], &cpu));
        size_t elements = cpu->rows * cpu->columns;
        if (cpu->master_bf16) {
            if ((code = (int)cudaMemcpy(cpu->master_bf16, tensors[i].parameter, elements * 2, cudaMemcpyDeviceToHost)))
                return uform_cuda_fail_(code, tensors[i].name);
            uform_f32_from_bf16_array(cpu->master_bf16, cpu->parameter, elements);
        } else {
            if ((code = (int)cudaMemcpy(cpu->master_f32, tensors[i].parameter, elements * 4, cudaMemcpyDeviceToHost)))
                return uform_cuda_fail_(code, tensors[i].name);
            memcpy(cpu->parameter, cpu->master_f32, elements * 4);
        }
        if ((code = uform_moments_(cpu, &tensors[i], 0))) return uform_cuda_fail_(code, tensors[i].name);
    }
    cuda->trainer->model->stale = 1; /* packed copies for inference are rebuilt from the new masters */
    return uform_ok_k;
}

void uform_base_cuda_close(uform_base_cuda_t *cuda) {
    if (!cuda) return;
    uform_cuda_step_destroy(cuda->step);
    free(cuda);
}
