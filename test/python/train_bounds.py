# train_bounds.py: error bounds for checking the C trainer (Float32) against the float64 training
# reference (train_reference.py), derived from the arithmetic as bounds.py derives the forward's.
# Nothing here is tuned to what the C code gives. u = 2^-24 (Float32), u64 = 2^-53.
#
# 1. Forward outputs. As bounds.py: each rounding point of a Float32 pass carries at most
#    eps_32 = D u with D = 4 d + n + P + N_cells (bounds.py's depth plus N_cells, the cells a
#    weight gradient sums over, since the same D serves the backward's reductions); the measured
#    gain G (float64 vs BF16-input reference, bounds.gain) carries it to an output, so every head
#    output vector (logits of a cell, pooled e of a segment, rerank projection of a cell) is off
#    by at most B_out = (1 + G) eps_32 relative.
#
# 2. The loss (absolute bounds, first order in B_out):
#    - MLM: |d CE| <= 2 |d logits|_inf (the gradient p - onehot has l1 norm <= 2), and
#      |d logits_c|_inf <= B_out |logits_c|, so |d L| <= 2 B_out mean_c |logits_c|.
#    - SigLIP: |d normalize(x)| <= 2 |dx| / |x|, so the width-m embeddings move by
#      |du_s| <= 2 B_out |e_s| / |e_s[:m]|; |dz_ac| <= exp(scale) (|du_a| + |dv_c|); and
#      |d log sigmoid(y z)| <= |dz| (its slope sigmoid(-y z) <= 1): |d L_m| <= (1/A) sum |dz_ac|,
#      averaged over the widths.
#    - Ranked sigmoid: ColBERT vectors move by <= 2 B_out each; a mean over anchor cells of a max
#      of dot products of unit vectors moves by <= 2 B_out + 2 B_out, so |dz| <= 4 exp(scale) B_out
#      and |d L| <= (C) 4 exp(scale) B_out (C candidates per anchor).
#    - TCR: |dR| <= |dR/dZ|_F |dZ|_F with dR/dZ = a Z (I + a Z^T Z)^-1, a = E / (N eps^2), and
#      |dZ|_F <= 2 B_out sqrt(N); plus the Float32 log-determinant itself, kappa E u (kappa the
#      condition number of I + a Z^T Z).
#    - Lipschitz: sigma = v^T S v moves by |dS|_2 <= (2/N) |Z|_F |dZ|_F for a fixed v, and the
#      C trainer's v (k power steps on its own S) differs from ours by at most
#      ~ 2 k |dS| / min_i |S v_i|, which moves sigma by 2 |S v - sigma v| |dv|.
#
# 3. Gradients. The backward pass mirrors the forward: the same products transposed, through the
#    same rounding points, so its own rounding reaches a parameter gradient with the same gain G;
#    the forward's error of each activation enters the weight gradients (dW = dy x^T) directly;
#    and the loss's derivative with respect to the head outputs moves by g_head times the outputs'
#    relative error (g_head below). Relative to the tensor's gradient norm,
#        B_grad = (1 + 2 G + g_head (1 + G)) eps_32,
#    with g_head = 2 max_c |logits_c| (MLM: p = softmax moves by 2 |d logits|_inf relative),
#    4 exp(scale) (SigLIP and ranked sigmoid: dL/dz = -y sigmoid(-y z) moves by |dz| relative),
#    2 (1 + 2 kappa) for TCR (the inverse in dR/dZ amplifies by kappa) and 2 (1 + 2 k) for
#    Lipschitz (k power steps). The largest g_head of the active terms is used.
#
# 4. Finite differences of the float64 loss along a unit direction v of one tensor, step h:
#    D(h) = (L(theta + h v) - L(theta - h v)) / 2h = phi'(0) + h^2 phi'''(xi) / 6 + rounding.
#    - Truncation: T = h^2 |phi'''| / 6, with phi''' from the same evaluations and two more at
#      +-2h: phi''' ~ (phi(2h) - 2 phi(h) + 2 phi(-h) - phi(-2h)) / (2 h^3), i.e. T = |D(2h) - D(h)| / 3.
#    - Rounding: each float64 evaluation of L is off by at most eps_L = u64 [(1 + G) D max(|L|, 1)
#      + |g| |theta|] (the same depth argument in float64, plus rounding theta + h v), so the
#      difference quotient by eps_L / h.
#    - h = eta max(|theta_t|, 1) with eta = 1e-4: near the optimum (3 eps_L / |phi'''|)^(1/3) for
#      |phi'''| ~ |g| / |theta|^2, making T + eps_L / h ~ 1e-8 |g|, far below B_grad |g|.
#    The check: |<g_C, v> - D(h)| <= T + eps_L / h + B_grad |g_C|_t (Cauchy-Schwarz, |v| = 1).
#    It also demands T <= B_grad |g_C|_t / 4 (where T exceeds eps_L / h): a larger third
#    difference means the loss is not smooth there (a MaxSim near a tie), and the data, not the
#    library, must change.
#
# 5. Adafactor, per element, Float32 against float64 fed the same Float32 gradients:
#    - 1 - b computed in Float32 from b rounded to Float32: e_1mb = u b / (1 - b) + u.
#    - the bias correction 1 - b^t from a Float32 b: e_cb(t) = 2 t u b^t / (1 - b^t) + u.
#    - a mean of k non-negative squares plus 1e-30: (k + 2) u; a non-negative EMA adds 4 u per
#      step: e_R(t) = (columns + 2) u + e_1mb2 + 4 u t, e_C(t) = (rows + 2) u + e_1mb2 + 4 u t,
#      e_mean(R) = e_R + (rows + 1) u; vectors: e_V = 2 u + e_1mb2 + 4 u t.
#    - V_hat = R C / mean(R) / (1 - b2^t): e_V = e_R + e_C + e_mean + e_cb2 + 3 u (matrices),
#      e_V + e_cb2 + u (vectors); U0 = G / sqrt(V_hat): e_U0 = e_V / 2 + 2 u;
#      rms(U0): e_rms = e_U0 + (n + 3) u / 2; U = U0 / max(1, rms / clip): e_U = e_U0 + e_rms + 2 u.
#    - M (absolute, carried along): dM_t = b1 dM_(t-1) + (1 - b1) |U| (e_U + e_1mb1 + 2 u)
#      + 2 u (b1 |M_(t-1)| + |M_t|); M_hat = M / (1 - b1^t): dM_hat = dM / c1 + |M_hat| (e_cb1 + u).
#    - W = W_prev - lr (M_hat + wd W_prev) from the C trainer's own W_prev: with e_lr = 4 u,
#      delta = lr dM_hat + lr |M_hat| (e_lr + 2 u) + lr wd |W_prev| (e_lr + 3 u) + u (|W_prev| + |W|).
#      Vectors (Float32): |W_C - W| <= delta. Matrices (BF16 masters): the C trainer rounds its
#      Float32 value, which lies within delta of the exact W, so it stores a value in
#      [round_bf16(W - delta), round_bf16(W + delta)]: one BF16 ulp from round_bf16(W) exactly
#      where W lies within delta of a rounding midpoint, which happens for a fraction ~ 2 delta /
#      ulp of the elements (reported: about 1% here, mostly weights near zero, whose BF16 ulp is
#      below delta; the C trainer actually lands one ulp off for a few in 10^6).
#
# 6. A world of N ranks against its union batch (test_world.py). Without Lipschitz the two compute
#    the same exact loss and gradients (docs/training.md, "World N on the CPU"), in different
#    orders: the world sums each weight gradient rank by rank and each candidate's SigLIP gradient
#    band by band, the union in one pass. Each is a Float32 evaluation within the bounds above of
#    the exact values, with the union's depth D (its N_cells is the world's cells, every weight
#    gradient's summation depth on either side) and gain, so
#        |L_world - L_union| <= 2 (loss bound of each part),  |g_world - g_union| <= 2 B_grad |g|.
#    After one Adafactor step (t = 1, zero moments) from the same weights: with r_i = rowmean(G^2)_i
#    + 1e-30, c_j likewise by column, V = r c^T / mean(r) for matrices and G^2 + 1e-30 for vectors,
#    U = G / sqrt(V) / max(1, rms / clip) and W' = W - lr (U + wd W). The world's G lies within
#    delta_F = 2 B_grad |G_union| (Frobenius) of the union's, so every element of G within delta_F,
#    every row's and column's norm and the tensor's within delta_F of the union's: interval
#    arithmetic over those ranges, with no correlation assumed (each step monotone in its
#    operands), gives the interval of the exact W'. An element whose gradient lies within delta_F of
#    0 may flip its sign there, so its interval spans both signs. The C trainer's own arithmetic
#    adds section 5's delta at |U| = the interval's largest magnitude, and a BF16 master rounds each
#    end. Both trainers' stored values must lie in the interval.

