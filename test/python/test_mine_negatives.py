# test_mine_negatives.py: scripts/data/mine_negatives.py on small corpora written here. The mined
# negative of every record must be the first positive of its nearest valid neighbour by a brute-force
# float64 TF-IDF written below (not the script's), and a planted broken scorer (idf off) must fail
# that same check; negatives never repeat their record's query or positives (case-folded); the
# output keeps every record, in order, with its other keys; two runs are byte-identical; a
# malformed line fails naming its file and line.

import json
import math
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "data"))
import mine_negatives  # noqa: E402

MASK64 = (1 << 64) - 1

# One lang group where the neighbour is plain ("remove selected item(s)", "open the file(s)"), with
# traps: a neighbour whose positive is this record's positive in other case, one with the same
# query in other case, and filler sharing only " the " so that an idf-free scorer goes astray.
ENGLISH = [
    ("open the file", "Datei öffnen"),
    ("open the files", "DATEI ÖFFNEN"),  # its positive is record 0's, case-folded: never each other's negative
    ("Open The File", "die Datei öffnen"),  # record 0's query in other case: skipped both ways
    ("close the window", "Fenster schließen"),
    ("close the windows", "Fenster alle schließen"),
    ("remove selected item", "ausgewähltes Element entfernen"),
    ("remove selected items", "ausgewählte Elemente entfernen"),
    ("save the document as", "Dokument speichern unter"),
    ("print the document", "Dokument drucken"),
    ("the the the", "die die die"),
    ("in the the", "in der der"),
    ("the cat the dog", "die Katze der Hund"),
    ("to the end of the the", "bis zum Ende"),
    ("quit", "beenden"),
    ("ab", "zwei Bytes"),  # shorter than 3 bytes: one feature, itself
    # "qzx the the" is nearest "qzx t" by its rare n-grams, "the the the the" by all n-grams alike
    ("qzx the the", "Probe eins"),
    ("qzx t", "Probe zwei"),
    ("the the the the", "Probe drei"),
    ("the cat", "die Katze"),
    ("the dog", "der Hund"),
    ("the sun", "die Sonne"),
    ("the end", "das Ende"),
]
GERMAN = [("Datei öffnen", "open file"), ("Dateien öffnen", "open files"), ("Fenster schließen", "close window")]


def fnv(data):
    value = 1469598103934665603 ^ len(data)
    for byte in data:
        value = ((value ^ byte) * 1099511628211) & MASK64
    value ^= value >> 29
    return value & ((1 << 20) - 1)


def features(text):
    data = text.encode("utf-8")
    if len(data) < 3:
        return {fnv(data): 1}
    counts = {}
    for length in range(3, 6):
        for start in range(len(data) - length + 1):
            key = fnv(data[start:start + length])
            counts[key] = counts.get(key, 0) + 1
    return counts


def brute_vectors(texts, use_idf=True):
    grams = [features(text) for text in texts]
    frequency = {}
    for counts in grams:
        for key in counts:
            frequency[key] = frequency.get(key, 0) + 1
    vectors = []
    for counts in grams:
        vector = {key: (1 + math.log(tf)) * ((math.log((1 + len(texts)) / (1 + frequency[key])) + 1) if use_idf else 1.0)
                  for key, tf in counts.items()}
        norm = math.sqrt(sum(weight * weight for weight in vector.values()))
        vectors.append({key: weight / norm for key, weight in vector.items()})
    return vectors


def expected_negatives(records, use_idf=True):
    """{row: first positive of the nearest valid other row of its lang group} by brute force."""
    expected = {}
    for lang in {record.get("lang") for record in records}:
        rows = [row for row, record in enumerate(records) if record.get("lang") == lang]
        vectors = brute_vectors([records[row]["query"] for row in rows], use_idf)
        for i, row in enumerate(rows):
            own = {records[row]["query"].casefold()} | {text.casefold() for text in records[row]["positives"]}
            best = None
            for j, other in enumerate(rows):
                negative = records[other]["positives"][0]
                if other == row or records[other]["query"].casefold() == records[row]["query"].casefold() \
                        or negative.casefold() in own:
                    continue
                score = sum(weight * vectors[j].get(key, 0.0) for key, weight in vectors[i].items())
                if score > 0 and (best is None or score > best[0] + 1e-12):
                    best = (score, negative)
            if best:
                expected[row] = best[1]
    return expected


def write_corpus(folder, records, name="toy"):
    path = folder / name / "train.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records), encoding="utf-8")
    return path


def toy_records():
    records = [{"query": q, "positives": [p], "lang": "en", "id": i} for i, (q, p) in enumerate(ENGLISH)]
    records += [{"query": q, "positives": [p], "lang": "de"} for q, p in GERMAN]
    records.append({"query": "open the file now", "positives": ["jetzt öffnen"]})  # no lang: a group of one
    return records


