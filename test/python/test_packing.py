# test_packing.py: an item's outputs do not depend on what else shares its row or where it sits:
# encoded alone, packed with others by uform_encode, or placed at another row and column of a grid
# by uform_forward, its embedding agrees within rounding. Two C results for one item are each
# within their own bound of the exact one, so they agree within twice it (bounds.py).

import numpy as np
import pytest

import bounds
import reference
from contract import PRECISIONS
from grids import GridBuilder, random_bytes

TEXTS = [
    b"x",
    b"packing many texts into one row",
    "naïve café — ünïcödé".encode(),
    bytes(range(200, 256)),
    b"0123456789" * 3,
    b"short",
    b"\x00\x01\x02 binary \xff\xfe",
    b"the last one, a little longer than the others so that rows fill up",
]


@pytest.fixture(scope="module")
def references(python_model):
    model = reference.load_model(python_model)
    return model, [(reference.encode_text(model, text), reference.encode_text(model, text, True)) for text in TEXTS]


def between_runs(precision, model, f64, bf16, length):
    return bounds.bound_between_runs(precision == "bf16", f64, bf16, model.width, length, length)


@pytest.mark.parametrize("precision", ["f32", "bf16"])
def test_encode_alone_equals_encode_packed(library, python_model, references, precision):
    model, expected = references
    widest = model.embedding_widths[-1]
    with library.open(python_model) as handle:
        handle.set_precision(PRECISIONS[precision])
        packed, truncated = handle.encode(TEXTS)
        alone = [handle.encode([text])[0][0] for text in TEXTS]
        reversed_order = handle.encode(TEXTS[::-1])[0][::-1]
    assert truncated == 0
    for index, text in enumerate(TEXTS):
        (_, e64), (_, e16) = expected[index]
        limit = between_runs(precision, model, reference.matryoshka(e64, widest), reference.matryoshka(e16, widest), len(text))
        for name, other in (("packed", packed[index]), ("packed in reverse", reversed_order[index])):
            error = bounds.relative_error(other, alone[index])
            assert error <= limit, f"text {index} {name}: error {error:.3e} > bound {limit:.3e}"


@pytest.mark.parametrize("precision", ["f32", "bf16"])
def test_forward_placement_does_not_matter(library, python_model, references, precision):
    """Text 1 at row 0 column 0 alone, then at row 2 column 37 between two other segments."""
    model, expected = references
    text = np.frombuffer(TEXTS[1], dtype=np.uint8)
    (h64, e64), (h16, e16) = expected[1]
    rng = np.random.default_rng(5)
    with library.open(python_model) as handle:
        handle.set_precision(PRECISIONS[precision])
        columns = handle.config().columns
        alone = GridBuilder(1, columns)
        alone.place(0, 0, text, reference.text_positions(len(text)), 0)
        first = handle.forward(*alone.arrays())
        crowded = GridBuilder(3, columns)
        crowded.place(0, 0, random_bytes(rng, columns), reference.text_positions(columns), 0)
        crowded.place(2, 0, random_bytes(rng, 37), reference.text_positions(37), 3)
        crowded.place(2, 37, text, reference.text_positions(len(text)), 1)
        crowded.place(2, 37 + len(text), random_bytes(rng, 20), reference.text_positions(20), 2)
        second = handle.forward(*crowded.arrays())
    assert first.segments == 1 and second.segments == 4
    length = max(columns, len(text))
    span = slice(37, 37 + len(text))
    pairs = {
        "hidden": (first.hidden[0, : len(text)], second.hidden[2, span], h64, h16),
        "pooled": (first.pooled[0], second.pooled[2], e64, e16),
    }
    for name, (here, there, f64, bf16) in pairs.items():
        limit = between_runs(precision, model, f64, bf16, length)
        error = bounds.relative_error(there, here)
        assert error <= limit, f"{name}: error {error:.3e} > bound {limit:.3e}"


