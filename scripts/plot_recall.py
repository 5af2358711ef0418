#!/usr/bin/env python3
# plot_recall.py: draws Recall@1 against embedding width from uform_eval's JSON reports into a PNG:
# one colour per set of pairs, with its TF-IDF baseline (dotted) and chance (faint) drawn once;
# one line per report for the model (solid; a second checkpoint on the same pairs gets another
# marker) and one dashed for its MaxSim-reranked rows, when present.
#
#   python3 scripts/plot_recall.py REPORT.json [REPORT.json ...] [-o recall.png] [--direction D]
#                                  [--label NAME ...] [--title TEXT] [--height INCHES]
import argparse
import json
import pathlib
import sys


def rows_of(report, path, direction):
    """{method: {width: recall@1}} of the report's rows over all languages in one direction."""
    found = {}
    for row in report.get("rows", []):
        if row.get("language") != "all" or row.get("direction") not in (direction, "both"):
            continue
        found.setdefault(row["method"], {})[row["width"]] = row["recall@1"]
    if not found:
        sys.exit(f"{path}: no rows for direction '{direction}' (is it a uform_eval --json report?)")
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description="Plot Recall@1 against embedding width from uform_eval reports")
    parser.add_argument("reports", nargs="+", help="JSON files written by uform_eval --json")
    parser.add_argument("-o", "--output", default="recall.png", help="PNG to write (default: recall.png)")
    parser.add_argument("--direction", default="query->positive", choices=["query->positive", "positive->query"])
    parser.add_argument("--label", action="append", default=[], help="a name per report, in order (default: its pairs file)")
    parser.add_argument("--title", default=None)
    parser.add_argument("--height", type=float, default=4.2, help="figure height in inches (default 4.2; taller for many sets)")
    arguments = parser.parse_args(argv)
    if arguments.label and len(arguments.label) != len(arguments.reports):
        sys.exit(f"plot_recall.py: {len(arguments.label)} labels for {len(arguments.reports)} reports")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_recall.py needs matplotlib: python3 -m pip install matplotlib")
    figure, axis = plt.subplots(figsize=(9.5, arguments.height), dpi=120)
    all_widths, datasets, highest = set(), {}, 0.0
    for index, path in enumerate(arguments.reports):
        try:
            report = json.loads(pathlib.Path(path).read_text())
        except (OSError, json.JSONDecodeError) as error:
            sys.exit(f"{path}: {error}")
        rows = rows_of(report, path, arguments.direction)
        label = arguments.label[index] if arguments.label else pathlib.Path(report.get("pairs", path)).parent.name
        dataset = (report.get("pairs"), report.get("count"))
        first = dataset not in datasets
        datasets.setdefault(dataset, []).append(index)
        color, marker = f"C{list(datasets).index(dataset)}", "o^vsD"[(len(datasets[dataset]) - 1) % 5]
        model = {width: value for width, value in rows.get("model", {}).items() if width}
        widths = sorted(model)
        all_widths.update(widths)
        if widths:
            axis.plot(widths, [model[width] for width in widths], marker=marker, color=color, label=f"{label}: model")
        for method, values in rows.items():
            if method.startswith("model+maxsim"):
                reranked = sorted(width for width in values if width)
                axis.plot(reranked, [values[width] for width in reranked], marker=marker, linestyle="--", color=color,
                          label=f"{label}: model + {method.split('+', 1)[1]}")
        pairs = pathlib.PurePath(str(report.get("pairs", path)))
        name = f"{pairs.parent.name}/{pairs.name} ({report.get('count')})"
        if first and "tfidf" in rows:
            axis.axhline(rows["tfidf"][None], color=color, linestyle=":", linewidth=1.2, label=f"{name}: TF-IDF 3-5-grams")
        if first and "chance" in rows:
            axis.axhline(rows["chance"][None], color=color, linestyle="-", alpha=0.25, linewidth=1, label=f"{name}: chance")
        highest = max([highest, *(value for values in rows.values() for value in values.values())])
    if all_widths:
        axis.set_xscale("log", base=2)
        axis.set_xticks(sorted(all_widths))
        axis.set_xticklabels([str(width) for width in sorted(all_widths)])
    axis.set_xlabel("embedding width (Matryoshka prefix)")
    axis.set_ylabel(f"Recall@1, {arguments.direction}")
    axis.set_ylim(0, min(1.0, 1.25 * highest + 0.02))
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    axis.set_title(arguments.title or "Recall@1 against embedding width")
    figure.tight_layout()
    figure.savefig(arguments.output)
    print(arguments.output)


if __name__ == "__main__":
    main()
