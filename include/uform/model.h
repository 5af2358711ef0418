/*  model.h: creating, opening, saving and configuring a model, and the contexts that run it. A
 *  model is an opaque handle that owns its weights (BF16 matrices, Float32 norm scales). A context
 *  owns what a pass needs besides them: a thread pool and a workspace taken once, so that no verb
 *  allocates while it runs, and on a GPU the device copy of the weights. Many contexts share one
 *  model's weights, each used by one thread at a time; the model also has a context of its own,
 *  which the verbs that take the model handle run on (one thread at a time).
 */
#ifndef UFORM_MODEL_H
#define UFORM_MODEL_H

#include "uform/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct uform_model_t uform_model_t;
typedef struct uform_context_t uform_context_t;

/** How matrix products round their inputs. BF16 is the fast path; Float32 is for verification;
 *  E4M3 and int8 narrow the transformer blocks' products (docs/precision.md). */
typedef enum uform_precision_t {
    uform_precision_bf16_k = 0, /* activations rounded to BF16 before each product, Float32 accumulation */
    uform_precision_f32_k = 1,  /* activations kept in Float32, weights widened exactly to Float32 */
    uform_precision_e4m3_k = 2, /* the blocks' qkv, out, gate_up and down in E4M3: weights with a Float32 scale per
                                   output row, made once; activations with one per input row; Float32 accumulation
                                   (CPU: BF16 kernels over the widened codes; GPU: cuBLASLt's FP8 products). The
                                   rest as BF16. */
    uform_precision_int8_k = 3, /* the blocks' four products in int8: symmetric codes in [-127, 127] with a Float32 scale
                                   per output row of the weights, made once, and per input row of the activations;
                                   exact int32 sums (VPDPBUSD where the CPU has AVX-512 VNNI); attention's scores too,
                                   q and k with a scale per cell and head. CPU only. The rest as BF16. Not the output
                                   precision "int8" of quantize.h, which applies to embeddings. */
} uform_precision_t;

/** Where inference passes run (uform_model_set_device). */
typedef enum uform_device_t {
    uform_device_cpu_k = 0,  /* the default: the thread pool and the precision of uform_model_set_precision */
    uform_device_cuda_k = 1, /* the calling thread's current GPU (CUDA device 0 unless the caller chose another) */
} uform_device_t;

/** Creates a randomly initialized model, deterministic for a seed (see docs/checkpoints.md). */
UFORM_API uform_status_t uform_model_init(uform_config_t const *config, uint64_t seed, uform_model_t **model);
/** Opens a checkpoint directory holding `model.safetensors`, or, where that is absent, Hugging Face's
 *  sharded layout (`model.safetensors.index.json` and the shards its weight_map names); validates
 *  header, shapes and config (docs/checkpoints.md). `directory` may also name either file itself. */
UFORM_API uform_status_t uform_model_open(char const *directory, uform_model_t **model);
/** Writes `model.safetensors` and `README.md` into `directory` (created if absent), atomically.
 *  `command` is recorded in the README as the command that made it; it may be NULL. */
UFORM_API uform_status_t uform_model_save(uform_model_t const *model, char const *directory, char const *command);
/** Writes the model's tensors into `directory` (created if absent) in the sharded layout:
 *  `model-0000N-of-0000M.safetensors`, each file at most `max_shard_bytes` bytes (a tensor larger
 *  than that alone in a shard, with a warning on stderr), and `model.safetensors.index.json`, each
 *  atomically, the index last. Writes no README.md; refuses a folder holding `model.safetensors`. */
UFORM_API uform_status_t uform_model_save_sharded(uform_model_t const *model, char const *directory, size_t max_shard_bytes);

/** How uform_model_save_sharded_as stores the blocks' four matrices (qkv, out, gate_up, down): BF16 as
 *  trained, or E4M3 codes (`F8_E4M3`, the E4M3 precision's rounding) with a Float32 scale per row beside
 *  each (`NAME.scale`), about half the bytes; the byte entries, frontends, norms, pool and heads stay
 *  as they are. A reader turns the codes back into BF16 at load, so any precision runs on either. */
typedef enum uform_storage_t {
    uform_storage_bf16_k = 0,
    uform_storage_e4m3_k = 1,
} uform_storage_t;

/** uform_model_save_sharded with the matrices stored as `storage` (docs/checkpoints.md). */
UFORM_API uform_status_t uform_model_save_sharded_as(uform_model_t const *model, char const *directory, size_t max_shard_bytes,
                                                     uform_storage_t storage);
/** (Re)initializes a head, "pool", "rerank", "mlm", "mae", "mae_audio" or "mae_video", or a frontend,
 *  "vision", "video" or "audio", as `uform_model_init` would for `seed`, adding it when absent; the
 *  pool and rerank heads also reset siglip.scale and siglip.bias.
 *  Used to warm-start a new variant from another's checkpoint. */
UFORM_API uform_status_t uform_model_init_head(uform_model_t *model, char const *head, uint64_t seed);
/** Records how the weights came to be, for the checkpoint's README.md and metadata: the recipe
 *  (objective, mixture, steps), the data sources, and the warm start; NULL leaves a field as is. */
