# test_world.py: uform_trainer_gradients_world, the CPU reference of a world of N data-parallel
# ranks (docs/training.md, "World N on the CPU"). A world of one is uform_trainer_gradients bit for
# bit. A world of 2 or 3 ranks without Lipschitz, TCR included, equals the single batch of its
# union (the grids' rows stacked, candidates concatenated in rank order, labels block-diagonal):
# the loss, every gradient, and every parameter after one Adafactor step, within the bounds of
# train_bounds.py section 6. With Lipschitz (each rank's own) and with MLM (each rank's mean,
# averaged) the world is not its union: it equals the float64 world reference
# (train_reference.world_losses) part by part and along finite differences of every tensor. Planted
# controls (the gathered gradient scattered to the next rank; the loss a mean over one rank's
# anchors) must fail the same checks. Bad arguments are refused by name (test_train.c: a CUDA trainer).

import dataclasses

import numpy as np
import pytest

import isolated
import reference
import train_bounds
import train_contract as tc
import train_reference as tr
from conftest import built
from contract import Report
from uform_ctypes import PRECISION_F32, SLOT_GRADIENT, SLOT_PARAMETER, Library

RATE = 1e-3  # the step's learning rate: large enough that a wrong gradient moves the weights by many ulps

Case, Objective = tc.Case, tr.Objective
CASES = {case.name: case for case in [
    Case("contrastive weighted images python 64x2", "python_vision_64x2", Objective(tr.OBJECTIVE_CONTRASTIVE),
         "pairs_with_anchor_candidate", 15, images=True, weights=(1.5, 0.25)),
    Case("rerank weighted python 64x2", "python_64x2", Objective(tr.OBJECTIVE_RERANK), "pairs_with_anchor_candidate", 16,
         weights=(0.25, 1.5)),
    Case("contrastive init 64x2", "init_64x2", Objective(tr.OBJECTIVE_CONTRASTIVE), "pairs", 4),
    Case("contrastive images python 64x2", "python_vision_64x2", Objective(tr.OBJECTIVE_CONTRASTIVE),
         "pairs_with_anchor_candidate", 9, images=True),
    Case("contrastive + tcr python 64x2", "python_64x2", Objective(tr.OBJECTIVE_CONTRASTIVE, tcr_lambda=0.3), "pairs", 6),
    Case("rerank python 64x2", "python_64x2", Objective(tr.OBJECTIVE_RERANK), "pairs_with_anchor_candidate", 8),
    Case("rerank + tcr python 64x2", "python_64x2", Objective(tr.OBJECTIVE_RERANK, tcr_lambda=0.3),
         "pairs_with_anchor_candidate", 8),
    Case("contrastive + tcr + lipschitz python 64x2", "python_64x2",
         Objective(tr.OBJECTIVE_CONTRASTIVE, tcr_lambda=0.3, lipschitz_lambda=1.0, lipschitz_iterations=5), "pairs", 6),
    Case("contrastive + lipschitz init 128x1", "init_128x1",
         Objective(tr.OBJECTIVE_CONTRASTIVE, lipschitz_lambda=2.0, lipschitz_iterations=8), "pairs_with_anchor_candidate", 5),
    Case("mlm init 64x2", "init_64x2", Objective(tr.OBJECTIVE_MLM), "mlm", 1),
    Case("mlm + tcr python 64x2", "python_64x2", Objective(tr.OBJECTIVE_MLM, tcr_lambda=0.5), "mlm", 3),
    Case("mlm + mae python 64x2", "python_mae_64x2", Objective(tr.OBJECTIVE_MLM), "mlm_mae", 11, images=True),
]}


def rank_batches(case, ranks):
    """One batch a rank: the case's layout, each rank's bytes, patches and masks from a seed of its own."""
    return [dataclasses.replace(case, seed=case.seed + 100 * r).make_batch() for r in range(ranks)]


def read_all(trainer, shapes):
    return tc.read_tensors(trainer, shapes, SLOT_GRADIENT), tc.read_tensors(trainer, shapes, SLOT_PARAMETER)


