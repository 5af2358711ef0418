/*  objectives.c: the losses of docs/training.md on the heads' outputs, each leaving the gradient
 *  of what it read: MLM on the logits (in place), SigLIP on the embeddings and the ranked sigmoid
 *  on the ColBERT vectors (one rank's band of a world at a time), and the spectral terms (TCR,
 *  Lipschitz) on the world's embeddings. */
#include <math.h>
#include <string.h>

#include "core/status.h"
#include "cpu/frontend.h"
#include "cpu/gemm.h"
#include "train/trainer.h"

/* LAPACK's Cholesky factorization and inverse, from OpenBLAS. */
void dpotrf_(char const *uplo, int const *n, double *a, int const *lda, int *info);
void dpotri_(char const *uplo, int const *n, double *a, int const *lda, int *info);

/* -log sigmoid(y z) and its derivative by z, computed without overflow. */
static double uform_sigmoid_loss_(double y, double z, double *derivative) {
    double margin = y * z;
    double loss = margin > 0 ? log1p(exp(-margin)) : -margin + log1p(exp(margin));
    double sigmoid_negative = margin > 0 ? exp(-margin) / (1.0 + exp(-margin)) : 1.0 / (1.0 + exp(margin));
    *derivative = -y * sigmoid_negative;
    return loss;
}

void uform_objective_mlm(uform_trainer_t *trainer, uform_losses_t *losses) {
    size_t scored = losses->scored, vocabulary = uform_vocabulary_k;
    double total = 0;
    for (size_t k = 0; k < scored; ++k) {
        float *logits = trainer->logits + k * vocabulary;
        int32_t target = trainer->targets[trainer->scored[k]];
        float largest = -INFINITY;
        for (size_t v = 0; v < vocabulary; ++v) largest = logits[v] > largest ? logits[v] : largest;
        double sum = 0;
        for (size_t v = 0; v < vocabulary; ++v) sum += exp((double)logits[v] - largest);
        double log_sum = largest + log(sum);
        total += log_sum - logits[target];
        for (size_t v = 0; v < vocabulary; ++v)
            logits[v] = (float)((exp((double)logits[v] - log_sum) - (v == (size_t)target)) / ((double)scored * (double)trainer->ranks));
    }
    losses->mlm = total / (double)scored;
}

double uform_objective_reconstruction(uform_trainer_t *trainer, uform_cell_kind_t kind) {
    uform_reconstruction_t *masked = &trainer->reconstructions[kind - uform_cell_image_k];
    size_t count = masked->count, values = uform_media_info(kind)->values;
    uform_tensor_t *bias_tensor = trainer->by_index[uform_tensor_index(&trainer->model->config, uform_media_info(kind)->mae_bias, 0)];
    float const *bias = bias_tensor->parameter;
    float *d_bias = bias_tensor->gradient;
    double total = 0, scale = 2.0 / ((double)count * (double)values * (double)trainer->ranks); /* the ranks' mean of means */
#if defined(UFORM_PLANT_RECONSTRUCTION_HALF)
    scale /= 2; /* planted: d(p - t)^2 / dp taken as (p - t) */
#endif
    for (size_t k = 0; k < count; ++k) /* in cell order: the sums repeat bitwise */
        for (size_t v = 0; v < values; ++v) {
            float *prediction = masked->predictions + k * values + v;
            double difference = (double)*prediction + bias[v] - masked->targets[k * values + v];
            total += difference * difference;
            *prediction = (float)(difference * scale);
            d_bias[v] += *prediction;
        }
    return total / ((double)count * (double)values);
}

/* Writes normalize(e[s][:width]) into `target` and returns the norm. */
static double uform_normalized_prefix_(float const *e, size_t width, float *target) {
    double norm = 0;
    for (size_t i = 0; i < width; ++i) norm += (double)e[i] * e[i];
    norm = sqrt(norm);
    for (size_t i = 0; i < width; ++i) target[i] = norm > 0 ? (float)(e[i] / norm) : 0.0f;
    return norm;
}

