#!/usr/bin/env python3
"""Where the PyTorch peer's masked-byte step spends its GPU time: one step of
../shared/peers/torch_mlm_step.py's model under torch.profiler, kernels summed by name.
The counterpart of scripts/device/kernel_times.py (ncu over our step).

    python3 bench/profile_peer.py --peer third_party/peers/torch_mlm_step.py tiny:16:4096:4096 [...]
"""
import argparse
import importlib.util
import json
import os

import torch
import torch.nn.functional as F


def load(path):
    spec = importlib.util.spec_from_file_location("peer", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def profile(peer, tier, rows, columns, segment, top):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    d, layers = peer.TIERS[tier]
    torch.manual_seed(0)
    model = peer.Encoder(d, layers).to("cuda")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    document = torch.arange(columns, device="cuda") // segment
    mask = create_block_mask(lambda b, h, q, k: document[q] == document[k], None, None, columns, columns, device="cuda")
    attention, forward = torch.compile(flex_attention), torch.compile(model)
    cos, sin = peer.rope_cache(columns, peer.HEAD)

    def step():
        ids = torch.randint(0, 256, (rows, columns), device="cuda")
        masked = torch.rand(rows, columns, device="cuda") < 0.15
        inputs = torch.where(masked, torch.full_like(ids, peer.MASK), ids)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = forward(inputs, cos, sin, mask, attention)
        F.cross_entropy(logits.float()[masked], ids[masked]).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(3):
        step()
    result = kernel_table(step, f"peer {tier} {rows}x{columns} segment {segment}", top)
    torch.cuda.empty_cache()
    return dict(tier=tier, rows=rows, columns=columns, segment=segment, **result)


def kernel_table(step, label, top):
    """One call of step() under torch.profiler: its CUDA kernels' times summed by name, printed best first
    as `label`, and returned as {total_ms, kernels}."""
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profiler:
        step()
        torch.cuda.synchronize()
    totals = {}
    for event in profiler.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            name = event.name[:90]
            entry = totals.setdefault(name, [0.0, 0])
            entry[0] += event.device_time_total if hasattr(event, "device_time_total") else event.cuda_time_total
            entry[1] += 1
    whole = sum(v[0] for v in totals.values())
    print(f"\n{label}: {whole / 1e3:.2f} ms over {sum(v[1] for v in totals.values())} kernels")
    ranked = sorted(totals.items(), key=lambda item: -item[1][0])
    for name, (micro, count) in ranked[:top]:
        print(f"{micro / 1e3:9.3f} ms {100 * micro / whole:5.1f}% {count:5d}  {name}")
    return dict(total_ms=whole / 1e3, kernels=[dict(name=n, ms=v[0] / 1e3, count=v[1]) for n, v in ranked])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peer", default="../shared/peers/torch_mlm_step.py")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--out", default=os.environ.get("OUT", "bench/out"))
    parser.add_argument("plan", nargs="*", default=["tiny:16:4096:4096", "tiny:16:4096:512"])
    args = parser.parse_args()
    peer = load(args.peer)
    results = []
    for item in args.plan:
        tier, rows, columns, segment = item.split(":")
        results.append(profile(peer, tier, int(rows), int(columns), int(segment), args.top))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "profile_peer.json"), "w") as file:
        json.dump(results, file, indent=1)


if __name__ == "__main__":
    main()
