#!/usr/bin/env python3
"""WordLlama, a pretrained static-embedding peer, scored on pair files exactly as uform_eval scores
a checkpoint (docs/evaluation.md): each query ranks every pair's first positive (query->positive)
and each positive ranks every query (positive->query); candidates with equal texts are one item,
counted once at the best of their scores (a copy of the gold is the gold, a rival's copies are one
rival); ties count at their exact expectation; Recall@1/5/10, MRR and nDCG@10, overall and per
language (queries with that "lang", ranked against all pairs). The metrics are numpy here;
test/python/test_wordllama_eval.py checks them against uform_eval's rows.

    pip install wordllama      # the wheel carries the 256-d l2_supercat weights and tokenizer
    python3 bench/wordllama_eval.py --pairs FILE [--pairs FILE ...] [--limit N] [--json OUT]
                                    [--uform-eval build/uform_eval] [--dims 64,128,256]

The model loads with disable_download=True (no network). The wheel keeps its tokenizer under
wordllama/tokenizers/ while the loader's first guess is wordllama/tokenizer/; its second guess is
CACHE/tokenizers/ beside CACHE/weights/, so cache_dir is the package folder itself and nothing is
linked or downloaded. Widths: the 256-d embedding and its Matryoshka prefixes (the library's
trunc_dim), each renormalized, as uform_eval's widths. A file holding images is skipped with a
message. With --uform-eval, `uform_eval --pairs FILE --json TMP` (no checkpoint) adds its chance
and TF-IDF rows beside. --json OUT: {"model": ..., "reports": [one per file in uform_eval's report
shape: pairs, count, languages, chance, rows, plus seconds]}; each row is uform_eval's
{"method", "output_precision", "width", "direction", "language", "queries", metrics}.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

DIRECTIONS = ("query->positive", "positive->query")
METRICS = ("recall@1", "recall@5", "recall@10", "mrr", "ndcg@10")
CUTOFFS = (1, 5, 10)


# ---- pair files, read as uform_eval reads them -------------------------------------------------

def _is_image(side):
    return isinstance(side, dict)


def read_pairs(path, limit=0):
    """(queries, positives, langs, images): the first `limit` pair records (all when 0); `images`
    counts image sides ({"image": PATH}). A text record or malformed line is an error naming the line."""
    queries, positives, langs, images = [], [], [], 0
    with open(path, encoding="utf-8") as file:
        for number, line in enumerate(file, 1):
            if limit and len(queries) >= limit:
                break
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}:{number}: not JSON: {error}") from None
            if not isinstance(record, dict) or "query" not in record:
                raise ValueError(f"{path}:{number}: not a pair record {{\"query\": ..., \"positives\": [...]}}")
            query, found = record["query"], record.get("positives")
            if not isinstance(found, list) or not found:
                raise ValueError(f"{path}:{number}: 'positives' must be an array of at least one string")
            positive = found[0]
            for side in (query, positive):
                if _is_image(side):
                    images += 1
                elif not isinstance(side, str) or not side:
                    raise ValueError(f"{path}:{number}: a side must be a non-empty string or {{\"image\": PATH}}")
            lang = record.get("lang")
            if lang is not None and (not isinstance(lang, str) or not lang):
                raise ValueError(f"{path}:{number}: 'lang' must be a non-empty string")
            queries.append(query), positives.append(positive), langs.append(lang or "")
    if len(queries) < 2:
        raise ValueError(f"{path} has {len(queries)} pairs; at least 2 are needed to rank anything")
    return queries, positives, langs, images


def text_groups(texts):
    """Equal texts share one id: they are one item, counted once (placements)."""
    ids = {}
    return np.array([ids.setdefault(text, len(ids)) for text in texts], dtype=np.int64)


# ---- placements and metrics (src/eval/metrics.c) -----------------------------------------------

def placements(rows, columns, groups, duplicates=True, ties="expected", block=512):
    """Each row i's gold (column i) among all columns, scored by the dot product of unit rows in
    float32, as uform_eval scores: (better, tied) counts of rival items. `groups` are the columns'
    text ids; with `duplicates` equal texts are one item at the best of their scores (the gold's
    copies and a rival's alike). NaN counts as minus infinity. ties="index" is a planted control:
    tied rival items whose first column comes before the gold's count as better and none as tied (a
    stable sort's order)."""
    rows, columns = np.asarray(rows, np.float32), np.asarray(columns, np.float32)
    count = len(rows)
    groups = np.asarray(groups) if duplicates else np.arange(count)
    _, item_of = np.unique(groups, return_inverse=True)
    order = np.argsort(item_of, kind="stable")  # columns item by item, each item's in index order
    starts = np.flatnonzero(np.r_[True, np.diff(item_of[order]) != 0])
    first_column = order[starts]
    better, tied = np.zeros(count, np.int64), np.zeros(count, np.int64)

    def one_block(first):
        last = min(first + block, count)
        scores = rows[first:last] @ columns.T
        if np.isnan(scores).any():
            scores[np.isnan(scores)] = -np.inf
        best = np.maximum.reduceat(scores[:, order], starts, axis=1)  # [rows, items]
        local, mine = np.arange(last - first), item_of[first:last]
        gold = best[local, mine]
        level = best == gold[:, None]
        level[local, mine] = False  # the gold's own item is no rival
        above = best > gold[:, None]
        if ties == "index":
            better[first:last] = (above | (level & (first_column[None, :] < np.arange(first, last)[:, None]))).sum(axis=1)
            return
        better[first:last], tied[first:last] = above.sum(axis=1), level.sum(axis=1)

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        list(pool.map(one_block, range(0, count, block)))
    return better, tied


def _harmonic(upto):
    return np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, upto + 1, dtype=np.float64))])


