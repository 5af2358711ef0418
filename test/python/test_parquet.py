# test_parquet.py: the C Parquet reader (src/data/parquet.c) against pyarrow. Files written by
# pyarrow with every codec, dictionary on and off, data pages v1 and v2, many row groups and pages
# must give exactly the records pyarrow reads back, byte for byte; malformed and unsupported files,
# written by hand with the small Thrift compact encoder below, must fail with a message naming the
# file and the problem. The reader runs as `test_parquet dump FILE` from the build (conftest.py).

import json
import random
import subprocess

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import built

CODECS = ("none", "snappy", "gzip", "zstd")


# --- running the reader ----------------------------------------------------------------------------

def dump(path, skip=False):
    """The records of `path` as dicts of bytes, and the summary; fails the test if the reader fails."""
    result = run(path, skip)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    decode = lambda value: value.encode("latin-1") if isinstance(value, str) else value  # noqa: E731
    records = [{key: decode(value) for key, value in line.items()} for line in lines[:-1]]
    return records, lines[-1]["summary"]


def run(path, skip=False):
    command = [str(built("test_parquet")), "dump", str(path)] + (["--skip"] if skip else [])
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def failure(path, skip=False):
    """The reader's status name and message for a file it must refuse."""
    result = run(path, skip)
    assert result.returncode == 1, f"expected a failure, got {result.stdout[:500]}"
    status, _, message = result.stderr.strip().partition(": ")
    assert message.startswith(f"{path}: "), message
    return status, message


# --- what the records should be --------------------------------------------------------------------

def as_bytes(value):
    return value.encode("utf-8") if isinstance(value, str) else value


def expected_records(table, skip=False):
    """The records docs/data.md promises for `table`: text or pairs by the columns present; a null
    or empty needed value (or an empty optional one) makes the row malformed."""
    columns = {name: [as_bytes(value) for value in values] for name, values in table.to_pydict().items()}
    pairs = "query" in columns
    roles = ("query", "positive", "negative", "lang") if pairs else ("text", "lang")
    required = ("query", "positive") if pairs else ("text",)
    records, problems = [], []
    for row in range(table.num_rows):
        values = {role: columns[role][row] for role in roles if role in columns}
        problem = next((role for role in roles if role in values and (
            (values[role] is None and role in required) or values[role] == b"")), None)
        if problem:
            problems.append(row + 1)
            continue
        record = {"row": row + 1}
        record.update({role: value for role, value in values.items() if value is not None})
        records.append(record)
    if problems and not skip:
        return None, problems
    return records, problems


def check_same(path, table, skip=False):
    records, problems = expected_records(table, skip)
    got, summary = dump(path, skip)
    assert got == records
    assert summary["rows"] == table.num_rows and summary["skipped"] == len(problems)
    assert summary["first_skipped_row"] == (problems[0] if problems else 0)


# --- tables ------------------------------------------------------------------------------------------

WORDS = ["hello", "world", "Grüße", "naïve", "日本語", "Привет", "مرحبا", "שלום", "🙂🚀", "a\x00b", "\x00", "tab\there",
         "quote\"back\\slash", "x" * 3000, "long " * 900]


def random_text(generator):
    return " ".join(generator.choice(WORDS) for _ in range(generator.randint(1, 6)))


