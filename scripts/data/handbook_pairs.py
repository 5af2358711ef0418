#!/usr/bin/env python3
"""handbook_pairs.py: pairs from The Debian Administrator's Handbook (package debian-handbook: one
book in English and its translations, DocBook rendered to HTML under
usr/share/doc/debian-handbook/html/<locale>/, one file a section). Two corpora:

- data/handbook: English -> translation pairs of the book's headings and paragraphs. Translators
  rebuild each page from the English element by element (po4a), so a page's headings and
  paragraphs pair by their order; a page whose sequence of kinds differs from the English page's is
  left out whole in that language, and untranslated paragraphs (equal to the English) are dropped.
  Long prose paragraphs in 15 of the UForm languages, where gettext holds interface strings.
- data/handbook-sections: English section title -> the section's text (its paragraphs up to the
  next heading, whole paragraphs up to MAX_BYTES): a short description and a longer text.

Section numbers are cut from headings ("12.3.2. Preseeding" -> "Preseeding"), program listings and
terminal sessions (<pre>) are left out, inline markup is flattened. A page is one split group in
both corpora and every language; one translation per (English, language) within a split; no text of
train in dev or test; no English string of gettext's or LibreOffice's dev and test in train.
Standard library only; deterministic for a seed. See docs/data.md.
"""

import collections
import html.parser
import pathlib
import re
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import debian_archive  # noqa: E402
from gettext_pairs import DEFAULT_LANGUAGES, MAX_BYTES, kept_pairs, locale_language, locale_rank  # noqa: E402

BOOK = "usr/share/doc/debian-handbook/html"
NUMBERING = re.compile(r"^(?:[^\d\s]+\s)?(?:\d+|[A-Z])(?:\.\d+)*\.\s+")  # "12.3. ", "B.4.5. ", "Chapter 1. ", "Exemple 12.2. "
SECTION_MIN_BYTES = 80  # a section's text: at least a sentence


