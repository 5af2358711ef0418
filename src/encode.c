/*  encode.c: the inference verbs of encode.h. Each checks its arguments, packs texts or a grid
 *  into the workspace's compacted cells, runs passes of at most the workspace's capacity, and
 *  writes the caller's buffers. */
#include "uform/encode.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uform/image.h"

#include "core/status.h"
#include "cpu/forward.h"
#include "model/context.h"
#include "model/grid.h"

static size_t uform_widest_(uform_model_t const *model) {
    return model->config.embedding_widths[model->config.embedding_widths_count - 1];
}

static uform_status_t uform_need_head_(uform_model_t const *model, char const *head, char const *verb) {
    if (uform_model_has_head(model, head)) return uform_ok_k;
    return uform_fail(uform_missing_k, "%s: the checkpoint has no %s head", verb, head);
}

/* Appends one text as a segment of the pass being built; starts a new row when it does not fit. */
typedef struct uform_packer_t {
    uform_context_t *context;
    size_t cells, segments, row_start;
} uform_packer_t;

static size_t uform_clip_(uform_model_t const *model, size_t length) {
    return length < model->config.columns ? length : model->config.columns;
}

static int uform_packer_fits_(uform_packer_t const *packer, size_t length) {
    return packer->cells + length <= packer->context->workspace.cells;
}

static void uform_packer_add_(uform_packer_t *packer, uint8_t const *bytes, uint16_t const *ids, size_t length) {
    uform_workspace_t *workspace = &packer->context->workspace;
    if (packer->cells - packer->row_start + length > packer->context->model->config.columns) packer->row_start = packer->cells;
    for (size_t i = 0; i < length; ++i) {
        size_t cell = packer->cells + i;
        workspace->kinds[cell] = uform_cell_byte_k;
        workspace->values[cell] = bytes ? bytes[i] : ids[i];
        for (size_t axis = 0; axis < 3; ++axis) workspace->positions[cell * 3 + axis] = (int32_t)i;
    }
    workspace->spans[packer->segments++] = (uform_span_t){packer->cells, length, packer->row_start, 0};
    packer->cells += length;
}

/* Fills each span's row length once the pass is complete. */
static void uform_packer_close_rows_(uform_packer_t *packer) {
    uform_span_t *spans = packer->context->workspace.spans;
    for (size_t s = 0; s < packer->segments; ++s) {
        size_t end = packer->cells;
        for (size_t t = s + 1; t < packer->segments; ++t)
            if (spans[t].row_start != spans[s].row_start) {
                end = spans[t].row_start;
                break;
            }
        spans[s].row_length = end - spans[s].row_start;
    }
}

static uform_pass_t uform_packer_pass_(uform_packer_t *packer) {
    uform_packer_close_rows_(packer);
    uform_workspace_t *workspace = &packer->context->workspace;
    return (uform_pass_t){.cells = packer->cells, .kinds = workspace->kinds, .values = workspace->values, .positions = workspace->positions,
                          .segments = workspace->spans, .segments_count = packer->segments};
}

/* Packs texts from `*next` on while they fit one pass; returns the pass and counts cut texts. */
static uform_pass_t uform_pack_texts_(uform_context_t *context, uform_text_t const *texts, size_t count, size_t *next,
                                      size_t *cut) {
    uform_model_t const *model = context->model;
    uform_packer_t packer = {.context = context};
    for (; *next < count && uform_packer_fits_(&packer, uform_clip_(model, texts[*next].length)); ++*next) {
        size_t length = uform_clip_(model, texts[*next].length);
        *cut += length < texts[*next].length;
        uform_packer_add_(&packer, texts[*next].data, NULL, length);
    }
    return uform_packer_pass_(&packer);
}

/* Appends one image's patches (media rows [first, first + rows * columns)) as a segment: t = 0,
 * h = patch row, w = patch column. */
static void uform_packer_add_image_(uform_packer_t *packer, size_t first, size_t rows, size_t columns) {
    uform_workspace_t *workspace = &packer->context->workspace;
    size_t length = rows * columns;
    if (packer->cells - packer->row_start + length > packer->context->model->config.columns) packer->row_start = packer->cells;
    for (size_t i = 0; i < length; ++i) {
        size_t cell = packer->cells + i;
        workspace->kinds[cell] = uform_cell_image_k;
        workspace->values[cell] = (uint32_t)(first + i);
        int32_t *position = workspace->positions + cell * 3;
        position[0] = 0, position[1] = (int32_t)(i / columns), position[2] = (int32_t)(i % columns);
    }
    workspace->spans[packer->segments++] = (uform_span_t){packer->cells, length, packer->row_start, 0};
    packer->cells += length;
}

