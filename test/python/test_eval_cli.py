# test_eval_cli.py: uform_eval end to end on pair files written here. The baselines find the
# obvious answers; a duplicate of the gold text counts as a hit, and a rival's copies count once;
# per-language rows add up to the
# whole; the model rows and the MaxSim rows match rankings recomputed here from uform_encode and
# uform_rerank (through ctypes) with an independent implementation of the metrics; reranking the
# top K leaves Recall@K alone; malformed inputs and flags fail with a message naming the problem.
# The binary is $UFORM_EVAL when set (a build outside CMake), else uform_eval of the build.

import json
import math
import os
import pathlib
import subprocess

import numpy as np
import pytest

from conftest import BUILD


@pytest.fixture(scope="module")
def evaluator():
    path = pathlib.Path(os.environ.get("UFORM_EVAL", BUILD / "uform_eval"))
    if not path.exists():
        pytest.fail(f"{path} is missing: build uform_eval or point UFORM_EVAL at it", pytrace=False)
    return path


def run(evaluator, *arguments, check=True):
    result = subprocess.run([str(evaluator), *map(str, arguments)], capture_output=True, text=True, timeout=300)
    if check:
        assert result.returncode == 0, result.stderr
    return result


def write_pairs(path, records):
    with open(path, "w", encoding="utf-8") as file:
        for record in records:
            file.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path


def evaluate(evaluator, tmp_path, records, *arguments):
    pairs = write_pairs(tmp_path / "pairs.jsonl", records)
    report = tmp_path / "report.json"
    run(evaluator, *arguments, "--pairs", pairs, "--json", report, "--quiet")
    return json.loads(report.read_text())


def row(report, method, direction, width=None, language="all"):
    found = [entry for entry in report["rows"] if entry["method"] == method and entry["direction"] == direction and
             entry["width"] == width and entry["language"] == language]
    assert len(found) == 1, (method, direction, width, language)
    return found[0]


def expected_metrics(scores, gold, groups):
    """Recall@1/5/10, MRR, nDCG@10 of one query: equal texts share an id and are one item, counted
    once at its best score (the gold's copies and a rival's alike), ties averaged."""
    best = {}
    for score, group in zip(scores, groups):
        best[group] = max(best.get(group, -math.inf), score)
    gold_score = best[groups[gold]]
    better = sum(1 for group, score in best.items() if group != groups[gold] and score > gold_score)
    tied = sum(1 for group, score in best.items() if group != groups[gold] and score == gold_score)
    ranks = range(better + 1, better + tied + 2)
    mean = lambda values: sum(values) / len(ranks)  # noqa: E731
    return {"recall@1": mean([rank <= 1 for rank in ranks]), "recall@5": mean([rank <= 5 for rank in ranks]),
            "recall@10": mean([rank <= 10 for rank in ranks]), "mrr": mean([1 / rank for rank in ranks]),
            "ndcg@10": mean([1 / math.log2(rank + 1) if rank <= 10 else 0 for rank in ranks])}


def averaged(per_query):
    return {key: sum(metrics[key] for metrics in per_query) / len(per_query) for key in per_query[0]}


def text_ids(texts):
    ids = {}
    return [ids.setdefault(text, len(ids)) for text in texts]


TOPICS = ["the quick brown fox jumps over the lazy dog", "lorem ipsum dolor sit amet consectetur",
          "a tokenizer free byte level encoder", "matryoshka embeddings at many widths",
          "debian packages unpacked without installing", "recall at one against the width of embeddings",
          "character trigrams hashed into buckets", "gettext catalogues hold human translations"]


