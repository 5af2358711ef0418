"""The device call's helpers: scripts/device/many.sh (several gpu.sh modes in one call, one archive back) run
over a stub in place of gpu.sh, and scripts/device/recall_sets.py's picture copies."""

import json
import os
import pathlib
import subprocess
import sys
import tarfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "device"))
import recall_sets  # noqa: E402

STUB = """#!/usr/bin/env bash
# what many.sh runs in gpu.sh's place: records its arguments and one variable, then acts on the first
printf '%s\\n' "$@" > "$OUT/arguments.txt"
echo "${STUB_VARIABLE:-unset}" > "$OUT/variable.txt"
case "$1" in
  fail) exit 3 ;;
  sleep) sleep 30 ;;
esac
echo "stub ran $1"
"""


def run_many(tmp_path, *arguments):
    stub = tmp_path / "stub.sh"
    stub.write_text(STUB)
    out = tmp_path / "out"
    env = dict(os.environ, OUT=str(out), GPU_SH=str(stub))
    env.pop("STUB_VARIABLE", None)
    run = subprocess.run(["bash", str(ROOT / "scripts" / "device" / "many.sh"), *arguments], env=env,
                         capture_output=True, text=True, timeout=60)
    return run, out


def archive(out):
    with tarfile.open(out / "many.tgz") as tar:
        return {member.name.lstrip("./"): tar.extractfile(member).read().decode() for member in tar.getmembers()
                if member.isfile()}


def test_many_runs_each_step_with_its_quoting_and_variables(tmp_path):
    run, out = run_many(tmp_path, "20", "tests -k 'e4m3 and not gate_up'", "STUB_VARIABLE=7 encode --seconds 1")
    assert run.returncode == 0, run.stdout + run.stderr
    files = archive(out)
    assert files["1-tests/arguments.txt"].splitlines() == ["tests", "-k", "e4m3 and not gate_up"]
    assert files["1-tests/variable.txt"].strip() == "unset"  # a step's variable is its own
    assert files["2-encode/arguments.txt"].splitlines() == ["encode", "--seconds", "1"]
    assert files["2-encode/variable.txt"].strip() == "7"
    assert files["2-encode/console.txt"].strip() == "stub ran encode"
    assert [line.split()[:3] for line in (out / "many.txt").read_text().splitlines()] == [
        ["1-tests", "exit", "0"], ["2-encode", "exit", "0"]]


def test_many_goes_on_past_a_failure_and_a_deadline_and_says_so(tmp_path):
    run, out = run_many(tmp_path, "3", "fail", "sleep", "contract")
    assert run.returncode == 1, run.stdout + run.stderr
    codes = [line.split()[:3] for line in (out / "many.txt").read_text().splitlines()]
    assert codes[0] == ["1-fail", "exit", "3"]
    assert codes[1] == ["2-sleep", "exit", "124"]  # killed at the deadline (5 s at least), not after 30
    assert codes[2] == ["3-contract", "exit", "0"]
    assert "3-contract/arguments.txt" in archive(out)


def test_many_refuses_a_bad_deadline_and_an_empty_step(tmp_path):
    run, _ = run_many(tmp_path, "soon", "contract")
    assert run.returncode == 2 and "SECONDS must be a whole number, not 'soon'" in run.stdout
    run, _ = run_many(tmp_path, "20", "STUB_VARIABLE=1")
    assert run.returncode == 2 and "names no mode" in run.stdout