import math

import numpy as np

import bounds
import train_reference as tr

UNIT_F32 = 2.0**-24
UNIT_F64 = 2.0**-53
FD_ETA = 1e-4


def depth(width, longest, coordinate, cells, deepest=0):
    """D = 4 d + n + P + N_cells (4 d or a frontend's deeper product: 1024 for image patches)."""
    return max(4 * width, deepest) + longest + coordinate + cells


def output_bound(gain, depth_):
    """B_out = (1 + G) D u."""
    return (1.0 + gain) * depth_ * UNIT_F32


def scale_of(params):
    return math.exp(float(params["siglip.scale"]))


def tcr_conditioning(Z):
    """(a, kappa, |dR/dZ|_F) of R = 1/2 logdet(I + a Z^T Z)."""
    N, E = Z.shape
    alpha = E / (N * tr.TCR_EPSILON_SQUARED)
    matrix = np.eye(E) + alpha * Z.T @ Z
    derivative = alpha * Z @ np.linalg.inv(matrix)
    return alpha, float(np.linalg.cond(matrix)), float(np.linalg.norm(derivative))


def power_sensitivity(Z, iterations):
    """(|S v - sigma v|, min over the power steps of |S v_i|) for the Lipschitz bound."""
    N, E = Z.shape
    S = Z.T @ Z / N
    v = np.full(E, 1.0 / math.sqrt(E))
    smallest = np.inf
    for _ in range(iterations):
        w = S @ v
        smallest = min(smallest, float(np.linalg.norm(w)))
        v = w / np.linalg.norm(w)
    sigma = float(v @ S @ v)
    return float(np.linalg.norm(S @ v - sigma * v)), smallest


