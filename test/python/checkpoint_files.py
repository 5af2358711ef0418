# checkpoint_files.py: writes and takes apart model.safetensors files from Python, through the
# `safetensors` package where it can, so that tests can make checkpoints our library never wrote
# (random weights with non-trivial norm scales and pool query) and break them in precise ways.

import json
import os
import struct

import numpy as np
import safetensors

from reference import VOCABULARY, round_bf16

# Vectors are stored in Float32, matrices in BF16 (SPEC.md section 5).
VECTOR_NAMES = ("attn_norm", "mlp_norm", "final_norm", "pool.query", "siglip.scale", "siglip.bias", "vision.bias",
                "video.bias", "audio.bias", "mae.bias", "mae_audio.bias", "mae_video.bias")
PATCH_VALUES = 16 * 16 * 4  # an RGBA patch (SPEC.md section 1)
TUBE_VALUES = 16 * 16 * 3 * 2  # an RGB tube of two frames
FRAME_VALUES = 320  # 20 ms of 16 kHz audio


def tensor_shapes(config, frontends=()):
    """Every tensor name of a checkpoint with its shape: bytes, and the `frontends` ("vision",
    "video", "audio", and the heads "mae", "mae_audio", "mae_video")."""
    width, embedding = config["width"], config["embedding_widths"][-1]
    shapes = {"embed.bytes": (VOCABULARY, width)}
    if "vision" in frontends:
        shapes["vision.patch"] = (width, PATCH_VALUES)
        shapes["vision.bias"] = (width,)
    if "video" in frontends:
        shapes["video.tube"] = (width, TUBE_VALUES)
        shapes["video.bias"] = (width,)
    if "audio" in frontends:
        shapes["audio.frame"] = (width, FRAME_VALUES)
        shapes["audio.bias"] = (width,)
    if "mae" in frontends:  # the masked patches' head (docs/images.md), with the vision frontend
        shapes["mae.head"] = (PATCH_VALUES, width)
        shapes["mae.bias"] = (PATCH_VALUES,)
    for head, values in (("mae_audio", FRAME_VALUES), ("mae_video", TUBE_VALUES)):  # masked clips' heads (docs/audio_video.md)
        if head in frontends:
            shapes[f"{head}.head"] = (values, width)
            shapes[f"{head}.bias"] = (values,)
    for block in range(config["depth"]):
        prefix = f"blocks.{block}."
        shapes[prefix + "attn_norm"] = (width,)
        shapes[prefix + "qkv"] = (3 * width, width)
        shapes[prefix + "out"] = (width, width)
        shapes[prefix + "mlp_norm"] = (width,)
        shapes[prefix + "gate_up"] = (8 * width, width)
        shapes[prefix + "down"] = (width, 4 * width)
    shapes["final_norm"] = (width,)
    shapes["pool.query"] = (width,)
    shapes["pool.proj"] = (embedding, width)
    shapes["rerank.proj"] = (config["colbert_width"], width)
    shapes["mlm.head"] = (VOCABULARY, width)
    shapes["siglip.scale"] = ()  # scalars; SPEC.md gives no shape, our library writes rank 0
    shapes["siglip.bias"] = ()
    return shapes


def dtype_of(name):
    return "F32" if name.endswith(VECTOR_NAMES) else "BF16"


def bf16_bytes(values):
    """Float values rounded to BF16 (ties to even), as little-endian raw bytes."""
    rounded = round_bf16(np.asarray(values, dtype=np.float64)).astype(np.float32)
    return (rounded.view(np.uint32) >> 16).astype("<u2").tobytes()


def raw_bytes(values, dtype):
    if dtype == "BF16":
        return bf16_bytes(values)
    if dtype == "F32":
        return np.asarray(values, dtype="<f4").tobytes()
    raise ValueError(dtype)


