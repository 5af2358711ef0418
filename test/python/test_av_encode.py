# test_av_encode.py: audio and video clips embedded through the C ABI (uform_encode_audio,
# uform_encode_video) and the CLI (`uform init --frontends`, `uform encode --audio / --video /
# --records`): decoded samples and frames against the float64 reference (reference.audio_frames /
# video_tubes, then reference.encode_segment and the pool) within bounds.py's Float32 bound;
# files written at test time with the ffmpeg CLI embed as their decoded samples and frames do;
# clips packed together as alone; broken files and models without the frontend refused by name.

import json
import shutil
import subprocess
import wave

import numpy as np
import pytest

import bounds
import reference
from uform_ctypes import PRECISION_F32, UFormError

FFMPEG = shutil.which("ffmpeg")
needs_ffmpeg = pytest.mark.skipif(FFMPEG is None, reason="the ffmpeg CLI writes these fixtures")


def tones(seconds, frequency):
    t = np.arange(int(seconds * 16000)) / 16000.0
    return (0.5 * np.sin(2 * np.pi * frequency * t) + 0.1 * np.sin(2 * np.pi * 3 * frequency * t)).astype(np.float32)


def clip_frames(seed, count, height=32, width=48):
    """RGB frames at the grid's own size (no resize) and their ticks at 5 fps."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, size=(count, height, width, 3), dtype=np.uint8), 5 * np.arange(count)


def reference_embedding(model, kind, rows, positions, bf16_inputs=False):
    h = reference.encode_segment(model, np.arange(len(rows)), positions, bf16_inputs, kinds=np.full(len(rows), kind),
                                 media={kind: rows})
    return reference.pool_segment(model, h, bf16_inputs)


def check_against_reference(model, embedding, kind, rows, positions, width, deepest):
    e64 = reference.matryoshka(reference_embedding(model, kind, rows, positions), width)
    e16 = reference.matryoshka(reference_embedding(model, kind, rows, positions, bf16_inputs=True), width)
    limit = bounds.bound_f32(e64, e16, model.width, len(rows), int(np.max(positions)), deepest=deepest)
    error = bounds.relative_error(embedding, e64)
    assert error <= limit, f"error {error:.3e} bound {limit:.3e}"


def test_encode_audio_matches_reference(library, av_model):
    model = reference.load_model(av_model)
    clips = [tones(0.5, 440), tones(0.3, 1000), tones(0.05, 200)]
    with library.open(av_model) as handle:
        handle.set_precision(PRECISION_F32)
        width = handle.config().widths[-1]
        most = handle.config().columns
        embeddings = handle.encode_audio(clips)
        alone = np.concatenate([handle.encode_audio([clip]) for clip in clips])
    for clip, embedding in zip(clips, embeddings):
        frames, positions = reference.audio_frames(clip, most)
        check_against_reference(model, embedding, reference.CELL_AUDIO, frames, positions, width, 320 if len(frames) else 0)
    np.testing.assert_allclose(alone, embeddings, atol=1e-6)
    assert not np.allclose(embeddings[0], embeddings[1], atol=1e-3)


def test_encode_video_matches_reference(library, av_model):
    model = reference.load_model(av_model)
    clips = [clip_frames(1, 5), clip_frames(2, 2, 16, 64), clip_frames(3, 1, 32, 32)]
    with library.open(av_model) as handle:
        handle.set_precision(PRECISION_F32)
        width = handle.config().widths[-1]
        embeddings = handle.encode_video(clips)
    for (rgb, ticks), embedding in zip(clips, embeddings):
        tubes, positions = reference.video_tubes(rgb / 255.0, ticks)
        check_against_reference(model, embedding, reference.CELL_VIDEO, tubes, positions, width, 1536)


def test_planted_tube_time_in_frames_moves_the_embedding(av_model):
    """The encode path's coordinates come from uform_video_tubes: with t in frames the embedding
    leaves the reference's bound."""
    from conftest import built
    from uform_ctypes import Library
    planted = Library(built("libuform_plant_tube_ticks_frames.so"))
    model = reference.load_model(av_model)
    rgb, ticks = clip_frames(1, 6)
    with planted.open(av_model) as handle:
        handle.set_precision(PRECISION_F32)
        embedding = handle.encode_video([(rgb, ticks)])[0]
        width = handle.config().widths[-1]
    tubes, positions = reference.video_tubes(rgb / 255.0, ticks)
    with pytest.raises(AssertionError, match="bound"):
        check_against_reference(model, embedding, reference.CELL_VIDEO, tubes, positions, width, 1536)


def test_encode_refuses_bad_input(library, av_model, vision_model):
    with library.open(av_model) as handle:
        with pytest.raises(UFormError) as error:
            handle.encode_audio([tones(0.1, 300), b"RIFF not really a wave file at all"])
        assert error.value.status == 3 and "clip 1" in error.value.message
        with pytest.raises(UFormError) as error:
            handle.encode_video([b"\x00" * 64])
        assert "clip 0" in error.value.message
    with library.open(vision_model) as handle:
        for call, clip, word in ((handle.encode_audio, tones(0.1, 300), "audio"), (handle.encode_video, clip_frames(1, 2), "video")):
            with pytest.raises(UFormError) as error:
                call([clip])
            assert error.value.status == 5 and f"no {word} frontend" in error.value.message


# ---------------------------------------------------------------------------------------------
# Files and the CLI
# ---------------------------------------------------------------------------------------------


