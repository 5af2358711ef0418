# test_image_corpora.py: the image <-> caption corpus scripts of scripts/data (emoji_pairs,
# flag_pairs, fashion_pairs, clipart_pairs and the image helpers of debian_archive) on small trees
# written here, offline: records of the documented shape with image paths relative to the shard,
# groups kept whole (skin tones with their emoji), no caption and no image (by sha256) in two
# splits, with planted leaks (one picture in two groups, one caption in two groups) that the check
# must catch, manifests that match the files, the same bytes twice. The real font and renderer are
# tried when their packages are unpacked in data/.debian; the built corpora in data/ when built.

import hashlib
import pathlib
import sys

import pytest
from PIL import Image

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "data"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import debian_archive  # noqa: E402
from test_corpora import check_manifest, leaks, read_splits  # noqa: E402

SPLITS = ("train", "dev", "test")
UNPACKED = ROOT / "data" / ".debian" / "root"


def image_digests(folder):
    """{relative path: sha256} of every file under folder/img, read from the files themselves."""
    folder = pathlib.Path(folder)
    return {path.relative_to(folder).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted((folder / "img").iterdir())}


def check_image_corpus(folder, with_query=True):
    """The checks every built image corpus must pass; returns its splits and manifest."""
    manifest = check_manifest(folder)
    splits = read_splits(folder)
    digests = image_digests(folder)
    listed = dict(reversed(line.split("  ")) for line in (pathlib.Path(folder) / "images.sha256").read_text().splitlines())
    assert listed == digests  # every image listed, no image unnamed by a record left behind
    named = set()
    for split in SPLITS:
        for record in splits[split]:
            assert isinstance(record["query"], str) and record["query"]
            assert all(set(positive) == {"image"} for positive in record["positives"]), record
            for positive in record["positives"]:
                path = positive["image"]
                assert path.startswith("img/") and path.endswith(".png") and path.isascii(), path
                named.add(path)
    assert named == set(digests)
    assert manifest["images"]["files"] == len(digests)

    def keys(record):
        found = ["sha256:" + digests[positive["image"]] for positive in record["positives"]]
        return [record["query"].casefold(), *found] if with_query else found

    assert not leaks(splits, keys)
    return splits, manifest


def build_twice(main, arguments, folder, with_query=True):
    """Runs a script into folder/out and folder/again: both must pass check_image_corpus with every
    split non-empty and be the same bytes. Returns the splits, the manifest and every record."""
    main([*arguments, "--output", str(folder / "out")])
    splits, manifest = check_image_corpus(folder / "out", with_query)
    assert all(splits[split] for split in SPLITS)
    main([*arguments, "--output", str(folder / "again")])
    for name in ("train.jsonl", "dev.jsonl", "test.jsonl", "images.sha256", "manifest.json"):
        assert (folder / "out" / name).read_bytes() == (folder / "again" / name).read_bytes(), name
    return splits, manifest, [record for split in SPLITS for record in splits[split]]


def split_of_image(splits):
    return {positive["image"]: split for split in SPLITS for record in splits[split] for positive in record["positives"]}


def png(path, colour, size=(32, 24)):
    """A PNG of one colour inside a transparent 2-pixel frame."""
    path.parent.mkdir(parents=True, exist_ok=True)
    image = Image.new("RGBA", size, (0, 0, 0, 0))
    image.paste(colour, (2, 2, size[0] - 2, size[1] - 2))
    image.save(path)


def colour(index):
    return (37 * index % 256, 91 * index % 256, 53 * index % 256, 255)


# ---- shared helpers -----------------------------------------------------------------------------

def test_image_leaks_are_caught_and_shared_images_join_groups():
    images = {"img/a.png": "1" * 64, "img/b.png": "2" * 64, "img/copy_of_a.png": "1" * 64, "img/c.png": "3" * 64}
    keys = debian_archive.image_keys(images)
    records = {"train": [{"query": "a red fox", "positives": [{"image": "img/a.png"}]}],
               "dev": [{"query": "another fox", "positives": [{"image": "img/copy_of_a.png"}]},  # train's picture
                       {"query": "A Red Fox", "positives": [{"image": "img/b.png"}]},  # train's caption
                       {"query": "a blue bird", "positives": [{"image": "img/c.png"}]}],
               "test": []}
    assert leaks({split: list(items) for split, items in records.items()}, keys)  # the control goes red
    assert debian_archive.remove_leaks(records, keys) == {"dev": 2, "test": 0}
    assert [record["query"] for record in records["dev"]] == ["a blue bird"] and not leaks(records, keys)
    # The picture of group "x" recurs in group "z": they become one group, so one split.
    groups = {"x": [{"query": "one", "positives": [{"image": "img/a.png"}]}],
              "y": [{"query": "two", "positives": [{"image": "img/b.png"}]}],
              "z": [{"query": "three", "positives": [{"image": "img/copy_of_a.png"}]}]}
    joined, count = debian_archive.join_groups_sharing_images(groups, images)
    assert count == 1 and sorted(joined) == ["x", "y"] and [record["query"] for record in joined["x"]] == ["one", "three"]
    assert debian_archive.safe_name("science/médecine pills (1).svg") == "science_m_decine_pills_1_.svg"
