/*  av_cells.c: decoded audio into 20 ms frames and decoded video into 16x16x2 tubes, with their
 *  (t, h, w) coordinates (include/uform/av.h; the rules: docs/audio_video.md). No FFmpeg here:
 *  a build without it still cuts audio and video decoded elsewhere. */
#include "uform/av.h"

#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "uform/image.h"

uform_status_t uform_audio_frames(float const *samples, size_t count, size_t max_frames, float *frames, int32_t *positions,
                                  size_t capacity, size_t *cells) {
    if ((!samples && count) || !frames || !cells) return uform_fail(uform_invalid_argument_k, "uform_audio_frames: NULL argument");
    if (!count) return uform_fail(uform_invalid_argument_k, "uform_audio_frames: no samples");
    if (!max_frames) max_frames = uform_audio_frames_k;
    size_t length = uform_audio_frame_length_k, total = count / length + (count % length != 0);
    size_t written = total < max_frames ? total : max_frames;
    if (written > capacity)
        return uform_fail(uform_shape_k, "uform_audio_frames: %zu samples fill %zu frames, the buffer holds %zu", count, written,
                          capacity);
    for (size_t frame = 0; frame < written; ++frame) {
        size_t first = frame * length, taken = count - first < length ? count - first : length;
        memcpy(frames + first, samples + first, taken * sizeof(float));
        memset(frames + first + taken, 0, (length - taken) * sizeof(float)); /* the last frame's tail is silence */
        if (positions) positions[frame * 3] = positions[frame * 3 + 1] = positions[frame * 3 + 2] = (int32_t)frame;
    }
    *cells = written;
    return uform_ok_k;
}

/* The most patches a step's grid may fill: the clip's share of the cells, never past an image's. */
static size_t uform_tube_budget_(size_t steps, size_t max_tubes) {
    size_t budget = max_tubes / steps;
    return budget < uform_image_patches_k ? budget : uform_image_patches_k;
}

void uform_video_grid(size_t frames, size_t height, size_t width, size_t max_tubes, size_t *steps, size_t *rows, size_t *columns) {
    if (!max_tubes) max_tubes = uform_video_tubes_k;
    if (!frames || !height || !width) {
        *steps = *rows = *columns = 0;
        return;
    }
    size_t s = frames / uform_tube_depth_k + (frames % uform_tube_depth_k != 0);
    s = s < max_tubes ? s : max_tubes;
    uform_image_grid(height, width, uform_tube_budget_(s, max_tubes), rows, columns);
    *steps = s;
}

uform_status_t uform_video_tubes(uform_video_t const *video, size_t max_tubes, float *tubes, int32_t *positions, size_t capacity,
                                 size_t *steps, size_t *rows, size_t *columns) {
    if (!video || !video->rgb || !video->ticks || !tubes || !steps || !rows || !columns)
        return uform_fail(uform_invalid_argument_k, "uform_video_tubes: NULL argument");
    if (!video->frames || !video->height || !video->width || video->height > uform_video_pixels_max_k / video->width)
        return uform_fail(uform_invalid_argument_k, "uform_video_tubes: %zu frames of %zux%zu pixels", video->frames, video->width,
                          video->height);
    if (!max_tubes) max_tubes = uform_video_tubes_k;
    size_t s, r, c;
    uform_video_grid(video->frames, video->height, video->width, max_tubes, &s, &r, &c);
    size_t patches_count = r * c, budget = uform_tube_budget_(s, max_tubes);
    if (s * patches_count > capacity)
        return uform_fail(uform_shape_k, "uform_video_tubes: the clip fills %zu steps of %zux%zu tubes, the buffer holds %zu", s, r, c,
                          capacity);
    size_t pixels_count = video->height * video->width, frame_bytes = pixels_count * 3;
    uint8_t *rgba = malloc(pixels_count * 4);
    float *patches = malloc(patches_count * uform_patch_length_k * sizeof(float));
    uform_status_t status = rgba && patches ? uform_ok_k
                                            : uform_fail(uform_out_of_memory_k, "uform_video_tubes: cannot resize %zux%zu frames",
                                                         video->width, video->height);
    size_t side_pixels = uform_tube_side_k * uform_tube_side_k;
    for (size_t step = 0; status == uform_ok_k && step < s; ++step)
        for (size_t depth = 0; status == uform_ok_k && depth < uform_tube_depth_k; ++depth) {
            size_t frame = step * uform_tube_depth_k + depth;
            /* An odd last frame is its tube's second too: its patches are still in `patches`. */
            if (frame < video->frames) {
                uint8_t const *source = video->rgb + frame * frame_bytes;
                for (size_t pixel = 0; pixel < pixels_count; ++pixel) {
                    memcpy(rgba + pixel * 4, source + pixel * 3, 3);
                    rgba[pixel * 4 + 3] = 255;
                }
                uform_pixels_t pixels = {rgba, video->height, video->width, video->width * 4};
                size_t got_rows, got_columns;
                status = uform_image_patches(&pixels, budget, patches, patches_count, &got_rows, &got_columns);
            }
            for (size_t patch = 0; status == uform_ok_k && patch < patches_count; ++patch) {
                float *target = tubes + (step * patches_count + patch) * uform_tube_length_k + depth * side_pixels * 3;
                float const *values = patches + patch * uform_patch_length_k;
                for (size_t pixel = 0; pixel < side_pixels; ++pixel)
                    for (size_t channel = 0; channel < 3; ++channel) target[pixel * 3 + channel] = values[pixel * 4 + channel];
            }
        }
    for (size_t step = 0; status == uform_ok_k && positions && step < s; ++step)
        for (size_t patch = 0; patch < patches_count; ++patch) {
            int32_t *position = positions + (step * patches_count + patch) * 3;
            position[0] = video->ticks[step * uform_tube_depth_k], position[1] = (int32_t)(patch / c), position[2] = (int32_t)(patch % c);
#if defined(UFORM_PLANT_TUBE_TICKS_FRAMES)
            position[0] = (int32_t)(step * uform_tube_depth_k); /* planted: t in frames, not 40 ms ticks */
#endif
        }
    free(rgba), free(patches);
    if (status == uform_ok_k) *steps = s, *rows = r, *columns = c;
    return status;
}