def loss_bounds(config, params, batch, objective, losses, b_out):
    """Absolute bounds on each part of the C loss (section 2 above)."""
    details = losses.details
    parts = {"mlm": 0.0, "siglip": 0.0, "rerank": 0.0, "tcr": 0.0, "lipschitz": 0.0, "reconstruction": 0.0}
    if objective.objective == tr.OBJECTIVE_MLM:
        if "logits" in details:
            parts["mlm"] = 2.0 * b_out * float(np.mean(np.linalg.norm(details["logits"], axis=1)))
        for p, truth in details.get("reconstructions", {}).values():
            # Per kind, L = mean (p - t)^2 over M cells of V values (1024 a patch, 1536 a tube, 320
            # a frame); predictions off by |dp| <= b_out |p| move it by at most (2 / (M V)) sum |p - t|
            # |dp| (Cauchy-Schwarz per cell), plus the Float32 sum of M V squares (M V u L); the
            # reconstruction loss sums the kinds, and so does its bound.
            M, V = p.shape
            moved = 2.0 * b_out * float(np.sum(np.linalg.norm(p, axis=1) * np.linalg.norm(p - truth, axis=1))) / (M * V)
            parts["reconstruction"] += moved + M * V * UNIT_F32 * float(np.mean((p - truth) ** 2))
    elif objective.objective == tr.OBJECTIVE_CONTRASTIVE:
        pooled = details["pooled"]
        anchors, candidates = list(map(int, batch.anchors)), list(map(int, batch.candidates))
        per_width = []
        for width in config["embedding_widths"]:
            moved = {s: 2.0 * b_out * np.linalg.norm(e) / np.linalg.norm(e[:width]) for s, e in pooled.items()}
            dz = scale_of(params) * np.array([[moved[a] + moved[c] for c in candidates] for a in anchors])
            per_width.append(float(np.sum(dz) / len(anchors)))
        parts["siglip"] = float(np.mean(per_width))
    else:
        parts["rerank"] = len(batch.candidates) * 4.0 * scale_of(params) * b_out
    if "Z" in details:
        Z = details["Z"]
        N, E = Z.shape
        dZ = 2.0 * b_out * math.sqrt(N)
        if objective.tcr_lambda > 0:
            _, kappa, derivative = tcr_conditioning(Z)
            parts["tcr"] = objective.tcr_lambda * (derivative * dZ + kappa * E * UNIT_F32)
        if objective.lipschitz_lambda > 0:
            residual, smallest = power_sensitivity(Z, objective.lipschitz_iterations)
            dS = 2.0 / N * np.linalg.norm(Z) * dZ + N * UNIT_F32 * np.linalg.norm(Z) ** 2 / N
            dv = 2.0 * objective.lipschitz_iterations * dS / smallest
            parts["lipschitz"] = objective.lipschitz_lambda * (dS + 2.0 * residual * dv)
    parts["total"] = sum(parts.values())
    return parts


