/*  uform.c: the `uform` command: init, info, shard, grow, encode, calibrate, rerank, decode and serve over the C ABI. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sys/stat.h>

#include "core/file.h"
#include "model/safetensors.h"
#include "serve.h"
#include "uform/uform.h"

static char const *const uform_usage_ =
    "usage: uform VERB [options]   (uform VERB --help for a verb's options)\n"
    "\n"
    "verbs:\n"
    "  init     write a randomly initialized checkpoint\n"
    "  info     print a checkpoint's configuration and parameter count\n"
    "  shard    rewrite a checkpoint as Hugging Face's sharded SafeTensors layout (files under a size limit)\n"
    "  grow     deepen or widen a trained checkpoint (Net2Net), keeping its embeddings\n"
    "  encode   embed one text per line of standard input\n"
    "  calibrate  write int8/uint8 calibration ranges from the embeddings of standard input's texts\n"
    "  rerank   score one document per line of standard input against a query (MaxSim)\n"
    "  decode   decode an audio or video file as the encoder reads it and print a one-line summary\n"
    "  serve    an HTTP server of embeddings and reranking (OpenAI's and Cohere/Jina's shapes)\n";

static char const *const uform_init_usage_ =
    "usage: uform init --tier TIER --output DIR [--seed S] [--frontends LIST]\n"
    "\n"
    "Writes DIR/model.safetensors and DIR/README.md, initialized as docs/checkpoints.md says.\n"
    "  --tier TIER       tiny, small, medium, large, xl, or WIDTHxDEPTH such as 128x2\n"
    "  --seed S          random seed (default 0)\n"
    "  --output DIR      checkpoint folder, created if absent\n"
    "  --frontends LIST  media frontends to attach beside the bytes, comma-separated: vision, video,\n"
    "                    audio (docs/images.md, docs/audio_video.md)\n";

static char const *const uform_info_usage_ =
    "usage: uform info --model DIR\n"
    "\n"
    "Prints the configuration, the heads and frontends present and the parameter count as JSON.\n";

static char const *const uform_shard_usage_ =
    "usage: uform shard --model DIR --output DIR [--max-shard-mb MB] [--store bf16|e4m3]\n"
    "\n"
    "Writes the model's tensors into DIR as model-0000N-of-0000M.safetensors, each file at most MB\n"
    "MiB, and model.safetensors.index.json (docs/checkpoints.md), and copies the checkpoint's README.md.\n"
    "Optimizer and trainer state are not part of it. A tensor larger than the limit gets a shard of\n"
    "its own, with a warning. Every file is written atomically, the index last.\n"
    "  --model DIR        checkpoint folder (single file or sharded)\n"
    "  --output DIR       the sharded checkpoint's folder, created if absent; it must not hold a\n"
    "                     model.safetensors, which readers would prefer to the shards\n"
    "  --max-shard-mb MB  the largest file in MiB (2^20 bytes), a positive number such as 16 or 0.5\n"
    "                     (default 16)\n"
    "  --store bf16|e4m3  how the blocks' four matrices are stored: bf16 (default, as trained) or e4m3\n"
    "                     (F8_E4M3 codes and a Float32 scale per row, about half the bytes; read back\n"
    "                     as BF16, so every precision runs on it; docs/checkpoints.md)\n";

static char const *const uform_grow_usage_ =
    "usage: uform grow --model DIR --output DIR (--deepen N | --widen) [--threads N]\n"
    "\n"
    "Writes DIR/model.safetensors and DIR/README.md: the model grown as SPEC.md section 8 says\n"
    "(docs/checkpoints.md, \"Growth\"). Nothing is written unless the grown model reproduces the source's\n"
    "embeddings of built-in probe texts (and a probe picture, where it reads images) to a cosine of\n"
    "0.9999; the lowest cosine is printed. Train it on from there with uform_base --init-from DIR\n"
    "--keep-head.\n"
    "  --model DIR    the checkpoint to grow (single file or sharded)\n"
    "  --output DIR   the grown checkpoint's folder, created if absent\n"
    "  --deepen N     N more blocks, each a copy of the block before it with its out and down\n"
    "                 projections zero, spread evenly through the depth (384x6 --deepen 2: 384x8)\n"
    "  --widen        twice the width and heads: the residual stream [x, x], the Matryoshka and\n"
    "                 ColBERT widths kept (384x6: 768x6)\n"
    "  --threads N    cores for the check (default all)\n";

static char const *const uform_encode_usage_ =
    "usage: uform encode --model DIR [--image FILE... | --audio FILE... | --video FILE... [--fps N] | --records]\n"
    "                    [--width M] [--threads N]\n"
    "                    [--precision bf16|e4m3|int8|f32] [--device cpu|cuda]\n"
    "                    [--output-precision float32|int8|uint8|binary|ubinary] [--calibration FILE]\n"
    "\n"
    "Reads one UTF-8 text per line on standard input and prints one JSON array of M floats per line:\n"
    "the L2-normalized Matryoshka embedding. Texts longer than a row (4096 bytes) are cut; a count\n"
    "of cut texts goes to standard error. An empty line is an error. Images (PNG, JPEG, WebP; the\n"
    "model needs the vision frontend) embed into the same space, on either device:\n"
    "  --image FILE...    embed these image files instead of standard input, one line each, in order\n"
    "  --audio FILE...    embed these audio files (any format FFmpeg reads; the model needs the audio\n"
    "                     frontend; the first 10.24 s of each)\n"
    "  --video FILE...    embed these video files (the video frontend; at most 1024 tubes each)\n"
    "  --fps N            the videos' sampling rate, 0.1 to 1000 (default 25: a frame every 40 ms tick)\n"
    "  --records          read JSON records instead of lines: {\"text\": \"...\"}, {\"image\": \"PATH\"},\n"
    "                     {\"audio\": \"PATH\"} or {\"video\": \"PATH\"} (a path relative to the working\n"
    "                     folder), one per line, in order\n"
    "  --model DIR        checkpoint folder\n"
    "  --width M          one of the model's embedding widths (default: the widest)\n"
    "  --threads N        worker threads (default: all cores)\n"
    "  --precision P      bf16 (default, fast), e4m3 (the blocks' products in E4M3), int8 (the blocks'\n"
    "                     products in int8, CPU only) or f32 (products in Float32); docs/precision.md\n"
    "  --device D         cpu (default) or cuda: the GPU (BF16 activations, Float32 accumulation;\n"
    "                     agrees with the CPU's bf16 within the bound of docs/cuda.md)\n"
    "  --output-precision P  float32 (default), int8, uint8, binary or ubinary (docs/quantization.md):\n"
    "                     int8/uint8 print JSON arrays of M integers (-128..127 / 0..255), each\n"
    "                     dimension's range cut into 256 buckets; binary/ubinary print the sign bits\n"
    "                     (x > 0) packed eight to a byte, first dimension in the top bit, as (M + 7) / 8\n"
    "                     integers (-128..127 / 0..255)\n"
    "  --calibration FILE the int8/uint8 ranges, as `uform calibrate` writes them at the same width;\n"
    "                     without it the ranges are the minimum and maximum of each dimension over\n"
    "                     the inputs being encoded (so the output waits for the whole input)\n";

static char const *const uform_calibrate_usage_ =
    "usage: uform calibrate --model DIR --output FILE [--image|--audio|--video FILE...] [--fps N] [--records]\n"
    "                       [--width M]\n"
    "                       [--threads N] [--precision bf16|e4m3|int8|f32] [--device cpu|cuda]\n"
    "\n"
    "Embeds its inputs as `uform encode` does (one text per line of standard input, or --records, or\n"
    "--image) and writes FILE: JSON {\"model\", \"width\", \"count\", \"minimums\": [M], \"maximums\": [M]},\n"
    "each dimension's minimum and maximum over the embeddings, for `uform encode --output-precision\n"
    "int8|uint8 --calibration FILE` at the same width. Calibrate on texts like the ones you index.\n"
    "  --output FILE      the ranges file, written whole or not at all\n"
    "  --width M          one of the model's embedding widths (default: the widest)\n";

static char const *const uform_rerank_usage_ =
    "usage: uform rerank --model DIR --query TEXT [--fuse W [--fuse-gate L]] [--threads N]\n"
    "                    [--precision bf16|e4m3|int8|f32] [--device cpu|cuda]\n"
    "\n"
    "Reads one document per line on standard input and prints one MaxSim score per line: the sum\n"
    "over query bytes of the best cosine among the document's bytes (ColBERT-style late interaction).\n"
    "  --model DIR        checkpoint folder\n"
    "  --query TEXT       the query\n"
    "  --fuse W           print (1 - W) cosine + W symmetric MaxSim instead: the pooled embeddings'\n"
    "                     cosine at the widest width fused with MaxSim's mean from the shorter text's\n"
    "                     bytes (uform_rerank_fused; W in (0, 1]; 0.5 ranks best on the shipped\n"
    "                     model's dev pairs, docs/evaluation.md)\n"
    "  --fuse-gate L      with --fuse: a document shorter than L bytes, for a query shorter too,\n"
    "                     prints its cosine alone (uform_rerank_gated; MaxSim of two short strings\n"
    "                     ranks worse than their cosine; 64, as uform serve, on the shipped model)\n"
    "  --threads N        worker threads (default: all cores)\n"
    "  --precision P      bf16 (default), e4m3, int8 (CPU only) or f32 (docs/precision.md)\n"
    "  --device D         cpu (default) or cuda: the encoder on the GPU, MaxSim on the CPU\n";

static char const *const uform_decode_usage_ =
    "usage: uform decode --audio FILE | --video FILE [--fps N]\n"
    "\n"
    "Decodes one file as the encoder reads it (docs/audio_video.md) and prints one line of JSON.\n"
    "Audio: 16 kHz mono, the mean of its channels: its seconds and samples, the source's rate and\n"
    "channels, the 20 ms frames of 320 samples it fills and the cells one clip takes (at most 512).\n"
    "Video: frames sampled at N a second, RGB: their count, seconds and size, and the tube grid\n"
    "(steps of 2 frames x rows x columns of 16x16 patches) and its cells (at most 1024).\n"
    "A file that does not decode is an error naming the file and the problem.\n"
    "  --audio FILE   any audio FFmpeg reads: WAV, FLAC, MP3, Ogg Vorbis or Opus, ...\n"
    "  --video FILE   any video FFmpeg reads: WebM (VP8, VP9), MP4 (H.264), ...\n"
    "  --fps N        the video's sampling rate, 0.1 to 1000 (default 25: a frame every 40 ms tick)\n";

/* The flags that name media files, by media index (uform_cell_kind_t - uform_cell_image_k). */
static char const *const uform_media_flags_[uform_media_kinds_k] = {"--image", "--video", "--audio"};
/* The record keys of media, by the same index. */
static char const *const uform_media_keys_[uform_media_kinds_k] = {"image", "video", "audio"};

