/*  test_train.c: the CPU trainer's pass against the inference forward (Float32 mode), loss
 *  falling under Adafactor, exact resume through saved checkpoints and optimizer state, and the
 *  world verbs' argument checks. Gradients are checked against float64 finite differences in
 *  test/python/test_gradients.py, worlds of ranks in test/python/test_world.py. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "uform/uform.h"
#include "check.h"
#include "train/trainer.h" /* to mark a CPU trainer as a CUDA one: a build without a GPU makes none */


enum { rows_k = 2, columns_k = 48 };

typedef struct {
    uint8_t kinds[rows_k * columns_k];
    uint32_t values[rows_k * columns_k];
    int32_t segments[rows_k * columns_k], positions[rows_k * columns_k * 3], targets[rows_k * columns_k];
    uform_batch_t batch;
} mlm_batch_t;

/* Two rows of three segments each, every fifth cell masked. */
static void make_mlm_batch(mlm_batch_t *b, unsigned seed) {
    size_t lengths[3] = {20, 17, 9};
    for (size_t row = 0; row < rows_k; ++row) {
        size_t column = 0;
        for (size_t s = 0; s < 3; ++s)
            for (size_t i = 0; i < lengths[s]; ++i, ++column) {
                size_t cell = row * columns_k + column;
                uint32_t byte = (uint32_t)(rand_r(&seed) % 64 + 32);
                int masked = (i % 5) == 2;
                b->kinds[cell] = uform_cell_byte_k;
                b->values[cell] = masked ? uform_mask_k : byte;
                b->targets[cell] = masked ? (int32_t)byte : -1;
                b->segments[cell] = (int32_t)s;
                for (int axis = 0; axis < 3; ++axis) b->positions[cell * 3 + axis] = (int32_t)i;
            }
        for (; column < columns_k; ++column) {
            size_t cell = row * columns_k + column;
            b->kinds[cell] = uform_cell_padding_k, b->values[cell] = uform_pad_k, b->segments[cell] = -1, b->targets[cell] = -1;
            for (int axis = 0; axis < 3; ++axis) b->positions[cell * 3 + axis] = 0;
        }
    }
    b->batch = (uform_batch_t){.grid = {rows_k, columns_k, b->kinds, b->values, b->segments, b->positions},
                               .targets = b->targets};
}

static uform_model_t *make_model(void) {
    uform_config_t config;
    uform_model_t *model = NULL;
    uform_config_from_tier("64x2", &config);
    config.columns = columns_k;
    uform_model_init(&config, 3, &model);
    return model;
}

/* The trainer's MLM loss equals cross-entropy of the inference logits (Float32 products both):
 * both sum the same products in Float32, so they agree to ~1e-5 relative. */
static void test_pass_matches_forward(void) {
    uform_model_t *model = make_model();
    CHECK(model && uform_model_set_precision(model, uform_precision_f32_k) == uform_ok_k);
    mlm_batch_t b;
    make_mlm_batch(&b, 7);
    float *logits = malloc(rows_k * columns_k * uform_vocabulary_k * sizeof(float));
    uform_outputs_t outputs = {.logits = logits};
    CHECK(uform_forward(model, &b.batch.grid, &outputs) == uform_ok_k);
    double total = 0;
    size_t scored = 0;
    for (size_t cell = 0; cell < rows_k * columns_k; ++cell) {
        if (b.targets[cell] < 0) continue;
        float const *row = logits + cell * uform_vocabulary_k;
        double largest = -INFINITY, sum = 0;
        for (size_t v = 0; v < uform_vocabulary_k; ++v) largest = row[v] > largest ? row[v] : largest;
        for (size_t v = 0; v < uform_vocabulary_k; ++v) sum += exp(row[v] - largest);
        total += largest + log(sum) - row[b.targets[cell]];
        scored++;
    }
    uform_train_options_t options;
    uform_train_options_default(&options);
    uform_trainer_t *trainer = NULL;
    uform_losses_t losses;
    CHECK(uform_trainer_create(model, &options, rows_k * columns_k, &trainer) == uform_ok_k);
    CHECK(uform_trainer_gradients(trainer, &b.batch, &losses) == uform_ok_k);
    CHECK(losses.scored == scored);
    CHECK(fabs(losses.mlm - total / (double)scored) < 1e-5 * losses.mlm);
    uform_trainer_close(trainer);
    uform_model_close(model);
    free(logits);
}

/* 40 Adafactor steps on one batch cut the MLM loss by at least a third: a micro model memorizes. */
static void test_loss_falls(void) {
    uform_model_t *model = make_model();
    mlm_batch_t b;
    make_mlm_batch(&b, 11);
    uform_train_options_t options;
    uform_train_options_default(&options);
    options.learning_rate = 3e-3;
    options.warmup_steps = 5;
    uform_trainer_t *trainer = NULL;
    CHECK(uform_trainer_create(model, &options, rows_k * columns_k, &trainer) == uform_ok_k);
    uform_losses_t losses;
    double first = 0;
    for (int step = 0; step < 40; ++step) {
        CHECK(uform_trainer_step(trainer, &b.batch, &losses) == uform_ok_k);
        if (!step) first = losses.mlm;
    }
    CHECK(losses.mlm < first * 2.0 / 3.0);
    fprintf(stderr, "loss: %.4f -> %.4f after 40 steps\n", first, losses.mlm);
    uform_trainer_close(trainer);
    uform_model_close(model);
}

