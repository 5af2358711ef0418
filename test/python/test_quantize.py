# test_quantize.py: the output precisions of quantize.h against an independent NumPy implementation:
# binary and ubinary bit for bit against np.packbits; int8 and uint8 bucket for bucket, with values
# planted on every bucket edge and one float32 step either side (both sides do the same Float32
# operations, so exact equality is the bound); the agreement with sentence-transformers' own
# formula, and the one place int8 departs from it; calibration against min/max; the scores; bad
# arguments refused with a message; `uform encode --output-precision` and `uform calibrate`
# agreeing with the ABI; uform_eval's quantized rows recomputed from uform_encode here. Planted
# controls (ranges off by one dimension, bit order reversed, a shifted bucket) must fail the same
# comparisons.

import ctypes
import json
import subprocess

import numpy as np
import pytest

from conftest import BUILD
from test_eval_cli import TOPICS, averaged, evaluate, expected_metrics, row, text_ids
from uform_ctypes import OUTPUT_PRECISIONS, Ranges, UFormError

# ---- the NumPy reference ----------------------------------------------------------------------------


def reference_quantize(embeddings, precision, minimums=None, maximums=None, bitorder="big"):
    """quantize.h's definitions, written from docs/quantization.md in Float32 NumPy."""
    embeddings = np.asarray(embeddings, np.float32)
    if precision == "float32":
        return embeddings.copy()
    if precision in ("int8", "uint8"):
        minimums, maximums = np.asarray(minimums, np.float32), np.asarray(maximums, np.float32)
        steps = (maximums - minimums) / np.float32(255)
        with np.errstate(divide="ignore", invalid="ignore"):
            places = (embeddings - minimums) / steps
        places = np.nan_to_num(np.where(steps > 0, places, 0), nan=0.0, posinf=255, neginf=0)  # NaN: the lowest
        if precision == "uint8":
            return np.clip(np.floor(places), 0, 255).astype(np.uint8)
        return np.clip(np.trunc(places - np.float32(128)), -128, 127).astype(np.int8)  # toward zero, as astype
    bits = np.packbits(embeddings > 0, axis=-1, bitorder=bitorder)
    return bits if precision == "ubinary" else (bits.astype(np.int16) - 128).astype(np.int8)


def sentence_transformers_quantize(embeddings, precision, ranges):
    """sentence_transformers.quantization.quantize_embeddings' int8 and uint8 lines, as it writes them."""
    starts = ranges[0, :]
    steps = (ranges[1, :] - ranges[0, :]) / 255
    if precision == "uint8":
        return ((embeddings - starts) / steps).astype(np.uint8)
    return ((embeddings - starts) / steps - 128).astype(np.int8)


def mismatches(got, wanted):
    """How many entries differ; the one comparison every check and every control goes through."""
    got, wanted = np.asarray(got), np.asarray(wanted)
    assert got.shape == wanted.shape and got.dtype == wanted.dtype, (got.shape, wanted.shape, got.dtype, wanted.dtype)
    return int(np.count_nonzero(got != wanted))


def unit_rows(count, width, seed):
    rows = np.random.default_rng(seed).standard_normal((count, width)).astype(np.float32)
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def edge_values(minimums, maximums):
    """For each dimension: every bucket edge min + k x step (k = 0..255) in Float32, one float32 step
    below and above it, and values outside the range."""
    steps = (maximums - minimums) / np.float32(255)
    edges = minimums[None, :] + np.arange(256, dtype=np.float32)[:, None] * steps[None, :]
    below, above = np.nextafter(edges, np.float32(-np.inf)), np.nextafter(edges, np.float32(np.inf))
    outside = np.stack([minimums - 1, maximums + 1, maximums, minimums])
    return np.concatenate([edges, below, above, outside]).astype(np.float32)


# ---- against the reference ----------------------------------------------------------------------------