def per_query_metrics(better, tied):
    """Each metric's exact expectation for a gold at a rank uniform on better+1 .. better+tied+1."""
    better, tied = np.asarray(better, np.int64), np.asarray(tied, np.int64)
    choices, last = tied + 1.0, better + tied + 1
    out = {}
    for cutoff in CUTOFFS:
        out[f"recall@{cutoff}"] = np.clip(np.minimum(last, cutoff) - better, 0, None) / choices
    harmonic = _harmonic(int(last.max()))
    out["mrr"] = (harmonic[last] - harmonic[better]) / choices
    gains = np.concatenate([[0.0], np.cumsum(1.0 / np.log2(np.arange(2, 12, dtype=np.float64)))])  # ranks 1..10
    out["ndcg@10"] = (gains[np.minimum(last, 10)] - gains[np.minimum(better, 10)]) / choices
    return out


def language_order(langs):
    """Languages in byte order, records without one as "" (shown "-"), as uform_eval lists them."""
    return sorted(set(langs), key=lambda lang: lang.encode())


def metric_rows(placement, langs, method, width, direction, output_precision="float32"):
    """uform_eval's rows of one placement: overall, then per language when there are several."""
    values = per_query_metrics(*placement)
    langs = np.array(langs, dtype=object)
    codes = language_order(list(langs))
    selections = [("all", np.ones(len(langs), bool))]
    if len(codes) > 1:
        selections += [(code or "-", langs == code) for code in codes]
    rows = []
    for language, chosen in selections:
        row = {"method": method, "output_precision": output_precision, "width": width, "direction": direction,
               "language": language, "queries": int(chosen.sum())}
        row.update({key: float(values[key][chosen].mean()) for key in METRICS})
        rows.append(row)
    return rows


def unit_prefix(matrix, width):
    """The first `width` values of each row, renormalized (a Matryoshka prefix)."""
    cut = np.asarray(matrix, np.float64)[:, :width]
    norms = np.linalg.norm(cut, axis=1, keepdims=True)
    return np.divide(cut, norms, out=np.zeros_like(cut), where=norms > 0)


def score_embeddings(query_vectors, positive_vectors, queries, positives, langs, widths, method, **plant):
    """Both directions at each width: the rows uform_eval writes for a model (`plant`: placements' controls)."""
    groups = {DIRECTIONS[0]: text_groups(positives), DIRECTIONS[1]: text_groups(queries)}
    rows = []
    for width in widths:
        sides = unit_prefix(query_vectors, width), unit_prefix(positive_vectors, width)
        for direction, (left, right) in zip(DIRECTIONS, (sides, sides[::-1])):
            rows += metric_rows(placements(left, right, groups[direction], **plant), langs, method, width, direction)
    return rows


# ---- WordLlama ---------------------------------------------------------------------------------

def load_wordllama(trunc_dim=None):
    """The wheel's 256-d l2_supercat model, offline (see the module's note on cache_dir)."""
    import wordllama
    package = pathlib.Path(wordllama.__file__).resolve().parent
    return wordllama.WordLlama.load(config="l2_supercat", dim=256, trunc_dim=trunc_dim, cache_dir=package,
                                    disable_download=True)


