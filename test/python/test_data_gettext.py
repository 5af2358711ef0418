# test_data_gettext.py: scripts/data/gettext_pairs.py on a small locale tree of .mo files written
# here: cleaning, one translation per (string, language), catalogues kept whole within a split,
# no English string of dev or test in train, a manifest whose hashes match, the same output twice.

import collections
import hashlib
import json
import pathlib
import struct
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "scripts" / "data"))
import gettext_pairs  # noqa: E402


def write_mo(path, entries, charset="UTF-8", big_endian=False):
    """A .mo file (GNU gettext format, no hash table) holding `entries` {msgid: msgstr}."""
    entries = {"": f"Content-Type: text/plain; charset={charset}\n", **entries}
    keys = sorted(entries, key=lambda key: key.encode(charset))
    originals = [key.encode(charset) for key in keys]
    translations = [entries[key].encode(charset) for key in keys]
    order = ">" if big_endian else "<"
    count = len(keys)
    table = 28
    data_start = table + 16 * count
    blob, offsets = b"", []
    for string in originals + translations:
        offsets.append((len(string), data_start + len(blob)))
        blob += string + b"\0"
    header = struct.pack(order + "7I", 0x950412DE, 0, count, table, table + 8 * count, 0, data_start)
    body = b"".join(struct.pack(order + "2I", length, offset) for length, offset in offsets)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(header + body + blob)


def make_tree(root):
    """Six catalogues of 20 strings in de and fr (and pt_BR, pt for one), plus shared strings."""
    for catalogue in range(6):
        for locale in ("de", "fr"):
            entries = {f"Catalogue {catalogue} message number {i}": f"{locale} Nachricht {catalogue}-{i}"
                       for i in range(20)}
            entries["Open the file"] = f"{locale} Datei öffnen"  # in every catalogue: leaks unless removed
            entries["_Save %s"] = f"{locale} _Speichern %s"
            entries["Same"] = "Same"  # a copy, dropped
            entries["x"] = "y"  # too short, dropped
            entries["ctx\x04Menu"] = f"{locale} Menü"
            entries["One file\x00%d files"] = f"{locale} Eine Datei\x00%d Dateien"
            write_mo(root / locale / "LC_MESSAGES" / f"domain{catalogue}-15.mo", entries, big_endian=catalogue == 2)
    write_mo(root / "pt_BR" / "LC_MESSAGES" / "domain0-15.mo", {"Open the file": "Abrir o arquivo (BR)"})
    write_mo(root / "pt" / "LC_MESSAGES" / "domain0-15.mo", {"Open the file": "Abrir o ficheiro"})
    write_mo(root / "de" / "LC_MESSAGES" / "latin1.mo", {"Sizes": "Größen"}, charset="ISO-8859-1")
    (root / "de" / "LC_MESSAGES" / "link.mo").symlink_to("latin1.mo")  # counted once


def run(tmp_path, output):
    gettext_pairs.main(["--locale-root", str(tmp_path / "locale"), "--output", str(output), "--languages", "de,fr,pt",
                        "--dev-fraction", "0.25", "--test-fraction", "0.25", "--no-dpkg", "--seed", "3"])
    return {split: [json.loads(line) for line in (output / f"{split}.jsonl").open(encoding="utf-8")]
            for split in ("train", "dev", "test")}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("gettext")
    make_tree(tmp_path / "locale")
    return tmp_path, run(tmp_path, tmp_path / "out")


def test_cleaning():
    clean = gettext_pairs.clean
    assert clean("_Open File") == "Open File"
    assert clean("E_xit", "_Beenden") == "Exit"
    assert clean("new_value is %d", "new_value ist %d") == "new_value is"  # an identifier in both sides stays
    assert clean("и merge_insert:", "and merge_insert is:") == "и merge_insert:"
    assert clean("&Quit") == "Quit"
    assert clean("ファイル(_F)") == "ファイル"
    assert clean("cannot open '%s': %m") == "cannot open:"
    assert clean("%1$s of %2$d, {0} and %(name)s and %<PRIu64>") == "of, and and"
    assert clean("in %s, previously in %s.") == "in, previously in."
    assert clean("Fichier : %s") == "Fichier :"  # French spacing that was there stays
    assert clean("100%% done") == "100% done"
    assert clean("<b>Bold</b>\n\t text &lt;x&gt;") == "Bold text <x>"
    assert clean("git [-C <path>]") == "git [-C <path>]"  # a metavariable, not markup
    assert clean("%s: bad archive") == "bad archive"
    assert gettext_pairs.keep("Same", "same") is not None
    assert gettext_pairs.keep("Open", "Ö") is not None
    assert gettext_pairs.keep("%%", "x y") is not None
    assert gettext_pairs.keep("Open", "Öffnen") is None


def test_read_mo_plural_context_and_charset(tmp_path):
    write_mo(tmp_path / "a.mo", {"ctx\x04Menu": "Menü", "One\x00Many": "Eins\x00Viele", "Größe": "Size"},
             charset="ISO-8859-1", big_endian=True)
    assert sorted(gettext_pairs.read_mo(tmp_path / "a.mo")) == [("Größe", "Size"), ("Menu", "Menü"), ("One", "Eins")]
    (tmp_path / "bad.mo").write_bytes(b"\x00" * 40)
    with pytest.raises(ValueError, match="bad magic"):
        gettext_pairs.read_mo(tmp_path / "bad.mo")


