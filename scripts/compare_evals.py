#!/usr/bin/env python3
"""compare_evals.py: is one run's recall really above or below another's, on the same pairs? Reads two
`uform_eval --json FILE --placements` reports and compares their rows query by query: the difference
of the means (B - A), a 95% interval for it from a paired bootstrap over the queries (each resample
draws the same queries for both), and an exact two-sided sign test over the queries where the two
differ. A difference whose interval holds zero is within the noise of these queries.

    python3 scripts/compare_evals.py A.json B.json [--a ROW] [--b ROW] [--metric recall@1]
                                     [--resamples 10000] [--seed 0] [--json OUT]

A ROW is a method, optionally at a width: `model@384`, `tfidf`, `model+fuse0.5@20@384`. Without --a
and --b every row of A that B has too (same method, output precision and width) is compared; with
them, row --a of A against row --b of B, both directions, so one report can hold both (B may be A's
file: `compare_evals.py run.json run.json --a tfidf --b model@384`). Both reports must score the
same pairs file with the same count.
"""

import argparse
import json
import math
import pathlib
import sys

import numpy as np

METRICS = ("recall@1", "recall@5", "recall@10", "mrr")


def per_query(placements, metric):
    """Each query's expected metric at its placement [better, tied]: every rank from better + 1 to
    better + tied + 1 equally likely, as uform_eval counts ties."""
    values = np.empty(len(placements))
    for index, (better, tied) in enumerate(placements):
        ranks = np.arange(better + 1, better + tied + 2, dtype=np.float64)
        if metric == "mrr":
            values[index] = np.mean(1.0 / ranks)
        else:
            values[index] = np.mean(ranks <= int(metric.split("@")[1]))
    return values


