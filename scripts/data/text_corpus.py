#!/usr/bin/env python3
"""text_corpus.py: multilingual text for masked byte modelling from Debian packages unpacked, not
installed: the GNOME user help (gnome-user-docs: Mallard pages in English and 17 of the UForm
languages, read paragraph by paragraph) and fortune cookies (fortunes in English, German,
Spanish, Italian, Polish, Chinese and Brazilian Portuguese; the packages' offensive sections left
out, and fortunes-ru, which has none apart). Split by help page (a page in every language goes to one split) or fortune file, then no
text of dev/test is in train. Writes data/text/{train,dev,test}.jsonl as {"text", "lang",
"source"} records and manifest.json. Standard library only. See docs/data.md.
"""

import argparse
import collections
import os
import pathlib
import re
import sys
import time
import xml.etree.ElementTree as ElementTree

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import debian_archive  # noqa: E402

MAX_BYTES = 4000  # one record fills at most one 4096-column row
SHORTEST = 20  # bytes: shorter fortunes and pages are signatures, not text
UFORM_LANGUAGES = set("en ar de es fa fr he hi hy id it ja ko pl pt ru th tr uk vi zh".split())
# gnome-user-docs folders -> language ("C" is the English original).
HELP_LANGUAGES = {"C": "en", "pt_BR": "pt", "zh_CN": "zh"}
FORTUNE_PACKAGES = {"fortunes": "en", "fortunes-de": "de", "fortunes-es": "es", "fortunes-it": "it",
                    "fortunes-pl": "pl", "fortunes-zh": "zh", "fortunes-br": "pt"}
# fortunes-ru is left out: it keeps no offensive section apart, and its political jokes include slurs.
MALLARD = "{http://projectmallard.org/1.0/}"
# Mallard elements whose text is one paragraph; <info> (credits, licence boilerplate) is skipped.
BLOCKS = {"title", "subtitle", "desc", "p", "code", "screen", "td", "th"}
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def chunks(paragraphs, limit=MAX_BYTES):
    """Consecutive paragraphs joined by newlines into texts of at most `limit` bytes; a paragraph
    longer than the limit is cut at a space."""
    result, current = [], ""
    for paragraph in paragraphs:
        paragraph = debian_archive.cut(paragraph, limit, " ")
        joined = f"{current}\n{paragraph}" if current else paragraph
        if len(joined.encode()) <= limit:
            current = joined
        else:
            result.append(current)
            current = paragraph
    if current:
        result.append(current)
    return [text for text in result if len(text.encode()) >= SHORTEST]


def page_paragraphs(data):
    """The paragraphs of a Mallard page, in document order, each with its whitespace collapsed."""
    root = ElementTree.fromstring(data)
    paragraphs = []

    def walk(element):
        tag = element.tag.replace(MALLARD, "") if isinstance(element.tag, str) else ""
        if tag == "info":
            return
        if tag in BLOCKS:
            text = " ".join("".join(element.itertext()).split())
            if text:
                paragraphs.append(text)
            return
        for child in element:
            walk(child)

    walk(root)
    return paragraphs


def help_pages(root):
    """{group: [record]} of gnome-user-docs, grouped by document and page across languages."""
    help_root = pathlib.Path(root) / "usr" / "share" / "help"
    if not help_root.is_dir():
        help_root = pathlib.Path(root)
    groups = collections.defaultdict(list)
    problems = []
    for folder in sorted(help_root.iterdir()):
        language = HELP_LANGUAGES.get(folder.name, folder.name)
        if language not in UFORM_LANGUAGES:
            continue
        for page in sorted(folder.glob("*/*.page")):
            try:
                paragraphs = page_paragraphs(page.read_bytes())
            except ElementTree.ParseError as error:
                problems.append(f"{page.relative_to(help_root)}: {error}")
                continue
            group = f"help:{page.parent.name}/{page.stem}"
            for text in chunks(paragraphs):
                groups[group].append({"text": text, "lang": language, "source": str(page.relative_to(help_root))})
    return groups, problems


