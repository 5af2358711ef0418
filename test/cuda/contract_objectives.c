/*  contract_objectives.c: the contract checks of the loss heads (src/cuda/objectives.cu): SigLIP,
 *  MaxSim's ranked sigmoid with the row normalization, and the spectral terms. Each runs on seeded
 *  random inputs against a float64 reference computed here, with bounds derived from the kernels'
 *  arithmetic (u = 2^-24; expf within 2 ulp <= 4u relative, log1pf 1 ulp <= 2u, sqrtf and
 *  divisions correctly rounded), and each is run twice: the second run must repeat the first
 *  bitwise. */
#include "contract.h"

#define double_unit_ (1.0 / 9007199254740992.0) /* Float64 unit roundoff, 2^-53 */

/* -log sigmoid(y z) and sigmoid(-y z), as objectives.c. */
static double sigmoid_loss_(double y, double z, double *sigmoid_negative) {
    double margin = y * z;
    *sigmoid_negative = margin > 0 ? exp(-margin) / (1.0 + exp(-margin)) : 1.0 / (1.0 + exp(margin));
    return margin > 0 ? log1p(exp(-margin)) : -margin + log1p(exp(margin));
}

static void shuffle_(uint32_t *values, size_t count) {
    for (size_t i = count; i > 1; --i) {
        size_t j = (size_t)((uniform_() + 1) * 0.5 * (double)i) % i;
        uint32_t swap = values[i - 1];
        values[i - 1] = values[j], values[j] = swap;
    }
}

/* --- Matryoshka SigLIP, per width m. Normalization: the sum of squares is ceil(m/128) serial fused
 *     terms per thread and a 7-level tree, k = ceil(m/128) + 7 roundings, sqrtf halves it and adds
 *     u, the division u: each normalized element is within e_n = (k/2 + 2) u of exact, relatively.
 *     Dot: m serial fused steps: |d - d*| <= D = (2 e_n + (m + 1) u) S, S = sum |u v|. z = fma(s, d,
 *     b) with s = expf(scale) (4u): E_z = s D + 4u s |d| + u |z|. Loss term: log1pf of expf (2u +
 *     1.4u) and the add: E_l = E_z + 5u + 2u l. sigmoid(-y z): e/(1+e) or 1/(1+e), 6u, plus E_z
 *     relative; g = -+sigmoid / (N W): e_g = E_z + 8u; G = g s: e_G = e_g + 5u. Sums of loss,
 *     d_scale (fma(G, d, .)) and d_bias: 16 serial terms per thread, 8 levels, ceil(P/256) serial
 *     partials (P = W tiles) and 8 levels, then the division or the += : depth R = 16 + 8 +
 *     ceil(P/256) + 8 + 1, |loss - loss*| <= sum E_l / (N W) + R u loss*; d_bias within
 *     sum e_g |g| + R u (|d_bias0| + sum |g|), d_scale within sum (|G| D + (e_G + u) |G d|) +
 *     R u (|d_scale0| + sum |G d|). dU = G V over c serial fused steps: B_k = sum_j |G v_jk| (e_G +
 *     e_n + (c + 2) u), dV alike over N anchors. The normalization's backward: t = u . du (k
 *     roundings) within T = sum (|u| B + e_n |u du|) + k u sum |u du|; r = fma(-u, t, du) within
 *     B + |u| T + (e_n + u) |u t| + u |r|; r / norm adds (k/2 + 2) u |r| / norm; the += u |new|.
 *     Rows not live (and rows no list names) must not change at all. */
