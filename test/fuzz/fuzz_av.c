/*  fuzz_av.c: a libFuzzer harness over uform_audio_decode and uform_video_decode (FFmpeg's readers
 *  behind our custom AVIOContext) and the cutting of what they accept into cells. The first byte's
 *  low bit picks audio (0) or video (1), the rest is the file. Whatever decodes must hold samples
 *  in [-1, 1] within the cap, frames within the cap with ticks as the sampling rate gives them, and
 *  cut into frames and tubes whose values and coordinates follow SPEC.md. FFmpeg itself is not
 *  instrumented: the mutations explore it from the seeds. test/fuzz/run.sh builds and runs it.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "uform/av.h"

int LLVMFuzzerTestOneInput(uint8_t const *data, size_t size);

/* The caps keep a run short; frames past `tube_pixels_k` skip the resize, which is linear in pixels. */
enum { seconds_k = 2, frames_k = 4, tubes_k = 64, tube_pixels_k = 1 << 20 };

static void fuzz_audio_(uint8_t const *data, size_t size) {
    static float frames[uform_audio_frames_k * uform_audio_frame_length_k];
    static int32_t positions[uform_audio_frames_k * 3];
    uform_audio_t audio;
    if (uform_audio_decode(data, size, "fuzz", seconds_k, &audio) != uform_ok_k) {
        if (audio.samples || audio.count) abort(); /* a failure leaves nothing to free */
        return;
    }
    if (!audio.count || audio.count > (size_t)seconds_k * uform_audio_rate_k) abort();
    for (size_t i = 0; i < audio.count; ++i)
        if (!(audio.samples[i] >= -1.0f && audio.samples[i] <= 1.0f)) abort();
    size_t cells = 0, expected = (audio.count + uform_audio_frame_length_k - 1) / uform_audio_frame_length_k;
    expected = expected < uform_audio_frames_k ? expected : uform_audio_frames_k;
    if (uform_audio_frames(audio.samples, audio.count, 0, frames, positions, uform_audio_frames_k, &cells) != uform_ok_k ||
        cells != expected)
        abort();
    for (size_t i = 0; i < cells * 3; ++i)
        if (positions[i] != (int32_t)(i / 3)) abort();
    uform_audio_free(&audio);
}

static void fuzz_video_(uint8_t const *data, size_t size) {
    static float tubes[tubes_k * uform_tube_length_k];
    static int32_t positions[tubes_k * 3];
    uform_video_t video;
    double const fps = 10;
    if (uform_video_decode(data, size, "fuzz", fps, frames_k, &video) != uform_ok_k) {
        if (video.rgb || video.ticks || video.frames) abort();
        return;
    }
    if (!video.frames || video.frames > frames_k || !video.width || !video.height) abort();
    if (video.height * video.width > uform_video_pixels_max_k) abort();
    for (size_t i = 0; i < video.frames; ++i)
        if (video.ticks[i] != (int32_t)llround((double)i * 25 / fps)) abort();
    size_t steps, rows, columns;
    if (video.height * video.width > tube_pixels_k) {
        uform_video_free(&video);
        return;
    }
    if (uform_video_tubes(&video, tubes_k, tubes, positions, tubes_k, &steps, &rows, &columns) != uform_ok_k) abort();
    if (steps != (video.frames + 1) / 2 || !rows || !columns || steps * rows * columns > tubes_k) abort();
    for (size_t i = 0; i < steps * rows * columns * uform_tube_length_k; ++i)
        if (!(tubes[i] >= 0.0f && tubes[i] <= 1.0f)) abort();
    for (size_t i = 0; i < steps * rows * columns; ++i) {
        size_t step = i / (rows * columns), patch = i % (rows * columns);
        if (positions[i * 3] != video.ticks[2 * step] || positions[i * 3 + 1] != (int32_t)(patch / columns) ||
            positions[i * 3 + 2] != (int32_t)(patch % columns))
            abort();
    }
    uform_video_free(&video);
}

int LLVMFuzzerTestOneInput(uint8_t const *data, size_t size) {
    if (!size) return 0;
    if (data[0] & 1) fuzz_video_(data + 1, size - 1);
    else fuzz_audio_(data + 1, size - 1);
    return 0;
}