def text_table(rows=500, seed=1):
    """Text records with repeats (so dictionaries matter), long values and an optional 'lang'."""
    generator = random.Random(seed)
    pool = [random_text(generator) for _ in range(rows // 3)]
    texts = [generator.choice(pool) if generator.random() < 0.5 else random_text(generator) for _ in range(rows)]
    languages = [generator.choice([None, "en", "de", "ja", "zh-Hant"]) for _ in range(rows)]
    ids = list(range(rows))
    return pa.table({"id": pa.array(ids, pa.int64()), "text": texts, "lang": languages,
                     "score": pa.array([generator.random() for _ in range(rows)], pa.float64())})


def pair_table(rows=400, seed=2):
    generator = random.Random(seed)
    return pa.table({
        "query": [random_text(generator) for _ in range(rows)],
        "positive": pa.array([random_text(generator).encode() for _ in range(rows)], pa.binary()),
        "negative": [random_text(generator) if generator.random() < 0.6 else None for _ in range(rows)],
        "lang": [generator.choice(["de", "fr", None]) for _ in range(rows)],
        "extra": pa.array([[1, 2]] * rows, pa.list_(pa.int32())),  # a nested column that is never read
    })


def write(path, table, **options):
    options.setdefault("row_group_size", 37)
    options.setdefault("data_page_size", 2048)
    options.setdefault("write_batch_size", 16)  # pages close between batches: several pages a chunk
    pq.write_table(table, path, **options)
    return path


# --- files pyarrow writes ------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("dictionary", [True, False])
@pytest.mark.parametrize("version", ["1.0", "2.0"])
def test_text_matrix(tmp_path, codec, dictionary, version):
    table = text_table()
    path = write(tmp_path / "text.parquet", table, compression=codec, use_dictionary=dictionary,
                 data_page_version=version)
    assert pq.ParquetFile(path).metadata.num_row_groups == 14
    check_same(path, table)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("dictionary", [True, False])
@pytest.mark.parametrize("version", ["1.0", "2.0"])
def test_pair_matrix(tmp_path, codec, dictionary, version):
    table = pair_table()
    path = write(tmp_path / "pairs.parquet", table, compression=codec, use_dictionary=dictionary,
                 data_page_version=version)
    check_same(path, table)
    records, _ = dump(path)
    assert any("negative" in record for record in records) and any("negative" not in record for record in records)


def test_one_row_group_default_options(tmp_path):
    """pyarrow's defaults: one row group, statistics, page index, the Arrow schema in the footer."""
    table = text_table(rows=3000, seed=5)
    path = tmp_path / "default.parquet"
    pq.write_table(table, path, write_page_index=True)
    check_same(path, table)


def test_dictionary_fallback(tmp_path):
    """A dictionary that outgrows its limit: the chunk goes on in PLAIN after dictionary pages."""
    table = pa.table({"text": [f"distinct value {i} " * 3 for i in range(3000)]})
    path = write(tmp_path / "fallback.parquet", table, row_group_size=3000, dictionary_pagesize_limit=4096)
    encodings = pq.ParquetFile(path).metadata.row_group(0).column(0).encodings
    assert "PLAIN" in encodings and any("DICTIONARY" in encoding for encoding in encodings), encodings
    check_same(path, table)


def test_binary_and_large_types(tmp_path):
    """Binary values that are not UTF-8, NUL bytes, large_string and dictionary-typed columns."""
    generator = random.Random(3)
    blobs = [bytes(generator.randrange(256) for _ in range(generator.randint(1, 300))) for _ in range(200)]
    blobs[0] = b"\x00" * 17
    for name, array in [("binary", pa.array(blobs, pa.binary())), ("large_binary", pa.array(blobs, pa.large_binary())),
                        ("large_string", pa.array([random_text(generator) for _ in range(200)], pa.large_string()))]:
        table = pa.table({"text": array, "lang": pa.array(["de", "fr"] * 100).dictionary_encode()})
        path = write(tmp_path / f"{name}.parquet", table, compression="zstd")
        check_same(path, table)


def test_required_columns(tmp_path):
    """Non-nullable fields: no definition levels in the pages."""
    schema = pa.schema([pa.field("query", pa.string(), nullable=False), pa.field("positive", pa.string(), nullable=False)])
    table = pa.table({"query": ["a", "b", "c"] * 50, "positive": ["x", "yy", "zzz"] * 50}, schema=schema)
    for version in ("1.0", "2.0"):
        path = write(tmp_path / f"required_{version}.parquet", table, data_page_version=version)
        assert pq.ParquetFile(path).schema.column(0).max_definition_level == 0
        check_same(path, table)


@pytest.mark.parametrize("version", ["1.0", "2.0"])
def test_checksums(tmp_path, version):
    table = text_table(rows=200)
    path = write(tmp_path / "checksums.parquet", table, write_page_checksum=True, compression="snappy",
                 data_page_version=version)
    check_same(path, table)
    data = bytearray(path.read_bytes())
    chunk = pq.ParquetFile(path).metadata.row_group(0).column(1)  # 'text'
    start = chunk.dictionary_page_offset or chunk.data_page_offset
    data[start + chunk.total_compressed_size - 3] ^= 0x10  # inside the last page's data
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(bytes(data))
    status, message = failure(broken)
    assert status == "format" and "the page's checksum does not match its bytes" in message, message


def test_same_as_jsonl(tmp_path):
    """The same records as JSONL and as Parquet give the same dump: one record model, two formats."""
    table = pair_table(rows=100, seed=9).drop_columns(["extra"])
    parquet_path = write(tmp_path / "pairs.parquet", table)
    lines = []
    for row in table.to_pylist():
        record = {"query": row["query"], "positives": [row["positive"].decode()]}
        if row["negative"] is not None:
            record["negatives"] = [row["negative"]]
        if row["lang"] is not None:
            record["lang"] = row["lang"]
        lines.append(json.dumps(record))
    jsonl_path = tmp_path / "pairs.jsonl"
    jsonl_path.write_text("\n".join(lines) + "\n")
    assert run(parquet_path).stdout == run(jsonl_path).stdout


# --- malformed rows ------------------------------------------------------------------------------------

def test_null_and_empty_values(tmp_path):
    table = pa.table({"text": ["a", None, "b", "", "c"] * 20, "lang": ["en", "en", "", "en", None] * 20})
    path = write(tmp_path / "nulls.parquet", table, row_group_size=7)
    status, message = failure(path)
    assert status == "format" and message.endswith("row group 0, row 1 (file row 2): column 'text' is null"), message
    check_same(path, table, skip=True)
    _, summary = dump(path, skip=True)
    assert summary["skipped"] == 60 and summary["first_problem"] == "row group 0, row 1: column 'text' is null"

    pairs = pa.table({"query": ["q"] * 9, "positive": ["p", None, "p"] * 3, "negative": ["n", "n", ""] * 3})
    path = write(tmp_path / "pairs.parquet", pairs, row_group_size=4)
    status, message = failure(path)
    assert message.endswith("row group 0, row 1 (file row 2): column 'positive' is null"), message
    check_same(path, pairs, skip=True)


# --- columns the reader refuses ------------------------------------------------------------------------

@pytest.mark.parametrize("columns, status, fragment", [
    ({"text": ["a"], "query": ["q"], "positive": ["p"]}, "format", "has both a 'text' and a 'query' column"),
    ({"body": ["a"], "positives": [["p"]]}, "format", "needs a column 'text' (masked modelling) or 'query' and 'positive' (pairs); it has 'body', 'positives'"),
    ({"query": ["q"], "positives": [["p"]]}, "format", "has a 'query' column but no 'positive' (or 'positive_image') column"),
    ({"text": pa.array([1], pa.int32())}, "unsupported", "column 'text' has physical type INT32; only BYTE_ARRAY"),
    ({"text": pa.array([["a"]], pa.list_(pa.string()))}, "unsupported", "column 'text' is nested"),
    ({"query": ["q"], "positive": ["p"], "lang": pa.array([1.5])}, "unsupported", "column 'lang' has physical type DOUBLE"),
])
def test_refused_columns(tmp_path, columns, status, fragment):
    path = write(tmp_path / "columns.parquet", pa.table(columns))
    got_status, message = failure(path)
    assert got_status == status and fragment in message, message


@pytest.mark.parametrize("codec, name", [("brotli", "BROTLI"), ("lz4", "LZ4_RAW")])
def test_unsupported_codec(tmp_path, codec, name):
    path = write(tmp_path / "codec.parquet", text_table(rows=50), compression=codec)
    status, message = failure(path)
    assert status == "unsupported" and f"codec {name} is not supported" in message and "row group 0, column 'text'" in message


@pytest.mark.parametrize("encoding", ["DELTA_BYTE_ARRAY", "DELTA_LENGTH_BYTE_ARRAY"])
def test_unsupported_encoding(tmp_path, encoding):
    path = write(tmp_path / "encoding.parquet", text_table(rows=50), use_dictionary=False,
                 column_encoding={"text": encoding, "lang": "PLAIN"})
    status, message = failure(path)
    assert status == "unsupported" and f"encoding {encoding} is not supported" in message, message


# --- damaged files -----------------------------------------------------------------------------------------

def test_truncated(tmp_path):
    data = write(tmp_path / "whole.parquet", text_table(rows=100)).read_bytes()
    for cut in (0, 5, 11, len(data) // 2, len(data) - 9, len(data) - 1):
        path = tmp_path / f"cut_{cut}.parquet"
        path.write_bytes(data[:cut])
        status, message = failure(path)
        assert status == "format", message
        assert ("too few" in message or "magic PAR1" in message or "cannot fit" in message), message


def test_corrupt_footer(tmp_path):
    data = bytearray(write(tmp_path / "whole.parquet", text_table(rows=100)).read_bytes())
    footer_length = int.from_bytes(data[-8:-4], "little")
    footer = len(data) - 8 - footer_length
    data[footer:footer + 40] = b"\xff" * 40
    path = tmp_path / "footer.parquet"
    path.write_bytes(bytes(data))
    status, message = failure(path)
    assert status == "format" and ": footer " in message, message

    data[-8:-4] = (len(data)).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    assert failure(path) == ("format", f"{path}: a footer of {len(data)} bytes cannot fit a file of {len(data)} (truncated?)")


def test_encrypted_footer(tmp_path):
    path = tmp_path / "encrypted.parquet"
    path.write_bytes(b"PAR1" + b"\0" * 20 + b"PARE")
    status, message = failure(path)
    assert status == "unsupported" and "encrypted footer" in message


# --- files written by hand: a minimal Thrift compact encoder --------------------------------------------

I32, I64, BINARY, LIST, STRUCT = 5, 6, 8, 9, 12


def varint(number):
    out = bytearray()
    while True:
        byte, number = number & 0x7F, number >> 7
        out.append(byte | (0x80 if number else 0))
        if not number:
            return bytes(out)


def zigzag(number):
    return (number << 1) ^ (number >> 63)


def encode(kind, value):
    if kind in (I32, I64):
        return varint(zigzag(value))
    if kind == BINARY:
        return varint(len(value)) + value
    if kind == LIST:
        element, items = value
        header = bytes([len(items) << 4 | element]) if len(items) < 15 else bytes([0xF0 | element]) + varint(len(items))
        return header + b"".join(encode(element, item) for item in items)
    return value  # a struct, already encoded


def struct(*fields):
    """A Thrift compact struct of (field id, type, value), ids ascending."""
    out, last = bytearray(), 0
    for field, kind, value in fields:
        delta = field - last
        out += bytes([delta << 4 | kind]) if 0 < delta <= 15 else bytes([kind]) + varint(zigzag(field))
        out += encode(kind, value)
        last = field
    return bytes(out + b"\x00")


def handmade(values=(b"a", b"bc"), page_values=None, compressed=None, uncompressed=None, codec=0, physical=6,
             rows=None, children=1, encoding=0, footer_extra=(), body=None):
    """One required column 'text' in one row group and one PLAIN data page v1, every field overridable."""
    body = body if body is not None else b"".join(len(value).to_bytes(4, "little") + value for value in values)
    rows = len(values) if rows is None else rows
    page_header = struct((1, I32, 0), (2, I32, len(body) if uncompressed is None else uncompressed),
                         (3, I32, len(body) if compressed is None else compressed),
                         (5, STRUCT, struct((1, I32, len(values) if page_values is None else page_values),
                                            (2, I32, encoding), (3, I32, 3), (4, I32, 3))))
    chunk = page_header + body
    metadata = struct((1, I32, physical), (2, LIST, (I32, [encoding])), (3, LIST, (BINARY, [b"text"])), (4, I32, codec),
                      (5, I64, rows), (6, I64, len(chunk)), (7, I64, len(chunk)), (9, I64, 4))
    column = struct((2, I64, 4), (3, STRUCT, metadata))
    group = struct((1, LIST, (STRUCT, [column])), (2, I64, len(chunk)), (3, I64, rows))
    schema = [struct((4, BINARY, b"schema"), (5, I32, children)), struct((1, I32, physical), (3, I32, 0), (4, BINARY, b"text"))]
    footer = struct((1, I32, 1), (2, LIST, (STRUCT, schema)), (3, I64, rows), (4, LIST, (STRUCT, [group])), *footer_extra)
    return b"PAR1" + chunk + footer + len(footer).to_bytes(4, "little") + b"PAR1"


def test_handmade_file_reads(tmp_path):
    path = tmp_path / "handmade.parquet"
    path.write_bytes(handmade())
    assert dump(path)[0] == [{"row": 1, "text": b"a"}, {"row": 2, "text": b"bc"}]


def nested_structs(depth):
    inner = b"\x00"
    for _ in range(depth):
        inner = bytes([0x1C]) + inner + b"\x00"  # field 1, a struct holding the previous one
    return inner


@pytest.mark.parametrize("options, status, fragment", [
    ({"compressed": 2**31 - 1}, "format", "page at byte 4, a page of 2147483647 bytes (11 uncompressed), but the chunk has 11 bytes left"),
    ({"uncompressed": 2**31 - 1, "codec": 1}, "format", "11 compressed bytes cannot hold the 2147483647 the page claims"),
    ({"uncompressed": 999}, "format", "an uncompressed page of 11 bytes claims 999"),
    ({"page_values": 1000}, "format", "a page of 1000 values, but 2 rows of the row group are left"),
    ({"rows": 3}, "format", "the chunk ends after 2 of 3 values"),
    ({"physical": 1}, "unsupported", "physical type INT32"),
    ({"physical": 9}, "unsupported", "physical type an unknown type"),
    ({"codec": 5}, "unsupported", "codec LZ4 is not supported"),
    ({"codec": 99}, "unsupported", "codec an unknown codec is not supported"),
    ({"encoding": 7}, "unsupported", "encoding DELTA_BYTE_ARRAY is not supported"),
    ({"encoding": 8}, "format", "a dictionary-encoded page without a dictionary page"),
    ({"children": 5}, "format", "schema: an element claims 5 children of 1 elements left"),
    ({"children": 0}, "format", "schema: 2 elements, but the tree holds 1"),
    ({"body": b"\xe8\x03\x00\x00ab"}, "format", "value 0 of 1000 bytes runs past the page's end"),
    ({"body": b"\x01\x00"}, "format", "value 0's length runs past the page's end"),
    ({"footer_extra": [(20, STRUCT, nested_structs(100))]}, "format", "footer nested too deeply"),
    ({"footer_extra": [(20, LIST, (STRUCT, []))], "rows": 2**40}, "unsupported", "1099511627776 rows; a source holds at most 4294967295"),
])
def test_handmade_malformed(tmp_path, options, status, fragment):
    path = tmp_path / "bad.parquet"
    path.write_bytes(handmade(**options))
    got_status, message = failure(path)
    assert got_status == status and fragment in message, message


def test_list_count_beyond_the_footer(tmp_path):
    data = bytearray(handmade())
    footer_length = int.from_bytes(data[-8:-4], "little")
    footer = len(data) - 8 - footer_length
    schema_list = data.index(bytes([0x19, 0x2C]), footer)  # field 2, a list of 2 structs
    data[schema_list + 1:schema_list + 2] = bytes([0xFC])  # a list of "varint" structs
    data[schema_list + 2:schema_list + 2] = varint(10**6)
    data[-8:-4] = (footer_length + len(varint(10**6))).to_bytes(4, "little")
    path = tmp_path / "list.parquet"
    path.write_bytes(bytes(data))
    status, message = failure(path)
    assert status == "format" and "a list longer than the bytes left" in message, message
