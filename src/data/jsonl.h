/*  jsonl.h: a JSONL file read into records whose bytes live in one owned buffer. A line is
 *  `{"text": ...}` (masked modelling) or `{"query": ..., "positives": [...], "negatives": [...]}`
 *  (pairs; negatives optional, at least one positive); other keys are ignored. Strings are kept
 *  as the raw bytes JSON unescapes them to, with explicit lengths, so "\u0000" survives. A pair's
 *  query, positive or negative may also be an image, `{"image": "PATH"}`, an audio clip,
 *  `{"audio": "PATH"}`, or a video clip, `{"video": "PATH"}`, PATH relative to the file's folder
 *  (or absolute).
 */
#ifndef UFORM_DATA_JSONL_H
#define UFORM_DATA_JSONL_H

#include <stddef.h>
#include <stdint.h>

#include "uform/types.h"

/** What a slice holds: a text, or a media side (nonzero) by its path or its own bytes. */
enum {
    uform_slice_text_k = 0,
    uform_slice_image_path_k = 1,  /* JSONL {"image": PATH} */
    uform_slice_image_bytes_k = 2, /* Parquet *_image columns */
    uform_slice_audio_path_k = 3,  /* JSONL {"audio": PATH} */
    uform_slice_video_path_k = 4,  /* JSONL {"video": PATH} */
};

/** `length` bytes at `offset` of the corpus's byte buffer: a text, or a media side's path or bytes. */
typedef struct uform_slice_t {
    size_t offset, length;
    int image; /* a uform_slice_*_k: 0 a text, nonzero a media side */
} uform_slice_t;

/** The cell kind a slice becomes: bytes, image patches, audio frames or video tubes. */
static inline uform_cell_kind_t uform_slice_kind(uform_slice_t slice) {
    return slice.image == uform_slice_audio_path_k   ? uform_cell_audio_k
           : slice.image == uform_slice_video_path_k ? uform_cell_video_k
           : slice.image                             ? uform_cell_image_k
                                                     : uform_cell_byte_k;
}

typedef enum uform_record_kind_t {
    uform_record_text_k = 0, /* {"text": ...} */
    uform_record_pair_k = 1, /* {"query": ..., "positives": [...], "negatives": [...]} */
} uform_record_kind_t;

typedef struct uform_record_t {
    uform_record_kind_t kind;
    uform_slice_t text;        /* the text, or the pair's query */
    size_t first_candidate;    /* pairs: index into `slices` of the positives, then the negatives */
    uint32_t positives_count;  /* pairs: >= 1 */
    uint32_t negatives_count;  /* pairs: >= 0 */
    size_t line;               /* 1-based line of the file */
    uform_slice_t language;    /* the optional "lang" tag (e.g. "de"); empty when absent */
} uform_record_t;

typedef struct uform_corpus_t {
    char path[4096];
    uint8_t *bytes;             /* every string's bytes, back to back */
    size_t bytes_count;
    uform_record_t *records;    /* in file order */
    size_t records_count;
    uform_slice_t *slices;      /* the positives and negatives of all pair records */
    size_t slices_count;
    size_t text_records, pair_records;
    size_t lines;               /* lines in the file, blank ones included */
    size_t skipped;             /* malformed lines skipped (skip mode only) */
    size_t first_skipped_line;  /* 0 when none */
    char first_problem[256];    /* why the first skipped line was malformed */
} uform_corpus_t;

typedef struct uform_jsonl_options_t {
    int skip_malformed; /* nonzero: count malformed lines and go on instead of failing */
} uform_jsonl_options_t;

/** Reads `path` into `corpus`. A malformed line fails with "PATH:LINE: problem" (uform_format_k)
 *  unless `options->skip_malformed`; blank lines are skipped silently. `options` may be NULL. */
uform_status_t uform_jsonl_read(char const *path, uform_jsonl_options_t const *options, uform_corpus_t *corpus);
/** The same from memory; `path` only names the text in messages. */
uform_status_t uform_jsonl_parse(char const *path, char const *text, size_t length,
                                 uform_jsonl_options_t const *options, uform_corpus_t *corpus);
void uform_corpus_close(uform_corpus_t *corpus);

static inline uint8_t const *uform_corpus_data(uform_corpus_t const *corpus, uform_slice_t slice) {
    return corpus->bytes + slice.offset;
}

/** The file a media slice (a path) names, joined to the corpus file's folder unless absolute, into
 *  `path` (`size` bytes); fails naming the record's file when it does not fit. */
uform_status_t uform_corpus_image_path(uform_corpus_t const *corpus, uform_slice_t slice, char *path, size_t size);

struct uform_pixels_t;
/** Decodes an image slice: the file it names (image 1) or its own bytes (image 2, named in messages
 *  as the corpus file's "image column"). */
uform_status_t uform_corpus_image_read(uform_corpus_t const *corpus, uform_slice_t slice, struct uform_pixels_t *pixels);

#endif
