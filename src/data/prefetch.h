/*  prefetch.h: a batcher behind one producer thread. While the caller trains on the batch it was
 *  handed, the thread fills the next slot of a ring; every slot is a deep copy of a batch into
 *  buffers the prefetcher took at creation (rows x columns cells; anchors and candidates from
 *  `uform_batcher_stats`), so nothing is allocated per batch. The stream is exactly the batcher's:
 *  the same batches, bit for bit, in the same order. docs/data.md, "Prefetching", has the rules.
 */
#ifndef UFORM_DATA_PREFETCH_H
#define UFORM_DATA_PREFETCH_H

#include <stddef.h>

#include "data/batcher.h"
#include "uform/train.h"

typedef struct uform_prefetcher_t uform_prefetcher_t;

/** Starts the thread over `batcher`, which the prefetcher uses but does not own: close the
 *  prefetcher before the batcher, and call nothing on the batcher in between. `slots` >= 2 (0: 2):
 *  the caller holds one, the thread may run `slots - 1` batches ahead. */
uform_status_t uform_prefetcher_create(uform_batcher_t *batcher, size_t slots, uform_prefetcher_t **prefetcher);

/** Blocks until the next batch is ready and fills `batch` with pointers into the prefetcher's
 *  buffers, valid until the next call (or close). A failure of the batcher arrives here, after
 *  the batches produced before it, with its status and message, and every later call repeats it. */
uform_status_t uform_prefetcher_next(uform_prefetcher_t *prefetcher, uform_batch_t *batch);

/** The batcher's state right after the last batch `uform_prefetcher_next` returned (not after the
 *  ones produced ahead): what a checkpoint must save. Before the first batch, the starting state. */
void uform_prefetcher_save(uform_prefetcher_t const *prefetcher, uform_batcher_state_t *state);

/** Stops the thread (it finishes the batch it is packing, if any) and frees the slots. */
void uform_prefetcher_close(uform_prefetcher_t *prefetcher);

/** Any other batch source: `produce(context, batch)` behaves as `uform_batcher_next` (pointers valid
 *  until its next call), and its batches never exceed `shape`'s rows x columns, `shape->anchors_count`
 *  anchors and `shape->candidates_count` candidates, `shape->targets` non-NULL when they carry
 *  targets, `shape->grid.media[0].data` non-NULL when they hold images (of its dtype).
 *  `uform_prefetcher_save` then reports a zeroed state. Used by the tests to inject failures. */
typedef uform_status_t (*uform_produce_t)(void *context, uform_batch_t *batch);
uform_status_t uform_prefetcher_create_from(uform_produce_t produce, void *context, uform_batch_t const *shape,
                                            size_t slots, uform_prefetcher_t **prefetcher);

#endif
