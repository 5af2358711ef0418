#!/usr/bin/env python3
"""Image-encode throughput of `uform_encode_images` on a CPU context and a CUDA context: one
synthetic photo (default 640x480) as JPEG bytes, PNG bytes, decoded pixels, and pixels already at
its patch grid's size (the resize then keeps the size), a batch of copies a call. Prints a table of images/s and writes JSON (default bench/out/encode_images.json).
Devices `cuda-host` and `cuda-gpu` are a CUDA context with UFORM_CUDA_DECODE=host (JPEGs decoded on the
host's threads) and =gpu (by nvJPEG and NPP); `cuda` takes the library's default.

    python3 bench/encode_images.py [--devices cpu,cuda] [--tier tiny] [--build build] [--threads N]
                                   [--batch N] [--seconds 3] [--height 480] [--width 640] [--output FILE]
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from encode import cpu_name, gpu_name, run_lines, write_report  # noqa: E402  (the text encode benchmark's helpers)

ROOT = pathlib.Path(__file__).resolve().parent.parent
INPUTS = ["jpeg", "png", "pixels", "sized"]  # sized: pixels already at the patch grid's size (encode_images.c)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", default="cpu,cuda", help="contexts to time, comma-separated (cpu, cuda, cuda-host, cuda-gpu)")
    parser.add_argument("--tier", default="tiny")
    parser.add_argument("--build", default=str(ROOT / "build"))
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--batch", type=int, default=None, help="images a call (default 8 on the CPU, 64 on the GPU)")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--height", type=int, default=480)
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--output", default=str(ROOT / "bench" / "out" / "encode_images.json"))
    args = parser.parse_args()
    build = pathlib.Path(args.build)
    checkpoint = ROOT / "bench" / "out" / f"{args.tier}-vision-random"
    if not (checkpoint / "model.safetensors").exists():
        subprocess.run([build / "uform", "init", "--tier", args.tier, "--seed", "0", "--frontends", "vision",
                        "--output", checkpoint], check=True, stdout=subprocess.DEVNULL)
    lines, errors = [], {}
    for device in args.devices.split(","):
        print(f"uform: {args.tier} image encode on {device}, {args.threads} threads ...", file=sys.stderr)
        env = dict(os.environ, UFORM_CUDA_DECODE=device.split("-")[1]) if "-" in device else None
        try:
            for line in run_lines([build / "uform_bench_encode_images", "--model", checkpoint, "--device", device.split("-")[0],
                                   "--threads", str(args.threads), "--batch", str(args.batch or (8 if device == "cpu" else 64)), "--seconds",
                                   str(args.seconds), "--height", str(args.height), "--width", str(args.width),
                                   "--inputs", ",".join(INPUTS)], env=env):
                line["device"] = device
                lines.append(line)
                print(json.dumps(line), file=sys.stderr, flush=True)
        except RuntimeError as error:
            errors[device] = str(error).strip().splitlines()[-1]
            print(f"uform on {device} did not run: {errors[device]}", file=sys.stderr)
    rate = {(line["device"], line["input"]): line for line in lines}
    devices = args.devices.split(",")
    grid = lines[0]["grid"] if lines else "?"
    batches = ", ".join(f"{line['batch']} on {line['device']}" for line in lines if line["input"] == INPUTS[0])
    print(f"\n{args.height}x{args.width} photo ({grid} patches), images a call: {batches}; images/s:\n")
    print("| input | input bytes | " + " | ".join(f"{d} images/s" for d in devices) + " |")
    print("|---|---|" + "---|" * len(devices))
    for input in INPUTS:
        size = next((f"{line['input_bytes']:,}" for line in lines if line["input"] == input), "n/a")
        cells = [f"{rate[(d, input)]['images_per_s']:,.1f}" if (d, input) in rate else "n/a" for d in devices]
        print(f"| {input} | {size} | " + " | ".join(cells) + " |")
    report = dict(benchmark="encode_images", date=time.strftime("%Y-%m-%d"), cpu=cpu_name(),
                  gpu=gpu_name() if "cuda" in devices else None, tier=args.tier, threads=args.threads,
                  seconds=args.seconds, unit="images/s of pooled embeddings", rows=lines,
                  errors=errors)
    write_report(args.output, report)


if __name__ == "__main__":
    main()
