/*  uform_base_cuda.c: `uform_base --device cuda`, the masked-byte objective on one GPU through the
 *  step of src/cuda/step.h. The CPU model and trainer stay the source of truth between saves: their
 *  weights go up once, the batches of the usual batcher go up step by step through the step's two
 *  pinned slots (one filled while the other's step runs), and the weights come back down into the
 *  model before each checkpoint. The optimizer moments stay on the GPU (step.h does not expose them
 *  yet), so CUDA checkpoints hold weights only. Built only with the CUDA backend (UFORM_HAVE_CUDA). */
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

uform_status_t uform_base_cuda_create(uform_trainer_t *trainer, size_t rows, size_t columns, int recompute,
                                      uform_base_cuda_t **result) {
    *result = NULL;
    uform_train_options_t const *options = &trainer->options;
    if (options->objective != uform_objective_mlm_k || options->tcr_lambda > 0 || options->lipschitz_lambda > 0)
        return uform_fail(uform_unsupported_k, "--device cuda trains the mlm objective alone so far");
    uform_config_t const *config = &trainer->model->config;
    uform_base_cuda_t *cuda = calloc(1, sizeof(*cuda));
    if (!cuda) return uform_fail(uform_out_of_memory_k, "cannot allocate the CUDA trainer");
    cuda->trainer = trainer, cuda->rows = rows, cuda->columns = columns;
    *result = cuda;
    /* The kernels' attention: cuDNN's plan would need the same segment count in every batch. No
     * timing of product algorithms: the heuristic's choice repeats across processes, so a resumed run
     * takes the steps the uninterrupted one would. */
    uform_cuda_step_config_t step_config = {.width = config->width, .depth = config->depth, .cells = rows * columns,
                                            .objective = uform_cuda_mlm_k, .recompute = recompute,
                                            .beta1 = options->beta1, .beta2 = options->beta2, .clip = options->clip,
                                            .weight_decay = options->weight_decay};
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

/* The grid in cell order as the step takes it: every run of one segment id (padding included, as
 * runs of its own that no scored cell sees) becomes a span, as uform_grid_compact numbers them. */
static uform_status_t uform_fill_(uform_base_cuda_t *cuda, int slot, uform_batch_t const *batch) {
    uform_grid_t const *grid = &batch->grid;
    if (grid->rows != cuda->rows || grid->columns != cuda->columns || !batch->targets)
        return uform_fail(uform_shape_k, "--device cuda: a batch of %zu x %zu cells%s, the step was made for %zu x %zu",
                          grid->rows, grid->columns, batch->targets ? "" : " without targets", cuda->rows, cuda->columns);
    uform_cuda_batch_t b = uform_cuda_step_batch(cuda->step, slot);
    size_t segments = 0, scored = 0;
    for (size_t row = 0; row < grid->rows; ++row) {
        int32_t previous = -1;
        for (size_t column = 0; column < grid->columns; ++column) {
            size_t cell = row * grid->columns + column;
            int32_t segment = grid->segments[cell], target = batch->targets[cell];
            int padding = segment < 0;
            if (!padding && (grid->kinds[cell] != uform_cell_byte_k || grid->values[cell] >= uform_vocabulary_k))
                return uform_fail(uform_unsupported_k, "--device cuda: cell %zu is not a byte cell with a value in 0..257", cell);
            if (target < -1 || target > 255 || (padding && target >= 0))
                return uform_fail(uform_invalid_argument_k, "--device cuda: target %d at cell %zu is not -1..255 on a byte cell",
                                  target, cell);
            if (!column || (padding ? -1 : segment) != previous) {
                b.spans[2 * segments] = (uint32_t)cell, b.spans[2 * segments + 1] = 0;
                segments++;
            }
            b.spans[2 * segments - 1]++;
            b.segment_of[cell] = (uint32_t)(segments - 1);
            b.values[cell] = padding ? uform_pad_k : grid->values[cell];
            b.targets[cell] = target;
            scored += target >= 0;
            memcpy(b.positions + 3 * cell, grid->positions + 3 * cell, 3 * sizeof(int32_t));
            previous = padding ? -1 : segment;
        }
    }
    if (!scored) return uform_fail(uform_invalid_argument_k, "--device cuda: the batch has no masked cells to score");
    return uform_ok_k;
}

uform_status_t uform_base_cuda_step(uform_base_cuda_t *cuda, uform_batch_t const *batch, double learning_rate,
                                    int *finished, float *loss) {
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
        if ((code = uform_cuda_step_wait(cuda->step, slot ^ 1, loss))) return uform_cuda_fail_(code, "a step");
        *finished = 1;
    }
    cuda->pending = 1;
    cuda->slot = slot ^ 1;
    return uform_ok_k;
}

uform_status_t uform_base_cuda_drain(uform_base_cuda_t *cuda, int *finished, float *loss) {
    *finished = 0;
    if (!cuda->pending) return uform_ok_k;
    int code = uform_cuda_step_wait(cuda->step, cuda->slot ^ 1, loss);
    if (code) return uform_cuda_fail_(code, "a step");
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
