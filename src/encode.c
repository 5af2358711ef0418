/*  encode.c: the inference verbs of encode.h. Each checks its arguments, packs texts, media items or a grid
 *  into the workspace's compacted cells, runs passes of at most the workspace's capacity, and
 *  writes the caller's buffers. */
#include "uform/encode.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uform/av.h"
#include "uform/image.h"

#include "core/status.h"
#include "cpu/forward.h"
#include "cpu/frontend.h"
#include "model/context.h"
#include "model/grid.h"
#if defined(UFORM_HAVE_CUDA)
#include "cuda/forward.h"
#endif

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

/* A CPU pass of texts stops near this many cells a thread pair (once it holds one text): its buffers,
 * reread every layer, then stay nearer the caches (docs/design.md). The GPU fills its workspace, up to
 * cuDNN's ragged offsets, 32-bit counts of qkv's elements. */
enum { uform_cpu_pass_cells_k = 2048 };

static int uform_packer_fits_(uform_packer_t const *packer, size_t length) {
    uform_context_t const *context = packer->context;
    size_t capacity = context->workspace.cells;
    if (context->device == uform_device_cpu_k && packer->cells) {
        size_t pairs = (uform_pool_threads(context->pool) + 1) / 2, most = pairs * uform_cpu_pass_cells_k;
        capacity = capacity < most ? capacity : most;
    }
#if defined(UFORM_HAVE_CUDA)
    if (context->device != uform_device_cpu_k && packer->cells) {
        size_t most = uform_cuda_pass_cells_most(context->model->config.width);
        capacity = capacity < most ? capacity : most;
    }
#endif
    return packer->cells + length <= capacity;
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

/* Appends one media item's cells (media rows [first, first + length), of `kind`) as a segment with
 * the item's own coordinates. */
static void uform_packer_add_media_(uform_packer_t *packer, uform_cell_kind_t kind, size_t first, size_t length,
                                    int32_t const *positions) {
    uform_workspace_t *workspace = &packer->context->workspace;
    if (packer->cells - packer->row_start + length > packer->context->model->config.columns) packer->row_start = packer->cells;
    for (size_t i = 0; i < length; ++i) {
        size_t cell = packer->cells + i;
        workspace->kinds[cell] = (uint8_t)kind;
        workspace->values[cell] = (uint32_t)(first + i);
        memcpy(workspace->positions + cell * 3, positions + i * 3, 3 * sizeof(int32_t));
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

/* One media item into cells: its vectors and (t, h, w) into room for `most` cells; `label` names it. */
typedef uform_status_t uform_media_cells_t(void const *items, size_t index, char const *label, size_t most, float *vectors,
                                           int32_t *positions, size_t *cells);

/* Wraps a failure of a call about item `label` so that the message names it. */
static uform_status_t uform_item_failed_(uform_status_t status, char const *verb, char const *label) {
    char reason[512]; /* uform_fail writes the buffer uform_last_error reads */
    snprintf(reason, sizeof(reason), "%s", uform_last_error());
    return uform_fail(status, "%s: %s: %s", verb, label, reason);
}

/* An image's patches, decoded here when it is encoded bytes: t = 0, h = patch row, w = patch column. */
static uform_status_t uform_image_cells_(void const *items, size_t index, char const *label, size_t most, float *vectors,
                                         int32_t *positions, size_t *cells) {
    uform_image_t const *image = (uform_image_t const *)items + index;
    size_t rows = 0, columns = 0;
    uform_status_t status;
    if (image->pixels.rgba) {
        status = uform_image_patches(&image->pixels, most, vectors, most, &rows, &columns);
        if (status != uform_ok_k) return uform_item_failed_(status, "uform_encode_images", label);
    } else {
        if (!image->data || !image->size)
            return uform_fail(uform_invalid_argument_k, "uform_encode_images: %s has neither pixels nor encoded bytes", label);
        uform_pixels_t pixels;
        UFORM_TRY(uform_image_decode(image->data, image->size, label, &pixels));
        status = uform_image_patches(&pixels, most, vectors, most, &rows, &columns);
        uform_pixels_free(&pixels);
        if (status != uform_ok_k) return status;
    }
    for (size_t i = 0; i < rows * columns; ++i)
        positions[i * 3] = 0, positions[i * 3 + 1] = (int32_t)(i / columns), positions[i * 3 + 2] = (int32_t)(i % columns);
    *cells = rows * columns;
    return uform_ok_k;
}

/* An audio clip's frames (the first `most`), decoded here when it is encoded bytes: t = h = w = frame index. */
static uform_status_t uform_audio_cells_(void const *items, size_t index, char const *label, size_t most, float *vectors,
                                         int32_t *positions, size_t *cells) {
    uform_audio_clip_t const *clip = (uform_audio_clip_t const *)items + index;
    uform_status_t status;
    if (clip->samples) {
        status = uform_audio_frames(clip->samples, clip->count, most, vectors, positions, most, cells);
        return status == uform_ok_k ? status : uform_item_failed_(status, "uform_encode_audio", label);
    }
    if (!clip->data || !clip->size)
        return uform_fail(uform_invalid_argument_k, "uform_encode_audio: %s has neither samples nor encoded bytes", label);
    uform_audio_t audio;
    UFORM_TRY(uform_audio_decode(clip->data, clip->size, label,
                                 (double)(most * uform_audio_frame_length_k) / uform_audio_rate_k, &audio));
    status = uform_audio_frames(audio.samples, audio.count, most, vectors, positions, most, cells);
    uform_audio_free(&audio);
    return status == uform_ok_k ? status : uform_item_failed_(status, "uform_encode_audio", label);
}

/* A video clip's tubes in at most `most` cells, decoded here when it is encoded bytes: t = the tick
 * of a step's first frame, h = patch row, w = patch column. */
static uform_status_t uform_video_cells_(void const *items, size_t index, char const *label, size_t most, float *vectors,
                                         int32_t *positions, size_t *cells) {
    uform_video_clip_t const *clip = (uform_video_clip_t const *)items + index;
    size_t steps = 0, rows = 0, columns = 0;
    uform_status_t status;
    if (clip->video.rgb) {
        status = uform_video_tubes(&clip->video, most, vectors, positions, most, &steps, &rows, &columns);
        if (status != uform_ok_k) return uform_item_failed_(status, "uform_encode_video", label);
    } else {
        if (!clip->data || !clip->size)
            return uform_fail(uform_invalid_argument_k, "uform_encode_video: %s has neither frames nor encoded bytes", label);
        uform_video_t video;
        /* a step spans two frames, and a clip has at most `most` steps */
        UFORM_TRY(uform_video_decode(clip->data, clip->size, label, clip->fps, most * uform_tube_depth_k, &video));
        status = uform_video_tubes(&video, most, vectors, positions, most, &steps, &rows, &columns);
        uform_video_free(&video);
        if (status != uform_ok_k) return uform_item_failed_(status, "uform_encode_video", label);
    }
    *cells = steps * rows * columns;
    return uform_ok_k;
}

/* What encoding items of one media kind needs: its verb, kind, the most cells an item fills, its cutter. */
typedef struct uform_media_encoder_t {
    char const *verb, *noun;
    uform_cell_kind_t kind;
    uform_part_t part;
    size_t most;
    uform_media_cells_t *cells;
} uform_media_encoder_t;

static uform_media_encoder_t const uform_media_encoders_[uform_media_kinds_k] = {
    {"uform_encode_images", "image", uform_cell_image_k, uform_part_vision_k, uform_image_patches_k, uform_image_cells_},
    {"uform_encode_video", "video", uform_cell_video_k, uform_part_video_k, uform_video_tubes_k, uform_video_cells_},
    {"uform_encode_audio", "audio", uform_cell_audio_k, uform_part_audio_k, uform_audio_frames_k, uform_audio_cells_},
};

/* A chunk of items cut into cells on the context's threads, each into its own buffers of `most`
 * cells; a failure keeps its message, which the worker's thread-local error would lose. */
typedef struct uform_decoded_t {
    float *vectors;
    int32_t *positions;
    size_t cells;
    int on_gpu; /* a JPEG left to the GPU's decoder: nothing decoded here */
    uform_status_t status;
    char message[512];
} uform_decoded_t;

typedef struct uform_decode_job_t {
    uform_media_encoder_t const *encoder;
    void const *items;
    char const *const *names; /* each item's `name` field, or NULL */
    size_t first, most;
    int gpu_jpeg; /* JPEG bytes go to the GPU's decoder */
    uform_decoded_t *decoded;
} uform_decode_job_t;

/* An item's name for messages: its own, else its kind and index. */
static char const *uform_item_label_(char const *name, char const *noun, size_t item, char *buffer, size_t size) {
    if (name) return name;
    snprintf(buffer, size, "%s %zu", noun, item);
    return buffer;
}

/* Encoded image bytes that start as a JPEG does. */
static int uform_is_jpeg_(uform_image_t const *image) {
    unsigned char const *bytes = image->data;
    return !image->pixels.rgba && bytes && image->size >= 3 && bytes[0] == 0xff && bytes[1] == 0xd8 && bytes[2] == 0xff;
}

static void uform_decode_task_(void *job_pointer, size_t index, size_t thread) {
    (void)thread;
    uform_decode_job_t const *job = job_pointer;
    uform_decoded_t *d = &job->decoded[index];
    size_t item = job->first + index;
    char name[64];
    char const *label = uform_item_label_(job->names[index], job->encoder->noun, item, name, sizeof(name));
    d->on_gpu = job->gpu_jpeg && uform_is_jpeg_((uform_image_t const *)job->items + item);
    d->status = d->on_gpu ? uform_ok_k : job->encoder->cells(job->items, item, label, job->most, d->vectors, d->positions, &d->cells);
    if (d->status != uform_ok_k) snprintf(d->message, sizeof(d->message), "%s", uform_last_error());
}

/* Whether a CUDA context decodes the JPEGs among its images on the GPU: by default where the build has
 * nvJPEG and NPP, UFORM_CUDA_DECODE=gpu requiring them, =host never (docs/images.md, "GPU decoding"). */
static uform_status_t uform_gpu_jpeg_(uform_context_t const *context, uform_cell_kind_t kind, int *gpu_jpeg) {
    *gpu_jpeg = 0;
#if defined(UFORM_HAVE_CUDA)
    if (context->device != uform_device_cuda_k || kind != uform_cell_image_k) return uform_ok_k;
    char const *pinned = getenv("UFORM_CUDA_DECODE");
    if (pinned && strcmp(pinned, "host") && strcmp(pinned, "gpu"))
        return uform_fail(uform_invalid_argument_k, "UFORM_CUDA_DECODE is host or gpu, not %s", pinned);
    if (pinned && !strcmp(pinned, "host")) return uform_ok_k;
    if (!uform_cuda_forward_decodes_jpeg()) {
        if (pinned) return uform_fail(uform_unsupported_k, "UFORM_CUDA_DECODE=gpu, but this build has no nvJPEG and NPP");
        return uform_ok_k;
    }
    *gpu_jpeg = 1;
#else
    (void)context, (void)kind;
#endif
    return uform_ok_k;
}

/* Puts decoded item `d` (label `label`, item `item`) into the CUDA context's decoded patches from patch
 * `first`: a JPEG left to the GPU is decoded there (the host's decoder takes what the GPU's refuses as
 * unsupported), patches decoded here go up. */
static uform_status_t uform_gpu_patches_(uform_context_t *context, uform_media_encoder_t const *encoder, void const *items,
                                         size_t item, char const *label, size_t first, size_t most, uform_decoded_t *d) {
#if defined(UFORM_HAVE_CUDA)
    char error[512] = "";
    uform_status_t status = uform_ok_k;
    if (d->on_gpu) {
        uform_image_t const *image = (uform_image_t const *)items + item;
        size_t rows = 0, columns = 0;
        status = uform_cuda_forward_decode_image(context->cuda, image->data, image->size, label, first, most, &rows, &columns,
                                                 error, sizeof(error));
        if (status == uform_ok_k) {
            for (size_t i = 0; i < rows * columns; ++i)
                d->positions[i * 3] = 0, d->positions[i * 3 + 1] = (int32_t)(i / columns), d->positions[i * 3 + 2] = (int32_t)(i % columns);
            d->cells = rows * columns;
            return uform_ok_k;
        }
        if (status != uform_unsupported_k) return uform_fail(status, "%s", error);
        UFORM_TRY(encoder->cells(items, item, label, most, d->vectors, d->positions, &d->cells));
    }
    status = uform_cuda_forward_stage_patches(context->cuda, d->vectors, first, d->cells, error, sizeof(error));
    return status == uform_ok_k ? status : uform_fail(status, "%s: %s", encoder->verb, error);
#else
    (void)context, (void)encoder, (void)items, (void)item, (void)label, (void)first, (void)most, (void)d;
    return uform_fail(uform_unsupported_k, "GPU decoding without the CUDA backend");
#endif
}

/* Each item's name field, for a chunk: the three item types keep `name` at different offsets. */
static char const *uform_item_name_(uform_cell_kind_t kind, void const *items, size_t index) {
    switch (kind) {
    case uform_cell_image_k: return ((uform_image_t const *)items)[index].name;
    case uform_cell_video_k: return ((uform_video_clip_t const *)items)[index].name;
    default: return ((uform_audio_clip_t const *)items)[index].name;
    }
}

static uform_status_t uform_encode_media_(uform_context_t *context, uform_cell_kind_t kind, void const *items, size_t count,
                                          size_t width, float *embeddings) {
    uform_media_encoder_t const *encoder = &uform_media_encoders_[kind - uform_cell_image_k];
    char const *verb = encoder->verb;
    if (!context || !items || !embeddings || !count)
        return uform_fail(uform_invalid_argument_k, "%s: model, items and embeddings are needed, count > 0", verb);
    uform_model_t *model = context->model;
    UFORM_TRY(uform_need_head_(model, "pool", verb));
    if (!uform_model_carries(model, encoder->part))
        return uform_fail(uform_missing_k, "%s: the model has no %s frontend (%s tensors)", verb, uform_part_name(encoder->part),
                          uform_part_name(encoder->part));
    unsigned frontends = context->device == uform_device_cuda_k ? UFORM_FRONTENDS_CUDA : UFORM_FRONTENDS_CPU;
    if (!(frontends & UFORM_PART(encoder->part)))
        return uform_fail(uform_unsupported_k, "%s: this device's frontend stage does not run %s cells yet (use a CPU context)",
                          verb, encoder->noun);
    if (!width) width = uform_widest_(model);
    int known = 0;
    for (size_t i = 0; i < model->config.embedding_widths_count; ++i) known |= model->config.embedding_widths[i] == width;
    if (!known) return uform_fail(uform_invalid_argument_k, "%s: width %zu is not one of the model's embedding widths", verb, width);
    /* An item fills at most its kind's cells, and at most a row. */
    size_t most = model->config.columns < encoder->most ? model->config.columns : encoder->most;
    if (context->workspace.cells < model->config.columns) UFORM_TRY(uform_workspace_reserve(context, model->config.columns));
    size_t capacity = context->workspace.cells, values = uform_media_info(kind)->values;
    int gpu_jpeg = 0;
    UFORM_TRY(uform_gpu_jpeg_(context, kind, &gpu_jpeg));
    /* Decoding runs on the pool, two items a thread at a time; packing and the passes keep the items' order.
     * With the GPU's decoder a pass's patches gather in the context's device memory instead of `vectors`. */
    size_t chunk = 2 * uform_pool_threads(context->pool);
    chunk = chunk < count ? chunk : count;
    float *vectors = gpu_jpeg ? NULL : malloc(capacity * values * sizeof(float));
    uform_decoded_t *decoded = calloc(chunk, sizeof(*decoded));
    float *buffers = malloc(chunk * most * values * sizeof(float));
    int32_t *coordinates = malloc(chunk * most * 3 * sizeof(int32_t));
    char const **names = calloc(chunk, sizeof(char const *));
    uform_status_t status = uform_ok_k;
    if ((!vectors && !gpu_jpeg) || !decoded || !buffers || !coordinates || !names)
        status = uform_fail(uform_out_of_memory_k, "%s: cannot hold %zu cells and %zu decoded items", verb, capacity, chunk);
    for (size_t i = 0; status == uform_ok_k && i < chunk; ++i)
        decoded[i].vectors = buffers + i * most * values, decoded[i].positions = coordinates + i * most * 3;
    size_t chunk_first = 0, chunk_count = 0; /* the decoded items [chunk_first, chunk_first + chunk_count) */
    for (size_t done = 0; done < count && status == uform_ok_k;) {
        uform_packer_t packer = {.context = context};
        size_t first = done;
        while (done < count && status == uform_ok_k) {
            if (capacity - packer.cells < most) break; /* the next item might not fit this pass */
            if (done == chunk_first + chunk_count) {
                chunk_first = done, chunk_count = count - done < chunk ? count - done : chunk;
                for (size_t i = 0; i < chunk_count; ++i) names[i] = uform_item_name_(kind, items, chunk_first + i);
                uform_decode_job_t job = {encoder, items, names, chunk_first, most, gpu_jpeg, decoded};
                uform_pool_for(context->pool, chunk_count, uform_decode_task_, &job);
            }
            uform_decoded_t *d = &decoded[done - chunk_first];
            if ((status = d->status) != uform_ok_k) {
                status = uform_fail(status, "%s", d->message);
                break;
            }
            if (gpu_jpeg) {
                char name[64];
                char const *label = uform_item_label_(names[done - chunk_first], encoder->noun, done, name, sizeof(name));
                if ((status = uform_gpu_patches_(context, encoder, items, done, label, packer.cells, most, d)) != uform_ok_k) break;
            } else {
                memcpy(vectors + packer.cells * values, d->vectors, d->cells * values * sizeof(float));
            }
            uform_packer_add_media_(&packer, kind, packer.cells, d->cells, d->positions);
            done++;
        }
        if (status != uform_ok_k) break;
        uform_media_t media[uform_media_kinds_k] = {{0}};
        void const *rows = vectors;
#if defined(UFORM_HAVE_CUDA)
        if (gpu_jpeg) rows = uform_cuda_forward_decoded(context->cuda);
#endif
        media[kind - uform_cell_image_k] = (uform_media_t){.data = rows, .count = packer.cells, .dtype = uform_media_f32_k};
        uform_pass_t pass = uform_packer_pass_(&packer);
        pass.media = media;
        pass.media_on_device = gpu_jpeg;
        pass.pooled = context->workspace.embeddings;
        status = uform_context_pass(context, &pass);
        if (status == uform_ok_k) uform_write_embeddings_(context, done - first, width, embeddings + first * width);
    }
    free(vectors), free(decoded), free(buffers), free(coordinates), free(names);
    return status;
}

uform_status_t uform_context_encode_images(uform_context_t *context, uform_image_t const *images, size_t count,
                                           size_t width, float *embeddings) {
    return uform_encode_media_(context, uform_cell_image_k, images, count, width, embeddings);
}

uform_status_t uform_context_encode_audio(uform_context_t *context, uform_audio_clip_t const *clips, size_t count,
                                          size_t width, float *embeddings) {
    return uform_encode_media_(context, uform_cell_audio_k, clips, count, width, embeddings);
}

uform_status_t uform_context_encode_video(uform_context_t *context, uform_video_clip_t const *clips, size_t count,
                                          size_t width, float *embeddings) {
    return uform_encode_media_(context, uform_cell_video_k, clips, count, width, embeddings);
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

uform_status_t uform_context_colbert_many(uform_context_t *context, uform_text_t const *texts, size_t count, float *vectors,
                                         size_t capacity, size_t *offsets) {
    if (!context || !texts || !vectors || !offsets || !count)
        return uform_fail(uform_invalid_argument_k, "uform_colbert_many: model, texts, vectors and offsets are needed, count > 0");
    uform_model_t *model = context->model;
    UFORM_TRY(uform_need_head_(model, "rerank", "uform_colbert_many"));
    UFORM_TRY(uform_check_texts_(texts, count, "uform_colbert_many", "text"));
    size_t width = model->config.colbert_width;
    offsets[0] = 0;
    for (size_t i = 0; i < count; ++i) offsets[i + 1] = offsets[i] + uform_clip_(model, texts[i].length);
    if (capacity < offsets[count])
        return uform_fail(uform_shape_k, "uform_colbert_many: the buffer holds %zu cells, the texts need %zu", capacity, offsets[count]);
    size_t cut = 0, done = 0;
    while (done < count) {
        size_t first = done;
        uform_pass_t pass = uform_pack_texts_(context, texts, count, &done, &cut);
        pass.colbert = context->workspace.colbert;
        UFORM_TRY(uform_context_pass(context, &pass));
        for (size_t i = first; i < done; ++i) /* the pass's segments are its texts, in order */
            memcpy(vectors + offsets[i] * width, context->workspace.colbert + context->workspace.spans[i - first].start * width,
                   (offsets[i + 1] - offsets[i]) * width * sizeof(float));
    }
    return uform_ok_k;
}

typedef struct uform_maxsim_context_t {
    uform_context_t const *context;
    float const *query;
    size_t query_cells;
    int symmetric; /* 1: the mean from the shorter text's side (uform_rerank_symmetric), 0: the query side's sum */
    float *scores;
} uform_maxsim_context_t;

/* The sum over `from`'s cells of each one's best dot product among `among`'s cells. */
static double uform_maxsim_sum_(float const *from, size_t from_cells, float const *among, size_t among_cells, size_t width) {
    double total = 0;
    for (size_t i = 0; i < from_cells; ++i) {
        float const *q = from + i * width;
        float best = -INFINITY;
        for (size_t t = 0; t < among_cells; ++t) {
            float const *c = among + t * width;
            float sums[8] = {0, 0, 0, 0, 0, 0, 0, 0}; /* eight partial sums, so the loop vectorizes without -ffast-math */
            size_t j = 0;
            for (; j + 8 <= width; j += 8)
                for (int lane = 0; lane < 8; ++lane) sums[lane] += q[j + lane] * c[j + lane];
            for (; j < width; ++j) sums[0] += q[j] * c[j];
            float dot = ((sums[0] + sums[1]) + (sums[2] + sums[3])) + ((sums[4] + sums[5]) + (sums[6] + sums[7]));
            best = dot > best ? dot : best;
        }
        total += best;
    }
    return total;
}

/* MaxSim of two texts' unit cells: the query side's sum, or (`symmetric`) the mean from the shorter side. */
static double uform_maxsim_score_(float const *query, size_t query_cells, float const *document, size_t document_cells,
                                  size_t width, int symmetric) {
    int document_side = symmetric && document_cells < query_cells;
#if defined(UFORM_PLANT_MAXSIM_QUERY_SIDE)
    document_side = 0;
#endif
    if (document_side) return uform_maxsim_sum_(document, document_cells, query, query_cells, width) / (double)document_cells;
    double total = uform_maxsim_sum_(query, query_cells, document, document_cells, width);
    return symmetric ? total / (double)query_cells : total;
}

static void uform_maxsim_task_(void *context_pointer, size_t index, size_t thread) {
    (void)thread;
    uform_maxsim_context_t const *context = context_pointer;
    uform_workspace_t const *workspace = &context->context->workspace;
    size_t width = context->context->model->config.colbert_width;
    uform_span_t const *document = &workspace->spans[index];
    context->scores[index] = (float)uform_maxsim_score_(context->query, context->query_cells,
                                                        workspace->colbert + document->start * width, document->length, width,
                                                        context->symmetric);
}

uform_status_t uform_maxsim(float const *query, size_t query_cells, float const *document, size_t document_cells, size_t width,
                            int symmetric, float *score) {
    if (!query || !document || !score)
        return uform_fail(uform_invalid_argument_k, "uform_maxsim: query, document and score are needed");
    if (!query_cells || !document_cells || !width)
        return uform_fail(uform_invalid_argument_k, "uform_maxsim: %zu query cells, %zu document cells of width %zu: each must be > 0",
                          query_cells, document_cells, width);
    *score = (float)uform_maxsim_score_(query, query_cells, document, document_cells, width, symmetric != 0);
    return uform_ok_k;
}

/* The cosine of normalize(a) and normalize(b), `width` values each. */
static double uform_cosine_(float const *a, float const *b, size_t width) {
    double dot = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < width; ++i) dot += (double)a[i] * b[i], aa += (double)a[i] * a[i], bb += (double)b[i] * b[i];
    return aa > 0 && bb > 0 ? dot / sqrt(aa * bb) : 0;
}

/* MaxSim of each document (`symmetric`: the shorter side's mean); with `weight` >= 0, fused with the
 * pooled cosine at the widest width, both terms from the same pass of each side. */
static uform_status_t uform_rerank_(uform_context_t *context, uform_text_t query, uform_text_t const *documents, size_t count,
                                    int symmetric, double weight, size_t gate, float *scores, size_t *truncated,
                                    char const *verb) {
    if (!context || !documents || !scores || !count)
        return uform_fail(uform_invalid_argument_k, "%s: model, documents and scores are needed, count > 0", verb);
    uform_model_t *model = context->model;
    int fused = weight >= 0;
    if (fused) UFORM_TRY(uform_need_head_(model, "pool", verb));
    UFORM_TRY(uform_need_head_(model, "rerank", verb));
    UFORM_TRY(uform_check_texts_(&query, 1, verb, "query"));
    UFORM_TRY(uform_check_texts_(documents, count, verb, "document"));
    size_t widest = uform_widest_(model), query_cells = uform_clip_(model, query.length), cut = query_cells < query.length, done = 0;
    float *query_embedding = fused ? malloc(widest * sizeof(float)) : NULL;
    if (fused && !query_embedding) return uform_fail(uform_out_of_memory_k, "%s: out of memory", verb);
    float *pooled = fused ? context->workspace.embeddings : NULL;
    uform_packer_t packer = {.context = context};
    uform_packer_add_(&packer, query.data, NULL, query_cells);
    uform_pass_t pass = uform_packer_pass_(&packer);
    pass.colbert = context->workspace.query_colbert, pass.pooled = pooled;
    uform_status_t status = uform_context_pass(context, &pass);
    if (status == uform_ok_k && fused) memcpy(query_embedding, pooled, widest * sizeof(float));
    while (status == uform_ok_k && done < count) {
        size_t first = done;
        pass = uform_pack_texts_(context, documents, count, &done, &cut);
        pass.colbert = context->workspace.colbert, pass.pooled = pooled;
        status = uform_context_pass(context, &pass);
        if (status != uform_ok_k) break;
        uform_maxsim_context_t maxsim = {context, context->workspace.query_colbert, query_cells, symmetric, scores + first};
        uform_pool_for(context->pool, done - first, uform_maxsim_task_, &maxsim);
        for (size_t i = first; fused && i < done; ++i) {
            double cosine = uform_cosine_(query_embedding, pooled + (i - first) * widest, widest);
            int short_pair = query.length < gate && documents[i].length < gate;
            scores[i] = (float)(short_pair ? cosine : (1 - weight) * cosine + weight * scores[i]);
        }
    }
    free(query_embedding);
    if (status == uform_ok_k && truncated) *truncated = cut;
    return status;
}

uform_status_t uform_context_rerank(uform_context_t *context, uform_text_t query, uform_text_t const *documents,
                                    size_t count, float *scores, size_t *truncated) {
    return uform_rerank_(context, query, documents, count, 0, -1, 0, scores, truncated, "uform_rerank");
}

uform_status_t uform_context_rerank_symmetric(uform_context_t *context, uform_text_t query, uform_text_t const *documents,
                                              size_t count, float *scores, size_t *truncated) {
    return uform_rerank_(context, query, documents, count, 1, -1, 0, scores, truncated, "uform_rerank_symmetric");
}

uform_status_t uform_context_rerank_fused(uform_context_t *context, uform_text_t query, uform_text_t const *documents,
                                          size_t count, double weight, float *scores, size_t *truncated) {
    if (!(weight >= 0 && weight <= 1))
        return uform_fail(uform_invalid_argument_k, "uform_rerank_fused: the weight %g is outside [0, 1]", weight);
    return uform_rerank_(context, query, documents, count, 1, weight, 0, scores, truncated, "uform_rerank_fused");
}

uform_status_t uform_context_rerank_gated(uform_context_t *context, uform_text_t query, uform_text_t const *documents,
                                          size_t count, double weight, size_t gate, float *scores, size_t *truncated) {
    if (!(weight >= 0 && weight <= 1))
        return uform_fail(uform_invalid_argument_k, "uform_rerank_gated: the weight %g is outside [0, 1]", weight);
    return uform_rerank_(context, query, documents, count, 1, weight, gate, scores, truncated, "uform_rerank_gated");
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

uform_status_t uform_encode_audio(uform_model_t *model, uform_audio_clip_t const *clips, size_t count, size_t width,
                                  float *embeddings) {
    UFORM_NEED_MODEL_("uform_encode_audio");
    return uform_context_encode_audio(model->context, clips, count, width, embeddings);
}

uform_status_t uform_encode_video(uform_model_t *model, uform_video_clip_t const *clips, size_t count, size_t width,
                                  float *embeddings) {
    UFORM_NEED_MODEL_("uform_encode_video");
    return uform_context_encode_video(model->context, clips, count, width, embeddings);
}

uform_status_t uform_colbert_many(uform_model_t *model, uform_text_t const *texts, size_t count, float *vectors, size_t capacity,
                                  size_t *offsets) {
    UFORM_NEED_MODEL_("uform_colbert_many");
    return uform_context_colbert_many(model->context, texts, count, vectors, capacity, offsets);
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

uform_status_t uform_rerank_symmetric(uform_model_t *model, uform_text_t query, uform_text_t const *documents, size_t count,
                                      float *scores, size_t *truncated) {
    UFORM_NEED_MODEL_("uform_rerank_symmetric");
    return uform_context_rerank_symmetric(model->context, query, documents, count, scores, truncated);
}

uform_status_t uform_rerank_fused(uform_model_t *model, uform_text_t query, uform_text_t const *documents, size_t count,
                                  double weight, float *scores, size_t *truncated) {
    UFORM_NEED_MODEL_("uform_rerank_fused");
    return uform_context_rerank_fused(model->context, query, documents, count, weight, scores, truncated);
}

uform_status_t uform_rerank_gated(uform_model_t *model, uform_text_t query, uform_text_t const *documents, size_t count,
                                  double weight, size_t gate, float *scores, size_t *truncated) {
    UFORM_NEED_MODEL_("uform_rerank_gated");
    return uform_context_rerank_gated(model->context, query, documents, count, weight, gate, scores, truncated);
}

uform_status_t uform_mlm_logits(uform_model_t *model, uint16_t const *ids, size_t length, float *logits) {
    UFORM_NEED_MODEL_("uform_mlm_logits");
    return uform_context_mlm_logits(model->context, ids, length, logits);
}

uform_status_t uform_forward(uform_model_t *model, uform_grid_t const *grid, uform_outputs_t *outputs) {
    UFORM_NEED_MODEL_("uform_forward");
    return uform_context_forward(model->context, grid, outputs);
}
