# test_lineage.py: the pieces of scripts/device/lineage.py that run without a GPU. The spectrum
# summary against matrices whose effective rank is known by construction (an isotropic rank-k
# code has rank k; a planted rank-1 code must read 1, not k); plain_trains strips exactly the mined
# negatives; the held-out spreads keep every k-th record; the plan's stages chain (each init names
# a run of the stage before it); eval's candidates are the runs that hold a checkpoint, the refine
# stage's start beside its runs; the rehead stage's head goes from a run into a sharded checkpoint
# (export_head, put_head.py) leaving every other byte as it was, and a head of another shape is refused;
# fuse-eval scores the split it names and reads a row for every weight, however the weight is written.

import json
import pathlib
import subprocess
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
    for run in stages["refine"] + stages["rehead"]:  # these go on from a checkpoint folder, not from a run of the chain
        assert run["init_path"] == "models/default" and "init" not in run and "tier" not in run
    for run in stages["rehead"]:  # the encoder and pool stay frozen: the shipped pooled embedding is kept
        assert run["flags"][run["flags"].index("--train-only") + 1] == "rerank,siglip"
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


def raw_tensors(folder):
    """{name: bytes} over every SafeTensors file of a checkpoint folder."""
    found = {}
    for path in sorted(pathlib.Path(folder).glob("*.safetensors")):
        data = path.read_bytes()
        size = int.from_bytes(data[:8], "little")
        header = json.loads(data[8 : 8 + size])
        header.pop("__metadata__", None)
        found.update({name: data[8 + size + e["data_offsets"][0] : 8 + size + e["data_offsets"][1]] for name, e in header.items()})
    return found


def test_head_goes_into_the_shards(cli, tmp_path):
    for name, tier, seed in (("start", "64x2", "1"), ("other", "64x2", "2"), ("wide", "128x2", "3")):
        subprocess.run([str(cli), "init", "--tier", tier, "--seed", seed, "--output", tmp_path / name], check=True, capture_output=True)
    shards = tmp_path / "shards"
    subprocess.run([str(cli), "shard", "--model", tmp_path / "start", "--output", shards, "--max-shard-mb", "0.05"], check=True,
                   capture_output=True)
    run = tmp_path / "run"
    run.mkdir()
    (run / "latest").symlink_to(tmp_path / "other")
    lineage.export_head(run, tmp_path / "head.safetensors")
    assert set(raw_tensors(tmp_path)) == {"rerank.proj", "siglip.scale", "siglip.bias"}  # head.safetensors alone sits there
    put = [sys.executable, str(ROOT / "scripts" / "device" / "put_head.py")]
    subprocess.run([*put, tmp_path / "head.safetensors", shards], check=True, capture_output=True)
    before, after, other = raw_tensors(tmp_path / "start"), raw_tensors(shards), raw_tensors(tmp_path / "other")
    assert after.keys() == before.keys()
    assert [name for name in after if after[name] != (other if name.split(".")[0] in ("rerank", "siglip") else before)[name]] == []
    assert before["rerank.proj"] != other["rerank.proj"]  # the check above could fail
    assert subprocess.run([str(cli), "info", "--model", shards], capture_output=True).returncode == 0
    wide = tmp_path / "wide-run"
    wide.mkdir()
    (wide / "latest").symlink_to(tmp_path / "wide")
    lineage.export_head(wide, tmp_path / "wide-head.safetensors")
    refused = subprocess.run([*put, tmp_path / "wide-head.safetensors", shards], capture_output=True, text=True)
    assert refused.returncode != 0 and "rerank.proj is BF16 [128, 128]" in refused.stderr, refused.stderr
    assert raw_tensors(shards) == after


