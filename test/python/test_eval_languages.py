# test_eval_languages.py: scripts/eval_languages.py scores each language with its own pairs as the
# only candidates. On a file where every English query is paired in two languages: each language's
# file holds that language's records alone (records without "lang" left out, the spread cut to
# --per-language; a language of one pair left out); its rows equal uform_eval's on a single-language file the test writes itself;
# and the control: uform_eval's own per-language rows over the whole file (the other language's
# translations as rivals) differ, so a split that leaked the other language would be caught.
# The issue-16 bar is checked on values whose verdict is known. With --rerank and --fuse, the fused
# column equals uform_eval's fused rows on a single-language file.

import importlib.util
import json
import subprocess

import pytest

from conftest import HERE, built

SCRIPT = HERE.parent.parent / "scripts" / "eval_languages.py"
spec = importlib.util.spec_from_file_location("eval_languages", SCRIPT)
eval_languages = importlib.util.module_from_spec(spec)
spec.loader.exec_module(eval_languages)

WORDS = ["river", "stone", "cloud", "ember", "lantern", "harbor", "meadow", "thistle", "copper", "willow", "falcon", "quartz"]


def records():
    """Each English query twice, in de and in fr, with different answers; two records without a language."""
    out = []
    for index, word in enumerate(WORDS):
        out.append({"query": f"the {word} at dawn", "positives": [f"der {word}{index} am Morgen"], "lang": "de"})
        out.append({"query": f"the {word} at dawn", "positives": [f"le {word}{index} du matin"], "lang": "fr"})
    out.append({"query": "no language", "positives": ["keine Sprache"]})
    out.append({"query": "one of its kind", "positives": ["einzig"], "lang": "it"})  # one pair: nothing to rank
    out.append({"query": "still none", "positives": ["immer noch keine"]})
    return out


