# train_contract.py: the training checks shared by test_gradients.py, test_adafactor.py and
# test_train_bad_inputs.py: small checkpoints, training batches (short rows, a few packed
# segments with text-, image- and video-like coordinates), and check_gradients, which compares
# the C trainer's loss and every tensor's gradient with the float64 reference (train_reference.py)
# and its central finite differences, returning (ok, report) so that a test can assert ok for the
# real library and not ok for each planted control. Bounds: train_bounds.py.

import functools
import math
from dataclasses import dataclass

import numpy as np

import bounds
import checkpoint_files
import reference
import train_bounds
import train_reference as tr
from contract import Report
from grids import GridBuilder, audio_positions, image_positions, random_frames, random_patches, random_tubes, video_positions
from reference import MASK, text_positions
from uform_ctypes import PRECISION_F32, SLOT_GRADIENT, SLOT_PARAMETER, TrainBatch

TRAIN_COLUMNS = 32  # rows of the training grids; the checkpoints' configured row


# ---------------------------------------------------------------------------------------------
# Checkpoints
# ---------------------------------------------------------------------------------------------


def init_checkpoint(library, directory, tier, seed):
    """uform_model_init (norm scales 1, pool.query 0), saved with a short row."""
    config = library.config_from_tier(tier)
    config.columns = TRAIN_COLUMNS
    with library.init(config, seed) as model:
        model.save(directory, f"pytest train {tier} seed {seed}")
    return directory


def python_checkpoint(directory, width, depth, seed, drop=(), frontends=()):
    """Random norm scales (0.5..1.5) and pool query, sharper attention: every term of the
    backward matters. `drop` leaves tensors out (a head the objective needs, for bad inputs)."""
    config = checkpoint_files.small_config(width, depth, TRAIN_COLUMNS)
    tensors = checkpoint_files.random_tensors(config, seed, attention_gain=2.0, frontends=frontends)
    for name in drop:
        del tensors[name]
    checkpoint_files.write_checkpoint(directory, config, tensors)
    return directory


def tensor_shapes(model):
    return {name: values.shape for name, values in model.tensors.items()}


# ---------------------------------------------------------------------------------------------
# Batches
# ---------------------------------------------------------------------------------------------


def packed_layout(seed, columns=TRAIN_COLUMNS, images=False, av=False):
    """Two rows, six segments (numbered 0..5 in cell order; ids within a row not in order):
    row 0: text (9 cells), image-like (8, 3 patches a row), padding, text (6), padding;
    row 1: padding, video-like (10, 2x3 patches from tick 7), text (7), padding, image-like (5).
    With `images`, the image-like segments hold image patches (grid.media). With `av`, segment 1
    holds audio frames (1D coordinates), segment 3 video tubes (2x3 a step, ticks from 7) and
    segment 5 image patches."""
    rng = np.random.default_rng(seed)
    grid = GridBuilder(2, columns)
    placed = [
        (0, 0, 9, text_positions(9), 4),
        (0, 9, 8, image_positions(8, 3), 1),
        (0, 19, 6, text_positions(6), 7),
        (1, 1, 10, video_positions(10, 2, 3, 7), 2),
        (1, 11, 7, text_positions(7), 0),
        (1, 20, 5, image_positions(5, 2), 3),
    ]
    for row, column, length, positions, identifier in placed:
        if av and identifier == 1:
            grid.place_media(row, column, reference.CELL_AUDIO, random_frames(rng, length), audio_positions(length), identifier)
            continue
        if av and identifier == 2:
            grid.place_media(row, column, reference.CELL_VIDEO, random_tubes(rng, length), positions, identifier)
            continue
        if av and identifier == 3:
            grid.place_image(row, column, random_patches(rng, length), 2, identifier)
            continue
        if images and identifier in (1, 3):
            grid.place_image(row, column, random_patches(rng, length), 3 if identifier == 1 else 2, identifier)
            continue
        # distinct bytes within a segment: no two cells of a segment start alike, so MaxSim is
        # far from ties (its max is not differentiable there)
        grid.place(row, column, rng.choice(256, size=length, replace=False), positions, identifier)
    return grid


