/*  av.c: decoding audio and video through FFmpeg's libraries (include/uform/av.h; the rules:
 *  docs/audio_video.md). Built without FFmpeg, every decoding call fails naming the missing
 *  libraries; the cutting into cells (av_cells.c) needs none of them. */
#include "uform/av.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/status.h"

static char const *uform_av_name_(char const *name, char const *kind) { return name ? name : kind; }

void uform_audio_free(uform_audio_t *audio) {
    if (!audio) return;
    free(audio->samples);
    *audio = (uform_audio_t){0};
}

void uform_video_free(uform_video_t *video) {
    if (!video) return;
    free(video->rgb);
    free(video->ticks);
    *video = (uform_video_t){0};
}

#if !defined(UFORM_HAVE_FFMPEG)

static uform_status_t uform_av_absent_(char const *name, char const *kind) {
    return uform_fail(uform_unsupported_k,
                      "%s: this UForm was built without FFmpeg (libavformat, libavcodec, libswresample, libswscale), "
                      "so it cannot decode %s",
                      uform_av_name_(name, kind), kind);
}

uform_status_t uform_audio_decode(void const *data, size_t size, char const *name, double max_seconds, uform_audio_t *audio) {
    if (audio) *audio = (uform_audio_t){0};
    return uform_av_absent_(name, "audio");
}

uform_status_t uform_audio_read(char const *path, double max_seconds, uform_audio_t *audio) {
    if (audio) *audio = (uform_audio_t){0};
    return uform_av_absent_(path, "audio");
}

uform_status_t uform_video_decode(void const *data, size_t size, char const *name, double fps, size_t max_frames,
                                  uform_video_t *video) {
    if (video) *video = (uform_video_t){0};
    return uform_av_absent_(name, "video");
}

uform_status_t uform_video_read(char const *path, double fps, size_t max_frames, uform_video_t *video) {
    if (video) *video = (uform_video_t){0};
    return uform_av_absent_(path, "video");
}

#else

#include <pthread.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
#include <libavutil/pixdesc.h>
#include <libswresample/swresample.h>
#include <libswscale/swscale.h>

enum {
    uform_av_buffer_k = 1 << 16,       /* bytes FFmpeg reads at a time */
    uform_audio_channels_max_k = 64,   /* libswresample's own limit */
    uform_audio_rate_min_k = 1000,     /* source rates outside these are refused, against hostile headers */
    uform_audio_rate_max_k = 1000000,
    uform_video_frames_max_k = 1 << 20, /* sampled frames kept, against hostile timestamps */
};

/* Seconds a decoded stream may fall short of its declared duration before it counts as truncated:
 * more than any codec's delay and padding (a Vorbis block of 8192 samples is 0.19 s at 44.1 kHz). */
static double const uform_av_shortfall_seconds_ = 0.25;

/* Times within a microsecond are one instant: below any container's time base (MPEG-TS: 1/90000 s). */
static double const uform_video_instant_seconds_ = 1e-6;

/* FFmpeg prints to standard error by default; its failures come back through our status instead. */
static void uform_av_quiet_(void) {
    if (av_log_get_level() == AV_LOG_INFO) av_log_set_level(AV_LOG_QUIET); /* unless the program chose a level */
}

static pthread_once_t uform_av_once_ = PTHREAD_ONCE_INIT;

/* --- The bytes FFmpeg reads: a buffer or an open file, behind a custom AVIOContext. */

typedef struct uform_av_source_t {
    unsigned char const *data; /* NULL when reading `file` */
    size_t size, offset;
    FILE *file;
} uform_av_source_t;

static int uform_av_read_(void *opaque, uint8_t *buffer, int capacity) {
    uform_av_source_t *source = opaque;
    if (capacity <= 0) return 0;
    if (source->file) {
        size_t length = fread(buffer, 1, (size_t)capacity, source->file);
        if (!length) return ferror(source->file) ? AVERROR(EIO) : AVERROR_EOF;
        source->offset += length;
        return (int)length;
    }
    size_t length = source->size - source->offset;
    if (length > (size_t)capacity) length = (size_t)capacity;
    if (!length) return AVERROR_EOF;
    memcpy(buffer, source->data + source->offset, length);
    source->offset += length;
    return (int)length;
}

