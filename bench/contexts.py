#!/usr/bin/env python3
"""contexts.py: encode throughput of one loaded model against the number of contexts that share it
(issue 15, "many threads, one model"). For each device, each text length and each count N, N threads
each encode through a context of their own (uform_context_create over the one model: on the CPU the
threads are split between the contexts, on the GPU each context has its own stream and device copy)
for --seconds; the table gives their bytes/s together and the ratio to one context. Prints a table and
writes JSON (bench/out/contexts.json).

    python3 bench/contexts.py [--devices cpu,cuda] [--tier tiny] [--bytes 128,2048] [--contexts 1,2,4]
                              [--seconds 3] [--threads N] [--precision bf16] [--build build] [--output FILE]

A device this build or machine cannot run (cuda without the backend or a GPU) is left out, saying so.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", default="cpu,cuda")
    parser.add_argument("--tier", default="tiny")
    parser.add_argument("--bytes", default="128,2048")
    parser.add_argument("--contexts", default="1,2,4")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="host threads, split between a device's contexts")
    parser.add_argument("--precision", default="bf16")
    parser.add_argument("--batch-bytes", type=int, default=None, help="bytes a call (default 8192 CPU, 1 MiB GPU)")
    parser.add_argument("--build", default=str(ROOT / "build"))
    parser.add_argument("--output", default=str(ROOT / "bench" / "out" / "contexts.json"))
    args = parser.parse_args()
    build = pathlib.Path(args.build)
    checkpoint = ROOT / "bench" / "out" / f"{args.tier}-random"
    if not (checkpoint / "model.safetensors").exists():
        subprocess.run([build / "uform", "init", "--tier", args.tier, "--seed", "0", "--output", checkpoint], check=True)

    lines = []
    for device in args.devices.split(","):
        batch_bytes = args.batch_bytes or (1 << 20 if device == "cuda" else 8192)
        command = [build / "uform_bench_encode", "--model", checkpoint, "--device", device, "--bytes", args.bytes,
                   "--seconds", str(args.seconds), "--threads", str(args.threads), "--batch-bytes", str(batch_bytes),
                   "--precision", args.precision, "--contexts", args.contexts]
        print(f"contexts: {device}, {args.tier}, contexts {args.contexts} ...", file=sys.stderr, flush=True)
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            print(f"contexts: {device} did not run: {result.stderr.strip().splitlines()[-1:] or result.returncode}", file=sys.stderr)
            continue
        lines += [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]

    print("| device | text bytes | contexts | host threads each | bytes/s | x one context |")
    print("|---|---|---|---|---|---|")
    rows = []
    for line in lines:
        one = next((other["bytes_per_s"] for other in lines if other["device"] == line["device"]
                    and other["text_bytes"] == line["text_bytes"] and other["contexts"] == 1), None)
        each = max(1, line["threads"] // line["contexts"])
        ratio = line["bytes_per_s"] / one if one else None
        rows.append(dict(line, threads_each=each, times_one_context=ratio))
        print(f"| {line['device']} | {line['text_bytes']} | {line['contexts']} | {each} | {line['bytes_per_s']:,.0f} | "
              + (f"{ratio:.2f}x |" if ratio else "- |"))
    cpu = lines[0]["cpu"] if lines else None
    report = {"benchmark": "contexts", "date": time.strftime("%Y-%m-%d"), "tier": args.tier, "precision": args.precision,
              "seconds": args.seconds, "cpu": cpu, "unit": "bytes/s of pooled embeddings, all contexts together", "rows": rows}
    path = pathlib.Path(args.output)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1))
    print(f"contexts: wrote {path}", file=sys.stderr)
    return 0 if lines else 1


if __name__ == "__main__":
    sys.exit(main())
