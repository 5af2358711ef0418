#!/usr/bin/env python3
"""cldr_pairs.py: English -> translation pairs of everyday vocabulary from Unicode's CLDR
(unicode-cldr-core, common/): names of languages, scripts, territories, calendars' months and days,
date fields, currencies, units, cities and time zones, character categories and typographic terms
(main/), states and provinces (subdivisions/), and emoji names and keywords (annotations/). The
gettext and LibreOffice corpora are software strings; this one gives every UForm language,
Armenian and Thai included, words outside software. One record per (concept, language); a concept
(such as "territory DE") is one split group in every language. No English or translation of the
emoji and flag corpora's dev and test captions is in train, nor an English string of gettext's or
LibreOffice's dev and test. Writes data/cldr/{train,dev,test}.jsonl and manifest.json. Standard
library only; deterministic for a seed. See docs/data.md.
"""

import collections
import pathlib
import re
import sys
import time
import xml.etree.ElementTree as ElementTree

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import debian_archive  # noqa: E402
from gettext_pairs import DEFAULT_LANGUAGES, keep  # noqa: E402

PACKAGE = "unicode-cldr-core"
CLDR = "usr/share/unicode/cldr/common"
INHERITED = "↑↑↑"  # CLDR's "same as the parent locale"
ATTRIBUTES = re.compile(r"\[[^\]]*\]")
# Paths (the element names from the root, attributes left out) of the main/ leaves kept: names, not
# patterns, symbols or formats. Further conditions are in `wanted`.
MAIN_SECTIONS = ("localeDisplayNames/languages/", "localeDisplayNames/scripts/", "localeDisplayNames/territories/",
                 "localeDisplayNames/variants/", "localeDisplayNames/keys/", "localeDisplayNames/types/",
                 "localeDisplayNames/measurementSystemNames/", "dates/calendars/", "dates/fields/",
                 "dates/timeZoneNames/zone/", "dates/timeZoneNames/metazone/", "numbers/currencies/",
                 "units/unitLength/", "characterLabels/characterLabel", "typographicNames/")


def leaves(path):
    """{key: text} of an LDML file's leaves: the key is the path of element names with their
    identifying attributes; draft "unconfirmed" or "provisional" values and inherited ones are left out."""
    found = {}

    def walk(element, key):
        attributes = {name: value for name, value in element.attrib.items() if name not in ("draft", "references")}
        key = f"{key}/{element.tag}" + "".join(f"[{name}={value}]" for name, value in sorted(attributes.items()))
        children = list(element)
        text = (element.text or "").strip()
        if not children and text and text != INHERITED and element.attrib.get("draft") not in ("unconfirmed", "provisional"):
            found[key] = text
        for child in children:
            walk(child, key)

    try:
        root = ElementTree.parse(path).getroot()
    except (ElementTree.ParseError, OSError) as error:
        sys.exit(f"cldr_pairs: {path}: not readable LDML: {error}")
    walk(root, "")
    return found


def plain(key):
    """The key without attributes, whose values may hold "/" (a zone's "America/New_York"):
    "/ldml/dates/fields/field/displayName"."""
    return ATTRIBUTES.sub("", key)


def wanted(key, text):
    """Whether a main/ leaf is a name worth a pair (not a pattern, an abbreviation or an alternative)."""
    path = plain(key)[len("/ldml/"):]
    if not path.startswith(MAIN_SECTIONS) or "{" in text or "[alt=" in key:
        return False
    if path.startswith("dates/calendars/"):
        return ("[type=gregorian]" in key and "[type=wide]" in key and "[type=format]" in key) or "/eras/eraNames/" in path
    if path.startswith("dates/fields/"):
        return path.endswith("/displayName") or path.endswith("/relative")
    if path.startswith("dates/timeZoneNames/"):
        return path.endswith("/exemplarCity") or "/long/" in path
    if path.startswith("numbers/currencies/"):
        return path.endswith("/displayName") and "[count=" not in key
    if path.startswith("units/unitLength/"):
        return "[type=long]" in key and path.endswith("/displayName")
    return True


def english_city(key):
    """CLDR's English exemplar city where en.xml has none: the time zone id's last part ("New York")."""
    zone = key.split("/zone[type=", 1)[1].split("]", 1)[0]
    return zone.rsplit("/", 1)[-1].replace("_", " ")


def main_pairs(folder, language, english):
    """{concept key: (english, translation)} of main/<language>.xml against main/en.xml."""
    translated = leaves(folder / "main" / f"{language}.xml")
    pairs = {}
    for key, text in translated.items():
        if not wanted(key, text):
            continue
        source = english.get(key)
        if source is None and key.endswith("/exemplarCity"):
            source = english_city(key)
        if source is not None:
            pairs["main" + key] = (source, text)
    return pairs


def subdivision_pairs(folder, language, english):
    path = folder / "subdivisions" / f"{language}.xml"
    if not path.is_file():
        return {}
    return {"subdivision" + key: (english[key], text) for key, text in leaves(path).items() if key in english}


