# test_device_pack.py: scripts/data/device_pack.py on a small tree written here. The pack holds
# each split's records with image paths turned to .webp, and every image as lossless WebP whose
# RGBA is the PNG's bit for bit (the colour under transparent pixels too); --keep spreads its
# subset over the file, --split-limit spreads the held-out files as lineage.py's eval sets do (so
# the device scores the same records); a pack over the limit is refused and leaves no file. A planted control
# (WebP without `exact`, which drops the colour under transparent pixels) must fail the same check.

import io
import json
import lzma
import pathlib
import sys
import tarfile

import numpy
import pytest
from PIL import Image

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "data"))
import device_pack  # noqa: E402


def write_tree(root):
    """root/data/pics (three images, one with colour under transparent pixels) and root/data/words
    (text pairs), a mixture over both; returns the mixture's path and {png path: RGBA array}."""
    rng = numpy.random.default_rng(7)
    pictures = {}
    (root / "data" / "pics" / "img").mkdir(parents=True)
    for index, (height, width) in enumerate([(20, 30), (33, 17), (64, 64)]):
        rgba = rng.integers(0, 256, (height, width, 4), dtype=numpy.uint8)
        rgba[: height // 2, :, 3] = 0  # transparent, with colour beneath
        path = root / "data" / "pics" / "img" / f"p{index}.png"
        Image.fromarray(rgba, "RGBA").save(path)
        pictures[path] = rgba
    records = [{"query": f"picture {i}", "positives": [{"image": f"img/p{i}.png"}]} for i in range(3)]
    for split in ("train", "test"):
        (root / "data" / "pics" / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (root / "data" / "words").mkdir()
    for split in ("train", "test"):
        lines = [json.dumps({"query": f"word {i}", "positives": [f"mot {i}"]}) for i in range(100)]
        (root / "data" / "words" / f"{split}.jsonl").write_text("\n".join(lines) + "\n")
    (root / "mixtures").mkdir()
    mixture = root / "mixtures" / "m.json"
    mixture.write_text(json.dumps({"objective": "contrastive", "columns": 1024, "sources": [
        {"name": "pics", "path": "../data/pics/train.jsonl", "weight": 1},
        {"name": "words", "path": "../data/words/train.jsonl", "weight": 1}]}))
    return mixture, pictures


def unpack(archive):
    """{member name: bytes}, JSONL members decompressed under their .jsonl names."""
    members = {}
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            data = tar.extractfile(member).read()
            if member.name.endswith(".jsonl.xz"):
                members[member.name[: -len(".xz")]] = lzma.decompress(data)
            else:
                members[member.name] = data
    return members


def mismatched(members, root, pictures):
    """Names of the packed images whose decoded RGBA differs from their PNG's."""
    bad = []
    for path, rgba in pictures.items():
        name = str(path.relative_to(root).with_suffix(".webp"))
        decoded = numpy.asarray(Image.open(io.BytesIO(members[name])).convert("RGBA"))
        if decoded.shape != rgba.shape or not numpy.array_equal(decoded, rgba):
            bad.append(name)
    return bad


def test_pack_round_trip(tmp_path):
    mixture, pictures = write_tree(tmp_path)
    output = tmp_path / "data" / "pack" / "p.tar"
    files, images, _ = device_pack.pack(str(mixture), ["train", "test"], output, {"words": 10}, jobs=1, root=tmp_path)
    assert (files, images) == (4, 3)
    members = unpack(output)
    assert mismatched(members, tmp_path, pictures) == []
    for split in ("train", "test"):
        records = [json.loads(line) for line in members[f"data/pics/{split}.jsonl"].decode().splitlines()]
        assert [r["positives"][0]["image"] for r in records] == [f"img/p{i}.webp" for i in range(3)]
    kept = [json.loads(line)["query"] for line in members["data/words/train.jsonl"].decode().splitlines()]
    assert kept == [f"word {10 * i}" for i in range(10)]  # spread over the file, in its order
    assert len(members["data/words/test.jsonl"].decode().splitlines()) == 100  # --keep touches train only
    assert not output.with_name("p.tar.partial").exists()


def test_split_limit_spreads_held_out_files_as_lineage_does(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts" / "device"))
    import lineage

    mixture, _ = write_tree(tmp_path)
    output = tmp_path / "data" / "pack" / "p.tar"
    device_pack.pack(str(mixture), ["test"], output, jobs=1, root=tmp_path, images_too=False, split_limit=30)
    members = unpack(output)
    packed = members["data/words/test.jsonl"].decode().splitlines()
    assert len(members["data/words/train.jsonl"].decode().splitlines()) == 100  # train files are --keep's
    class Args:
        runs, eval_limit = str(tmp_path / "runs"), 30
    monkey = lineage.ROOT
    try:
        lineage.ROOT = tmp_path
        sets = lineage.eval_sets(Args, names=("words",))
    finally:
        lineage.ROOT = monkey
    assert packed == sets["words"].read_text().splitlines() and len(packed) == 30
    assert packed != [json.dumps({"query": f"word {i}", "positives": [f"mot {i}"]}) for i in range(30)]  # a spread, not a head


def test_planted_inexact_webp_is_caught(tmp_path):
    mixture, pictures = write_tree(tmp_path)
    output = tmp_path / "data" / "pack" / "p.tar"
    device_pack.pack(str(mixture), ["train"], output, jobs=1, root=tmp_path, exact=False)
    assert len(mismatched(unpack(output), tmp_path, pictures)) == 3


def test_over_the_limit_is_refused(tmp_path):
    mixture, _ = write_tree(tmp_path)
    output = tmp_path / "data" / "pack" / "p.tar"
    with pytest.raises(SystemExit, match="over --limit"):
        device_pack.pack(str(mixture), ["train"], output, limit=0.001, jobs=1, root=tmp_path)
    assert not output.exists() and not output.with_name("p.tar.partial").exists()


def test_missing_corpus_is_named(tmp_path):
    mixture, _ = write_tree(tmp_path)
    (tmp_path / "data" / "words" / "train.jsonl").unlink()
    with pytest.raises(SystemExit, match="words/train.jsonl is missing"):
        device_pack.pack(str(mixture), ["train"], tmp_path / "p.tar", jobs=1, root=tmp_path)


def test_image_records_and_two_mixtures(tmp_path):
    """An mlm mixture's {"image": PATH} records (image_records.py) bring their pictures; a second
    mixture's sources join the same pack; --no-images packs the records alone; --lossy shrinks a
    corpus's pictures, which then no longer decode to the PNG's bits."""
    mixture, pictures = write_tree(tmp_path)
    (tmp_path / "data" / "pics" / "images.jsonl").write_text("".join(json.dumps({"image": f"img/p{i}.png"}) + "\n" for i in range(3)))
    mlm = tmp_path / "mixtures" / "mlm.json"
    mlm.write_text(json.dumps({"objective": "mlm", "columns": 1024, "sources": [{"path": "../data/pics/images.jsonl"}]}))
    output = tmp_path / "data" / "pack" / "both.tar"
    files, images, _ = device_pack.pack([str(mlm), str(mixture)], [], output, jobs=1, root=tmp_path)
    assert (files, images) == (3, 3)
    members = unpack(output)
    assert [json.loads(line)["image"] for line in members["data/pics/images.jsonl"].decode().splitlines()] == \
        [f"img/p{i}.webp" for i in range(3)]
    assert mismatched(members, tmp_path, pictures) == []
    files, images, _ = device_pack.pack(str(mlm), [], output, jobs=1, root=tmp_path, images_too=False)
    assert (files, images) == (1, 0) and not any(name.endswith(".webp") for name in unpack(output))
    device_pack.pack(str(mlm), [], output, jobs=1, root=tmp_path, lossy={"pics": 50})
    assert len(mismatched(unpack(output), tmp_path, pictures)) == 3


def test_clips_travel_as_they_are(tmp_path):
    """Audio and video sides bring their files into the pack byte for byte, the records unchanged;
    --no-images leaves them out too; a named clip that is missing is named."""
    root = tmp_path
    (root / "data" / "talk" / "clips").mkdir(parents=True)
    clips = {f"clips/c{i}.opus": bytes(range(i, i + 50)) for i in range(2)}
    for name, data in clips.items():
        (root / "data" / "talk" / name).write_bytes(data)
    (root / "data" / "talk" / "film.webm").write_bytes(b"webm bytes")
    records = [{"query": "hello", "positives": [{"audio": "clips/c0.opus"}]},
               {"query": {"audio": "clips/c1.opus"}, "positives": [{"video": "film.webm"}]}]
    (root / "data" / "talk" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (root / "mixtures").mkdir()
    mixture = root / "mixtures" / "av.json"
    mixture.write_text(json.dumps({"objective": "contrastive", "columns": 1024,
                                   "sources": [{"name": "talk", "path": "../data/talk/train.jsonl", "weight": 1}]}))
    output = root / "data" / "pack" / "av.tar"
    device_pack.pack(str(mixture), [], output, jobs=1, root=root)
    members = unpack(output)
    for name, data in clips.items():
        assert members[f"data/talk/{name}"] == data
    assert members["data/talk/film.webm"] == b"webm bytes"
    assert [json.loads(line) for line in members["data/talk/train.jsonl"].decode().splitlines()] == records
    device_pack.pack(str(mixture), [], output, jobs=1, root=root, images_too=False)
    assert sorted(unpack(output)) == ["data/talk/train.jsonl"]
    (root / "data" / "talk" / "film.webm").unlink()
    with pytest.raises(SystemExit, match="film.webm is missing"):
        device_pack.pack(str(mixture), [], output, jobs=1, root=root)



def test_sources_by_name(tmp_path):
    """--sources packs the named sources alone, --skip-sources all but them; an unknown name is refused."""
    mixture, _ = write_tree(tmp_path)
    output = tmp_path / "p.tar"
    device_pack.pack(str(mixture), ["test"], output, jobs=1, root=tmp_path, sources=["words"])
    assert sorted(unpack(output)) == ["data/words/test.jsonl", "data/words/train.jsonl"]
    device_pack.pack(str(mixture), ["test"], output, jobs=1, root=tmp_path, skip=["words"])
    assert not any("words" in name for name in unpack(output)) and "data/pics/train.jsonl" in unpack(output)
    with pytest.raises(SystemExit, match="is named nothing"):
        device_pack.pack(str(mixture), [], output, jobs=1, root=tmp_path, sources=["nothing"])
