# test_reference.py: the C library against the float64 reference (reference.py), in both
# precisions, on a model from uform_model_init and one written from Python with sharp attention;
# the same checks must reject each planted control. Bounds and their derivation: bounds.py.
# Also a few properties of the reference itself, so that it is not trusted blindly.

import numpy as np
import pytest

import bounds
import reference
from conftest import built
from contract import PRECISIONS, check_forward, check_verbs
from uform_ctypes import Library

# ---------------------------------------------------------------------------------------------
# The reference's own properties
# ---------------------------------------------------------------------------------------------


def test_bf16_rounding_is_nearest_even():
    values = np.array([1.0, 1.0 + 2**-8, 1.0 + 3 * 2**-8, 1.0 + 2**-9, -(1.0 + 2**-8), 3.0e-3, 1.0 + 2**-8 + 2**-20])
    expected = np.array([1.0, 1.0, 1.0 + 2**-6, 1.0, -1.0, None, 1.0 + 2**-7], dtype=object)
    rounded = reference.round_bf16(values)
    for value, got, want in zip(values, rounded, expected):
        if want is not None:
            assert got == want, (value, got, want)
    assert abs(rounded[5] - 3.0e-3) <= 2**-8 * 3.0e-3  # half an ulp is at most 2^-8 relative


def test_e4m3_rounding_follows_the_format():
    """The reference's E4M3 against the format's definition, value by value: every finite code's
    value is kept, ties between neighbours go to the even code, past 448 saturates."""
    codes = [(sign, exponent, mantissa) for sign in (1, -1) for exponent in range(16) for mantissa in range(8)
             if (exponent, mantissa) != (15, 7)]
    values = sorted({sign * (mantissa / 8 * 2.0**-6 if exponent == 0 else (1 + mantissa / 8) * 2.0 ** (exponent - 7))
                     for sign, exponent, mantissa in codes})
    assert len(values) == 253 and max(values) == 448.0  # 254 finite codes, +0 and -0 one value
    np.testing.assert_array_equal(reference.round_e4m3(np.array(values)), values)
    positive = [v for v in values if v >= 0]
    for index, (low, high) in enumerate(zip(positive, positive[1:])):
        middle = (low + high) / 2
        even = low if index % 2 == 0 else high  # codes alternate even, odd in order of value
        assert reference.round_e4m3(middle) == even, (low, high)
        assert reference.round_e4m3(np.nextafter(middle, 0)) == low and reference.round_e4m3(np.nextafter(middle, 1e9)) == high
    assert reference.round_e4m3(464.0) == 448.0 and reference.round_e4m3(-1e6) == -448.0


def test_int8_rounding_is_nearest_even_and_clamped():
    """The reference's int8 rounding: integers kept, halves to the even neighbour, past 127 clamped."""
    np.testing.assert_array_equal(reference.round_int8(np.arange(-127, 128)), np.arange(-127, 128))
    halves = np.arange(-127, 127) + 0.5
    np.testing.assert_array_equal(reference.round_int8(halves), np.where(np.floor(halves) % 2 == 0, np.floor(halves), np.ceil(halves)))
    assert reference.round_int8(127.6) == 127 and reference.round_int8(-1e6) == -127 and reference.round_int8(0.49999) == 0


def test_int8_weight_codes_span_the_row():
    """Each row's largest magnitude maps to +-127 exactly, a zero row keeps scale 1."""
    weight = np.random.default_rng(3).normal(size=(5, 40)).astype(np.float32)
    weight[2] = 0
    codes, scales = reference.int8_weight(weight)
    assert np.all(np.max(np.abs(codes), axis=1)[[0, 1, 3, 4]] == 127) and scales[2] == 1 and np.all(codes[2] == 0)