def test_baselines_find_the_obvious(evaluator, tmp_path):
    records = [{"query": topic, "positives": [topic.replace(" ", "  ") + "!"]} for topic in TOPICS]
    report = evaluate(evaluator, tmp_path, records)
    assert report["checkpoint"] is None and report["count"] == len(TOPICS) and not report["widths"]
    chance = row(report, "chance", "both")
    assert chance["recall@1"] == pytest.approx(1 / len(TOPICS)) and chance["recall@10"] == 1
    for direction in ("query->positive", "positive->query"):
        tfidf = row(report, "tfidf", direction)
        assert tfidf["recall@1"] == 1 and tfidf["mrr"] == 1 and tfidf["queries"] == len(TOPICS)


def test_duplicate_gold_is_a_hit(evaluator, tmp_path):
    # Two queries share one answer text: either copy retrieved is a hit, so neither loses half.
    records = [{"query": "red apple pie", "positives": ["red apple pie recipe"]},
               {"query": "red apple pie!", "positives": ["red apple pie recipe"]},
               *({"query": topic, "positives": [topic + " indeed"]} for topic in TOPICS)]
    report = evaluate(evaluator, tmp_path, records)
    assert row(report, "tfidf", "query->positive")["recall@1"] == 1


def test_rival_copies_count_once(evaluator, tmp_path):
    # "red apple tart" is the answer of three records: for the query that wants "red apple pie
    # recipe" it is one rival item ahead of the gold (rank 2, MRR 1/2), not three (rank 4, 1/4).
    records = [{"query": "red apple tart", "positives": ["red apple pie recipe"], "lang": "xx"},
               *({"query": f"unrelated query number {index}", "positives": ["red apple tart"]} for index in range(3)),
               *({"query": topic, "positives": [topic + " indeed"]} for topic in TOPICS)]
    report = evaluate(evaluator, tmp_path, records)
    wanted = row(report, "tfidf", "query->positive", language="xx")
    assert wanted["recall@1"] == 0 and wanted["mrr"] == pytest.approx(0.5)
    # Chance is over items too: the query side has no copies, the answers' side two fewer items.
    items = len(TOPICS) + 2
    assert row(report, "chance", "both")["recall@1"] == pytest.approx((1 / (len(TOPICS) + 4) + 1 / items) / 2)


def test_per_language_rows_add_up(evaluator, tmp_path):
    records = [{"query": topic, "positives": [topic[::-1]], **({"lang": ["de", "fr"][index % 2]} if index < 6 else {})}
               for index, topic in enumerate(TOPICS)]
    report = evaluate(evaluator, tmp_path, records)
    assert report["languages"] == {"-": 2, "de": 3, "fr": 3}
    for direction in ("query->positive", "positive->query"):
        whole = row(report, "tfidf", direction)
        parts = [row(report, "tfidf", direction, language=language) for language in ("-", "de", "fr")]
        assert sum(part["queries"] for part in parts) == whole["queries"] == len(TOPICS)
        for key in ("recall@1", "recall@5", "mrr", "ndcg@10"):
            assert sum(part[key] * part["queries"] for part in parts) / len(TOPICS) == pytest.approx(whole[key], abs=1e-5)