static int64_t uform_av_seek_(void *opaque, int64_t offset, int whence) {
    uform_av_source_t *source = opaque;
    whence &= ~AVSEEK_FORCE;
    if (whence == AVSEEK_SIZE) return (int64_t)source->size;
    size_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? source->offset : whence == SEEK_END ? source->size : SIZE_MAX;
    if (base > source->size) return AVERROR(EINVAL);
    if (offset < -(int64_t)base || offset > (int64_t)(source->size - base)) return AVERROR(EINVAL);
    source->offset = (size_t)((int64_t)base + offset);
    if (source->file && fseeko(source->file, (off_t)source->offset, SEEK_SET)) return AVERROR(EIO);
    return (int64_t)source->offset;
}

/* A container that names other files or URLs (playlists, references) gets none of them opened. */
static int uform_av_refuse_open_(struct AVFormatContext *context, AVIOContext **io, char const *url, int flags,
                                 AVDictionary **options) {
    return AVERROR(EPERM);
}

/* --- One stream of one file, opened and decoded frame by frame. */

typedef struct uform_av_t {
    char const *name, *kind; /* kind: "audio" or "video", for messages */
    uform_av_source_t source;
    AVIOContext *io;
    AVFormatContext *format;
    AVCodecContext *codec;
    AVStream *stream;
    AVPacket *packet;
    AVFrame *frame;
    int draining; /* the container has ended: the decoder is being flushed */
} uform_av_t;

static char const *uform_av_error_(int error, char *text, size_t capacity) {
    if (av_strerror(error, text, capacity) < 0) snprintf(text, capacity, "FFmpeg error %d", error);
    return text;
}

static void uform_av_close_(uform_av_t *av) {
    av_frame_free(&av->frame);
    av_packet_free(&av->packet);
    avcodec_free_context(&av->codec);
    avformat_close_input(&av->format); /* leaves the custom AVIOContext to us */
    if (av->io) av_freep(&av->io->buffer);
    avio_context_free(&av->io);
    if (av->source.file) fclose(av->source.file);
    av->source.file = NULL;
}

