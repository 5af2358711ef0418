#!/usr/bin/env python3
# precision_recall.py: held-out recall of one checkpoint at each product precision (uform_eval
# --precision), the relative R@10 change against BF16 per set and direction, with the baseline each
# set has beside it (TF-IDF for text, chance for media). Prints a table and writes JSON.
#
#   python3 bench/precision_recall.py [--model models/default] [--precisions bf16,e4m3]
#                                     [--width 0] [--threads N] [--build build] [--device cpu|cuda]
#                                     [--output bench/out/precision_recall.json] PAIRS.jsonl...
#
# --width 0 is the model's widest embedding. On the GPU (--device cuda) `e4m3-tensor` is E4M3 with the
# bounded per-tensor scales (UFORM_CUDA_E4M3=tensor; docs/precision.md), `e4m3-tensor+gate_up` with gate_up's
# output in E4M3 too, `e4m3-tensor+gate_up+attention` with FP8 attention besides (docs/cuda.md), `e4m3-mixed` those scales
# into qkv and gate_up and a scale per row into out and down (UFORM_CUDA_E4M3=mixed). The sets are the files given, e.g. the 2000-pair test
# spreads of lineage.eval_sets and each corpus's test.jsonl (docs/precision.md, "Recall").
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def gpu_switches(precision):
    """forward.c's environment switches for a precision name: e4m3-tensor is UFORM_CUDA_E4M3=tensor (e4m3-mixed, mixed), and its
    "+gate_up" and "+attention" suffixes add gate_up's output in E4M3 and FP8 attention (docs/cuda.md), the latter
    with cuDNN's attention on every pass (by default it runs only on long segments, where FP8 attention applies)."""
    base, *extras = precision.split("+")
    unknown = [extra for extra in extras if extra not in ("gate_up", "attention")]
    if unknown or (extras and base != "e4m3-tensor"):
        raise ValueError(f"{precision}: suffixes are +gate_up and +attention, after e4m3-tensor")
    return {"UFORM_CUDA_E4M3": {"e4m3-tensor": "tensor", "e4m3-mixed": "mixed"}.get(base, "row"),
            "UFORM_CUDA_GATE_UP": "e4m3" if "gate_up" in extras else "bf16",
            "UFORM_CUDA_E4M3_ATTENTION": "e4m3" if "attention" in extras else "bf16",
            **({"UFORM_CUDA_ATTENTION": "cudnn"} if "attention" in extras else {})}


def evaluate(build, model, pairs, precision, threads, baseline, device="cpu"):
    """uform_eval's JSON for one pair file at one precision (with the TF-IDF baseline when asked)."""
    with tempfile.TemporaryDirectory() as folder:
        output = pathlib.Path(folder) / "eval.json"
        command = [str(build / "uform_eval"), str(model), "--pairs", str(pairs), "--precision", precision.split("-")[0],
                   "--json", str(output), "--threads", str(threads), "--device", device, "--quiet"]
        if not baseline:
            command.append("--no-tfidf")
        env = dict(os.environ, **gpu_switches(precision))
        run = subprocess.run(command, capture_output=True, text=True, env=env)
        if run.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed:\n{run.stderr[-2000:]}")
        return json.loads(output.read_text())


def pick(report, method, width, direction):
    """The all-languages row of `method` at `width` (None: any) and `direction` ("both" for chance)."""
    for row in report["rows"]:
        if row["method"] == method and row["language"] == "all" and row.get("output_precision") in (None, "float32") \
                and (width is None or row["width"] == width) and row["direction"] in (direction, "both"):
            return row
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("pairs", nargs="+")
    parser.add_argument("--model", default=str(ROOT / "models" / "default"))
    parser.add_argument("--precisions", default="bf16,e4m3")
    parser.add_argument("--width", type=int, default=0)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--build", default=str(ROOT / "build"))
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--output", default=str(ROOT / "bench" / "out" / "precision_recall.json"))
    args = parser.parse_args()
    precisions = args.precisions.split(",")
    if precisions[0] != "bf16":
        parser.error("--precisions starts with bf16, the precision the others are compared with")
    try:
        for precision in precisions:
            gpu_switches(precision)
    except ValueError as error:
        parser.error(str(error))
    if any(precision.startswith(("e4m3-tensor", "e4m3-mixed")) for precision in precisions) and args.device != "cuda":
        parser.error("e4m3-tensor and e4m3-mixed (bounded scales) run on the GPU only: --device cuda")
    build = pathlib.Path(args.build)

    results, table = [], []
    for pairs in args.pairs:
        name = pathlib.Path(pairs).parent.name if pathlib.Path(pairs).name == "test.jsonl" else pathlib.Path(pairs).stem
        reports = {}
        for precision in precisions:
            print(f"{name}: {precision} ...", file=sys.stderr, flush=True)
            reports[precision] = evaluate(build, args.model, pairs, precision, args.threads, precision == "bf16", args.device)
        width = args.width or max(row["width"] for row in reports["bf16"]["rows"] if row["method"] == "model")
        baseline = "tfidf" if any(r["method"] == "tfidf" for r in reports["bf16"]["rows"]) else "chance"
        for direction in ("query->positive", "positive->query"):
            base = pick(reports["bf16"], baseline, None, direction)
            entry = {"set": name, "pairs": reports["bf16"]["count"], "direction": direction, "width": width,
                     "baseline": baseline, "baseline_recall@1": base["recall@1"], "baseline_recall@10": base["recall@10"]}
            for precision in precisions:
                row = pick(reports[precision], "model", width, direction)
                entry[f"{precision}_recall@1"] = row["recall@1"]
                entry[f"{precision}_recall@10"] = row["recall@10"]
            reference = entry["bf16_recall@10"]
            for precision in precisions[1:]:
                entry[f"{precision}_change@10"] = (entry[f"{precision}_recall@10"] - reference) / reference if reference else None
            results.append(entry)
            changes = ", ".join(f"{p} {entry[f'{p}_recall@10']:.4f}" for p in precisions)
            print(f"{name} {direction}: R@10 {changes}", file=sys.stderr, flush=True)
        write(args, precisions, results)  # each finished set kept: a run cut off by its deadline still reports them

    header = ["set", "pairs", "direction", "baseline", "its R@1", "its R@10"]
    for precision in precisions:
        header += [f"{precision} R@1", f"{precision} R@10"]
    header += [f"{p} R@10 change" for p in precisions[1:]]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for entry in results:
        cells = [entry["set"], str(entry["pairs"]), entry["direction"], entry["baseline"],
                 f"{entry['baseline_recall@1']:.4f}", f"{entry['baseline_recall@10']:.4f}"]
        for precision in precisions:
            cells += [f"{entry[f'{precision}_recall@1']:.4f}", f"{entry[f'{precision}_recall@10']:.4f}"]
        for precision in precisions[1:]:
            change = entry[f"{precision}_change@10"]
            cells.append("-" if change is None else f"{change:+.2%}")
        print("| " + " | ".join(cells) + " |")
    print(f"wrote {args.output}", file=sys.stderr)


def write(args, precisions, results):
    """The JSON of the sets finished so far, written to a temporary name and renamed over --output."""
    output = pathlib.Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    temporary = output.with_name(output.name + ".tmp")
    temporary.write_text(json.dumps({"benchmark": "precision_recall", "date": time.strftime("%Y-%m-%d"),
                                     "model": args.model, "device": args.device, "precisions": precisions, "rows": results},
                                    indent=2) + "\n")
    os.replace(temporary, output)


if __name__ == "__main__":
    main()
