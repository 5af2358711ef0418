/*  test_context.c: one model's weights shared by several contexts. Two CPU contexts (of different
 *  thread counts) run encode and rerank from two threads at once and must give exactly what the
 *  model's own context gives alone; where a GPU is usable, a CUDA context runs from the same model in
 *  a third thread at the same time and must give exactly what the model's own context gives on the
 *  GPU. Prints "N passed, M failed". */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uform/uform.h"
#include "check.h"

enum { texts_k = 48, width_k = 128, rounds_k = 6 };

static uform_text_t texts_[texts_k];
static char storage_[texts_k][200];

typedef struct job_t {
    uform_context_t *context;
    float embeddings[texts_k * width_k];
    float scores[texts_k];
    uform_status_t status;
} job_t;

/* Encodes and reranks every text, `rounds_k` times over, keeping the last results. */
static void *run_(void *pointer) {
    job_t *job = pointer;
    for (int round = 0; round < rounds_k && job->status == uform_ok_k; ++round) {
        job->status = uform_context_encode(job->context, texts_, texts_k, width_k, job->embeddings, NULL);
        if (job->status == uform_ok_k)
            job->status = uform_context_rerank(job->context, texts_[0], texts_ + 1, texts_k - 1, job->scores, NULL);
    }
    return NULL;
}

int main(void) {
    for (size_t i = 0; i < texts_k; ++i) { /* lengths 7..190: several texts a row, several passes */
        size_t length = 7 + (i * 37) % 184;
        for (size_t j = 0; j < length; ++j) storage_[i][j] = (char)('a' + (i * 7 + j * 13) % 26);
        texts_[i] = (uform_text_t){(uint8_t const *)storage_[i], length};
    }
    uform_config_t config;
    uform_model_t *model = NULL;
    CHECK(uform_config_from_tier("128x2", &config) == uform_ok_k);
    config.columns = 512;
    CHECK(uform_model_init(&config, 11, &model) == uform_ok_k);
    if (!model) return check_report();
    CHECK(uform_model_reserve(model, 600) == uform_ok_k); /* a workspace unlike the contexts': other passes */
    job_t *alone = calloc(1, sizeof(job_t));
    alone->status = uform_encode(model, texts_, texts_k, width_k, alone->embeddings, NULL);
    if (alone->status == uform_ok_k) alone->status = uform_rerank(model, texts_[0], texts_ + 1, texts_k - 1, alone->scores, NULL);
    CHECK(alone->status == uform_ok_k);

    job_t *jobs = calloc(3, sizeof(job_t));
    CHECK(uform_context_create(model, uform_device_cpu_k, 1, &jobs[0].context) == uform_ok_k);
    CHECK(uform_context_create(model, uform_device_cpu_k, 2, &jobs[1].context) == uform_ok_k);
    /* The GPU's results are the model's own context moved there; no GPU, no CUDA context. */
    job_t *gpu_alone = calloc(1, sizeof(job_t));
    int gpu = uform_context_create(model, uform_device_cuda_k, 0, &jobs[2].context) == uform_ok_k;
    if (gpu) {
        CHECK(uform_model_set_device(model, uform_device_cuda_k) == uform_ok_k);
        gpu_alone->status = uform_encode(model, texts_, texts_k, width_k, gpu_alone->embeddings, NULL);
        if (gpu_alone->status == uform_ok_k)
            gpu_alone->status = uform_rerank(model, texts_[0], texts_ + 1, texts_k - 1, gpu_alone->scores, NULL);
        CHECK(gpu_alone->status == uform_ok_k && uform_model_set_device(model, uform_device_cpu_k) == uform_ok_k);
    } else {
        printf("test_context: no CUDA context (%s): the CPU contexts alone\n", uform_last_error());
    }
    pthread_t threads[3];
    size_t started = gpu ? 3 : 2;
    for (size_t i = 0; i < started; ++i) CHECK(pthread_create(&threads[i], NULL, run_, &jobs[i]) == 0);
    for (size_t i = 0; i < started; ++i) pthread_join(threads[i], NULL);
    for (size_t i = 0; i < 2; ++i) {
        CHECK(jobs[i].status == uform_ok_k);
        CHECK(!memcmp(jobs[i].embeddings, alone->embeddings, sizeof(alone->embeddings)));
        CHECK(!memcmp(jobs[i].scores, alone->scores, sizeof(alone->scores)));
    }
    if (gpu) {
        CHECK(jobs[2].status == uform_ok_k);
        CHECK(!memcmp(jobs[2].embeddings, gpu_alone->embeddings, sizeof(gpu_alone->embeddings)));
        CHECK(!memcmp(jobs[2].scores, gpu_alone->scores, sizeof(gpu_alone->scores)));
    }
    /* A change of the weights reaches a context at its next pass: it then agrees with the model's own. */
    CHECK(uform_model_init_head(model, "pool", 12) == uform_ok_k);
    CHECK(uform_encode(model, texts_, texts_k, width_k, alone->embeddings, NULL) == uform_ok_k);
    CHECK(uform_context_encode(jobs[0].context, texts_, texts_k, width_k, jobs[0].embeddings, NULL) == uform_ok_k);
    CHECK(!memcmp(jobs[0].embeddings, alone->embeddings, sizeof(alone->embeddings)));
    uform_context_t *bogus = NULL;
    CHECK(fails_with(uform_context_create(model, (uform_device_t)9, 0, &bogus), uform_invalid_argument_k, "device 9", NULL) && !bogus);
    for (size_t i = 0; i < 3; ++i) uform_context_close(jobs[i].context);
    uform_model_close(model);
    free(jobs), free(alone), free(gpu_alone);
    return check_report();
}
