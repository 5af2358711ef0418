#!/usr/bin/env python3
# plot_loss.py: draws the loss curve of a `uform_base` run from its JSONL log into a PNG.
#
#   python3 scripts/plot_loss.py RUN/log.jsonl [-o loss.png] [--title TEXT]
import argparse
import json
import pathlib
import sys


def main():
    parser = argparse.ArgumentParser(description="Plot the loss of a uform_base run")
    parser.add_argument("log", help="the run's log.jsonl")
    parser.add_argument("-o", "--output", help="PNG to write (default: beside the log)")
    parser.add_argument("--title", default=None)
    args = parser.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_loss.py needs matplotlib: python3 -m pip install matplotlib")
    steps, parts = [], {}
    for number, line in enumerate(open(args.log), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            sys.exit(f"{args.log}:{number}: not JSON ({error})")
        if "step" not in record:
            continue
        steps.append(record["step"])
        for key in ("loss", "mlm", "siglip", "rerank", "tcr", "lipschitz"):
            if key in record and (key == "loss" or record[key]):
                parts.setdefault(key, []).append(record[key])
    if not steps:
        sys.exit(f"{args.log}: no steps logged")
    figure, axis = plt.subplots(figsize=(7, 4), dpi=120)
    for key, values in parts.items():
        if len(values) == len(steps):
            axis.plot(steps, values, label=key, linewidth=1.4 if key == "loss" else 0.8)
    axis.set_xlabel("step")
    axis.set_ylabel("loss")
    axis.grid(alpha=0.3)
    axis.legend()
    axis.set_title(args.title or pathlib.Path(args.log).parent.name)
    output = args.output or str(pathlib.Path(args.log).with_name("loss.png"))
    figure.tight_layout()
    figure.savefig(output)
    print(output)


if __name__ == "__main__":
    main()
