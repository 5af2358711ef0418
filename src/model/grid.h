/*  grid.h (internal): the grid-to-segments step, once for every backend. A grid's unit of work
 *  is the run: cells of one row that share a segment id, or a row's stretch of padding. The run
 *  walker below is the one place that finds them; the CPU's compaction (padding dropped, the cells
 *  of a pass) and the CUDA step's batch (padding runs kept as spans of their own, src/cuda/batch.c)
 *  both walk it. Header-only, so that the CUDA backend's static library needs nothing else. */
#ifndef UFORM_MODEL_GRID_H
#define UFORM_MODEL_GRID_H

#include <stddef.h>
#include <stdint.h>

#include "uform/types.h"

/** One segment of a pass: its cells, and the cells of the row it was packed into. */
typedef struct uform_span_t {
    size_t start, length;
    size_t row_start, row_length;
} uform_span_t;

/** A run of grid cells [start, start + length), all in one row. */
typedef struct uform_run_t {
    size_t start, length;
    int padding; /* 1: a stretch of padding (segment -1) */
} uform_run_t;

/** Walks the runs of rows [first, last) in cell order. */
typedef struct uform_runs_t {
    uform_grid_t const *grid;
    size_t cell, end;
} uform_runs_t;

static inline uform_runs_t uform_runs_begin(uform_grid_t const *grid, size_t first, size_t last) {
    uform_runs_t runs = {grid, first * grid->columns, last * grid->columns};
    return runs;
}

/** The next run into `run`; 0 when the rows are done. */
static inline int uform_runs_next(uform_runs_t *runs, uform_run_t *run) {
    if (runs->cell >= runs->end) return 0;
    uform_grid_t const *grid = runs->grid;
    size_t start = runs->cell, row_end = (start / grid->columns + 1) * grid->columns, cell = start + 1;
    int32_t segment = grid->segments[start] < 0 ? -1 : grid->segments[start];
    while (cell < row_end && (grid->segments[cell] < 0 ? -1 : grid->segments[cell]) == segment) cell++;
#if defined(UFORM_PLANT_POOL_PADDING)
    if (segment != -1) /* planted: padding joins the segment before it */
        while (cell < row_end && grid->segments[cell] < 0) cell++;
#endif
    run->start = start, run->length = cell - start, run->padding = segment == -1;
    runs->cell = cell;
    return 1;
}

/** Checks kinds, values, segment ids and contiguity, and that the model carries a frontend for every
 *  cell kind present (`parts`, tensors.h's UFORM_PART bits; `frontends` the parts this backend's
 *  frontend stage runs); `verb` starts each message. Returns the most active cells any row has in
 *  `widest_row`. */
uform_status_t uform_grid_check(uform_grid_t const *grid, unsigned parts, unsigned frontends, char const *verb,
                                size_t *widest_row);

/** Compacts rows [first, last): the active cells' kinds, values, positions and grid cell indices,
 *  and one span per segment. Returns the number of segments; `cells` receives the number of cells. */
size_t uform_grid_compact(uform_grid_t const *grid, size_t first, size_t last, uint8_t *kinds, uint32_t *values,
                          int32_t *positions, size_t *destinations, uform_span_t *spans, size_t *cells);

#endif
