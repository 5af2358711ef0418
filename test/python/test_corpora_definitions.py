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
