/*  encode.h: inference verbs. Texts are byte strings (UTF-8 or any bytes), packed many to a row;
 *  a text longer than a row is cut to the row and counted in `truncated`. Outputs go into
 *  caller-owned buffers of the sizes given here. An empty text is an error (nothing to embed).
 */
#ifndef UFORM_ENCODE_H
#define UFORM_ENCODE_H

#include "uform/av.h"
#include "uform/image.h"
#include "uform/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/** One text: `length` bytes at `data`. */
typedef struct uform_text_t {
    uint8_t const *data;
    size_t length;
} uform_text_t;

/** Matryoshka embeddings: `embeddings[count * width]`, each row L2-normalized.
 *  `width` must be one of the model's embedding widths (0: the widest). `truncated` may be NULL. */
UFORM_API uform_status_t uform_encode(uform_model_t *model, uform_text_t const *texts, size_t count, size_t width,
                            float *embeddings, size_t *truncated);

/** Matryoshka embeddings of images, in the same space as texts': `embeddings[count * width]`, each
 *  row L2-normalized. Each image is encoded bytes (PNG, JPEG, WebP) or decoded pixels (image.h),
 *  resized to at most 512 patches (or a row, if the model's rows are shorter). The model needs the
 *  vision frontend; a broken image fails the call, naming it. CPU and CUDA contexts alike; a CUDA
 *  context decodes JPEGs on the GPU where the build has nvJPEG, on the host with
 *  UFORM_CUDA_DECODE=host (docs/images.md, "GPU decoding"). */
UFORM_API uform_status_t uform_encode_images(uform_model_t *model, uform_image_t const *images, size_t count, size_t width,
                                             float *embeddings);

/** An audio clip to encode: encoded bytes (`data`, `size`: any format FFmpeg reads) when `samples`
 *  is NULL, else `count` decoded samples of 16 kHz mono in [-1, 1]. `name` names it in error
 *  messages (may be NULL). */
typedef struct uform_audio_clip_t {
    void const *data;
    size_t size;
    float const *samples;
    size_t count;
    char const *name;
} uform_audio_clip_t;

/** A video clip to encode: encoded bytes (`data`, `size`), decoded at `fps` frames a second (0: 25),
 *  when `video.rgb` is NULL, else decoded frames with their ticks (av.h). `name` as for audio. */
typedef struct uform_video_clip_t {
    void const *data;
    size_t size;
    double fps;
    uform_video_t video;
    char const *name;
} uform_video_clip_t;

/** Matryoshka embeddings of audio clips, in the same space as texts': each clip's first 10.24 s
 *  (512 frames of 20 ms, or a row if the model's rows are shorter). The model needs the audio
 *  frontend; a broken clip fails the call, naming it. CPU and CUDA contexts (decoding on the host). */
UFORM_API uform_status_t uform_encode_audio(uform_model_t *model, uform_audio_clip_t const *clips, size_t count, size_t width,
                                            float *embeddings);
/** The same for video clips: each in at most 1024 tubes (or a row), docs/audio_video.md's grid. The
 *  model needs the video frontend. CPU and CUDA contexts. */
UFORM_API uform_status_t uform_encode_video(uform_model_t *model, uform_video_clip_t const *clips, size_t count, size_t width,
                                            float *embeddings);

/** Per-byte ColBERT vectors of one text: `vectors[cells * colbert_width]`, each L2-normalized.
 *  `capacity` is how many cells `vectors` holds; `cells` receives min(length, columns). */
UFORM_API uform_status_t uform_colbert(uform_model_t *model, uform_text_t text, float *vectors, size_t capacity,
                             size_t *cells);

/** Per-byte ColBERT vectors of many texts, packed into passes as uform_encode packs them: text i's
 *  min(length, columns) cells are `vectors[offsets[i] * colbert_width ...]` up to `offsets[i + 1]`
 *  (`offsets[count + 1]`, filled here); `capacity` is how many cells `vectors` holds. */
UFORM_API uform_status_t uform_colbert_many(uform_model_t *model, uform_text_t const *texts, size_t count, float *vectors,
                                            size_t capacity, size_t *offsets);

/** MaxSim of each document against the query: `scores[count]`, the sum over query bytes of the
 *  best cosine among document bytes. `truncated` counts cut texts, the query included; may be NULL. */
UFORM_API uform_status_t uform_rerank(uform_model_t *model, uform_text_t query, uform_text_t const *documents,
                            size_t count, float *scores, size_t *truncated);

/** Symmetric MaxSim, as `uform rerank --fuse` and `uform_eval --fuse` rank: for each document, the mean
 *  over the shorter text's bytes (the query's on a tie) of each byte's best cosine among the other
 *  text's bytes, in [-1, 1] like the pooled cosine; the same for (a, b) as for (b, a). A short text is
 *  looked for in a long one, not each byte of a long text in a few (a noisy maximum). */
UFORM_API uform_status_t uform_rerank_symmetric(uform_model_t *model, uform_text_t query, uform_text_t const *documents,
                                      size_t count, float *scores, size_t *truncated);