def mlm_batch(seed, fraction=0.25, images=False, image_fraction=0.0, av=False, clip_fraction=0.0):
    """`fraction` of the byte cells (at least one per text segment) become MASK; targets hold the
    bytes. With `image_fraction`, that share of image cells (at least one per image) shows a blank
    patch (a zero row appended to the media) and targets the media row of its true one; image
    cells are never scored by the byte head. With `clip_fraction` (and `av`), that share of audio and
    of video cells (at least one per clip) shows its kind's blank and targets its true row."""
    grid = packed_layout(seed, images=images, av=av)
    rng = np.random.default_rng(seed + 1000)
    targets = np.full(grid.kinds.shape, -1, dtype=np.int32)
    cells = grid.kinds == reference.CELL_BYTE
    chosen = cells & (rng.random(grid.kinds.shape) < fraction)
    for row, start, length in reference.grid_segments(grid.kinds, grid.segments):
        if grid.kinds[row, start] == reference.CELL_BYTE and not chosen[row, start : start + length].any():
            chosen[row, start + rng.integers(length)] = True
    targets[chosen] = grid.values[chosen]
    values = grid.values.copy()
    values[chosen] = MASK
    media = dict(grid.media) if grid.media else None
    if image_fraction:
        patches = media[reference.CELL_IMAGE]
        blank = len(patches)
        media[reference.CELL_IMAGE] = np.concatenate([patches, np.zeros((1, patches.shape[1]), dtype=patches.dtype)])
        masked = (grid.kinds == reference.CELL_IMAGE) & (rng.random(grid.kinds.shape) < image_fraction)
        for row, start, length in reference.grid_segments(grid.kinds, grid.segments):
            if grid.kinds[row, start] == reference.CELL_IMAGE and not masked[row, start : start + length].any():
                masked[row, start + rng.integers(length)] = True
        targets[masked] = grid.values[masked]
        values[masked] = blank
    for kind in (reference.CELL_AUDIO, reference.CELL_VIDEO) if clip_fraction else ():
        rows = media[kind]
        blank = len(rows)
        media[kind] = np.concatenate([rows, np.zeros((1, rows.shape[1]), dtype=rows.dtype)])
        masked = (grid.kinds == kind) & (rng.random(grid.kinds.shape) < clip_fraction)
        for row, start, length in reference.grid_segments(grid.kinds, grid.segments):
            if grid.kinds[row, start] == kind and not masked[row, start : start + length].any():
                masked[row, start + rng.integers(length)] = True
        targets[masked] = grid.values[masked]
        values[masked] = blank
    return TrainBatch(grid.kinds, values, grid.segments, grid.positions, targets=targets, media=media)


def pairs_batch(seed, anchors=(0, 3), candidates=(1, 2, 4, 5), positives=((0, 1), (3, 4)), images=False, av=False,
                weights=None):
    """Anchors, candidates (segment indices) and labels: `positives` lists (anchor, candidate)
    segment pairs; every other pair is a negative. `weights`: the anchors' loss weights, or None."""
    grid = packed_layout(seed, images=images, av=av)
    labels = np.zeros((len(anchors), len(candidates)), dtype=np.uint8)
    for anchor, candidate in positives:
        labels[anchors.index(anchor), candidates.index(candidate)] = 1
    return TrainBatch(grid.kinds, grid.values, grid.segments, grid.positions,
                      anchors=np.array(anchors, dtype=np.uint32), candidates=np.array(candidates, dtype=np.uint32),
                      labels=labels, media=grid.media or None,
                      anchor_weights=None if weights is None else np.array(weights, dtype=np.float32))