/* Adds to de the gradient through u = e / |e| given du: (du - u (u . du)) / |e|. */
static void uform_normalize_backward_(float const *u, float const *du, double norm, size_t width, float *de) {
    if (norm <= 0) return;
    double dot = 0;
    for (size_t i = 0; i < width; ++i) dot += (double)u[i] * du[i];
    for (size_t i = 0; i < width; ++i) de[i] += (float)((du[i] - u[i] * dot) / norm);
}

/* Anchor a's scale in a pair loss: its source's loss_weight, 1 without weights. */
static double uform_anchor_weight_(uform_band_t const *band, size_t a) {
    double weight = band->weights ? band->weights[a] : 1.0;
#if defined(UFORM_PLANT_ANCHOR_WEIGHT_IGNORED)
    weight = 1.0; /* planted: the anchors' loss weights ignored */
#endif
    return weight;
}

double uform_objective_siglip(uform_trainer_t *trainer, uform_band_t const *band, float *scratch, double *norms) {
    uform_config_t const *config = &trainer->model->config;
    size_t anchors = band->anchors_count, candidates = band->candidates_count;
    size_t widest = trainer->pool_proj->rows, widths = config->embedding_widths_count;
    double scale = exp((double)trainer->siglip_scale->parameter[0]), bias = trainer->siglip_bias->parameter[0], total = 0;
    float *u = scratch, *v = u + anchors * widest, *du = v + candidates * widest, *dv = du + anchors * widest;
    for (size_t w = 0; w < widths; ++w) {
        size_t width = config->embedding_widths[w];
        for (size_t a = 0; a < anchors; ++a)
            norms[a] = uform_normalized_prefix_(band->rows + band->anchors[a] * widest, width, u + a * width);
        for (size_t c = 0; c < candidates; ++c)
            norms[anchors + c] = uform_normalized_prefix_(band->rows + band->candidates[c] * widest, width, v + c * width);
        memset(du, 0, anchors * width * sizeof(float));
        memset(dv, 0, candidates * width * sizeof(float));
        double loss = 0;
        for (size_t a = 0; a < anchors; ++a) {
            double weight = uform_anchor_weight_(band, a);
            for (size_t c = 0; c < candidates; ++c) {
                double dot = 0;
                for (size_t i = 0; i < width; ++i) dot += (double)u[a * width + i] * v[c * width + i];
                double derivative, y = band->labels[a * candidates + c] ? 1.0 : -1.0;
                loss += weight * uform_sigmoid_loss_(y, scale * dot + bias, &derivative);
                derivative *= weight / (band->normalizer * (double)widths); /* mean over the world's anchors, then over widths */
                trainer->siglip_scale->gradient[0] += (float)(derivative * scale * dot);
                trainer->siglip_bias->gradient[0] += (float)derivative;
                for (size_t i = 0; i < width; ++i) {
                    du[a * width + i] += (float)(derivative * scale * v[c * width + i]);
                    dv[c * width + i] += (float)(derivative * scale * u[a * width + i]);
                }
            }
        }
        total += loss / band->normalizer;
        for (size_t a = 0; a < anchors; ++a)
            uform_normalize_backward_(u + a * width, du + a * width, norms[a], width, band->d_anchors + band->anchors[a] * widest);
        for (size_t c = 0; c < candidates; ++c)
            uform_normalize_backward_(v + c * width, dv + c * width, norms[anchors + c], width,
                                      band->d_candidates + band->candidates[c] * widest);
    }
    return total;
}

