# test_corpora_definitions.py: the definition corpora of scripts/data (gcide_pairs, manpage_pairs,
# foldoc_pairs) on small inputs written here, so no network is needed: what each parser extracts
# and cleans, that splits keep groups whole and share no query or positive (with a planted leak
# the check must catch), that outputs match their manifests and repeat byte for byte, and that
# gcide's train holds no word of WordNet's dev or test split. Then the same checks on the corpora
# in data/ when they have been built.

import gzip
import json
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "data"))
sys.path.insert(0, str(ROOT / "test" / "python"))
import gcide_pairs  # noqa: E402
import foldoc_pairs  # noqa: E402
import manpage_pairs  # noqa: E402
from test_corpora import SPLITS, check_manifest, leaks, pair_keys, read_splits  # noqa: E402


def dictd_number(value):
    """A number in dictd's base64 digits, most significant first."""
    digits = ""
    while True:
        digits = gcide_pairs.BASE64[value % 64] + digits
        value //= 64
        if not value:
            return digits


def write_dictd(folder, name, entries, extra_index=()):
    """folder/name.index and name.dict.dz (gzip) holding `entries` [(headword, text)] in order;
    extra_index adds (word, entry number) lines pointing at an entry already listed."""
    folder.mkdir(parents=True, exist_ok=True)
    data, index = b"", []
    spans = []
    for word, text in [("00-database-info", "This file was converted from the original database.\n"), *entries]:
        encoded = text.encode()
        spans.append((len(data), len(encoded)))
        index.append((word, *spans[-1]))
        data += encoded
    for word, number in extra_index:
        index.append((word, *spans[number + 1]))
    (folder / f"{name}.index").write_text("".join(f"{word}\t{dictd_number(offset)}\t{dictd_number(length)}\n"
                                                  for word, offset, length in sorted(index)), encoding="utf-8")
    with gzip.open(folder / f"{name}.dict.dz", "wb") as file:
        file.write(data)


# ---- GCIDE --------------------------------------------------------------------------------------

BANK = '''Bank \\Bank\\ (b[a^][ng]k), n. [OE. banke; akin to E. bench.
   See {Bench}.]
   1. A mound, pile, or ridge of earth; as, a bank of clouds.
      [1913 Webster]

            They cast up a bank against the city. --2 Sam. xx.
                                                  15.
      [1913 Webster]

   2. (Mining)
      (a) The face of the coal at which miners are working.
      (b) A deposit of ore or coal, worked by excavations above
          water level.
          [1913 Webster]

   3. (A["e]ronautics) The lateral inclination of an
      a["e]roplane as it rounds a curve. [Obs.] --Shak.
      [Webster 1913 Suppl.]

   Syn: Heap; mound; pile.

   {Bank swallow} (Zool.), a small swallow that nests in a hole
      in a bank.
      [1913 Webster]

   {To bank a fire}, {To bank up a fire}, to cover the coals
      with ashes.
      [1913 Webster]
'''
BANK_VERB = '''Bank \\Bank\\, v. t.
   To deposit in a bank. --Johnson.
   [1913 Webster]
'''
UNWORTHY = '''Unworthy \\Un*wor"thy\\, a.
   Not worthy; wanting merit; -- often with of. -- {Un*wor"thi*ly},
   adv. -- {Un*wor"thi*ness}, n.
   [1913 Webster]
'''
SEE_ALSO = '''Commandry \\Com*mand"ry\\, n.
   See {Commandery}.
   [1913 Webster]
'''


