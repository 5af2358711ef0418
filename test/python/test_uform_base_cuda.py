# test_uform_base_cuda.py: `uform_base --device cuda` as far as a machine without a GPU can check it:
# the help lists --device and --recompute, a run fails with one clear line and writes nothing when
# there is no GPU (CUDA build) or no CUDA backend (CPU-only build), what runs on the CPU only so far
# (pair objectives, TCR, Lipschitz) is refused by name before any GPU is asked for. Where a GPU is
# present, a few steps train on it instead.

import json
import math
import os
import subprocess

import pytest

from cuda_env import cuda_build, gpu_present


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cuda_corpus")
    with open(folder / "text.jsonl", "w") as text, open(folder / "pairs.jsonl", "w") as pairs:
        for index in range(200):
            phrase = f"open file {index} and save it as copy {index * 7 % 13}"
            text.write(json.dumps({"text": phrase}) + "\n")
            pairs.write(json.dumps({"query": phrase, "positives": [phrase.upper()]}) + "\n")
    for objective, source in (("mlm", "text.jsonl"), ("contrastive", "pairs.jsonl"), ("rerank", "pairs.jsonl")):
        mixture = {"objective": objective, "columns": 64, "sources": [{"path": source, "weight": 1.0}]}
        (folder / f"{objective}.json").write_text(json.dumps(mixture))
    return folder


def uform_base(build, *arguments):
    return subprocess.run([str(build / "uform_base"), "--quiet", *map(str, arguments)], capture_output=True, text=True,
                          timeout=300)


def common(corpus, objective="mlm"):
    return ["--mixture", corpus / f"{objective}.json", "--tier", "64x2", "--rows", "2", "--seed", "2", "--threads", "2"]


def test_help_lists_device_flags(build_dir):
    run = subprocess.run([str(build_dir / "uform_base"), "--help"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0
    assert "--device cpu|cuda" in run.stdout and "--recompute 0|1" in run.stdout


def test_without_gpu_fails_cleanly(build_dir, corpus, tmp_path):
    has_cuda = cuda_build(build_dir)
    if has_cuda and gpu_present():
        pytest.skip("a GPU is present: test_trains_on_gpu runs instead")
    output = tmp_path / "run"
    run = uform_base(build_dir, *common(corpus), "--steps", "2", "--device", "cuda", "--output", output)
    assert run.returncode in (1, 2), (run.returncode, run.stderr)  # an exit, not a signal or an abort
    expected = "no CUDA device" if has_cuda else "no CUDA backend"
    assert expected in run.stderr and "--device cuda" in run.stderr, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert not output.exists()


@pytest.mark.parametrize("objective, extra, named", [
    ("contrastive", [], "the contrastive objective"),
    ("rerank", [], "the rerank objective"),
    ("mlm", ["--objective", "rerank"], "the rerank objective"),
    ("mlm", ["--tcr-lambda", "0.1"], "--tcr-lambda"),
    ("mlm", ["--lipschitz-lambda", "0.1"], "--lipschitz-lambda"),
])
def test_cpu_only_parts_are_refused(build_dir, corpus, tmp_path, objective, extra, named):
    output = tmp_path / "run"
    run = uform_base(build_dir, *common(corpus, objective), "--steps", "2", "--device", "cuda", *extra, "--output", output)
    assert run.returncode == 2, run.stderr
    assert f"{named} runs on the CPU only so far" in run.stderr, run.stderr
    assert not output.exists()


@pytest.mark.parametrize("flag, value, message", [
    ("--device", "gpu", "--device is cpu or cuda, not 'gpu'"),
    ("--recompute", "2", "--recompute is 0 or 1"),
])
def test_bad_values_are_refused(build_dir, corpus, tmp_path, flag, value, message):
    run = uform_base(build_dir, *common(corpus), flag, value, "--output", tmp_path / "run")
    assert run.returncode == 2 and message in run.stderr, run.stderr


def test_trains_on_gpu(build_dir, corpus, tmp_path):
    if not (cuda_build(build_dir) and gpu_present()):
        pytest.skip("needs a CUDA build and a GPU")
    output = tmp_path / "run"
    run = uform_base(build_dir, *common(corpus), "--steps", "6", "--save-every", "3", "--device", "cuda", "--output", output)
    assert run.returncode == 0, run.stderr
    log = [json.loads(line) for line in (output / "log.jsonl").read_text().splitlines()]
    assert [entry["step"] for entry in log] == list(range(1, 7))
    assert all(math.isfinite(entry["loss"]) and entry["loss"] > 0 for entry in log), log
    assert (output / "step-00000003" / "model.safetensors").exists()
    state = json.loads((output / "latest" / "trainer.json").read_text())
    assert state["step"] == 6 and state["device"] == "cuda"


def test_gpu_run_resumes_exactly(build_dir, corpus, tmp_path):
    # The GPU's optimizer state goes into the checkpoint: 6 steps straight equal a resume from step 3.
    if not (cuda_build(build_dir) and gpu_present()):
        pytest.skip("needs a CUDA build and a GPU")
    from test_uform_base import tensors  # raw bytes by name: numpy may lack bfloat16
    straight, halves = tmp_path / "straight", tmp_path / "halves"
    args = (*common(corpus), "--steps", "6", "--device", "cuda")
    assert uform_base(build_dir, *args, "--output", straight).returncode == 0
    assert uform_base(build_dir, *args, "--save-every", "3", "--output", halves).returncode == 0
    os.remove(halves / "latest")
    os.symlink("step-00000003", halves / "latest")
    run = uform_base(build_dir, *args, "--resume", halves, "--output", halves)
    assert run.returncode == 0, run.stderr
    for name in ("model.safetensors", "optimizer.safetensors"):
        a, b = tensors(straight / "latest" / name), tensors(halves / "latest" / name)
        assert a.keys() == b.keys() and all(a[k] == b[k] for k in a), [k for k in a if a[k] != b.get(k)]