def test_model_and_maxsim_rows_match_a_recomputation(evaluator, library, init_model, tmp_path):
    records = [{"query": f"{topic} ({index})", "positives": [f"{topic.upper()} #{index % 5}"]}
               for index, topic in enumerate(TOPICS * 2)]
    records[3]["positives"] = records[2]["positives"]  # a duplicate answer
    queries = [record["query"] for record in records]
    positives = [record["positives"][0] for record in records]
    count = len(records)
    report = evaluate(evaluator, tmp_path, records, init_model, "--rerank", count)
    top10 = evaluate(evaluator, tmp_path, records, init_model, "--rerank", 10)
    with library.open(str(init_model)) as model:
        widths = model.config().widths
        full_queries, _ = model.encode([text.encode() for text in queries])
        full_positives, _ = model.encode([text.encode() for text in positives])
        maxsim = [[model.rerank(row_text.encode(), [text.encode() for text in columns])[0]
                   for row_text in rows] for rows, columns in ((queries, positives), (positives, queries))]
    assert [entry["width"] for entry in report["widths"]] == [width for width in widths for _ in range(2)]
    for width in widths:
        def prefix(matrix):
            cut = matrix[:, :width].astype(np.float64)
            return cut / np.linalg.norm(cut, axis=1, keepdims=True)
        similarity = prefix(full_queries) @ prefix(full_positives).T
        for direction, scores, groups in (("query->positive", similarity, text_ids(positives)),
                                          ("positive->query", similarity.T, text_ids(queries))):
            wanted = averaged([expected_metrics(list(scores[i]), i, groups) for i in range(count)])
            got = row(report, "model", direction, width)
            for key, value in wanted.items():
                assert got[key] == pytest.approx(value, abs=2e-5), (width, direction, key)
            # K = all pairs: the reranked order is MaxSim's over every candidate.
            index = 0 if direction == "query->positive" else 1
            wanted = averaged([expected_metrics(list(maxsim[index][i]), i, groups) for i in range(count)])
            got = row(report, f"model+maxsim@{count}", direction, width)
            for key, value in wanted.items():
                assert got[key] == pytest.approx(value, abs=2e-5), (width, direction, key)
            # Reranking the top 10 reorders them only: whether the gold is among them does not change.
            assert row(top10, "model+maxsim@10", direction, width)["recall@10"] == pytest.approx(
                row(top10, "model", direction, width)["recall@10"], abs=1e-6)


