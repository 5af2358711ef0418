/*  prefetch.h: a batcher behind one producer thread. While the caller trains on the batch it
 *  holds, the thread writes the next batches straight into a ring of slots, each slot a set of
 *  batch buffers taken at creation (`uform_batch_buffers_create`), so nothing is copied or
 *  allocated per batch: the caller is lent a filled slot and hands it back, and only then is that
 *  slot written again. The stream is exactly the batcher's: the same batches, bit for bit, in the
 *  same order. docs/data.md, "Prefetching", has the rules.
 */
#ifndef UFORM_DATA_PREFETCH_H
#define UFORM_DATA_PREFETCH_H

#include <stddef.h>

#include "data/batcher.h"
#include "uform/train.h"

typedef struct uform_prefetcher_t uform_prefetcher_t;

/** Starts the thread over `batcher`, which the prefetcher uses but does not own: close the
 *  prefetcher before the batcher, and call nothing on the batcher in between. `slots` >= 2 (0: 2):
 *  while the caller holds a batch the thread may run `slots - 1` batches ahead, `slots` once the
 *  caller has released it. */
uform_status_t uform_prefetcher_create(uform_batcher_t *batcher, size_t slots, uform_prefetcher_t **prefetcher);

/** Hands back the batch held, if any, then blocks until the next batch is ready and lends it:
 *  `batch` points into its slot, valid until the next call, `uform_prefetcher_release` or close.
 *  A failure of the batcher arrives here, after the batches produced before it, with its status
 *  and message, and every later call repeats it. */
uform_status_t uform_prefetcher_next(uform_prefetcher_t *prefetcher, uform_batch_t *batch);

/** Hands back the batch held before the next call would (a no-op when none is held), so the thread
 *  may refill its slot at once: call it when the batch has been read (a CUDA step's upload has). */
void uform_prefetcher_release(uform_prefetcher_t *prefetcher);

/** The batcher's state right after the last batch `uform_prefetcher_next` returned (not after the
 *  ones produced ahead): what a checkpoint must save. Before the first batch, the starting state. */
void uform_prefetcher_save(uform_prefetcher_t const *prefetcher, uform_batcher_state_t *state);

/** Stops the thread (it finishes the batch it is packing, if any) and frees the slots. */
void uform_prefetcher_close(uform_prefetcher_t *prefetcher);

/** Any other batch source: `produce(context, slot, batch)` behaves as `uform_batcher_next_into`
 *  with slot `slot` (< `slots`) standing for the buffers: its batch's memory must stay unchanged
 *  until `produce` is called with the same slot again (or the prefetcher is closed); the prefetcher
 *  calls it for a slot only once the caller has handed that slot back. `uform_prefetcher_save`
 *  then reports a zeroed state. Used by the tests to inject failures and watch the slots. */
typedef uform_status_t (*uform_produce_t)(void *context, size_t slot, uform_batch_t *batch);
uform_status_t uform_prefetcher_create_from(uform_produce_t produce, void *context, size_t slots,
                                            uform_prefetcher_t **prefetcher);

#endif