/* Opens the container over `av->source` and the decoder of its best stream of `type`. */
static uform_status_t uform_av_open_(uform_av_t *av, enum AVMediaType type) {
    pthread_once(&uform_av_once_, uform_av_quiet_);
    char text[AV_ERROR_MAX_STRING_SIZE];
    if (!av->source.size) return uform_fail(uform_format_k, "%s: empty: no %s", av->name, av->kind);
    unsigned char *buffer = av_malloc(uform_av_buffer_k);
    if (buffer) av->io = avio_alloc_context(buffer, uform_av_buffer_k, 0, &av->source, uform_av_read_, NULL, uform_av_seek_);
    if (!av->io) av_free(buffer);
    av->format = av->io ? avformat_alloc_context() : NULL;
    av->packet = av_packet_alloc();
    av->frame = av_frame_alloc();
    if (!av->format || !av->packet || !av->frame) return uform_fail(uform_out_of_memory_k, "%s: cannot open a decoder", av->name);
    av->format->pb = av->io;
    av->format->flags |= AVFMT_FLAG_CUSTOM_IO;
    av->format->io_open = uform_av_refuse_open_;
    /* No URL: the container is found from the bytes alone, never from a name's extension. */
    int error = avformat_open_input(&av->format, "", NULL, NULL);
    if (error == AVERROR(EPERM))
        return uform_fail(uform_unsupported_k, "%s: the container refers to other files or URLs, which are not opened", av->name);
    if (error == AVERROR(EIO)) return uform_fail(uform_io_k, "%s: cannot read the file", av->name);
    if (error < 0)
        return uform_fail(uform_format_k, "%s: not a readable %s file (%s)", av->name, av->kind, uform_av_error_(error, text, sizeof(text)));
    error = avformat_find_stream_info(av->format, NULL);
    if (error < 0)
        return uform_fail(uform_format_k, "%s: corrupt or truncated %s file (%s)", av->name, av->kind,
                          uform_av_error_(error, text, sizeof(text)));
    int index = av_find_best_stream(av->format, type, -1, -1, NULL, 0);
    if (index < 0)
        return uform_fail(uform_unsupported_k, "%s: no %s stream (the file holds %u stream%s of other kinds)", av->name, av->kind,
                          av->format->nb_streams, av->format->nb_streams == 1 ? "" : "s");
    av->stream = av->format->streams[index];
    for (unsigned i = 0; i < av->format->nb_streams; ++i)
        if ((int)i != index) av->format->streams[i]->discard = AVDISCARD_ALL;
    AVCodecParameters const *parameters = av->stream->codecpar;
    AVCodec const *decoder = avcodec_find_decoder(parameters->codec_id);
    if (!decoder)
        return uform_fail(uform_unsupported_k, "%s: the %s codec %s has no decoder in this FFmpeg", av->name, av->kind,
                          avcodec_get_name(parameters->codec_id));
    if (type == AVMEDIA_TYPE_VIDEO && parameters->width > 0 && parameters->height > 0 &&
        (size_t)parameters->height > uform_video_pixels_max_k / (size_t)parameters->width)
        return uform_fail(uform_unsupported_k, "%s: %dx%d pixels a frame exceed the largest frame decoded (%d pixels)", av->name,
                          parameters->width, parameters->height, uform_video_pixels_max_k);
    av->codec = avcodec_alloc_context3(decoder);
    if (!av->codec) return uform_fail(uform_out_of_memory_k, "%s: cannot open the %s decoder", av->name, decoder->name);
    error = avcodec_parameters_to_context(av->codec, parameters);
    av->codec->pkt_timebase = av->stream->time_base;
    av->codec->max_pixels = uform_video_pixels_max_k;
    if (error >= 0) error = avcodec_open2(av->codec, decoder, NULL);
    if (error < 0)
        return uform_fail(uform_unsupported_k, "%s: cannot open the %s decoder (%s)", av->name, decoder->name,
                          uform_av_error_(error, text, sizeof(text)));
    return uform_ok_k;
}

/* The next decoded frame into `av->frame` (`*got` = 1), or the end of the stream (`*got` = 0). */
static uform_status_t uform_av_next_(uform_av_t *av, int *got) {
    char text[AV_ERROR_MAX_STRING_SIZE];
    *got = 0;
    for (;;) {
        int error = avcodec_receive_frame(av->codec, av->frame);
        if (error >= 0) {
            if ((av->frame->flags & AV_FRAME_FLAG_CORRUPT) || av->frame->decode_error_flags)
                return uform_fail(uform_format_k, "%s: corrupt %s data (the %s decoder flagged a damaged frame)", av->name,
                                  av->kind, av->codec->codec->name);
            *got = 1;
            return uform_ok_k;
        }
        if (error == AVERROR_EOF) return uform_ok_k;
        if (error != AVERROR(EAGAIN) || av->draining)
            return uform_fail(uform_format_k, "%s: corrupt or truncated %s data (%s)", av->name, av->kind,
                              uform_av_error_(error, text, sizeof(text)));
        error = av_read_frame(av->format, av->packet);
        if (error == AVERROR_EOF) {
            av->draining = 1;
            error = avcodec_send_packet(av->codec, NULL);
        } else if (error == AVERROR(EIO)) {
            return uform_fail(uform_io_k, "%s: cannot read the file", av->name);
        } else if (error < 0) {
            return uform_fail(uform_format_k, "%s: corrupt or truncated %s file (%s)", av->name, av->kind,
                              uform_av_error_(error, text, sizeof(text)));
        } else if (av->packet->stream_index != av->stream->index) {
            av_packet_unref(av->packet);
            continue;
        } else {
            error = avcodec_send_packet(av->codec, av->packet);
            av_packet_unref(av->packet);
        }
        if (error < 0 && error != AVERROR_EOF)
            return uform_fail(uform_format_k, "%s: corrupt or truncated %s data (%s)", av->name, av->kind,
                              uform_av_error_(error, text, sizeof(text)));
    }
}

