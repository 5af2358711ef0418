# test_gradients.py: the C trainer's loss and gradients (uform_trainer_gradients, Float32) against
# the float64 training reference (train_reference.py): for each objective (MLM, Matryoshka SigLIP,
# ranked sigmoid; TCR and Lipschitz on in some cases), on tiny models from uform_model_init
# ("64x2", "128x1") and ones written from Python with random norm scales and pool query (one with
# the vision frontend, its batches holding image patches beside texts; one with the audio and video
# frontends too, audio frames and video tubes beside texts), over
# packed grids with text-, image- and video-like coordinates: every part of the loss within its
# derived bound, and EVERY tensor's gradient against central finite differences of the float64
# loss along unit directions (the C gradient's own direction, random ones, its largest element,
# random elements). The planted controls (a dropped RMSNorm backward term, a transposed
# blocks.{i}.out gradient, a tube's frames swapped, an audio frame read a sample late) must be
# rejected by the same check. Check: train_contract.py; bounds
# and their derivation: train_bounds.py. First, properties of the reference itself.

import math

import numpy as np
import pytest

import reference
import train_contract as tc
import train_reference as tr
from conftest import built
from uform_ctypes import Library

# ---------------------------------------------------------------------------------------------
# The reference's own properties
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def python_64x2(train_checkpoints):
    model = reference.load_model(train_checkpoints["python_64x2"])
    return model.config, dict(model.tensors)


def test_mlm_loss_with_a_zero_head_is_log_vocabulary(python_64x2):
    config, params = python_64x2
    params = dict(params, **{"mlm.head": np.zeros_like(params["mlm.head"])})
    losses = tr.batch_losses(config, params, tc.mlm_batch(1), tr.Objective(tr.OBJECTIVE_MLM))
    assert abs(losses.mlm - math.log(reference.VOCABULARY)) < 1e-12
    assert losses.scored == int(np.sum(tc.mlm_batch(1).targets >= 0))


def test_mlm_loss_is_the_mean_cross_entropy(python_64x2):
    """Against a direct per-cell computation through reference.forward's logits."""
    config, params = python_64x2
    batch = tc.mlm_batch(2)
    outputs = reference.forward(reference.Model(config, params), batch.kinds, batch.values, batch.segments, batch.positions)
    cells = np.argwhere(batch.targets >= 0)
    entropies = []
    for row, column in cells:
        logits = outputs.logits[row, column]
        p = np.exp(logits - logits.max())
        p /= p.sum()
        entropies.append(-math.log(p[batch.targets[row, column]]))
    losses = tr.batch_losses(config, params, batch, tr.Objective(tr.OBJECTIVE_MLM))
    assert abs(losses.mlm - np.mean(entropies)) < 1e-12


def test_siglip_loss_by_hand(python_64x2):
    """One width: -(1/A) sum log sigmoid(y z) written out with explicit loops."""
    config, params = python_64x2
    batch = tc.pairs_batch(3)
    outputs = reference.forward(reference.Model(config, params), batch.kinds, batch.values, batch.segments, batch.positions)
    scale, bias = math.exp(params["siglip.scale"]), float(params["siglip.bias"])
    per_width = []
    for width in config["embedding_widths"]:
        total = 0.0
        for i, a in enumerate(batch.anchors):
            for j, c in enumerate(batch.candidates):
                z = scale * float(reference.matryoshka(outputs.pooled[a], width) @ reference.matryoshka(outputs.pooled[c], width)) + bias
                y = 1.0 if batch.labels[i, j] else -1.0
                total -= math.log(1.0 / (1.0 + math.exp(-y * z)))
        per_width.append(total / len(batch.anchors))
    losses = tr.batch_losses(config, params, batch, tr.Objective(tr.OBJECTIVE_CONTRASTIVE))
    assert abs(losses.siglip - np.mean(per_width)) < 1e-10 * max(1.0, abs(losses.siglip))