double uform_objective_rerank(uform_trainer_t *trainer, uform_band_t const *band) {
    size_t width = trainer->model->config.colbert_width, anchors = band->anchors_count, candidates = band->candidates_count;
    double scale = exp((double)trainer->siglip_scale->parameter[0]), bias = trainer->siglip_bias->parameter[0], total = 0;
    float *similarities = trainer->attention[0].probabilities;
    size_t *best = (size_t *)trainer->attention[0].gradient; /* the best document cell of each query cell */
    for (size_t a = 0; a < anchors; ++a) {
        uform_span_t const *query = &band->spans[band->anchors[a]];
        for (size_t c = 0; c < candidates; ++c) {
            uform_span_t const *document = &band->spans[band->candidates[c]];
            uform_gemm_f32(0, 1, query->length, document->length, width, band->rows + query->start * width, width,
                           band->rows + document->start * width, width, 0.0f, similarities, document->length);
            double maxsim = 0;
            for (size_t i = 0; i < query->length; ++i) {
                size_t argmax = 0;
                for (size_t j = 1; j < document->length; ++j)
                    if (similarities[i * document->length + j] > similarities[i * document->length + argmax]) argmax = j;
                best[i] = argmax;
                maxsim += similarities[i * document->length + argmax];
            }
            double derivative, y = band->labels[a * candidates + c] ? 1.0 : -1.0;
            double cells = (double)query->length, weight = uform_anchor_weight_(band, a);
            total += weight * uform_sigmoid_loss_(y, scale * maxsim / cells + bias, &derivative);
            derivative *= weight / band->normalizer;
            trainer->siglip_scale->gradient[0] += (float)(derivative * scale * maxsim / cells);
            trainer->siglip_bias->gradient[0] += (float)derivative;
            float g = (float)(derivative * scale / cells);
            for (size_t i = 0; i < query->length; ++i) {
                float const *q = band->rows + (query->start + i) * width;
                float const *dcell = band->rows + (document->start + best[i]) * width;
                float *dq = band->d_anchors + (query->start + i) * width;
                float *dd = band->d_candidates + (document->start + best[i]) * width;
                for (size_t k = 0; k < width; ++k) {
                    dq[k] += g * dcell[k];
                    dd[k] += g * q[k];
                }
            }
        }
    }
    return total / band->normalizer;
}

/* Z for one rank's segments: normalize(e_s) at the full width, and the norms. */
static void uform_rank_rows_(float const *embeddings, size_t count, size_t width, float *z, double *norms) {
    for (size_t s = 0; s < count; ++s) norms[s] = uform_normalized_prefix_(embeddings + s * width, width, z + s * width);
}

/* Z^T Z in double. */
static void uform_gram_(float const *z, size_t count, size_t width, double *gram) {
    memset(gram, 0, width * width * sizeof(double));
    for (size_t s = 0; s < count; ++s)
        for (size_t i = 0; i < width; ++i) {
            double zi = z[s * width + i];
            for (size_t j = 0; j < width; ++j) gram[i * width + j] += zi * z[s * width + j];
        }
}

/* Lipschitz's power iteration on S = gram / count into `vector`; returns sigma = v^T S v. */
static double uform_power_(double const *gram, size_t width, size_t count, size_t iterations, double *vector, double *product) {
    for (size_t i = 0; i < width; ++i) vector[i] = 1.0 / sqrt((double)width);
    for (size_t step = 0; step < iterations; ++step) {
        double norm = 0;
        for (size_t i = 0; i < width; ++i) {
            product[i] = 0;
            for (size_t j = 0; j < width; ++j) product[i] += gram[i * width + j] * vector[j] / (double)count;
            norm += product[i] * product[i];
        }
        norm = sqrt(norm);
        for (size_t i = 0; i < width; ++i) vector[i] = norm > 0 ? product[i] / norm : 0;
    }
    double sigma = 0;
    for (size_t i = 0; i < width; ++i)
        for (size_t j = 0; j < width; ++j) sigma += vector[i] * gram[i * width + j] * vector[j] / (double)count;
    return sigma;
}

