/*  serve.c: `uform serve`, an HTTP server over the C ABI on libmicrohttpd: OpenAI's embeddings,
 *  Cohere/Jina's rerank, health and Prometheus metrics. Connections queue jobs; worker threads, one
 *  context each over one model, take batches of queued embedding jobs under a byte budget, run one
 *  encode over them and hand each job its rows (docs/server.md).
 */
#include "serve.h"

#include <stdio.h>
#include <string.h>

static char const *const uform_serve_usage_ =
    "usage: uform serve [--model DIR] [--host 127.0.0.1] [--port 8080] [--workers N] [--threads N]\n"
    "                   [--api-key KEY] [--max-request-bytes N] [--batch-bytes N] [--timeout S]\n"
    "                   [--connections N] [--drain-seconds S] [--name NAME] [--precision bf16|e4m3|int8|f32]\n"
    "                   [--device cpu|cuda] [--verbose]\n"
    "\n"
    "Serves the model over HTTP (docs/server.md): POST /v1/embeddings (OpenAI's shape), POST /v1/rerank\n"
    "(Cohere/Jina's shape), GET /health, GET /metrics (Prometheus text). Tokens are bytes: usage counts\n"
    "the UTF-8 bytes of the inputs. SIGTERM or SIGINT stops accepting, lets in-flight requests finish,\n"
    "then exits 0.\n"
    "  --model DIR            checkpoint folder (needs the pool head; /v1/rerank needs the rerank head);\n"
    "                         default: the shipped models/default of the source tree this was built from\n"
    "  --host ADDRESS         address to listen on (default 127.0.0.1; 0.0.0.0 or :: for every interface)\n"
    "  --port N               TCP port (default 8080; 0: any free port, printed on standard error)\n"
    "  --workers N            worker threads, each with its own context over the one model (default 2)\n"
    "  --threads N            host threads of each worker's context (default: cores / workers, at least 1)\n"
    "  --api-key KEY          require 'Authorization: Bearer KEY' on /v1/ routes (or env UFORM_API_KEY)\n"
    "  --max-request-bytes N  largest request body; larger ones get 413 unread (default 8388608)\n"
    "  --batch-bytes N        byte budget of one batch: a worker joins queued embedding requests of one\n"
    "                         width until their texts (each cut to a row) exceed it (default 65536;\n"
    "                         0: no batching, one request per encode)\n"
    "  --timeout S            seconds an idle or stalled connection is kept (default 30)\n"
    "  --connections N        most connections at once, each served by its own thread (default 256)\n"
    "  --drain-seconds S      on SIGTERM, the longest wait for in-flight requests (default 30)\n"
    "  --name NAME            the model name answered when a request names none (default: DIR's name)\n"
    "  --precision P          bf16 (default), e4m3, int8 (CPU only) or f32 (docs/precision.md)\n"
    "  --device D             cpu (default) or cuda: every worker's context on the GPU\n"
    "  --fuse W               /v1/rerank ranks by (1 - W) pooled cosine + W symmetric MaxSim (default 0.5,\n"
    "                         the weight that ranks best on the shipped model's dev pairs; 0: MaxSim from the\n"
    "                         query's side alone, the rerank head's own score; docs/server.md)\n"
    "  --fuse-gate L          with --fuse W > 0: a document shorter than L bytes, for a query shorter too, is\n"
    "                         ranked by its cosine alone (default 64, chosen on the shipped model's dev pairs,\n"
    "                         where MaxSim of two short strings ranks worse than their cosine; 0: none)\n"
    "  --verbose              one line per request on standard error\n";

#ifndef UFORM_HAVE_MICROHTTPD

int uform_serve(int argc, char **argv) {
    for (int i = 2; i < argc; ++i)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return fputs(uform_serve_usage_, stdout), 0;
    fprintf(stderr, "uform serve: this uform was built without libmicrohttpd, so it has no HTTP server: install\n"
                    "libmicrohttpd-dev (scripts/setup.sh does) and configure and build again\n");
    return 2;
}

#else

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <microhttpd.h>

#include "uform/uform.h"

typedef enum { uform_route_embeddings_k, uform_route_rerank_k, uform_route_health_k, uform_route_metrics_k,
               uform_route_other_k, uform_routes_k } uform_route_t;
