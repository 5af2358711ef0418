#!/usr/bin/env python3
"""plot_lineage.py: the loss curves of a lineage (scripts/device/lineage.py's RUNS/STAGE/RUN/log.jsonl)
in one PNG, a panel a stage, a line a run (the TCR run's SigLIP part dashed beside its total). A
stage.json (what a device call brings back of a stage, e.g. a refine round) is a panel of its own,
from each run's "curve".

    python3 scripts/plot_lineage.py RUNS|STAGE.json... [-o lineage-loss.png]
"""
import argparse
import json
import pathlib
import statistics
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="the lineage's runs folder (runs/lineage), or a stage.json")
    parser.add_argument("-o", "--output", default="lineage-loss.png")
    args = parser.parse_args()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    panels = []  # (title, [(label, steps, losses, dashed)])
    for source in map(pathlib.Path, args.runs):
        if source.suffix == ".json":
            try:
                stage = json.loads(source.read_text())
                lines = [(name, [point[0] for point in run["curve"]], [point[1] for point in run["curve"]], False)
                         for name, run in stage["runs"].items() if run["curve"]]  # a run that logged no step has none
            except (OSError, ValueError, KeyError, TypeError, IndexError) as error:
                sys.exit(f"plot_lineage: {source}: not a stage.json with a curve per run ({error!r})")
            if lines:
                panels.append((f"{stage.get('stage', source.stem)} ({source.parent.name})", lines))
            continue
        for stage in ("base", "reranker", "embedder"):
            lines = []
            for log in sorted((source / stage).glob("*/log.jsonl")):
                records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
                steps = [record["step"] for record in records]
                lines.append((log.parent.name, steps, [record["loss"] for record in records], False))
                if any(record.get("tcr") for record in records):
                    lines.append((f"{log.parent.name} (SigLIP part)", steps, [record["siglip"] for record in records], True))
            if lines:
                panels.append((stage, lines))
    if not panels:
        sys.exit(f"plot_lineage: {', '.join(args.runs)}: nothing to draw (no base, reranker or embedder logs, no stage.json run with a curve)")
    figure, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.6), squeeze=False)
    for axis, (title, lines) in zip(axes[0], panels):
        for label, steps, losses, dashed in lines:
            raw = axis.plot(steps, losses, "--" if dashed else "-", linewidth=0.5, alpha=0.3)[0]
            window = max(1, len(losses) // 25)  # a running mean over 4% of the points: single batches are noisy
            smooth = [statistics.fmean(losses[max(0, i - window + 1):i + 1]) for i in range(len(losses))]
            axis.plot(steps, smooth, "--" if dashed else "-", color=raw.get_color(), label=label, linewidth=1.0)
        axis.set_title(title), axis.set_xlabel("step"), axis.set_ylabel("loss"), axis.legend(fontsize=8)
        axis.set_ylim(bottom=min(0, min(min(losses) for _, _, losses, _ in lines)))
    figure.tight_layout()
    figure.savefig(args.output, dpi=110)
    print(f"plot_lineage: {args.output}")


if __name__ == "__main__":
    main()
