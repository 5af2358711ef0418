# test_corpora.py: the corpus scripts of scripts/data (code_pairs, wordnet_pairs, description_pairs,
# text_corpus and their shared debian_archive) on small trees written here, so no network is
# needed: what each parser extracts, that splits keep groups whole and share no query or positive
# (with a planted leak the check must catch), that outputs match their manifests and repeat
# byte for byte. Then the same no-leak and manifest checks on the corpora in data/ when they have
# been built, and the mixtures that name them.

import collections
import hashlib
import json
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "data"))
import code_pairs  # noqa: E402
import debian_archive  # noqa: E402
import description_pairs  # noqa: E402
import text_corpus  # noqa: E402
import wordnet_pairs  # noqa: E402

SPLITS = ("train", "dev", "test")


def read_splits(folder):
    return {split: [json.loads(line) for line in (pathlib.Path(folder) / f"{split}.jsonl").open(encoding="utf-8")]
            for split in SPLITS}


def translation_pairs(splits):
    """{(English, translation, language)} of a translation corpus's records, every split."""
    return {(r["query"], r["positives"][0], r["lang"]) for split in SPLITS for r in splits[split]}


def one_split_per_page(*corpora):
    """Whether every "page" of these corpora's records (each {split: [record]}) lies in one split of all of them."""
    where = {}
    for splits in corpora:
        for split in SPLITS:
            for record in splits[split]:
                where.setdefault(record["page"], set()).add(split)
    return all(len(places) == 1 for places in where.values())


def seeded_splits_hold(run_seed, seeds=range(6)):
    """run_seed(seed) -> [{split: [record]}] of one or more corpora built together: for every seed no corpus
    leaks and every page keeps one split across all of them, and some seed fills the first one's test."""
    seen_test = False
    for seed in seeds:
        corpora = run_seed(seed)
        assert not any(leaks(splits, pair_keys) for splits in corpora) and one_split_per_page(*corpora), seed
        seen_test = seen_test or bool(corpora[0]["test"])
    assert seen_test


def planted_leak_caught(folder, keys):
    """The control of a corpus's no-leak check: a record of test (or train) copied into dev must show as a leak."""
    planted = read_splits(folder)
    source = "test" if planted["test"] else "train"
    planted["dev"].append(dict(planted[source][0]))
    return bool(leaks(planted, keys))


def leaks(splits, keys):
    """Keys (case-folded texts) that occur in more than one split."""
    owner, found = {}, set()
    for split in SPLITS:
        for record in splits[split]:
            for key in keys(record):
                if owner.setdefault(key, split) != split:
                    found.add(key)
    return found


def pair_keys(record):
    return [record["query"].casefold(), *(positive.casefold() for positive in record["positives"])]


def text_keys(record):
    return [record["text"].casefold()]


def check_manifest(folder):
    manifest = json.loads((pathlib.Path(folder) / "manifest.json").read_text(encoding="utf-8"))
    for name, entry in manifest["files"].items():
        data = (pathlib.Path(folder) / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], name
        assert data.count(b"\n") == entry["records"], name
    for split in SPLITS:
        assert manifest["records"][split]["total"] == manifest["files"][f"{split}.jsonl"]["records"]
    return manifest


# ---- shared helpers -----------------------------------------------------------------------------

def test_remove_leaks_catches_a_planted_leak():
    records = {"train": [{"query": "Open the file", "positives": ["a"]}],
               "dev": [{"query": "open the FILE", "positives": ["b"]}, {"query": "kept", "positives": ["c"]},
                       {"query": "other", "positives": ["A"]}],  # its positive is train's, case aside
               "test": [{"query": "kept", "positives": ["d"]}, {"query": "fresh", "positives": ["e"]}]}
    planted = {split: list(items) for split, items in records.items()}
    assert leaks(planted, pair_keys)  # the control: without removal the check goes red
    removed = debian_archive.remove_leaks(records)
    assert removed == {"dev": 2, "test": 1}
    assert not leaks(records, pair_keys)
    assert [record["query"] for record in records["test"]] == ["fresh"]