def annotation_values(folder, locale):
    """{concept key: text} of an annotations file and its derived one: each emoji's "tts" name and
    its keywords (the "|"-separated list kept as one string, as CLDR writes it); skin-tone variants,
    which repeat their base's names with a tone's, are left out."""
    values = {}
    for sub in ("annotations", "annotationsDerived"):
        path = folder / sub / f"{locale}.xml"
        if not path.is_file():
            continue
        try:
            annotations = ElementTree.parse(path).getroot().iter("annotation")
        except (ElementTree.ParseError, OSError) as error:
            sys.exit(f"cldr_pairs: {path}: not readable LDML: {error}")
        for element in annotations:
            text = (element.text or "").strip()
            tone = any(0x1F3FB <= ord(character) <= 0x1F3FF for character in element.get("cp", ""))
            if text and text != INHERITED and not tone and element.get("draft") not in ("unconfirmed", "provisional"):
                kind = "tts" if element.get("type") == "tts" else "keywords"
                values[f"emoji/{element.get('cp')}/{kind}"] = text
    return values


def concept_of(key):
    """The split group: the concept a key names in every language (an emoji's name and keywords are one)."""
    if key.startswith("emoji/"):
        return key.rsplit("/", 1)[0]
    return key.replace("/ldml", "", 1)


def main(argv=None):
    parser = debian_archive.corpus_parser(__doc__.split("\n\n")[0], "cldr")
    parser.add_argument("--languages", default=",".join(DEFAULT_LANGUAGES), help="comma-separated CLDR base locales")
    parser.add_argument("--cldr-root", help="a CLDR common/ folder instead of unicode-cldr-core's")
    data = pathlib.Path(debian_archive.default_output(""))
    parser.add_argument("--held-out-images", default=f"{data / 'emoji'},{data / 'flags'}",
                        help="corpus folders whose dev and test captions must not be in train (comma-separated)")
    parser.add_argument("--held-out-text", default=f"{data / 'gettext'},{data / 'libreoffice'}",
                        help="corpus folders whose dev and test English strings must not be in train (comma-separated)")
    arguments = parser.parse_args(argv)
    started = time.monotonic()
    folder, packages = debian_archive.package_folder("cldr_pairs", PACKAGE, arguments.cldr_root, CLDR,
                                                     arguments.scratch, arguments.refresh)
    languages = arguments.languages.split(",")
    missing = [language for language in languages if not (folder / "main" / f"{language}.xml").is_file()]
    if missing:
        sys.exit(f"cldr_pairs: CLDR has no main/ data for {', '.join(missing)} under {folder}")

    english = leaves(folder / "main" / "en.xml")
    english_subdivisions = leaves(folder / "subdivisions" / "en.xml") if (folder / "subdivisions" / "en.xml").is_file() else {}
    english_annotations = annotation_values(folder, "en")
    dropped = collections.Counter()
    groups = collections.defaultdict(list)
    sources = collections.Counter()
    for language in languages:
        pairs = {**main_pairs(folder, language, english), **subdivision_pairs(folder, language, english_subdivisions)}
        for key, text in annotation_values(folder, language).items():
            if key in english_annotations:
                pairs[key] = (english_annotations[key], text)
        seen = set()
        for key, (source, translation) in sorted(pairs.items()):
            reason = keep(source, translation)
            if reason:
                dropped[reason] += 1
                continue
            if (source.casefold(), translation) in seen:
                dropped["the same pair under another key"] += 1
                continue
            seen.add((source.casefold(), translation))
            kind = key.split("/", 1)[0] if not key.startswith("main") else "/".join(plain(key).split("/")[2:4])
            sources[kind] += 1
            groups[concept_of(key)].append({"query": source, "positives": [translation], "lang": language, "source": kind})

    split_of = debian_archive.split_groups(groups, arguments.seed, arguments.dev_fraction, arguments.test_fraction)
    records = debian_archive.split_records(groups, split_of)
    image_folders = [folder for folder in arguments.held_out_images.split(",") if folder]
    text_folders = [folder for folder in arguments.held_out_text.split(",") if folder]
    held_english = debian_archive.held_out_queries(text_folders)
    removed = collections.Counter()
    captions = debian_archive.drop_held_out_captions(records, image_folders, removed)
    kept = []
    for record in records["train"]:
        if record["query"].casefold() in held_english:
            removed["train: an English string of a text corpus's dev or test"] += 1
        else:
            kept.append(record)
    records["train"] = kept
    # The same English word names several concepts ("Georgia"): one (English, language) per split; and no
    # text of train in dev or test (nor of dev in test), so a held-out query was never seen with its answer.
    debian_archive.one_per_language_without_leaks(records, removed)

    manifest = debian_archive.write_corpus(
        arguments.output, "cldr", "scripts/data/cldr_pairs.py", records, arguments.seed,
        {"languages": languages,
         "pairs_per_source": dict(sorted(sources.items())),
         "groups_per_split": {split: sum(1 for s in split_of.values() if s == split) for split in debian_archive.SPLITS},
         "held_out_corpora_checked": {"images": [pathlib.Path(folder).name for folder in image_folders if pathlib.Path(folder).is_dir()],
                                      "text": [pathlib.Path(folder).name for folder in text_folders if pathlib.Path(folder).is_dir()],
                                      "captions_found": captions, "english_found": len(held_english)},
         "removed_as_leaks": dict(sorted(removed.items())),
         "dropped_pairs": dict(sorted(dropped.items())),
         "source": {"packages": packages, "local": arguments.cldr_root}})
    debian_archive.print_summary("cldr_pairs", manifest, started, arguments.output)


if __name__ == "__main__":
    main()
