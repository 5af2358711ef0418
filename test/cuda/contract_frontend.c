/*  contract_frontend.c: the contract suite's check of the media frontends (frontend.cu's kernels
 *  around cuBLASLt's product, run as the step and inference run them: encoder.h's
 *  uform_cuda_frontend_forward and _backward) for image patches, video tubes and audio frames, and
 *  of the masked modelling heads, against a float64 reference, with their planted controls
 *  (contract.c's groups table lists them). */
#include "contract.h"
#include "cuda/encoder.h"
#include "model/tensors.h"

enum { image_cells_k = 900, image_width_k = 192, image_capacity_k = 640, image_live_most_k = 500 };

/* Which entry each control plants, and its number there. Images: 1 the patch read transposed, 2
 * alpha dropped, 3 the bias dropped, 4 each gradient row read from the next cell, 5 the last cell
 * dropped; video: 1 a tube's frames swapped; audio: 1 a frame's samples read one late. */
static char const *const image_entries_[] = {NULL, "media_vectors", "media_vectors", "media_scatter", "media_gather",
                                             "media_bias_backward"};
static int const image_numbers_[] = {0, 1, 2, 1, 1, 1};
static char const *const video_entries_[] = {NULL, "media_vectors"};
static int const video_numbers_[] = {0, 3};
static char const *const audio_entries_[] = {NULL, "media_vectors"};
static int const audio_numbers_[] = {0, 4};

/* --- A media frontend over 900 cells of width 192 (the image case described; a tube's or a frame's
 *     values play the patch's, V = 1536 or 320, audio samples in [-1, 1]): runs of byte cells and of
 *     media cells (at most 500,
 *     under a capacity of 640 whose rows past the live ones are NaN, so that a read of them shows),
 *     the patches once as Float32 rows and once as BF16 rows (their BF16 values: the same P~).
 *     Forward. Byte cells: an exact widening (bound 0). Image cells: P~ = each value rounded to BF16
 *     by nearest even, the specification (docs/images.md), which the host computes exactly: the
 *     kernel's patches must equal it, the rows past the live ones 0 (bound 0). The product is a
 *     tensor-core sum of K = 1024 products, each exact in Float32: |y - y*| <= g_K M, M = sum_k
 *     |w_jk P~_k|, g_K = 2 K u / (1 - 2 K u) (contract.c's gemm bound); x = fl(y + b) rounds once
 *     more: |x - x*| <= (1 + u) g_K M + u |x*|. Cells that are not image cells keep their byte row.
 *     Backward. embed.bytes: the embedding's bound over the byte cells alone (the sort leaves image
 *     cells out). vision.patch = sum_i dY~_i P~_i^T (written over the noise the gradient held), dY~
 *     the image cells' d_x rows rounded to BF16 (exact on the host too), a tensor-core sum over the
 *     capacity's K = 640 rows (the tail's terms exact zeros): |e| <= g_K sum_i |dY~_ij P~_ik|. vision.bias =
 *     b0 + the live d_x rows summed in pieces of C = 128, then the pieces, then added: as the
 *     embedding, (min(n, C) + P) u (|b0| + sum |dx|) for n live rows in P pieces. */
