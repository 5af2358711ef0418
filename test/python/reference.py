# reference.py: a float64 NumPy implementation of SPEC.md sections 1-3, written from the spec
# alone, for checking the C library. It reads a checkpoint (model.safetensors parsed by hand, so
# that BF16 needs no framework), runs the encoder over a grid segment by segment, and gives every
# head. `bf16_inputs=True` rounds each matrix-product input to BF16 where the C fast path does;
# `bf16_inputs="e4m3"` also runs the blocks' four products in E4M3 with row scales, `"e4m3-tensor"` in
# E4M3 with per-tensor scales bounded from the weights (the GPU's UFORM_CUDA_E4M3=tensor; "e4m3-tensor-gate-up"
# with gate_up's output in E4M3 too, UFORM_CUDA_GATE_UP=e4m3; "e4m3-tensor-attention" with attention in FP8,
# UFORM_CUDA_E4M3_ATTENTION=e4m3; "e4m3-mixed" with a scale per row into out and down, UFORM_CUDA_E4M3=mixed), `bf16_inputs="int8"`
# in int8 with row scales and attention's scores in int8 with a scale per cell and head (docs/precision.md).

import json
import os
import struct
from dataclasses import dataclass

import numpy as np

VOCABULARY = 258
MASK = 256
PAD = 257
HEAD_WIDTH = 64
ROPE_SLOTS = 32
CELL_BYTE, CELL_IMAGE, CELL_VIDEO, CELL_AUDIO, CELL_PADDING = 0, 1, 2, 3, 4
RMS_EPSILON = 1e-6

_DTYPE_BYTES = {"BF16": 2, "F32": 4, "F16": 2, "F64": 8}


# ---------------------------------------------------------------------------------------------
# Checkpoint reading
# ---------------------------------------------------------------------------------------------


def read_safetensors(path):
    """Parses a SafeTensors file: returns (tensors as float64 arrays, metadata dict, header dict)."""
    with open(path, "rb") as file:
        blob = file.read()
    (header_length,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + header_length].decode("utf-8"))
    data = memoryview(blob)[8 + header_length :]
    metadata = header.get("__metadata__", {})
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        raw = bytes(data[begin:end])
        shape = tuple(entry["shape"])
        tensors[name] = widen(raw, entry["dtype"]).reshape(shape)
    return tensors, metadata, header


def widen(raw, dtype):
    """Raw little-endian bytes of one dtype to float64; BF16 is the high half of a Float32."""
    if dtype == "BF16":
        halves = np.frombuffer(raw, dtype="<u2").astype(np.uint32)
        return (halves << 16).view(np.float32).astype(np.float64)
    if dtype == "F32":
        return np.frombuffer(raw, dtype="<f4").astype(np.float64)
    if dtype == "F16":
        return np.frombuffer(raw, dtype="<f2").astype(np.float64)
    if dtype == "F64":
        return np.frombuffer(raw, dtype="<f8").astype(np.float64)
    raise ValueError(f"unsupported dtype {dtype}")


@dataclass
class Model:
    config: dict
    tensors: dict

    @property
    def width(self):
        return int(self.config["width"])

    @property
    def depth(self):
        return int(self.config["depth"])

    @property
    def heads(self):
        return int(self.config["heads"])

    @property
    def embedding_widths(self):
        return [int(w) for w in self.config["embedding_widths"]]


def load_model(directory):
    """Opens a checkpoint directory holding model.safetensors, or the sharded layout
    (model.safetensors.index.json naming its files; every file carries the config)."""
    index = os.path.join(directory, "model.safetensors.index.json")
    if os.path.exists(os.path.join(directory, "model.safetensors")) or not os.path.exists(index):
        files = ["model.safetensors"]
    else:
        with open(index, encoding="utf-8") as file:
            files = sorted(set(json.load(file)["weight_map"].values()))
    tensors, config = {}, None
    for name in files:
        found, metadata, _ = read_safetensors(os.path.join(directory, name))
        tensors.update(found)
        config = config or json.loads(metadata["config"])
    return Model(config=config, tensors=tensors)


# ---------------------------------------------------------------------------------------------
# Arithmetic pieces
# ---------------------------------------------------------------------------------------------


