# test_bad_inputs.py: broken checkpoints and misused calls must give a non-zero status and a
# message naming the file (for file problems) and the problem, and never crash: each call runs in
# a child process (isolated.py). Also the CLI on a missing directory: non-zero exit, a readable
# message on stderr, no crash.

import json
import shutil
import struct
import subprocess

import numpy as np
import pytest

import checkpoint_files
import isolated
from conftest import COLUMNS

FORMAT, IO, SHAPE, MISSING, INVALID, UNSUPPORTED, OUT_OF_MEMORY = 3, 2, 4, 5, 1, 7, 6


@pytest.fixture(scope="module")
def good_model(tmp_path_factory):
    directory = tmp_path_factory.mktemp("good_128x2")
    config = checkpoint_files.small_config(128, 2, COLUMNS)
    checkpoint_files.write_checkpoint(directory, config, checkpoint_files.random_tensors(config, 3))
    return directory


def file_of(directory):
    return directory / "model.safetensors"


def broken_copy(good_model, tmp_path, name):
    directory = tmp_path / name
    shutil.copytree(good_model, directory)
    return directory


# Each breaker takes the path of a good model.safetensors and breaks it in place.


def cut_at(offset_of):
    def breaker(path):
        blob = path.read_bytes()
        (length,) = struct.unpack("<Q", blob[:8])
        path.write_bytes(blob[: offset_of(length, len(blob))])
    return breaker


def edit_header(change):
    def breaker(path):
        header, data = checkpoint_files.split_file(path)
        change(header)
        checkpoint_files.join_file(path, header, data)
    return breaker


def edit_config(change):
    def breaker(path):
        header, data = checkpoint_files.split_file(path)
        config = json.loads(header["__metadata__"]["config"])
        change(config)
        header["__metadata__"]["config"] = json.dumps(config)
        checkpoint_files.join_file(path, header, data)
    return breaker


def rewrite(change):
    """Re-serializes through the safetensors package: a valid file holding a wrong model."""
    def breaker(path):
        header, data = checkpoint_files.split_file(path)
        entries = {name: (entry["dtype"], entry["shape"], data[entry["data_offsets"][0]: entry["data_offsets"][1]])
                   for name, entry in header.items() if name != "__metadata__"}
        metadata = dict(header["__metadata__"])
        change(entries, metadata)
        path.write_bytes(checkpoint_files.serialize(entries, metadata))
    return breaker


def set_length(value):
    def breaker(path):
        blob = path.read_bytes()
        path.write_bytes(struct.pack("<Q", value(len(blob))) + blob[8:])
    return breaker


def corrupt_json(path):
    blob = bytearray(path.read_bytes())
    blob[8] = ord("#")  # the opening brace
    path.write_bytes(bytes(blob))


def last_tensor(header):
    return max((name for name in header if name != "__metadata__"), key=lambda name: header[name]["data_offsets"][1])


def first_tensor(header):
    return min((name for name in header if name != "__metadata__"), key=lambda name: header[name]["data_offsets"][0])


def offsets_past_end(header):
    header[last_tensor(header)]["data_offsets"][1] += 4096


def offsets_overlapping(header):
    # blocks.0.attn_norm and blocks.0.mlp_norm have one size; point the second at the first's bytes.
    header["blocks.0.mlp_norm"]["data_offsets"] = list(header["blocks.0.attn_norm"]["data_offsets"])


def offsets_short(header):
    header[first_tensor(header)]["data_offsets"][1] -= 2


def shape_not_matching_size(header):
    header["final_norm"]["shape"] = [64]


def offsets_negative(header):
    header[first_tensor(header)]["data_offsets"][0] = -8


def shape_overflowing(header):
    # 4 * (2^62 + 128) wraps to 512 bytes in 64 bits: exactly final_norm's F32 size.
    header["final_norm"]["shape"] = [(1 << 62) + 128]


def dtype_unknown(header):
    header["final_norm"]["dtype"] = "Q8"


def drop(name):
    def change(entries, metadata):
        del entries[name]
    return change