def head_gain(config, params, objective, losses):
    """g_head of section 3: the largest over the active loss terms."""
    details = losses.details
    gains = []
    if objective.objective == tr.OBJECTIVE_MLM:
        if "logits" in details:
            gains.append(2.0 * float(np.max(np.linalg.norm(details["logits"], axis=1))))
        for p, truth in details.get("reconstructions", {}).values():  # dL/dp = 2 (p - t) / (M V) moves by |dp| / |p - t|
            gains.append(float(np.max(np.linalg.norm(p, axis=1) / np.linalg.norm(p - truth, axis=1))))
    else:
        gains.append(4.0 * scale_of(params))
    if objective.tcr_lambda > 0:
        gains.append(2.0 * (1.0 + 2.0 * tcr_conditioning(details["Z"])[1]))
    if objective.lipschitz_lambda > 0:
        gains.append(2.0 * (1.0 + 2.0 * objective.lipschitz_iterations))
    return max(gains)


def gradient_bound(gain, g_head, depth_):
    """B_grad = (1 + 2 G + g_head (1 + G)) D u, relative to the tensor's gradient norm."""
    return (1.0 + 2.0 * gain + g_head * (1.0 + gain)) * depth_ * UNIT_F32


def fd_step(theta):
    """h = eta max(|theta_t|, 1)."""
    return FD_ETA * max(float(np.linalg.norm(theta)), 1.0)


def fd_rounding(loss, gain, depth_, gradient_norm, theta_norm, h):
    """eps_L / h with eps_L = u64 [(1 + G) D max(|L|, 1) + |g| |theta|]."""
    epsilon = UNIT_F64 * ((1.0 + gain) * depth_ * max(abs(loss), 1.0) + gradient_norm * theta_norm)
    return epsilon / h


# ---------------------------------------------------------------------------------------------
# Adafactor (section 5)
# ---------------------------------------------------------------------------------------------


def one_minus(beta):
    return UNIT_F32 * beta / (1.0 - beta) + UNIT_F32


def correction(beta, step):
    return 2.0 * step * UNIT_F32 * beta**step / (1.0 - beta**step) + UNIT_F32


class AdafactorBounds:
    """Carries the per-element bounds of section 5 along the steps of a train_reference.Adafactor."""

    def __init__(self, optimizer):
        self.optimizer = optimizer
        self.first = {name: np.zeros_like(M) for name, M in optimizer.first.items()}

    def step(self, name, record, previous_first, rate, previous_parameter):
        """Bounds after this step for one tensor: a dict with relative `rows`, `columns` (matrices)
        and absolute `first` and `parameter` (delta)."""
        opt, u = self.optimizer, UNIT_F32
        t, b1, b2 = opt.steps, opt.beta1, opt.beta2
        shape = record.gradient.shape
        n = int(np.prod(shape)) if shape else 1
        e_b2, e_c2 = one_minus(b2), correction(b2, t)
        result = {}
        if tr.is_matrix(name):
            rows, columns = shape
            e_r = (columns + 2) * u + e_b2 + 4 * u * t
            e_c = (rows + 2) * u + e_b2 + 4 * u * t
            e_mean = e_r + (rows + 1) * u
            e_v = e_r + e_c + e_mean + e_c2 + 3 * u
            result["rows"], result["columns"] = e_r, e_c
        else:
            e_v_state = 2 * u + e_b2 + 4 * u * t
            e_v = e_v_state + e_c2 + u
            result["rows"] = e_v_state
        e_u0 = e_v / 2 + 2 * u
        e_rms = e_u0 + (n + 3) * u / 2
        e_u = e_u0 + e_rms + 2 * u
        M = record.first_moment
        dM = (b1 * self.first[name] + (1 - b1) * np.abs(record.update) * (e_u + one_minus(b1) + 2 * u)
              + 2 * u * (b1 * np.abs(previous_first) + np.abs(M)))
        self.first[name] = dM
        c1 = 1.0 - b1**t
        Mhat = record.corrected_moment
        dMhat = dM / c1 + np.abs(Mhat) * (correction(b1, t) + u)
        e_lr = 4 * u
        W_prev = np.abs(previous_parameter)
        delta = (rate * dMhat + rate * np.abs(Mhat) * (e_lr + 2 * u) + rate * opt.weight_decay * W_prev * (e_lr + 3 * u)
                 + u * (W_prev + np.abs(record.exact)))
        result["first"] = dM
        result["parameter"] = delta
        return result


