/*  mixture.h: a training mixture read from JSON: the sources (JSONL files with weights), the row
 *  width, the objective and the masking parameters. Paths are relative to the mixture file's
 *  folder. Every field is checked when read; docs/data.md describes the format.
 */
#ifndef UFORM_DATA_MIXTURE_H
#define UFORM_DATA_MIXTURE_H

#include <stddef.h>

#include "uform/train.h"

enum {
    uform_mixture_max_sources_k = 64,        /* the batcher's state keeps one cursor per source */
    uform_mixture_default_columns_k = 4096,
    uform_mixture_max_columns_k = 1 << 20,
};

typedef struct uform_mixture_source_t {
    char path[4096];      /* resolved: a relative path is joined to the mixture's folder */
    char name[64];        /* "name" from the file, else the file name */
    double weight;        /* > 0; sources are drawn with probability weight / total */
    double loss_weight;   /* pair objectives: the scale of its anchors' rows of the loss, 1 */
    int skip_malformed;   /* count malformed lines instead of failing */
    int flip_images;      /* mirror each image side left to right at random, half the draws */
} uform_mixture_source_t;

typedef struct uform_mixture_t {
    char path[4096];
    uform_objective_t objective;
    size_t columns;       /* cells per row, 4096 */
    double mask_ratio;    /* MLM: share of each segment's cells masked, 0.15 */
    double mean_span;     /* MLM: mean length of a masked span, 8 */
    double image_mask_ratio; /* MLM: share of each image's patches blanked and reconstructed, 0.5 */
    double video_fps;     /* the rate video sides are sampled at, frames a second (0.1..1000), 25 */
    double audio_mask_ratio, audio_mean_span; /* MLM: share of each clip's frames masked, 0.5, in spans of mean 4 */
    double video_mask_ratio; /* MLM: share of each clip's tube positions masked at every step, 0.75 */
    uform_mixture_source_t *sources;
    size_t sources_count;
} uform_mixture_t;

/** Reads and validates a mixture file; each failure names the file and the field. */
uform_status_t uform_mixture_read(char const *path, uform_mixture_t *mixture);
/** The same from memory; `path` names the text in messages and gives the folder sources are relative to. */
uform_status_t uform_mixture_parse(char const *path, char const *text, size_t length, uform_mixture_t *mixture);
void uform_mixture_close(uform_mixture_t *mixture);

/** "mlm", "contrastive" or "rerank"; NULL for an unknown value. */
char const *uform_objective_name(uform_objective_t objective);
/** The objective named `name`; uform_invalid_argument_k for any other string. */
uform_status_t uform_objective_from_name(char const *name, uform_objective_t *objective);

#endif