static uform_status_t uform_check_texts_(uform_text_t const *texts, size_t count, char const *verb, char const *what) {
    for (size_t i = 0; i < count; ++i) {
        if (!texts[i].length) return uform_fail(uform_invalid_argument_k, "%s: %s %zu is empty: nothing to encode", verb, what, i);
        if (!texts[i].data) return uform_fail(uform_invalid_argument_k, "%s: %s %zu has no data", verb, what, i);
    }
    return uform_ok_k;
}

/* Writes normalize(e[:width]) of the pass's segments. */
static void uform_write_embeddings_(uform_context_t const *context, size_t segments, size_t width, float *embeddings) {
    size_t widest = uform_widest_(context->model);
    for (size_t s = 0; s < segments; ++s) {
        float const *e = context->workspace.embeddings + s * widest;
        double norm = 0;
        for (size_t i = 0; i < width; ++i) norm += (double)e[i] * e[i];
        float scale = norm > 0 ? (float)(1.0 / sqrt(norm)) : 0.0f;
        for (size_t i = 0; i < width; ++i) embeddings[s * width + i] = e[i] * scale;
    }
}

uform_status_t uform_context_encode(uform_context_t *context, uform_text_t const *texts, size_t count, size_t width,
                                    float *embeddings, size_t *truncated) {
    if (!context || !texts || !embeddings || !count)
        return uform_fail(uform_invalid_argument_k, "uform_encode: model, texts and embeddings are needed, count > 0");
    uform_model_t *model = context->model;
    UFORM_TRY(uform_need_head_(model, "pool", "uform_encode"));
    if (!width) width = uform_widest_(model);
    int known = 0;
    for (size_t i = 0; i < model->config.embedding_widths_count; ++i) known |= model->config.embedding_widths[i] == width;
    if (!known) return uform_fail(uform_invalid_argument_k, "uform_encode: width %zu is not one of the model's embedding widths", width);
    UFORM_TRY(uform_check_texts_(texts, count, "uform_encode", "text"));
    size_t cut = 0, done = 0;
    while (done < count) {
        size_t first = done;
        uform_pass_t pass = uform_pack_texts_(context, texts, count, &done, &cut);
        pass.pooled = context->workspace.embeddings;
        UFORM_TRY(uform_context_pass(context, &pass));
        uform_write_embeddings_(context, done - first, width, embeddings + first * width);
    }
    if (truncated) *truncated = cut;
    return uform_ok_k;
}

/* The patches of image `index` into `patches` (room for `most` patches): decoded here when it is
 * encoded bytes. */
static uform_status_t uform_image_to_patches_(uform_image_t const *image, size_t index, size_t most, float *patches,
                                              size_t *rows, size_t *columns) {
    char name[64];
    snprintf(name, sizeof(name), "image %zu", index);
    char const *label = image->name ? image->name : name;
    if (image->pixels.rgba) {
        uform_status_t status = uform_image_patches(&image->pixels, most, patches, most, rows, columns);
        if (status == uform_ok_k) return status;
        char reason[512]; /* uform_fail writes the buffer uform_last_error reads */
        snprintf(reason, sizeof(reason), "%s", uform_last_error());
        return uform_fail(status, "uform_encode_images: %s: %s", label, reason);
    }
    if (!image->data || !image->size)
        return uform_fail(uform_invalid_argument_k, "uform_encode_images: %s has neither pixels nor encoded bytes", label);
    uform_pixels_t pixels;
    UFORM_TRY(uform_image_decode(image->data, image->size, label, &pixels));
    uform_status_t status = uform_image_patches(&pixels, most, patches, most, rows, columns);
    uform_pixels_free(&pixels);
    return status;
}

/* A chunk of images decoded on the context's threads, each into its own buffer of `most` patches;
 * a failure keeps its message, which the worker's thread-local error would lose. */
typedef struct uform_decoded_t {
    float *patches;
    size_t rows, columns;
    uform_status_t status;
    char message[512];
} uform_decoded_t;

typedef struct uform_decode_job_t {
    uform_image_t const *images;
    size_t first, most;
    uform_decoded_t *decoded;
} uform_decode_job_t;

