# test_adafactor.py: the C trainer's Adafactor step (SPEC.md section 5, docs/training.md) against
# the float64 NumPy Adafactor of train_reference.py fed the same C gradients: several steps on a
# fixed batch, and after each one every tensor's R and C (or V), first moment M and parameters,
# within the per-element bounds derived in train_bounds.py section 5 (Float32 against float64;
# BF16 masters may round one BF16 ulp either way only where the exact value lies within the
# Float32 error of a rounding midpoint). Also the learning-rate schedule
# (uform_trainer_learning_rate), a save / load of the optimizer state, that the steps reach the
# model (uform_forward, uform_model_save), and that the loss falls: 30 steps on a fixed tiny batch
# at least halve the MLM loss and the contrastive loss.

import numpy as np
import pytest

import reference
import train_bounds
import train_contract as tc
import train_reference as tr
from uform_ctypes import (PRECISION_F32, SLOT_COLUMN_MOMENT, SLOT_FIRST_MOMENT, SLOT_GRADIENT, SLOT_PARAMETER,
                          SLOT_ROW_MOMENT)

STEPS = 5
SETTINGS = {
    # the defaults with a schedule: clipping active at every step
    "defaults": dict(learning_rate=1e-3, warmup_steps=2, total_steps=10, beta1=0.9, beta2=0.999, clip=1.0,
                     weight_decay=0.0),
    # other constants, so none can be hard-coded; clipping off (clip 100), so the bias corrections
    # and the factored V show in U directly; weight decay on
    "no clipping, decay": dict(learning_rate=2e-3, warmup_steps=2, total_steps=10, beta1=0.8, beta2=0.99, clip=100.0,
                               weight_decay=0.1),
}
# (settings, gradient case of train_contract whose checkpoint and batch are used)
RUNS = [("defaults", "mlm + tcr python 64x2"), ("no clipping, decay", "rerank init 64x2"),
        ("defaults", "contrastive init 64x2")]


def slots_of(trainer, name, shape):
    """(R, C or None, M, W) of one tensor as float64."""
    size = int(np.prod(shape)) if shape else 1
    if tr.is_matrix(name):
        rows = trainer.read(name, SLOT_ROW_MOMENT, shape[0]).astype(np.float64)
        columns = trainer.read(name, SLOT_COLUMN_MOMENT, shape[1]).astype(np.float64)
    else:
        rows = trainer.read(name, SLOT_ROW_MOMENT, size).astype(np.float64).reshape(shape)
        columns = None
    first = trainer.read(name, SLOT_FIRST_MOMENT, size).astype(np.float64).reshape(shape)
    parameter = trainer.read(name, SLOT_PARAMETER, size).astype(np.float64).reshape(shape)
    return rows, columns, first, parameter


def relative_excess(value, expected, bound):
    """max |value - expected| / (bound |expected|) over elements (<= 1 passes)."""
    limit = bound * np.abs(expected)
    error = np.abs(value - expected)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(limit > 0, error / limit, np.where(error > 0, np.inf, 0.0))
    return float(np.max(ratio))


def absolute_excess(value, expected, bound):
    error = np.abs(value - expected)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(bound > 0, error / bound, np.where(error > 0, np.inf, 0.0))
    return float(np.max(ratio))


