# test_cli.py: the `uform` command end to end: init writes a checkpoint, info describes it, encode
# prints one JSON array per input line (unit norm, the asked width) that agrees with the reference,
# rerank prints one MaxSim score per document line; decode summarizes an audio and a video file
# (where the build has FFmpeg and the ffmpeg CLI is here to write them); --help works for every verb.

import json
import shutil
import subprocess

import numpy as np
import pytest

import bounds
import reference
from conftest import run_cli as uform

LINES = ["hello world", "Grüße, 世界", "a", "tokenizer-free byte-level encoders"]


@pytest.fixture(scope="module")
def cli_model(cli, tmp_path_factory):
    directory = tmp_path_factory.mktemp("cli") / "model"
    run = uform(cli, "init", "--tier", "128x2", "--seed", "3", "--output", directory)
    assert run.returncode == 0, run.stderr
    return directory


@pytest.mark.parametrize("verb", ["init", "encode", "rerank", "info", "shard", "decode"])
def test_help(cli, verb):
    run = uform(cli, verb, "--help")
    assert run.returncode == 0, run.stderr
    text = run.stdout + run.stderr
    assert verb in text and "--" in text, text


def test_init_writes_a_checkpoint(cli_model):
    assert (cli_model / "model.safetensors").stat().st_size > 0
    assert (cli_model / "README.md").exists()


def test_init_is_deterministic_for_a_seed(cli, cli_model, tmp_path):
    again = tmp_path / "again"
    assert uform(cli, "init", "--tier", "128x2", "--seed", "3", "--output", again).returncode == 0
    assert (again / "model.safetensors").read_bytes() == (cli_model / "model.safetensors").read_bytes()
    other = tmp_path / "other"
    assert uform(cli, "init", "--tier", "128x2", "--seed", "4", "--output", other).returncode == 0
    assert (other / "model.safetensors").read_bytes() != (cli_model / "model.safetensors").read_bytes()


def test_info_describes_the_model(cli, cli_model):
    run = uform(cli, "info", "--model", cli_model)
    assert run.returncode == 0, run.stderr
    assert "128" in run.stdout and "128x2" in run.stdout, run.stdout


@pytest.mark.parametrize("width", [None, 64])
def test_encode_prints_unit_vectors(cli, cli_model, width):
    model = reference.load_model(cli_model)
    expected_width = width or model.embedding_widths[-1]
    arguments = ["encode", "--model", cli_model] + (["--width", width] if width else [])
    run = uform(cli, *arguments, stdin="\n".join(LINES) + "\n")
    assert run.returncode == 0, run.stderr
    printed = run.stdout.strip().splitlines()
    assert len(printed) == len(LINES), run.stdout
    for line, text in zip(printed, LINES):
        vector = np.array(json.loads(line), dtype=np.float64)
        assert vector.shape == (expected_width,)
        # Printed Float32 values carry at least 6 significant digits: the norm is 1 within
        # 2^-24 * width of Float32 normalization plus 5e-6 relative of printing 6 significant digits (%g).
        assert abs(np.linalg.norm(vector) - 1.0) <= expected_width * bounds.UNIT_F32 + 5e-6
        # The CLI runs the default (BF16) path: within the BF16 bound plus the printing's 5e-6.
        _, e64 = reference.encode_text(model, text.encode())
        _, e16 = reference.encode_text(model, text.encode(), True)
        f64, bf16 = reference.matryoshka(e64, expected_width), reference.matryoshka(e16, expected_width)
        length = len(text.encode())
        limit = bounds.bound_bf16(f64, bf16, model.width, length, length) + 5e-6
        assert bounds.relative_error(vector, bf16) <= limit, text


def test_encode_in_float32_matches_the_reference(cli, cli_model):
    """--precision f32: within B_f32 of the float64 reference, plus the printing's 5e-6."""
    model = reference.load_model(cli_model)
    run = uform(cli, "encode", "--model", cli_model, "--precision", "f32", stdin="\n".join(LINES) + "\n")
    assert run.returncode == 0, run.stderr
    for line, text in zip(run.stdout.strip().splitlines(), LINES):
        widest = model.embedding_widths[-1]
        f64 = reference.matryoshka(reference.encode_text(model, text.encode())[1], widest)
        bf16 = reference.matryoshka(reference.encode_text(model, text.encode(), True)[1], widest)
        length = len(text.encode())
        limit = bounds.bound_f32(f64, bf16, model.width, length, length) + 5e-6
        assert bounds.relative_error(np.array(json.loads(line)), f64) <= limit, text


