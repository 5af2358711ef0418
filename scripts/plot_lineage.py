#!/usr/bin/env python3
"""plot_lineage.py: the loss curves of a lineage (scripts/device/lineage.py's RUNS/STAGE/RUN/log.jsonl)
in one PNG, a panel a stage, a line a run (the TCR run's SigLIP part dashed beside its total).

    python3 scripts/plot_lineage.py RUNS [-o lineage-loss.png]
"""
import argparse
import json
import pathlib
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", help="the lineage's runs folder (runs/lineage)")
    parser.add_argument("-o", "--output", default="lineage-loss.png")
    args = parser.parse_args()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    stages = [stage for stage in ("base", "reranker", "embedder") if (pathlib.Path(args.runs) / stage).is_dir()]
    if not stages:
        sys.exit(f"plot_lineage: {args.runs} holds no base, reranker or embedder folder")
    figure, axes = plt.subplots(1, len(stages), figsize=(5 * len(stages), 3.6), squeeze=False)
    for axis, stage in zip(axes[0], stages):
        for log in sorted((pathlib.Path(args.runs) / stage).glob("*/log.jsonl")):
            lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
            steps = [line["step"] for line in lines]
            axis.plot(steps, [line["loss"] for line in lines], label=log.parent.name, linewidth=0.8)
            if any(line.get("tcr") for line in lines):
                axis.plot(steps, [line["siglip"] for line in lines], "--", label=f"{log.parent.name} (SigLIP part)", linewidth=0.8)
        axis.set_title(stage), axis.set_xlabel("step"), axis.set_ylabel("loss"), axis.legend(fontsize=8)
        axis.set_ylim(bottom=0)
    figure.tight_layout()
    figure.savefig(args.output, dpi=110)
    print(f"plot_lineage: {args.output}")


if __name__ == "__main__":
    main()