def test_cut_and_stanzas():
    assert debian_archive.cut("one\ntwo\nthree", 9) == "one\ntwo"
    assert debian_archive.cut("short", 100) == "short"
    assert debian_archive.cut("ééé", 3) == "é"  # never half a character
    parsed = list(debian_archive.stanzas("Package: a\nDescription: x\n long\n\nPackage: b\n"))
    assert parsed == [{"Package": "a", "Description": "x\n long"}, {"Package": "b"}]


def test_fetch_errors_name_the_package(tmp_path, monkeypatch):
    # apt is replaced by a stand-in that fails the way apt-cache does for an unknown name, so the
    # test needs neither apt nor a network.
    class Failed:
        returncode, stdout, stderr = 100, "", "E: No packages found"

    monkeypatch.setattr(debian_archive.subprocess, "run", lambda *arguments, **options: Failed())
    with pytest.raises(debian_archive.FetchError, match="no-such-package-here: not in the package lists"):
        debian_archive.candidate("no-such-package-here", tmp_path)
    with pytest.raises(debian_archive.FetchError, match="apt-get update into .* failed"):
        debian_archive.private_lists(tmp_path)


# ---- code pairs ---------------------------------------------------------------------------------

PYTHON_MODULE = '''
def documented(a, b=1):
    """Add two numbers and return the sum.

    Longer explanation here."""
    total = a + b
    return total


def undocumented():
    return 1


def only_docstring():
    """Nothing but words here."""


def one_line(): "Docstring on the def line."; return 1


class Shape:
    """A shape with an area and a name."""
    sides = 0

    def area(self):
        """Compute the area of the shape."""
        return 0.0

    @property
    def name(self):
        return "shape"
'''


def test_python_definitions():
    found = {name: (doc, code) for _, name, doc, code in code_pairs.python_definitions(PYTHON_MODULE)}
    assert set(found) == {"documented", "Shape", "Shape.area"}
    doc, code = found["documented"]
    assert doc.startswith("Add two numbers") and "Longer explanation" in doc
    assert code == "def documented(a, b=1):\n    total = a + b\n    return total"
    doc, code = found["Shape"]
    assert doc == "A shape with an area and a name."
    # The class is a skeleton: no method body, no method docstring (the method's own query).
    assert code == ("class Shape:\n    sides = 0\n    def area(self):\n        ...\n    @property\n"
                    "    def name(self):\n        ...")
    assert "Compute the area" not in code
    assert found["Shape.area"][1] == "def area(self):\n    return 0.0"
    assert code_pairs.python_definitions("def broken(:\n") == []


GO_SOURCE = '''package sample

// Add returns the sum of a and b.
//
// It never overflows in tests.
//go:noinline
func Add(a, b int) int {
	return a + b
}

func undocumented() {}

// Max returns the larger one.
func Max(a, b int) int { if a > b { return a }; return b }

// Sqrt is implemented in assembly.
func Sqrt(x float64) float64

// Long has a signature over several lines.
func (s *Server) Long(
	a int,
	b int,
) error {
	return nil
}
'''


def test_go_functions():
    found = {name: (doc, code) for _, name, doc, code in code_pairs.go_functions(GO_SOURCE)}
    assert set(found) == {"Add", "Max", "Sqrt", "Long"}
    assert found["Add"][0] == "Add returns the sum of a and b.\n\nIt never overflows in tests."  # directive dropped
    assert found["Add"][1] == "func Add(a, b int) int {\n\treturn a + b\n}"
    assert found["Max"][1].startswith("func Max") and found["Max"][1].count("\n") == 0
    assert found["Sqrt"][1] == "func Sqrt(x float64) float64"
    assert found["Long"][1].endswith("return nil\n}") and found["Long"][1].startswith("func (s *Server) Long(")


RUST_SOURCE = '''impl Thing {
    /// Returns the number of elements in the thing.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(Thing::new().len(), 0);
    /// ```
    #[stable(feature = "rust1",
             since = "1.0.0")]
    #[inline]
    pub const fn len(&self) -> usize {
        self.length
    }

    /// Short.
    pub fn tiny(&self) {}
}

pub trait Reader {
    /// Reads bytes into the buffer and returns how many were read.
    fn read(&mut self, buffer: &mut [u8]) -> usize;
}

/// Documents a struct, not a function.
pub struct Plain;
'''