@pytest.mark.parametrize("precision", ["e4m3", "int8"])
def test_encode_in_a_narrow_precision_matches_the_reference(cli, cli_model, precision):
    """--precision e4m3 or int8: within that precision's bound (bounds.bound_rounded) of its own reference,
    plus the printing's 5e-6; the control, the BF16 reference, is further than that bound on some text."""
    model = reference.load_model(cli_model)
    run = uform(cli, "encode", "--model", cli_model, "--precision", precision, stdin="\n".join(LINES) + "\n")
    assert run.returncode == 0, run.stderr
    widest, beyond = model.embedding_widths[-1], 0
    for line, text in zip(run.stdout.strip().splitlines(), LINES):
        expected = {rounding: reference.matryoshka(reference.encode_text(model, text.encode(), rounding)[1], widest)
                    for rounding in (False, True, precision)}
        length = len(text.encode())
        limit = bounds.bound_rounded(expected[False], expected[True], expected[precision], model.width, length, length) + 5e-6
        vector = np.array(json.loads(line))
        assert bounds.relative_error(vector, expected[precision]) <= limit, text
        beyond += bounds.relative_error(vector, expected[precision]) < bounds.relative_error(vector, expected[True])
    assert beyond == len(LINES)  # nearer its own reference than the BF16 one on every text


def test_int8_on_the_gpu_is_refused_with_a_reason(cli, cli_model):
    """int8 runs on the CPU only: --device cuda with it fails before any GPU work, saying so (or, in a
    build without the CUDA backend, saying that)."""
    run = uform(cli, "encode", "--model", cli_model, "--precision", "int8", "--device", "cuda", stdin="hello\n")
    assert run.returncode > 0 and not run.stdout
    assert "int8 products run on the CPU only" in run.stderr or "without the CUDA backend" in run.stderr, run.stderr


def test_encode_refuses_an_unknown_precision(cli, cli_model):
    run = uform(cli, "encode", "--model", cli_model, "--precision", "fp8", stdin="hello\n")
    assert run.returncode > 0
    assert "bf16, e4m3, int8 or f32" in run.stderr and "fp8" in run.stderr, run.stderr


def test_encode_refuses_an_empty_line(cli, cli_model):
    run = uform(cli, "encode", "--model", cli_model, stdin="first\n\nthird\n")
    assert run.returncode > 0
    assert "empty" in run.stderr and "Traceback" not in run.stderr, run.stderr


def test_encode_rejects_a_width_not_the_models(cli, cli_model):
    run = uform(cli, "encode", "--model", cli_model, "--width", "100", stdin="hello\n")
    assert run.returncode > 0
    assert "100" in run.stderr and "Traceback" not in run.stderr, run.stderr


def test_rerank_fuse_mixes_cosine_and_maxsim(cli, cli_model):
    """--fuse W prints (1 - W) cosine + W symmetric MaxSim: the mean from the shorter text's bytes,
    recomputed from `uform encode` and plain `uform rerank` each way (printed to 7 digits). The
    documents are shorter and longer than the query; the controls, the cosine alone and MaxSim from
    the query's side alone, differ; bad weights are refused. --fuse-gate L prints the cosine of the
    documents shorter than L (the query shorter too), the fused score of the rest."""
    query, stdin = "byte-level", "\n".join(LINES) + "\n"
    plain = uform(cli, "rerank", "--model", cli_model, "--query", query, stdin=stdin)
    encoded = uform(cli, "encode", "--model", cli_model, stdin=query + "\n" + stdin)
    assert plain.returncode == 0 and encoded.returncode == 0, plain.stderr + encoded.stderr
    query_side = np.array([float(line) for line in plain.stdout.split()]) / len(query.encode())
    shorter_side = query_side.copy()
    for index, line in enumerate(LINES):
        if len(line.encode()) < len(query.encode()):
            back = uform(cli, "rerank", "--model", cli_model, "--query", line, stdin=query + "\n")
            assert back.returncode == 0, back.stderr
            shorter_side[index] = float(back.stdout) / len(line.encode())
    assert not np.allclose(shorter_side, query_side, rtol=1e-5, atol=2e-5), "no document is shorter than the query"
    vectors = np.array([json.loads(line) for line in encoded.stdout.splitlines()], dtype=np.float64)
    cosine = vectors[1:] @ vectors[0]
    for weight in (0.5, 1.0):
        run = uform(cli, "rerank", "--model", cli_model, "--query", query, "--fuse", str(weight), stdin=stdin)
        assert run.returncode == 0, run.stderr
        fused = np.array([float(line) for line in run.stdout.split()])
        expected = (1 - weight) * cosine + weight * shorter_side
        assert np.allclose(fused, expected, rtol=1e-5, atol=2e-5), (fused, expected)
        assert not np.allclose(fused, cosine, rtol=1e-5, atol=2e-5), "the fused scores are the cosine's alone"
        one_sided = (1 - weight) * cosine + weight * query_side
        assert not np.allclose(fused, one_sided, rtol=1e-5, atol=2e-5), "the fused scores read the query's side only"
    for bad in ("0", "2", "x"):
        run = uform(cli, "rerank", "--model", cli_model, "--query", query, "--fuse", bad, stdin=stdin)
        assert run.returncode != 0 and "--fuse needs a weight in (0, 1]" in run.stderr, run.stderr
    # --fuse-gate L: a document shorter than L, for a query shorter too, prints its cosine; the rest stay fused.
    lengths = np.array([len(line.encode()) for line in LINES])
    gate = len(query.encode()) + 1
    assert (lengths < gate).any() and (lengths >= gate).any(), "the gate must split the documents"
    run = uform(cli, "rerank", "--model", cli_model, "--query", query, "--fuse", "0.5", "--fuse-gate", str(gate), stdin=stdin)
    assert run.returncode == 0, run.stderr
    gated = np.array([float(line) for line in run.stdout.split()])
    expected = np.where(lengths < gate, cosine, 0.5 * cosine + 0.5 * shorter_side)
    assert np.allclose(gated, expected, rtol=1e-5, atol=2e-5), (gated, expected)
    assert not np.allclose(gated, 0.5 * cosine + 0.5 * shorter_side, rtol=1e-5, atol=2e-5), "the gate is ignored"
    short_query = uform(cli, "rerank", "--model", cli_model, "--query", query, "--fuse", "0.5", "--fuse-gate",
                        str(len(query.encode())), stdin=stdin)
    assert short_query.returncode == 0, short_query.stderr
    assert np.allclose([float(line) for line in short_query.stdout.split()], 0.5 * cosine + 0.5 * shorter_side,
                       rtol=1e-5, atol=2e-5), "a query as long as the gate is gated"
    for flags, message in ((["--fuse-gate", "8"], "--fuse-gate needs --fuse"),
                           (["--fuse", "0.5", "--fuse-gate", "0"], "--fuse-gate needs 1 to 1048576 bytes"),
                           (["--fuse", "0.5", "--fuse-gate", "x"], "--fuse-gate")):
        run = uform(cli, "rerank", "--model", cli_model, "--query", query, *flags, stdin=stdin)
        assert run.returncode != 0 and message in run.stderr, (flags, run.stderr)


