#!/usr/bin/env python3
"""device_pack.py: the built corpora of mixtures in one archive small enough to carry to the GPU
machine (the `device` tool carries at most 64 MiB, and the image corpora take about 120 MB as PNG).
Every image becomes lossless WebP (`exact`: the colour under transparent pixels is kept too), so
its RGBA decodes to the same bits as the PNG's; records point at the .webp names; audio and video
clips ({"audio": PATH}, {"video": PATH} sides) travel as they are (build the speech corpus with
--codec opus for a pack that fits: its FLAC takes about 78 MB); JSONL is
xz-compressed in the archive; --keep packs a spread subset of a large corpus's train records. Unpack it at the repository root (`tar -xf PACK`) to get data/NAME/
as the corpus scripts write it, which the mixture's paths name. Each mixture's source files are
packed (whatever their names: train.jsonl, text.jsonl, images.jsonl, train-negatives.jsonl), and
--splits adds those splits of every source's corpus folder; --sources and --skip-sources pick the
mixtures' sources by name (a large mixture in packs of two calls); --no-images packs the records alone,
for a machine that already holds the pictures from another pack.

    python3 scripts/data/device_pack.py [--mixture mixtures/images.json ...] [--splits train,test]
                                        [--keep gettext=300000] [--split-limit N] [--no-images] [--lossy NAME=Q] [--xz-preset 9]
                                        [--sources A,B] [--skip-sources C,D] [--output data/pack/images.tar] [--jobs N]

Writes the archive atomically and prints its size; refuses a pack over --limit MiB (default 54:
the carry limit less the libraries that travel beside it).
"""

import argparse
import functools
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

    path, cached, exact, quality = job
    if cached.is_file() and cached.stat().st_mtime >= path.stat().st_mtime:
        return path, cached.read_bytes()
    with Image.open(path) as image:
        out = io.BytesIO()
        if quality:  # lossy: smaller, and no longer the PNG's bits (--lossy)
            image.convert("RGBA").save(out, "WEBP", lossless=False, exact=exact, method=4, quality=quality)
        else:
            image.convert("RGBA").save(out, "WEBP", lossless=True, exact=exact, method=4, quality=100)
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.with_suffix(".partial").write_bytes(out.getvalue())
    os.replace(cached.with_suffix(".partial"), cached)
    return path, out.getvalue()


def source_files(mixture_path, sources=None, skip=()):
    """[path] of the mixture's source files (each NAME/FILE.jsonl under a corpus folder): only those
    whose name is in `sources` when given, none whose name is in `skip`."""
    mixture = json.loads(pathlib.Path(mixture_path).read_text(encoding="utf-8"))
    paths = []
    for source in mixture["sources"]:
        if (sources is not None and source.get("name") not in sources) or source.get("name") in skip:
            continue
        path = (pathlib.Path(mixture_path).parent / source["path"]).resolve()
        if not path.is_file():
            sys.exit(f"device_pack: {mixture_path}: source {source.get('name', path.name)}: {path} is missing: build it first (docs/data.md)")
        paths.append(path)
    return paths


def rewrite(line, folder, images, clips=None):
    """A record's line with each image side's PNG path replaced by its .webp one; notes the images,
    and in `clips` the audio and video files its sides name (kept as they are)."""
    record = json.loads(line)
    for key in ("query", "positives", "negatives", "positive", "negative", None):
        sides = record if key is None else record.get(key)  # None: an {"image": PATH} record itself
        for side in sides if isinstance(sides, list) else [sides]:
            if isinstance(side, dict) and "image" in side:
                source = (folder / side["image"]).resolve()
                images.add(source)
                side["image"] = str(pathlib.PurePosixPath(side["image"]).with_suffix(".webp"))
            for kind in ("audio", "video"):
                if isinstance(side, dict) and kind in side and clips is not None:
                    clips.add((folder / side[kind]).resolve())
    return json.dumps(record, ensure_ascii=False)


def add_bytes(archive, name, data):
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), 0, 0o644
    archive.addfile(info, io.BytesIO(data))


def spread(lines, count):
    """count of lines, every k-th (lineage.eval_sets' spread: each catalogue and language keeps its share)."""
    if len(lines) <= count:
        return lines
    stride = len(lines) / count
    return [lines[int(i * stride)] for i in range(count)]


