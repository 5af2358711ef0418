#!/usr/bin/env python3
"""fashion_pairs.py: class caption -> Fashion-MNIST image pairs (dataset-fashion-mnist: 60 000 train
and 10 000 test images, 28x28 greyscale, 10 classes). The caption is the class's name as a phrase
("a pair of trousers"), so retrieval by caption is 10-way and every caption recurs in every split:
leaks are checked by image only, and each image is its own group. Train and dev come from the
dataset's train file (dev carved out first, by a seeded shuffle), test from its test file, each
cut to a size. Writes data/fashion/{train,dev,test}.jsonl, img/*.png, images.sha256 and
manifest.json. Deterministic for a seed. See docs/data.md.
"""

import collections
import gzip
import pathlib
import random
import struct
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import debian_archive  # noqa: E402

DATASET = "usr/share/datasets/fashion-mnist"
FILES = {"train": "train", "test": "t10k"}  # the dataset's file prefixes
# The dataset's class names (its README), and the caption each becomes.
CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")
CAPTIONS = ("a T-shirt/top", "a pair of trousers", "a pullover", "a dress", "a coat", "a sandal", "a shirt", "a sneaker",
            "a bag", "an ankle boot")


def read_idx(path):
    """(shape, bytes) of an IDX file of unsigned bytes, gzip-compressed or not."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as file:
        data = file.read()
    if len(data) < 4 or data[:2] != b"\x00\x00" or data[2] != 0x08:
        raise ValueError(f"{path}: not an IDX file of unsigned bytes")
    rank = data[3]
    shape = struct.unpack(f">{rank}I", data[4: 4 + 4 * rank])
    body = data[4 + 4 * rank:]
    expected = 1
    for extent in shape:
        expected *= extent
    if len(body) != expected:
        raise ValueError(f"{path}: {len(body)} bytes of data for shape {shape}")
    return shape, body


def read_part(root, prefix):
    """(images as 28x28 byte strings, labels) of one of the dataset's files."""
    shape, pixels = read_idx(pathlib.Path(root) / f"{prefix}-images-idx3-ubyte.gz")
    (count,), labels = read_idx(pathlib.Path(root) / f"{prefix}-labels-idx1-ubyte.gz")
    if len(shape) != 3 or shape[0] != count or any(label >= len(CLASSES) for label in labels):
        raise ValueError(f"{root}: {prefix} images {shape} do not match {count} labels of {len(CLASSES)} classes")
    size = shape[1] * shape[2]
    return [(pixels[index * size: (index + 1) * size], shape[1:]) for index in range(count)], labels


def choose(counts, seed, limits):
    """{split: [(file, index)]}: dev then train from a seeded shuffle of the train file, test from
    one of the test file, each at most its limit (0: all that is left)."""
    rng = random.Random(seed)
    train = list(range(counts["train"]))
    rng.shuffle(train)
    test = list(range(counts["test"]))
    rng.shuffle(test)
    dev, train = train[: limits["dev"]], train[limits["dev"]:]
    return {split: [(source, index) for index in (indices[: limits[split]] if limits[split] else indices)]
            for split, source, indices in (("train", "train", train), ("dev", "train", dev), ("test", "test", test))}


def main(argv=None):
    parser = debian_archive.corpus_parser(__doc__.split("\n\n")[0], "fashion", fractions=False)
    parser.add_argument("--dataset-root", help="a folder of the four *-idx?-ubyte.gz files instead of dataset-fashion-mnist's")
    parser.add_argument("--train-limit", type=int, default=2000, help="most train images (0: all 60 000 less dev)")
    parser.add_argument("--dev-limit", type=int, default=500, help="dev images carved from the train file (> 0)")
    parser.add_argument("--test-limit", type=int, default=500, help="most test images (0: all 10 000)")
    arguments = parser.parse_args(argv)
    if arguments.dev_limit <= 0 or arguments.train_limit < 0 or arguments.test_limit < 0:
        sys.exit("fashion_pairs: --dev-limit must be positive, --train-limit and --test-limit at least 0")
    started = time.monotonic()
    local = {"dataset-fashion-mnist": arguments.dataset_root}
    fetched = debian_archive.fetch_unless_local("fashion_pairs", local, arguments.scratch, arguments.refresh)
    root = arguments.dataset_root or fetched["dataset-fashion-mnist"]["root"] / DATASET
    try:
        parts = {split: read_part(root, prefix) for split, prefix in FILES.items()}
    except (OSError, ValueError) as error:
        sys.exit(f"fashion_pairs: {error}")
    from PIL import Image

    chosen = choose({split: len(parts[split][1]) for split in FILES}, arguments.seed,
                    {"train": arguments.train_limit, "dev": arguments.dev_limit, "test": arguments.test_limit})
    images = {}
    debian_archive.fresh_image_folder(arguments.output)
    records = {}
    for split in debian_archive.SPLITS:
        records[split] = []
        for source, index in sorted(chosen[split]):
            pixels, (height, width) = parts[source][0][index]
            label = parts[source][1][index]
            positive = debian_archive.save_png(Image.frombytes("L", (width, height), pixels), arguments.output,
                                               f"{FILES[source]}-{index:05d}", images)
            records[split].append({"query": CAPTIONS[label], "positives": [positive], "lang": "en", "class": CLASSES[label]})
    # Each image is its own group; only images may not recur (the dataset has a few exact duplicates).
    keys = debian_archive.image_keys(images, with_query=False)
    duplicates = debian_archive.deduped_splits(records, lambda part: debian_archive.dedupe(part, keys))
    leaks = debian_archive.remove_leaks(records, keys)
    manifest = debian_archive.write_image_corpus(
        arguments.output, "fashion", "scripts/data/fashion_pairs.py", records, images, arguments.seed,
        {"retrieval": "10-way: one caption per class, so every caption recurs in every split by design; "
                      "leaks are checked by image sha256 only",
         "captions": dict(zip(CLASSES, CAPTIONS)),
         "classes_per_split": {split: dict(sorted(collections.Counter(record["class"] for record in records[split]).items()))
                               for split in debian_archive.SPLITS},
         "limits": {"train": arguments.train_limit, "dev": arguments.dev_limit, "test": arguments.test_limit},
         "group": "the image (train and dev from the dataset's train file, test from its test file)",
         "image": "the 28x28 greyscale image as an 8-bit greyscale PNG (light garment on black, as in the dataset)",
         "removed_as_duplicate_images_within_a_split": duplicates, "removed_from_dev_and_test_as_leaks": leaks,
         "source": debian_archive.image_source(fetched, local)})
    debian_archive.print_summary("fashion_pairs", manifest, started, arguments.output)


if __name__ == "__main__":
    main()
