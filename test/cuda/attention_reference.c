/*  attention_reference.c: the float64 reference of attention within segments and the bounds of
 *  the contract suite's derivation (below), on host arrays: the kernels' inputs as they saw them and
 *  what they returned. Used by contract.c on the GPU's outputs and by attention_reference_test.c on
 *  an exact host computation (which must pass) and broken ones (which must not).
 *
 *  Attention within segments (heads of 64) on tensor cores. Model of a tensor-core product
 *  (as for cuBLASLt in contract.c): BF16 products exact, each accumulated term errs by one ulp,
 *  g(n) = 2 n u / (1 - 2 n u) of the sum of magnitudes; a row visits T key tiles of 64.
 *  Weights are ex2.approx (2 ulp, 4u) of base-2 arguments: scaling by 0.125 log2(e) (itself
 *  rounded), the subtraction and each rescale err by u of |argument|, so with S the largest
 *  |score| of the row a weight carries an extra (6 + 2T) u S relative.
 *  Forward: a score within ds = g(64) sum |q k| / 8; each weight p = exp(s - m) carries
 *  a = ds + (5T + 6) u + (6 + 2T) u S (one rescale and product per tile); the weights enter P V
 *  rounded to BF16 (2^-8), the numerator accumulates L + 4T terms, the Float32 row sum
 *  16T + 2 serial terms, so |O - O*| <= 2^-8 |O*| + (1 + 2^-8) E, with
 *  E = (2^-8 + 2 a_max + g(L + 4T) + (17T + 3) u) sum_j w_j |v_j|;
 *  |lse - lse*| <= 2 ds_max + (22T + 8) u + 2 u (|lse*| + |log l*|) + 3 u S (the return to base e).
 *  Backward, given the forward's O and lse: p = exp(s/8 - lse) within
 *  e_p = ds + 6u + 3u (|s/8| + |lse|) (the argument's three roundings, ex2, the product);
 *  dP = dO.v within g(64) sum |dO v|; D = dO.O (serial) within 66 u sum |dO O|; dS = p (dP - D) / 8
 *  within E = p (e_p + 2u) |dP - D| / 8 + p (1 + e_p) (g(64) sum |dO v| + 66 u sum |dO O|) / 8, and
 *  rounded to BF16 before its product: |dq - dq*| <= sum_j (E_j + 2^-8 (|dS_j| + E_j)) |k_j|
 *  + g(L + 4T) sum_j (|dS_j| + E_j) |k_j|, then 2^-8 for the stored result (dk alike over
 *  queries); |dv - dv*| <= sum_i p_i (e_p + 2^-8 (1 + e_p) + g(L + 4T) (1 + e_p)(1 + 2^-8)) |dO_i|,
 *  then the store. */
#include "attention_reference.h"

#include <math.h>
#include <stdlib.h>

#include "contract_host.h"

static double q_(attention_view_t const *a, size_t c, size_t h, size_t d) { return bf16_to_f32_(a->qkv[c * 3 * a->width + h * 64 + d]); }
static double k_(attention_view_t const *a, size_t c, size_t h, size_t d) { return bf16_to_f32_(a->qkv[c * 3 * a->width + a->width + h * 64 + d]); }
static double v_(attention_view_t const *a, size_t c, size_t h, size_t d) { return bf16_to_f32_(a->qkv[c * 3 * a->width + 2 * a->width + h * 64 + d]); }
static double g_(attention_view_t const *a, size_t c, size_t h, size_t d) { return bf16_to_f32_(a->d_out[c * a->width + h * 64 + d]); }
static double o_(attention_view_t const *a, size_t c, size_t h, size_t d) { return bf16_to_f32_(a->out[c * a->width + h * 64 + d]); }

/* The forward of query i (head h) over keys [first, first + length), a row visiting `tiles` tiles:
 * lse and o against their bounds above, folded into `worst`; `score` holds `length` doubles. */
static void attention_query_forward_(attention_view_t const *a, size_t i, size_t h, size_t first, size_t length,
                                     double tiles, double *score, double *worst) {
    double largest = -INFINITY, total = 0, ds = 0, biggest = 0, g64 = tensor_gamma_(64);
    double g_long = tensor_gamma_((double)length + 4 * tiles);
    for (size_t j = 0; j < length; ++j) {
        double dot = 0, magnitude = 0;
        for (size_t d = 0; d < 64; ++d) dot += q_(a, i, h, d) * k_(a, first + j, h, d), magnitude += fabs(q_(a, i, h, d) * k_(a, first + j, h, d));
        score[j] = dot / 8;
        largest = fmax(largest, score[j]), ds = fmax(ds, g64 * magnitude / 8), biggest = fmax(biggest, fabs(score[j]));
    }
    for (size_t j = 0; j < length; ++j) total += exp(score[j] - largest);
    double log_sum = largest + log(total), a_max = ds + (5 * tiles + 6) * unit_ + (6 + 2 * tiles) * unit_ * biggest;
    double e = bf16_unit_ + 2 * a_max + g_long + (17 * tiles + 3) * unit_;
    compare_(worst, a->lse[i * a->heads + h], log_sum,
             2 * ds + (22 * tiles + 8) * unit_ + 2 * unit_ * (fabs(log_sum) + fabs(log(total))) + 3 * unit_ * biggest);
    for (size_t d = 0; d < 64; ++d) {
        double o = 0, weighted = 0;
        for (size_t j = 0; j < length; ++j) {
            double w = exp(score[j] - log_sum);
            o += w * v_(a, first + j, h, d), weighted += w * fabs(v_(a, first + j, h, d));
        }
        compare_(worst, o_(a, i, h, d), o, bf16_unit_ * fabs(o) + (1 + bf16_unit_) * e * weighted + 1e-300);
    }
}