typedef struct {
    char const *tier, *output, *model, *query, *precision, *device, *frontends, *output_precision, *calibration, *store;
    char const *audio, *video; /* uform decode's file: the first of --audio's or --video's */
    double fps, fuse;
    char **files[uform_media_kinds_k]; /* --image's, --video's and --audio's files, in argv */
    size_t files_count[uform_media_kinds_k];
    unsigned long long seed;
    size_t width, threads, fuse_gate;
    double max_shard_mb;
    size_t deepen;
    int help, records, widen;
} uform_options_t;

static int uform_report_(uform_status_t status) {
    if (status == uform_ok_k) return 0;
    fprintf(stderr, "uform: %s error: %s\n", uform_status_name(status), uform_last_error());
    return 1;
}

static int uform_parse_number_(char const *text, char const *flag, unsigned long long *value) {
    char *end = NULL;
    errno = 0;
    *value = strtoull(text, &end, 10);
    if (errno || !end || *end || text[0] == '-') {
        fprintf(stderr, "uform: %s needs a non-negative integer, got '%s'\n", flag, text);
        return 0;
    }
    return 1;
}

/* Whether `flag` is one of the space-separated words of `allowed`. */
static int uform_flag_allowed_(char const *allowed, char const *flag) {
    size_t length = strlen(flag);
    for (char const *word = allowed; *word; word += strcspn(word, " "), word += *word == ' ')
        if (strcspn(word, " ") == length && !strncmp(word, flag, length)) return 1;
    return 0;
}