def test_gcide_entry_parsing_and_cleaning():
    words, part, definitions, phrases = gcide_pairs.parse_entry(BANK)
    assert words == ["Bank"] and part == "n."
    assert definitions == ["A mound, pile, or ridge of earth; as, a bank of clouds.",
                           "The face of the coal at which miners are working.",  # the label "(Mining)" is no sense
                           "A deposit of ore or coal, worked by excavations above water level.",
                           "The lateral inclination of an aëroplane as it rounds a curve."]  # label, [Obs.], --Shak. gone
    assert phrases == [(["Bank swallow"], "a small swallow that nests in a hole in a bank."),
                       (["To bank a fire", "To bank up a fire"], "to cover the coals with ashes.")]
    assert gcide_pairs.parse_entry(UNWORTHY)[2] == ["Not worthy; wanting merit; -- often with of."]
    assert gcide_pairs.parse_entry(SEE_ALSO)[2] == []  # a pointer, not a definition
    assert gcide_pairs.unicode_entities("caf['e], [ae]on, 45[deg], [Obs.]") == "café, æon, 45°, [Obs.]"
    assert gcide_pairs.query_spelling("Bank", "n.") == "bank"
    assert gcide_pairs.query_spelling("Set", "prop. n.") == "Set" and gcide_pairs.query_spelling("NATO", "n.") == "NATO"
    assert [gcide_pairs.base64_number(dictd_number(value)) for value in (0, 63, 64, 4095, 123456789)] == \
        [0, 63, 64, 4095, 123456789]


def gcide_entries():
    """Two entries of "Bank" (one record), 60 other headwords of two senses each, a shared
    definition (a leak unless removed) and a WordNet held-out word ("heldout")."""
    entries = [("Bank", BANK), ("Bank", BANK_VERB), ("Commandry", SEE_ALSO)]
    for number in range(60):
        word = f"Word{number}"
        entries.append((word, f"{word} \\{word}\\, n.\n   1. The first sense of word {number}.\n      [1913 Webster]\n\n"
                              f"   2. The second sense of word {number}; a thing.\n      [1913 Webster]\n"))
    for word in ("Shareda", "Sharedb"):
        entries.append((word, f"{word} \\{word}\\, n.\n   A definition two headwords share.\n   [1913 Webster]\n"))
    entries.append(("Heldout", "Heldout \\Held\"out\\, n.\n   A word WordNet holds out.\n   [1913 Webster]\n"))
    return entries


def write_wordnet_splits(folder, dev_words=("heldout",), definitions=("a word wordnet keeps for its test",)):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dev.jsonl").write_text("".join(json.dumps({"query": f"{word}, other", "positives": ["x y z"]}) + "\n"
                                              for word in dev_words))
    (folder / "test.jsonl").write_text("".join(json.dumps({"query": "unrelated", "positives": [definition]}) + "\n"
                                               for definition in definitions))


def run_gcide(tmp_path, output, wordnet):
    gcide_pairs.main(["--gcide-root", str(tmp_path / "gcide"), "--wordnet", str(wordnet), "--output", str(output),
                      "--seed", "3", "--dev-fraction", "0.2", "--test-fraction", "0.2"])
    return read_splits(output)


def test_gcide_corpus(tmp_path):
    entries = gcide_entries()
    write_dictd(tmp_path / "gcide", "gcide", entries, extra_index=[("bank", 0), ("Bancus", 1)])
    write_wordnet_splits(tmp_path / "wordnet")
    splits = run_gcide(tmp_path, tmp_path / "out", tmp_path / "wordnet")
    assert all(splits[split] for split in SPLITS)
    assert not leaks(splits, pair_keys)
    every = {record["query"]: (split, record) for split in SPLITS for record in splits[split]}
    split, record = every["bank"]  # both entries of "Bank" are one record, and its phrases share its split
    assert len(record["positives"]) == 5 and record["positives"][-1] == "To deposit in a bank."
    assert every["bank swallow"][0] == split and every["to bank a fire, to bank up a fire"][0] == split
    assert "commandry" not in every
    assert sum(record["positives"] == ["A definition two headwords share."] for _, record in every.values()) == 1
    assert every.get("heldout", ("dev",))[0] != "train"  # WordNet's held-out word never trains
    manifest = check_manifest(tmp_path / "out")
    held_out_in_train = manifest["removed_from_train_for_wordnet"]["records_with_a_wordnet_dev_or_test_word"]
    assert held_out_in_train == (1 if "heldout" not in every else 0)
    assert [entry["file"] for entry in manifest["removed_from_train_for_wordnet"]["wordnet_files"]] == \
        ["wordnet/dev.jsonl", "wordnet/test.jsonl"]
    again = run_gcide(tmp_path, tmp_path / "again", tmp_path / "wordnet")
    assert again == splits
    for name in ("train.jsonl", "text.jsonl", "manifest.json"):
        assert (tmp_path / "out" / name).read_bytes() == (tmp_path / "again" / name).read_bytes()


