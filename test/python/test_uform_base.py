# test_uform_base.py: the trainer command end to end on a tiny corpus written here: exact resume
# (N steps straight equal N/2, a resume and N/2 more, bit for bit), a kill during saving leaves the
# latest checkpoint whole and resumable, SIGTERM saves one that resumes exactly, warm starts keep shared weights and renew the head, a deepened model trains its new blocks, bad
# mixtures and malformed JSONL lines are refused naming file and line, and uform_eval reports.

import json
import os
import random
import signal
import subprocess
import time

import pytest



def tensors(path):
    """Raw bytes of every tensor of a SafeTensors file, by name."""
    data = open(path, "rb").read()
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + size])
    header.pop("__metadata__", None)
    return {name: data[8 + size + entry["data_offsets"][0] : 8 + size + entry["data_offsets"][1]] for name, entry in header.items()}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    rng = random.Random(5)
    words = ["open", "file", "save", "print", "window", "help", "quit", "edit", "view", "copy", "paste", "cut"]
    with open(folder / "pairs.jsonl", "w") as pairs, open(folder / "text.jsonl", "w") as text:
        for index in range(300):
            phrase = " ".join(rng.choice(words) for _ in range(rng.randint(1, 4)))
            pairs.write(json.dumps({"query": phrase, "positives": [phrase.upper()[::-1]]}) + "\n")
            text.write(json.dumps({"text": f"{phrase} number {index}"}) + "\n")
    for objective, source in (("contrastive", "pairs.jsonl"), ("mlm", "text.jsonl"), ("rerank", "pairs.jsonl")):
        mixture = {"objective": objective, "columns": 64, "sources": [{"path": source, "weight": 1.0}]}
        (folder / f"{objective}.json").write_text(json.dumps(mixture))
    return folder


def train(build, *arguments, check=True):
    run = subprocess.run([str(build / "uform_base"), "--quiet", *map(str, arguments)], capture_output=True, text=True,
                         timeout=300)
    if check:
        assert run.returncode == 0, run.stderr
    return run


def common(corpus, objective="contrastive"):
    return ["--mixture", corpus / f"{objective}.json", "--tier", "64x2", "--rows", "2", "--learning-rate", "3e-3",
            "--seed", "4", "--threads", "2"]


def test_resume_is_bit_exact(build_dir, corpus, tmp_path):
    straight, halves = tmp_path / "straight", tmp_path / "halves"
    train(build_dir, *common(corpus), "--steps", "8", "--output", straight)
    train(build_dir, *common(corpus), "--steps", "8", "--save-every", "4", "--output", halves)
    # Start over from the step-4 checkpoint, as a run killed after it would.
    os.remove(halves / "latest")
    os.symlink("step-00000004", halves / "latest")
    train(build_dir, *common(corpus), "--steps", "8", "--resume", halves, "--output", halves)
    a, b = tensors(straight / "latest" / "model.safetensors"), tensors(halves / "latest" / "model.safetensors")
    assert a.keys() == b.keys()
    assert all(a[name] == b[name] for name in a), [name for name in a if a[name] != b[name]]
    assert tensors(straight / "latest" / "optimizer.safetensors") == tensors(halves / "latest" / "optimizer.safetensors")