static void check_frontend_(uform_cell_kind_t kind, int plant) {
    size_t n = image_cells_k, d = image_width_k, m = image_capacity_k, vocabulary = 258;
    size_t patch_k = uform_media_info(kind)->values, k_index = kind - uform_cell_image_k;
    char const *const *entries_ = kind == uform_cell_image_k ? image_entries_ : kind == uform_cell_video_k ? video_entries_ : audio_entries_;
    int const *numbers_ = kind == uform_cell_image_k ? image_numbers_ : kind == uform_cell_video_k ? video_numbers_ : audio_numbers_;
    char const *name = uform_part_name(uform_media_info(kind)->part);
    uint8_t *image = calloc(n, 1);
    uint32_t *values = malloc(n * 4), *cells = malloc(m * 4), *order = malloc(n * 4), offsets[259] = {0};
    size_t live = 0;
    /* Alternating runs of 1 to 60 cells, bytes first and last (so that the gather control's next cell exists). */
    for (size_t c = 0, run = 0; c < n; ++run) {
        size_t length = 1 + (size_t)((uniform_() + 1) * 30);
        for (size_t i = 0; i < length && c < n; ++i, ++c) {
            image[c] = run % 2 == 1 && live < image_live_most_k && c + 1 < n;
            if (image[c]) cells[live++] = (uint32_t)c;
            values[c] = image[c] ? 257 : (uint32_t)((uniform_() + 1) * 129) % 258; /* image cells read PAD's row */
        }
    }
    for (size_t c = 0; c < n; ++c) offsets[values[c] + 1] += !image[c];
    for (size_t v = 0; v < vocabulary; ++v) offsets[v + 1] += offsets[v];
    uint32_t cursor[258];
    memcpy(cursor, offsets, sizeof(cursor));
    for (size_t c = 0; c < n; ++c)
        if (!image[c]) order[cursor[values[c]]++] = (uint32_t)c;
    /* Patches as a decoder gives them (k / 255), the tail NaN; P~ their BF16 values. */
    float *rows32 = malloc(m * patch_k * 4), *expected_p = malloc(m * patch_k * 4);
    uint16_t *rows16 = malloc(m * patch_k * 2);
    for (size_t i = 0; i < m * patch_k; ++i) {
        int tail = i / patch_k >= live;
        rows32[i] = tail                         ? nanf("")
                    : kind == uform_cell_audio_k ? (float)uniform_()
                                                 : (float)((size_t)((uniform_() + 1) * 128) % 256) / 255.0f;
        rows16[i] = tail ? 0x7fc0u : f32_to_bf16_(rows32[i]);
        expected_p[i] = tail ? 0.0f : bf16_to_f32_(rows16[i]);
    }
    uint16_t *table = malloc(vocabulary * d * 2), *weights = malloc(d * patch_k * 2);
    float *bias = malloc(d * 4), *noise = malloc(n * d * 4);
    fill_bf16_(table, vocabulary * d, 1.0), fill_bf16_(weights, d * patch_k, 0.05), fill_f32_(bias, d, 0.5);
    fill_f32_(noise, n * d, 100.0);
    float *dx = malloc(n * d * 4), *g_bytes = malloc(vocabulary * d * 4), *g_patch = malloc(d * patch_k * 4), *g_bias = malloc(d * 4);
    fill_f32_(dx, n * d, 1.0), fill_f32_(g_bytes, vocabulary * d, 1.0), fill_f32_(g_patch, d * patch_k, 100.0), fill_f32_(g_bias, d, 1.0);

    uint16_t *t_table = device_(vocabulary * d * 2), *t_weights = device_(d * patch_k * 2), *t_patches = device_(m * patch_k * 2);
    uint16_t *t_d_product = device_(m * d * 2);
    uint32_t *t_values = device_(n * 4), *t_cells = device_(m * 4), *t_order = device_(n * 4), *t_offsets = device_(259 * 4);
    uint32_t *t_counts = device_(2 * 4);
    void *t_rows = device_(m * patch_k * 4);
    float *t_bias = device_(d * 4), *t_x = device_(n * d * 4), *t_product = device_(m * d * 4), *t_dx = device_(n * d * 4);
    float *t_g_bytes = device_(vocabulary * d * 4), *t_g_patch = device_(d * patch_k * 4), *t_g_bias = device_(d * 4);
    float *t_partials = device_(uform_cuda_embed_partials(n, d) * 4);
    float *t_image_partials = device_(uform_cuda_media_bias_partials(m, d) * 4);
    upload_(t_table, table, vocabulary * d * 2), upload_(t_weights, weights, d * patch_k * 2), upload_(t_bias, bias, d * 4);
    upload_(t_values, values, n * 4), upload_(t_cells, cells, live * 4), upload_(t_order, order, n * 4);
    upload_(t_offsets, offsets, 259 * 4), upload_(t_dx, dx, n * d * 4), upload_(t_g_bytes, g_bytes, vocabulary * d * 4);
    upload_(t_g_patch, g_patch, d * patch_k * 4), upload_(t_g_bias, g_bias, d * 4);
    uform_cuda_gemm_t *gemm;
    KERNEL_OK(uform_cuda_gemm_create(&gemm, 32u << 20));
    uform_cuda_frontend_t frontend = {.bytes = t_table};
    frontend.weights[k_index] = t_weights, frontend.biases[k_index] = t_bias;
    uform_cuda_media_t media[uform_media_kinds_k] = {{0}};
    media[k_index] = (uform_cuda_media_t){.capacity = m, .counts = t_counts, .cells = t_cells, .rows = t_rows,
                                          .vectors = t_patches, .product = t_product, .d_product = t_d_product,
                                          .partials = t_image_partials};
    int forward_plant = plant >= 1 && plant <= 3, backward_plant = plant >= 4;
    char const *forward_entry = forward_plant ? entries_[plant] : NULL, *backward_entry = backward_plant ? entries_[plant] : NULL;

    /* Forward, with Float32 rows and with BF16 rows. */
    float *x = malloc(n * d * 4);
    uint16_t *patches16 = malloc(m * patch_k * 2);
    double worst_forward = 0;
    for (int bf16 = 0; bf16 <= 1; ++bf16) {
        uint32_t counts[2] = {(uint32_t)live, bf16 ? (uint32_t)uform_media_bf16_k : (uint32_t)uform_media_f32_k};
        upload_(t_counts, counts, sizeof(counts));
        upload_(t_rows, bf16 ? (void const *)rows16 : (void const *)rows32, m * patch_k * (bf16 ? 2 : 4));
        upload_(t_x, noise, n * d * 4);
        PLANTED_OK(forward_entry, forward_plant ? numbers_[plant] : 0,
                   uform_cuda_frontend_forward(gemm, &frontend, media, t_values, n, d, t_x, NULL));
        download_(x, t_x, n * d * 4), download_(patches16, t_patches, m * patch_k * 2);
        for (size_t i = 0; i < m * patch_k; ++i) compare_(&worst_forward, bf16_to_f32_(patches16[i]), expected_p[i], 0);
        for (size_t c = 0, next = 0; c < n; ++c) {
            if (!image[c]) {
                for (size_t j = 0; j < d; ++j) compare_(&worst_forward, x[c * d + j], bf16_to_f32_(table[values[c] * d + j]), 0);
                continue;
            }
            float const *p = expected_p + next++ * patch_k;
            for (size_t j = 0; j < d; ++j) {
                double y = 0, magnitude = 0;
                for (size_t k = 0; k < patch_k; ++k) {
                    double product = bf16_to_f32_(weights[j * patch_k + k]) * (double)p[k];
                    y += product, magnitude += fabs(product);
                }
                double expected = y + bias[j];
                compare_(&worst_forward, x[c * d + j], expected,
                         (1 + unit_) * tensor_gamma_(patch_k) * magnitude + unit_ * fabs(expected) + 1e-300);
            }
        }
    }
    char label[96];
    snprintf(label, sizeof(label), "%s_forward (vectors, product, scatter)", name);
    if (!backward_plant) record_(label, worst_forward, plant);

    /* Backward, after the BF16 forward (its patches are P~ but for a forward control). */
    if (!forward_plant) {
        uform_cuda_frontend_gradients_t gradients = {.bytes = t_g_bytes};
        gradients.weights[k_index] = t_g_patch, gradients.biases[k_index] = t_g_bias;
        PLANTED_OK(backward_entry, backward_plant ? numbers_[plant] : 0,
                   uform_cuda_frontend_backward(gemm, media, t_dx, t_order, t_offsets, n, d, t_partials, &gradients, NULL));
        float *out_bytes = malloc(vocabulary * d * 4), *out_patch = malloc(d * patch_k * 4), *out_bias = malloc(d * 4);
        download_(out_bytes, t_g_bytes, vocabulary * d * 4), download_(out_patch, t_g_patch, d * patch_k * 4);
        download_(out_bias, t_g_bias, d * 4);
        double worst_backward = 0, piece = uform_cuda_embed_piece_k;
        for (size_t v = 0; v < vocabulary; ++v)
            for (size_t j = 0; j < d; ++j) {
                double sum = g_bytes[v * d + j], magnitude = fabs(g_bytes[v * d + j]);
                for (uint32_t r = offsets[v]; r < offsets[v + 1]; ++r) sum += dx[order[r] * d + j], magnitude += fabs(dx[order[r] * d + j]);
                double run = offsets[v + 1] - offsets[v], depth = (run < piece ? run : piece) + ceil(run / piece);
                compare_(&worst_backward, out_bytes[v * d + j], sum, depth * unit_ * magnitude + 1e-300);
            }
        float *dy = malloc(live * d * 4);
        for (size_t i = 0; i < live; ++i)
            for (size_t j = 0; j < d; ++j) dy[i * d + j] = bf16_to_f32_(f32_to_bf16_(dx[cells[i] * d + j]));
        double gamma = tensor_gamma_((double)m);
        for (size_t j = 0; j < d; ++j)
            for (size_t k = 0; k < patch_k; ++k) {
                double sum = 0, magnitude = 0;
                for (size_t i = 0; i < live; ++i) {
                    double product = (double)dy[i * d + j] * expected_p[i * patch_k + k];
                    sum += product, magnitude += fabs(product);
                }
                compare_(&worst_backward, out_patch[j * patch_k + k], sum, gamma * magnitude + 1e-300);
            }
        double pieces = ceil((double)live / uform_cuda_media_piece_k);
        double depth = ((double)live < uform_cuda_media_piece_k ? (double)live : uform_cuda_media_piece_k) + pieces;
        for (size_t j = 0; j < d; ++j) {
            double sum = g_bias[j], magnitude = fabs(g_bias[j]);
            for (size_t i = 0; i < live; ++i) sum += dx[cells[i] * d + j], magnitude += fabs(dx[cells[i] * d + j]);
            compare_(&worst_backward, out_bias[j], sum, depth * unit_ * magnitude + 1e-300);
        }
        snprintf(label, sizeof(label), "%s_backward (gather, product, bias)", name);
        record_(label, worst_backward, plant);
        free(out_bytes), free(out_patch), free(out_bias), free(dy);
    }
    uform_cuda_gemm_destroy(gemm);
    free(image), free(values), free(cells), free(order), free(rows32), free(expected_p), free(rows16), free(table);
    free(weights), free(bias), free(noise), free(dx), free(g_bytes), free(g_patch), free(g_bias), free(x);
    free(patches16);
    cudaFree(t_table), cudaFree(t_weights), cudaFree(t_patches), cudaFree(t_d_product), cudaFree(t_values), cudaFree(t_cells);
    cudaFree(t_order), cudaFree(t_offsets), cudaFree(t_counts), cudaFree(t_rows), cudaFree(t_bias), cudaFree(t_x);
    cudaFree(t_product), cudaFree(t_dx), cudaFree(t_g_bytes), cudaFree(t_g_patch), cudaFree(t_g_bias), cudaFree(t_partials);
    cudaFree(t_image_partials);
}

