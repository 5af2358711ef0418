#!/usr/bin/env python3
"""language_subset.py: the records of some languages of a corpus file, as a file of their own, so
that a mixture can sample them more often than their share (the scarce languages of the pair
corpora: Armenian has under a thousand gettext pairs where French has 46 thousand). Writes
data/<corpus>/<stem>.<group>.jsonl beside the source file (`train-negatives.jsonl` ->
`train-negatives.scarce.jsonl`), the records in their order, byte for byte, written atomically.
With --siblings J instead, the records of a mined file (scripts/data/mine_negatives.py) whose first
negative shares at least J of its byte 4-grams (Jaccard) with the first positive: a package family's
members one word apart ("Documentation for the GIMP (Dutch)" beside "(Norwegian)"), as group
`siblings`. Standard library only. See docs/data.md.

    python3 scripts/data/language_subset.py [--group scarce] [--languages ar,fa,he,hi,hy,th]
                                            data/gettext/train-negatives.jsonl ...
    python3 scripts/data/language_subset.py --siblings 0.7 data/description-translations/train-negatives.jsonl
"""

import argparse
import json
import os
import pathlib
import sys

# The six languages with the fewest gettext and LibreOffice training pairs (docs/data.md), the
# weakest of the shipped model's 20 at R@1 (docs/evaluation.md).
GROUPS = {"scarce": ("ar", "fa", "he", "hi", "hy", "th")}


def subset_path(source, group):
    source = pathlib.Path(source)
    return source.with_name(f"{source.stem}.{group}{source.suffix}")


def grams(text):
    """The distinct byte 4-grams of a text."""
    data = text.encode("utf-8")
    return {data[i : i + 4] for i in range(len(data) - 3)}


def siblings(threshold):
    """A record's test for --siblings: its first negative and first positive share at least `threshold`
    of their byte 4-grams (Jaccard)."""
    def keep(record):
        negatives, positives = record.get("negatives") or [], record.get("positives") or []
        if not negatives or not positives or not isinstance(negatives[0], str) or not isinstance(positives[0], str):
            return False
        a, b = grams(positives[0]), grams(negatives[0])
        return len(a & b) >= threshold * max(1, len(a | b))
    return keep


def write_subset(source, languages, group):
    """Writes the subset of source's records whose `lang` is one of languages (a list), or that
    `languages` accepts (a function of a record); returns (its path, records kept, records read). A
    line that is not a JSON object fails, naming the file and line."""
    source, target = pathlib.Path(source), subset_path(source, group)
    wanted = languages if callable(languages) else (lambda record, codes=set(languages): record.get("lang") in codes)
    kept, read = 0, 0
    partial = target.with_name(target.name + ".partial")
    with open(source, encoding="utf-8") as lines, open(partial, "w", encoding="utf-8") as out:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                partial.unlink()
                raise ValueError(f"{source}:{number}: not JSON: {error}") from None
            if not isinstance(record, dict):
                partial.unlink()
                raise ValueError(f"{source}:{number}: a record must be a JSON object")
            read += 1
            if wanted(record):
                out.write(line if line.endswith("\n") else line + "\n")
                kept += 1
        out.flush()
        os.fsync(out.fileno())
    os.replace(partial, target)
    return target, kept, read


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sources", nargs="+", help="corpus files (JSONL records with a 'lang' field)")
    parser.add_argument("--group", default="scarce", help="the subset's name in its file name (default scarce)")
    parser.add_argument("--languages", help="comma-separated language codes (default: the group's, " +
                        "; ".join(f"{name}: {','.join(codes)}" for name, codes in GROUPS.items()) + ")")
    parser.add_argument("--siblings", type=float, metavar="J",
                        help="instead of languages: records whose first negative shares at least J (0..1] of its byte "
                             "4-grams with the first positive; the group is `siblings` unless --group names another")
    args = parser.parse_args(argv)
    if args.siblings is not None:
        if not 0 < args.siblings <= 1:
            parser.error(f"--siblings takes a share in (0, 1], not {args.siblings}")
        languages, args.group = siblings(args.siblings), args.group if args.group != "scarce" else "siblings"
    else:
        languages = args.languages.split(",") if args.languages else GROUPS.get(args.group)
    if not languages:
        parser.error(f"--group {args.group} names no known group: give --languages")
    for source in args.sources:
        if not pathlib.Path(source).is_file():
            sys.exit(f"language_subset: {source} is missing: build the corpus first (docs/data.md)")
        try:
            target, kept, read = write_subset(source, languages, args.group)
        except ValueError as error:
            sys.exit(f"language_subset: {error}")
        print(f"language_subset: {target}: {kept} of {read} records")


if __name__ == "__main__":
    main()
