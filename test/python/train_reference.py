# train_reference.py: a float64 NumPy implementation, written from SPEC.md sections 2-5 and
# docs/training.md alone, of what the C trainer (include/uform/train.h) computes:
#   - the loss of a batch (a grid plus targets / anchors / candidates / labels, as uform_batch_t)
#     for each objective (MLM, Matryoshka SigLIP, ranked sigmoid over MaxSim), plus the total
#     coding rate and Lipschitz terms, returned in parts like uform_losses_t. The loss is a
#     function of a dict of float64 parameter arrays, so central finite differences are easy;
#   - Adafactor with a first moment (factored R, C for matrices, unfactored V for vectors, update
#     clipping, bias correction, BF16 masters for matrices, Float32 vectors);
#   - the warm-up + cosine learning-rate schedule;
#   - the loss of a world of ranks, each with its own batch (docs/training.md, "World N on the
#     CPU"), written from its definition rank by rank, not through a union batch.
# The encoder itself is reference.py's (encode_segment, pool_segment, colbert_cells, ...).

import math
from dataclasses import dataclass, field

import numpy as np

import reference

OBJECTIVE_MLM, OBJECTIVE_CONTRASTIVE, OBJECTIVE_RERANK = 0, 1, 2
OBJECTIVE_NAMES = {OBJECTIVE_MLM: "mlm", OBJECTIVE_CONTRASTIVE: "contrastive", OBJECTIVE_RERANK: "rerank"}
TCR_EPSILON_SQUARED = 0.5
ADAFACTOR_EPSILON = 1e-30  # added to G^2 before the row and column means (SPEC.md section 5)

# Matrices (every rank-2 tensor, the frontends' and the masked media heads' too) keep a factored
# second moment and a BF16 master; everything else is a vector.
MATRIX_SUFFIXES = ("embed.bytes", "qkv", "out", "gate_up", "down", "pool.proj", "rerank.proj", "mlm.head",
                   "vision.patch", "video.tube", "audio.frame", "mae.head", "mae_audio.head", "mae_video.head")


def is_matrix(name):
    return name.endswith(MATRIX_SUFFIXES)


@dataclass
class Objective:
    """What the loss scores: train.h's objective and the opt-in regularizers."""
    objective: int = OBJECTIVE_MLM
    tcr_lambda: float = 0.0
    lipschitz_lambda: float = 0.0
    lipschitz_iterations: int = 8


@dataclass
class Losses:
    """The parts of the loss, each already weighted, as uform_losses_t."""
    total: float = 0.0
    mlm: float = 0.0
    siglip: float = 0.0
    rerank: float = 0.0
    tcr: float = 0.0
    lipschitz: float = 0.0
    reconstruction: float = 0.0
    scored: int = 0
    reconstructed: int = 0
    details: dict = field(default_factory=dict)  # intermediate values the bounds need


def log_sigmoid(x):
    """log sigmoid(x) = -softplus(-x), stable for either sign."""
    return -np.logaddexp(0.0, -np.asarray(x, dtype=np.float64))


def logsumexp(x, axis=-1):
    top = np.max(x, axis=axis, keepdims=True)
    return np.squeeze(top, axis=axis) + np.log(np.sum(np.exp(x - top), axis=axis))


def sigmoid_loss(z, labels, weights=None):
    """-(1/A) sum_a w_a sum_c log sigmoid(y_ac z_ac), y = +1 where labels = 1 else -1, w_a the
    anchors' loss weights (1 without)."""
    signs = np.where(np.asarray(labels) != 0, 1.0, -1.0)
    w = np.ones(z.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64)
    return float(-np.sum(w[:, None] * log_sigmoid(signs * z)) / z.shape[0])


def power_vector(Z, iterations):
    """docs/training.md: S = Z^T Z / N, v = (1..1)/sqrt(E), `iterations` times v = S v / |S v|."""
    N, E = Z.shape
    S = Z.T @ Z / N
    v = np.full(E, 1.0 / math.sqrt(E))
    for _ in range(iterations):
        w = S @ v
        v = w / np.linalg.norm(w)
    return v


def coding_rate(Z):
    """R = 1/2 logdet(I + E / (N eps^2) Z^T Z), Z the N x E matrix of normalized rows."""
    N, E = Z.shape
    alpha = E / (N * TCR_EPSILON_SQUARED)
    sign, logdet = np.linalg.slogdet(np.eye(E) + alpha * Z.T @ Z)
    assert sign > 0
    return 0.5 * logdet