UFORM_API uform_status_t uform_model_describe(uform_model_t *model, char const *recipe, char const *datasets,
                                    char const *warm_start);
/** Net2Net growth (SPEC.md section 8; docs/checkpoints.md, "Growth"): a new model with `blocks` more blocks,
 *  each a copy of the block before it with its out and down projections zero (an identity until
 *  trained), spread evenly through the depth. The grown model must reproduce the source's embeddings
 *  (of built-in probe texts, and a probe picture where the source reads images, encoded as each model
 *  is set: precision and device) to a cosine of at least 0.9999, else the call fails (uform_format_k)
 *  and returns no model. `cosine` (may be NULL) receives the lowest cosine found. The source is only read. */
UFORM_API uform_status_t uform_model_deepen(uform_model_t *source, size_t blocks, uform_model_t **grown, double *cosine);
/** Net2Net growth: a new model of twice the width and heads, whose residual stream is [x, x]; the
 *  Matryoshka and ColBERT widths stay the source's. Checked as uform_model_deepen is. */
UFORM_API uform_status_t uform_model_widen(uform_model_t *source, uform_model_t **grown, double *cosine);
/** Frees the model. NULL is allowed. */
UFORM_API void uform_model_close(uform_model_t *model);

/** Copies the model's configuration into `config`. */
UFORM_API uform_status_t uform_model_config(uform_model_t const *model, uform_config_t *config);
/** Whether the model carries a head: "pool", "rerank" or "mlm". */
UFORM_API int uform_model_has_head(uform_model_t const *model, char const *head);
/** Spreads work over `threads` threads (0: all cores). Takes effect at once. */
UFORM_API uform_status_t uform_model_set_threads(uform_model_t *model, size_t threads);
/** Chooses how matrix products round (default BF16). Float32 widens the weights once, at this call;
 *  E4M3 and int8 pack the blocks' matrices once, at this call. */
UFORM_API uform_status_t uform_model_set_precision(uform_model_t *model, uform_precision_t precision);
/** The precision named "bf16", "e4m3", "int8" or "f32" (also "float32"), for command lines and bindings. */
UFORM_API uform_status_t uform_precision_parse(char const *name, uform_precision_t *precision);
/** "bf16", "e4m3", "int8" or "f32"; "unknown" for a value outside uform_precision_t. */
UFORM_API char const *uform_precision_name(uform_precision_t precision);
/** Chooses where `uform_forward` and the verbs of encode.h (encode, colbert, rerank, mlm_logits)
 *  run. CUDA: the weights are copied to the GPU at this call (BF16 matrices, Float32 norm gains and
 *  pool.query) and again, before the next pass, whenever they change (a trainer's step, a head
 *  re-initialized); activations are stored in BF16 with Float32 accumulation and a Float32 residual
 *  stream, like the BF16 precision (so the Float32 and int8 precisions are refused on the GPU, either order;
 *  E4M3 runs there as on the CPU, its codes made at this call: set the precision first),
 *  and the verbs' outputs agree with the CPU's within the bound of docs/cuda.md. Texts are packed
 *  on the host as on the CPU; MaxSim sums run on the host. CPU: frees the GPU's copies. Fails with
 *  uform_unsupported_k, leaving the model on the CPU, in a build without the CUDA backend or where
 *  no GPU is usable. */
UFORM_API uform_status_t uform_model_set_device(uform_model_t *model, uform_device_t device);
/** Creates a context over `model` on `device` with `threads` host threads (0: all cores): CUDA takes
 *  the calling thread's current GPU and copies the weights up (BF16 or E4M3, as uform_model_set_device).
 *  The model must outlive its contexts. Its weights must not change (a trainer's step, a head
 *  re-initialized, uform_model_set_precision) while any context runs a pass; each context catches up
 *  with changed weights before its next pass. */
UFORM_API uform_status_t uform_context_create(uform_model_t *model, uform_device_t device, size_t threads, uform_context_t **context);
/** Grows the context's workspace to hold `cells` cells per pass (default: two rows). */
UFORM_API uform_status_t uform_context_reserve(uform_context_t *context, size_t cells);
/** Frees the context. NULL is allowed. */
UFORM_API void uform_context_close(uform_context_t *context);
/** Names the device that `device` means here into `name`: the GPU's name, or for the CPU its model,
 *  cores, class (ISA extensions) and the BF16 kernel table this process runs, as in
 *  "<model>, 2 cores; class x86-64 avx2 fma avx512f; kernels avx512f" (env UFORM_CPU pins a table).
 *  uform_unsupported_k, with the reason, in a build without the CUDA backend or where no GPU is usable. */
UFORM_API uform_status_t uform_device_name(uform_device_t device, char *name, size_t capacity);
/** Grows the workspace to hold `cells` cells per pass (default: two rows). Allocates here only. */
UFORM_API uform_status_t uform_model_reserve(uform_model_t *model, size_t cells);

#ifdef __cplusplus
}
#endif
#endif