def test_gcide_wordnet_drop_is_checked(tmp_path):
    # The planted control: every headword is a WordNet held-out word, so train must end empty, and
    # a missing WordNet split is refused rather than skipped.
    write_dictd(tmp_path / "gcide", "gcide", gcide_entries())
    every_word = [f"word{number}" for number in range(60)] + ["bank", "shareda", "sharedb", "heldout",
                                                                "bank swallow", "to bank a fire"]
    write_wordnet_splits(tmp_path / "wordnet", dev_words=every_word)
    splits = run_gcide(tmp_path, tmp_path / "out", tmp_path / "wordnet")
    assert splits["train"] == []
    (tmp_path / "wordnet" / "test.jsonl").unlink()
    with pytest.raises(SystemExit, match="test.jsonl"):
        run_gcide(tmp_path, tmp_path / "missing", tmp_path / "wordnet")


def test_gcide_definitions_of_wordnet_leave_train():
    train = [{"query": "alpha", "positives": ["A word wordnet keeps for its test", "kept"]},
             {"query": "beta, heldout", "positives": ["kept too"]}]
    kept, counts = gcide_pairs.drop_wordnet_held_out(train, {"heldout"}, {"a word wordnet keeps for its test"})
    assert kept == [{"query": "alpha", "positives": ["kept"]}]
    assert counts == {"records_with_a_wordnet_dev_or_test_word": 1, "positives_equal_to_a_wordnet_dev_or_test_definition": 1}


# ---- the corpus in data/, when built (test_corpora.py checks leaks and manifests) ---------------

def test_built_gcide_has_no_wordnet_held_out_word_in_train():
    folder, wordnet = ROOT / "data" / "gcide", ROOT / "data" / "wordnet"
    if not (folder / "train.jsonl").exists() or not (wordnet / "dev.jsonl").exists():
        pytest.skip("data/gcide or data/wordnet is not built")
    words, _, _ = gcide_pairs.wordnet_held_out(wordnet)
    train = read_splits(folder)["train"]
    assert train and not any(word.strip().casefold() in words for record in train for word in record["query"].split(","))


def test_built_wide_man_pages_share_no_page_with_the_man_pages():
    folder, manpages = ROOT / "data" / "manpages-wide", ROOT / "data" / "manpages"
    if not (folder / "train.jsonl").exists() or not (manpages / "test.jsonl").exists():
        pytest.skip("data/manpages-wide or data/manpages is not built")
    wide = manpage_pairs.page_names(folder)
    assert wide and not wide & manpage_pairs.page_names(manpages)


# ---- man pages ----------------------------------------------------------------------------------

MAN_PAGE = r'''.\" a comment that must not show
.TH LS "1" "September 2022" "GNU coreutils 9.1" "User Commands"
.ds n listing
.SH NAME
ls \- list directory contents
.SH SYNOPSIS
.B ls
[\fI\,OPTION\/\fR]... [\fI\,FILE\/\fR]...
.SH DESCRIPTION
.PP
List information about the FILEs (the current directory by default).
Sort entries alphabetically if none of \fB\-cftuvSUX\fR nor
.BR \-\-sort " is specified for " \*n .
.TS
tab(:);
a table:that must go
.TE
.PP
It prints \(lqnames\(rq \(em one per line \[u00E9]t\['e] \e done.
.TP
\fB\-a\fR, \fB\-\-all\fR
do not ignore entries starting with .
.SH AUTHOR
Written by someone.
'''
MDOC_PAGE = r'''.Dd $Mdocdate$
.Dt SCP 1
.Os
.Sh NAME
.Nm scp
.Nd OpenSSH secure file copy
.Sh DESCRIPTION
.Nm
copies files between hosts, see
.Xr ssh 1 .
Use
.Fl r
to copy
.Ar directories
in the form
.Sm off
.Oo user @ Oc host
.Sm on
recursively.
'''