def union_batch(batches):
    """The batches of a world's ranks as one batch: the grids' rows stacked in rank order (so the
    segments of rank r follow those of ranks before it), media rows concatenated kind by kind,
    anchors and candidates renumbered and concatenated, the labels block-diagonal."""
    stacked = {name: np.concatenate([np.asarray(getattr(b, name)) for b in batches])
               for name in ("kinds", "values", "segments", "positions")}
    values, kinds = stacked["values"].copy(), stacked["kinds"]
    targets = None if batches[0].targets is None else np.concatenate([np.asarray(b.targets) for b in batches]).copy()
    media = None
    if any(b.media for b in batches):
        media, row = {}, 0
        for b in batches:
            rows = np.asarray(b.kinds).shape[0]
            for kind, vectors in (b.media or {}).items():
                offset = len(media[kind]) if kind in media else 0
                cells = np.asarray(b.kinds) == kind
                values[row : row + rows][cells] += offset
                if targets is not None:
                    scored = cells & (np.asarray(b.targets) >= 0)
                    targets[row : row + rows][scored] += offset
                media[kind] = np.concatenate([media[kind], vectors]) if kind in media else np.asarray(vectors)
            row += rows
    union = TrainBatch(kinds, values, stacked["segments"], stacked["positions"], targets=targets, media=media)
    if batches[0].anchors is not None:
        offsets = np.cumsum([0] + [len(reference.grid_segments(np.asarray(b.kinds), np.asarray(b.segments))) for b in batches])
        union.anchors = np.concatenate([np.asarray(b.anchors) + offsets[r] for r, b in enumerate(batches)]).astype(np.uint32)
        union.candidates = np.concatenate([np.asarray(b.candidates) + offsets[r] for r, b in enumerate(batches)]).astype(np.uint32)
        labels = np.zeros((len(union.anchors), len(union.candidates)), dtype=np.uint8)
        row = column = 0
        for b in batches:
            own = np.asarray(b.labels).reshape(len(b.anchors), len(b.candidates))
            labels[row : row + own.shape[0], column : column + own.shape[1]] = own
            row, column = row + own.shape[0], column + own.shape[1]
        union.labels = labels
        if any(b.anchor_weights is not None for b in batches):
            union.anchor_weights = np.concatenate([np.ones(len(b.anchors), dtype=np.float32) if b.anchor_weights is None
                                                   else np.asarray(b.anchor_weights, dtype=np.float32) for b in batches])
    return union


def options_for(library, objective, **fields):
    """TrainOptions from the defaults with the objective's fields."""
    return library.train_options(objective=objective.objective, tcr_lambda=objective.tcr_lambda,
                                 lipschitz_lambda=objective.lipschitz_lambda,
                                 lipschitz_iterations=objective.lipschitz_iterations, **fields)


# ---------------------------------------------------------------------------------------------
# Gradient cases
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    name: str
    checkpoint: str  # a key of CHECKPOINTS
    objective: tr.Objective
    batch: str  # "mlm" or "pairs" or "pairs_with_anchor_candidate"
    seed: int
    images: bool = False  # segments 1 and 3 hold image patches (the checkpoint needs the vision frontend)
    av: bool = False  # audio, video and image segments (packed_layout; the checkpoint needs all three frontends)
    weights: tuple = None  # the anchors' loss weights (a mixture source's loss_weight), or None for 1

    def make_batch(self):
        if self.av:
            if self.batch == "mlm":
                return mlm_batch(self.seed, av=True)
            if self.batch == "mlm_mae":  # half the frames and tubes blanked and reconstructed through their heads
                return mlm_batch(self.seed, av=True, clip_fraction=0.5)
            return pairs_batch(self.seed, candidates=(1, 2, 3, 4, 5), positives=((0, 1), (3, 4)), av=True)
        if self.batch == "mlm":
            return mlm_batch(self.seed, images=self.images)
        if self.batch == "mlm_mae":  # half the patches blanked and reconstructed through mae.head
            return mlm_batch(self.seed, images=True, image_fraction=0.5)
        if self.batch == "pairs_with_anchor_candidate":
            # anchor 3 is also a candidate (a negative of anchor 0, and itself for anchor 3)
            return pairs_batch(self.seed, candidates=(1, 2, 3, 4, 5), positives=((0, 1), (3, 4)), images=self.images,
                               weights=self.weights)
        return pairs_batch(self.seed, images=self.images, weights=self.weights)