def _model(config, params):
    return reference.Model(config=config, tensors=params)


def encode_batch(config, params, batch, wanted=None, bf16_inputs=False):
    """Final-normed states h of each segment (in uform_forward's order) as a list of arrays;
    `wanted` (a set of segment indices) skips the others (segments never see each other)."""
    model = _model(config, params)
    kinds, values = np.asarray(batch.kinds), np.asarray(batch.values)
    segments, positions = np.asarray(batch.segments), np.asarray(batch.positions)
    found = reference.grid_segments(kinds, segments)
    hidden = []
    for index, (row, start, cells) in enumerate(found):
        if wanted is not None and index not in wanted:
            hidden.append(None)
            continue
        span = slice(start, start + cells)
        hidden.append(reference.encode_segment(model, values[row, span], positions[row, span], bf16_inputs,
                                               kinds=kinds[row, span], media=getattr(batch, "media", None)))
    return found, hidden


# Each media kind's reconstruction head (docs/images.md, docs/audio_video.md).
RECONSTRUCTION_HEADS = {reference.CELL_IMAGE: "mae", reference.CELL_VIDEO: "mae_video", reference.CELL_AUDIO: "mae_audio"}


def batch_losses(config, params, batch, objective, frozen=None, bf16_inputs=False):
    """The loss of `batch` under `objective`, as a Losses. `params` maps every tensor name to a
    float64 array; `frozen` (from `frozen_power_vector`) holds the Lipschitz power-iteration vector
    fixed, as docs/training.md has no gradient flow through it; None computes it here."""
    model = _model(config, params)
    kinds, segments = np.asarray(batch.kinds), np.asarray(batch.segments)
    found = reference.grid_segments(kinds, segments)
    regularized = objective.tcr_lambda > 0 or objective.lipschitz_lambda > 0
    wanted = set()
    if objective.objective == OBJECTIVE_MLM:
        targets = np.asarray(batch.targets)
        for index, (row, start, cells) in enumerate(found):
            if np.any(targets[row, start : start + cells] >= 0):
                wanted.add(index)
    else:
        wanted |= {int(a) for a in batch.anchors} | {int(c) for c in batch.candidates}
    if regularized:
        wanted = set(range(len(found)))
    found, hidden = encode_batch(config, params, batch, wanted, bf16_inputs)
    losses = Losses()
    details = losses.details
    details["hidden"] = hidden

    if objective.objective == OBJECTIVE_MLM:
        # Byte cells with a target: cross-entropy of the byte head. Media cells with a target (the
        # media row of their true vector; the cell itself shows a blank one): per kind, the mean
        # squared error of its head's h head^T + bias against those values (docs/images.md,
        # docs/audio_video.md); the reconstruction loss is their sum.
        targets = np.asarray(batch.targets)
        entropies, all_logits = [], []
        errors, all_predictions, all_truth = ({kind: [] for kind in RECONSTRUCTION_HEADS} for _ in range(3))
        for index, (row, start, cells) in enumerate(found):
            if hidden[index] is None:
                continue
            span_targets, span_kinds = targets[row, start : start + cells], kinds[row, start : start + cells]
            picked = np.nonzero((span_targets >= 0) & (span_kinds == reference.CELL_BYTE))[0]
            if len(picked):
                logits = reference.mlm_cells(model, hidden[index][picked], bf16_inputs)
                chosen = span_targets[picked].astype(np.int64)
                entropies.append(logsumexp(logits) - logits[np.arange(len(picked)), chosen])
                all_logits.append(logits)
            for kind, head in RECONSTRUCTION_HEADS.items():
                masked = np.nonzero((span_targets >= 0) & (span_kinds == kind))[0]
                if not len(masked):
                    continue
                to_input = reference._Rounding(bf16_inputs).apply
                predictions = to_input(hidden[index][masked]) @ params[f"{head}.head"].T + params[f"{head}.bias"]
                truth = np.asarray(batch.media[kind], dtype=np.float64)[span_targets[masked]]
                errors[kind].append(np.mean((predictions - truth) ** 2, axis=1))
                all_predictions[kind].append(predictions)
                all_truth[kind].append(truth)
        if entropies:
            entropies = np.concatenate(entropies)
            losses.mlm = float(np.mean(entropies))
            losses.scored = len(entropies)
            details["logits"] = np.concatenate(all_logits)
        reconstructions = {}
        for kind in RECONSTRUCTION_HEADS:
            if errors[kind]:
                kind_errors = np.concatenate(errors[kind])
                losses.reconstruction += float(np.mean(kind_errors))
                losses.reconstructed += len(kind_errors)
                reconstructions[kind] = (np.concatenate(all_predictions[kind]), np.concatenate(all_truth[kind]))
        if reconstructions:
            details["reconstructions"] = reconstructions  # kind -> (predictions, truth)
    elif objective.objective == OBJECTIVE_CONTRASTIVE:
        anchors, candidates = list(map(int, batch.anchors)), list(map(int, batch.candidates))
        labels = np.asarray(batch.labels).reshape(len(anchors), len(candidates))
        pooled = {s: reference.pool_segment(model, hidden[s], bf16_inputs) for s in set(anchors) | set(candidates)}
        scale = math.exp(float(params["siglip.scale"]))
        per_width = []
        for width in model.embedding_widths:
            u = np.stack([reference.matryoshka(pooled[a], width) for a in anchors])
            v = np.stack([reference.matryoshka(pooled[c], width) for c in candidates])
            per_width.append(sigmoid_loss(scale * u @ v.T + float(params["siglip.bias"]), labels, batch.anchor_weights))
        losses.siglip = float(np.mean(per_width))
        losses.scored = len(anchors)
        details["pooled"] = pooled
    elif objective.objective == OBJECTIVE_RERANK:
        anchors, candidates = list(map(int, batch.anchors)), list(map(int, batch.candidates))
        labels = np.asarray(batch.labels).reshape(len(anchors), len(candidates))
        colbert = {s: reference.colbert_cells(model, hidden[s], bf16_inputs) for s in set(anchors) | set(candidates)}
        similarity = np.array([[maxsim_mean(colbert[a], colbert[c]) for c in candidates] for a in anchors])
        z = math.exp(float(params["siglip.scale"])) * similarity + float(params["siglip.bias"])
        losses.rerank = sigmoid_loss(z, labels, batch.anchor_weights)
        losses.scored = len(anchors)
        details["colbert"] = colbert
    else:
        raise ValueError(f"unknown objective {objective.objective}")

    if regularized:
        Z = normalized_pooled_rows(model, hidden, bf16_inputs)
        details["Z"] = Z
        if objective.tcr_lambda > 0:
            losses.tcr = -objective.tcr_lambda * coding_rate(Z)
        if objective.lipschitz_lambda > 0:
            v = frozen if frozen is not None else power_vector(Z, objective.lipschitz_iterations)
            details["power_vector"] = v
            losses.lipschitz = objective.lipschitz_lambda * float(v @ (Z.T @ (Z @ v)) / Z.shape[0])
    losses.total = losses.mlm + losses.siglip + losses.rerank + losses.tcr + losses.lipschitz + losses.reconstruction
    return losses


