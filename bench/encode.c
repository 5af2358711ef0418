/*  encode.c: times `uform_encode` on random byte texts, as ../shared/peers/torch_encode.py times
 *  its encoder: texts of one length, batch_bytes / length texts a call, for a number of seconds.
 *  Prints one JSON line per text length; bench/encode.py puts it beside the peer. With --device cuda
 *  the model runs on the GPU and the workspace is reserved so that one call is one pass. Each line
 *  names the CPU, its class and the BF16 kernel table that ran (uform_device_name; UFORM_CPU pins it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "encode_model.h"

static int uform_fail_(uform_status_t status) {
    fprintf(stderr, "uform_bench_encode: %s\n", uform_last_error());
    return status == uform_ok_k ? 0 : 1;
}

int main(int argc, char **argv) {
    char const *model_path = NULL, *lengths = "128,2048", *precision = "bf16", *device = "cpu";
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
        else {
            fprintf(stderr, "uform_bench_encode: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (!model_path) {
        fprintf(stderr, "usage: uform_bench_encode --model DIR [--bytes 128,2048] [--seconds 5] [--threads N] "
                        "[--batch-bytes 8192] [--precision bf16|e4m3|f32] [--device cpu|cuda]\n");
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
