/*  config.c: the tiers of SPEC.md section 6, custom "WIDTHxDEPTH" sizes and parameter counts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "uform/types.h"

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
    size_t d = config->width, widest = config->embedding_widths[config->embedding_widths_count - 1];
    size_t block = 16 * d * d + 2 * d; /* qkv 3d^2, out d^2, gate_up 8d^2, down 4d^2, two norms */
    return config->depth * block + d /* final norm */ + uform_vocabulary_k * d + d + widest * d;
}
