# test_corpora_libreoffice.py: scripts/data/libreoffice_pairs.py on fabricated unpacked packages
# (UI .mo catalogues and help pages), with apt replaced by stand-ins so no network is needed:
# LibreOffice's cleaning ("~" accelerators, %PRODUCTNAME), help pairing by par_id, catalogues kept
# whole, no English string shared across splits, none of dev/test in the gettext corpus's train
# (and none of train in its dev/test), manifests that match their files, the same output twice.

import json
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "data"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import debian_archive  # noqa: E402
import libreoffice_pairs  # noqa: E402
from test_corpora import check_manifest, leaks, read_splits  # noqa: E402
from test_data_gettext import write_mo  # noqa: E402

PAGE = ('<html><body><div id="DisplayArea"><h1 id="hd_id1" dir="auto">{title}</h1>'
        '<p id="par_id2" class="paragraph">{body}</p>'
        '<p id="par_id3"><span class="switchinline"><span hidden="true" class="MAC">Command</span>'
        '<span hidden="true">Ctrl</span></span>+{key}</p><br></div></body></html>')


def make_packages(root):
    """Unpacked trees of libreoffice-l10n-{de,fr}, libreoffice-help-{de,en-us}; returns fetch()'s answer."""
    roots = {}
    for language in ("de", "fr"):
        package = f"libreoffice-l10n-{language}"
        folder = root / package / "usr/lib/libreoffice/program/resource" / language / "LC_MESSAGES"
        for catalogue in ("sw", "sc", "sd", "cui", "svx", "vcl", "sfx", "basctl"):
            entries = {f"{catalogue} message number {i}": f"{language} {catalogue} Nachricht {i}" for i in range(20)}
            entries["~Open the file"] = f"{language} Datei ~öffnen"  # in every catalogue: a leak unless removed
            entries["Start %PRODUCTNAME"] = f"{language} %PRODUCTNAME starten"
            entries["ctx\x04Same"] = "Same"  # a copy, dropped
            write_mo(folder / f"{catalogue}.mo", entries)
        roots[package] = root / package
    for language, folder_name in (("de", "de"), ("en-us", "en-US")):
        package = f"libreoffice-help-{language}"
        for module in ("swriter", "scalc", "simpress", "shared"):
            for page in range(3):
                words = {"title": f"Title {module} {page}", "body": f"Body of {module} page {page}.", "key": "F4"}
                if language == "de":
                    words = {key: f"DE {value}" for key, value in words.items()}
                path = root / package / "usr/share/libreoffice/help" / folder_name / "text" / module / f"p{page}.html"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(PAGE.format(**words), encoding="utf-8")
        roots[package] = root / package
    return {package: {"package": package, "version": "1:7.4-test", "licence": "MPL-2.0", "sha256": "0" * 64,
                      "deb": f"{package}_test_all.deb", "root": folder} for package, folder in roots.items()}


@pytest.fixture()
def no_apt(tmp_path, monkeypatch):
    fetched = make_packages(tmp_path / "packages")

    def candidate(package, scratch):
        if package not in fetched:
            raise debian_archive.FetchError(f"{package}: not in the package lists")
        return {"version": fetched[package]["version"], "sha256": fetched[package]["sha256"], "filename": ""}

    monkeypatch.setattr(debian_archive, "private_lists", lambda scratch, refresh=False: tmp_path)
    monkeypatch.setattr(debian_archive, "candidate", candidate)
    monkeypatch.setattr(debian_archive, "fetch", lambda packages, scratch, refresh=False: {p: fetched[p] for p in packages})
    return tmp_path


def run(tmp_path, output, gettext):
    libreoffice_pairs.main(["--output", str(output), "--scratch", str(tmp_path / "scratch"), "--gettext", str(gettext),
                            "--languages", "de,fr,hy", "--dev-fraction", "0.25", "--test-fraction", "0.25", "--seed", "1"])
    return read_splits(output)


def english_keys(record):
    return [record["query"].casefold()]