void check_siglip_(int plant) {
    size_t anchors_capacity = 160, candidates_capacity = 320, anchors = 150, candidates = 300, widest = 256;
    size_t rows = anchors_capacity + candidates_capacity + 24, widths[] = {64, 128, 256}, widths_count = 3;
    float parameters[2] = {2.0f, -4.0f}, scalars0[2] = {0.25f, -0.5f}; /* scale, bias; d_scale, d_bias */
    float *embeddings = malloc(rows * widest * 4), *d_embeddings = malloc(rows * widest * 4);
    uint32_t *order = malloc(rows * 4), counts[2] = {(uint32_t)anchors, (uint32_t)candidates};
    uint8_t *labels = malloc(anchors_capacity * candidates_capacity);
    float *weights = malloc(anchors_capacity * 4); /* powers of two: a weighted term is the unweighted one, exactly scaled */
    for (size_t a = 0; a < anchors_capacity; ++a) weights[a] = ldexpf(1.0f, (int)(a % 4) - 2);
    fill_f32_(embeddings, rows * widest, 1.0), fill_f32_(d_embeddings, rows * widest, 0.5);
    for (size_t r = 0; r < rows; ++r) order[r] = (uint32_t)r;
    shuffle_(order, rows);
    uint32_t *anchor_rows = order, *candidate_rows = order + anchors_capacity;
    for (size_t i = 0; i < anchors_capacity * candidates_capacity; ++i) labels[i] = uniform_() > 0;
    for (size_t a = 0; a < anchors; ++a) /* a positive near its anchor and a second, unrelated one */
        for (size_t c = 0; c < candidates; ++c) labels[a * candidates + c] = c == a || c == a + anchors;
    for (size_t a = 0; a < anchors; ++a)
        for (size_t k = 0; k < widest; ++k)
            embeddings[candidate_rows[a] * widest + k] = embeddings[anchor_rows[a] * widest + k] + (float)(0.5 * uniform_());
    for (size_t k = 0; k < 64; ++k) embeddings[candidate_rows[5] * widest + k] = 0; /* a zero prefix at width 64 */
    float *g_embeddings = device_(rows * widest * 4), *g_d_embeddings = device_(rows * widest * 4), *g_parameters = device_(8);
    float *g_scalars = device_(8), *g_loss = device_(4);
    uint32_t *g_rows = device_(rows * 4), *g_counts = device_(8);
    uint8_t *g_labels = device_(anchors_capacity * candidates_capacity);
    float *g_weights = device_(anchors_capacity * 4);
    void *g_scratch = device_(uform_cuda_siglip_scratch(anchors_capacity, candidates_capacity, widest, widths_count));
    upload_(g_embeddings, embeddings, rows * widest * 4), upload_(g_parameters, parameters, 8), upload_(g_rows, order, rows * 4);
    upload_(g_counts, counts, 8), upload_(g_labels, labels, anchors_capacity * candidates_capacity);
    upload_(g_weights, weights, anchors_capacity * 4);
    float *out[2], scalars[2][3];
    for (int run = 0; run < 2; ++run) {
        upload_(g_d_embeddings, d_embeddings, rows * widest * 4), upload_(g_scalars, scalars0, 8);
        PLANTED_OK("siglip", plant,
                   uform_cuda_siglip(g_embeddings, widest, g_rows, g_rows + anchors_capacity, g_counts,
                                     anchors_capacity, candidates_capacity, g_labels, g_weights, widths, widths_count,
                                     g_parameters, g_parameters + 1, g_loss, g_d_embeddings, g_scalars, g_scalars + 1,
                                     g_scratch, NULL));
        out[run] = malloc(rows * widest * 4);
        download_(out[run], g_d_embeddings, rows * widest * 4), download_(scalars[run], g_scalars, 8), download_(scalars[run] + 2, g_loss, 4);
    }
    double worst = 0;
    for (size_t i = 0; i < rows * widest; ++i) compare_(&worst, out[1][i], out[0][i], 0);
    for (int q = 0; q < 3; ++q) compare_(&worst, scalars[1][q], scalars[0][q], 0);

    size_t stack = anchors + candidates, tiles = ((anchors_capacity + 63) / 64) * ((candidates_capacity + 63) / 64);
    double s = exp((double)parameters[0]), b = parameters[1], W = (double)widths_count, n = (double)anchors;
    double depth = 16 + 8 + ceil((double)(widths_count * tiles) / 256) + 8 + 1;
    double loss = 0, loss_error = 0, d_scale = scalars0[0], d_scale_error = 0, d_scale_magnitude = fabs(scalars0[0]);
    double d_bias = scalars0[1], d_bias_error = 0, d_bias_magnitude = fabs(scalars0[1]);
    double *expected = malloc(rows * widest * 8), *bound = calloc(rows * widest, 8), *u = malloc(stack * widest * 8), *norms = malloc(stack * 8);
    double *weighted = malloc(anchors * candidates * 8), *weighted_error = malloc(anchors * candidates * 8);
    double *du = malloc(stack * widest * 8), *du_bound = malloc(stack * widest * 8);
    for (size_t i = 0; i < rows * widest; ++i) expected[i] = d_embeddings[i];
#define SOURCE(r) ((r) < anchors ? anchor_rows[r] : candidate_rows[(r) - anchors])
    for (size_t w = 0; w < widths_count; ++w) {
        size_t m = widths[w];
        double k = ceil((double)m / 128) + 7, e_n = (k / 2 + 2) * unit_;
        for (size_t r = 0; r < stack; ++r) {
            float const *e = embeddings + SOURCE(r) * widest;
            double squares = 0;
            for (size_t i = 0; i < m; ++i) squares += (double)e[i] * e[i];
            norms[r] = sqrt(squares);
            for (size_t i = 0; i < m; ++i) u[r * m + i] = norms[r] > 0 ? e[i] / norms[r] : 0;
        }
        for (size_t a = 0; a < anchors; ++a)
            for (size_t c = 0; c < candidates; ++c) {
                double const *x = u + a * m, *y = u + (anchors + c) * m;
                double dot = 0, magnitude = 0, sigmoid;
                for (size_t i = 0; i < m; ++i) dot += x[i] * y[i], magnitude += fabs(x[i] * y[i]);
                double dot_error = (2 * e_n + ((double)m + 1) * unit_) * magnitude, z = s * dot + b;
                double z_error = s * dot_error + 4 * unit_ * s * fabs(dot) + unit_ * fabs(z);
                double label = labels[a * candidates + c] ? 1.0 : -1.0, l = sigmoid_loss_(label, z, &sigmoid);
                double g = -label * weights[a] * sigmoid / (n * W), e_g = z_error + 8 * unit_, e_weighted = e_g + 5 * unit_;
                loss += weights[a] * l, loss_error += weights[a] * (z_error + 5 * unit_ + 2 * unit_ * l);
                weighted[a * candidates + c] = g * s, weighted_error[a * candidates + c] = e_weighted;
                d_scale += g * s * dot, d_scale_magnitude += fabs(g * s * dot);
                d_scale_error += fabs(g * s) * dot_error + (e_weighted + unit_) * fabs(g * s * dot);
                d_bias += g, d_bias_magnitude += fabs(g), d_bias_error += e_g * fabs(g);
            }
        for (size_t r = 0; r < stack; ++r)
            for (size_t i = 0; i < m; ++i) {
                double sum = 0, error = 0;
                if (r < anchors)
                    for (size_t c = 0; c < candidates; ++c) {
                        double term = weighted[r * candidates + c] * u[(anchors + c) * m + i];
                        sum += term, error += fabs(term) * (weighted_error[r * candidates + c] + e_n + ((double)candidates + 2) * unit_);
                    }
                else
                    for (size_t a = 0; a < anchors; ++a) {
                        double term = weighted[a * candidates + r - anchors] * u[a * m + i];
                        sum += term, error += fabs(term) * (weighted_error[a * candidates + r - anchors] + e_n + (n + 2) * unit_);
                    }
                du[r * m + i] = sum, du_bound[r * m + i] = error;
            }
        for (size_t r = 0; r < stack; ++r) {
            if (!(norms[r] > 0)) continue;
            double const *x = u + r * m, *dx = du + r * m, *dx_bound = du_bound + r * m;
            double t = 0, magnitude = 0, t_error = 0;
            for (size_t i = 0; i < m; ++i) t += x[i] * dx[i], magnitude += fabs(x[i] * dx[i]), t_error += fabs(x[i]) * dx_bound[i] + e_n * fabs(x[i] * dx[i]);
            t_error += k * unit_ * magnitude;
            for (size_t i = 0; i < m; ++i) {
                double residual = dx[i] - x[i] * t;
                double error = dx_bound[i] + fabs(x[i]) * t_error + (e_n + unit_) * fabs(x[i] * t) + unit_ * fabs(residual);
                size_t at = SOURCE(r) * widest + i;
                expected[at] += residual / norms[r];
                bound[at] += (error + (k / 2 + 2) * unit_ * fabs(residual)) / norms[r] + unit_ * fabs(expected[at]);
            }
        }
    }
#undef SOURCE
    loss /= n * W;
    compare_(&worst, scalars[0][2], loss, loss_error / (n * W) + depth * unit_ * loss);
    compare_(&worst, scalars[0][0], d_scale, d_scale_error + depth * unit_ * d_scale_magnitude);
    compare_(&worst, scalars[0][1], d_bias, d_bias_error + depth * unit_ * d_bias_magnitude);
    for (size_t i = 0; i < rows * widest; ++i) compare_(&worst, out[0][i], expected[i], bound[i]);
    record_("siglip (loss, d_embeddings, d_scale, d_bias)", worst, plant);
    free(embeddings), free(d_embeddings), free(order), free(labels), free(weights), free(out[0]), free(out[1]), free(expected);
    free(bound), free(u), free(norms), free(weighted), free(weighted_error), free(du), free(du_bound);
    cudaFree(g_embeddings), cudaFree(g_d_embeddings), cudaFree(g_parameters), cudaFree(g_scalars), cudaFree(g_loss);
    cudaFree(g_rows), cudaFree(g_counts), cudaFree(g_labels), cudaFree(g_weights), cudaFree(g_scratch);
}

