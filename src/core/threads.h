/*  threads.h: a fixed pool of worker threads running parallel-for loops with dynamic scheduling.
 *  The calling thread takes part as thread 0, so a pool of one thread starts no workers. */
#ifndef UFORM_CORE_THREADS_H
#define UFORM_CORE_THREADS_H

#include <stddef.h>

#include "uform/types.h"

typedef struct uform_pool_t uform_pool_t;

/** `task(context, index, thread)` runs once for every index in [0, count); `thread` < threads. */
typedef void (*uform_task_t)(void *context, size_t index, size_t thread);

/** Starts `threads - 1` workers (0: one per online core). */
uform_status_t uform_pool_create(size_t threads, uform_pool_t **pool);
void uform_pool_destroy(uform_pool_t *pool);
size_t uform_pool_threads(uform_pool_t const *pool);
/** Runs the loop and returns when every index is done. Not reentrant. */
void uform_pool_for(uform_pool_t *pool, size_t count, uform_task_t task, void *context);
/** Online cores of this machine. */
size_t uform_cores(void);

#endif
