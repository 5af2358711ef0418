# test_image_training.py: `uform_base` on image <-> caption pairs on the CPU, end to end, on a tiny
# corpus of coloured shapes written here: the vision frontend is attached, SigLIP's loss falls,
# resume stays bit for bit with images in the batches, the checkpoint carries vision.* and lists
# the modality, `uform encode --image` reads it; an image that does not decode is refused naming
# the file and the record's line, or with skip_malformed its record is dropped and counted. Masked
# patches train through the mae head on the CPU and, where a GPU is present, in the CUDA step, whose
# first losses agree with the CPU's.

import json
import os
import subprocess

import numpy as np
import pytest
from PIL import Image

from cuda_env import cuda_build, gpu_present
from test_uform_base import tensors

COLOURS = {"red": (220, 30, 30), "green": (30, 180, 40), "blue": (30, 60, 220), "yellow": (230, 210, 30)}


def shape_image(colour, shape, size=48):
    y, x = np.mgrid[0:size, 0:size]
    mask = {"square": (abs(x - 24) < 14) & (abs(y - 24) < 14), "circle": (x - 24) ** 2 + (y - 24) ** 2 < 15**2,
            "stripes": (x // 6) % 2 == 0}[shape]
    image = np.full((size, size, 3), 245, dtype=np.uint8)
    image[mask] = COLOURS[colour]
    return image


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    folder = tmp_path_factory.mktemp("shapes")
    (folder / "img").mkdir()
    with open(folder / "pairs.jsonl", "w") as pairs:
        for colour in COLOURS:
            for shape in ("square", "circle", "stripes"):
                name = f"img/{colour}-{shape}.png"
                Image.fromarray(shape_image(colour, shape)).save(folder / name)
                pairs.write(json.dumps({"query": f"a {colour} {shape}", "positives": [{"image": name}]}) + "\n")
    mixture = {"objective": "contrastive", "columns": 128, "sources": [{"path": "pairs.jsonl"}]}
    (folder / "shapes.json").write_text(json.dumps(mixture))
    return folder


def train(build, mixture, output, *extra, check=True):
    run = subprocess.run([str(build / "uform_base"), "--quiet", "--mixture", mixture, "--tier", "64x2", "--rows", "2",
                          "--learning-rate", "3e-3", "--seed", "2", "--threads", "2", "--output", output, *map(str, extra)],
                         capture_output=True, text=True, timeout=300)
    if check:
        assert run.returncode == 0, run.stderr
    return run


def test_trains_on_images_and_captions(build_dir, cli, shapes, tmp_path):
    run = train(build_dir, shapes / "shapes.json", tmp_path / "run", "--steps", "40")
    assert "attaching the vision frontend" in run.stderr
    losses = [json.loads(line)["loss"] for line in open(tmp_path / "run" / "log.jsonl") if '"loss"' in line]
    assert len(losses) >= 20 and np.mean(losses[-5:]) < 0.8 * np.mean(losses[:5]), losses
    names = tensors(tmp_path / "run" / "latest" / "model.safetensors")
    assert "vision.patch" in names and "vision.bias" in names
    assert "text, image" in (tmp_path / "run" / "latest" / "README.md").read_text()
    encoded = subprocess.run([cli, "encode", "--model", tmp_path / "run" / "latest", "--image", shapes / "img" / "red-circle.png"],
                             capture_output=True, text=True, check=True)
    assert len(json.loads(encoded.stdout)) == 64
    check_media_eval(build_dir, tmp_path / "run", shapes / "pairs.jsonl", 12, tmp_path)


def media_chance(pairs):
    """Chance R@1 of a media pair file: records joined by an equal query or an equal first positive are
    one item (as uform_eval joins them), and a random order of the n items puts the gold first with 1 / n."""
    records = [json.loads(line) for line in open(pairs) if line.strip()]
    parent = list(range(len(records)))

    def root(i):
        while parent[i] != i:
            i = parent[i]
        return i

    for key in (lambda r: json.dumps(r["query"], sort_keys=True), lambda r: json.dumps(r["positives"][0], sort_keys=True)):
        first = {}
        for i, record in enumerate(records):
            parent[root(i)] = root(first.setdefault(key(record), i))
    return 1 / len({root(i) for i in range(len(records))})


def check_media_eval(build_dir, run, pairs, count, tmp_path, *extra):
    """uform_eval ranks media for captions and back: chance is the baseline, no TF-IDF row."""
    report_path = tmp_path / "eval.json"
    evaluated = subprocess.run([str(build_dir / "uform_eval"), run, "--pairs", pairs, "--quiet", "--json", report_path, *extra],
                               capture_output=True, text=True)
    assert evaluated.returncode == 0, evaluated.stderr
    report = json.load(open(report_path))
    assert report["tfidf"] is None and report["count"] == count
    assert abs(report["chance"]["recall@1"] - media_chance(pairs)) < 1e-6, (report["chance"], media_chance(pairs))
    directions = {row["direction"] for row in report["widths"] if row["width"] == 64}
    assert directions == {"query->positive", "positive->query"}, report["widths"]


def check_resume_is_bit_exact(build_dir, mixture, tmp_path):
    """Six steps straight, and three, a checkpoint, three more resumed from it: the same weights."""
    straight, halves = tmp_path / "straight", tmp_path / "halves"
    train(build_dir, mixture, straight, "--steps", "6")
    train(build_dir, mixture, halves, "--steps", "6", "--save-every", "3")
    os.remove(halves / "latest")
    os.symlink("step-00000003", halves / "latest")
    train(build_dir, mixture, halves, "--steps", "6", "--resume", halves)
    assert tensors(straight / "latest" / "model.safetensors") == tensors(halves / "latest" / "model.safetensors")


def check_cache_changes_nothing(build_dir, mixture, tmp_path):
    """Media kept decoded across batches, or decoded every batch: the same weights."""
    kept, decoded = tmp_path / "kept", tmp_path / "decoded"
    train(build_dir, mixture, kept, "--steps", "4")
    train(build_dir, mixture, decoded, "--steps", "4", "--image-cache-mb", "0")  # every batch decoded
    assert tensors(kept / "latest" / "model.safetensors") == tensors(decoded / "latest" / "model.safetensors")


def check_named_or_skipped(build_dir, tmp_path, lines, broken_name):
    """Records whose second and third sides do not decode: the run fails naming line 2 and the
    broken file, or with skip_malformed drops both records and counts them."""
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    for skip in (False, True):
        mixture = {"objective": "contrastive", "columns": 128, "sources": [{"path": "pairs.jsonl", "skip_malformed": skip}]}
        (tmp_path / "m.json").write_text(json.dumps(mixture))
        run = train(build_dir, tmp_path / "m.json", tmp_path / f"run-{skip}", "--steps", "2", check=False)
        if skip:
            assert run.returncode == 0, run.stderr
            assert "2 records were dropped for a media file that does not decode" in run.stderr
        else:
            assert run.returncode != 0 and "pairs.jsonl:2:" in run.stderr and broken_name in run.stderr, run.stderr


def test_resume_with_images_is_bit_exact(build_dir, shapes, tmp_path):
    check_resume_is_bit_exact(build_dir, shapes / "shapes.json", tmp_path)


def test_image_cache_changes_nothing(build_dir, shapes, tmp_path):
    check_cache_changes_nothing(build_dir, shapes / "shapes.json", tmp_path)
    refused = train(build_dir, shapes / "shapes.json", tmp_path / "bad", "--image-cache-mb", "-1", check=False)
    assert refused.returncode == 2 and "--image-cache-mb" in refused.stderr, refused.stderr


def test_broken_images_are_named_or_skipped(build_dir, shapes, tmp_path):
    (tmp_path / "img").mkdir()
    Image.fromarray(shape_image("red", "square")).save(tmp_path / "img" / "fine.png")
    (tmp_path / "img" / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 truncated")
    lines = [{"query": "a red square", "positives": [{"image": "img/fine.png"}]},
             {"query": "a broken one", "positives": [{"image": "img/broken.jpg"}]},
             {"query": "a missing one", "positives": [{"image": "img/absent.png"}]}]
    check_named_or_skipped(build_dir, tmp_path, lines, "broken.jpg")


def test_parquet_image_columns(build_dir, shapes, tmp_path):
    """A Parquet binary column of encoded images (positive_image) trains and evaluates like JSONL paths."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    records = [json.loads(line) for line in open(shapes / "pairs.jsonl")]
    images = [(shapes / record["positives"][0]["image"]).read_bytes() for record in records]
    table = pa.table({"query": [record["query"] for record in records], "positive_image": pa.array(images, pa.binary())})
    pq.write_table(table, tmp_path / "pairs.parquet")
    (tmp_path / "m.json").write_text(json.dumps({"objective": "contrastive", "columns": 128,
                                                 "sources": [{"path": "pairs.parquet"}]}))
    train(build_dir, tmp_path / "m.json", tmp_path / "run", "--steps", "4")
    evaluated = subprocess.run([str(build_dir / "uform_eval"), tmp_path / "run", "--pairs", tmp_path / "pairs.parquet", "--quiet",
                                "--json", tmp_path / "eval.json"], capture_output=True, text=True)
    assert evaluated.returncode == 0, evaluated.stderr
    from_jsonl = subprocess.run([str(build_dir / "uform_eval"), tmp_path / "run", "--pairs", shapes / "pairs.jsonl", "--quiet",
                                 "--json", tmp_path / "eval-jsonl.json"], capture_output=True, text=True)
    assert from_jsonl.returncode == 0, from_jsonl.stderr
    assert json.load(open(tmp_path / "eval.json"))["widths"] == json.load(open(tmp_path / "eval-jsonl.json"))["widths"]
    # A corrupt image in a row is refused naming the file; a text and an image column for one side too.
    broken = pa.table({"query": ["a", "b"], "positive_image": pa.array([images[0], images[1][:60]], pa.binary())})
    pq.write_table(broken, tmp_path / "broken.parquet")
    (tmp_path / "b.json").write_text(json.dumps({"objective": "contrastive", "columns": 128, "sources": [{"path": "broken.parquet"}]}))
    run = train(build_dir, tmp_path / "b.json", tmp_path / "run-broken", "--steps", "2", check=False)
    assert run.returncode != 0 and "broken.parquet:2:" in run.stderr and "image column" in run.stderr, run.stderr
    both = pa.table({"query": ["a"], "positive": ["b"], "positive_image": pa.array([images[0]], pa.binary())})
    pq.write_table(both, tmp_path / "both.parquet")
    (tmp_path / "c.json").write_text(json.dumps({"objective": "contrastive", "columns": 128, "sources": [{"path": "both.parquet"}]}))
    run = train(build_dir, tmp_path / "c.json", tmp_path / "run-both", "--steps", "2", check=False)
    assert run.returncode != 0 and "'positive' and 'positive_image'" in run.stderr, run.stderr


def masked_images_mixture(shapes, folder, texts=True):
    with open(folder / "mlm.jsonl", "w") as records:
        for line in open(shapes / "pairs.jsonl"):
            record = json.loads(line)
            records.write(json.dumps({"image": str(shapes / record["positives"][0]["image"])}) + "\n")
            if texts:
                records.write(json.dumps({"text": record["query"]}) + "\n")
    (folder / "mlm.json").write_text(json.dumps({"objective": "mlm", "columns": 128, "image_mask_ratio": 0.5,
                                                 "sources": [{"path": "mlm.jsonl"}]}))
    return folder / "mlm.json"


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_masked_modelling_of_images(build_dir, shapes, tmp_path, device):
    """{"image": PATH} records under the mlm objective: half of each image's patches blanked and
    reconstructed through the mae head, beside masked bytes; the reconstruction error falls, on the
    CPU and in the CUDA step."""
    if device == "cuda" and not (cuda_build(build_dir) and gpu_present()):
        pytest.skip("needs a CUDA build and a GPU")
    mixture = masked_images_mixture(shapes, tmp_path)
    run = train(build_dir, mixture, tmp_path / "run", "--objective", "mlm", "--steps", "30", "--device", device)
    assert "attaching the vision frontend" in run.stderr and "attaching the mae head" in run.stderr
    log = [json.loads(line) for line in open(tmp_path / "run" / "log.jsonl") if '"reconstruction"' in line]
    errors = [entry["reconstruction"] for entry in log if entry["reconstruction"] > 0]  # batches with images
    assert len(errors) >= 20, errors
    assert np.mean(errors[-5:]) < 0.7 * np.mean(errors[:5]), errors
    names = tensors(tmp_path / "run" / "latest" / "model.safetensors")
    assert "mae.head" in names and "mae.bias" in names


def test_gpu_first_reconstruction_matches_cpu(build_dir, shapes, tmp_path):
    """The first step's reconstruction loss on the GPU against the CPU trainer's, from the same start
    and batch (images alone, so that it has masked patches and no masked bytes): within
    step_parity.c's derived bound (e = sqrt(8 L + 3) 2^-8 for L = 2; R within 2 sqrt(R) e q + (e q)^2,
    q = sqrt(R) + 1, pixels at most 1 and mae.bias 0 at the start)."""
    if not (cuda_build(build_dir) and gpu_present()):
        pytest.skip("needs a CUDA build and a GPU")
    mixture = masked_images_mixture(shapes, tmp_path, texts=False)
    first = {}
    for device in ("cpu", "cuda"):
        train(build_dir, mixture, tmp_path / device, "--objective", "mlm", "--steps", "1", "--device", device)
        first[device] = json.loads(open(tmp_path / device / "log.jsonl").readline())
    cpu, gpu = first["cpu"], first["cuda"]
    e = (8 * 2 + 3) ** 0.5 / 256
    r = cpu["reconstruction"] ** 0.5
    assert cpu["reconstruction"] > 0, cpu
    assert abs(gpu["reconstruction"] - cpu["reconstruction"]) <= 2 * r * e * (r + 1) + (e * (r + 1)) ** 2, (cpu, gpu)
    assert cpu["mlm"] == gpu["mlm"] == 0, (cpu, gpu)


def test_eval_counts_every_caption_of_an_image(build_dir, library, shapes, tmp_path):
    """Records that share an image (or a caption) are one gold item: recomputed here from the
    model's own embeddings, MRR in both directions matches uform_eval's, and differs from the
    strict rule's (only a record's own caption is gold) for images with two captions."""
    run = tmp_path / "run"
    train(build_dir, shapes / "shapes.json", run, "--steps", "3")
    names = ["red-square", "red-square", "blue-circle", "green-stripes", "yellow-circle", "blue-circle"]
    captions = ["a red square", "a crimson block", "a blue circle", "green stripes", "a yellow circle", "a blue ring"]
    with open(tmp_path / "pairs.jsonl", "w") as pairs:
        for caption, name in zip(captions, names):
            pairs.write(json.dumps({"query": caption, "positives": [{"image": str(shapes / "img" / f"{name}.png")}]}) + "\n")
    subprocess.run([str(build_dir / "uform_eval"), run, "--pairs", tmp_path / "pairs.jsonl", "--quiet", "--json",
                    tmp_path / "eval.json"], check=True, capture_output=True)
    report = json.load(open(tmp_path / "eval.json"))
    with library.open(run / "latest") as model:
        texts = model.encode([c.encode() for c in captions], 64)[0]
        images = model.encode_images([(shapes / "img" / f"{name}.png").read_bytes() for name in names], 64)
    component = {0: 0, 1: 0, 2: 2, 5: 2, 3: 3, 4: 4}  # by shared image

    def mrr(scores, item):  # each item (a picture and its captions) once, at its best score
        ranks = []
        for i in range(len(names)):
            best = {}
            for j in range(len(names)):
                best[item(j)] = max(best.get(item(j), -np.inf), scores[i, j])
            ranks.append(1 + sum(score > best[item(i)] for key, score in best.items() if key != item(i)))
        return float(np.mean([1 / r for r in ranks]))

    for direction, (rows, columns) in {"query->positive": (texts, images), "positive->query": (images, texts)}.items():
        scores = rows @ columns.T
        joined = mrr(scores, lambda j: component[j])
        measured = next(r for r in report["widths"] if r["width"] == 64 and r["direction"] == direction)
        assert abs(measured["mrr"] - joined) < 1e-5, (direction, measured, joined)
        if direction == "positive->query":  # the strict rule ranks one of an image's two captions as a rival
            strict = mrr(scores, lambda j: j)
            assert abs(measured["mrr"] - strict) > 1e-3, (measured, strict)
