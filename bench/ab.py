#!/usr/bin/env python3
"""ab.py: the same benchmarks on two builds in one run, alternating (A, B, A, B, ...), so that a
change of ours is timed against the code before it on the same machine at the same moment: the
CUDA training step (uform_bench_train_cuda) at the rows of bench/train_cuda.py, and GPU encode
(uform_bench_encode --device cuda). Prints a table of medians and B / A, and writes JSON.

    python3 bench/ab.py --base BUILD_A --build BUILD_B [--repeats 2] [--steps 20] [--output FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

TIERS = {"tiny": (512, 12), "small": (1024, 12)}
# (name, tier, flags): masked bytes at long and short segments, and the contrastive rows.
TRAIN = [
    ("mlm tiny 4096", "tiny", ["--rows", "16", "--columns", "4096", "--segment", "4096"]),
    ("mlm tiny 512", "tiny", ["--rows", "16", "--columns", "4096", "--segment", "512"]),
    ("pairs tiny 128", "tiny", ["--pairs", "1024", "--text", "128"]),
    ("pairs small 256", "small", ["--pairs", "1024", "--text", "256", "--recompute", "1", "--kept", "2",
                                  "--keep-attention", "1"]),
]


def run_json(command):
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{' '.join(map(str, command))} failed: {(done.stderr or done.stdout)[-600:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="build A (the code before the change)")
    parser.add_argument("--build", required=True, help="build B (the change)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--encode-model", default=None, help="a checkpoint for the encode rows (default: uform init tiny)")
    parser.add_argument("--output", default="bench/out/ab.json")
    args = parser.parse_args()
    builds = {"A": args.base, "B": args.build}
    samples = {}  # (benchmark, row) -> {"A": [...], "B": [...]}

    for name, tier, flags in TRAIN:
        width, depth = TIERS[tier]
        for repeat in range(args.repeats):
            for side, build in builds.items():
                command = [os.path.join(build, "uform_bench_train_cuda"), "--width", str(width), "--depth", str(depth),
                           "--steps", str(args.steps), "--cudnn", "1", "--tune", "2"] + flags
                try:
                    result = run_json(command)[-1]
                    value = result["step_ms"]
                except (RuntimeError, KeyError, IndexError) as error:
                    print(f"{name} {side}: {error}", file=sys.stderr)
                    continue
                samples.setdefault(("train step ms", name), {"A": [], "B": []})[side].append(value)
                print(f"{name} {side} (repeat {repeat + 1}): {value:.2f} ms", file=sys.stderr, flush=True)

    model = args.encode_model or os.path.join(os.path.dirname(args.output) or ".", "ab-tiny")
    if not os.path.exists(os.path.join(model, "model.safetensors")):
        subprocess.run([os.path.join(args.build, "uform"), "init", "--tier", "tiny", "--seed", "0", "--output", model],
                       check=True, capture_output=True)
    for repeat in range(args.repeats):
        for side, build in builds.items():
            command = [os.path.join(build, "uform_bench_encode"), "--model", model, "--bytes", "128,2048", "--seconds", "3",
                       "--device", "cuda", "--batch-bytes", str(1 << 20)]
            try:
                lines = run_json(command)
            except RuntimeError as error:
                print(f"encode {side}: {error}", file=sys.stderr)
                continue
            for line in lines:
                row = f"encode {line['text_bytes']} B"
                samples.setdefault(("encode bytes/s", row), {"A": [], "B": []})[side].append(line["bytes_per_s"])
                print(f"{row} {side} (repeat {repeat + 1}): {line['bytes_per_s']:.0f} bytes/s", file=sys.stderr, flush=True)

    table = []
    print("| benchmark | row | A (median) | B (median) | B / A |")
    print("|---|---|---|---|---|")
    for (benchmark, row), sides in samples.items():
        if not sides["A"] or not sides["B"]:
            continue
        a, b = statistics.median(sides["A"]), statistics.median(sides["B"])
        table.append(dict(benchmark=benchmark, row=row, A=sides["A"], B=sides["B"], ratio=b / a))
        print(f"| {benchmark} | {row} | {a:,.2f} | {b:,.2f} | {b / a:.3f} |")
    report = dict(benchmark="ab", date=time.strftime("%Y-%m-%d"), base=args.base, build=args.build, repeats=args.repeats,
                  steps=args.steps, note="step ms: lower is faster; encode bytes/s: higher is faster", rows=table)
    os.makedirs(os.path.dirname(args.output) or ".", exist_ok=True)
    with open(args.output, "w") as file:
        json.dump(report, file, indent=2)
    print(f"wrote {args.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
