#!/usr/bin/env python3
"""E4M3 with per-tensor scales bounded from the weights (reference.E4m3Bounded, the GPU's
UFORM_CUDA_E4M3=tensor), against row scales, in the float64 reference (test/python/reference.py) on
a checkpoint and held-out pairs: each scheme's embeddings against the Float64 ones (|e - e_f64| of unit vectors) and their query -> positive and back R@1.
Prints a table and writes JSON (default bench/out/e4m3_scales.json). docs/precision.md, "The
scaling scheme, by measurement", derives the bounds:

- qkv's and gate_up's inputs (after a norm of gain g): sqrt(d) max|g|;
- out's input (the attention's output): sqrt(d) max|g| max_k ||W_v,k||;
- down's input (silu(a) b): max(a's bound, 0.28) times b's, each as v's with gate's and up's rows;
- each input's scale its bound / 448, each matrix's max|W| / 448 (`tensor`), or the weights' row
  scales kept (`tensor-input`);
- `tensor + fp8 attention`: attention's products in E4M3 too (reference.e4m3_attention_bounds: q and k
  after rotation, v; the softmax's weights at 448), as an FP8 attention forward would run them;
- `tensor + e4m3 gate_up`: gate_up's output in E4M3 at one scale a block (reference.e4m3_gate_up_bounds),
  as the GPU's UFORM_CUDA_GATE_UP=e4m3 has cuBLASLt write it for SwiGLU to read;
- `tensor + both`: the two above together;
- `tensor-input + e4m3 gate_up`: the weights' row scales, the inputs' bounded ones and gate_up's output in E4M3;
- `tensor + calibrated inputs`: one scale a matrix, each input's scale twice the largest input seen on the first
  50 train records of four corpora (never above its bound), E4M3 saturating past it;
- `tensor + rows into out and down`: bounded scales for qkv's and gate_up's inputs (RMSNorm's rows), a scale per
  row for out's and down's, the weights at one scale a matrix (E4m3Bounded's `rows`, the GPU's UFORM_CUDA_E4M3=mixed).

    python3 bench/e4m3_scales.py [--model models/default] [--pairs data/gettext/test.jsonl:400 ...] [--schemes LABELS]
                                 [--workers N] [--output FILE]
"""
import argparse
import json
import multiprocessing
import pathlib
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "test" / "python"))
import reference as R  # noqa: E402

# label: the reference's bf16_inputs, or the weights' scaling of reference.E4m3Bounded
SCHEMES = {"f64": False, "bf16": True, "e4m3 row (today's)": "e4m3", "e4m3 tensor": "tensor", "e4m3 tensor-input": "row",
           "e4m3 tensor + fp8 attention": "tensor+attention", "e4m3 tensor + e4m3 gate_up": "tensor+gate_up",
           "e4m3 tensor + both": "tensor+gate_up+attention", "e4m3 tensor-input + e4m3 gate_up": "row+gate_up",
           "e4m3 tensor + calibrated inputs": "tensor+calibrated", "e4m3 tensor + rows into out and down": "tensor+rows"}
CALIBRATION = ("cldr", "gettext", "manpages", "descriptions")  # train splits whose first records calibrate the inputs
CALIBRATION_RECORDS, CALIBRATION_MARGIN = 50, 2.0


def embed(model, text, rounding):
    values = np.frombuffer(text.encode()[:1000], dtype=np.uint8).astype(np.int64)
    h = R.encode_segment(model, values, R.text_positions(len(values)), rounding)
    e = R.matryoshka(R.pool_segment(model, h, rounding), model.embedding_widths[-1])
    return e / np.linalg.norm(e)


_SHARED = {}  # the model and rounding a forked worker embeds with (inherited, so the weights' ids still key the codes)


def _embed_shared(text):
    return embed(_SHARED["model"], text, _SHARED["rounding"])


def embed_all(model, texts, rounding, workers):
    """embed() of each text, on `workers` forked processes past 1 (the products' `seen` then stays in them)."""
    if workers <= 1:
        return np.array([embed(model, text, rounding) for text in texts])
    _SHARED.update(model=model, rounding=rounding)
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        return np.array(pool.map(_embed_shared, texts, chunksize=4))


class Recording(R.E4m3Bounded):
    """E4m3Bounded (bounded scales) that records each product's largest |input|, per weight."""

    def __init__(self, model):
        super().__init__(model, "tensor")
        self.largest = {}

    def __call__(self, x, weight):
        self.largest[id(weight)] = max(self.largest.get(id(weight), 0.0), float(np.max(np.abs(x))))
        return super().__call__(x, weight)