/* Parses `--flag value` pairs into `options`; `allowed` lists the flags this verb takes. */
static int uform_parse_(int argc, char **argv, char const *allowed, uform_options_t *options) {
    for (int i = 2; i < argc; ++i) {
        char const *flag = argv[i];
        if (!strcmp(flag, "--help") || !strcmp(flag, "-h")) {
            options->help = 1;
            continue;
        }
        if (!uform_flag_allowed_(allowed, flag)) {
            fprintf(stderr, "uform %s: unknown option '%s' (see uform %s --help)\n", argv[1], flag, argv[1]);
            return 0;
        }
        if (!strcmp(flag, "--records") || !strcmp(flag, "--widen")) { /* flags without a value */
            if (!strcmp(flag, "--records")) options->records = 1;
            else options->widen = 1;
            continue;
        }
        int media = -1;
        for (int m = 0; m < uform_media_kinds_k; ++m) media = strcmp(flag, uform_media_flags_[m]) ? media : m;
        if (media >= 0) { /* every argument up to the next flag is a file */
            options->files[media] = argv + i + 1;
            while (i + 1 < argc && strncmp(argv[i + 1], "--", 2)) i++, options->files_count[media]++;
            if (!options->files_count[media]) {
                fprintf(stderr, "uform %s: %s needs at least one file\n", argv[1], flag);
                return 0;
            }
            if (media == uform_cell_audio_k - uform_cell_image_k) options->audio = options->files[media][0];
            if (media == uform_cell_video_k - uform_cell_image_k) options->video = options->files[media][0];
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "uform %s: %s needs a value\n", argv[1], flag);
            return 0;
        }
        char const *value = argv[++i];
        unsigned long long number = 0;
        if (!strcmp(flag, "--tier")) options->tier = value;
        else if (!strcmp(flag, "--output")) options->output = value;
        else if (!strcmp(flag, "--model")) options->model = value;
        else if (!strcmp(flag, "--query")) options->query = value;
        else if (!strcmp(flag, "--precision")) options->precision = value;
        else if (!strcmp(flag, "--frontends")) options->frontends = value;
        else if (!strcmp(flag, "--output-precision")) options->output_precision = value;
        else if (!strcmp(flag, "--calibration")) options->calibration = value;
        else if (!strcmp(flag, "--fuse")) {
            char *end = NULL;
            options->fuse = strtod(value, &end);
            if (!end || *end || !(options->fuse > 0 && options->fuse <= 1)) {
                fprintf(stderr, "uform %s: --fuse needs a weight in (0, 1], got '%s'\n", argv[1], value);
                return 0;
            }
        } else if (!strcmp(flag, "--fps")) {
            char *end = NULL;
            options->fps = strtod(value, &end);
            if (!end || *end || !(options->fps >= 0.1 && options->fps <= 1000)) {
                fprintf(stderr, "uform %s: --fps needs a rate from 0.1 to 1000 frames a second, got '%s'\n", argv[1], value);
                return 0;
            }
        }
        else if (!strcmp(flag, "--device")) {
            if (strcmp(value, "cpu") && strcmp(value, "cuda")) {
                fprintf(stderr, "uform %s: --device is cpu or cuda, not '%s'\n", argv[1], value);
                return 0;
            }
            options->device = value;
        }
        else if (!strcmp(flag, "--store")) {
            if (strcmp(value, "bf16") && strcmp(value, "e4m3")) {
                fprintf(stderr, "uform %s: --store is bf16 or e4m3, not '%s'\n", argv[1], value);
                return 0;
            }
            options->store = value;
        }
        else if (!strcmp(flag, "--max-shard-mb")) {
            char *end = NULL;
            options->max_shard_mb = strtod(value, &end);
            if (!end || *end || !(options->max_shard_mb > 0) || options->max_shard_mb > 1e9) {
                fprintf(stderr, "uform %s: --max-shard-mb needs a positive number of MiB, got '%s'\n", argv[1], value);
                return 0;
            }
        }
        else if (!uform_parse_number_(value, flag, &number)) return 0;
        else if (!strcmp(flag, "--seed")) options->seed = number;
        else if (!strcmp(flag, "--width")) options->width = (size_t)number;
        else if (!strcmp(flag, "--threads")) options->threads = (size_t)number;
        else if (!strcmp(flag, "--fuse-gate")) {
            if (!number || number > 1u << 20) {
                fprintf(stderr, "uform %s: --fuse-gate needs 1 to 1048576 bytes, got '%s'\n", argv[1], value);
                return 0;
            }
            options->fuse_gate = (size_t)number;
        }
        else if (!strcmp(flag, "--deepen")) {
            if (!number || number > 255) {
                fprintf(stderr, "uform %s: --deepen needs 1 to 255 blocks, got '%s'\n", argv[1], value);
                return 0;
            }
            options->deepen = (size_t)number;
        }
    }
    return 1;
}

static int uform_require_(char const *value, char const *flag, char const *verb) {
    if (value) return 1;
    fprintf(stderr, "uform %s: %s is required (see uform %s --help)\n", verb, flag, verb);
    return 0;
}

static char *uform_command_line_(int argc, char **argv) {
    size_t length = 1;
    for (int i = 0; i < argc; ++i) length += strlen(argv[i]) + 3;
    char *line = calloc(length, 1);
    for (int i = 0; line && i < argc; ++i) {
        int quote = strchr(argv[i], ' ') != NULL;
        strcat(line, i ? " " : "");
        strcat(line, quote ? "'" : "");
        strcat(line, argv[i]);
        strcat(line, quote ? "'" : "");
    }
    return line;
}

static int uform_init_(int argc, char **argv, uform_options_t const *options) {
    if (!uform_require_(options->tier, "--tier", "init") || !uform_require_(options->output, "--output", "init")) return 2;
    uform_config_t config;
    uform_model_t *model = NULL;
    uform_status_t status = uform_config_from_tier(options->tier, &config);
    if (status == uform_ok_k) status = uform_model_init(&config, options->seed, &model);
    for (char const *name = options->frontends; status == uform_ok_k && name && *name; name += strcspn(name, ","), name += *name == ',') {
        char frontend[32];
        snprintf(frontend, sizeof(frontend), "%.*s", (int)strcspn(name, ","), name);
        if (strcmp(frontend, "vision") && strcmp(frontend, "video") && strcmp(frontend, "audio")) {
            fprintf(stderr, "uform init: --frontends takes vision, video and audio, not '%s'\n", frontend);
            uform_model_close(model);
            return 2;
        }
        status = uform_model_init_head(model, frontend, options->seed);
    }
    char *command = uform_command_line_(argc, argv);
    if (status == uform_ok_k) status = uform_model_save(model, options->output, command);
    free(command);
    uform_model_close(model);
    if (status == uform_ok_k)
        fprintf(stderr, "uform: wrote %s (%s, %zu parameters)\n", options->output, config.tier, uform_config_parameters(&config));
    return uform_report_(status);
}