def run_trainer(library, directory, objective, cells, call):
    """(losses, gradients, parameters before, parameters after one Adafactor step) of `call(trainer)`
    on a fresh model (the step changes the model's weights)."""
    shapes = tc.tensor_shapes(reference.load_model(directory))
    with library.open(directory) as handle:
        handle.set_threads(2)
        handle.set_precision(PRECISION_F32)
        with handle.trainer(tc.options_for(library, objective, learning_rate=RATE), cells) as trainer:
            losses = call(trainer)
            gradients, before = read_all(trainer, shapes)
            trainer.apply()
            after = tc.read_tensors(trainer, shapes, SLOT_PARAMETER)
    return losses, gradients, before, after


# ---------------------------------------------------------------------------------------------
# 1. A world of one is uform_trainer_gradients
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case_name", [case.name for case in tc.CASES])
def test_world_of_one_is_the_single_batch(library, train_checkpoints, case_name):
    case = tc.CASES_BY_NAME[case_name]
    directory, batch = train_checkpoints[case.checkpoint], case.make_batch()
    single = run_trainer(library, directory, case.objective, batch.cells, lambda t: t.gradients(batch))
    world = run_trainer(library, directory, case.objective, batch.cells, lambda t: t.gradients_world([batch]))
    assert single[0] == world[0], f"losses {single[0]} vs {world[0]}"
    for name in single[1]:
        assert np.array_equal(single[1][name], world[1][name]), f"{name}'s gradient differs"
        assert np.array_equal(single[3][name], world[3][name]), f"{name} differs after the step"


# ---------------------------------------------------------------------------------------------
# 2. A world against its union (train_bounds.py section 6)
# ---------------------------------------------------------------------------------------------


def check_world_against_union(library, directory, case, ranks):
    """The world's loss, gradients and stepped parameters against the union batch's. (ok, report)."""
    batches = rank_batches(case, ranks)
    union = tc.union_batch(batches)
    side = tc.reference_side(directory, union, case.objective)
    losses_w, gradients_w, before, after_w = run_trainer(library, directory, case.objective, union.cells,
                                                         lambda t: t.gradients_world(batches))
    losses_u, gradients_u, _, after_u = run_trainer(library, directory, case.objective, union.cells,
                                                    lambda t: t.gradients(union))
    report = Report(f"world of {ranks} against its union, {library.path}: {case.name} ({directory})")
    report.lines.append(f"     G {side.gain:.2f}, D {side.depth}, g_head {side.g_head:.1f}, B_grad {side.b_grad:.2e}")
    report.require("scored", losses_w["scored"] == losses_u["scored"], f"{losses_w['scored']} vs {losses_u['scored']}")
    worst = {}
    for part in tc.PARTS:
        error, limit = abs(losses_w[part] - losses_u[part]), 2 * side.loss_limits[part]
        worst[f"loss {part}"] = error / limit if limit > 0 else (np.inf if error > 0 else 0.0)
        report.require(f"loss {part}", error <= limit, f"{losses_w[part]:.9g} vs {losses_u[part]:.9g}, "
                                                       f"|error| {error:.2e} bound {limit:.2e}")
    for name, g in gradients_u.items():
        norm = float(np.linalg.norm(g))
        error, limit = float(np.linalg.norm(gradients_w[name] - g)), 2 * side.b_grad * norm
        worst[f"gradient {name}"] = error / limit if limit > 0 else (np.inf if error > 0 else 0.0)
        report.require(f"gradient {name}", error <= limit, f"|g| {norm:.3e}, |error| {error:.2e} "
                                                           f"({worst[f'gradient {name}']:.1%} of bound)")
        low, high = train_bounds.first_step_interval(name, before[name], g, 2 * side.b_grad * norm, RATE)
        outside_u = int(np.sum((after_u[name] < low) | (after_u[name] > high)))
        outside_w = int(np.sum((after_w[name] < low) | (after_w[name] > high)))
        moved = int(np.sum(after_w[name] != after_u[name]))
        report.require(f"step {name}", outside_u == 0 and outside_w == 0,
                       f"{outside_w} of the world's and {outside_u} of the union's {g.size} values outside the "
                       f"interval; {moved} differ")
    gradient_ratios = [value for key, value in worst.items() if key.startswith("gradient")]
    loss_ratios = [value for key, value in worst.items() if key.startswith("loss")]
    report.lines.append(f"     worst: gradients {max(gradient_ratios):.2e} of bound, loss {max(loss_ratios):.2e} of bound")
    return report.ok, str(report)


