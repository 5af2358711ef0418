#!/usr/bin/env python3
"""manpage_translations.py: English -> translation pairs of man pages' paragraphs, from the
translated pages Debian ships (manpages-<lang>: manpages-l10n's, and the Japanese and Chinese
projects'; usr/share/man/<locale>/man*/) beside the English pages of the packages manpage_pairs.py
reads. A translated page is rebuilt from the English one macro by macro (po4a), so the two pages'
sections come in one order and, within a section, the paragraphs (and option items) pair by their
order; a section whose sequence of paragraph kinds differs from the English section's (a
translation of another version of the page) is left out whole, as is the section translators add
at the end (credits). Untranslated paragraphs (equal to the English) are dropped. Technical prose in
13 of the UForm languages, Ukrainian, Vietnamese and Turkish among them, which the manuals lack.
Writes data/manpage-translations/{train,dev,test}.jsonl and manifest.json.

A page (name and section) is one split group in every language; a page that is in data/manpages'
dev or test is kept out of train; one translation per (English, language) within a split; no text of
train in dev or test; no English string of gettext's or LibreOffice's dev and test in train.
Standard library only; deterministic for a seed. See docs/data.md.
"""

import collections
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import debian_archive  # noqa: E402
import manpage_pairs  # noqa: E402
from gettext_pairs import DEFAULT_LANGUAGES, aligned_pairs, locale_language, locale_rank  # noqa: E402

# The translated man page packages in Debian 12 for the UForm languages (manpages-l10n's, and Japanese's and
# Chinese's own projects'; Debian 12's manpages-pt holds no pages, so Portuguese is Brazil's).
L10N = {"de": ["manpages-de"], "es": ["manpages-es"], "fr": ["manpages-fr"], "id": ["manpages-id"], "it": ["manpages-it"],
        "ja": ["manpages-ja"], "pl": ["manpages-pl"], "pt": ["manpages-pt-br"], "ru": ["manpages-ru"],
        "tr": ["manpages-tr"], "uk": ["manpages-uk"], "vi": ["manpages-vi"], "zh": ["manpages-zh"]}


def page_sections(path):
    """[(heading, [(kind, text)])] of one page, kind "t" for an option item and "p" for prose, or None
    for a link to another page (.so) or a page that does not read."""
    try:
        text = manpage_pairs.read_page(path)
    except (OSError, EOFError, ValueError):
        return None
    if text is None:
        return None
    return [(heading, [("t" if tagged else "p", paragraph) for paragraph, tagged in manpage_pairs.description_paragraphs(lines, "")])
            for heading, lines in manpage_pairs.sections(text).items()]


def page_pairs(english, translated, dropped):
    """[(english, translation)] of one page: its sections zipped in order (the translators' extra last
    section has no partner), each aligned as a document of its own."""
    if english is None or translated is None:
        dropped["a page that does not read, or a link"] += 1
        return []
    pairs = []
    for (_, english_blocks), (_, translated_blocks) in zip(english, translated):
        pairs += aligned_pairs(english_blocks, translated_blocks, dropped, "a section whose paragraphs differ from the English section's")
    return pairs


def english_pages(roots):
    """{file name ("ls.1.gz"): path} of the English pages of these package roots, the first package's where several have one."""
    found = {}
    for root in roots:
        for _, _, path in manpage_pairs.page_files(root):
            found.setdefault(path.name, path)
    return found


def translated_pages(roots, languages):
    """{language: {file name: path}} of the translated pages under these roots, each language's preferred locale folder."""
    chosen = {}
    for root in roots:
        for folder in sorted((pathlib.Path(root) / "usr" / "share" / "man").glob("*")):
            language = locale_language(folder.name) if folder.is_dir() and not folder.name.startswith("man") else None
            if language in languages and (language not in chosen or locale_rank(language, folder.name) < chosen[language][0]):
                chosen[language] = (locale_rank(language, folder.name), folder)
    return {language: {path.name: path for path in sorted(folder.glob("man*/*")) if path.is_file()}
            for language, (_, folder) in sorted(chosen.items())}, {language: folder.name for language, (_, folder) in chosen.items()}


