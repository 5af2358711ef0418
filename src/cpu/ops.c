/*  ops.c: RMSNorm, M-RoPE and softmax rows in Float32. */
#include "cpu/ops.h"

#include <math.h>

float uform_rmsnorm(float const *x, float const *gain, float *y, size_t width) {
    double partial[8] = {0}, squares = 0; /* eight sums in flight, not one chain of dependent adds */
    size_t i = 0;
    for (; i + 8 <= width; i += 8)
        for (size_t lane = 0; lane < 8; ++lane) partial[lane] += (double)x[i + lane] * x[i + lane];
    for (; i < width; ++i) partial[0] += (double)x[i] * x[i];
    for (size_t lane = 0; lane < 8; ++lane) squares += partial[lane];
    float scale = (float)(1.0 / sqrt(squares / (double)width + 1e-6));
    for (i = 0; i < width; ++i) y[i] = x[i] * scale * gain[i];
    return scale;
}

void uform_rope(uform_model_t const *model, int32_t const *position, float *q, float *k, int direction) {
    float cosines[uform_rope_slots_k], sines[uform_rope_slots_k];
    for (size_t j = 0; j < uform_rope_slots_k; ++j) {
#if defined(UFORM_PLANT_ROPE_AXIS)
        int32_t coordinate = position[j < 8 ? 0 : j < 20 ? 2 : 1]; /* planted: h and w swapped */
#else
        int32_t coordinate = position[j < 8 ? 0 : j < 20 ? 1 : 2];
#endif
        if (coordinate >= 0 && coordinate < uform_rope_table_k) {
            cosines[j] = model->rope_cos[(size_t)coordinate * uform_rope_slots_k + j];
            sines[j] = model->rope_sin[(size_t)coordinate * uform_rope_slots_k + j];
        } else {
            double angle = (double)coordinate * pow(10000.0, -(double)j / 32.0);
            cosines[j] = (float)cos(angle);
            sines[j] = (float)sin(angle);
        }
        sines[j] *= (float)direction;
    }
    for (size_t head = 0; head < model->config.heads; ++head) {
        float *vectors[2] = {q + head * uform_head_width_k, k + head * uform_head_width_k};
        for (size_t v = 0; v < 2; ++v)
            for (size_t j = 0; j < uform_rope_slots_k; ++j) {
                float first = vectors[v][j], second = vectors[v][j + 32];
                vectors[v][j] = first * cosines[j] - second * sines[j];
                vectors[v][j + 32] = second * cosines[j] + first * sines[j];
            }
    }
}

void uform_softmax_rows(float *scores, size_t rows, size_t columns, size_t stride) {
    for (size_t r = 0; r < rows; ++r) {
        float *row = scores + r * stride, largest = -INFINITY, sum = 0;
        for (size_t j = 0; j < columns; ++j) largest = row[j] > largest ? row[j] : largest;
        for (size_t j = 0; j < columns; ++j) sum += (row[j] = expf(row[j] - largest));
        for (size_t j = 0; j < columns; ++j) row[j] /= sum;
    }
}
