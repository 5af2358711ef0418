/*  av.h: audio and video into the grid (SPEC.md section 1; the rules: docs/audio_video.md).
 *  Decoding goes through FFmpeg's libraries (libavformat finds the container from the bytes,
 *  libavcodec decodes, libswresample and libswscale convert): audio becomes 16 kHz mono Float32
 *  in [-1, 1] (the mean of the source's channels), video becomes packed RGB frames, 8 bits a
 *  channel, sampled at a stated rate, each with its time in 40 ms ticks. A library built without
 *  FFmpeg keeps these calls; they fail with uform_unsupported_k and say so.
 *  Audio is cut into 20 ms frames of 320 samples (t = h = w = frame index); video into 16x16x2 RGB
 *  tubes of 1536 values (t = the first frame's tick, h = patch row, w = patch column).
 */
#ifndef UFORM_AV_H
#define UFORM_AV_H

#include "uform/types.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    uform_audio_rate_k = 16000,          /* samples a second after resampling */
    uform_audio_frame_length_k = 320,    /* samples an audio frame: 20 ms */
    uform_audio_frames_k = 512,          /* the most frames a clip fills: 10.24 s */
    uform_audio_seconds_max_k = 3600,    /* the longest audio decoded without a cap, against hostile streams */
    uform_tick_ms_k = 40,                /* the unit of a video cell's t coordinate */
    uform_tube_side_k = 16,              /* pixels a tube side */
    uform_tube_depth_k = 2,              /* frames a tube spans */
    uform_tube_length_k = 1536,          /* values a tube: 2 frames x 16 x 16 x RGB */
    uform_video_tubes_k = 1024,          /* the most tubes a clip fills */
    uform_video_fps_k = 25,              /* the sampling rate when none is given: one frame a tick */
    uform_video_pixels_max_k = 1 << 26,  /* the largest frame decoded (pixels), against hostile headers */
};

/** The most bytes of RGB frames one video decodes to, against hostile durations (1 GiB). */
#define UFORM_VIDEO_BYTES_MAX ((size_t)1 << 30)

/** Decoded audio: `count` samples of 16 kHz mono in [-1, 1]. `source_rate` and `source_channels`
 *  describe the stream before resampling. */
typedef struct uform_audio_t {
    float *samples;
    size_t count;
    size_t source_rate, source_channels;
} uform_audio_t;

/** Decoded video: `frames` frames of `height` rows of `width` RGB pixels (3 bytes each, rows
 *  `width * 3` bytes apart, frames `height * width * 3` apart); frame `i` was sampled at `i / fps`
 *  seconds from the stream's start and `ticks[i]` is that time in 40 ms ticks, rounded to nearest. */
typedef struct uform_video_t {
    uint8_t *rgb;
    int32_t *ticks;
    size_t frames, height, width;
    double fps;
} uform_video_t;

/** Decodes any audio FFmpeg reads (WAV, FLAC, MP3, Ogg Vorbis and Opus, ...) from `size` bytes at
 *  `data` into `audio` (allocated here, released with uform_audio_free): the first audio stream,
 *  its channels averaged, resampled to 16 kHz. `max_seconds` > 0 stops after that much (the rest is
 *  not decoded); 0 decodes all, up to uform_audio_seconds_max_k. A truncated, corrupt or empty file
 *  fails with uform_format_k, one without audio or with an unknown codec with uform_unsupported_k,
 *  the message naming `name` (may be NULL) and the problem. */
UFORM_API uform_status_t uform_audio_decode(void const *data, size_t size, char const *name, double max_seconds,
                                            uform_audio_t *audio);
/** Reads and decodes the file at `path` (read as it decodes, not loaded whole). */
UFORM_API uform_status_t uform_audio_read(char const *path, double max_seconds, uform_audio_t *audio);
UFORM_API void uform_audio_free(uform_audio_t *audio);

/** Decodes the first video stream of `size` bytes at `data` (WebM VP8/VP9, MP4 H.264, any container
 *  and codec FFmpeg reads) into `video` (allocated here, released with uform_video_free): frames
 *  sampled at `fps` a second (0: uform_video_fps_k), each the source frame shown at that instant,
 *  converted to RGB at the first frame's size. `max_frames` > 0 stops after that many; at most
 *  UFORM_VIDEO_BYTES_MAX bytes of frames are kept, past that the call fails naming the limit.
 *  Failures as for uform_audio_decode. */
UFORM_API uform_status_t uform_video_decode(void const *data, size_t size, char const *name, double fps, size_t max_frames,
                                            uform_video_t *video);
/** Reads and decodes the file at `path`. */
UFORM_API uform_status_t uform_video_read(char const *path, double fps, size_t max_frames, uform_video_t *video);
UFORM_API void uform_video_free(uform_video_t *video);

/** Cuts `count` samples into frames of 320: `frames[cells * 320]`, the last frame zero-padded,
 *  at most `max_frames` (0: uform_audio_frames_k) of them, the samples after them left out.
 *  `capacity` is how many frames `frames` holds; `cells` receives how many were written and
 *  `positions` (may be NULL; `[cells * 3]`) their (t, h, w) = (i, i, i). */
UFORM_API uform_status_t uform_audio_frames(float const *samples, size_t count, size_t max_frames, float *frames,
                                            int32_t *positions, size_t capacity, size_t *cells);

/** The tube grid of `frames` frames of `height` x `width` pixels in at most `max_tubes` cells (0:
 *  uform_video_tubes_k): `steps` = ceil(frames / 2) tube steps in time (at most `max_tubes`), each a
 *  `rows` x `columns` grid from uform_image_grid with at most min(512, max_tubes / steps) patches. */
UFORM_API void uform_video_grid(size_t frames, size_t height, size_t width, size_t max_tubes, size_t *steps, size_t *rows,
                                size_t *columns);

/** Resizes every frame to its grid (the filter of uform_image_patches) and writes the tubes: step by
 *  step, each step's grid row by row, `tubes[steps * rows * columns * 1536]`. A tube is its two
 *  frames, each 16 rows of 16 pixels as R, G, B (values / 255): value (frame f, y, x, channel c)
 *  at ((16 f + y) 16 + x) 3 + c. An odd last frame is repeated as its tube's second. `capacity` is
 *  how many tubes `tubes` holds; `positions` (may be NULL) receives each tube's (t, h, w): t =
 *  ticks of the step's first frame, h = patch row, w = patch column. */
UFORM_API uform_status_t uform_video_tubes(uform_video_t const *video, size_t max_tubes, float *tubes, int32_t *positions,
                                           size_t capacity, size_t *steps, size_t *rows, size_t *columns);

#ifdef __cplusplus
}
#endif
#endif
