/*  step_parity.c: the CUDA masked-byte step (src/cuda/step.h) against the CPU reference trainer
 *  (include/uform/train.h) from one start: every tensor's gradient on one batch, the loss curve
 *  of full Adafactor steps, bitwise repeatability of a second GPU step, and a planted control (the
 *  step's RMSNorm backward with a dropped term) that the gradient check must reject. Runs with and
 *  without recomputation. Exits 77 (skipped) without a CUDA device; nonzero when a check fails or
 *  the control is missed.
 *
 *      uform_step_parity [--json FILE] [--width 128] [--depth 2] [--rows 4] [--columns 256] [--steps 20]
 */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../c/check.h"
#include "cuda_ok.h"
#include "cuda/step.h"
#include "uform/uform.h"


#define UFORM_OK(call)                                                                                                \
    do {                                                                                                              \
        uform_status_t status_ = (call);                                                                              \
        if (status_ != uform_ok_k) {                                                                                  \
            fprintf(stderr, "%s:%d: %s failed (%s): %s\n", __FILE__, __LINE__, #call, uform_status_name(status_),     \
                    uform_last_error());                                                                              \
            exit(1);                                                                                                  \
        }                                                                                                             \
    } while (0)

static double const bf16_unit_ = 1.0 / 256.0; /* BF16 unit roundoff: 8 significant bits, round to nearest */
static double const learning_rate_ = 1e-3;    /* twice the custom tiers' 5e-4: the loss moves visibly in 20 steps */
static uint64_t const batch_seed_ = 20240607, model_seed_ = 7;

/* ---------------------------------------------------------------------------------------------
 * Deterministic batches
 * ------------------------------------------------------------------------------------------- */