def test_fuse_eval_scores_the_split_named_at_every_weight(cli, tmp_path, monkeypatch):
    subprocess.run([str(cli), "init", "--tier", "64x2", "--seed", "1", "--output", tmp_path / "model"], check=True, capture_output=True)
    corpus = tmp_path / "data" / "gettext"
    corpus.mkdir(parents=True)
    for split, word in (("dev", "dev"), ("test", "test")):
        lines = [json.dumps({"query": f"{word} query {i}", "positives": [f"{word} answer {i * 7}"]}) for i in range(12)]
        (corpus / f"{split}.jsonl").write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(lineage, "ROOT", tmp_path)

    class Args:
        runs, split, fuse_weights, refine_from = str(tmp_path / "runs"), "dev", "0.10,0.1234", str(tmp_path / "model")
        eval_limit, rerank, jobs, device = 8, 5, 1, "cpu"
    report = lineage.fuse_eval(pathlib.Path(cli).resolve().parent, Args)  # uform_eval runs in ROOT, tmp_path here
    assert report["split"] == "dev" and sorted(report["rows"]) == ["dev-gettext positive->query", "dev-gettext query->positive"]
    spread = (tmp_path / "runs" / "eval-sets-dev" / "gettext.jsonl").read_text()
    assert spread.count("\n") == 8 and "dev query" in spread and "test query" not in spread
    for row in report["rows"].values():  # a weight named unlike uform_eval's rows would read None
        assert list(row) == ["tfidf", "model", "model+maxsim@5", "model+fuse0.1@5", "model+fuse0.123@5"]
        assert all(isinstance(value, float) for value in row.values()), row


def test_dev_pick_means_the_rule_sets_only():
    """dev_r1 is the mean over the rule's sets alone; round 12's rule (every set but NEW_IMAGE_SETS), the text
    sets and the new picture sets are reported beside it; a missing report reads None."""
    def report(r1_forward, r1_back):
        return {"rows": [{"method": "model", "language": "all", "direction": d, "width": w, "recall@1": r - (w < 256) * 0.1}
                         for d, r in (("query->positive", r1_forward), ("positive->query", r1_back)) for w in (64, 256)]}
    names = ["gettext", "emoji", "flags", *lineage.NEW_IMAGE_SETS]
    rule = ["gettext", "emoji", *lineage.NEW_IMAGE_SETS]
    results = {f"dev-a-{n}": report(0.5, 0.7) for n in names} | {f"dev-b-{n}": report(0.55, 0.7) for n in names}
    for name in lineage.NEW_IMAGE_SETS:  # b is better on the new sets
        results[f"dev-a-{name}"], results[f"dev-b-{name}"] = report(0.1, 0.1), report(0.3, 0.3)
    results["dev-b-flags"] = report(0.0, 0.0)  # and far worse on the small set the rule leaves out
    picked = lineage.dev_pick(results, ["a", "b"], names, rule)
    assert picked["dev_r1"] == {"a": pytest.approx((1.2 + 1.2 + 0.2 * len(lineage.NEW_IMAGE_SETS)) / (4 + 2 * len(lineage.NEW_IMAGE_SETS))),
                                "b": pytest.approx((1.25 + 1.25 + 0.6 * len(lineage.NEW_IMAGE_SETS)) / (4 + 2 * len(lineage.NEW_IMAGE_SETS)))}
    assert picked["dev_r1"]["b"] > picked["dev_r1"]["a"]
    # The control: with flags in the rule (round 12's rule), a would be picked.
    assert picked["dev_r1_round12"]["a"] > picked["dev_r1_round12"]["b"]
    assert picked["dev_r1_text"] == {"a": pytest.approx(0.6), "b": pytest.approx(0.625)}
    assert picked["dev_r1_new"] == {"a": pytest.approx(0.1), "b": pytest.approx(0.3)}
    del results["dev-a-emoji"]
    assert lineage.dev_pick(results, ["a"], names, rule)["dev_r1"] == {"a": None}
    assert lineage.dev_pick(results, ["a"], ["gettext"], ["gettext"])["dev_r1_new"] == {"a": None}  # no new set built: None


def test_rule_sets_leave_out_a_set_with_few_items_either_way(tmp_path):
    """A dev set enters the rule when both directions rank at least RULE_LEAST_ITEMS distinct items: few
    pictures (flags) or few captions (Fashion-MNIST) leave it out; repeated texts and pictures count once."""
    least = lineage.RULE_LEAST_ITEMS

    def write(name, queries, pictures):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps({"query": queries[i % len(queries)], "positives": [{"image": f"img/{i % pictures}.png"}]}) + "\n"
                                for i in range(3 * least)))
        return path
    dev = {"wide": write("wide", [f"caption {i}" for i in range(least)], least),
           "few-pictures": write("few-pictures", [f"caption {i}" for i in range(3 * least)], least - 1),
           "few-captions": write("few-captions", [f"caption {i}" for i in range(least - 1)], 3 * least)}
    assert lineage.distinct_items(dev["few-pictures"]) == (3 * least, least - 1)
    assert lineage.rule_sets(dev) == ["wide"]


