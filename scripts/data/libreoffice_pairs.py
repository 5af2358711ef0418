#!/usr/bin/env python3
"""libreoffice_pairs.py: English -> translation pairs from LibreOffice's Debian language packs
(libreoffice-l10n-<lang>: the UI gettext catalogues under usr/lib/libreoffice/program/resource/<lang>/
LC_MESSAGES/*.mo) and, unless --no-help, help paragraphs of libreoffice-help-<lang> paired with
libreoffice-help-en-us by file and par_id. Packages are downloaded and unpacked (not installed) by
debian_archive.py. The .mo reader, cleaning, filters and split rule are gettext_pairs.py's: one
translation per (string, language) within a split, split by catalogue group (a UI catalogue such as
"sw", or a help folder such as "help/text/swriter/guide"), no English string of dev or test in train
(nor of test in dev), and none of dev or test in data/gettext/train.jsonl either, while train drops the
English strings of data/gettext/{dev,test}.jsonl, so the two corpora can be trained on together.
Writes data/libreoffice/{train,dev,test}.jsonl and manifest.json. Standard library only;
deterministic for a seed. See docs/data.md.
"""

import argparse
import collections
import html.parser
import json
import pathlib
import re
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import debian_archive  # noqa: E402
from gettext_pairs import DEFAULT_LANGUAGES, catalogue_group, clean, keep, kept_pairs, read_mo  # noqa: E402

SPLITS = debian_archive.SPLITS
# UForm language -> the suffix of Debian's package names where it differs.
PACKAGE_SUFFIX = {"zh": "zh-cn"}
HELP_ENGLISH = "libreoffice-help-en-us"

# LibreOffice's own placeholders and accelerator, turned into what gettext_pairs.clean understands:
# the product name is a word both sides keep, other variables become a "%s" it removes tidily.
PRODUCT_NAME = re.compile(r"%PRODUCTNAME\b|\$\(PRODUCTNAME\)")
LO_VARIABLE = re.compile(r"%[A-Z][A-Z0-9_]+\b|\$\([A-Za-z][A-Za-z0-9_]*\)|\$[A-Z][A-Z0-9_]+\$|#\d+\b")
TILDE_ACCELERATOR = re.compile(r"~(?=[^\W_])")
CJK_TILDE = re.compile(r"\s*[(（]~[A-Za-z0-9][)）]")


def lo_prepare(text):
    """LibreOffice strings before gettext_pairs.clean: product name kept, variables made placeholders,
    the "~" accelerator removed (one "~" before a letter; "(~O)" after CJK text with its brackets)."""
    text = PRODUCT_NAME.sub("LibreOffice", text)
    text = LO_VARIABLE.sub("%s", text)
    text = CJK_TILDE.sub("", text)
    if text.count("~") == 1:
        text = TILDE_ACCELERATOR.sub("", text)
    return text


def lo_clean(text, other):
    return clean(lo_prepare(text), lo_prepare(other))


def ui_catalogues(root):
    """[(catalogue path, group)] of the UI .mo files in one unpacked libreoffice-l10n package."""
    found = sorted(pathlib.Path(root).glob("usr/lib/libreoffice/program/resource/*/LC_MESSAGES/*.mo"))
    return [(path, catalogue_group(path)) for path in found if not path.is_symlink()]


class HelpParagraphs(html.parser.HTMLParser):
    """Texts of the elements of a help page whose id is a paragraph or heading id (par_id..., hd_id...),
    in document order as (id, text); nested ones are kept on their own and inside their parent. Of a
    system switch ("Command" on macOS, "Ctrl" elsewhere) only the default case is kept."""

    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track", "wbr"}
    ID = re.compile(r"(?:par|hd)_id\w+$")

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.open = []  # [id, depth, [text pieces]]
        self.depth = 0
        self.found = []
        self.skip_from = None  # the depth of an open macOS-only element, whose text is left out

    def handle_starttag(self, tag, attributes):
        if tag in self.VOID:
            return
        self.depth += 1
        attributes = dict(attributes)
        if self.skip_from is None and "MAC" in (attributes.get("class") or "").split():
            self.skip_from = self.depth
        identifier = attributes.get("id") or ""
        if self.ID.match(identifier):
            self.open.append([identifier, self.depth, []])

    def handle_startendtag(self, tag, attributes):
        pass

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        while self.open and self.open[-1][1] >= self.depth:
            identifier, _, pieces = self.open.pop()
            self.found.append((identifier, " ".join("".join(pieces).split())))
        if self.skip_from is not None and self.depth <= self.skip_from:
            self.skip_from = None
        self.depth = max(0, self.depth - 1)

    def handle_data(self, data):
        if self.skip_from is not None:
            return
        for entry in self.open:
            entry[2].append(data)