def maxsim_mean(query_vectors, document_vectors):
    """maxsim(a, c) / |a|: the mean over the anchor's cells of the best cosine among c's cells."""
    return float(np.mean(np.max(query_vectors @ document_vectors.T, axis=1)))


def maxsim_gaps(query_vectors, document_vectors):
    """For each query cell, the best cosine minus the second best: how far MaxSim is from a tie."""
    scores = np.sort(query_vectors @ document_vectors.T, axis=1)
    if scores.shape[1] < 2:
        return np.full(scores.shape[0], np.inf)
    return scores[:, -1] - scores[:, -2]


def normalized_pooled_rows(model, hidden, bf16_inputs=False):
    """Z: normalize(e_s) at the full width E for every segment s of the batch, in order."""
    return np.stack([reference.normalize(reference.pool_segment(model, h, bf16_inputs)) for h in hidden])


def frozen_power_vector(config, params, batch, objective):
    """The Lipschitz power-iteration vector at `params`, to hold fixed for finite differences."""
    if objective.lipschitz_lambda <= 0:
        return None
    model = _model(config, params)
    _, hidden = encode_batch(config, params, batch)
    return power_vector(normalized_pooled_rows(model, hidden), objective.lipschitz_iterations)


def loss_function(config, batch, objective, base_params):
    """L(params) -> float with the Lipschitz vector frozen at `base_params` (docs/training.md)."""
    frozen = frozen_power_vector(config, base_params, batch, objective)
    return lambda params: batch_losses(config, params, batch, objective, frozen).total