def round_bf16(x):
    """Rounds float64 values to the nearest BF16 (8 significant bits), ties to even."""
    x = np.asarray(x, dtype=np.float64)
    mantissa, exponent = np.frexp(x)  # x = mantissa * 2^exponent, |mantissa| in [0.5, 1)
    return np.ldexp(np.rint(mantissa * 256.0) / 256.0, exponent)


E4M3_LARGEST = 448.0


def round_e4m3(x):
    """Rounds float64 values to the nearest E4M3 value (4 significant bits, exponents from -6, the
    subnormals multiples of 2^-9), ties to even, magnitudes past 448 saturated to 448."""
    x = np.asarray(x, dtype=np.float64)
    _, exponent = np.frexp(np.abs(x))  # |x| = m 2^exponent, m in [0.5, 1): the binade is 2^(exponent - 1)
    quantum = np.ldexp(1.0, np.maximum(exponent - 1, -6) - 3)
    return np.sign(x) * np.minimum(np.rint(np.abs(x) / quantum) * quantum, E4M3_LARGEST)


def e4m3_weight(weight):
    """(codes' values, scales) of a BF16 matrix as the C library packs it: a scale per row,
    max |w| / 448 in Float32 (1 for a zero row), the values E4M3(w / scale) with the division in Float32."""
    w = np.asarray(weight, dtype=np.float32)
    largest = np.max(np.abs(w), axis=1)
    scale = np.where(largest > 0, largest / np.float32(E4M3_LARGEST), np.float32(1.0)).astype(np.float32)
    return round_e4m3((w / scale[:, None]).astype(np.float32)), scale.astype(np.float64)


def e4m3_product(x, weight):
    """x W^T with both sides in E4M3: x scaled per row (max |x| / 448), W as e4m3_weight."""
    x = np.asarray(x, dtype=np.float64)
    largest = np.max(np.abs(x), axis=1)
    scale = np.where(largest > 0, largest / E4M3_LARGEST, 1.0)
    codes, weight_scale = e4m3_weight(weight)
    return (round_e4m3(x / scale[:, None]) @ codes.T) * scale[:, None] * weight_scale[None, :]


def e4m3_input_bounds(model):
    """Each block product's input bound from the weights alone (docs/precision.md, "The scaling scheme,
    by measurement"), {id(weight): (bound, name)}: after a norm of gain g, sqrt(d) max |g|; the
    attention's output, a convex combination of value rows, that times the largest row norm of W_v;
    SwiGLU's |silu(a) b| <= max(|a|, 0.28) |b|, a and b bounded as v is."""
    d, tensors, bounds = model.width, model.tensors, {}
    rows = lambda w: float(np.max(np.linalg.norm(np.asarray(w, dtype=np.float64), axis=1)))  # noqa: E731
    for block in range(model.depth):
        prefix = f"blocks.{block}."
        attn, mlp = (np.sqrt(d) * float(np.max(np.abs(tensors[prefix + name]))) for name in ("attn_norm", "mlp_norm"))
        qkv, gate_up = tensors[prefix + "qkv"], tensors[prefix + "gate_up"]
        gate, up = mlp * rows(gate_up[: 4 * d]), mlp * rows(gate_up[4 * d :])
        for name, bound in {"qkv": attn, "out": attn * rows(qkv[2 * d : 3 * d]), "gate_up": mlp, "down": max(gate, 0.28) * up}.items():
            bounds[id(tensors[prefix + name])] = (float(bound), name)
    return bounds


def e4m3_attention_bounds(model):
    """Each block's bounds on q and k after rotation and on v, from the weights alone, [(q, k, v)]: after the
    attention norm |y|_2 <= sqrt(d) max |g|, so a q column is at most that times its W_q row's norm; a
    rotation mixes slots i and i + 32, |rotated| <= sqrt(2) times the larger bound of the two; v as
    e4m3_input_bounds bounds the attention's output."""
    d, tensors, found = model.width, model.tensors, []
    for block in range(model.depth):
        prefix = f"blocks.{block}."
        attn = np.sqrt(d) * float(np.max(np.abs(tensors[prefix + "attn_norm"])))
        norms = np.linalg.norm(np.asarray(tensors[prefix + "qkv"], dtype=np.float64), axis=1) * attn
        found.append((np.sqrt(2) * float(np.max(norms[:d])), np.sqrt(2) * float(np.max(norms[d : 2 * d])), float(np.max(norms[2 * d :]))))
    return found


