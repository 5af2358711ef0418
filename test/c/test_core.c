/*  test_core.c: the core pieces against hand-checkable facts: BF16 rounding, the arena, the
 *  thread pool, the RNG, tier configurations and a SafeTensors round trip. Prints
 *  "N passed, M failed" and exits non-zero on any failure. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/arena.h"
#include "core/numeric.h"
#include "core/threads.h"
#include "model/safetensors.h"
#include "model/tensors.h"
#include "uform/uform.h"
#include "check.h"


static float from_bits(uint32_t bits) {
    float value;
    memcpy(&value, &bits, 4);
    return value;
}

static void test_bf16(void) {
    CHECK(uform_f32_to_bf16(1.0f) == 0x3f80);
    /* 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1.0). */
    CHECK(uform_f32_to_bf16(from_bits(0x3f808000u)) == 0x3f80);
    /* 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6: rounds up to even. */
    CHECK(uform_f32_to_bf16(from_bits(0x3f818000u)) == 0x3f82);
    CHECK(uform_f32_to_bf16(from_bits(0x3f808001u)) == 0x3f81); /* just above half: up */
    CHECK(uform_f32_to_bf16(INFINITY) == 0x7f80);
    CHECK(uform_f32_to_bf16(-INFINITY) == 0xff80);
    CHECK(isnan(uform_bf16_to_f32(uform_f32_to_bf16(NAN))));
    CHECK(uform_f32_to_bf16(from_bits(0x7f7fffffu)) == 0x7f80); /* FLT_MAX rounds to infinity */
    /* Every BF16 value survives a round trip exactly. */
    int exact = 1;
    for (uint32_t bits = 0; bits < 65536; ++bits) {
        float value = uform_bf16_to_f32((uint16_t)bits);
        if (!isnan(value) && uform_f32_to_bf16(value) != bits) exact = 0;
    }
    CHECK(exact);
}

static void test_arena(void) {
    uform_arena_t arena;
    CHECK(uform_arena_create(&arena, 1000) == uform_ok_k);
    void *a = uform_arena_take(&arena, 10), *b = uform_arena_take(&arena, 100);
    CHECK(a && b && ((uintptr_t)a % 64) == 0 && ((uintptr_t)b % 64) == 0 && (char *)b - (char *)a == 64);
    CHECK(uform_arena_take(&arena, 100000) == NULL);
    uform_arena_reset(&arena);
    CHECK(uform_arena_take(&arena, 10) == a);
    uform_arena_destroy(&arena);
}

typedef struct {
    atomic_int hits[1000];
    atomic_int bad_thread;
    size_t threads;
} pool_check_t;

static void pool_task(void *context, size_t index, size_t thread) {
    pool_check_t *check = context;
    atomic_fetch_add(&check->hits[index], 1);
    if (thread >= check->threads) atomic_store(&check->bad_thread, 1);
}

static void test_pool(void) {
    for (size_t threads = 1; threads <= 4; ++threads) {
        uform_pool_t *pool;
        CHECK(uform_pool_create(threads, &pool) == uform_ok_k);
        pool_check_t *check = calloc(1, sizeof(*check));
        check->threads = threads;
        for (int round = 0; round < 3; ++round) uform_pool_for(pool, 1000, pool_task, check);
        int every_three = 1;
        for (int i = 0; i < 1000; ++i) every_three &= atomic_load(&check->hits[i]) == 3;
        CHECK(every_three);
        CHECK(!atomic_load(&check->bad_thread));
        free(check);
        uform_pool_destroy(pool);
    }
}

static void test_rng(void) {
    uform_rng_t a = {42}, b = {42}, c = {43};
    CHECK(uform_rng_next(&a) == uform_rng_next(&b));
    CHECK(uform_rng_next(&a) != uform_rng_next(&c));
    /* Mean and variance of 20000 normals within 5 standard errors of 0 and 1. */
    uform_rng_t rng = {7};
    double sum = 0, squares = 0;
    for (int i = 0; i < 20000; ++i) {
        double x = uform_rng_normal(&rng);
        sum += x, squares += x * x;
    }
    CHECK(fabs(sum / 20000) < 5 / sqrt(20000.0));
    CHECK(fabs(squares / 20000 - 1) < 5 * sqrt(2.0 / 20000));
}