@pytest.mark.parametrize("width", [64, 100, 8, 3])
def test_binary_packs_sign_bits_as_numpy(library, width):
    embeddings = unit_rows(50, width, seed=width)
    embeddings[0, : min(width, 4)] = 0.0  # zero is not > 0: bit 0
    for precision in ("binary", "ubinary"):
        got = library.quantize(embeddings, precision)
        assert got.shape == (50, (width + 7) // 8)
        assert mismatches(got, reference_quantize(embeddings, precision)) == 0, precision
        # Control: the same comparison rejects the other bit order (width 3 packs into the top bits alone).
        if width >= 8:
            assert mismatches(got, reference_quantize(embeddings, precision, bitorder="little")) > 0, precision
    assert mismatches(library.quantize(embeddings, "binary").view(np.uint8) ^ np.uint8(0x80),
                      library.quantize(embeddings, "ubinary")) == 0  # binary is ubinary - 128


@pytest.mark.parametrize("precision", ["int8", "uint8"])
def test_integer_buckets_match_numpy_on_every_edge(library, precision):
    calibration = unit_rows(200, 64, seed=1)
    minimums, maximums = library.calibrate(calibration)
    assert mismatches(minimums, calibration.min(axis=0)) == 0 and mismatches(maximums, calibration.max(axis=0)) == 0
    embeddings = np.concatenate([unit_rows(300, 64, seed=2), edge_values(minimums, maximums)])
    got = library.quantize(embeddings, precision, minimums, maximums)
    assert got.dtype == (np.int8 if precision == "int8" else np.uint8) and got.shape == embeddings.shape
    assert mismatches(got, reference_quantize(embeddings, precision, minimums, maximums)) == 0
    # Controls through the same comparison: ranges off by one dimension, and every bucket one higher.
    shifted = reference_quantize(embeddings, precision, np.roll(minimums, 1), np.roll(maximums, 1))
    assert mismatches(got, shifted) > 0
    limits = np.iinfo(got.dtype)
    bumped = np.clip(reference_quantize(embeddings, precision, minimums, maximums).astype(np.int16) + 1, limits.min, limits.max)
    assert mismatches(got, bumped.astype(got.dtype)) > 0


def test_agreement_with_sentence_transformers(library):
    """int8 and uint8 are sentence-transformers' buckets for every value inside the range. Its int8
    rounds place - 128 toward zero, so it is not uint8 - 128 below the middle (0 spans two buckets'
    width): the sample holds such values, so a definition as uint8 - 128 would fail here."""
    calibration = unit_rows(200, 64, seed=3)
    minimums, maximums = library.calibrate(calibration)
    embeddings = np.concatenate([calibration, edge_values(minimums, maximums)[:768]])  # edges and neighbours, in range
    embeddings = np.clip(embeddings, minimums, maximums)
    ranges = np.vstack([minimums, maximums])
    assert mismatches(library.quantize(embeddings, "uint8", minimums, maximums),
                      sentence_transformers_quantize(embeddings, "uint8", ranges)) == 0
    int8 = library.quantize(embeddings, "int8", minimums, maximums)
    assert mismatches(int8, sentence_transformers_quantize(embeddings, "int8", ranges)) == 0
    uint8_less_128 = (library.quantize(embeddings, "uint8", minimums, maximums).astype(np.int16) - 128).astype(np.int8)
    assert mismatches(int8, uint8_less_128) > 0


def test_saturation_nan_and_single_point_ranges(library):
    minimums = np.array([-1, -1, -1, 0.5], np.float32)
    maximums = np.array([1, 1, 1, 0.5], np.float32)
    embeddings = np.array([[-5, 5, np.nan, 7], [-1, 1, 0, 0.5]], np.float32)
    got = library.quantize(embeddings, "uint8", minimums, maximums)
    # The maximum itself: 2 / fl(2 / 255) is 254.99998 in Float32, so bucket 254, as sentence-transformers.
    assert got.tolist() == [[0, 255, 0, 0], [0, 254, 127, 0]]
    assert mismatches(got, reference_quantize(embeddings, "uint8", minimums, maximums)) == 0
    got = library.quantize(embeddings, "int8", minimums, maximums)
    assert got.tolist() == [[-128, 127, -128, -128], [-128, 126, 0, -128]]  # place 127.5 - 128 rounds to 0
    assert mismatches(got, reference_quantize(embeddings, "int8", minimums, maximums)) == 0
    assert library.quantize(embeddings, "binary").tolist() == [[(0b01010000) - 128], [(0b01000000 | 0b00010000) - 128]]


def test_float32_is_the_embedding(library):
    embeddings = unit_rows(7, 64, seed=4)
    assert mismatches(library.quantize(embeddings, "float32"), embeddings) == 0


def test_scores(library):
    rows = unit_rows(40, 64, seed=5)
    minimums, maximums = library.calibrate(rows)
    for precision in OUTPUT_PRECISIONS:
        quantized = library.quantize(rows, precision, minimums, maximums)
        got = library.quantized_scores(precision, 64, quantized[0], quantized)
        if precision == "float32":
            wanted = rows.astype(np.float64) @ rows[0].astype(np.float64)
            assert np.allclose(got, wanted, atol=64 * np.finfo(np.float32).eps)  # 64 products, each within an ulp of 1
            continue
        if precision in ("int8", "uint8"):
            centred = quantized.astype(np.int64) - (128 if precision == "uint8" else 0)
            wanted = centred @ centred[0]
        else:
            wanted = -np.unpackbits(quantized.view(np.uint8) ^ quantized[0].view(np.uint8), axis=1).sum(axis=1, dtype=np.int64)
        assert mismatches(got, wanted.astype(np.float32)) == 0, precision


# ---- bad arguments ---------------------------------------------------------------------------------------


def refused(library, name, *arguments):
    with pytest.raises(UFormError) as caught:
        library.call(name, *arguments)
    return caught.value


def test_bad_arguments_are_refused(library):
    embeddings = unit_rows(4, 8, seed=6)
    data = embeddings.ctypes.data
    output = np.zeros(64, np.uint8)
    low, high = np.full(8, -1, np.float32), np.full(8, 1, np.float32)

    def ranges(minimums=low, maximums=high, width=8):
        return ctypes.byref(Ranges(minimums.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                                   maximums.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), width))

    int8 = OUTPUT_PRECISIONS.index("int8")
    assert "embeddings and output are needed" in refused(library, "uform_quantize", None, 4, 8, int8, ranges(), output.ctypes.data).message
    assert "width > 0" in refused(library, "uform_quantize", data, 4, 0, int8, ranges(), output.ctypes.data).message
    assert "count > 0" in refused(library, "uform_quantize", data, 0, 8, int8, ranges(), output.ctypes.data).message
    assert "int8 needs calibration ranges" in refused(library, "uform_quantize", data, 4, 8, int8, None, output.ctypes.data).message
    error = refused(library, "uform_quantize", data, 4, 8, int8, ranges(width=7), output.ctypes.data)
    assert error.status == 4 and "the ranges hold 7 dimensions, the embeddings 8" in error.message
    flipped = high.copy()
    flipped[5] = -2
    assert "dimension 5 has minimum -1 > maximum -2" in refused(library, "uform_quantize", data, 4, 8, int8,
                                                                ranges(maximums=flipped), output.ctypes.data).message
    infinite = low.copy()
    infinite[2] = -np.inf
    assert "dimension 2 is not finite" in refused(library, "uform_quantize", data, 4, 8, int8, ranges(minimums=infinite),
                                                  output.ctypes.data).message
    assert "output precision 9" in refused(library, "uform_quantize", data, 4, 8, 9, None, output.ctypes.data).message
    library.call("uform_quantize", data, 4, 8, OUTPUT_PRECISIONS.index("binary"), None, output.ctypes.data)  # no ranges needed
    holed = embeddings.copy()
    holed[2, 3] = np.nan
    assert "embedding 2 is NaN in dimension 3" in refused(library, "uform_calibrate", holed.ctypes.data, 4, 8, ranges()).message
    assert "ranges hold 7 dimensions" in refused(library, "uform_calibrate", data, 4, 8, ranges(width=7)).message
    assert "count > 0" in refused(library, "uform_calibrate", data, 0, 8, ranges()).message
    code = ctypes.c_int()
    assert "not 'int4'" in refused(library, "uform_output_precision_parse", b"int4", ctypes.byref(code)).message
    for index, name in enumerate(OUTPUT_PRECISIONS):
        library.call("uform_output_precision_parse", name.encode(), ctypes.byref(code))
        assert code.value == index and library.dll.uform_output_precision_name(index).decode() == name
    assert library.dll.uform_output_precision_name(5) is None
    scores = np.zeros(4, np.float32)
    assert "width > 0" in refused(library, "uform_quantized_scores", int8, 0, output.ctypes.data, output.ctypes.data, 4,
                                  scores.ctypes.data_as(ctypes.POINTER(ctypes.c_float))).message


