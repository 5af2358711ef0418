#!/usr/bin/env python3
"""The image-caption training peer: SPEC.md's encoder, its vision frontend and 2D M-RoPE, the
attention pool and Matryoshka SigLIP in PyTorch, given its best (bf16 autocast, torch.compile,
flash attention through SDPA, fused AdamW, activation checkpointing optional).

Each step embeds `pairs` images of `rows x columns` patches (1024 values each, uniform in [0, 1],
copied from pinned host memory as a DataLoader with pin_memory would hand them over) and `pairs`
captions of `caption` random bytes, as two batches of one item per row (the peer does not pack),
and scores image i against caption j. Modelled on ../shared/peers/torch_siglip_step.py; prints one
JSON line per plan item with pairs/s and writes $OUT/torch_image.json.

    python3 bench/torch_image_step.py [tier:pairs:ROWSxCOLUMNS:caption_bytes:recompute ...]
    python3 bench/torch_image_step.py --check    # a small model, two steps: finite loss, M-RoPE as SPEC.md
    python3 bench/torch_image_step.py --profile [ITEM]  # one step's kernels by name, $OUT/torch_image_profile.json
"""
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint

TIERS = {"tiny": (512, 12, (64, 128, 256, 512)), "small": (1024, 12, (64, 128, 256, 512, 1024))}
PLAN = ["tiny:512:22x23:64:0", "tiny:1024:22x23:64:1"]
PATCH = 1024  # 16 x 16 RGBA values a patch
# M-RoPE (SPEC.md section 2): 32 slots, inv_freq[j] = 10000^(-j/32); slots 0..7 read t, 8..19 h, 20..31 w.
AXIS_OF_SLOT = [0] * 8 + [1] * 12 + [2] * 12


def rope_tables(positions):
    """cos and sin [cells, 1, 32] for (t, h, w) coordinates [cells, 3], in Float32."""
    slots = torch.arange(32, device=positions.device, dtype=torch.float32)
    inverse = 10000.0 ** (-slots / 32.0)
    axis = torch.tensor(AXIS_OF_SLOT, device=positions.device)
    angles = positions.float()[:, axis] * inverse  # [cells, 32]
    return angles.cos()[:, None, :], angles.sin()[:, None, :]


def image_positions(rows, columns, device):
    """t = 0, h = patch row, w = patch column, the patches row by row."""
    h = torch.arange(rows, device=device).repeat_interleave(columns)
    w = torch.arange(columns, device=device).repeat(rows)
    return torch.stack([torch.zeros_like(h), h, w], -1)


def text_positions(length, device):
    """t = h = w = the byte's index: plain 1D RoPE."""
    return torch.arange(length, device=device)[:, None].expand(length, 3)