def test_manpage_parsing_and_cleaning():
    summary, text = manpage_pairs.parse_page(MAN_PAGE, "ls")
    assert summary == "list directory contents"
    assert text.split("\n\n") == [
        "List information about the FILEs (the current directory by default). Sort entries alphabetically if "
        "none of -cftuvSUX nor --sort is specified for listing.",
        "It prints “names” — one per line été \\ done."]  # the table and, after this much prose, the option list go
    summary, text = manpage_pairs.parse_page(MDOC_PAGE, "scp")
    assert summary == "OpenSSH secure file copy"
    assert text == "scp copies files between hosts, see ssh(1). Use -r to copy directories in the form [user @] host recursively."
    assert manpage_pairs.read_page.__doc__ and manpage_pairs.PAGE.match("File::Temp.3perl.gz").group("section") == "3perl"


def write_man_tree(root):
    """A package of 40 pages in two sections each, one .so link, one page without a summary and
    two pages sharing a description (a leak unless removed)."""
    man = root / "usr" / "share" / "man"
    for section in ("1", "3"):
        (man / f"man{section}").mkdir(parents=True, exist_ok=True)
    for number in range(40):
        for section in ("1", "3"):
            body = (f".TH TOOL{number} {section}\n.SH NAME\ntool{number} \\- do task {number} in section {section}\n"
                    f".SH DESCRIPTION\nThe tool number {number} performs its own task {number} for section {section} well.\n")
            (man / f"man{section}" / f"tool{number}.{section}.gz").write_bytes(gzip.compress(body.encode(), mtime=0))
    shared = ".TH X 1\n.SH NAME\n{0} \\- {0} with a shared text\n.SH DESCRIPTION\nThis description is shared by two pages word for word.\n"
    for name in ("sharea", "shareb"):
        (man / "man1" / f"{name}.1").write_text(shared.format(name))
    (man / "man1" / "link.1").write_text(".so man1/tool1.1\n")
    (man / "man1" / "bare.1").write_text(".TH BARE 1\n.SH NAME\nbare\n.SH DESCRIPTION\nA page whose NAME has no summary.\n")
    (root / "usr" / "share" / "man" / "de" / "man1").mkdir(parents=True)
    (root / "usr" / "share" / "man" / "de" / "man1" / "tool1.1").write_text(".SH NAME\ntool1 \\- übersetzt\n")


def run_manpages(tmp_path, output):
    manpage_pairs.main(["--packages", "fake", "--man-root", f"fake={tmp_path / 'man'}", "--output", str(output),
                        "--seed", "4", "--dev-fraction", "0.2", "--test-fraction", "0.2"])
    return read_splits(output)


def test_manpage_corpus(tmp_path):
    write_man_tree(tmp_path / "man")
    splits = run_manpages(tmp_path, tmp_path / "out")
    assert all(splits[split] for split in SPLITS)
    assert not leaks(splits, pair_keys)
    owner = {}
    for split in SPLITS:
        for record in splits[split]:
            assert owner.setdefault(record["page"].split("(")[0], split) == split  # both sections of a name together
    every = [record for split in SPLITS for record in splits[split]]
    assert sum(record["positives"] == ["This description is shared by two pages word for word."] for record in every) == 1
    assert not any("übersetzt" in record["query"] or record["page"].startswith(("bare", "link")) for record in every)
    manifest = check_manifest(tmp_path / "out")
    assert manifest["pages"]["links to another page (.so)"] == 1 and manifest["pages"]["no usable NAME summary"] == 1
    assert run_manpages(tmp_path, tmp_path / "again") == splits
    assert (tmp_path / "out" / "text.jsonl").read_bytes() == (tmp_path / "again" / "text.jsonl").read_bytes()


CONTENTS = """usr/bin/ls                                              utils/coreutils
usr/share/man/man1/ls.1.gz                              utils/coreutils
usr/share/man/man1/tool1.1.gz                           utils/wide-a
usr/share/man/man1/tool2.1.gz                           utils/wide-a
usr/share/man/man5/tool2.conf.5.gz                      utils/wide-a
usr/share/man/man3/tool3.3.gz                           libdevel/wide-lib
usr/share/man/de/man1/tool1.1.gz                        localization/wide-de
usr/share/man/man8/shared.8.gz                          admin/wide-b,admin/wide-c
"""