/* D = dO . O of row i, head h, from the kernel's own O, and the magnitude its serial sum errs by. */
static void attention_delta_(attention_view_t const *a, size_t i, size_t h, double *delta, double *magnitude) {
    *delta = 0, *magnitude = 0;
    for (size_t d = 0; d < 64; ++d) *delta += g_(a, i, h, d) * o_(a, i, h, d), *magnitude += fabs(g_(a, i, h, d) * o_(a, i, h, d));
}

/* One (query i, key j) pair of the backward, from the kernel's lse: its weight p (within e_p),
 * dS and the error dS carries into dq and dk (the derivation above). */
typedef struct attention_pair_t {
    double p, e_p, d_score, carried;
} attention_pair_t;

static attention_pair_t attention_pair_(attention_view_t const *a, size_t i, size_t j, size_t h, double delta,
                                        double delta_magnitude, double g_long) {
    double dot = 0, magnitude = 0, dp = 0, dp_magnitude = 0, l = a->lse[i * a->heads + h], g64 = tensor_gamma_(64);
    for (size_t d = 0; d < 64; ++d) {
        dot += q_(a, i, h, d) * k_(a, j, h, d), magnitude += fabs(q_(a, i, h, d) * k_(a, j, h, d));
        dp += g_(a, i, h, d) * v_(a, j, h, d), dp_magnitude += fabs(g_(a, i, h, d) * v_(a, j, h, d));
    }
    attention_pair_t pair;
    pair.p = exp(dot / 8 - l);
    pair.e_p = g64 * magnitude / 8 + 6 * unit_ + 3 * unit_ * (fabs(dot / 8) + fabs(l));
    pair.d_score = pair.p * (dp - delta) / 8;
    double error = pair.p * (pair.e_p + 2 * unit_) * fabs(dp - delta) / 8 +
                   pair.p * (1 + pair.e_p) * (g64 * dp_magnitude + 66 * unit_ * delta_magnitude) / 8;
    pair.carried = error + bf16_unit_ * (fabs(pair.d_score) + error) + g_long * (fabs(pair.d_score) + error);
    return pair;
}

/* dv's bound per unit |dO_i| of one pair. */
static double attention_dv_error_(attention_pair_t const *pair, double g_long) {
    return pair->p * (pair->e_p + bf16_unit_ * (1 + pair->e_p) + g_long * (1 + pair->e_p) * (1 + bf16_unit_));
}

/* A stored gradient against its sum and the sum's bound, then the store's own rounding. */
static void attention_compare_(double *worst, uint16_t got, double value, double bound) {
    compare_(worst, bf16_to_f32_(got), value, bound + bf16_unit_ * (fabs(value) + bound) + 1e-300);
}

void attention_check_full(attention_view_t const *a, uint32_t const *spans, size_t segments, double tiles,
                          int forward_only, double *worst_forward, double *worst_backward) {
    size_t heads = a->heads, width = a->width, stride = 3 * width, longest = 0;
    uint16_t const *d_qkv = a->d_qkv;
    for (size_t s = 0; s < segments; ++s) longest = spans[2 * s + 1] > longest ? spans[2 * s + 1] : longest;
    double *score = malloc(longest * 8);
    for (size_t s = 0; s < segments; ++s) {
        size_t first = spans[2 * s], length = spans[2 * s + 1];
        double g_long = tensor_gamma_((double)length + 4 * tiles);
        for (size_t h = 0; h < heads; ++h)
            for (size_t i = first; i < first + length; ++i) attention_query_forward_(a, i, h, first, length, tiles, score, worst_forward);
        if (forward_only) continue;
        /* Backward, from the kernel's own O and lse: each (query i, key j) pair once, both sides. */
        double *dq = calloc(length * heads * 64, 8), *dq_bound = calloc(length * heads * 64, 8);
        double *dk = calloc(length * heads * 64, 8), *dk_bound = calloc(length * heads * 64, 8);
        double *dv = calloc(length * heads * 64, 8), *dv_bound = calloc(length * heads * 64, 8);
        for (size_t h = 0; h < heads; ++h)
            for (size_t i = first; i < first + length; ++i) {
                double delta, delta_magnitude;
                attention_delta_(a, i, h, &delta, &delta_magnitude);
                for (size_t j = first; j < first + length; ++j) {
                    attention_pair_t pair = attention_pair_(a, i, j, h, delta, delta_magnitude, g_long);
                    double dv_error = attention_dv_error_(&pair, g_long);
                    size_t qi = ((i - first) * heads + h) * 64, kj = ((j - first) * heads + h) * 64;
                    for (size_t d = 0; d < 64; ++d) {
                        dq[qi + d] += pair.d_score * k_(a, j, h, d), dq_bound[qi + d] += pair.carried * fabs(k_(a, j, h, d));
                        dk[kj + d] += pair.d_score * q_(a, i, h, d), dk_bound[kj + d] += pair.carried * fabs(q_(a, i, h, d));
                        dv[kj + d] += pair.p * g_(a, i, h, d), dv_bound[kj + d] += dv_error * fabs(g_(a, i, h, d));
                    }
                }
            }
        for (size_t h = 0; h < heads; ++h)
            for (size_t c = first; c < first + length; ++c)
                for (size_t d = 0; d < 64; ++d) {
                    size_t x = ((c - first) * heads + h) * 64 + d;
                    double const *values[3] = {dq, dk, dv}, *bounds[3] = {dq_bound, dk_bound, dv_bound};
                    for (size_t part = 0; part < 3; ++part)
                        attention_compare_(worst_backward, d_qkv[c * stride + part * width + h * 64 + d], values[part][x],
                                           bounds[part][x]);
                }
        free(dq), free(dq_bound), free(dk), free(dk_bound), free(dv), free(dv_bound);
    }
    free(score);
}