def test_rust_functions():
    found = {name: (doc, code) for _, name, doc, code in code_pairs.rust_functions(RUST_SOURCE)}
    assert set(found) == {"len", "read"}  # "Short." is too short; the struct is no fn
    assert found["len"][0] == "Returns the number of elements in the thing."  # the examples are cut
    assert found["len"][1] == "pub const fn len(&self) -> usize {\n    self.length\n}"
    assert found["read"][1] == "fn read(&mut self, buffer: &mut [u8]) -> usize;"


def write_code_tree(root):
    """Python, Go and Rust trees with 12 groups each; one docstring recurs in two groups (a leak
    unless removed) and a test folder must be skipped."""
    shared = "Shared documentation that appears in two places."
    for group in range(12):
        python = root / "python" / f"package{group}"
        python.mkdir(parents=True)
        functions = "".join(f'def function_{group}_{i}(x):\n    """Function {i} of package {group} does thing {i}."""\n'
                            f"    return x + {i}\n\n" for i in range(5))
        functions += f'def shared_{group}(y):\n    """{shared}"""\n    return y * {group}\n'
        (python / "__init__.py").write_text(functions)
        go = root / "go" / f"pkg{group}"
        go.mkdir(parents=True)
        (go / "a.go").write_text(f"package pkg{group}\n\n" + "".join(
            f"// F{i} computes value {i} for package {group}.\nfunc F{i}() int {{\n\treturn {i * group}\n}}\n\n" for i in range(5)))
        rust = root / "rust" / "library" / f"crate{group}" / "src"
        rust.mkdir(parents=True)
        (rust / "lib.rs").write_text("".join(
            f"/// Returns the value {i} of crate {group} as a number.\npub fn value_{i}() -> u32 {{\n    {i + group}\n}}\n\n"
            for i in range(5)))
    tests = root / "python" / "test"
    tests.mkdir()
    (tests / "test_x.py").write_text('def test_it():\n    """A test that must not be read."""\n    assert True\n')


def run_code(root, output):
    code_pairs.main(["--python-root", str(root / "python"), "--go-root", str(root / "go"), "--rust-root", str(root / "rust"),
                     "--output", str(output), "--seed", "5", "--dev-fraction", "0.2", "--test-fraction", "0.2"])
    return read_splits(output)


def test_code_corpus_splits_without_leaks(tmp_path):
    write_code_tree(tmp_path)
    splits = run_code(tmp_path, tmp_path / "out")
    for split in SPLITS:
        assert {record["lang"] for record in splits[split]} == {"python", "go", "rust"}, split
    assert not leaks(splits, pair_keys)
    owner = {}
    for split in SPLITS:
        for record in splits[split]:
            group = (record["lang"], str(pathlib.PurePath(record["source"].split(":")[0]).parent))
            assert owner.setdefault(group, split) == split  # a package stays in one split
    every = [record for split in SPLITS for record in splits[split]]
    assert sum("Shared documentation" in record["query"] for record in every) == 1  # kept once, where it was first
    assert not any("must not be read" in record["query"] for record in every)
    manifest = check_manifest(tmp_path / "out")
    assert manifest["source"]["local_roots"] and manifest["removed_from_dev_and_test_as_leaks"]
    again = run_code(tmp_path, tmp_path / "again")
    assert again == splits
    assert (tmp_path / "out" / "text.jsonl").read_bytes() == (tmp_path / "again" / "text.jsonl").read_bytes()


# ---- WordNet ------------------------------------------------------------------------------------

