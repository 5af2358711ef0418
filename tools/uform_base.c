/*  uform_base.c: the trainer command. Trains a model on a mixture with one objective on the CPU
 *  (or on one GPU, through train.h), with a live progress line, a JSONL log, atomic checkpoints
 *  and exact resume. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "data/batcher.h"
#include "data/mixture.h"
#include "data/prefetch.h"
#include "uform/uform.h"

static char const *const uform_base_usage_ =
    "usage: uform_base --mixture FILE --output DIR [options]\n"
    "\n"
    "Trains a UForm model on the CPU (or one GPU: --device cuda) and writes checkpoints to\n"
    "DIR/step-NNNNNNNN (DIR/latest points at the newest), with DIR/log.jsonl holding one line per step.\n"
    "SIGINT or SIGTERM stops it after the step in flight with a checkpoint (--resume continues; exit\n"
    "status 128 + the signal); a second one kills it at once.\n"
    "\n"
    "  --tier TIER              tiny, small, medium, large, xl or WIDTHxDEPTH (default 128x2); ignored\n"
    "                           with --resume or --init-from\n"
    "  --mixture FILE           sources, weights, row width and objective (docs/data.md)\n"
    "  --objective NAME         mlm, rerank or contrastive (default: the mixture's)\n"
    "  --steps N                train until step N (default 100)\n"
    "  --rows N                 rows per batch (default 8); each row holds the mixture's columns\n"
    "  --learning-rate X        peak learning rate, positive (default: the tier's)\n"
    "  --warmup N               linear warm-up steps (default 10% of --steps); cosine decay after\n"
    "  --seed S                 seed of the initialization and the data order (default 0)\n"
    "  --output DIR             run folder (created)\n"
    "  --resume DIR             continue a run from its latest (or a given) checkpoint, bit for bit\n"
    "  --init-from DIR          warm start: keep the shared weights, initialize the objective's head\n"
    "  --keep-head              with --init-from: keep the checkpoint's objective head (and SigLIP's scale and\n"
    "                           bias), to train a finished embedder further; refused when it has none\n"
    "  --train-only PARTS       train these parts only, comma-separated (bytes, vision, video, audio, encoder,\n"
    "                           pool, rerank, mlm, siglip, mae, mae_audio, mae_video); the rest stay as loaded. With --init-from a checkpoint,\n"
    "                           'rerank,siglip' trains a new rerank head over its frozen encoder (default: all)\n"
    "  --save-every N           checkpoint every N steps (default: only at the end)\n"
    "  --keep N                 step folders kept (default 2)\n"
    "  --tcr-lambda X           total coding rate weight (default 0)\n"
    "  --lipschitz-lambda X     spectral penalty weight (default 0)\n"
    "  --threads N              worker threads (default: all cores)\n"
    "  --image-cache-mb N       decoded image patches kept in memory across batches, in MiB (default\n"
    "                           1024; 0 keeps none and decodes every batch's images)\n"
    "  --device cpu|cuda        where the steps run (default cpu); cuda trains every objective, with\n"
    "                           --tcr-lambda and --lipschitz-lambda too except for mlm; its checkpoints\n"
    "                           resume on either device\n"
    "  --recompute 0|1|2        cuda: 1 (default) replays each block's forward in the backward pass instead\n"
    "                           of keeping its activations (less device memory, one more forward); 2 also\n"
    "                           keeps each block's attention output, so the replay skips attention (2 bytes\n"
    "                           per cell and width a block more); 0 keeps every activation\n"
    "  --quiet                  no progress line\n";

typedef struct {
    char const *tier, *mixture, *objective, *output, *resume, *init_from, *device, *train_only;
    double learning_rate, tcr_lambda, lipschitz_lambda;
    unsigned long long steps, rows, warmup, seed, save_every, keep, threads, recompute, image_cache_mb;
    int warmup_set, quiet, cuda, keep_head;
} uform_base_options_t;


static int uform_base_fail_(uform_status_t status) {
    fprintf(stderr, "uform_base: %s error: %s\n", uform_status_name(status), uform_last_error());
    return 1;
}

/* --device cuda: refuses what runs on the CPU only so far, then a build or machine without CUDA.
 * Returns 0 to go on (`device` then names the GPU), else the exit code, having said why. */