def test_kill_during_save_leaves_a_whole_checkpoint(build_dir, cli, corpus, tmp_path):
    # A wider model makes each save take long enough for kills to land inside it.
    output = tmp_path / "run"
    arguments = ["--mixture", corpus / "mlm.json", "--tier", "256x2", "--rows", "1", "--steps", "1000", "--save-every", "1",
                 "--seed", "1", "--output", output]
    rng = random.Random(9)
    for attempt in range(4):
        process = subprocess.Popen([str(build_dir / "uform_base"), "--quiet", *map(str, arguments),
                                    *(["--resume", output] if (output / "latest").exists() else [])],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.8 + rng.random() * 1.5)
        process.send_signal(signal.SIGKILL)
        process.wait()
        assert (output / "latest").exists(), "no checkpoint was completed before the kill"
        info = subprocess.run([str(cli), "info", "--model", output / "latest"], capture_output=True, text=True)
        assert info.returncode == 0, info.stderr
    # And the run resumes from whatever `latest` holds.
    resumed = subprocess.run([str(build_dir / "uform_base"), "--quiet", *map(str, arguments[:-4]), "--steps",
                              str(json.load(open(output / "latest" / "trainer.json"))["step"] + 1), "--save-every", "1",
                              "--seed", "1", "--output", output, "--resume", output], capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr


def test_signal_stops_with_a_checkpoint_that_resumes_exactly(build_dir, corpus, tmp_path):
    """SIGTERM mid-run: the step in flight ends, a checkpoint is saved, the exit status is 128 + 15,
    and a resume to the planned end equals a run never stopped, bit for bit."""
    stopped, straight, steps = tmp_path / "stopped", tmp_path / "straight", 60
    arguments = [*common(corpus), "--tier", "256x2", "--rows", "4", "--steps", str(steps)]
    process = subprocess.Popen([str(build_dir / "uform_base"), "--quiet", *map(str, arguments), "--output", stopped],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and process.poll() is None:
        log = stopped / "log.jsonl"
        if log.exists() and len(log.read_text().splitlines()) >= 5:
            break
        time.sleep(0.02)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 128 + signal.SIGTERM, stderr
    step = json.load(open(stopped / "latest" / "trainer.json"))["step"]
    assert 5 <= step < steps and "stopped by signal" in stderr, stderr
    train(build_dir, *arguments, "--resume", stopped, "--output", stopped)
    train(build_dir, *arguments, "--output", straight)
    assert tensors(stopped / "latest" / "model.safetensors") == tensors(straight / "latest" / "model.safetensors")


def test_warm_start_keeps_shared_weights(build_dir, cli, corpus, tmp_path):
    base, reranker, fresh = tmp_path / "base", tmp_path / "reranker", tmp_path / "fresh"
    train(build_dir, *common(corpus, "mlm"), "--steps", "3", "--output", base)
    # A run of one step takes it at the cosine's end, rate 0: the checkpoint shows the warm start itself.
    train(build_dir, *common(corpus, "rerank"), "--steps", "1", "--seed", "7",
          "--init-from", base, "--output", reranker)
    subprocess.run([str(cli), "init", "--tier", "64x2", "--seed", "7", "--output", fresh], check=True, capture_output=True)
    a, b = tensors(base / "latest" / "model.safetensors"), tensors(reranker / "latest" / "model.safetensors")
    c = tensors(fresh / "model.safetensors")
    assert a["blocks.0.qkv"] == b["blocks.0.qkv"] and a["embed.bytes"] == b["embed.bytes"] and a["mlm.head"] == b["mlm.head"]
    assert b["rerank.proj"] == c["rerank.proj"], "the reranker's head is not a fresh initialization for its seed"
    assert a["rerank.proj"] != b["rerank.proj"]
    readme = (reranker / "latest" / "README.md").read_text()
    assert str(base) in readme and "rerank" in readme


def test_warm_start_keeps_the_head_when_asked(build_dir, corpus, tmp_path):
    """--keep-head continues a trained embedder's pool and SigLIP scalars; without it (the control) the
    same warm start draws a new pool, so the comparison can fail. One step, at the cosine's end: it moves nothing."""
    embedder = tmp_path / "embedder"
    train(build_dir, *common(corpus), "--steps", "3", "--output", embedder)
    for output, extra in ((tmp_path / "kept", ["--keep-head"]), (tmp_path / "fresh", [])):
        train(build_dir, *common(corpus), "--steps", "1", "--seed", "7", "--init-from", embedder,
              *extra, "--output", output)
    start = tensors(embedder / "latest" / "model.safetensors")
    kept, fresh = (tensors(tmp_path / name / "latest" / "model.safetensors") for name in ("kept", "fresh"))
    pool = [name for name in start if name.startswith("pool.") or name.startswith("siglip.")]
    assert pool and all(kept[name] == start[name] for name in pool)
    assert any(fresh[name] != start[name] for name in pool), "the control kept the pool too"
    assert "head kept" in (tmp_path / "kept" / "latest" / "README.md").read_text()
    assert "head kept" not in (tmp_path / "fresh" / "latest" / "README.md").read_text()
    run = train(build_dir, *common(corpus), "--steps", "1", "--keep-head", "--output", tmp_path / "alone", check=False)
    assert run.returncode != 0 and "--keep-head needs --init-from" in run.stderr, run.stderr
    # A checkpoint without the objective's head (its pool.* tensors dropped): refused by name, not a new
    # head drawn in silence.
    headless = tmp_path / "headless"
    headless.mkdir()
    data = (embedder / "latest" / "model.safetensors").read_bytes()
    size = int.from_bytes(data[:8], "little")
    header, body, kept, offset = json.loads(data[8 : 8 + size]), data[8 + size :], {}, 0
    parts = []
    for name, entry in header.items():
        if name == "__metadata__" or name.startswith("pool."):
            kept.update({name: entry} if name == "__metadata__" else {})
            continue
        start, end = entry["data_offsets"]
        kept[name] = dict(entry, data_offsets=[offset, offset + end - start])
        parts.append(body[start:end])
        offset += end - start
    encoded = json.dumps(kept).encode()
    encoded += b" " * (-len(encoded) % 8)
    (headless / "model.safetensors").write_bytes(len(encoded).to_bytes(8, "little") + encoded + b"".join(parts))
    run = train(build_dir, *common(corpus), "--steps", "1", "--init-from", headless, "--keep-head", "--output", tmp_path / "none",
                check=False)
    assert run.returncode != 0 and "carries no pool head" in run.stderr, run.stderr


def test_warm_start_from_shards(build_dir, cli, corpus, tmp_path):
    """--init-from takes a sharded checkpoint (`uform shard`) and starts where its single-file source does."""
    base, sharded = tmp_path / "base", tmp_path / "sharded"
    train(build_dir, *common(corpus, "mlm"), "--steps", "2", "--output", base)
    run = subprocess.run([str(cli), "shard", "--model", base / "latest", "--output", sharded, "--max-shard-mb", "0.05"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and len(list(sharded.glob("model-*-of-*.safetensors"))) >= 3, run.stderr
    for source, output in ((base, tmp_path / "from_single"), (sharded, tmp_path / "from_shards")):
        train(build_dir, *common(corpus, "rerank"), "--steps", "1", "--seed", "7",
              "--init-from", source, "--output", output)
    assert tensors(tmp_path / "from_single" / "latest" / "model.safetensors") == \
        tensors(tmp_path / "from_shards" / "latest" / "model.safetensors")


def test_train_only_freezes_the_rest(build_dir, cli, corpus, tmp_path):
    """--train-only rerank,siglip over a warm start: every other tensor leaves byte for byte as it came
    (so the pooled embedding is the embedder's), the rerank head and the SigLIP scalars move; the same
    run without it (the control) moves the encoder, so the byte comparison can fail."""
    embedder, head_only, everything = tmp_path / "embedder", tmp_path / "head_only", tmp_path / "everything"
    train(build_dir, *common(corpus), "--steps", "3", "--output", embedder)
    for output, extra in ((head_only, ["--train-only", "rerank,siglip"]), (everything, [])):
        train(build_dir, *common(corpus, "rerank"), "--steps", "4", "--seed", "7", "--init-from", embedder, *extra,
              "--output", output)
    subprocess.run([str(cli), "init", "--tier", "64x2", "--seed", "7", "--output", tmp_path / "fresh"], check=True,
                   capture_output=True)
    start, fresh = tensors(embedder / "latest" / "model.safetensors"), tensors(tmp_path / "fresh" / "model.safetensors")
    trained = tensors(head_only / "latest" / "model.safetensors")
    moved = {"rerank.proj", "siglip.scale", "siglip.bias"}
    assert trained.keys() == start.keys()
    assert [name for name in start if name not in moved and trained[name] != start[name]] == []
    assert all(trained[name] != fresh[name] for name in moved), "the head did not train"
    control = tensors(everything / "latest" / "model.safetensors")
    assert control["blocks.0.qkv"] != start["blocks.0.qkv"] and control["embed.bytes"] != start["embed.bytes"]
    assert "training only rerank,siglip" in (head_only / "latest" / "README.md").read_text()


@pytest.mark.parametrize("parts, message", [("rerank,heads", "unknown part 'heads'"), ("mae", "carries no mae part")])
def test_train_only_names_bad_parts(build_dir, corpus, tmp_path, parts, message):
    run = train(build_dir, *common(corpus), "--steps", "1", "--train-only", parts, "--output", tmp_path / "run", check=False)
    assert run.returncode == 1 and message in run.stderr, run.stderr


def test_bad_mixture_and_malformed_lines(build_dir, corpus, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"objective": "contrastive", "sources": [{"path": "missing.jsonl", "weight": 1}]}))
    run = train(build_dir, "--mixture", bad, "--output", tmp_path / "x", check=False)
    assert run.returncode != 0 and "missing.jsonl" in run.stderr
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"query": "a", "positives": ["b"]}\n{"query": "c", "positives": \n')
    (tmp_path / "broken.json").write_text(json.dumps({"objective": "contrastive", "sources": [{"path": "broken.jsonl", "weight": 1}]}))
    run = train(build_dir, "--mixture", tmp_path / "broken.json", "--output", tmp_path / "y", check=False)
    assert run.returncode != 0 and "broken.jsonl:2" in run.stderr, run.stderr
    run = train(build_dir, "--mixture", corpus / "mlm.json", "--output", tmp_path / "z", "--objective", "nonsense", check=False)
    assert run.returncode != 0 and "nonsense" in run.stderr
    run = train(build_dir, *common(corpus), "--steps", "1", "--learning-rate", "0", "--output", tmp_path / "w", check=False)
    assert run.returncode != 0 and "--learning-rate must be positive" in run.stderr, run.stderr  # not the tier's in silence


def test_eval_reports_recall(build_dir, corpus, tmp_path):
    train(build_dir, *common(corpus), "--steps", "2", "--output", tmp_path / "run")
    report = tmp_path / "eval.json"
    run = subprocess.run([str(build_dir / "uform_eval"), tmp_path / "run", "--pairs", corpus / "pairs.jsonl", "--limit", "50",
                          "--quiet", "--json", report], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    result = json.load(open(report))
    # chance: the gold first in a random order of a side's distinct texts, averaged over both directions
    records = [json.loads(line) for line in open(corpus / "pairs.jsonl")][:50]
    sides = [[r["positives"][0] for r in records], [r["query"] for r in records]]
    expected = sum(1 / len(set(side)) for side in sides) / 2
    expected = float(f"{expected:.6g}")  # the JSON keeps 6 significant digits (JSON_REAL_PRECISION(6))
    assert result["count"] == 50 and abs(result["chance"]["recall@1"] - expected) < 1e-12, (result["chance"], expected)
    for row in result["widths"]:
        assert 0 <= row["recall@1"] <= row["recall@5"] <= row["recall@10"] <= 1


def test_trained_embedder_beats_untrained_on_held_out_pairs(build_dir, cli, tmp_path):
    # A synthetic translation task: a phrase and its reversed upper-case spelling. Train on 400
    # phrases, evaluate on 100 others: 120 steps must lift held-out Recall@1 (widest width) above
    # the untrained model's by at least 0.2 (observed: untrained 0.01, trained 1.0).
    rng = random.Random(11)
    alphabet = "abcdefghijklmnopqrstuvwxyz"
    phrases = sorted({"".join(rng.choice(alphabet) for _ in range(rng.randint(5, 12))) for _ in range(600)})[:500]
    rng.shuffle(phrases)
    train_phrases, held_out = phrases[:400], phrases[400:]
    for name, subset in (("train.jsonl", train_phrases), ("held_out.jsonl", held_out)):
        with open(tmp_path / name, "w") as file:
            for phrase in subset:
                file.write(json.dumps({"query": phrase, "positives": [phrase.upper()[::-1]]}) + "\n")
    (tmp_path / "mixture.json").write_text(json.dumps(
        {"objective": "contrastive", "columns": 128, "sources": [{"path": "train.jsonl", "weight": 1}]}))
    subprocess.run([str(cli), "init", "--tier", "64x2", "--seed", "2", "--output", tmp_path / "untrained"], check=True,
                   capture_output=True)
    train(build_dir, "--mixture", tmp_path / "mixture.json", "--tier", "64x2", "--rows", "4", "--steps", "120",
          "--learning-rate", "3e-3", "--seed", "2", "--output", tmp_path / "trained")

    def recall(checkpoint):
        report = tmp_path / f"{checkpoint}.json"
        subprocess.run([str(build_dir / "uform_eval"), tmp_path / checkpoint, "--pairs", tmp_path / "held_out.jsonl",
                        "--quiet", "--json", report], check=True, capture_output=True, timeout=120)
        rows = json.load(open(report))["widths"]
        return max(row["recall@1"] for row in rows if row["direction"] == "query->positive" and row["width"] == 64)

    before, after = recall("untrained"), recall("trained")
    print(f"held-out Recall@1: untrained {before:.3f}, trained {after:.3f}")
    assert after >= before + 0.2, f"held-out Recall@1: untrained {before:.3f}, trained {after:.3f}"


def test_a_deepened_model_trains_its_new_blocks(build_dir, cli, corpus, tmp_path):
    """`uform grow --deepen` then --init-from --keep-head: the new block's zero out and down move with the first
    steps (a copy with both sides zero would stay dead); the control, training the pool alone, leaves them zero."""
    trained, grown = tmp_path / "trained", tmp_path / "grown"
    train(build_dir, *common(corpus), "--steps", "2", "--output", trained)
    run = subprocess.run([str(cli), "grow", "--model", trained / "latest", "--output", grown, "--deepen", "1"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    zero = tensors(grown / "model.safetensors")["blocks.2.out"]
    assert not any(zero) and len(zero) == 64 * 64 * 2
    for output, extra in ((tmp_path / "on", []), (tmp_path / "still", ["--train-only", "pool"])):
        train(build_dir, *common(corpus), "--steps", "2", "--init-from", grown, "--keep-head", *extra, "--output", output)
    moved, still = (tensors(tmp_path / name / "latest" / "model.safetensors") for name in ("on", "still"))
    assert len(moved) == len(still) and "blocks.2.down" in moved and "blocks.3.qkv" not in moved
    assert any(moved["blocks.2.out"]) and any(moved["blocks.2.down"]), "the new block's projections stayed zero"
    assert not any(still["blocks.2.out"]) and not any(still["blocks.2.down"])
