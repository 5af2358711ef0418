# test_grow.py: Net2Net growth (SPEC.md section 8; `uform grow`, uform_model_deepen and uform_model_widen)
# against the float64 reference. In exact arithmetic a grown model computes what its source does:
# deepening adds blocks whose out and down projections are zero, and widening's halved BF16 weights are
# exact, so in float64 every output (hidden states, the pooled embedding, ColBERT cells, MLM logits,
# masked-patch outputs) must match the source's to within BOUND relative (float64's rounding over the
# blocks, far below any real break). Planted controls: the same check must reject a deepened model
# whose new block writes its attention back, and a widened one whose q, k and v were not halved;
# the library's own check (a cosine of 0.9999 over its probes) must refuse its planted copy's deepening.

import json
import subprocess

import numpy as np
import pytest

import reference
from conftest import built, python_checkpoint
from uform_ctypes import Library, UFormError

BOUND = 1e-9
TEXTS = [b"a", b"list directory contents", "Öffnet die Datei im Standardprogramm".encode(), "ファイルを開く".encode(),
         b"The quick brown fox jumps over the lazy dog " * 3]


def grow(cli, source, output, *how):
    run = subprocess.run([str(cli), "grow", "--model", str(source), "--output", str(output), *how], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "the lowest cosine to the source's embeddings" in run.stderr, run.stderr
    return reference.load_model(str(output))


MAE_HEADS = {reference.CELL_IMAGE: "mae", reference.CELL_VIDEO: "mae_video", reference.CELL_AUDIO: "mae_audio"}


def outputs(model):
    """Every head's output, per text and for one segment of each medium the model reads, from the float64 reference."""
    found = []
    for text in TEXTS:
        h, e = reference.encode_text(model, text)
        found.append({"hidden": h, "embedding": e, "colbert": reference.colbert_cells(model, h), "mlm": reference.mlm_cells(model, h)})
    for kind, (values, weight, _) in reference.MEDIA_FRONTENDS.items():
        if weight not in model.tensors:
            continue
        media = np.random.default_rng(kind).uniform(0, 1, size=(6, values))
        positions = np.stack([np.zeros(6, int), np.arange(6) // 3, np.arange(6) % 3], axis=1)
        h = reference.encode_segment(model, np.arange(6), positions, kinds=np.full(6, kind), media={kind: media})
        head = MAE_HEADS[kind]
        found.append({"hidden": h, "embedding": reference.pool_segment(model, h),
                      "mae": h @ model.tensors[f"{head}.head"].T + model.tensors[f"{head}.bias"]})
    return found


def worst(source, grown, widened):
    """The largest relative difference over every output; a widened model's hidden states as [h, h]."""
    largest = 0.0
    expected_all, found_all = outputs(source), outputs(grown)
    assert len(expected_all) == len(found_all) == len(TEXTS) + 3
    for expected, value in zip(expected_all, found_all):
        for name, wanted in expected.items():
            got = value[name]
            halves = (got[:, : got.shape[1] // 2], got[:, got.shape[1] // 2 :]) if name == "hidden" and widened else (got,)
            largest = max(largest, *(float(np.linalg.norm(half - wanted) / np.linalg.norm(wanted)) for half in halves))
    return largest


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """128x2 with every frontend and masked-media head, written from Python with sharp attention: a grown
    model carries whatever its source does."""
    return python_checkpoint(tmp_path_factory.mktemp("grow_source"), 128, 2, 23, attention_gain=2.0,
                             frontends=("vision", "video", "audio", "mae", "mae_video", "mae_audio"))


def test_deepen_keeps_every_output(cli, trained, tmp_path):
    source = reference.load_model(str(trained))
    grown = grow(cli, trained, tmp_path / "deep", "--deepen", "3")
    assert grown.depth == source.depth + 3 and grown.config["tier"] == f"{source.width}x{source.depth + 3}"
    # 2 blocks and 3 new: new blocks after source blocks 0, 1 and 1 (ceil(j * 2 / 3) - 1), each a copy of it
    order = [0, "0", 1, "1", "1"]
    for index, origin in enumerate(order):
        for kind in ("attn_norm", "qkv", "mlp_norm", "gate_up", "out", "down"):
            got, copied = grown.tensors[f"blocks.{index}.{kind}"], source.tensors[f"blocks.{int(origin)}.{kind}"]
            if isinstance(origin, str) and kind in ("out", "down"):
                assert not np.any(got), f"new block {index}'s {kind} is not zero"
            else:
                assert np.array_equal(got, copied), f"block {index}'s {kind} is not block {origin}'s"
    assert worst(source, grown, False) < BOUND


def test_widen_keeps_every_output(cli, trained, tmp_path):
    source = reference.load_model(str(trained))
    grown = grow(cli, trained, tmp_path / "wide", "--widen")
    assert grown.width == 2 * source.width and grown.heads == 2 * source.heads and grown.depth == source.depth
    assert grown.embedding_widths == source.embedding_widths
    assert worst(source, grown, True) < BOUND


def test_the_check_rejects_planted_growth(cli, trained, tmp_path):
    """The float64 check of the two tests above, on grown models broken by hand."""
    source = reference.load_model(str(trained))
    deep = grow(cli, trained, tmp_path / "deep", "--deepen", "1")
    deep.tensors["blocks.2.out"] = deep.tensors["blocks.1.out"].copy()  # the new block writes its attention back
    assert worst(source, deep, False) > 1e-3
    wide = grow(cli, trained, tmp_path / "wide", "--widen")
    wide.tensors["blocks.0.qkv"] = wide.tensors["blocks.0.qkv"] * 2  # the inputs not halved: q, k and v doubled
    assert worst(source, wide, True) > 1e-3


def test_the_library_refuses_a_planted_deepening(library, trained):
    """libuform_plant_deepen_out_kept keeps the new blocks' out projections: the library's own check must
    refuse to return the model; the real library's passes with its lowest cosine reported."""
    with library.open(trained) as model:
        grown, cosine = model.deepen(2)
        grown.close()
        assert cosine >= 0.9999
        wide, cosine = model.widen()
        wide.close()
        assert cosine >= 0.9999
    planted = Library(built("libuform_plant_deepen_out_kept.so"))
    with planted.open(trained) as model:
        with pytest.raises(UFormError) as refused:
            model.deepen(2)
    assert "leave the source's" in str(refused.value) and "nothing grown" in str(refused.value)


@pytest.mark.parametrize("flags, message", [
    ([], "give one of --deepen N and --widen"),
    (["--deepen", "2", "--widen"], "give one of --deepen N and --widen"),
    (["--deepen", "0"], "--deepen needs 1 to 255 blocks"),
    (["--deepen", "two"], "--deepen needs a non-negative integer"),
    (["--deepen", "255"], "the depth must end in"),
])
def test_bad_growth_is_refused(cli, init_model, tmp_path, flags, message):
    run = subprocess.run([str(cli), "grow", "--model", str(init_model), "--output", str(tmp_path / "out"), *flags],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode != 0 and message in run.stderr, run.stderr
    assert not (tmp_path / "out").exists()


def test_a_missing_checkpoint_is_named(cli, tmp_path):
    run = subprocess.run([str(cli), "grow", "--model", str(tmp_path / "absent"), "--output", str(tmp_path / "out"), "--widen"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode != 0 and str(tmp_path / "absent") in run.stderr, run.stderr


def test_the_readme_records_the_growth(cli, init_model, tmp_path):
    grow(cli, init_model, tmp_path / "deep", "--deepen", "1")
    readme = (tmp_path / "deep" / "README.md").read_text()
    assert "deepened by 1 block of a 128x2 model" in readme and "uform grow" in readme
    metadata = json.loads(json.loads((tmp_path / "deep" / "model.safetensors").read_bytes()[8:][: int.from_bytes(
        (tmp_path / "deep" / "model.safetensors").read_bytes()[:8], "little")])["__metadata__"]["config"])
    assert metadata["depth"] == 3 and metadata["tier"] == "128x3"