/* The duration the container declares for the stream in seconds, or -1 where it has none it read
 * (a duration guessed from the bit rate is no declaration). */
static double uform_av_declared_seconds_(uform_av_t const *av) {
    if (av->format->duration_estimation_method == AVFMT_DURATION_FROM_BITRATE) return -1;
    if (av->stream->duration != AV_NOPTS_VALUE && av->stream->duration > 0)
        return (double)av->stream->duration * av_q2d(av->stream->time_base);
    if (av->format->duration != AV_NOPTS_VALUE && av->format->duration > 0) return (double)av->format->duration / AV_TIME_BASE;
    return -1;
}

/* A stream that ended well short of its declared duration was cut. */
static uform_status_t uform_av_check_length_(uform_av_t const *av, double decoded) {
    double declared = uform_av_declared_seconds_(av);
    if (declared > 0 && decoded + uform_av_shortfall_seconds_ + 0.01 * declared < declared)
        return uform_fail(uform_format_k, "%s: truncated: %.3f s of %s decoded, its header declares %.3f s", av->name, decoded,
                          av->kind, declared);
    return uform_ok_k;
}

/* Opens `path` as the source of `av`, failing as uform_file_read does. */
static uform_status_t uform_av_source_file_(uform_av_t *av, char const *path) {
    struct stat status_buffer;
    if (stat(path, &status_buffer) == 0 && !S_ISREG(status_buffer.st_mode))
        return uform_fail(uform_io_k, "%s: not a regular file", path);
    av->source.file = fopen(path, "rb");
    if (!av->source.file) return uform_fail(uform_io_k, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fileno(av->source.file), &status_buffer) != 0 || status_buffer.st_size < 0)
        return uform_fail(uform_io_k, "%s: cannot find its size", path);
    av->source.size = (size_t)status_buffer.st_size;
    return uform_ok_k;
}

/* --- Audio: the channels' mean, resampled to 16 kHz Float32 by libswresample. */

typedef struct uform_resampler_t {
    SwrContext *context;
    int format, rate, channels; /* the input it was made for */
} uform_resampler_t;

/* A resampler for frames like `frame`: one output channel, each input channel weighing 1 / channels. */
static uform_status_t uform_resampler_open_(uform_av_t const *av, AVFrame const *frame, uform_resampler_t *resampler) {
    int channels = frame->ch_layout.nb_channels;
    if (channels < 1 || channels > uform_audio_channels_max_k)
        return uform_fail(uform_unsupported_k, "%s: %d audio channels (1 to %d are read)", av->name, channels,
                          uform_audio_channels_max_k);
    if (frame->sample_rate < uform_audio_rate_min_k || frame->sample_rate > uform_audio_rate_max_k)
        return uform_fail(uform_unsupported_k, "%s: a sample rate of %d Hz (%d to %d Hz are read)", av->name, frame->sample_rate,
                          uform_audio_rate_min_k, uform_audio_rate_max_k);
    AVChannelLayout input, mono = AV_CHANNEL_LAYOUT_MONO;
    if (frame->ch_layout.order == AV_CHANNEL_ORDER_UNSPEC) av_channel_layout_default(&input, channels);
    else if (av_channel_layout_copy(&input, &frame->ch_layout) < 0)
        return uform_fail(uform_out_of_memory_k, "%s: cannot copy a channel layout", av->name);
    double weights[uform_audio_channels_max_k];
    for (int channel = 0; channel < channels; ++channel) weights[channel] = 1.0 / channels;
    SwrContext *context = NULL;
    int error = swr_alloc_set_opts2(&context, &mono, AV_SAMPLE_FMT_FLT, uform_audio_rate_k, &input, frame->format,
                                    frame->sample_rate, 0, NULL);
    av_channel_layout_uninit(&input);
    if (error >= 0) error = swr_set_matrix(context, weights, channels);
    if (error >= 0) error = swr_init(context);
    if (error < 0) {
        swr_free(&context);
        char text[AV_ERROR_MAX_STRING_SIZE];
        return uform_fail(uform_unsupported_k, "%s: cannot resample %d channels of %s at %d Hz (%s)", av->name, channels,
                          av_get_sample_fmt_name(frame->format) ? av_get_sample_fmt_name(frame->format) : "?",
                          frame->sample_rate, uform_av_error_(error, text, sizeof(text)));
    }
    *resampler = (uform_resampler_t){context, frame->format, frame->sample_rate, channels};
    return uform_ok_k;
}