uform_status_t uform_objective_spectral(uform_trainer_t *trainer, uform_world_t *world, uform_losses_t *losses) {
    size_t width = trainer->pool_proj->rows, ranks = world->ranks, count = world->segment_offsets[ranks];
    double lambda_tcr = trainer->options.tcr_lambda, lambda_lipschitz = trainer->options.lipschitz_lambda;
    float *z = world->scratch, *dz = z + world->most_segments * width;
    double *norms = world->norms, *gram = world->spectral, *local = gram + width * width, *product = local + width * width;
    double *vectors = product + width; /* [ranks][width]: each rank's power vector */
    /* Each rank's Gram: Lipschitz's on its own, TCR's summed over the world (the Gram's all-reduce). */
    memset(gram, 0, width * width * sizeof(double));
    double sigmas = 0;
    for (size_t r = 0; r < ranks; ++r) {
        size_t first = world->segment_offsets[r], rows = world->segment_offsets[r + 1] - first;
        uform_rank_rows_(world->embeddings + first * width, rows, width, z, norms);
        uform_gram_(z, rows, width, local);
        if (lambda_lipschitz > 0)
            sigmas += uform_power_(local, width, rows, trainer->options.lipschitz_iterations, vectors + r * width, product);
        if (lambda_tcr > 0)
            for (size_t i = 0; i < width * width; ++i) gram[i] += local[i];
    }
    losses->lipschitz = lambda_lipschitz * sigmas / (double)ranks;
    double alpha = (double)width / ((double)count * 0.5); /* m / (N eps^2), eps^2 = 0.5, N the world's segments */
    if (lambda_tcr > 0) {
        for (size_t i = 0; i < width * width; ++i) gram[i] *= alpha;
        for (size_t i = 0; i < width; ++i) gram[i * width + i] += 1.0;
        int n = (int)width, info = 0;
        dpotrf_("L", &n, gram, &n, &info);
        if (info != 0) return uform_fail(uform_format_k, "total coding rate: Cholesky failed (info %d)", info);
        double log_determinant = 0;
        for (size_t i = 0; i < width; ++i) log_determinant += 2.0 * log(gram[i * width + i]);
        dpotri_("L", &n, gram, &n, &info);
        if (info != 0) return uform_fail(uform_format_k, "total coding rate: inverse failed (info %d)", info);
        /* LAPACK filled one triangle (column-major "L" is the row-major upper one): mirror it. */
        for (size_t i = 0; i < width; ++i)
            for (size_t j = 0; j < i; ++j) gram[i * width + j] = gram[j * width + i];
        losses->tcr = -lambda_tcr * 0.5 * log_determinant;
    }
    /* Each rank's rows take Lipschitz's gradient of its own penalty (a mean over the ranks) and TCR's. */
    for (size_t r = 0; r < ranks; ++r) {
        size_t first = world->segment_offsets[r], rows = world->segment_offsets[r + 1] - first;
        uform_rank_rows_(world->embeddings + first * width, rows, width, z, norms);
        memset(dz, 0, rows * width * sizeof(float));
        double const *vector = vectors + r * width;
        for (size_t s = 0; lambda_lipschitz > 0 && s < rows; ++s) {
            double projection = 0;
            for (size_t i = 0; i < width; ++i) projection += z[s * width + i] * vector[i];
            for (size_t i = 0; i < width; ++i)
                dz[s * width + i] += (float)(lambda_lipschitz / (double)ranks * 2.0 / (double)rows * projection * vector[i]);
        }
        for (size_t s = 0; lambda_tcr > 0 && s < rows; ++s)
            for (size_t j = 0; j < width; ++j) {
                double sum = 0;
                for (size_t i = 0; i < width; ++i) sum += z[s * width + i] * gram[i * width + j];
                dz[s * width + j] += (float)(-lambda_tcr * alpha * sum);
            }
        for (size_t s = 0; s < rows; ++s)
            uform_normalize_backward_(z + s * width, dz + s * width, norms[s], width, world->d_embeddings + (first + s) * width);
    }
    return uform_ok_k;
}