/* --- MaxSim and its ranked sigmoid. The vectors are multiples of 2^-6 below 1/8, so every
 *     similarity is exact in Float32 (13 significant bits at most) and the best cell, ties included
 *     (every third document cell repeats the one two before it), is the same for kernel and
 *     reference; the bounds keep the general terms. A 128-term fused dot is within 128 u sum |q d|;
 *     maxsim sums |q| cells serially: M_err = sum_i max_j (128 u sum |q_i d_j|) + |q| u sum |best|;
 *     mean = maxsim / |q| within M_err / |q| + u |mean|; then z, the loss term, g = -+sigmoid / N
 *     as SigLIP (E_z, E_l, e_g = E_z + 8u); the step g s / |q| within e_g + 6u. The loss sums C
 *     pairs per anchor, then ceil(A/256) serial partials, 8 levels and the division (or the +=):
 *     (C + ceil(A/256) + 9) u loss* on top of sum E_l / N; d_scale and d_bias alike. Each gradient
 *     element adds its T terms (step times a cell) by fused steps onto its old value:
 *     sum e_step |term| + (T + 1) u (|old| + sum |term|); cells no pair reaches must not change.
 *     The row normalization: a warp per row, ceil(w/32) serial fused terms and 5 levels,
 *     k = ceil(w/32) + 5: the inverse norm within e_i = (k/2 + 4) u (covering rsqrtf's 2 ulp), the
 *     vector within e_i + u; backward, from the kernel's own vectors c and inverse norms r (its
 *     inputs): |d - d*| <= r (|c| k u sum |c dc| + u |dc - c (c . dc)|) + u |d*|. */