def pack(mixtures, splits, output, keep=None, limit=54.0, jobs=None, root=ROOT, exact=True, images_too=True, lossy=None,
         xz_preset=9, split_limit=None, sources=None, skip=()):
    """Writes the archive (names relative to root) and returns (record files, images, MiB)."""
    output = pathlib.Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    temporary = output.with_name(output.name + ".partial")
    keep = keep or {}
    paths = []
    mixtures = [mixtures] if isinstance(mixtures, str) else mixtures
    names = {source.get("name") for mixture in mixtures for source in json.loads(pathlib.Path(mixture).read_text(encoding="utf-8"))["sources"]}
    unknown = sorted((set(sources or ()) | set(skip)) - names)
    if unknown:
        sys.exit(f"device_pack: no source of {', '.join(map(str, mixtures))} is named {', '.join(unknown)}")
    for mixture in mixtures:
        for source in source_files(mixture, sources, skip):
            for path in [source] + [source.parent / f"{split}.jsonl" for split in splits]:
                if path not in paths:
                    paths.append(path)
    images, clips, files = set(), set(), []
    for path in paths:
        if not path.is_file():
            sys.exit(f"device_pack: {path} is missing: build the corpus first (docs/data.md)")
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        held_out = path.stem in ("dev", "test")
        if not held_out and path.parent.name in keep:
            lines = spread(lines, keep[path.parent.name])
        if held_out and split_limit:
            lines = spread(lines, split_limit)
        text = "\n".join(rewrite(line, path.parent, images, clips) for line in lines)
        files.append((path, (text + "\n").encode("utf-8")))
    if not images_too:
        images, clips = set(), set()
    lossy = lossy or {}
    with open(temporary, "wb") as raw, tarfile.open(fileobj=raw, mode="w") as archive, \
            ProcessPoolExecutor(max_workers=jobs or os.cpu_count()) as pool:
        xz = functools.partial(lzma.compress, preset=xz_preset)
        for (path, _), data in zip(files, pool.map(xz, [data for _, data in files])):  # JSONL as .xz members: gpu.sh unpacks them
            add_bytes(archive, str(path.relative_to(root).with_suffix(".jsonl.xz")), data)
        work = []
        for path in sorted(images):  # caches beside the pack's folder, which travels alone
            quality = lossy.get(path.relative_to(root / "data").parts[0]) if path.is_relative_to(root / "data") else None
            cache = output.parent.parent / ("webp" if exact else "webp-inexact")
            if quality:
                cache = cache.with_name(f"{cache.name}-q{quality}")
            work.append((path, cache / path.relative_to(root).with_suffix(".webp"), exact, quality))
        for path, data in pool.map(webp_bytes, work, chunksize=16):
            add_bytes(archive, str(path.relative_to(root).with_suffix(".webp")), data)
        for path in sorted(clips):
            if not path.is_file():
                sys.exit(f"device_pack: {path} is missing: build the corpus first (docs/data.md)")
            add_bytes(archive, str(path.relative_to(root)), path.read_bytes())
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
    parser.add_argument("--mixture", action="append", help="a mixture whose sources to pack; repeat for several (default mixtures/images.json)")
    parser.add_argument("--splits", default="train,test", help="splits of each source's corpus to pack beside its source files (default train,test; '' none)")
    parser.add_argument("--output", default=str(ROOT / "data" / "pack" / "images.tar"))
    parser.add_argument("--keep", action="append", default=[], metavar="NAME=N",
                        help="pack about N records of each of corpus NAME's files but dev and test, every k-th line (default: all)")
    parser.add_argument("--split-limit", type=int, default=0, metavar="N",
                        help="pack N records of each dev and test file, spread as lineage.py's held-out sets are (default 0: all)")
    parser.add_argument("--no-images", action="store_true", help="pack the records only, not their images")
    parser.add_argument("--xz-preset", type=int, default=9, choices=range(10), metavar="0-9",
                        help="xz level of the record files (default 9, the smallest; 6 packs several times faster)")
    parser.add_argument("--lossy", action="append", default=[], metavar="NAME=Q",
                        help="corpus NAME's images as lossy WebP of quality Q (smaller; no longer the PNG's bits)")
    parser.add_argument("--sources", help="pack only the mixtures' sources of these names (comma-separated)")
    parser.add_argument("--skip-sources", default="", help="leave out the mixtures' sources of these names (comma-separated)")
    parser.add_argument("--limit", type=float, default=54.0, help="largest pack in MiB (default 54)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    args = parser.parse_args()
    started = time.time()
    keep = dict((name, int(count)) for name, count in (item.split("=", 1) for item in args.keep))
    mixtures = args.mixture or [str(ROOT / "mixtures" / "images.json")]
    splits = [split for split in args.splits.split(",") if split]
    lossy = dict((name, int(quality)) for name, quality in (item.split("=", 1) for item in args.lossy))
    files, images, size = pack(mixtures, splits, args.output, keep, args.limit, args.jobs, images_too=not args.no_images,
                               lossy=lossy, xz_preset=args.xz_preset, split_limit=args.split_limit,
                               sources=args.sources.split(",") if args.sources else None,
                               skip=[name for name in args.skip_sources.split(",") if name])
    print(f"device_pack: {files} record files, {images} images -> {args.output} ({size:.1f} MiB) in {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