static int uform_base_check_device_(uform_base_options_t const *options, uform_objective_t objective, char *device,
                                    size_t capacity) {
    snprintf(device, capacity, "cpu");
    if (!options->cuda) return 0;
    /* The GPU step's spectral terms sit in the pool's path, which its mlm step does not have. */
    int mlm = objective == uform_objective_mlm_k;
    char const *cpu_only = mlm && options->tcr_lambda > 0         ? "--tcr-lambda with the mlm objective"
                           : mlm && options->lipschitz_lambda > 0 ? "--lipschitz-lambda with the mlm objective"
                                                                  : NULL;
    if (cpu_only) {
        fprintf(stderr, "uform_base: %s runs on the CPU only so far; --device cuda trains mlm, and contrastive and "
                        "rerank with or without TCR and Lipschitz\n", cpu_only);
        return 2;
    }
    if (uform_device_name(uform_device_cuda_k, device, capacity) == uform_ok_k) return 0;
    fprintf(stderr, "uform_base: --device cuda: %s\n", uform_last_error());
    return 2;
}

static int uform_base_parse_(int argc, char **argv, uform_base_options_t *options) {
    *options = (uform_base_options_t){.tier = "128x2", .steps = 100, .rows = 8, .keep = 2, .device = "cpu", .recompute = 1,
                                      .image_cache_mb = uform_batcher_image_cache_mb_k};
    for (int i = 1; i < argc; ++i) {
        char const *flag = argv[i];
        if (!strcmp(flag, "--help") || !strcmp(flag, "-h")) {
            fputs(uform_base_usage_, stdout);
            exit(0);
        }
        if (!strcmp(flag, "--quiet")) {
            options->quiet = 1;
            continue;
        }
        if (!strcmp(flag, "--keep-head")) {
            options->keep_head = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "uform_base: %s needs a value (see --help)\n", flag);
            return 0;
        }
        char const *value = argv[++i];
        char *end = NULL;
        struct { char const *flag; char const **text; double *real; unsigned long long *count; } const table[] = {
            {"--tier", &options->tier, NULL, NULL},
            {"--mixture", &options->mixture, NULL, NULL},
            {"--objective", &options->objective, NULL, NULL},
            {"--output", &options->output, NULL, NULL},
            {"--resume", &options->resume, NULL, NULL},
            {"--init-from", &options->init_from, NULL, NULL},
            {"--device", &options->device, NULL, NULL},
            {"--train-only", &options->train_only, NULL, NULL},
            {"--learning-rate", NULL, &options->learning_rate, NULL},
            {"--tcr-lambda", NULL, &options->tcr_lambda, NULL},
            {"--lipschitz-lambda", NULL, &options->lipschitz_lambda, NULL},
            {"--steps", NULL, NULL, &options->steps},
            {"--rows", NULL, NULL, &options->rows},
            {"--warmup", NULL, NULL, &options->warmup},
            {"--seed", NULL, NULL, &options->seed},
            {"--save-every", NULL, NULL, &options->save_every},
            {"--keep", NULL, NULL, &options->keep},
            {"--threads", NULL, NULL, &options->threads},
            {"--recompute", NULL, NULL, &options->recompute},
            {"--image-cache-mb", NULL, NULL, &options->image_cache_mb},
        };
        size_t found = sizeof(table) / sizeof(table[0]);
        for (size_t t = 0; t < sizeof(table) / sizeof(table[0]); ++t)
            if (!strcmp(table[t].flag, flag)) found = t;
        if (found == sizeof(table) / sizeof(table[0])) {
            fprintf(stderr, "uform_base: unknown option '%s' (see --help)\n", flag);
            return 0;
        }
        errno = 0;
        if (table[found].text) *table[found].text = value;
        else if (table[found].real) {
            *table[found].real = strtod(value, &end);
            if (errno || !end || *end || *table[found].real < 0 || !isfinite(*table[found].real)) {
                fprintf(stderr, "uform_base: %s needs a non-negative number, got '%s'\n", flag, value);
                return 0;
            }
        } else {
            *table[found].count = strtoull(value, &end, 10);
            if (errno || !end || *end || value[0] == '-') {
                fprintf(stderr, "uform_base: %s needs a non-negative integer, got '%s'\n", flag, value);
                return 0;
            }
        }
        if (!strcmp(flag, "--warmup")) options->warmup_set = 1;
        if (!strcmp(flag, "--learning-rate") && *table[found].real == 0) { /* 0 is the library's "the tier's": not a freeze */
            fprintf(stderr, "uform_base: --learning-rate must be positive (leave it out for the tier's; --train-only "
                            "freezes tensors)\n");
            return 0;
        }
    }
    if (!options->mixture || !options->output) {
        fprintf(stderr, "uform_base: --mixture and --output are required (see --help)\n");
        return 0;
    }
    if (options->resume && options->init_from) {
        fprintf(stderr, "uform_base: --resume and --init-from exclude each other\n");
        return 0;
    }
    if (options->keep_head && !options->init_from) {
        fprintf(stderr, "uform_base: --keep-head needs --init-from\n");
        return 0;
    }
    if (!options->rows || !options->steps) {
        fprintf(stderr, "uform_base: --rows and --steps must be positive\n");
        return 0;
    }
    options->cuda = !strcmp(options->device, "cuda");
    if (!options->cuda && strcmp(options->device, "cpu")) {
        fprintf(stderr, "uform_base: --device is cpu or cuda, not '%s'\n", options->device);
        return 0;
    }
    if (options->recompute > 2) {
        fprintf(stderr, "uform_base: --recompute is 0, 1 or 2, not %llu\n", options->recompute);
        return 0;
    }
    return 1;
}