def e4m3_gate_up_bounds(model):
    """Each block's bound on its gate_up product's output from the weights alone, [bound]: after the MLP
    norm |y|_2 <= sqrt(d) max |g|, so a column is at most that times its row's norm; the largest over
    gate's and up's rows (one scale for the product's output)."""
    d, tensors = model.width, model.tensors
    found = []
    for block in range(model.depth):
        prefix = f"blocks.{block}."
        mlp = np.sqrt(d) * float(np.max(np.abs(tensors[prefix + "mlp_norm"])))
        found.append(mlp * float(np.max(np.linalg.norm(np.asarray(tensors[prefix + "gate_up"], dtype=np.float64), axis=1))))
    return found


class E4m3Bounded:
    """A block's products in E4M3 with each input at its bound / 448 (e4m3_input_bounds), the weights
    at one scale a matrix, max |W| / 448 (`weights="tensor"`, the GPU's UFORM_CUDA_E4M3=tensor) or a
    scale a row (`"row"`, as e4m3_weight); `seen` keeps each product kind's largest |input| / bound.
    With `attention`, attention's two products in E4M3 too, as an FP8 scaled-dot-product forward runs them
    (docs/precision.md, "What 1.5x needs"): q, k and v at their bounds / 448 (e4m3_attention_bounds), the
    weights exp(s - max) in (0, 1] at 448, the row sums from the unrounded weights. With `gate_up`, the
    gate_up product's output in E4M3 too, as the GPU's UFORM_CUDA_GATE_UP=e4m3 has cuBLASLt write it: one
    scale a block, the larger of gate's and up's bounds (e4m3_gate_up_bounds) over 448. With `rows`, out's and
    down's inputs (the attention's output and silu(a) b, whose rows differ in size) at a scale per row instead,
    max |x| / 448 (the GPU's UFORM_CUDA_E4M3=mixed)."""

    def __init__(self, model, weights="tensor", attention=False, gate_up=False, rows=False):
        self.weights, self.codes, self.bounds, self.seen, self.rows = weights, {}, e4m3_input_bounds(model), {}, rows
        self.attention = e4m3_attention_bounds(model) if attention else None
        self.gate_up = e4m3_gate_up_bounds(model) if gate_up else None

    def gate_up_output(self, block, gate_up):
        """One block's gate_up product [cells, 8 d] as E4M3 codes at its bound's scale, given back as values."""
        bound = self.gate_up[block]
        self.seen["gate_up output"] = max(self.seen.get("gate_up output", 0.0), float(np.max(np.abs(gate_up))) / bound)
        return round_e4m3(gate_up / (bound / E4M3_LARGEST)) * (bound / E4M3_LARGEST)

    def attention_inputs(self, block, q, k, v):
        """(q, k, v) of one block as E4M3 codes at their bounds' scales, given back as values."""
        rounded = []
        for name, x, bound in zip(("q", "k", "v"), (q, k, v), self.attention[block]):
            self.seen[name] = max(self.seen.get(name, 0.0), float(np.max(np.abs(x))) / bound)
            rounded.append(round_e4m3(x / (bound / E4M3_LARGEST)) * (bound / E4M3_LARGEST))
        return tuple(rounded)

    @staticmethod
    def attention_weights(weights):
        return round_e4m3(weights * E4M3_LARGEST) / E4M3_LARGEST

    def weight(self, weight):
        if id(weight) not in self.codes:
            if self.weights == "tensor":
                w = np.asarray(weight, dtype=np.float32)
                largest = np.float32(np.max(np.abs(w)))
                scale = largest / np.float32(E4M3_LARGEST) if largest > 0 else np.float32(1.0)
                self.codes[id(weight)] = (round_e4m3((w / scale).astype(np.float32)), np.full(w.shape[0], float(scale)))
            else:
                self.codes[id(weight)] = e4m3_weight(weight)
        return self.codes[id(weight)]

    def __call__(self, x, weight):
        x = np.asarray(x, dtype=np.float64)
        codes, weight_scales = self.weight(weight)
        bound, name = self.bounds[id(weight)]
        if self.rows and name in ("out", "down"):
            largest = np.max(np.abs(x), axis=1)
            scale = np.where(largest > 0, largest / E4M3_LARGEST, 1.0)[:, None]
        else:
            self.seen[name] = max(self.seen.get(name, 0.0), float(np.max(np.abs(x))) / bound)
            scale = bound / E4M3_LARGEST if bound > 0 else 1.0
        return (round_e4m3(x / scale) @ codes.T) * scale * weight_scales[None, :]


