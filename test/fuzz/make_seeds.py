# make_seeds.py: each fuzz target's seed corpus, small valid inputs (and a few near misses):
# parquet: Parquet files written by pyarrow (each codec, dictionary on and off, data pages v1 and v2,
# several row groups, nulls, text and pair records); safetensors: files laid out as
# uform_safetensors_write lays them; config: the configuration JSON uform_config_json_ writes;
# jsonl: text and pair records as docs/data.md describes them; mixture: the files of mixtures/ with
# their sources pointed at files in test/fuzz/, where the fuzzer's mixture lives; av: short audio
# (WAV, FLAC, MP3, Ogg Vorbis and Opus) and video (WebM VP8, MP4 H.264, Y4M) files written by the
# ffmpeg CLI, each behind the byte that picks its decoder (0 audio, 1 video).
# Usage: python3 test/fuzz/make_seeds.py TARGET FOLDER

import itertools
import json
import pathlib
import struct
import sys

root = pathlib.Path(__file__).resolve().parents[2]


def parquet(folder):
    import pyarrow as pa  # only this target needs it
    import pyarrow.parquet as pq
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


def config_json(tier, width, depth, learning_rate):
    """The configuration uform_config_json_ writes, widths from 64 doubling below the width, then it."""
    widths = [64 << i for i in range(8) if 64 << i < width][:7] + [width]
    return {"tier": tier, "width": width, "depth": depth, "heads": width // 64, "embedding_widths": widths,
            "colbert_width": 128, "columns": 4096, "vocabulary": 258, "learning_rate": learning_rate,
            "modalities": "text"}


def compact(value):
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def safetensors_file(tensors, metadata=None):
    """A file as uform_safetensors_write lays it out: tensors is [(name, dtype, shape, data)]."""
    header, offset = {}, 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = compact(header).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-aligned
    return struct.pack("<Q", len(text)) + text + b"".join(data for _, _, _, data in tensors)


def safetensors(folder):
    bf16 = lambda count: struct.pack(f"<{count}H", *((0x3f80 + i) & 0xffff for i in range(count)))
    f32 = lambda count: struct.pack(f"<{count}f", *(0.5 * i for i in range(count)))
    config = compact(config_json("64x1", 64, 1, 0.0005))
    files = {
        "model": safetensors_file([("embed.bytes", "BF16", [4, 3], bf16(12)), ("final_norm", "F32", [3], f32(3)),
                                   ("blocks.0.attn_norm", "F32", [3], f32(3))],
                                  {"format": "pt", "config": config, "recipe": "seed"}),
        "ranks": safetensors_file([("scalar", "F32", [], f32(1)), ("four", "BF16", [1, 2, 1, 2], bf16(4)),
                                   ("empty", "F32", [0, 5], b""), ("vector", "BF16", [2], bf16(2))]),
        "plain": safetensors_file([("only", "F32", [2, 2], f32(4))]),
        "nothing": safetensors_file([], {}),
    }
    # Offsets out of header order, with a gap, as another writer may lay them out.
    header = compact({"b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]},
                      "a": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}}).encode()
    files["unordered"] = struct.pack("<Q", len(header)) + header + bf16(2) + b"\0" * 4 + f32(1)
    for name, data in files.items():
        (folder / f"{name}.safetensors").write_bytes(data)


def config(folder):
    tiers = [("tiny", 512, 12, 5e-4), ("small", 1024, 12, 2e-4), ("medium", 1024, 24, 2e-4),
             ("large", 2048, 24, 1e-4), ("xl", 2048, 48, 1e-4), ("128x2", 128, 2, 5e-4), ("64x1", 64, 1, 5e-4),
             ("8192x1", 8192, 1, 5e-4)]
    for tier, width, depth, learning_rate in tiers:
        (folder / f"{tier}.json").write_text(compact(config_json(tier, width, depth, learning_rate)))
    short = config_json("custom", 256, 3, 1e-3)
    del short["learning_rate"], short["modalities"], short["vocabulary"]
    short["embedding_widths"] = [32, 256]
    (folder / "custom.json").write_text(json.dumps(short, indent=2))