static void uform_decode_task_(void *job_pointer, size_t index, size_t thread) {
    (void)thread;
    uform_decode_job_t const *job = job_pointer;
    uform_decoded_t *d = &job->decoded[index];
    size_t image = job->first + index;
    d->status = uform_image_to_patches_(&job->images[image], image, job->most, d->patches, &d->rows, &d->columns);
    if (d->status != uform_ok_k) snprintf(d->message, sizeof(d->message), "%s", uform_last_error());
}

uform_status_t uform_context_encode_images(uform_context_t *context, uform_image_t const *images, size_t count,
                                           size_t width, float *embeddings) {
    if (!context || !images || !embeddings || !count)
        return uform_fail(uform_invalid_argument_k, "uform_encode_images: model, images and embeddings are needed, count > 0");
    uform_model_t *model = context->model;
    UFORM_TRY(uform_need_head_(model, "pool", "uform_encode_images"));
    if (!uform_model_carries(model, uform_part_vision_k))
        return uform_fail(uform_missing_k, "uform_encode_images: the model has no vision frontend (vision.patch, vision.bias)");
    if (!width) width = uform_widest_(model);
    int known = 0;
    for (size_t i = 0; i < model->config.embedding_widths_count; ++i) known |= model->config.embedding_widths[i] == width;
    if (!known) return uform_fail(uform_invalid_argument_k, "uform_encode_images: width %zu is not one of the model's embedding widths", width);
    /* An image fills at most 512 patches, and at most a row. */
    size_t most = model->config.columns < uform_image_patches_k ? model->config.columns : uform_image_patches_k;
    if (context->workspace.cells < model->config.columns) UFORM_TRY(uform_workspace_reserve(context, model->config.columns));
    size_t capacity = context->workspace.cells, values = uform_patch_length_k;
    /* Decoding runs on the pool, two images a thread at a time; packing and the passes keep the images' order. */
    size_t chunk = 2 * uform_pool_threads(context->pool);
    chunk = chunk < count ? chunk : count;
    float *patches = malloc(capacity * values * sizeof(float));
    uform_decoded_t *decoded = calloc(chunk, sizeof(*decoded));
    float *buffers = malloc(chunk * most * values * sizeof(float));
    uform_status_t status = uform_ok_k;
    if (!patches || !decoded || !buffers)
        status = uform_fail(uform_out_of_memory_k, "uform_encode_images: cannot hold %zu patches and %zu decoded images", capacity, chunk);
    for (size_t i = 0; status == uform_ok_k && i < chunk; ++i) decoded[i].patches = buffers + i * most * values;
    size_t chunk_first = 0, chunk_count = 0; /* the decoded images [chunk_first, chunk_first + chunk_count) */
    for (size_t done = 0; done < count && status == uform_ok_k;) {
        uform_packer_t packer = {.context = context};
        size_t first = done;
        while (done < count && status == uform_ok_k) {
            if (capacity - packer.cells < most) break; /* the next image might not fit this pass */
            if (done == chunk_first + chunk_count) {
                chunk_first = done, chunk_count = count - done < chunk ? count - done : chunk;
                uform_decode_job_t job = {images, chunk_first, most, decoded};
                uform_pool_for(context->pool, chunk_count, uform_decode_task_, &job);
            }
            uform_decoded_t const *d = &decoded[done - chunk_first];
            if ((status = d->status) != uform_ok_k) {
                status = uform_fail(status, "%s", d->message);
                break;
            }
            memcpy(patches + packer.cells * values, d->patches, d->rows * d->columns * values * sizeof(float));
            uform_packer_add_image_(&packer, packer.cells, d->rows, d->columns);
            done++;
        }
        if (status != uform_ok_k) break;
        uform_media_t media[uform_media_kinds_k] = {{.data = patches, .count = packer.cells, .dtype = uform_media_f32_k}};
        uform_pass_t pass = uform_packer_pass_(&packer);
        pass.media = media;
        pass.pooled = context->workspace.embeddings;
        status = uform_context_pass(context, &pass);
        if (status == uform_ok_k) uform_write_embeddings_(context, done - first, width, embeddings + first * width);
    }
    free(patches), free(decoded), free(buffers);
    return status;
}

