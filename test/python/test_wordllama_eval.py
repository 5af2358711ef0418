# test_wordllama_eval.py: bench/wordllama_eval.py's numpy metrics equal uform_eval's. A small
# checkpoint (uform init --tier 64x2) embeds a pair file through `uform encode`; the script's
# scoring of those embeddings must give every row uform_eval writes for the checkpoint (both
# directions, every width, R@1/5/10, MRR, nDCG@10, overall and per language) within 1e-6. The
# file repeats positives and queries, so the items rule (equal texts one candidate) counts; the binary rows (minus the
# Hamming distance of sign bits, recomputed exactly from the printed floats) are full of ties, so
# the tie rule counts; an all-equal scorer must give uform_eval's chance row. Planted controls:
# the duplicates rule off, and ties broken by index, must each differ from uform_eval. The
# WordLlama run itself skips when the wordllama package is not installed.

import importlib.util
import json
import subprocess

import numpy as np
import pytest

from conftest import HERE, built

SCRIPT = HERE.parent.parent / "bench" / "wordllama_eval.py"
TOLERANCE = 1e-6


def load_script():
    spec = importlib.util.spec_from_file_location("wordllama_eval", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


wordllama_eval = load_script()

WORDS = ["river", "stone", "cloud", "ember", "lantern", "harbor", "meadow", "thistle", "copper", "willow",
         "falcon", "quartz", "orchard", "glacier", "saffron", "tundra"]


def records():
    """Pairs in three languages and none, with repeated positives and queries (the duplicates rule)."""
    out = []
    for index in range(48):
        first, second = WORDS[index % 16], WORDS[(index * 7 + 3) % 16]
        record = {"query": f"{first} and {second} number {index}", "positives": [f"{second.upper()} {first} #{index % 11}"]}
        if index % 4:
            record["lang"] = ["de", "fr", "ja"][index % 3]
        out.append(record)
    out[5]["positives"] = out[4]["positives"][:]       # two queries share one answer
    out[20]["positives"] = out[9]["positives"][:]
    out[30]["query"] = out[31]["query"]                 # two answers share one question
    return out


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wordllama_eval")
    pairs = folder / "pairs.jsonl"
    pairs.write_text("".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records()), encoding="utf-8")
    checkpoint = folder / "checkpoint"
    subprocess.run([str(built("uform")), "init", "--tier", "64x2", "--seed", "0", "--output", str(checkpoint)],
                   check=True, capture_output=True, timeout=120)
    report = folder / "report.json"
    subprocess.run([str(built("uform_eval")), str(checkpoint), "--pairs", str(pairs), "--json", str(report),
                    "--output-precision", "float32,binary", "--quiet"], check=True, capture_output=True, timeout=300)
    queries, positives, langs, _ = wordllama_eval.read_pairs(pairs)

    def encode(texts):
        lines = "".join(json.dumps({"text": text}, ensure_ascii=False) + "\n" for text in texts)
        result = subprocess.run([str(built("uform")), "encode", "--model", str(checkpoint), "--records"], input=lines,
                                capture_output=True, text=True, check=True, timeout=300)
        return np.array([json.loads(line) for line in result.stdout.splitlines()], dtype=np.float64)

    return {"pairs": pairs, "report": json.loads(report.read_text()), "queries": queries, "positives": positives,
            "langs": langs, "embeddings": (encode(queries), encode(positives))}


def keyed(rows, method):
    return {(row["width"], row["direction"], row["language"]): row for row in rows if row["method"] == method}


def differences(ours, theirs):
    """Every metric's gap between two row sets that must cover the same (width, direction, language) keys."""
    assert set(ours) == set(theirs), sorted(set(ours) ^ set(theirs))
    gaps = {}
    for key, row in theirs.items():
        assert ours[key]["queries"] == row["queries"], key
        for metric in wordllama_eval.METRICS:
            gaps[key + (metric,)] = abs(ours[key][metric] - row[metric])
    return gaps


def float_rows(setup, **plant):
    widths = sorted({row["width"] for row in setup["report"]["widths"]})
    return wordllama_eval.score_embeddings(*setup["embeddings"], setup["queries"], setup["positives"], setup["langs"],
                                           widths, "model", **plant)


def binary_rows(setup, **plant):
    """uform_eval's model-binary rows recomputed: sign bits (x > 0) of each width's prefix as +-1, whose
    dot product is width - 2 x Hamming distance (the same order and ties as minus the distance)."""
    groups = {wordllama_eval.DIRECTIONS[0]: wordllama_eval.text_groups(setup["positives"]),
              wordllama_eval.DIRECTIONS[1]: wordllama_eval.text_groups(setup["queries"])}
    rows = []
    for width in sorted({row["width"] for row in setup["report"]["widths"]}):
        signs = [np.where(side[:, :width] > 0, 1.0, -1.0) for side in setup["embeddings"]]
        for direction, (left, right) in zip(wordllama_eval.DIRECTIONS, (signs, signs[::-1])):
            placement = wordllama_eval.placements(left, right, groups[direction], **plant)
            rows += wordllama_eval.metric_rows(placement, setup["langs"], "model-binary", width, direction, "binary")
    return rows


def test_the_file_exercises_both_rules(setup):
    report = setup["report"]
    assert report["count"] == 48 and set(report["languages"]) == {"-", "de", "fr", "ja"}
    assert len(set(setup["positives"])) < 48 and len(set(setup["queries"])) < 48
    assert any(row["language"] == "ja" for row in report["rows"])  # per-language rows are written