/* Resume is exact: 6 straight steps equal 3 steps, a save and reload of model and optimizer state,
 * and 3 more, bit for bit. */
static void test_resume_is_exact(void) {
    char folder[] = "/tmp/uform_test_train_XXXXXX";
    CHECK(mkdtemp(folder) != NULL);
    char state[256];
    snprintf(state, sizeof(state), "%s/optimizer.safetensors", folder);
    uform_train_options_t options;
    uform_train_options_default(&options);
    options.learning_rate = 1e-3;
    options.warmup_steps = 2;
    options.total_steps = 6;
    float straight[64 * 3 * 64], resumed[64 * 3 * 64];
    mlm_batch_t batches[6];
    for (unsigned i = 0; i < 6; ++i) make_mlm_batch(&batches[i], 100 + i);
    uform_losses_t losses;

    uform_model_t *model = make_model();
    uform_trainer_t *trainer = NULL;
    CHECK(uform_trainer_create(model, &options, rows_k * columns_k, &trainer) == uform_ok_k);
    for (int i = 0; i < 6; ++i) CHECK(uform_trainer_step(trainer, &batches[i].batch, &losses) == uform_ok_k);
    CHECK(uform_trainer_read(trainer, "blocks.1.qkv", uform_slot_parameter_k, straight, 3 * 64 * 64) == uform_ok_k);
    double straight_loss = losses.total;
    uform_trainer_close(trainer);
    uform_model_close(model);

    model = make_model();
    CHECK(uform_trainer_create(model, &options, rows_k * columns_k, &trainer) == uform_ok_k);
    for (int i = 0; i < 3; ++i) CHECK(uform_trainer_step(trainer, &batches[i].batch, &losses) == uform_ok_k);
    CHECK(uform_model_save(model, folder, NULL) == uform_ok_k);
    CHECK(uform_trainer_save_state(trainer, state) == uform_ok_k);
    uform_trainer_close(trainer);
    uform_model_close(model);
    CHECK(uform_model_open(folder, &model) == uform_ok_k);
    CHECK(uform_trainer_create(model, &options, rows_k * columns_k, &trainer) == uform_ok_k);
    CHECK(uform_trainer_load_state(trainer, state) == uform_ok_k);
    CHECK(uform_trainer_steps(trainer) == 3);
    for (int i = 3; i < 6; ++i) CHECK(uform_trainer_step(trainer, &batches[i].batch, &losses) == uform_ok_k);
    CHECK(uform_trainer_read(trainer, "blocks.1.qkv", uform_slot_parameter_k, resumed, 3 * 64 * 64) == uform_ok_k);
    CHECK(!memcmp(straight, resumed, sizeof(straight)));
    CHECK(losses.total == straight_loss);
    uform_trainer_close(trainer);
    uform_model_close(model);
    char command[512];
    snprintf(command, sizeof(command), "rm -rf '%s'", folder);
    CHECK(system(command) == 0);
}

/* uform_trainer_gradients_world refuses 0 ranks, NULL batches, a bad batch (naming its rank) and a
 * CUDA trainer; a world of two equal MLM batches has their loss exactly (each rank's mean, averaged). */
static void test_world_arguments(void) {
    uform_model_t *model = make_model();
    mlm_batch_t b, bad;
    make_mlm_batch(&b, 5);
    make_mlm_batch(&bad, 5);
    bad.batch.targets = NULL;
    uform_train_options_t options;
    uform_train_options_default(&options);
    uform_trainer_t *trainer = NULL;
    uform_losses_t losses, single;
    CHECK(uform_trainer_create(model, &options, rows_k * columns_k, &trainer) == uform_ok_k);
    CHECK(fails_with(uform_trainer_gradients_world(trainer, &b.batch, 0, &losses), uform_invalid_argument_k, "0 ranks", NULL));
    CHECK(fails_with(uform_trainer_gradients_world(trainer, NULL, 2, &losses), uform_invalid_argument_k, "NULL", NULL));
    CHECK(fails_with(uform_trainer_gradients_world(trainer, &b.batch, 1, NULL), uform_invalid_argument_k, "NULL", NULL));
    uform_batch_t pair[2] = {b.batch, bad.batch};
    CHECK(fails_with(uform_trainer_gradients_world(trainer, pair, 2, &losses), uform_invalid_argument_k, "rank 1 of 2",
                     "targets"));
    CHECK(fails_with(uform_trainer_step_world(trainer, pair, 2, &losses), uform_invalid_argument_k, "rank 1 of 2", NULL));
    CHECK(uform_trainer_steps(trainer) == 0);
    trainer->options.device = uform_device_cuda_k;
    CHECK(fails_with(uform_trainer_gradients_world(trainer, &b.batch, 1, &losses), uform_unsupported_k, "CUDA", NULL));
    CHECK(fails_with(uform_trainer_step_world(trainer, &b.batch, 1, &losses), uform_unsupported_k, "CUDA", NULL));
    trainer->options.device = uform_device_cpu_k;
    pair[1] = b.batch;
    CHECK(uform_trainer_gradients(trainer, &b.batch, &single) == uform_ok_k);
    CHECK(uform_trainer_gradients_world(trainer, pair, 2, &losses) == uform_ok_k);
    CHECK(losses.mlm == single.mlm && losses.scored == 2 * single.scored);
    uform_trainer_close(trainer);
    uform_model_close(model);
}

int main(void) {
    test_world_arguments();
    test_pass_matches_forward();
    test_loss_falls();
    test_resume_is_exact();
    return check_report();
}