def bf16_interval(exact, delta):
    """[round_bf16(W - delta), round_bf16(W + delta)]: what a Float32 value within delta of the
    exact W can round to (rounding is monotone)."""
    from reference import round_bf16
    return round_bf16(exact - delta), round_bf16(exact + delta)


def relative(value, expected):
    return bounds.relative_error(value, expected)


# ---------------------------------------------------------------------------------------------
# A world against its union (section 6)
# ---------------------------------------------------------------------------------------------


def _divide(low, high, divisor_low, divisor_high):
    """[low, high] / [divisor_low, divisor_high] for a positive divisor interval."""
    quotients = [low / divisor_low, low / divisor_high, high / divisor_low, high / divisor_high]
    return np.minimum.reduce(quotients), np.maximum.reduce(quotients)


def first_step_interval(name, W, G, delta, rate, beta1=0.9, beta2=0.999, clip=1.0, weight_decay=0.0):
    """[low, high] of the stored parameter after Adafactor's first step from W with any gradient
    within `delta` (Frobenius) of G: section 6's intervals, section 5's delta for the C
    arithmetic, each end rounded to BF16 for a matrix."""
    W, G = np.asarray(W, dtype=np.float64), np.asarray(G, dtype=np.float64)
    g_low, g_high = G - delta, G + delta
    is_matrix = tr.is_matrix(name)
    if is_matrix:
        rows, columns = G.shape
        ranges = []
        for norms, count in ((np.linalg.norm(G, axis=1), columns), (np.linalg.norm(G, axis=0), rows),
                             (np.array([np.linalg.norm(G)]), rows * columns)):
            ranges.append((np.maximum(norms - delta, 0.0) ** 2 / count + tr.ADAFACTOR_EPSILON,
                           (norms + delta) ** 2 / count + tr.ADAFACTOR_EPSILON))
        (r_low, r_high), (c_low, c_high), (m_low, m_high) = ranges
        v_low, v_high = np.outer(r_low, c_low) / m_high[0], np.outer(r_high, c_high) / m_low[0]
        u_low, u_high = _divide(g_low, g_high, np.sqrt(v_low), np.sqrt(v_high))
    else:  # G / sqrt(G^2 + eps) is increasing in G
        u_low = g_low / np.sqrt(g_low**2 + tr.ADAFACTOR_EPSILON)
        u_high = g_high / np.sqrt(g_high**2 + tr.ADAFACTOR_EPSILON)
    largest = np.maximum(np.abs(u_low), np.abs(u_high))
    smallest = np.where((u_low <= 0) & (u_high >= 0), 0.0, np.minimum(np.abs(u_low), np.abs(u_high)))
    shrink_low = max(1.0, math.sqrt(float(np.mean(smallest**2))) / clip)
    shrink_high = max(1.0, math.sqrt(float(np.mean(largest**2))) / clip)
    u_low, u_high = _divide(u_low, u_high, shrink_low, shrink_high)
    w_low, w_high = W - rate * (u_high + weight_decay * W), W - rate * (u_low + weight_decay * W)
    # The C arithmetic (section 5) at the largest |U| and |W'| of the interval.
    magnitude = np.maximum(np.abs(u_low), np.abs(u_high))
    optimizer = tr.Adafactor({name: G.shape}, beta1=beta1, beta2=beta2, clip=clip, weight_decay=weight_decay)
    optimizer.steps = 1
    record = tr.TensorStep(G, magnitude, 0.0, (1.0 - beta1) * magnitude, magnitude,
                           np.maximum(np.abs(w_low), np.abs(w_high)), None)
    arithmetic = AdafactorBounds(optimizer).step(name, record, np.zeros_like(G), rate, W)["parameter"]
    low, high = w_low - arithmetic, w_high + arithmetic
    if is_matrix:
        from reference import round_bf16
        low, high = round_bf16(low), round_bf16(high)
    return low, high