static void test_tiers(void) {
    uform_config_t config;
    /* SPEC.md section 6: parameter counts within 2% of the table. */
    struct { char const *tier; double parameters; } const table[] = {
        {"tiny", 51e6}, {"small", 204e6}, {"medium", 405e6}, {"large", 1.6e9}, {"xl", 3.2e9}};
    for (size_t i = 0; i < 5; ++i) {
        CHECK(uform_config_from_tier(table[i].tier, &config) == uform_ok_k);
        CHECK(fabs((double)uform_config_parameters(&config) / table[i].parameters - 1) < 0.02);
    }
    CHECK(uform_config_from_tier("tiny", &config) == uform_ok_k && config.embedding_widths_count == 4 &&
          config.embedding_widths[3] == 512 && config.heads == 8);
    CHECK(uform_config_from_tier("128x2", &config) == uform_ok_k && config.width == 128 && config.depth == 2);
    CHECK(uform_config_from_tier("100x2", &config) == uform_invalid_argument_k);
    CHECK(uform_config_from_tier("huge", &config) == uform_invalid_argument_k && strstr(uform_last_error(), "huge"));
}

static void test_safetensors(void) {
    char path[] = "/tmp/uform_test_core_XXXXXX";
    int descriptor = mkstemp(path);
    CHECK(descriptor >= 0);
    close(descriptor);
    uint16_t matrix[6] = {1, 2, 3, 4, 5, 6};
    float vector[3] = {1.5f, -2.0f, 0.25f};
    uform_tensor_view_t views[2] = {
        {.name = "a", .dtype = uform_dtype_bf16_k, .rank = 2, .shape = {2, 3}, .data = matrix, .bytes = sizeof(matrix)},
        {.name = "b", .dtype = uform_dtype_f32_k, .rank = 1, .shape = {3}, .data = vector, .bytes = sizeof(vector)},
    };
    json_t *metadata = json_pack("{s:s}", "config", "{}");
    CHECK(uform_safetensors_write(path, views, 2, metadata) == uform_ok_k);
    json_decref(metadata);
    uform_safetensors_t file;
    CHECK(uform_safetensors_open(path, &file) == uform_ok_k);
    uform_tensor_view_t const *a = uform_safetensors_find(&file, "a"), *b = uform_safetensors_find(&file, "b");
    CHECK(a && a->shape[1] == 3 && !memcmp(a->data, matrix, sizeof(matrix)));
    CHECK(b && b->dtype == uform_dtype_f32_k && !memcmp(b->data, vector, sizeof(vector)));
    CHECK(((uintptr_t)a->data - (uintptr_t)file.map) % 8 == 0); /* data section starts 8-aligned */
    uform_safetensors_close(&file);
    /* A copy cut one byte short must be refused with the path in the message. */
    FILE *stream = fopen(path, "rb");
    fseek(stream, 0, SEEK_END);
    long size = ftell(stream);
    rewind(stream);
    char *bytes = malloc((size_t)size);
    CHECK(fread(bytes, 1, (size_t)size, stream) == (size_t)size);
    fclose(stream);
    /* The same bytes parse from memory, which the file then does not own. */
    CHECK(uform_safetensors_parse("memory", bytes, (size_t)size, &file) == uform_ok_k && !file.map && file.count == 2);
    CHECK(uform_safetensors_find(&file, "b") && uform_safetensors_find(&file, "b")->data == bytes + size - sizeof(vector));
    uform_safetensors_close(&file);
    /* Four extents of 2^40 multiply to 2^160, which a 64-bit count wraps to 0: it must not pass for 0 bytes. */
    static char const wrapped[] = "l\0\0\0\0\0\0\0{\"w\":{\"dtype\":\"F32\",\"shape\":[1099511627776,1099511627776,"
                                  "1099511627776,1099511627776],\"data_offsets\":[0,0]}}";
    CHECK(uform_safetensors_parse("wrapped", wrapped, sizeof(wrapped) - 1, &file) == uform_format_k &&
          strstr(uform_last_error(), "more bytes than memory holds"));
    stream = fopen(path, "wb");
    fwrite(bytes, 1, (size_t)size - 1, stream);
    fclose(stream);
    CHECK(uform_safetensors_open(path, &file) == uform_format_k && strstr(uform_last_error(), path));
    free(bytes);
    unlink(path);
}