def help_paragraphs(path):
    """{(id, occurrence): text} of one help page."""
    parser = HelpParagraphs()
    parser.feed(pathlib.Path(path).read_text(encoding="utf-8", errors="replace"))
    parser.close()
    seen = collections.Counter()
    result = {}
    for identifier, text in parser.found:
        result[(identifier, seen[identifier])] = text
        seen[identifier] += 1
    return result


def help_pages(root):
    """{page path relative to the language folder: absolute path} of an unpacked help package."""
    pages = {}
    for folder in sorted(pathlib.Path(root).glob("usr/share/libreoffice/help/*")):
        for page in sorted(folder.rglob("*.html")):
            pages[page.relative_to(folder).as_posix()] = page
    return pages


def help_pairs(english_pages, translated_pages, dropped):
    """{group: {catalogue: [(english, translation)]}} from pages present in both help packages."""
    grouped = collections.defaultdict(dict)
    english_cache = {}
    for relative, page in translated_pages.items():
        if relative not in english_pages:
            continue
        if relative not in english_cache:
            english_cache[relative] = help_paragraphs(english_pages[relative])
        english_of = english_cache[relative]
        kept = []
        for key, translation in help_paragraphs(page).items():
            english = english_of.get(key)
            if english is None:
                dropped["help paragraph without an English counterpart"] += 1
                continue
            reason = keep(english, translation)
            if reason:
                dropped[reason] += 1
            else:
                kept.append((english, translation))
        catalogue = "help/" + relative[: -len(".html")]
        grouped["help/" + str(pathlib.PurePosixPath(relative).parent)][catalogue] = kept
    return grouped