@pytest.mark.parametrize("precision", ["f32", "bf16"])
def test_encode_equals_forward_pool(library, python_model, references, precision):
    """uform_encode's width-m embedding is normalize(e[:m]) of the grid pass's pooled e."""
    model, expected = references
    text = np.frombuffer(TEXTS[2], dtype=np.uint8)
    (_, e64), (_, e16) = expected[2]
    with library.open(python_model) as handle:
        handle.set_precision(PRECISIONS[precision])
        grid = GridBuilder(1, handle.config().columns)
        grid.place(0, 0, text, reference.text_positions(len(text)), 0)
        pooled = handle.forward(*grid.arrays(), heads=("pooled",)).pooled[0]
        for width in model.embedding_widths:
            encoded = handle.encode([TEXTS[2]], width)[0][0]
            limit = between_runs(precision, model, reference.matryoshka(e64, width), reference.matryoshka(e16, width), len(text))
            error = bounds.relative_error(encoded, reference.matryoshka(pooled, width))
            assert error <= limit, f"width {width}: error {error:.3e} > bound {limit:.3e}"
            assert abs(np.linalg.norm(encoded) - 1.0) <= 4 * width * bounds.UNIT_F32


def test_text_longer_than_a_row_is_cut(library, python_model):
    """A text longer than a row is cut to the row and counted; it embeds as its first row of bytes."""
    model = reference.load_model(python_model)
    with library.open(python_model) as handle:
        handle.set_precision(PRECISIONS["f32"])
        columns = handle.config().columns
        long_text = bytes(random_bytes(np.random.default_rng(9), columns + 17, 0).astype(np.uint8))
        embeddings, truncated = handle.encode([b"before", long_text, b"after"])
        head, head_truncated = handle.encode([long_text[:columns]])
    assert truncated == 1 and head_truncated == 0
    _, e64 = reference.encode_text(model, long_text[:columns])
    _, e16 = reference.encode_text(model, long_text[:columns], True)
    widest = model.embedding_widths[-1]
    limit = between_runs("f32", model, reference.matryoshka(e64, widest), reference.matryoshka(e16, widest), columns)
    assert bounds.relative_error(embeddings[1], head[0]) <= limit


def test_many_texts_fill_several_rows(library, python_model, references):
    """More bytes than a row holds: the packer must start new rows, and each text still embeds alone."""
    model, _ = references
    with library.open(python_model) as handle:
        handle.set_precision(PRECISIONS["f32"])
        columns = handle.config().columns
        texts = [TEXTS[index % len(TEXTS)] for index in range(4 * columns // 10)]
        packed, truncated = handle.encode(texts)
        alone = {text: handle.encode([text])[0][0] for text in TEXTS}
    assert truncated == 0
    for index, text in enumerate(texts):
        (_, e64), (_, e16) = references[1][TEXTS.index(text)]
        widest = model.embedding_widths[-1]
        limit = between_runs("f32", model, reference.matryoshka(e64, widest), reference.matryoshka(e16, widest), len(text))
        assert bounds.relative_error(packed[index], alone[text]) <= limit, f"text {index}"


def test_colbert_and_rerank_count_cut_texts(library, python_model):
    """uform_colbert gives min(length, columns) cells; uform_rerank counts every cut text, the query too."""
    with library.open(python_model) as handle:
        columns = handle.config().columns
        long_text = b"x" * (columns + 5)
        vectors = handle.colbert(long_text, capacity=columns)
        assert vectors.shape[0] == columns
        _, truncated = handle.rerank(long_text, [b"short", long_text, long_text + b"y"])
        assert truncated == 3
        _, truncated = handle.rerank(b"short query", [b"short", long_text])
        assert truncated == 1


@pytest.mark.parametrize("precision", ["f32", "bf16"])
def test_repeated_calls_are_bitwise_equal_and_threads_agree(library, python_model, references, precision):
    """The same call twice gives the same bits; one thread and two agree within rounding."""
    model, expected = references
    with library.open(python_model) as handle:
        handle.set_precision(PRECISIONS[precision])
        first, _ = handle.encode(TEXTS)
        second, _ = handle.encode(TEXTS)
        handle.set_threads(1)
        single, _ = handle.encode(TEXTS)
        handle.set_threads(2)
        double, _ = handle.encode(TEXTS)
    assert np.array_equal(first.view(np.uint32), second.view(np.uint32))
    widest = model.embedding_widths[-1]
    for index, text in enumerate(TEXTS):
        (_, e64), (_, e16) = expected[index]
        limit = between_runs(precision, model, reference.matryoshka(e64, widest), reference.matryoshka(e16, widest), len(text))
        assert bounds.relative_error(single[index], double[index]) <= limit, f"text {index}"