/* The parameter table against SPEC.md sections 1, 3 and 7, written out by hand here. */
static void test_tensor_table(void) {
    uform_config_t config;
    CHECK(uform_config_from_tier("128x2", &config) == uform_ok_k);
    char const *expected[] = {"embed.bytes", "vision.patch", "vision.bias", "video.tube", "video.bias", "audio.frame",
                              "audio.bias", "blocks.0.attn_norm", "blocks.0.qkv", "blocks.0.out", "blocks.0.mlp_norm",
                              "blocks.0.gate_up", "blocks.0.down", "blocks.1.attn_norm", "blocks.1.qkv", "blocks.1.out",
                              "blocks.1.mlp_norm", "blocks.1.gate_up", "blocks.1.down", "final_norm", "pool.query",
                              "pool.proj", "rerank.proj", "mlm.head", "siglip.scale", "siglip.bias", "mae.head",
                              "mae.bias", "mae_audio.head", "mae_audio.bias", "mae_video.head", "mae_video.bias"};
    size_t const d = 128, shapes[][3] = {/* rows, columns, rank */
        {258, d, 2}, {d, 1024, 2}, {d, 1, 1}, {d, 1536, 2}, {d, 1, 1}, {d, 320, 2}, {d, 1, 1},
        {d, 1, 1}, {3 * d, d, 2}, {d, d, 2}, {d, 1, 1}, {8 * d, d, 2}, {d, 4 * d, 2},
        {d, 1, 1}, {3 * d, d, 2}, {d, d, 2}, {d, 1, 1}, {8 * d, d, 2}, {d, 4 * d, 2},
        {d, 1, 1}, {d, 1, 1}, {128, d, 2}, {128, d, 2}, {258, d, 2}, {1, 1, 0}, {1, 1, 0}, {1024, d, 2}, {1024, 1, 1},
        {320, d, 2}, {320, 1, 1}, {1536, d, 2}, {1536, 1, 1}};
    size_t count = uform_tensor_list(&config, ~0u, NULL);
    CHECK(count == sizeof(expected) / sizeof(expected[0]) && count == uform_tensor_count(&config));
    uform_tensor_info_t tensors[40];
    uform_tensor_list(&config, ~0u, tensors);
    for (size_t i = 0; i < count && i < 40; ++i) {
        CHECK(!strcmp(tensors[i].name, expected[i]));
        CHECK(tensors[i].rows == shapes[i][0] && tensors[i].columns == shapes[i][1] && tensors[i].rank == shapes[i][2]);
        CHECK(tensors[i].matrix == (shapes[i][2] == 2));
        CHECK(uform_tensor_index(&config, tensors[i].kind, tensors[i].block) == i);
        for (size_t j = 0; j < i; ++j) /* every normal tensor draws from a stream of its own */
            if (tensors[i].init != uform_init_constant_k && tensors[j].init != uform_init_constant_k)
                CHECK(tensors[i].stream != tensors[j].stream);
    }
    /* The parameters SPEC.md counts, by hand: per block qkv 3d^2, out d^2, gate_up 8d^2, down 4d^2 and two
     * norms; final_norm; embed.bytes 258 d; pool.query d and pool.proj E d. */
    unsigned counted = UFORM_PART(uform_part_bytes_k) | UFORM_PART(uform_part_encoder_k) | UFORM_PART(uform_part_pool_k);
    size_t listed = uform_tensor_list(&config, counted, tensors), elements = 0, by_hand = 2 * (16 * d * d + 2 * d) + d + 258 * d + d + 128 * d;
    for (size_t i = 0; i < listed; ++i) elements += tensors[i].rows * tensors[i].columns;
    CHECK(elements == by_hand && uform_config_parameters(&config) == by_hand);
    CHECK(uform_parts_elements(&config, UFORM_PART(uform_part_vision_k)) == d * 1024 + d);
    CHECK(uform_part_from_name("vision") == uform_part_vision_k && uform_part_from_name("bogus") == uform_parts_k);
    CHECK(uform_part_of_cell(uform_cell_audio_k) == uform_part_audio_k && uform_part_of_cell(uform_cell_padding_k) == uform_parts_k);
}

