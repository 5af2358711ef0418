#!/usr/bin/env python3
"""manual_pairs.py: pairs from Debian's translated manuals, DocBook (or reStructuredText) rendered to
HTML (BOOKS: The Debian Administrator's Handbook, the Installation Guide, the Debian Reference, the
New Maintainers' Guide, the Debian FAQ, the Developer's Reference). Two corpora:

- data/manuals: English -> translation pairs of the manuals' headings and paragraphs. Translators
  rebuild each page from the English DocBook element by element (po4a), so a page's headings and
  paragraphs pair by their order; a page whose sequence of kinds differs from the English page's is
  left out whole in that language, and untranslated paragraphs (equal to the English) are dropped.
  Long prose paragraphs in most of the UForm languages, where gettext holds interface strings.
- data/manual-sections: English section title -> the section's text (its paragraphs up to the
  next heading, whole paragraphs up to MAX_BYTES): a short description and a longer text.

Section numbers are cut from headings ("12.3.2. Preseeding" -> "Preseeding"), program listings and
terminal sessions (<pre>) are left out, inline markup is flattened. A page (book and page) is one
split group in both corpora and every language; one translation per (English, language) within a
split; no text of train in dev or test; no English string of gettext's or LibreOffice's dev and
test in train. Standard library only; deterministic for a seed. See docs/data.md.
"""

import collections
import html.parser
import pathlib
import re
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import debian_archive  # noqa: E402
from gettext_pairs import DEFAULT_LANGUAGES, MAX_BYTES, aligned_pairs, locale_language, locale_rank  # noqa: E402

# book: (packages, the folders in each package (a glob), layout, the English locale). "folders":
# FOLDER/<locale>/<page>.html; "suffix": FOLDER/<page>.<locale>.html; "sphinx": Sphinx's HTML, the
# English in FOLDER, a translation in FOLDER/<locale>/. A language with several locales reads its preferred one.
BOOKS = {
    "handbook": (("debian-handbook",), "usr/share/doc/debian-handbook/html", "folders", "en-US"),
    "installation-guide": (("installation-guide-amd64",), "usr/share/doc/installation-guide-amd64", "folders", "en"),
    "reference": (tuple(f"debian-reference-{code}" for code in "en de es fr id it ja pt zh-cn".split()),
                  "usr/share/debian-reference", "suffix", "en"),
    "maint-guide": (("maint-guide",) + tuple(f"maint-guide-{code}" for code in "de es fr it ja ru vi zh-cn".split()),
                    "usr/share/doc/maint-guide*/html", "suffix", "en"),
    "faq": (("debian-faq",) + tuple(f"debian-faq-{code}" for code in "de fr it ja ko pt ru zh-cn".split()),
            "usr/share/doc/debian/FAQ*", "suffix", "en"),
    "developers-reference": (("developers-reference",) + tuple(f"developers-reference-{code}" for code in "de fr it ja ru".split()),
                             "usr/share/developers-reference", "sphinx", "en"),
}
NUMBERING = re.compile(r"^(?:[^\d\s]+\s)?(?:\d+|[A-Z])(?:\.\d+)*\.\s+")  # "12.3. ", "B.4.5. ", "Chapter 1. ", "Exemple 12.2. "
SECTION_MIN_BYTES = 80  # a section's text: at least a sentence


