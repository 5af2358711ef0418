#!/usr/bin/env python3
"""The CUDA training step beside the PyTorch peer, in one run on one card.

Masked bytes: runs ../shared/peers/torch_mlm_step.py (or the copy given by --peer) over the plan,
then our uform_bench_train_cuda for each row with recomputation off and on (and off with cuDNN's
nondeterministic attention backward, atomic dQ), and prints one table: bytes/s, MFU against each
side's own measured matmul ceiling, peak device memory, our ratios.
Contrastive: runs torch_siglip_step.py (beside the MLM peer) and our contrastive step for the same
pairs, text lengths and recomputation, and prints pairs/s side by side. Writes everything to
OUT/train_cuda.json.

    python3 bench/train_cuda.py --build build-gpu [--peer PATH | --no-peer] [--plan tiny:16:4096:4096 ...]
                                [--pairs-plan tiny:1024:128:0 ...] [--kept small:1024:256:1=2 ...]
                                [--steps 20] [--no-atomic]
                                [--compile-cache DIR]

The peers' compiled kernels are cached in BUILD/inductor-cache (--compile-cache), so a second run
on the same machine skips torch.compile's work; neither side's timing includes compilation. The
JSON's `wall` says how long each part took.
"""
import argparse
import json
import os
import subprocess
import sys
import time

TIERS = {"tiny": (512, 12), "small": (1024, 12), "medium": (1024, 24)}
PLAN = ["tiny:16:4096:4096", "tiny:16:4096:512", "small:16:4096:4096", "small:16:4096:512"]
PAIRS_PLAN = ["tiny:1024:128:0", "tiny:1024:256:1", "small:1024:256:1"]
# Rows run with recomputation where our step has memory to spare: the replayed blocks keep their
# attention outputs (1 GiB a block for small at 524k cells) and the last K blocks keep everything and
# are not replayed (step.h's keep_attention and kept_blocks; about 20 GiB a block there).
KEPT = ["small:1024:256:1=2"]


def ours(build, tier, rows, columns, segment, recompute, ceiling, steps, extra=()):
    """Our step with cuDNN's attention where the build has it, else with attention.cu's kernels."""
    width, depth = TIERS[tier]
    command = [os.path.join(build, "uform_bench_train_cuda"), "--width", str(width), "--depth", str(depth),
               "--rows", str(rows), "--columns", str(columns), "--segment", str(segment),
               "--recompute", str(int(recompute)), "--steps", str(steps)] + (["--ceiling"] if ceiling else []) + list(extra)
    cudnn_error = None
    # The first try times cuDNN's plans on the first step, not cuBLASLt's (--tune 2: cuBLASLt's timing
    # gained under 1%, docs/cuda.md). A second try times nothing, which tells a passing fault from a lasting one.
    for tune in (2, 0):
        done = subprocess.run(command + ["--cudnn", "1", "--tune", str(tune)], capture_output=True, text=True)
        if not done.returncode:
            break
        cudnn_error = (done.stderr or done.stdout)[-400:].strip()
        sys.stderr.write(f"ours with cuDNN's attention failed (--tune {tune}): {cudnn_error}\n")
    if done.returncode:  # without cuDNN: attention.cu's kernels, and the row says so
        done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        return dict(error=(done.stderr or done.stdout)[-400:].strip(), cudnn_error=cudnn_error)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["tune"] = tune if result.get("cudnn") else None
    if cudnn_error:
        result["cudnn_error"] = cudnn_error
    return result


def peer(path, plan, out, cache, result="torch_uform.json"):
    env = dict(os.environ, OUT=out)
    if cache:  # compiled kernels kept between runs; the peer times steps after its warm-up either way
        env.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.abspath(cache))
    done = subprocess.run([sys.executable, path] + plan, capture_output=True, text=True, env=env)
    sys.stderr.write(done.stderr[-2000:] if done.returncode else "")
    try:
        with open(os.path.join(out, result)) as file:
            return json.load(file)
    except OSError:
        return dict(ceiling_tflops=0, rows=[], error=done.stdout[-400:] + done.stderr[-400:])