static void check_normalize_rows_(int plant) {
    size_t rows = 700, width = 128;
    float *raw = malloc(rows * width * 4), *normalized = malloc(rows * width * 4), *inverse = malloc(rows * 4);
    float *d_normalized = malloc(rows * width * 4), *d_raw = malloc(rows * width * 4);
    fill_f32_(raw, rows * width, 2.0), fill_f32_(d_normalized, rows * width, 1.0);
    for (size_t i = 0; i < width; ++i) raw[5 * width + i] = 0; /* a zero row */
    float *g_raw = device_(rows * width * 4), *g_normalized = device_(rows * width * 4), *g_inverse = device_(rows * 4);
    float *g_d = device_(rows * width * 4);
    upload_(g_raw, raw, rows * width * 4), upload_(g_d, d_normalized, rows * width * 4);
    KERNEL_OK(uform_cuda_normalize_rows_forward(g_raw, rows, width, g_normalized, g_inverse, NULL));
    PLANTED_OK("normalize_rows_backward", plant,
               uform_cuda_normalize_rows_backward(g_normalized, g_inverse, g_d, rows, width, g_d, NULL)); /* in place */
    download_(normalized, g_normalized, rows * width * 4), download_(inverse, g_inverse, rows * 4), download_(d_raw, g_d, rows * width * 4);
    double k = ceil((double)width / 32) + 5, e_inverse = (k / 2 + 4) * unit_, worst = 0;
    for (size_t r = 0; r < rows; ++r) {
        double squares = 0, dot = 0, magnitude = 0;
        for (size_t i = 0; i < width; ++i) squares += (double)raw[r * width + i] * raw[r * width + i];
        double exact = squares > 0 ? 1.0 / sqrt(squares) : 0;
        compare_(&worst, inverse[r], exact, e_inverse * exact);
        for (size_t i = 0; i < width; ++i) {
            double c = raw[r * width + i] * exact;
            compare_(&worst, normalized[r * width + i], c, (e_inverse + unit_) * fabs(c));
            dot += (double)normalized[r * width + i] * d_normalized[r * width + i];
            magnitude += fabs((double)normalized[r * width + i] * d_normalized[r * width + i]);
        }
        for (size_t i = 0; i < width; ++i) {
            double c = normalized[r * width + i], residual = d_normalized[r * width + i] - c * dot, value = residual * inverse[r];
            compare_(&worst, d_raw[r * width + i], value,
                     inverse[r] * (fabs(c) * k * unit_ * magnitude + unit_ * fabs(residual)) + unit_ * fabs(value));
        }
    }
    record_("normalize_rows (forward, backward)", worst, plant);
    free(raw), free(normalized), free(inverse), free(d_normalized), free(d_raw);
    cudaFree(g_raw), cudaFree(g_normalized), cudaFree(g_inverse), cudaFree(g_d);
}