def fortunes(text):
    """The cookies of a fortune file: "%" lines separate them; colour escapes are dropped."""
    cookies = re.split(r"^%\s*$", ANSI_ESCAPE.sub("", text), flags=re.MULTILINE)
    return [cookie.strip("\n") for cookie in cookies if len(cookie.strip().encode()) >= SHORTEST]


def fortune_files(root):
    """Regular fortune files under usr/share/games (each once, not the .dat indices or .u8 links,
    nothing under an "off" folder)."""
    games = pathlib.Path(root) / "usr" / "share" / "games"
    if not games.is_dir():
        games = pathlib.Path(root)
    seen = set()
    for path in sorted(games.rglob("*")):
        relative = path.relative_to(games)
        if path.is_symlink() or not path.is_file() or path.suffix in (".dat", ".u8") or "off" in relative.parts[:-1]:
            continue
        real = os.path.realpath(path)
        if real not in seen:
            seen.add(real)
            yield str(relative), path


def fortune_records(package, language, root):
    groups = collections.defaultdict(list)
    for relative, path in fortune_files(root):
        data = path.read_bytes()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = data.decode("latin-1")  # a few old cookie files predate UTF-8
        for cookie in fortunes(text):
            groups[f"fortunes:{package}/{relative}"].append(
                {"text": debian_archive.cut(cookie, MAX_BYTES), "lang": language, "source": f"{package}:{relative}"})
    return groups


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", default=debian_archive.default_output("text"))
    parser.add_argument("--scratch", default=str(debian_archive.DEFAULT_SCRATCH), help="downloads and unpacked packages")
    parser.add_argument("--help-root", help="a folder of <language>/<document>/*.page to read instead of gnome-user-docs")
    parser.add_argument("--fortunes-root", action="append", default=[], metavar="LANGUAGE=FOLDER",
                        help="fortune files to read instead of the packages (repeatable)")
    debian_archive.add_common_arguments(parser)
    arguments = parser.parse_args(argv)
    started = time.monotonic()
    local = bool(arguments.help_root or arguments.fortunes_root)
    fetched = {}
    if not local:
        try:
            fetched = debian_archive.fetch(["gnome-user-docs", *FORTUNE_PACKAGES], arguments.scratch, arguments.refresh)
        except debian_archive.FetchError as error:
            sys.exit(f"text_corpus: {error}")
    groups, problems = help_pages(arguments.help_root or fetched["gnome-user-docs"]["root"]) \
        if (arguments.help_root or not local) else ({}, [])
    sources = [(package, language, fetched[package]["root"]) for package, language in FORTUNE_PACKAGES.items()] if not local else \
        [(f"local-{index}", *entry.split("=", 1)) for index, entry in enumerate(arguments.fortunes_root)]
    for package, language, root in sources:
        groups.update(fortune_records(package, language, root))
    if not groups:
        sys.exit("text_corpus: no text found")
    records, duplicates, split_of = debian_archive.split_and_dedupe(groups, arguments.seed, arguments.dev_fraction,
                                                                   arguments.test_fraction, debian_archive.text_keys)
    leaks = debian_archive.remove_leaks(records, debian_archive.text_keys)
    kinds = collections.Counter(group.split(":")[0] for group in groups)
    manifest = debian_archive.write_corpus(
        arguments.output, "text", "scripts/data/text_corpus.py", records, arguments.seed,
        {"groups": dict(kinds),
         "groups_per_split": dict(collections.Counter(split_of.values())),
         "records_per_kind_and_split": {split: dict(collections.Counter(record["source"].split(":")[0] if ":" in record["source"]
                                                                       else "help" for record in records[split]))
                                        for split in debian_archive.SPLITS},
         "unreadable_pages": problems,
         "removed_as_duplicates_within_a_split": duplicates,
         "removed_from_dev_and_test_as_leaks": leaks,
         "source": {"packages": [debian_archive.package_record(details) for details in fetched.values()]}})
    print("text_corpus: " + ", ".join(f"{split} {manifest['records'][split]['total']}" for split in debian_archive.SPLITS) +
          f" texts in {time.monotonic() - started:.1f} s -> {arguments.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
