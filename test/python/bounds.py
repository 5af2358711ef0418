# bounds.py: error bounds for comparing the C library against the float64 reference, derived from
# the arithmetic (never tuned to what the C code happens to give). The derivation:
#
# Rounding points. Every product of the encoder (qkv, q.k, p.v, out, gate_up, down, and the heads'
# pool.proj, rerank.proj, mlm.head) has its inputs at a "rounding point": in BF16 mode the C code
# rounds them to BF16, in Float32 mode they only carry Float32 error.
#
# Gain G. Let every rounding point get an independent relative perturbation of rms size rho; the
# output then moves by G * rho (relative, in norm). G is a property of the model and the input,
# not of any implementation, so we measure it on the reference itself. Round-to-nearest-even to
# BF16 (8 significant bits) moves a value of mantissa m in [1, 2) by an absolute error uniform
# over +-2^-8 (in units of the binade), a relative error uniform over +-2^-8 / m; its rms lies
# between 2^-9 / sqrt(3) (m near 2) and 2^-8 / sqrt(3) (m near 1). With
# E_r = ||R_bf16 - R_f64|| / ||R_f64|| (the two references), dividing by the smallest rms keeps G
# on the large side:
#     G = E_r / rho_bf16,  rho_bf16 = 2^-9 / sqrt(3),  so G = sqrt(3) * 2^9 * E_r.
#
# Float32 mode. A Float32 dot product of depth K is off by at most gamma_K ~ K * 2^-24 relative
# to sum |a_i b_i|; for signs that cancel like a random walk, sum |a_i b_i| is ~sqrt(K) times
# |sum a_i b_i|, and the accumulated error ~sqrt(K) * 2^-24 of the sum, so K * 2^-24 bounds the
# relative error of the output (the typical error is ~sqrt(K) * 2^-24). The deepest products are
# down (K = 4d) and p.v over the longest segment (K = n); the rotary angles p * inv_freq carry an
# absolute error of about P * 2^-24 for the largest coordinate P, and exp, sin, cos, sqrt are a
# few ulp. So each rounding point carries at most
#     eps_32 = (4 d + n + P) * 2^-24,
# which reaches the output through the same gain G, and the last product adds eps_32 once more:
#     B_f32 = (1 + G) * (4 d + n + P) * 2^-24.
#
# BF16 mode. The C code and the BF16 reference round at the same points; where both see the same
# value they agree, and where their Float32 / float64 values straddle a rounding boundary they
# differ by one BF16 ulp (2^-7 relative at most). With X the exact result, C = X + E_c, and
# R_bf16 = X + E_r, where E_c holds the C code's rounding effect (same points, same rule, so the
# same size as E_r) plus its Float32 error (B_f32): by the triangle inequality
#     ||C - R_bf16|| / ||R_bf16|| <= 2 E_r + B_f32.
# The same argument bounds two C results for one item (packed differently): 2 (E_r + B_f32) in
# BF16 mode, 2 B_f32 in Float32 mode.
#
# E4M3 mode. The blocks' four products round both sides to E4M3 (4 significant bits) after scaling
# by a row's max / 448, the rest as in BF16 mode. The argument above holds as it stands with the
# E4M3 reference R_e4m3 (the same points, the same rule, the weights' codes bit for bit the C
# library's): ||C - R_e4m3|| / ||R_e4m3|| <= 2 E_e + B_f32, E_e = ||R_e4m3 - R_f64|| / ||R_f64||.
# E4M3's relative rounding is 16 times BF16's (rms up to 2^-4 / sqrt(3)), so E_e ~ 16 E_r.
#
# int8 mode. The blocks' four products round both sides to integers in [-127, 127] after scaling by a
# row's max / 127 (ties to even; no value is clamped, as the scale maps the row's largest to 127), the
# rest as in BF16 mode. Again the same argument with the int8 reference R_int8 (the same points and
# rule; the weights' codes and scales bit for bit the C library's, made in Float32 as it makes them):
# ||C - R_int8|| / ||R_int8|| <= 2 E_i + B_f32, E_i = ||R_int8 - R_f64|| / ||R_f64||. The C code's
# and the reference's input codes differ only where the Float32 and float64 values (and scales, one
# Float32 rounding apart) straddle a half-integer, by one step, which is the "same size as E_i" of the
# BF16 argument. The products add nothing: the sums of code products are exact in int32 in C (255 x
# 127 x depth < 2^31) and exact in float64 in the reference (< 2^53), and the C code's three Float32
# roundings after the sum (the sum converted, times each scale) are below B_f32's depth term. The
# rounding is absolute, half a step of max / 127: relative to a value x it is |x| / max of that, so
# small entries of a row lose more than under E4M3's 4 significant bits and large ones less; E_i is
# what the model measures, about E_e / 2 to E_e on the test models.
#
# In terms of depth L and width d. Along the path to an output lie S = 8 L + 1 rounding points
# (per block: the inputs of qkv, q, k, v, p, out, gate_up, down; then one head input), so with
# independent perturbations G ~ sqrt(8 L + 1) * g, g the gain of one point (at most about 1 where
# branches are small against the residual stream, up to 1 + 2 max|q.k / 8| through a sharp
# softmax). Hence, a priori,
#     B_f32  ~ (1 + sqrt(8 L + 1) g) (4 d + n + P) 2^-24,
#     B_bf16 ~ 2 sqrt(8 L + 1) g 2^-8 / sqrt(3) + B_f32  (rms 2^-8 / sqrt(3) at most);
# the tests use the measured G instead of the estimate, so the bounds follow the actual model.