/* Room for `more` samples past `audio->count`, within `limit` (+ slack for the resampler's rounding). */
static uform_status_t uform_audio_reserve_(uform_av_t const *av, uform_audio_t *audio, size_t *capacity, size_t more) {
    if (audio->count + more <= *capacity) return uform_ok_k;
    size_t grown = *capacity ? *capacity * 2 : uform_audio_rate_k;
    while (grown < audio->count + more) grown *= 2;
    float *samples = realloc(audio->samples, grown * sizeof(float));
    if (!samples) return uform_fail(uform_out_of_memory_k, "%s: cannot hold %zu audio samples", av->name, grown);
    audio->samples = samples, *capacity = grown;
    return uform_ok_k;
}

/* Converts `count` input samples at `input` (NULL: the resampler's buffered tail) onto the end of `audio`. */
static uform_status_t uform_audio_convert_(uform_av_t const *av, uform_resampler_t *resampler, uint8_t const **input, int count,
                                           uform_audio_t *audio, size_t *capacity) {
    int most = swr_get_out_samples(resampler->context, count);
    if (most < 0) most = 0;
    UFORM_TRY(uform_audio_reserve_(av, audio, capacity, (size_t)most + 1));
    uint8_t *output = (uint8_t *)(audio->samples + audio->count);
    int written = swr_convert(resampler->context, &output, most + 1, input, count);
    if (written < 0) {
        char text[AV_ERROR_MAX_STRING_SIZE];
        return uform_fail(uform_format_k, "%s: cannot resample its audio (%s)", av->name, uform_av_error_(written, text, sizeof(text)));
    }
    audio->count += (size_t)written;
    return uform_ok_k;
}

static uform_status_t uform_audio_decode_(uform_av_t *av, double max_seconds, uform_audio_t *audio) {
    UFORM_TRY(uform_av_open_(av, AVMEDIA_TYPE_AUDIO));
    int capped = max_seconds > 0;
    double seconds = capped && max_seconds < uform_audio_seconds_max_k ? max_seconds : uform_audio_seconds_max_k;
    size_t limit = (size_t)ceil(seconds * uform_audio_rate_k), capacity = 0;
    audio->source_rate = (size_t)(av->codec->sample_rate > 0 ? av->codec->sample_rate : 0);
    audio->source_channels = (size_t)(av->codec->ch_layout.nb_channels > 0 ? av->codec->ch_layout.nb_channels : 0);
    uform_resampler_t resampler = {0};
    uform_status_t status = uform_ok_k;
    int got = 1, stopped = 0;
    while (status == uform_ok_k && !stopped) {
        status = uform_av_next_(av, &got);
        if (status != uform_ok_k || !got) break;
        AVFrame const *frame = av->frame;
        int changed = !resampler.context || frame->format != resampler.format || frame->sample_rate != resampler.rate ||
                      frame->ch_layout.nb_channels != resampler.channels;
        if (changed && resampler.context) status = uform_audio_convert_(av, &resampler, NULL, 0, audio, &capacity); /* its tail */
        if (changed) swr_free(&resampler.context);
        if (changed && status == uform_ok_k) status = uform_resampler_open_(av, frame, &resampler);
        if (status == uform_ok_k)
            status = uform_audio_convert_(av, &resampler, (uint8_t const **)frame->extended_data, frame->nb_samples, audio, &capacity);
        av_frame_unref(av->frame);
        stopped = capped ? audio->count >= limit : audio->count > limit;
    }
    if (status == uform_ok_k && resampler.context && !stopped) status = uform_audio_convert_(av, &resampler, NULL, 0, audio, &capacity);
    swr_free(&resampler.context);
    UFORM_TRY(status);
    if (audio->count > limit && !capped)
        return uform_fail(uform_unsupported_k, "%s: longer than the %d s of audio decoded without a cap (give max_seconds)", av->name,
                          uform_audio_seconds_max_k);
    if (audio->count > limit) audio->count = limit;
    if (!audio->count) return uform_fail(uform_format_k, "%s: no audio samples", av->name);
    if (!stopped) UFORM_TRY(uform_av_check_length_(av, (double)audio->count / uform_audio_rate_k));
    /* Float sources may hold values past full scale, or NaN: the frontend sees [-1, 1] only. */
    for (size_t i = 0; i < audio->count; ++i) {
        float sample = audio->samples[i];
        audio->samples[i] = sample != sample ? 0.0f : sample > 1.0f ? 1.0f : sample < -1.0f ? -1.0f : sample;
    }
    return uform_ok_k;
}

