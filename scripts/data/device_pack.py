#!/usr/bin/env python3
"""device_pack.py: the built corpora of a mixture in one archive small enough to carry to the GPU
machine (the `device` tool carries at most 64 MiB, and the image corpora take about 120 MB as PNG).
Every image becomes lossless WebP (`exact`: the colour under transparent pixels is kept too), so
its RGBA decodes to the same bits as the PNG's; records point at the .webp names; JSONL is
xz-compressed in the archive; --keep packs a spread subset of a large text corpus's train split. Unpack it at the repository root (`tar -xf PACK`) to get data/NAME/
as the corpus scripts write it, which the mixture's paths name.

    python3 scripts/data/device_pack.py [--mixture mixtures/images.json] [--splits train,test]
                                        [--keep gettext=300000] [--output data/pack/images.tar] [--jobs N]

Writes the archive atomically and prints its size; refuses a pack over --limit MiB (default 54:
the carry limit less the libraries that travel beside it).
"""

import argparse
import io
import json
import lzma
import os
import pathlib
import sys
import tarfile
import time
from concurrent.futures import ProcessPoolExecutor

ROOT = pathlib.Path(__file__).resolve().parents[2]


def webp_bytes(job):
    """(path, lossless WebP bytes of the image at path, RGBA as it decodes), kept in a cache folder
    (data/webp by default) so a second pack encodes only new or changed images."""
    from PIL import Image

    path, cached, exact = job
    if cached.is_file() and cached.stat().st_mtime >= path.stat().st_mtime:
        return path, cached.read_bytes()
    with Image.open(path) as image:
        out = io.BytesIO()
        image.convert("RGBA").save(out, "WEBP", lossless=True, exact=exact, method=4, quality=100)
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.with_suffix(".partial").write_bytes(out.getvalue())
    os.replace(cached.with_suffix(".partial"), cached)
    return path, out.getvalue()


def corpus_folders(mixture_path):
    """[data/NAME folder] of the mixture's sources, each source's path being NAME/SPLIT.jsonl."""
    mixture = json.loads(pathlib.Path(mixture_path).read_text(encoding="utf-8"))
    folders = []
    for source in mixture["sources"]:
        path = (pathlib.Path(mixture_path).parent / source["path"]).resolve()
        if not path.is_file():
            sys.exit(f"device_pack: {mixture_path}: source {source['name']}: {path} is missing: build it first (docs/data.md)")
        folders.append(path.parent)
    return folders


def rewrite(line, folder, images):
    """A record's line with each image side's PNG path replaced by its .webp one; notes the images."""
    record = json.loads(line)
    for key in ("query", "positives", "negatives", "positive", "negative"):
        sides = record.get(key)
        for side in sides if isinstance(sides, list) else [sides]:
            if isinstance(side, dict) and "image" in side:
                source = (folder / side["image"]).resolve()
                images.add(source)
                side["image"] = str(pathlib.PurePosixPath(side["image"]).with_suffix(".webp"))
    return json.dumps(record, ensure_ascii=False)


def add_bytes(archive, name, data):
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), 0, 0o644
    archive.addfile(info, io.BytesIO(data))


def pack(mixture, splits, output, keep=None, limit=54.0, jobs=None, root=ROOT, exact=True):
    """Writes the archive (names relative to root) and returns (record files, images, MiB)."""
    output = pathlib.Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    temporary = output.with_name(output.name + ".partial")
    keep = keep or {}
    images, files = set(), []
    for folder in corpus_folders(mixture):
        for split in splits:
            path = folder / f"{split}.jsonl"
            if not path.is_file():
                sys.exit(f"device_pack: {path} is missing: build the corpus first (docs/data.md)")
            lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
            if split == "train" and folder.name in keep and keep[folder.name] < len(lines):
                stride = len(lines) / keep[folder.name]
                lines = [lines[int(i * stride)] for i in range(keep[folder.name])]
            text = "\n".join(rewrite(line, folder, images) for line in lines)
            files.append((path, (text + "\n").encode("utf-8")))
    with open(temporary, "wb") as raw, tarfile.open(fileobj=raw, mode="w") as archive:
        for path, data in files:  # JSONL as .xz members: gpu.sh imagerun unpacks them
            add_bytes(archive, str(path.relative_to(root).with_suffix(".jsonl.xz")), lzma.compress(data, preset=9))
        cache = output.parent.parent / ("webp" if exact else "webp-inexact")  # beside the pack's folder, which travels alone
        work = [(path, cache / path.relative_to(root).with_suffix(".webp"), exact) for path in sorted(images)]
        with ProcessPoolExecutor(max_workers=jobs or os.cpu_count()) as pool:
            for path, data in pool.map(webp_bytes, work, chunksize=16):
                add_bytes(archive, str(path.relative_to(root).with_suffix(".webp")), data)
        raw.flush()
        os.fsync(raw.fileno())
    size = temporary.stat().st_size / 2**20
    if size > limit:
        temporary.unlink()
        sys.exit(f"device_pack: the pack would take {size:.1f} MiB, over --limit {limit} MiB: pack fewer splits or corpora")
    os.replace(temporary, output)
    return len(files), len(images), size


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mixture", default=str(ROOT / "mixtures" / "images.json"))
    parser.add_argument("--splits", default="train,test", help="splits of each corpus to pack (default train,test)")
    parser.add_argument("--output", default=str(ROOT / "data" / "pack" / "images.tar"))
    parser.add_argument("--keep", action="append", default=[], metavar="NAME=N",
                        help="pack about N records of corpus NAME's train split, every k-th line (default: all)")
    parser.add_argument("--limit", type=float, default=54.0, help="largest pack in MiB (default 54)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    args = parser.parse_args()
    started = time.time()
    keep = dict((name, int(count)) for name, count in (item.split("=", 1) for item in args.keep))
    files, images, size = pack(args.mixture, args.splits.split(","), args.output, keep, args.limit, args.jobs)
    print(f"device_pack: {files} record files, {images} images -> {args.output} ({size:.1f} MiB) in {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