def test_pooled_sets_keep_each_image_the_same_file(tmp_path):
    """pooled() writes two picture sets' records into one file whose image paths, read from the pooled file's
    folder as uform_eval reads them, name the same files as before; a copy left unrewritten names none."""
    for name, picture in (("stamps", "cat.png"), ("gcompris", "dog.png")):
        (tmp_path / "data" / name / "img").mkdir(parents=True)
        (tmp_path / "data" / name / "img" / picture).write_bytes(name.encode())
        (tmp_path / "data" / name / "dev-eval-2000.jsonl").write_text(
            json.dumps({"query": f"a {picture[:3]}", "positives": [{"image": f"img/{picture}"}], "lang": "en"}) + "\n")
    members = {name: tmp_path / "data" / name / "dev-eval-2000.jsonl" for name in ("stamps", "gcompris")}
    target = lineage.pooled(members, tmp_path / "data" / "dev-everyday-eval-2000.jsonl")
    records = [json.loads(line) for line in target.read_text().splitlines()]
    assert [(r["query"], r["positives"][0]["image"], r["lang"]) for r in records] == [
        ("a cat", "stamps/img/cat.png", "en"), ("a dog", "gcompris/img/dog.png", "en")]

    def contents(path):  # each image's bytes, its path read from the pair file's folder
        return [(path.parent / json.loads(line)["positives"][0]["image"]).read_bytes()
                for line in path.read_text().splitlines() if (path.parent / json.loads(line)["positives"][0]["image"]).is_file()]
    assert contents(target) == [b"stamps", b"gcompris"]
    unrewritten = tmp_path / "data" / "unrewritten.jsonl"  # the control: the members' lines copied as they are
    unrewritten.write_text("".join(path.read_text() for path in members.values()))
    assert contents(unrewritten) == []


def test_rule_sets_put_a_pool_in_place_of_its_members(tmp_path):
    """Round 15's rule: a pool present among the dev sets stands for its members, which are scored, not picked
    on; without the pool (round 13's rule, or a pool too small) each member counts alone."""
    least = lineage.RULE_LEAST_ITEMS

    def write(name, pictures):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps({"query": f"caption {i}", "positives": [{"image": f"img/{i % pictures}.png"}]}) + "\n"
                                for i in range(2 * least)))
        return path
    dev = {"gettext": write("gettext", 2 * least), "stamps": write("stamps", least), "gcompris": write("gcompris", least),
           "flags": write("flags", 13), "everyday": write("everyday", 2 * least)}
    pools = {"everyday": ("stamps", "gcompris")}
    assert lineage.rule_sets(dev, pools) == ["gettext", "everyday"]
    assert lineage.rule_sets({n: p for n, p in dev.items() if n != "everyday"}, pools) == ["gettext", "stamps", "gcompris"]
    assert lineage.rule_sets(dev | {"everyday": write("small-pool", least - 1)}, pools) == ["gettext", "stamps", "gcompris"]


def test_dev_pick_on_a_pool_against_its_members():
    """dev_r1 over a pool and dev_r1_round13 over its members apart can pick differently: a lead of one member's
    few pictures counts once in the pool, as its share of the pooled pictures (the control: round 13's rule)."""
    def report(r1):
        return {"rows": [{"method": "model", "language": "all", "direction": d, "width": 384, "recall@1": r1}
                         for d in ("query->positive", "positive->query")]}
    results = {"dev-a-gettext": report(0.6), "dev-b-gettext": report(0.6),
               "dev-a-stamps": report(0.10), "dev-b-stamps": report(0.12),
               "dev-a-gcompris": report(0.30), "dev-b-gcompris": report(0.10),  # 30 pictures: a's lead is a few pictures
               "dev-a-everyday": report(0.10), "dev-b-everyday": report(0.12)}  # pooled, b ranks better
    names = ["gettext", "stamps", "gcompris", "everyday"]
    picked = lineage.dev_pick(results, ["a", "b"], names, ["gettext", "everyday"], ["gettext", "stamps", "gcompris"])
    assert picked["dev_r1"] == {"a": pytest.approx(0.35), "b": pytest.approx(0.36)}
    assert picked["dev_r1_round13"] == {"a": pytest.approx(1.0 / 3), "b": pytest.approx(0.82 / 3)}
    assert picked["dev_r1_round12"] == {"a": pytest.approx(0.6), "b": pytest.approx(0.6)}  # neither the new sets nor the pool