def rotate(x, cos, sin):
    """Element j of a head pairs with j + 32 ("rotate half")."""
    first, second = x[..., :32], x[..., 32:]
    return torch.cat([first * cos - second * sin, second * cos + first * sin], -1)


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.attn_norm, self.mlp_norm = nn.RMSNorm(width, eps=1e-6), nn.RMSNorm(width, eps=1e-6)
        self.qkv, self.out = nn.Linear(width, 3 * width, bias=False), nn.Linear(width, width, bias=False)
        self.gate_up, self.down = nn.Linear(width, 8 * width, bias=False), nn.Linear(4 * width, width, bias=False)
        self.heads = width // 64

    def forward(self, x, cos, sin):
        items, cells, width = x.shape
        q, k, v = self.qkv(self.attn_norm(x)).view(items, cells, 3, self.heads, 64).unbind(2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        x = x + self.out(y.transpose(1, 2).reshape(items, cells, width))
        gate, up = self.gate_up(self.mlp_norm(x)).chunk(2, -1)
        return x + self.down(F.silu(gate) * up)


class Embedder(nn.Module):
    """Both frontends into one encoder; `images` and `texts` are compiled apart (one shape each)."""

    def __init__(self, width, depth):
        super().__init__()
        self.bytes = nn.Embedding(258, width)
        self.patch = nn.Linear(PATCH, width)  # vision.patch [d, 1024] and vision.bias [d]
        nn.init.zeros_(self.patch.bias)
        self.blocks = nn.ModuleList(Block(width) for _ in range(depth))
        self.final_norm = nn.RMSNorm(width, eps=1e-6)
        self.query = nn.Parameter(torch.zeros(width))
        self.proj = nn.Linear(width, width, bias=False)
        self.scale, self.bias = nn.Parameter(torch.tensor(2.302585)), nn.Parameter(torch.tensor(-10.0))
        self.heads = width // 64
        self.recompute = False

    def encode(self, x, positions):
        items, cells, _ = x.shape
        cos, sin = (t.to(torch.bfloat16) for t in rope_tables(positions))  # the products' dtype under autocast
        for block in self.blocks:
            if self.recompute:
                x = torch.utils.checkpoint.checkpoint(block, x, cos, sin, use_reentrant=False)
            else:
                x = block(x, cos, sin)
        h = self.final_norm(x).view(items, cells, self.heads, 64)
        alpha = torch.einsum("hc,bthc->bht", self.query.view(self.heads, 64), h).float().div(8.0).softmax(-1)
        return self.proj(torch.einsum("bht,bthc->bhc", alpha.to(h.dtype), h).reshape(items, -1))

    # Both frontends hand the blocks a Float32 residual stream, as the byte lookup does under autocast.
    def images(self, patches, rows, columns):  # patches [items, rows x columns, 1024] in [0, 1]
        return self.encode(self.patch(patches).float(), image_positions(rows, columns, patches.device))

    def texts(self, ids):  # ids [items, bytes]
        return self.encode(self.bytes(ids).float(), text_positions(ids.shape[1], ids.device))


def siglip(u, v, widths, scale, bias):
    """Matryoshka SigLIP, image i's positive is caption i: mean over widths of -(1/N) sum log sigmoid(y z)."""
    count = u.shape[0]
    labels = 2 * torch.eye(count, device=u.device) - 1
    total = 0
    for m in widths:
        z = scale.exp() * F.normalize(u[:, :m].float(), dim=-1) @ F.normalize(v[:, :m].float(), dim=-1).T + bias
        total = total - F.logsigmoid(labels * z).sum() / count
    return total / len(widths)


def parse(item):
    tier, pairs, grid, caption, recompute = item.split(":")
    rows, columns = (int(n) for n in grid.lower().split("x"))
    return tier, int(pairs), rows, columns, int(caption), bool(int(recompute))


def run(tier, pairs, rows, columns, caption, recompute, steps=10, warmup=3, device="cuda", shape=None, compile=True,
        profile=0):
    """Times `steps` steps after `warmup`; with `profile` N, instead one step's kernels under torch.profiler
    (profile_peer.kernel_table, the top N printed), beside which `gpu.sh images-profile` puts ncu's of ours."""
    width, depth, widths = shape or TIERS[tier]
    patches = rows * columns
    torch.manual_seed(0)
    model = Embedder(width, depth).to(device)
    model.recompute = recompute
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device == "cuda")
    images = torch.compile(model.images, dynamic=False) if compile else model.images
    texts = torch.compile(model.texts, dynamic=False) if compile else model.texts
    # Two host batches of patches, pinned, alternating: each step copies one up without blocking.
    pinned = device == "cuda"
    host = [torch.rand(pairs, patches, PATCH, device=device).to(torch.bfloat16).cpu() for _ in range(2)]
    host = [h.pin_memory() for h in host] if pinned else host
    if pinned:  # the peak counts the step, not the drawing of the patches
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    losses = []

    def step(index):
        pixels = host[index & 1].to(device, non_blocking=pinned)
        ids = torch.randint(0, 256, (pairs, caption), device=device)
        with torch.autocast(device, dtype=torch.bfloat16):
            u, v = images(pixels, rows, columns), texts(ids)
        loss = siglip(u, v, widths, model.scale, model.bias)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.detach())

    for index in range(warmup):
        step(index)
    if profile:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from profile_peer import kernel_table
        table = kernel_table(lambda: step(warmup), f"peer {tier} {pairs} pairs, {rows}x{columns} patches, {caption}-byte captions", profile)
        return dict(peer="torch-image", tier=tier, pairs=pairs, grid=f"{rows}x{columns}", caption_bytes=caption, **table)
    if device != "cuda":
        for index in range(steps):
            step(index)
        return dict(losses=[float(x) for x in losses])
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(True), torch.cuda.Event(True)
    start.record()
    for index in range(steps):
        step(index)
    stop.record()
    torch.cuda.synchronize()
    seconds = start.elapsed_time(stop) / 1e3 / steps
    peak = torch.cuda.max_memory_allocated() / 2**30
    torch.cuda.reset_peak_memory_stats()
    del model, optimizer, images, texts, host
    torch.cuda.empty_cache()
    return dict(peer="torch-image", tier=tier, pairs=pairs, patches=patches, grid=f"{rows}x{columns}", caption_bytes=caption,
                recompute=recompute, step_ms=round(seconds * 1e3, 1), pairs_per_s=round(pairs / seconds),
                cells_per_s=round(pairs * (patches + caption) / seconds), peak_GiB=round(peak, 1),
                loss_first=round(float(losses[0]), 4), loss_last=round(float(losses[-1]), 4))


