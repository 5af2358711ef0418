#!/usr/bin/env python3
"""demo_corpus.py: the small real corpus of the README's main job (demo/), drawn from the held-out
test splits of the built corpora, so the shipped model never saw any of it: English <-> 20
languages (gettext, LibreOffice, package descriptions), synopsis -> long description, documentation
-> code, words -> WordNet definition, and emoji and flag pictures with their names. A seeded spread
of each split (every language keeps its share). Writes demo/pairs.jsonl (text pairs),
demo/images.jsonl (caption -> image, the PNGs copied to demo/img/) and demo/manifest.json.

    python3 scripts/data/demo_corpus.py [--data data] [--output demo] [--seed 0]
"""

import argparse
import json
import os
import pathlib
import random
import shutil
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
TEXT = {"gettext": 120, "libreoffice": 40, "description-translations": 16, "descriptions": 24, "code": 16, "wordnet": 30}
IMAGES = {"emoji": 48, "flags": 16}


def spread(lines, count, rng, key=None):
    """count records spread over the languages (key) then over the file, deterministic for rng."""
    groups = {}
    for line in lines:
        groups.setdefault(key(line) if key else "", []).append(line)
    names = sorted(groups)
    picked, share = [], max(1, count // len(names))
    for name in names:
        group = groups[name]
        picked += rng.sample(group, min(share, len(group)))
    return picked[:count]


def read(path):
    if not path.is_file():
        sys.exit(f"demo_corpus: {path} is missing: build the corpus first (docs/data.md)")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def atomic_write(path, text):
    temporary = path.with_name(path.name + ".partial")
    with open(temporary, "w", encoding="utf-8") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(ROOT / "data"))
    parser.add_argument("--output", default=str(ROOT / "demo"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    data, output = pathlib.Path(args.data), pathlib.Path(args.output)
    rng = random.Random(args.seed)
    pairs, images, counts = [], [], {}
    for name, count in TEXT.items():
        records = spread(read(data / name / "test.jsonl"), count, rng, key=lambda r: r.get("lang", ""))
        for record in records:
            pairs.append({"query": record["query"], "positives": record["positives"][:1], "lang": record.get("lang", "en"), "corpus": name})
        counts[name] = len(records)
    (output / "img").mkdir(parents=True, exist_ok=True)
    for name, count in IMAGES.items():
        records = read(data / name / "test.jsonl")
        by_image = {}
        for record in records:  # one caption per picture, English where it has one
            image = record["positives"][0]["image"]
            if image not in by_image or record.get("lang") == "en":
                by_image[image] = record
        chosen = rng.sample(sorted(by_image), min(count, len(by_image)))
        for image in chosen:
            record = by_image[image]
            target = f"img/{name}-{pathlib.PurePosixPath(image).name}"
            shutil.copyfile(data / name / image, output / target)
            images.append({"query": record["query"], "positives": [{"image": target}], "lang": record.get("lang", "en"), "corpus": name})
        counts[name] = len(chosen)
    atomic_write(output / "pairs.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in pairs))
    atomic_write(output / "images.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in images))
    atomic_write(output / "manifest.json", json.dumps({"seed": args.seed, "source": "the test splits of data/ (docs/data.md; "
                                                       "each corpus's manifest.json lists its packages and licences)",
                                                       "records": counts}, indent=1) + "\n")
    print(f"demo_corpus: {len(pairs)} text pairs, {len(images)} images -> {output}")


if __name__ == "__main__":
    main()