def test_parse_synset():
    line = ("09213565 17 n 02 bank 0 cant(a) 0 001 @ 09238143 n 0000 | sloping land (especially the slope beside a body "
            'of water); "they pulled the canoe up on the bank"; "he sat on the bank of the river"  ')
    words, definition, examples = wordnet_pairs.parse_synset(line)
    assert words == ["bank", "cant"]
    assert definition == "sloping land (especially the slope beside a body of water)"
    assert examples == ["they pulled the canoe up on the bank", "he sat on the bank of the river"]
    assert wordnet_pairs.parse_synset("  1 This software and database is being provided") is None
    with pytest.raises(ValueError, match="not a synset"):
        wordnet_pairs.parse_synset("garbage without a gloss")


def write_wordnet(folder):
    folder.mkdir()
    offset = 1000
    for suffix in ("noun", "verb", "adj", "adv"):
        lines = ["  1 licence header line"]
        for index in range(60):
            words = f"word{index % 40}_{suffix} 0" if index % 3 else f"word{index % 40}_{suffix} 0 other_{index} 0"
            count = 1 if index % 3 else 2
            lines.append(f"{offset:08d} 03 n {count:02x} {words} 000 | meaning {index} of {suffix}; \"an example {index}\"")
            offset += 100
        (folder / f"data.{suffix}").write_text("\n".join(lines) + "\n")


def test_wordnet_corpus(tmp_path):
    write_wordnet(tmp_path / "wordnet")
    arguments = ["--wordnet-root", str(tmp_path / "wordnet"), "--seed", "1", "--dev-fraction", "0.2", "--test-fraction", "0.2"]
    wordnet_pairs.main([*arguments, "--output", str(tmp_path / "out")])
    splits = read_splits(tmp_path / "out")
    assert all(splits[split] for split in SPLITS)
    assert not leaks(splits, pair_keys)
    queries = collections.Counter(record["query"] for split in SPLITS for record in splits[split])
    assert max(queries.values()) == 1
    merged = [record for split in SPLITS for record in splits[split] if len(record["positives"]) > 1]
    assert merged and all(record["positives"][0].startswith("meaning") for record in merged)  # one word list, its senses
    check_manifest(tmp_path / "out")
    wordnet_pairs.main([*arguments, "--output", str(tmp_path / "again")])
    assert read_splits(tmp_path / "again") == splits


# ---- package descriptions -----------------------------------------------------------------------

def test_paragraphs_and_fit():
    long = " First line\n wraps here.\n .\n A list:\n  * one\n  * two"
    assert description_pairs.paragraphs(long) == ["First line wraps here.", "A list:\n* one\n* two"]
    english, german = ["a" * 900, "b" * 900, "c" * 900], ["x" * 1000, "y" * 1000, "z" * 10]
    assert description_pairs.fit(english, german) == ["a" * 900, "x" * 1000]  # two paragraphs would pass 2000 bytes on one side
    assert description_pairs.fit(["q" * 3000]) is None


def write_lists(folder):
    """Packages and Translation-{en,de,pt,pt_BR} lists: 30 source packages of two binaries each."""
    folder.mkdir()
    packages, english, german, portuguese, brazilian = [], [], [], [], []
    for source in range(30):
        for binary in ("", "-doc"):
            name = f"tool{source}{binary}"
            md5 = hashlib.md5(name.encode()).hexdigest()
            packages.append(f"Package: {name}\nSource: tool{source} (1.0-1)\nVersion: 1.0-1\nDescription-md5: {md5}\n")
            synopsis = f"tool number {source}{' documentation' if binary else ''}"
            body = f" Tool {source} does useful thing {source} for you.\n .\n This package has the {binary or 'program'} part {source}."
            if source == 3:  # the same synopsis as source 4's: a leak unless removed
                synopsis = "tool number 4" + (" documentation" if binary else "")
            english.append(f"Package: {name}\nDescription-md5: {md5}\nDescription-en: {synopsis}\n{body}\n")
            german.append(f"Package: {name}\nDescription-md5: {md5}\nDescription-de: Werkzeug {source}\n"
                          f" Werkzeug {source} tut Nützliches {source}.\n .\n Dieses Paket enthält Teil {source}.\n")
            if source < 5:
                portuguese.append(f"Package: {name}\nDescription-md5: {md5}\nDescription-pt: Ferramenta {source}\n"
                                  f" Ferramenta {source} (pt).\n .\n Parte {source}.\n")
                brazilian.append(f"Package: {name}\nDescription-md5: {md5}\nDescription-pt_BR: Ferramenta {source}\n"
                                 f" Ferramenta {source} (br).\n .\n Parte {source}.\n")
    (folder / "example_main_binary-amd64_Packages").write_text("\n".join(packages))
    (folder / "example_main_i18n_Translation-en").write_text("\n".join(english))
    (folder / "example_main_i18n_Translation-de").write_text("\n".join(german))
    (folder / "example_main_i18n_Translation-pt").write_text("\n".join(portuguese))
    (folder / "example_main_i18n_Translation-pt%5fBR").write_text("\n".join(brazilian))


