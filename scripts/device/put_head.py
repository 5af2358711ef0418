#!/usr/bin/env python3
"""put_head.py: writes the tensors of a small SafeTensors file (the rehead stage's rehead.safetensors:
rerank.proj and the SigLIP scalars) into a checkpoint folder over the same names, single-file or
sharded (model.safetensors.index.json), leaving every other byte as it was. Each tensor must match
the checkpoint's in dtype and shape; a shard it changes is rewritten to a temporary name, synced and
renamed over the old one.

    python3 scripts/device/put_head.py HEAD.safetensors CHECKPOINT_DIR
"""

import json
import os
import pathlib
import sys


def read_header(path):
    """(header dict, data start) of a SafeTensors file, or SystemExit naming the file and the problem."""
    data = pathlib.Path(path).read_bytes()
    if len(data) < 8 or int.from_bytes(data[:8], "little") > len(data) - 8:
        sys.exit(f"put_head: {path}: not a SafeTensors file (truncated header)")
    size = int.from_bytes(data[:8], "little")
    try:
        header = json.loads(data[8 : 8 + size])
    except ValueError as error:
        sys.exit(f"put_head: {path}: not a SafeTensors file ({error})")
    header.pop("__metadata__", None)
    for name, entry in header.items():
        start, end = entry["data_offsets"]
        if not 0 <= start <= end <= len(data) - 8 - size:
            sys.exit(f"put_head: {path}: tensor {name} lies past the end of the file (truncated)")
    return header, 8 + size, data


def put_head(head_path, checkpoint):
    head, head_start, head_data = read_header(head_path)
    if not head:
        sys.exit(f"put_head: {head_path}: holds no tensors")
    checkpoint = pathlib.Path(checkpoint)
    index = checkpoint / "model.safetensors.index.json"
    shard_of = json.loads(index.read_text())["weight_map"] if index.is_file() else {name: "model.safetensors" for name in head}
    by_shard = {}
    for name in head:
        if name not in shard_of:
            sys.exit(f"put_head: {checkpoint} has no tensor {name}")
        by_shard.setdefault(shard_of[name], []).append(name)
    for shard, names in sorted(by_shard.items()):
        path = checkpoint / shard
        header, start, data = read_header(path)
        data = bytearray(data)
        for name in names:
            if name not in header:
                sys.exit(f"put_head: {path} has no tensor {name}")
            old, new = header[name], head[name]
            if (old["dtype"], old["shape"]) != (new["dtype"], new["shape"]):
                sys.exit(f"put_head: {name} is {new['dtype']} {new['shape']} in {head_path}, {old['dtype']} {old['shape']} in {path}")
            a, b = old["data_offsets"]
            c, d = new["data_offsets"]
            data[start + a : start + b] = head_data[head_start + c : head_start + d]
        temporary = path.with_name(path.name + ".partial")
        with open(temporary, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
        print(f"put_head: {path}: {', '.join(names)}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-1].strip())
    put_head(sys.argv[1], sys.argv[2])