def test_float_rows_equal_uform_eval(setup):
    gaps = differences(keyed(float_rows(setup), "model"), keyed(setup["report"]["rows"], "model"))
    assert len(gaps) == len(setup["report"]["widths"]) * 5 * 5  # (widths x directions) x (all + 4 languages) x 5 metrics
    assert max(gaps.values()) <= TOLERANCE, max(gaps.items(), key=lambda item: item[1])


def test_binary_rows_with_ties_equal_uform_eval(setup):
    ours = binary_rows(setup)
    theirs = keyed(setup["report"]["rows"], "model-binary")
    gaps = differences(keyed(ours, "model-binary"), theirs)
    assert max(gaps.values()) <= TOLERANCE, max(gaps.items(), key=lambda item: item[1])
    # The tie rule is exercised: some gold shares its score with a rival.
    width = min(key[0] for key in theirs)
    signs = [np.where(side[:, :width] > 0, 1.0, -1.0) for side in setup["embeddings"]]
    _, tied = wordllama_eval.placements(*signs, wordllama_eval.text_groups(setup["positives"]))
    assert tied.sum() > 0


def random_order_metrics(count, golds):
    """The first of `golds` gold candidates in a uniformly random order of `count`: its expected metrics."""
    survive, found = 1.0, dict.fromkeys(wordllama_eval.METRICS, 0.0)
    for rank in range(1, count - golds + 2):
        here = survive * golds / (count - rank + 1)
        survive *= (count - rank + 1 - golds) / (count - rank + 1)
        for cutoff in (1, 5, 10):
            found[f"recall@{cutoff}"] += here if rank <= cutoff else 0.0
        found["mrr"] += here / rank
        found["ndcg@10"] += here / np.log2(rank + 1) if rank <= 10 else 0.0
    return found


def test_chance_is_a_random_order(setup):
    """uform_eval's chance: the gold item in a random order of a direction's distinct items (equal
    texts one item), averaged over both directions."""
    count = setup["report"]["count"]
    expected = dict.fromkeys(wordllama_eval.METRICS, 0.0)
    for texts in (setup["positives"], setup["queries"]):
        for metric, value in random_order_metrics(len(set(texts)), 1).items():
            expected[metric] += value / 2
    assert any(list(wordllama_eval.text_groups(setup["positives"])).count(g) > 1 for g in range(count))
    chance = next(row for row in setup["report"]["rows"] if row["method"] == "chance" and row["language"] == "all")
    for metric in wordllama_eval.METRICS:
        assert abs(expected[metric] - chance[metric]) <= TOLERANCE, metric
    # Without a gold group larger than one it is the all-tied placement, n - 1 rivals.
    flat = np.zeros((count, 1))
    tied = wordllama_eval.metric_rows(wordllama_eval.placements(flat, flat, np.arange(count)), setup["langs"], "chance", None, "both")[0]
    for metric in wordllama_eval.METRICS:
        assert abs(tied[metric] - random_order_metrics(count, 1)[metric]) <= 1e-12, metric


def test_planted_duplicates_off_differs(setup):
    gaps = differences(keyed(float_rows(setup, duplicates=False), "model"), keyed(setup["report"]["rows"], "model"))
    assert max(gaps.values()) > 1e-3, "the duplicates rule made no difference: the file does not test it"


def test_planted_ties_by_index_differs(setup):
    gaps = differences(keyed(binary_rows(setup, ties="index"), "model-binary"),
                       keyed(setup["report"]["rows"], "model-binary"))
    assert max(gaps.values()) > 1e-3, "breaking ties by index made no difference: the file does not test ties"


def test_wordllama_run(setup, tmp_path):
    pytest.importorskip("wordllama", reason="pip install wordllama (bench-only)")
    out = tmp_path / "wordllama.json"
    images = tmp_path / "images.jsonl"
    images.write_text('{"query": {"image": "a.png"}, "positives": ["a picture"]}\n'
                      '{"query": "words", "positives": ["more words"]}\n')
    result = subprocess.run(["python3", str(SCRIPT), "--pairs", str(setup["pairs"]), "--pairs", str(images),
                             "--uform-eval", str(built("uform_eval")), "--json", str(out)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "holds 1 images" in result.stderr and "| wordllama | 256 | query->positive |" in result.stdout
    report, skipped = json.loads(out.read_text())["reports"]
    assert skipped == {"pairs": str(images), "skipped": "1 images"}
    rows = report["rows"]
    assert keyed(rows, "tfidf") == keyed(setup["report"]["rows"], "tfidf") and report["chance"] == setup["report"]["chance"]
    ours = keyed(rows, "wordllama")
    assert set(ours) == {(width, direction, language) for width in (64, 128, 256)
                         for direction in wordllama_eval.DIRECTIONS for language in ("all", "-", "de", "fr", "ja")}
    for row in ours.values():
        assert set(row) == set(setup["report"]["rows"][0]) and 0 <= row["recall@1"] <= row["recall@10"] <= 1
    # The narrower widths (prefixes renormalized) are the library's own truncation, trunc_dim.
    full = wordllama_eval.load_wordllama()
    texts = setup["queries"][:8]
    for width in (64, 128):
        truncated = wordllama_eval.load_wordllama(trunc_dim=width).embed(texts, norm=True)
        assert np.allclose(wordllama_eval.unit_prefix(wordllama_eval.embed(full, texts), width), truncated, atol=1e-6)
