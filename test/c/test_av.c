/*  test_av.c: audio and video decoding through FFmpeg (include/uform/av.h) against facts known by
 *  construction, and their cutting into cells against a direct reference. Fixtures are written at
 *  test time: WAV files by hand (exact checks), the rest by the `ffmpeg` CLI from tones and colour
 *  fields of known frequency, amplitude and colour (skipped with a message where it is absent).
 *  Planted controls (a wrong channel, a wrong rate, a wrong downmix, BGR for RGB, a time in frames
 *  instead of ticks) must each be rejected by the check they target. Prints "N passed, M failed".
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/file.h"
#include "uform/av.h"
#include "uform/image.h"
#include "check.h"
#include "png_file.h"

/* --- Fixtures. */

/* Runs the ffmpeg CLI with `arguments` (its output file last) in the scratch folder. */
static int ffmpeg(char const *arguments) {
    char command[2048];
    snprintf(command, sizeof(command), "cd '%s' && ffmpeg -nostdin -hide_banner -loglevel error -y %s", folder_, arguments);
    int ok = system(command) == 0;
    if (!ok) fprintf(stderr, "ffmpeg failed: %s\n", command);
    return ok;
}

/* Writes `name` from the ffmpeg inputs `source` through the output options `codec`. */
static int make_fixture(char const *source, char const *codec, char const *name) {
    char arguments[1536];
    snprintf(arguments, sizeof(arguments), "%s %s %s", source, codec, name);
    int ok = ffmpeg(arguments);
    CHECK(ok);
    return ok;
}

static void write_le_(unsigned char *at, uint32_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) at[i] = (unsigned char)(value >> (8 * i));
}

/* A 16-bit PCM WAV of `frames` x `channels` samples. */
static void write_wav(char const *name, int16_t const *samples, size_t frames, unsigned channels, unsigned rate) {
    size_t data = frames * channels * 2;
    unsigned char *file = malloc(44 + data);
    memcpy(file, "RIFF", 4), write_le_(file + 4, (uint32_t)(36 + data), 4), memcpy(file + 8, "WAVEfmt ", 8);
    write_le_(file + 16, 16, 4), write_le_(file + 20, 1, 2), write_le_(file + 22, channels, 2), write_le_(file + 24, rate, 4);
    write_le_(file + 28, rate * channels * 2, 4), write_le_(file + 32, channels * 2, 2), write_le_(file + 34, 16, 2);
    memcpy(file + 36, "data", 4), write_le_(file + 40, (uint32_t)data, 4);
    for (size_t i = 0; i < frames * channels; ++i) write_le_(file + 44 + 2 * i, (uint16_t)samples[i], 2);
    write_file(name, file, 44 + data);
    free(file);
}

/* The first `keep` bytes of `from` as `to` (keep = -1: half). */
static void cut_file(char const *from, char const *to, long keep) {
    unsigned char *data;
    size_t size;
    if (uform_file_read(path_in(from), &data, &size) != uform_ok_k) return;
    write_file(to, data, keep < 0 ? size / 2 : (size_t)keep);
    free(data);
}

/* --- Tones: least-squares amplitudes of known frequencies, in float64. */

enum { tones_max_k = 2 };

/* Fits sin and cos at each frequency over samples [skip, count - skip) and returns each tone's
 * amplitude and the residual's RMS. */
