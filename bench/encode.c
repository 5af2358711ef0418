/*  encode.c: times `uform_encode` on random byte texts, as ../shared/peers/torch_encode.py times
 *  its encoder: texts of one length, batch_bytes / length texts a call, for a number of seconds.
 *  Prints one JSON line per text length; bench/encode.py puts it beside the peer. With --device cuda
 *  the model runs on the GPU and the workspace is reserved so that one call is one pass (two at small's
 *  width and wider, whose passes stop at cuDNN's 32-bit offsets, docs/cuda.md). Each line
 *  names the CPU, its class and the BF16 kernel table that ran (uform_device_name; UFORM_CPU pins it).
 *  With --contexts LIST, for each N of the list, N threads each encode through a context of their own
 *  over the one model (uform_context_create: the CPU's threads split between them, or N GPU streams),
 *  and a line per N gives their bytes/s together (bench/contexts.py tabulates them). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/threads.h"
#include "encode_model.h"

static int uform_fail_(uform_status_t status) {
    fprintf(stderr, "uform_bench_encode: %s\n", uform_last_error());
    return status == uform_ok_k ? 0 : 1;
}

/* One thread of a --contexts run: its own context and texts; calls until the shared deadline. */
typedef struct uform_worker_t {
    uform_model_t *model;
    uform_device_t device;
    size_t index, threads, cells, batch, length, width, calls;
    double seconds;
    pthread_barrier_t *start;
    uform_status_t status;
    char error[512];
} uform_worker_t;

static void *uform_worker_(void *pointer) {
    uform_worker_t *worker = pointer;
    uform_context_t *context = NULL;
    uint8_t *bytes = malloc(worker->batch * worker->length);
    uform_text_t *texts = malloc(worker->batch * sizeof(uform_text_t));
    float *embeddings = malloc(worker->batch * worker->width * sizeof(float));
    unsigned seed = (unsigned)worker->index + 1u; /* each context encodes texts of its own */
    uform_status_t status = bytes && texts && embeddings ? uform_ok_k : uform_out_of_memory_k;
    for (size_t i = 0; status == uform_ok_k && i < worker->batch * worker->length; ++i) bytes[i] = (uint8_t)(rand_r(&seed) & 255);
    for (size_t i = 0; status == uform_ok_k && i < worker->batch; ++i) texts[i] = (uform_text_t){bytes + i * worker->length, worker->length};
    if (status == uform_ok_k) status = uform_context_create(worker->model, worker->device, worker->threads, &context);
    if (status == uform_ok_k) status = uform_context_reserve(context, worker->cells);
    if (status == uform_ok_k) /* warm-up: plans, buffers */
        status = uform_context_encode(context, texts, worker->batch, worker->width, embeddings, NULL);
    if (status != uform_ok_k) snprintf(worker->error, sizeof(worker->error), "%s", uform_last_error());
    pthread_barrier_wait(worker->start); /* every context made before any is timed */
    double start = uform_bench_now();
    while (status == uform_ok_k && uform_bench_now() - start < worker->seconds) {
        status = uform_context_encode(context, texts, worker->batch, worker->width, embeddings, NULL);
        if (status != uform_ok_k) snprintf(worker->error, sizeof(worker->error), "%s", uform_last_error());
        worker->calls++;
    }
    worker->status = status;
    uform_context_close(context);
    free(bytes);
    free(texts);
    free(embeddings);
    return NULL;
}

/* bytes/s of `contexts` threads encoding at once, each through its own context; 0 on failure (said). */
static double uform_contexts_rate_(uform_model_t *model, uform_device_t device, size_t contexts, size_t threads, size_t cells,
                                   size_t batch, size_t length, size_t width, double seconds) {
    uform_worker_t workers[64];
    pthread_t handles[64];
    pthread_barrier_t start;
    if (contexts > 64) contexts = 64;
    pthread_barrier_init(&start, NULL, (unsigned)contexts + 1);
    size_t each = threads / contexts ? threads / contexts : 1;
    for (size_t i = 0; i < contexts; ++i) {
        workers[i] = (uform_worker_t){model, device, i, each, cells, batch, length, width, 0, seconds, &start, uform_ok_k, ""};
        pthread_create(&handles[i], NULL, uform_worker_, &workers[i]);
    }
    pthread_barrier_wait(&start);
    double began = uform_bench_now();
    size_t calls = 0;
    int failed = 0;
    for (size_t i = 0; i < contexts; ++i) {
        pthread_join(handles[i], NULL);
        calls += workers[i].calls;
        if (workers[i].status != uform_ok_k && !failed++)
            fprintf(stderr, "uform_bench_encode: context %zu of %zu: %s\n", i, contexts, workers[i].error);
    }
    double elapsed = uform_bench_now() - began;
    pthread_barrier_destroy(&start);
    return failed ? 0 : (double)(calls * batch * length) / elapsed;
}