@pytest.mark.parametrize("settings,case_name", RUNS, ids=[f"{s}-{c}" for s, c in RUNS])
def test_adafactor_steps_match_reference(library, train_checkpoints, settings, case_name):
    case = tc.CASES_BY_NAME[case_name]
    directory = train_checkpoints[case.checkpoint]
    fields = SETTINGS[settings]
    batch = case.make_batch()
    model = reference.load_model(directory)
    shapes = tc.tensor_shapes(model)
    optimizer = tr.Adafactor(shapes, fields["beta1"], fields["beta2"], fields["clip"], fields["weight_decay"])
    limits = train_bounds.AdafactorBounds(optimizer)
    lines, failures = [], []
    flipped = straddling = elements = wide = 0
    clipped = []
    with library.open(directory) as handle:
        handle.set_threads(2)
        handle.set_precision(PRECISION_F32)
        with handle.trainer(tc.options_for(library, case.objective, **fields), batch.cells) as trainer:
            previous = tc.read_tensors(trainer, shapes, SLOT_PARAMETER)
            for name in shapes:
                assert np.array_equal(previous[name], model.tensors[name]), f"{name}: the trainer's weights are not the checkpoint's"
            for step in range(1, STEPS + 1):
                rate = tr.learning_rate(step, fields["learning_rate"], fields["warmup_steps"], fields["total_steps"])
                rate_c = trainer.learning_rate()
                if not abs(rate_c - rate) <= 4 * train_bounds.UNIT_F32 * fields["learning_rate"]:
                    failures.append(f"step {step}: learning rate {rate_c!r}, expected {rate!r}")
                losses = trainer.gradients(batch)
                gradients = tc.read_tensors(trainer, shapes, SLOT_GRADIENT)
                trainer.apply()
                if trainer.steps() != step:
                    failures.append(f"step {step}: uform_trainer_steps gives {trainer.steps()}")
                previous_first = {name: M.copy() for name, M in optimizer.first.items()}
                records = optimizer.step(previous, gradients, rate)
                current = {}
                for name, shape in shapes.items():
                    record = records[name]
                    bound = limits.step(name, record, previous_first[name], rate, previous[name])
                    rows, columns, first, parameter = slots_of(trainer, name, shape)
                    current[name] = parameter
                    if record.unclipped_rms > fields["clip"]:
                        clipped.append(name)
                    checks = [("R" if tr.is_matrix(name) else "V", relative_excess(rows, optimizer.rows[name], bound["rows"]))]
                    if columns is not None:
                        checks.append(("C", relative_excess(columns, optimizer.columns[name], bound["columns"])))
                    checks.append(("M", absolute_excess(first, record.first_moment, bound["first"])))
                    if tr.is_matrix(name):
                        low, high = train_bounds.bf16_interval(record.exact, bound["parameter"])
                        outside = (parameter < low) | (parameter > high)
                        # a count of elements, not a ratio: any element outside fails
                        checks.append(("W: elements outside [round(W - delta), round(W + delta)]",
                                       np.inf if np.any(outside) else 0.0))
                        if np.any(outside):
                            index = np.unravel_index(int(np.argmax(outside)), shape)
                            failures.append(f"step {step} {name}: {int(np.sum(outside))} of {parameter.size} elements; e.g. "
                                            f"{index}: C {parameter[index]!r}, exact {record.exact[index]!r}, delta {bound['parameter'][index]:.3g}")
                        ulp = np.ldexp(1.0, np.frexp(np.abs(record.parameter))[1] - 8)
                        wide += int(np.sum(high - low > ulp))
                        flipped += int(np.sum(parameter != record.parameter))
                        straddling += int(np.sum(low != high))
                        elements += parameter.size
                    else:
                        checks.append(("W", absolute_excess(parameter, record.exact, bound["parameter"])))
                    for label, excess in checks:
                        if not excess <= 1.0:
                            failures.append(f"step {step} {name} {label}: {excess:.3g} x its bound")
                lines.append(f"step {step}: lr {rate_c:.6g}, loss {losses['total']:.6f}")
                previous = current
    lines.append(f"BF16 masters: {flipped} of {elements} element-steps one ulp from round(W) "
                 f"(allowed where W is within delta of a midpoint: {straddling}; intervals wider than one ulp: {wide})")
    lines.append(f"clipping active for {len(set(clipped))} tensors")
    report = "\n".join(lines + failures)
    print(report)
    assert not failures, report
    # Power of the check: the allowed set must be one BF16 value for nearly every element (a
    # fraction ~ 2 delta / ulp may round either way; near-zero weights, whose ulp is below delta,
    # count here). Over 5% would make the parameter check too weak to mean much.
    assert straddling <= 0.05 * elements, report
    if fields["clip"] <= 1.0:
        assert clipped, "the clipping branch was never exercised"


def test_learning_rate_schedule(library, train_checkpoints):
    """uform_trainer_learning_rate before each of 10 steps: warm-up over 2, cosine to 0 at 10;
    a constant schedule (total 0); and learning_rate 0 taking the tier's peak."""
    case = tc.CASES_BY_NAME["mlm init 64x2"]
    directory = train_checkpoints[case.checkpoint]
    batch = case.make_batch()
    schedules = [(3e-3, 2, 10, 10), (3e-3, 3, 0, 6), (0.0, 0, 0, 2), (1e-3, 0, 4, 4)]
    with library.open(directory) as handle:
        peak_of_tier = handle.config().learning_rate
        for peak, warmup, total, steps in schedules:
            options = tc.options_for(library, case.objective, learning_rate=peak, warmup_steps=warmup, total_steps=total)
            effective = peak if peak > 0 else peak_of_tier
            with handle.trainer(options, batch.cells) as trainer:
                for step in range(1, steps + 1):
                    expected = tr.learning_rate(step, effective, warmup, total)
                    got = trainer.learning_rate()
                    assert abs(got - expected) <= 4 * train_bounds.UNIT_F32 * effective, \
                        f"peak {peak} warmup {warmup} total {total}: step {step} lr {got!r}, expected {expected!r}"
                    trainer.gradients(batch)
                    trainer.apply()