# ---- the CLI ------------------------------------------------------------------------------------------------

LINES = ["hello world", "Grüße, 世界", "a", "tokenizer-free byte-level encoders", "the cat sat on the mat", "0123456789"]


def uform(cli, *arguments, stdin="", check=True):
    run = subprocess.run([str(cli), *map(str, arguments)], input=stdin, capture_output=True, text=True, timeout=120)
    if check:
        assert run.returncode == 0, run.stderr
    return run


def printed(run, precision):
    return np.array([json.loads(line) for line in run.stdout.splitlines()], dtype=np.int64 if precision != "float32" else np.float64)


@pytest.fixture(scope="module")
def embedded(library, init_model):
    with library.open(str(init_model)) as model:
        model.set_threads(1)
        return model.encode([line.encode() for line in LINES], 64)[0]


@pytest.mark.parametrize("precision", ["int8", "uint8", "binary", "ubinary"])
def test_cli_agrees_with_the_abi(cli, library, init_model, embedded, precision):
    """Without --calibration the ranges are the inputs' own: uform_calibrate over the same embeddings."""
    run = uform(cli, "encode", "--model", init_model, "--width", 64, "--threads", 1, "--output-precision", precision,
                stdin="\n".join(LINES) + "\n")
    minimums, maximums = library.calibrate(embedded)
    wanted = library.quantize(embedded, precision, minimums, maximums)
    assert mismatches(printed(run, precision), wanted.astype(np.int64)) == 0


