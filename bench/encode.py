#!/usr/bin/env python3
# encode.py: encode throughput of `uform_encode` on this CPU or GPU beside the PyTorch peer
# (../shared/peers/torch_encode.py) on the same checkpoint, in the same run. Prints a table and
# writes JSON (bench/out/encode_cpu.json or encode_cuda.json). On the CPU the peer runs in Float32
# and BFloat16, eager and compiled; on the GPU in BFloat16, eager and compiled; the ratio is taken
# against its best. On the CPU ours runs once per BF16 kernel table asked for (--kernels, each pinned
# by UFORM_CPU; a table this CPU cannot run is left out, saying so), and the ratio is our best table's.
# --precisions runs ours at each product precision (bf16, e4m3, int8, f32; docs/precision.md; on the GPU
# also e4m3-tensor, E4M3 with bounded per-tensor scales, UFORM_CUDA_E4M3=tensor, and e4m3-mixed, those scales into
# qkv and gate_up and a scale per row into out and down, UFORM_CUDA_E4M3=mixed); with a narrow one
# beside BF16 a column gives each one's ratio (our best row at it over our best BF16 row). On the GPU
# --residuals bf16,f32 runs each precision with either residual stream (UFORM_CUDA_RESIDUAL, docs/cuda.md),
# --rotaries separate,fused with rotary as its own pass or in attention.cu's loads (UFORM_CUDA_ROTARY),
# --gate-ups bf16,e4m3 with e4m3-tensor's gate_up output in BF16 or E4M3 codes (UFORM_CUDA_GATE_UP),
# --attentions bf16,e4m3 with e4m3-tensor's attention in BF16 or, where cuDNN's runs, FP8 (UFORM_CUDA_E4M3_ATTENTION).
#
#   python3 bench/encode.py [--device cpu|cuda] [--tier tiny] [--bytes 128,2048] [--seconds 5]
#                           [--threads N] [--batch-bytes B] [--peer-configs float32,bfloat16,...]
#                           [--kernels amx,avx512bf16,avx512vnni,avx512f,avx2] [--precisions bf16,e4m3,int8]
#                           [--peer-isa native|avx2|avx512|avx512vnni|avx512bf16] [--repeats N] [--build build] [--peers DIR] [--output FILE]
# --peer-isa caps the peer's instruction set (PyTorch's kernels, oneDNN, MKL) to emulate a CPU class on
# this one, beside ours pinned to that class's table by --kernels. --repeats N measures ours and the
# peers in turn N times (both sides move 10-20% between runs on a shared machine): medians in the
# table, each repeat's own ratio in the JSON, and the median of those as the ratio.
import argparse
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


# The peer's instruction set capped to emulate a CPU class on this one: PyTorch's own kernels
# (ATEN_CPU_CAPABILITY), oneDNN's (its BFloat16 and AMX products) and MKL's (its Float32 GEMM).
PEER_ISAS = {"native": {},
             "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
             "avx512": {"ATEN_CPU_CAPABILITY": "avx512", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE", "MKL_ENABLE_INSTRUCTIONS": "AVX512"},
             "avx512vnni": {"ATEN_CPU_CAPABILITY": "avx512", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE_VNNI",
                            "MKL_ENABLE_INSTRUCTIONS": "AVX512"},
             "avx512bf16": {"ATEN_CPU_CAPABILITY": "avx512", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16",
                            "MKL_ENABLE_INSTRUCTIONS": "AVX512"}}  # Zen 4, Cooper Lake: BF16 products, no AMX


def run_lines(command, env=None):
    """Runs a command and returns its JSON lines; raises with its stderr when it fails."""
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, command))} failed:\n{result.stderr[-2000:]}")
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def write_report(path, report):
    """The JSON report at `path`, its folder made."""
    output = pathlib.Path(path)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {output}", file=sys.stderr)