# name -> (kind, tier or (width, depth), seed)
CHECKPOINTS = {
    "init_64x2": ("init", "64x2", 5),
    "init_128x1": ("init", "128x1", 6),
    "python_64x2": ("python", (64, 2), 13),
    "python_vision_64x2": ("python_vision", (64, 2), 17),
    "python_mae_64x2": ("python_mae", (64, 2), 23),
    "python_av_64x2": ("python_av", (64, 2), 31),
    "python_av_mae_64x2": ("python_av_mae", (64, 2), 37),
}

Objective = tr.Objective
CASES = [
    Case("mlm init 64x2", "init_64x2", Objective(tr.OBJECTIVE_MLM), "mlm", 1),
    Case("mlm init 128x1", "init_128x1", Objective(tr.OBJECTIVE_MLM), "mlm", 2),
    Case("mlm + tcr python 64x2", "python_64x2", Objective(tr.OBJECTIVE_MLM, tcr_lambda=0.5), "mlm", 3),
    Case("contrastive init 64x2", "init_64x2", Objective(tr.OBJECTIVE_CONTRASTIVE), "pairs", 4),
    Case("contrastive + lipschitz init 128x1", "init_128x1",
         Objective(tr.OBJECTIVE_CONTRASTIVE, lipschitz_lambda=2.0, lipschitz_iterations=8), "pairs_with_anchor_candidate", 5),
    Case("contrastive + tcr + lipschitz python 64x2", "python_64x2",
         Objective(tr.OBJECTIVE_CONTRASTIVE, tcr_lambda=0.3, lipschitz_lambda=1.0, lipschitz_iterations=5), "pairs", 6),
    Case("rerank init 64x2", "init_64x2", Objective(tr.OBJECTIVE_RERANK), "pairs", 7),
    Case("rerank python 64x2", "python_64x2", Objective(tr.OBJECTIVE_RERANK), "pairs_with_anchor_candidate", 8),
    # image <-> text: anchor 3 (an image) is also a candidate, candidate 1 an image
    Case("contrastive images python 64x2", "python_vision_64x2", Objective(tr.OBJECTIVE_CONTRASTIVE),
         "pairs_with_anchor_candidate", 9, images=True),
    Case("mlm images python 64x2", "python_vision_64x2", Objective(tr.OBJECTIVE_MLM), "mlm", 10, images=True),
    Case("mlm + mae python 64x2", "python_mae_64x2", Objective(tr.OBJECTIVE_MLM), "mlm_mae", 11, images=True),
    # audio <-> text (anchor 0, candidate 1) and video <-> text (anchor 3, a video, also a candidate)
    Case("contrastive audio video python 64x2", "python_av_64x2", Objective(tr.OBJECTIVE_CONTRASTIVE),
         "pairs_with_anchor_candidate", 12, av=True),
    Case("mlm audio video python 64x2", "python_av_64x2", Objective(tr.OBJECTIVE_MLM), "mlm", 13, av=True),
    Case("mlm + mae audio video python 64x2", "python_av_mae_64x2", Objective(tr.OBJECTIVE_MLM), "mlm_mae", 14, av=True),
    # the anchors' loss weights (mixture sources' loss_weight): an image anchor at a quarter, a text at 1.5
    Case("contrastive weighted images python 64x2", "python_vision_64x2", Objective(tr.OBJECTIVE_CONTRASTIVE),
         "pairs_with_anchor_candidate", 15, images=True, weights=(1.5, 0.25)),
    Case("rerank weighted python 64x2", "python_64x2", Objective(tr.OBJECTIVE_RERANK), "pairs_with_anchor_candidate", 16,
         weights=(0.25, 1.5)),
]
CASES_BY_NAME = {case.name: case for case in CASES}


