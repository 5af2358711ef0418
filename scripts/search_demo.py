#!/usr/bin/env python3
"""search_demo.py: the README's main job. Embeds the small real corpus of demo/ (held-out pairs in
21 languages, descriptions, code, WordNet, emoji and flag pictures; scripts/data/demo_corpus.py)
with the shipped model, searches it with a few of its queries and prints their top results, then
scores every query: Recall@1 and @10 at each Matryoshka width (uform_eval's metrics) beside TF-IDF
(texts, uform_eval's baseline) and chance (pictures).

    python3 scripts/search_demo.py [--model models/default] [--build build] [--corpus demo] [--queries 6] [--threads N]
"""

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from wordllama_eval import score_embeddings  # noqa: E402  uform_eval's metrics in numpy, tested equal to its rows


def embed(build, model, records, threads, folder):
    """[n, width] float32 of `uform encode --records` over records ({"text"} or {"image": absolute path})."""
    line = [str(build / "uform"), "encode", "--model", str(model), "--records"] + (["--threads", str(threads)] if threads else [])
    result = subprocess.run(line, input="".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), cwd=folder,
                            capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"search_demo: {' '.join(line)} failed: {result.stderr.strip()[-800:]}")
    return numpy.array([json.loads(row) for row in result.stdout.splitlines() if row.strip()], dtype=numpy.float32)


def show(text, limit=70):
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def tfidf_rows(build, pairs):
    """uform_eval's TF-IDF rows for the text pairs (no checkpoint: the baselines alone, in a moment)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as target:
        line = [str(build / "uform_eval"), "--pairs", str(pairs), "--quiet", "--json", target.name]
        result = subprocess.run(line, cwd=ROOT, capture_output=True, text=True)
        if result.returncode != 0:
            sys.exit(f"search_demo: {' '.join(line)} failed: {result.stderr.strip()[-800:]}")
        return json.loads(pathlib.Path(target.name).read_text())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=str(ROOT / "models" / "default"))
    parser.add_argument("--build", default=str(ROOT / "build"))
    parser.add_argument("--corpus", default=str(ROOT / "demo"))
    parser.add_argument("--queries", type=int, default=6, help="queries shown with their top results (default 6)")
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    build, corpus = pathlib.Path(args.build).resolve(), pathlib.Path(args.corpus).resolve()
    args.model = str(pathlib.Path(args.model).resolve())  # the encoder runs in the corpus folder (its image paths)
    began = time.time()
    pairs = [json.loads(line) for line in (corpus / "pairs.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    images = [json.loads(line) for line in (corpus / "images.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    documents = [{"text": p["positives"][0]} for p in pairs] + [{"image": str((corpus / i["positives"][0]["image"]).resolve())} for i in images]
    labels = [show(p["positives"][0]) for p in pairs] + [f"[picture {pathlib.Path(i['positives'][0]['image']).name}]" for i in images]
    vectors = embed(build, args.model, documents, args.threads, corpus)
    print(f"search_demo: {len(documents)} documents ({len(pairs)} texts, {len(images)} pictures) embedded by {args.model} "
          f"in {time.time() - began:.1f} s\n")
    records = pairs + images
    queries = embed(build, args.model, [{"text": r["query"]} for r in records], args.threads, corpus)
    step = max(1, len(pairs) // max(1, args.queries - 2))
    shown = list(range(0, len(pairs), step))[: max(0, args.queries - 2)] + list(range(len(pairs), len(records)))[:2]
    for index in shown:
        record, scores = records[index], vectors @ queries[index]
        print(f"query ({record.get('corpus')}, {record.get('lang')}): {show(record['query'])}")
        for rank, column in enumerate(numpy.argsort(-scores)[:3], 1):
            print(f"  {rank}.{'*' if column == index else ' '} {scores[column]:.3f}  {labels[column]}")
    print("\n(* the held-out answer)\n")
    info = json.loads(subprocess.run([str(build / "uform"), "info", "--model", str(args.model)], capture_output=True,
                                     text=True, check=True).stdout)
    widths = info["embedding_widths"]
    print(f"Recall (query -> positive), {len(pairs)} text pairs and {len(images)} caption -> picture pairs, "
          "each query ranking every candidate of its set:\n")
    print("| set | method | width | R@1 | R@10 |\n|---|---|---|---|---|")
    baseline = tfidf_rows(build, corpus / "pairs.jsonl")
    tfidf = next(r for r in baseline["rows"] if r["method"] == "tfidf" and r["language"] == "all" and r["direction"] == "query->positive")
    print(f"| texts | TF-IDF | - | {tfidf['recall@1']:.3f} | {tfidf['recall@10']:.3f} |")
    for name, part in (("texts", slice(0, len(pairs))), ("pictures", slice(len(pairs), len(records)))):
        chosen = records[part]
        if name == "pictures":
            print(f"| pictures | chance | - | {1 / len(chosen):.3f} | {min(1, 10 / len(chosen)):.3f} |")
        sides = [str(r["positives"][0]) for r in chosen]
        rows = score_embeddings(queries[part], vectors[part], [r["query"] for r in chosen], sides,
                                [r.get("lang", "-") for r in chosen], widths, "model")
        for width in widths:
            row = next(r for r in rows if r["width"] == width and r["language"] == "all" and r["direction"] == "query->positive")
            print(f"| {name} | uform | {width} | {row['recall@1']:.3f} | {row['recall@10']:.3f} |")
    print(f"\nsearch_demo: done in {time.time() - began:.1f} s")


if __name__ == "__main__":
    main()
