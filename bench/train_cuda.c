/*  train_cuda.c: times the CUDA masked-byte training step (src/cuda/step.h) on random bytes, as
 *  ../shared/peers/torch_mlm_step.py does for the PyTorch peer: 15% of cells masked, segments of a
 *  fixed length packed into rows. Prints one JSON line with bytes/s, TFLOP/s by the peer's formula,
 *  MFU against the BF16 matmul ceiling measured here by cuBLASLt, and device memory. bench/train_cuda.py
 *  runs it beside the peer.
 *
 *  With --pairs P it times the contrastive step instead, as ../shared/peers/torch_siglip_step.py
 *  does: P anchors and P positives of --text bytes each, packed --columns bytes to a row, Matryoshka
 *  SigLIP over the attention pool at every power-of-two width from 64 to d. With --image RxC too, as
 *  bench/torch_image_step.py does: anchor i is an image of R x C random patches (values in [0, 1],
 *  BF16 as the batcher hands them over; t = 0, h = patch row, w = patch column), its positive a
 *  caption of --text random bytes. --pack-pairs 0 packs images and captions into rows first fit, the
 *  longest first; 1 keeps each pair side by side in one row, as the batcher places a record.
 *  --media av makes the R x C cells of even anchors an audio clip (320-sample frames in [-1, 1], t = h
 *  = w = the frame) and of odd ones a video clip (16x16x2 RGB tubes in [0, 1], t = 2 ticks a row of
 *  tubes, h = 0, w = the column): a mixed audio/video/text batch; --media all cycles image, video, audio.
 *
 *      uform_bench_train_cuda [--width 512] [--depth 12] [--rows 16] [--columns 4096] [--segment 4096]
 *                             [--pairs 0] [--text 128] [--image RxC] [--media image|av|all] [--pack-pairs 0|1]
 *                             [--recompute 0|1] [--kept 0] [--keep-attention 0|1]
 *                             [--cudnn 0|1] [--steps 20] [--ceiling]
 *                             [--deterministic 1] [--tune 2] [--profile] [--trace]
 *
 *  --kept K: with --recompute 1, the last K blocks keep their activations and are not replayed (step.h's
 *  kept_blocks); where the memory is short, fewer are kept (the JSON says how many). --keep-attention 1:
 *  with --recompute 1, replayed blocks keep their attention outputs, so the replay skips attention.
 *  --deterministic 0 lets cuDNN's attention backward add dQ up with atomics (step.h's nondeterministic).
 *  --tune times candidates on the first step: 1 cuBLASLt's, 2 cuDNN's (the default), 3 both; 0 runs their
 *  first choices.
 *  --profile brackets the last step with cudaProfilerStart/Stop, for `ncu --profile-from-start off`.
 *  --trace prints every step's loss to stderr as it lands (a run that ends in NaN shows where it began);
 *  after each warm-up step (the first 3, untimed) the tensors whose parameters or gradients are not
 *  finite and the largest gradient, after step 1 each tensor's largest gradient; and at the end
 *  cuBLASLt's chosen algorithm for every product shape.
 */
#define _POSIX_C_SOURCE 200809L
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../test/cuda/cuda_ok.h"
#include "cuda/batch.h"
#include "cuda/cuda.h"
#include "cuda/step.h"
#include "uform/image.h"