INT8_LARGEST = 127.0


def round_int8(x):
    """Rounds float64 values to the nearest integer, ties to even (np.rint), clamped to [-127, 127]."""
    return np.clip(np.rint(np.asarray(x, dtype=np.float64)), -INT8_LARGEST, INT8_LARGEST)


def int8_weight(weight):
    """(codes, scales) of a BF16 matrix as the C library packs it: a scale per row, max |w| / 127 in
    Float32 (1 for a zero row), the codes round_int8(w / scale) with the division in Float32."""
    w = np.asarray(weight, dtype=np.float32)
    largest = np.max(np.abs(w), axis=1)
    scale = np.where(largest > 0, largest / np.float32(INT8_LARGEST), np.float32(1.0)).astype(np.float32)
    return round_int8((w / scale[:, None]).astype(np.float32)), scale.astype(np.float64)


def int8_product(x, weight):
    """x W^T with both sides in int8: x scaled per row (max |x| / 127), W as int8_weight; the sum of
    code products is exact (the C library's int32 sums are)."""
    x = np.asarray(x, dtype=np.float64)
    largest = np.max(np.abs(x), axis=1)
    scale = np.where(largest > 0, largest / INT8_LARGEST, 1.0)
    codes, weight_scale = int8_weight(weight)
    return (round_int8(x / scale[:, None]) @ codes.T) * scale[:, None] * weight_scale[None, :]


def int8_heads(x):
    """x [cells, heads, 64] as the int8 precision's attention reads q and k: each head's row scaled by
    max |row| / 127 (1 for a zero row), rounded to int8 codes, the codes times the scale."""
    x = np.asarray(x, dtype=np.float64)
    largest = np.max(np.abs(x), axis=-1, keepdims=True)
    scale = np.where(largest > 0, largest / INT8_LARGEST, 1.0)
    return round_int8(x / scale) * scale


def rmsnorm(x, scale):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + RMS_EPSILON) * scale


def silu(x):
    return x / (1.0 + np.exp(-x))


def softmax(scores, axis=-1):
    shifted = scores - np.max(scores, axis=axis, keepdims=True)
    weights = np.exp(shifted)
    return weights / np.sum(weights, axis=axis, keepdims=True)


def normalize(x, axis=-1):
    return x / np.linalg.norm(x, axis=axis, keepdims=True)


def rope_angles(positions):
    """Angles [cells, 32] for M-RoPE: slots 0..7 read t, 8..19 read h, 20..31 read w."""
    positions = np.asarray(positions, dtype=np.float64)
    slots = np.arange(ROPE_SLOTS, dtype=np.float64)
    inverse_frequencies = 10000.0 ** (-slots / ROPE_SLOTS)
    axis_of_slot = np.concatenate([np.zeros(8, int), np.ones(12, int), np.full(12, 2)])
    coordinates = positions[:, axis_of_slot]  # [cells, 32]
    return coordinates * inverse_frequencies


def mrope(x, angles):
    """Rotates [cells, heads, 64] per head: element j pairs with j + 32 ("rotate half")."""
    cos = np.cos(angles)[:, None, :]
    sin = np.sin(angles)[:, None, :]
    first, second = x[..., :ROPE_SLOTS], x[..., ROPE_SLOTS:]
    return np.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)


# ---------------------------------------------------------------------------------------------
# The encoder over one segment, and the heads
# ---------------------------------------------------------------------------------------------