uform_status_t uform_audio_decode(void const *data, size_t size, char const *name, double max_seconds, uform_audio_t *audio) {
    name = uform_av_name_(name, "audio");
    if (!audio || (!data && size)) return uform_fail(uform_invalid_argument_k, "uform_audio_decode: NULL argument (%s)", name);
    *audio = (uform_audio_t){0};
    uform_av_t av = {.name = name, .kind = "audio", .source = {.data = data, .size = size}};
    uform_status_t status = uform_audio_decode_(&av, max_seconds, audio);
    uform_av_close_(&av);
    if (status != uform_ok_k) uform_audio_free(audio);
    return status;
}

uform_status_t uform_audio_read(char const *path, double max_seconds, uform_audio_t *audio) {
    if (!path || !audio) return uform_fail(uform_invalid_argument_k, "uform_audio_read: NULL argument");
    *audio = (uform_audio_t){0};
    uform_av_t av = {.name = path, .kind = "audio"};
    uform_status_t status = uform_av_source_file_(&av, path);
    if (status == uform_ok_k) status = uform_audio_decode_(&av, max_seconds, audio);
    uform_av_close_(&av);
    if (status != uform_ok_k) uform_audio_free(audio);
    return status;
}

/* --- Video: the frame shown at each sampling instant, converted to RGB24 by libswscale. */

typedef struct uform_sampler_t {
    struct SwsContext *scaler;
    size_t capacity, frame_bytes; /* frames `video->rgb` holds, bytes a frame */
    size_t limit;                 /* frames to keep at most */
    int converted;                /* the held frame is already the last frame of `video` */
} uform_sampler_t;