def jsonl(folder):
    lines = {
        "text": [{"text": "hello"}, {"text": "w\u00f6rld", "lang": "de"}, {"text": "a\u0000b"},
                 {"text": "\u65e5\u672c\u8a9e", "lang": "ja", "catalogue": "po"}],
        "pairs": [{"query": "q", "positives": ["p1", "p2\U0001f600"], "negatives": ["n1"], "id": 7},
                  {"query": "only", "positives": ["one"]}, {"query": "q2", "positives": ["a", "b", "c"],
                                                            "negatives": [], "lang": "fr"}],
        "images": [{"query": "a red fox", "positives": [{"image": "img/fox.png"}]}, {"image": "img/a.png"},
                   {"query": {"image": "/abs/b.webp"}, "positives": ["caption"], "negatives": [{"image": "c.jpg"}]},
                   {"query": "q", "positives": [{"image": "x.png", "alt": "y"}]}, {"image": "", "text": "t"}],
    }
    for name, records in lines.items():
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    mixed = ('\ufeff{"text": "first"}\r\n\n   \n{"text": "esc\\"aped\\\\ \\u00e9 \\ud83d\\ude00"}\n'
             '{"text": ""}\nnot json\n[1, 2]\n{"text": "t", "query": "q"}\n{"query": "q", "positives": [3]}\n'
             '{"query": "q", "positives": ["p"], "negatives": "n"}\n{"text": "a", "text": "b"}\n'
             '{"text": "x", "lang": ""}\n{"text": "last, no newline"}')
    (folder / "mixed.jsonl").write_text(mixed)


def mixture(folder):
    # Relative sources resolve beside the fuzzer's mixture, test/fuzz/fuzz.json, to files that exist.
    readable = ["run.sh", "make_seeds.py", "fuzz_jsonl.c", "fuzz_mixture.c", "/dev/null", "../../mixtures/base.json"]
    for path in sorted((root / "mixtures").glob("*.json")):
        value = json.loads(path.read_text())
        for index, source in enumerate(value["sources"]):
            source["path"] = readable[index % len(readable)]
        (folder / path.name).write_text(json.dumps(value, indent=2))
    small = {"objective": "mlm", "mask_ratio": 0.3, "mean_span": 2.5, "columns": 1,
             "sources": [{"path": "run.sh", "skip_malformed": True, "name": "script"}, {"path": "/dev/null"}]}
    (folder / "small.json").write_text(compact(small))
    missing = {"objective": "rerank", "sources": [{"path": "no-such-file.jsonl", "weight": 2}]}
    (folder / "missing.json").write_text(compact(missing))


def av(folder):
    import subprocess  # only this target needs the ffmpeg CLI
    tone = ["-f", "lavfi", "-i", "aevalsrc=0.5*sin(2*PI*440*t)|0.25*sin(2*PI*1000*t):s=22050:d=0.3:c=stereo"]
    clip = ["-f", "lavfi", "-i", "testsrc=s=32x32:r=10:d=0.4", "-pix_fmt", "yuv420p"]
    files = {"tone.wav": (0, tone + ["-c:a", "pcm_s16le"]), "tone.flac": (0, tone + ["-c:a", "flac"]),
             "tone.mp3": (0, tone + ["-c:a", "libmp3lame", "-b:a", "32k"]),
             "tone_vorbis.ogg": (0, tone + ["-c:a", "libvorbis", "-q:a", "0"]),
             "tone_opus.ogg": (0, tone + ["-c:a", "libopus", "-b:a", "16k"]),
             "clip.webm": (1, clip + ["-c:v", "libvpx", "-b:v", "100k"]),
             "clip.mp4": (1, clip + ["-c:v", "libx264", "-preset", "ultrafast"]), "clip.y4m": (1, clip)}
    for name, (decoder, arguments) in files.items():
        path = folder / ("raw_" + name)
        subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", *arguments, str(path)], check=True)
        (folder / name).write_bytes(bytes([decoder]) + path.read_bytes())
        path.unlink()


def main(target, folder):
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    {"parquet": parquet, "safetensors": safetensors, "config": config, "jsonl": jsonl, "mixture": mixture,
     "av": av}[target](folder)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