def reshape(name, shape):
    def change(entries, metadata):
        dtype, _, raw = entries[name]
        size = int(np.prod(shape)) * 2
        entries[name] = (dtype, shape, (raw * (size // len(raw) + 1))[:size])
    return change


def retype(name, dtype):
    def change(entries, metadata):
        entries[name] = (dtype, entries[name][1], entries[name][2])
    return change


def no_metadata(entries, metadata):
    metadata.clear()
    metadata["note"] = "no config here"


def config_not_json(entries, metadata):
    metadata["config"] = "{width: 128"


# name -> (breaker, statuses accepted, words of which the message must hold one)
TRUNCATED = ("truncat", "short", "end of file", "eof", "incomplete", "exceed", "beyond", "past", "size", "length", "small")
FILE_CASES = {
    "empty file": (cut_at(lambda length, size: 0), {FORMAT, IO}, TRUNCATED),
    "cut inside the length": (cut_at(lambda length, size: 5), {FORMAT, IO}, TRUNCATED),
    "cut inside the header": (cut_at(lambda length, size: 8 + length // 2), {FORMAT, IO}, TRUNCATED),
    "cut after the header": (cut_at(lambda length, size: 8 + length), {FORMAT, IO}, TRUNCATED),
    "cut inside the data": (cut_at(lambda length, size: (8 + length + size) // 2), {FORMAT, IO}, TRUNCATED),
    "cut one byte short": (cut_at(lambda length, size: size - 1), {FORMAT, IO}, TRUNCATED),
    "corrupt header json": (corrupt_json, {FORMAT}, ("json", "header", "parse", "syntax")),
    "header length past the file": (set_length(lambda size: size), {FORMAT, IO}, TRUNCATED + ("header",)),
    "header length huge": (set_length(lambda size: 1 << 62), {FORMAT, IO}, TRUNCATED + ("header",)),
    "header length 2^64 - 1": (set_length(lambda size: (1 << 64) - 1), {FORMAT, IO}, TRUNCATED + ("header",)),
    "data_offsets past the end": (edit_header(offsets_past_end), {FORMAT}, TRUNCATED + ("offset", "range", "ends")),
    "data_offsets overlapping": (edit_header(offsets_overlapping), {FORMAT}, ("overlap", "offset", "blocks.0")),
    "data_offsets not shape times dtype": (edit_header(offsets_short), {FORMAT, SHAPE}, ("offset", "size", "bytes", "shape")),
    "shape not matching its bytes": (edit_header(shape_not_matching_size), {FORMAT, SHAPE}, ("final_norm",)),
    "data_offsets negative": (edit_header(offsets_negative), {FORMAT}, ("offset", "negative", "range")),
    "shape whose size overflows": (edit_header(shape_overflowing), {FORMAT, SHAPE}, ("final_norm",)),
    "unknown dtype": (edit_header(dtype_unknown), {FORMAT}, ("q8", "dtype")),
    "missing tensor": (rewrite(drop("blocks.1.out")), {MISSING}, ("blocks.1.out",)),
    "missing head tensor": (rewrite(drop("pool.proj")), {MISSING}, ("pool.proj",)),
    "wrong shape": (rewrite(reshape("blocks.0.out", [128, 64])), {SHAPE}, ("blocks.0.out",)),
    "wrong dtype integer": (rewrite(retype("blocks.0.qkv", "int16")), {FORMAT, SHAPE}, ("blocks.0.qkv",)),
    "wrong dtype for a norm": (rewrite(retype("final_norm", "int32")), {FORMAT, SHAPE}, ("final_norm",)),
    "metadata config missing": (rewrite(no_metadata), {FORMAT, MISSING}, ("config", "metadata")),
    "metadata config not json": (rewrite(config_not_json), {FORMAT}, ("config", "json")),
    "config width not the tensors'": (edit_config(lambda c: c.update(width=256, heads=4, tier="256x2")), {FORMAT, SHAPE}, ("width", "config", "shape")),
    "config depth beyond the blocks": (edit_config(lambda c: c.update(depth=3, tier="128x3")), {FORMAT, MISSING, SHAPE}, ("depth", "blocks.2", "config")),
    "config heads not width / 64": (edit_config(lambda c: c.update(heads=3)), {FORMAT, SHAPE}, ("heads", "config")),
    "config widest embedding not pool.proj's": (edit_config(lambda c: c.update(embedding_widths=[64])), {FORMAT, SHAPE}, ("pool.proj", "embedding", "config")),
    "config colbert width not rerank.proj's": (edit_config(lambda c: c.update(colbert_width=64)), {FORMAT, SHAPE}, ("rerank.proj", "colbert", "config")),
}


def test_good_file_opens(library, good_model):
    outcome = isolated.run(library.path, f"library.open({str(good_model)!r}).close()")
    assert outcome.status == 0, outcome


@pytest.mark.parametrize("case", list(FILE_CASES))
def test_broken_checkpoint_is_refused(library, good_model, tmp_path, case):
    breaker, statuses, words = FILE_CASES[case]
    directory = broken_copy(good_model, tmp_path, "broken")
    breaker(file_of(directory))
    outcome = isolated.run(library.path, f"library.open({str(directory)!r})")
    assert outcome.status is not None, f"{case}: the library crashed: {outcome}"
    assert outcome.status != 0, f"{case}: the broken file was accepted"
    message = outcome.message.lower()
    assert "model.safetensors" in message, f"{case}: the message does not name the file: {outcome.message!r}"
    assert any(word in message for word in words), f"{case}: the message does not say the problem ({words}): {outcome.message!r}"
    assert outcome.status in statuses, f"{case}: status {outcome.status} not in {statuses}: {outcome.message!r}"


@pytest.mark.parametrize("where", ["missing directory", "directory without a checkpoint"])
def test_missing_checkpoint_is_io(library, tmp_path, where):
    directory = tmp_path / "nothing" if where == "missing directory" else tmp_path
    outcome = isolated.run(library.path, f"library.open({str(directory)!r})")
    assert outcome.status == IO, outcome
    assert str(directory) in outcome.message, outcome


# Misused calls on a good model: (code run with `model` open, statuses accepted, words of which one must appear).
TEXT = "Text(ctypes.cast(ctypes.c_char_p(b'abc'), ctypes.POINTER(ctypes.c_uint8)), 3)"
BUFFER = "np.zeros(4096 * 300, np.float32).ctypes.data_as(ctypes.POINTER(ctypes.c_float))"
CALL_CASES = {
    "encode an empty text": ("model.encode([b'fine', b''])", {INVALID}, ("empty",)),
    "encode zero texts": ("model.encode([])", {INVALID}, ("count", "zero", "no text", "empty")),
    "encode NULL texts": (f"library.call('uform_encode', model.handle, None, 2, 0, {BUFFER}, None)", {INVALID}, ("null", "texts")),
    "encode NULL embeddings": ("a, b = _texts([b'x']); library.call('uform_encode', model.handle, a, 1, 0, None, None)", {INVALID}, ("null", "embeddings")),
    "encode a width not the model's": ("model.encode([b'abc'], 100)", {INVALID}, ("100",)),
    "encode a width past the widest": ("model.encode([b'abc'], 256)", {INVALID}, ("256",)),
    "encode on a NULL model": (f"a, b = _texts([b'x']); library.call('uform_encode', None, a, 1, 0, {BUFFER}, None)", {INVALID}, ("null", "model")),
    "colbert an empty text": ("model.colbert(b'')", {INVALID}, ("empty",)),
    "colbert capacity too small": ("model.colbert(b'abcdef', capacity=3)", {INVALID, SHAPE}, ("capacity", "cells", "small")),
    "colbert NULL vectors": (f"library.call('uform_colbert', model.handle, {TEXT}, None, 3, None)", {INVALID}, ("null", "vectors")),
    "colbert_many an empty text": ("model.colbert_many([b'fine', b''])", {INVALID}, ("empty",)),
    "colbert_many capacity too small": ("model.colbert_many([b'abcdef', b'gh'], capacity=5)", {INVALID, SHAPE}, ("cells", "buffer")),
    "colbert_many NULL offsets": (f"a, b = _texts([b'x']); library.call('uform_colbert_many', model.handle, a, 1, {BUFFER}, 3, None)", {INVALID}, ("offsets",)),
    "rerank zero documents": ("model.rerank(b'query', [])", {INVALID}, ("count", "zero", "document")),
    "rerank an empty query": ("model.rerank(b'', [b'document'])", {INVALID}, ("empty", "query")),
    "rerank an empty document": ("model.rerank(b'query', [b'document', b''])", {INVALID}, ("empty", "document")),
    "rerank NULL scores": (f"a, b = _texts([b'x']); library.call('uform_rerank', model.handle, {TEXT}, a, 1, None, None)", {INVALID}, ("null", "scores")),
    "rerank_symmetric an empty document": ("model.rerank_symmetric(b'query', [b'document', b''])", {INVALID}, ("empty", "document")),
    "rerank_fused zero documents": ("model.rerank_fused(b'query', [], 0.5)", {INVALID}, ("count", "zero", "document")),
    "rerank_fused a weight past 1": ("model.rerank_fused(b'query', [b'document'], 1.5)", {INVALID}, ("weight", "1.5")),
    "rerank_fused a NaN weight": ("model.rerank_fused(b'query', [b'document'], float('nan'))", {INVALID}, ("weight", "nan")),
    "rerank_gated zero documents": ("model.rerank_gated(b'query', [], 0.5, 64)", {INVALID}, ("count", "zero", "document")),
    "rerank_gated a weight past 1": ("model.rerank_gated(b'query', [b'document'], 1.5, 64)", {INVALID}, ("weight", "1.5")),
    "maxsim NULL query": (f"library.call('uform_maxsim', None, 2, {BUFFER}, 2, 4, 0, {BUFFER})", {INVALID}, ("null", "query")),
    "maxsim NULL score": (f"library.call('uform_maxsim', {BUFFER}, 2, {BUFFER}, 2, 4, 1, None)", {INVALID}, ("score",)),
    "maxsim zero document cells": (f"library.call('uform_maxsim', {BUFFER}, 2, {BUFFER}, 0, 4, 0, {BUFFER})", {INVALID}, ("document cells", "> 0")),
    "maxsim zero width": (f"library.call('uform_maxsim', {BUFFER}, 2, {BUFFER}, 2, 0, 0, {BUFFER})", {INVALID}, ("width",)),
    "mlm_logits zero length": ("model.mlm_logits(np.zeros(0, np.uint16))", {INVALID}, ("length", "zero", "empty")),
    "mlm_logits an id past PAD": ("model.mlm_logits(np.array([65, 258], np.uint16))", {INVALID, FORMAT}, ("258", "id", "range")),
    "mlm_logits longer than a row": (f"model.mlm_logits(np.full({COLUMNS + 1}, 65, np.uint16))", {INVALID, SHAPE}, (str(COLUMNS + 1), "length", "row", "columns")),
    "mlm_logits NULL logits": ("ids = np.array([65], np.uint16); library.call('uform_mlm_logits', model.handle, ids.ctypes.data_as(ctypes.POINTER(ctypes.c_uint16)), 1, None)", {INVALID}, ("null", "logits")),
    "forward a NULL grid": ("o = OutputsStruct(); library.call('uform_forward', model.handle, None, ctypes.byref(o))", {INVALID}, ("null", "grid")),
    "forward NULL outputs": ("g = Grid(); library.call('uform_forward', model.handle, ctypes.byref(g), None)", {INVALID}, ("null", "outputs", "grid")),
    "forward zero rows": ("model.forward(*row(rows=0))", {INVALID}, ("rows", "zero", "empty")),
    "forward an image cell": ("model.forward(*row(kind=1))", {UNSUPPORTED, INVALID}, ("image", "kind")),
    "forward an unknown kind": ("model.forward(*row(kind=9))", {INVALID, FORMAT}, ("kind", "9")),
    "forward a byte id past PAD": ("model.forward(*row(value=300))", {INVALID, FORMAT}, ("300", "value", "byte", "range")),
    "forward a byte cell without segment": ("model.forward(*row(segment=-1))", {INVALID, FORMAT}, ("segment",)),
    "set an unknown precision": ("model.set_precision(7)", {INVALID}, ("precision", "7")),
    "reserve more than memory": ("model.reserve(1 << 40)", {OUT_OF_MEMORY, INVALID}, ("memory", "cells", "alloc", "reserve")),
    # 2^58 cells times the workspace's bytes per cell wraps around 2^64: must be refused, not taken.
    "reserve a size that overflows": ("model.reserve(1 << 58); model.encode([b'after'])", {OUT_OF_MEMORY, INVALID}, ("memory", "cells", "alloc", "reserve", "overflow")),
    "save into a file path": ("model.save('/proc/version/x')", {IO}, ("/proc/version",)),
    "tier that does not exist": ("library.config_from_tier('gigantic')", {INVALID}, ("gigantic",)),
    "custom width not a multiple of 64": ("library.config_from_tier('100x2')", {INVALID}, ("100x2", "64", "width")),
    "custom depth zero": ("library.config_from_tier('128x0')", {INVALID}, ("128x0", "depth")),
    "init with width not a multiple of 64": ("c = library.config_from_tier('128x2'); c.width = 100; library.init(c, 1)", {INVALID, SHAPE}, ("width", "100")),
    "open a NULL directory": ("h = ctypes.c_void_p(); library.call('uform_model_open', None, ctypes.byref(h))", {INVALID}, ("null", "directory")),
}


@pytest.mark.parametrize("case", list(CALL_CASES))
def test_misused_call_is_refused(library, good_model, case):
    code, statuses, words = CALL_CASES[case]
    isolated.assert_refused(case, isolated.run(library.path, code, good_model), statuses, words)


def test_cli_encode_on_missing_directory(cli, tmp_path):
    missing = tmp_path / "no_such_model"
    run = subprocess.run([str(cli), "encode", "--model", str(missing)], input="hello\n", capture_output=True, text=True, timeout=60)
    assert run.returncode > 0, f"exit {run.returncode} (negative: killed by a signal)"
    assert str(missing) in run.stderr, run.stderr
    assert "Traceback" not in run.stderr and "Segmentation" not in run.stderr, run.stderr
    assert run.stdout == "", run.stdout


def test_cli_encode_on_broken_checkpoint(cli, good_model, tmp_path):
    directory = broken_copy(good_model, tmp_path, "broken")
    cut_at(lambda length, size: 8 + length // 2)(file_of(directory))
    run = subprocess.run([str(cli), "encode", "--model", str(directory)], input="hello\n", capture_output=True, text=True, timeout=60)
    assert run.returncode > 0, f"exit {run.returncode}"
    assert "model.safetensors" in run.stderr, run.stderr