import numpy as np

UNIT_F32 = 2.0**-24
UNIT_BF16 = 2.0**-8
RMS_BF16 = UNIT_BF16 / 2.0 / np.sqrt(3.0)  # the smallest rms of BF16 relative rounding error


def relative_error(value, expected):
    """||value - expected|| / ||expected|| over all entries (both already free of padding)."""
    value = np.asarray(value, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    denominator = np.linalg.norm(expected)
    return float(np.linalg.norm(value - expected) / denominator) if denominator > 0 else float(np.linalg.norm(value))


def float32_rounding(width, longest, largest_coordinate, deepest=0):
    """eps_32: the worst relative error each rounding point carries in Float32 mode; `deepest` is a
    frontend's product depth where it exceeds down's 4 d (1024 for image patches)."""
    return (max(4 * width, deepest) + longest + largest_coordinate) * UNIT_F32


def gain(reference_f64, reference_bf16):
    """G: how much the output moves per unit rms relative perturbation at every rounding point."""
    return relative_error(reference_bf16, reference_f64) / RMS_BF16


def bound_f32(reference_f64, reference_bf16, width, longest, largest_coordinate, deepest=0):
    """B_f32 = (1 + G) * (4 d + n + P) * 2^-24: C in Float32 mode against the float64 reference."""
    return (1.0 + gain(reference_f64, reference_bf16)) * float32_rounding(width, longest, largest_coordinate, deepest)


def bound_bf16(reference_f64, reference_bf16, width, longest, largest_coordinate, deepest=0):
    """2 E_r + B_f32: C in BF16 mode against the BF16-input reference."""
    rounding = relative_error(reference_bf16, reference_f64)
    return 2.0 * rounding + bound_f32(reference_f64, reference_bf16, width, longest, largest_coordinate, deepest)


def bound_rounded(reference_f64, reference_bf16, reference_rounded, width, longest, largest_coordinate, deepest=0):
    """2 E + B_f32 against a reference that rounds where the C code does (BF16, E4M3 or int8)."""
    rounding = relative_error(reference_rounded, reference_f64)
    return 2.0 * rounding + bound_f32(reference_f64, reference_bf16, width, longest, largest_coordinate, deepest)


def bound(precision_is_bf16, reference_f64, reference_bf16, width, longest, largest_coordinate, deepest=0):
    if precision_is_bf16:
        return bound_bf16(reference_f64, reference_bf16, width, longest, largest_coordinate, deepest)
    return bound_f32(reference_f64, reference_bf16, width, longest, largest_coordinate, deepest)


def bound_between_runs(precision_is_bf16, reference_f64, reference_bf16, width, longest, largest_coordinate):
    """Two C results for the same item, each within its own bound of the exact one."""
    float32 = bound_f32(reference_f64, reference_bf16, width, longest, largest_coordinate)
    if precision_is_bf16:
        return 2.0 * (relative_error(reference_bf16, reference_f64) + float32)
    return 2.0 * float32