class Blocks(html.parser.HTMLParser):
    """A page's headings ("h": h1..h6 with class "title", any with `sphinx`, and the sidebars' and
    examples' titles) and paragraphs ("p": Publican's <div class="para"> and DocBook XSL's and Sphinx's
    <p>) in document order, as [(kind, text)]; the text inside <pre>, a sidebar title's category (the
    <em> it opens with: "GOING FURTHER") and Sphinx's heading links (the pilcrow) is skipped."""

    def __init__(self, sphinx=False):
        super().__init__(convert_charrefs=True)
        self.sphinx = sphinx
        self.blocks, self.open, self.depth, self.text = [], None, 0, []
        self.skipping = 0  # nested <pre> or category <em> inside the open block

    def handle_starttag(self, tag, attributes):
        classes = (dict(attributes).get("class") or "").split()
        if self.open:
            self.depth += tag == "div"
            if tag == "pre" or (self.open == "title" and tag == "em" and not "".join(self.text).strip()) or \
                    (tag == "a" and "headerlink" in classes):
                self.skipping += 1
            return
        if re.fullmatch(r"h[1-6]", tag) and ("title" in classes or self.sphinx):
            self.open = "heading"
        elif tag == "p":
            self.open = "title" if "title" in classes else "p"
        elif tag == "div" and "para" in classes:
            self.open = "para"
        self.depth, self.text = 0, []

    def handle_endtag(self, tag):
        if not self.open:
            return
        if self.skipping and (tag in ("pre", "a") or (self.open == "title" and tag == "em")):
            self.skipping -= 1
            return
        if self.open == "para" and tag == "div" and self.depth > 0:
            self.depth -= 1
            return
        closes = {"heading": re.fullmatch(r"h[1-6]", tag), "title": tag == "p", "p": tag == "p", "para": tag == "div"}
        if closes[self.open]:
            text = " ".join("".join(self.text).split())
            kind = "p" if self.open in ("p", "para") else "h"
            self.blocks.append((kind, NUMBERING.sub("", text) if kind == "h" else text))
            self.open, self.skipping = None, 0

    def handle_data(self, data):
        if self.open and not self.skipping:
            self.text.append(data)


def page_blocks(path, sphinx=False):
    """[(kind, text)] of one HTML page (with `sphinx`, its main body only: not the navigation and
    sidebar around it), or None where it cannot be read."""
    try:
        text = pathlib.Path(path).read_text(encoding="utf-8")
        if sphinx:
            start, end = text.find('role="main"'), text.find('class="sphinxsidebar"')
            text = text[text.find(">", start) + 1: end if end > start else len(text)] if start >= 0 else ""
        parser = Blocks(sphinx)
        parser.feed(text)
        parser.close()
    except (OSError, UnicodeDecodeError):
        return None
    return parser.blocks


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


def book_pages(roots, folder, layout):
    """{locale: {page: path}} of one book over the unpacked package roots that hold it."""
    pages = collections.defaultdict(dict)
    for root in roots:
        for base in sorted(pathlib.Path(root).glob(folder)):
            if layout in ("folders", "sphinx"):
                for path in sorted(base.glob("*/*.html")):
                    pages[path.parent.name][path.stem] = path
                for path in sorted(base.glob("*.html")) if layout == "sphinx" else ():  # the English, at the top
                    pages["en"][path.stem] = path
            else:  # the translations may sit in a folder of their own below (the FAQ's fr/)
                for path in sorted(list(base.glob("*.*.html")) + list(base.glob("*/*.*.html"))):
                    page, _, locale = path.name[: -len(".html")].rpartition(".")
                    pages[locale][page] = path
    return pages


def preferred_locales(locales, english, languages):
    """{language: locale} of a book: for each wanted language, its preferred locale among those present."""
    chosen = {}
    for locale in locales:
        code = locale.replace("-", "_")
        language = locale_language(code) if locale != english else None
        if language in languages and (language not in chosen or locale_rank(language, code) < locale_rank(language, chosen[language].replace("-", "_"))):
            chosen[language] = locale
    return dict(sorted(chosen.items()))


