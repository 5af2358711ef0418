#!/usr/bin/env python3
"""gnome_help_pairs.py: English -> translation paragraph pairs from the help of GNOME's programs
(gnome-user-docs and the applications' own packages: Mallard pages under usr/share/help/<locale>/<app>/).
Translators' tools (itstool) rebuild each translated page from the English one element by
element, so a page's titles, descriptions and paragraphs pair by their order; a page whose
sequence of those elements differs from the English page's (conditional text one of them lacks) is
left out whole, and untranslated paragraphs (equal to the English) are dropped. Prose, where the
gettext catalogues hold menu items. A page (app and page id) is one split group in every language;
one translation per (English, language) within a split; no text of train in dev or test (nor of
dev in test), and no English string of gettext's or LibreOffice's dev and test in train. Writes
data/gnome-help/{train,dev,test}.jsonl and manifest.json. Standard library only; deterministic for
a seed. See docs/data.md.
"""

import collections
import pathlib
import sys
import time
import xml.etree.ElementTree as ElementTree

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import debian_archive  # noqa: E402
from gettext_pairs import DEFAULT_LANGUAGES, aligned_pairs, locale_language, locale_rank  # noqa: E402

MALLARD = "{http://projectmallard.org/1.0/}"
BLOCKS = {MALLARD + "title", MALLARD + "desc", MALLARD + "p"}
# Packages whose help is translated into many UForm languages (Debian 12 names; the applications'
# -data and -common packages where the help lives there).
PACKAGES = ("gnome-user-docs gnome-terminal-data evince-common eog gedit-common totem-common nautilus-data gnome-calculator "
            "baobab gnome-disk-utility cheese-common gnome-maps file-roller gnome-system-monitor gnome-clocks simple-scan "
            "seahorse rhythmbox-data gnome-logs gnome-font-viewer shotwell-common gnome-calendar gnome-contacts gnome-weather "
            "gnome-characters epiphany-browser-data polari gnome-boxes gnome-music gnome-photos dconf-editor gnote "
            "evolution-common brasero-common vinagre aisleriot gnome-mahjongg gnome-chess gnome-mines gnome-sudoku "
            "four-in-a-row five-or-more iagno lightsoff quadrapassel swell-foop tali gnome-klotski gnome-robots "
            "gnome-nibbles gnome-tetravex gnome-taquin hitori atomix").split()


def blocks(path):
    """[(tag, text)] of a page's titles, descriptions and paragraphs in document order, each text with
    its inline markup flattened and its white space collapsed; None if the page does not parse."""
    try:
        root = ElementTree.parse(path).getroot()
    except (ElementTree.ParseError, OSError):
        return None
    return [(element.tag, " ".join("".join(element.itertext()).split())) for element in root.iter() if element.tag in BLOCKS]


def help_folders(root):
    """{(app, locale): folder} of an unpacked package's usr/share/help."""
    found = {}
    for folder in sorted(pathlib.Path(root).glob("usr/share/help/*/*")):
        if folder.is_dir():
            found[(folder.name, folder.parent.name)] = folder
    return found


def page_pairs(english_page, translated_page, dropped):
    """[(english, translation)] of one page pair, or [] (counted in dropped) where they do not align."""
    return aligned_pairs(blocks(english_page), blocks(translated_page), dropped, "a page whose elements differ from the English page's")


def main(argv=None):
    parser = debian_archive.corpus_parser(__doc__.split("\n\n")[0], "gnome-help")
    parser.add_argument("--languages", default=",".join(DEFAULT_LANGUAGES), help="comma-separated UForm language codes")
    parser.add_argument("--packages", default=",".join(PACKAGES), help="comma-separated Debian packages holding help")
    parser.add_argument("--help-root", action="append", default=[],
                        help="a folder holding usr/share/help (repeatable) instead of fetching --packages")
    debian_archive.add_held_out_text(parser)
    arguments = parser.parse_args(argv)
    started = time.monotonic()
    languages = set(arguments.languages.split(","))

    if arguments.help_root:
        roots, packages = {pathlib.Path(root).name: pathlib.Path(root) for root in arguments.help_root}, []
    else:
        try:
            debian_archive.private_lists(arguments.scratch, arguments.refresh)
        except debian_archive.FetchError as error:
            sys.exit(f"gnome_help_pairs: {error}")
        available = []
        for package in arguments.packages.split(","):
            try:
                debian_archive.candidate(package, arguments.scratch)
                available.append(package)
            except debian_archive.FetchError:
                print(f"gnome_help_pairs: {package} is not in the archive: skipped", file=sys.stderr)
        fetched = debian_archive.fetch_unless_local("gnome_help_pairs", {package: None for package in available},
                                                    arguments.scratch, arguments.refresh)
        roots = {package: details["root"] for package, details in fetched.items()}
        packages = [debian_archive.package_record(details) for details in fetched.values()]

    dropped = collections.Counter()
    groups = collections.defaultdict(list)  # "app/page" -> records in every language
    pages_per_language = collections.Counter()
    for package, root in sorted(roots.items()):
        folders = help_folders(root)
        for app in sorted({app for app, locale in folders if locale == "C"}):
            chosen = {}  # language -> its preferred locale's folder
            for (other, locale), folder in folders.items():
                language = locale_language(locale) if other == app and locale != "C" else None
                if language in languages and (language not in chosen or locale_rank(language, locale) < chosen[language][0]):
                    chosen[language] = (locale_rank(language, locale), folder)
            for english_page in sorted(folders[(app, "C")].glob("*.page")):
                for language, (_, folder) in sorted(chosen.items()):
                    translated_page = folder / english_page.name
                    if not translated_page.is_file():
                        continue
                    pairs = page_pairs(english_page, translated_page, dropped)
                    page = f"{app}/{english_page.stem}"
                    pages_per_language[language] += debian_archive.append_page_pairs(groups, page, pairs, language)

    split_of = debian_archive.split_groups(groups, arguments.seed, arguments.dev_fraction, arguments.test_fraction)
    records = debian_archive.split_records(groups, split_of)
    removed = collections.Counter()
    checked = debian_archive.drop_held_out_english(records, arguments.held_out_text, removed)
    debian_archive.one_per_language_without_leaks(records, removed)  # a paragraph repeated across pages: the first page's

    manifest = debian_archive.write_corpus(
        arguments.output, "gnome-help", "scripts/data/gnome_help_pairs.py", records, arguments.seed,
        {"languages": sorted(languages), "pages_paired_per_language": dict(sorted(pages_per_language.items())),
         "groups_per_split": {split: sum(1 for s in split_of.values() if s == split) for split in debian_archive.SPLITS},
         "held_out_corpora_checked": checked,
         "removed_as_leaks": dict(sorted(removed.items())), "dropped_pairs": dict(sorted(dropped.items())),
         "source": {"packages": packages, "local": [str(root) for root in arguments.help_root]}})
    debian_archive.print_summary("gnome_help_pairs", manifest, started, arguments.output)


if __name__ == "__main__":
    main()