int main(int argc, char **argv) {
    char const *model_path = NULL, *lengths = "128,2048", *precision = "bf16", *device = "cpu", *contexts = NULL;
    double seconds = 5.0;
    size_t threads = 0, batch_bytes = 8192;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model")) model_path = argv[i + 1];
        else if (!strcmp(argv[i], "--bytes")) lengths = argv[i + 1];
        else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch-bytes")) batch_bytes = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--precision")) precision = argv[i + 1];
        else if (!strcmp(argv[i], "--device")) device = argv[i + 1];
        else if (!strcmp(argv[i], "--contexts")) contexts = argv[i + 1];
        else {
            fprintf(stderr, "uform_bench_encode: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (!model_path) {
        fprintf(stderr, "usage: uform_bench_encode --model DIR [--bytes 128,2048] [--seconds 5] [--threads N] "
                        "[--batch-bytes 8192] [--precision bf16|e4m3|int8|f32] [--device cpu|cuda] [--contexts 1,2,4]\n");
        return 2;
    }
    if (strcmp(device, "cpu") && strcmp(device, "cuda")) {
        fprintf(stderr, "uform_bench_encode: --device is cpu or cuda, not %s\n", device);
        return 2;
    }
    uform_model_t *model = NULL;
    uform_precision_t chosen;
    uform_status_t status = uform_precision_parse(precision, &chosen);
    if (status == uform_ok_k) status = uform_bench_open(model_path, threads, chosen, device, &model);
    uform_config_t config;
    if (status == uform_ok_k) uform_model_config(model, &config);
    /* A whole batch in one pass: its texts packed into rows, at most one row's tail lost per text. */
    if (status == uform_ok_k) status = uform_model_reserve(model, 2 * batch_bytes + config.columns);
    if (status != uform_ok_k) return uform_fail_(status);
    size_t width = config.embedding_widths[config.embedding_widths_count - 1];
    char cpu[512], kernels[64] = "";
    uform_device_name(uform_device_cpu_k, cpu, sizeof(cpu));
    char const *named = strstr(cpu, "; kernels ");
    if (named) snprintf(kernels, sizeof(kernels), "%s", named + strlen("; kernels "));
    for (char *quote = strchr(cpu, '"'); quote; quote = strchr(quote, '"')) *quote = '\'';
    char *cursor = (char *)lengths;
    unsigned seed = 1;
    while (*cursor) {
        size_t length = strtoul(cursor, &cursor, 10);
        cursor += *cursor == ',';
        if (!length) break;
        size_t batch = batch_bytes / length ? batch_bytes / length : 1;
        for (char *list = (char *)contexts; list && *list;) {
            size_t count = strtoul(list, &list, 10);
            list += *list == ',';
            if (!count || count > 64) {
                fprintf(stderr, "uform_bench_encode: --contexts takes counts of 1 to 64, comma-separated\n");
                return 2;
            }
            size_t threads_all = threads ? threads : uform_cores();
            double rate = uform_contexts_rate_(model, strcmp(device, "cuda") ? uform_device_cpu_k : uform_device_cuda_k, count,
                                               threads_all, 2 * batch_bytes + config.columns, batch, length, width, seconds);
            if (rate <= 0) return 1;
            printf("{\"system\": \"uform\", \"version\": \"%s\", \"device\": \"%s\", \"precision\": \"%s\", \"threads\": %zu, "
                   "\"contexts\": %zu, \"text_bytes\": %zu, \"batch\": %zu, \"bytes_per_s\": %.0f, \"cpu\": \"%s\", \"kernels\": \"%s\"}\n",
                   uform_version(), device, precision, threads_all, count, length, batch, rate, cpu, kernels);
            fflush(stdout);
        }
        if (contexts) continue;
        uint8_t *bytes = malloc(batch * length);
        uform_text_t *texts = malloc(batch * sizeof(uform_text_t));
        float *embeddings = malloc(batch * width * sizeof(float));
        for (size_t i = 0; i < batch * length; ++i) bytes[i] = (uint8_t)(rand_r(&seed) & 255);
        for (size_t i = 0; i < batch; ++i) texts[i] = (uform_text_t){bytes + i * length, length};
        status = uform_encode(model, texts, batch, width, embeddings, NULL); /* warm-up */
        size_t calls = 0;
        double start = uform_bench_now(), elapsed = 0;
        while (status == uform_ok_k && elapsed < seconds) {
            status = uform_encode(model, texts, batch, width, embeddings, NULL);
            calls++;
            elapsed = uform_bench_now() - start;
        }
        if (status != uform_ok_k) return uform_fail_(status);
        printf("{\"system\": \"uform\", \"version\": \"%s\", \"device\": \"%s\", \"precision\": \"%s\", \"threads\": %zu, "
               "\"text_bytes\": %zu, \"batch\": %zu, \"bytes_per_s\": %.0f, \"cpu\": \"%s\", \"kernels\": \"%s\"}\n",
               uform_version(), device, precision, threads, length, batch, (double)(calls * batch * length) / elapsed, cpu,
               kernels);
        fflush(stdout);
        free(bytes);
        free(texts);
        free(embeddings);
    }
    uform_model_close(model);
    return 0;
}
