# test_av_training.py: `uform_base` on audio <-> text and video <-> text pairs on the CPU, end to end,
# on tiny clips written here (tones as 16 kHz WAV by hand, colour fields as WebM with the ffmpeg
# CLI): the audio and video frontends are attached, Matryoshka SigLIP's loss falls, resume stays bit
# for bit with clips in the batches, the checkpoint carries audio.* and video.* and lists the
# modalities, `uform encode --audio / --video` read it, uform_eval ranks clips for captions and back;
# a clip that does not decode is refused naming the file and the record's line, or with
# skip_malformed its record is dropped and counted.

import json
import shutil
import subprocess
import wave

import numpy as np
import pytest

from test_image_training import check_cache_changes_nothing, check_media_eval, check_named_or_skipped, check_resume_is_bit_exact, train
from test_uform_base import tensors

FFMPEG = shutil.which("ffmpeg")
TONES = {"low": 220, "middle": 440, "high": 1000, "very high": 2500}
COLOURS = {"red": "0xdc1e1e", "green": "0x1eb428", "blue": "0x1e3cdc"}


def write_wave(path, samples):
    """16-bit mono 16 kHz PCM."""
    with wave.open(str(path), "wb") as file:
        file.setnchannels(1)
        file.setsampwidth(2)
        file.setframerate(16000)
        file.writeframes((np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes())


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    if FFMPEG is None:
        pytest.skip("the ffmpeg CLI writes the video fixtures")
    folder = tmp_path_factory.mktemp("clips")
    (folder / "a").mkdir()
    (folder / "v").mkdir()
    rng = np.random.default_rng(4)
    lines = []
    for name, frequency in TONES.items():
        for take in range(2):
            t = np.arange(int(16000 * (0.3 + 0.1 * take))) / 16000.0
            path = f"a/{name.replace(' ', '-')}-{take}.wav"
            write_wave(folder / path, 0.5 * np.sin(2 * np.pi * frequency * t + take) + 0.02 * rng.normal(size=t.shape))
            lines.append({"query": f"a {name} tone", "positives": [{"audio": path}]})
    for name, colour in COLOURS.items():
        path = f"v/{name}.webm"
        subprocess.run([FFMPEG, "-v", "error", "-y", "-f", "lavfi", "-i", f"color=c={colour}:size=48x32:rate=5:duration=0.8",
                        "-c:v", "libvpx", "-b:v", "1M", folder / path], check=True, capture_output=True)
        lines.append({"query": f"a {name} field", "positives": [{"video": path}]})
    (folder / "pairs.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    mixture = {"objective": "contrastive", "columns": 128, "video_fps": 5, "sources": [{"path": "pairs.jsonl"}]}
    (folder / "clips.json").write_text(json.dumps(mixture))
    return folder


def test_trains_on_audio_video_and_captions(build_dir, cli, clips, tmp_path):
    run = train(build_dir, clips / "clips.json", tmp_path / "run", "--steps", "40")
    assert "attaching the audio frontend" in run.stderr and "attaching the video frontend" in run.stderr, run.stderr
    losses = [json.loads(line)["loss"] for line in open(tmp_path / "run" / "log.jsonl") if '"loss"' in line]
    assert len(losses) >= 20 and np.mean(losses[-5:]) < 0.8 * np.mean(losses[:5]), losses
    names = tensors(tmp_path / "run" / "latest" / "model.safetensors")
    assert {"audio.frame", "audio.bias", "video.tube", "video.bias"} <= set(names)
    assert "text, video, audio" in (tmp_path / "run" / "latest" / "README.md").read_text()
    for flag, path in (("--audio", clips / "a" / "low-0.wav"), ("--video", clips / "v" / "red.webm")):
        encoded = subprocess.run([cli, "encode", "--model", tmp_path / "run" / "latest", flag, path], capture_output=True,
                                 text=True, check=True)
        assert len(json.loads(encoded.stdout)) == 64
    check_media_eval(build_dir, tmp_path / "run", clips / "pairs.jsonl", 11, tmp_path, "--fps", "5")
    refused = subprocess.run([str(build_dir / "uform_eval"), tmp_path / "run", "--pairs", clips / "pairs.jsonl", "--fps", "0"],
                             capture_output=True, text=True)
    assert refused.returncode == 2 and "--fps" in refused.stderr, refused.stderr


def test_resume_with_clips_is_bit_exact(build_dir, clips, tmp_path):
    check_resume_is_bit_exact(build_dir, clips / "clips.json", tmp_path)


def test_media_cache_changes_nothing(build_dir, clips, tmp_path):
    check_cache_changes_nothing(build_dir, clips / "clips.json", tmp_path)


def test_broken_clips_are_named_or_skipped(build_dir, clips, tmp_path):
    (tmp_path / "a").mkdir()
    shutil.copy(clips / "a" / "low-0.wav", tmp_path / "a" / "fine.wav")
    (tmp_path / "a" / "broken.wav").write_bytes((clips / "a" / "low-0.wav").read_bytes()[:30])
    lines = [{"query": "a low tone", "positives": [{"audio": "a/fine.wav"}]},
             {"query": "a broken one", "positives": [{"audio": "a/broken.wav"}]},
             {"query": "a missing one", "positives": [{"video": "v/absent.webm"}]}]
    check_named_or_skipped(build_dir, tmp_path, lines, "broken.wav")


@pytest.mark.parametrize("kind", ["audio", "video"])
def test_masked_modelling_of_clips(build_dir, clips, tmp_path, kind):
    """{"audio": PATH} or {"video": PATH} records beside texts under mlm: the mae_audio or mae_video
    head is attached and the reconstruction loss falls."""
    pattern = {"audio": ("a", "*.wav"), "video": ("v", "*.webm")}[kind]
    records = [{kind: str(path)} for path in sorted((clips / pattern[0]).glob(pattern[1]))]
    records += [{"text": f"a {name} tone, sampled at sixteen kilohertz"} for name in TONES]
    (tmp_path / "texts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (tmp_path / "m.json").write_text(json.dumps({"objective": "mlm", "columns": 128, "video_fps": 5,
                                                 "sources": [{"path": "texts.jsonl"}]}))
    run = train(build_dir, tmp_path / "m.json", tmp_path / "run", "--steps", "40")
    assert f"attaching the mae_{kind} head" in run.stderr, run.stderr
    reconstruction = [json.loads(line)["reconstruction"] for line in open(tmp_path / "run" / "log.jsonl") if '"reconstruction"' in line]
    reconstruction = [value for value in reconstruction if value > 0]  # batches that hold a clip
    assert len(reconstruction) >= 10 and np.mean(reconstruction[-5:]) < 0.8 * np.mean(reconstruction[:5]), reconstruction
    names = tensors(tmp_path / "run" / "latest" / "model.safetensors")
    assert {f"mae_{kind}.head", f"mae_{kind}.bias"} <= set(names)