static void fit_tones(float const *samples, size_t count, double rate, double const *frequencies, size_t tones, double *amplitudes,
                      double *residual) {
    size_t skip = 64, unknowns = 2 * tones; /* the resampler's edges: half its filter, a few dozen samples */
    double normal[2 * tones_max_k][2 * tones_max_k + 1] = {{0}};
    for (size_t i = skip; i + skip < count; ++i) {
        double basis[2 * tones_max_k];
        for (size_t tone = 0; tone < tones; ++tone) {
            double phase = 6.283185307179586476925 * frequencies[tone] * (double)i / rate;
            basis[2 * tone] = sin(phase), basis[2 * tone + 1] = cos(phase);
        }
        for (size_t row = 0; row < unknowns; ++row) {
            for (size_t column = 0; column < unknowns; ++column) normal[row][column] += basis[row] * basis[column];
            normal[row][unknowns] += basis[row] * samples[i];
        }
    }
    for (size_t pivot = 0; pivot < unknowns; ++pivot) /* Gauss-Jordan: the system is well conditioned */
        for (size_t row = 0; row < unknowns; ++row) {
            if (row == pivot) continue;
            double factor = normal[row][pivot] / normal[pivot][pivot];
            for (size_t column = pivot; column <= unknowns; ++column) normal[row][column] -= factor * normal[pivot][column];
        }
    double coefficients[2 * tones_max_k] = {0};
    for (size_t row = 0; row < unknowns; ++row) coefficients[row] = normal[row][unknowns] / normal[row][row];
    for (size_t tone = 0; tone < tones; ++tone) amplitudes[tone] = hypot(coefficients[2 * tone], coefficients[2 * tone + 1]);
    double sum = 0;
    for (size_t i = skip; i + skip < count; ++i) {
        double model = 0;
        for (size_t tone = 0; tone < tones; ++tone) {
            double phase = 6.283185307179586476925 * frequencies[tone] * (double)i / rate;
            model += coefficients[2 * tone] * sin(phase) + coefficients[2 * tone + 1] * cos(phase);
        }
        sum += (samples[i] - model) * (samples[i] - model);
    }
    *residual = sqrt(sum / (double)(count - 2 * skip));
}

/* What a tone fixture should decode to, and how closely. */
typedef struct {
    double frequencies[tones_max_k], amplitudes[tones_max_k];
    size_t tones, length;                 /* samples expected at 16 kHz */
    double amplitude_bound, residual_bound;
    size_t length_bound;
} tones_t;

/* Whether `count` samples, read as `rate` Hz, hold the expected tones within the bounds. */
static int tones_match(char const *label, float const *samples, size_t count, double rate, tones_t const *expected, int quiet) {
    double amplitudes[tones_max_k], residual;
    fit_tones(samples, count, rate, expected->frequencies, expected->tones, amplitudes, &residual);
    int ok = residual <= expected->residual_bound &&
             (count > expected->length ? count - expected->length : expected->length - count) <= expected->length_bound;
    for (size_t tone = 0; tone < expected->tones; ++tone)
        ok &= fabs(amplitudes[tone] - expected->amplitudes[tone]) <= expected->amplitude_bound;
    if (!quiet || !ok)
        printf("  %-22s %6zu samples (%zu +- %zu), amplitudes %.5f %.5f (%.5f %.5f +- %.0e), residual %.1e (<= %.0e)%s\n", label,
               count, expected->length, expected->length_bound, amplitudes[0], expected->tones > 1 ? amplitudes[1] : 0,
               expected->amplitudes[0], expected->tones > 1 ? expected->amplitudes[1] : 0, expected->amplitude_bound, residual,
               expected->residual_bound, ok ? "" : quiet ? "  (rejected, as planted)" : "  MISMATCH");
    return ok;
}

/* --- Audio. */

/* WAV at 16 kHz decodes without resampling: exactly the PCM / 32768, channels averaged (the sum of
 * two or three small multiples of 2^-15 times 1/channels is exact to a float's rounding, 2^-24). */
