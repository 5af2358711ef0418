#!/usr/bin/env python3
"""distributed_model.py: the cost model of docs/distributed.md, no GPU needed. Prints the bytes each
collective moves a step, the step time and scaling it predicts at W GPUs from the measured one-GPU
step times of docs/cuda.md, and the largest global contrastive batch per tier and GPU count from the
step's memory layout (src/cuda/step.c) on an H200. Every constant marked ASSUMED is a guess to be
replaced by a measurement on the x2 / x4 machines; the MEASURED ones come from docs/cuda.md.

    python3 bench/distributed_model.py [--json FILE] [--usable-gib 136] [--nvlink 360] [--nic 40] [--pcie 20]
"""

import argparse
import json
import math

# tiers (SPEC.md section 6): width, depth, Matryoshka widths; the largest width is E
TIERS = {
    "tiny": (512, 12, (64, 128, 256, 512)),
    "small": (1024, 12, (64, 128, 256, 512, 1024)),
    "medium": (1024, 24, (64, 128, 256, 512, 1024)),
    "large": (2048, 24, (64, 128, 256, 512, 1024, 2048)),
    "xl": (2048, 48, (64, 128, 256, 512, 1024, 2048)),
}
COLBERT = 128

# MEASURED one-GPU steps (docs/cuda.md, H200): (objective, tier, pairs, text bytes, ms a step, note)
ROWS = [
    ("contrastive", "tiny", 1024, 128, 227.6, "recompute off; gpu.sh ab median"),
    ("contrastive", "tiny", 1024, 256, 1024 / 1675 * 1e3, "recompute on; 1,675 pairs/s"),
    ("contrastive", "small", 1024, 256, 1716.6, "recompute on, 2 blocks kept; gpu.sh ab median"),
    ("masked bytes", "tiny", 0, 0, 133.3, "16 x 4096 cells; gpu.sh ab median"),
    ("masked bytes", "small", 0, 0, 65536 / 204949 * 1e3, "16 x 4096 cells; 204,949 bytes/s"),
]
OPTIMIZER_MS_TINY = 2.3  # MEASURED: Adafactor's kernels, tiny (docs/cuda.md's profile); scaled by parameters

NVLINK_GBS = 360.0   # ASSUMED: NCCL's ring bandwidth a GPU over NVLink 4 without NVLS (450 GB/s a direction, 80%)
NIC_GBS = 40.0       # ASSUMED: one 400 Gb/s InfiniBand NIC a GPU at 80%
PCIE_GBS = 20.0      # ASSUMED: no peer-to-peer between the GPUs (a VM): NCCL stages through host memory
GPUS_PER_NODE = 8
LATENCY_NVLINK = 10e-6  # ASSUMED: seconds a hop of a small collective on one node, log2(W) hops
LATENCY_IB = 20e-6      # ASSUMED: across nodes
BAND_TFLOPS = 20.0      # ASSUMED: objectives.cu's Float32 SigLIP tiles, effective
SKEW = 0.01             # ASSUMED: the spread (one standard deviation) of one rank's step time, as a share of it
# expected maximum of W standard normals: a step waits for its slowest rank at each collective
MAX_OF_NORMALS = {1: 0.0, 2: 0.564, 4: 1.029, 8: 1.424, 16: 1.766, 32: 2.070, 64: 2.335, 128: 2.580, 256: 2.806}

# the memory layout, fitted to docs/cuda.md's tiny 256-byte row and within 1% of its two other rows:
# bytes a cell and unit of width: recompute on 4L + 97 (each block's Float32 input, one shared set of
# activations, the backward's buffers); recompute off 44L + 57
PARAMETER_BYTES = 10  # BF16 master 2 + Float32 gradient 4 + Float32 first moment 4 (R and C are vectors)
RESERVE_GIB = 3.0     # ASSUMED: CUDA context, NCCL's buffers, cuBLASLt's 64 MiB workspace
DEVICE_GIB = 139.0    # ASSUMED: an H200's memory usable on the GPU machines, about 139 GiB


def parameters(tier):
    d, depth, widths = TIERS[tier]
    # blocks (qkv 3d^2, out d^2, gate_up 8d^2, down 4d^2, two norms), bytes, pool.proj, pool.query, final norm
    return depth * (16 * d * d + 2 * d) + 258 * d + widths[-1] * d + 2 * d + 2