uform_status_t uform_context_colbert(uform_context_t *context, uform_text_t text, float *vectors, size_t capacity,
                                     size_t *cells) {
    if (!context || !vectors) return uform_fail(uform_invalid_argument_k, "uform_colbert: model and vectors are needed");
    uform_model_t *model = context->model;
    UFORM_TRY(uform_need_head_(model, "rerank", "uform_colbert"));
    UFORM_TRY(uform_check_texts_(&text, 1, "uform_colbert", "text"));
    size_t length = uform_clip_(model, text.length);
    if (capacity < length)
        return uform_fail(uform_shape_k, "uform_colbert: the buffer holds %zu cells, the text needs %zu", capacity, length);
    uform_packer_t packer = {.context = context};
    uform_packer_add_(&packer, text.data, NULL, length);
    uform_pass_t pass = uform_packer_pass_(&packer);
    pass.colbert = vectors;
    UFORM_TRY(uform_context_pass(context, &pass));
    if (cells) *cells = length;
    return uform_ok_k;
}

typedef struct uform_maxsim_context_t {
    uform_context_t const *context;
    float const *query;
    size_t query_cells;
    float *scores;
} uform_maxsim_context_t;

static void uform_maxsim_task_(void *context_pointer, size_t index, size_t thread) {
    (void)thread;
    uform_maxsim_context_t const *context = context_pointer;
    uform_workspace_t const *workspace = &context->context->workspace;
    size_t width = context->context->model->config.colbert_width;
    uform_span_t const *document = &workspace->spans[index];
    double total = 0;
    for (size_t i = 0; i < context->query_cells; ++i) {
        float const *q = context->query + i * width;
        float best = -INFINITY;
        for (size_t t = 0; t < document->length; ++t) {
            float const *c = workspace->colbert + (document->start + t) * width;
            float dot = 0;
            for (size_t j = 0; j < width; ++j) dot += q[j] * c[j];
            best = dot > best ? dot : best;
        }
        total += best;
    }
    context->scores[index] = (float)total;
}

uform_status_t uform_context_rerank(uform_context_t *context, uform_text_t query, uform_text_t const *documents,
                                    size_t count, float *scores, size_t *truncated) {
    if (!context || !documents || !scores || !count)
        return uform_fail(uform_invalid_argument_k, "uform_rerank: model, documents and scores are needed, count > 0");
    uform_model_t *model = context->model;
    UFORM_TRY(uform_need_head_(model, "rerank", "uform_rerank"));
    UFORM_TRY(uform_check_texts_(&query, 1, "uform_rerank", "query"));
    UFORM_TRY(uform_check_texts_(documents, count, "uform_rerank", "document"));
    size_t query_cells;
    UFORM_TRY(uform_context_colbert(context, query, context->workspace.query_colbert, model->config.columns, &query_cells));
    size_t cut = query_cells < query.length, done = 0;
    while (done < count) {
        size_t first = done;
        uform_pass_t pass = uform_pack_texts_(context, documents, count, &done, &cut);
        pass.colbert = context->workspace.colbert;
        UFORM_TRY(uform_context_pass(context, &pass));
        uform_maxsim_context_t maxsim = {context, context->workspace.query_colbert, query_cells, scores + first};
        uform_pool_for(context->pool, done - first, uform_maxsim_task_, &maxsim);
    }
    if (truncated) *truncated = cut;
    return uform_ok_k;
}

uform_status_t uform_context_mlm_logits(uform_context_t *context, uint16_t const *ids, size_t length, float *logits) {
    if (!context || !ids || !logits || !length)
        return uform_fail(uform_invalid_argument_k, "uform_mlm_logits: model, ids and logits are needed, length > 0");
    uform_model_t *model = context->model;
    UFORM_TRY(uform_need_head_(model, "mlm", "uform_mlm_logits"));
    if (length > model->config.columns)
        return uform_fail(uform_shape_k, "uform_mlm_logits: %zu ids exceed a row of %zu", length, model->config.columns);
    for (size_t i = 0; i < length; ++i)
        if (ids[i] >= uform_vocabulary_k)
            return uform_fail(uform_invalid_argument_k, "uform_mlm_logits: id %u at %zu is outside 0..257", ids[i], i);
    uform_packer_t packer = {.context = context};
    uform_packer_add_(&packer, NULL, ids, length);
    uform_pass_t pass = uform_packer_pass_(&packer);
    pass.logits = logits;
    UFORM_TRY(uform_context_pass(context, &pass));
    return uform_ok_k;
}

