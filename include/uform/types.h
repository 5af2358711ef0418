/*  types.h: status codes, error messages, the model configuration and the cell grid that every
 *  UForm verb shares. Every call returns a `uform_status_t`; `uform_last_error()` gives the
 *  readable message of the last failure on the calling thread. Nothing in the library aborts.
 */
#ifndef UFORM_TYPES_H
#define UFORM_TYPES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the library's exported functions: everything else in libuform is hidden. */
#if defined(__GNUC__) || defined(__clang__)
#define UFORM_API __attribute__((visibility("default")))
#else
#define UFORM_API
#endif

typedef enum uform_status_t {
    uform_ok_k = 0,
    uform_invalid_argument_k = 1, /* a NULL pointer, a zero count, an out-of-range width */
    uform_io_k = 2,               /* a file could not be opened, read, written or renamed */
    uform_format_k = 3,           /* a checkpoint or input is malformed: truncated, corrupt, inconsistent */
    uform_shape_k = 4,            /* a tensor or buffer has the wrong shape or size */
    uform_missing_k = 5,          /* a required tensor or head is absent from the checkpoint */
    uform_out_of_memory_k = 6,    /* an allocation failed */
    uform_unsupported_k = 7,      /* valid input that this build does not handle yet */
    uform_device_k = 8,           /* a device call failed (CUDA, cuBLASLt, cuDNN, NCCL): the message names the call and the step */
} uform_status_t;

/** Short name of a status ("ok", "format", ...). Never NULL. */
UFORM_API char const *uform_status_name(uform_status_t status);
/** The message of the last failure on this thread, naming the file and the problem. Never NULL. */
UFORM_API char const *uform_last_error(void);
/** Library version as "major.minor.patch". */
UFORM_API char const *uform_version(void);

/** The byte vocabulary: ids 0..255 are raw bytes, then MASK and PAD. */
enum { uform_vocabulary_k = 258, uform_mask_k = 256, uform_pad_k = 257 };
enum { uform_head_width_k = 64, uform_max_embedding_widths_k = 8 };

/** The shape of one model. Tiers fill it from a name; custom sizes are "WIDTHxDEPTH". */
typedef struct uform_config_t {
    char tier[32];                                       /* "tiny", ..., or "128x2" for custom sizes */
    size_t width;                                        /* d, a multiple of 64 */
    size_t depth;                                        /* L, the number of blocks */
    size_t heads;                                        /* d / 64 */
    size_t embedding_widths[uform_max_embedding_widths_k]; /* Matryoshka widths, ascending; the last is E */
    size_t embedding_widths_count;
    size_t colbert_width;                                /* 128 */
    size_t columns;                                      /* cells a row holds: 4096 for text */
    double learning_rate;                                /* the tier's peak learning rate */
} uform_config_t;

/** Fills `config` for a tier name or "WIDTHxDEPTH" (width a multiple of 64, 64..8192; depth 1..256). */
UFORM_API uform_status_t uform_config_from_tier(char const *tier, uform_config_t *config);
/** Parameters counted as SPEC.md counts them: blocks, byte embedding and pool head. */
UFORM_API size_t uform_config_parameters(uform_config_t const *config);

/** What a cell of the grid holds (SPEC.md section 1). */
typedef enum uform_cell_kind_t {
    uform_cell_byte_k = 0,    /* value: a byte id 0..257 */
    uform_cell_image_k = 1,   /* value: a row of the image patches, [n, 1024] (16x16 RGBA, values / 255) */
    uform_cell_video_k = 2,   /* value: a row of the video tubes, [n, 1536] (16x16x2 RGB) */
    uform_cell_audio_k = 3,   /* value: a row of the audio frames, [n, 320] (20 ms of 16 kHz mono in [-1, 1]) */
    uform_cell_padding_k = 4, /* value ignored; segment -1 */
} uform_cell_kind_t;

/** How media vectors are stored. */
typedef enum uform_media_dtype_t {
    uform_media_f32_k = 0,
    uform_media_bf16_k = 1,
} uform_media_dtype_t;

/** The vectors that one kind's media cells index: `count` rows of that kind's width, row-major. */
typedef struct uform_media_t {
    void const *data;          /* NULL when the grid has no cells of this kind */
    size_t count;              /* rows */
    uform_media_dtype_t dtype;
} uform_media_t;

/** The media of a grid, one buffer per media kind. */
enum { uform_media_kinds_k = 3 }; /* image, video, audio: media[kind - uform_cell_image_k] */

/** A batch as `rows x columns` cells, structure of arrays, all caller-owned.
 *  A segment is a contiguous run of cells in one row sharing a segment id (>= 0); padding has
 *  segment -1. Segments are numbered for outputs in order of their first cell, row by row.
 *  A media cell's value is a row of `media[kind - uform_cell_image_k]`; a grid of bytes alone
 *  leaves `media` zeroed. A cell kind the model has no frontend for is refused. */
typedef struct uform_grid_t {
    size_t rows, columns;
    uint8_t const *kinds;     /* [rows * columns] uform_cell_kind_t */
    uint32_t const *values;   /* [rows * columns] byte id 0..257, or a media row */
    int32_t const *segments;  /* [rows * columns] segment id within the row, -1 for padding */
    int32_t const *positions; /* [rows * columns * 3] (t, h, w) for M-RoPE */
    uform_media_t media[uform_media_kinds_k];
} uform_grid_t;

#ifdef __cplusplus
}
#endif
#endif
