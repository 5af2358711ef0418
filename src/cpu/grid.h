/*  grid.h (internal): checking a caller's grid of cells and compacting rows of it into the
 *  padding-free cell lists that passes run over (forward, training). */
#ifndef UFORM_CPU_GRID_H
#define UFORM_CPU_GRID_H

#include "model/model.h"

/** Checks kinds, byte ids, segment ids and contiguity; `verb` starts each message. Returns the
 *  most active cells any row has in `widest_row`. */
uform_status_t uform_grid_check(uform_grid_t const *grid, char const *verb, size_t *widest_row);

/** Compacts rows [first, last): the active cells' values, positions and grid cell indices, and one
 *  span per segment. Returns the number of segments; `cells` receives the number of cells. */
size_t uform_grid_compact(uform_grid_t const *grid, size_t first, size_t last, uint32_t *values, int32_t *positions,
                          size_t *destinations, uform_span_t *spans, size_t *cells);

#endif