void check_image_(int plant) { check_frontend_(uform_cell_image_k, plant); }
void check_video_(int plant) { check_frontend_(uform_cell_video_k, plant); }
void check_audio_(int plant) { check_frontend_(uform_cell_audio_k, plant); }

/* --- The mae head (encoder.h's uform_cuda_mae_head: gather, two products, the loss, the scatter) over
 *     900 cells of width 192, a capacity of 640 and 300 masked cells (then none), the true pixels in
 *     Float32 (their tail NaN, so that a read past the masked rows shows) and in BF16.
 *     gathered = the masked cells' rows of h, exactly, 0 past them (bound 0). The product
 *     p = G mae.head^T, a tensor-core sum of K = d terms: |p - p*| <= g_K M_p, M_p = sum |G W|.
 *     e = fl(fl(p + b) - t): |e - e*| <= (1 + 2u) g_K M_p + 2u (|p*| + |b| + |t|) =: E. The gradient
 *     fl(e s), s = fl(2 / (M 1024)) (one rounding): |g - g*| <= s (E + 3u |e*|) =: G, and its BF16
 *     store d_pred: u_bf16 (|g*| + G) + G. mae.bias = b0 + sum_i g_i in pieces: the embedding's
 *     (min(M, C) + P) u (|b0| + sum |g*|) plus sum G. The loss: squares and their sums in Float32,
 *     then Float64: (sum (2 |e*| E + E^2) + (min(M, C) + P + 1) u sum e*^2) / (M 1024). The weight
 *     products read the kernel's own d_pred (checked above): mae.head = d_pred^T G over the
 *     capacity's rows, g_640 sum |d_pred G|; d_h [cell] = d_h0 + d_pred W, g_1024 sum |d_pred W| + u
 *     |d_h*| on the masked cells, the other rows untouched (bound 0). */
