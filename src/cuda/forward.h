/*  forward.h (internal): inference on one GPU. A context holds a copy of a model's weights on the
 *  device (BF16 matrices, Float32 norm gains and pool.query, as in the model) and activation
 *  buffers that grow to the largest pass seen; a pass (the CPU's compacted cells, cpu/forward.h)
 *  runs the encoder of SPEC.md section 2 from the kernels of cuda.h, mirroring the training step's
 *  block_forward_ (step.c), and the heads it asks for, then downloads the outputs into the pass's
 *  Float32 arrays in the CPU's layout. Host C11; every call returns uform_ok_k or a status with a
 *  message in `error` (the caller reports it through uform_fail). */
#ifndef UFORM_CUDA_FORWARD_H
#define UFORM_CUDA_FORWARD_H

#include <stddef.h>
#include <stdint.h>

#include "cpu/forward.h"

typedef struct uform_cuda_forward_t uform_cuda_forward_t;

/** The most cells a GPU pass takes at `width`: cuDNN's ragged offsets count qkv's elements in 32 bits, and FP8
 *  attention's padding takes a spare row past the pass. The text packer stops there; uform_cuda_forward_run
 *  runs a larger pass on attention.cu's kernels (BF16) or refuses it (FP8 attention). */
static inline size_t uform_cuda_pass_cells_most(size_t width) { return (size_t)INT32_MAX / (3 * width) - 1; }

/** Takes the calling thread's current GPU: a stream and cuBLASLt. uform_unsupported_k when no GPU
 *  is usable (no device, no driver), uform_out_of_memory_k when the device is full. */
uform_status_t uform_cuda_forward_create(uform_cuda_forward_t **context, char *error, size_t error_size);
/** Copies the model's weights (its BF16 masters and Float32 vectors, whichever heads it has) to the
 *  device, replacing any earlier copy. Called once, and again whenever the weights change. */
uform_status_t uform_cuda_forward_upload(uform_cuda_forward_t *context, uform_model_t const *model, char *error,
                                         size_t error_size);
/** Runs one pass over the uploaded weights and writes its requested outputs (hidden, pooled,
 *  colbert, logits) as uform_cpu_forward does; hidden is the GPU's BF16 h widened to Float32.
 *  Synchronous: the outputs are written when it returns. */
uform_status_t uform_cuda_forward_run(uform_cuda_forward_t *context, uform_pass_t const *pass, char *error,
                                      size_t error_size);
/** Whether this build decodes JPEGs on the GPU (nvJPEG and NPP found: image_decode.h). */
int uform_cuda_forward_decodes_jpeg(void);
/** Decodes the JPEG `data[size]` (`name` names it in messages) on this context's GPU into its decoded
 *  patches from patch `first` on, at most `most` of them; `rows` and `columns` receive the grid
 *  (uform_image_grid's). Corrupt data fails with uform_format_k; uform_unsupported_k (CMYK, a layout
 *  nvJPEG does not name, a build without GPU decoding) leaves the image to the host's decoder. */
uform_status_t uform_cuda_forward_decode_image(uform_cuda_forward_t *context, void const *data, size_t size, char const *name,
                                               size_t first, size_t most, size_t *rows, size_t *columns, char *error,
                                               size_t error_size);
/** Copies `count` patches decoded on the host into the decoded patches from patch `first` on. */
uform_status_t uform_cuda_forward_stage_patches(uform_cuda_forward_t *context, float const *patches, size_t first, size_t count,
                                                char *error, size_t error_size);
/** The decoded patches (device memory, Float32 [*, 1024]): a pass's image media with
 *  `media_on_device` set reads them. Valid until the next decode or stage grows them. */
float const *uform_cuda_forward_decoded(uform_cuda_forward_t const *context);
/** The calling thread's current GPU's name; uform_unsupported_k, with why in `error`, where none is usable. */
uform_status_t uform_cuda_device_name(char *name, size_t capacity, char *error, size_t error_size);
/** Frees the device copies and buffers. NULL is allowed. */
void uform_cuda_forward_destroy(uform_cuda_forward_t *context);

#endif