class Blocks(html.parser.HTMLParser):
    """A page's headings ("h": h1..h6 and the sidebars' and examples' titles) and paragraphs ("p")
    in document order, as [(kind, text)]; the text inside <pre> and a sidebar title's category (the
    <em> it opens with: "GOING FURTHER") is skipped."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.blocks, self.open, self.depth, self.text = [], None, 0, []
        self.skipping = 0  # nested <pre> or category <em> inside the open block

    def handle_starttag(self, tag, attributes):
        classes = (dict(attributes).get("class") or "").split()
        if self.open:
            self.depth += tag == "div"
            if tag == "pre" or (self.open == "t" and tag == "em" and not "".join(self.text).strip()):
                self.skipping += 1
            return
        if re.fullmatch(r"h[1-6]", tag) and "title" in classes:
            self.open, self.depth, self.text = "h", 0, []
        elif tag == "p" and "title" in classes:
            self.open, self.depth, self.text = "t", 0, []
        elif tag == "div" and "para" in classes:
            self.open, self.depth, self.text = "p", 0, []

    def handle_endtag(self, tag):
        if not self.open:
            return
        if self.skipping and (tag == "pre" or (self.open == "t" and tag == "em")):
            self.skipping -= 1
            return
        closes = (self.open == "h" and re.fullmatch(r"h[1-6]", tag)) or (self.open == "t" and tag == "p") or \
                 (self.open == "p" and tag == "div" and self.depth == 0)
        if self.open == "p" and tag == "div" and self.depth > 0:
            self.depth -= 1
        if closes:
            text = " ".join("".join(self.text).split())
            if self.open != "p":
                text = NUMBERING.sub("", text)
            self.blocks.append(("p" if self.open == "p" else "h", text))
            self.open, self.skipping = None, 0

    def handle_data(self, data):
        if self.open and not self.skipping:
            self.text.append(data)


def page_blocks(path):
    """[(kind, text)] of one HTML page, or None where it cannot be read."""
    try:
        parser = Blocks()
        parser.feed(pathlib.Path(path).read_text(encoding="utf-8"))
        parser.close()
    except (OSError, UnicodeDecodeError):
        return None
    return parser.blocks


def page_pairs(english, translated, dropped):
    """[(english, translation)] of one page in one language, or [] (counted) where the pages do not align."""
    if english is None or translated is None:
        dropped["a page that does not read"] += 1
        return []
    if [kind for kind, _ in english] != [kind for kind, _ in translated]:
        dropped["a page whose headings and paragraphs differ from the English page's"] += 1
        return []
    return kept_pairs([(source, text) for (_, source), (_, text) in zip(english, translated)], lambda text, other: text, dropped)


def sections(blocks, dropped):
    """[(title, text)] of one English page: each heading with its following paragraphs up to the next
    heading, whole paragraphs up to MAX_BYTES in all; a heading without SECTION_MIN_BYTES of them is dropped."""
    found, title, body = [], None, []

    def close():
        if title is None:
            return
        text = ""
        for paragraph in body:
            joined = f"{text}\n\n{paragraph}" if text else paragraph
            if len(joined.encode()) > MAX_BYTES:
                break
            text = joined
        if len(text.encode()) < SECTION_MIN_BYTES or not any(character.isalpha() for character in title):
            dropped["a section title without a paragraph of text"] += 1
        else:
            found.append((title, text))

    for kind, text in blocks:
        if kind == "h":
            close()
            title, body = text, []
        elif text:
            body.append(text)
    close()
    return found


def book_locales(root):
    """{locale: folder} of an unpacked debian-handbook ("fr-FR" -> its folder)."""
    return {folder.name: folder for folder in sorted((pathlib.Path(root) / BOOK).glob("*")) if folder.is_dir() and "-" in folder.name}


def main(argv=None):
    parser = debian_archive.corpus_parser(__doc__.split("\n\n")[0], "handbook")
    parser.add_argument("--languages", default=",".join(DEFAULT_LANGUAGES), help="comma-separated UForm language codes")
    parser.add_argument("--sections-output", default=debian_archive.default_output("handbook-sections"),
                        help="where the English title -> section text corpus goes")
    parser.add_argument("--book-root", help="a folder holding usr/share/doc/debian-handbook instead of fetching the package")
    debian_archive.add_held_out_text(parser)
    arguments = parser.parse_args(argv)
    started = time.monotonic()
    languages = set(arguments.languages.split(","))

    if arguments.book_root:
        root, packages = pathlib.Path(arguments.book_root), []
    else:
        try:
            debian_archive.private_lists(arguments.scratch, arguments.refresh)
        except debian_archive.FetchError as error:
            sys.exit(f"handbook_pairs: {error}")
        fetched = debian_archive.fetch_unless_local("handbook_pairs", {"debian-handbook": None}, arguments.scratch, arguments.refresh)
        root, packages = fetched["debian-handbook"]["root"], [debian_archive.package_record(fetched["debian-handbook"])]

    folders = book_locales(root)
    if "en-US" not in folders:
        sys.exit(f"handbook_pairs: {pathlib.Path(root) / BOOK} has no en-US folder: not the debian-handbook package")
    chosen = {}  # language -> (rank, folder) of its preferred locale
    for locale, folder in folders.items():
        language = locale_language(locale.replace("-", "_")) if locale != "en-US" else None
        if language in languages and (language not in chosen or locale_rank(language, locale.replace("-", "_")) < chosen[language][0]):
            chosen[language] = (locale_rank(language, locale.replace("-", "_")), folder)

    dropped, section_dropped = collections.Counter(), collections.Counter()
    groups, section_groups = collections.defaultdict(list), collections.defaultdict(list)
    pages_per_language = collections.Counter()
    for english_page in sorted(folders["en-US"].glob("*.html")):
        page = english_page.stem
        english = page_blocks(english_page)
        for title, text in sections(english or [], section_dropped):
            section_groups[page].append({"query": title, "positives": [text], "lang": "en", "page": page})
        for language, (_, folder) in sorted(chosen.items()):
            translated_page = folder / english_page.name
            if not translated_page.is_file():
                continue
            pairs = page_pairs(english, page_blocks(translated_page), dropped)
            pages_per_language[language] += bool(pairs)
            seen = set()
            for source, text in pairs:
                if source.casefold() not in seen:  # a repeated heading of a page once
                    seen.add(source.casefold())
                    groups[page].append({"query": source, "positives": [text], "lang": language, "page": page})

    # One assignment of pages for both corpora, so that no page's English is in one's train and the other's test.
    every = {page: groups.get(page, []) + section_groups.get(page, []) for page in set(groups) | set(section_groups)}
    split_of = debian_archive.split_groups(every, arguments.seed, arguments.dev_fraction, arguments.test_fraction)
    source = {"packages": packages, "local": [str(root)] if arguments.book_root else []}

    records = debian_archive.split_records(groups, split_of)
    removed = collections.Counter()
    checked = debian_archive.drop_held_out_english(records, arguments.held_out_text, removed)
    debian_archive.one_per_language_without_leaks(records, removed)
    manifest = debian_archive.write_corpus(
        arguments.output, "handbook", "scripts/data/handbook_pairs.py", records, arguments.seed,
        {"languages": sorted(languages), "locales": {language: folder.name for language, (_, folder) in sorted(chosen.items())},
         "pages_paired_per_language": dict(sorted(pages_per_language.items())),
         "groups_per_split": {split: sum(1 for s in split_of.values() if s == split) for split in debian_archive.SPLITS},
         "held_out_corpora_checked": checked,
         "removed_as_leaks": dict(sorted(removed.items())), "dropped_pairs": dict(sorted(dropped.items())), "source": source})
    debian_archive.print_summary("handbook_pairs", manifest, started, arguments.output)

    section_records = debian_archive.split_records(section_groups, split_of)
    section_removed = debian_archive.remove_leaks(section_records)
    manifest = debian_archive.write_corpus(
        arguments.sections_output, "handbook-sections", "scripts/data/handbook_pairs.py", section_records, arguments.seed,
        {"languages": ["en"], "removed_as_leaks": section_removed,
         "dropped_pairs": dict(sorted(section_dropped.items())), "source": source})
    debian_archive.print_summary("handbook_pairs", manifest, started, arguments.sections_output)


if __name__ == "__main__":
    main()