def test_fused_rows_match_a_recomputation(evaluator, library, init_model, tmp_path):
    """--fuse W: with K = all pairs the order is (1 - W) cosine + W symmetric MaxSim over every
    candidate, recomputed here from uform_rerank_symmetric; W = 1 orders as symmetric MaxSim alone; a
    cosine-only recomputation and one with MaxSim from the query's side alone (the controls) disagree
    somewhere, so the MaxSim term is read, from the shorter side. W:L keeps the cosine of a pair whose texts are
    both shorter than L bytes: at L, the texts' median length, its rows differ from both W's and the cosine's."""
    records = [{"query": f"{topic} ({index})", "positives": [f"{topic.upper()} #{index % 5}"]}
               for index, topic in enumerate(TOPICS * 2)]
    queries = [record["query"] for record in records]
    positives = [record["positives"][0] for record in records]
    count, weights = len(records), (0.3, 1.0)
    gate = int(np.median([len(text.encode()) for text in queries + positives]))
    report = evaluate(evaluator, tmp_path, records, init_model, "--rerank", count, "--fuse",
                      ",".join(map(str, weights)) + f",1:{gate}")
    with library.open(str(init_model)) as model:
        columns = model.config().columns
        width = model.config().widths[-1]
        full_queries, _ = model.encode([text.encode() for text in queries])
        full_positives, _ = model.encode([text.encode() for text in positives])
        maxsim = [np.array([model.rerank(row_text.encode(), [text.encode() for text in others])[0] for row_text in rows])
                  for rows, others in ((queries, positives), (positives, queries))]
        symmetric = [np.array([model.rerank_symmetric(row_text.encode(), [text.encode() for text in others])[0]
                               for row_text in rows]) for rows, others in ((queries, positives), (positives, queries))]
    cosine = full_queries.astype(np.float64) @ full_positives.astype(np.float64).T
    disagreements, one_sided_disagreements, gated_apart = 0, 0, {"ungated": 0, "cosine": 0}
    for index, (direction, scores, rows, groups) in enumerate((("query->positive", cosine, queries, text_ids(positives)),
                                                               ("positive->query", cosine.T, positives, text_ids(queries)))):
        cells = np.array([min(len(text.encode()), columns) for text in rows], dtype=np.float64)[:, None]
        others = (positives, queries)[index]
        short = np.array([len(text.encode()) < gate for text in rows])[:, None] & np.array([len(text.encode()) < gate for text in others])[None, :]
        gated = np.where(short, scores, symmetric[index])
        wanted = averaged([expected_metrics(list(gated[i]), i, groups) for i in range(count)])
        got = row(report, f"model+fuse1s{gate}@{count}", direction, width)
        for key, value in wanted.items():
            assert got[key] == pytest.approx(value, abs=2e-5), ("gated", direction, key)
        for control, matrix in (("ungated", symmetric[index]), ("cosine", scores)):
            other = averaged([expected_metrics(list(matrix[i]), i, groups) for i in range(count)])
            gated_apart[control] += any(abs(got[key] - other[key]) > 1e-6 for key in got if key in other)
        for weight in weights:
            fused = (1 - weight) * scores + weight * symmetric[index]
            wanted = averaged([expected_metrics(list(fused[i]), i, groups) for i in range(count)])
            got = row(report, f"model+fuse{weight:g}@{count}", direction, width)
            for key, value in wanted.items():
                assert got[key] == pytest.approx(value, abs=2e-5), (weight, direction, key)
            cosine_only = averaged([expected_metrics(list(scores[i]), i, groups) for i in range(count)])
            disagreements += any(abs(got[key] - cosine_only[key]) > 1e-6 for key in got if key in cosine_only)
            one_sided = (1 - weight) * scores + weight * maxsim[index] / cells
            one_sided = averaged([expected_metrics(list(one_sided[i]), i, groups) for i in range(count)])
            one_sided_disagreements += any(abs(got[key] - one_sided[key]) > 1e-6 for key in got if key in one_sided)
    assert disagreements, "the fused rows equal the cosine's: the MaxSim term is ignored"
    assert one_sided_disagreements, "the fused rows equal MaxSim's from the query's side: the shorter side is not read"
    assert gated_apart["ungated"], "the gated rows equal the ungated fusion's: the gate is ignored"
    assert gated_apart["cosine"], "the gated rows equal the cosine's: the gate takes every pair"
    for bad in ("0", "1.5", "a", "0.1,0.2,0.3,0.4,0.5", "0.5:0", "0.5:-3", "0.5:x", "0.5:"):
        result = run(evaluator, init_model, "--pairs", tmp_path / "pairs.jsonl", "--rerank", 3, "--fuse", bad, check=False)
        assert result.returncode == 2 and "--fuse takes at most 4" in result.stderr, (bad, result.stderr)
    result = run(evaluator, init_model, "--pairs", tmp_path / "pairs.jsonl", "--fuse", "0.5", check=False)
    assert result.returncode == 2 and "--fuse needs --rerank" in result.stderr


def test_per_language_table_matches_the_json(evaluator, init_model, tmp_path):
    """The printed Recall@1 per language, each column both directions, is the JSON's rows of that method at
    the widest width; with --rerank and --fuse, whose rows do not follow each other by direction, too."""
    records = [{"query": f"{topic} ({index})", "positives": [f"{topic.upper()} #{index % 5}"], "lang": ("de", "fr")[index % 2]}
               for index, topic in enumerate(TOPICS * 2)]
    pairs = write_pairs(tmp_path / "pairs.jsonl", records)
    result = run(evaluator, init_model, "--pairs", pairs, "--rerank", 4, "--fuse", "0.3,0.7", "--json", tmp_path / "r.json", "--quiet")
    report = json.loads((tmp_path / "r.json").read_text())
    widest = max(entry["width"] for entry in report["widths"])
    lines = result.stdout[result.stdout.index("Recall@1 per language"):].splitlines()
    header = next(line for line in lines if line.startswith("| lang |"))
    methods = [cell.strip() for cell in header.strip("|").split("|")][2:]
    assert {"model+maxsim@4", "model+fuse0.3@4", "model+fuse0.7@4", "tfidf", "model"} <= set(methods), methods
    checked = 0
    for line in lines:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if cells[0] not in ("de", "fr"):
            continue
        for method, cell in zip(methods, cells[2:]):
            width = None if method == "tfidf" else widest
            wanted = [row(report, method, direction, width, cells[0])["recall@1"] for direction in ("query->positive", "positive->query")]
            assert [float(value) for value in cell.split(" / ")] == pytest.approx(wanted, abs=1e-4), (cells[0], method)
            checked += 1
    assert checked == 2 * len(methods)


