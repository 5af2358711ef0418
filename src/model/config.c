/*  config.c: the tiers of SPEC.md section 6, custom "WIDTHxDEPTH" sizes, parameter counts, and the
 *  configuration JSON a checkpoint carries, read back field by field. */
#include "model/config.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "model/tensors.h"

typedef struct {
    char const *name;
    size_t width, depth;
    double learning_rate;
} uform_tier_t;

static uform_tier_t const uform_tiers_[] = {
    {"tiny", 512, 12, 5e-4},   {"small", 1024, 12, 2e-4}, {"medium", 1024, 24, 2e-4},
    {"large", 2048, 24, 1e-4}, {"xl", 2048, 48, 1e-4},
};

/* Matryoshka widths: the powers of two from 64 up to the width, then the width itself. */
static void uform_fill_widths_(uform_config_t *config) {
    config->embedding_widths_count = 0;
    for (size_t w = 64; w < config->width && config->embedding_widths_count < uform_max_embedding_widths_k - 1; w *= 2)
        config->embedding_widths[config->embedding_widths_count++] = w;
    config->embedding_widths[config->embedding_widths_count++] = config->width;
}

uform_status_t uform_config_from_tier(char const *tier, uform_config_t *config) {
    if (!tier || !config) return uform_fail(uform_invalid_argument_k, "tier name and config must not be NULL");
    memset(config, 0, sizeof(*config));
    int found = 0;
    for (size_t i = 0; i < sizeof(uform_tiers_) / sizeof(uform_tiers_[0]); ++i)
        if (!strcmp(tier, uform_tiers_[i].name)) {
            config->width = uform_tiers_[i].width;
            config->depth = uform_tiers_[i].depth;
            config->learning_rate = uform_tiers_[i].learning_rate;
            found = 1;
        }
    if (!found) {
        char *end = NULL;
        unsigned long width = strtoul(tier, &end, 10);
        unsigned long depth = (end && *end == 'x') ? strtoul(end + 1, &end, 10) : 0;
        if (!end || *end || !width || !depth)
            return uform_fail(uform_invalid_argument_k,
                              "unknown tier '%s': use tiny, small, medium, large, xl or WIDTHxDEPTH such as 128x2",
                              tier);
        if (width % 64 || width > 8192 || depth > 256)
            return uform_fail(uform_invalid_argument_k,
                              "tier '%s': width must be a multiple of 64 up to 8192 and depth at most 256", tier);
        config->width = width;
        config->depth = depth;
        config->learning_rate = 5e-4;
    }
    if (strlen(tier) >= sizeof(config->tier)) return uform_fail(uform_invalid_argument_k, "tier name too long");
    strcpy(config->tier, tier);
    config->heads = config->width / uform_head_width_k;
    config->colbert_width = 128;
    config->columns = 4096;
    uform_fill_widths_(config);
    return uform_ok_k;
}

size_t uform_config_parameters(uform_config_t const *config) {
    if (!config) return 0;
    /* SPEC.md counts the byte frontend, the blocks, final_norm and the pool head: those parts of the table. */
    return uform_parts_elements(config, UFORM_PART(uform_part_bytes_k) | UFORM_PART(uform_part_encoder_k) |
                                             UFORM_PART(uform_part_pool_k));
}

uform_status_t uform_config_parse(char const *origin, char const *text, uform_config_t *config) {
    json_error_t error;
    json_t *root = json_loads(text, 0, &error);
    if (!json_is_object(root)) {
        if (root) json_decref(root);
        return uform_fail(uform_format_k, "%s: __metadata__ 'config' is not a JSON object: %s", origin, error.text);
    }
    memset(config, 0, sizeof(*config));
    uform_status_t status = uform_ok_k;
    char const *tier = json_string_value(json_object_get(root, "tier"));
    json_t *widths = json_object_get(root, "embedding_widths");
    json_int_t width = json_integer_value(json_object_get(root, "width"));
    json_int_t depth = json_integer_value(json_object_get(root, "depth"));
    json_int_t heads = json_integer_value(json_object_get(root, "heads"));
    json_int_t colbert = json_integer_value(json_object_get(root, "colbert_width"));
    json_int_t columns = json_integer_value(json_object_get(root, "columns"));
    if (!tier || strlen(tier) >= sizeof(config->tier) || !json_is_array(widths))
        status = uform_fail(uform_format_k, "%s: config needs a 'tier' string and an 'embedding_widths' array", origin);
    else if (width <= 0 || width % 64 || width > 8192 || depth <= 0 || depth > 256 || heads != width / 64 ||
             colbert <= 0 || colbert > 4096 || columns <= 0 || columns > 65536)
        status = uform_fail(uform_format_k,
                            "%s: config is inconsistent (width %lld must be a multiple of 64, depth %lld in 1..256, "
                            "heads %lld = width/64, colbert_width %lld, columns %lld)",
                            origin, (long long)width, (long long)depth, (long long)heads, (long long)colbert,
                            (long long)columns);
    else if (!json_array_size(widths) || json_array_size(widths) > uform_max_embedding_widths_k)
        status = uform_fail(uform_format_k, "%s: config needs 1..%d embedding widths", origin, uform_max_embedding_widths_k);
    if (status == uform_ok_k) {
        strcpy(config->tier, tier);
        config->width = (size_t)width;
        config->depth = (size_t)depth;
        config->heads = (size_t)heads;
        config->colbert_width = (size_t)colbert;
        config->columns = (size_t)columns;
        config->embedding_widths_count = json_array_size(widths);
        for (size_t i = 0; i < config->embedding_widths_count && status == uform_ok_k; ++i) {
            json_int_t value = json_integer_value(json_array_get(widths, i));
            size_t previous = i ? config->embedding_widths[i - 1] : 0;
            if (value <= (json_int_t)previous || value > width)
                status = uform_fail(uform_format_k, "%s: embedding widths must ascend and not exceed the width %lld",
                                    origin, (long long)width);
            config->embedding_widths[i] = (size_t)value;
        }
        json_t *rate = json_object_get(root, "learning_rate");
        config->learning_rate = json_is_number(rate) ? json_number_value(rate) : 5e-4;
    }
    json_decref(root);
    return status;
}
