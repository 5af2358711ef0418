# test_e4m3_scales.py: the per-tensor E4M3 input bounds of reference.E4m3Bounded (the GPU's
# UFORM_CUDA_E4M3=tensor; docs/precision.md, "The scaling scheme, by measurement") hold on a model with
# random norm gains, for random texts and for the inputs that come nearest each norm's bound; a copy
# of the bounds at a quarter must be exceeded (the check can fail); "e4m3-tensor" runs those products.
# With attention=True, attention's q, k and v bounds hold the same way (an eighth of them exceeded),
# and only attention's products round besides. With gate_up=True, gate_up's output bound holds the same
# way, and only that output rounds besides.
import numpy as np

import reference


def shares(model, products, texts):
    """Each product kind's largest |input| / bound over the texts' encodes, through `products`."""
    for text in texts:
        values = np.frombuffer(text, dtype=np.uint8).astype(np.int64)
        reference.encode_segment(model, values, reference.text_positions(len(values)), products)
    return products.seen


def random_texts(count, seed=3):
    rng = np.random.default_rng(seed)
    return [bytes(rng.integers(0, 256, size=int(n), dtype=np.uint8)) for n in rng.integers(8, 80, size=count)]


def test_bounds_hold_and_a_quartered_copy_is_exceeded(python_model):
    model = reference.load_model(str(python_model))
    texts = random_texts(12)
    seen = shares(model, reference.E4m3Bounded(model), texts)
    assert set(seen) == {"qkv", "out", "gate_up", "down"}
    assert all(0 < share <= 1 for share in seen.values()), seen
    quartered = reference.E4m3Bounded(model)
    quartered.bounds = {key: (bound / 4, name) for key, (bound, name) in quartered.bounds.items()}
    assert max(shares(model, quartered, texts).values()) > 1


def test_a_norms_bound_is_reached_by_one_large_value(python_model):
    """x with all its weight on the column of the largest gain: y there is sqrt(d) g (1 - O(eps)), the bound."""
    model = reference.load_model(str(python_model))
    bounds = reference.e4m3_input_bounds(model)
    d = model.width
    for block in range(model.depth):
        for norm, product in (("attn_norm", "qkv"), ("mlp_norm", "gate_up")):
            gain = model.tensors[f"blocks.{block}.{norm}"]
            x = np.zeros((1, d))
            x[0, np.argmax(np.abs(gain))] = 1e3
            bound, name = bounds[id(model.tensors[f"blocks.{block}.{product}"])]
            share = np.max(np.abs(reference.rmsnorm(x, gain))) / bound
            assert name == product and 0.999 < share <= 1, (block, norm, share)


def test_the_tensor_mode_runs_bounded_products(python_model):
    """"e4m3-tensor" is E4m3Bounded's products (one scale a matrix): not the row scheme, and within a few
    E4M3 roundings of Float64, as the row scheme is."""
    model = reference.load_model(str(python_model))
    weight = model.tensors["blocks.0.gate_up"]
    x = np.random.default_rng(5).standard_normal((7, model.width)) * np.array([1e-3, 1, 30, 1, 1, 1, 1])[:, None]
    row = reference.E4m3Bounded(model, "row")(x, weight)
    assert not np.array_equal(reference.E4m3Bounded(model)(x, weight), row)
    # rows whose largest value is the bound: their own scale is the bound's, so the row-scaled weights'
    # products are the reference's E4M3 product (row scales on both sides) exactly
    bound, _ = reference.e4m3_input_bounds(model)[id(weight)]
    at_bound = x / np.max(np.abs(x), axis=1, keepdims=True) * bound
    assert np.array_equal(reference.E4m3Bounded(model, "row")(at_bound, weight), reference.e4m3_product(at_bound, weight))
    values = np.frombuffer(random_texts(1, seed=7)[0], dtype=np.uint8).astype(np.int64)
    positions = reference.text_positions(len(values))
    f64, tensor, rows = (reference.encode_segment(model, values, positions, mode) for mode in (False, "e4m3-tensor", "e4m3"))
    bounded = reference.encode_segment(model, values, positions, reference.E4m3Bounded(model))
    assert np.array_equal(tensor, bounded)
    error = lambda h: np.linalg.norm(h - f64) / np.linalg.norm(f64)  # noqa: E731
    assert 0 < error(tensor) < 4 * error(rows) and 0 < error(rows), (error(tensor), error(rows))


def test_attention_bounds_hold_and_an_eighth_is_exceeded(python_model):
    """E4m3Bounded(attention=True): q and k after rotation and v stay within e4m3_attention_bounds over random
    texts (so their E4M3 codes never saturate); the same bounds at an eighth are exceeded (random texts
    reach about a sixth of them: the bounds leave two to three binades unused at the top)."""
    model = reference.load_model(str(python_model))
    texts = random_texts(12)
    seen = shares(model, reference.E4m3Bounded(model, attention=True), texts)
    assert {"q", "k", "v"} <= set(seen) and all(0 < seen[name] <= 1 for name in "qkv"), seen
    eighth = reference.E4m3Bounded(model, attention=True)
    eighth.attention = [tuple(bound / 8 for bound in bounds) for bounds in eighth.attention]
    assert max(shares(model, eighth, texts)[name] for name in "qkv") > 1