static void test_audio_exact(void) {
    enum { frames_k = 1000 };
    int16_t mono[frames_k], stereo[2 * frames_k], three[3 * frames_k];
    for (int i = 0; i < frames_k; ++i) {
        mono[i] = (int16_t)((i * 7919) % 65536 - 32768);
        stereo[2 * i] = (int16_t)(i * 31 - 15000), stereo[2 * i + 1] = (int16_t)(-i * 17 + 9000);
        for (int c = 0; c < 3; ++c) three[3 * i + c] = (int16_t)((i * (c + 3) * 101) % 30000 - 15000);
    }
    write_wav("mono16k.wav", mono, frames_k, 1, 16000);
    write_wav("stereo16k.wav", stereo, frames_k, 2, 16000);
    write_wav("three16k.wav", three, frames_k, 3, 16000);
    uform_audio_t audio;
    double worst[3] = {0, 0, 0};
    CHECK(uform_audio_read(path_in("mono16k.wav"), 0, &audio) == uform_ok_k && audio.count == frames_k);
    CHECK(audio.source_rate == 16000 && audio.source_channels == 1);
    for (size_t i = 0; i < audio.count && i < frames_k; ++i) worst[0] = fmax(worst[0], fabs(audio.samples[i] - mono[i] / 32768.0));
    uform_audio_free(&audio);
    CHECK(uform_audio_read(path_in("stereo16k.wav"), 0, &audio) == uform_ok_k && audio.count == frames_k);
    for (size_t i = 0; i < audio.count && i < frames_k; ++i)
        worst[1] = fmax(worst[1], fabs(audio.samples[i] - (stereo[2 * i] + stereo[2 * i + 1]) / 2 / 32768.0));
    uform_audio_free(&audio);
    CHECK(uform_audio_read(path_in("three16k.wav"), 0, &audio) == uform_ok_k && audio.count == frames_k);
    for (size_t i = 0; i < audio.count && i < frames_k; ++i)
        worst[2] = fmax(worst[2], fabs(audio.samples[i] - (three[3 * i] + three[3 * i + 1] + three[3 * i + 2]) / 3.0 / 32768.0));
    uform_audio_free(&audio);
    printf("  16 kHz WAV: worst error mono %.1e, stereo mean %.1e, 3-channel mean %.1e (<= 2^-24 = 6.0e-08)\n", worst[0], worst[1],
           worst[2]);
    CHECK(worst[0] <= 0x1p-24 && worst[1] <= 0x1p-24 && worst[2] <= 0x1p-24);

    /* max_seconds: exactly that many samples. */
    CHECK(uform_audio_read(path_in("mono16k.wav"), 0.025, &audio) == uform_ok_k && audio.count == 400);
    uform_audio_free(&audio);
}

/* A 1 s stereo tone at 44.1 kHz, left 0.5 sin(440 Hz), right 0.25 sin(1000 Hz): the 16 kHz mono
 * mean holds 0.25 at 440 Hz and 0.125 at 1000 Hz, in every codec. */
static void test_audio_tones(void) {
    char const *source = "-f lavfi -i 'aevalsrc=0.5*sin(2*PI*440*t)|0.25*sin(2*PI*1000*t):s=44100:d=1:c=stereo'";
    struct {
        char const *name, *codec;
        int lossy;
    } const files[] = {
        {"tone.wav", "-c:a pcm_s16le", 0},          {"tone.flac", "-c:a flac -sample_fmt s16", 0},
        {"tone.mp3", "-c:a libmp3lame -b:a 192k", 1}, {"tone_vorbis.ogg", "-c:a libvorbis -q:a 6", 1},
        {"tone_opus.ogg", "-c:a libopus -b:a 128k", 1},
    };
    /* Lossless: 16-bit rounding (2^-16 / sqrt(12) RMS) and libswresample's Kaiser-windowed sinc,
     * whose passband error at <= 1 kHz is far below 1e-4, stay two orders under 1e-3; a wrong
     * downmix moves an amplitude by >= 0.1. Lengths: 44100 -> 16000 samples, the resampler's
     * rounding of its delay at either end worth a sample or two. Lossy codecs keep a tone to about
     * their quantization noise (< 1% of full scale at these rates); their lengths may differ by
     * the encoder's padding, at most a frame (MP3's 1152 samples at 44.1 kHz: 418 at 16 kHz). */
    tones_t lossless = {{440, 1000}, {0.25, 0.125}, 2, 16000, 1e-3, 1e-3, 2};
    tones_t lossy = {{440, 1000}, {0.25, 0.125}, 2, 16000, 0.02, 0.02, 420};
    for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); ++f) {
        if (!make_fixture(source, files[f].codec, files[f].name)) continue;
        uform_audio_t audio, again;
        CHECK(uform_audio_read(path_in(files[f].name), 0, &audio) == uform_ok_k);
        CHECK(tones_match(files[f].name, audio.samples, audio.count, 16000, files[f].lossy ? &lossy : &lossless, 0));
        CHECK(audio.source_channels == 2);
        /* From memory: the same samples. */
        unsigned char *data;
        size_t size;
        CHECK(uform_file_read(path_in(files[f].name), &data, &size) == uform_ok_k);
        CHECK(uform_audio_decode(data, size, files[f].name, 0, &again) == uform_ok_k && again.count == audio.count &&
              !memcmp(again.samples, audio.samples, audio.count * sizeof(float)));
        uform_audio_free(&again);
        free(data);
        if (!files[f].lossy) {
            /* Planted: the same samples read at a wrong rate, or scaled as a sum or an equal-power downmix would. */
            CHECK(!tones_match("  as 22.05 kHz", audio.samples, audio.count, 22050, &lossless, 1));
            float *scaled = malloc(audio.count * sizeof(float));
            for (double factor = 2; factor > 1; factor = factor == 2 ? sqrt(2) : 1) {
                for (size_t i = 0; i < audio.count; ++i) scaled[i] = (float)(audio.samples[i] * factor);
                CHECK(!tones_match(factor == 2 ? "  summed" : "  equal-power", scaled, audio.count, 16000, &lossless, 1));
            }
            free(scaled);
            tones_t long_expected = lossless; /* a rate taken as 22.05 kHz would give this many */
            long_expected.length = 22050;
            CHECK(!tones_match("  length at 22.05 kHz", audio.samples, audio.count, 16000, &long_expected, 1));
        }
        uform_audio_free(&audio);
    }
    /* Planted: the left channel alone must fail the stereo expectation. */
    uform_audio_t left;
    if (make_fixture(source, "-af 'pan=mono|c0=c0' -c:a pcm_s16le", "left.wav")) {
        CHECK(uform_audio_read(path_in("left.wav"), 0, &left) == uform_ok_k);
        CHECK(!tones_match("  left channel only", left.samples, left.count, 16000, &lossless, 1));
        uform_audio_free(&left);
    }
}

