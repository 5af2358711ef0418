# make_seeds.py: the fuzzer's seed corpus, small Parquet files written by pyarrow: each codec,
# dictionary on and off, data pages v1 and v2, several row groups, nulls, text and pair records.
# Usage: python3 test/fuzz/make_seeds.py FOLDER

import itertools
import pathlib
import sys

import pyarrow as pa
import pyarrow.parquet as pq


def main(folder):
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    text = pa.table({"text": ["hello", "w\u00f6rld", None, "a\x00b", "", "hello", "\u65e5\u672c"],
                     "lang": ["en", None, "de", "xx", "en", "en", "ja"]})
    pairs = pa.table({"query": ["q1", "q2", "q3", "q4"],
                      "positive": pa.array([b"p1", b"\xff\x00p", b"p3", None], pa.binary()),
                      "negative": [None, "n2", "n3", "n4"], "id": pa.array([1, 2, 3, 4], pa.int32())})
    required = pa.table({"text": pa.array(["r1", "r2", "r3"], pa.string())},
                        schema=pa.schema([pa.field("text", pa.string(), nullable=False)]))
    tables = {"text": text, "pairs": pairs, "required": required}
    for (name, table), codec, dictionary, version in itertools.product(
            tables.items(), ("none", "snappy", "gzip", "zstd"), (True, False), ("1.0", "2.0")):
        path = folder / f"{name}_{codec}_{'dictionary' if dictionary else 'plain'}_v{version[0]}.parquet"
        pq.write_table(table, path, compression=codec, use_dictionary=dictionary, data_page_version=version,
                       row_group_size=3, store_schema=False, write_statistics=False,
                       write_page_checksum=codec == "snappy")


if __name__ == "__main__":
    main(sys.argv[1])