void check_maxsim_(int plant) {
    size_t anchors_capacity = 24, candidates_capacity = 40, anchors = 21, candidates = 36, width = 128;
    size_t segments = anchors_capacity + candidates_capacity + 3, cells = 0;
    size_t *lengths = malloc(segments * sizeof(size_t));
    for (size_t g = 0; g < segments; ++g) /* queries of 1 to 70 cells (across 32-cell tiles), documents of 1 to 100 */
        lengths[g] = g < anchors_capacity ? 1 + (size_t)((uniform_() + 1) * 0.5 * 69.99) : 1 + (size_t)((uniform_() + 1) * 0.5 * 99.99);
    lengths[0] = 70, lengths[1] = 1, lengths[2] = 32, lengths[3] = 33, lengths[anchors_capacity] = 1;
    uint32_t *spans = malloc(segments * 8);
    for (size_t g = 0; g < segments; cells += lengths[g], ++g) spans[2 * g] = (uint32_t)cells, spans[2 * g + 1] = (uint32_t)lengths[g];
    float *colbert = malloc(cells * width * 4), *d_colbert = malloc(cells * width * 4);
    for (size_t i = 0; i < cells * width; ++i) {
        int level = (int)floor((uniform_() + 1) * 0.5 * 17) - 8;
        colbert[i] = (float)((level > 8 ? 8 : level) / 64.0);
    }
    for (size_t g = anchors_capacity; g < segments; ++g) /* exact ties inside every document */
        for (size_t j = 2; j < lengths[g]; j += 3) memcpy(colbert + (spans[2 * g] + j) * width, colbert + (spans[2 * g] + j - 2) * width, width * 4);
    fill_f32_(d_colbert, cells * width, 0.5);
    uint32_t *pairs = malloc((anchors_capacity + candidates_capacity) * 4), counts[2] = {(uint32_t)anchors, (uint32_t)candidates};
    for (size_t i = 0; i < anchors_capacity + candidates_capacity; ++i) pairs[i] = (uint32_t)i;
    shuffle_(pairs, anchors_capacity), shuffle_(pairs + anchors_capacity, candidates_capacity);
    uint8_t *labels = malloc(anchors_capacity * candidates_capacity);
    memset(labels, 0, anchors_capacity * candidates_capacity);
    for (size_t a = 0; a < anchors; ++a) labels[a * candidates + a % candidates] = labels[a * candidates + (a + 7) % candidates] = 1;
    float *weights = malloc(anchors_capacity * 4); /* powers of two, as siglip's */
    for (size_t a = 0; a < anchors_capacity; ++a) weights[a] = ldexpf(1.0f, (int)(a % 4) - 2);
    float parameters[2] = {1.5f, -1.0f}, scalars0[2] = {0.25f, -0.5f};
    float *g_colbert = device_(cells * width * 4), *g_d_colbert = device_(cells * width * 4), *g_parameters = device_(8);
    float *g_scalars = device_(8), *g_loss = device_(4);
    uint32_t *g_spans = device_(segments * 8), *g_pairs = device_((anchors_capacity + candidates_capacity) * 4), *g_counts = device_(8);
    uint8_t *g_labels = device_(anchors_capacity * candidates_capacity);
    float *g_weights = device_(anchors_capacity * 4);
    upload_(g_weights, weights, anchors_capacity * 4);
    void *g_scratch = device_(uform_cuda_maxsim_scratch(anchors_capacity, candidates_capacity));
    upload_(g_colbert, colbert, cells * width * 4), upload_(g_parameters, parameters, 8), upload_(g_spans, spans, segments * 8);
    upload_(g_pairs, pairs, (anchors_capacity + candidates_capacity) * 4), upload_(g_counts, counts, 8);
    upload_(g_labels, labels, anchors_capacity * candidates_capacity);
    float *out[2], scalars[2][3];
    for (int run = 0; run < 2; ++run) {
        upload_(g_d_colbert, d_colbert, cells * width * 4), upload_(g_scalars, scalars0, 8);
        PLANTED_OK("maxsim", plant == 1 ? 1 : plant == 3 ? 4 : 0,
                   uform_cuda_maxsim(g_colbert, g_spans, g_pairs, g_pairs + anchors_capacity, g_counts,
                                     anchors_capacity, candidates_capacity, g_labels, g_weights, g_parameters, g_parameters + 1,
                                     g_loss, g_d_colbert, g_scalars, g_scalars + 1, g_scratch, NULL));
        out[run] = malloc(cells * width * 4);
        download_(out[run], g_d_colbert, cells * width * 4), download_(scalars[run], g_scalars, 8), download_(scalars[run] + 2, g_loss, 4);
    }
    double worst = 0;
    for (size_t i = 0; i < cells * width; ++i) compare_(&worst, out[1][i], out[0][i], 0);
    for (int q = 0; q < 3; ++q) compare_(&worst, scalars[1][q], scalars[0][q], 0);

    double s = exp((double)parameters[0]), b = parameters[1], n = (double)anchors;
    double loss = 0, loss_error = 0, d_scale = scalars0[0], d_scale_error = 0, d_scale_magnitude = fabs(scalars0[0]);
    double d_bias = scalars0[1], d_bias_error = 0, d_bias_magnitude = fabs(scalars0[1]);
    double *expected = malloc(cells * width * 8), *term_error = calloc(cells * width, 8), *magnitude = calloc(cells * width, 8);
    size_t *terms = calloc(cells, sizeof(size_t)), best[70]; /* queries have at most 70 cells */
    for (size_t i = 0; i < cells * width; ++i) expected[i] = d_colbert[i];
    for (size_t a = 0; a < anchors; ++a)
        for (size_t c = 0; c < candidates; ++c) {
            size_t q0 = spans[2 * pairs[a]], lq = lengths[pairs[a]];
            size_t d0 = spans[2 * pairs[anchors_capacity + c]], ld = lengths[pairs[anchors_capacity + c]];
            double maxsim = 0, maxsim_error = 0, best_magnitude = 0, sigmoid;
            for (size_t i = 0; i < lq; ++i) { /* the first largest similarity: ties to the lowest index */
                double largest = -INFINITY, largest_error = 0;
                for (size_t j = 0; j < ld; ++j) {
                    double dot = 0, spread = 0;
                    for (size_t k = 0; k < width; ++k) {
                        double product = (double)colbert[(q0 + i) * width + k] * colbert[(d0 + j) * width + k];
                        dot += product, spread += fabs(product);
                    }
                    if (dot > largest) largest = dot, best[i] = j;
                    largest_error = fmax(largest_error, 128 * unit_ * spread);
                }
                maxsim += largest, maxsim_error += largest_error, best_magnitude += fabs(largest);
            }
            maxsim_error += (double)lq * unit_ * best_magnitude;
            double mean = maxsim / (double)lq, mean_error = maxsim_error / (double)lq + unit_ * fabs(mean), z = s * mean + b;
            double z_error = s * mean_error + 4 * unit_ * s * fabs(mean) + unit_ * fabs(z);
            double label = labels[a * candidates + c] ? 1.0 : -1.0, l = sigmoid_loss_(label, z, &sigmoid);
            double g = -label * weights[a] * sigmoid / n, e_g = z_error + 8 * unit_, step = g * s / (double)lq, e_step = e_g + 6 * unit_;
            loss += weights[a] * l, loss_error += weights[a] * (z_error + 5 * unit_ + 2 * unit_ * l);
            d_scale += g * s * mean, d_scale_magnitude += fabs(g * s * mean);
            d_scale_error += fabs(g * s) * (mean_error + (e_g + 6 * unit_) * fabs(mean));
            d_bias += g, d_bias_magnitude += fabs(g), d_bias_error += e_g * fabs(g);
            for (size_t i = 0; i < lq; ++i) {
                size_t query = q0 + i, document = d0 + best[i];
                terms[query]++, terms[document]++;
                for (size_t k = 0; k < width; ++k) {
                    double to_query = step * colbert[document * width + k], to_document = step * colbert[query * width + k];
                    expected[query * width + k] += to_query, magnitude[query * width + k] += fabs(to_query);
                    term_error[query * width + k] += e_step * fabs(to_query);
                    expected[document * width + k] += to_document, magnitude[document * width + k] += fabs(to_document);
                    term_error[document * width + k] += e_step * fabs(to_document);
                }
            }
        }
    double depth = (double)candidates + ceil((double)anchors_capacity / 256) + 8 + 1;
    loss /= n;
    compare_(&worst, scalars[0][2], loss, loss_error / n + depth * unit_ * loss);
    compare_(&worst, scalars[0][0], d_scale, d_scale_error + depth * unit_ * d_scale_magnitude);
    compare_(&worst, scalars[0][1], d_bias, d_bias_error + depth * unit_ * d_bias_magnitude);
    for (size_t cell = 0; cell < cells; ++cell)
        for (size_t k = 0; k < width; ++k) {
            size_t i = cell * width + k;
            double limit = terms[cell] ? term_error[i] + ((double)terms[cell] + 1) * unit_ * (fabs(d_colbert[i]) + magnitude[i]) : 0;
            compare_(&worst, out[0][i], expected[i], limit);
        }
    if (plant != 2) record_("maxsim (loss, d_colbert, d_scale, d_bias)", worst, plant);
    if (plant == 0 || plant == 2) check_normalize_rows_(plant == 2 ? 1 : 0);
    free(lengths), free(spans), free(colbert), free(d_colbert), free(pairs), free(labels), free(weights), free(out[0]), free(out[1]);
    free(expected), free(term_error), free(magnitude), free(terms);
    cudaFree(g_colbert), cudaFree(g_d_colbert), cudaFree(g_parameters), cudaFree(g_scalars), cudaFree(g_loss);
    cudaFree(g_spans), cudaFree(g_pairs), cudaFree(g_counts), cudaFree(g_labels), cudaFree(g_weights), cudaFree(g_scratch);
}