def test_contents_index_gives_the_pages_of_each_package():
    """Sections 1, 5, 7 and 8 of the English pages only; a path two packages own counted for both."""
    pages = manpage_pairs.debian_archive.files_per_package(CONTENTS, manpage_pairs.WIDE_PAGE)
    assert pages == {"coreutils": ["usr/share/man/man1/ls.1.gz"],
                     "wide-a": ["usr/share/man/man1/tool1.1.gz", "usr/share/man/man1/tool2.1.gz", "usr/share/man/man5/tool2.conf.5.gz"],
                     "wide-b": ["usr/share/man/man8/shared.8.gz"], "wide-c": ["usr/share/man/man8/shared.8.gz"]}


def test_wide_packages_take_the_most_pages_a_byte_within_the_budget():
    pages = {"a": ["p"] * 3, "b": ["p"], "c": ["p"] * 10, "d": ["p"] * 2, "coreutils": ["p"] * 50, "unsized": ["p"] * 9}
    sizes = {"a": 100, "b": 10, "c": 1000, "d": 50, "coreutils": 10}
    # per byte: b 0.1, d 0.04, a 0.03, c 0.01 (coreutils excluded, unsized unknown)
    assert manpage_pairs.wide_packages(pages, sizes, 160, {"coreutils"}) == ["a", "b", "d"]
    assert manpage_pairs.wide_packages(pages, sizes, 60, {"coreutils"}) == ["b", "d"]
    assert manpage_pairs.wide_packages(pages, sizes, 1160, {"coreutils"}) == ["a", "b", "c", "d"]
    assert manpage_pairs.wide_packages(pages, sizes, 1100, {"coreutils"}) == ["a", "b", "d"]  # c left out, the rest fit
    assert manpage_pairs.wide_packages(pages, sizes, 5, set()) == []


def test_licence_of_reads_dep5_then_a_common_licence_named(tmp_path):
    archive = manpage_pairs.debian_archive
    doc = tmp_path / "usr" / "share" / "doc" / "tool"
    doc.mkdir(parents=True)
    (doc / "copyright").write_text("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\n"
                                   "Files: *\nLicense: MIT\n")
    assert archive.licence_of("tool", tmp_path) == "MIT"
    (doc / "copyright").write_text("Copyright 1999 Someone.\nOn Debian systems see /usr/share/common-licenses/GPL-2.\n")
    assert archive.licence_of("tool", tmp_path) == "GPL-2"
    (doc / "copyright").write_text("Copyright 1999 Someone. Do what you will.\n")
    assert archive.licence_of("tool", tmp_path) is None


def test_wide_corpus_leaves_out_the_man_page_corpus_pages(tmp_path, monkeypatch):
    """--wide chooses its packages from the Contents index and drops every page named in --manpages' corpora,
    whatever its split there, and every page whose summary or description is in one under another name."""
    archive = manpage_pairs.debian_archive
    write_man_tree(tmp_path / "man")
    corpus, wide = tmp_path / "manpages", tmp_path / "manpages-wide"
    corpus.mkdir()
    wide.mkdir()
    for split, name in (("train", "tool1"), ("dev", "tool2"), ("test", "TOOL3")):
        (corpus / f"{split}.jsonl").write_text(json.dumps({"query": "q", "positives": ["p"], "page": f"{name}(1)"}) + "\n")
    copied = {"query": "Do task 5 in section 3", "positives": ["elsewhere"], "page": "copy(1)"}  # tool5(3)'s summary
    (wide / "test.jsonl").write_text(json.dumps(copied) + "\n")
    monkeypatch.setattr(archive, "contents_lists", lambda scratch, refresh=False: [tmp_path / "contents"])
    monkeypatch.setattr(archive, "read_list", lambda path: "usr/share/man/man1/tool1.1.gz utils/fake\n")
    monkeypatch.setattr(archive, "download_sizes", lambda scratch: {"fake": 1000})
    output = tmp_path / "wide"
    manpage_pairs.main(["--wide", "1", "--manpages", str(corpus), "--manpages", str(wide), "--man-root", f"fake={tmp_path / 'man'}",
                        "--output", str(output), "--seed", "4", "--dev-fraction", "0.2", "--test-fraction", "0.2"])
    splits = read_splits(output)
    pages = {record["page"] for split in SPLITS for record in splits[split]}
    names = {page.split("(")[0] for page in pages}
    assert names and not names & {"tool1", "tool2", "tool3"} and "tool4" in names
    assert "tool5(1)" in pages and "tool5(3)" not in pages
    manifest = check_manifest(output)
    assert manifest["pages"]["pages named in --manpages' corpus"] == 6  # three names, two sections each
    assert manifest["pages"]["pages whose summary or description is in --manpages' corpus"] == 1
    assert not leaks(splits, pair_keys)