static uform_status_t uform_open_(uform_options_t const *options, uform_model_t **model) {
    uform_status_t status = uform_model_open(options->model, model);
    if (status == uform_ok_k && options->threads) status = uform_model_set_threads(*model, options->threads);
    if (status == uform_ok_k && options->precision) {
        uform_precision_t precision;
        status = uform_precision_parse(options->precision, &precision);
        if (status == uform_ok_k) status = uform_model_set_precision(*model, precision);
    }
    if (status == uform_ok_k && options->device && !strcmp(options->device, "cuda"))
        status = uform_model_set_device(*model, uform_device_cuda_k);
    return status;
}

static int uform_info_(uform_options_t const *options) {
    if (!uform_require_(options->model, "--model", "info")) return 2;
    uform_model_t *model = NULL;
    uform_status_t status = uform_model_open(options->model, &model);
    if (status != uform_ok_k) return uform_report_(status);
    uform_config_t config;
    uform_model_config(model, &config);
    printf("{\"tier\": \"%s\", \"width\": %zu, \"depth\": %zu, \"heads\": %zu, \"embedding_widths\": [", config.tier,
           config.width, config.depth, config.heads);
    for (size_t i = 0; i < config.embedding_widths_count; ++i) printf("%s%zu", i ? ", " : "", config.embedding_widths[i]);
    printf("], \"colbert_width\": %zu, \"columns\": %zu, \"parameters\": %zu, \"heads_present\": [", config.colbert_width,
           config.columns, uform_config_parameters(&config));
    char const *heads[] = {"pool", "rerank", "mlm"};
    int first = 1;
    for (size_t i = 0; i < 3; ++i)
        if (uform_model_has_head(model, heads[i])) printf("%s\"%s\"", first ? "" : ", ", heads[i]), first = 0;
    printf("], \"frontends\": [\"bytes\"");
    char const *frontends[] = {"vision", "video", "audio"};
    for (size_t i = 0; i < 3; ++i)
        if (uform_model_has_head(model, frontends[i])) printf(", \"%s\"", frontends[i]);
    printf("]}\n");
    uform_model_close(model);
    return 0;
}

/* `uform shard`: the weights as shards, and the source's README.md beside them. */
static int uform_shard_(uform_options_t const *options) {
    if (!uform_require_(options->model, "--model", "shard") || !uform_require_(options->output, "--output", "shard")) return 2;
    double mb = options->max_shard_mb ? options->max_shard_mb : 16;
    size_t limit = (size_t)(mb * 1048576.0);
    if (!limit) {
        fprintf(stderr, "uform shard: --max-shard-mb %g is less than a byte\n", mb);
        return 2;
    }
    uform_model_t *model = NULL;
    uform_status_t status = uform_model_open(options->model, &model);
    uform_storage_t storage = options->store && !strcmp(options->store, "e4m3") ? uform_storage_e4m3_k : uform_storage_bf16_k;
    if (status == uform_ok_k) status = uform_model_save_sharded_as(model, options->output, limit, storage);
    uform_model_close(model);
    struct stat status_buffer;
    int folder = stat(options->model, &status_buffer) == 0 && S_ISDIR(status_buffer.st_mode);
    char source[4200], target[4200];
    snprintf(source, sizeof(source), "%s/README.md", options->model);
    snprintf(target, sizeof(target), "%s/README.md", options->output);
    unsigned char *readme = NULL;
    size_t bytes = 0;
    if (status == uform_ok_k && folder && stat(source, &status_buffer) == 0) {
        status = uform_file_read(source, &readme, &bytes);
        if (status == uform_ok_k) status = uform_write_atomic(target, readme, bytes);
    } else if (status == uform_ok_k)
        fprintf(stderr, "uform shard: no README.md to copy (%s)\n", folder ? source : "the model is a file named directly");
    free(readme);
    if (status == uform_ok_k)
        fprintf(stderr, "uform: wrote %s (shards of at most %zu bytes, matrices as %s)\n", options->output, limit,
                storage == uform_storage_e4m3_k ? "E4M3" : "BF16");
    return uform_report_(status);
}

/* `uform grow`: the model deepened or widened, checked against its source, then written. */
static int uform_grow_(int argc, char **argv, uform_options_t const *options) {
    if (!uform_require_(options->model, "--model", "grow") || !uform_require_(options->output, "--output", "grow")) return 2;
    if (!options->deepen == !options->widen) {
        fprintf(stderr, "uform grow: give one of --deepen N and --widen (see uform grow --help)\n");
        return 2;
    }
    uform_model_t *model = NULL, *grown = NULL;
    double cosine = 0;
    uform_status_t status = uform_open_(options, &model);
    if (status == uform_ok_k)
        status = options->deepen ? uform_model_deepen(model, options->deepen, &grown, &cosine) : uform_model_widen(model, &grown, &cosine);
    uform_config_t config;
    if (status == uform_ok_k) status = uform_model_config(grown, &config);
    char *command = uform_command_line_(argc, argv);
    if (status == uform_ok_k) status = uform_model_save(grown, options->output, command);
    free(command);
    uform_model_close(grown);
    uform_model_close(model);
    if (status == uform_ok_k)
        fprintf(stderr, "uform: wrote %s (%s, %zu parameters; the lowest cosine to the source's embeddings %.9f)\n", options->output,
                config.tier, uform_config_parameters(&config), cosine);
    return uform_report_(status);
}