/** The fused ranking, as `uform rerank --fuse W` prints and `uform serve`'s /v1/rerank ranks:
 *  (1 - weight) cosine of the pooled embeddings at the widest width + weight symmetric MaxSim, in
 *  [-1, 1]; `weight` in [0, 1] (0: the cosine alone, 1: symmetric MaxSim alone). One pass over the
 *  documents gives both terms. The model needs its pool and rerank heads. */
UFORM_API uform_status_t uform_rerank_fused(uform_model_t *model, uform_text_t query, uform_text_t const *documents,
                                  size_t count, double weight, float *scores, size_t *truncated);

/** `uform_rerank_fused`, except that a document and query both shorter than `gate` bytes are scored by the
 *  cosine alone (`uform rerank --fuse-gate`, `uform serve`'s /v1/rerank): MaxSim over a few bytes on each side
 *  ranks short strings worse than the pooled embedding does (docs/evaluation.md). `gate` 0 is the fusion. */
UFORM_API uform_status_t uform_rerank_gated(uform_model_t *model, uform_text_t query, uform_text_t const *documents,
                                  size_t count, double weight, size_t gate, float *scores, size_t *truncated);

/** MaxSim of stored ColBERT vectors (`uform_colbert`'s: unit rows of `width` values), so that texts
 *  scored against many others are encoded once: `symmetric` 0 gives `uform_rerank`'s score (the sum
 *  over the query's cells of each one's best dot product among the document's), 1 gives
 *  `uform_rerank_symmetric`'s (the mean from the shorter side, the query's on a tie). No model needed. */
UFORM_API uform_status_t uform_maxsim(float const *query, size_t query_cells, float const *document, size_t document_cells,
                                      size_t width, int symmetric, float *score);

/** Masked-byte logits of one sequence of ids (0..257, MASK = 256): `logits[length * 258]`.
 *  `length` is at most one row. */
UFORM_API uform_status_t uform_mlm_logits(uform_model_t *model, uint16_t const *ids, size_t length, float *logits);

/** Outputs of a pass over a grid; any pointer may be NULL to skip that output.
 *  Per-cell outputs are indexed by cell (row * columns + column); padding cells are left as they are. */
typedef struct uform_outputs_t {
    float *hidden;   /* [rows * columns * width] the final-normed states h */
    float *pooled;   /* [segments * E] the pool head's e, not normalized */
    float *colbert;  /* [rows * columns * colbert_width], normalized */
    float *logits;   /* [rows * columns * 258] */
    size_t segments; /* receives the number of segments in the grid */
} uform_outputs_t;

/** Runs the encoder over a caller-built grid (any kinds this build supports, any positions). */
UFORM_API uform_status_t uform_forward(uform_model_t *model, uform_grid_t const *grid, uform_outputs_t *outputs);

/* The same verbs on a context (model.h): the model's weights, the context's threads, workspace and
 * device. Contexts of one model may run from several threads at once. */
UFORM_API uform_status_t uform_context_encode(uform_context_t *context, uform_text_t const *texts, size_t count, size_t width,
                                    float *embeddings, size_t *truncated);
UFORM_API uform_status_t uform_context_encode_images(uform_context_t *context, uform_image_t const *images, size_t count,
                                                     size_t width, float *embeddings);
UFORM_API uform_status_t uform_context_encode_audio(uform_context_t *context, uform_audio_clip_t const *clips, size_t count,
                                                    size_t width, float *embeddings);
UFORM_API uform_status_t uform_context_encode_video(uform_context_t *context, uform_video_clip_t const *clips, size_t count,
                                                    size_t width, float *embeddings);
UFORM_API uform_status_t uform_context_colbert(uform_context_t *context, uform_text_t text, float *vectors, size_t capacity,
                                     size_t *cells);
UFORM_API uform_status_t uform_context_colbert_many(uform_context_t *context, uform_text_t const *texts, size_t count,
                                                    float *vectors, size_t capacity, size_t *offsets);
UFORM_API uform_status_t uform_context_rerank(uform_context_t *context, uform_text_t query, uform_text_t const *documents,
                                    size_t count, float *scores, size_t *truncated);
UFORM_API uform_status_t uform_context_rerank_symmetric(uform_context_t *context, uform_text_t query,
                                              uform_text_t const *documents, size_t count, float *scores, size_t *truncated);
UFORM_API uform_status_t uform_context_rerank_fused(uform_context_t *context, uform_text_t query,
                                          uform_text_t const *documents, size_t count, double weight, float *scores,
                                          size_t *truncated);
UFORM_API uform_status_t uform_context_rerank_gated(uform_context_t *context, uform_text_t query,
                                          uform_text_t const *documents, size_t count, double weight, size_t gate,
                                          float *scores, size_t *truncated);
UFORM_API uform_status_t uform_context_mlm_logits(uform_context_t *context, uint16_t const *ids, size_t length, float *logits);
UFORM_API uform_status_t uform_context_forward(uform_context_t *context, uform_grid_t const *grid, uform_outputs_t *outputs);

#ifdef __cplusplus
}
#endif
#endif