def test_rerank_loss_uses_maxsim_over_anchor_cells(python_64x2):
    config, params = python_64x2
    batch = tc.pairs_batch(4)
    outputs = reference.forward(reference.Model(config, params), batch.kinds, batch.values, batch.segments, batch.positions)
    scale, bias = math.exp(params["siglip.scale"]), float(params["siglip.bias"])
    vectors = [outputs.colbert[row, start : start + length] for row, start, length in outputs.segments]
    z = np.array([[scale * reference.maxsim(vectors[a], vectors[c]) / len(vectors[a]) + bias for c in batch.candidates]
                  for a in batch.anchors])
    expected = tr.sigmoid_loss(z, batch.labels)
    losses = tr.batch_losses(config, params, batch, tr.Objective(tr.OBJECTIVE_RERANK))
    assert abs(losses.rerank - expected) < 1e-12 * max(1.0, expected)


def test_coding_rate_from_eigenvalues():
    """R = 1/2 sum log(1 + a lambda_i), lambda_i the eigenvalues of Z^T Z (or of Z Z^T)."""
    Z = reference.normalize(np.random.default_rng(5).normal(size=(6, 64)))
    alpha = 64 / (6 * tr.TCR_EPSILON_SQUARED)
    expected = 0.5 * np.sum(np.log1p(alpha * np.linalg.eigvalsh(Z @ Z.T)))
    assert abs(tr.coding_rate(Z) - expected) < 1e-10


def test_power_iteration_reaches_the_top_eigenvalue():
    Z = reference.normalize(np.random.default_rng(6).normal(size=(7, 64)) + 1.0)
    S = Z.T @ Z / 7
    v = tr.power_vector(Z, 200)
    assert abs(v @ S @ v - np.linalg.eigvalsh(S)[-1]) < 1e-10
    v8 = tr.power_vector(Z, 8)
    assert v8 @ S @ v8 <= np.linalg.eigvalsh(S)[-1] + 1e-12  # a Rayleigh quotient never exceeds it


def test_sigmoid_loss_is_stable_for_large_logits():
    z = np.array([[800.0, -800.0]])
    assert tr.sigmoid_loss(z, np.array([[1, 0]])) == 0.0
    assert abs(tr.sigmoid_loss(z, np.array([[0, 1]])) - 1600.0) < 1e-9


def test_finite_difference_of_a_cubic():
    """D(h) of phi(s) = s^3 + 2 s at 0 is 2 + h^2; the truncation estimate |D(2h) - D(h)| / 3 is h^2."""
    params = {"x": np.array([0.0])}
    loss = lambda p: float(p["x"][0] ** 3 + 2 * p["x"][0])
    value, truncation = tc.finite_difference(loss, params, "x", np.array([1.0]), 1e-2)
    assert abs(value - (2 + 1e-4)) < 1e-12 and abs(truncation - 1e-4) < 1e-12


def test_lipschitz_frozen_vector_keeps_the_loss(python_64x2):
    """Freezing the power vector at theta changes nothing at theta itself."""
    config, params = python_64x2
    batch, objective = tc.pairs_batch(5), tr.Objective(tr.OBJECTIVE_CONTRASTIVE, lipschitz_lambda=1.0, lipschitz_iterations=8)
    assert tr.loss_function(config, batch, objective, params)(params) == tr.batch_losses(config, params, batch, objective).total


def test_adafactor_first_step_of_a_vector_is_sign_of_gradient():
    """At t = 1 with an unfactored V, V_hat = G^2 + 1e-30, so U = G / |G| (rms 1: no clipping)
    and W moves by lr * sign(G) (M_hat = U)."""
    optimizer = tr.Adafactor({"final_norm": (4,)})
    G = np.array([3.0, -2.0, 0.5, -1e-3])
    record = optimizer.step({"final_norm": np.ones(4)}, {"final_norm": G}, 0.1)["final_norm"]
    np.testing.assert_allclose(record.exact, 1.0 - 0.1 * np.sign(G), rtol=1e-12)