# ---- FOLDOC -------------------------------------------------------------------------------------

BURN_IN = '''burn-in period

   1. <testing> A factory {soak test} intended to increase the
   chance that components fail before the system leaves the factory.

   2. <jargon> When one is so involved in a new project that one
   forgets to sleep.

    an example line

   See {hack mode}.

   [{Jargon File}]

   (2007-01-17)

'''


def test_foldoc_entry_parsing():
    term, definitions = foldoc_pairs.parse_entry(BURN_IN)
    assert term == "burn-in period"
    assert definitions == ["A factory soak test intended to increase the chance that components fail before the system "
                           "leaves the factory.", "When one is so involved in a new project that one forgets to sleep.\n\n"
                           "an example line"]
    assert foldoc_pairs.parse_entry("CNAME\n\n   See {canonical name}.\n\n   (1994-11-29)\n")[1] == []


def test_foldoc_corpus(tmp_path):
    entries = [("burn-in period", BURN_IN)]
    for number in range(60):
        entries.append((f"term{number}", f"term{number}\n\n   <networking> The {{thing}} number {number} of networking.\n\n   (2000-01-01)\n"))
    for term in ("synonym one", "synonym two"):  # the same definition twice: a leak unless removed
        entries.append((term, f"{term}\n\n   A definition two terms share word for word.\n"))
    write_dictd(tmp_path / "foldoc", "foldoc", entries)
    arguments = ["--foldoc-root", str(tmp_path / "foldoc"), "--seed", "6", "--dev-fraction", "0.2", "--test-fraction", "0.2"]
    foldoc_pairs.main([*arguments, "--output", str(tmp_path / "out")])
    splits = read_splits(tmp_path / "out")
    assert all(splits[split] for split in SPLITS)
    assert not leaks(splits, pair_keys)
    every = [record for split in SPLITS for record in splits[split]]
    assert sum(record["positives"] == ["A definition two terms share word for word."] for record in every) == 1
    assert any(record["positives"] == ["The thing number 7 of networking."] for record in every)
    check_manifest(tmp_path / "out")
    foldoc_pairs.main([*arguments, "--output", str(tmp_path / "again")])
    assert read_splits(tmp_path / "again") == splits


def moved_groups(splitter, seed=0):
    """How many of 3,000 page groups change split when one other group leaves (the archive moving)."""
    sizes = {f"page{i}": 1 + i % 3 for i in range(3000)}
    before = splitter(set(sizes), sizes, seed, 0.05, 0.05)
    fewer = {group: size for group, size in sizes.items() if group != "page1234"}
    after = splitter(set(fewer), fewer, seed, 0.05, 0.05)
    return sum(before[group] != after[group] for group in fewer), before


def test_stable_splits_keep_each_group_when_another_leaves():
    stable = manpage_pairs.debian_archive.stable_splits
    moved, before = moved_groups(stable)
    assert moved == 0
    counts = {split: sum(1 for value in before.values() if value == split) for split in SPLITS}
    assert 100 <= counts["dev"] <= 200 and 100 <= counts["test"] <= 200, counts  # about 5% each of 3,000
    assert stable({"a", "b"}, {"a": 100, "b": 1}, 0, 0.5, 0.5)["a"] == "train"  # a huge group stays in train
    # The control: the seeded order over every group (assign_splits) moves hundreds of them.
    moved, _ = moved_groups(manpage_pairs.debian_archive.assign_splits)
    assert moved > 100