/* A frontend attached by name saves and reopens; a checkpoint holding half of it is refused by name. */
static void test_frontend_checkpoint(void) {
    if (!scratch_open("uform_test_frontend")) return;
    uform_config_t config;
    uform_model_t *model = NULL, *opened = NULL;
    CHECK(uform_config_from_tier("64x1", &config) == uform_ok_k && uform_model_init(&config, 3, &model) == uform_ok_k);
    CHECK(!uform_model_has_head(model, "vision"));
    CHECK(uform_model_init_head(model, "vision", 3) == uform_ok_k && uform_model_has_head(model, "vision"));
    CHECK(fails_with(uform_model_init_head(model, "encoder", 3), uform_invalid_argument_k, "encoder", NULL));
    char directory[512], path[600];
    snprintf(directory, sizeof(directory), "%s/model", folder_);
    CHECK(uform_model_save(model, directory, NULL) == uform_ok_k);
    CHECK(uform_model_open(directory, &opened) == uform_ok_k && uform_model_has_head(opened, "vision") &&
          !uform_model_has_head(opened, "audio"));
    uform_model_close(opened);
    /* Rewrite the file without vision.bias: the frontend is half there. */
    snprintf(path, sizeof(path), "%s/model.safetensors", directory);
    uform_safetensors_t file;
    CHECK(uform_safetensors_open(path, &file) == uform_ok_k);
    uform_tensor_view_t *kept = calloc(file.count, sizeof(*kept));
    size_t count = 0;
    for (size_t i = 0; i < file.count; ++i)
        if (strcmp(file.tensors[i].name, "vision.bias")) kept[count++] = file.tensors[i];
    snprintf(path, sizeof(path), "%s/half/model.safetensors", folder_);
    char half[600];
    snprintf(half, sizeof(half), "%s/half", folder_);
    mkdir(half, 0755);
    CHECK(uform_safetensors_write(path, kept, count, file.metadata) == uform_ok_k);
    uform_safetensors_close(&file);
    free(kept);
    CHECK(fails_with(uform_model_open(half, &opened), uform_missing_k, "vision.bias", "vision.patch"));
    uform_model_close(model);
    scratch_close();
}

/* Media cells: refused by name where the model lacks the frontend or the media row is not there, and
 * run once both are. */
static void test_media_cells(void) {
    uform_config_t config;
    uform_model_t *model = NULL;
    CHECK(uform_config_from_tier("64x1", &config) == uform_ok_k && uform_model_init(&config, 5, &model) == uform_ok_k);
    uint8_t kinds[4] = {uform_cell_byte_k, uform_cell_image_k, uform_cell_image_k, uform_cell_padding_k};
    uint32_t values[4] = {'a', 0, 1, uform_pad_k};
    int32_t segments[4] = {0, 1, 1, -1}, positions[12] = {0};
    float patches[2 * 1024] = {0};
    uform_grid_t grid = {.rows = 1, .columns = 4, .kinds = kinds, .values = values, .segments = segments, .positions = positions};
    float hidden[4 * 64];
    uform_outputs_t outputs = {.hidden = hidden};
    CHECK(fails_with(uform_forward(model, &grid, &outputs), uform_unsupported_k, "no vision frontend", "column 1"));
    CHECK(uform_model_init_head(model, "vision", 5) == uform_ok_k);
    CHECK(fails_with(uform_forward(model, &grid, &outputs), uform_invalid_argument_k, "media buffer of 0 rows", NULL));
    grid.media[0] = (uform_media_t){.data = patches, .count = 1, .dtype = uform_media_f32_k};
    CHECK(fails_with(uform_forward(model, &grid, &outputs), uform_invalid_argument_k, "names row 1", "column 2"));
    grid.media[0].count = 2;
    CHECK(uform_forward(model, &grid, &outputs) == uform_ok_k && outputs.segments == 2);
    float video[2 * 1536] = {0};
    grid.media[1] = (uform_media_t){.data = video, .count = 2, .dtype = uform_media_f32_k};
    kinds[1] = kinds[2] = uform_cell_video_k;
    CHECK(fails_with(uform_forward(model, &grid, &outputs), uform_unsupported_k, "no video frontend", "column 1"));
    CHECK(uform_model_init_head(model, "video", 5) == uform_ok_k);
    CHECK(uform_forward(model, &grid, &outputs) == uform_ok_k && outputs.segments == 2); /* the CPU runs tubes */
    kinds[1] = kinds[2] = uform_cell_byte_k; /* the same grid as bytes runs */
    CHECK(uform_forward(model, &grid, &outputs) == uform_ok_k && outputs.segments == 2);
    uform_model_close(model);
}

int main(void) {
    test_bf16();
    test_arena();
    test_pool();
    test_rng();
    test_tiers();
    test_safetensors();
    test_tensor_table();
    test_frontend_checkpoint();
    test_media_cells();
    return check_report();
}