def test_adafactor_factored_moments_of_a_rank_one_gradient():
    """For G = a b^T, V_hat = R C^T / mean(R) is exactly G^2 (up to 1e-30), so |U| = 1."""
    optimizer = tr.Adafactor({"blocks.0.out": (3, 4)})
    G = np.outer([1.0, -2.0, 0.5], [0.3, 1.0, -4.0, 2.0])
    record = optimizer.step({"blocks.0.out": np.zeros((3, 4))}, {"blocks.0.out": G}, 1.0)["blocks.0.out"]
    np.testing.assert_allclose(np.abs(record.update), 1.0, rtol=1e-9)


def test_schedule_shape():
    rates = [tr.learning_rate(t, 1.0, 2, 10) for t in range(1, 11)]
    assert rates[:2] == [0.5, 1.0] and abs(rates[-1]) < 1e-15 and all(a >= b for a, b in zip(rates[1:], rates[2:]))
    assert tr.learning_rate(7, 1.0, 2, 0) == 1.0


@pytest.mark.parametrize("case_name", [case.name for case in tc.CASES if case.objective.objective == tr.OBJECTIVE_RERANK])
def test_rerank_data_has_no_maxsim_ties(train_checkpoints, case_name):
    """max is not differentiable at ties: every anchor cell's best cosine beats the second best
    by far more than a finite-difference step moves it."""
    side = tc.cached_reference(train_checkpoints[tc.CASES_BY_NAME[case_name].checkpoint], case_name)
    assert side.min_gap > 1e-4, side.min_gap


# ---------------------------------------------------------------------------------------------
# The C trainer against the reference
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case_name", [case.name for case in tc.CASES])
def test_gradients_match_reference(library, train_checkpoints, case_name):
    directory = train_checkpoints[tc.CASES_BY_NAME[case_name].checkpoint]
    ok, report = tc.check_gradients(library, directory, case_name)
    print(report)
    assert ok, report


# ---------------------------------------------------------------------------------------------
# Planted controls: the same check must reject them
# ---------------------------------------------------------------------------------------------

PLANT_CASES = ["mlm init 64x2", "rerank python 64x2"]
# The tensors whose gradients each plant must be seen to break.
PLANT_TENSORS = {"rmsnorm_backward": ("blocks.0.attn_norm", "embed.bytes"), "transposed_gradient": ("blocks.0.out",)}


@pytest.mark.parametrize("case_name", PLANT_CASES)
def test_planted_control_is_rejected(train_plant, train_checkpoints, case_name):
    name, planted = train_plant
    directory = train_checkpoints[tc.CASES_BY_NAME[case_name].checkpoint]
    ok, report = tc.check_gradients(planted, directory, case_name)
    print(report)
    assert not ok, f"the gradient check accepted the planted control {name}:\n{report}"
    for tensor in PLANT_TENSORS[name]:
        assert f"FAIL gradient {tensor}:" in report, f"{name}: {tensor}'s gradient was not rejected:\n{report}"


@pytest.mark.parametrize("case_name, part", [("contrastive weighted images python 64x2", "siglip"),
                                             ("rerank weighted python 64x2", "rerank")])
def test_planted_anchor_weights_control_is_rejected(train_checkpoints, case_name, part):
    """The anchors' loss weights ignored (every row at 1): the loss and the head's gradient move."""
    planted = Library(built("libuform_plant_anchor_weight_ignored.so"))
    ok, report = tc.check_gradients(planted, train_checkpoints[tc.CASES_BY_NAME[case_name].checkpoint], case_name)
    print(report)
    assert not ok, f"the gradient check accepted the planted control anchor_weight_ignored:\n{report}"
    assert f"FAIL loss {part}:" in report, report


def test_planted_patch_control_is_rejected(train_checkpoints):
    """Image patches read transposed: the loss and vision.patch's gradient move."""
    name, planted = "patch_transposed", Library(built("libuform_plant_patch_transposed.so"))
    case_name = "contrastive images python 64x2"
    ok, report = tc.check_gradients(planted, train_checkpoints[tc.CASES_BY_NAME[case_name].checkpoint], case_name)
    print(report)
    assert not ok, f"the gradient check accepted the planted control {name}:\n{report}"
    assert "FAIL gradient vision.patch:" in report, f"{name}: vision.patch's gradient was not rejected:\n{report}"


