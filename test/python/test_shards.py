# test_shards.py: the sharded SafeTensors layout against the `safetensors` package both ways. Shards
# that `uform shard` writes open with safe_open, each under the size limit, every tensor of the
# weight_map in its shard with the single file's values; a sharded layout that Python writes
# (safetensors.numpy.save_file per shard, an index by hand) opens with `uform info` and `uform
# encode` and embeds exactly as the single-file original does.

import json
import subprocess

import numpy as np
import pytest
import safetensors
import safetensors.numpy

import checkpoint_files
from conftest import init_checkpoint, python_checkpoint, run_cli as uform
from uform_ctypes import UFormError

INDEX = "model.safetensors.index.json"
LINES = "hello world\nGrüße, 世界\na\ntokenizer-free byte-level encoders\n"
LIMIT_MB = 0.2  # under the ~1.2 MiB of 128x2 so that it takes several shards; over most of its tensors


@pytest.fixture(scope="module")
def single(library, tmp_path_factory):
    return init_checkpoint(library, tmp_path_factory.mktemp("shards") / "single", "128x2", 4)


@pytest.fixture(scope="module")
def sharded(cli, single):
    directory = single.parent / "sharded"
    run = uform(cli, "shard", "--model", single, "--output", directory, "--max-shard-mb", LIMIT_MB)
    assert run.returncode == 0, run.stderr
    return directory, run.stderr


def raw_tensors(path):
    """name -> (dtype, shape, raw bytes), through the package's own parser (BF16 included, no torch)."""
    return {name: (entry["dtype"], tuple(entry["shape"]), bytes(entry["data"]))
            for name, entry in safetensors.deserialize(path.read_bytes())}


def test_our_shards_open_with_the_package(single, sharded):
    directory, _ = sharded
    index = json.loads((directory / INDEX).read_text())
    weight_map = index["weight_map"]
    shards = sorted(set(weight_map.values()))
    assert len(shards) >= 3 and shards[-1] == f"model-{len(shards):05d}-of-{len(shards):05d}.safetensors", shards
    original = raw_tensors(single / "model.safetensors")
    assert set(weight_map) == set(original)
    with safetensors.safe_open(str(single / "model.safetensors"), framework="numpy") as file:
        metadata = file.metadata()
    assert index["metadata"]["total_size"] == sum(len(raw) for _, _, raw in original.values())
    assert index["metadata"]["config"] == metadata["config"]
    for shard in shards:
        path = directory / shard
        oversized = [name for name in weight_map if weight_map[name] == shard and len(original[name][2]) > LIMIT_MB * 2**20]
        assert path.stat().st_size <= LIMIT_MB * 2**20 or len(oversized) == 1, shard
        with safetensors.safe_open(str(path), framework="numpy") as file:
            assert file.metadata() == metadata, shard  # every shard carries the checkpoint's __metadata__
            names = set(file.keys())
            assert names == {name for name, where in weight_map.items() if where == shard}, shard
            for name in names:
                if file.get_slice(name).get_dtype() == "F32":
                    np.testing.assert_array_equal(file.get_tensor(name), np.frombuffer(original[name][2], "<f4").reshape(original[name][1]))
        for name, entry in raw_tensors(path).items():
            assert entry == original[name], name  # dtype, shape and bytes, BF16 included


def test_oversized_tensor_warns(sharded):
    """128x2's gate_up is 1024 x 128 BF16 = 256 KiB, over 0.2 MiB: a shard of its own and a warning."""
    directory, stderr = sharded
    assert "warning: tensor 'blocks.0.gate_up'" in stderr and "blocks.1.gate_up" in stderr, stderr
    weight_map = json.loads((directory / INDEX).read_text())["weight_map"]
    alone = [name for name in weight_map if weight_map[name] == weight_map["blocks.0.gate_up"]]
    assert alone == ["blocks.0.gate_up"]


def test_shard_copies_readme_and_encodes_alike(cli, single, sharded):
    directory, _ = sharded
    assert (directory / "README.md").read_bytes() == (single / "README.md").read_bytes()
    assert not (directory / "model.safetensors").exists()
    for verb in (("info",), ("encode", "--width", "64")):
        a, b = uform(cli, *verb, "--model", single, stdin=LINES), uform(cli, *verb, "--model", directory, stdin=LINES)
        assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
        assert a.stdout == b.stdout, verb