# ---------------------------------------------------------------------------------------------
# A world of ranks (docs/training.md, "World N on the CPU")
# ---------------------------------------------------------------------------------------------


def world_losses(config, params, batches, objective, frozen=None):
    """The loss of a world: one batch a rank. MLM (and masked media) is each rank's own mean,
    averaged over the ranks; SigLIP and the ranked sigmoid score every rank's anchors against the
    world's candidates (rank by rank, each in its own order), a candidate of another rank a
    negative, the sum over the world's anchors; TCR's Z is every rank's rows; Lipschitz is each
    rank's own sigma_max(Z_r^T Z_r / N_r), averaged over the ranks. `frozen` holds one power
    vector a rank (world_power_vectors), or None to compute them here."""
    model = _model(config, params)
    ranks = len(batches)
    regularized = objective.tcr_lambda > 0 or objective.lipschitz_lambda > 0
    losses = Losses()
    if objective.objective == OBJECTIVE_MLM:
        for batch in batches:
            own = batch_losses(config, params, batch, Objective(OBJECTIVE_MLM))
            losses.mlm += own.mlm / ranks
            losses.reconstruction += own.reconstruction / ranks
            losses.scored += own.scored
            losses.reconstructed += own.reconstructed
    if objective.objective == OBJECTIVE_MLM and not regularized:
        losses.total = losses.mlm + losses.reconstruction
        return losses
    hidden = [encode_batch(config, params, batch)[1] for batch in batches]
    if objective.objective != OBJECTIVE_MLM:
        anchors = [(r, int(a)) for r, batch in enumerate(batches) for a in batch.anchors]
        candidates = [(r, int(c)) for r, batch in enumerate(batches) for c in batch.candidates]
        labels = np.zeros((len(anchors), len(candidates)), dtype=np.uint8)
        row = 0
        for r, batch in enumerate(batches):
            own = np.asarray(batch.labels).reshape(len(batch.anchors), len(batch.candidates))
            column = sum(len(b.candidates) for b in batches[:r])
            labels[row : row + own.shape[0], column : column + own.shape[1]] = own
            row += own.shape[0]
        weights = np.concatenate([np.ones(len(b.anchors)) if b.anchor_weights is None else np.asarray(b.anchor_weights, dtype=np.float64)
                                  for b in batches])
        scale, bias = math.exp(float(params["siglip.scale"])), float(params["siglip.bias"])
        if objective.objective == OBJECTIVE_CONTRASTIVE:
            pooled = {(r, s): reference.pool_segment(model, hidden[r][s]) for r, s in set(anchors) | set(candidates)}
            per_width = []
            for width in model.embedding_widths:
                u = np.stack([reference.matryoshka(pooled[a], width) for a in anchors])
                v = np.stack([reference.matryoshka(pooled[c], width) for c in candidates])
                per_width.append(sigmoid_loss(scale * u @ v.T + bias, labels, weights))
            losses.siglip = float(np.mean(per_width))
        else:
            colbert = {(r, s): reference.colbert_cells(model, hidden[r][s]) for r, s in set(anchors) | set(candidates)}
            similarity = np.array([[maxsim_mean(colbert[a], colbert[c]) for c in candidates] for a in anchors])
            losses.rerank = sigmoid_loss(scale * similarity + bias, labels, weights)
        losses.scored = len(anchors)
    if regularized:
        Zs = [normalized_pooled_rows(model, h) for h in hidden]
        if objective.tcr_lambda > 0:
            losses.tcr = -objective.tcr_lambda * coding_rate(np.concatenate(Zs))
        if objective.lipschitz_lambda > 0:
            for r, Z in enumerate(Zs):
                v = frozen[r] if frozen is not None else power_vector(Z, objective.lipschitz_iterations)
                losses.lipschitz += objective.lipschitz_lambda * float(v @ (Z.T @ (Z @ v)) / Z.shape[0]) / ranks
    losses.total = losses.mlm + losses.siglip + losses.rerank + losses.tcr + losses.lipschitz + losses.reconstruction
    return losses