/* The sampled check, for shapes whose whole reference is out of reach (16 segments of 4096 cells
 * and 8 heads: about 1e14 products): per segment and head, 4 query rows (first, middle, last, one
 * drawn) forward and for dq over all the segment's keys, and 4 key rows for dk and dv over all its
 * queries, with the bounds above (T = length / 64 + 1 tiles); and every output must be finite (the
 * suite starts outputs as NaN, so a row a kernel skips is caught). */
static size_t shape_sample_(size_t k, size_t length) { /* the k-th of a segment's 4 sampled rows */
    size_t fixed[3] = {0, length / 2, length - 1};
    return k < 3 ? fixed[k] : (size_t)((uniform_() + 1) * 0.5 * (double)(length - 1));
}

double attention_check_sampled(attention_view_t const *a, size_t segments, size_t length) {
    size_t heads = a->heads, width = a->width, stride = 3 * width, cells = segments * length;
    double tiles = (double)(length / 64 + 1), g_long = tensor_gamma_((double)length + 4 * tiles);
    uint16_t const *out = a->out, *d_qkv = a->d_qkv;
    double worst = 0;
    for (size_t i = 0; i < cells * width; ++i)
        if (!isfinite(bf16_to_f32_(out[i]))) worst = INFINITY;
    for (size_t i = 0; i < cells * stride; ++i)
        if (!isfinite(bf16_to_f32_(d_qkv[i]))) worst = INFINITY;
    double *score = malloc(length * 8), *deltas = malloc(length * 8), *magnitudes = malloc(length * 8);
    for (size_t s = 0; s < segments; ++s)
        for (size_t h = 0; h < heads; ++h) {
            size_t first = s * length;
            for (size_t i = 0; i < length; ++i) attention_delta_(a, first + i, h, &deltas[i], &magnitudes[i]);
            for (size_t k = 0; k < 4; ++k) {
                size_t i = first + shape_sample_(k, length), j = first + shape_sample_(k, length);
                attention_query_forward_(a, i, h, first, length, tiles, score, &worst);
                double dq[64] = {0}, dq_bound[64] = {0}, dk[64] = {0}, dk_bound[64] = {0}, dv[64] = {0}, dv_bound[64] = {0};
                for (size_t t = first; t < first + length; ++t) {
                    attention_pair_t as_query = attention_pair_(a, i, t, h, deltas[i - first], magnitudes[i - first], g_long);
                    attention_pair_t as_key = attention_pair_(a, t, j, h, deltas[t - first], magnitudes[t - first], g_long);
                    double dv_error = attention_dv_error_(&as_key, g_long);
                    for (size_t d = 0; d < 64; ++d) {
                        dq[d] += as_query.d_score * k_(a, t, h, d), dq_bound[d] += as_query.carried * fabs(k_(a, t, h, d));
                        dk[d] += as_key.d_score * q_(a, t, h, d), dk_bound[d] += as_key.carried * fabs(q_(a, t, h, d));
                        dv[d] += as_key.p * g_(a, t, h, d), dv_bound[d] += dv_error * fabs(g_(a, t, h, d));
                    }
                }
                for (size_t d = 0; d < 64; ++d) {
                    attention_compare_(&worst, d_qkv[i * stride + h * 64 + d], dq[d], dq_bound[d]);
                    attention_compare_(&worst, d_qkv[j * stride + width + h * 64 + d], dk[d], dk_bound[d]);
                    attention_compare_(&worst, d_qkv[j * stride + 2 * width + h * 64 + d], dv[d], dv_bound[d]);
                }
            }
        }
    free(score), free(deltas), free(magnitudes);
    return worst;
}