def random_tensors(config, seed, attention_gain=1.0, frontends=()):
    """Random weights in float64 (already on the BF16 / Float32 grid they will be stored on).
    Norm scales and the pool query are random, not 1 and 0, so every term of the spec matters.
    `attention_gain` scales the q and k rows so that attention logits are not all near zero."""
    rng = np.random.default_rng(seed)
    tensors = {}
    for name, shape in tensor_shapes(config, frontends).items():
        if name in ("vision.bias", "video.bias", "audio.bias"):
            values = rng.normal(0.0, 0.5, size=shape)
        elif name in ("mae.bias", "mae_video.bias"):
            values = rng.uniform(0.2, 0.8, size=shape)
        elif name == "mae_audio.bias":
            values = rng.uniform(-0.3, 0.3, size=shape)
        elif name.endswith(("attn_norm", "mlp_norm", "final_norm")):
            values = rng.uniform(0.5, 1.5, size=shape)
        elif name == "pool.query":
            values = rng.normal(0.0, 1.0, size=shape)
        elif name == "siglip.scale":
            values = np.full(shape, np.log(10.0))
        elif name == "siglip.bias":
            values = np.full(shape, -10.0)
        elif name == "embed.bytes":
            values = rng.normal(0.0, 1.0, size=shape)
        else:
            values = rng.normal(0.0, 1.0 / np.sqrt(shape[1]), size=shape)
            if name.endswith(("out", "down")):
                values *= 0.5  # keeps the residual stream from growing block over block
            if name.endswith("qkv"):
                values[: 2 * config["width"]] *= attention_gain
        stored = round_bf16(values) if dtype_of(name) == "BF16" else values.astype(np.float32).astype(np.float64)
        tensors[name] = stored
    return tensors


def small_config(width, depth, columns):
    """The configuration of a custom "WIDTHxDEPTH" model as its metadata records it."""
    widths = [w for w in (64, 128, 256, 512, 1024, 2048) if w <= width]
    return {"tier": f"{width}x{depth}", "width": width, "depth": depth, "heads": width // 64,
            "embedding_widths": widths, "colbert_width": 128, "columns": columns}


def config_metadata(config):
    keys = ("tier", "width", "depth", "heads", "embedding_widths", "colbert_width", "columns")
    return {"config": json.dumps({key: config[key] for key in keys})}


def serialize(entries, metadata):
    """entries: name -> (dtype, shape, raw bytes). Uses the safetensors package's own writer."""
    names = {"BF16": "bfloat16", "F16": "float16", "F32": "float32", "F64": "float64", "I8": "int8", "U8": "uint8",
             "I16": "int16", "I32": "int32", "I64": "int64"}
    if hasattr(safetensors, "TensorSpec"):
        buffers = {name: np.frombuffer(raw, dtype=np.uint8).copy() for name, (_, _, raw) in entries.items()}
        specs = {
            name: safetensors.TensorSpec(
                dtype=names.get(dtype, dtype), shape=list(shape), data_ptr=buffers[name].ctypes.data, data_len=len(raw)
            )
            for name, (dtype, shape, raw) in entries.items()
        }
        blob = bytes(safetensors.serialize(specs, metadata=metadata))
        del buffers  # kept alive until the writer is done
        return blob
    plain = {name: {"dtype": names.get(dtype, dtype), "shape": list(shape), "data": raw} for name, (dtype, shape, raw) in entries.items()}
    return bytes(safetensors.serialize(plain, metadata=metadata))


def write_checkpoint(directory, config, tensors):
    """Writes model.safetensors with the package's writer; tensors are float64 arrays by name."""
    entries = {name: (dtype_of(name), values.shape, raw_bytes(values, dtype_of(name))) for name, values in tensors.items()}
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "model.safetensors")
    with open(path, "wb") as file:
        file.write(serialize(entries, config_metadata(config)))
    return path


def split_file(path):
    """(header dict, data bytes) of a SafeTensors file."""
    with open(path, "rb") as file:
        blob = file.read()
    (length,) = struct.unpack("<Q", blob[:8])
    return json.loads(blob[8 : 8 + length]), blob[8 + length :]


def join_file(path, header, data):
    """Writes a SafeTensors file from a header dict and data bytes, by hand (no validation)."""
    text = json.dumps(header).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as file:
        file.write(struct.pack("<Q", len(text)) + text + data)