static uint64_t state_;
static uint64_t next_(void) { /* SplitMix64 */
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double uniform_(void) { return (double)(next_() >> 11) / 9007199254740992.0; }

/* One batch as both sides take it: the grid of uform_batch_t and the GPU slot's cell lists. */
typedef struct host_batch_t {
    size_t rows, columns, cells, segments;
    uint8_t *kinds;
    uint32_t *values, *segment_of, *spans;
    int32_t *row_segments, *positions, *targets;
} host_batch_t;

static void batch_alloc_(host_batch_t *b, size_t rows, size_t columns) {
    size_t n = rows * columns;
    b->rows = rows, b->columns = columns, b->cells = n, b->segments = 0;
    b->kinds = malloc(n), b->values = malloc(n * 4), b->segment_of = malloc(n * 4), b->spans = malloc(2 * n * 4);
    b->row_segments = malloc(n * 4), b->positions = malloc(3 * n * 4), b->targets = malloc(n * 4);
    if (!b->kinds || !b->values || !b->segment_of || !b->spans || !b->row_segments || !b->positions || !b->targets) {
        fprintf(stderr, "step_parity: out of host memory for a %zu-cell batch\n", n);
        exit(1);
    }
}

static void batch_free_(host_batch_t *b) {
    free(b->kinds), free(b->values), free(b->segment_of), free(b->spans), free(b->row_segments), free(b->positions);
    free(b->targets);
}

/* Text-like bytes (skewed letters and spaces, 10% uniform over 0..255) so the loss falls within 20 steps
 * and every embedding row can be touched. */
static uint32_t byte_(void) {
    double u = uniform_();
    if (u < 0.10) return (uint32_t)(next_() & 255);
    if (u < 0.25) return ' ';
    uint32_t k = 0;
    while (k < 25 && uniform_() > 0.25) k++;
    return 'a' + k;
}

/* Batch `index`: rows filled wholly by segments of mixed lengths (under, at and over the 64-cell tile,
 * starting and ending mid-tile, the last one cut at the row's end), ~15% of cells masked, text
 * positions t = h = w = index in the segment (as src/data/batcher.c and src/encode.c set them). */
static void batch_make_(host_batch_t *b, size_t index) {
    static size_t const lengths[] = {1, 9, 17, 33, 48, 64, 65, 100, 130, 200};
    state_ = batch_seed_ * 0x100000001b3ull + index;
    size_t masked = 0;
    b->segments = 0;
    for (size_t row = 0; row < b->rows; ++row) {
        size_t column = 0;
        int32_t local = 0;
        while (column < b->columns) {
            size_t length = lengths[next_() % (sizeof(lengths) / sizeof(lengths[0]))];
            if (length > b->columns - column) length = b->columns - column;
            size_t first = row * b->columns + column;
            for (size_t i = 0; i < length; ++i) {
                size_t cell = first + i;
                uint32_t byte = byte_();
                int mask = uniform_() < 0.15;
                b->kinds[cell] = uform_cell_byte_k;
                b->values[cell] = mask ? uform_mask_k : byte;
                b->targets[cell] = mask ? (int32_t)byte : -1;
                b->row_segments[cell] = local;
                b->segment_of[cell] = (uint32_t)b->segments;
                for (int axis = 0; axis < 3; ++axis) b->positions[3 * cell + axis] = (int32_t)i;
                masked += (size_t)mask;
            }
            b->spans[2 * b->segments] = (uint32_t)first, b->spans[2 * b->segments + 1] = (uint32_t)length;
            b->segments++, local++, column += length;
        }
    }
    if (!masked) b->targets[0] = (int32_t)b->values[0], b->values[0] = uform_mask_k; /* both sides need a scored cell */
}

static uform_batch_t batch_cpu_(host_batch_t const *b) {
    return (uform_batch_t){.grid = {b->rows, b->columns, b->kinds, b->values, b->row_segments, b->positions},
                           .targets = b->targets};
}

/* Fills a GPU slot's pinned batch; the slot must be idle (waited on). */
static void batch_gpu_(uform_cuda_step_t *step, int slot, host_batch_t const *b, size_t t) {
    uform_cuda_batch_t view = uform_cuda_step_batch(step, slot);
    memcpy(view.values, b->values, b->cells * 4);
    memcpy(view.targets, b->targets, b->cells * 4);
    memcpy(view.positions, b->positions, 3 * b->cells * 4);
    memcpy(view.segment_of, b->segment_of, b->cells * 4);
    memcpy(view.spans, b->spans, 2 * b->segments * 4);
    uform_cuda_batch_finish(step, slot, learning_rate_, t);
}

/* ---------------------------------------------------------------------------------------------
 * Parameters and gradients
 * ------------------------------------------------------------------------------------------- */

typedef struct tensor_list_t {
    size_t count;
    char (*names)[48];
    size_t *elements;
    int *is_matrix;
} tensor_list_t;

static uint16_t bf16_bits_(float value) {
    uint32_t bits;
    memcpy(&bits, &value, 4);
    return (uint16_t)(bits >> 16);
}

/* The CPU trainer's parameters by the step's names; matrices must be BF16-exact (they are BF16 masters). */
static float **snapshot_(uform_trainer_t const *trainer, tensor_list_t const *list) {
    float **values = calloc(list->count, sizeof(float *));
    for (size_t i = 0; values && i < list->count; ++i) {
        if (!(values[i] = malloc(list->elements[i] * sizeof(float)))) exit(1);
        UFORM_OK(uform_trainer_read(trainer, list->names[i], uform_slot_parameter_k, values[i], list->elements[i]));
        for (size_t e = 0; list->is_matrix[i] && e < list->elements[i]; ++e) {
            uint32_t bits;
            memcpy(&bits, &values[i][e], 4);
            if (bits & 0xffffu) {
                fprintf(stderr,
                        "step_parity: CPU parameter %s[%zu] = %.9g is not BF16-exact; the GPU master cannot hold it\n",
                        list->names[i], e, values[i][e]);
                exit(1);
            }
        }
    }
    if (!values) exit(1);
    return values;
}

static void upload_parameters_(uform_cuda_step_t *step, tensor_list_t const *list, float *const *values) {
    size_t count;
    uform_cuda_tensor_t *tensors = uform_cuda_step_tensors(step, &count);
    for (size_t i = 0; i < count; ++i) {
        size_t n = list->elements[i];
        if (tensors[i].is_matrix) {
            uint16_t *bits = malloc(n * 2);
            if (!bits) exit(1);
            for (size_t e = 0; e < n; ++e) bits[e] = bf16_bits_(values[i][e]);
            CUDA_OK(cudaMemcpy(tensors[i].parameter, bits, n * 2, cudaMemcpyHostToDevice));
            free(bits);
        } else {
            CUDA_OK(cudaMemcpy(tensors[i].parameter, values[i], n * 4, cudaMemcpyHostToDevice));
        }
    }
}

/* Raw device bytes of every parameter, for bitwise comparison. */
static unsigned char **download_parameters_(uform_cuda_step_t *step, tensor_list_t const *list) {
    size_t count;
    uform_cuda_tensor_t *tensors = uform_cuda_step_tensors(step, &count);
    unsigned char **bytes = calloc(count, sizeof(unsigned char *));
    for (size_t i = 0; bytes && i < count; ++i) {
        size_t size = list->elements[i] * (tensors[i].is_matrix ? 2 : 4);
        if (!(bytes[i] = malloc(size))) exit(1);
        CUDA_OK(cudaMemcpy(bytes[i], tensors[i].parameter, size, cudaMemcpyDeviceToHost));
    }
    if (!bytes) exit(1);
    return bytes;
}

static float **download_gradients_(uform_cuda_step_t *step, tensor_list_t const *list) {
    size_t count;
    uform_cuda_tensor_t *tensors = uform_cuda_step_tensors(step, &count);
    float **values = calloc(count, sizeof(float *));
    for (size_t i = 0; values && i < count; ++i) {
        if (!(values[i] = malloc(list->elements[i] * 4))) exit(1);
        CUDA_OK(cudaMemcpy(values[i], tensors[i].gradient, list->elements[i] * 4, cudaMemcpyDeviceToHost));
    }
    if (!values) exit(1);
    return values;
}

static void free_all_(void *arrays, size_t count) {
    void **list = arrays;
    for (size_t i = 0; list && i < count; ++i) free(list[i]);
    free(list);
}

/* ||got - expected|| / ||expected||; a zero reference gives 0 or infinity, a NaN stays NaN (and fails). */
static double relative_error_(float const *got, float const *expected, size_t count) {
    double difference = 0, norm = 0;
    for (size_t i = 0; i < count; ++i) {
        double d = (double)got[i] - (double)expected[i];
        difference += d * d, norm += (double)expected[i] * expected[i];
    }
    if (norm == 0) return difference == 0 ? 0 : INFINITY;
    return sqrt(difference / norm);
}

/* ---------------------------------------------------------------------------------------------
 * The bounds
 *
 * What is derived. The CPU trainer is Float32 throughout (its weights are the same BF16 values
 * widened exactly), so the reference's own error is Float32 roundoff, negligible here. The GPU
 * step stores activations and gradient operands in BF16 and accumulates in Float32: each BF16
 * store replaces v by v (1 + delta), |delta| <= u = 2^-8, element by element; its Float32 sums
 * add at most k 2^-24 <= 1024 * 6e-8 < 1e-4 relative, also negligible. Reading step.c and the
 * kernels, the BF16 rounding points are (L blocks):
 *   forward, per block 8: normed1, qkv product, rotated q and k, attention weights P entering the
 *     P v product, attended, normed2, gate_up product, SwiGLU hidden; then h and the logits: 2.
 *     The loss reads the logits, so every gradient depends on all F = 8 L + 2 of them.
 *   backward, from the loss: d_logits (1); the final norm's dL/dx rounded for the down products
 *     (1); then per block, top down: d_hidden (the down product's BF16 output), d_gate_up, dL/dx
 *     rounded after mlp_norm, d_attended (the out product's BF16 output), P entering dV = P^T dO,
 *     dS entering dQ and dK, d_qkv, d_q and d_k after the inverse rotation, dL/dx rounded after
 *     attn_norm (9; block 0's last is Float32).
 *   A tensor's count N is F plus the backward points before its gradient's product:
 *     mlm.head and final_norm 1; in block l, with e = 2 + 9 (L - 1 - l) above it: down e,
 *     gate_up and mlp_norm e + 2, out e + 3, qkv and attn_norm e + 8; embed.bytes 2 + 9 (L-1) + 8.
 *   (For L = 2: 19 for the heads, 20..28 for block 1, 29..37 for block 0 and the embedding.)
 * To first order the gradient's error is the sum over these points of each point's perturbation
 * carried to the gradient by a linear map, and each point perturbs norm-wise by at most u.
 *
 * What is assumed. (1) Conditioning allowance C = 1: a relative perturbation e at any one point
 * moves the gradient by at most e relative (at this initialization the residual stream, the RMS
 * norms and the nearly uniform attention neither amplify nor cancel). (2) Distinct points round
 * different values independently, so their contributions are uncorrelated and add in quadrature:
 *     ||g_gpu - g_cpu|| / ||g_cpu|| <= sqrt(N) u C.
 * The worst case with every error aligned, N u C (0.14 at N = 37), is not used: it exceeds what
 * the planted control changes (dropping the norm's shared-scale term moves a norm's dL/dx by about
 * 1/sqrt(d), 2..4% of these gradients), so it could not tell a wrong formula from rounding. Using u
 * rather than the rounding error's RMS (about 0.42 u over many elements) leaves a factor 2.4.
 * Calibration, not proof: a NumPy emulation of exactly these rounding points on this program's
 * start and batch 0 (d = 128) put every honest error at <= 0.17 of sqrt(N) u and the control's
 * block tensors at 0.9..2.0 of it (the largest only 1.6 at d = 256, hence the default width 128).
 * The loss reads the F forward points only: |L_gpu - L_cpu| / L_cpu <= sqrt(F) u, assuming the mean
 * cross-entropy is no more sensitive to a relative perturbation of the logits than the perturbation
 * itself (it moves by at most 2 max|dz|; logits are O(1) and the loss near ln 258).
 * ------------------------------------------------------------------------------------------- */

static size_t forward_points_(size_t depth) { return 8 * depth + 2; }

/* N of the derivation above for one tensor; 0 for a name it does not know. */
static size_t points_(char const *name, size_t depth) {
    size_t forward = forward_points_(depth);
    if (!strcmp(name, "mlm.head") || !strcmp(name, "final_norm")) return forward + 1;
    if (!strcmp(name, "embed.bytes")) return forward + 2 + 9 * (depth - 1) + 8;
    unsigned block;
    char part[32];
    if (sscanf(name, "blocks.%u.%31s", &block, part) != 2 || block >= depth) return 0;
    size_t above = 2 + 9 * (depth - 1 - block);
    if (!strcmp(part, "down")) return forward + above;
    if (!strcmp(part, "gate_up") || !strcmp(part, "mlp_norm")) return forward + above + 2;
    if (!strcmp(part, "out")) return forward + above + 3;
    if (!strcmp(part, "qkv") || !strcmp(part, "attn_norm")) return forward + above + 8;
    return 0;
}

static double gradient_bound_(char const *name, size_t depth) { return sqrt((double)points_(name, depth)) * bf16_unit_; }
static double loss_bound_(size_t depth) { return sqrt((double)forward_points_(depth)) * bf16_unit_; }

/* ---------------------------------------------------------------------------------------------
 * JSON
 * ------------------------------------------------------------------------------------------- */

static FILE *json_;
static void json_number_(double value) {
    if (isfinite(value)) fprintf(json_, "%.9g", value);
    else fprintf(json_, "null");
}

/* ---------------------------------------------------------------------------------------------
 * One run: recompute 0 or 1
 * ------------------------------------------------------------------------------------------- */

typedef struct reference_t { /* what the CPU computed once, from the start */
    double loss0;
    float **gradients;   /* on batch 0 */
    double *losses;      /* [steps + 1], 1-based: step t's loss on batch t, before its update */
    double *progress;    /* [steps + 1]: sum of |change| of batch 0's loss over the updates before step t */
} reference_t;

typedef struct setup_t {
    size_t width, depth, rows, columns, steps;
    uform_train_options_t options;
    tensor_list_t list;
    float **start;
    host_batch_t *batches; /* [steps + 1]: 0 for the gradient check, t for step t */
} setup_t;

static uform_cuda_step_t *step_create_(setup_t const *s, int recompute, int plant) {
    uform_cuda_step_config_t config = {.width = s->width, .depth = s->depth, .cells = s->rows * s->columns,
                                       .recompute = recompute, .tune = 0, .plant = plant,
                                       .beta1 = s->options.beta1, .beta2 = s->options.beta2, .clip = s->options.clip,
                                       .weight_decay = s->options.weight_decay};
    uform_cuda_step_t *step = NULL;
    char error[256] = "";
    if (uform_cuda_step_create(&step, &config, error, sizeof(error))) {
        fprintf(stderr, "step_parity: %s\n", error);
        exit(1);
    }
    size_t count;
    uform_cuda_tensor_t *tensors = uform_cuda_step_tensors(step, &count);
    if (count != s->list.count) {
        fprintf(stderr, "step_parity: the step lists %zu tensors, the first step %zu\n", count, s->list.count);
        exit(1);
    }
    for (size_t i = 0; i < count; ++i)
        if (strcmp(tensors[i].name, s->list.names[i])) {
            fprintf(stderr, "step_parity: tensor %zu is %s here, %s in the first step\n", i, tensors[i].name,
                    s->list.names[i]);
            exit(1);
        }
    upload_parameters_(step, &s->list, s->start);
    return step;
}

/* Forward and backward of batch 0 on the GPU: the loss, and every gradient downloaded. */
static float **gpu_gradients_(uform_cuda_step_t *step, setup_t const *s, float *loss) {
    batch_gpu_(step, 0, &s->batches[0], 1);
    CUDA_OK(uform_cuda_step_gradients(step, 0));
    CUDA_OK(uform_cuda_step_wait(step, 0, loss));
    return download_gradients_(step, &s->list);
}

/* Prints the table of gradient errors; returns how many tensors exceed their bound (`blocks_only`: block tensors). */
static size_t gradient_table_(setup_t const *s, float *const *gpu, reference_t const *cpu, double *errors, int blocks_only) {
    size_t failed = 0;
    printf("  %-22s %6s %10s %10s %8s  %s\n", "tensor", "points", "rel.error", "bound", "ratio", "result");
    for (size_t i = 0; i < s->list.count; ++i) {
        char const *name = s->list.names[i];
        double error = relative_error_(gpu[i], cpu->gradients[i], s->list.elements[i]);
        double bound = gradient_bound_(name, s->depth), ratio = error / bound;
        int pass = points_(name, s->depth) > 0 && error <= bound;
        errors[i] = error;
        if (!pass && (!blocks_only || !strncmp(name, "blocks.", 7))) failed++;
        printf("  %-22s %6zu %10.3e %10.3e %8.3f  %s\n", name, points_(name, s->depth), error, bound, ratio,
               pass ? "pass" : "FAIL");
    }
    return failed;
}

/* 20 (or --steps) full steps from the start, slots alternating; fills losses [1..steps]. */
static void gpu_trajectory_(uform_cuda_step_t *step, setup_t const *s, float *losses) {
    for (size_t t = 1; t <= s->steps; ++t) {
        int slot = (int)((t - 1) & 1);
        CUDA_OK(uform_cuda_step_wait(step, slot, t > 2 ? &losses[t - 2] : NULL)); /* the slot's last step, t - 2 */
        batch_gpu_(step, slot, &s->batches[t], t);
        CUDA_OK(uform_cuda_step_run(step, slot));
    }
    for (size_t t = s->steps > 1 ? s->steps - 1 : 1; t <= s->steps; ++t)
        CUDA_OK(uform_cuda_step_wait(step, (int)((t - 1) & 1), &losses[t]));
}

typedef struct run_result_t {
    float **gradients; /* kept to compare recompute modes */
    float *losses;
} run_result_t;

static int run_(setup_t const *s, reference_t const *cpu, int recompute, run_result_t *result) {
    size_t count = s->list.count, depth = s->depth;
    printf("\n== recompute %d ==\n", recompute);
    if (json_) fprintf(json_, "%s{\"recompute\": %d", recompute ? ", " : "", recompute);
    int failures_before = failed_;

    /* 1. Gradient parity on batch 0. */
    uform_cuda_step_t *step = step_create_(s, recompute, 0);
    float loss0;
    float **gradients = gpu_gradients_(step, s, &loss0);
    double *errors = calloc(count, sizeof(double));
    if (!errors) exit(1);
    printf("gradients on one batch (bound sqrt(points) x 2^-8, see the derivation in the source):\n");
    size_t failed = gradient_table_(s, gradients, cpu, errors, 0);
    CHECK(failed == 0);
    double loss_error = fabs((double)loss0 - cpu->loss0) / cpu->loss0, loss_bound = loss_bound_(depth);
    printf("  %-22s %6zu %10.3e %10.3e %8.3f  %s   (cpu %.6f, gpu %.6f)\n", "loss", forward_points_(depth), loss_error,
           loss_bound, loss_error / loss_bound, loss_error <= loss_bound ? "pass" : "FAIL", cpu->loss0, (double)loss0);
    CHECK(loss_error <= loss_bound);
    if (json_) {
        fprintf(json_, ", \"loss\": {\"cpu\": "), json_number_(cpu->loss0);
        fprintf(json_, ", \"gpu\": "), json_number_(loss0);
        fprintf(json_, ", \"error\": "), json_number_(loss_error);
        fprintf(json_, ", \"bound\": "), json_number_(loss_bound);
        fprintf(json_, "}, \"gradients\": [");
        for (size_t i = 0; i < count; ++i) {
            double bound = gradient_bound_(s->list.names[i], depth);
            fprintf(json_, "%s{\"tensor\": \"%s\", \"points\": %zu, \"error\": ", i ? ", " : "", s->list.names[i],
                    points_(s->list.names[i], depth));
            json_number_(errors[i]);
            fprintf(json_, ", \"bound\": "), json_number_(bound);
            fprintf(json_, ", \"pass\": %s}", errors[i] <= bound ? "true" : "false");
        }
        fprintf(json_, "]");
    }

    /* 2. Trajectory: the loss of each full step against the CPU's from the same start.
     * Derived: Adafactor's U = G / sqrt(V) does not depend on G's scale, so a relative gradient
     * error e changes the update by at most 2 e to first order (e through G, e through sqrt(V),
     * V ~ G^2); clipping divides by rms(U) and keeps that. The BF16 store of each master rounds the
     * two sides apart only where they straddle a rounding midpoint, with probability |dw| / ulp at a
     * cost of one ulp: in expectation the same |dw|. Assumed: (a) an update error changes the loss
     * by at most the same fraction of the loss change the update makes, measured on the CPU as
     * batch 0's loss before and after each update, E_j (a fixed batch, so no batch-to-batch noise);
     * (b) no compounding over these few steps (first order). With e_g the largest gradient bound and
     * e_L the loss bound above, step k's bound (k - 1 updates behind it) is
     *     |L_gpu(k) - L_cpu(k)| <= e_L L_cpu(k) + 2 e_g sum_(j = 1..k-1) |E_j - E_(j-1)|.
     * The same emulation: honest steps at <= 0.007 of it; a doubled learning rate reaches 3.7, M's
     * bias correction dropped 11 (both within the first three steps). */
    double largest_gradient_bound = 0;
    for (size_t i = 0; i < count; ++i) {
        double bound = gradient_bound_(s->list.names[i], depth);
        largest_gradient_bound = bound > largest_gradient_bound ? bound : largest_gradient_bound;
    }
    float *losses = calloc(s->steps + 1, sizeof(float));
    if (!losses) exit(1);
    gpu_trajectory_(step, s, losses);
    printf("trajectory (%zu Adafactor steps, learning rate %g; bound e_L L + 2 e_g sum |dE|, e_L = %.4f, e_g = %.4f):\n",
           s->steps, learning_rate_, loss_bound, largest_gradient_bound);
    printf("  %4s %10s %10s %10s %10s %8s  %s\n", "step", "cpu", "gpu", "|diff|", "bound", "ratio", "result");
    size_t trajectory_failed = 0;
    if (json_) fprintf(json_, ", \"trajectory\": [");
    for (size_t t = 1; t <= s->steps; ++t) {
        double difference = fabs((double)losses[t] - cpu->losses[t]);
        double bound = loss_bound * cpu->losses[t] + 2 * largest_gradient_bound * cpu->progress[t];
        int pass = difference <= bound;
        trajectory_failed += !pass;
        printf("  %4zu %10.6f %10.6f %10.3e %10.3e %8.3f  %s\n", t, cpu->losses[t], (double)losses[t], difference, bound,
               difference / bound, pass ? "pass" : "FAIL");
        if (json_) {
            fprintf(json_, "%s{\"step\": %zu, \"cpu\": ", t > 1 ? ", " : "", t), json_number_(cpu->losses[t]);
            fprintf(json_, ", \"gpu\": "), json_number_(losses[t]);
            fprintf(json_, ", \"bound\": "), json_number_(bound);
            fprintf(json_, ", \"fixed_batch_progress\": "), json_number_(cpu->progress[t]);
            fprintf(json_, ", \"pass\": %s}", pass ? "true" : "false");
        }
    }
    if (json_) fprintf(json_, "]");
    CHECK(trajectory_failed == 0);

    /* 3. Determinism: a second step from the same start, the same batches: bitwise the same. */
    unsigned char **parameters = download_parameters_(step, &s->list);
    uform_cuda_step_t *again = step_create_(s, recompute, 0);
    float *losses_again = calloc(s->steps + 1, sizeof(float));
    if (!losses_again) exit(1);
    gpu_trajectory_(again, s, losses_again);
    unsigned char **parameters_again = download_parameters_(again, &s->list);
    int same_losses = !memcmp(losses + 1, losses_again + 1, s->steps * sizeof(float));
    size_t differing = 0;
    for (size_t i = 0; i < count; ++i) {
        size_t size = s->list.elements[i] * (s->list.is_matrix[i] ? 2 : 4);
        if (memcmp(parameters[i], parameters_again[i], size)) {
            if (!differing) printf("  first differing tensor after replay: %s\n", s->list.names[i]);
            differing++;
        }
    }
    printf("determinism (a second step replaying the %zu steps): losses %s, parameters %s\n", s->steps,
           same_losses ? "bitwise identical" : "DIFFER", differing ? "DIFFER" : "bitwise identical");
    CHECK(same_losses);
    CHECK(differing == 0);
    if (json_)
        fprintf(json_, ", \"determinism\": {\"losses_identical\": %s, \"parameters_differing_tensors\": %zu}",
                same_losses ? "true" : "false", differing);
    uform_cuda_step_destroy(again);
    free(losses_again);
    free_all_(parameters, count), free_all_(parameters_again, count);
    uform_cuda_step_destroy(step);

    /* 4. The planted control: the same gradient check must reject a dropped RMSNorm term. */
    uform_cuda_step_t *planted = step_create_(s, recompute, 1);
    float planted_loss;
    float **planted_gradients = gpu_gradients_(planted, s, &planted_loss);
    double *planted_errors = calloc(count, sizeof(double));
    if (!planted_errors) exit(1);
    printf("planted control (every block's RMSNorm backward without its shared-scale term; FAIL expected):\n");
    size_t rejected = gradient_table_(s, planted_gradients, cpu, planted_errors, 1);
    printf("  %s: %zu block tensor(s) out of bound\n", rejected ? "control caught" : "MISSED", rejected);
    CHECK(rejected > 0);
    if (json_) {
        fprintf(json_, ", \"control\": {\"caught\": %s, \"rejected_block_tensors\": %zu, \"errors\": [",
                rejected ? "true" : "false", rejected);
        for (size_t i = 0; i < count; ++i) {
            fprintf(json_, "%s{\"tensor\": \"%s\", \"error\": ", i ? ", " : "", s->list.names[i]);
            json_number_(planted_errors[i]);
            fprintf(json_, "}");
        }
        fprintf(json_, "]}");
    }
    uform_cuda_step_destroy(planted);
    free_all_(planted_gradients, count);
    free(planted_errors), free(errors);

    /* Not a requirement: recomputation replays the same kernels on the same inputs, so it should repeat bitwise. */
    if (result->gradients) {
        size_t differ = 0;
        for (size_t i = 0; i < count; ++i)
            differ += memcmp(result->gradients[i], gradients[i], s->list.elements[i] * 4) != 0;
        int same = !differ && !memcmp(result->losses + 1, losses + 1, s->steps * sizeof(float));
        printf("(information) gradients and losses %s those without recomputation\n",
               same ? "bitwise equal" : "differ from");
        if (json_) fprintf(json_, ", \"bitwise_equal_to_recompute_0\": %s", same ? "true" : "false");
        free_all_(result->gradients, count);
        free(result->losses);
    }
    result->gradients = gradients, result->losses = losses;
    int ok = failed_ == failures_before;
    if (json_) fprintf(json_, ", \"passed\": %s}", ok ? "true" : "false");
    return ok;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* tables interleave with stderr's messages in the order they happened */
    char const *json_path = NULL;
    setup_t s = {.width = 128, .depth = 2, .rows = 4, .columns = 256, .steps = 20};
    for (int i = 1; i < argc; ++i) {
        char const *flag = argv[i];
        if (i + 1 >= argc) {
            fprintf(stderr, "step_parity: %s needs a value\n", flag);
            return 2;
        }
        char const *value = argv[++i];
        size_t number = strtoull(value, NULL, 10);
        if (!strcmp(flag, "--json")) json_path = value;
        else if (!strcmp(flag, "--width")) s.width = number;
        else if (!strcmp(flag, "--depth")) s.depth = number;
        else if (!strcmp(flag, "--rows")) s.rows = number;
        else if (!strcmp(flag, "--columns")) s.columns = number;
        else if (!strcmp(flag, "--steps")) s.steps = number;
        else {
            fprintf(stderr, "step_parity: unknown flag %s (--json, --width, --depth, --rows, --columns, --steps)\n", flag);
            return 2;
        }
    }
    if (!s.width || s.width % 64 || !s.depth || !s.rows || !s.columns || !s.steps) {
        fprintf(stderr, "step_parity: need a width that is a positive multiple of 64, and positive depth, rows, columns "
                        "and steps\n");
        return 2;
    }
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        printf("step_parity: skipped: no CUDA device\n");
        return 77;
    }
    struct cudaDeviceProp properties;
    CUDA_OK(cudaGetDeviceProperties(&properties, 0));
    size_t cells = s.rows * s.columns;

    /* The CPU side: a WIDTHxDEPTH model from a fixed seed and an MLM trainer at a constant rate. */
    char tier[32];
    snprintf(tier, sizeof(tier), "%zux%zu", s.width, s.depth);
    uform_config_t config;
    UFORM_OK(uform_config_from_tier(tier, &config));
    uform_model_t *model = NULL;
    UFORM_OK(uform_model_init(&config, model_seed_, &model));
    uform_train_options_default(&s.options);
    s.options.objective = uform_objective_mlm_k;
    s.options.learning_rate = learning_rate_;
    s.options.warmup_steps = 0, s.options.total_steps = 0;
    uform_trainer_t *trainer = NULL;
    UFORM_OK(uform_trainer_create(model, &s.options, cells, &trainer));

    /* The step's tensor names (from a first step), and the CPU's start values under them. */
    uform_cuda_step_config_t probe_config = {.width = s.width, .depth = s.depth, .cells = cells, .beta1 = s.options.beta1,
                                             .beta2 = s.options.beta2, .clip = s.options.clip};
    uform_cuda_step_t *probe = NULL;
    char error[256] = "";
    if (uform_cuda_step_create(&probe, &probe_config, error, sizeof(error))) {
        fprintf(stderr, "step_parity: %s\n", error);
        return 1;
    }
    uform_cuda_tensor_t *tensors = uform_cuda_step_tensors(probe, &s.list.count);
    s.list.names = calloc(s.list.count, sizeof(*s.list.names));
    s.list.elements = calloc(s.list.count, sizeof(size_t));
    s.list.is_matrix = calloc(s.list.count, sizeof(int));
    if (!s.list.names || !s.list.elements || !s.list.is_matrix) return 1;
    for (size_t i = 0; i < s.list.count; ++i) {
        snprintf(s.list.names[i], sizeof(s.list.names[i]), "%s", tensors[i].name);
        s.list.elements[i] = tensors[i].rows * tensors[i].columns;
        s.list.is_matrix[i] = tensors[i].is_matrix;
        if (!points_(tensors[i].name, s.depth)) {
            fprintf(stderr, "step_parity: no rounding-point count for the step's tensor %s; extend points_()\n",
                    tensors[i].name);
            return 1;
        }
    }
    uform_cuda_step_destroy(probe);
    s.start = snapshot_(trainer, &s.list);

    s.batches = calloc(s.steps + 1, sizeof(host_batch_t));
    if (!s.batches) return 1;
    for (size_t t = 0; t <= s.steps; ++t) batch_alloc_(&s.batches[t], s.rows, s.columns), batch_make_(&s.batches[t], t);

    printf("step parity on %s: width %zu, depth %zu, %zu x %zu cells, %zu tensors; u = 2^-8\nbatch 0's segments:",
           properties.name, s.width, s.depth, s.rows, s.columns, s.list.count);
    for (size_t i = 0; i < s.batches[0].segments; ++i) printf(" %u", s.batches[0].spans[2 * i + 1]);
    printf("\n");

    /* The CPU reference, once: gradients on batch 0, then the loss curve of `steps` steps. */
    reference_t cpu = {0};
    cpu.gradients = calloc(s.list.count, sizeof(float *));
    cpu.losses = calloc(s.steps + 1, sizeof(double));
    cpu.progress = calloc(s.steps + 1, sizeof(double));
    if (!cpu.gradients || !cpu.losses || !cpu.progress) return 1;
    uform_losses_t losses;
    uform_batch_t batch = batch_cpu_(&s.batches[0]);
    UFORM_OK(uform_trainer_gradients(trainer, &batch, &losses));
    cpu.loss0 = losses.total;
    for (size_t i = 0; i < s.list.count; ++i) {
        if (!(cpu.gradients[i] = malloc(s.list.elements[i] * 4))) return 1;
        UFORM_OK(uform_trainer_read(trainer, s.list.names[i], uform_slot_gradient_k, cpu.gradients[i], s.list.elements[i]));
    }
    /* Batch 0's loss after each update measures what the updates did, free of batch-to-batch noise. */
    double fixed = cpu.loss0;
    uform_batch_t fixed_batch = batch_cpu_(&s.batches[0]);
    for (size_t t = 1; t <= s.steps; ++t) {
        batch = batch_cpu_(&s.batches[t]);
        UFORM_OK(uform_trainer_step(trainer, &batch, &losses));
        cpu.losses[t] = losses.total;
        if (t == s.steps) break;
        UFORM_OK(uform_trainer_gradients(trainer, &fixed_batch, &losses));
        cpu.progress[t + 1] = cpu.progress[t] + fabs(losses.total - fixed);
        fixed = losses.total;
    }

    if (json_path && !(json_ = fopen(json_path, "w"))) {
        fprintf(stderr, "step_parity: cannot write %s\n", json_path);
        return 1;
    }
    if (json_)
        fprintf(json_,
                "{\"device\": \"%s\", \"width\": %zu, \"depth\": %zu, \"rows\": %zu, \"columns\": %zu, \"steps\": %zu, "
                "\"learning_rate\": %g, \"unit_roundoff\": %.9g, \"runs\": [",
                properties.name, s.width, s.depth, s.rows, s.columns, s.steps, learning_rate_, bf16_unit_);
    run_result_t kept = {0};
    int ok = 1;
    for (int recompute = 0; recompute <= 1; ++recompute) ok &= run_(&s, &cpu, recompute, &kept);
    if (json_) {
        fprintf(json_, "], \"passed\": %s}\n", ok ? "true" : "false");
        fclose(json_);
    }
    printf("\nstep parity: %s\n", ok ? "all checks passed, controls caught" : "FAILED");

    free_all_(kept.gradients, s.list.count);
    free(kept.losses);
    free_all_(cpu.gradients, s.list.count);
    free(cpu.losses), free(cpu.progress);
    free_all_(s.start, s.list.count);
    for (size_t t = 0; t <= s.steps; ++t) batch_free_(&s.batches[t]);
    free(s.batches);
    free(s.list.names), free(s.list.elements), free(s.list.is_matrix);
    uform_trainer_close(trainer);
    uform_model_close(model);
    return check_report();
}
