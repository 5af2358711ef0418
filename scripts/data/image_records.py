#!/usr/bin/env python3
"""image_records.py: the images of built image <-> caption corpora as masked-modelling records. Each
image side of data/NAME/train.jsonl becomes one `{"image": PATH}` line of data/NAME/images.jsonl
(first appearance order, each picture once), which mixtures/base.json reads under the mlm
objective (masked patches, docs/images.md). Only train: the base never sees a held-out image.

    python3 scripts/data/image_records.py [--data data] [NAME ...]   (default: emoji flags clipart fashion)
"""

import argparse
import json
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORPORA = ("emoji", "flags", "clipart", "fashion")


def image_paths(train):
    """[PATH] of every image side of a pair file, each once, in order of first appearance."""
    seen, paths = set(), []
    with open(train, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                sys.exit(f"image_records: {train}:{number}: not JSON: {error}")
            for key in ("query", "positives", "negatives"):
                sides = record.get(key)
                for side in sides if isinstance(sides, list) else [sides]:
                    if isinstance(side, dict) and "image" in side and side["image"] not in seen:
                        seen.add(side["image"])
                        paths.append(side["image"])
    return paths


def write(folder):
    """Writes folder/images.jsonl atomically; returns its image count."""
    train = folder / "train.jsonl"
    if not train.is_file():
        sys.exit(f"image_records: {train} is missing: build the corpus first (docs/data.md)")
    paths = image_paths(train)
    if not paths:
        sys.exit(f"image_records: {train} holds no image side")
    target, temporary = folder / "images.jsonl", folder / "images.jsonl.partial"
    with open(temporary, "w", encoding="utf-8") as out:
        out.writelines(json.dumps({"image": path}) + "\n" for path in paths)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, target)
    return len(paths)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", default=list(CORPORA), help="corpora under --data (default: the four image corpora)")
    parser.add_argument("--data", default=str(ROOT / "data"), help="folder of the built corpora (default data/)")
    args = parser.parse_args()
    for name in args.names:
        count = write(pathlib.Path(args.data) / name)
        print(f"image_records: {name}: {count} images -> {pathlib.Path(args.data) / name / 'images.jsonl'}")


if __name__ == "__main__":
    main()
