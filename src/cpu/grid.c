/*  grid.c: checking a caller's grid and compacting its rows into the cells of a pass. */
#include "cpu/grid.h"

#include <string.h>

#include "core/status.h"

/* Checks the grid and returns the most active cells any row has. */
uform_status_t uform_grid_check(uform_grid_t const *grid, char const *verb, size_t *widest_row) {
    if (!grid->rows || !grid->columns || !grid->kinds || !grid->values || !grid->segments || !grid->positions)
        return uform_fail(uform_invalid_argument_k, "%s: the grid needs rows, columns and all four arrays", verb);
    *widest_row = 0;
    for (size_t row = 0; row < grid->rows; ++row) {
        size_t active = 0;
        int32_t previous = -1;
        for (size_t column = 0; column < grid->columns; ++column) {
            size_t cell = row * grid->columns + column;
            uint8_t kind = grid->kinds[cell];
            int32_t segment = grid->segments[cell];
            if (kind == uform_cell_padding_k) {
                if (segment != -1)
                    return uform_fail(uform_invalid_argument_k, "%s: padding at row %zu column %zu has segment %d, not -1", verb, row, column, segment);
                previous = -1;
                continue;
            }
            if (kind > uform_cell_padding_k)
                return uform_fail(uform_invalid_argument_k, "%s: cell kind %u at row %zu column %zu is not a uform_cell_kind_t", verb, kind, row, column);
            if (kind != uform_cell_byte_k)
                return uform_fail(uform_unsupported_k, "%s: cell kind %u at row %zu column %zu: this build encodes bytes only", verb, kind, row, column);
            if (grid->values[cell] >= uform_vocabulary_k)
                return uform_fail(uform_invalid_argument_k, "%s: byte id %u at row %zu column %zu is outside 0..257", verb, grid->values[cell], row, column);
            if (segment < 0)
                return uform_fail(uform_invalid_argument_k, "%s: byte at row %zu column %zu has no segment", verb, row, column);
            if (segment != previous) {
                /* A segment is one run of cells: its id may not appear again later in the row. */
                for (size_t earlier = 0; earlier < column; ++earlier)
                    if (grid->segments[row * grid->columns + earlier] == segment)
                        return uform_fail(uform_invalid_argument_k, "%s: segment %d of row %zu is not contiguous", verb, segment, row);
            }
            previous = segment;
            active++;
        }
        if (active > *widest_row) *widest_row = active;
    }
    return uform_ok_k;
}

size_t uform_grid_compact(uform_grid_t const *grid, size_t first, size_t last, uint32_t *values, int32_t *positions,
                          size_t *destinations, uform_span_t *spans, size_t *cells) {
    size_t count = 0, segments = 0;
    for (size_t row = first; row < last; ++row) {
        size_t row_start = count, row_segments = segments;
        int32_t previous = -1;
        for (size_t column = 0; column < grid->columns; ++column) {
            size_t cell = row * grid->columns + column;
            int32_t segment = grid->segments[cell];
#if defined(UFORM_PLANT_POOL_PADDING)
            if (segment == -1 && previous != -1) segment = previous; /* planted: padding joins the segment before it */
#endif
            if (segment == -1) {
                previous = -1;
                continue;
            }
            if (segment != previous) spans[segments++] = (uform_span_t){count, 0, row_start, 0};
            spans[segments - 1].length++;
            values[count] = grid->kinds[cell] == uform_cell_padding_k ? uform_pad_k : grid->values[cell];
            memcpy(positions + count * 3, grid->positions + cell * 3, 3 * sizeof(int32_t));
            destinations[count++] = cell;
            previous = segment;
        }
        for (size_t s = row_segments; s < segments; ++s) spans[s].row_length = count - row_start;
    }
    *cells = count;
    return segments;
}

