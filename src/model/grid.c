/*  grid.c: checking a caller's grid and compacting its rows into the cells of a pass. */
#include "model/grid.h"

#include <string.h>

#include "core/status.h"
#include "model/tensors.h"

static char const *const uform_kind_names_[] = {"byte", "image", "video", "audio", "padding"};

/* A media cell: its buffer holds the row it names, and the model reads its kind. */
static uform_status_t uform_check_media_(uform_grid_t const *grid, unsigned parts, char const *verb,
                                         size_t row, size_t column) {
    size_t cell = row * grid->columns + column;
    uint8_t kind = grid->kinds[cell];
    uform_media_t const *media = &grid->media[kind - uform_cell_image_k];
    uform_part_t part = uform_part_of_cell((uform_cell_kind_t)kind);
    if (!(parts & UFORM_PART(part)))
        return uform_fail(uform_unsupported_k, "%s: %s cell at row %zu column %zu: the model has no %s frontend (%s tensors)",
                          verb, uform_kind_names_[kind], row, column, uform_part_name(part), uform_part_name(part));
    if (!media->data || grid->values[cell] >= media->count)
        return uform_fail(uform_invalid_argument_k, "%s: %s cell at row %zu column %zu names row %u of a media buffer of %zu rows%s",
                          verb, uform_kind_names_[kind], row, column, grid->values[cell], media->count,
                          media->data ? "" : " (grid.media has no data for that kind)");
    if (media->dtype != uform_media_f32_k && media->dtype != uform_media_bf16_k)
        return uform_fail(uform_invalid_argument_k, "%s: the %s media buffer's dtype %d is not a uform_media_dtype_t", verb,
                          uform_kind_names_[kind], (int)media->dtype);
    return uform_ok_k;
}

uform_status_t uform_grid_check(uform_grid_t const *grid, unsigned parts, unsigned frontends, char const *verb,
                                size_t *widest_row) {
    if (!grid->rows || !grid->columns || !grid->kinds || !grid->values || !grid->segments || !grid->positions)
        return uform_fail(uform_invalid_argument_k, "%s: the grid needs rows, columns and all four arrays", verb);
    *widest_row = 0;
    size_t staged = grid->rows * grid->columns; /* the first cell whose kind this backend has no stage for */
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
            if (kind != uform_cell_byte_k) UFORM_TRY(uform_check_media_(grid, parts, verb, row, column));
            else if (grid->values[cell] >= uform_vocabulary_k)
                return uform_fail(uform_invalid_argument_k, "%s: byte id %u at row %zu column %zu is outside 0..257", verb, grid->values[cell], row, column);
            if (!(frontends & UFORM_PART(uform_part_of_cell((uform_cell_kind_t)kind))) && cell < staged) staged = cell;
            if (segment < 0)
                return uform_fail(uform_invalid_argument_k, "%s: %s cell at row %zu column %zu has no segment", verb,
                                  uform_kind_names_[kind], row, column);
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
    /* Valid input, refused only for what is not built yet. */
    if (staged < grid->rows * grid->columns)
        return uform_fail(uform_unsupported_k, "%s: %s cell at row %zu column %zu: this backend's frontend stage does not run %s cells yet",
                          verb, uform_kind_names_[grid->kinds[staged]], staged / grid->columns, staged % grid->columns,
                          uform_kind_names_[grid->kinds[staged]]);
    return uform_ok_k;
}

size_t uform_grid_compact(uform_grid_t const *grid, size_t first, size_t last, uint8_t *kinds, uint32_t *values,
                          int32_t *positions, size_t *destinations, uform_span_t *spans, size_t *cells) {
    size_t count = 0, segments = 0, row = first, row_start = 0, row_segments = 0;
    uform_runs_t runs = uform_runs_begin(grid, first, last);
    for (uform_run_t run; uform_runs_next(&runs, &run);) {
        if (run.start / grid->columns != row) { /* a new row: the last one's spans learn its extent */
            for (size_t s = row_segments; s < segments; ++s) spans[s].row_length = count - row_start;
            row = run.start / grid->columns, row_start = count, row_segments = segments;
        }
        if (run.padding) continue;
        spans[segments++] = (uform_span_t){count, run.length, row_start, 0};
        for (size_t cell = run.start; cell < run.start + run.length; ++cell, ++count) {
            int padding = grid->kinds[cell] == uform_cell_padding_k; /* inside a run only under the pool-padding plant */
            kinds[count] = padding ? uform_cell_byte_k : grid->kinds[cell];
            values[count] = padding ? uform_pad_k : grid->values[cell];
            memcpy(positions + count * 3, grid->positions + cell * 3, 3 * sizeof(int32_t));
            destinations[count] = cell;
        }
    }
    for (size_t s = row_segments; s < segments; ++s) spans[s].row_length = count - row_start;
    *cells = count;
    return segments;
}
