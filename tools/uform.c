/*  uform.c: the `uform` command: init, info, encode and rerank over the C ABI. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "uform/uform.h"

static char const *const uform_usage_ =
    "usage: uform VERB [options]   (uform VERB --help for a verb's options)\n"
    "\n"
    "verbs:\n"
    "  init     write a randomly initialized checkpoint\n"
    "  info     print a checkpoint's configuration and parameter count\n"
    "  encode   embed one text per line of standard input\n"
    "  rerank   score one document per line of standard input against a query (MaxSim)\n";

static char const *const uform_init_usage_ =
    "usage: uform init --tier TIER --output DIR [--seed S] [--frontends LIST]\n"
    "\n"
    "Writes DIR/model.safetensors and DIR/README.md, initialized as docs/checkpoints.md says.\n"
    "  --tier TIER       tiny, small, medium, large, xl, or WIDTHxDEPTH such as 128x2\n"
    "  --seed S          random seed (default 0)\n"
    "  --output DIR      checkpoint folder, created if absent\n"
    "  --frontends LIST  media frontends to attach beside the bytes, comma-separated: vision\n";

static char const *const uform_info_usage_ =
    "usage: uform info --model DIR\n"
    "\n"
    "Prints the configuration, the heads and frontends present and the parameter count as JSON.\n";

static char const *const uform_encode_usage_ =
    "usage: uform encode --model DIR [--image FILE...] [--records] [--width M] [--threads N]\n"
    "                    [--precision bf16|f32] [--device cpu|cuda]\n"
    "\n"
    "Reads one UTF-8 text per line on standard input and prints one JSON array of M floats per line:\n"
    "the L2-normalized Matryoshka embedding. Texts longer than a row (4096 bytes) are cut; a count\n"
    "of cut texts goes to standard error. An empty line is an error. Images (PNG, JPEG, WebP; the\n"
    "model needs the vision frontend) embed into the same space, on either device:\n"
    "  --image FILE...    embed these image files instead of standard input, one line each, in order\n"
    "  --records          read JSON records instead of lines: {\"text\": \"...\"} or {\"image\": \"PATH\"}\n"
    "                     (a path relative to the working folder), one per line, in order\n"
    "  --model DIR        checkpoint folder\n"
    "  --width M          one of the model's embedding widths (default: the widest)\n"
    "  --threads N        worker threads (default: all cores)\n"
    "  --precision P      bf16 (default, fast) or f32 (products in Float32)\n"
    "  --device D         cpu (default) or cuda: the GPU (BF16 activations, Float32 accumulation;\n"
    "                     agrees with the CPU's bf16 within the bound of docs/cuda.md)\n";

static char const *const uform_rerank_usage_ =
    "usage: uform rerank --model DIR --query TEXT [--threads N] [--precision bf16|f32] [--device cpu|cuda]\n"
    "\n"
    "Reads one document per line on standard input and prints one MaxSim score per line: the sum\n"
    "over query bytes of the best cosine among the document's bytes (ColBERT-style late interaction).\n"
    "  --model DIR        checkpoint folder\n"
    "  --query TEXT       the query\n"
    "  --threads N        worker threads (default: all cores)\n"
    "  --precision P      bf16 (default) or f32\n"
    "  --device D         cpu (default) or cuda: the encoder on the GPU, MaxSim on the CPU\n";

typedef struct {
    char const *tier, *output, *model, *query, *precision, *device, *frontends;
    char **images; /* --image's files, in argv */
    size_t images_count;
    unsigned long long seed;
    size_t width, threads;
    int help, records;
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
        if (!strcmp(flag, "--records")) {
            options->records = 1;
            continue;
        }
        if (!strcmp(flag, "--image")) { /* every argument up to the next flag is a file */
            options->images = argv + i + 1;
            while (i + 1 < argc && strncmp(argv[i + 1], "--", 2)) i++, options->images_count++;
            if (!options->images_count) {
                fprintf(stderr, "uform %s: --image needs at least one file\n", argv[1]);
                return 0;
            }
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
        else if (!strcmp(flag, "--device")) {
            if (strcmp(value, "cpu") && strcmp(value, "cuda")) {
                fprintf(stderr, "uform %s: --device is cpu or cuda, not '%s'\n", argv[1], value);
                return 0;
            }
            options->device = value;
        }
        else if (!uform_parse_number_(value, flag, &number)) return 0;
        else if (!strcmp(flag, "--seed")) options->seed = number;
        else if (!strcmp(flag, "--width")) options->width = (size_t)number;
        else if (!strcmp(flag, "--threads")) options->threads = (size_t)number;
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
        if (strcmp(frontend, "vision")) {
            fprintf(stderr, "uform init: --frontends takes vision (video and audio come later), not '%s'\n", frontend);
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
        if (!strcmp(options->precision, "f32")) status = uform_model_set_precision(*model, uform_precision_f32_k);
        else if (strcmp(options->precision, "bf16")) {
            fprintf(stderr, "uform: --precision is bf16 or f32, not '%s'\n", options->precision);
            return uform_invalid_argument_k;
        }
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

static void uform_print_embedding_(float const *embedding, size_t width) {
    putchar('[');
    for (size_t j = 0; j < width; ++j) printf("%s%.7g", j ? ", " : "", embedding[j]);
    puts("]");
}

/* Embeds the image files `paths` into `embeddings[count * width]`, a few at a time. */
static uform_status_t uform_encode_files_(uform_model_t *model, char const *const *paths, size_t count, size_t width,
                                          float *embeddings) {
    enum { batch_k = 16 };
    uform_image_t images[batch_k];
    uform_pixels_t pixels[batch_k];
    uform_status_t status = uform_ok_k;
    for (size_t first = 0; status == uform_ok_k && first < count; first += batch_k) {
        size_t batch = count - first < batch_k ? count - first : batch_k, read = 0;
        for (; status == uform_ok_k && read < batch; ++read) {
            status = uform_image_read(paths[first + read], &pixels[read]);
            images[read] = (uform_image_t){.pixels = pixels[read], .name = paths[first + read]};
        }
        if (status != uform_ok_k) read--; /* the failed one holds nothing */
        if (status == uform_ok_k) status = uform_encode_images(model, images, batch, width, embeddings + first * width);
        for (size_t i = 0; i < read; ++i) uform_pixels_free(&pixels[i]);
    }
    return status;
}

/* --records: each line a JSON object with "text" or "image"; embeddings printed in input order. */
static int uform_encode_records_(uform_model_t *model, uform_text_t const *lines, size_t count, size_t width) {
    float *embeddings = malloc((count ? count : 1) * width * sizeof(float));
    json_t **records = calloc(count ? count : 1, sizeof(json_t *));
    char const **paths = calloc(count ? count : 1, sizeof(char *));
    uform_text_t *texts = calloc(count ? count : 1, sizeof(uform_text_t));
    size_t *order = calloc(count ? count : 1, sizeof(size_t)), images = 0, text_count = 0;
    int result = embeddings && records && paths && texts && order ? 0 : uform_out_of_memory_();
    for (size_t i = 0; !result && i < count; ++i) {
        json_error_t error;
        records[i] = json_loadb((char const *)lines[i].data, lines[i].length, 0, &error);
        json_t *text = records[i] ? json_object_get(records[i], "text") : NULL, *image = records[i] ? json_object_get(records[i], "image") : NULL;
        if (!records[i] || !json_is_object(records[i]) || (!text == !image) || (text && !json_is_string(text)) ||
            (image && !json_is_string(image))) {
            fprintf(stderr, "uform encode: line %zu of standard input is not a record {\"text\": ...} or {\"image\": PATH}%s%s\n",
                    i + 1, records[i] ? "" : ": ", records[i] ? "" : error.text);
            result = 1;
        } else if (text && !json_string_length(text)) {
            fprintf(stderr, "uform encode: line %zu of standard input has an empty text: nothing to encode\n", i + 1);
            result = 1;
        } else if (image) {
            order[i] = images, paths[images++] = json_string_value(image);
        } else {
            order[i] = text_count;
            texts[text_count++] = (uform_text_t){(uint8_t const *)json_string_value(text), json_string_length(text)};
        }
    }
    float *text_embeddings = embeddings, *image_embeddings = embeddings + text_count * width;
    size_t truncated = 0;
    if (!result && text_count) result = uform_report_(uform_encode(model, texts, text_count, width, text_embeddings, &truncated));
    if (!result && images) result = uform_report_(uform_encode_files_(model, paths, images, width, image_embeddings));
    for (size_t i = 0; !result && i < count; ++i)
        uform_print_embedding_((json_object_get(records[i], "image") ? image_embeddings : text_embeddings) + order[i] * width, width);
    if (!result && truncated) fprintf(stderr, "uform encode: %zu of %zu texts were longer than a row and were cut\n", truncated, text_count);
    for (size_t i = 0; records && i < count; ++i) json_decref(records[i]);
    free(embeddings), free(records), free(paths), free(texts), free(order);
    return result;
}

static int uform_encode_(uform_options_t const *options) {
    if (!uform_require_(options->model, "--model", "encode")) return 2;
    if (options->images_count && options->records) {
        fprintf(stderr, "uform encode: --image and --records are two ways in; give one\n");
        return 2;
    }
    if (options->images_count || options->records) {
        uform_model_t *model = NULL;
        uform_status_t status = uform_open_(options, &model);
        if (status != uform_ok_k) return uform_report_(status);
        uform_config_t config;
        uform_model_config(model, &config);
        size_t width = options->width ? options->width : config.embedding_widths[config.embedding_widths_count - 1];
        int result = 0;
        if (options->images_count) {
            float *embeddings = malloc(options->images_count * width * sizeof(float));
            result = !embeddings ? uform_out_of_memory_()
                                 : uform_report_(uform_encode_files_(model, (char const *const *)options->images,
                                                                     options->images_count, width, embeddings));
            for (size_t i = 0; !result && i < options->images_count; ++i) uform_print_embedding_(embeddings + i * width, width);
            free(embeddings);
        } else {
            char *buffer = NULL;
            uform_text_t *lines = NULL;
            size_t count = 0;
            result = uform_read_lines_(&buffer, &lines, &count) ? uform_encode_records_(model, lines, count, width)
                                                                  : uform_out_of_memory_();
            free(lines);
            free(buffer);
        }
        uform_model_close(model);
        return result;
    }
    uform_model_t *model = NULL;
    char *buffer = NULL;
    uform_text_t *texts = NULL;
    size_t count = 0, truncated = 0;
    uform_status_t status;
    int result = uform_open_and_read_(options, "encode", &model, &buffer, &texts, &count);
    size_t width = options->width;
    if (!result && !width) { /* the model's full width; read only from a model that opened */
        uform_config_t config;
        uform_model_config(model, &config);
        width = config.embedding_widths[config.embedding_widths_count - 1];
    }
    enum { batch_k = 256 };
    float *embeddings = result ? NULL : malloc(batch_k * width * sizeof(float));
    for (size_t first = 0; !result && first < count; first += batch_k) {
        size_t batch = count - first < batch_k ? count - first : batch_k, cut = 0;
        status = uform_encode(model, texts + first, batch, width, embeddings, &cut);
        if (status != uform_ok_k) {
            result = uform_report_(status);
            break;
        }
        truncated += cut;
        for (size_t i = 0; i < batch; ++i) uform_print_embedding_(embeddings + i * width, width);
    }
    if (truncated) fprintf(stderr, "uform encode: %zu of %zu texts were longer than a row and were cut\n", truncated, count);
    free(embeddings);
    free(texts);
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
    uform_model_t *model = NULL;
    char *buffer = NULL;
    uform_text_t *texts = NULL;
    size_t count = 0, truncated = 0;
    uform_status_t status;
    int result = uform_open_and_read_(options, "rerank", &model, &buffer, &texts, &count);
    float *scores = result || !count ? NULL : malloc(count * sizeof(float));
    uform_text_t query = {(uint8_t const *)options->query, strlen(options->query)};
    if (scores) {
        status = uform_rerank(model, query, texts, count, scores, &truncated);
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

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        fputs(uform_usage_, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("uform %s\n", uform_version());
        return 0;
    }
    uform_options_t options = {0};
    struct {
        char const *verb, *usage, *flags;
    } const verbs[] = {
        {"init", uform_init_usage_, "--tier --seed --output --frontends"},
        {"info", uform_info_usage_, "--model"},
        {"encode", uform_encode_usage_, "--model --width --threads --precision --device --image --records"},
        {"rerank", uform_rerank_usage_, "--model --query --threads --precision --device"},
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
        if (!strcmp(argv[1], "encode")) return uform_encode_(&options);
        return uform_rerank_(&options);
    }
    fprintf(stderr, "uform: unknown verb '%s'\n\n%s", argv[1], uform_usage_);
    return 2;
}