def write_python_shards(directory, config, tensors, groups):
    """The layout by hand: `groups` lists of names, each saved by safetensors.numpy.save_file in Float32
    (exact: the values are on the BF16 grid, and our reader rounds F32 matrices to BF16)."""
    directory.mkdir(parents=True)
    metadata = checkpoint_files.config_metadata(config)
    weight_map, total = {}, 0
    for number, names in enumerate(groups, 1):
        shard = f"model-{number:05d}-of-{len(groups):05d}.safetensors"
        arrays = {name: np.ascontiguousarray(tensors[name], dtype=np.float32) for name in names}
        safetensors.numpy.save_file(arrays, str(directory / shard), metadata=metadata)
        weight_map.update({name: shard for name in names})
        total += sum(array.nbytes for array in arrays.values())
    (directory / INDEX).write_text(json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2))


@pytest.fixture(scope="module")
def python_layout(tmp_path_factory):
    root = tmp_path_factory.mktemp("python_shards")
    original = python_checkpoint(root / "single", 128, 2, 23, attention_gain=2.0)
    config = checkpoint_files.small_config(128, 2, 96)
    tensors = checkpoint_files.random_tensors(config, 23, 2.0)
    names = list(tensors)
    groups = [names[: len(names) // 3], names[len(names) // 3 : 2 * len(names) // 3], names[2 * len(names) // 3 :]]
    write_python_shards(root / "sharded", config, tensors, groups)
    return original, root / "sharded", groups


def test_python_shards_open_and_embed_alike(cli, python_layout):
    original, directory, _ = python_layout
    info = uform(cli, "info", "--model", directory)
    assert info.returncode == 0, info.stderr
    assert info.stdout == uform(cli, "info", "--model", original).stdout
    a, b = uform(cli, "encode", "--model", original, stdin=LINES), uform(cli, "encode", "--model", directory, stdin=LINES)
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    assert len(b.stdout.splitlines()) == 4 and a.stdout == b.stdout


def test_python_shards_faults_name_the_file(cli, python_layout, tmp_path):
    """A missing shard, and a weight_map entry leaving the folder, fail naming the file and the problem."""
    _, directory, groups = python_layout
    broken = tmp_path / "broken"
    subprocess.run(["cp", "-r", str(directory), str(broken)], check=True)
    (broken / "model-00002-of-00003.safetensors").unlink()
    run = uform(cli, "info", "--model", broken)
    assert run.returncode != 0 and "model-00002-of-00003.safetensors: cannot open" in run.stderr, run.stderr
    index = json.loads((directory / INDEX).read_text())
    index["weight_map"][groups[0][0]] = "../sharded/model-00001-of-00003.safetensors"
    (broken / INDEX).write_text(json.dumps(index))
    run = uform(cli, "encode", "--model", broken, stdin=LINES)
    assert run.returncode != 0 and INDEX in run.stderr and "not a file name" in run.stderr, run.stderr


def test_c_abi_writes_shards(library, tmp_path):
    """uform_model_save_sharded through the C ABI: shards under the limit that reopen; a zero limit and a
    folder holding model.safetensors (which readers prefer) are refused."""
    config = library.config_from_tier("64x2")
    with library.init(config, 2) as model:
        model.save_sharded(tmp_path / "sharded", 100_000)
        shards = sorted(path for path in (tmp_path / "sharded").iterdir() if path.suffix == ".safetensors")
        assert len(shards) >= 3 and all(path.stat().st_size <= 100_000 for path in shards)
        with library.open(tmp_path / "sharded") as opened:
            assert opened.has_head("pool") and opened.has_head("mlm")
        with pytest.raises(UFormError, match="shard limit of 0 bytes"):
            model.save_sharded(tmp_path / "zero", 0)
        model.save(tmp_path / "single")
        with pytest.raises(UFormError, match="readers prefer it"):
            model.save_sharded(tmp_path / "single", 100_000)
