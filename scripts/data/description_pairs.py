#!/usr/bin/env python3
"""description_pairs.py: two corpora from the package descriptions in Debian's apt lists, fetched
by `apt-get update` into a private state folder with the description translations (DDTP) enabled:
- data/descriptions: synopsis -> long description, English ("GNU Bourne Again SHell" -> "Bash is
  an sh-compatible command language interpreter ...");
- data/description-translations: an English description -> its human translation, paired by
  Description-md5, "lang" the language (de, fr, it, ja, ...; pt_BR counts as pt, zh_CN as zh).
Both split by source package (every binary package of one source, in every language, goes to one
split), then no query or positive of dev/test is in train. Each writes {train,dev,test}.jsonl,
text.jsonl (train texts, for masked modelling) and manifest.json. Standard library only.
"""

import argparse
import collections
import pathlib
import re
import sys
import time
import urllib.parse

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import debian_archive  # noqa: E402

MAX_BYTES = 2000  # each side; a pair then always fits one 4096-column row
# Debian's translation names -> UForm's language codes; a description translated into both pt and
# pt_BR keeps the first listed.
LANGUAGES = {"ar": "ar", "de": "de", "es": "es", "fa": "fa", "fr": "fr", "he": "he", "hi": "hi", "hy": "hy",
             "id": "id", "it": "it", "ja": "ja", "ko": "ko", "pl": "pl", "pt": "pt", "pt_BR": "pt", "ru": "ru",
             "th": "th", "tr": "tr", "uk": "uk", "vi": "vi", "zh_CN": "zh"}
SHORTEST_DESCRIPTION = 20  # bytes: a long description shorter than this repeats the synopsis


def list_kind(path):
    """("packages", None) or ("translation", "de") for an apt list file name, else (None, None)."""
    name = urllib.parse.unquote(re.sub(r"\.(lz4|xz|gz|zst|bz2)$", "", pathlib.Path(path).name))
    if name.endswith("_Packages"):
        return "packages", None
    found = re.search(r"_Translation-([A-Za-z_]+)$", name)
    return ("translation", found.group(1)) if found else (None, None)


def paragraphs(long_description):
    """The long description as paragraphs: " ." lines separate them, wrapped lines join with a space,
    lines indented further (lists, verbatim text) keep their own line."""
    result, current = [], []
    for line in long_description.split("\n"):
        line = line[1:] if line.startswith(" ") else line
        if line.strip() == ".":
            if current:
                result.append("".join(current).strip())
            current = []
        elif line.startswith((" ", "\t")) or not current:
            current.append(("\n" if current else "") + line.strip())
        else:
            current.append(" " + line.strip())
    if current:
        result.append("".join(current).strip())
    return [paragraph for paragraph in result if paragraph]


def split_description(value):
    """(synopsis, [paragraphs]) of a Description-xx field's value."""
    synopsis, _, long_description = value.partition("\n")
    return synopsis.strip(), paragraphs(long_description)


def fit(*sides):
    """The most leading paragraphs of each side (all sides the same count) that keep every side
    within MAX_BYTES, joined; None when not even the first fits. Translations keep the English
    paragraph structure, so cutting by count keeps the two sides saying the same."""
    count = min(len(side) for side in sides)
    while count > 0 and any(len("\n\n".join(side[:count]).encode()) > MAX_BYTES for side in sides):
        count -= 1
    return None if count == 0 else ["\n\n".join(side[:count]) for side in sides]


def read_lists(folder):
    """(source of each package, {md5: (package, English description)}, {language: {md5: description}})."""
    source_of, english, translated = {}, {}, collections.defaultdict(dict)
    files = sorted(pathlib.Path(folder).glob("*"))
    for path in files:
        kind, language = list_kind(path)
        if kind == "packages":
            for stanza in debian_archive.stanzas(debian_archive.read_list(path)):
                if "Package" in stanza:
                    source_of[stanza["Package"]] = stanza.get("Source", stanza["Package"]).split()[0]
    for path in files:
        kind, language = list_kind(path)
        if kind != "translation":
            continue
        for stanza in debian_archive.stanzas(debian_archive.read_list(path)):
            md5, value = stanza.get("Description-md5"), stanza.get(f"Description-{language}")
            if not md5 or not value:
                continue
            if language == "en":
                english.setdefault(md5, (stanza.get("Package", ""), value))
            elif language in LANGUAGES:
                translated[language].setdefault(md5, value)
    return source_of, english, translated