def write(path, items):
    path.write_text("".join(json.dumps(item, ensure_ascii=False) + "\n" for item in items), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    folder = tmp_path_factory.mktemp("eval_languages")
    checkpoint = folder / "checkpoint"
    subprocess.run([str(built("uform")), "init", "--tier", "64x2", "--seed", "0", "--output", str(checkpoint)],
                   check=True, capture_output=True, timeout=120)
    return {"folder": folder, "pairs": write(folder / "pairs.jsonl", records()), "checkpoint": checkpoint}


def run_script(setup, name, per_language=0):
    target = setup["folder"] / f"{name}.json"
    eval_languages.main(["--pairs", str(setup["pairs"]), "--checkpoint", str(setup["checkpoint"]), "--uform-eval",
                         str(built("uform_eval")), "--per-language", str(per_language), "--json", str(target),
                         "--keep", str(setup["folder"] / name)])
    return json.loads(target.read_text())["languages"]


def uform_eval_r1(setup, pairs, language="all"):
    target = setup["folder"] / f"direct-{pairs.stem}-{language}.json"
    subprocess.run([str(built("uform_eval")), str(setup["checkpoint"]), "--pairs", str(pairs), "--json", str(target), "--quiet"],
                   check=True, capture_output=True, timeout=300)
    report = json.loads(target.read_text())
    widest = max(row["width"] for row in report["rows"] if row["method"] == "model")
    return {(method, direction): row["recall@1"] for row in report["rows"]
            for method, direction in [(row["method"], row["direction"])]
            if row["language"] == language and (method != "model" or row["width"] == widest)}


def test_each_language_alone(setup):
    results = run_script(setup, "whole")
    assert set(results) == {"de", "fr"} and results["de"]["pairs"] == results["fr"]["pairs"] == len(WORDS)
    lines = (setup["folder"] / "whole" / "de.jsonl").read_text().splitlines()
    assert all(json.loads(line)["lang"] == "de" for line in lines)
    direct = uform_eval_r1(setup, write(setup["folder"] / "de-only.jsonl", [r for r in records() if r.get("lang") == "de"]))
    for method in ("tfidf", "model"):
        for direction in eval_languages.DIRECTIONS:
            assert results["de"][method][direction] == pytest.approx(direct[(method, direction)], abs=1e-9)
    # the control: ranked among all pairs, German's queries meet the French answers to the same English
    pooled = uform_eval_r1(setup, setup["pairs"], "de")
    assert pooled[("model", "query->positive")] != pytest.approx(results["de"]["model"]["query->positive"], abs=1e-6)
    assert pooled[("tfidf", "query->positive")] != pytest.approx(results["de"]["tfidf"]["query->positive"], abs=1e-6)


def test_spread_cuts_each_language(setup):
    results = run_script(setup, "cut", per_language=5)
    assert results["de"]["pairs"] == results["fr"]["pairs"] == 5
    kept = [json.loads(line)["query"] for line in (setup["folder"] / "cut" / "fr.jsonl").read_text().splitlines()]
    stride = len(WORDS) / 5
    assert kept == [f"the {WORDS[int(i * stride)]} at dawn" for i in range(5)]  # every k-th, in file order


def test_the_bar():
    assert eval_languages.verdict(0.50, [0.30, 0.10])          # above the better, which is over the floor
    assert not eval_languages.verdict(0.30, [0.30, 0.10])      # a tie is not a win
    assert eval_languages.verdict(0.30, [0.15, 0.10])          # twice the better under the floor
    assert not eval_languages.verdict(0.29, [0.15, 0.10])      # above it, but not twice
    assert eval_languages.verdict(0.25, [0.05, None])          # WordLlama not run


def test_bad_input_is_named(tmp_path):
    pairs = write(tmp_path / "none.jsonl", [{"query": "a", "positives": ["b"]}])
    with pytest.raises(SystemExit, match="no record carries"):
        eval_languages.main(["--pairs", str(pairs), "--uform-eval", str(built("uform_eval"))])
    with pytest.raises(SystemExit, match="missing.jsonl: no such file"):
        eval_languages.main(["--pairs", str(tmp_path / "missing.jsonl")])
    (tmp_path / "broken.jsonl").write_text('{"query": "a", "positives": ["b"], "lang": "de"}\n{"query": \n')
    with pytest.raises(SystemExit, match="broken.jsonl:2: not a JSON object"):
        eval_languages.main(["--pairs", str(tmp_path / "broken.jsonl")])


def test_fused_column_is_uform_evals_fusion(setup):
    target = setup["folder"] / "fused.json"
    eval_languages.main(["--pairs", str(setup["pairs"]), "--checkpoint", str(setup["checkpoint"]), "--uform-eval",
                         str(built("uform_eval")), "--json", str(target), "--rerank", "5", "--fuse", "0.5000"])
    results = json.loads(target.read_text())["languages"]
    report = setup["folder"] / "direct-fused.json"
    subprocess.run([str(built("uform_eval")), str(setup["checkpoint"]), "--pairs", str(write(setup["folder"] / "fr-only.jsonl",
                    [r for r in records() if r.get("lang") == "fr"])), "--rerank", "5", "--fuse", "0.5", "--json", str(report), "--quiet"],
                   check=True, capture_output=True, timeout=300)
    rows = json.loads(report.read_text())["rows"]
    for direction in eval_languages.DIRECTIONS:  # a fused row named unlike uform_eval's would read None here
        assert isinstance(results["fr"]["fused"][direction], float)
        assert results["fr"]["fused"][direction] == pytest.approx(eval_languages.r1({"rows": rows}, "model+fuse0.5@5", direction), abs=1e-9)
    lines, _ = eval_languages.table(results, True)
    assert lines[0].endswith("| fused |") and all(line.count("|") == lines[0].count("|") for line in lines)
    with pytest.raises(SystemExit):
        eval_languages.main(["--pairs", str(setup["pairs"]), "--rerank", "5"])  # no checkpoint to rerank with
