/*  context.h (internal): what a pass needs besides the weights. A context reads one model's weights
 *  (which several contexts share) and owns the rest: the thread pool and workspace of the host side
 *  (packing, the CPU's passes, MaxSim), and on the GPU the CUDA forward (stream, cuBLASLt, the device
 *  copy of the weights, activations). Every context has the host side; a CUDA context adds the GPU's. */
#ifndef UFORM_MODEL_CONTEXT_H
#define UFORM_MODEL_CONTEXT_H

#include "model/model.h"

struct uform_pass_t; /* cpu/forward.h */

struct uform_context_t {
    uform_model_t *model;
    uform_device_t device;
    uform_pool_t *pool;
    uform_workspace_t workspace;
    struct uform_cuda_forward_t *cuda; /* CUDA: cuda/forward.h's context; NULL on the CPU */
    uint64_t uploaded;                 /* CUDA: the model's version that the device copy holds */
};

/** Creates a context; `verb` starts its messages. */
uform_status_t uform_context_open(uform_model_t *model, uform_device_t device, size_t threads, char const *verb,
                                  uform_context_t **context);
/** Moves a context to `device` (the GPU's side made or freed); `verb` starts its messages. */
uform_status_t uform_context_move(uform_context_t *context, uform_device_t device, char const *verb);
/** Replaces the thread pool with one of `threads` threads (0: all cores). */
uform_status_t uform_context_threads(uform_context_t *context, size_t threads);
/** Makes sure the workspace holds `cells` cells and one scratch per pool thread. */
uform_status_t uform_workspace_reserve(uform_context_t *context, size_t cells);
/** Runs one pass on the context's device, the weights brought up to date first (the model's
 *  packed copies, then a GPU's copy). */
uform_status_t uform_context_pass(uform_context_t *context, struct uform_pass_t const *pass);

#endif