/* Broken files: each fails with its status and a message naming the file. */
static void test_audio_errors(void) {
    uform_audio_t audio;
    cut_file("tone.wav", "half.wav", -1);
    CHECK(fails_with(uform_audio_read(path_in("half.wav"), 0, &audio), uform_format_k, "half.wav", "truncated"));
    CHECK(audio.samples == NULL && audio.count == 0);
    cut_file("tone.flac", "half.flac", -1);
    CHECK(fails_with(uform_audio_read(path_in("half.flac"), 0, &audio), uform_format_k, "half.flac", NULL));
    cut_file("tone.mp3", "half.mp3", -1);
    CHECK(fails_with(uform_audio_read(path_in("half.mp3"), 0, &audio), uform_format_k, "half.mp3", NULL));
    /* A capped read stops before the cut, so the shortfall is no failure there. */
    CHECK(uform_audio_read(path_in("half.wav"), 0.25, &audio) == uform_ok_k && audio.count == 4000);
    uform_audio_free(&audio);
    unsigned char noise[4096];
    uint32_t state = 12345;
    for (size_t i = 0; i < sizeof(noise); ++i) state = state * 1664525u + 1013904223u, noise[i] = (unsigned char)(state >> 24);
    write_file("noise.bin", noise, sizeof(noise));
    CHECK(fails_with(uform_audio_read(path_in("noise.bin"), 0, &audio), uform_format_k, "noise.bin", "not a readable audio file"));
    CHECK(fails_with(uform_audio_decode(noise, sizeof(noise), "noise-in-memory", 0, &audio), uform_format_k, "noise-in-memory", NULL));
    write_file("empty.wav", "", 0);
    CHECK(fails_with(uform_audio_read(path_in("empty.wav"), 0, &audio), uform_format_k, "empty.wav", "empty"));
    CHECK(fails_with(uform_audio_decode("", 0, NULL, 0, &audio), uform_format_k, "audio", "empty"));
    write_png("picture.png", 16, 16, 1);
    CHECK(fails_with(uform_audio_read(path_in("picture.png"), 0, &audio), uform_unsupported_k, "picture.png", "no audio stream"));
    CHECK(fails_with(uform_audio_read(path_in("absent.wav"), 0, &audio), uform_io_k, "absent.wav", "cannot open"));
    CHECK(fails_with(uform_audio_read(folder_, 0, &audio), uform_io_k, "not a regular file", NULL));
    CHECK(fails_with(uform_audio_decode(NULL, 4, "x", 0, &audio), uform_invalid_argument_k, "NULL", NULL));
}

/* --- Video. */