def test_description_corpora(tmp_path):
    write_lists(tmp_path / "lists")
    description_pairs.main(["--lists", str(tmp_path / "lists"), "--output", str(tmp_path / "descriptions"),
                            "--translations-output", str(tmp_path / "translations"), "--seed", "2",
                            "--dev-fraction", "0.2", "--test-fraction", "0.2"])
    synopses, translations = read_splits(tmp_path / "descriptions"), read_splits(tmp_path / "translations")
    for splits in (synopses, translations):
        assert all(splits[split] for split in SPLITS)
        assert not leaks(splits, pair_keys)
    owner = {}
    for splits in (synopses, translations):  # one source package, one split, in both corpora
        for split in SPLITS:
            for record in splits[split]:
                source = record["package"].replace("-doc", "")
                assert owner.setdefault(source, split) == split
    record = next(record for split in SPLITS for record in synopses[split] if record["package"] == "tool7")
    assert record["query"] == "tool number 7"
    assert record["positives"] == ["Tool 7 does useful thing 7 for you.\n\nThis package has the program part 7."]
    portuguese = [record for split in SPLITS for record in translations[split] if record["lang"] == "pt"]
    assert portuguese and all("(pt)" in record["positives"][0] for record in portuguese)  # pt before pt_BR
    german = next(record for split in SPLITS for record in translations[split] if record["package"] == "tool7")
    assert german["query"].startswith("tool number 7\n\nTool 7 does") and german["positives"][0].startswith("Werkzeug 7\n\n")
    check_manifest(tmp_path / "descriptions"), check_manifest(tmp_path / "translations")


# ---- multilingual text --------------------------------------------------------------------------

PAGE = b'''<?xml version="1.0" encoding="utf-8"?>
<page xmlns="http://projectmallard.org/1.0/" type="topic" id="net-wireless">
  <info><credit><name>Someone</name></credit><license><p>Creative Commons Share Alike 3.0</p></license></info>
  <title>Connect to a <gui>wireless</gui> network</title>
  <p>You can connect to a wireless network
     to get access to the internet.</p>
  <steps><item><p>Open the <gui>system menu</gui>.</p></item></steps>
</page>'''


def test_page_paragraphs_and_fortunes():
    assert text_corpus.page_paragraphs(PAGE) == ["Connect to a wireless network",
                                                 "You can connect to a wireless network to get access to the internet.",
                                                 "Open the system menu."]
    cookies = text_corpus.fortunes("A first cookie that is long enough.\n%\nshort\n%\n\x1b[32mColoured\x1b[m words here, long enough.\n%\n")
    assert cookies == ["A first cookie that is long enough.", "Coloured words here, long enough."]
    assert text_corpus.chunks(["a" * 30, "b" * 30, "c" * 30], limit=70) == ["a" * 30 + "\n" + "b" * 30, "c" * 30]