/* Converts `frame` to RGB at the video's size into its next slot, or repeats the last slot. */
static uform_status_t uform_video_emit_(uform_av_t const *av, AVFrame const *frame, uform_sampler_t *sampler, uform_video_t *video) {
    if (video->frames >= uform_video_frames_max_k || (video->frames + 1) * sampler->frame_bytes > UFORM_VIDEO_BYTES_MAX)
        return uform_fail(uform_unsupported_k,
                          "%s: more than %zu frames of %zux%zu RGB at %g fps (at most %d frames and %zu bytes are kept: give "
                          "max_frames or a lower fps)",
                          av->name, video->frames, video->width, video->height, video->fps, uform_video_frames_max_k,
                          UFORM_VIDEO_BYTES_MAX);
    if (video->frames == sampler->capacity) {
        size_t grown = sampler->capacity ? sampler->capacity * 2 : 16;
        uint8_t *rgb = realloc(video->rgb, grown * sampler->frame_bytes + 64); /* slack: scalers may write past a row's end */
        int32_t *ticks = rgb ? realloc(video->ticks, grown * sizeof(int32_t)) : NULL;
        if (rgb) video->rgb = rgb;
        if (ticks) video->ticks = ticks;
        if (!rgb || !ticks) return uform_fail(uform_out_of_memory_k, "%s: cannot hold %zu frames of video", av->name, grown);
        sampler->capacity = grown;
    }
    uint8_t *target = video->rgb + video->frames * sampler->frame_bytes;
    if (sampler->converted) memcpy(target, target - sampler->frame_bytes, sampler->frame_bytes);
    else {
        sampler->scaler = sws_getCachedContext(sampler->scaler, frame->width, frame->height, frame->format, (int)video->width,
                                               (int)video->height, AV_PIX_FMT_RGB24,
                                               SWS_BILINEAR | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT | SWS_FULL_CHR_H_INP, NULL,
                                               NULL, NULL);
        if (!sampler->scaler)
            return uform_fail(uform_unsupported_k, "%s: cannot convert %dx%d frames of %s to RGB", av->name, frame->width,
                              frame->height, av_get_pix_fmt_name(frame->format) ? av_get_pix_fmt_name(frame->format) : "?");
        /* The frame's own matrix and range (BT.601 where it names none); RGB sources have neither. */
        int space = frame->colorspace == AVCOL_SPC_UNSPECIFIED ? SWS_CS_DEFAULT : (int)frame->colorspace;
        sws_setColorspaceDetails(sampler->scaler, sws_getCoefficients(space), frame->color_range == AVCOL_RANGE_JPEG,
                                 sws_getCoefficients(SWS_CS_DEFAULT), 1, 0, 1 << 16, 1 << 16);
        uint8_t *planes[4] = {target, NULL, NULL, NULL};
        int strides[4] = {(int)(video->width * 3), 0, 0, 0};
        if (sws_scale(sampler->scaler, (uint8_t const *const *)frame->data, frame->linesize, 0, frame->height, planes, strides) <= 0)
            return uform_fail(uform_format_k, "%s: cannot convert a %dx%d frame to RGB", av->name, frame->width, frame->height);
        sampler->converted = 1;
    }
    /* Instant i / fps in ticks of 40 ms, rounded to nearest. */
    video->ticks[video->frames] = (int32_t)llround((double)video->frames * (1000.0 / uform_tick_ms_k) / video->fps);
    video->frames++;
    return uform_ok_k;
}

/* Seconds a frame lasts when it does not say: the stream's frame rate, else one tick. */
static double uform_video_frame_seconds_(AVStream const *stream) {
    AVRational rate = stream->avg_frame_rate.num > 0 && stream->avg_frame_rate.den > 0 ? stream->avg_frame_rate : stream->r_frame_rate;
    return rate.num > 0 && rate.den > 0 ? av_q2d(av_inv_q(rate)) : uform_tick_ms_k / 1000.0;
}

/* Whether the next sampling instant comes before `seconds`. */
static int uform_video_before_(uform_video_t const *video, double seconds) {
    return (double)video->frames / video->fps < seconds - uform_video_instant_seconds_;
}

static int64_t uform_frame_duration_(AVFrame const *frame) {
#if LIBAVUTIL_VERSION_INT >= AV_VERSION_INT(57, 30, 100)
    return frame->duration;
#else
    return frame->pkt_duration;
#endif
}

