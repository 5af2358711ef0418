# test_default_model.py: the shipped models/default. Its layout is the sharded one within the
# budget (every file at most 16 MiB, at most 32 MiB in all), every shard opens with the safetensors
# package and holds what the index says; and on the held-out demo/ corpus (scripts/search_demo.py,
# the README's main job) it beats TF-IDF on the text pairs and chance on the pictures. A planted
# copy with its pool projection zeroed must fail the same recall check.

import json
import pathlib
import re
import shutil
import struct
import subprocess
import sys

import pytest

from conftest import BUILD

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "default"


def demo_recall(model):
    """{(set, method, width): R@1} printed by search_demo.py for a model."""
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "search_demo.py"), "--model", str(model), "--build", str(BUILD)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = {}
    for line in result.stdout.splitlines():
        match = re.match(r"\| (texts|pictures) \| (TF-IDF|chance|uform) \| (\S+) \| ([0-9.]+) \| ([0-9.]+) \|", line)
        if match:
            rows[(match[1], match[2], match[3])] = float(match[4])
    return rows


def test_layout_within_the_budget():
    files = sorted(MODEL.glob("model-*-of-*.safetensors"))
    assert files and not (MODEL / "model.safetensors").exists()
    assert all(path.stat().st_size <= 16 * 2**20 for path in files)
    assert sum(path.stat().st_size for path in files) <= 32 * 2**20
    index = json.loads((MODEL / "model.safetensors.index.json").read_text())
    from safetensors import safe_open
    found = {}
    for path in files:
        with safe_open(str(path), framework="numpy") as shard:  # BF16 tensors: names only, no numpy dtype needed
            for name in shard.keys():
                found[name] = path.name
    assert found == index["weight_map"]
    assert index["metadata"]["total_size"] == sum(path.stat().st_size for path in files) - sum(
        8 + struct.unpack("<Q", path.read_bytes()[:8])[0] for path in files)
    assert (MODEL / "README.md").is_file() and "Rebuilding it" in (MODEL / "README.md").read_text()


def test_beats_tfidf_and_chance_on_the_demo():
    rows = demo_recall(MODEL)
    widest = max(int(width) for kind, method, width in rows if method == "uform")
    assert rows[("texts", "uform", str(widest))] > rows[("texts", "TF-IDF", "-")], rows
    assert rows[("pictures", "uform", str(widest))] >= 2 * rows[("pictures", "chance", "-")], rows


def test_planted_zeroed_pool_fails_the_check(tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(MODEL, broken)
    index = json.loads((broken / "model.safetensors.index.json").read_text())
    shard = broken / index["weight_map"]["pool.proj"]
    data = bytearray(shard.read_bytes())
    header_size = struct.unpack("<Q", data[:8])[0]
    begin, end = json.loads(data[8:8 + header_size])["pool.proj"]["data_offsets"]
    data[8 + header_size + begin:8 + header_size + end] = bytes(end - begin)
    shard.write_bytes(bytes(data))
    rows = demo_recall(broken)
    widest = max(int(width) for kind, method, width in rows if method == "uform")
    assert rows[("texts", "uform", str(widest))] <= rows[("texts", "TF-IDF", "-")], rows