def test_rerank_prints_one_score_per_document(cli, cli_model):
    model = reference.load_model(cli_model)
    query = "byte-level"
    run = uform(cli, "rerank", "--model", cli_model, "--query", query, stdin="\n".join(LINES) + "\n")
    assert run.returncode == 0, run.stderr
    printed = run.stdout.strip().splitlines()
    assert len(printed) == len(LINES), run.stdout
    query_h, _ = reference.encode_text(model, query.encode(), True)
    query_vectors = reference.colbert_cells(model, query_h, True)
    for line, text in zip(printed, LINES):
        score = float(line)
        document_h, _ = reference.encode_text(model, text.encode(), True)
        expected = reference.maxsim(query_vectors, reference.colbert_cells(model, document_h, True))
        # Each cosine is at most 1, so the score lies in [-n_q, n_q] (n_q query bytes).
        assert abs(score) <= len(query.encode()) * (1 + 5e-6)
        # |delta| <= n_q B_q + n_q sqrt(n_d) B_d with B the BF16 bounds of the ColBERT cells (contract.py).
        query_f64 = reference.colbert_cells(model, reference.encode_text(model, query.encode())[0])
        document_f64 = reference.colbert_cells(model, reference.encode_text(model, text.encode())[0])
        width, length = model.width, max(len(query.encode()), len(text.encode()))
        query_bound = bounds.bound_bf16(query_f64, query_vectors, width, length, length)
        document_bound = bounds.bound_bf16(document_f64, reference.colbert_cells(model, document_h, True), width, length, length)
        limit = len(query.encode()) * (query_bound + np.sqrt(len(text.encode())) * document_bound) + 5e-6 * len(query.encode())
        assert abs(score - expected) <= limit, f"{text!r}: {score} vs {expected} (bound {limit:.3e})"


def test_decode_summarizes_audio_and_video(cli, tmp_path):
    if not shutil.which("ffmpeg"):
        pytest.skip("no ffmpeg CLI to write the files")
    audio, video = tmp_path / "tone.flac", tmp_path / "clip.webm"
    for arguments in (["-f", "lavfi", "-i", "sine=f=440:r=44100:d=2.5", str(audio)],
                      ["-f", "lavfi", "-i", "testsrc=s=320x240:r=30:d=2", "-c:v", "libvpx", str(video)]):
        subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", *arguments], check=True)
    run = uform(cli, "decode", "--audio", audio)
    if run.returncode and "without FFmpeg" in run.stderr:
        pytest.skip("this build has no FFmpeg")
    assert run.returncode == 0, run.stderr
    # 2.5 s at 16 kHz: 40000 samples, 125 frames of 320, all of them cells (under 512).
    assert json.loads(run.stdout) == {"file": str(audio), "kind": "audio", "seconds": 2.5, "samples": 40000, "rate": 16000,
                                      "source_rate": 44100, "source_channels": 1, "frames": 125, "cells": 125}
    # 2 s sampled at 5 fps: 10 frames, 5 steps of 2, each 320x240 frame at most 1024 / 5 = 204 patches.
    run = uform(cli, "decode", "--video", video, "--fps", "5")
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    assert (summary["frames"], summary["width"], summary["height"], summary["steps"]) == (10, 320, 240, 5), summary
    assert summary["rows"] * summary["columns"] <= 204 and summary["cells"] == 5 * summary["rows"] * summary["columns"]
    run = uform(cli, "decode", "--audio", video)
    assert run.returncode == 1 and str(video) in run.stderr and "no audio stream" in run.stderr, run.stderr
    assert uform(cli, "decode", "--audio", audio, "--video", video).returncode == 2