/* Reads standard input into lines (without their line ends); the caller frees both. */
static int uform_read_lines_(char **buffer, uform_text_t **texts, size_t *count) {
    size_t capacity = 1 << 16, length = 0, read;
    *buffer = malloc(capacity);
    while (*buffer && (read = fread(*buffer + length, 1, capacity - length, stdin)) > 0) {
        length += read;
        if (length == capacity) *buffer = realloc(*buffer, capacity *= 2);
    }
    if (!*buffer) return 0;
    size_t lines = 0;
    for (size_t i = 0; i < length; ++i) lines += (*buffer)[i] == '\n';
    *texts = calloc(lines + 1, sizeof(uform_text_t));
    if (!*texts) return 0;
    *count = 0;
    for (size_t start = 0; start < length;) {
        char *end = memchr(*buffer + start, '\n', length - start);
        size_t stop = end ? (size_t)(end - *buffer) : length, size = stop - start;
        if (size && (*buffer)[start + size - 1] == '\r') size--;
        (*texts)[(*count)++] = (uform_text_t){(uint8_t const *)*buffer + start, size};
        start = stop + 1;
    }
    return 1;
}

static int uform_check_lines_(uform_text_t const *texts, size_t count, char const *verb) {
    for (size_t i = 0; i < count; ++i)
        if (!texts[i].length) {
            fprintf(stderr, "uform %s: line %zu of standard input is empty: nothing to encode\n", verb, i + 1);
            return 0;
        }
    return 1;
}

/* Opens the model and reads standard input's lines; returns 0 when both worked, else the exit code. */
static int uform_open_and_read_(uform_options_t const *options, char const *verb, uform_model_t **model, char **buffer,
                                uform_text_t **texts, size_t *count) {
    uform_status_t status = uform_open_(options, model);
    if (status == uform_ok_k && !uform_read_lines_(buffer, texts, count)) status = uform_out_of_memory_k;
    if (status != uform_ok_k) return uform_report_(status);
    return uform_check_lines_(*texts, *count, verb) ? 0 : 1;
}

static int uform_out_of_memory_(void) {
    fprintf(stderr, "uform encode: out of memory\n");
    return 1;
}

/* Where embeddings go: printed at the output precision as they come, or held to the end, when the
 * int8/uint8 ranges come from the inputs themselves or `uform calibrate` writes them. */
typedef struct uform_sink_t {
    char const *verb, *ranges_path; /* ranges_path: calibrate's --output */
    uform_output_precision_t precision;
    size_t width;
    int hold;
    uform_ranges_t ranges; /* from --calibration, or computed from the held embeddings */
    float *held;
    size_t held_count, held_capacity;
} uform_sink_t;

/* Reads a `uform calibrate` file into `ranges` (allocated here) for embeddings of `width`. */
static int uform_read_ranges_(char const *path, size_t width, uform_ranges_t *ranges) {
    json_error_t error;
    json_t *root = json_load_file(path, 0, &error);
    if (!root) {
        fprintf(stderr, "uform encode: --calibration %s: %s\n", path, error.text);
        return 0;
    }
    json_t *minimums = json_object_get(root, "minimums"), *maximums = json_object_get(root, "maximums");
    int good = json_is_array(minimums) && json_is_array(maximums) && json_array_size(minimums) == json_array_size(maximums);
    for (size_t i = 0; good && i < json_array_size(minimums); ++i)
        good = json_is_number(json_array_get(minimums, i)) && json_is_number(json_array_get(maximums, i));
    if (!good) fprintf(stderr, "uform encode: --calibration %s: needs arrays \"minimums\" and \"maximums\" of one length, of numbers\n", path);
    else if (json_array_size(minimums) != width)
        fprintf(stderr, "uform encode: --calibration %s holds ranges of width %zu; the embeddings are %zu wide (--width)\n", path,
                json_array_size(minimums), width), good = 0;
    if (good) {
        ranges->width = width;
        ranges->minimums = malloc(width * sizeof(float)), ranges->maximums = malloc(width * sizeof(float));
        good = ranges->minimums && ranges->maximums;
        for (size_t i = 0; good && i < width; ++i)
            ranges->minimums[i] = (float)json_number_value(json_array_get(minimums, i)),
            ranges->maximums[i] = (float)json_number_value(json_array_get(maximums, i));
    }
    json_decref(root);
    return good;
}

static int uform_sink_open_(uform_options_t const *options, char const *verb, size_t width, uform_sink_t *sink) {
    *sink = (uform_sink_t){.verb = verb, .width = width};
    if (!strcmp(verb, "calibrate")) {
        sink->ranges_path = options->output, sink->hold = 1;
        return 1;
    }
    if (options->output_precision && uform_output_precision_parse(options->output_precision, &sink->precision) != uform_ok_k) {
        fprintf(stderr, "uform encode: --output-precision is float32, int8, uint8, binary or ubinary, not '%s'\n",
                options->output_precision);
        return 0;
    }
    int integers = sink->precision == uform_output_int8_k || sink->precision == uform_output_uint8_k;
    if (options->calibration && !integers) {
        fprintf(stderr, "uform encode: --calibration holds int8/uint8 ranges; --output-precision %s takes none\n",
                uform_output_precision_name(sink->precision));
        return 0;
    }
    if (options->calibration) return uform_read_ranges_(options->calibration, width, &sink->ranges);
    sink->hold = integers;
    return 1;
}

/* Prints `count` embeddings at the sink's precision, one JSON array a line. */
static uform_status_t uform_sink_print_(uform_sink_t const *sink, float const *embeddings, size_t count) {
    if (sink->precision == uform_output_float32_k) {
        for (size_t i = 0; i < count; ++i) {
            putchar('[');
            for (size_t j = 0; j < sink->width; ++j) printf("%s%.7g", j ? ", " : "", embeddings[i * sink->width + j]);
            puts("]");
        }
        return uform_ok_k;
    }
    size_t bytes = 0;
    uform_status_t status = uform_output_bytes(sink->precision, sink->width, &bytes);
    uint8_t *quantized = status == uform_ok_k ? malloc(count * bytes) : NULL;
    if (status != uform_ok_k || !quantized) return status != uform_ok_k ? status : uform_out_of_memory_k;
    status = uform_quantize(embeddings, count, sink->width, sink->precision, &sink->ranges, quantized);
    int is_signed = sink->precision == uform_output_int8_k || sink->precision == uform_output_binary_k;
    for (size_t i = 0; status == uform_ok_k && i < count; ++i) {
        putchar('[');
        for (size_t j = 0; j < bytes; ++j)
            printf("%s%d", j ? ", " : "", is_signed ? (int)(int8_t)quantized[i * bytes + j] : (int)quantized[i * bytes + j]);
        puts("]");
    }
    free(quantized);
    return status;
}