def test_progress_and_table(evaluator, init_model, tmp_path):
    pairs = write_pairs(tmp_path / "pairs.jsonl", [{"query": topic, "positives": [topic[::-1]], "lang": "en"} for topic in TOPICS])
    result = run(evaluator, init_model, "--pairs", pairs, "--rerank", 2)
    assert "| method | width | direction | R@1 | R@5 | R@10 | MRR | nDCG@10 |" in result.stdout
    assert "| tfidf | - | query->positive |" in result.stdout and "| model+maxsim@2 |" in result.stdout
    assert f"embedding queries {len(TOPICS)}/{len(TOPICS)}" in result.stderr  # the closing progress line
    assert f"MaxSim top 2 positive->query {len(TOPICS)}/{len(TOPICS)}" in result.stderr
    quiet = run(evaluator, init_model, "--pairs", pairs, "--quiet")
    assert quiet.stderr == ""


@pytest.mark.parametrize("lines, arguments, status, message", [
    (['{"text": "a text record"}'], [], 1, "pairs.jsonl:1: a text record"),
    (['{"query": "a", "positives": ["b"]}', '{"query": "c", "positives": '], [], 1, "pairs.jsonl:2"),
    (['{"query": "a", "positives": ["b"]}'], [], 1, "at least 2"),
    (['{"query": "a", "positives": ["b"]}', '{"query": "c", "positives": ["d"]}'], ["--limit", "abc"], 2, "--limit wants"),
    (['{"query": "a", "positives": ["b"]}', '{"query": "c", "positives": ["d"]}'], ["--limit", "1"], 2, ">= 2"),
    (['{"query": "a", "positives": ["b"]}', '{"query": "c", "positives": ["d"]}'], ["--rerank", "0"], 2, "--rerank wants"),
    (['{"query": "a", "positives": ["b"]}', '{"query": "c", "positives": ["d"]}'], ["--rerank", "3"], 2, "needs a CHECKPOINT"),
    (['{"query": "a", "positives": ["b"]}', '{"query": "c", "positives": ["d"]}'], ["--no-tfidf"], 2, "nothing to evaluate"),
    (['{"query": "a", "positives": ["b"]}', '{"query": "c", "positives": ["d"]}'], ["--bogus"], 2, "unexpected argument '--bogus'"),
    (['{"query": "a", "positives": ["b"]}', '{"query": "c", "positives": ["d"]}'], ["--threads"], 2, "missing value"),
])
def test_malformed_inputs(evaluator, tmp_path, lines, arguments, status, message):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("\n".join(lines) + "\n")
    result = run(evaluator, "--pairs", pairs, *arguments, check=False)
    assert result.returncode == status and message in result.stderr, (result.returncode, result.stderr)


def test_missing_files(evaluator, init_model, tmp_path):
    result = run(evaluator, "--pairs", tmp_path / "absent.jsonl", check=False)
    assert result.returncode == 1 and "absent.jsonl" in result.stderr
    pairs = write_pairs(tmp_path / "pairs.jsonl", [{"query": topic, "positives": [topic]} for topic in TOPICS[:2]])
    result = run(evaluator, tmp_path / "no-checkpoint", "--pairs", pairs, check=False)
    assert result.returncode == 1 and "no-checkpoint" in result.stderr
    result = run(evaluator, init_model, "--pairs", pairs, "--json", tmp_path / "absent" / "report.json", check=False)
    assert result.returncode == 1 and "cannot write" in result.stderr
    result = run(evaluator, "--pairs", check=False)
    assert result.returncode == 2