UNION_CASES = [("contrastive init 64x2", 2), ("contrastive init 64x2", 3), ("contrastive images python 64x2", 2),
               ("contrastive + tcr python 64x2", 2), ("contrastive + tcr python 64x2", 3), ("rerank python 64x2", 2),
               ("rerank + tcr python 64x2", 3), ("contrastive + tcr python 64x2", 4),  # 4: issue 20's world
               ("contrastive weighted images python 64x2", 3)]


@pytest.mark.parametrize("case_name, ranks", UNION_CASES)
def test_world_equals_its_union(library, train_checkpoints, case_name, ranks):
    case = CASES[case_name]
    ok, report = check_world_against_union(library, train_checkpoints[case.checkpoint], case, ranks)
    print(report)
    assert ok, report


def test_lipschitz_world_is_not_its_union(library, train_checkpoints):
    """Each rank's own sigma_max, averaged, is not the union's: the union check rejects it there."""
    case = CASES["contrastive + lipschitz init 128x1"]
    ok, report = check_world_against_union(library, train_checkpoints[case.checkpoint], case, 3)
    print(report)
    assert not ok and "FAIL loss lipschitz" in report, report
    assert "FAIL loss siglip" not in report, report


# ---------------------------------------------------------------------------------------------
# 3. A world against the float64 world reference (Lipschitz and MLM are each rank's own)
# ---------------------------------------------------------------------------------------------


def world_side(directory, batches, objective):
    """train_contract.reference_side of the union (gain, depth, gradient bound) with the world's
    losses and loss bounds: the pair and TCR parts are the union's, Lipschitz, MLM and masked
    media each rank's own, averaged, each bounded at the union's output bound (its depth holds every
    rank's cells)."""
    union = tc.union_batch(batches)
    side = tc.reference_side(directory, union, objective)
    losses = tr.world_losses(side.config, side.params, batches, objective)
    limits = dict(side.loss_limits)
    own = [train_bounds.loss_bounds(side.config, side.params, batch, objective,
                                    tr.batch_losses(side.config, side.params, batch, objective), side.b_out)
           for batch in batches]
    for part in ("lipschitz", "mlm", "reconstruction"):
        limits[part] = float(np.mean([bounds[part] for bounds in own]))
    limits["total"] = sum(limits[part] for part in tc.PARTS if part != "total")
    return dataclasses.replace(side, losses=losses, loss_limits=limits)


def check_world_against_reference(library, directory, case, ranks):
    batches = rank_batches(case, ranks)
    side = world_side(directory, batches, case.objective)
    losses, gradients, parameters, _ = run_trainer(library, directory, case.objective, tc.union_batch(batches).cells,
                                                   lambda t: t.gradients_world(batches))
    loss = tr.world_loss_function(side.config, batches, case.objective, side.params)
    title = f"world of {ranks} against the float64 world reference, {library.path}: {case.name} ({directory})"
    return tc.compare_gradients(title, side, losses, gradients, parameters, loss=loss)


REFERENCE_CASES = [("contrastive + tcr + lipschitz python 64x2", 2), ("contrastive + lipschitz init 128x1", 3),
                   ("mlm init 64x2", 2), ("mlm + tcr python 64x2", 3), ("mlm + mae python 64x2", 2),
                   ("rerank python 64x2", 2), ("contrastive + tcr + lipschitz python 64x2", 4),
                   ("contrastive weighted images python 64x2", 2), ("rerank weighted python 64x2", 3)]


@pytest.mark.parametrize("case_name, ranks", REFERENCE_CASES)
def test_world_matches_the_float64_reference(library, train_checkpoints, case_name, ranks):
    case = CASES[case_name]
    ok, report = check_world_against_reference(library, train_checkpoints[case.checkpoint], case, ranks)
    print(report)
    assert ok, report