def test_cleaning():
    assert libreoffice_pairs.lo_clean("~Open %PRODUCTNAME", "Ö~ffnen") == "Open LibreOffice"
    assert libreoffice_pairs.lo_clean("打开(~O)", "~Open") == "打开"
    assert libreoffice_pairs.lo_clean("Delete $(ARG1) now", "x") == "Delete now"
    assert libreoffice_pairs.lo_clean("a~b~c", "x") == "a~b~c"  # two tildes: not an accelerator


def test_no_leaks_and_gettext_exclusion(no_apt):
    tmp_path = no_apt
    first = run(tmp_path, tmp_path / "first", tmp_path / "no-gettext-here")
    assert all(first[split] for split in ("train", "dev", "test"))
    assert not leaks(first, english_keys)
    queries = {record["query"] for split in first for record in first[split]}
    assert "Open the file" in queries and "Start LibreOffice" in queries
    assert not any("~" in query or "%" in query or query == "Same" for query in queries)
    help_records = [record for split in first for record in first[split] if record["catalogue"].startswith("help/")]
    assert any(record["query"] == "Ctrl+F4" and record["positives"] == ["Ctrl+DE F4"] for record in help_records)  # not "Command"
    assert all(record["lang"] == "de" for record in help_records)  # no French help package
    # Catalogues stay whole: each UI catalogue's (and help folder's) records lie in one split.
    split_of = {}
    for split in first:
        for record in first[split]:
            group = record["catalogue"].rsplit("/", 1)[0]
            assert split_of.setdefault(group, split) == split, group
    manifest = check_manifest(tmp_path / "first")
    assert manifest["languages_without_package"] == ["hy"]
    assert {entry["package"] for entry in manifest["source"]["packages"]} == {
        "libreoffice-l10n-de", "libreoffice-l10n-fr", "libreoffice-help-de", "libreoffice-help-en-us"}

    # A gettext corpus whose train holds this corpus's dev/test strings and whose test holds some train strings.
    gettext = tmp_path / "gettext"
    gettext.mkdir()
    held_out = sorted({record["query"] for split in ("dev", "test") for record in first[split]})
    trained = sorted({record["query"] for record in first["train"]})[:5]
    for name, strings in (("train", held_out), ("dev", []), ("test", trained)):
        (gettext / f"{name}.jsonl").write_text("".join(json.dumps({"query": s.upper(), "positives": ["x"], "lang": "de"}) + "\n"
                                                       for s in strings), encoding="utf-8")
    second = run(tmp_path, tmp_path / "second", gettext)
    gettext_train = {s.casefold() for s in held_out}
    assert not any(record["query"].casefold() in gettext_train for split in ("dev", "test") for record in second[split])
    assert not any(record["query"] in trained for record in second["train"])
    assert not leaks(second, english_keys)
    removed = check_manifest(tmp_path / "second")["removed_as_leaks"]
    assert removed["train: in gettext dev or test"] > 0
    assert removed.get("dev: in gettext train", 0) + removed.get("test: in gettext train", 0) > 0

    # Deterministic: the same inputs give the same bytes.
    third = run(tmp_path, tmp_path / "third", gettext)
    assert third == second
    for name in ("train.jsonl", "dev.jsonl", "test.jsonl", "manifest.json"):
        assert (tmp_path / "second" / name).read_bytes() == (tmp_path / "third" / name).read_bytes()


def test_built_corpus_has_no_leaks():
    folder = ROOT / "data" / "libreoffice"
    if not (folder / "manifest.json").exists():
        pytest.skip("data/libreoffice is not built (scripts/data/libreoffice_pairs.py writes it)")
    manifest = check_manifest(folder)
    splits = read_splits(folder)
    assert all(splits[split] for split in ("train", "dev", "test"))
    assert not leaks(splits, english_keys)
    gettext_train = ROOT / "data" / "gettext" / "train.jsonl"
    if gettext_train.exists() and manifest["gettext_corpus_checked"]["train"]:
        seen = {json.loads(line)["query"].casefold() for line in gettext_train.open(encoding="utf-8")}
        assert not any(record["query"].casefold() in seen for split in ("dev", "test") for record in splits[split])
    for package in manifest["source"]["packages"]:
        assert package["version"] and package["sha256"] and package["licence"], package