/* Red, green and blue fields of 0.4 s each at 25 fps, 64x48 pixels (the concat filter's output). */
static char const *const colours_ =
    "-filter_complex 'color=c=0xff0000:s=64x48:r=25:d=0.4[a];color=c=0x00ff00:s=64x48:r=25:d=0.4[b];"
    "color=c=0x0000ff:s=64x48:r=25:d=0.4[c];[a][b][c]concat=n=3:v=1:a=0[v]' -map '[v]' -pix_fmt yuv420p";

/* The largest distance of any pixel of `frame` from `rgb`. */
static int colour_distance(uint8_t const *frame, size_t pixels, uint8_t const rgb[3]) {
    int worst = 0;
    for (size_t i = 0; i < pixels * 3; ++i) {
        int distance = abs((int)frame[i] - (int)rgb[i % 3]);
        worst = distance > worst ? distance : worst;
    }
    return worst;
}

/* The field shown at `seconds`: red before 0.4 s, green before 0.8 s, then blue. */
static uint8_t const *field_at(double seconds, int swapped) {
    static uint8_t const fields[3][3] = {{255, 0, 0}, {0, 255, 0}, {0, 0, 255}}, bgr[3][3] = {{0, 0, 255}, {0, 255, 0}, {255, 0, 0}};
    int which = seconds < 0.4 - 1e-9 ? 0 : seconds < 0.8 - 1e-9 ? 1 : 2;
    return swapped ? bgr[which] : fields[which];
}

/* Whether every frame of `video` is the field its tick says, within `bound` levels. */
static int fields_match(uform_video_t const *video, int bound, int swapped, int *worst) {
    int ok = 1;
    *worst = 0;
    for (size_t i = 0; i < video->frames; ++i) {
        int distance = colour_distance(video->rgb + i * video->height * video->width * 3, video->height * video->width,
                                       field_at(video->ticks[i] * 0.04, swapped));
        *worst = distance > *worst ? distance : *worst;
        ok &= distance <= bound;
    }
    return ok;
}

/* Whether tube positions are (t = the tick of the step's first frame as the sampling rate gives it,
 * h = patch row, w = patch column), derived here from the rate, not read from the video. */
static int tube_positions_match(int32_t const *positions, size_t steps, size_t rows, size_t columns, double fps) {
    for (size_t step = 0; step < steps; ++step)
        for (size_t patch = 0; patch < rows * columns; ++patch) {
            int32_t const *p = positions + (step * rows * columns + patch) * 3;
            if (p[0] != (int32_t)llround(2.0 * (double)step * 25.0 / fps) || p[1] != (int32_t)(patch / columns) ||
                p[2] != (int32_t)(patch % columns))
                return 0;
        }
    return 1;
}

