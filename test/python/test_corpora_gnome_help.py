# test_corpora_gnome_help.py: scripts/data/gnome_help_pairs.py on Mallard pages written here (no
# network): paragraphs pair by order with their inline markup flattened, a page whose elements
# differ from the English page's is left out whole (a control: the same page aligned is paired),
# untranslated paragraphs are dropped, the preferred locale of a language wins, pages stay whole
# across splits with no text shared between splits (a planted leak caught), held-out English of
# other corpora stays out of train. The built corpus is checked with the others (test_corpora.py).

import json
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "data"))
sys.path.insert(0, str(ROOT / "test" / "python"))
import gnome_help_pairs  # noqa: E402
from test_corpora import (SPLITS, check_manifest, pair_keys, planted_leak_caught, read_splits, seeded_splits_hold,  # noqa: E402
                          translation_pairs)


def page(blocks, extra=""):
    body = "".join(f"<{tag}>{text}</{tag}>" for tag, text in blocks)
    return (f'<?xml version="1.0" encoding="utf-8"?>\n<page xmlns="http://projectmallard.org/1.0/" id="x">'
            f'<info><desc>{blocks[0][1]}</desc></info>{body}{extra}</page>\n')


ENGLISH = {
    "printing": [("title", "Printing"), ("p", "Press <gui>Print</gui> to print the <em>whole</em> document."),
                 ("p", "Choose a printer from the list.")],
    "sound": [("title", "Sound volume"), ("p", "Open the Activities overview and start typing Sound."),
              ("p", "Drag the slider to the right.")],
    "wifi": [("title", "Wireless networks"), ("p", "Click the network you want to join.")],
}
GERMAN = {
    "printing": [("title", "Drucken"), ("p", "Klicken Sie auf <gui>Drucken</gui>, um das <em>ganze</em> Dokument zu drucken."),
                 ("p", "Choose a printer from the list.")],  # left untranslated
    "sound": [("title", "Lautstärke"), ("p", "Öffnen Sie die Aktivitäten-Übersicht und tippen Sie Klang."),
              ("p", "Ziehen Sie den Regler nach rechts.")],
    "wifi": [("title", "Funknetzwerke"), ("p", "Klicken Sie auf das Netzwerk.")],
}


def write_help(root, misaligned=True):
    for locale, pages in (("C", ENGLISH), ("de", GERMAN), ("de_CH", GERMAN), ("zh_CN", GERMAN)):
        folder = root / "usr" / "share" / "help" / locale / "app"
        folder.mkdir(parents=True, exist_ok=True)
        for name, blocks in pages.items():
            text = [(tag, t + (" (CH)" if locale == "de_CH" else "")) for tag, t in blocks]
            extra = "<p>Nur auf Deutsch.</p>" if misaligned and locale != "C" and name == "wifi" else ""
            (folder / f"{name}.page").write_text(page(text, extra), encoding="utf-8")
    return root


def run(tmp_path, output, root, held="", seed=0, test_fraction=0.0):
    gnome_help_pairs.main(["--help-root", str(root), "--languages", "de,zh", "--output", str(output), "--held-out-text", held,
                           "--seed", str(seed), "--dev-fraction", "0.0", "--test-fraction", str(test_fraction)])
    return read_splits(output)


def test_pairs_by_order(tmp_path):
    pairs = translation_pairs(run(tmp_path, tmp_path / "out", write_help(tmp_path / "pkg")))
    assert ("Press Print to print the whole document.", "Klicken Sie auf Drucken, um das ganze Dokument zu drucken.", "de") in pairs
    assert ("Sound volume", "Lautstärke", "de") in pairs and ("Sound volume", "Lautstärke", "zh") in pairs
    assert not any("(CH)" in pair[1] for pair in pairs)  # de's own folder is preferred over de_CH
    assert not any(pair[0] == "Choose a printer from the list." for pair in pairs)  # untranslated
    assert not any(pair[0] == "Wireless networks" for pair in pairs)  # the misaligned page, whole
    manifest = check_manifest(tmp_path / "out")
    assert manifest["dropped_pairs"]["a page whose elements differ from the English page's"] == 2  # de and zh
    # the control: the same page aligned is paired
    aligned = translation_pairs(run(tmp_path, tmp_path / "aligned", write_help(tmp_path / "pkg2", misaligned=False)))
    assert ("Wireless networks", "Funknetzwerke", "de") in aligned


def test_pages_whole_and_no_text_across_splits(tmp_path):
    root = write_help(tmp_path / "pkg", misaligned=False)
    seeded_splits_hold(lambda seed: [run(tmp_path, tmp_path / f"out{seed}", root, seed=seed, test_fraction=0.4)])
    assert planted_leak_caught(tmp_path / "out0", pair_keys)  # the control


def test_held_out_english_stays_out_of_train(tmp_path):
    held = tmp_path / "gettext"
    held.mkdir()
    (held / "test.jsonl").write_text(json.dumps({"query": "sound volume", "positives": ["Lautstärke"]}) + "\n")
    pairs = translation_pairs(run(tmp_path, tmp_path / "out", write_help(tmp_path / "pkg"), held=str(held)))
    assert not any(pair[0] == "Sound volume" for pair in pairs)
    assert ("Drag the slider to the right.", "Ziehen Sie den Regler nach rechts.", "de") in pairs


def test_corrupt_held_out_file_is_named(tmp_path):
    held = tmp_path / "gettext"
    held.mkdir()
    (held / "dev.jsonl").write_text(json.dumps({"query": "a", "positives": ["b"]}) + "\n[1, 2]\n")
    with pytest.raises(SystemExit, match="dev.jsonl:2: not a pair record"):
        run(tmp_path, tmp_path / "out", write_help(tmp_path / "pkg"), held=str(held))