def test_splits_keep_catalogues_whole_and_do_not_leak(corpus):
    _, splits = corpus
    assert all(splits[split] for split in splits), {split: len(records) for split, records in splits.items()}
    owner = {}
    for split, records in splits.items():
        for record in records:
            assert owner.setdefault(record["catalogue"], split) == split  # one split per catalogue
            assert set(record) == {"query", "positives", "lang", "catalogue"} and len(record["positives"]) == 1
    english = {split: {record["query"].casefold() for record in records} for split, records in splits.items()}
    assert not english["train"] & english["dev"] and not english["train"] & english["test"]
    assert not english["dev"] & english["test"]
    shared = [split for split in english if "open the file" in english[split]]
    assert len(shared) == 1  # the string of every catalogue survives in exactly one split


def test_one_translation_per_string_and_language(corpus):
    _, splits = corpus
    for records in splits.values():
        keys = collections.Counter((record["query"], record["lang"]) for record in records)
        assert max(keys.values()) == 1
    every = [record for records in splits.values() for record in records]
    texts = {(record["query"], record["lang"]): record["positives"][0] for record in every}
    assert ("Same", "de") not in texts and ("x", "de") not in texts
    assert texts[("Save", "de")] == "de Speichern"
    assert texts[("Menu", "fr")] == "fr Menü" and texts[("One file", "de")] == "de Eine Datei"
    assert texts.get(("Sizes", "de")) == "Größen"


def test_locale_preference(tmp_path):
    """pt and pt_BR both give Portuguese; on a tie the bare code wins; the most frequent wins first."""
    root = tmp_path / "locale"
    write_mo(root / "pt_BR" / "LC_MESSAGES" / "one.mo", {"Open the file": "Abrir o arquivo", "Close it": "Fechar"})
    write_mo(root / "pt_BR" / "LC_MESSAGES" / "two.mo", {"Close it": "Fechar"})
    write_mo(root / "pt" / "LC_MESSAGES" / "one.mo", {"Open the file": "Abrir o ficheiro", "Close it": "Encerrar"})
    gettext_pairs.main(["--locale-root", str(root), "--output", str(tmp_path / "out"), "--languages", "pt",
                        "--dev-fraction", "0", "--test-fraction", "0", "--no-dpkg"])
    records = [json.loads(line) for line in (tmp_path / "out" / "train.jsonl").open(encoding="utf-8")]
    assert {record["query"]: record["positives"][0] for record in records} == {
        "Open the file": "Abrir o ficheiro", "Close it": "Fechar"}


def test_manifest_and_determinism(corpus, tmp_path):
    root, splits = corpus
    output = root / "out"
    manifest = json.loads((output / "manifest.json").read_text(encoding="utf-8"))
    for name, entry in manifest["files"].items():
        assert hashlib.sha256((output / name).read_bytes()).hexdigest() == entry["sha256"]
    assert manifest["pairs"]["train"]["total"] == len(splits["train"])
    assert manifest["catalogues_per_language"] == {"de": 7, "fr": 6, "pt": 2}
    assert manifest["removed_from_dev_and_test_as_leaks"]["dev"] + manifest["removed_from_dev_and_test_as_leaks"]["test"] > 0
    texts = [json.loads(line)["text"] for line in (output / "text.jsonl").open(encoding="utf-8")]
    assert texts and len(set(texts)) == len(texts)
    train_strings = {text for record in splits["train"] for text in (record["query"], record["positives"][0])}
    assert set(texts) <= train_strings  # nothing from dev or test
    again = tmp_path / "again"
    run(root, again)
    for name in manifest["files"]:
        assert (again / name).read_bytes() == (output / name).read_bytes()


def test_held_out_pairs_of_another_corpus_leave_train_only(corpus, tmp_path):
    """--held-out-pairs: another corpus's dev and test (English, language) pairs leave train, and dev and test stay byte
    for byte; the control, the same pair in another language, stays."""
    root, splits = corpus
    record = next(r for r in splits["train"] if r["lang"] == "de")
    other = tmp_path / "other"
    other.mkdir()
    held = [{"query": record["query"].upper(), "positives": ["x"], "lang": "de"}]
    (other / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in held), encoding="utf-8")
    gettext_pairs.main(["--locale-root", str(root / "locale"), "--output", str(tmp_path / "out"), "--languages", "de,fr,pt",
                        "--dev-fraction", "0.25", "--test-fraction", "0.25", "--no-dpkg", "--seed", "3",
                        "--held-out-pairs", str(other)])
    train = [json.loads(line) for line in (tmp_path / "out" / "train.jsonl").open(encoding="utf-8")]
    assert len(train) == len(splits["train"]) - 1
    assert not any(r["query"] == record["query"] and r["lang"] == "de" for r in train)
    assert any(r["query"] == record["query"] and r["lang"] == "fr" for r in train)  # the same string in French stays
    for name in ("dev.jsonl", "test.jsonl"):
        assert (tmp_path / "out" / name).read_bytes() == (root / "out" / name).read_bytes()
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["removed_from_train_as_held_out_pairs"] == {"corpora": ["other"], "pairs": 1}
    with pytest.raises(SystemExit, match="holds no dev.jsonl or test.jsonl"):
        gettext_pairs.main(["--locale-root", str(root / "locale"), "--output", str(tmp_path / "out2"), "--no-dpkg",
                            "--held-out-pairs", str(tmp_path / "missing")])
