#!/usr/bin/env python3
"""The contrastive step on image-caption pairs beside its PyTorch peer, in one run on one card.

Runs bench/torch_image_step.py over the plan (each pair an image of ROWSxCOLUMNS patches and a
caption of some bytes, the peer's images and captions as two batches of one item per row), then our
uform_bench_train_cuda on the same pairs, packed into rows of 1024 columns two ways: first fit
(images and captions apart, the longer first), with the plan item's recomputation; and side by side
(each pair in one row, as the batcher places a record), always with recomputation, since an image
and a caption of more than half a row leave the rest of it padding and about twice the cells do not
fit without it. Prints one table of pairs/s (ours, peer, ratio) and writes OUT/train_images.json.

    python3 bench/train_images.py --build build-gpu [--plan tiny:512:22x23:64:0 ...] [--steps 10]
                                  [--no-peer] [--compile-cache DIR]
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_cuda import ours, parse_with_cache, peer  # noqa: E402  (the same runners as the text benchmark)

PLAN = ["tiny:512:22x23:64:0", "tiny:1024:22x23:64:1"]
LAYOUTS = {"first fit": ("0", None), "side by side": ("1", True)}  # --pack-pairs, recomputation (None: the plan's)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default="build-gpu", help="folder holding uform_bench_train_cuda")
    parser.add_argument("--peer", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_image_step.py"))
    parser.add_argument("--no-peer", action="store_true", help="time our step only")
    parser.add_argument("--plan", nargs="*", default=PLAN, help="tier:pairs:ROWSxCOLUMNS:caption_bytes:recompute(0/1)")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per row (after 3 warm-up)")
    args, cache = parse_with_cache(parser, "train_images.json")
    started, walls, table = time.time(), {}, []
    theirs = [] if args.no_peer else peer(args.peer, args.plan, args.out, cache, "torch_image.json")
    walls["peer_s"] = round(time.time() - started)

    def save():  # after every row, so a run cut short keeps what it measured
        with open(os.path.join(args.out, "train_images.json"), "w") as file:
            json.dump(dict(peer=theirs, rows=table, wall=walls), file, indent=1)

    for index, item in enumerate(args.plan):
        tier, pairs, grid, caption, recompute = item.split(":")
        row = dict(plan=item, peer=theirs[index] if isinstance(theirs, list) and index < len(theirs) else {})
        for name, (pack, recomputed) in LAYOUTS.items():
            on = bool(int(recompute)) if recomputed is None else recomputed
            row[name] = ours(args.build, tier, 0, 1024, int(caption), on, False, args.steps,
                             ["--pairs", pairs, "--text", caption, "--image", grid, "--pack-pairs", pack])
            print(json.dumps(row[name]), file=sys.stderr, flush=True)
        table.append(row)
        save()
    walls["total_s"] = round(time.time() - started)
    save()
    print("\n| tier | pairs | image | caption bytes | recompute | peer pairs/s | ours pairs/s (first fit) | ratio "
          "| ours pairs/s (side by side, recompute on) | ratio | peer GiB | ours GiB (first fit) | our rows |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in table:
        tier, pairs, grid, caption, recompute = row["plan"].split(":")
        p, fit, side = row["peer"], row["first fit"], row["side by side"]
        ratio = lambda o: f"{o['pairs_per_s'] / p['pairs_per_s']:.2f}" if p.get("pairs_per_s") and "pairs_per_s" in o else "n/a"
        rate = lambda o: f"{o.get('pairs_per_s', o.get('error', 'n/a'))}{'' if o.get('cudnn', 1) else ' (no cuDNN)'}"
        print(f"| {tier} | {pairs} | {grid} | {caption} | {recompute} | {p.get('pairs_per_s', p.get('error', 'n/a'))} "
              f"| {rate(fit)} | {ratio(fit)} | {rate(side)} | {ratio(side)} | {p.get('peak_GiB', 'n/a')} "
              f"| {fit.get('peak_GiB', 'n/a')} | {fit.get('rows', 'n/a')} / {side.get('rows', 'n/a')} |")


if __name__ == "__main__":
    main()
