# test_corpora_manpage_translations.py: scripts/data/manpage_translations.py on man pages written here
# (no network): sections pair in order and, within a section, paragraphs and option items by order,
# with the roff macros read as manpage_pairs reads them; the translators' extra last section has no
# partner; a section whose paragraphs differ from the English section's is left out alone (a control:
# the same section aligned is paired); untranslated paragraphs are dropped; a language's own locale is
# preferred; a page of data/manpages' dev or test stays out of train; pages stay whole across splits
# with no text shared between splits (a planted leak caught); held-out English stays out of train.

import gzip
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "data"))
sys.path.insert(0, str(ROOT / "test" / "python"))
import manpage_translations  # noqa: E402
from test_corpora import (SPLITS, check_manifest, pair_keys, planted_leak_caught, read_splits, seeded_splits_hold,  # noqa: E402
                          translation_pairs)

ENGLISH = """.TH LS 1
.SH NAME
ls \\- list directory contents
.SH DESCRIPTION
List information about the FILEs (the current directory by default).
.PP
Sort entries alphabetically if none of \\fB\\-cftuvSUX\\fR is specified.
.TP
\\fB\\-a\\fR, \\fB\\-\\-all\\fR
do not ignore entries starting with .
.SH "SEE ALSO"
Full documentation is kept as a Texinfo manual.
"""
GERMAN = """.TH LS 1
.SH BEZEICHNUNG
ls \\- Verzeichnisinhalte auflisten
.SH BESCHREIBUNG
Informationen über die DATEIen auflisten (standardmäßig das aktuelle Verzeichnis).
.PP
Sort entries alphabetically if none of \\fB\\-cftuvSUX\\fR is specified.
.TP
\\fB\\-a\\fR, \\fB\\-\\-all\\fR
mit . beginnende Einträge nicht ignorieren
.SH "SIEHE AUCH"
Die vollständige Dokumentation liegt als Texinfo-Handbuch vor.
{extra}.SH ÜBERSETZUNG
Die deutsche Übersetzung dieser Handbuchseite wurde von Freiwilligen erstellt.
"""


def write_pages(root, misaligned=False):
    english = root / "english" / "usr/share/man/man1"
    english.mkdir(parents=True, exist_ok=True)
    (english / "ls.1.gz").write_bytes(gzip.compress(ENGLISH.encode()))
    (english / "cat.1.gz").write_bytes(gzip.compress(ENGLISH.replace("ls \\- list directory contents", "cat \\- concatenate files").encode()))
    extra = ".PP\nEin zusätzlicher Absatz.\n" if misaligned else ""
    for locale, suffix in (("de", ""), ("de_AT", " (AT)")):
        folder = root / "l10n" / "usr/share/man" / locale / "man1"
        folder.mkdir(parents=True, exist_ok=True)
        german = GERMAN.replace("{extra}", extra).replace("auflisten\n", f"auflisten{suffix}\n")
        (folder / "ls.1.gz").write_bytes(gzip.compress(german.encode()))
        (folder / "cat.1.gz").write_bytes(gzip.compress(german.replace(f"ls \\- Verzeichnisinhalte auflisten{suffix}",
                                                                       f"cat \\- Dateien verketten{suffix}").encode()))
    return root


def run(tmp_path, output, root, held="", manpages=None, seed=0, test_fraction=0.0):
    manpage_translations.main(["--english-root", str(root / "english"), "--l10n-root", str(root / "l10n"), "--languages", "de",
                               "--output", str(output), "--held-out-text", held, "--manpages", str(manpages or tmp_path / "none"),
                               "--seed", str(seed), "--dev-fraction", "0.0", "--test-fraction", str(test_fraction)])
    return read_splits(output)


def test_sections_and_paragraphs_pair_by_order(tmp_path):
    pairs = translation_pairs(run(tmp_path, tmp_path / "out", write_pages(tmp_path / "pages")))
    assert ("ls - list directory contents", "ls - Verzeichnisinhalte auflisten", "de") in pairs  # de preferred over de_AT
    assert ("cat - concatenate files", "cat - Dateien verketten", "de") in pairs
    assert ("List information about the FILEs (the current directory by default).",
            "Informationen über die DATEIen auflisten (standardmäßig das aktuelle Verzeichnis).", "de") in pairs
    assert ("-a, --all do not ignore entries starting with .", "-a, --all mit . beginnende Einträge nicht ignorieren", "de") in pairs
    assert ("Full documentation is kept as a Texinfo manual.", "Die vollständige Dokumentation liegt als Texinfo-Handbuch vor.", "de") in pairs
    assert not any("Sort entries" in english for english, _, _ in pairs)  # untranslated
    assert not any("(AT)" in german or "Freiwilligen" in german for _, german, _ in pairs)
    check_manifest(tmp_path / "out")


def test_a_misaligned_section_is_left_out_alone(tmp_path):
    pairs = translation_pairs(run(tmp_path, tmp_path / "out", write_pages(tmp_path / "pages", misaligned=True)))
    assert not any("Texinfo" in english for english, _, _ in pairs)  # the section with the extra paragraph
    assert ("ls - list directory contents", "ls - Verzeichnisinhalte auflisten", "de") in pairs  # the others stay
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["dropped_pairs"]["a section whose paragraphs differ from the English section's"] == 2  # ls and cat


def test_pages_of_manpages_dev_and_test_stay_out_of_train(tmp_path):
    manpages = tmp_path / "manpages"
    manpages.mkdir()
    (manpages / "test.jsonl").write_text(json.dumps({"query": "list directory contents", "positives": ["List..."],
                                                     "page": "ls(1)"}) + "\n")
    splits = run(tmp_path, tmp_path / "out", write_pages(tmp_path / "pages"), manpages=manpages)
    assert not any(record["page"] == "ls(1)" for record in splits["train"])
    assert any(record["page"] == "cat(1)" for record in splits["train"])


def test_pages_whole_and_no_text_across_splits(tmp_path):
    root = write_pages(tmp_path / "pages")
    seeded_splits_hold(lambda seed: [run(tmp_path, tmp_path / f"out{seed}", root, seed=seed, test_fraction=0.5)])
    assert planted_leak_caught(tmp_path / "out0", pair_keys)  # the control


def test_held_out_english_stays_out_of_train(tmp_path):
    held = tmp_path / "gettext"
    held.mkdir()
    (held / "dev.jsonl").write_text(json.dumps({"query": "Full documentation is kept as a Texinfo manual.", "positives": ["x"]}) + "\n")
    pairs = translation_pairs(run(tmp_path, tmp_path / "out", write_pages(tmp_path / "pages"), held=str(held)))
    assert not any("Texinfo" in english for english, _, _ in pairs)
    assert ("ls - list directory contents", "ls - Verzeichnisinhalte auflisten", "de") in pairs