def make_checkpoint(library, directory, key):
    kind, shape, seed = CHECKPOINTS[key]
    if kind == "init":
        return init_checkpoint(library, directory, shape, seed)
    frontends = {"python_vision": ("vision",), "python_mae": ("vision", "mae"),
                 "python_av": ("vision", "video", "audio"),
                 "python_av_mae": ("vision", "video", "audio", "mae_audio", "mae_video")}.get(kind, ())
    return python_checkpoint(directory, shape[0], shape[1], seed, frontends=frontends)


# ---------------------------------------------------------------------------------------------
# The C trainer's gradients
# ---------------------------------------------------------------------------------------------


def read_tensors(trainer, shapes, slot):
    """Every tensor's slot as float64 arrays of the tensor's shape."""
    return {name: trainer.read(name, slot, int(np.prod(shape)) if shape else 1).astype(np.float64).reshape(shape)
            for name, shape in shapes.items()}


def c_gradients(library, checkpoint_directory, batch, objective, threads=2):
    """(losses dict, gradients, parameters as the trainer sees them) from uform_trainer_gradients."""
    model = reference.load_model(checkpoint_directory)
    shapes = tensor_shapes(model)
    with library.open(checkpoint_directory) as handle:
        handle.set_threads(threads)
        handle.set_precision(PRECISION_F32)
        with handle.trainer(options_for(library, objective), batch.cells) as trainer:
            losses = trainer.gradients(batch)
            gradients = read_tensors(trainer, shapes, SLOT_GRADIENT)
            parameters = read_tensors(trainer, shapes, SLOT_PARAMETER)
    return losses, gradients, parameters


# ---------------------------------------------------------------------------------------------
# The reference side: loss, gain and bounds, cached per (checkpoint, case)
# ---------------------------------------------------------------------------------------------


@dataclass
class ReferenceSide:
    config: dict
    params: dict
    batch: TrainBatch
    objective: tr.Objective
    losses: tr.Losses
    gain: float
    depth: int
    b_out: float
    loss_limits: dict
    b_grad: float
    g_head: float
    min_gap: float  # MaxSim: the smallest margin between the best and second-best cosine


def _outputs(config, params, batch, objective, bf16_inputs):
    """Every output vector the loss reads, concatenated, for the gain G (bounds.gain)."""
    losses = tr.batch_losses(config, params, batch, objective, bf16_inputs=bf16_inputs)
    pieces = [h for h in losses.details["hidden"] if h is not None]
    details = losses.details
    if "logits" in details:
        pieces.append(details["logits"])
    for predictions, _ in details.get("reconstructions", {}).values():
        pieces.append(predictions)
    if "pooled" in details:
        pieces.extend(e[None, :] for _, e in sorted(details["pooled"].items()))
    if "colbert" in details:
        pieces.extend(c for _, c in sorted(details["colbert"].items()))
    if "Z" in details:
        pieces.append(details["Z"])
    return losses, [np.ravel(p) for p in pieces]


def reference_side(checkpoint_directory, batch, objective):
    model = reference.load_model(checkpoint_directory)
    config, params = model.config, dict(model.tensors)
    losses, f64 = _outputs(config, params, batch, objective, False)
    _, bf16 = _outputs(config, params, batch, objective, True)
    gain = max(bounds.gain(a, b) for a, b in zip(f64, bf16))
    found = reference.grid_segments(np.asarray(batch.kinds), np.asarray(batch.segments))
    longest = max(length for _, _, length in found)
    coordinate = int(np.max(batch.positions))
    cells = int(np.sum(np.asarray(batch.kinds) != reference.CELL_PADDING))
    kinds = np.asarray(batch.kinds)
    # the deepest frontend product: a tube's 1536 values, a patch's 1024
    deepest = 1536 if np.any(kinds == reference.CELL_VIDEO) else 1024 if np.any(kinds == reference.CELL_IMAGE) else 0
    depth = train_bounds.depth(model.width, longest, coordinate, cells, deepest)
    b_out = train_bounds.output_bound(gain, depth)
    loss_limits = train_bounds.loss_bounds(config, params, batch, objective, losses, b_out)
    g_head = train_bounds.head_gain(config, params, objective, losses)
    b_grad = train_bounds.gradient_bound(gain, g_head, depth)
    min_gap = math.inf
    if objective.objective == tr.OBJECTIVE_RERANK:
        colbert = losses.details["colbert"]
        for a in map(int, batch.anchors):
            for c in map(int, batch.candidates):
                min_gap = min(min_gap, float(np.min(tr.maxsim_gaps(colbert[a], colbert[c]))))
    return ReferenceSide(config, params, batch, objective, losses, gain, depth, b_out, loss_limits, b_grad, g_head, min_gap)


