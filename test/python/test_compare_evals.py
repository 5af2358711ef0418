# test_compare_evals.py: uform_eval --placements and scripts/compare_evals.py. The placements a
# report lists give back, metric by metric and language by language, the means the same report
# prints (so they are each query's, in pair order); the paired interval finds a small consistent
# gain that an unpaired bootstrap of the same queries (the planted control) cannot tell from noise;
# the sign test's p is the binomial tail counted here; bad reports and flags are refused by name.

import importlib.util
import json
import math
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from conftest import BUILD

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "compare_evals.py"
spec = importlib.util.spec_from_file_location("compare_evals", SCRIPT)
compare = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare)

WORDS = ["river", "mountain", "window", "garden", "kitchen", "letter", "market", "silver", "winter", "bridge",
         "castle", "forest", "island", "lantern", "meadow", "orchard", "pepper", "rabbit", "saddle", "thunder"]


def evaluator():
    path = pathlib.Path(os.environ.get("UFORM_EVAL", BUILD / "uform_eval"))
    if not path.exists():
        pytest.fail(f"{path} is missing: build uform_eval or point UFORM_EVAL at it", pytrace=False)
    return path


def report_of(tmp_path, records, name, *extra):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps(record) + "\n" for record in records))
    target = tmp_path / name
    result = subprocess.run([str(evaluator()), "--pairs", str(pairs), "--json", str(target), "--quiet", *extra],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return target


def records():
    """Queries that TF-IDF places at every rank, ties among equal candidates too, in two languages."""
    out = []
    for i, word in enumerate(WORDS):
        other = WORDS[(i * 7 + 3) % len(WORDS)]
        out.append({"query": f"{word} {other}", "positives": [f"the {other} by the {word}" if i % 3 else f"a {other}"],
                    "lang": "de" if i % 2 else "fr"})
    out.append({"query": "same", "positives": ["identical text"], "lang": "fr"})
    out.append({"query": "same", "positives": ["identical text"], "lang": "de"})  # equal texts: one gold item
    return out


def expected(placement, metric):
    """A metric at a placement from its definition: the mean over the tied orders of the gold's rank."""
    better, tied = placement
    ranks = [better + 1 + k for k in range(tied + 1)]
    if metric == "mrr":
        return sum(1 / rank for rank in ranks) / len(ranks)
    cutoff = int(metric.split("@")[1])
    return sum(rank <= cutoff for rank in ranks) / len(ranks)


def test_placements_give_back_the_reported_means_per_language(tmp_path):
    path = report_of(tmp_path, records(), "tfidf.json", "--placements")
    report = json.loads(path.read_text())
    languages = [record["lang"] for record in records()]
    checked = 0
    for row in report["rows"]:
        if row["language"] != "all":
            continue
        if row["direction"] == "both":
            assert "placements" not in row  # chance has no placements
            continue
        placements = row["placements"]
        assert len(placements) == report["count"] == len(languages)
        assert any(tied for _, tied in placements) and any(better for better, _ in placements)
        for metric in compare.METRICS:
            ours = [expected(placement, metric) for placement in placements]
            assert math.isclose(np.mean(ours), row[metric], abs_tol=1e-6), metric
            assert np.allclose(compare.per_query(placements, metric), ours)
            for language in ("de", "fr"):
                per_language = [entry for entry in report["rows"] if entry["language"] == language and
                                entry["method"] == row["method"] and entry["direction"] == row["direction"]]
                chosen = [value for value, lang in zip(ours, languages) if lang == language]
                assert math.isclose(np.mean(chosen), per_language[0][metric], abs_tol=1e-6), (metric, language)
                checked += 1
    assert checked == 2 * len(compare.METRICS) * 2
    # A planted control: the same check against placements out of pair order must fail somewhere.
    row = next(entry for entry in report["rows"] if entry["language"] == "all" and entry["direction"] == "query->positive")
    shuffled = row["placements"][1:] + row["placements"][:1]
    mismatches = 0
    for metric in compare.METRICS:
        for language in ("de", "fr"):
            chosen = [expected(placement, metric) for placement, lang in zip(shuffled, languages) if lang == language]
            reported = next(entry[metric] for entry in report["rows"] if entry["language"] == language and
                            entry["method"] == "tfidf" and entry["direction"] == "query->positive")
            mismatches += not math.isclose(np.mean(chosen), reported, abs_tol=1e-6)
    assert mismatches, "placements out of pair order must not pass the per-language check"


def unpaired_interval(a, b, resamples=10000, seed=0):
    """The planted control: A and B resampled apart, as if two runs had been scored on different queries."""
    rng = np.random.default_rng(seed)
    n = len(a)
    means = [b[rng.integers(0, n, n)].mean() - a[rng.integers(0, n, n)].mean() for _ in range(resamples)]
    return float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def test_the_paired_interval_sees_a_consistent_small_gain_that_an_unpaired_one_cannot():
    rng = np.random.default_rng(1)
    a = (rng.random(2000) < 0.4).astype(float)
    b = a.copy()
    b[np.flatnonzero(a == 0)[:24]] = 1.0  # B finds 24 more golds (+0.012) and loses none
    low, high = compare.paired_interval(a, b, resamples=4000)
    assert 0 < low < 0.012 < high < 0.02
    control_low, control_high = unpaired_interval(a, b, resamples=4000)
    assert not control_low > 0, "an unpaired bootstrap must not find this gain: the check cannot tell them apart"
    assert control_high - control_low > 5 * (high - low)
    same_low, same_high = compare.paired_interval(a, a, resamples=200)
    assert same_low == same_high == 0


def test_the_sign_test_is_the_binomial_tail():
    a = np.zeros(12)
    b = np.zeros(12)
    b[:9], a[9] = 1, 1  # B higher on 9 queries, A on 1, two the same
    higher, lower, p = compare.sign_test(a, b)
    assert (higher, lower) == (9, 1)
    assert math.isclose(p, 2 * (1 + 10) / 2 ** 10)  # P(X <= 1) + P(X >= 9) of Binomial(10, 1/2)
    assert compare.sign_test(a, a) == (0, 0, 1.0)
    assert compare.sign_test(np.zeros(3), np.array([1.0, 0, 0]))[2] == 1.0  # capped at 1


def test_compare_reads_two_reports_and_refuses_bad_ones(tmp_path):
    base = records()
    first = report_of(tmp_path, base, "a.json", "--placements")
    out = tmp_path / "compared.json"
    result = subprocess.run([sys.executable, str(SCRIPT), str(first), str(first), "--a", "tfidf", "--json", str(out),
                             "--resamples", "500"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    compared = json.loads(out.read_text())["comparisons"]
    assert [entry["direction"] for entry in compared] == ["query->positive", "positive->query"]
    assert all(entry["difference"] == 0 and entry["reading"] == "within noise" for entry in compared)

    without = report_of(tmp_path, base, "plain.json")
    result = subprocess.run([sys.executable, str(SCRIPT), str(first), str(without)], capture_output=True, text=True)
    assert result.returncode != 0 and "--placements" in result.stderr and "plain.json" in result.stderr

    other = report_of(tmp_path, base[:-3], "other.json", "--placements")
    result = subprocess.run([sys.executable, str(SCRIPT), str(first), str(other)], capture_output=True, text=True)
    assert result.returncode != 0 and "same pairs" in result.stderr

    broken = tmp_path / "broken.json"
    broken.write_text("{\"rows\": [")
    result = subprocess.run([sys.executable, str(SCRIPT), str(broken), str(first)], capture_output=True, text=True)
    assert result.returncode != 0 and "broken.json" in result.stderr

    report = json.loads(first.read_text())
    next(row for row in report["rows"] if "placements" in row)["placements"][3] = [-1, 0]
    (tmp_path / "negative.json").write_text(json.dumps(report))
    result = subprocess.run([sys.executable, str(SCRIPT), str(first), str(tmp_path / "negative.json")], capture_output=True, text=True)
    assert result.returncode != 0 and "not [better, tied]" in result.stderr and "negative.json" in result.stderr

    result = subprocess.run([sys.executable, str(SCRIPT), str(first), str(first), "--a", "model@384"],
                            capture_output=True, text=True)
    assert result.returncode != 0 and "no model@384 row" in result.stderr

    result = subprocess.run([str(evaluator()), "--pairs", str(tmp_path / "pairs.jsonl"), "--placements"],
                            capture_output=True, text=True)
    assert result.returncode == 2 and "--placements needs --json" in result.stderr