def gettext_english(folder, splits):
    """Case-folded English strings (queries) of data/gettext/<split>.jsonl, for the splits that exist."""
    strings = set()
    for split in splits:
        path = pathlib.Path(folder) / f"{split}.jsonl"
        if path.is_file():
            with path.open(encoding="utf-8") as file:
                strings.update(json.loads(line)["query"].casefold() for line in file)
    return strings


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", default=debian_archive.default_output("libreoffice"))
    parser.add_argument("--scratch", default=str(debian_archive.DEFAULT_SCRATCH), help="downloads and unpacked packages")
    parser.add_argument("--languages", default=",".join(DEFAULT_LANGUAGES), help="comma-separated UForm language codes")
    parser.add_argument("--gettext", default=debian_archive.default_output("gettext"),
                        help="the gettext corpus whose train (and dev/test) strings must not cross splits with this one")
    parser.add_argument("--no-help", action="store_true", help="UI catalogues only, no libreoffice-help-* paragraphs")
    debian_archive.add_common_arguments(parser)
    arguments = parser.parse_args(argv)
    started = time.monotonic()
    languages = arguments.languages.split(",")

    # Which packages Debian has: a language without an l10n package is reported, not fatal.
    try:
        debian_archive.private_lists(arguments.scratch, arguments.refresh)
    except debian_archive.FetchError as error:
        sys.exit(f"libreoffice_pairs: {error}")

    def exists(package):
        try:
            debian_archive.candidate(package, arguments.scratch)
            return True
        except debian_archive.FetchError:
            return False

    l10n = {language: f"libreoffice-l10n-{PACKAGE_SUFFIX.get(language, language)}" for language in languages}
    l10n = {language: package for language, package in l10n.items() if exists(package)}
    helps = {}
    if not arguments.no_help and exists(HELP_ENGLISH):
        helps = {language: f"libreoffice-help-{PACKAGE_SUFFIX.get(language, language)}" for language in l10n}
        helps = {language: package for language, package in helps.items() if exists(package)}
    wanted = sorted(set(l10n.values()) | set(helps.values()) | ({HELP_ENGLISH} if helps else set()))
    try:
        fetched = debian_archive.fetch(wanted, arguments.scratch)
    except debian_archive.FetchError as error:
        sys.exit(f"libreoffice_pairs: {error}")

    # Cleaned pairs per (language, catalogue), and a group per catalogue.
    dropped = collections.Counter()
    pairs_of = {}  # (language, catalogue) -> [(english, translation)]
    group_of = {}  # catalogue -> group
    for language in sorted(l10n):
        for path, group in ui_catalogues(fetched[l10n[language]]["root"]):
            try:
                raw = read_mo(path)
            except ValueError as error:
                print(f"libreoffice_pairs: skipping {error}", file=sys.stderr)
                dropped["unreadable catalogue"] += 1
                continue
            kept = kept_pairs(raw, lo_clean, dropped)
            pairs_of[(language, path.stem)] = pairs_of.get((language, path.stem), []) + kept
            group_of[path.stem] = group
    if helps:
        english_pages = help_pages(fetched[HELP_ENGLISH]["root"])
        for language in sorted(helps):
            for group, catalogues in help_pairs(english_pages, help_pages(fetched[helps[language]]["root"]), dropped).items():
                for catalogue, kept in catalogues.items():
                    pairs_of[(language, catalogue)] = kept
                    group_of[catalogue] = group
    sizes = collections.Counter()
    for (_, catalogue), kept in pairs_of.items():
        sizes[group_of[catalogue]] += len(kept)
    split_of_group = debian_archive.assign_splits(set(group_of.values()), sizes, arguments.seed,
                                                  arguments.dev_fraction, arguments.test_fraction)

    # One translation per (English, language) within a split: the most frequent, ties to the first catalogue.
    candidates = {split: collections.defaultdict(collections.Counter) for split in SPLITS}
    first_seen = {}
    for (language, catalogue) in sorted(pairs_of):
        split = split_of_group[group_of[catalogue]]
        for english, translation in pairs_of[(language, catalogue)]:
            candidates[split][(english, language)][translation] += 1
            first_seen.setdefault((split, english, language, translation), catalogue)
    chosen = {split: {} for split in SPLITS}
    for split in SPLITS:
        for (english, language), counts in candidates[split].items():
            translation = min(counts, key=lambda t: (-counts[t], first_seen[(split, english, language, t)]))
            chosen[split][(english, language)] = (translation, first_seen[(split, english, language, translation)])

    # No leaks, as gettext_pairs: English (case-folded) of train leaves dev and test, of dev leaves test;
    # also the gettext corpus's train strings leave dev and test, and its dev/test strings leave train.
    gettext_train = gettext_english(arguments.gettext, ["train"])
    gettext_held_out = gettext_english(arguments.gettext, ["dev", "test"])
    removed = collections.Counter()
    for key in list(chosen["train"]):
        if key[0].casefold() in gettext_held_out:
            del chosen["train"][key]
            removed["train: in gettext dev or test"] += 1
    train_english = {english.casefold() for english, _ in chosen["train"]}
    dev_english = set()
    for split in ("dev", "test"):
        for key in list(chosen[split]):
            folded = key[0].casefold()
            if folded in train_english or (split == "test" and folded in dev_english):
                del chosen[split][key]
                removed[f"{split}: in this corpus's train" + (" or dev" if split == "test" else "")] += 1
            elif folded in gettext_train:
                del chosen[split][key]
                removed[f"{split}: in gettext train"] += 1
        if split == "dev":
            dev_english = {english.casefold() for english, _ in chosen["dev"]}

    records = {split: [{"query": english, "positives": [translation], "lang": language, "catalogue": catalogue}
                       for (english, language), (translation, catalogue) in sorted(chosen[split].items())]
               for split in SPLITS}
    catalogues_per_split = collections.Counter(split_of_group[group_of[catalogue]] for _, catalogue in pairs_of)
    sources = collections.Counter()
    for split in SPLITS:
        for record in records[split]:
            sources[(split, "help" if record["catalogue"].startswith("help/") else "ui")] += 1
    manifest = debian_archive.write_corpus(
        arguments.output, "libreoffice", "scripts/data/libreoffice_pairs.py", records, arguments.seed,
        {"languages": sorted(l10n),
         "languages_without_package": sorted(set(languages) - set(l10n)),
         "languages_with_help": sorted(helps),
         "records_per_source": {split: {source: sources[(split, source)] for source in ("ui", "help")} for split in SPLITS},
         "catalogues_per_split": {split: catalogues_per_split[split] for split in SPLITS},
         "groups_per_split": {split: sum(1 for s in split_of_group.values() if s == split) for split in SPLITS},
         "removed_as_leaks": dict(sorted(removed.items())),
         "gettext_corpus_checked": {"train": bool(gettext_train), "dev_and_test": bool(gettext_held_out)},
         "dropped_pairs": dict(sorted(dropped.items())),
         "source": {"packages": [debian_archive.package_record(fetched[package]) for package in wanted]}})
    print("libreoffice_pairs: " + ", ".join(f"{split} {manifest['records'][split]['total']}" for split in SPLITS) +
          f" pairs in {time.monotonic() - started:.1f} s -> {arguments.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