/* --- TCR and Lipschitz, computed in Float64 by the kernels; the reference takes the width x width
 *     form as objectives.c, so the N x N run also checks the identity it relies on. The Float64
 *     parts (2^-53 = v): M = I + a Z^T Z has eigenvalues in [1, 1 + a N] (rows of unit norm, trace N),
 *     so ||M^-1|| <= 1 and kappa <= 1 + a N. Cholesky's backward error (|dM| <= (D + 1) v |L||L^T|,
 *     (|L||L^T|)_ij <= sqrt(M_ii M_jj)) and the Gram's ((depth + 2 e_z) v a N, e_z the rows' own)
 *     move log det by at most D ((D + 2) v (D + a N) + a (depth + 2 (m/128 + 10)) v N), the logs and
 *     their sum 2 (D + 2) v |log det|; the inverse through L^-1 is within 4 D^2 kappa v and its
 *     product with Z within (4 D^2 kappa + 2 D) sqrt(N) v per element. Power iteration on A = Z^T Z / N:
 *     each step's p is within (m + N + 2) v, so the vector's error grows as e' = 2 (||A||_F e +
 *     (m + N + 2) v) / |p| + 2 v; sigma within 2 ||A||_F e + (m + N + 2) v; z_s . v within e + (m + 2) v.
 *     The gradient's normalization backward in Float64 adds (m/128 + 12) v relative; then the
 *     Float32 roundings: each loss's store u |loss|, each d_embeddings element's conversion u |res|
 *     and its += u |new|. Rows not live, and the zero row, must not change. */
