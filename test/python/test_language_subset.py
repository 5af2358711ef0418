# test_language_subset.py: scripts/data/language_subset.py keeps exactly the records of the named
# languages, byte for byte and in order, and refuses a malformed line by file and line number. The
# planted control: a subset that drops one kept record must fail the same comparison.

import json
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "data"))
import language_subset  # noqa: E402

RECORDS = [{"query": "q1", "positives": ["p1"], "lang": "hy"}, {"query": "q2", "positives": ["p2"], "lang": "fr"},
           {"query": "Grüße", "positives": ["Բարև"], "lang": "hy", "negatives": ["n"]}, {"query": "q4", "positives": ["p4"]},
           {"query": "q5", "positives": ["p5"], "lang": "th"}]


def lines_of(records):
    return [json.dumps(record, ensure_ascii=False) for record in records]


def expected_subset(lines, languages):
    return [line for line in lines if json.loads(line).get("lang") in languages]


def test_subset_keeps_the_languages_byte_for_byte(tmp_path):
    source = tmp_path / "gettext" / "train-negatives.jsonl"
    source.parent.mkdir()
    lines = lines_of(RECORDS)
    source.write_text("\n".join(lines) + "\n\n", encoding="utf-8")
    target, kept, read = language_subset.write_subset(source, ["hy", "th"], "scarce")
    assert target == tmp_path / "gettext" / "train-negatives.scarce.jsonl"
    written = target.read_text(encoding="utf-8").splitlines()
    assert written == expected_subset(lines, {"hy", "th"}) and (kept, read) == (3, 5)
    planted = written[:1] + written[2:]  # the control: one kept record dropped
    assert planted != expected_subset(lines, {"hy", "th"})
    assert not list(tmp_path.glob("gettext/*.partial"))


def test_malformed_line_is_named(tmp_path):
    source = tmp_path / "train.jsonl"
    source.write_text(lines_of(RECORDS)[0] + "\n{not json\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"train\.jsonl:2: not JSON"):
        language_subset.write_subset(source, ["hy"], "scarce")
    assert not (tmp_path / "train.scarce.jsonl").exists() and not list(tmp_path.glob("*.partial"))


def test_cli_refuses_a_missing_file_and_an_unknown_group(tmp_path, capsys):
    with pytest.raises(SystemExit, match="missing"):
        language_subset.main([str(tmp_path / "absent.jsonl")])
    with pytest.raises(SystemExit):
        language_subset.main(["--group", "nosuch", str(tmp_path / "absent.jsonl")])
    assert "names no known group" in capsys.readouterr().err


def test_siblings_keep_the_records_whose_negative_is_one_word_away(tmp_path):
    """--siblings 0.7: a family member one word apart is kept, an unrelated negative, a record without one
    and a near-miss below the share are not; the Jaccard is counted by hand for the near-miss."""
    family = "This package contains the documentation files for the GIMP in {}, for the help browser."
    records = [{"query": "q1", "positives": [family.format("Dutch")], "negatives": [family.format("Norwegian")]},
               {"query": "q2", "positives": ["a text editor for programmers"], "negatives": ["a game of chess on the console"]},
               {"query": "q3", "positives": [family.format("Dutch")]},
               {"query": "q4", "positives": ["abcdefgh"], "negatives": ["abcdefxy"]}]
    source = tmp_path / "train-negatives.jsonl"
    source.write_text("\n".join(lines_of(records)) + "\n", encoding="utf-8")
    near = language_subset.grams("abcdefgh"), language_subset.grams("abcdefxy")
    assert len(near[0] & near[1]) / len(near[0] | near[1]) == 3 / 7  # abcd, bcde, cdef of 7
    language_subset.main(["--siblings", "0.7", str(source)])
    written = (tmp_path / "train-negatives.siblings.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["query"] for line in written] == ["q1"]
    language_subset.main(["--siblings", "0.4", "--group", "loose", str(source)])
    loose = (tmp_path / "train-negatives.loose.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["query"] for line in loose] == ["q1", "q4"]
    with pytest.raises(SystemExit):
        language_subset.main(["--siblings", "0", str(source)])