static uform_status_t uform_sink_put_(uform_sink_t *sink, float const *embeddings, size_t count) {
    if (!sink->hold) return uform_sink_print_(sink, embeddings, count);
    if (sink->held_count + count > sink->held_capacity) {
        size_t capacity = 2 * (sink->held_count + count);
        float *held = realloc(sink->held, capacity * sink->width * sizeof(float));
        if (!held) return uform_out_of_memory_k;
        sink->held = held, sink->held_capacity = capacity;
    }
    memcpy(sink->held + sink->held_count * sink->width, embeddings, count * sink->width * sizeof(float));
    sink->held_count += count;
    return uform_ok_k;
}

/* Writes the calibration file of the held embeddings through a temporary name, whole or not at all. */
static int uform_write_ranges_(uform_sink_t const *sink, char const *model) {
    json_t *root = json_object(), *minimums = json_array(), *maximums = json_array();
    for (size_t i = 0; i < sink->width; ++i)
        json_array_append_new(minimums, json_real(sink->ranges.minimums[i])),
            json_array_append_new(maximums, json_real(sink->ranges.maximums[i]));
    json_object_set_new(root, "model", json_string(model));
    json_object_set_new(root, "width", json_integer((json_int_t)sink->width));
    json_object_set_new(root, "count", json_integer((json_int_t)sink->held_count));
    json_object_set_new(root, "minimums", minimums);
    json_object_set_new(root, "maximums", maximums);
    size_t length = strlen(sink->ranges_path) + 8;
    char *temporary = malloc(length);
    int written = temporary && (snprintf(temporary, length, "%s.part", sink->ranges_path), 1) &&
                  json_dump_file(root, temporary, JSON_INDENT(1)) == 0 && rename(temporary, sink->ranges_path) == 0;
    if (!written) fprintf(stderr, "uform calibrate: %s: cannot write\n", sink->ranges_path);
    if (!written && temporary) remove(temporary);
    free(temporary);
    json_decref(root);
    return written;
}

/* The end of the input: the held embeddings calibrate, then print or become the ranges file. */
static int uform_sink_finish_(uform_sink_t *sink, char const *model) {
    if (!sink->hold) return 0;
    if (!sink->held_count) {
        fprintf(stderr, "uform %s: no inputs to calibrate on\n", sink->verb);
        return 1;
    }
    sink->ranges = (uform_ranges_t){malloc(sink->width * sizeof(float)), malloc(sink->width * sizeof(float)), sink->width};
    if (!sink->ranges.minimums || !sink->ranges.maximums) return uform_out_of_memory_();
    uform_status_t status = uform_calibrate(sink->held, sink->held_count, sink->width, &sink->ranges);
    if (status != uform_ok_k) return uform_report_(status);
    if (sink->ranges_path) return uform_write_ranges_(sink, model) ? 0 : 1;
    return uform_report_(uform_sink_print_(sink, sink->held, sink->held_count));
}

static void uform_sink_close_(uform_sink_t *sink) {
    free(sink->held), free(sink->ranges.minimums), free(sink->ranges.maximums);
}

/* Embeds the media files `paths` of media index `media` (video at `fps`, 0: 25) into
 * `embeddings[count * width]`, a few at a time. */
static uform_status_t uform_encode_files_(uform_model_t *model, int media, char const *const *paths, size_t count,
                                          double fps, size_t width, float *embeddings) {
    enum { batch_k = 16 };
    uform_image_t images[batch_k];
    uform_pixels_t pixels[batch_k];
    uform_audio_clip_t clips[batch_k];
    uform_audio_t audio[batch_k];
    uform_video_clip_t videos[batch_k];
    uform_status_t status = uform_ok_k;
    for (size_t first = 0; status == uform_ok_k && first < count; first += batch_k) {
        size_t batch = count - first < batch_k ? count - first : batch_k, read = 0;
        for (; status == uform_ok_k && read < batch; ++read) {
            char const *path = paths[first + read];
            if (media == uform_cell_image_k - uform_cell_image_k) {
                status = uform_image_read(path, &pixels[read]);
                images[read] = (uform_image_t){.pixels = pixels[read], .name = path};
            } else if (media == uform_cell_audio_k - uform_cell_image_k) {
                status = uform_audio_read(path, (double)uform_audio_frames_k * uform_audio_frame_length_k / uform_audio_rate_k, &audio[read]);
                clips[read] = (uform_audio_clip_t){.samples = audio[read].samples, .count = audio[read].count, .name = path};
            } else {
                status = uform_video_read(path, fps, uform_video_tubes_k * uform_tube_depth_k, &videos[read].video);
                videos[read].name = path;
            }
        }
        if (status != uform_ok_k) read--; /* the failed one holds nothing */
        float *out = embeddings + first * width;
        if (status == uform_ok_k)
            status = media == 0   ? uform_encode_images(model, images, batch, width, out)
                     : media == 2 ? uform_encode_audio(model, clips, batch, width, out)
                                  : uform_encode_video(model, videos, batch, width, out);
        for (size_t i = 0; i < read; ++i) {
            if (media == 0) uform_pixels_free(&pixels[i]);
            else if (media == 2) uform_audio_free(&audio[i]);
            else uform_video_free(&videos[i].video);
        }
    }
    return status;
}

/* --records: each line a JSON object with "text" or a media key ("image", "video", "audio");
 * embeddings go to the sink in input order. */