def test_recall_sets_copies_each_picture_a_split_names(tmp_path, monkeypatch):
    corpus = tmp_path / "data" / "pictures"
    (corpus / "img").mkdir(parents=True)
    (corpus / "img" / "a.png").write_bytes(b"a")
    (corpus / "img" / "b.png").write_bytes(b"b")
    (corpus / "img" / "unused.png").write_bytes(b"c")
    records = [{"query": "a", "positives": [{"image": "img/a.png"}]},
               {"query": "b", "positives": [{"image": "img/b.png"}, {"text": "bee"}]},
               {"query": "a again", "positives": [{"image": "img/a.png"}]}]
    (corpus / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    monkeypatch.setattr(recall_sets, "ROOT", tmp_path)
    assert recall_sets.whole_split("pictures", tmp_path / "recall") == 2
    assert sorted(p.name for p in (tmp_path / "recall" / "pictures" / "img").iterdir()) == ["a.png", "b.png"]
    assert (tmp_path / "recall" / "pictures" / "test.jsonl").read_bytes() == (corpus / "test.jsonl").read_bytes()
    assert recall_sets.whole_split("absent", tmp_path / "recall") is None


def test_recall_sets_names_a_missing_picture(tmp_path, monkeypatch):
    corpus = tmp_path / "data" / "pictures"
    corpus.mkdir(parents=True)
    (corpus / "test.jsonl").write_text('{"query": "a"}\n{"query": "b", "positives": [{"image": "img/gone.png"}]}\n')
    monkeypatch.setattr(recall_sets, "ROOT", tmp_path)
    try:
        recall_sets.whole_split("pictures", tmp_path / "recall")
    except SystemExit as error:
        assert "test.jsonl names img/gone.png, which is not in" in str(error)
    else:
        raise AssertionError("a missing picture was not refused")


def test_precision_recall_switches_name_each_gpu_variant():
    sys.path.insert(0, str(ROOT / "bench"))
    import precision_recall

    assert precision_recall.gpu_switches("e4m3") == {
        "UFORM_CUDA_E4M3": "row", "UFORM_CUDA_GATE_UP": "bf16", "UFORM_CUDA_E4M3_ATTENTION": "bf16"}
    assert precision_recall.gpu_switches("e4m3-tensor+gate_up") == {
        "UFORM_CUDA_E4M3": "tensor", "UFORM_CUDA_GATE_UP": "e4m3", "UFORM_CUDA_E4M3_ATTENTION": "bf16"}
    assert precision_recall.gpu_switches("e4m3-mixed") == {
        "UFORM_CUDA_E4M3": "mixed", "UFORM_CUDA_GATE_UP": "bf16", "UFORM_CUDA_E4M3_ATTENTION": "bf16"}
    # FP8 attention runs only where cuDNN's attention does: pinned on every pass, so that it is what is measured
    assert precision_recall.gpu_switches("e4m3-tensor+gate_up+attention") == {
        "UFORM_CUDA_E4M3": "tensor", "UFORM_CUDA_GATE_UP": "e4m3", "UFORM_CUDA_E4M3_ATTENTION": "e4m3",
        "UFORM_CUDA_ATTENTION": "cudnn"}
    for wrong in ("e4m3-tensor+rotary", "e4m3+gate_up", "e4m3-mixed+gate_up"):
        try:
            precision_recall.gpu_switches(wrong)
        except ValueError as error:
            assert "suffixes are +gate_up and +attention" in str(error)
        else:
            raise AssertionError(f"{wrong} was accepted")


def lineage_packs_dry_run(root):
    """lineage_packs.sh --dry-run copied under root (a bare checkout there): its printed steps."""
    script = root / "scripts" / "device" / "lineage_packs.sh"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text((ROOT / "scripts" / "device" / "lineage_packs.sh").read_text())
    run = subprocess.run(["bash", str(script), "--dry-run"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_lineage_packs_names_only_files_that_exist(tmp_path):
    """On a bare checkout every step is printed, and each script and mixture it names is in the repository."""
    printed = lineage_packs_dry_run(tmp_path)
    assert "is there" not in printed
    for pack in ("pack-r6img", "pack-r6a", "pack-r6b", "pack-r9w", "pack-r10s", "pack-r12st", "pack-r13ev", "pack-r14art", "pack-r15wt"):
        assert f"--output data/{pack}/" in printed, pack
    named = {word for line in printed.splitlines() for word in line.split()
             if word.startswith(("scripts/", "mixtures/"))}
    assert len(named) >= 8, named
    missing = sorted(word for word in named if not (ROOT / word).exists())
    assert not missing, missing
    # The control: a step whose output is there is skipped and says so.
    (tmp_path / "runs" / "recall").mkdir(parents=True)
    assert "runs/recall is there" in lineage_packs_dry_run(tmp_path)
    # And a misspelled mixture is caught by the same check.
    script = tmp_path / "scripts" / "device" / "lineage_packs.sh"
    script.write_text(script.read_text().replace("embedder_siblings.json", "embedder_sibling.json"))
    broken = subprocess.run(["bash", str(script), "--dry-run"], capture_output=True, text=True, timeout=60).stdout
    assert any(word.startswith("mixtures/") and not (ROOT / word).exists() for word in broken.split())