def cpu_name():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def gpu_name():
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                              text=True).stdout.strip().splitlines()[0]
    except (OSError, IndexError):
        return None


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--tier", default="tiny")
    parser.add_argument("--bytes", default="128,2048")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--batch-bytes", type=int, default=None, help="bytes a call (default 8192 CPU, 1 MiB GPU)")
    parser.add_argument("--peer-configs", default=None,
                        help="default float32,bfloat16,bfloat16+compile (CPU) or bfloat16,bfloat16+compile (GPU)")
    parser.add_argument("--kernels", default="avx512bf16,avx512f,avx2",
                        help="CPU kernel tables to run (src/cpu/kernels.h; generic is about 20x slower)")
    parser.add_argument("--precisions", default="bf16", help="ours at these product precisions, comma-separated")
    parser.add_argument("--residuals", default="bf16",
                        help="GPU: ours with each residual stream, bf16 (the default) and/or f32 (UFORM_CUDA_RESIDUAL)")
    parser.add_argument("--rotaries", default="separate",
                        help="GPU: ours with rotary as its own pass (separate, the default) and/or in attention's loads "
                             "(fused; UFORM_CUDA_ROTARY)")
    parser.add_argument("--gate-ups", default="bf16",
                        help="GPU: e4m3-tensor with gate_up's output in BF16 (the default) and/or E4M3 codes (e4m3; "
                             "UFORM_CUDA_GATE_UP); other precisions run bf16 alone")
    parser.add_argument("--attentions", default="bf16",
                        help="GPU: e4m3-tensor with attention in BF16 (the default) and/or FP8 where cuDNN's attention runs "
                             "(e4m3; UFORM_CUDA_E4M3_ATTENTION); other precisions run bf16 alone")
    parser.add_argument("--peer-isa", default="native", choices=sorted(PEER_ISAS),
                        help="cap the peer's instruction set to emulate another CPU class on this one (default native)")
    parser.add_argument("--build", default=str(ROOT / "build"))
    parser.add_argument("--peers", default=str(ROOT.parent / "shared" / "peers"))
    parser.add_argument("--repeats", type=int, default=1,
                        help="measure ours and the peers in turn this many times; the table gives medians, the ratio the "
                             "median of each repeat's own (default 1)")
    parser.add_argument("--output", default=None, help="default bench/out/encode_DEVICE.json")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats takes a count of 1 or more")
    gpu = args.device == "cuda"
    batch_bytes = args.batch_bytes or (1 << 20 if gpu else 8192)
    args.peer_configs = args.peer_configs or ("bfloat16,bfloat16+compile" if gpu else "float32,bfloat16,bfloat16+compile")
    args.output = args.output or str(ROOT / "bench" / "out" / f"encode_{args.device}.json")

    build = pathlib.Path(args.build)
    checkpoint = ROOT / "bench" / "out" / f"{args.tier}-random"
    if not (checkpoint / "model.safetensors").exists():
        subprocess.run([build / "uform", "init", "--tier", args.tier, "--seed", "0", "--output", checkpoint], check=True)

    repeats = []  # per repeat: {text_bytes: {system: bytes/s}}, ours and the peers measured in turn
    cpu_class, peer_version, peer_error = None, None, None
    for repeat in range(args.repeats):
        if args.repeats > 1:
            print(f"repeat {repeat + 1} of {args.repeats}", file=sys.stderr)
        rows, ours = {}, []
        variants = [(p, r, t, u, a) for p in args.precisions.split(",") for r in (args.residuals.split(",") if gpu else ["bf16"])
                    for t in (args.rotaries.split(",") if gpu else ["separate"])
                    for u in (args.gate_ups.split(",") if gpu and p == "e4m3-tensor" else ["bf16"])
                    for a in (args.attentions.split(",") if gpu and p == "e4m3-tensor" else ["bf16"])]
        for precision, residual, rotary, gate_up, attention in variants:
            for kernels in (args.kernels.split(",") if not gpu else [None]):
                env = dict(os.environ, **({"UFORM_CPU": kernels} if kernels else {}), UFORM_CUDA_RESIDUAL=residual,
                           UFORM_CUDA_ROTARY=rotary, UFORM_CUDA_GATE_UP=gate_up, UFORM_CUDA_E4M3_ATTENTION=attention)
                env["UFORM_CUDA_E4M3"] = {"e4m3-tensor": "tensor", "e4m3-mixed": "mixed"}.get(precision, "row")  # e4m3: the CPU's
                print(f"uform: {args.tier} on {args.device}, {args.threads} threads, {precision}, kernels {kernels or 'default'} ...",
                      file=sys.stderr)
                lines = run_lines([build / "uform_bench_encode", "--model", checkpoint, "--bytes", args.bytes,
                                   "--seconds", str(args.seconds), "--threads", str(args.threads), "--device", args.device,
                                   "--batch-bytes", str(batch_bytes), "--precision", precision.split("-")[0]], env=env)
                ran = lines[0]["kernels"] if lines else None
                if kernels and ran != kernels:
                    print(f"uform: this CPU cannot run the {kernels} kernels (it ran {ran}); left out", file=sys.stderr)
                    continue
                system = (f"uform {precision} {ran}" if kernels else f"uform {precision}" +
                          (f" {residual}-residual" if residual != "bf16" else "") + (f" {rotary}-rotary" if rotary != "separate" else "") +
                          (f" {gate_up}-gate_up" if gate_up != "bf16" else "") +
                          (f" {attention}-attention" if attention != "bf16" else ""))
                ours.append(system)
                cpu_class = lines[0].get("cpu") if lines else cpu_class
                for line in lines:
                    rows.setdefault(line["text_bytes"], {})[system] = line["bytes_per_s"]
                    print(json.dumps(line), file=sys.stderr, flush=True)  # seen even if a peer later runs out of time

        peer = pathlib.Path(args.peers) / "torch_encode.py"
        for config in args.peer_configs.split(","):
            dtype, _, compiled = config.partition("+")
            command = [sys.executable, peer, checkpoint, "--device", args.device, "--dtype", dtype, "--threads",
                       str(args.threads), "--bytes", args.bytes, "--seconds", str(args.seconds), "--batch-bytes",
                       str(batch_bytes)]
            if compiled:
                command.append("--compile")
            print(f"peer: torch {config} ...", file=sys.stderr)
            try:
                # inductor's cache is not keyed by the capped ISA: kernels compiled under another cap crash
                cache = {"TORCHINDUCTOR_CACHE_DIR": os.path.join(tempfile.gettempdir(), f"torchinductor-uform-{args.peer_isa}")}
                for line in run_lines(command, env=dict(os.environ, **PEER_ISAS[args.peer_isa], **cache)):
                    peer_version = line.get("torch")
                    rows.setdefault(line["text_bytes"], {})[f"torch {config}"] = line["bytes_per_s"]
                    print(json.dumps(line), file=sys.stderr, flush=True)
            except (RuntimeError, FileNotFoundError) as error:
                peer_error = str(error).splitlines()[-1]
                print(f"peer: torch {config} did not run: {peer_error}", file=sys.stderr)
        repeats.append(rows)

    systems = ours + [f"torch {c}" for c in args.peer_configs.split(",")]
    asked = args.precisions.split(",")
    narrows = [p for p in ("e4m3", "e4m3-tensor", "e4m3-mixed", "int8") if p in asked and "bf16" in asked]

    def of(system, precision):
        """Whether one of our systems ran at `precision` (any kernel table)."""
        return system == f"uform {precision}" or system.startswith(f"uform {precision} ")
    header = ["text bytes"] + systems + ["best peer", "best uform / best peer"] + [f"{p} / bf16" for p in narrows]

    def within(values):
        """Our best over the peer's best in one repeat's row (None without both)."""
        peers = [v for k, v in values.items() if k.startswith("torch")]
        return max(values.get(s, 0) for s in ours) / max(peers) if peers and ours else None

    # Each figure is the median over the repeats; the ratio is the median of each repeat's own ratio.
    rows = {length: {system: statistics.median(r[length][system] for r in repeats if system in r.get(length, {}))
                     for system in {k for r in repeats for k in r.get(length, {})}}
            for length in {length for r in repeats for length in r}}
    table = []
    for length in sorted(rows):
        values = rows[length]
        peers = {k: v for k, v in values.items() if k.startswith("torch")}
        best = max(peers.values()) if peers else None
        ratios = [within(r[length]) for r in repeats if length in r and within(r[length]) is not None]
        ratio = statistics.median(ratios) if ratios else None
        row = [length] + [values.get(s) for s in systems] + [best, ratio]
        wide = max((values.get(s, 0) for s in ours if of(s, "bf16")), default=0)
        for precision in narrows:
            narrow = max((values.get(s, 0) for s in ours if of(s, precision)), default=0)
            row.append(narrow / wide if wide else None)
        table.append(row)

    def cell(value):
        if value is None:
            return "-"
        return f"{value:.2f}x" if isinstance(value, float) and value < 100 else f"{value:,.0f}"

    widths = [max(len(str(h)), *(len(cell(r[i])) for r in table)) for i, h in enumerate(header)]
    print("| " + " | ".join(str(h).ljust(w) for h, w in zip(header, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in table:
        print("| " + " | ".join(cell(v).rjust(w) for v, w in zip(row, widths)) + " |")

    report = {"benchmark": f"encode_{args.device}", "date": time.strftime("%Y-%m-%d"), "cpu": cpu_name(), "cpu_kernels": cpu_class,
              "gpu": gpu_name() if gpu else None, "peer_isa": args.peer_isa, "peer_env": PEER_ISAS[args.peer_isa],
              "precisions": args.precisions.split(","), "batch_bytes": batch_bytes, "threads": args.threads, "tier": args.tier, "seconds": args.seconds, "torch": peer_version,
              "peer_error": peer_error, "unit": "bytes/s of pooled embeddings",
              "repeats": args.repeats, "ratios_per_repeat": {str(length): [within(r[length]) for r in repeats if length in r]
                                                             for length in sorted(rows)},
              "per_repeat": [{str(length): values for length, values in sorted(r.items())} for r in repeats],
              "rows": [dict(zip(header, row)) for row in table]}
    write_report(args.output, report)


if __name__ == "__main__":
    main()