static int uform_encode_records_(uform_model_t *model, uform_text_t const *lines, size_t count, double fps, uform_sink_t *sink) {
    size_t width = sink->width, slots = count ? count : 1;
    float *embeddings = malloc(slots * width * sizeof(float)), *ordered = malloc(slots * width * sizeof(float));
    json_t **records = calloc(slots, sizeof(json_t *));
    char const **paths = calloc(slots * uform_media_kinds_k, sizeof(char *));
    uform_text_t *texts = calloc(slots, sizeof(uform_text_t));
    size_t *order = calloc(slots, sizeof(size_t)), text_count = 0, found[uform_media_kinds_k] = {0};
    int *kinds = calloc(slots, sizeof(int)); /* -1 a text, else the media index */
    int result = embeddings && ordered && records && paths && texts && order && kinds ? 0 : uform_out_of_memory_();
    for (size_t i = 0; !result && i < count; ++i) {
        json_error_t error;
        records[i] = json_loadb((char const *)lines[i].data, lines[i].length, 0, &error);
        json_t *text = records[i] ? json_object_get(records[i], "text") : NULL, *path = NULL;
        int sides = text != NULL;
        kinds[i] = -1;
        for (int m = 0; records[i] && m < uform_media_kinds_k; ++m)
            if (json_object_get(records[i], uform_media_keys_[m])) path = json_object_get(records[i], uform_media_keys_[m]), kinds[i] = m, sides++;
        if (!records[i] || !json_is_object(records[i]) || sides != 1 || (text && !json_is_string(text)) ||
            (path && !json_is_string(path))) {
            fprintf(stderr, "uform %s: line %zu of standard input is not a record {\"text\": ...}, {\"image\": PATH}, "
                            "{\"video\": PATH} or {\"audio\": PATH}%s%s\n",
                    sink->verb, i + 1, records[i] ? "" : ": ", records[i] ? "" : error.text);
            result = 1;
        } else if (text && !json_string_length(text)) {
            fprintf(stderr, "uform %s: line %zu of standard input has an empty text: nothing to encode\n", sink->verb, i + 1);
            result = 1;
        } else if (path) {
            order[i] = found[kinds[i]], paths[kinds[i] * slots + found[kinds[i]]++] = json_string_value(path);
        } else {
            order[i] = text_count;
            texts[text_count++] = (uform_text_t){(uint8_t const *)json_string_value(text), json_string_length(text)};
        }
    }
    /* The texts' embeddings first, then each media kind's. */
    float *starts[uform_media_kinds_k + 1] = {embeddings};
    size_t offset = text_count;
    for (int m = 0; m < uform_media_kinds_k; ++m) starts[m + 1] = embeddings + offset * width, offset += found[m];
    size_t truncated = 0;
    if (!result && text_count) result = uform_report_(uform_encode(model, texts, text_count, width, embeddings, &truncated));
    for (int m = 0; !result && m < uform_media_kinds_k; ++m)
        if (found[m]) result = uform_report_(uform_encode_files_(model, m, paths + m * slots, found[m], fps, width, starts[m + 1]));
    for (size_t i = 0; !result && i < count; ++i)
        memcpy(ordered + i * width, starts[kinds[i] + 1] + order[i] * width, width * sizeof(float));
    if (!result && count) result = uform_report_(uform_sink_put_(sink, ordered, count));
    if (!result && truncated)
        fprintf(stderr, "uform %s: %zu of %zu texts were longer than a row and were cut\n", sink->verb, truncated, text_count);
    for (size_t i = 0; records && i < count; ++i) json_decref(records[i]);
    free(embeddings), free(ordered), free(records), free(paths), free(texts), free(order), free(kinds);
    return result;
}

/* Standard input's lines, a batch at a time, into the sink. */
static int uform_encode_lines_(uform_model_t *model, uform_text_t const *texts, size_t count, uform_sink_t *sink) {
    enum { batch_k = 256 };
    size_t truncated = 0;
    float *embeddings = malloc(batch_k * sink->width * sizeof(float));
    int result = embeddings ? 0 : uform_out_of_memory_();
    for (size_t first = 0; !result && first < count; first += batch_k) {
        size_t batch = count - first < batch_k ? count - first : batch_k, cut = 0;
        uform_status_t status = uform_encode(model, texts + first, batch, sink->width, embeddings, &cut);
        if (status == uform_ok_k) status = uform_sink_put_(sink, embeddings, batch);
        result = uform_report_(status);
        truncated += cut;
    }
    if (truncated) fprintf(stderr, "uform %s: %zu of %zu texts were longer than a row and were cut\n", sink->verb, truncated, count);
    free(embeddings);
    return result;
}

/* `uform encode` and `uform calibrate`: the same inputs, printed or summarized into ranges. */
static int uform_encode_(uform_options_t const *options, char const *verb) {
    if (!uform_require_(options->model, "--model", verb)) return 2;
    if (!strcmp(verb, "calibrate") && !uform_require_(options->output, "--output", verb)) return 2;
    int media = -1, ways = options->records;
    for (int m = 0; m < uform_media_kinds_k; ++m)
        if (options->files_count[m]) media = m, ways++;
    if (ways > 1) {
        fprintf(stderr, "uform %s: --image, --video, --audio and --records are ways in; give one\n", verb);
        return 2;
    }
    if (options->fps && media != uform_cell_video_k - uform_cell_image_k && !options->records) {
        fprintf(stderr, "uform %s: --fps is the sampling rate of --video (and of video records)\n", verb);
        return 2;
    }
    uform_model_t *model = NULL;
    uform_status_t status = uform_open_(options, &model);
    if (status != uform_ok_k) return uform_report_(status);
    uform_config_t config;
    uform_model_config(model, &config);
    size_t width = options->width ? options->width : config.embedding_widths[config.embedding_widths_count - 1];
    uform_sink_t sink;
    int result = uform_sink_open_(options, verb, width, &sink) ? 0 : 2;
    char *buffer = NULL;
    uform_text_t *lines = NULL;
    size_t count = 0;
    if (!result && media >= 0) {
        size_t files = options->files_count[media];
        float *embeddings = malloc(files * width * sizeof(float));
        status = !embeddings ? uform_out_of_memory_k
                             : uform_encode_files_(model, media, (char const *const *)options->files[media], files, options->fps,
                                                   width, embeddings);
        if (status == uform_ok_k) status = uform_sink_put_(&sink, embeddings, files);
        result = uform_report_(status);
        free(embeddings);
    } else if (!result) {
        result = uform_read_lines_(&buffer, &lines, &count) ? 0 : uform_out_of_memory_();
        if (!result && options->records) result = uform_encode_records_(model, lines, count, options->fps, &sink);
        else if (!result) result = uform_check_lines_(lines, count, verb) ? uform_encode_lines_(model, lines, count, &sink) : 1;
    }
    if (!result) result = uform_sink_finish_(&sink, options->model);
    uform_sink_close_(&sink);
    free(lines);
    free(buffer);
    uform_model_close(model);
    return result;
}

