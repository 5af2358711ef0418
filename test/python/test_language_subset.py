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
