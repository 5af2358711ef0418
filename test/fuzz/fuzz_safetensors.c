/*  fuzz_safetensors.c: a libFuzzer harness over uform_safetensors_parse, the SafeTensors reader's
 *  in-memory entry point. A file the reader accepts must have every tensor's data inside its data
 *  section, no two tensors overlapping, a rank within the limit and exactly the bytes its shape and
 *  dtype need, counted without overflow. test/fuzz/run.sh builds and runs it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/safetensors.h"

static int uform_compare_starts_(void const *a, void const *b) {
    size_t const x = *(size_t const *)a, y = *(size_t const *)b;
    return x < y ? -1 : x > y;
}

/* Writes the bytes a tensor's shape and dtype need to *bytes; returns 0 where that count overflows a size_t. */
static int uform_needed_bytes_(uform_tensor_view_t const *tensor, size_t *bytes) {
    *bytes = 0;
    for (size_t i = 0; i < tensor->rank; ++i)
        if (!tensor->shape[i]) return 1; /* an empty extent empties the tensor, however large the others */
    size_t product = uform_dtype_size(tensor->dtype);
    for (size_t i = 0; i < tensor->rank; ++i)
        if (__builtin_mul_overflow(product, tensor->shape[i], &product)) return 0;
    *bytes = product;
    return 1;
}

int LLVMFuzzerTestOneInput(uint8_t const *data, size_t size);

int LLVMFuzzerTestOneInput(uint8_t const *data, size_t size) {
    uform_safetensors_t file;
    if (uform_safetensors_parse("fuzz.safetensors", data, size, &file) != uform_ok_k) {
        if (file.tensors || file.metadata || file.count) abort(); /* a failure leaves nothing to close */
        return 0;
    }
    if (file.map || size < 8) abort(); /* the caller's buffer is never owned, so close cannot unmap it */
    uint64_t header_bytes = 0;
    for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | data[i];
    size_t const data_start = 8 + (size_t)header_bytes;
    if (data_start > size) abort();
    size_t *spans = malloc((file.count ? file.count : 1) * 2 * sizeof(size_t));
    if (!spans) abort();
    for (size_t t = 0; t < file.count; ++t) {
        uform_tensor_view_t const *tensor = &file.tensors[t];
        if (!memchr(tensor->name, 0, sizeof(tensor->name)) || !strcmp(tensor->name, "__metadata__")) abort();
        if (tensor->dtype != uform_dtype_bf16_k && tensor->dtype != uform_dtype_f32_k) abort();
        if (tensor->rank > uform_max_rank_k) abort();
        size_t needed;
        if (!uform_needed_bytes_(tensor, &needed) || needed != tensor->bytes) abort();
        uint8_t const *begin = tensor->data;
        if (begin < data + data_start || begin > data + size) abort();
        size_t const offset = (size_t)(begin - data);
        if (tensor->bytes > size - offset) abort();
        if (uform_safetensors_find(&file, tensor->name) != tensor) abort(); /* names are unique */
        spans[2 * t] = offset;
        spans[2 * t + 1] = offset + tensor->bytes;
    }
    qsort(spans, file.count, 2 * sizeof(size_t), uform_compare_starts_);
    for (size_t t = 1; t < file.count; ++t)
        if (spans[2 * t - 1] > spans[2 * t]) abort();
    free(spans);
    if (file.metadata) {
        char const *key;
        json_t *value;
        if (!json_is_object(file.metadata)) abort();
        json_object_foreach(file.metadata, key, value) if (!json_is_string(value)) abort();
    }
    uform_safetensors_close(&file);
    return 0;
}