static void test_video_files(void) {
    struct {
        char const *name, *codec;
    } const files[] = {
        {"colours_vp8.webm", "-c:v libvpx -b:v 1M"},
        {"colours_vp9.webm", "-c:v libvpx-vp9 -b:v 1M -deadline realtime"},
        {"colours_h264.mp4", "-c:v libx264 -preset ultrafast -crf 10"},
    };
    /* BT.601 limited-range round trip: Y, Cb, Cr each rounded to 0.5 level, times the inverse
     * matrix's largest row sum (1.164 + 2.018) is under 2 levels; a lossy codec on a flat field
     * adds its DC quantization, a few levels at these rates: 8 in all. A swapped channel is 255 off. */
    int const bound = 8;
    for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); ++f) {
        if (!make_fixture(colours_, files[f].codec, files[f].name)) continue;
        uform_video_t video, again;
        int worst = 0, swapped_worst = 0;
        /* 5 fps: instants 0, 0.2, ..., 1.0 s of the 1.2 s clip; ticks 0, 5, ..., 25. */
        CHECK(uform_video_read(path_in(files[f].name), 5, 0, &video) == uform_ok_k);
        CHECK(video.frames == 6 && video.width == 64 && video.height == 48 && video.fps == 5);
        for (size_t i = 0; i < video.frames; ++i) CHECK(video.ticks[i] == (int32_t)(5 * i));
        CHECK(fields_match(&video, bound, 0, &worst));
        CHECK(!fields_match(&video, bound, 1, &swapped_worst)); /* planted: BGR for RGB */
        printf("  %-18s %zu frames %zux%zu at 5 fps, worst colour error %d (<= %d); as BGR %d (rejected, as planted)\n",
               files[f].name, video.frames, video.width, video.height, worst, bound, swapped_worst);
        /* The tubes of it: 3 steps, t = 0, 10, 20 ticks; a time in frames (0, 2, 4) is rejected. */
        size_t steps = 0, rows = 0, columns = 0;
        float *tubes = malloc(1024 * uform_tube_length_k * sizeof(float));
        int32_t *positions = malloc(1024 * 3 * sizeof(int32_t));
        CHECK(uform_video_tubes(&video, 0, tubes, positions, 1024, &steps, &rows, &columns) == uform_ok_k);
        CHECK(steps == 3 && rows == 3 && columns == 4); /* 64x48 is 12 patches at its own size */
        CHECK(tube_positions_match(positions, steps, rows, columns, 5));
        for (size_t i = 0; i < steps * rows * columns; ++i) positions[i * 3] = (int32_t)(i / (rows * columns) * 2);
        CHECK(!tube_positions_match(positions, steps, rows, columns, 5)); /* planted: t in frames */
        /* Step 1 is frames 2 and 3 (0.4 and 0.6 s): green in every pixel of both halves. */
        float worst_green = 0;
        for (size_t v = 0; v < rows * columns * uform_tube_length_k; ++v) {
            float expected = v % 3 == 1 ? 1.0f : 0.0f;
            worst_green = fmaxf(worst_green, fabsf(tubes[rows * columns * uform_tube_length_k + v] - expected));
        }
        CHECK(worst_green <= bound / 255.0f);
        free(tubes), free(positions);
        /* From memory: the same frames. Other rates and caps. */
        unsigned char *data;
        size_t size;
        CHECK(uform_file_read(path_in(files[f].name), &data, &size) == uform_ok_k);
        CHECK(uform_video_decode(data, size, files[f].name, 5, 0, &again) == uform_ok_k && again.frames == video.frames &&
              !memcmp(again.rgb, video.rgb, video.frames * video.height * video.width * 3));
        uform_video_free(&again);
        CHECK(uform_video_decode(data, size, files[f].name, 0, 0, &again) == uform_ok_k && again.frames == 30 && again.fps == 25);
        for (size_t i = 0; i < again.frames; ++i) CHECK(again.ticks[i] == (int32_t)i);
        CHECK(fields_match(&again, bound, 0, &worst));
        uform_video_free(&again);
        CHECK(uform_video_decode(data, size, files[f].name, 10, 7, &again) == uform_ok_k && again.frames == 7);
        for (size_t i = 0; i < again.frames; ++i) CHECK(again.ticks[i] == (int32_t)llround(2.5 * (double)i));
        CHECK(fields_match(&again, bound, 0, &worst));
        uform_video_free(&again);
        free(data);
        uform_video_free(&video);
    }
}

static void test_video_errors(void) {
    uform_video_t video;
    cut_file("colours_h264.mp4", "half.mp4", -1);
    CHECK(fails_with(uform_video_read(path_in("half.mp4"), 5, 0, &video), uform_format_k, "half.mp4", NULL));
    CHECK(video.rgb == NULL && video.frames == 0);
    cut_file("colours_vp8.webm", "half.webm", -1);
    CHECK(fails_with(uform_video_read(path_in("half.webm"), 5, 0, &video), uform_format_k, "half.webm", NULL));
    CHECK(fails_with(uform_video_read(path_in("noise.bin"), 5, 0, &video), uform_format_k, "noise.bin", "not a readable video file"));
    CHECK(fails_with(uform_video_read(path_in("empty.wav"), 5, 0, &video), uform_format_k, "empty.wav", "empty"));
    CHECK(fails_with(uform_video_read(path_in("tone.wav"), 5, 0, &video), uform_unsupported_k, "tone.wav", "no video stream"));
    uform_audio_t audio;
    CHECK(fails_with(uform_audio_read(path_in("colours_vp8.webm"), 0, &audio), uform_unsupported_k, "colours_vp8.webm",
                     "no audio stream"));
    CHECK(fails_with(uform_video_read(path_in("colours_vp8.webm"), 5000, 0, &video), uform_invalid_argument_k, "sampling rate", NULL));
    /* Headers claiming 10000x10000 pixels a frame (past our limit) and 20000x20000 (past FFmpeg's
     * own): refused before anything that size is allocated. */
    char const *huge = "YUV4MPEG2 W10000 H10000 F25:1 Ip A1:1 C420jpeg\nFRAME\n";
    write_file("huge.y4m", huge, strlen(huge));
    CHECK(fails_with(uform_video_read(path_in("huge.y4m"), 5, 0, &video), uform_unsupported_k, "huge.y4m", "exceed"));
    char const *huger = "YUV4MPEG2 W20000 H20000 F25:1 Ip A1:1 C420jpeg\nFRAME\n";
    write_file("huger.y4m", huger, strlen(huger));
    CHECK(fails_with(uform_video_read(path_in("huger.y4m"), 5, 0, &video), uform_format_k, "huger.y4m", "not a readable"));
}