def test_reference_world_without_lipschitz_is_its_union(train_checkpoints):
    """The reference's own property: written rank by rank, its world is the union batch's loss (to
    float64 rounding), for pairs with TCR; with Lipschitz it is not."""
    case = CASES["contrastive + tcr + lipschitz python 64x2"]
    model = reference.load_model(train_checkpoints[case.checkpoint])
    batches = rank_batches(case, 3)
    union = tc.union_batch(batches)
    without = dataclasses.replace(case.objective, lipschitz_lambda=0.0)
    world = tr.world_losses(model.config, dict(model.tensors), batches, without)
    single = tr.batch_losses(model.config, dict(model.tensors), union, without)
    for part in ("siglip", "tcr", "total"):
        assert abs(getattr(world, part) - getattr(single, part)) < 1e-12 * max(1.0, abs(getattr(single, part))), part
    world = tr.world_losses(model.config, dict(model.tensors), batches, case.objective)
    single = tr.batch_losses(model.config, dict(model.tensors), union, case.objective)
    assert abs(world.lipschitz - single.lipschitz) > 1e-3 * abs(single.lipschitz), (world.lipschitz, single.lipschitz)


# ---------------------------------------------------------------------------------------------
# 4. Planted controls: the same checks must reject them
# ---------------------------------------------------------------------------------------------

WORLD_PLANTS = {
    # the gathered candidates' gradient scattered to the next rank: the loss stays, gradients move
    "world_rotated": ("gradient pool.proj",),
    # the loss a mean over the rank's own anchors, not the world's: the loss and gradients move
    "world_local_anchors": ("loss siglip", "gradient pool.proj"),
}


@pytest.mark.parametrize("plant", list(WORLD_PLANTS))
@pytest.mark.parametrize("case_name, ranks", [("contrastive init 64x2", 2), ("contrastive + tcr python 64x2", 3)])
def test_planted_world_control_is_rejected(train_checkpoints, plant, case_name, ranks):
    planted = Library(built(f"libuform_plant_{plant}.so"))
    case = CASES[case_name]
    ok, report = check_world_against_union(planted, train_checkpoints[case.checkpoint], case, ranks)
    print(report)
    assert not ok, f"the world check accepted the planted control {plant}:\n{report}"
    for item in WORLD_PLANTS[plant]:
        assert f"FAIL {item}:" in report, f"{plant}: {item} was not rejected:\n{report}"


def test_planted_rerank_rotation_is_rejected(train_checkpoints):
    """Rerank gathers ColBERT cells, not pooled rows: the rotated scatter moves rerank.proj's gradient."""
    planted = Library(built("libuform_plant_world_rotated.so"))
    case = CASES["rerank python 64x2"]
    ok, report = check_world_against_union(planted, train_checkpoints[case.checkpoint], case, 2)
    print(report)
    assert not ok and "FAIL gradient rerank.proj:" in report, report


# ---------------------------------------------------------------------------------------------
# 5. Bad arguments
# ---------------------------------------------------------------------------------------------

PREAMBLE = """
import train_contract
batch = train_contract.pairs_batch(4)
def trainer(objective=1, cells=256):
    return model.trainer(library.train_options(objective=objective), cells)
"""

BAD_CASES = {
    "0 ranks": ("trainer().gradients_world([])", {1}, ("0 ranks", "at least one")),
    "NULL batches": ("t = trainer(); library.call('uform_trainer_gradients_world', t.handle, None, 2, "
                     "ctypes.byref(LossesStruct()))", {1}, ("null",)),
    "NULL losses": ("t = trainer(); b, keep = batch.struct(); library.call('uform_trainer_gradients_world', t.handle, "
                    "ctypes.byref(b), 1, None)", {1}, ("null",)),
    "a bad batch in rank 1": ("bad = train_contract.pairs_batch(5); bad.anchors = np.array([0, 9], np.uint32); "
                              "trainer().gradients_world([batch, bad, batch])", {1, 3}, ("rank 1 of 3",)),
    "a batch past the trainer's cells": ("trainer(cells=16).gradients_world([batch, batch])", {1, 4}, ("rank 0 of 2",)),
    "the step of 0 ranks": ("trainer().step_world([])", {1}, ("0 ranks",)),
}


@pytest.mark.parametrize("case", list(BAD_CASES))
def test_bad_world_arguments_are_refused(library, train_checkpoints, case):
    code, statuses, words = BAD_CASES[case]
    outcome = isolated.run(library.path, PREAMBLE + code, train_checkpoints["init_64x2"])
    isolated.assert_refused(case, outcome, statuses, words)