def main(argv=None):
    parser = debian_archive.corpus_parser(__doc__.split("\n\n")[0], "manpage-translations")
    parser.add_argument("--languages", default=",".join(DEFAULT_LANGUAGES), help="comma-separated UForm language codes")
    parser.add_argument("--english-root", action="append", default=[],
                        help="a folder holding usr/share/man/man*/ with the English pages (repeatable) instead of fetching them")
    parser.add_argument("--l10n-root", action="append", default=[],
                        help="a folder holding usr/share/man/<locale>/ with translations (repeatable) instead of fetching them")
    parser.add_argument("--manpages", default=debian_archive.default_output("manpages"),
                        help="the English man page corpus whose dev and test pages stay out of train")
    debian_archive.add_held_out_text(parser)
    arguments = parser.parse_args(argv)
    started = time.monotonic()
    languages = set(arguments.languages.split(","))

    packages = []
    if arguments.english_root and arguments.l10n_root:
        english_roots, l10n_roots = arguments.english_root, arguments.l10n_root
    else:
        try:
            debian_archive.private_lists(arguments.scratch, arguments.refresh)
        except debian_archive.FetchError as error:
            sys.exit(f"manpage_translations: {error}")
        wanted = {package: None for package in manpage_pairs.PACKAGES}
        wanted.update({package: None for language in sorted(languages & set(L10N)) for package in L10N[language]})
        fetched = debian_archive.fetch_unless_local("manpage_translations", wanted, arguments.scratch, arguments.refresh)
        english_roots = [fetched[package]["root"] for package in manpage_pairs.PACKAGES]
        l10n_roots = [fetched[package]["root"] for language in sorted(languages & set(L10N)) for package in L10N[language]]
        packages = [debian_archive.package_record(details) for details in fetched.values()]

    english = english_pages(english_roots)
    translations, locales = translated_pages(l10n_roots, languages)
    dropped, counts = collections.Counter(), collections.Counter()
    groups = collections.defaultdict(list)
    for language, pages in translations.items():
        for name, path in pages.items():
            if name not in english:
                dropped["a translated page without its English page"] += 1
                continue
            match = manpage_pairs.PAGE.match(name)
            page = f"{match.group('name')}({match.group('section')})" if match else name
            pairs = page_pairs(page_sections(english[name]), page_sections(path), dropped)
            counts[language] += debian_archive.append_page_pairs(groups, page, pairs, language)

    split_of = debian_archive.split_groups(groups, arguments.seed, arguments.dev_fraction, arguments.test_fraction)
    records = debian_archive.split_records(groups, split_of)
    removed = collections.Counter()
    held_pages = {record.get("page") for record in debian_archive.held_out_records([arguments.manpages])}
    before = len(records["train"])
    records["train"] = [record for record in records["train"] if record["page"] not in held_pages]
    removed["train: a page of data/manpages' dev or test"] = before - len(records["train"])
    checked = debian_archive.drop_held_out_english(records, arguments.held_out_text, removed)
    debian_archive.one_per_language_without_leaks(records, removed)
    manifest = debian_archive.write_corpus(
        arguments.output, "manpage-translations", "scripts/data/manpage_translations.py", records, arguments.seed,
        {"languages": sorted(languages), "locales": dict(sorted(locales.items())), "pages_paired_per_language": dict(sorted(counts.items())),
         "groups_per_split": {split: sum(1 for s in split_of.values() if s == split) for split in debian_archive.SPLITS},
         "held_out_corpora_checked": checked, "manpages_pages_held_out": len(held_pages),
         "removed_as_leaks": dict(sorted(removed.items())), "dropped_pairs": dict(sorted(dropped.items())),
         "source": {"packages": packages, "local": [str(root) for root in arguments.english_root + arguments.l10n_root]}})
    debian_archive.print_summary("manpage_translations", manifest, started, arguments.output)


if __name__ == "__main__":
    main()