def collective_seconds(kind, per_rank_bytes, world, nodes_bound):
    """A ring collective's seconds: `per_rank_bytes` is what one rank holds before an all-gather
    (after a reduce-scatter), or the whole buffer of an all-reduce. nodes_bound, across nodes:
    'optimistic' (every NIC of a node carries its share), 'pessimistic' (one NIC's bandwidth a GPU);
    on one node: 'pcie' (no peer-to-peer), anything else NVLink."""
    if world == 1:
        return 0.0
    nodes = max(1, world // GPUS_PER_NODE)
    if nodes == 1 and nodes_bound == "pcie":
        bandwidth, latency = PCIE_GBS, LATENCY_NVLINK
    elif nodes == 1:
        bandwidth, latency = NVLINK_GBS, LATENCY_NVLINK
    elif nodes_bound == "optimistic":
        bandwidth, latency = min(NVLINK_GBS, GPUS_PER_NODE * NIC_GBS), LATENCY_IB
    else:
        bandwidth, latency = NIC_GBS, LATENCY_IB
    if kind == "all_reduce":
        moved = 2 * (world - 1) / world * per_rank_bytes
    else:  # all_gather, reduce_scatter: each rank receives (sends) every other rank's part
        moved = (world - 1) * per_rank_bytes
    return latency * math.ceil(math.log2(world)) + moved / (bandwidth * 1e9)


def step_model(row, world, nodes_bound="optimistic", zero1=False, skew=None):
    objective, tier, pairs, text, one_gpu_ms, _ = row
    d, depth, widths = TIERS[tier]
    e, p = widths[-1], parameters(tier)
    parts = {"counts all-reduce": collective_seconds("all_reduce", 64, world, nodes_bound)}
    if objective == "contrastive":
        candidates = pairs  # the benchmark's rows: one positive a pair, no hard negative
        # Float32 embeddings of E plus 16 bytes of content keys a candidate
        parts["embeddings all-gather"] = collective_seconds("all_gather", candidates * (4 * e + 16), world, nodes_bound)
        parts["embedding gradients reduce-scatter"] = collective_seconds("reduce_scatter", candidates * 4 * e, world,
                                                                         nodes_bound)
        band_flops = 6 * pairs * candidates * sum(widths)  # logits, dU, dV for each width, at W = 1
        parts["band's growth"] = (world - 1) * band_flops / (BAND_TFLOPS * 1e12)
    if zero1:
        parts["gradients reduce-scatter"] = collective_seconds("reduce_scatter", 4 * p / world, world, nodes_bound)
        parts["parameters all-gather"] = collective_seconds("all_gather", 2 * p / world, world, nodes_bound)
        parts["optimizer sharded"] = -OPTIMIZER_MS_TINY * 1e-3 * p / parameters("tiny") * (world - 1) / world
    else:
        parts["gradients all-reduce"] = collective_seconds("all_reduce", 4 * p, world, nodes_bound)
    parts["slowest rank"] = (SKEW if skew is None else skew) * one_gpu_ms * 1e-3 * MAX_OF_NORMALS.get(world, math.sqrt(2 * math.log(world)))
    seconds = one_gpu_ms * 1e-3 + sum(parts.values())
    return dict(objective=objective, tier=tier, pairs=pairs, text=text, world=world, nodes_bound=nodes_bound,
                zero1=zero1, one_gpu_ms=round(one_gpu_ms, 1), step_ms=round(seconds * 1e3, 2),
                scaling=round(world * one_gpu_ms * 1e-3 / seconds, 3),
                parts_ms={k: round(v * 1e3, 3) for k, v in parts.items()})


def bytes_per_step(tier, world, anchors=1024, candidates=2048, text=256):
    """What one rank sends a step (ring), by collective, in MB."""
    d, depth, widths = TIERS[tier]
    e, p = widths[-1], parameters(tier)
    mb = lambda x: round(x / 1e6, 2)
    return dict(tier=tier, world=world,
                embeddings_all_gather=mb((world - 1) * candidates * (4 * e + 16)),
                embedding_gradients_reduce_scatter=mb((world - 1) * candidates * 4 * e),
                tcr_gram_all_reduce=mb(2 * (world - 1) / world * e * e * 8),
                colbert_all_gather=mb((world - 1) * candidates * text * COLBERT * 4),
                gradients_all_reduce=mb(2 * (world - 1) / world * 4 * p),
                zero1_reduce_scatter_and_all_gather=mb((world - 1) / world * 6 * p))


def rank_bytes(tier, anchors, world, hard_negatives=1, text=256, zero1=False):
    """Device bytes of one rank's contrastive step with `anchors` pairs of `text`-byte texts, recompute on."""
    d, depth, widths = TIERS[tier]
    e, p = widths[-1], parameters(tier)
    texts_per_pair = 2 + hard_negatives
    cells = anchors * texts_per_pair * text
    local_candidates = anchors * (1 + hard_negatives)
    global_candidates = world * local_candidates
    state = (6 + 4 / world) * p if zero1 else PARAMETER_BYTES * p
    activations = cells * d * (4 * depth + 97)
    # SigLIP's scratch over local anchors x global candidates (objectives.cu: normalized rows and their
    # gradient, norms, the weighted band), the gathered embeddings, their gradients' partials, labels, keys
    stack = anchors + global_candidates
    band = 4 * (2 * stack * e + stack + anchors * global_candidates) + 8 * global_candidates * e \
        + anchors * global_candidates + 16 * global_candidates
    local = 2 * anchors * texts_per_pair * e * 4  # the local embeddings and their gradient
    return state + activations + band + local


def largest_batch(tier, world, usable_gib, zero1=False):
    usable = usable_gib * 2**30
    low, high = 0, 1 << 20
    while low < high:
        middle = (low + high + 1) // 2
        if rank_bytes(tier, middle, world, zero1=zero1) <= usable:
            low = middle
        else:
            high = middle - 1
    return low


def main():
    global NVLINK_GBS, NIC_GBS, PCIE_GBS
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write every table here")
    parser.add_argument("--usable-gib", type=float, default=DEVICE_GIB - RESERVE_GIB)
    parser.add_argument("--nvlink", type=float, default=NVLINK_GBS, help="GB/s a GPU, NCCL over NVLink")
    parser.add_argument("--nic", type=float, default=NIC_GBS, help="GB/s a GPU, NCCL over InfiniBand")
    parser.add_argument("--pcie", type=float, default=PCIE_GBS, help="GB/s a GPU, NCCL without peer-to-peer")
    args = parser.parse_args()
    NVLINK_GBS, NIC_GBS, PCIE_GBS = args.nvlink, args.nic, args.pcie
    result = dict(assumed=dict(nvlink_GBs=NVLINK_GBS, nic_GBs=NIC_GBS, pcie_GBs=PCIE_GBS, gpus_per_node=GPUS_PER_NODE,
                               band_tflops=BAND_TFLOPS, skew=SKEW, usable_GiB=args.usable_gib))

    print("Bytes one rank sends a step, MB (1,024 anchors, 2,048 candidates of 256 bytes; ring algorithms)\n")
    print("| tier | W | embeddings all-gather | their gradients reduce-scatter | TCR Gram all-reduce | ColBERT all-gather (rerank) | gradients all-reduce | ZeRO-1 reduce-scatter + all-gather |")
    print("|---|---|---|---|---|---|---|---|")
    result["bytes"] = []
    for tier in TIERS:
        for world in (2, 8, 64):
            b = bytes_per_step(tier, world)
            result["bytes"].append(b)
            print(f"| {tier} | {world} | {b['embeddings_all_gather']} | {b['embedding_gradients_reduce_scatter']} | "
                  f"{b['tcr_gram_all_reduce']} | {b['colbert_all_gather']} | {b['gradients_all_reduce']} | "
                  f"{b['zero1_reduce_scatter_and_all_gather']} |")

    print("\nPredicted step time and scaling (global throughput over one GPU's)\n")
    print("| objective | tier | pairs, text | one GPU ms | W | links | step ms | scaling | largest parts (ms) |")
    print("|---|---|---|---|---|---|---|---|---|")
    result["steps"] = []
    for row in ROWS:
        for world, bound in ((2, "nvlink"), (4, "nvlink"), (8, "nvlink"), (2, "pcie"), (4, "pcie"),
                             (64, "optimistic"), (64, "pessimistic")):
            m = step_model(row, world, bound)
            m["links"] = bound
            result["steps"].append(m)
            top = sorted(m["parts_ms"].items(), key=lambda kv: -abs(kv[1]))[:2]
            shape = f"{row[2]}, {row[3]} B" if row[2] else "16 x 4096"
            print(f"| {row[0]} | {row[1]} | {shape} | {m['one_gpu_ms']} | {world} | {bound} | {m['step_ms']} | "
                  f"{m['scaling']} | {', '.join(f'{k} {v}' for k, v in top)} |")
    print("\nIn short: scaling by links and W\n")
    print("| objective, tier | one GPU, ms | W = 2 | W = 4 | W = 8 | W = 2, no P2P | W = 4, no P2P | W = 64, optimistic / pessimistic |")
    print("|---|---|---|---|---|---|---|---|")
    for row in ROWS:
        x = {(m["world"], m["links"]): m["scaling"] for m in result["steps"] if m["one_gpu_ms"] == round(row[4], 1)
             and m["tier"] == row[1] and m["objective"] == row[0]}
        name = f"{row[0]} {row[1]}" + (f", {row[3]}-byte texts" if row[2] else "")
        print(f"| {name} | {row[4]:,.1f} | {x[2, 'nvlink']:.2f} | {x[4, 'nvlink']:.2f} | {x[8, 'nvlink']:.2f} | "
              f"{x[2, 'pcie']:.2f} | {x[4, 'pcie']:.2f} | {x[64, 'optimistic']:.1f} / {x[64, 'pessimistic']:.1f} |")
    print("\nThe gradient all-reduce against ZeRO-1 (reduce-scatter, Adafactor on a 1/W shard, all-gather), one node\n")
    print("| objective | tier | pairs, text | W | step ms, all-reduce | step ms, ZeRO-1 |")
    print("|---|---|---|---|---|---|")
    result["zero1"] = []
    for row in ROWS:
        for world in (2, 8):
            plain, zero1 = step_model(row, world), step_model(row, world, zero1=True)
            result["zero1"].append(zero1)
            shape = f"{row[2]}, {row[3]} B" if row[2] else "16 x 4096"
            print(f"| {row[0]} | {row[1]} | {shape} | {world} | {plain['step_ms']} | {zero1['step_ms']} |")
    print("\nScaling of the first contrastive row against the spread of one rank's step time (one node)\n")
    print("| spread | W = 2 | W = 4 | W = 8 |")
    print("|---|---|---|---|")
    result["skew"] = []
    for skew in (0.0, 0.01, 0.03, 0.05, 0.10):
        scalings = [step_model(ROWS[0], world, skew=skew)["scaling"] for world in (2, 4, 8)]
        result["skew"].append(dict(skew=skew, scaling=scalings))
        print(f"| {skew:.0%} | " + " | ".join(f"{x:.2f}" for x in scalings) + " |")

    print(f"\nLargest global contrastive batch (pairs; a pair = query, positive, one hard negative of 256 bytes; "
          f"recompute on; {args.usable_gib:.0f} GiB usable a GPU)\n")
    worlds = (1, 2, 4, 8, 64, 512, 4096)  # one node, then 8, 64 and 512 nodes of 8
    print("| tier | parameters | " + " | ".join(f"W = {w}" for w in worlds) + " |")
    print("|---|---|" + "---|" * len(worlds))
    result["largest"] = []
    for tier in TIERS:
        cells = []
        for world in worlds:
            per_gpu = largest_batch(tier, world, args.usable_gib)
            per_gpu_zero1 = largest_batch(tier, world, args.usable_gib, zero1=True)
            result["largest"].append(dict(tier=tier, world=world, per_gpu=per_gpu, per_gpu_zero1=per_gpu_zero1,
                                          global_pairs=world * per_gpu))
            cells.append(f"{world * per_gpu:,} ({per_gpu:,})")
        print(f"| {tier} | {parameters(tier) / 1e6:.0f} M | " + " | ".join(cells) + " |")
    print("\nWith ZeRO-1 (Adafactor's first moment sharded), pairs a GPU at W = 8: " + ", ".join(
        f"{tier} {largest_batch(tier, 8, args.usable_gib, zero1=True):,}" for tier in TIERS))
    if args.json:
        with open(args.json, "w") as file:
            json.dump(result, file, indent=1)


if __name__ == "__main__":
    main()
