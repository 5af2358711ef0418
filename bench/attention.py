#!/usr/bin/env python3
"""Our attention kernels beside cuDNN's fused attention and FlashAttention (both through PyTorch's
scaled_dot_product_attention backends) on the same card, in one run: equal segments of 512 and
4096 cells, 65536 cells, heads of 64, BF16, forward and backward. TFLOP/s count 4 s d per cell and
head forward and 2.5 times that backward for every system. Writes OUT/attention.json.

    python3 bench/attention.py --build build-gpu
"""
import argparse
import json
import os
import subprocess


def torch_row(backend, cells, width, segment, repeats):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    heads, batch = width // 64, cells // segment
    q, k, v = (torch.randn(batch, heads, segment, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    grad = torch.randn_like(q)
    chosen = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}[backend]
    with sdpa_kernel(chosen):
        def forward():
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=0.125)
        for _ in range(2):
            forward().backward(grad)
        torch.cuda.synchronize()
        e0, e1, e2 = (torch.cuda.Event(enable_timing=True) for _ in range(3))
        e0.record()
        for _ in range(repeats):
            out = forward()
        e1.record()
        for _ in range(repeats):
            out.backward(grad, retain_graph=True)
        e2.record()
        torch.cuda.synchronize()
    forward_ms, backward_ms = e0.elapsed_time(e1) / repeats, e1.elapsed_time(e2) / repeats
    flops = 4.0 * cells * segment * 64 * heads
    return dict(system=backend, cells=cells, width=width, segment=segment, forward_ms=round(forward_ms, 3),
                backward_ms=round(backward_ms, 3), forward_tflops=round(flops / forward_ms / 1e9, 1),
                backward_tflops=round(2.5 * flops / backward_ms / 1e9, 1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default="build-gpu")
    parser.add_argument("--out", default=os.environ.get("OUT", "bench/out"))
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for width in (512, 1024):
        for segment in (512, 4096):
            done = subprocess.run([os.path.join(args.build, "uform_bench_attention"), "--width", str(width), "--segment",
                                   str(segment), "--repeats", str(args.repeats)], capture_output=True, text=True)
            rows.append(json.loads(done.stdout) if done.returncode == 0 else dict(system="uform", error=done.stderr[-300:]))
            for backend in ("cudnn", "flash"):
                try:
                    rows.append(torch_row(backend, 65536, width, segment, args.repeats))
                except Exception as error:  # a backend the card or build lacks
                    rows.append(dict(system=backend, width=width, segment=segment, error=repr(error)[:200]))
    print("| system | width | segment | forward ms | backward ms | forward TFLOP/s | backward TFLOP/s |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row.get('system')} | {row.get('width')} | {row.get('segment')} | {row.get('forward_ms', row.get('error'))} "
              f"| {row.get('backward_ms', '')} | {row.get('forward_tflops', '')} | {row.get('backward_tflops', '')} |")
    with open(os.path.join(args.out, "attention.json"), "w") as file:
        json.dump(rows, file, indent=1)


if __name__ == "__main__":
    main()