def test_device_flag(evaluator, init_model, tmp_path):
    from cuda_env import cuda_build, gpu_present

    pairs = write_pairs(tmp_path / "pairs.jsonl", [{"query": topic, "positives": [topic[::-1]]} for topic in TOPICS])
    result = run(evaluator, init_model, "--pairs", pairs, "--device", "gpu", check=False)
    assert result.returncode == 2 and "--device is cpu or cuda, not 'gpu'" in result.stderr
    if not (cuda_build(BUILD) and gpu_present()):
        result = run(evaluator, init_model, "--pairs", pairs, "--device", "cuda", check=False)
        assert result.returncode == 1 and "uform_eval:" in result.stderr, (result.returncode, result.stderr)
        return
    # On the GPU the model embeds in BF16 as on the CPU: rankings of these few pairs agree within a rank's worth.
    cpu = evaluate(evaluator, tmp_path, [{"query": t, "positives": [t[::-1]]} for t in TOPICS], init_model, "--no-tfidf")
    gpu = evaluate(evaluator, tmp_path, [{"query": t, "positives": [t[::-1]]} for t in TOPICS], init_model, "--no-tfidf",
                   "--device", "cuda")
    for direction in ("query->positive", "positive->query"):
        width = max(entry["width"] for entry in cpu["rows"] if entry["method"] == "model")
        assert row(gpu, "model", direction, width)["mrr"] == pytest.approx(row(cpu, "model", direction, width)["mrr"],
                                                                           abs=1.0 / len(TOPICS))


def test_reranker_scores_maxsim_from_a_second_checkpoint(evaluator, library, init_model, tmp_path):
    """--reranker DIR: the model rows stay the checkpoint's, the MaxSim rows are DIR's rerank head's
    (K = all pairs: MaxSim's own order, recomputed through ctypes); the same rows without
    --reranker differ, so the flag is not ignored."""
    other = tmp_path / "other"
    subprocess.run([str(evaluator.parent / "uform"), "init", "--tier", "128x2", "--seed", "11", "--output", str(other)],
                   check=True, capture_output=True)
    records = [{"query": f"{topic} ({index})", "positives": [f"{topic.upper()} #{index}"]} for index, topic in enumerate(TOPICS * 2)]
    count = len(records)
    own = evaluate(evaluator, tmp_path, records, init_model, "--rerank", count)
    mixed = evaluate(evaluator, tmp_path, records, init_model, "--rerank", count, "--reranker", other)
    assert mixed["reranker"] == str(other) and own["reranker"] == str(init_model)
    queries = [record["query"] for record in records]
    positives = [record["positives"][0] for record in records]
    with library.open(str(other)) as model:
        maxsim = [model.rerank(query.encode(), [text.encode() for text in positives])[0] for query in queries]
    width = max(entry["width"] for entry in mixed["widths"])
    wanted = averaged([expected_metrics(list(maxsim[i]), i, text_ids(positives)) for i in range(count)])
    got = row(mixed, f"model+maxsim@{count}", "query->positive", width)
    for key, value in wanted.items():
        assert got[key] == pytest.approx(value, abs=2e-5), key
    assert row(mixed, "model", "query->positive", width) == row(own, "model", "query->positive", width)
    differs = [row(mixed, f"model+maxsim@{count}", d, width)["mrr"] != row(own, f"model+maxsim@{count}", d, width)["mrr"]
               for d in ("query->positive", "positive->query")]
    assert any(differs)
    result = run(evaluator, init_model, "--pairs", tmp_path / "pairs.jsonl", "--reranker", other, check=False)
    assert result.returncode == 2 and "--reranker needs --rerank" in result.stderr
    result = run(evaluator, init_model, "--pairs", tmp_path / "pairs.jsonl", "--rerank", 2, "--reranker", tmp_path / "absent", check=False)
    assert result.returncode == 1 and "absent" in result.stderr