def test_text_corpus(tmp_path):
    for language, folder in (("en", "C"), ("de", "de"), ("zh", "zh_CN"), ("xx", "xx")):
        for page in range(10):
            path = tmp_path / "help" / folder / "gnome-help" / f"page{page}.page"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(PAGE.replace(b"wireless network\n", f"network {page} in {language}\n".encode()))
    fortunes = tmp_path / "fortunes"
    fortunes.mkdir()
    for name in range(10):
        (fortunes / f"file{name}").write_text("".join(f"Cookie {name}-{i} says something wise.\n%\n" for i in range(5)) +
                                              "Every file ends with this same cookie text.\n%\n")
        (fortunes / f"file{name}.dat").write_bytes(b"\x00binary index")
    (fortunes / "off").mkdir()
    (fortunes / "off" / "rude").write_text("A rude cookie that must be left out.\n%\n")
    arguments = ["--help-root", str(tmp_path / "help"), "--fortunes-root", f"en={fortunes}", "--seed", "4",
                 "--dev-fraction", "0.2", "--test-fraction", "0.2"]
    text_corpus.main([*arguments, "--output", str(tmp_path / "out")])
    splits = read_splits(tmp_path / "out")
    assert all(splits[split] for split in SPLITS)
    assert not leaks(splits, text_keys)
    every = [record for split in SPLITS for record in splits[split]]
    assert {record["lang"] for record in every} == {"en", "de", "zh"}  # "xx" is not a UForm language
    assert not any("rude" in record["text"] for record in every)
    assert sum("same cookie text" in record["text"] for record in every) == 1
    owner = {}
    for split in SPLITS:
        for record in splits[split]:
            if record["source"].endswith(".page"):  # a page in every language goes to one split
                assert owner.setdefault(pathlib.PurePath(record["source"]).name, split) == split
    check_manifest(tmp_path / "out")
    text_corpus.main([*arguments, "--output", str(tmp_path / "again")])
    assert read_splits(tmp_path / "again") == splits


# ---- the corpora in data/, when built -----------------------------------------------------------

BUILT = {"code": pair_keys, "wordnet": pair_keys, "descriptions": pair_keys, "description-translations": pair_keys,
         "text": text_keys, "gcide": pair_keys, "manpages": pair_keys, "foldoc": pair_keys, "cldr": pair_keys,
         "gnome-help": pair_keys, "manuals": pair_keys, "manual-sections": pair_keys,
         "manpage-translations": pair_keys, "manpages-wide": pair_keys, "freedict": pair_keys}


@pytest.mark.parametrize("corpus", sorted(BUILT))
def test_built_corpus_has_no_leaks(corpus):
    folder = ROOT / "data" / corpus
    if not (folder / "manifest.json").exists():
        pytest.skip(f"data/{corpus} is not built (scripts/data/*.py writes it)")
    manifest = check_manifest(folder)
    splits = read_splits(folder)
    assert all(splits[split] for split in SPLITS)
    assert not leaks(splits, BUILT[corpus])
    assert manifest["source"].get("packages") or manifest["source"].get("apt_lists")
    for package in manifest["source"].get("packages", []):
        assert package["version"] and package["sha256"] and package["licence"], package


def test_mixtures_name_built_corpora():
    allowed = {"description", "objective", "columns", "mask_ratio", "mean_span", "image_mask_ratio", "sources"}
    expected = {"base.json": "mlm", "reranker.json": "rerank", "embedder.json": "contrastive",
                "embedder_no_negatives.json": "contrastive", "embedder_definitions.json": "contrastive",
                "embedder_definitions_negatives.json": "contrastive",
                "embedder_definitions_negatives_scarce.json": "contrastive", "embedder_definitions_scarce.json": "contrastive",
                "embedder_cldr.json": "contrastive", "embedder_cldr_help.json": "contrastive",
                "embedder_manuals.json": "contrastive"}
    for name, objective in expected.items():
        mixture = json.loads((ROOT / "mixtures" / name).read_text())
        assert set(mixture) <= allowed and mixture["objective"] == objective
        for source in mixture["sources"]:
            assert set(source) <= {"path", "weight", "name", "skip_malformed"} and source["weight"] > 0
            path = (ROOT / "mixtures" / source["path"]).resolve()
            if not path.exists():
                continue  # corpora are built by the scripts; the record kinds are checked where they exist
            with open(path, encoding="utf-8") as file:
                first = json.loads(file.readline())
            if objective == "mlm":  # text records, or the pictures of image_records.py
                assert ("text" in first or "image" in first) and "query" not in first, (name, source["path"])
            else:
                assert "query" in first and "positives" in first and "text" not in first, (name, source["path"])