def mine(tmp_path, records, *flags, output="out"):
    write_corpus(tmp_path / "data", records)
    mine_negatives.main(["toy", "--data", str(tmp_path / "data"), "--output", str(tmp_path / output),
                         "--workers", "1", "--quiet", *flags])
    path = tmp_path / output / "toy" / "train-negatives.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()], path


def mismatches(records, mined, use_idf=True):
    expected = expected_negatives(records, use_idf)
    got = {row: record["negatives"][0] for row, record in enumerate(mined) if record.get("negatives")}
    return {row: (got.get(row), expected.get(row)) for row in set(expected) | set(got) if got.get(row) != expected.get(row)}


def test_nearest_by_brute_force(tmp_path):
    records = toy_records()
    mined, _ = mine(tmp_path, records)
    assert mismatches(records, mined) == {}
    by_query = {record["query"]: record.get("negatives") for record in mined}
    assert by_query["remove selected item"] == ["ausgewählte Elemente entfernen"]
    assert by_query["remove selected items"] == ["ausgewähltes Element entfernen"]
    assert by_query["close the window"] == ["Fenster alle schließen"]
    assert by_query["open the file now"] is None  # alone in its group
    assert by_query["Datei öffnen"] == ["open files"]  # groups apart: German queries take German neighbours
    assert by_query["qzx the the"] == ["Probe zwei"]


def test_planted_idf_off_fails_the_check(tmp_path, monkeypatch):
    records = toy_records()
    assert expected_negatives(records, use_idf=False) != expected_negatives(records)  # the plant is visible
    monkeypatch.setattr(mine_negatives, "inverse_document_frequency", lambda frequency, documents: frequency * 0.0 + 1.0)
    mined, _ = mine(tmp_path, records)
    assert next(r for r in mined if r["query"] == "qzx the the")["negatives"] == ["Probe drei"]
    assert mismatches(records, mined) != {}
    assert mismatches(records, mined, use_idf=False) == {}  # it is the idf-free scorer, faithfully


def test_negatives_never_repeat_own_texts_and_records_keep_order(tmp_path):
    records = toy_records()
    mined, _ = mine(tmp_path, records, "--negatives", "3")
    assert len(mined) == len(records)
    assert sum(bool(record.get("negatives")) for record in mined) >= len(ENGLISH) - 2  # not "quit", "ab"
    for record, original in zip(mined, records):
        negatives = record.pop("negatives", [])
        assert record == original
        own = {original["query"].casefold()} | {text.casefold() for text in original["positives"]}
        assert not own & {text.casefold() for text in negatives}
        assert len({text.casefold() for text in negatives}) == len(negatives) <= 3


def test_fraction_and_manifest(tmp_path):
    records = toy_records()
    mined, path = mine(tmp_path, records, "--fraction", "0.5", "--seed", "3", "--verify", "4")
    manifest = json.loads((path.parent / "negatives-manifest.json").read_text(encoding="utf-8"))
    assert manifest["records"] == len(records)
    assert manifest["mined"] == sum(bool(record.get("negatives")) for record in mined) <= round(0.5 * len(records))
    assert manifest["parameters"]["fraction"] == 0.5 and manifest["verified"]["sampled"] >= 1
    assert manifest["output"]["sha256"] == __import__("hashlib").sha256(path.read_bytes()).hexdigest()


def test_two_runs_are_byte_identical(tmp_path):
    records = toy_records()
    _, first = mine(tmp_path, records, "--negatives", "2", "--fraction", "0.7", output="a")
    _, second = mine(tmp_path, records, "--negatives", "2", "--fraction", "0.7", output="b")
    assert first.read_bytes() == second.read_bytes()
    assert not list(first.parent.glob(".*.tmp"))  # the temporary file was renamed


@pytest.mark.parametrize("line, problem", [
    ("not json", "Expecting value"),
    ('{"query": "a", "positives": []}', "'positives'"),
    ('{"query": "", "positives": ["x"]}', "'query'"),
    ('{"query": "a", "positives": ["x"], "query": "b"}', "duplicate key"),
])
def test_malformed_line_names_file_and_line(tmp_path, line, problem):
    path = write_corpus(tmp_path / "data", toy_records()[:2])
    path.write_text(path.read_text(encoding="utf-8") + line + "\n", encoding="utf-8")
    with pytest.raises(SystemExit) as failure:
        mine_negatives.main(["toy", "--data", str(tmp_path / "data"), "--workers", "1", "--quiet"])
    assert f"{path}:3:" in str(failure.value) and problem in str(failure.value)
    assert not (path.parent / "train-negatives.jsonl").exists()