def test_optimizer_state_save_and_load(library, train_checkpoints, tmp_path):
    """uform_trainer_save_state then load_state into a new trainer over the same model: the
    step count, the learning rate and every moment come back exactly."""
    case = tc.CASES_BY_NAME["contrastive init 64x2"]
    directory = train_checkpoints[case.checkpoint]
    batch = case.make_batch()
    shapes = tc.tensor_shapes(reference.load_model(directory))
    options = tc.options_for(library, case.objective, learning_rate=1e-3, warmup_steps=2, total_steps=10)
    path = tmp_path / "state.safetensors"
    slots = (SLOT_FIRST_MOMENT, SLOT_ROW_MOMENT)
    with library.open(directory) as handle:
        with handle.trainer(options, batch.cells) as trainer:
            for _ in range(3):
                trainer.step(batch)
            saved = {slot: {name: trainer.read(name, slot, (shape[0] if slot == SLOT_ROW_MOMENT and len(shape) == 2
                                                              else int(np.prod(shape)) if shape else 1))
                            for name, shape in shapes.items()} for slot in slots}
            columns = {name: trainer.read(name, SLOT_COLUMN_MOMENT, shape[1]) for name, shape in shapes.items() if len(shape) == 2}
            rate = trainer.learning_rate()
            trainer.save_state(path)
        with handle.trainer(options, batch.cells) as trainer:
            trainer.load_state(path)
            assert trainer.steps() == 3
            assert trainer.learning_rate() == rate
            for slot in slots:
                for name, values in saved[slot].items():
                    assert np.array_equal(trainer.read(name, slot, values.size), values), f"{name} slot {slot}"
            for name, values in columns.items():
                assert np.array_equal(trainer.read(name, SLOT_COLUMN_MOMENT, values.size), values), f"{name} C"


def test_steps_reach_the_model(library, train_checkpoints, tmp_path):
    """uform_trainer_apply updates the model in place: after 3 steps, uform_forward (Float32 mode,
    whose widened weights must not go stale) runs the trained weights within bounds.py's B_f32 of
    the reference over them, and uform_model_save writes exactly the trainer's parameters."""
    import bounds
    from grids import longest_segment, GridBuilder
    case = tc.CASES_BY_NAME["mlm + tcr python 64x2"]
    directory = train_checkpoints[case.checkpoint]
    batch = case.make_batch()
    model = reference.load_model(directory)
    shapes = tc.tensor_shapes(model)
    with library.open(directory) as handle:
        handle.set_precision(PRECISION_F32)
        with handle.trainer(tc.options_for(library, case.objective, learning_rate=1e-2), batch.cells) as trainer:
            for _ in range(3):
                trainer.step(batch)
            trained = tc.read_tensors(trainer, shapes, SLOT_PARAMETER)
        outputs = handle.forward(batch.kinds, batch.values, batch.segments, batch.positions)
        handle.save(tmp_path / "trained")
    assert any(not np.array_equal(trained[name], model.tensors[name]) for name in shapes), "3 steps changed nothing"
    saved = reference.load_model(tmp_path / "trained")
    for name in shapes:
        assert np.array_equal(saved.tensors[name], trained[name]), f"{name}: the saved weights are not the trainer's"
    new = reference.Model(model.config, trained)
    exact = reference.forward(new, batch.kinds, batch.values, batch.segments, batch.positions)
    rounded = reference.forward(new, batch.kinds, batch.values, batch.segments, batch.positions, bf16_inputs=True)
    cells = batch.kinds != reference.CELL_PADDING
    grid = GridBuilder(*batch.kinds.shape)
    grid.kinds, grid.segments = batch.kinds, batch.segments
    limit = bounds.bound_f32(exact.hidden[cells], rounded.hidden[cells], model.width, longest_segment(grid), int(batch.positions.max()))
    error = bounds.relative_error(outputs.hidden[cells], exact.hidden[cells])
    assert error <= limit, f"uform_forward after training: error {error:.3e} > bound {limit:.3e} against the trained weights"


# The loss must fall on a fixed batch: 30 steps at peak 1e-2 (warm-up 3, then constant) must end
# at most half the first loss (memorizing one batch is the easiest task there is; a sign error,
# a missing step or a wrong update scale leaves the loss flat or makes it rise).
FALL_STEPS = 30
FALL_RATIO = 0.5


@pytest.mark.parametrize("case_name", ["mlm init 64x2", "contrastive init 64x2", "rerank init 64x2"])
def test_loss_falls_on_a_fixed_batch(library, train_checkpoints, case_name):
    case = tc.CASES_BY_NAME[case_name]
    directory = train_checkpoints[case.checkpoint]
    batch = case.make_batch()
    with library.open(directory) as handle:
        handle.set_threads(2)
        options = tc.options_for(library, case.objective, learning_rate=1e-2, warmup_steps=3)
        with handle.trainer(options, batch.cells) as trainer:
            history = [trainer.step(batch)["total"] for _ in range(FALL_STEPS)]
            final = trainer.gradients(batch)["total"]
    report = f"{case_name}: first {history[0]:.4f}, final {final:.4f} (ratio {final / history[0]:.3f}); " + \
             " ".join(f"{value:.3f}" for value in history)
    print(report)
    assert np.all(np.isfinite(history)) and np.isfinite(final), report
    assert final <= FALL_RATIO * history[0], report