def moved_from_products(model, seed, **options):
    """(moved, the products' own error, (values, positions), the products' h, the scheme's h): one random text's
    states under E4m3Bounded(**options) against the bounded products' alone, both relative to Float64's norm."""
    values = np.frombuffer(random_texts(1, seed=seed)[0], dtype=np.uint8).astype(np.int64)
    positions = reference.text_positions(len(values))
    f64 = reference.encode_segment(model, values, positions, False)
    products = reference.encode_segment(model, values, positions, reference.E4m3Bounded(model))
    rounded = reference.encode_segment(model, values, positions, reference.E4m3Bounded(model, **options))
    error = np.linalg.norm(products - f64) / np.linalg.norm(f64)
    return np.linalg.norm(rounded - products) / np.linalg.norm(f64), error, (values, positions), products, rounded


def test_fp8_attention_rounds_attention_and_nothing_else(python_model):
    """With attention=True the embeddings move from the bounded products' alone (attention's products now round),
    by no more than the products' own E4M3 error does; with every attention rounding the identity they
    are the bounded products' bit for bit."""
    model = reference.load_model(str(python_model))
    moved, error, text, products, _ = moved_from_products(model, 9, attention=True)
    assert 0 < moved < 2 * error, (moved, error)
    identity = reference.E4m3Bounded(model, attention=True)
    identity.attention_inputs = lambda block, q, k, v: (q, k, v)
    identity.attention_weights = reference.round_bf16  # the BF16 weights of the products-only mode
    assert np.array_equal(reference.encode_segment(model, *text, identity), products)


def test_gate_up_output_bounds_hold_and_an_eighth_is_exceeded(python_model):
    """E4m3Bounded(gate_up=True): gate_up's output stays within e4m3_gate_up_bounds over random texts (its
    E4M3 codes never saturate), and the same bounds at an eighth are exceeded."""
    model = reference.load_model(str(python_model))
    texts = random_texts(12)
    seen = shares(model, reference.E4m3Bounded(model, gate_up=True), texts)
    assert 0 < seen["gate_up output"] <= 1, seen
    eighth = reference.E4m3Bounded(model, gate_up=True)
    eighth.gate_up = [bound / 8 for bound in eighth.gate_up]
    assert shares(model, eighth, texts)["gate_up output"] > 1


def test_e4m3_gate_up_rounds_the_output_and_nothing_else(python_model):
    """With gate_up=True the embeddings move from the bounded products' alone by no more than their own E4M3
    error; with the output's rounding the identity they are the bounded products' bit for bit; and the
    "e4m3-tensor-gate-up" mode is this scheme."""
    model = reference.load_model(str(python_model))
    moved, error, text, products, coded = moved_from_products(model, 11, gate_up=True)
    assert 0 < moved < 2 * error, (moved, error)
    identity = reference.E4m3Bounded(model, gate_up=True)
    identity.gate_up_output = lambda block, gate_up: gate_up
    assert np.array_equal(reference.encode_segment(model, *text, identity), products)
    assert np.array_equal(reference.encode_segment(model, *text, "e4m3-tensor-gate-up"), coded)


def bench_module():
    import pathlib
    import sys
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
    import e4m3_scales
    return e4m3_scales


def test_the_bench_recall_counts_ranks_and_ties():
    """bench/e4m3_scales.py's R@k: a right answer at rank r counts for k >= r; a tie with a wrong one counts against."""
    e4m3_scales = bench_module()

    scores = np.array([[0.9, 0.1, 0.2],   # right first
                       [0.5, 0.4, 0.6],   # right third
                       [0.3, 0.7, 0.7]])  # tied with a wrong one: second
    assert e4m3_scales.recall(scores, 1) == 1 / 3
    assert e4m3_scales.recall(scores, 2) == 2 / 3
    assert e4m3_scales.recall(scores, 3) == 1.0


def test_rows_into_out_and_down_scale_those_inputs_per_row(python_model):
    """The reference's mixed scheme (the GPU's UFORM_CUDA_E4M3=mixed, bench/e4m3_scales.py's tensor+rows): out's
    input scaled per row (by hand here), qkv's at its bound as the bounded scheme does; the control, the bounded
    scheme's own out product, differs from it."""
    model = reference.load_model(str(python_model))
    rows, bounded = reference.E4m3Bounded(model, "tensor", rows=True), reference.E4m3Bounded(model, "tensor")
    x = np.random.default_rng(5).normal(size=(4, model.width)) * np.array([[1e-3], [1.0], [10.0], [0.1]])
    out, qkv = model.tensors["blocks.0.out"], model.tensors["blocks.0.qkv"]
    codes, weight_scales = bounded.weight(out)
    scale = np.max(np.abs(x), axis=1, keepdims=True) / reference.E4M3_LARGEST
    by_hand = (reference.round_e4m3(x / scale) @ codes.T) * scale * weight_scales[None, :]
    np.testing.assert_array_equal(rows(x, out), by_hand)
    np.testing.assert_array_equal(rows(x, qkv), bounded(x, qkv))
    assert not np.array_equal(bounded(x, out), by_hand)


def test_the_bench_embeds_alike_on_workers(python_model):
    """bench/e4m3_scales.py's forked workers give each text the embedding one process gives it, in order; the
    control, the texts reversed, differs."""
    e4m3_scales = bench_module()
    model = reference.load_model(str(python_model))
    texts = ["a short text", "another, longer text with more bytes in it", "ß"]
    products = reference.E4m3Bounded(model, "tensor", rows=True)
    alone = e4m3_scales.embed_all(model, texts, products, 1)
    np.testing.assert_array_equal(e4m3_scales.embed_all(model, texts, products, 2), alone)
    assert not np.array_equal(e4m3_scales.embed_all(model, texts[::-1], products, 2), alone)
