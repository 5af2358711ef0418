/*  file.h (internal): a whole file read into memory, with the failures named as every reader of
 *  ours names them (the JSONL reader, image files). */
#ifndef UFORM_CORE_FILE_H
#define UFORM_CORE_FILE_H

#include <stddef.h>

#include "uform/types.h"

/** Reads the regular file at `path` into `*data` (malloc'd, at least one byte; the caller frees
 *  it) and its length into `*size`; fails with uform_io_k or uform_out_of_memory_k naming the path. */
uform_status_t uform_file_read(char const *path, unsigned char **data, size_t *size);

#endif