@functools.lru_cache(maxsize=None)
def cached_reference(checkpoint_directory, case_name):
    case = CASES_BY_NAME[case_name]
    return reference_side(checkpoint_directory, case.make_batch(), case.objective)


# ---------------------------------------------------------------------------------------------
# Finite differences
# ---------------------------------------------------------------------------------------------


def directions_for(name, gradient_c, shape, rng, batch, objective, random_directions=2, elements=3):
    """(label, unit direction) pairs for one tensor: along the C gradient itself (a wrong
    gradient, transposed say, is then off by about its own norm), `random_directions` random
    unit directions, the element of largest |g_C|, and `elements` random single elements
    (for embed.bytes under MLM, in rows the batch uses, plus one row it does not use, whose
    gradient must be exactly zero)."""
    size = int(np.prod(shape)) if shape else 1
    flat = np.ravel(gradient_c)
    found = []
    norm = float(np.linalg.norm(flat))
    if norm > 0:
        found.append(("along g_C", flat / norm))
    for index in range(random_directions if size > 1 else 0):
        v = rng.normal(size=size)
        found.append((f"random {index}", v / np.linalg.norm(v)))
    picks = []
    if size > 1:
        picks.append(int(np.argmax(np.abs(flat))))
        if name == "embed.bytes":
            used = np.unique(np.asarray(batch.values)[np.asarray(batch.kinds) == reference.CELL_BYTE])
            width = shape[1]
            for _ in range(elements):
                picks.append(int(rng.choice(used)) * width + int(rng.integers(width)))
            unused = np.setdiff1d(np.arange(shape[0]), used)
            picks.append(int(unused[0]) * width + int(rng.integers(width)))
        else:
            picks.extend(int(i) for i in rng.choice(size, size=min(elements, size), replace=False))
    else:
        picks.append(0)
    for index in dict.fromkeys(picks):
        e = np.zeros(size)
        e[index] = 1.0
        found.append((f"element {tuple(int(i) for i in np.unravel_index(index, shape)) if shape else ()}", e))
    return found


def finite_difference(loss, params, name, direction, h):
    """(D(h), T) for unit `direction` of tensor `name`: the central difference and its truncation
    estimate |D(2h) - D(h)| / 3 (train_bounds.py section 4)."""
    base = params[name]
    shape = base.shape

    def at(step):
        moved = dict(params)
        moved[name] = base + step * direction.reshape(shape)
        return loss(moved)

    values = {step: at(step * h) for step in (1, -1, 2, -2)}
    d1 = (values[1] - values[-1]) / (2 * h)
    d2 = (values[2] - values[-2]) / (4 * h)
    return d1, abs(d2 - d1) / 3.0


# ---------------------------------------------------------------------------------------------
# The check
# ---------------------------------------------------------------------------------------------

PARTS = ("total", "mlm", "siglip", "rerank", "tcr", "lipschitz", "reconstruction")


def check_gradients(library, checkpoint_directory, case_name, seed=0, random_directions=2, elements=3):
    """The C trainer's loss (each part) and every tensor's gradient against the float64
    reference and its finite differences. Returns (ok, report)."""
    checkpoint_directory = str(checkpoint_directory)
    side = cached_reference(checkpoint_directory, case_name)
    losses_c, gradients_c, parameters_c = c_gradients(library, checkpoint_directory, side.batch, side.objective)
    title = f"gradients of {library.path}: {case_name} ({checkpoint_directory})"
    return compare_gradients(title, side, losses_c, gradients_c, parameters_c, seed, random_directions, elements)