class _Rounding:
    """Where the C fast path rounds a product's input to BF16; identity in Float64 mode. The blocks'
    products follow a narrow precision's name, or `bf16_inputs` itself where it is a callable
    (x, weight) -> x W^T; "e4m3-tensor" (and "e4m3-tensor-gate-up", gate_up's output in E4M3 too, or
    "e4m3-tensor-attention", attention in FP8 too, or "e4m3-mixed", a scale per row into out and down) needs the
    model, whose bounds it keeps."""

    def __init__(self, bf16_inputs, model=None):
        self.apply = round_bf16 if bf16_inputs else (lambda x: x)
        self.narrow = {"e4m3": e4m3_product, "int8": int8_product}.get(bf16_inputs) if isinstance(bf16_inputs, str) else None
        if callable(bf16_inputs):
            self.narrow = bf16_inputs
        elif bf16_inputs in ("e4m3-tensor", "e4m3-tensor-gate-up", "e4m3-tensor-attention", "e4m3-mixed") and model is not None:
            key = "_e4m3_bounded" + bf16_inputs[len("e4m3"):]
            if key not in model.__dict__:
                model.__dict__[key] = E4m3Bounded(model, gate_up=bf16_inputs.endswith("gate-up"),
                                                  attention=bf16_inputs.endswith("attention"), rows=bf16_inputs == "e4m3-mixed")
            self.narrow = model.__dict__[key]

    def block(self, x, weight):
        """One of a block's four products, x W^T: E4M3 or int8 in those modes, else with x a product input."""
        return self.narrow(x, weight) if self.narrow else self.apply(x) @ weight.T


# The media frontends (SPEC.md section 1): a cell kind's vector width and its two tensors.
MEDIA_FRONTENDS = {
    CELL_IMAGE: (1024, "vision.patch", "vision.bias"),  # 16x16 RGBA, (16 y + x) 4 + c
    CELL_VIDEO: (1536, "video.tube", "video.bias"),  # two 16x16 RGB frames, ((16 f + y) 16 + x) 3 + c
    CELL_AUDIO: (320, "audio.frame", "audio.bias"),  # 20 ms of 16 kHz mono
}


def frontend(model, kinds, values, media=None, bf16_inputs=False):
    """x [cells, d] entering the first block: a byte's row of embed.bytes, or a media cell's vector
    p (a row of media[kind]) as W p + b with the kind's tensors (MEDIA_FRONTENDS), p a product input."""
    tensors = model.tensors
    to_input = _Rounding(bf16_inputs).apply
    kinds, values = np.asarray(kinds), np.asarray(values, dtype=np.int64)
    x = np.zeros((len(values), model.width))
    byte = kinds == CELL_BYTE
    x[byte] = tensors["embed.bytes"][values[byte]]
    done = byte.copy()
    for kind, (width, weight, bias) in MEDIA_FRONTENDS.items():
        cells = kinds == kind
        if np.any(cells):
            rows = np.asarray(media[kind], dtype=np.float64).reshape(-1, width)[values[cells]]
            x[cells] = to_input(rows) @ tensors[weight].T + tensors[bias]
            done |= cells
    if np.any(~done):
        raise ValueError("padding or an unknown kind among a segment's cells")
    return x


