/*  threads.c: the pthread pool. Workers sleep on a condition variable between loops. */
#include "core/threads.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/status.h"

struct uform_pool_t {
    size_t threads;
    pthread_t *workers;
    pthread_mutex_t mutex;
    pthread_cond_t wake, done;
    uint64_t generation; /* bumped for every loop so workers know a new one began */
    size_t busy;         /* workers still inside the current loop */
    int stopping;
    uform_task_t task;
    void *context;
    size_t count;
    atomic_size_t next;
};

typedef struct {
    uform_pool_t *pool;
    size_t thread;
} uform_worker_t;

static void uform_pool_drain_(uform_pool_t *pool, size_t thread) {
    for (;;) {
        size_t index = atomic_fetch_add_explicit(&pool->next, 1, memory_order_relaxed);
        if (index >= pool->count) return;
        pool->task(pool->context, index, thread);
    }
}

static void *uform_worker_main_(void *argument) {
    uform_worker_t worker = *(uform_worker_t *)argument;
    free(argument);
    uform_pool_t *pool = worker.pool;
    uint64_t seen = 0;
    pthread_mutex_lock(&pool->mutex);
    for (;;) {
        while (!pool->stopping && pool->generation == seen) pthread_cond_wait(&pool->wake, &pool->mutex);
        if (pool->stopping) break;
        seen = pool->generation;
        pthread_mutex_unlock(&pool->mutex);
        uform_pool_drain_(pool, worker.thread);
        pthread_mutex_lock(&pool->mutex);
        if (--pool->busy == 0) pthread_cond_signal(&pool->done);
    }
    pthread_mutex_unlock(&pool->mutex);
    return NULL;
}

size_t uform_cores(void) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores > 0 ? (size_t)cores : 1;
}

uform_status_t uform_pool_create(size_t threads, uform_pool_t **result) {
    if (!threads) threads = uform_cores();
    uform_pool_t *pool = calloc(1, sizeof(*pool));
    if (!pool) return uform_fail(uform_out_of_memory_k, "cannot allocate a thread pool");
    pool->threads = threads;
    pthread_mutex_init(&pool->mutex, NULL);
    pthread_cond_init(&pool->wake, NULL);
    pthread_cond_init(&pool->done, NULL);
    pool->workers = calloc(threads, sizeof(pthread_t));
    if (!pool->workers) {
        uform_pool_destroy(pool);
        return uform_fail(uform_out_of_memory_k, "cannot allocate a thread pool");
    }
    for (size_t i = 1; i < threads; ++i) {
        uform_worker_t *worker = malloc(sizeof(*worker));
        if (worker) *worker = (uform_worker_t){pool, i};
        if (!worker || pthread_create(&pool->workers[i], NULL, uform_worker_main_, worker) != 0) {
            free(worker);
            pool->threads = i;
            uform_pool_destroy(pool);
            return uform_fail(uform_out_of_memory_k, "cannot start worker thread %zu of %zu", i, threads);
        }
    }
    *result = pool;
    return uform_ok_k;
}

void uform_pool_destroy(uform_pool_t *pool) {
    if (!pool) return;
    pthread_mutex_lock(&pool->mutex);
    pool->stopping = 1;
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mutex);
    for (size_t i = 1; i < pool->threads && pool->workers; ++i) pthread_join(pool->workers[i], NULL);
    pthread_mutex_destroy(&pool->mutex);
    pthread_cond_destroy(&pool->wake);
    pthread_cond_destroy(&pool->done);
    free(pool->workers);
    free(pool);
}

size_t uform_pool_threads(uform_pool_t const *pool) { return pool->threads; }

void uform_pool_for(uform_pool_t *pool, size_t count, uform_task_t task, void *context) {
    if (!count) return;
    if (pool->threads == 1 || count == 1) {
        for (size_t i = 0; i < count; ++i) task(context, i, 0);
        return;
    }
    pthread_mutex_lock(&pool->mutex);
    pool->task = task;
    pool->context = context;
    pool->count = count;
    atomic_store_explicit(&pool->next, 0, memory_order_relaxed);
    pool->busy = pool->threads - 1;
    pool->generation++;
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mutex);
    uform_pool_drain_(pool, 0);
    pthread_mutex_lock(&pool->mutex);
    while (pool->busy) pthread_cond_wait(&pool->done, &pool->mutex);
    pthread_mutex_unlock(&pool->mutex);
}