def ffmpeg(*arguments):
    subprocess.run([FFMPEG, "-v", "error", "-y", *map(str, arguments)], check=True, capture_output=True)


@pytest.fixture(scope="module")
def av_files(cli, tmp_path_factory):
    """A checkpoint made by `uform init --frontends vision,video,audio`, a 16 kHz WAV and a FLAC of
    tones, a WebM of moving test patterns."""
    folder = tmp_path_factory.mktemp("av_cli")
    subprocess.run([cli, "init", "--tier", "64x2", "--frontends", "vision,video,audio", "--output", folder / "model"],
                   check=True, capture_output=True)
    if FFMPEG:
        ffmpeg("-f", "lavfi", "-i", "sine=frequency=440:sample_rate=16000:duration=0.6", "-c:a", "pcm_s16le", folder / "a.wav")
        ffmpeg("-f", "lavfi", "-i", "sine=frequency=1200:sample_rate=44100:duration=0.4", folder / "b.flac")
        ffmpeg("-f", "lavfi", "-i", "testsrc=size=64x48:rate=25:duration=0.4", "-c:v", "libvpx", "-b:v", "1M", folder / "c.webm")
    return folder


def test_cli_init_attaches_the_frontends(cli, av_files):
    info = json.loads(subprocess.run([cli, "info", "--model", av_files / "model"], check=True, capture_output=True, text=True).stdout)
    assert info["frontends"] == ["bytes", "vision", "video", "audio"]
    assert "text, image, video, audio" in (av_files / "model" / "README.md").read_text()


def test_cli_init_refuses_unknown_frontends(cli, tmp_path):
    run = subprocess.run([cli, "init", "--tier", "64x2", "--frontends", "vision,smell", "--output", tmp_path / "m"],
                         capture_output=True, text=True)
    assert run.returncode == 2 and "smell" in run.stderr


@needs_ffmpeg
def test_cli_encode_audio_and_video_files(cli, av_files, library):
    model = av_files / "model"
    run = subprocess.run([cli, "encode", "--model", model, "--audio", av_files / "a.wav", av_files / "b.flac"], check=True,
                         capture_output=True, text=True)
    audio = [json.loads(line) for line in run.stdout.splitlines()]
    run = subprocess.run([cli, "encode", "--model", model, "--video", av_files / "c.webm", "--fps", "5"], check=True,
                         capture_output=True, text=True)
    video = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(audio) == 2 and len(video) == 1 and all(abs(np.linalg.norm(v) - 1) < 1e-5 for v in audio + video)
    with library.open(model) as handle:
        from_bytes = handle.encode_audio([(av_files / "a.wav").read_bytes()])
        # a 16 kHz 16-bit WAV decodes exactly: PCM / 32768 (docs/audio_video.md)
        with wave.open(str(av_files / "a.wav")) as file:
            pcm = np.frombuffer(file.readframes(file.getnframes()), dtype="<i2") / 32768.0
        from_samples = handle.encode_audio([pcm])
        video_bytes = handle.encode_video([(av_files / "c.webm").read_bytes()], fps=5)
    np.testing.assert_allclose(audio[0], from_bytes[0], atol=1e-6)
    np.testing.assert_allclose(from_samples[0], from_bytes[0], atol=1e-6)
    np.testing.assert_allclose(video[0], video_bytes[0], atol=1e-6)


@needs_ffmpeg
def test_cli_records_with_audio_and_video(cli, av_files):
    model = av_files / "model"
    records = [{"text": "a tone"}, {"audio": str(av_files / "a.wav")}, {"video": str(av_files / "c.webm")},
               {"text": "test pattern"}]
    stdin = "".join(json.dumps(r) + "\n" for r in records)
    run = subprocess.run([cli, "encode", "--model", model, "--records", "--fps", "5"], input=stdin, check=True,
                         capture_output=True, text=True)
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    alone = {}
    for flag, path, extra in (("--audio", "a.wav", []), ("--video", "c.webm", ["--fps", "5"])):
        alone[flag] = json.loads(subprocess.run([cli, "encode", "--model", model, flag, av_files / path, *extra], check=True,
                                                capture_output=True, text=True).stdout)
    text = json.loads(subprocess.run([cli, "encode", "--model", model], input="test pattern\n", check=True, capture_output=True,
                                     text=True).stdout)
    assert len(lines) == 4
    np.testing.assert_allclose(lines[1], alone["--audio"], atol=1e-6)
    np.testing.assert_allclose(lines[2], alone["--video"], atol=1e-6)
    np.testing.assert_allclose(lines[3], text, atol=1e-6)


@needs_ffmpeg
@pytest.mark.parametrize("case", ["broken audio", "missing video", "fps without video", "two ways in"])
def test_cli_refuses_bad_av_input(cli, av_files, case):
    broken = av_files / "broken.flac"
    broken.write_bytes((av_files / "b.flac").read_bytes()[:300])
    command = [cli, "encode", "--model", av_files / "model"]
    if case == "broken audio":
        command += ["--audio", av_files / "a.wav", broken]
        words = "broken.flac"
    elif case == "missing video":
        command += ["--video", av_files / "absent.webm"]
        words = "absent.webm"
    elif case == "fps without video":
        command += ["--audio", av_files / "a.wav", "--fps", "5"]
        words = "--fps"
    else:
        command += ["--audio", av_files / "a.wav", "--video", av_files / "c.webm"]
        words = "give one"
    run = subprocess.run(command, capture_output=True, text=True)
    assert run.returncode != 0 and words in run.stderr, run.stderr
    assert not run.stdout
