# test_e4m3_scales.py: bench/e4m3_scales.py's per-tensor E4M3 input bounds (docs/precision.md, "The
# scaling scheme, by measurement") hold on a model with random norm gains, for random texts and for
# the inputs that come nearest each norm's bound; a copy of the bounds at a quarter must be exceeded
# (the check can fail); the bench's row scheme is reference.e4m3_product.
import importlib.util
import pathlib

import numpy as np

import reference

ROOT = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("e4m3_scales", ROOT / "bench" / "e4m3_scales.py")
e4m3_scales = importlib.util.module_from_spec(spec)
spec.loader.exec_module(e4m3_scales)


def shares(model, products, texts):
    """Each product kind's largest |input| / bound over the texts' encodes, through `products`."""
    original = reference._Rounding.__init__

    def init(self, bf16_inputs):
        original(self, True)
        self.narrow = products

    reference._Rounding.__init__ = init
    try:
        for text in texts:
            values = np.frombuffer(text, dtype=np.uint8).astype(np.int64)
            reference.encode_segment(model, values, reference.text_positions(len(values)), True)
    finally:
        reference._Rounding.__init__ = original
    return products.seen


def test_bounds_hold_and_a_quartered_copy_is_exceeded(python_model):
    model = reference.load_model(str(python_model))
    rng = np.random.default_rng(3)
    texts = [bytes(rng.integers(0, 256, size=int(n), dtype=np.uint8)) for n in rng.integers(8, 80, size=12)]
    seen = shares(model, e4m3_scales.Products(model, "tensor"), texts)
    assert set(seen) == {"qkv", "out", "gate_up", "down"}
    assert all(0 < share <= 1 for share in seen.values()), seen
    quartered = e4m3_scales.Products(model, "tensor")
    quartered.bounds = {key: (bound / 4, name) for key, (bound, name) in quartered.bounds.items()}
    assert max(shares(model, quartered, texts).values()) > 1


def test_a_norms_bound_is_reached_by_one_large_value(python_model):
    """x with all its weight on the column of the largest gain: y there is sqrt(d) g (1 - O(eps)), the bound."""
    model = reference.load_model(str(python_model))
    products = e4m3_scales.Products(model, "tensor")
    d = model.width
    for block in range(model.depth):
        for norm, product in (("attn_norm", "qkv"), ("mlp_norm", "gate_up")):
            gain = model.tensors[f"blocks.{block}.{norm}"]
            x = np.zeros((1, d))
            x[0, np.argmax(np.abs(gain))] = 1e3
            bound, name = products.bounds[id(model.tensors[f"blocks.{block}.{product}"])]
            share = np.max(np.abs(reference.rmsnorm(x, gain))) / bound
            assert name == product and 0.999 < share <= 1, (block, norm, share)


def test_the_row_scheme_is_the_references_e4m3_product(python_model):
    model = reference.load_model(str(python_model))
    weight = model.tensors["blocks.0.gate_up"]
    x = np.random.default_rng(5).standard_normal((7, model.width)) * np.array([1e-3, 1, 30, 1, 1, 1, 1])[:, None]
    expected = reference.e4m3_product(x, weight)
    assert np.array_equal(e4m3_scales.Products(model, "row")(x, weight), expected)
    assert not np.array_equal(e4m3_scales.Products(model, "tensor")(x, weight), expected)