static uform_status_t uform_video_decode_(uform_av_t *av, double fps, size_t max_frames, uform_video_t *video) {
    if (!(fps >= 0.1 && fps <= 1000))
        return uform_fail(uform_invalid_argument_k, "%s: a sampling rate of %g frames a second (0.1 to 1000, or 0 for %d)", av->name, fps,
                          uform_video_fps_k);
    video->fps = fps;
    UFORM_TRY(uform_av_open_(av, AVMEDIA_TYPE_VIDEO));
    AVFrame *held = av_frame_alloc(); /* the last decoded frame: shown until the next one's time */
    if (!held) return uform_fail(uform_out_of_memory_k, "%s: cannot hold a frame", av->name);
    uform_sampler_t sampler = {.limit = max_frames ? max_frames : SIZE_MAX};
    double time_base = av_q2d(av->stream->time_base), fallback = uform_video_frame_seconds_(av->stream);
    int64_t start = av->stream->start_time;
    double held_time = 0, held_seconds = fallback;
    int holding = 0, got = 1;
    uform_status_t status = uform_ok_k;
    while (status == uform_ok_k && video->frames < sampler.limit) {
        status = uform_av_next_(av, &got);
        if (status != uform_ok_k || !got) break;
        AVFrame *frame = av->frame;
        if (!holding) {
            if (frame->width <= 0 || frame->height <= 0 || (size_t)frame->height > uform_video_pixels_max_k / (size_t)frame->width) {
                status = uform_fail(uform_unsupported_k, "%s: a %dx%d frame (1 to %d pixels are read)", av->name, frame->width,
                                    frame->height, uform_video_pixels_max_k);
                break;
            }
            video->width = (size_t)frame->width, video->height = (size_t)frame->height;
            sampler.frame_bytes = video->width * video->height * 3;
        }
        int64_t stamp = frame->best_effort_timestamp;
        if (start == AV_NOPTS_VALUE && stamp != AV_NOPTS_VALUE) start = stamp;
        double time = stamp != AV_NOPTS_VALUE ? (double)(stamp - start) * time_base : held_time + held_seconds;
        if (holding && !(time >= held_time)) time = held_time; /* timestamps never run back */
        /* Every instant before this frame shows the one held. */
        while (holding && status == uform_ok_k && video->frames < sampler.limit && uform_video_before_(video, time))
            status = uform_video_emit_(av, held, &sampler, video);
        int64_t duration = uform_frame_duration_(frame);
        held_seconds = duration > 0 ? (double)duration * time_base : fallback;
        held_time = time;
        av_frame_unref(held);
        av_frame_move_ref(held, frame);
        holding = 1, sampler.converted = 0;
    }
    int stopped = video->frames >= sampler.limit;
    /* The last frame lasts its duration. */
    while (holding && status == uform_ok_k && video->frames < sampler.limit && uform_video_before_(video, held_time + held_seconds))
        status = uform_video_emit_(av, held, &sampler, video);
    av_frame_free(&held);
    sws_freeContext(sampler.scaler);
    UFORM_TRY(status);
    if (!video->frames) return uform_fail(uform_format_k, "%s: no video frames", av->name);
    if (!stopped) UFORM_TRY(uform_av_check_length_(av, holding ? held_time + held_seconds : 0));
    return uform_ok_k;
}

uform_status_t uform_video_decode(void const *data, size_t size, char const *name, double fps, size_t max_frames,
                                  uform_video_t *video) {
    name = uform_av_name_(name, "video");
    if (!video || (!data && size)) return uform_fail(uform_invalid_argument_k, "uform_video_decode: NULL argument (%s)", name);
    *video = (uform_video_t){0};
    uform_av_t av = {.name = name, .kind = "video", .source = {.data = data, .size = size}};
    uform_status_t status = uform_video_decode_(&av, fps ? fps : uform_video_fps_k, max_frames, video);
    uform_av_close_(&av);
    if (status != uform_ok_k) uform_video_free(video);
    return status;
}

uform_status_t uform_video_read(char const *path, double fps, size_t max_frames, uform_video_t *video) {
    if (!path || !video) return uform_fail(uform_invalid_argument_k, "uform_video_read: NULL argument");
    *video = (uform_video_t){0};
    uform_av_t av = {.name = path, .kind = "video"};
    uform_status_t status = uform_av_source_file_(&av, path);
    if (status == uform_ok_k) status = uform_video_decode_(&av, fps ? fps : uform_video_fps_k, max_frames, video);
    uform_av_close_(&av);
    if (status != uform_ok_k) uform_video_free(video);
    return status;
}

#endif