def calibrated(model):
    """Bounded scales with each input's bound replaced by CALIBRATION_MARGIN times the largest input seen on
    the first CALIBRATION_RECORDS train records of CALIBRATION (never above the bound; past it, E4M3 saturates)."""
    recording = Recording(model)
    for name in CALIBRATION:
        path = ROOT / "data" / name / "train.jsonl"
        if not path.is_file():
            raise SystemExit(f"e4m3_scales: {path} is missing: build the corpus first (docs/data.md)")
        with open(path, encoding="utf-8") as lines:
            for _, line in zip(range(CALIBRATION_RECORDS), lines):
                record = json.loads(line)
                for text in (record["query"], record["positives"][0]):
                    if isinstance(text, str):
                        embed(model, text, recording)
    products = R.E4m3Bounded(model, "tensor")
    products.bounds = {key: (min(bound, CALIBRATION_MARGIN * recording.largest.get(key, bound)), name)
                       for key, (bound, name) in products.bounds.items()}
    return products


def recall(scores, k):
    """R@k of a square score matrix whose diagonal holds the right answers (ties count against)."""
    right = np.diag(scores)[:, None]
    return float(np.mean(np.sum(scores >= right, axis=1) - 1 < k))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=str(ROOT / "models" / "default"))
    parser.add_argument("--pairs", nargs="+", default=[str(ROOT / "data/gettext/test.jsonl") + ":400",
                                                       str(ROOT / "data/manpages/test.jsonl") + ":253"],
                        help="PATH:COUNT, the first COUNT text pairs of each file")
    parser.add_argument("--schemes", default=None, help="labels to run, comma-separated (Float64 always runs: the others' reference)")
    parser.add_argument("--output", default=str(ROOT / "bench" / "out" / "e4m3_scales.json"))
    parser.add_argument("--workers", type=int, default=1,
                        help="processes embedding the texts (past 1, the largest-input line is left out)")
    args = parser.parse_args()
    model = R.load_model(args.model)
    rows, largest = [], {}
    for spec in args.pairs:
        path, _, count = spec.rpartition(":")
        records = [json.loads(line) for line in open(path, encoding="utf-8")][: int(count)]
        pairs = [(r["query"], r["positives"][0]) for r in records if isinstance(r["query"], str) and isinstance(r["positives"][0], str)]
        reference = None
        for label, scheme in SCHEMES.items():
            if args.schemes and label not in args.schemes.split(",") and label != "f64":
                continue
            if scheme == "tensor+calibrated":
                products = calibrated(model)
            elif scheme == "tensor+rows":
                products = R.E4m3Bounded(model, "tensor", rows=True)  # the GPU's UFORM_CUDA_E4M3=mixed
            else:
                products = (R.E4m3Bounded(model, scheme.split("+")[0], attention="+attention" in scheme, gate_up="+gate_up" in scheme)
                            if isinstance(scheme, str) and scheme.split("+")[0] in ("tensor", "row") else None)
            rounding = products or scheme
            began = time.time()
            q = embed_all(model, [a for a, _ in pairs], rounding, args.workers)
            p = embed_all(model, [b for _, b in pairs], rounding, args.workers)
            reference = reference if reference is not None else (q, p)
            error = np.linalg.norm(np.concatenate([q - reference[0], p - reference[1]]), axis=1)
            row = {"pairs": pathlib.Path(path).parent.name if pathlib.Path(path).name == "test.jsonl" else pathlib.Path(path).stem,
                   "count": len(pairs), "scheme": label,
                   "r1_query_positive": recall(q @ p.T, 1), "r1_positive_query": recall(p @ q.T, 1),
                   "r10_query_positive": recall(q @ p.T, 10), "r10_positive_query": recall(p @ q.T, 10),
                   "error_median": float(np.median(error)), "error_max": float(np.max(error)), "seconds": round(time.time() - began, 1)}
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
            if products:
                for name, share in products.seen.items():
                    largest[name] = max(largest.get(name, 0.0), share)
    print("\n| pairs | scheme | R@1 q -> p | R@1 p -> q | R@10 q -> p | R@10 p -> q | |e - e_f64| median | max |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['pairs']} ({row['count']}) | {row['scheme']} | {row['r1_query_positive']:.4f} | {row['r1_positive_query']:.4f} "
              f"| {row['r10_query_positive']:.4f} | {row['r10_positive_query']:.4f} | {row['error_median']:.4f} | {row['error_max']:.4f} |")
    if largest:
        print("\nlargest |input| / its bound, per product:", ", ".join(f"{k} {v:.3f}" for k, v in largest.items()))
    pathlib.Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.output).write_text(json.dumps({"model": args.model, "rows": rows, "largest_share_of_bound": largest}, indent=1))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
