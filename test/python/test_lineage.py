# test_lineage.py: the pieces of scripts/device/lineage.py that run without a GPU. The spectrum
# summary against matrices whose effective rank is known by construction (an isotropic rank-k
# code has rank k; a planted rank-1 code must read 1, not k); plain_trains strips exactly the mined
# negatives; the held-out spreads keep every k-th record; the plan's stages chain (each init names
# a run of the stage before it); eval's candidates are the runs that hold a checkpoint, the refine
# stage's start beside its runs.

import json
import pathlib
import sys

import numpy
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "device"))
import lineage  # noqa: E402


@pytest.mark.parametrize("k", [1, 4, 16])
def test_spectrum_of_known_codes(k):
    rng = numpy.random.default_rng(k)
    basis, _ = numpy.linalg.qr(rng.standard_normal((64, k)))
    hadamard = numpy.ones((1, 1))
    while hadamard.shape[0] <= k:  # Sylvester's construction: orthogonal +-1 columns
        hadamard = numpy.block([[hadamard, hadamard], [hadamard, -hadamard]])
    codes = hadamard[:, 1:k + 1] @ basis.T  # centred (the all-ones column left out), equal energy on k orthogonal axes
    summary = lineage.spectrum(codes)
    assert summary["effective_rank"] == pytest.approx(k, rel=1e-6)
    assert summary["dims_90"] == max(1, int(numpy.ceil(0.9 * k - 1e-9))) and summary["dims_99"] == max(1, int(numpy.ceil(0.99 * k - 1e-9)))


def test_spectrum_planted_rank_one_is_caught():
    rng = numpy.random.default_rng(0)
    direction = rng.standard_normal(64)
    codes = rng.standard_normal((200, 1)) * direction  # every row on one line: rank 1 whatever the width
    assert lineage.spectrum(codes)["effective_rank"] == pytest.approx(1.0, abs=1e-6)
    assert lineage.spectrum(rng.standard_normal((200, 64)))["effective_rank"] > 40  # the same check sees a full code


def test_plain_trains_strip_the_negatives(tmp_path):
    records = [{"query": "q1", "positives": ["p1"], "negatives": ["n1"], "lang": "de"}, {"query": "q2", "positives": ["p2"]}]
    folder = tmp_path / "gettext"
    folder.mkdir()
    (folder / "train-negatives.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    lineage.plain_trains(tmp_path)
    plain = [json.loads(line) for line in (folder / "train.jsonl").read_text().splitlines()]
    assert plain == [{"query": "q1", "positives": ["p1"], "lang": "de"}, {"query": "q2", "positives": ["p2"]}]
    (folder / "train.jsonl").write_text("kept\n")
    lineage.plain_trains(tmp_path)  # an existing train.jsonl is never overwritten
    assert (folder / "train.jsonl").read_text() == "kept\n"


def test_plan_chains_its_stages():
    class Args:
        ship, tiny, refine_from = "384x6", "tiny", "models/default"
    stages = lineage.plan(Args)
    names = {stage: {run["name"] for run in runs} for stage, runs in stages.items()}
    for stage, before in (("reranker", "base"), ("embedder", "reranker")):
        for run in stages[stage]:
            source_stage, source = run["init"].split("/")
            assert source_stage == before and source in names[before], run
    for run in stages["base"]:
        assert "tier" in run and "init" not in run
    for run in stages["refine"]:  # the refine stage goes on from a checkpoint folder, not from a run of the chain
        assert run["init_path"] == "models/default" and "init" not in run and "tier" not in run
    for stage in stages.values():
        for run in stage:
            assert (ROOT / run["mixture"]).is_file() and run["steps"] > 0


def test_candidates_are_the_runs_with_checkpoints(tmp_path):
    class Args:
        ship, tiny, refine_from, runs = "384x6", "tiny", str(tmp_path / "start"), str(tmp_path / "runs")
    for folder in ("embedder/ship", "refine/defs"):
        (tmp_path / "runs" / folder).mkdir(parents=True)
        (tmp_path / "runs" / folder / "latest").symlink_to(tmp_path)
    (tmp_path / "runs" / "refine" / "more").mkdir()  # a run that saved nothing is no candidate
    found = lineage.candidates(Args)
    assert found == {"ship": tmp_path / "runs" / "embedder" / "ship", "start": tmp_path / "start",
                     "refine-defs": tmp_path / "runs" / "refine" / "defs"}


def test_language_subsets_are_derived_from_the_whole_file(tmp_path, monkeypatch):
    corpus = tmp_path / "data" / "gettext"
    corpus.mkdir(parents=True)
    lines = [json.dumps({"query": f"q{i}", "positives": ["p"], "lang": lang}) for i, lang in enumerate(["hy", "fr", "th", "de"])]
    (corpus / "train-negatives.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "mixtures").mkdir()
    mixture = {"objective": "contrastive", "sources": [{"path": "../data/gettext/train-negatives.jsonl"},
                                                       {"path": "../data/gettext/train-negatives.scarce.jsonl", "weight": 2}]}
    (tmp_path / "mixtures" / "m.json").write_text(json.dumps(mixture))
    monkeypatch.setattr(lineage, "ROOT", tmp_path)
    lineage.language_subsets(["mixtures/m.json"])
    assert (corpus / "train-negatives.scarce.jsonl").read_text().splitlines() == [lines[0], lines[2]]