static int uform_rerank_(uform_options_t const *options) {
    if (!uform_require_(options->model, "--model", "rerank") || !uform_require_(options->query, "--query", "rerank")) return 2;
    if (!options->query[0]) {
        fprintf(stderr, "uform rerank: the query is empty\n");
        return 2;
    }
    if (options->fuse_gate && !(options->fuse > 0)) {
        fprintf(stderr, "uform rerank: --fuse-gate needs --fuse\n");
        return 2;
    }
    uform_model_t *model = NULL;
    char *buffer = NULL;
    uform_text_t *texts = NULL;
    size_t count = 0, truncated = 0;
    uform_status_t status;
    int result = uform_open_and_read_(options, "rerank", &model, &buffer, &texts, &count);
    float *scores = result || !count ? NULL : malloc(count * sizeof(float));
    uform_text_t query = {(uint8_t const *)options->query, strlen(options->query)};
    if (scores) {
        status = options->fuse > 0
                     ? uform_rerank_gated(model, query, texts, count, options->fuse, options->fuse_gate, scores, &truncated)
                     : uform_rerank(model, query, texts, count, scores, &truncated);
        result = uform_report_(status);
        for (size_t i = 0; !result && i < count; ++i) printf("%.7g\n", scores[i]);
        if (!result && truncated) fprintf(stderr, "uform rerank: %zu texts were longer than a row and were cut\n", truncated);
    }
    free(scores);
    free(texts);
    free(buffer);
    uform_model_close(model);
    return result;
}

/* `uform decode`: one file decoded as the encoder reads it, summarized on one line. */
static int uform_decode_(uform_options_t const *options) {
    size_t files = options->files_count[uform_cell_audio_k - uform_cell_image_k] + options->files_count[uform_cell_video_k - uform_cell_image_k];
    if (files != 1) {
        fprintf(stderr, "uform decode: give one of --audio FILE and --video FILE (see uform decode --help)\n");
        return 2;
    }
    if (options->audio && options->fps) {
        fprintf(stderr, "uform decode: --fps is the sampling rate of --video\n");
        return 2;
    }
    json_t *summary = NULL;
    if (options->audio) {
        uform_audio_t audio;
        uform_status_t status = uform_audio_read(options->audio, 0, &audio);
        if (status != uform_ok_k) return uform_report_(status);
        size_t frames = (audio.count + uform_audio_frame_length_k - 1) / uform_audio_frame_length_k;
        summary = json_pack("{s:s, s:s, s:f, s:I, s:i, s:I, s:I, s:I, s:I}", "file", options->audio, "kind", "audio", "seconds",
                            (double)audio.count / uform_audio_rate_k, "samples", (json_int_t)audio.count, "rate", uform_audio_rate_k,
                            "source_rate", (json_int_t)audio.source_rate, "source_channels", (json_int_t)audio.source_channels,
                            "frames", (json_int_t)frames, "cells", (json_int_t)(frames < uform_audio_frames_k ? frames : uform_audio_frames_k));
        uform_audio_free(&audio);
    } else {
        uform_video_t video;
        uform_status_t status = uform_video_read(options->video, options->fps, 0, &video);
        if (status != uform_ok_k) return uform_report_(status);
        size_t steps, rows, columns;
        uform_video_grid(video.frames, video.height, video.width, 0, &steps, &rows, &columns);
        summary = json_pack("{s:s, s:s, s:f, s:I, s:f, s:I, s:I, s:I, s:I, s:I, s:I}", "file", options->video, "kind", "video",
                            "seconds", (double)video.frames / video.fps, "frames", (json_int_t)video.frames, "fps", video.fps,
                            "width", (json_int_t)video.width, "height", (json_int_t)video.height, "steps", (json_int_t)steps,
                            "rows", (json_int_t)rows, "columns", (json_int_t)columns, "cells", (json_int_t)(steps * rows * columns));
        uform_video_free(&video);
    }
    char *line = summary ? json_dumps(summary, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6)) : NULL;
    json_decref(summary);
    if (!line) return uform_out_of_memory_();
    printf("%s\n", line);
    free(line);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        fputs(uform_usage_, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("uform %s\n", uform_version());
        return 0;
    }
    if (!strcmp(argv[1], "serve")) return uform_serve(argc, argv);
    uform_options_t options = {0};
    struct {
        char const *verb, *usage, *flags;
    } const verbs[] = {
        {"init", uform_init_usage_, "--tier --seed --output --frontends"},
        {"info", uform_info_usage_, "--model"},
        {"shard", uform_shard_usage_, "--model --output --max-shard-mb --store"},
        {"grow", uform_grow_usage_, "--model --output --deepen --widen --threads"},
        {"encode", uform_encode_usage_,
         "--model --width --threads --precision --device --image --video --audio --fps --records --output-precision --calibration"},
        {"calibrate", uform_calibrate_usage_,
         "--model --width --threads --precision --device --image --video --audio --fps --records --output"},
        {"rerank", uform_rerank_usage_, "--model --query --fuse --fuse-gate --threads --precision --device"},
        {"decode", uform_decode_usage_, "--audio --video --fps"},
    };
    for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); ++i) {
        if (strcmp(argv[1], verbs[i].verb)) continue;
        if (!uform_parse_(argc, argv, verbs[i].flags, &options)) return 2;
        if (options.help) {
            fputs(verbs[i].usage, stdout);
            return 0;
        }
        if (!strcmp(argv[1], "init")) return uform_init_(argc, argv, &options);
        if (!strcmp(argv[1], "info")) return uform_info_(&options);
        if (!strcmp(argv[1], "shard")) return uform_shard_(&options);
        if (!strcmp(argv[1], "grow")) return uform_grow_(argc, argv, &options);
        if (!strcmp(argv[1], "encode") || !strcmp(argv[1], "calibrate")) return uform_encode_(&options, argv[1]);
        if (!strcmp(argv[1], "decode")) return uform_decode_(&options);
        return uform_rerank_(&options);
    }
    fprintf(stderr, "uform: unknown verb '%s'\n\n%s", argv[1], uform_usage_);
    return 2;
}