def paired_interval(a, b, resamples=10000, seed=0, level=0.95):
    """The central `level` interval of mean(b - a) over `resamples` paired bootstrap resamples."""
    difference = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    chunk = max(1, 4_000_000 // max(1, len(difference)))  # resample indices a chunk at a time
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        means[start:stop] = difference[rng.integers(0, len(difference), (stop - start, len(difference)))].mean(axis=1)
    tail = (1.0 - level) / 2.0
    return float(np.quantile(means, tail)), float(np.quantile(means, 1.0 - tail))


def sign_test(a, b):
    """(queries where b is higher, where a is higher, the exact two-sided binomial p at one half)."""
    difference = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    higher, lower = int(np.sum(difference > 0)), int(np.sum(difference < 0))
    trials = higher + lower
    if trials == 0:
        return higher, lower, 1.0
    tail = sum(math.comb(trials, k) for k in range(min(higher, lower) + 1))
    return higher, lower, min(1.0, 2.0 * tail / 2 ** trials)


def compared(placements_a, placements_b, metric="recall@1", resamples=10000, seed=0):
    """Two rows' placements of the same queries compared: the means, B - A, its paired interval and the sign test."""
    a, b = per_query(placements_a, metric), per_query(placements_b, metric)
    low, high = paired_interval(a, b, resamples, seed)
    higher, lower, p = sign_test(a, b)
    return {"metric": metric, "a": float(a.mean()), "b": float(b.mean()), "difference": float(b.mean() - a.mean()),
            "interval": [low, high], "b_higher": higher, "a_higher": lower, "p": p}


def parse_row(text):
    """'model@384' -> ('model', 384); 'tfidf' -> ('tfidf', None); the width is the last @ part if numeric."""
    method, _, width = text.rpartition("@")
    if method and width.isdigit():
        return method, int(width)
    return text, None


def load(path):
    try:
        report = json.loads(pathlib.Path(path).read_text())
    except (OSError, ValueError) as error:
        sys.exit(f"compare_evals: {path}: cannot read a uform_eval report: {error}")
    if not isinstance(report, dict) or not isinstance(report.get("rows"), list) or not isinstance(report.get("count"), int):
        sys.exit(f"compare_evals: {path}: not a uform_eval --json report (no rows or count)")
    rows = {}
    for row in report["rows"]:
        if not isinstance(row, dict) or not isinstance(row.get("method"), str) or not isinstance(row.get("direction"), str):
            sys.exit(f"compare_evals: {path}: a row without a method and direction: {str(row)[:80]}")
        if row.get("language") != "all" or row["direction"] == "both":
            continue
        rows[(row["method"], row.get("output_precision"), row.get("width"), row["direction"])] = row
    return report, rows


def placements_of(path, row, count):
    if "placements" not in row:
        sys.exit(f"compare_evals: {path}: row {row['method']} has no placements: run uform_eval with --placements")
    placements = row["placements"]
    if not isinstance(placements, list) or len(placements) != count:
        sys.exit(f"compare_evals: {path}: row {row['method']} has {len(placements) if isinstance(placements, list) else 'no list of'} "
                 f"placements for {count} pairs")
    for placement in placements:
        if (not isinstance(placement, list) or len(placement) != 2 or
                not all(isinstance(value, int) and value >= 0 for value in placement)):
            sys.exit(f"compare_evals: {path}: row {row['method']}: a placement is not [better, tied] counts: {placement}")
    return placements


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a", help="the first uform_eval --json --placements report")
    parser.add_argument("b", help="the second (may be the same file, with --a and --b)")
    parser.add_argument("--a", dest="row_a", help="A's row: METHOD or METHOD@WIDTH (default: every row both have)")
    parser.add_argument("--b", dest="row_b", help="B's row (default: --a's)")
    parser.add_argument("--metric", default="recall@1", choices=METRICS)
    parser.add_argument("--resamples", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the comparisons here")
    args = parser.parse_args()
    if args.resamples < 100:
        parser.error("--resamples needs at least 100")
    report_a, rows_a = load(args.a)
    report_b, rows_b = load(args.b)
    if report_a.get("pairs") != report_b.get("pairs") or report_a.get("count") != report_b.get("count"):
        sys.exit(f"compare_evals: {args.a} scores {report_a.get('count')} pairs of {report_a.get('pairs')} but {args.b} "
                 f"{report_b.get('count')} of {report_b.get('pairs')}: only reports of the same pairs compare")
    count = report_a["count"]

    pairs = []  # (label, row of A, row of B)
    if args.row_a or args.row_b:
        wanted_a = parse_row(args.row_a or args.row_b)
        wanted_b = parse_row(args.row_b or args.row_a)
        for direction in ("query->positive", "positive->query"):
            found = []
            for path, rows, (method, width) in ((args.a, rows_a, wanted_a), (args.b, rows_b, wanted_b)):
                matches = [row for (m, precision, w, d), row in rows.items()
                           if m == method and d == direction and (width is None or w == width)
                           and precision in (None, "float32")]
                if width is None and len(matches) > 1:  # a model row without a width: the widest
                    matches = [max(matches, key=lambda row: row["width"] or 0)]
                if not matches:
                    sys.exit(f"compare_evals: {path}: no {method}{'@' + str(width) if width else ''} row for {direction}")
                found.append(matches[0])
            label = f"{found[0]['method']}@{found[0]['width']}" if found[0]["width"] else found[0]["method"]
            if found[1] is not found[0]:
                label_b = f"{found[1]['method']}@{found[1]['width']}" if found[1]["width"] else found[1]["method"]
                label = f"{label} -> {label_b}"
            pairs.append((label, found[0], found[1]))
    else:
        for key, row in rows_a.items():
            if key in rows_b:
                method, precision, width, _ = key
                label = method + (f"@{width}" if width else "") + (f" {precision}" if precision not in (None, "float32") else "")
                pairs.append((label, row, rows_b[key]))
        if not pairs:
            sys.exit(f"compare_evals: {args.a} and {args.b} have no row in common")

    results = []
    print(f"{count} pairs of {report_a['pairs']}; {args.metric}, B - A, paired bootstrap 95% ({args.resamples} resamples), "
          f"sign test over the queries that differ")
    print(f"{'row':32} {'direction':16} {'A':>7} {'B':>7} {'B - A':>8} {'95% interval':>18} {'B>A':>5} {'A>B':>5} {'p':>8}  reading")
    for label, row_a, row_b in pairs:
        result = {"row": label, "direction": row_a["direction"],
                  **compared(placements_of(args.a, row_a, count), placements_of(args.b, row_b, count), args.metric,
                             args.resamples, args.seed)}
        (low, high), higher, lower, p = result["interval"], result["b_higher"], result["a_higher"], result["p"]
        reading = result["reading"] = "B higher" if low > 0 else "B lower" if high < 0 else "within noise"
        results.append(result)
        print(f"{label:32} {row_a['direction']:16} {result['a']:7.4f} {result['b']:7.4f} {result['difference']:+8.4f} "
              f"[{low:+.4f}, {high:+.4f}] {higher:5} {lower:5} {p:8.2g}  {reading}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"a": args.a, "b": args.b, "pairs": report_a["pairs"], "count": count,
                                                       "resamples": args.resamples, "seed": args.seed,
                                                       "comparisons": results}, indent=1))


if __name__ == "__main__":
    main()