def test_mrope_with_equal_coordinates_is_plain_rope():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(5, 2, 64))
    index = np.arange(5)
    rotated = reference.mrope(x, reference.rope_angles(np.stack([index] * 3, axis=1)))
    # 1D RoPE as complex multiplication: (x_j + i x_{j+32}) * exp(i p 10000^(-j/32)).
    complex_x = x[..., :32] + 1j * x[..., 32:]
    phase = np.exp(1j * index[:, None, None] * 10000.0 ** (-np.arange(32) / 32))
    expected = complex_x * phase
    np.testing.assert_allclose(rotated[..., :32], expected.real, atol=1e-12)
    np.testing.assert_allclose(rotated[..., 32:], expected.imag, atol=1e-12)


def test_mrope_axes_are_slots_0_8_20():
    angles = reference.rope_angles(np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1]]))
    assert np.all(angles[0, :8] != 0) and np.all(angles[0, 8:] == 0)
    assert np.all(angles[1, 8:20] != 0) and np.all(angles[1, :8] == 0) and np.all(angles[1, 20:] == 0)
    assert np.all(angles[2, 20:] != 0) and np.all(angles[2, :20] == 0)


def test_reference_is_shift_invariant_and_segment_local(python_model):
    model = reference.load_model(python_model)
    values = np.array([72, 105, 33, 256, 10, 200, 7])
    positions = np.stack([np.arange(7) * 2, np.arange(7) % 3, np.arange(7) // 3], axis=1)
    h = reference.encode_segment(model, values, positions)
    shifted = reference.encode_segment(model, values, positions + np.array([40, 7, 3]))
    np.testing.assert_allclose(shifted, h, rtol=1e-9, atol=1e-9)  # rotary depends on differences only
    moved = reference.encode_segment(model, values, positions[:, [0, 2, 1]])
    assert np.linalg.norm(moved - h) > 1e-3 * np.linalg.norm(h)  # the h and w axes both matter


def test_zero_pool_query_is_mean_pooling(python_model):
    model = reference.load_model(python_model)
    h = np.random.default_rng(2).normal(size=(9, model.width))
    model.tensors = dict(model.tensors, **{"pool.query": np.zeros(model.width)})
    np.testing.assert_allclose(reference.pool_segment(model, h), h.mean(axis=0) @ model.tensors["pool.proj"].T, rtol=1e-12)


# ---------------------------------------------------------------------------------------------
# The C library against the reference
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("precision", ["f32", "bf16"])
def test_forward_matches_reference(library, any_model, precision):
    ok, report = check_forward(library, any_model, precision)
    print(report)
    assert ok, report


@pytest.mark.parametrize("precision", ["e4m3", "int8"])
def test_narrow_forward_matches_reference_with_each_kernel_table(cpu_library, any_model, precision):
    """E4M3 or int8 (the blocks' products narrowed with row scales) against that precision's
    reference, each table."""
    kernels, library = cpu_library
    ok, report = check_forward(library, any_model, precision)
    print(report)
    assert ok, f"{kernels}: {report}"


def test_narrow_planted_controls_are_rejected_with_each_kernel_table(narrow_plant, python_model, init_model):
    """E4M3: a code decoded with the wrong exponent bias, or an input row's scale dropped. int8: the
    +128 correction dropped, a weight row's scale dropped, the weights rounded toward zero, or a key's
    scale dropped from attention's scores. Both models see each."""
    precision, name, kernels, planted = narrow_plant
    for model in (python_model, init_model):
        ok, report = check_forward(planted, model, precision)
        print(report)
        assert not ok, f"the {precision} forward check accepted the planted {name} under {kernels}:\n{report}"


def test_narrow_plants_leave_bf16_alone(narrow_plant, python_model):
    """The controls break only their precision's path: BF16 through the same copies still passes."""
    precision, name, kernels, planted = narrow_plant
    ok, report = check_forward(planted, python_model, "bf16")
    assert ok, f"{name} under {kernels} broke BF16:\n{report}"


@pytest.mark.parametrize("precision", ["f32", "bf16"])
def test_text_verbs_match_reference(library, any_model, precision):
    ok, report = check_verbs(library, any_model, precision)
    print(report)
    assert ok, report


def test_masked_ids_logits_match_reference(library, python_model):
    """uform_mlm_logits on ids holding MASK, in Float32 mode, within B_f32 of the reference."""
    model = reference.load_model(python_model)
    ids = np.frombuffer(b"masked byte modelling", dtype=np.uint8).astype(np.uint16)
    ids[[2, 3, 4, 12]] = reference.MASK
    positions = reference.text_positions(len(ids))
    expected = reference.mlm_cells(model, reference.encode_segment(model, ids, positions))
    expected_bf16 = reference.mlm_cells(model, reference.encode_segment(model, ids, positions, True), True)
    with library.open(python_model) as handle:
        handle.set_precision(PRECISIONS["f32"])
        logits = handle.mlm_logits(ids)
    limit = bounds.bound_f32(expected, expected_bf16, model.width, len(ids), len(ids))
    error = bounds.relative_error(logits, expected)
    assert error <= limit, f"error {error:.3e} > bound {limit:.3e}"


# ---------------------------------------------------------------------------------------------
# Each BF16 kernel table this CPU runs (kernels.h), pinned by UFORM_CPU, against the same bounds:
# the tables differ only in the order of Float32 accumulation of exact BF16 x BF16 products, which
# bounds.bound_bf16 already allows (its B_f32 term covers any order of a depth-K sum).
# ---------------------------------------------------------------------------------------------


def test_bf16_forward_matches_reference_with_each_kernel_table(cpu_library, any_model):
    kernels, library = cpu_library
    ok, report = check_forward(library, any_model, "bf16")
    print(report)
    assert ok, f"{kernels}: {report}"


def test_bf16_text_verbs_match_reference_with_each_kernel_table(cpu_library, python_model):
    kernels, library = cpu_library
    ok, report = check_verbs(library, python_model, "bf16")
    print(report)
    assert ok, f"{kernels}: {report}"


def test_planted_last_pair_is_rejected_with_each_kernel_table(cpu_plant, python_model, init_model):
    """The control's products skip their last depth pair, in every table: both models must see it."""
    kernels, planted = cpu_plant
    for model in (python_model, init_model):
        ok, report = check_forward(planted, model, "bf16")
        print(report)
        assert not ok, f"the BF16 forward check accepted the planted last-pair control under {kernels}:\n{report}"


# ---------------------------------------------------------------------------------------------
# Planted controls: each carries one deliberate bug, and the checks above must reject it
# ---------------------------------------------------------------------------------------------


def test_planted_control_is_rejected_in_float32(plant, python_model):
    name, planted = plant
    ok, report = check_forward(planted, python_model, "f32")
    print(report)
    assert not ok, f"the Float32 forward check accepted the planted control {name}:\n{report}"


def test_planted_control_is_rejected_in_bf16(plant, python_model):
    name, planted = plant
    ok, report = check_forward(planted, python_model, "bf16")
    print(report)
    assert not ok, f"the BF16 forward check accepted the planted control {name}:\n{report}"


@pytest.mark.parametrize("precision", ["f32", "bf16"])
def test_planted_query_side_maxsim_is_rejected_by_the_verbs_check(any_model, precision):
    """The control's symmetric MaxSim always reads the query's side: the verbs check must see it, in
    symmetric MaxSim, in the fused score built on it and in uform_maxsim over stored vectors, and nowhere else."""
    planted = Library(built("libuform_plant_maxsim_query_side.so"))
    ok, report = check_verbs(planted, any_model, precision)
    print(report)
    assert not ok, f"the verbs check accepted the query-side MaxSim control:\n{report}"
    failed = [line for line in str(report).splitlines() if line.startswith("FAIL")]
    assert all("rerank_symmetric" in line or "rerank_fused" in line or "maxsim symmetric vectors" in line for line in failed), \
        f"the control broke more than its MaxSim:\n{report}"
    for verb in ("rerank_symmetric", "rerank_fused", "maxsim symmetric vectors"):
        assert any(verb in line for line in failed), f"the control passed {verb}:\n{report}"


def test_planted_control_is_rejected_on_an_init_model(plant, init_model):
    name, planted = plant
    results = [check_forward(planted, init_model, precision) for precision in ("f32", "bf16")]
    assert not all(ok for ok, _ in results), f"both checks accepted {name} on the init model:\n" + "\n".join(r for _, r in results)