def embed(model, texts, batch=256):
    """Unnormalized mean-pooled embeddings in input order; texts batched by length (less padding)."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = np.empty((len(texts), model.embedding.shape[1]), np.float32)
    for first in range(0, len(order), batch):
        chosen = order[first:first + batch]
        out[chosen] = model.embed([texts[i] for i in chosen], norm=False, batch_size=batch)
    return out


# ---- reporting ---------------------------------------------------------------------------------

def baselines(uform_eval, path, limit):
    """uform_eval's chance and TF-IDF rows (no checkpoint), or None when it fails."""
    with tempfile.TemporaryDirectory() as folder:
        report = pathlib.Path(folder) / "baselines.json"
        command = [str(uform_eval), "--pairs", str(path), "--json", str(report), "--quiet"]
        if limit:
            command += ["--limit", str(limit)]
        started = time.perf_counter()
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            print(f"wordllama_eval: {' '.join(command)} failed: {result.stderr.strip()}", file=sys.stderr)
            return None, 0.0
        return json.loads(report.read_text()), time.perf_counter() - started


def print_table(path, count, rows, seconds):
    print(f"\n{path}: {count} pairs ({', '.join(f'{key} {value:.2f} s' for key, value in seconds.items())})\n")
    print("| method | width | direction | R@1 | R@5 | R@10 | MRR | nDCG@10 |\n|---|---|---|---|---|---|---|---|")
    for row in rows:
        if row["language"] != "all":
            continue
        width = row["width"] if row["width"] is not None else "-"
        print(f"| {row['method']} | {width} | {row['direction']} | " +
              " | ".join(f"{row[key]:.4f}" for key in METRICS) + " |")


def evaluate_file(path, limit, dims, models, uform_eval):
    queries, positives, langs, images = read_pairs(path, limit)
    if images:
        print(f"wordllama_eval: {path} holds {images} images; WordLlama embeds text only: skipped", file=sys.stderr)
        return {"pairs": str(path), "skipped": f"{images} images"}
    seconds = {}
    started = time.perf_counter()
    full = models[max(dims)]
    query_vectors, positive_vectors = embed(full, queries), embed(full, positives)
    seconds["embed"] = time.perf_counter() - started
    started = time.perf_counter()
    rows = score_embeddings(query_vectors, positive_vectors, queries, positives, langs, dims, "wordllama")
    seconds["rank"] = time.perf_counter() - started
    report = {"checkpoint": None, "model": "wordllama l2_supercat 256", "pairs": str(path), "count": len(queries),
              "languages": {code or "-": langs.count(code) for code in language_order(langs)}, "chance": None}
    if uform_eval:
        found, seconds["uform_eval baselines"] = baselines(uform_eval, path, limit)
        if found:
            assert found["count"] == len(queries), (found["count"], len(queries))
            report["chance"] = found["chance"]
            report["tfidf"] = found["tfidf"]
            rows = [row for row in found["rows"] if row["method"] in ("chance", "tfidf")] + rows
    report["seconds"], report["rows"] = seconds, rows
    print_table(path, len(queries), rows, seconds)
    return report


def main(argv=None):
    parser = argparse.ArgumentParser(description="WordLlama scored on pair files as uform_eval scores a checkpoint")
    parser.add_argument("--pairs", action="append", required=True, help="a JSONL pair file (repeatable)")
    parser.add_argument("--limit", type=int, default=0, help="the first N pairs of each file (N >= 2)")
    parser.add_argument("--json", help="write every row of every file here")
    parser.add_argument("--uform-eval", help="uform_eval binary: its chance and TF-IDF rows go beside")
    parser.add_argument("--dims", default="64,128,256", help="Matryoshka widths, each <= 256 (default 64,128,256)")
    arguments = parser.parse_args(argv)
    if arguments.limit and arguments.limit < 2:
        parser.error("--limit wants N >= 2")
    dims = sorted({int(value) for value in arguments.dims.split(",")})
    started = time.perf_counter()
    # The library's own truncation (trunc_dim) for the widest width; narrower widths are its
    # prefixes renormalized, which trunc_dim gives too (mean pooling acts per dimension; the test checks).
    models = {max(dims): load_wordllama(None if max(dims) == 256 else max(dims))}
    loaded = time.perf_counter() - started
    print(f"wordllama_eval: model loaded in {loaded:.2f} s (vocabulary {models[max(dims)].embedding.shape[0]}, "
          f"widths {dims})", file=sys.stderr)
    reports = []
    for path in arguments.pairs:
        try:
            reports.append(evaluate_file(path, arguments.limit, dims, models, arguments.uform_eval))
        except (OSError, ValueError) as error:
            sys.exit(f"wordllama_eval: {error}")
    if arguments.json:
        out = {"model": {"name": "wordllama", "config": "l2_supercat", "dim": 256, "widths": dims,
                         "load_seconds": loaded}, "reports": reports}
        pathlib.Path(arguments.json).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(arguments.json).write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
    main()