@pytest.mark.parametrize("name, tensor", [("tube_frames_swapped", "video.tube"), ("frame_offset", "audio.frame")])
def test_planted_audio_video_controls_are_rejected(train_checkpoints, name, tensor):
    """A tube's two frames swapped; an audio frame read one sample late: the frontend's gradient moves."""
    planted = Library(built(f"libuform_plant_{name}.so"))
    case_name = "contrastive audio video python 64x2"
    ok, report = tc.check_gradients(planted, train_checkpoints[tc.CASES_BY_NAME[case_name].checkpoint], case_name)
    print(report)
    assert not ok, f"the gradient check accepted the planted control {name}:\n{report}"
    assert f"FAIL gradient {tensor}:" in report, f"{name}: {tensor}'s gradient was not rejected:\n{report}"


@pytest.mark.parametrize("case_name, heads", [("mlm + mae python 64x2", ("mae",)),
                                              ("mlm + mae audio video python 64x2", ("mae_audio", "mae_video"))])
def test_planted_reconstruction_control_is_rejected(train_checkpoints, case_name, heads):
    """The masked cells' loss with its gradient halved: each head's and bias's gradients move."""
    planted = Library(built("libuform_plant_reconstruction_half.so"))
    ok, report = tc.check_gradients(planted, train_checkpoints[tc.CASES_BY_NAME[case_name].checkpoint], case_name)
    print(report)
    assert not ok, report
    for head in heads:
        assert f"FAIL gradient {head}.head:" in report and f"FAIL gradient {head}.bias:" in report, report


# ---------------------------------------------------------------------------------------------
# Properties of the C trainer's gradients
# ---------------------------------------------------------------------------------------------


def test_gradients_do_not_accumulate_and_ignore_threads_and_precision(library, train_checkpoints):
    """uform_trainer_gradients twice gives the same loss and gradients (the buffers restart at
    zero), and neither the thread count nor the model's inference precision changes them (the
    trainer computes in Float32, train.h); the weights do not change."""
    from uform_ctypes import PRECISION_BF16, PRECISION_F32, SLOT_GRADIENT, SLOT_PARAMETER
    case = tc.CASES_BY_NAME["contrastive + tcr + lipschitz python 64x2"]
    directory = train_checkpoints[case.checkpoint]
    batch = case.make_batch()
    model = reference.load_model(directory)
    shapes = tc.tensor_shapes(model)
    results = {}
    for precision in (PRECISION_F32, PRECISION_BF16):
        for threads in (1, 2):
            with library.open(directory) as handle:
                handle.set_threads(threads)
                handle.set_precision(precision)
                with handle.trainer(tc.options_for(library, case.objective), batch.cells) as trainer:
                    first = (trainer.gradients(batch), tc.read_tensors(trainer, shapes, SLOT_GRADIENT))
                    second = (trainer.gradients(batch), tc.read_tensors(trainer, shapes, SLOT_GRADIENT))
                    weights = tc.read_tensors(trainer, shapes, SLOT_PARAMETER)
            label = f"precision {precision}, {threads} threads"
            assert first[0] == second[0], f"{label}: the loss changed on a second call"
            for name in shapes:
                assert np.array_equal(first[1][name], second[1][name]), f"{label}: {name}'s gradient changed on a second call"
                assert np.array_equal(weights[name], model.tensors[name]), f"{label}: gradients changed {name}"
            results[label] = first
    (reference_label, (losses, gradients)), *others = results.items()
    bound = tc.cached_reference(directory, case.name).b_grad
    for label, (other_losses, other_gradients) in others:
        # two Float32 evaluations, each within B_grad of the exact gradient
        for name in shapes:
            norm = np.linalg.norm(gradients[name])
            assert np.linalg.norm(other_gradients[name] - gradients[name]) <= 2 * bound * norm, f"{label} vs {reference_label}: {name}"
