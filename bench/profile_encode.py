#!/usr/bin/env python3
"""Where a GPU encode call's time goes, ours beside the PyTorch peer's (issue 15: profile first).
For each text length: one call of --batch-bytes of random texts on the GPU; ours under Nsight
Compute (kernel durations summed by name, as scripts/device/kernel_times.py sums them, and the
block products by role: qkv, out, gate_up, down) and timed
alone (wall per call, host work included), the peer (../shared/peers/torch_encode.py, BFloat16,
compiled) under torch.profiler and timed alone. The GPU-busy share (kernel time over wall time)
tells a host-bound call from a kernel-bound one. Prints a table and writes JSON.

    python3 bench/profile_encode.py --build BUILD --peers DIR [--tier tiny] [--bytes 128,2048]
                                    [--batch-bytes 1048576] [--attention cudnn,ours] [--precisions bf16,e4m3]
                                    [--tune 0,1] [--no-peer] [--top 12] [--output FILE]
"""
import argparse
import csv
import importlib.util
import io
import json
import os
import pathlib
import subprocess
import sys
import time
from collections import defaultdict

ROOT = pathlib.Path(__file__).resolve().parent.parent
UNITS = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}


PRODUCTS = ("qkv", "out", "gate_up", "down")


def ncu_launches(command, env):
    """[(kernel name, microseconds)] of every kernel `command` launches, in launch order, from ncu's CSV."""
    result = subprocess.run(["ncu", "--csv", "--clock-control", "none", "--metrics", "gpu__time_duration.sum", *command],
                            capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise RuntimeError(f"ncu failed:\n{result.stderr[-2000:]}")
    lines = [line for line in result.stdout.splitlines(keepends=True) if line.startswith('"')]
    launches = [(int(row["ID"]), row["Kernel Name"].split("(")[0][:80],
                 float(row["Metric Value"].replace(",", "")) * UNITS[row["Metric Unit"]])
                for row in csv.DictReader(io.StringIO("".join(lines))) if row.get("Metric Name") == "gpu__time_duration.sum"]
    return [(name, us) for _, name, us in sorted(launches)]


def by_name(launches):
    """{kernel name: [microseconds, launches]}."""
    totals = defaultdict(lambda: [0.0, 0])
    for name, us in launches:
        totals[name][0] += us
        totals[name][1] += 1
    return dict(totals)


def by_product(launches):
    """{qkv, out, gate_up, down: milliseconds} of a text encode call: its product launches (cuBLASLt's) are the
    blocks' four in order, then pool.proj; None where the count does not fit that (media, other heads)."""
    products = [us for name, us in launches if name.startswith(("nvjet", "sm90_xmma", "cutlass")) or "gemm" in name]
    if len(products) < 5 or (len(products) - 1) % 4:
        return None
    return {product: sum(products[i : len(products) - 1 : 4]) / 1e3 for i, product in enumerate(PRODUCTS)}


def ours(build, checkpoint, length, batch_bytes, attention, precision, tune):
    """(kernels of one call, wall milliseconds per call) of uform_bench_encode on the GPU in `precision`, its
    attention pinned (forward.c's UFORM_CUDA_ATTENTION) and its products' timed choice on or off (UFORM_CUDA_TUNE)."""
    env = dict(os.environ, UFORM_CUDA_ATTENTION=attention, UFORM_CUDA_TUNE=tune)
    base = [str(build / "uform_bench_encode"), "--model", str(checkpoint), "--device", "cuda", "--bytes", str(length),
            "--batch-bytes", str(batch_bytes), "--precision", precision]
    launches = ncu_launches([*base, "--seconds", "0"], env)  # the warm-up call alone
    timed = subprocess.run([*base, "--seconds", "3"], capture_output=True, text=True, check=True, env=env)
    line = json.loads(next(line for line in timed.stdout.splitlines() if line.startswith("{")))
    return by_name(launches), 1e3 * line["batch"] * length / line["bytes_per_s"], by_product(launches)


def peer(peers, checkpoint, length, batch_bytes):
    """(kernels of one call, wall milliseconds per call) of the compiled BFloat16 peer."""
    import torch

    spec = importlib.util.spec_from_file_location("torch_encode", pathlib.Path(peers) / "torch_encode.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.Encoder({k: v.to("cuda") for k, v in module.load(str(checkpoint)).items()}, torch.bfloat16)
    forward = torch.compile(model)
    ids = torch.randint(0, 256, (max(1, batch_bytes // length), length), device="cuda")
    with torch.inference_mode():
        for _ in range(3):
            forward(ids)
        torch.cuda.synchronize()
        calls, began = 0, time.perf_counter()
        while time.perf_counter() - began < 3:
            forward(ids)
            calls += 1
        torch.cuda.synchronize()
        wall = 1e3 * (time.perf_counter() - began) / calls
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profiler:
            forward(ids)
            torch.cuda.synchronize()
    totals = defaultdict(lambda: [0.0, 0])
    for event in profiler.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            entry = totals[event.name[:80]]
            entry[0] += getattr(event, "device_time_total", None) or event.cuda_time_total
            entry[1] += 1
    return dict(totals), wall, None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default=str(ROOT / "build"))
    parser.add_argument("--peers", default=str(ROOT.parent / "shared" / "peers"))
    parser.add_argument("--tier", default="tiny")
    parser.add_argument("--bytes", default="128,2048")
    parser.add_argument("--batch-bytes", type=int, default=1 << 20)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--attention", default="cudnn,ours", help="our attentions to run (UFORM_CUDA_ATTENTION values)")
    parser.add_argument("--no-peer", action="store_true", help="ours alone (the peer's compilation takes minutes)")
    parser.add_argument("--precisions", default="bf16", help="our precisions to run (bf16, e4m3)")
    parser.add_argument("--tune", default="1", help="our products' timed choice to run: 1, 0 or 0,1 (UFORM_CUDA_TUNE)")
    parser.add_argument("--output", default=str(ROOT / "bench" / "out" / "profile_encode.json"))
    args = parser.parse_args()
    build = pathlib.Path(args.build).resolve()
    checkpoint = ROOT / "bench" / "out" / f"{args.tier}-random"
    if not (checkpoint / "model.safetensors").exists():
        subprocess.run([build / "uform", "init", "--tier", args.tier, "--seed", "0", "--output", checkpoint], check=True)
    report = {"benchmark": "profile_encode", "date": time.strftime("%Y-%m-%d"), "tier": args.tier, "batch_bytes": args.batch_bytes,
              "rows": []}
    for length in map(int, args.bytes.split(",")):
        row = {"text_bytes": length}
        tunes = args.tune.split(",")
        measures = [(f"uform {attention} {precision}" + (f" tune {tune}" if len(tunes) > 1 else ""),
                     lambda attention=attention, precision=precision, tune=tune:
                     ours(build, checkpoint, length, args.batch_bytes, attention, precision, tune))
                    for precision in args.precisions.split(",") for attention in args.attention.split(",") for tune in tunes]
        if not args.no_peer:
            measures.append(("torch compiled", lambda: peer(args.peers, checkpoint, length, args.batch_bytes)))
        systems = [system for system, _ in measures]
        for system, measure in measures:
            try:
                kernels, wall, products = measure()
            except (RuntimeError, subprocess.CalledProcessError, ImportError, FileNotFoundError) as error:
                print(f"{system} at {length} bytes did not run: {str(error)[-400:]}", file=sys.stderr)
                continue
            busy = sum(value[0] for value in kernels.values()) / 1e3
            row[system] = {"wall_ms": wall, "kernel_ms": busy, "busy": busy / wall, "launches": sum(v[1] for v in kernels.values()),
                           "kernels": sorted(([name, v[0] / 1e3, v[1]] for name, v in kernels.items()), key=lambda k: -k[1]),
                           "products": products}
        report["rows"].append(row)
        print(f"\n{args.tier}, {length}-byte texts, {args.batch_bytes} bytes a call:")
        print("| system | wall ms a call | kernel ms | GPU busy | launches |")
        print("|---|---|---|---|---|")
        for system in systems:
            if system in row:
                r = row[system]
                print(f"| {system} | {r['wall_ms']:.2f} | {r['kernel_ms']:.2f} | {r['busy']:.0%} | {r['launches']} |")
        for system in systems:
            if system in row:
                print(f"  {system}'s top kernels:")
                for name, ms, count in row[system]["kernels"][: args.top]:
                    print(f"    {ms:8.3f} ms {100 * ms / row[system]['kernel_ms']:5.1f}% {count:5d}  {name}")
                if row[system]["products"]:
                    print("    the block products, ms: " + ", ".join(f"{k} {v:.3f}" for k, v in row[system]["products"].items()))
    output = pathlib.Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {output}", file=sys.stderr)


if __name__ == "__main__":
    main()