def check():
    """M-RoPE against SPEC.md element by element, 1D RoPE where t = h = w, and two finite steps."""
    positions = image_positions(3, 4, "cpu")
    assert positions[5].tolist() == [0, 1, 1] and positions[11].tolist() == [0, 2, 3], positions
    x = torch.randn(12, 2, 64, dtype=torch.float64)
    cos, sin = rope_tables(positions)
    y = rotate(x, cos.double(), sin.double())
    for cell in range(12):
        for j in range(32):
            angle = float(positions[cell, AXIS_OF_SLOT[j]]) * 10000.0 ** (-j / 32.0)
            a, b = x[cell, :, j], x[cell, :, j + 32]
            expect_a = a * torch.cos(torch.tensor(angle, dtype=torch.float64)) - b * torch.sin(torch.tensor(angle, dtype=torch.float64))
            expect_b = b * torch.cos(torch.tensor(angle, dtype=torch.float64)) + a * torch.sin(torch.tensor(angle, dtype=torch.float64))
            # Float32 angles and tables: a few ulp of Float32 at |angle| <= 3 and |x| of a few.
            assert torch.allclose(y[cell, :, j], expect_a, atol=1e-5) and torch.allclose(y[cell, :, j + 32], expect_b, atol=1e-5)
    one_d = rope_tables(text_positions(7, "cpu"))
    angles = torch.arange(7, dtype=torch.float32)[:, None] * 10000.0 ** (-torch.arange(32) / 32.0)
    assert torch.allclose(one_d[0][:, 0], angles.cos()) and torch.allclose(one_d[1][:, 0], angles.sin())
    device = "cuda" if torch.cuda.is_available() else "cpu"
    result = run("check", 4, 2, 3, 8, False, steps=1, warmup=2, device=device, shape=(128, 2, (64, 128)), compile=False)
    losses = result["losses"] if "losses" in result else [result["loss_first"], result["loss_last"]]
    assert all(torch.isfinite(torch.tensor(losses))), losses
    # z = e^scale cos - 10 lies in [-20, 0] at the start: a positive's term is at most log(1 + e^20),
    # a negative's at most log 2, so one width's loss is below 20.7 + (N - 1) log 2 = 22.8 for N = 4.
    assert all(0 < float(x) < 22.8 for x in losses), losses
    print(json.dumps(dict(peer="torch-image", check="passed", device=device, losses=[round(float(x), 4) for x in losses])))


def main():
    arguments = sys.argv[1:]
    if arguments == ["--check"]:
        check()
        return
    if arguments[:1] == ["--profile"]:  # --profile ITEM: one step's kernels (bench/profile_peer.py's table)
        result = run(*parse(arguments[1] if len(arguments) > 1 else PLAN[0]), profile=30)
        with open(os.path.join(os.environ.get("OUT", "/tmp"), "torch_image_profile.json"), "w") as file:
            json.dump(result, file, indent=1)
        return
    plan = [parse(item) for item in (arguments or PLAN)]
    print("torch", torch.__version__, torch.cuda.get_device_name(), flush=True)
    results = []
    for item in plan:
        try:
            result = run(*item)
        except torch.OutOfMemoryError:
            result = dict(peer="torch-image", plan=list(item), error="out of memory")
            torch.cuda.empty_cache()
        results.append(result)
        print(json.dumps(result), flush=True)
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "torch_image.json"), "w") as file:
        json.dump(results, file, indent=1)


if __name__ == "__main__":
    main()