/* --- Cells. */

/* Frames against a direct reference: samples in order, the last frame zero-padded, (i, i, i). */
static void test_audio_frames(void) {
    size_t counts[] = {1, 319, 320, 321, 700, 163840, 163841, 200000};
    float *samples = malloc(200000 * sizeof(float)), *frames = malloc(600 * 320 * sizeof(float));
    int32_t *positions = malloc(600 * 3 * sizeof(int32_t));
    for (size_t i = 0; i < 200000; ++i) samples[i] = (float)((double)(i % 997) / 997.0 - 0.5);
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); ++c) {
        size_t count = counts[c], cells = 0, expected = (count + 319) / 320;
        expected = expected < 512 ? expected : 512; /* 10.24 s of 16 kHz fills 512 */
        CHECK(uform_audio_frames(samples, count, 0, frames, positions, 600, &cells) == uform_ok_k && cells == expected);
        size_t wrong = 0;
        for (size_t frame = 0; frame < cells; ++frame) {
            for (size_t s = 0; s < 320; ++s) {
                size_t index = frame * 320 + s;
                wrong += frames[index] != (index < count ? samples[index] : 0.0f);
            }
            for (int axis = 0; axis < 3; ++axis) wrong += positions[frame * 3 + axis] != (int32_t)frame;
        }
        CHECK(wrong == 0);
    }
    size_t cells = 0;
    CHECK(uform_audio_frames(samples, 163840, 0, frames, NULL, 600, &cells) == uform_ok_k && cells == 512);
    CHECK(uform_audio_frames(samples, 2000, 4, frames, NULL, 4, &cells) == uform_ok_k && cells == 4);
    CHECK(fails_with(uform_audio_frames(samples, 2000, 0, frames, NULL, 6, &cells), uform_shape_k, "7 frames", "holds 6"));
    CHECK(fails_with(uform_audio_frames(samples, 0, 0, frames, NULL, 6, &cells), uform_invalid_argument_k, "no samples", NULL));
    free(samples), free(frames), free(positions);
}

/* Tubes against a direct reference: frames whose size is already whole patches within the budget
 * are cut without a resize, value (f, y, x, c) of a tube = pixel / 255; resized frames match the
 * image resize of the same frame (uform_image_patches, tested on its own), RGB of its RGBA. */