/* A step call: its status and the step's message (the call and kernel that failed). */
#define STEP_OK(step, call)                                                                                           \
    do {                                                                                                              \
        if ((call) != uform_ok_k) {                                                                                   \
            fprintf(stderr, "train_cuda: %s failed: %s\n", #call, uform_cuda_step_error(step));                     \
            exit(1);                                                                                                  \
        }                                                                                                             \
    } while (0)

static uint64_t state_ = 0x853c49e6748fea9bull;
static uint32_t next_(void) {
    state_ ^= state_ << 13, state_ ^= state_ >> 7, state_ ^= state_ << 17;
    return (uint32_t)(state_ >> 32);
}
static double uniform_(void) { return (next_() + 0.5) / 4294967296.0; }

static uint16_t bf16_(float value) {
    uint32_t bits;
    memcpy(&bits, &value, 4);
    return (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

/* A loss for the JSON line: JSON has no NaN, so a loss that is not finite is null. */
static char const *json_number_(float value, char text[32]) {
    if (isfinite(value)) snprintf(text, 32, "%.4f", value);
    else snprintf(text, 32, "null");
    return text;
}

static double seconds_(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + now.tv_nsec * 1e-9;
}

/* TFLOP/s of an 8192^3 BF16 product through the same cuBLASLt path the step uses. */
static double ceiling_(void) {
    size_t n = 8192;
    uint16_t *a, *b, *c;
    CUDA_OK(cudaMalloc((void **)&a, n * n * 2));
    CUDA_OK(cudaMalloc((void **)&b, n * n * 2));
    CUDA_OK(cudaMalloc((void **)&c, n * n * 2));
    CUDA_OK(cudaMemset(a, 0x3c, n * n * 2));
    CUDA_OK(cudaMemset(b, 0x3c, n * n * 2));
    uform_cuda_gemm_t *gemm;
    KERNEL_OK(uform_cuda_gemm_create(&gemm, 64u << 20));
    for (int i = 0; i < 3; ++i) KERNEL_OK(uform_cuda_gemm_nt(gemm, a, b, c, 0, n, n, n, NULL));
    cudaEvent_t start, stop;
    CUDA_OK(cudaEventCreate(&start));
    CUDA_OK(cudaEventCreate(&stop));
    CUDA_OK(cudaEventRecord(start, NULL));
    for (int i = 0; i < 20; ++i) KERNEL_OK(uform_cuda_gemm_nt(gemm, a, b, c, 0, n, n, n, NULL));
    CUDA_OK(cudaEventRecord(stop, NULL));
    CUDA_OK(cudaEventSynchronize(stop));
    float ms;
    CUDA_OK(cudaEventElapsedTime(&ms, start, stop));
    uform_cuda_gemm_destroy(gemm);
    cudaFree(a), cudaFree(b), cudaFree(c);
    return 20 * 2.0 * (double)n * n * n / (ms / 1e3) / 1e12;
}

/* For --trace: after a step, every tensor's parameter and gradient on the host, naming those that hold a
 * value that is not finite and the one whose gradient is largest; so a NaN run shows where it began. */
static void finite_(uform_cuda_step_t *step, size_t t) {
    size_t count, bad = 0, largest_at = 0;
    double largest = 0;
    uform_cuda_tensor_t *tensors = uform_cuda_step_tensors(step, &count);
    CUDA_OK(cudaDeviceSynchronize());
    char largest_each[8192] = "";
    size_t written = 0;
    for (size_t i = 0; i < count; ++i) {
        size_t elements = tensors[i].rows * tensors[i].columns, parameter_bad = 0, gradient_bad = 0;
        double tensor_largest = 0;
        float *host = malloc(elements * 4);
        CUDA_OK(cudaMemcpy(host, tensors[i].gradient, elements * 4, cudaMemcpyDeviceToHost));
        for (size_t e = 0; e < elements; ++e) {
            gradient_bad += !isfinite(host[e]);
            if (isfinite(host[e]) && fabs(host[e]) > tensor_largest) tensor_largest = fabs(host[e]);
        }
        if (tensor_largest > largest) largest = tensor_largest, largest_at = i;
        if (written < sizeof(largest_each)) { /* a run gone wrong shows where the signal died */
            int n = snprintf(largest_each + written, sizeof(largest_each) - written, " %s %.2g", tensors[i].name, tensor_largest);
            if (n > 0) written += (size_t)n;
        }
        CUDA_OK(cudaMemcpy(host, tensors[i].parameter, elements * (tensors[i].is_matrix ? 2 : 4), cudaMemcpyDeviceToHost));
        for (size_t e = 0; e < elements; ++e) {
            uint32_t bits = tensors[i].is_matrix ? (uint32_t)((uint16_t *)host)[e] << 16 : ((uint32_t *)host)[e];
            parameter_bad += (bits & 0x7f800000u) == 0x7f800000u;
        }
        free(host);
        if (gradient_bad || parameter_bad)
            fprintf(stderr, "train_cuda: after step %zu %s: %zu of %zu gradients and %zu parameters not finite\n", t,
                    tensors[i].name, gradient_bad, elements, parameter_bad), bad++;
    }
    fprintf(stderr, "train_cuda: after step %zu: %zu tensors with values not finite; largest gradient %.3g in %s\n", t, bad,
            largest, count ? tensors[largest_at].name : "");
    if (t == 1) fprintf(stderr, "train_cuda: after step 1, each tensor's largest |gradient|:%s\n", largest_each);
}

/* The host side of a batch: the grid and what the objective scores, filled into a slot by the
 * library's span step (cuda/batch.h), as uform_base fills it. */
typedef struct host_batch_t {
    uint8_t *kinds, *labels;
    uint32_t *values, *anchors, *candidates;
    int32_t *segments, *positions, *targets;
    uform_batch_t batch;
} host_batch_t;

static host_batch_t host_batch_(size_t rows, size_t columns, size_t pairs) {
    size_t n = rows * columns;
    host_batch_t h = {.kinds = malloc(n), .labels = calloc(pairs * pairs + 1, 1), .values = malloc(n * 4),
                      .anchors = malloc((pairs + 1) * 4), .candidates = malloc((pairs + 1) * 4), .segments = malloc(n * 4),
                      .positions = malloc(3 * n * 4), .targets = malloc(n * 4)};
    if (!h.kinds || !h.labels || !h.values || !h.anchors || !h.candidates || !h.segments || !h.positions || !h.targets) {
        fprintf(stderr, "train_cuda: out of host memory for a batch\n");
        exit(1);
    }
    h.batch = (uform_batch_t){.grid = {rows, columns, h.kinds, h.values, h.segments, h.positions}};
    return h;
}

static void upload_(uform_cuda_step_t *step, int slot, host_batch_t const *h, size_t t) {
    uform_cuda_batch_t b = uform_cuda_step_batch(step, slot);
    char error[512];
    if (uform_cuda_batch_fill(&b, uform_cuda_step_config(step), &h->batch, error, sizeof(error)) != uform_ok_k) {
        fprintf(stderr, "train_cuda: %s\n", error);
        exit(1);
    }
    uform_cuda_batch_finish(step, slot, 1e-4, t);
}

/* One random batch, as the peer draws it: bytes uniform in 0..255, each cell masked with p = 0.15. */
static void fill_(uform_cuda_step_t *step, int slot, host_batch_t *h, size_t segment, size_t t) {
    size_t rows = h->batch.grid.rows, columns = h->batch.grid.columns;
    for (size_t r = 0; r < rows; ++r)
        for (size_t first = 0; first < columns; first += segment) {
            size_t length = columns - first < segment ? columns - first : segment, start = r * columns + first;
            for (size_t i = 0; i < length; ++i) {
                size_t c = start + i;
                uint32_t byte = next_() & 255;
                int masked = uniform_() < 0.15;
                h->kinds[c] = uform_cell_byte_k;
                h->values[c] = masked ? 256 : byte;
                h->targets[c] = masked ? (int32_t)byte : -1;
                h->positions[3 * c] = h->positions[3 * c + 1] = h->positions[3 * c + 2] = (int32_t)i;
                h->segments[c] = (int32_t)(first / segment);
            }
        }
    h->batch.targets = h->targets;
    upload_(step, slot, h, t);
}

/* Contrastive: segment i < pairs is anchor i, segment pairs + i its positive; random bytes. */
static void fill_pairs_(uform_cuda_step_t *step, int slot, host_batch_t *h, size_t text, size_t pairs, size_t t) {
    size_t cells = h->batch.grid.rows * h->batch.grid.columns, columns = h->batch.grid.columns;
    for (size_t c = 0; c < cells; ++c) {
        h->kinds[c] = uform_cell_byte_k;
        h->values[c] = next_() & 255;
        h->positions[3 * c] = h->positions[3 * c + 1] = h->positions[3 * c + 2] = (int32_t)(c % text);
        h->segments[c] = (int32_t)(c % columns / text);
    }
    for (size_t i = 0; i < pairs; ++i) {
        h->anchors[i] = (uint32_t)i, h->candidates[i] = (uint32_t)(pairs + i);
        for (size_t j = 0; j < pairs; ++j) h->labels[i * pairs + j] = i == j;
    }
    h->batch.anchors = h->anchors, h->batch.candidates = h->candidates, h->batch.labels = h->labels;
    h->batch.anchors_count = h->batch.candidates_count = pairs;
    upload_(step, slot, h, t);
}

/* Media pairs: where each item sits. Items 0..pairs-1 are the media (images, or clips with --media),
 * pairs..2 pairs-1 the captions. */
typedef struct image_layout_t {
    size_t pairs, patch_rows, patch_columns, caption, columns, rows, padding_runs;
    size_t *row_of, *column_of;  /* [2 pairs] */
    uint16_t *pools[uform_media_kinds_k]; /* each kind's [pool, values] BF16 vectors, drawn once (NULL: unused) */
    size_t pool;
    char const *mix;             /* "image", "av" or "all": which kind pair i's media is (media_kind_) */
} image_layout_t;

/* The media kind index (kind - uform_cell_image_k) of pair i under the layout's mix. */
static size_t media_kind_(image_layout_t const *l, size_t i) {
    if (!strcmp(l->mix, "av")) return i % 2 ? 1 : 2;
    if (!strcmp(l->mix, "all")) return i % 3;
    return 0;
}

/* Lays the items out and counts the rows: first fit, the longer kind first; or each pair's image and
 * caption side by side in the first row with room for both. */
static image_layout_t image_layout_(size_t pairs, size_t patch_rows, size_t patch_columns, size_t caption, size_t columns,
                                    int pack_pairs) {
    size_t patches = patch_rows * patch_columns, items = 2 * pairs;
    image_layout_t l = {pairs, patch_rows, patch_columns, caption, columns, 0, 0, malloc(items * sizeof(size_t)),
                        malloc(items * sizeof(size_t)), {NULL, NULL, NULL}, 0, "image"};
    size_t *filled = calloc(items, sizeof(size_t));
    if (!l.row_of || !l.column_of || !filled) { fprintf(stderr, "train_cuda: out of host memory for the layout\n"); exit(1); }
    for (size_t order = 0; order < (pack_pairs ? pairs : items); ++order) {
        size_t item = pack_pairs || patches >= caption ? order : (order + pairs) % items;
        size_t length = pack_pairs ? patches + caption : item < pairs ? patches : caption, row = 0;
        while (row < l.rows && filled[row] + length > columns) row++;
        if (row == l.rows) l.rows++;
        l.row_of[item] = row, l.column_of[item] = filled[row];
        if (pack_pairs) l.row_of[pairs + item] = row, l.column_of[pairs + item] = filled[row] + patches;
        filled[row] += length;
    }
    for (size_t row = 0; row < l.rows; ++row) l.padding_runs += filled[row] < columns;
    free(filled);
    return l;
}

/* The grid of an image-pair batch: images and captions where the layout put them, padding after, the
 * segments numbered in cell order (uform_forward's numbering, which anchors and candidates name). */
static void fill_image_grid_(host_batch_t *h, image_layout_t const *l) {
    size_t columns = l->columns, cells = l->rows * columns, patches = l->patch_rows * l->patch_columns;
    for (size_t c = 0; c < cells; ++c) {
        h->kinds[c] = uform_cell_padding_k, h->values[c] = uform_pad_k, h->segments[c] = -1;
        h->positions[3 * c] = h->positions[3 * c + 1] = h->positions[3 * c + 2] = 0;
    }
    for (size_t item = 0; item < 2 * l->pairs; ++item) {
        int image = item < l->pairs;
        size_t first = l->row_of[item] * columns + l->column_of[item], length = image ? patches : l->caption;
        size_t k = image ? media_kind_(l, item) : 0;
        for (size_t i = 0; i < length; ++i) {
            size_t c = first + i;
            int32_t *p = h->positions + 3 * c, row = (int32_t)(i / l->patch_columns), column = (int32_t)(i % l->patch_columns);
            h->kinds[c] = image ? (uint8_t)(uform_cell_image_k + k) : uform_cell_byte_k;
            h->segments[c] = (int32_t)item; /* renumbered below */
            if (!image || k == 2) p[0] = p[1] = p[2] = (int32_t)i; /* texts and audio frames: 1D */
            else if (k == 0) p[0] = 0, p[1] = row, p[2] = column;
            else p[0] = 2 * row, p[1] = 0, p[2] = column;
        }
    }
    uint32_t number = 0; /* the batch's segment number of each item, and row-local ids */
    for (size_t row = 0; row < l->rows; ++row) {
        int32_t local = 0;
        for (size_t c = row * columns; c < (row + 1) * columns; ++c) {
            if (h->segments[c] < 0) continue; /* padding, or a run already numbered */
            size_t item = (size_t)h->segments[c];
            (item < l->pairs ? h->anchors : h->candidates)[item % l->pairs] = number++;
            for (size_t e = c; e < (row + 1) * columns && h->segments[e] == (int32_t)item; ++e) h->segments[e] = -2 - local;
            local++;
        }
        for (size_t c = row * columns; c < (row + 1) * columns; ++c)
            if (h->segments[c] <= -2) h->segments[c] = -2 - h->segments[c];
    }
    for (size_t i = 0; i < l->pairs; ++i)
        for (size_t j = 0; j < l->pairs; ++j) h->labels[i * l->pairs + j] = i == j;
    h->batch.anchors = h->anchors, h->batch.candidates = h->candidates, h->batch.labels = h->labels;
    h->batch.anchors_count = h->batch.candidates_count = l->pairs;
    for (size_t k = 0; k < uform_media_kinds_k; ++k)
        h->batch.grid.media[k] = (uform_media_t){.data = l->pools[k], .count = l->pools[k] ? l->pool : 0, .dtype = uform_media_bf16_k};
}

/* One image-pair batch: new caption bytes, and each image cell a pool row that moves with the step. */
static void fill_images_(uform_cuda_step_t *step, int slot, host_batch_t *h, image_layout_t const *l, size_t t) {
    size_t cells = l->rows * l->columns, media_cell = 0;
    for (size_t c = 0; c < cells; ++c)
        if (h->kinds[c] == uform_cell_byte_k) h->values[c] = next_() & 255;
        else if (h->kinds[c] != uform_cell_padding_k) h->values[c] = (uint32_t)((media_cell++ + 7919 * t) % l->pool);
    upload_(step, slot, h, t);
}

int main(int argc, char **argv) {
    size_t width = 512, depth = 12, rows = 16, columns = 4096, segment = 4096, steps = 20, pairs = 0, text = 128, kept = 0;
    size_t patch_rows = 0, patch_columns = 0;
    int recompute = 0, ceiling = 0, cudnn = 0, profile = 0, deterministic = 1, trace = 0, tune = 2, keep_attention = 0;
    int pack_pairs = 0;
    char const *mix = "image";
    for (int i = 1; i < argc; ++i) {
        char const *flag = argv[i];
        if (!strcmp(flag, "--ceiling")) { ceiling = 1; continue; }
        if (!strcmp(flag, "--profile")) { profile = 1; continue; }
        if (!strcmp(flag, "--trace")) { trace = 1; continue; }
        if (i + 1 >= argc) { fprintf(stderr, "train_cuda: %s needs a value\n", flag); return 2; }
        if (!strcmp(flag, "--media")) {
            mix = argv[++i];
            if (strcmp(mix, "image") && strcmp(mix, "av") && strcmp(mix, "all")) {
                fprintf(stderr, "train_cuda: --media is image, av or all, not %s\n", mix);
                return 2;
            }
            continue;
        }
        if (!strcmp(flag, "--image")) {
            if (sscanf(argv[++i], "%zux%zu", &patch_rows, &patch_columns) != 2 || !patch_rows || !patch_columns) {
                fprintf(stderr, "train_cuda: --image takes ROWSxCOLUMNS patches, not %s\n", argv[i]);
                return 2;
            }
            continue;
        }
        size_t value = strtoull(argv[++i], NULL, 10);
        if (!strcmp(flag, "--width")) width = value;
        else if (!strcmp(flag, "--depth")) depth = value;
        else if (!strcmp(flag, "--rows")) rows = value;
        else if (!strcmp(flag, "--columns")) columns = value;
        else if (!strcmp(flag, "--segment")) segment = value;
        else if (!strcmp(flag, "--recompute")) recompute = (int)value;
        else if (!strcmp(flag, "--cudnn")) cudnn = (int)value;
        else if (!strcmp(flag, "--deterministic")) deterministic = (int)value;
        else if (!strcmp(flag, "--steps")) steps = value;
        else if (!strcmp(flag, "--tune")) tune = (int)value;
        else if (!strcmp(flag, "--kept")) kept = value;
        else if (!strcmp(flag, "--keep-attention")) keep_attention = (int)value;
        else if (!strcmp(flag, "--pairs")) pairs = value;
        else if (!strcmp(flag, "--text")) text = value;
        else if (!strcmp(flag, "--pack-pairs")) pack_pairs = (int)value;
        else { fprintf(stderr, "train_cuda: unknown flag %s\n", flag); return 2; }
    }
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || !devices) { printf("train_cuda: skipped: no CUDA device\n"); return 77; }
    double tflops_ceiling = ceiling ? ceiling_() : 0;
    size_t free_before, total;
    CUDA_OK(cudaMemGetInfo(&free_before, &total));
    size_t patches = patch_rows * patch_columns, config_media[uform_media_kinds_k] = {0};
    image_layout_t layout = {0};
    if (patches && !pairs) { fprintf(stderr, "train_cuda: --image needs --pairs (images train contrastively here)\n"); return 2; }
    if (pairs && patches) {
        if (!text || (pack_pairs ? patches + text : patches > text ? patches : text) > columns) {
            fprintf(stderr, "train_cuda: an image of %zu patches and a caption of %zu bytes do not fit rows of %zu columns%s\n",
                    patches, text, columns, pack_pairs ? " side by side" : "");
            return 2;
        }
        layout = image_layout_(pairs, patch_rows, patch_columns, text, columns, pack_pairs);
        layout.pool = pairs * patches < 65536 ? pairs * patches : 65536; /* a row is copied per cell either way */
        layout.mix = mix;
        for (size_t i = 0; i < pairs && i < 3; ++i) {
            size_t k = media_kind_(&layout, i), values = k == 0 ? 1024 : k == 1 ? 1536 : 320;
            if (layout.pools[k]) continue;
            if (!(layout.pools[k] = malloc(layout.pool * values * sizeof(uint16_t)))) {
                fprintf(stderr, "train_cuda: out of host memory for the media\n");
                return 1;
            }
            for (size_t e = 0; e < layout.pool * values; ++e) layout.pools[k][e] = bf16_((float)(k == 2 ? 2 * uniform_() - 1 : uniform_()));
            config_media[k] = pairs * patches;
        }
        rows = layout.rows, segment = patches > text ? patches : text;
    } else if (pairs) {
        if (!text || columns % text || 2 * pairs * text % columns) {
            fprintf(stderr, "train_cuda: --columns must hold whole texts and the 2 x pairs texts whole rows\n");
            return 2;
        }
        rows = 2 * pairs * text / columns;
        segment = text;
    }
    uform_cuda_step_config_t config = {.width = width, .depth = depth, .cells = rows * columns, .recompute = recompute,
                                       .tune = tune, .beta1 = 0.9, .beta2 = 0.999, .clip = 1.0};
    config.cudnn_attention = cudnn, config.nondeterministic = !deterministic, config.longest = segment < columns ? segment : columns;
    config.segments = rows * ((columns + segment - 1) / segment);
    if (pairs) {
        config.objective = uform_cuda_contrastive_k;
        config.segments = 2 * pairs + layout.padding_runs, config.anchors = config.candidates = pairs, config.embedding_width = width;
        for (size_t k = 0; k < uform_media_kinds_k; ++k) config.media[k] = config_media[k];
        for (size_t m = 64; m <= width && config.widths_count < 8; m *= 2) config.widths[config.widths_count++] = m;
    }
    uform_cuda_step_t *step;
    char error[256];
    config.kept_blocks = recompute ? kept : 0, config.keep_attention = recompute && keep_attention;
    while (uform_cuda_step_create(&step, &config, error, sizeof(error)) != uform_ok_k) { /* fewer kept blocks while memory is short */
        uform_cuda_step_destroy(step);
        cudaGetLastError(); /* the failed allocation's error, cleared */
        if (!config.kept_blocks) { fprintf(stderr, "train_cuda: %s\n", error); return 1; }
        fprintf(stderr, "train_cuda: %zu kept blocks: %s; trying %zu\n", config.kept_blocks, error, config.kept_blocks - 1);
        config.kept_blocks--;
    }
    size_t count;
    uform_cuda_tensor_t *tensors = uform_cuda_step_tensors(step, &count);
    size_t parameters = 0;
    for (size_t i = 0; i < count; ++i) { /* weights ~ N(0, 0.02) by a sum of uniforms; vectors as SPEC.md starts them */
        size_t elements = tensors[i].rows * tensors[i].columns;
        parameters += elements;
        void *host = malloc(elements * 4);
        char const *name = tensors[i].name;
        float start = !strcmp(name, "pool.query") ? 0.0f : !strcmp(name, "siglip.scale") ? (float)log(10.0)
                    : !strcmp(name, "siglip.bias") ? -10.0f : strstr(name, ".bias") ? 0.0f : 1.0f;
        for (size_t e = 0; e < elements; ++e) {
            float value = (float)((uniform_() + uniform_() + uniform_() - 1.5) * 0.04);
            if (tensors[i].is_matrix) ((uint16_t *)host)[e] = bf16_(value);
            else ((float *)host)[e] = start;
        }
        CUDA_OK(cudaMemcpy(tensors[i].parameter, host, elements * (tensors[i].is_matrix ? 2 : 4), cudaMemcpyHostToDevice));
        free(host);
    }
    host_batch_t host = host_batch_(rows, columns, pairs);
    if (patches) fill_image_grid_(&host, &layout);
    float first_loss = 0, loss = 0;
    size_t warmup = 3, total_steps = warmup + steps, first_bad = 0; /* the first step whose loss is not finite */
    double start = 0;
    for (size_t t = 0; t < total_steps; ++t) {
        int slot = (int)(t & 1);
        STEP_OK(step, uform_cuda_step_wait(step, slot, t >= 2 ? &loss : NULL));
        if (t == 2) first_loss = loss;
        if (t >= 2 && !first_bad && !isfinite(loss)) first_bad = t - 1;
        if (trace && t >= 2) fprintf(stderr, "train_cuda: step %zu loss %.6f\n", t - 1, loss);
        if (patches) fill_images_(step, slot, &host, &layout, t + 1);
        else if (pairs) fill_pairs_(step, slot, &host, text, pairs, t + 1);
        else fill_(step, slot, &host, segment, t + 1);
        if (t == warmup) { /* time from here: drain the warm-up steps first */
            STEP_OK(step, uform_cuda_step_wait(step, slot ^ 1, NULL));
            start = seconds_();
        }
        int last = t + 1 == total_steps;
        if (profile && last) {
            STEP_OK(step, uform_cuda_step_wait(step, slot ^ 1, NULL));
            CUDA_OK(cudaProfilerStart());
        }
        STEP_OK(step, uform_cuda_step_run(step, slot));
        if (trace && t < warmup) finite_(step, t + 1); /* the warm-up steps, where NaN runs went wrong */
        if (profile && last) {
            STEP_OK(step, uform_cuda_step_wait(step, slot, NULL));
            CUDA_OK(cudaProfilerStop());
        }
    }
    STEP_OK(step, uform_cuda_step_wait(step, (int)((total_steps - 1) & 1), &loss));
    double elapsed = (seconds_() - start) / (double)steps;
    size_t free_after;
    CUDA_OK(cudaMemGetInfo(&free_after, &total));
    double bytes_per_s = (double)(rows * columns) / elapsed;
    double attention_flops = 12.0 * (double)depth * (double)width * (double)(segment < columns ? segment : columns);
    double tflops = (6.0 * (double)parameters + attention_flops) * bytes_per_s / 1e12;
    struct cudaDeviceProp properties;
    CUDA_OK(cudaGetDeviceProperties(&properties, 0));
    char first_text[32], last_text[32];
    printf("{\"system\": \"uform\", \"objective\": \"%s\", \"pairs\": %zu, \"pairs_per_s\": %.0f, \"text_bytes\": %zu, "
           "\"patches\": %zu, \"media\": \"%s\", \"pack_pairs\": %d, \"device\": \"%s\", \"width\": %zu, \"depth\": %zu, \"rows\": %zu, \"columns\": %zu, "
           "\"segment\": %zu, \"recompute\": %d, \"kept_blocks\": %zu, \"keep_attention\": %d, \"cudnn\": %d, \"deterministic\": %d, \"params_M\": %.1f, \"step_ms\": %.2f, \"bytes_per_s\": %.0f, "
           "\"tflops\": %.1f, \"ceiling_tflops\": %.1f, \"mfu\": %.3f, \"arena_GiB\": %.2f, \"peak_GiB\": %.2f, "
           "\"loss_step3\": %s, \"loss_last\": %s, \"attention_plans\": \"%s\"}\n",
           pairs ? "contrastive" : "mlm", pairs, pairs / elapsed, pairs ? text : 0, patches, patches ? mix : "none", pack_pairs, properties.name, width, depth, rows, columns, segment, recompute, config.kept_blocks, config.keep_attention, cudnn, deterministic, parameters / 1e6, elapsed * 1e3, bytes_per_s,
           tflops, tflops_ceiling, tflops_ceiling > 0 ? tflops / tflops_ceiling : 0,
           uform_cuda_step_device_bytes(step) / 1073741824.0, (double)(free_before - free_after) / 1073741824.0,
           json_number_(first_loss, first_text), json_number_(loss, last_text), uform_cuda_step_attention_plans(step));
    if (trace) { /* which algorithms cuBLASLt runs: tuning may choose differently from run to run */
        char plans[8192];
        size_t split = uform_cuda_step_gemm_plans(step, plans, sizeof(plans));
        fprintf(stderr, "train_cuda: cuBLASLt plans (%zu split K): %s\n", split, plans);
    }
    uform_cuda_step_destroy(step);
    free(layout.row_of), free(layout.column_of);
    for (size_t k = 0; k < uform_media_kinds_k; ++k) free(layout.pools[k]);
    if (!first_bad && !isfinite(loss)) first_bad = total_steps;
    if (first_bad) fprintf(stderr, "train_cuda: the loss is not finite from step %zu of %zu on\n", first_bad, total_steps);
    return first_bad ? 1 : 0;
}
