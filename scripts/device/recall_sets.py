#!/usr/bin/env python3
"""recall_sets.py: makes runs/recall, the held-out sets `gpu.sh recall` carries (docs/precision.md, "Recall"):
the 2000-pair test spreads of lineage's text sets and of the later rounds' corpora (lineage.eval_sets: every
k-th line, so every catalogue and language keeps its share) as NAME.jsonl, and each other corpus's whole test split as NAME/test.jsonl
with the pictures it names beside it (their paths are relative to the split's folder). A corpus not built
in data/ is skipped with a line saying so.

    python3 scripts/device/recall_sets.py [--output runs/recall] [--limit 2000]
"""

import argparse
import pathlib
import shutil
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "device"))
sys.path.insert(0, str(ROOT / "scripts" / "data"))
import image_records  # noqa: E402
import lineage  # noqa: E402

WHOLE = ("gcide", "manpages", "foldoc", "manpages-wide", "manpages-wider", "emoji", "flags", "fashion", "clipart", "stamps",
         "gcompris", "art4apps", "furniture", "ktuberling")
SPREADS = lineage.TEXT_SETS + tuple(name for name in lineage.NEW_SETS if name not in WHOLE)  # CLDR, GNOME's help, the manuals


def whole_split(name, output):
    """Copies data/NAME/test.jsonl and its pictures into OUTPUT/NAME; the number of pictures, or None if missing."""
    source = ROOT / "data" / name / "test.jsonl"
    if not source.is_file():
        print(f"recall_sets: {source} is missing: skipped (build the corpus first, docs/data.md)")
        return None
    target = output / name
    shutil.rmtree(target, ignore_errors=True)  # a rebuilt corpus's old pictures go
    target.mkdir(parents=True)
    shutil.copyfile(source, target / "test.jsonl")
    paths = image_records.image_paths(source)  # each image side once; a line that is not JSON named
    for path in paths:
        picture = source.parent / path
        if not picture.is_file():
            raise SystemExit(f"recall_sets: {source} names {path}, which is not in {source.parent}")
        (target / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(picture, target / path)
    return len(paths)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", default=str(ROOT / "runs" / "recall"), help="the folder made (default runs/recall)")
    parser.add_argument("--limit", type=int, default=2000, help="records of each text set's spread (default 2000)")
    args = parser.parse_args()
    output = pathlib.Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    spreads = lineage.eval_sets(argparse.Namespace(runs=str(ROOT / "runs" / "lineage"), eval_limit=args.limit),
                                names=SPREADS)
    for name, path in spreads.items():
        shutil.copyfile(path, output / f"{name}.jsonl")
        print(f"recall_sets: {name}: a spread of {sum(1 for _ in open(path, encoding='utf-8'))} records")
    for name in WHOLE:
        copied = whole_split(name, output)
        if copied is not None:
            print(f"recall_sets: {name}: the whole test split, {copied} pictures")
    print(f"recall_sets: carry {output.relative_to(ROOT) if output.is_relative_to(ROOT) else output}")


if __name__ == "__main__":
    main()