static void check_head_(uform_cell_kind_t kind, int plant) {
    enum { cells_k = 900, width_k = 192, capacity_k = 640, masked_k = 300 };
    static char const *const entries[] = {NULL, "mae_gather", "mae_loss", "mae_loss", "mae_scatter_add"};
    static int const numbers[] = {0, 1, 1, 2, 1};
    size_t n = cells_k, d = width_k, m = capacity_k, patch = uform_media_info(kind)->values;
    int audio = kind == uform_cell_audio_k;
    uint16_t *h = malloc(n * d * 2), *head = malloc(patch * d * 2), *targets16 = malloc(m * patch * 2);
    float *bias = malloc(patch * 4), *bias0 = malloc(patch * 4), *targets32 = malloc(m * patch * 4);
    float *d_h0 = malloc(n * d * 4), *head_noise = malloc(patch * d * 4);
    uint32_t *cells = malloc(m * 4);
    fill_bf16_(h, n * d, 2.0), fill_bf16_(head, patch * d, 0.1), fill_f32_(bias, patch, 0.5), fill_f32_(bias0, patch, 1.0);
    fill_f32_(d_h0, n * d, 1.0), fill_f32_(head_noise, patch * d, 100.0);
    size_t live = 0;
    for (size_t c = 0; c < n - 1 && live < masked_k; ++c) /* ascending, never the last cell (the gather control's next exists) */
        if (uniform_() > 0.3) cells[live++] = (uint32_t)c;
    for (size_t i = 0; i < m * patch; ++i) {
        targets32[i] = i / patch >= live ? nanf("") : audio ? (float)uniform_() : (float)((size_t)((uniform_() + 1) * 128) % 256) / 255.0f;
        targets16[i] = f32_to_bf16_(targets32[i]);
    }
    uint16_t *t_h = device_(n * d * 2), *t_head = device_(patch * d * 2), *t_gathered = device_(m * d * 2);
    uint16_t *t_d_pred = device_(m * patch * 2);
    uint32_t *t_counts = device_(3 * 4), *t_cells = device_(m * 4);
    void *t_targets = device_(m * patch * 4);
    float *t_bias = device_(patch * 4), *t_bias_grad = device_(patch * 4), *t_head_grad = device_(patch * d * 4);
    float *t_pred = device_(m * patch * 4), *t_d_gathered = device_(m * d * 4), *t_partials = device_(uform_cuda_mae_partials(m, patch) * 4);
    float *t_d_h = device_(n * d * 4), *t_loss = device_(4);
    upload_(t_h, h, n * d * 2), upload_(t_head, head, patch * d * 2), upload_(t_bias, bias, patch * 4);
    upload_(t_cells, cells, live * 4);
    uform_cuda_gemm_t *gemm;
    KERNEL_OK(uform_cuda_gemm_create(&gemm, 32u << 20));
    uform_cuda_mae_t const mae = {.capacity = m, .values = patch, .counts = t_counts, .cells = t_cells, .targets = t_targets, .head = t_head,
                                  .bias = t_bias, .head_grad = t_head_grad, .bias_grad = t_bias_grad, .gathered = t_gathered,
                                  .predictions = t_pred, .d_predictions = t_d_pred, .d_gathered = t_d_gathered,
                                  .partials = t_partials};
    uint16_t *gathered = malloc(m * d * 2), *d_pred = malloc(m * patch * 2);
    float *out_bias = malloc(patch * 4), *out_head = malloc(patch * d * 4), *out_d_h = malloc(n * d * 4), loss = 0;
    double *e = malloc(m * patch * sizeof(double)), *e_bound = malloc(m * patch * sizeof(double));
    double parts[6] = {0}, piece = uform_cuda_media_piece_k; /* gathered, d_pred, bias, loss, mae.head, d_h */
    for (int run = 0; run < 3; ++run) { /* Float32 pixels, BF16 pixels, no masked patch */
        int bf16 = run == 1;
        size_t masked = run == 2 ? 0 : live;
        uint32_t counts[3] = {(uint32_t)masked, bf16 ? (uint32_t)uform_media_bf16_k : (uint32_t)uform_media_f32_k, (uint32_t)masked};
        upload_(t_counts, counts, sizeof(counts));
        upload_(t_targets, bf16 ? (void const *)targets16 : (void const *)targets32, m * patch * (bf16 ? 2 : 4));
        upload_(t_bias_grad, bias0, patch * 4), upload_(t_head_grad, head_noise, patch * d * 4), upload_(t_d_h, d_h0, n * d * 4);
        PLANTED_OK(entries[plant], numbers[plant], uform_cuda_mae_head(gemm, &mae, t_h, d, t_loss, t_d_h, NULL));
        download_(gathered, t_gathered, m * d * 2), download_(d_pred, t_d_pred, m * patch * 2);
        download_(out_bias, t_bias_grad, patch * 4), download_(out_head, t_head_grad, patch * d * 4);
        download_(out_d_h, t_d_h, n * d * 4), download_(&loss, t_loss, 4);
        for (size_t i = 0; i < m; ++i)
            for (size_t k = 0; k < d; ++k) compare_(&parts[0], bf16_to_f32_(gathered[i * d + k]), i < masked ? bf16_to_f32_(h[cells[i] * d + k]) : 0, 0);
        double s = masked ? 2.0 / ((double)masked * patch) : 0, squares = 0, square_bound = 0;
        for (size_t i = 0; i < m; ++i)
            for (size_t v = 0; v < patch; ++v) {
                size_t at = i * patch + v;
                if (i >= masked) {
                    compare_(&parts[1], bf16_to_f32_(d_pred[at]), 0, 0);
                    continue;
                }
                double p = 0, magnitude = 0;
                for (size_t k = 0; k < d; ++k) {
                    double product = (double)bf16_to_f32_(h[cells[i] * d + k]) * bf16_to_f32_(head[v * d + k]);
                    p += product, magnitude += fabs(product);
                }
                double t = bf16 ? bf16_to_f32_(targets16[at]) : targets32[at];
                e[at] = p + bias[v] - t;
                e_bound[at] = (1 + 2 * unit_) * tensor_gamma_((double)d) * magnitude + 2 * unit_ * (fabs(p) + fabs(bias[v]) + fabs(t));
                double g = e[at] * s, g_bound = s * (e_bound[at] + 3 * unit_ * fabs(e[at]));
                compare_(&parts[1], bf16_to_f32_(d_pred[at]), g, bf16_unit_ * (fabs(g) + g_bound) + g_bound + 1e-300);
                squares += e[at] * e[at], square_bound += 2 * fabs(e[at]) * e_bound[at] + e_bound[at] * e_bound[at];
            }
        double pieces = ceil((double)masked / piece), depth = ((double)masked < piece ? (double)masked : piece) + pieces;
        for (size_t v = 0; v < patch; ++v) {
            double sum = bias0[v], magnitude = fabs(bias0[v]), carried = 0;
            for (size_t i = 0; i < masked; ++i) {
                double g = e[i * patch + v] * s;
                sum += g, magnitude += fabs(g), carried += s * (e_bound[i * patch + v] + 3 * unit_ * fabs(e[i * patch + v]));
            }
            compare_(&parts[2], out_bias[v], sum, depth * unit_ * magnitude + carried + 1e-300);
        }
        double expected_loss = masked ? squares / ((double)masked * patch) : 0;
        compare_(&parts[3], loss, expected_loss,
                 masked ? (square_bound + (depth + 1) * unit_ * squares) / ((double)masked * patch) + 1e-300 : 0);
        double gamma = tensor_gamma_((double)m);
        for (size_t v = 0; v < patch; ++v)
            for (size_t k = 0; k < d; ++k) {
                double sum = 0, magnitude = 0;
                for (size_t i = 0; i < masked; ++i) {
                    double product = (double)bf16_to_f32_(d_pred[i * patch + v]) * bf16_to_f32_(h[cells[i] * d + k]);
                    sum += product, magnitude += fabs(product);
                }
                compare_(&parts[4], out_head[v * d + k], sum, gamma * magnitude + 1e-300);
            }
        gamma = tensor_gamma_((double)patch);
        for (size_t c = 0, i = 0; c < n; ++c) {
            int is_masked = i < masked && cells[i] == c;
            for (size_t k = 0; k < d; ++k) {
                if (!is_masked) {
                    compare_(&parts[5], out_d_h[c * d + k], d_h0[c * d + k], 0);
                    continue;
                }
                double sum = 0, magnitude = 0;
                for (size_t v = 0; v < patch; ++v) {
                    double product = (double)bf16_to_f32_(d_pred[i * patch + v]) * bf16_to_f32_(head[v * d + k]);
                    sum += product, magnitude += fabs(product);
                }
                double expected = d_h0[c * d + k] + sum;
                compare_(&parts[5], out_d_h[c * d + k], expected, gamma * magnitude + unit_ * fabs(expected) + 1e-300);
            }
            i += is_masked;
        }
    }
    double worst = 0;
    for (size_t k = 0; k < 6; ++k) worst = parts[k] > worst ? parts[k] : worst;
    char const *head_name = uform_part_name(uform_media_info(kind)->mae);
    if (!plant)
        printf("%s_head, worst error / bound by part: gathered %.3g, d_pred %.3g, mae.bias %.3g, loss %.3g, mae.head %.3g, "
               "dL/dh %.3g\n", head_name, parts[0], parts[1], parts[2], parts[3], parts[4], parts[5]);
    char label[96];
    snprintf(label, sizeof(label), "%s_head (gather, products, loss, bias, scatter)", head_name);
    record_(label, worst, plant);
    uform_cuda_gemm_destroy(gemm);
    free(h), free(head), free(targets16), free(bias), free(bias0), free(targets32), free(d_h0), free(head_noise), free(cells);
    free(gathered), free(d_pred), free(out_bias), free(out_head), free(out_d_h), free(e), free(e_bound);
    cudaFree(t_h), cudaFree(t_head), cudaFree(t_gathered), cudaFree(t_d_pred), cudaFree(t_counts), cudaFree(t_cells);
    cudaFree(t_targets), cudaFree(t_bias), cudaFree(t_bias_grad), cudaFree(t_head_grad), cudaFree(t_pred);
    cudaFree(t_d_gathered), cudaFree(t_partials), cudaFree(t_d_h), cudaFree(t_loss);
}

void check_mae_(int plant) { check_head_(uform_cell_image_k, plant); }
/* The audio and video heads: the same kernels at widths 320 and 1536; their width-dependent part,
 * the loss, gets its controls (the gradient's factor 2 dropped, the last masked row dropped). */
void check_mae_audio_(int plant) { check_head_(uform_cell_audio_k, plant ? plant + 1 : 0); }
void check_mae_video_(int plant) { check_head_(uform_cell_video_k, plant ? plant + 1 : 0); }
