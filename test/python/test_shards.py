# test_shards.py: the sharded SafeTensors layout against the `safetensors` package both ways. Shards
# that `uform shard` writes open with safe_open, each under the size limit, every tensor of the
# weight_map in its shard with the single file's values; a sharded layout that Python writes
# (safetensors.numpy.save_file per shard, an index by hand) opens with `uform info` and `uform
# encode` and embeds exactly as the single-file original does. `uform shard --store e4m3` writes the
# blocks' matrices as F8_E4M3 codes with Float32 row scales (the E4M3 precision's rounding, checked
# against the reference, with a doubled-scale control), which read back as BF16 exactly as specified.

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


# ---------------------------------------------------------------------------------------------
# E4M3 storage: `uform shard --store e4m3`
# ---------------------------------------------------------------------------------------------

MATRICES = (".qkv", ".out", ".gate_up", ".down")  # the blocks' four, the ones the E4M3 precision runs narrow


def e4m3_table():
    """The 256 codes' values from the format's definition (E4M3 FN): a sign, 4 exponent bits with bias 7,
    3 mantissa bits, subnormals at exponent 0, and 0x7F / 0xFF NaN."""
    values = np.empty(256)
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        exponent, mantissa = (code >> 3) & 15, code & 7
        if exponent == 15 and mantissa == 7:
            values[code] = np.nan
        elif exponent == 0:
            values[code] = sign * mantissa / 8 * 2.0 ** -6
        else:
            values[code] = sign * (1 + mantissa / 8) * 2.0 ** (exponent - 7)
    return values


def stored_matrices(directory):
    """name -> (codes' values [rows, columns], Float32 scales [rows]) of every F8_E4M3 tensor in the shards."""
    index = json.loads((directory / INDEX).read_text())
    tensors = {}
    for shard in sorted(set(index["weight_map"].values())):
        tensors.update(raw_tensors(directory / shard))
    table, found = e4m3_table(), {}
    for name, (dtype, shape, raw) in tensors.items():
        if dtype == "F8_E4M3":
            scale_dtype, scale_shape, scale_raw = tensors[name + ".scale"]
            assert scale_dtype == "F32" and scale_shape == (shape[0],), name
            found[name] = (table[np.frombuffer(raw, np.uint8)].reshape(shape), np.frombuffer(scale_raw, "<f4"))
    return found, tensors


def bf16_matrix(entry):
    dtype, shape, raw = entry
    assert dtype == "BF16"
    return (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32).reshape(shape).astype(np.float64)


def within_e4m3(stored, original):
    """Each stored value codes * scale is within half an E4M3 step of the BF16 weight it was written from:
    2^-4 of the value in the normal range, 2^-10 scale among the subnormals (steps of 2^-9 scale)."""
    failures = []
    for name, (values, scales) in stored.items():
        weight = bf16_matrix(original[name])
        error = np.abs(values * scales[:, None].astype(np.float64) - weight)
        bound = 2.0 ** -4 * np.abs(weight) + 2.0 ** -10 * scales[:, None] * (1 + 2.0 ** -20)
        if not np.all(error <= bound):
            failures.append(f"{name}: |error| {error.max():.3g} past the bound at {np.argmax(error - bound)}")
    return failures


@pytest.fixture(scope="module")
def e4m3_stored(cli, single):
    directory = single.parent / "e4m3"
    run = uform(cli, "shard", "--model", single, "--output", directory, "--max-shard-mb", LIMIT_MB, "--store", "e4m3")
    assert run.returncode == 0 and "E4M3" in run.stderr, run.stderr
    return directory


def test_e4m3_storage_writes_the_precisions_codes(single, e4m3_stored):
    """The four matrices of every block as F8_E4M3 with their scales, the E4M3 precision's rounding exactly
    (reference.e4m3_weight), every other tensor byte for byte; about half the bytes."""
    import reference
    stored, tensors = stored_matrices(e4m3_stored)
    original = raw_tensors(single / "model.safetensors")
    matrices = {name for name in original if name.startswith("blocks.") and name.endswith(MATRICES)}
    assert set(stored) == matrices and len(matrices) == 4 * 2
    for name, (values, scales) in stored.items():
        expected, expected_scales = reference.e4m3_weight(bf16_matrix(original[name]))
        np.testing.assert_array_equal(values, expected, err_msg=name)
        np.testing.assert_array_equal(scales, expected_scales.astype(np.float32), err_msg=name)
    for name, entry in original.items():
        if name not in matrices:
            assert tensors[name] == entry, name
    assert not within_e4m3(stored, original)
    size = sum(path.stat().st_size for path in e4m3_stored.glob("*.safetensors"))
    assert size < 0.75 * (single / "model.safetensors").stat().st_size
    with safetensors.safe_open(str(next(e4m3_stored.glob("*.safetensors"))), framework="numpy") as file:
        assert file.metadata()["storage"] == "e4m3"


