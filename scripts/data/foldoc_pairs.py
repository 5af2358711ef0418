#!/usr/bin/env python3
"""foldoc_pairs.py: term -> definition pairs from FOLDOC, the Free On-line Dictionary of Computing,
as the Debian package dict-foldoc ships it for dictd (unpacked, not installed; read by
gcide_pairs.read_entries). One record per term, case-folded: the query is the term as FOLDOC
spells it ("canonical name", "LBL"), the positives its numbered senses (or its one definition),
at most gcide_pairs' caps. Cleaned: cross-reference braces keep their words, field labels
("<programming>"), source tags ("[{Jargon File}]"), dates, "See also"/"Compare" paragraphs and
bare addresses go; a pointer alone ("See {X}.") is no definition. Split by the case-folded term,
then no query or definition of dev/test is in train. Writes data/foldoc/{train,dev,test}.jsonl,
text.jsonl and manifest.json. Standard library only; deterministic for a seed. See docs/data.md.
"""

import argparse
import collections
import pathlib
import re
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import debian_archive  # noqa: E402
import gcide_pairs  # noqa: E402

MAX_BYTES = 1000  # per sense, cut at a paragraph; gcide_pairs.capped keeps a record within its row
DATE = re.compile(r"^\(\d{4}-\d{2}-\d{2}\)$")
SOURCE = re.compile(r"^\[[^\]]*\]$")
POINTERS = re.compile(r"^(?:See also|Compare|See|Home|Latest version|E-mail|FTP|Mailing list|Usenet newsgroup|"
                      r"Documentation|Tutorial)\b[^.]*[:.]?", re.IGNORECASE)
LABEL = re.compile(r"^(?:<[^<>]{1,40}>\s*)+")
NUMBERED = re.compile(r"^(\d+)\.\s+")


def clean(text):
    """A FOLDOC paragraph as plain text: braces opened, field labels dropped, whitespace collapsed."""
    text = " ".join(text.split())
    text = re.sub(r"\{([^{}]*)\}", r"\1", text)
    return LABEL.sub("", text).strip()


def parse_entry(text):
    """(term, [definition]) of one FOLDOC entry: a numbered sense with the paragraphs after it is
    one definition; an entry without numbers is one."""
    lines = text.rstrip("\n").split("\n")
    term = lines[0].strip()
    paragraphs, current = [], []
    for line in lines[1:] + [""]:
        if line.strip():
            current.append(line)
        elif current:
            paragraphs.append(current)
            current = []
    senses = []
    for paragraph in paragraphs:
        verbatim = all(line.startswith("    ") for line in paragraph)  # an example, indented past the text
        joined = " ".join(line.strip() for line in paragraph)
        if DATE.match(joined) or SOURCE.match(joined) or POINTERS.match(joined) or re.match(r"^\w+://\S+$", joined):
            continue
        numbered = NUMBERED.match(joined)
        text = "\n".join(line.strip() for line in paragraph) if verbatim else clean(NUMBERED.sub("", joined))
        if numbered or not senses:
            senses.append([text])
        else:
            senses[-1].append(text)
    definitions = [debian_archive.cut("\n\n".join(part for part in sense if part), MAX_BYTES, "\n\n") for sense in senses]
    return term, [definition for definition in definitions if gcide_pairs.keep(definition)]


def records_by_group(entries):
    """{term, case-folded: [record]} (an entry of a term already seen adds its senses); counts."""
    records, counts = {}, collections.Counter()
    for text in entries:
        term, definitions = parse_entry(text)
        counts["entries"] += 1
        if not term or not definitions:
            counts["entries without a definition"] += 1
            continue
        record = records.setdefault(term.casefold(), {"query": term, "positives": [], "lang": "en"})
        record["positives"].extend(definition for definition in definitions if definition not in record["positives"])
    for record in records.values():
        kept = gcide_pairs.capped(record["query"], record["positives"])
        counts["senses beyond the caps"] += len(record["positives"]) - len(kept)
        record["positives"] = kept
    return {group: [record] for group, record in records.items()}, counts


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", default=debian_archive.default_output("foldoc"))
    parser.add_argument("--scratch", default=str(debian_archive.DEFAULT_SCRATCH), help="downloads and unpacked packages")
    parser.add_argument("--foldoc-root", help="a folder of foldoc.index and foldoc.dict.dz to read instead of dict-foldoc")
    debian_archive.add_common_arguments(parser, "most records in text.jsonl")
    arguments = parser.parse_args(argv)
    started = time.monotonic()
    folder, packages = debian_archive.package_folder("foldoc_pairs", "dict-foldoc", arguments.foldoc_root, "usr/share/dictd",
                                                     arguments.scratch, arguments.refresh)
    try:
        entries = gcide_pairs.read_entries(folder / "foldoc.index", folder / "foldoc.dict.dz")
    except (OSError, ValueError) as error:
        sys.exit(f"foldoc_pairs: {error}")
    groups, counts = records_by_group(entries)
    split_of = debian_archive.split_groups(groups, arguments.seed, arguments.dev_fraction, arguments.test_fraction)
    records = debian_archive.split_records(groups, split_of)
    # One record per term and per definition within a split: FOLDOC defines some synonyms word for word.
    duplicates = debian_archive.deduped_splits(records, debian_archive.dedupe_every_key)
    leaks = debian_archive.remove_leaks(records)
    texts = [f"{record['query']}: {positive}" for record in records["train"] for positive in record["positives"]]
    manifest = debian_archive.write_corpus(
        arguments.output, "foldoc", "scripts/data/foldoc_pairs.py", records, arguments.seed,
        {"entries": dict(sorted(counts.items())), "groups_per_split": dict(collections.Counter(split_of.values())),
         "removed_as_duplicates_within_a_split": duplicates, "removed_from_dev_and_test_as_leaks": leaks,
         "source": {"packages": packages, "local_root": None if packages else str(folder)}},
        texts=texts, text_limit=arguments.text_limit)
    debian_archive.print_summary("foldoc_pairs", manifest, started, arguments.output)


if __name__ == "__main__":
    main()