uform_status_t uform_context_forward(uform_context_t *context, uform_grid_t const *grid, uform_outputs_t *outputs) {
    if (!context || !grid || !outputs) return uform_fail(uform_invalid_argument_k, "uform_forward: NULL argument");
    uform_model_t *model = context->model;
    size_t widest_row = 0;
    unsigned frontends = context->device == uform_device_cuda_k ? UFORM_FRONTENDS_CUDA : UFORM_FRONTENDS_CPU;
    UFORM_TRY(uform_grid_check(grid, model->parts, frontends, "uform_forward", &widest_row));
    if (outputs->pooled) UFORM_TRY(uform_need_head_(model, "pool", "uform_forward"));
    if (outputs->colbert) UFORM_TRY(uform_need_head_(model, "rerank", "uform_forward"));
    if (outputs->logits) UFORM_TRY(uform_need_head_(model, "mlm", "uform_forward"));
    if (widest_row > context->workspace.cells) UFORM_TRY(uform_workspace_reserve(context, grid->columns));
    size_t widest = uform_widest_(model), segments_done = 0;
    for (size_t first = 0; first < grid->rows;) {
        /* As many whole rows as the workspace holds. */
        size_t last = first, cells = 0;
        while (last < grid->rows) {
            size_t active = 0;
            for (size_t column = 0; column < grid->columns; ++column)
                active += grid->segments[last * grid->columns + column] != -1;
#if defined(UFORM_PLANT_POOL_PADDING)
            active = grid->columns;
#endif
            if (last > first && cells + active > context->workspace.cells) break;
            cells += active;
            last++;
        }
        uform_workspace_t *workspace = &context->workspace;
        size_t segments = uform_grid_compact(grid, first, last, workspace->kinds, workspace->values, workspace->positions,
                                             workspace->destinations, workspace->spans, &cells);
        uform_pass_t pass = {.cells = cells,
                             .kinds = workspace->kinds,
                             .values = workspace->values,
                             .media = grid->media,
                             .positions = workspace->positions,
                             .segments = workspace->spans,
                             .segments_count = segments,
                             .destinations = workspace->destinations,
                             .hidden = outputs->hidden,
                             .pooled = outputs->pooled ? outputs->pooled + segments_done * widest : NULL,
                             .colbert = outputs->colbert,
                             .logits = outputs->logits};
        if (cells) UFORM_TRY(uform_context_pass(context, &pass));
        segments_done += segments;
        first = last;
    }
    outputs->segments = segments_done;
    return uform_ok_k;
}

/* The model-handle verbs: the same, on the model's own context. */
#define UFORM_NEED_MODEL_(verb)                                                                                      \
    if (!model) return uform_fail(uform_invalid_argument_k, verb ": NULL model")

uform_status_t uform_encode(uform_model_t *model, uform_text_t const *texts, size_t count, size_t width,
                            float *embeddings, size_t *truncated) {
    UFORM_NEED_MODEL_("uform_encode");
    return uform_context_encode(model->context, texts, count, width, embeddings, truncated);
}

uform_status_t uform_encode_images(uform_model_t *model, uform_image_t const *images, size_t count, size_t width,
                                   float *embeddings) {
    UFORM_NEED_MODEL_("uform_encode_images");
    return uform_context_encode_images(model->context, images, count, width, embeddings);
}

uform_status_t uform_colbert(uform_model_t *model, uform_text_t text, float *vectors, size_t capacity, size_t *cells) {
    UFORM_NEED_MODEL_("uform_colbert");
    return uform_context_colbert(model->context, text, vectors, capacity, cells);
}

uform_status_t uform_rerank(uform_model_t *model, uform_text_t query, uform_text_t const *documents, size_t count,
                            float *scores, size_t *truncated) {
    UFORM_NEED_MODEL_("uform_rerank");
    return uform_context_rerank(model->context, query, documents, count, scores, truncated);
}

uform_status_t uform_mlm_logits(uform_model_t *model, uint16_t const *ids, size_t length, float *logits) {
    UFORM_NEED_MODEL_("uform_mlm_logits");
    return uform_context_mlm_logits(model->context, ids, length, logits);
}

uform_status_t uform_forward(uform_model_t *model, uform_grid_t const *grid, uform_outputs_t *outputs) {
    UFORM_NEED_MODEL_("uform_forward");
    return uform_context_forward(model->context, grid, outputs);
}