def test_cli_calibration_file(cli, library, init_model, embedded, tmp_path):
    ranges = tmp_path / "ranges.json"
    uform(cli, "calibrate", "--model", init_model, "--width", 64, "--threads", 1, "--output", ranges,
          stdin="\n".join(LINES[:4]) + "\n")
    written = json.loads(ranges.read_text())
    minimums, maximums = library.calibrate(embedded[:4])
    assert written["width"] == 64 and written["count"] == 4
    assert mismatches(np.array(written["minimums"], np.float32), minimums) == 0
    assert mismatches(np.array(written["maximums"], np.float32), maximums) == 0
    run = uform(cli, "encode", "--model", init_model, "--width", 64, "--threads", 1, "--output-precision", "uint8",
                "--calibration", ranges, stdin="\n".join(LINES) + "\n")
    wanted = library.quantize(embedded, "uint8", minimums, maximums)
    assert mismatches(printed(run, "uint8"), wanted.astype(np.int64)) == 0
    assert (printed(run, "uint8")[4:] != library.quantize(embedded, "uint8", *library.calibrate(embedded))[4:]).any()
    # The file's width must be the embeddings'; ranges are for the integer precisions only.
    wrong = uform(cli, "encode", "--model", init_model, "--output-precision", "int8", "--calibration", ranges,
                  stdin="a\n", check=False)
    assert wrong.returncode != 0 and "holds ranges of width 64; the embeddings are 128 wide" in wrong.stderr
    wrong = uform(cli, "encode", "--model", init_model, "--output-precision", "binary", "--calibration", ranges,
                  stdin="a\n", check=False)
    assert wrong.returncode != 0 and "takes none" in wrong.stderr
    wrong = uform(cli, "encode", "--model", init_model, "--output-precision", "int4", stdin="a\n", check=False)
    assert wrong.returncode == 2 and "not 'int4'" in wrong.stderr
    assert "--output-precision" in uform(cli, "encode", "--help").stdout and "--output" in uform(cli, "calibrate", "--help").stdout


def test_cli_float32_is_unchanged(cli, init_model):
    stdin = "\n".join(LINES) + "\n"
    plain = uform(cli, "encode", "--model", init_model, "--width", 64, stdin=stdin).stdout
    assert uform(cli, "encode", "--model", init_model, "--width", 64, "--output-precision", "float32", stdin=stdin).stdout == plain