def compare_gradients(title, side, losses_c, gradients_c, parameters_c, seed=0, random_directions=2, elements=3, loss=None):
    """check_gradients' comparison of given C results (losses dict, gradients, parameters); `loss`
    (params -> float64 loss) replaces the side's batch loss, as for a world of ranks."""
    batch, objective, params = side.batch, side.objective, side.params
    report = Report(title)
    report.lines.append(f"     G {side.gain:.2f}, D {side.depth}, B_out {side.b_out:.2e}, g_head {side.g_head:.1f}, "
                        f"B_grad {side.b_grad:.2e}" + (f", MaxSim min gap {side.min_gap:.2e}" if math.isfinite(side.min_gap) else ""))

    # The trainer sees the checkpoint's weights exactly (BF16 matrices and Float32 vectors widened).
    for name in params:
        if not np.array_equal(parameters_c[name], params[name]):
            report.require(f"parameter {name} as read equals the checkpoint", False,
                           f"max |diff| {np.max(np.abs(parameters_c[name] - params[name])):.3e}")

    # The loss, part by part.
    expected = side.losses
    report.require("scored", losses_c["scored"] == expected.scored, f"{losses_c['scored']} vs {expected.scored}")
    report.require("reconstructed", losses_c["reconstructed"] == expected.reconstructed,
                   f"{losses_c['reconstructed']} vs {expected.reconstructed}")
    for part in PARTS:
        value, exact, limit = losses_c[part], getattr(expected, part), side.loss_limits[part]
        error = abs(value - exact)
        passed = bool(np.isfinite(value) and error <= limit)
        report.require(f"loss {part}", passed, f"{value:.9g} vs {exact:.9g}, |error| {error:.2e} bound {limit:.2e}")

    # Every tensor's gradient against central differences of the float64 loss.
    loss = loss or tr.loss_function(side.config, batch, objective, params)
    rng = np.random.default_rng(seed)
    for name, shape in ((n, p.shape) for n, p in params.items()):
        g = gradients_c[name]
        if not np.all(np.isfinite(g)):
            report.require(f"gradient {name} finite", False)
            continue
        g_norm = float(np.linalg.norm(g))
        h = train_bounds.fd_step(params[name])
        rounding = train_bounds.fd_rounding(expected.total, side.gain, side.depth, g_norm, float(np.linalg.norm(params[name])), h)
        worst = largest = 0.0
        failures = []
        smooth = True
        if name == "embed.bytes":
            # rows of bytes the grid does not hold get no gradient at all
            used = np.unique(np.asarray(batch.values)[np.asarray(batch.kinds) == reference.CELL_BYTE])
            unused = np.setdiff1d(np.arange(shape[0]), used)
            if np.any(g[unused] != 0):
                failures.append(f"{int(np.sum(np.any(g[unused] != 0, axis=1)))} rows of bytes not in the batch have a gradient")
        for label, v in directions_for(name, g, shape, rng, batch, objective, random_directions, elements):
            fd, truncation = finite_difference(loss, params, name, v, h)
            analytic = float(np.dot(np.ravel(g), v))
            limit = truncation + rounding + side.b_grad * g_norm
            error = abs(analytic - fd)
            worst = max(worst, error / limit if limit > 0 else (np.inf if error > 0 else 0.0))
            largest = max(largest, error / g_norm if g_norm > 0 else 0.0)
            if not error <= limit:
                failures.append(f"{label}: <g_C, v> {analytic:.6e} vs FD {fd:.6e}, |error| {error:.2e} > bound {limit:.2e}")
            if truncation > side.b_grad * g_norm / 4 and truncation > rounding:
                smooth = False
                failures.append(f"{label}: the loss is not smooth here (truncation {truncation:.2e}): change the data")
        detail = f"|g_C| {g_norm:.3e}, h {h:.1e}, largest |error| / |g_C| {largest:.1e}, worst {worst:.1%} of bound"
        report.require(f"gradient {name}", not failures and smooth, detail + ("; " + "; ".join(failures) if failures else ""))
    return report.ok, str(report)