static void test_video_tubes(void) {
    enum { frames_k = 3, height_k = 32, width_k = 48 };
    uform_video_t video = {.frames = frames_k, .height = height_k, .width = width_k, .fps = 5};
    video.rgb = malloc(frames_k * height_k * width_k * 3);
    video.ticks = malloc(frames_k * sizeof(int32_t));
    for (size_t i = 0; i < frames_k * height_k * width_k * 3; ++i) video.rgb[i] = (uint8_t)((i * 7 + i / 97) % 256);
    for (size_t f = 0; f < frames_k; ++f) video.ticks[f] = (int32_t)(5 * f);
    float *tubes = malloc(16 * uform_tube_length_k * sizeof(float)), *patches = malloc(6 * uform_patch_length_k * sizeof(float));
    int32_t positions[16 * 3];
    size_t steps, rows, columns;
    CHECK(uform_video_tubes(&video, 12, tubes, positions, 16, &steps, &rows, &columns) == uform_ok_k);
    CHECK(steps == 2 && rows == 2 && columns == 3); /* 12 cells: 6 a step, 32x48 px is 2x3 patches */
    size_t wrong = 0;
    for (size_t step = 0; step < steps; ++step)
        for (size_t patch = 0; patch < rows * columns; ++patch)
            for (size_t f = 0; f < 2; ++f)
                for (size_t y = 0; y < 16; ++y)
                    for (size_t x = 0; x < 16; ++x)
                        for (size_t c = 0; c < 3; ++c) {
                            size_t frame = 2 * step + f < frames_k ? 2 * step + f : frames_k - 1; /* odd: repeated */
                            size_t py = patch / columns * 16 + y, px = patch % columns * 16 + x;
                            float expected = video.rgb[((frame * height_k + py) * width_k + px) * 3 + c] / 255.0f;
                            wrong += tubes[(step * rows * columns + patch) * 1536 + ((16 * f + y) * 16 + x) * 3 + c] != expected;
                        }
    CHECK(wrong == 0);
    CHECK(tube_positions_match(positions, steps, rows, columns, video.fps));
    /* Resized: 4 cells, 2 a step, 1x2 patches (uform_image_grid with 2). */
    CHECK(uform_video_tubes(&video, 4, tubes, positions, 16, &steps, &rows, &columns) == uform_ok_k);
    CHECK(steps == 2 && rows == 1 && columns == 2);
    uint8_t *rgba = malloc(height_k * width_k * 4);
    wrong = 0;
    for (size_t frame = 0; frame < frames_k + 1; ++frame) {
        size_t source = frame < frames_k ? frame : frames_k - 1, r, c;
        for (size_t p = 0; p < height_k * width_k; ++p) {
            memcpy(rgba + p * 4, video.rgb + (source * height_k * width_k + p) * 3, 3);
            rgba[p * 4 + 3] = 255;
        }
        uform_pixels_t pixels = {rgba, height_k, width_k, width_k * 4};
        CHECK(uform_image_patches(&pixels, 2, patches, 6, &r, &c) == uform_ok_k && r == 1 && c == 2);
        for (size_t patch = 0; patch < 2; ++patch)
            for (size_t pixel = 0; pixel < 256; ++pixel)
                for (size_t channel = 0; channel < 3; ++channel)
                    wrong += tubes[((frame / 2) * 2 + patch) * 1536 + ((frame % 2) * 256 + pixel) * 3 + channel] !=
                             patches[patch * 1024 + pixel * 4 + channel];
    }
    CHECK(wrong == 0);
    free(rgba);
    CHECK(fails_with(uform_video_tubes(&video, 12, tubes, positions, 5, &steps, &rows, &columns), uform_shape_k, "holds 5", NULL));
    /* The grid rule: the cells split over the steps, each step's grid at most an image's. */
    uform_video_grid(2, 1080, 1080, 0, &steps, &rows, &columns);
    CHECK(steps == 1 && rows == 22 && columns == 23);
    uform_video_grid(250, 1080, 1920, 0, &steps, &rows, &columns);
    CHECK(steps == 125 && rows * columns <= 8 && columns > rows);
    uform_video_grid(5000, 48, 64, 0, &steps, &rows, &columns);
    CHECK(steps == 1024 && rows == 1 && columns == 1);
    free(tubes), free(patches);
    uform_video_free(&video);
}

int main(void) {
    if (!scratch_open("uform_av")) return 2;
    test_audio_frames();
    test_video_tubes();
    uform_audio_t audio;
    uform_status_t status = uform_audio_decode("RIFF", 4, "probe", 0, &audio);
    if (status == uform_unsupported_k && strstr(uform_last_error(), "without FFmpeg")) {
        printf("this build has no FFmpeg: the decoding calls say so (checked); nothing to decode\n");
        CHECK(fails_with(uform_video_read("clip.webm", 5, 0, &(uform_video_t){0}), uform_unsupported_k, "clip.webm", "without FFmpeg"));
    } else {
        test_audio_exact();
        if (system("ffmpeg -version > /dev/null 2>&1") == 0) {
            test_audio_tones();
            test_audio_errors();
            test_video_files();
            test_video_errors();
        } else {
            printf("skipping the codec fixtures: no ffmpeg CLI to write them (apt-get install ffmpeg)\n");
        }
    }
    scratch_close();
    return check_report();
}