def test_e4m3_storage_reads_back_as_bf16(cli, single, e4m3_stored, tmp_path):
    """The library reads codes * scale rounded to BF16 (Float32 product, ties to even): written back as
    BF16, every matrix is that exactly; it encodes like the original within E4M3's rounding."""
    import reference
    back = tmp_path / "back"
    run = uform(cli, "shard", "--model", e4m3_stored, "--output", back)
    assert run.returncode == 0, run.stderr
    stored, _ = stored_matrices(e4m3_stored)
    tensors = {}
    for shard in back.glob("*.safetensors"):
        tensors.update(raw_tensors(shard))
    for name, (values, scales) in stored.items():
        product = (values.astype(np.float32) * scales[:, None]).astype(np.float64)
        np.testing.assert_array_equal(bf16_matrix(tensors[name]), reference.round_bf16(product), err_msg=name)
    original = [json.loads(line) for line in uform(cli, "encode", "--model", single, stdin=LINES).stdout.splitlines()]
    narrow = [json.loads(line) for line in uform(cli, "encode", "--model", e4m3_stored, stdin=LINES).stdout.splitlines()]
    assert len(original) == len(narrow) == 4
    for left, right in zip(original, narrow):
        a, b = np.array(left, float), np.array(right, float)
        assert a @ b / np.linalg.norm(a) / np.linalg.norm(b) > 0.99 and not np.array_equal(a, b)


def rewrite_tensor(directory, name, change):
    """The shard holding `name`, with change(raw bytes) -> raw bytes of the same length in its place."""
    index = json.loads((directory / INDEX).read_text())
    path = directory / index["weight_map"][name]
    header, data = checkpoint_files.split_file(path)
    begin, end = header[name]["data_offsets"]
    checkpoint_files.join_file(path, header, data[:begin] + change(data[begin:end]) + data[end:])


def test_e4m3_storage_control_a_doubled_scale_is_caught(single, e4m3_stored, tmp_path):
    """The planted control: one matrix's scales doubled; the bound check above must reject it."""
    broken = tmp_path / "doubled"
    subprocess.run(["cp", "-r", str(e4m3_stored), str(broken)], check=True)
    rewrite_tensor(broken, "blocks.1.gate_up.scale", lambda raw: (np.frombuffer(raw, "<f4") * 2).astype("<f4").tobytes())
    stored, _ = stored_matrices(broken)
    failures = within_e4m3(stored, raw_tensors(single / "model.safetensors"))
    assert failures and all("blocks.1.gate_up" in line for line in failures), failures


@pytest.mark.parametrize("fault,words", [
    ("missing", "scales 'blocks.0.down.scale' are missing"),
    ("negative", "a scale is positive and finite"),
    ("nan code", "NaN code"),
    ("vector", "only matrices may be"),
])
def test_e4m3_storage_faults_name_the_tensor(cli, e4m3_stored, tmp_path, fault, words):
    broken = tmp_path / fault.replace(" ", "-")
    subprocess.run(["cp", "-r", str(e4m3_stored), str(broken)], check=True)
    if fault == "missing":
        index = json.loads((broken / INDEX).read_text())
        path = broken / index["weight_map"]["blocks.0.down.scale"]
        header, data = checkpoint_files.split_file(path)
        del header["blocks.0.down.scale"]
        checkpoint_files.join_file(path, header, data)
        del index["weight_map"]["blocks.0.down.scale"]
        (broken / INDEX).write_text(json.dumps(index))
    elif fault == "negative":
        rewrite_tensor(broken, "blocks.0.qkv.scale", lambda raw: (-np.frombuffer(raw, "<f4")).astype("<f4").tobytes())
    elif fault == "nan code":
        rewrite_tensor(broken, "blocks.0.out", lambda raw: b"\x7f" + raw[1:])
    else:  # final_norm, a Float32 vector, as one E4M3 byte a value
        index = json.loads((broken / INDEX).read_text())
        path = broken / index["weight_map"]["final_norm"]
        header, data = checkpoint_files.split_file(path)
        rebuilt, offset = bytearray(), 0
        for name in sorted((n for n in header if n != "__metadata__"), key=lambda n: header[n]["data_offsets"][0]):
            begin, end = header[name]["data_offsets"]
            raw = data[begin:end]
            if name == "final_norm":
                header[name]["dtype"], raw = "F8_E4M3", bytes(len(raw) // 4)
            header[name]["data_offsets"] = [offset, offset + len(raw)]
            rebuilt += raw
            offset += len(raw)
        checkpoint_files.join_file(path, header, bytes(rebuilt))
    run = uform(cli, "encode", "--model", broken, stdin=LINES)
    assert run.returncode != 0 and words in run.stderr and "Traceback" not in run.stderr, run.stderr
    assert ".safetensors" in run.stderr or INDEX in run.stderr, run.stderr


def test_e4m3_storage_through_the_c_abi(library, tmp_path):
    """uform_model_save_sharded_as: E4M3 shards reopen; an unknown storage is refused."""
    config = library.config_from_tier("64x2")
    with library.init(config, 2) as model:
        library.call("uform_model_save_sharded_as", model.handle, str(tmp_path / "e4m3").encode(), 1 << 20, 1)
        with library.open(tmp_path / "e4m3") as opened:
            assert opened.has_head("pool")
        with pytest.raises(UFormError, match="storage 7"):
            library.call("uform_model_save_sharded_as", model.handle, str(tmp_path / "seven").encode(), 1 << 20, 7)