# ---- uform_eval ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def evaluator():
    path = BUILD / "uform_eval"
    if not path.exists():
        pytest.fail(f"{path} is missing: build uform_eval", pytrace=False)
    return path


def test_eval_rows_at_every_output_precision(evaluator, library, init_model, tmp_path):
    records = [{"query": f"{topic} ({index})", "positives": [f"{topic.upper()} #{index % 5}"]}
               for index, topic in enumerate(TOPICS * 2)]
    queries = [record["query"] for record in records]
    positives = [record["positives"][0] for record in records]
    count = len(records)
    plain = evaluate(evaluator, tmp_path, records, init_model, "--no-tfidf")
    report = evaluate(evaluator, tmp_path, records, init_model, "--no-tfidf", "--output-precision", "all")
    with library.open(str(init_model)) as model:
        widths = model.config().widths
        full_queries, _ = model.encode([text.encode() for text in queries])
        full_positives, _ = model.encode([text.encode() for text in positives])
    for width in widths:
        def prefix(matrix):
            cut = matrix[:, :width].astype(np.float64)
            return (cut / np.linalg.norm(cut, axis=1, keepdims=True)).astype(np.float32)
        sides = [prefix(full_queries), prefix(full_positives)]
        minimums, maximums = sides[1].min(axis=0), sides[1].max(axis=0)  # calibrated on the positives
        for direction, rows_side, groups in (("query->positive", 0, text_ids(positives)), ("positive->query", 1, text_ids(queries))):
            assert row(report, "model", direction, width) == row(plain, "model", direction, width)  # float32: today's rows
            for precision in OUTPUT_PRECISIONS[1:]:
                got = row(report, f"model-{precision}", direction, width)
                assert got["output_precision"] == precision
                quantized = [reference_quantize(side, precision, minimums, maximums) for side in sides]
                if precision in ("int8", "uint8"):
                    centred = [q.astype(np.int64) - (128 if precision == "uint8" else 0) for q in quantized]
                    scores = centred[rows_side] @ centred[1 - rows_side].T
                else:
                    bits = [np.unpackbits(q.view(np.uint8), axis=1).astype(np.int64) for q in quantized]
                    scores = -(bits[rows_side][:, None, :] != bits[1 - rows_side][None, :, :]).sum(axis=2)
                wanted = averaged([expected_metrics(list(scores[i]), i, groups) for i in range(count)])
                for key, value in wanted.items():
                    assert got[key] == pytest.approx(value, abs=2e-5), (width, direction, precision, key)
            # binary and ubinary score alike by construction: their bytes differ by the top bit on both sides.
            for first, second in (("binary", "ubinary"),):
                left, right = row(report, f"model-{first}", direction, width), row(report, f"model-{second}", direction, width)
                assert {k: v for k, v in left.items() if k not in ("method", "output_precision")} == \
                       {k: v for k, v in right.items() if k not in ("method", "output_precision")}


def test_eval_output_precision_flags(evaluator, init_model, tmp_path):
    records = [{"query": topic, "positives": [topic]} for topic in TOPICS]
    report = evaluate(evaluator, tmp_path, records, init_model, "--no-tfidf", "--output-precision", "binary")
    assert {entry["method"] for entry in report["rows"]} == {"chance", "model-binary"}
    # A query identical to its positive has Hamming distance 0 to it, the most a score can be.
    for entry in report["rows"]:
        if entry["method"] == "model-binary":
            assert entry["recall@10"] == 1.0
    pairs = tmp_path / "pairs.jsonl"
    for flag, message in ((["--output-precision", "int4"], "not 'int4'"), (["--output-precision", "int8,int8"], "twice"),
                          (["--output-precision", "int8", "--no-tfidf"], "needs a CHECKPOINT")):
        arguments = [init_model] if "CHECKPOINT" not in message else []
        run = subprocess.run([str(evaluator), *map(str, arguments), "--pairs", pairs, *flag], capture_output=True, text=True)
        assert run.returncode == 2 and message in run.stderr, run.stderr