def main(argv=None):
    parser = debian_archive.corpus_parser(__doc__.split("\n\n")[0], "manuals")
    parser.add_argument("--languages", default=",".join(DEFAULT_LANGUAGES), help="comma-separated UForm language codes")
    parser.add_argument("--books", default=",".join(BOOKS), help=f"comma-separated, of {', '.join(BOOKS)}")
    parser.add_argument("--sections-output", default=debian_archive.default_output("manual-sections"),
                        help="where the English title -> section text corpus goes")
    parser.add_argument("--manuals-root", help="a folder holding the books' unpacked packages (usr/share/...) instead of fetching them")
    debian_archive.add_held_out_text(parser)
    arguments = parser.parse_args(argv)
    started = time.monotonic()
    languages = set(arguments.languages.split(","))
    books = arguments.books.split(",")
    unknown = [book for book in books if book not in BOOKS]
    if unknown:
        sys.exit(f"manual_pairs: unknown book {unknown[0]}: the books are {', '.join(BOOKS)}")

    if arguments.manuals_root:
        roots, packages = {book: [pathlib.Path(arguments.manuals_root)] for book in books}, []
    else:
        try:
            debian_archive.private_lists(arguments.scratch, arguments.refresh)
        except debian_archive.FetchError as error:
            sys.exit(f"manual_pairs: {error}")
        wanted = {package: None for book in books for package in BOOKS[book][0]}
        fetched = debian_archive.fetch_unless_local("manual_pairs", wanted, arguments.scratch, arguments.refresh)
        roots = {book: [fetched[package]["root"] for package in BOOKS[book][0]] for book in books}
        packages = [debian_archive.package_record(details) for details in fetched.values()]

    dropped, section_dropped = collections.Counter(), collections.Counter()
    groups, section_groups = collections.defaultdict(list), collections.defaultdict(list)
    pages_per_language, locales = {}, {}
    for book in books:
        _, folder, layout, english_locale = BOOKS[book]
        pages = book_pages(roots[book], folder, layout)
        if english_locale not in pages:
            sys.exit(f"manual_pairs: no {english_locale} pages of {book} under {', '.join(str(root) for root in roots[book])}/{folder}")
        locales[book] = preferred_locales(pages, english_locale, languages)
        counts = pages_per_language[book] = collections.Counter()
        for page, english_page in sorted(pages[english_locale].items()):
            group = f"{book}/{page}"
            english = page_blocks(english_page, layout == "sphinx")
            for title, text in sections(english or [], section_dropped):
                section_groups[group].append({"query": title, "positives": [text], "lang": "en", "page": group})
            for language, locale in locales[book].items():
                if page not in pages[locale]:
                    continue
                pairs = aligned_pairs(english, page_blocks(pages[locale][page], layout == "sphinx"), dropped,
                                      "a page whose headings and paragraphs differ from the English page's")
                counts[language] += debian_archive.append_page_pairs(groups, group, pairs, language)

    # One assignment of pages for both corpora, so that no page's English is in one's train and the other's test.
    every = {group: groups.get(group, []) + section_groups.get(group, []) for group in set(groups) | set(section_groups)}
    split_of = debian_archive.split_groups(every, arguments.seed, arguments.dev_fraction, arguments.test_fraction)
    source = {"packages": packages, "local": [arguments.manuals_root] if arguments.manuals_root else []}

    records = debian_archive.split_records(groups, split_of)
    removed = collections.Counter()
    checked = debian_archive.drop_held_out_english(records, arguments.held_out_text, removed)
    debian_archive.one_per_language_without_leaks(records, removed)
    manifest = debian_archive.write_corpus(
        arguments.output, "manuals", "scripts/data/manual_pairs.py", records, arguments.seed,
        {"languages": sorted(languages), "locales": locales,
         "pages_paired_per_language": {book: dict(sorted(counts.items())) for book, counts in pages_per_language.items()},
         "groups_per_split": {split: sum(1 for s in split_of.values() if s == split) for split in debian_archive.SPLITS},
         "held_out_corpora_checked": checked, "removed_as_leaks": dict(sorted(removed.items())),
         "dropped_pairs": dict(sorted(dropped.items())), "source": source})
    debian_archive.print_summary("manual_pairs", manifest, started, arguments.output)

    section_records = debian_archive.split_records(section_groups, split_of)
    section_removed = debian_archive.remove_leaks(section_records)
    manifest = debian_archive.write_corpus(
        arguments.sections_output, "manual-sections", "scripts/data/manual_pairs.py", section_records, arguments.seed,
        {"languages": ["en"], "removed_as_leaks": section_removed, "dropped_pairs": dict(sorted(section_dropped.items())),
         "source": source})
    debian_archive.print_summary("manual_pairs", manifest, started, arguments.sections_output)


if __name__ == "__main__":
    main()