def audio_frames(samples, most=512):
    """(frames [n, 320], positions [n, 3]) of 16 kHz samples: 320 a frame, the last zero-padded, at
    most `most` frames; t = h = w = frame index (docs/audio_video.md)."""
    samples = np.asarray(samples, dtype=np.float64)
    count = min(-(-len(samples) // 320), most)
    frames = np.zeros((count, 320))
    taken = samples[: count * 320]
    frames.reshape(-1)[: len(taken)] = taken
    index = np.arange(count)
    return frames, np.stack([index, index, index], axis=1)


def video_tubes(frames, ticks):
    """(tubes [steps * rows * columns, 1536], positions) of frames [F, 16 rows, 16 columns, 3] of
    values already at the grid's size (uint8 / 255): two frames a tube, the odd last frame repeated;
    t = ticks[2 step] (40 ms ticks), h = patch row, w = patch column."""
    frames = np.asarray(frames, dtype=np.float64)
    count, height, width, _ = frames.shape
    rows, columns, steps = height // 16, width // 16, -(-count // 2)
    tubes, positions = [], []
    for step in range(steps):
        first = frames[2 * step]
        second = frames[2 * step + 1] if 2 * step + 1 < count else first
        for row in range(rows):
            for column in range(columns):
                pair = [f[16 * row : 16 * row + 16, 16 * column : 16 * column + 16] for f in (first, second)]
                tubes.append(np.stack(pair).reshape(-1))
                positions.append((ticks[2 * step], row, column))
    return np.array(tubes), np.array(positions, dtype=np.int64)


def encode_segment(model, values, positions, bf16_inputs=False, statistics=None, kinds=None, media=None):
    """Final-normed states h [cells, d] of one segment (byte cells unless `kinds` says otherwise;
    `media` maps a media kind to its rows)."""
    tensors, width, heads = model.tensors, model.width, model.heads
    rounding = _Rounding(bf16_inputs, model)
    to_input = rounding.apply
    cells = len(values)
    if kinds is None:
        kinds = np.full(cells, CELL_BYTE)
    x = frontend(model, kinds, values, media, bf16_inputs)
    angles = rope_angles(positions)
    for block in range(model.depth):
        prefix = f"blocks.{block}."
        n = rmsnorm(x, tensors[prefix + "attn_norm"])
        qkv = rounding.block(n, tensors[prefix + "qkv"])
        q, k, v = (qkv[:, i * width : (i + 1) * width].reshape(cells, heads, HEAD_WIDTH) for i in range(3))
        if bf16_inputs == "int8":  # the scores an int8 product of q and k, a scale per cell and head
            q, k = int8_heads(mrope(q, angles)), int8_heads(mrope(k, angles))
        else:
            q, k = to_input(mrope(q, angles)), to_input(mrope(k, angles))
        v = to_input(v)
        fp8 = getattr(rounding.narrow, "attention", None) is not None  # E4m3Bounded(attention=True)
        if fp8:
            q, k, v = rounding.narrow.attention_inputs(block, q, k, v)
        scores = np.einsum("thc,shc->hts", q, k) / 8.0  # [heads, cells, cells], all one segment
        if statistics is not None:
            statistics["max_abs_score"] = max(statistics.get("max_abs_score", 0.0), float(np.max(np.abs(scores))))
        # The C fast path rounds e = exp(s - max) to BF16 and divides by the unrounded sum after
        # the product; in Float64 mode this is exactly softmax(scores) @ v.
        weights = np.exp(scores - np.max(scores, axis=-1, keepdims=True))
        sums = np.sum(weights, axis=-1).T[:, :, None]  # [t, heads, 1]
        rounded = rounding.narrow.attention_weights(weights) if fp8 else to_input(weights)
        attended = (np.einsum("hts,shc->thc", rounded, v) / sums).reshape(cells, width)
        x = x + rounding.block(attended, tensors[prefix + "out"])
        n = rmsnorm(x, tensors[prefix + "mlp_norm"])
        gate_up = rounding.block(n, tensors[prefix + "gate_up"])
        if getattr(rounding.narrow, "gate_up", None) is not None:  # E4m3Bounded(gate_up=True)
            gate_up = rounding.narrow.gate_up_output(block, gate_up)
        gate, up = gate_up[:, : 4 * width], gate_up[:, 4 * width :]
        x = x + rounding.block(silu(gate) * up, tensors[prefix + "down"])
    return rmsnorm(x, tensors["final_norm"])


def pool_segment(model, hidden, bf16_inputs=False):
    """The attention pool's e [E] of one segment's states h [cells, d] (not normalized)."""
    to_input = _Rounding(bf16_inputs).apply
    cells = hidden.shape[0]
    per_head = hidden.reshape(cells, model.heads, HEAD_WIDTH)
    query = model.tensors["pool.query"].reshape(model.heads, HEAD_WIDTH)
    alpha = softmax(np.einsum("thc,hc->ht", per_head, query) / 8.0, axis=-1)  # [heads, cells]
    pooled = np.einsum("ht,thc->hc", alpha, per_head).reshape(model.width)
    return to_input(pooled) @ model.tensors["pool.proj"].T


def colbert_cells(model, hidden, bf16_inputs=False):
    to_input = _Rounding(bf16_inputs).apply
    return normalize(to_input(hidden) @ model.tensors["rerank.proj"].T)


def mlm_cells(model, hidden, bf16_inputs=False):
    to_input = _Rounding(bf16_inputs).apply
    return to_input(hidden) @ model.tensors["mlm.head"].T


def matryoshka(e, width):
    """A Matryoshka embedding of width m: normalize(e[:m])."""
    return normalize(np.asarray(e)[..., :width])


def maxsim(query_vectors, document_vectors):
    """Sum over query cells of the best cosine among document cells (vectors are normalized)."""
    return float(np.sum(np.max(query_vectors @ document_vectors.T, axis=1)))


def maxsim_symmetric(query_vectors, document_vectors):
    """The mean over the shorter side's cells (the query's on a tie) of each one's best cosine among the other's."""
    if len(document_vectors) < len(query_vectors):
        query_vectors, document_vectors = document_vectors, query_vectors
    return maxsim(query_vectors, document_vectors) / len(query_vectors)


# ---------------------------------------------------------------------------------------------
# The grid
# ---------------------------------------------------------------------------------------------


def grid_segments(kinds, segments):
    """Segments as lists of (row, first column, cell count), in order of first cell, row by row.
    A segment is a contiguous run of non-padding cells of one row sharing a segment id."""
    found = []
    rows, columns = segments.shape
    for row in range(rows):
        column = 0
        while column < columns:
            if kinds[row, column] == CELL_PADDING or segments[row, column] < 0:
                column += 1
                continue
            start, identifier = column, segments[row, column]
            while column < columns and kinds[row, column] != CELL_PADDING and segments[row, column] == identifier:
                column += 1
            found.append((row, start, column - start))
    return found


@dataclass
class Outputs:
    hidden: np.ndarray  # [rows, columns, d], NaN at padding
    pooled: np.ndarray  # [segments, E]
    colbert: np.ndarray  # [rows, columns, colbert_width], NaN at padding
    logits: np.ndarray  # [rows, columns, 258], NaN at padding
    segments: list  # (row, first column, cells) per segment
    max_abs_score: float  # the largest |q.k / 8| seen, for error amplification


def forward(model, kinds, values, segments, positions, bf16_inputs=False, media=None):
    """Runs the encoder over a grid: kinds, values, segments [rows, columns], positions [rows, columns, 3],
    `media` mapping a media kind to its rows. Attention never crosses a segment, so each segment
    runs on its own."""
    kinds = np.asarray(kinds)
    values = np.asarray(values)
    segments = np.asarray(segments)
    positions = np.asarray(positions)
    rows, columns = kinds.shape
    width = model.width
    colbert_width = model.tensors["rerank.proj"].shape[0]
    found = grid_segments(kinds, segments)
    hidden = np.full((rows, columns, width), np.nan)
    colbert = np.full((rows, columns, colbert_width), np.nan)
    logits = np.full((rows, columns, VOCABULARY), np.nan)
    pooled = np.zeros((len(found), model.tensors["pool.proj"].shape[0]))
    statistics = {}
    for index, (row, start, cells) in enumerate(found):
        span = slice(start, start + cells)
        h = encode_segment(model, values[row, span], positions[row, span], bf16_inputs, statistics, kinds[row, span], media)
        hidden[row, span] = h
        pooled[index] = pool_segment(model, h, bf16_inputs)
        colbert[row, span] = colbert_cells(model, h, bf16_inputs)
        logits[row, span] = mlm_cells(model, h, bf16_inputs)
    return Outputs(hidden, pooled, colbert, logits, found, statistics.get("max_abs_score", 0.0))


def text_positions(length):
    """Bytes use t = h = w = index in segment."""
    index = np.arange(length)
    return np.stack([index, index, index], axis=1)


def encode_text(model, data, bf16_inputs=False):
    """(h, e) of one text as its own segment."""
    values = np.frombuffer(bytes(data), dtype=np.uint8).astype(np.int64)
    h = encode_segment(model, values, text_positions(len(values)), bf16_inputs)
    return h, pool_segment(model, h, bf16_inputs)