def world_power_vectors(config, params, batches, objective):
    """Each rank's Lipschitz power vector at `params`, to hold fixed for finite differences."""
    if objective.lipschitz_lambda <= 0:
        return None
    return [frozen_power_vector(config, params, batch, objective) for batch in batches]


def world_loss_function(config, batches, objective, base_params):
    """L(params) -> float of the world, the power vectors frozen at `base_params`."""
    frozen = world_power_vectors(config, base_params, batches, objective)
    return lambda params: world_losses(config, params, batches, objective, frozen).total


# ---------------------------------------------------------------------------------------------
# The learning-rate schedule and Adafactor with a first moment
# ---------------------------------------------------------------------------------------------


def learning_rate(step, peak, warmup, total):
    """docs/training.md: peak * t / warmup while t <= warmup; then, when total is set,
    peak * (1 + cos(pi (t - warmup) / (total - warmup))) / 2, else peak. t counts from 1."""
    if step <= warmup:
        return peak * step / warmup
    if total:
        return peak * (1.0 + math.cos(math.pi * (step - warmup) / (total - warmup))) / 2.0
    return peak


@dataclass
class TensorStep:
    """What one Adafactor step computed for one tensor (kept for the error bounds)."""
    gradient: np.ndarray
    update: np.ndarray  # U after clipping
    unclipped_rms: float
    first_moment: np.ndarray  # M
    corrected_moment: np.ndarray  # M / (1 - b1^t)
    exact: np.ndarray  # W - lr (M / (1 - b1^t) + wd W) before any rounding
    parameter: np.ndarray  # what is stored: BF16-rounded for matrices, the exact value for vectors


class Adafactor:
    """SPEC.md section 5 / docs/training.md in float64. State per tensor: M, and R [rows] and
    C [columns] for matrices, V for vectors. `step` takes the parameters and gradients of step t
    (the caller may pass the C trainer's, so that every step is checked on its own)."""

    def __init__(self, shapes, beta1=0.9, beta2=0.999, clip=1.0, weight_decay=0.0):
        self.beta1, self.beta2, self.clip, self.weight_decay = beta1, beta2, clip, weight_decay
        self.steps = 0
        self.first = {name: np.zeros(shape) for name, shape in shapes.items()}
        self.rows, self.columns = {}, {}
        for name, shape in shapes.items():
            if is_matrix(name):
                self.rows[name] = np.zeros(shape[0])
                self.columns[name] = np.zeros(shape[1])
            else:
                self.rows[name] = np.zeros(shape)  # the unfactored V

    def second_moment(self, name):
        """V_hat: bias-corrected second moment estimate, full shape."""
        correction = 1.0 - self.beta2**self.steps
        if is_matrix(name):
            R, C = self.rows[name], self.columns[name]
            return np.outer(R, C) / np.mean(R) / correction
        return self.rows[name] / correction

    def step(self, parameters, gradients, rate):
        """One step at learning rate `rate`; returns {name: TensorStep}."""
        self.steps += 1
        t, b1, b2 = self.steps, self.beta1, self.beta2
        results = {}
        for name, G in gradients.items():
            G = np.asarray(G, dtype=np.float64)
            W = np.asarray(parameters[name], dtype=np.float64)
            squared = G * G + ADAFACTOR_EPSILON
            if is_matrix(name):
                self.rows[name] = b2 * self.rows[name] + (1.0 - b2) * np.mean(squared, axis=1)
                self.columns[name] = b2 * self.columns[name] + (1.0 - b2) * np.mean(squared, axis=0)
            else:
                self.rows[name] = b2 * self.rows[name] + (1.0 - b2) * squared
            U = G / np.sqrt(self.second_moment(name))
            rms = float(np.sqrt(np.mean(U * U)))
            U = U / max(1.0, rms / self.clip)
            self.first[name] = b1 * self.first[name] + (1.0 - b1) * U
            corrected = self.first[name] / (1.0 - b1**t)
            exact = W - rate * (corrected + self.weight_decay * W)
            stored = reference.round_bf16(exact) if is_matrix(name) else exact
            results[name] = TensorStep(G, U, rms, self.first[name].copy(), corrected, exact, stored)
        return results