static double spectral_run_(int plant, size_t rows_capacity, size_t rows) {
    size_t width = 128, iterations = 6;
    double tcr_lambda = 0.3, lipschitz_lambda = 0.7, v_unit = double_unit_, m = (double)width, n = (double)rows;
    float *embeddings = malloc(rows_capacity * width * 4), *d_embeddings = malloc(rows_capacity * width * 4), *basis = malloc(2 * width * 4);
    fill_f32_(embeddings, rows_capacity * width, 0.4), fill_f32_(d_embeddings, rows_capacity * width, 0.5), fill_f32_(basis, 2 * width, 1.0);
    for (size_t s = 0; s < rows_capacity; ++s) { /* two shared directions, as real embeddings have */
        double first = 1 + uniform_(), second = uniform_();
        for (size_t i = 0; i < width; ++i) embeddings[s * width + i] += (float)(first * basis[i] + second * basis[width + i]);
    }
    for (size_t i = 0; i < width; ++i) embeddings[3 * width + i] = 0; /* a zero row */
    uint32_t count = (uint32_t)rows;
    float *g_embeddings = device_(rows_capacity * width * 4), *g_d_embeddings = device_(rows_capacity * width * 4), *g_losses = device_(8);
    uint32_t *g_rows = device_(4);
    void *g_scratch = device_(uform_cuda_spectral_scratch(rows_capacity, width));
    upload_(g_embeddings, embeddings, rows_capacity * width * 4), upload_(g_rows, &count, 4);
    float *out[2], losses[2][2];
    for (int run = 0; run < 2; ++run) {
        upload_(g_d_embeddings, d_embeddings, rows_capacity * width * 4);
        PLANTED_OK("spectral", plant,
                   uform_cuda_spectral(g_embeddings, rows_capacity, width, g_rows, tcr_lambda, lipschitz_lambda,
                                       iterations, g_losses, g_losses + 1, g_d_embeddings, g_scratch, NULL));
        out[run] = malloc(rows_capacity * width * 4);
        download_(out[run], g_d_embeddings, rows_capacity * width * 4), download_(losses[run], g_losses, 8);
    }
    double worst = 0;
    for (size_t i = 0; i < rows_capacity * width; ++i) compare_(&worst, out[1][i], out[0][i], 0);
    compare_(&worst, losses[1][0], losses[0][0], 0), compare_(&worst, losses[1][1], losses[0][1], 0);

    double *z = calloc(rows * width, 8), *norms = malloc(rows * 8), *gram = calloc(width * width, 8), *factor = malloc(width * width * 8);
    double *inverse = calloc(width * width, 8), *vector = malloc(width * 8), *product = malloc(width * 8);
    for (size_t s = 0; s < rows; ++s) {
        double squares = 0;
        for (size_t i = 0; i < width; ++i) squares += (double)embeddings[s * width + i] * embeddings[s * width + i];
        norms[s] = sqrt(squares);
        for (size_t i = 0; i < width; ++i) z[s * width + i] = norms[s] > 0 ? embeddings[s * width + i] / norms[s] : 0;
    }
    for (size_t s = 0; s < rows; ++s)
        for (size_t i = 0; i < width; ++i)
            for (size_t j = 0; j < width; ++j) gram[i * width + j] += z[s * width + i] * z[s * width + j];
    /* Lipschitz, as objectives.c, with the error of the vector carried along. */
    double frobenius = 0, vector_error = 0;
    for (size_t i = 0; i < width * width; ++i) frobenius += gram[i] * gram[i] / (n * n);
    frobenius = sqrt(frobenius);
    for (size_t i = 0; i < width; ++i) vector[i] = 1.0 / sqrt(m);
    for (size_t step = 0; step < iterations; ++step) {
        double norm = 0;
        for (size_t i = 0; i < width; ++i) {
            product[i] = 0;
            for (size_t j = 0; j < width; ++j) product[i] += gram[i * width + j] * vector[j] / n;
            norm += product[i] * product[i];
        }
        norm = sqrt(norm);
        vector_error = 2 * (frobenius * vector_error + (m + n + 2) * v_unit) / norm + 2 * v_unit;
        for (size_t i = 0; i < width; ++i) vector[i] = product[i] / norm;
    }
    double sigma = 0;
    for (size_t i = 0; i < width; ++i)
        for (size_t j = 0; j < width; ++j) sigma += vector[i] * gram[i * width + j] * vector[j] / n;
    double sigma_error = 2 * frobenius * vector_error + (m + n + 2) * v_unit;
    compare_(&worst, losses[0][1], lipschitz_lambda * sigma, lipschitz_lambda * sigma_error + unit_ * lipschitz_lambda * sigma);
    /* TCR in the width x width form: Cholesky, log det, inverse. */
    double alpha = m / (n * 0.5), log_determinant = 0;
    for (size_t i = 0; i < width * width; ++i) factor[i] = alpha * gram[i] + (i % (width + 1) == 0);
    for (size_t j = 0; j < width; ++j) {
        for (size_t k = 0; k < j; ++k) factor[j * width + j] -= factor[j * width + k] * factor[j * width + k];
        factor[j * width + j] = sqrt(factor[j * width + j]);
        log_determinant += 2 * log(factor[j * width + j]);
        for (size_t i = j + 1; i < width; ++i) {
            for (size_t k = 0; k < j; ++k) factor[i * width + j] -= factor[i * width + k] * factor[j * width + k];
            factor[i * width + j] /= factor[j * width + j];
        }
    }
    for (size_t column = 0; column < width; ++column) { /* M^-1 e_column: L y = e, then L^T x = y */
        double *x = product;
        for (size_t i = 0; i < width; ++i) {
            double sum = i == column;
            for (size_t k = 0; k < i; ++k) sum -= factor[i * width + k] * x[k];
            x[i] = sum / factor[i * width + i];
        }
        for (size_t i = width; i-- > 0;) {
            double sum = x[i];
            for (size_t k = i + 1; k < width; ++k) sum -= factor[k * width + i] * x[k];
            x[i] = sum / factor[i * width + i];
        }
        for (size_t i = 0; i < width; ++i) inverse[i * width + column] = x[i];
    }
    int by_rows = rows_capacity < width;
    double dimension = by_rows ? n : m, depth = by_rows ? m : n, kappa = 1 + alpha * n;
    double determinant_error = dimension * ((dimension + 2) * v_unit * (dimension + alpha * n) + alpha * (depth + 2 * (m / 128 + 10)) * v_unit * n) +
                               2 * (dimension + 2) * v_unit * fabs(log_determinant);
    double tcr = -tcr_lambda * 0.5 * log_determinant;
    compare_(&worst, losses[0][0], tcr, tcr_lambda * 0.5 * determinant_error + unit_ * fabs(tcr));
    double product_error = (4 * dimension * dimension * kappa + 2 * dimension) * sqrt(n) * v_unit;
    /* The gradient of both terms, then the normalization's backward. */
    double *du = malloc(width * 8), *du_error = malloc(width * 8), *expected = malloc(rows_capacity * width * 8), *bound = calloc(rows_capacity * width, 8);
    for (size_t i = 0; i < rows_capacity * width; ++i) expected[i] = d_embeddings[i];
    for (size_t s = 0; s < rows; ++s) {
        if (!(norms[s] > 0)) continue;
        double projection = 0;
        for (size_t i = 0; i < width; ++i) projection += z[s * width + i] * vector[i];
        double projection_error = vector_error + (m + 2) * v_unit, lipschitz = 2 * lipschitz_lambda / n;
        for (size_t i = 0; i < width; ++i) {
            double tcr_part = 0;
            for (size_t j = 0; j < width; ++j) tcr_part += z[s * width + j] * inverse[j * width + i];
            tcr_part *= -tcr_lambda * alpha;
            du[i] = lipschitz * projection * vector[i] + tcr_part;
            du_error[i] = lipschitz * (projection_error * fabs(vector[i]) + fabs(projection) * vector_error) + tcr_lambda * alpha * product_error +
                          4 * v_unit * fabs(du[i]);
        }
        double t = 0, t_magnitude = 0, t_error = 0;
        for (size_t i = 0; i < width; ++i) {
            double x = z[s * width + i];
            t += x * du[i], t_magnitude += fabs(x * du[i]), t_error += fabs(x) * du_error[i];
        }
        t_error += (m / 128 + 8) * v_unit * t_magnitude;
        for (size_t i = 0; i < width; ++i) {
            double x = z[s * width + i], residual = du[i] - x * t, value = residual / norms[s];
            double error = (du_error[i] + fabs(x) * t_error + 2 * v_unit * (fabs(residual) + fabs(x * t))) / norms[s] + (m / 128 + 12) * v_unit * fabs(value);
            expected[s * width + i] += value;
            bound[s * width + i] = error + unit_ * fabs(value) + unit_ * fabs(expected[s * width + i]);
        }
    }
    for (size_t i = 0; i < rows_capacity * width; ++i) compare_(&worst, out[0][i], expected[i], bound[i]);
    free(embeddings), free(d_embeddings), free(basis), free(out[0]), free(out[1]), free(z), free(norms), free(gram), free(factor);
    free(inverse), free(vector), free(product), free(du), free(du_error), free(expected), free(bound);
    cudaFree(g_embeddings), cudaFree(g_d_embeddings), cudaFree(g_losses), cudaFree(g_rows), cudaFree(g_scratch);
    return worst;
}

void check_spectral_(int plant) {
    record_("tcr + lipschitz (width x width form)", spectral_run_(plant, 200, 180), plant);
    record_("tcr + lipschitz (N x N form)", spectral_run_(plant, 96, 90), plant);
}