static char const *const uform_route_names_[uform_routes_k] = {"/v1/embeddings", "/v1/rerank", "/health", "/metrics", "other"};
static unsigned const uform_codes_[] = {200, 400, 401, 404, 405, 413, 500, 501, 503};
enum { uform_codes_k = sizeof(uform_codes_) / sizeof(uform_codes_[0]) };
static double const uform_latency_bounds_[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
enum { uform_latency_buckets_k = sizeof(uform_latency_bounds_) / sizeof(uform_latency_bounds_[0]) };
enum { uform_batch_buckets_k = 12 }; /* powers of two 1..1024, then +Inf */

typedef enum { uform_job_embed_k, uform_job_rerank_k } uform_job_kind_t;

/* One request's work: its texts, where its outputs go, and how it ended. */
typedef struct uform_job_t {
    uform_job_kind_t kind;
    size_t width;                /* embed: the Matryoshka width */
    uform_text_t query;          /* rerank */
    uform_text_t const *texts;
    size_t count, cells;         /* cells: the texts' bytes, each cut to a row (the batch budget's unit) */
    float *outputs;              /* embed: [count * width]; rerank: [count] MaxSim (or fused) scores */
    uform_status_t status;
    char message[512];
    int done;
    pthread_cond_t finished;
    struct uform_job_t *next, *next_in_batch;
} uform_job_t;

typedef struct {
    char const *model_path, *host, *api_key, *name, *precision, *device;
    unsigned long long port, workers, threads, max_request_bytes, batch_bytes, timeout, connections, drain_seconds, fuse_gate;
    double fuse; /* /v1/rerank's weight of symmetric MaxSim beside the pooled cosine; 0: MaxSim alone */
    int verbose;
} uform_serve_options_t;

typedef struct uform_server_t uform_server_t;

typedef struct {
    uform_server_t *server;
    uform_context_t *context;
    pthread_t thread;
    uform_text_t *texts; /* a batch's texts, grown as needed */
    float *embeddings;
    size_t texts_capacity, embeddings_capacity;
} uform_worker_t;

struct uform_server_t {
    uform_serve_options_t options;
    uform_model_t *model;
    uform_config_t config;
    int has_pool, has_rerank;
    uform_worker_t *workers;
    pthread_mutex_t lock; /* guards the queue, the flags and the metrics below */
    pthread_cond_t work;
    uform_job_t *head, *tail;
    size_t queued, in_flight, idle; /* idle: workers waiting for work */
    int stopping, draining;
    unsigned long long requests[uform_routes_k][uform_codes_k], bytes_in, errors;
    unsigned long long latency_buckets[uform_latency_buckets_k + 1], latency_count;
    double latency_sum;
    unsigned long long batch_inputs[uform_batch_buckets_k], batch_requests[uform_batch_buckets_k], batches;
    unsigned long long batch_inputs_sum, batch_requests_sum;
};

/* One request between its first and last callback. */
typedef struct {
    uform_route_t route;
    char *body;
    size_t length, capacity, received;
    int too_large, answered;
    double start;
} uform_request_t;

/* A growable string for response bodies. */
typedef struct {
    char *data;
    size_t length, capacity;
    int failed;
} uform_buffer_t;

static double uform_now_(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

static void uform_reserve_(uform_buffer_t *buffer, size_t more) {
    if (buffer->failed || buffer->length + more + 1 <= buffer->capacity) return;
    size_t capacity = buffer->capacity ? buffer->capacity : 4096;
    while (capacity < buffer->length + more + 1) capacity *= 2;
    char *data = realloc(buffer->data, capacity);
    if (!data) {
        buffer->failed = 1;
        return;
    }
    buffer->data = data, buffer->capacity = capacity;
}

static void uform_append_(uform_buffer_t *buffer, char const *text, size_t length) {
    uform_reserve_(buffer, length);
    if (buffer->failed) return;
    memcpy(buffer->data + buffer->length, text, length);
    buffer->length += length;
    buffer->data[buffer->length] = 0;
}

static void uform_puts_(uform_buffer_t *buffer, char const *text) { uform_append_(buffer, text, strlen(text)); }

static void uform_printf_(uform_buffer_t *buffer, char const *format, ...) __attribute__((format(printf, 2, 3)));
static void uform_printf_(uform_buffer_t *buffer, char const *format, ...) {
    va_list arguments;
    va_start(arguments, format);
    char small[256];
    int length = vsnprintf(small, sizeof(small), format, arguments);
    va_end(arguments);
    if (length < 0) return;
    if ((size_t)length < sizeof(small)) return uform_append_(buffer, small, (size_t)length);
    uform_reserve_(buffer, (size_t)length);
    if (buffer->failed) return;
    va_start(arguments, format);
    vsnprintf(buffer->data + buffer->length, (size_t)length + 1, format, arguments);
    va_end(arguments);
    buffer->length += (size_t)length;
}

/* Appends `length` bytes of UTF-8 as a JSON string, quotes included. */
static void uform_append_string_(uform_buffer_t *buffer, char const *text, size_t length) {
    json_t *string = json_stringn(text, length);
    char *encoded = string ? json_dumps(string, JSON_ENCODE_ANY) : NULL;
    json_decref(string);
    if (!encoded && !buffer->failed) { /* not UTF-8 (a header, an argument): its ASCII, the rest as '?' */
        char *ascii = malloc(length + 1);
        for (size_t i = 0; ascii && i < length; ++i) ascii[i] = (unsigned char)text[i] < 0x80 && text[i] ? text[i] : '?';
        string = ascii ? json_stringn(ascii, length) : NULL;
        encoded = string ? json_dumps(string, JSON_ENCODE_ANY) : NULL;
        json_decref(string);
        free(ascii);
    }
    if (encoded) uform_append_(buffer, encoded, strlen(encoded));
    else buffer->failed = 1;
    free(encoded);
}

static void uform_append_base64_(uform_buffer_t *buffer, uint8_t const *bytes, size_t length) {
    static char const alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    uform_reserve_(buffer, (length + 2) / 3 * 4);
    if (buffer->failed) return;
    char *out = buffer->data + buffer->length;
    for (size_t i = 0; i < length; i += 3) {
        uint32_t triple = (uint32_t)bytes[i] << 16 | (i + 1 < length ? (uint32_t)bytes[i + 1] << 8 : 0) |
                          (i + 2 < length ? bytes[i + 2] : 0);
        *out++ = alphabet[triple >> 18 & 63], *out++ = alphabet[triple >> 12 & 63];
        *out++ = i + 1 < length ? alphabet[triple >> 6 & 63] : '=';
        *out++ = i + 2 < length ? alphabet[triple & 63] : '=';
    }
    buffer->length = (size_t)(out - buffer->data);
    buffer->data[buffer->length] = 0;
}

/* The bucket of a power-of-two histogram (1, 2, 4, ..., 1024, +Inf) that holds `value`. */
static size_t uform_batch_bucket_(size_t value) {
    size_t bucket = 0;
    while (bucket + 1 < uform_batch_buckets_k && ((size_t)1 << bucket) < value) bucket++;
    return bucket;
}

/* The workers */

static uform_status_t uform_worker_grow_(uform_worker_t *worker, size_t texts, size_t floats) {
    if (texts > worker->texts_capacity) {
        uform_text_t *grown = realloc(worker->texts, texts * sizeof(uform_text_t));
        if (!grown) return uform_out_of_memory_k;
        worker->texts = grown, worker->texts_capacity = texts;
    }
    if (floats > worker->embeddings_capacity) {
        float *grown = realloc(worker->embeddings, floats * sizeof(float));
        if (!grown) return uform_out_of_memory_k;
        worker->embeddings = grown, worker->embeddings_capacity = floats;
    }
    return uform_ok_k;
}

/* Runs one batch: jobs chained by next_in_batch, all embed at one width, or one rerank. */
static void uform_worker_run_(uform_worker_t *worker, uform_job_t *batch, size_t count) {
    uform_status_t status = uform_ok_k;
    if (batch->kind == uform_job_rerank_k) {
        double fuse = worker->server->options.fuse;
        status = fuse > 0 ? uform_context_rerank_gated(worker->context, batch->query, batch->texts, batch->count, fuse,
                                                       (size_t)worker->server->options.fuse_gate, batch->outputs, NULL)
                          : uform_context_rerank(worker->context, batch->query, batch->texts, batch->count, batch->outputs, NULL);
    } else if (!batch->next_in_batch) {
        status = uform_context_encode(worker->context, batch->texts, batch->count, batch->width, batch->outputs, NULL);
    } else {
        size_t width = batch->width, first = 0;
        status = uform_worker_grow_(worker, count, count * width);
        for (uform_job_t *job = batch; status == uform_ok_k && job; first += job->count, job = job->next_in_batch)
            memcpy(worker->texts + first, job->texts, job->count * sizeof(uform_text_t));
        if (status == uform_ok_k) status = uform_context_encode(worker->context, worker->texts, count, width, worker->embeddings, NULL);
        first = 0;
        for (uform_job_t *job = batch; status == uform_ok_k && job; first += job->count, job = job->next_in_batch)
            memcpy(job->outputs, worker->embeddings + first * width, job->count * width * sizeof(float));
    }
    char const *message = status == uform_ok_k ? "" : uform_last_error();
    for (uform_job_t *job = batch; job; job = job->next_in_batch) {
        job->status = status;
        snprintf(job->message, sizeof(job->message), "%s", message);
    }
}

static void *uform_worker_main_(void *argument) {
    uform_worker_t *worker = argument;
    uform_server_t *server = worker->server;
    pthread_mutex_lock(&server->lock);
    for (;;) {
        while (!server->head && !server->stopping) {
            server->idle++;
            pthread_cond_wait(&server->work, &server->lock);
            server->idle--;
        }
        if (!server->head) break;
        /* a fair share of the queue: idle workers left with nothing would leave their cores idle too */
        size_t share = (server->queued + server->idle) / (server->idle + 1);
        uform_job_t *batch = server->head, *last = batch;
        server->head = batch->next;
        batch->next_in_batch = NULL;
        size_t cells = batch->cells, count = batch->count, jobs = 1;
        if (batch->kind == uform_job_embed_k && server->options.batch_bytes) /* join compatible jobs, in queue order */
            for (uform_job_t **link = &server->head; *link && jobs < share;) {
                uform_job_t *job = *link;
                if (job->kind == uform_job_embed_k && job->width == batch->width && cells + job->cells <= server->options.batch_bytes) {
                    *link = job->next;
                    last->next_in_batch = job, last = job, job->next_in_batch = NULL;
                    cells += job->cells, count += job->count, jobs++;
                } else {
                    link = &job->next;
                }
            }
        server->tail = NULL;
        for (uform_job_t *job = server->head; job; job = job->next) server->tail = job;
        server->queued -= jobs;
        if (server->head && server->idle) pthread_cond_signal(&server->work); /* the rest is another worker's */
        server->batch_inputs[uform_batch_bucket_(count)]++, server->batch_requests[uform_batch_bucket_(jobs)]++;
        server->batches++, server->batch_inputs_sum += count, server->batch_requests_sum += jobs;
        pthread_mutex_unlock(&server->lock);
        uform_worker_run_(worker, batch, count);
        pthread_mutex_lock(&server->lock);
        for (uform_job_t *job = batch, *next; job; job = next) {
            next = job->next_in_batch; /* the job's owner may free it once signalled */
            job->done = 1;
            pthread_cond_signal(&job->finished);
        }
    }
    pthread_mutex_unlock(&server->lock);
    return NULL;
}

/* Queues a job and waits for a worker to finish it. */
static void uform_submit_(uform_server_t *server, uform_job_t *job) {
    pthread_cond_init(&job->finished, NULL);
    job->done = 0, job->next = NULL;
    pthread_mutex_lock(&server->lock);
    if (server->tail) server->tail->next = job;
    else server->head = job;
    server->tail = job;
    server->queued++;
    pthread_cond_signal(&server->work);
    while (!job->done) pthread_cond_wait(&job->finished, &server->lock);
    pthread_mutex_unlock(&server->lock);
    pthread_cond_destroy(&job->finished);
}

/* Responses */

static enum MHD_Result uform_respond_(uform_server_t *server, struct MHD_Connection *connection, uform_request_t *request,
                                      unsigned code, uform_buffer_t *body, char const *type, char const *extra_header,
                                      char const *extra_value) {
    if (body->failed) { /* out of memory while writing the answer: a short one instead */
        free(body->data);
        *body = (uform_buffer_t){0};
        uform_puts_(body, "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\"}}");
        code = 500, type = "application/json";
    }
    struct MHD_Response *response = MHD_create_response_from_buffer(body->length, body->data, MHD_RESPMEM_MUST_FREE);
    if (!response) {
        free(body->data);
        return MHD_NO;
    }
    body->data = NULL;
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (extra_header) MHD_add_response_header(response, extra_header, extra_value);
    pthread_mutex_lock(&server->lock);
    int draining = server->draining;
    pthread_mutex_unlock(&server->lock);
    if (draining) MHD_add_response_header(response, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result queued = MHD_queue_response(connection, code, response);
    MHD_destroy_response(response);
    if (queued != MHD_YES) return queued;
    request->answered = 1;
    double seconds = uform_now_() - request->start;
    pthread_mutex_lock(&server->lock);
    for (size_t i = 0; i < uform_codes_k; ++i)
        if (uform_codes_[i] == code) server->requests[request->route][i]++;
    server->errors += code >= 400;
    size_t bucket = 0;
    while (bucket < uform_latency_buckets_k && seconds > uform_latency_bounds_[bucket]) bucket++;
    server->latency_buckets[bucket]++, server->latency_count++, server->latency_sum += seconds;
    pthread_mutex_unlock(&server->lock);
    if (server->options.verbose)
        fprintf(stderr, "uform serve: %s %u %zu bytes in %.3f ms\n", uform_route_names_[request->route], code,
                request->received, 1e3 * seconds);
    return MHD_YES;
}

static enum MHD_Result uform_error_(uform_server_t *server, struct MHD_Connection *connection, uform_request_t *request,
                                    unsigned code, char const *type, char const *format, ...) __attribute__((format(printf, 6, 7)));
static enum MHD_Result uform_error_(uform_server_t *server, struct MHD_Connection *connection, uform_request_t *request,
                                    unsigned code, char const *type, char const *format, ...) {
    char message[1024];
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(message, sizeof(message), format, arguments);
    va_end(arguments);
    uform_buffer_t body = {0};
    uform_puts_(&body, "{\"error\":{\"message\":");
    uform_append_string_(&body, message, strlen(message));
    uform_printf_(&body, ",\"type\":\"%s\",\"code\":%u}}", type, code);
    char const *header = code == 401 ? MHD_HTTP_HEADER_WWW_AUTHENTICATE : code == 405 ? MHD_HTTP_HEADER_ALLOW : NULL;
    char const *value = code == 401 ? "Bearer" : request->route <= uform_route_rerank_k ? "POST" : "GET";
    return uform_respond_(server, connection, request, code, &body, "application/json", header, value);
}

static enum MHD_Result uform_invalid_(uform_server_t *server, struct MHD_Connection *connection, uform_request_t *request,
                                      char const *message) {
    return uform_error_(server, connection, request, 400, "invalid_request_error", "%s", message);
}

/* The library failed on input that passed our checks: the library's message, as a server error. */
static enum MHD_Result uform_failed_(uform_server_t *server, struct MHD_Connection *connection, uform_request_t *request,
                                     uform_job_t const *job) {
    unsigned code = job->status == uform_invalid_argument_k || job->status == uform_shape_k ? 400 : 500;
    return uform_error_(server, connection, request, code, code == 400 ? "invalid_request_error" : "server_error", "%s: %s",
                        uform_status_name(job->status), job->message);
}

/* The model name a response carries: the request's "model" when it is a string, else the server's. */
static int uform_model_name_(json_t const *root, uform_server_t const *server, char const **name, size_t *length) {
    json_t const *model = json_object_get(root, "model");
    if (model && !json_is_null(model) && !json_is_string(model)) return 0;
    *name = model && json_is_string(model) ? json_string_value(model) : server->options.name;
    *length = model && json_is_string(model) ? json_string_length(model) : strlen(server->options.name);
    return 1;
}

/* Appends the indices of the texts longer than a row, as `"truncated":[...]`. */
static void uform_append_truncated_(uform_buffer_t *body, uform_server_t const *server, uform_text_t const *texts, size_t count) {
    uform_puts_(body, "\"truncated\":[");
    int first = 1;
    for (size_t i = 0; i < count; ++i)
        if (texts[i].length > server->config.columns) uform_printf_(body, "%s%zu", first ? "" : ",", i), first = 0;
    uform_puts_(body, "]");
}

static size_t uform_cells_(uform_server_t const *server, uform_text_t const *texts, size_t count, size_t *bytes) {
    size_t cells = 0;
    *bytes = 0;
    for (size_t i = 0; i < count; ++i)
        cells += texts[i].length < server->config.columns ? texts[i].length : server->config.columns, *bytes += texts[i].length;
    return cells;
}

static enum MHD_Result uform_embeddings_(uform_server_t *server, struct MHD_Connection *connection, uform_request_t *request,
                                         json_t *root) {
    if (!server->has_pool)
        return uform_error_(server, connection, request, 501, "server_error", "the model has no pool head: it cannot embed");
    json_t *input = json_object_get(root, "input");
    if (!input) return uform_invalid_(server, connection, request, "'input' is required: a string or a list of strings");
    size_t count = json_is_string(input) ? 1 : json_is_array(input) ? json_array_size(input) : 0;
    if (!json_is_string(input) && !json_is_array(input))
        return uform_invalid_(server, connection, request, "'input' must be a string or a list of strings");
    if (!count) return uform_invalid_(server, connection, request, "'input' is an empty list: nothing to embed");
    char const *model_name;
    size_t model_length;
    if (!uform_model_name_(root, server, &model_name, &model_length))
        return uform_invalid_(server, connection, request, "'model' must be a string");
    size_t width = server->config.embedding_widths[server->config.embedding_widths_count - 1];
    json_t *dimensions = json_object_get(root, "dimensions");
    if (dimensions && !json_is_null(dimensions)) {
        int known = 0;
        json_int_t asked = json_is_integer(dimensions) ? json_integer_value(dimensions) : -1;
        for (size_t i = 0; i < server->config.embedding_widths_count; ++i)
            known |= asked > 0 && (size_t)asked == server->config.embedding_widths[i];
        if (!known) {
            char widths[128] = "";
            for (size_t i = 0; i < server->config.embedding_widths_count; ++i)
                snprintf(widths + strlen(widths), sizeof(widths) - strlen(widths), "%s%zu", i ? ", " : "",
                         server->config.embedding_widths[i]);
            return uform_error_(server, connection, request, 400, "invalid_request_error",
                                "'dimensions' must be one of the model's embedding widths [%s]", widths);
        }
        width = (size_t)asked;
    }
    json_t *format = json_object_get(root, "encoding_format");
    int base64 = 0;
    if (format && !json_is_null(format)) {
        char const *name = json_is_string(format) ? json_string_value(format) : "";
        if (strcmp(name, "float") && strcmp(name, "base64"))
            return uform_invalid_(server, connection, request, "'encoding_format' must be \"float\" or \"base64\"");
        base64 = !strcmp(name, "base64");
    }
    uform_text_t *texts = calloc(count, sizeof(uform_text_t));
    float *embeddings = malloc(count * width * sizeof(float));
    if (!texts || !embeddings) {
        free(texts), free(embeddings);
        return uform_error_(server, connection, request, 500, "server_error", "out of memory for %zu inputs", count);
    }
    for (size_t i = 0; i < count; ++i) {
        json_t *item = json_is_string(input) ? input : json_array_get(input, i);
        char message[160];
        if (!json_is_string(item) || !json_string_length(item)) {
            snprintf(message, sizeof(message), json_is_string(item) ? "'input[%zu]' is an empty string: nothing to embed"
                                                                    : "'input[%zu]' must be a string (token arrays are not taken: send text)",
                     i);
            free(texts), free(embeddings);
            return uform_invalid_(server, connection, request, message);
        }
        texts[i] = (uform_text_t){(uint8_t const *)json_string_value(item), json_string_length(item)};
    }
    size_t bytes = 0;
    uform_job_t job = {.kind = uform_job_embed_k, .width = width, .texts = texts, .count = count, .outputs = embeddings};
    job.cells = uform_cells_(server, texts, count, &bytes);
    uform_submit_(server, &job);
    if (job.status != uform_ok_k) {
        free(texts), free(embeddings);
        return uform_failed_(server, connection, request, &job);
    }
    uform_buffer_t body = {0};
    uform_reserve_(&body, count * width * (base64 ? 6 : 16) + 256);
    uform_puts_(&body, "{\"object\":\"list\",\"data\":[");
    for (size_t i = 0; i < count; ++i) {
        uform_printf_(&body, "%s{\"object\":\"embedding\",\"index\":%zu,\"embedding\":", i ? "," : "", i);
        float const *row = embeddings + i * width;
        if (base64) { /* little-endian Float32, as x86 and ARM store them */
            uform_puts_(&body, "\"");
            uform_append_base64_(&body, (uint8_t const *)row, width * sizeof(float));
            uform_puts_(&body, "\"");
        } else {
            uform_puts_(&body, "[");
            for (size_t j = 0; j < width; ++j) uform_printf_(&body, "%s%.9g", j ? "," : "", row[j]);
            uform_puts_(&body, "]");
        }
        uform_puts_(&body, "}");
    }
    uform_puts_(&body, "],\"model\":");
    uform_append_string_(&body, model_name, model_length);
    uform_printf_(&body, ",\"usage\":{\"prompt_tokens\":%zu,\"total_tokens\":%zu},", bytes, bytes);
    uform_append_truncated_(&body, server, texts, count);
    uform_puts_(&body, "}");
    free(texts), free(embeddings);
    return uform_respond_(server, connection, request, 200, &body, "application/json", NULL, NULL);
}

typedef struct {
    float score;
    size_t index;
} uform_ranked_t;

/* Higher scores first; ties keep the documents' order. */
static int uform_ranked_order_(void const *left, void const *right) {
    uform_ranked_t const *a = left, *b = right;
    if (a->score != b->score) return a->score > b->score ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

static enum MHD_Result uform_rerank_(uform_server_t *server, struct MHD_Connection *connection, uform_request_t *request,
                                     json_t *root) {
    if (!server->has_rerank)
        return uform_error_(server, connection, request, 501, "server_error", "the model has no rerank head: it cannot rerank");
    json_t *query = json_object_get(root, "query"), *documents = json_object_get(root, "documents");
    if (!json_is_string(query) || !json_string_length(query))
        return uform_invalid_(server, connection, request, "'query' is required: a non-empty string");
    if (!json_is_array(documents)) return uform_invalid_(server, connection, request, "'documents' is required: a list of strings or {\"text\": ...} objects");
    size_t count = json_array_size(documents);
    if (!count) return uform_invalid_(server, connection, request, "'documents' is an empty list: nothing to rank");
    char const *model_name;
    size_t model_length;
    if (!uform_model_name_(root, server, &model_name, &model_length))
        return uform_invalid_(server, connection, request, "'model' must be a string");
    json_t *top = json_object_get(root, "top_n"), *give = json_object_get(root, "return_documents");
    size_t top_n = count;
    if (top && !json_is_null(top)) {
        if (!json_is_integer(top) || json_integer_value(top) < 1)
            return uform_invalid_(server, connection, request, "'top_n' must be a positive integer");
        if ((unsigned long long)json_integer_value(top) < count) top_n = (size_t)json_integer_value(top);
    }
    if (give && !json_is_null(give) && !json_is_boolean(give))
        return uform_invalid_(server, connection, request, "'return_documents' must be true or false");
    int return_documents = give && json_is_true(give);
    uform_text_t *texts = calloc(count, sizeof(uform_text_t));
    float *scores = malloc(count * sizeof(float));
    uform_ranked_t *ranked = malloc(count * sizeof(uform_ranked_t));
    if (!texts || !scores || !ranked) {
        free(texts), free(scores), free(ranked);
        return uform_error_(server, connection, request, 500, "server_error", "out of memory for %zu documents", count);
    }
    for (size_t i = 0; i < count; ++i) {
        json_t *item = json_array_get(documents, i);
        json_t *text = json_is_object(item) ? json_object_get(item, "text") : item;
        if (!json_is_string(text) || !json_string_length(text)) {
            char message[160];
            snprintf(message, sizeof(message),
                     json_is_string(text) ? "'documents[%zu]' is an empty text: nothing to rank"
                                          : "'documents[%zu]' must be a string or an object with a \"text\" string",
                     i);
            free(texts), free(scores), free(ranked);
            return uform_invalid_(server, connection, request, message);
        }
        texts[i] = (uform_text_t){(uint8_t const *)json_string_value(text), json_string_length(text)};
    }
    size_t bytes = 0;
    uform_text_t query_text = {(uint8_t const *)json_string_value(query), json_string_length(query)};
    uform_job_t job = {.kind = uform_job_rerank_k, .query = query_text, .texts = texts, .count = count, .outputs = scores};
    job.cells = uform_cells_(server, texts, count, &bytes);
    uform_submit_(server, &job);
    if (job.status != uform_ok_k) {
        free(texts), free(scores), free(ranked);
        return uform_failed_(server, connection, request, &job);
    }
    /* MaxSim sums one cosine in [-1, 1] per query cell, the fused score is in [-1, 1]: each maps onto 0..1 */
    size_t query_cells = query_text.length < server->config.columns ? query_text.length : server->config.columns;
    int fused = server->options.fuse > 0;
    for (size_t i = 0; i < count; ++i) {
        float score = ((fused ? scores[i] : scores[i] / (float)query_cells) + 1.0f) * 0.5f;
        ranked[i] = (uform_ranked_t){score < 0 ? 0 : score > 1 ? 1 : score, i};
    }
    qsort(ranked, count, sizeof(uform_ranked_t), uform_ranked_order_);
    uform_buffer_t body = {0};
    uform_puts_(&body, "{\"results\":[");
    for (size_t r = 0; r < top_n; ++r) {
        size_t i = ranked[r].index;
        uform_printf_(&body, "%s{\"index\":%zu,\"relevance_score\":%.9g,\"%s\":%.9g", r ? "," : "", i, ranked[r].score,
                      fused ? "fused" : "maxsim", scores[i]);
        if (return_documents) {
            uform_puts_(&body, ",\"document\":{\"text\":");
            uform_append_string_(&body, (char const *)texts[i].data, texts[i].length);
            uform_puts_(&body, "}");
        }
        uform_puts_(&body, "}");
    }
    uform_puts_(&body, "],\"model\":");
    uform_append_string_(&body, model_name, model_length);
    bytes += query_text.length;
    uform_printf_(&body, ",\"usage\":{\"prompt_tokens\":%zu,\"total_tokens\":%zu},\"query_truncated\":%s,", bytes, bytes,
                  query_text.length > server->config.columns ? "true" : "false");
    uform_append_truncated_(&body, server, texts, count);
    uform_puts_(&body, "}");
    free(texts), free(scores), free(ranked);
    return uform_respond_(server, connection, request, 200, &body, "application/json", NULL, NULL);
}

static void uform_histogram_(uform_buffer_t *body, char const *name, char const *help, unsigned long long const *buckets,
                             unsigned long long count, unsigned long long sum) {
    uform_printf_(body, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    unsigned long long cumulative = 0;
    for (size_t i = 0; i + 1 < uform_batch_buckets_k; ++i)
        cumulative += buckets[i], uform_printf_(body, "%s_bucket{le=\"%zu\"} %llu\n", name, (size_t)1 << i, cumulative);
    uform_printf_(body, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %llu\n%s_count %llu\n", name, count, name, sum, name, count);
}

static enum MHD_Result uform_metrics_(uform_server_t *server, struct MHD_Connection *connection, uform_request_t *request) {
    uform_buffer_t body = {0};
    pthread_mutex_lock(&server->lock);
    uform_puts_(&body, "# HELP uform_requests_total HTTP requests answered, by route and status code.\n"
                         "# TYPE uform_requests_total counter\n");
    for (size_t route = 0; route < uform_routes_k; ++route)
        for (size_t code = 0; code < uform_codes_k; ++code)
            if (server->requests[route][code] || (code == 0 && route < uform_route_other_k))
                uform_printf_(&body, "uform_requests_total{route=\"%s\",code=\"%u\"} %llu\n", uform_route_names_[route],
                              uform_codes_[code], server->requests[route][code]);
    uform_printf_(&body, "# HELP uform_request_bytes_total Request body bytes received.\n# TYPE uform_request_bytes_total counter\n"
                         "uform_request_bytes_total %llu\n", server->bytes_in);
    uform_printf_(&body, "# HELP uform_errors_total Requests answered with a status of 400 or more.\n"
                         "# TYPE uform_errors_total counter\nuform_errors_total %llu\n", server->errors);
    uform_printf_(&body, "# HELP uform_request_duration_seconds Time from a request's headers to its answer.\n"
                         "# TYPE uform_request_duration_seconds histogram\n");
    unsigned long long cumulative = 0;
    for (size_t i = 0; i < uform_latency_buckets_k; ++i)
        cumulative += server->latency_buckets[i],
            uform_printf_(&body, "uform_request_duration_seconds_bucket{le=\"%g\"} %llu\n", uform_latency_bounds_[i], cumulative);
    uform_printf_(&body, "uform_request_duration_seconds_bucket{le=\"+Inf\"} %llu\nuform_request_duration_seconds_sum %.6f\n"
                         "uform_request_duration_seconds_count %llu\n", server->latency_count, server->latency_sum,
                  server->latency_count);
    uform_printf_(&body, "# HELP uform_queue_depth Jobs waiting for a worker.\n# TYPE uform_queue_depth gauge\nuform_queue_depth %zu\n",
                  server->queued);
    uform_printf_(&body, "# HELP uform_in_flight_requests Requests received and not yet answered.\n"
                         "# TYPE uform_in_flight_requests gauge\nuform_in_flight_requests %zu\n", server->in_flight);
    uform_histogram_(&body, "uform_batch_inputs", "Texts per encode call.", server->batch_inputs, server->batches,
                     server->batch_inputs_sum);
    uform_histogram_(&body, "uform_batch_requests", "Requests joined into one encode call.", server->batch_requests,
                     server->batches, server->batch_requests_sum);
    pthread_mutex_unlock(&server->lock);
    return uform_respond_(server, connection, request, 200, &body, "text/plain; version=0.0.4", NULL, NULL);
}

/* Compares without an early exit, so the time taken says nothing of where a wrong key differs. */
static int uform_same_key_(char const *given, char const *key) {
    size_t given_length = strlen(given), key_length = strlen(key);
    unsigned char difference = given_length != key_length;
    for (size_t i = 0; i < key_length; ++i) difference |= (unsigned char)(given[i < given_length ? i : 0] ^ key[i]);
    return !difference;
}

static uform_route_t uform_route_of_(char const *url) {
    for (size_t route = 0; route < uform_route_other_k; ++route)
        if (!strcmp(url, uform_route_names_[route])) return (uform_route_t)route;
    return uform_route_other_k;
}

/* The first callback of a request: what can be refused from its headers alone is refused here, unread. */
static enum MHD_Result uform_headers_(uform_server_t *server, struct MHD_Connection *connection, uform_request_t *request,
                                      char const *method) {
    pthread_mutex_lock(&server->lock);
    int draining = server->draining;
    pthread_mutex_unlock(&server->lock);
    if (draining) return uform_error_(server, connection, request, 503, "server_error", "the server is shutting down");
    if (request->route == uform_route_other_k)
        return uform_error_(server, connection, request, 404, "not_found", "no such route: POST /v1/embeddings, POST /v1/rerank, GET /health, GET /metrics");
    int post = request->route <= uform_route_rerank_k;
    if (strcmp(method, post ? "POST" : "GET"))
        return uform_error_(server, connection, request, 405, "invalid_request_error", "%s takes %s, not %s",
                            uform_route_names_[request->route], post ? "POST" : "GET", method);
    if (post && server->options.api_key) {
        char const *given = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
        if (!given || strncmp(given, "Bearer ", 7) || !uform_same_key_(given + 7, server->options.api_key))
            return uform_error_(server, connection, request, 401, "authentication_error",
                                "a valid API key is required: 'Authorization: Bearer KEY'");
    }
    char const *length = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    unsigned long long declared = length ? strtoull(length, NULL, 10) : 0;
    if (declared > server->options.max_request_bytes)
        return uform_error_(server, connection, request, 413, "request_too_large",
                            "the request body of %llu bytes is over the limit of %llu (--max-request-bytes)", declared,
                            server->options.max_request_bytes);
    return MHD_YES;
}

static enum MHD_Result uform_access_(void *cls, struct MHD_Connection *connection, char const *url, char const *method,
                                     char const *version, char const *upload_data, size_t *upload_data_size, void **state) {
    uform_server_t *server = cls;
    uform_request_t *request = *state;
    if (!request) {
        request = calloc(1, sizeof(uform_request_t));
        if (!request) return MHD_NO;
        request->start = uform_now_();
        request->route = uform_route_of_(url);
        *state = request;
        pthread_mutex_lock(&server->lock);
        server->in_flight++;
        pthread_mutex_unlock(&server->lock);
        return uform_headers_(server, connection, request, method);
    }
    if (*upload_data_size) {
        size_t size = *upload_data_size;
        *upload_data_size = 0;
        pthread_mutex_lock(&server->lock);
        server->bytes_in += size;
        pthread_mutex_unlock(&server->lock);
        request->received += size;
        if (request->answered || request->too_large) return MHD_YES;
        if (request->length + size > server->options.max_request_bytes) { /* a body without a length, or longer than it said */
            request->too_large = 1;
            free(request->body), request->body = NULL;
            return MHD_YES;
        }
        if (request->length + size + 1 > request->capacity) {
            size_t capacity = request->capacity ? request->capacity : 4096;
            while (capacity < request->length + size + 1) capacity *= 2;
            char *body = realloc(request->body, capacity);
            if (!body) return MHD_NO;
            request->body = body, request->capacity = capacity;
        }
        memcpy(request->body + request->length, upload_data, size);
        request->length += size;
        return MHD_YES;
    }
    if (request->answered) return MHD_YES;
    if (request->too_large)
        return uform_error_(server, connection, request, 413, "request_too_large",
                            "the request body is over the limit of %llu bytes (--max-request-bytes)",
                            server->options.max_request_bytes);
    if (request->route == uform_route_health_k) {
        uform_buffer_t body = {0};
        uform_puts_(&body, "{\"status\":\"ok\"}");
        return uform_respond_(server, connection, request, 200, &body, "application/json", NULL, NULL);
    }
    if (request->route == uform_route_metrics_k) return uform_metrics_(server, connection, request);
    json_error_t error;
    json_t *root = request->length ? json_loadb(request->body, request->length, 0, &error) : NULL;
    if (!root)
        return uform_error_(server, connection, request, 400, "invalid_request_error", "the body is not JSON: %s",
                            request->length ? error.text : "it is empty");
    enum MHD_Result result = !json_is_object(root) ? uform_invalid_(server, connection, request, "the body must be a JSON object")
                             : request->route == uform_route_embeddings_k ? uform_embeddings_(server, connection, request, root)
                                                                          : uform_rerank_(server, connection, request, root);
    json_decref(root);
    return result;
}

static void uform_completed_(void *cls, struct MHD_Connection *connection, void **state, enum MHD_RequestTerminationCode code) {
    uform_server_t *server = cls;
    uform_request_t *request = *state;
    if (!request) return;
    pthread_mutex_lock(&server->lock);
    server->in_flight--;
    pthread_mutex_unlock(&server->lock);
    free(request->body);
    free(request);
    *state = NULL;
}

/* Startup and shutdown */

static int uform_serve_parse_(int argc, char **argv, uform_serve_options_t *options, int *help) {
    for (int i = 2; i < argc; ++i) {
        char const *flag = argv[i];
        if (!strcmp(flag, "--help") || !strcmp(flag, "-h")) {
            *help = 1;
            continue;
        }
        if (!strcmp(flag, "--verbose")) {
            options->verbose = 1;
            continue;
        }
        if (!strcmp(flag, "--fuse")) {
            char *end = NULL;
            char const *value = i + 1 < argc ? argv[++i] : "";
            options->fuse = strtod(value, &end);
            if (!*value || !end || *end || !(options->fuse >= 0 && options->fuse <= 1)) {
                fprintf(stderr, "uform serve: --fuse needs a weight in [0, 1], got '%s'\n", value);
                return 0;
            }
            continue;
        }
        struct {
            char const *flag;
            char const **text;
            unsigned long long *number;
        } const flags[] = {
            {"--model", &options->model_path, NULL},       {"--host", &options->host, NULL},
            {"--api-key", &options->api_key, NULL},        {"--name", &options->name, NULL},
            {"--precision", &options->precision, NULL},    {"--device", &options->device, NULL},
            {"--port", NULL, &options->port},              {"--workers", NULL, &options->workers},
            {"--threads", NULL, &options->threads},        {"--max-request-bytes", NULL, &options->max_request_bytes},
            {"--batch-bytes", NULL, &options->batch_bytes}, {"--timeout", NULL, &options->timeout},
            {"--connections", NULL, &options->connections}, {"--drain-seconds", NULL, &options->drain_seconds},
            {"--fuse-gate", NULL, &options->fuse_gate},
        };
        size_t known = 0;
        while (known < sizeof(flags) / sizeof(flags[0]) && strcmp(flags[known].flag, flag)) known++;
        if (known == sizeof(flags) / sizeof(flags[0])) {
            fprintf(stderr, "uform serve: unknown option '%s' (see uform serve --help)\n", flag);
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "uform serve: %s needs a value\n", flag);
            return 0;
        }
        char const *value = argv[++i];
        if (flags[known].text) {
            *flags[known].text = value;
            continue;
        }
        char *end = NULL;
        errno = 0;
        *flags[known].number = strtoull(value, &end, 10);
        if (errno || !end || *end || !*value || value[0] == '-') {
            fprintf(stderr, "uform serve: %s needs a non-negative integer, got '%s'\n", flag, value);
            return 0;
        }
    }
    return 1;
}

static int uform_serve_check_(uform_serve_options_t const *options) {
    char const *problem = !options->model_path ? "--model is required (this build knows no shipped default)"
                          : options->port > 65535 ? "--port is 0..65535"
                          : !options->workers || options->workers > 256 ? "--workers is 1..256"
                          : !options->connections || options->connections > 65536 ? "--connections is 1..65536"
                          : !options->max_request_bytes ? "--max-request-bytes must be positive"
                          : options->timeout > 86400 ? "--timeout is at most 86400 seconds"
                          : options->fuse_gate > 1u << 20 ? "--fuse-gate is at most 1048576 bytes"
                          : options->precision && strcmp(options->precision, "bf16") && strcmp(options->precision, "e4m3") &&
                                    strcmp(options->precision, "int8") && strcmp(options->precision, "f32")
                                ? "--precision is bf16, e4m3, int8 or f32"
                          : options->device && strcmp(options->device, "cpu") && strcmp(options->device, "cuda") ? "--device is cpu or cuda"
                          : options->api_key && !options->api_key[0] ? "--api-key is empty"
                          : NULL;
    if (problem) fprintf(stderr, "uform serve: %s (see uform serve --help)\n", problem);
    return !problem;
}

static int uform_report_status_(uform_status_t status, char const *what) {
    if (status == uform_ok_k) return 0;
    fprintf(stderr, "uform serve: %s: %s error: %s\n", what, uform_status_name(status), uform_last_error());
    return 1;
}

/* Resolves --host and --port into a socket address. */
static int uform_address_(uform_serve_options_t const *options, struct sockaddr_storage *address, int *ipv6) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *found = NULL;
    char port[16];
    snprintf(port, sizeof(port), "%llu", options->port);
    int failed = getaddrinfo(options->host, port, &hints, &found);
    if (failed || !found) {
        fprintf(stderr, "uform serve: --host %s: %s\n", options->host, failed ? gai_strerror(failed) : "no address");
        return 0;
    }
    memcpy(address, found->ai_addr, found->ai_addrlen);
    *ipv6 = found->ai_family == AF_INET6;
    freeaddrinfo(found);
    return 1;
}

static void uform_server_close_(uform_server_t *server, size_t started) {
    pthread_mutex_lock(&server->lock);
    server->stopping = 1;
    pthread_cond_broadcast(&server->work);
    pthread_mutex_unlock(&server->lock);
    for (size_t i = 0; i < started; ++i) pthread_join(server->workers[i].thread, NULL);
    for (size_t i = 0; server->workers && i < server->options.workers; ++i) {
        uform_context_close(server->workers[i].context);
        free(server->workers[i].texts), free(server->workers[i].embeddings);
    }
    free(server->workers);
    uform_model_close(server->model);
    pthread_mutex_destroy(&server->lock);
    pthread_cond_destroy(&server->work);
}

int uform_serve(int argc, char **argv) {
    static uform_server_t server; /* static: the metrics tables are large and zeroed */
    uform_serve_options_t *options = &server.options;
    *options = (uform_serve_options_t){.host = "127.0.0.1", .port = 8080, .workers = 2, .max_request_bytes = 8u << 20,
                                       .batch_bytes = 65536, .timeout = 30, .connections = 256, .drain_seconds = 30, .fuse = 0.5,
                                       .fuse_gate = 64};
    options->api_key = getenv("UFORM_API_KEY");
    int help = 0;
    if (!uform_serve_parse_(argc, argv, options, &help)) return 2;
    if (help) return fputs(uform_serve_usage_, stdout), 0;
#ifdef UFORM_DEFAULT_MODEL
    struct stat shipped;
    if (!options->model_path && stat(UFORM_DEFAULT_MODEL, &shipped) == 0 && S_ISDIR(shipped.st_mode)) {
        options->model_path = UFORM_DEFAULT_MODEL; /* the README's model, where no other is named */
        fprintf(stderr, "uform serve: no --model: serving the shipped default %s\n", options->model_path);
    }
#endif
    if (!uform_serve_check_(options)) return 2;
    if (!options->threads) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        options->threads = cores > (long)options->workers ? (unsigned long long)cores / options->workers : 1;
    }
    if (!options->name) {
        char const *slash = strrchr(options->model_path, '/');
        options->name = slash && slash[1] ? slash + 1 : options->model_path;
    }
    struct sockaddr_storage address = {0};
    int ipv6 = 0;
    if (!uform_address_(options, &address, &ipv6)) return 2;

    /* Blocked before any thread starts (the contexts' pools too), so that only sigwait below takes them. */
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM), sigaddset(&signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &signals, NULL);
    signal(SIGPIPE, SIG_IGN);
    pthread_mutex_init(&server.lock, NULL);
    pthread_cond_init(&server.work, NULL);
    uform_status_t status = uform_model_open(options->model_path, &server.model);
    uform_precision_t precision = uform_precision_bf16_k;
    if (status == uform_ok_k && options->precision && uform_precision_parse(options->precision, &precision) == uform_ok_k)
        status = uform_model_set_precision(server.model, precision);
    if (status != uform_ok_k) {
        uform_server_close_(&server, 0);
        return uform_report_status_(status, options->model_path);
    }
    uform_model_config(server.model, &server.config);
    server.has_pool = uform_model_has_head(server.model, "pool"), server.has_rerank = uform_model_has_head(server.model, "rerank");
    if (!server.has_pool && options->fuse > 0) { /* the fused score needs the pooled cosine */
        fprintf(stderr, "uform serve: the model has no pool head: /v1/rerank ranks by MaxSim alone (--fuse 0)\n");
        options->fuse = 0;
    }
    uform_device_t device = options->device && !strcmp(options->device, "cuda") ? uform_device_cuda_k : uform_device_cpu_k;
    server.workers = calloc(options->workers, sizeof(uform_worker_t));
    if (!server.workers) status = uform_out_of_memory_k;
    for (size_t i = 0; status == uform_ok_k && i < options->workers; ++i) {
        server.workers[i].server = &server;
        status = uform_context_create(server.model, device, options->threads, &server.workers[i].context);
    }
    if (status != uform_ok_k) {
        int code = uform_report_status_(status, "a worker's context");
        uform_server_close_(&server, 0);
        return code;
    }

    size_t started = 0;
    for (; started < options->workers; ++started)
        if (pthread_create(&server.workers[started].thread, NULL, uform_worker_main_, &server.workers[started])) break;
    if (started < options->workers) {
        fprintf(stderr, "uform serve: could not start worker thread %zu\n", started + 1);
        uform_server_close_(&server, started);
        return 1;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC | (ipv6 ? MHD_USE_IPv6 : 0) |
                     (options->verbose ? MHD_USE_ERROR_LOG : 0);
    struct MHD_Daemon *daemon = MHD_start_daemon(
        flags, (uint16_t)options->port, NULL, NULL, uform_access_, &server, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&address,
        MHD_OPTION_NOTIFY_COMPLETED, uform_completed_, &server, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)options->timeout,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)options->connections, MHD_OPTION_END);
    if (!daemon) {
        fprintf(stderr, "uform serve: cannot listen on %s port %llu: %s\n", options->host, options->port,
                errno ? strerror(errno) : "libmicrohttpd refused to start");
        uform_server_close_(&server, started);
        return 1;
    }
    union MHD_DaemonInfo const *bound = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    fprintf(stderr, "uform serve: listening on http://%s%s%s:%u (model %s; %llu workers x %llu threads; batches up to %llu bytes)\n",
            ipv6 ? "[" : "", options->host, ipv6 ? "]" : "", bound ? bound->port : (unsigned)options->port, options->name,
            options->workers, options->threads, options->batch_bytes);
    fflush(stderr);

    int received = 0;
    sigwait(&signals, &received);
    pthread_mutex_lock(&server.lock);
    server.draining = 1;
    size_t waiting = server.in_flight;
    pthread_mutex_unlock(&server.lock);
    fprintf(stderr, "uform serve: %s: no new connections; draining %zu in-flight requests\n", received == SIGINT ? "SIGINT" : "SIGTERM",
            waiting);
    MHD_socket listening = MHD_quiesce_daemon(daemon);
    if (listening != MHD_INVALID_SOCKET) close(listening);
    double deadline = uform_now_() + (double)options->drain_seconds;
    for (;;) {
        pthread_mutex_lock(&server.lock);
        waiting = server.in_flight;
        pthread_mutex_unlock(&server.lock);
        if (!waiting || uform_now_() > deadline) break;
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
    if (waiting) fprintf(stderr, "uform serve: %zu requests still in flight after %llu s; closing them\n", waiting, options->drain_seconds);
    MHD_stop_daemon(daemon);
    uform_server_close_(&server, started);
    fprintf(stderr, "uform serve: stopped\n");
    return 0;
}

#endif