/* The batcher state as JSON (64-bit words as hex strings, which JSON integers cannot hold). */
static char *uform_state_json_(uform_batcher_state_t const *state, size_t step, uform_base_options_t const *options) {
    json_t *root = json_object(), *batcher = json_object(), *epochs = json_array(), *cursors = json_array();
    json_t *waiting_sources = json_array(), *waiting_records = json_array();
    char word[32];
#define UFORM_WORD_(field)                                                                                          \
    snprintf(word, sizeof(word), "%016llx", (unsigned long long)state->field);                                      \
    json_object_set_new(batcher, #field, json_string(word));
    UFORM_WORD_(fingerprint)
    UFORM_WORD_(rng)
    UFORM_WORD_(batches)
    UFORM_WORD_(segments)
    UFORM_WORD_(truncated)
#undef UFORM_WORD_
    json_object_set_new(batcher, "sources_count", json_integer(state->sources_count));
    json_object_set_new(batcher, "waiting_count", json_integer(state->waiting_count));
    for (size_t i = 0; i < state->sources_count; ++i) {
        snprintf(word, sizeof(word), "%016llx", (unsigned long long)state->epochs[i]);
        json_array_append_new(epochs, json_string(word));
        snprintf(word, sizeof(word), "%016llx", (unsigned long long)state->cursors[i]);
        json_array_append_new(cursors, json_string(word));
    }
    for (size_t i = 0; i < state->waiting_count; ++i) {
        json_array_append_new(waiting_sources, json_integer(state->waiting_sources[i]));
        json_array_append_new(waiting_records, json_integer(state->waiting_records[i]));
    }
    json_object_set_new(batcher, "epochs", epochs);
    json_object_set_new(batcher, "cursors", cursors);
    json_object_set_new(batcher, "waiting_sources", waiting_sources);
    json_object_set_new(batcher, "waiting_records", waiting_records);
    json_object_set_new(root, "step", json_integer((json_int_t)step));
    json_object_set_new(root, "mixture", json_string(options->mixture));
    json_object_set_new(root, "rows", json_integer((json_int_t)options->rows));
    json_object_set_new(root, "seed", json_integer((json_int_t)options->seed));
    json_object_set_new(root, "batcher", batcher);
    if (options->cuda) json_object_set_new(root, "device", json_string("cuda"));
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    return text;
}

static unsigned long long uform_word_(json_t const *object, char const *key, int *ok) {
    char const *text = json_string_value(json_object_get(object, key));
    char *end = NULL;
    unsigned long long value = text ? strtoull(text, &end, 16) : 0;
    if (!text || !end || *end) *ok = 0;
    return value;
}

static uform_status_t uform_state_parse_(char const *path, uform_batcher_state_t *state, size_t *step,
                                         unsigned long long *seed, unsigned long long *rows) {
    json_error_t error;
    json_t *root = json_load_file(path, 0, &error);
    if (!root) {
        fprintf(stderr, "uform_base: %s: %s\n", path, error.text);
        return uform_format_k;
    }
    json_t *batcher = json_object_get(root, "batcher");
    int ok = json_is_object(batcher) && json_is_integer(json_object_get(root, "step"));
    memset(state, 0, sizeof(*state));
    if (ok) {
        state->fingerprint = uform_word_(batcher, "fingerprint", &ok);
        state->rng = uform_word_(batcher, "rng", &ok);
        state->batches = uform_word_(batcher, "batches", &ok);
        state->segments = uform_word_(batcher, "segments", &ok);
        state->truncated = uform_word_(batcher, "truncated", &ok);
        state->sources_count = (uint32_t)json_integer_value(json_object_get(batcher, "sources_count"));
        state->waiting_count = (uint32_t)json_integer_value(json_object_get(batcher, "waiting_count"));
        json_t *epochs = json_object_get(batcher, "epochs"), *cursors = json_object_get(batcher, "cursors");
        json_t *sources = json_object_get(batcher, "waiting_sources"), *records = json_object_get(batcher, "waiting_records");
        ok = ok && state->sources_count <= uform_mixture_max_sources_k && state->waiting_count <= uform_batcher_lookahead_k &&
             json_array_size(epochs) == state->sources_count && json_array_size(cursors) == state->sources_count &&
             json_array_size(sources) == state->waiting_count && json_array_size(records) == state->waiting_count;
        for (size_t i = 0; ok && i < state->sources_count; ++i) {
            char const *epoch = json_string_value(json_array_get(epochs, i)), *cursor = json_string_value(json_array_get(cursors, i));
            ok = epoch && cursor;
            if (ok) state->epochs[i] = strtoull(epoch, NULL, 16), state->cursors[i] = strtoull(cursor, NULL, 16);
        }
        for (size_t i = 0; ok && i < state->waiting_count; ++i) {
            state->waiting_sources[i] = (uint32_t)json_integer_value(json_array_get(sources, i));
            state->waiting_records[i] = (uint32_t)json_integer_value(json_array_get(records, i));
        }
        *step = (size_t)json_integer_value(json_object_get(root, "step"));
        *seed = (unsigned long long)json_integer_value(json_object_get(root, "seed"));
        *rows = (unsigned long long)json_integer_value(json_object_get(root, "rows"));
    }
    json_decref(root);
    if (!ok) {
        fprintf(stderr, "uform_base: %s: not a trainer state written by uform_base\n", path);
        return uform_format_k;
    }
    return uform_ok_k;
}

static double uform_clock_(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void uform_duration_(double seconds, char *text, size_t capacity) {
    if (seconds < 60) snprintf(text, capacity, "%.0fs", seconds);
    else if (seconds < 3600) snprintf(text, capacity, "%dm%02ds", (int)(seconds / 60), (int)fmod(seconds, 60));
    else snprintf(text, capacity, "%dh%02dm", (int)(seconds / 3600), (int)fmod(seconds / 60, 60));
}

/* What a submitted step is reported with once it ends. */
typedef struct uform_base_launch_t {
    size_t cells;
    double rate;
} uform_base_launch_t;

/* What the log and the progress line carry from step to step. */
typedef struct uform_base_progress_t {
    FILE *log;
    uform_base_options_t const *options;
    int interactive;
    size_t first_step;
    double start, reported, cells_done; /* clocks at the start and at the last report; cells trained */
    uform_losses_t losses;              /* of the last step reported */
    uform_base_launch_t launched[2];    /* the steps submitted and not yet reported, by step parity */
} uform_base_progress_t;

/* One finished step (`step` counted from 1) into the JSONL log and onto the progress line. */
static void uform_base_report_(uform_base_progress_t *progress, size_t step, size_t cells, double rate, double seconds,
                               uform_losses_t const *losses) {
    uform_base_options_t const *options = progress->options;
    progress->losses = *losses;
    progress->cells_done += (double)cells;
    double now = uform_clock_(), elapsed = now - progress->start, rate_bytes = progress->cells_done / elapsed;
    progress->reported = now;
    fprintf(progress->log, "{\"step\": %zu, \"loss\": %.6f, \"mlm\": %.6f, \"siglip\": %.6f, \"rerank\": %.6f, \"tcr\": %.6f, "
                           "\"lipschitz\": %.6f, \"reconstruction\": %.6f, \"learning_rate\": %.6g, \"cells\": %zu, \"seconds\": %.4f, \"bytes_per_s\": %.1f}\n",
            step, losses->total, losses->mlm, losses->siglip, losses->rerank, losses->tcr, losses->lipschitz, losses->reconstruction, rate, cells,
            seconds, rate_bytes);
    fflush(progress->log);
    size_t done = step - progress->first_step, left = (size_t)options->steps - step;
    char eta[32];
    uform_duration_(elapsed / (double)done * (double)left, eta, sizeof(eta));
    if (progress->interactive)
        fprintf(stderr, "\rstep %zu/%llu  loss %.4f  lr %.2e  %.0f bytes/s  eta %s   ", step, options->steps, losses->total,
                rate, rate_bytes, eta);
    else if (!options->quiet && (done == 1 || step % (options->steps / 10 ? options->steps / 10 : 1) == 0))
        fprintf(stderr, "step %zu/%llu  loss %.4f  lr %.2e  %.0f bytes/s  eta %s\n", step, options->steps, losses->total, rate,
                rate_bytes, eta);
}

/* A submitted step has ended with `losses`: it is reported with what was recorded when it went in. */
static void uform_base_finished_(uform_base_progress_t *progress, uform_losses_t const *losses) {
    uform_base_launch_t const *launch = &progress->launched[losses->step % 2];
    uform_base_report_(progress, losses->step, launch->cells, launch->rate, uform_clock_() - progress->reported, losses);
}

static volatile sig_atomic_t uform_base_signal_ = 0;

/* The first SIGINT or SIGTERM asks the loop to stop after the step in flight and save; a second one kills. */
static void uform_base_on_signal_(int signal_number) {
    uform_base_signal_ = signal_number;
    signal(signal_number, SIG_DFL);
}

/* Before a save: ends (and reports) the step in flight, and brings the weights back into the model. */
static uform_status_t uform_base_settle_(uform_trainer_t *trainer, uform_base_progress_t *progress) {
    int finished = 0;
    uform_losses_t losses = {0};
    uform_status_t status = uform_trainer_sync(trainer, &finished, &losses);
    if (status == uform_ok_k && finished) uform_base_finished_(progress, &losses);
    return status;
}

static char *uform_command_line_(int argc, char **argv) {
    size_t length = 1;
    for (int i = 0; i < argc; ++i) length += strlen(argv[i]) + 3;
    char *line = calloc(length, 1);
    for (int i = 0; line && i < argc; ++i) {
        int quote = strpbrk(argv[i], " \t'\"") != NULL;
        strcat(line, i ? " " : "");
        strcat(line, quote ? "'" : "");
        strcat(line, argv[i]);
        strcat(line, quote ? "'" : "");
    }
    return line;
}

int main(int argc, char **argv) {
    uform_base_options_t options;
    if (!uform_base_parse_(argc, argv, &options)) return 2;
    char *command = uform_command_line_(argc, argv);
    uform_mixture_t mixture;
    uform_status_t status = uform_mixture_read(options.mixture, &mixture);
    if (status != uform_ok_k) return uform_base_fail_(status);
    uform_objective_t objective = mixture.objective;
    if (options.objective && uform_objective_from_name(options.objective, &objective) != uform_ok_k) {
        fprintf(stderr, "uform_base: --objective is mlm, rerank or contrastive, not '%s'\n", options.objective);
        return 2;
    }
    mixture.objective = objective;
    char device[256];
    int refused = uform_base_check_device_(&options, objective, device, sizeof(device));
    if (refused) {
        uform_mixture_close(&mixture);
        free(command);
        return refused;
    }

    /* The model: resumed, warm-started, or new. */
    uform_model_t *model = NULL;
    char source[4096] = "", state_path[4200] = "", optimizer_path[4200] = "";
    uform_batcher_state_t batcher_state;
    size_t resumed_step = 0;
    if (options.resume) {
        status = uform_checkpoint_resolve(options.resume, source, sizeof(source));
        if (status == uform_ok_k) status = uform_model_open(source, &model);
        snprintf(state_path, sizeof(state_path), "%s/trainer.json", source);
        snprintf(optimizer_path, sizeof(optimizer_path), "%s/optimizer.safetensors", source);
        unsigned long long seed = 0, rows = 0;
        if (status == uform_ok_k) status = uform_state_parse_(state_path, &batcher_state, &resumed_step, &seed, &rows);
        if (status == uform_ok_k && (seed != options.seed || rows != options.rows)) {
            fprintf(stderr, "uform_base: %s was trained with --seed %llu --rows %llu; resume with the same\n", source, seed, rows);
            return 2;
        }
    } else if (options.init_from) {
        status = uform_checkpoint_resolve(options.init_from, source, sizeof(source));
        if (status == uform_ok_k) status = uform_model_open(source, &model);
        char const *head = objective == uform_objective_mlm_k ? "mlm" : objective == uform_objective_rerank_k ? "rerank" : "pool";
        if (status == uform_ok_k && options.keep_head && !uform_model_has_head(model, head)) {
            fprintf(stderr, "uform_base: --keep-head: %s carries no %s head to keep; drop --keep-head to start a new one\n",
                    source, head);
            return 2;
        }
        if (status == uform_ok_k && !options.keep_head) status = uform_model_init_head(model, head, options.seed);
    } else {
        uform_config_t config;
        status = uform_config_from_tier(options.tier, &config);
        config.columns = mixture.columns;
        if (status == uform_ok_k) status = uform_model_init(&config, options.seed, &model);
    }
    if (status == uform_ok_k && options.threads) status = uform_model_set_threads(model, (size_t)options.threads);
    if (status != uform_ok_k) return uform_base_fail_(status);
    uform_config_t config;
    uform_model_config(model, &config);
    if (config.columns < mixture.columns) {
        fprintf(stderr, "uform_base: the model's rows hold %zu cells, the mixture asks for %zu\n", config.columns, mixture.columns);
        return 2;
    }

    uform_train_options_t train;
    uform_train_options_default(&train);
    train.objective = objective;
    train.learning_rate = options.learning_rate;
    train.warmup_steps = options.warmup_set ? (size_t)options.warmup : (size_t)(options.steps / 10);
    train.total_steps = (size_t)options.steps > train.warmup_steps ? (size_t)options.steps : 0;
    train.tcr_lambda = options.tcr_lambda;
    train.lipschitz_lambda = options.lipschitz_lambda;
    train.train_only = options.train_only;
    uform_trainer_t *trainer = NULL;
    uform_batcher_t *batcher = NULL;
    uform_batcher_options_t batching = {.rows = (size_t)options.rows, .seed = options.seed,
                                        .image_cache_mb = options.image_cache_mb ? (size_t)options.image_cache_mb : SIZE_MAX};
    status = uform_batcher_create(&mixture, &batching, &batcher);
    if (status == uform_ok_k && options.resume) status = uform_batcher_restore(batcher, &batcher_state);
    uform_batcher_stats_t capacities = {0}; /* before the prefetcher's thread owns the batcher */
    if (status == uform_ok_k) uform_batcher_stats(batcher, &capacities);
    /* A mixture with media needs their frontends: a new one starts from the run's seed. */
    struct {
        size_t sides;
        char const *noun, *part, *tensors;
    } const frontends[] = {{capacities.image_sides, "image", "vision", "vision.patch, vision.bias"},
                           {capacities.video_sides, "video", "video", "video.tube, video.bias"},
                           {capacities.audio_sides, "audio", "audio", "audio.frame, audio.bias"}};
    for (size_t f = 0; f < sizeof(frontends) / sizeof(frontends[0]); ++f)
        if (status == uform_ok_k && frontends[f].sides && !uform_model_has_head(model, frontends[f].part)) {
            fprintf(stderr, "uform_base: the mixture's records hold %zu %s sides: attaching the %s frontend (%s)\n",
                    frontends[f].sides, frontends[f].noun, frontends[f].part, frontends[f].tensors);
            status = uform_model_init_head(model, frontends[f].part, options.seed);
        }
    /* Masked modelling of media reconstructs the blanked cells through each kind's mae head. */
    struct {
        size_t sides;
        char const *noun, *head;
    } const heads[] = {{capacities.image_sides, "images", "mae"},
                       {capacities.video_sides, "video", "mae_video"},
                       {capacities.audio_sides, "audio", "mae_audio"}};
    for (size_t h = 0; h < sizeof(heads) / sizeof(heads[0]); ++h)
        if (status == uform_ok_k && heads[h].sides && objective == uform_objective_mlm_k && !uform_model_has_head(model, heads[h].head)) {
            fprintf(stderr, "uform_base: masked modelling of %s: attaching the %s head (%s.head, %s.bias)\n", heads[h].noun,
                    heads[h].head, heads[h].head, heads[h].head);
            status = uform_model_init_head(model, heads[h].head, options.seed);
        }
    if (status == uform_ok_k && capacities.images_skipped)
        fprintf(stderr, "uform_base: %zu records were dropped for a media file that does not decode (skip_malformed)\n",
                capacities.images_skipped);
    /* The device: the GPU's step is made for the batcher's shape and capacities. */
    if (options.cuda) {
        train.device = uform_device_cuda_k;
        train.rows = (size_t)options.rows;
        train.anchors = capacities.anchors_capacity, train.candidates = capacities.candidates_capacity;
        train.recompute = (int)options.recompute;
    }
    if (status == uform_ok_k) status = uform_trainer_create(model, &train, (size_t)options.rows * mixture.columns, &trainer);
    if (status == uform_ok_k && options.resume) status = uform_trainer_load_state(trainer, optimizer_path);
    /* The next batch is packed on a thread of its own while the current one trains. */
    uform_prefetcher_t *prefetcher = NULL;
    if (status == uform_ok_k) status = uform_prefetcher_create(batcher, 2, &prefetcher);
    if (status != uform_ok_k) return uform_base_fail_(status);

    /* Where the weights come from, for the checkpoint README. */
    char recipe[512], datasets[1024] = "", warm_start[512];
    snprintf(recipe, sizeof(recipe), "objective %s, mixture %s, %llu steps of %llu rows x %zu columns, peak learning rate %g, warm-up %zu, seed %llu%s%s%s%s%s%s%s",
             uform_objective_name(objective), options.mixture, options.steps, options.rows, mixture.columns,
             train.learning_rate ? train.learning_rate : config.learning_rate, train.warmup_steps, options.seed,
             options.tcr_lambda > 0 ? ", TCR" : "", options.lipschitz_lambda > 0 ? ", Lipschitz" : "",
             options.train_only ? ", training only " : "", options.train_only ? options.train_only : "",
             options.cuda ? ", on CUDA device " : "", options.cuda ? device : "",
             options.keep_head ? ", the warm start's head kept" : "");
    for (size_t i = 0; i < mixture.sources_count; ++i) {
        size_t used = strlen(datasets);
        char loss[48] = "";
        if (mixture.sources[i].loss_weight != 1.0) snprintf(loss, sizeof(loss), ", loss weight %g", mixture.sources[i].loss_weight);
        if (snprintf(datasets + used, sizeof(datasets) - used, "%s%s (weight %g%s%s)", i ? ", " : "", mixture.sources[i].name,
                     mixture.sources[i].weight, loss, mixture.sources[i].flip_images ? ", images flipped" : "") >=
            (int)(sizeof(datasets) - used))
            break; /* a long list is cut in the README; the mixture file holds it whole */
    }
    if (snprintf(warm_start, sizeof(warm_start), "%s", options.init_from ? source : options.resume ? "(resumed run)" : "none") >=
        (int)sizeof(warm_start))
        warm_start[sizeof(warm_start) - 1] = 0;
    uform_model_describe(model, recipe, datasets, options.resume ? NULL : warm_start);

    struct stat folder;
    if (stat(options.output, &folder) != 0 && mkdir(options.output, 0755) != 0) {
        fprintf(stderr, "uform_base: %s: cannot create: %s\n", options.output, strerror(errno));
        return 1;
    }
    char log_path[4200];
    snprintf(log_path, sizeof(log_path), "%s/log.jsonl", options.output);
    FILE *log = fopen(log_path, options.resume ? "a" : "w");
    if (!log) {
        fprintf(stderr, "uform_base: %s: cannot open: %s\n", log_path, strerror(errno));
        return 1;
    }
    int interactive = !options.quiet && isatty(fileno(stderr));
    size_t first_step = uform_trainer_steps(trainer), saved_step = first_step;
    if (!options.quiet)
        fprintf(stderr, "uform_base: %s, %s objective, steps %zu..%llu, %llu rows x %zu columns, %s\n", config.tier,
                uform_objective_name(objective), first_step + 1, options.steps, options.rows, mixture.columns, options.output);
    uform_base_progress_t progress = {.log = log, .options = &options, .interactive = interactive, .first_step = first_step,
                                      .start = uform_clock_()};
    progress.reported = progress.start;
    struct sigaction on_signal = {.sa_handler = uform_base_on_signal_, .sa_flags = SA_RESTART};
    sigemptyset(&on_signal.sa_mask);
    sigaction(SIGINT, &on_signal, NULL);
    sigaction(SIGTERM, &on_signal, NULL);
    for (size_t step = first_step; step < options.steps && !uform_base_signal_; ++step) {
        uform_batch_t batch;
        double rate = uform_trainer_learning_rate(trainer);
        status = uform_prefetcher_next(prefetcher, &batch);
        size_t cells = 0;
        for (size_t i = 0; status == uform_ok_k && i < batch.grid.rows * batch.grid.columns; ++i)
            cells += batch.grid.segments[i] != -1;
        /* On the GPU a step is reported once the next one is under way; on the CPU at once. */
        progress.launched[(step + 1) % 2] = (uform_base_launch_t){cells, rate};
        int finished = 0;
        uform_losses_t losses = {0};
        if (status == uform_ok_k) status = uform_trainer_submit(trainer, &batch, &finished, &losses);
        uform_prefetcher_release(prefetcher); /* the step has its own copy of the batch now */
        if (status == uform_ok_k && finished) uform_base_finished_(&progress, &losses);
        if (status != uform_ok_k) {
            if (interactive) fputc('\n', stderr);
            return uform_base_fail_(status);
        }
        if (options.save_every && (step + 1) % options.save_every == 0 && step + 1 < options.steps) {
            if ((status = uform_base_settle_(trainer, &progress)) != uform_ok_k) return uform_base_fail_(status);
            uform_prefetcher_save(prefetcher, &batcher_state);
            char *state = uform_state_json_(&batcher_state, step + 1, &options);
            status = uform_checkpoint_save(model, trainer, options.output, command, state, (size_t)options.keep);
            free(state);
            if (status != uform_ok_k) return uform_base_fail_(status);
            saved_step = step + 1;
            progress.reported = uform_clock_();
        }
    }
    if ((status = uform_base_settle_(trainer, &progress)) != uform_ok_k) {
        if (interactive) fputc('\n', stderr);
        return uform_base_fail_(status);
    }
    if (interactive) fputc('\n', stderr);
    if (saved_step != uform_trainer_steps(trainer) || first_step == (size_t)options.steps) {
        uform_prefetcher_save(prefetcher, &batcher_state);
        char *state = uform_state_json_(&batcher_state, uform_trainer_steps(trainer), &options);
        status = uform_checkpoint_save(model, trainer, options.output, command, state, (size_t)options.keep);
        free(state);
        if (status != uform_ok_k) return uform_base_fail_(status);
    }
    if (uform_base_signal_)
        fprintf(stderr, "uform_base: stopped by signal %d after step %zu of %llu; checkpoint %s/latest (--resume continues)\n",
                (int)uform_base_signal_, uform_trainer_steps(trainer), options.steps, options.output);
    else if (!options.quiet)
        fprintf(stderr, "uform_base: final loss %.4f; checkpoint %s/latest, log %s\n", progress.losses.total, options.output,
                log_path);
    fclose(log);
    uform_prefetcher_close(prefetcher);
    uform_batcher_close(batcher);
    uform_trainer_close(trainer);
    uform_model_close(model);
    uform_mixture_close(&mixture);
    free(command);
    return uform_base_signal_ ? 128 + (int)uform_base_signal_ : 0;
}
