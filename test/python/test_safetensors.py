# test_safetensors.py: our checkpoints are standard SafeTensors both ways. Files written by the
# library (uform_model_save, `uform init`) open with the `safetensors` package: names, dtypes
# (BF16 matrices, F32 vectors), shapes and the metadata config all as SPEC.md says; without torch
# the package's numpy framework reads headers and F32 tensors, and `deserialize` gives the raw
# BF16 bytes. Files written by the package open in the library and give the reference's forward.

import json
import subprocess

import numpy as np
import pytest
import safetensors

import checkpoint_files
import reference
from conftest import COLUMNS, init_checkpoint, python_checkpoint
from contract import check_forward


@pytest.fixture(scope="module", params=["uform_model_save", "uform init"])
def written_by_library(request, library, cli, tmp_path_factory):
    directory = tmp_path_factory.mktemp("written")
    if request.param == "uform_model_save":
        init_checkpoint(library, directory, "192x3", 21)
    else:
        run = subprocess.run([str(cli), "init", "--tier", "128x2", "--seed", "5", "--output", str(directory)],
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
    return directory


def test_package_reads_header_names_dtypes_shapes(written_by_library):
    path = str(written_by_library / "model.safetensors")
    with safetensors.safe_open(path, framework="numpy") as file:
        config = json.loads(file.metadata()["config"])
        expected = checkpoint_files.tensor_shapes(config)
        names = set(file.keys())
        assert set(expected) <= names, f"missing: {set(expected) - names}"
        for name, shape in expected.items():
            entry = file.get_slice(name)
            assert entry.get_dtype() == checkpoint_files.dtype_of(name), name
            accepted = {shape, (1,)} if name.startswith("siglip.") else {shape}  # a scalar: rank 0 or [1]
            assert tuple(entry.get_shape()) in accepted, name


def test_metadata_config_is_consistent(written_by_library):
    path = str(written_by_library / "model.safetensors")
    with safetensors.safe_open(path, framework="numpy") as file:
        config = json.loads(file.metadata()["config"])
        assert {"tier", "width", "depth", "heads", "embedding_widths", "colbert_width", "columns"} <= set(config)
        assert config["heads"] * 64 == config["width"]
        assert config["embedding_widths"] == sorted(config["embedding_widths"])
        assert tuple(file.get_slice("pool.proj").get_shape()) == (config["embedding_widths"][-1], config["width"])
        assert tuple(file.get_slice("rerank.proj").get_shape()) == (config["colbert_width"], config["width"])


def test_package_data_equals_our_parse(written_by_library):
    """The package's numpy reader (F32) and deserialize (raw BF16) agree with reference.py's parse."""
    path = written_by_library / "model.safetensors"
    ours, _, _ = reference.read_safetensors(path)
    with safetensors.safe_open(str(path), framework="numpy") as file:
        for name in file.keys():
            if file.get_slice(name).get_dtype() == "F32":
                np.testing.assert_array_equal(file.get_tensor(name).astype(np.float64), ours[name], err_msg=name)
    for name, entry in safetensors.deserialize(path.read_bytes()):
        np.testing.assert_array_equal(reference.widen(bytes(entry["data"]), entry["dtype"]).reshape(entry["shape"]), ours[name], err_msg=name)


def test_initial_values_follow_the_spec(written_by_library):
    """pool.query starts at zero (mean pooling); siglip.scale = log 10, siglip.bias = -10."""
    tensors, _, _ = reference.read_safetensors(written_by_library / "model.safetensors")
    assert np.all(tensors["pool.query"] == 0)
    assert abs(float(tensors["siglip.scale"].ravel()[0]) - np.log(10.0)) <= np.log(10.0) * 2.0**-24
    assert float(tensors["siglip.bias"].ravel()[0]) == -10.0
    for name, values in tensors.items():
        assert np.all(np.isfinite(values)), name
        if checkpoint_files.dtype_of(name) == "BF16":
            assert np.any(values != 0) or name.endswith(("out", "down")), f"{name} is all zero"


def test_readme_written_beside(written_by_library):
    readme = (written_by_library / "README.md").read_text()
    assert readme.strip()


def test_package_written_file_gives_reference_forward(library, tmp_path):
    directory = python_checkpoint(tmp_path / "package_written", 128, 2, 31, attention_gain=1.5)
    ok, report = check_forward(library, directory, "f32", seed=3)
    assert ok, report


def test_save_keeps_every_value(library, tmp_path):
    """Open a package-written file, save it with the library: every tensor comes back bit for bit."""
    source = python_checkpoint(tmp_path / "source", 128, 2, 41, attention_gain=1.0)
    with library.open(source) as model:
        model.save(tmp_path / "copy", "pytest round trip")
    before, before_metadata, _ = reference.read_safetensors(source / "model.safetensors")
    after, after_metadata, _ = reference.read_safetensors(tmp_path / "copy" / "model.safetensors")
    assert set(before) <= set(after)
    for name in before:
        np.testing.assert_array_equal(after[name], before[name], err_msg=name)
    assert json.loads(after_metadata["config"])["width"] == 128
    assert json.loads(after_metadata["config"])["columns"] == COLUMNS