def build(source_of, english, translated):
    """{group: [synopsis record]} and {group: [translation record]}, groups being source packages."""
    synopses, translations = collections.defaultdict(list), collections.defaultdict(list)
    dropped = collections.Counter()
    for md5, (package, value) in sorted(english.items(), key=lambda item: (item[1][0], item[0])):
        group = source_of.get(package, package)
        synopsis, body = split_description(value)
        long_description = fit(body)
        if not synopsis or not long_description or len(long_description[0].encode()) < SHORTEST_DESCRIPTION:
            dropped["no long description"] += 1
        else:
            synopses[group].append({"query": synopsis, "positives": long_description, "lang": "en", "package": package})
        for debian_language in LANGUAGES:
            if md5 not in translated.get(debian_language, {}):
                continue
            other_synopsis, other_body = split_description(translated[debian_language][md5])
            if len(other_body) != len(body):
                dropped["translation with another paragraph count"] += 1
                continue
            sides = fit([synopsis, *body], [other_synopsis, *other_body])
            if sides is None or sides[0].casefold() == sides[1].casefold():
                dropped["translation too long or a copy"] += 1
                continue
            translations[group].append({"query": sides[0], "positives": [sides[1]], "lang": LANGUAGES[debian_language],
                                        "package": package})
    # One translation per (English, language): pt before pt_BR, as LANGUAGES lists them.
    for group, records in translations.items():
        seen, kept = set(), []
        for record in records:
            if (record["query"], record["lang"]) not in seen:
                seen.add((record["query"], record["lang"]))
                kept.append(record)
        translations[group] = kept
    return synopses, translations, dropped


def language_keys(record):
    """pair_keys within the record's language: a text may recur across languages, not within one."""
    return [record["lang"] + "\0" + key for key in debian_archive.pair_keys(record)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", default=debian_archive.default_output("descriptions"))
    parser.add_argument("--translations-output", default=debian_archive.default_output("description-translations"))
    parser.add_argument("--scratch", default=str(debian_archive.DEFAULT_SCRATCH), help="the private apt state")
    parser.add_argument("--lists", help="a folder of apt list files (Packages, Translation-*) to read instead")
    debian_archive.add_common_arguments(parser, "most records in each text.jsonl")
    arguments = parser.parse_args(argv)
    started = time.monotonic()
    try:
        folder = pathlib.Path(arguments.lists) if arguments.lists else debian_archive.private_lists(arguments.scratch, arguments.refresh)
        source_of, english, translated = read_lists(folder)
    except (debian_archive.FetchError, OSError) as error:
        sys.exit(f"description_pairs: {error}")
    if not english:
        sys.exit(f"description_pairs: no Translation-en list under {folder}")
    synopses, translations, dropped = build(source_of, english, translated)
    # One split per source package for both corpora, sized by the English pairs.
    groups = set(synopses) | set(translations)
    split_of = debian_archive.split_groups({group: synopses.get(group, []) for group in groups}, arguments.seed,
                                           arguments.dev_fraction, arguments.test_fraction)
    lists = [{"file": urllib.parse.unquote(path.name), "sha256": debian_archive.sha256_of(path)}
             for path in sorted(folder.glob("*")) if list_kind(path)[0]]
    releases = {}
    for path in sorted(folder.glob("*InRelease")):
        for stanza in debian_archive.stanzas(path.read_text(errors="replace").split("-----BEGIN PGP SIGNATURE")[0]):
            if "Date" in stanza:
                releases[path.name.replace("_InRelease", "")] = stanza["Date"]
                break
    source = {"apt_lists": lists, "release_dates": releases,
              "licence": "each package's own: a description is part of its debian/control; translations by the "
                         "Debian Description Translation Project"}
    summaries = []
    for name, output, grouped in (("descriptions", arguments.output, synopses),
                                  ("description-translations", arguments.translations_output, translations)):
        records = debian_archive.split_records(grouped, split_of)
        duplicates = debian_archive.deduped_splits(
            records, lambda records_of_split: debian_archive.dedupe_every_key(records_of_split, language_keys))
        # An English text of train may not be a dev or test query in any language.
        leaks = debian_archive.remove_leaks(records)
        texts = [text for record in records["train"] for text in (record["query"], *record["positives"])]
        manifest = debian_archive.write_corpus(
            output, name, "scripts/data/description_pairs.py", records, arguments.seed,
            {"groups_per_split": dict(collections.Counter(split_of[group] for group in grouped)),
             "english_descriptions": len(english),
             "translated_descriptions": {language: len(found) for language, found in sorted(translated.items())},
             "dropped": dict(sorted(dropped.items())),
             "removed_as_duplicates_within_a_split": duplicates,
             "removed_from_dev_and_test_as_leaks": leaks, "source": source},
            texts=texts, text_limit=arguments.text_limit)
        summaries.append(f"{name}: " + ", ".join(f"{split} {manifest['records'][split]['total']}" for split in debian_archive.SPLITS))
    print("description_pairs: " + "; ".join(summaries) + f" pairs in {time.monotonic() - started:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