def parse_with_cache(parser, result):
    """Adds --compile-cache and --out (the folder for `result`), parses, makes OUT; returns the arguments and
    the peers' TORCHINDUCTOR_CACHE_DIR (default BUILD/inductor-cache, so a second run skips compilation)."""
    parser.add_argument("--compile-cache", default=None,
                        help="TORCHINDUCTOR_CACHE_DIR for the peers (default BUILD/inductor-cache; '' for torch's own)")
    parser.add_argument("--out", default=os.environ.get("OUT", "bench/out"), help=f"folder for {result}")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    return args, os.path.join(args.build, "inductor-cache") if args.compile_cache is None else args.compile_cache


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default="build-gpu", help="folder holding uform_bench_train_cuda")
    parser.add_argument("--peer", default="../shared/peers/torch_mlm_step.py", help="the PyTorch peer script")
    parser.add_argument("--no-peer", action="store_true", help="time our step only")
    parser.add_argument("--plan", nargs="*", default=PLAN, help="tier:rows:columns:segment_bytes")
    parser.add_argument("--pairs-plan", nargs="*", default=PAIRS_PLAN, help="tier:pairs:text_bytes:recompute(0/1)")
    parser.add_argument("--kept", nargs="*", default=KEPT,
                        help="pairs-plan item=K: with recomputation, our last K blocks keep their activations "
                             "and the others their attention outputs")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per row (after 3 warm-up)")
    parser.add_argument("--no-atomic", action="store_true", help="skip the rows with cuDNN's atomic-dQ backward")
    args, cache = parse_with_cache(parser, "train_cuda.json")
    started, walls = time.time(), {}
    peer_result = dict(ceiling_tflops=0, rows=[]) if args.no_peer or not args.plan else peer(args.peer, args.plan, args.out, cache)
    walls["mlm_peer_s"] = round(time.time() - started)
    peer_rows = {(r.get("tier"), r.get("T"), r.get("doc_len")): r for r in peer_result.get("rows", [])}
    table, ceiling, pairs_peer, pairs_table = [], 0, [], []

    def save(row=True):  # after every row, so a run cut short keeps what it measured
        with open(os.path.join(args.out, "train_cuda.json"), "w") as file:
            json.dump(dict(ceiling_tflops=ceiling, peer=peer_result, rows=table, pairs_peer=pairs_peer,
                           pairs=pairs_table, wall=walls), file, indent=1)
        if row and (table or pairs_table):
            print(json.dumps((table + pairs_table)[-1]), file=sys.stderr, flush=True)

    for index, item in enumerate(args.plan):
        tier, rows, columns, segment = item.split(":")
        rows, columns, segment = int(rows), int(columns), int(segment)
        off = ours(args.build, tier, rows, columns, segment, False, index == 0, args.steps)
        on = ours(args.build, tier, rows, columns, segment, True, False, args.steps)
        atomic = {} if args.no_atomic else ours(args.build, tier, rows, columns, segment, False, False, args.steps,
                                                 ["--deterministic", "0"])
        if index == 0:
            ceiling = off.get("ceiling_tflops", 0)
        for result in (off, on, atomic):
            if "tflops" in result and ceiling:
                result["mfu"] = round(result["tflops"] / ceiling, 3)
        table.append(dict(plan=item, peer=peer_rows.get((tier, columns, segment), {}), ours=off, ours_recompute=on, ours_atomic=atomic))
        save()
    if table:
        print(f"\nour matmul ceiling (cuBLASLt 8192^3 BF16): {ceiling:.0f} TFLOP/s; "
              f"peer's (torch): {peer_result.get('ceiling_tflops', 0):.0f} TFLOP/s\n")
        print("| tier | segment | peer bytes/s | ours bytes/s | ratio | peer MFU | our MFU | peer GiB | ours GiB (recompute) "
              "| memory ratio | ours bytes/s (recompute) | ours bytes/s (atomic dQ) | ratio (atomic dQ) |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in table:
        p, o, r, a = row["peer"], row["ours"], row["ours_recompute"], row["ours_atomic"]
        tier, _, _, segment = row["plan"].split(":")
        ratio = o.get("bytes_per_s", 0) / p["bytes_per_s"] if p.get("bytes_per_s") else float("nan")
        atomic = a.get("bytes_per_s", 0) / p["bytes_per_s"] if p.get("bytes_per_s") else float("nan")
        memory = r.get("peak_GiB", 0) / p["peak_GiB"] if p.get("peak_GiB") else float("nan")
        mark = lambda r: "" if r.get("cudnn", 1) else " (no cuDNN)"
        print(f"| {tier} | {segment} | {p.get('bytes_per_s', 'n/a')} | {o.get('bytes_per_s', o.get('error', 'n/a'))}{mark(o)} "
              f"| {ratio:.2f} | {p.get('mfu', 'n/a')} | {o.get('mfu', 'n/a')} | {p.get('peak_GiB', 'n/a')} "
              f"| {r.get('peak_GiB', r.get('error', 'n/a'))} | {memory:.2f} | {r.get('bytes_per_s', 'n/a')}{mark(r)} "
              f"| {a.get('bytes_per_s', a.get('error', 'n/a'))}{mark(a) if a else ''} | {atomic:.2f} |")
    walls["mlm_ours_s"] = round(time.time() - started) - walls["mlm_peer_s"]
    pairs_peer = [] if args.no_peer or not args.pairs_plan else peer(
        os.path.join(os.path.dirname(args.peer), "torch_siglip_step.py"), args.pairs_plan, args.out, cache,
        "torch_siglip.json")
    walls["pairs_peer_s"] = round(time.time() - started) - walls["mlm_peer_s"] - walls["mlm_ours_s"]
    for index, item in enumerate(args.pairs_plan):
        tier, pairs, text, recompute = item.split(":")
        kept = dict(k.split("=") for k in args.kept).get(item, "0")
        mine = ours(args.build, tier, 0, 4096, int(text), bool(int(recompute)), False, args.steps,
                    ["--pairs", pairs, "--text", text, "--kept", kept, "--keep-attention", "1" if kept != "0" else "0"])
        theirs = pairs_peer[index] if isinstance(pairs_peer, list) and index < len(pairs_peer) else {}
        pairs_table.append(dict(plan=item, peer=theirs, ours=mine))
        save()
    walls["total_s"] = round(time.time() - started)
    save(row=False)
    if pairs_table:
        print("\n| tier | text bytes | recompute | peer pairs/s | ours pairs/s | ratio | peer GiB | ours GiB | our kept blocks |")
        print("|---|---|---|---|---|---|---|---|---|")
    for row in pairs_table:
        p, o = row["peer"], row["ours"]
        tier, _, text, recompute = row["plan"].split(":")
        ratio = o.get("pairs_per_s", 0) / p["pairs_per_s"] if p.get("pairs_per_s") else float("nan")
        print(f"| {tier} | {text} | {recompute} | {p.get('pairs_per_s', p.get('error', 'n/a'))} "
              f"| {o.get('pairs_per_s', o.get('error', 'n/a'))}{'' if o.get('cudnn', 1) else ' (no cuDNN)'} | {ratio:.2f} | {p.get('peak_GiB', 'n/a')} "
              f"| {o.get('peak_GiB', 'n/a')} | {o.get('kept_blocks', 0)}{' + attention' if o.get('keep_attention') else ''} |")


if __name__ == "__main__":
    main()
