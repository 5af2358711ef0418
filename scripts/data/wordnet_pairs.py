#!/usr/bin/env python3
"""wordnet_pairs.py: word -> definition pairs from WordNet 3.0 (the Debian package wordnet-base,
unpacked, not installed). One record per synset's word list: the query is its words ("bank, cant, camber"),
the positives its definitions; the example sentences go to the masked-modelling text. Split by the
synset's first word (all senses headed by "bank" stay together), then no query or definition of
dev/test is in train. Writes data/wordnet/{train,dev,test}.jsonl, text.jsonl and manifest.json.
Standard library only; deterministic for a seed. See docs/data.md.
"""

import argparse
import collections
import pathlib
import re
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import debian_archive  # noqa: E402

PARTS_OF_SPEECH = {"noun": "noun", "verb": "verb", "adj": "adjective", "adv": "adverb"}
SYNTACTIC_MARKER = re.compile(r"\((?:a|p|ip)\)$")  # adjective position markers: "galore(ip)"
EXAMPLE = re.compile(r'"([^"]+)"')


def parse_synset(line):
    """(words, definition, examples) of one line of a WordNet data.* file, or None for the licence
    header. Format (wndb(5)): offset lex_filenum ss_type w_cnt word lex_id ... p_cnt pointers ... | gloss."""
    if not line or line.startswith(" "):
        return None
    head, separator, gloss = line.partition(" | ")
    fields = head.split()
    if not separator or len(fields) < 5:
        raise ValueError(f"not a synset line: {line[:80]!r}")
    count = int(fields[3], 16)
    words = [SYNTACTIC_MARKER.sub("", fields[4 + 2 * index]).replace("_", " ") for index in range(count)]
    gloss = gloss.strip()
    examples = EXAMPLE.findall(gloss)
    definition = gloss.split('; "')[0].split(' "')[0].strip().rstrip(";").strip()
    return words, definition, examples


def read_synsets(folder):
    """[(part of speech, words, definition, examples)] of every synset in data.{noun,verb,adj,adv}."""
    synsets = []
    for suffix, part in PARTS_OF_SPEECH.items():
        path = pathlib.Path(folder) / f"data.{suffix}"
        with open(path, encoding="utf-8", errors="replace") as file:
            for number, line in enumerate(file, 1):
                try:
                    parsed = parse_synset(line.rstrip("\n"))
                except ValueError as error:
                    raise ValueError(f"{path}:{number}: {error}") from None
                if parsed:
                    synsets.append((part, *parsed))
    return synsets


def records_by_group(synsets):
    """{first word, case-folded: [record]}: one record per distinct word list; synsets with the same
    words ("transplant" the noun and the verb) give one record whose positives are their definitions
    in file order (nouns, verbs, adjectives, adverbs), so no query recurs with another answer."""
    groups = collections.defaultdict(dict)
    for part, words, definition, examples in synsets:
        if len(definition) < 2 or not words:
            continue
        query = ", ".join(dict.fromkeys(words))
        record = groups[words[0].casefold()].setdefault(query, {"query": query, "positives": [], "lang": "en", "pos": part})
        if definition not in record["positives"]:
            record["positives"].append(definition)
    return {group: list(records.values()) for group, records in groups.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", default=debian_archive.default_output("wordnet"))
    parser.add_argument("--scratch", default=str(debian_archive.DEFAULT_SCRATCH), help="downloads and unpacked packages")
    parser.add_argument("--wordnet-root", help="a folder of data.noun, data.verb, ... to read instead of wordnet-base")
    debian_archive.add_common_arguments(parser, "most records in text.jsonl")
    arguments = parser.parse_args(argv)
    started = time.monotonic()
    packages = []
    folder = arguments.wordnet_root
    if not folder:
        try:
            fetched = debian_archive.fetch(["wordnet-base"], arguments.scratch, arguments.refresh)["wordnet-base"]
        except debian_archive.FetchError as error:
            sys.exit(f"wordnet_pairs: {error}")
        folder = fetched["root"] / "usr" / "share" / "wordnet"
        packages.append(debian_archive.package_record(fetched))
    try:
        synsets = read_synsets(folder)
    except (OSError, ValueError) as error:
        sys.exit(f"wordnet_pairs: {error}")
    groups = records_by_group(synsets)
    records, duplicates, split_of = debian_archive.split_and_dedupe(groups, arguments.seed, arguments.dev_fraction,
                                                                   arguments.test_fraction)
    leaks = debian_archive.remove_leaks(records)
    # Masked modelling: "words: definition" and the example sentences of train synsets only.
    train_queries = {record["query"] for record in records["train"]}
    texts = []
    for _, words, definition, examples in synsets:
        if ", ".join(dict.fromkeys(words)) in train_queries:
            texts.append(f"{', '.join(dict.fromkeys(words))}: {definition}")
            texts.extend(examples)
    manifest = debian_archive.write_corpus(
        arguments.output, "wordnet", "scripts/data/wordnet_pairs.py", records, arguments.seed,
        {"synsets": len(synsets),
         "synsets_per_part_of_speech": dict(sorted(collections.Counter(part for part, *_ in synsets).items())),
         "groups_per_split": dict(collections.Counter(split_of.values())),
         "removed_as_duplicate_queries_within_a_split": duplicates,
         "removed_from_dev_and_test_as_leaks": leaks,
         "source": {"packages": packages, "local_root": None if packages else str(folder)}},
        texts=texts, text_limit=arguments.text_limit)
    print("wordnet_pairs: " + ", ".join(f"{split} {manifest['records'][split]['total']}" for split in debian_archive.SPLITS) +
          f" pairs in {time.monotonic() - started:.1f} s -> {arguments.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
