# test_image_encode.py: images embedded through the C ABI (uform_encode_images) and the CLI
# (`uform encode --image`, `--records`): against the float64 reference (the documented resize,
# then reference.encode_segment and the pool) within bounds.py's Float32 bound; the three formats
# and decoded pixels agree with uform_forward over the same patches; texts and images share one
# output in input order; images decoded across the context's threads as on one; broken files and
# models without the vision frontend are refused by name.

import io
import json
import subprocess

import numpy as np
import pytest
from PIL import Image

import bounds
import reference
from test_image_decode import reference_patches
from uform_ctypes import PRECISION_F32, UFormError


def png_bytes(array):
    stream = io.BytesIO()
    Image.fromarray(array).save(stream, format="PNG")
    return stream.getvalue()


def photos():
    rng = np.random.default_rng(21)
    return [rng.integers(0, 256, size=shape, dtype=np.uint8) for shape in [(70, 90, 4), (40, 40, 4), (25, 130, 4)]]


def reference_embedding(model, rgba, rows, columns, bf16_inputs=False):
    patches = reference_patches(rgba, rows, columns)
    kinds = np.full(len(patches), reference.CELL_IMAGE)
    positions = np.stack([np.zeros(len(patches), int), np.arange(len(patches)) // columns, np.arange(len(patches)) % columns], axis=1)
    h = reference.encode_segment(model, np.arange(len(patches)), positions, bf16_inputs, kinds=kinds,
                                 media={reference.CELL_IMAGE: patches})
    return reference.pool_segment(model, h, bf16_inputs)


def test_encode_images_matches_reference(library, vision_model):
    model = reference.load_model(vision_model)
    with library.open(vision_model) as handle:
        handle.set_precision(PRECISION_F32)
        width = handle.config().widths[-1]
        embeddings = handle.encode_images([png_bytes(photo) for photo in photos()])
        for photo, embedding in zip(photos(), embeddings):
            _, rows, columns = library.image_patches(photo, handle.config().columns)
            e64 = reference_embedding(model, photo, rows, columns)
            e16 = reference_embedding(model, photo, rows, columns, bf16_inputs=True)
            expected, expected16 = reference.matryoshka(e64, width), reference.matryoshka(e16, width)
            limit = bounds.bound_f32(expected, expected16, model.width, rows * columns, max(rows, columns), deepest=1024)
            error = bounds.relative_error(embedding, expected)
            assert error <= limit, f"{photo.shape}: error {error:.3e} bound {limit:.3e}"


def test_encoded_and_decoded_images_embed_alike(library, vision_model):
    with library.open(vision_model) as handle:
        encoded = handle.encode_images([png_bytes(photo) for photo in photos()])
        decoded = handle.encode_images(photos())
        one_by_one = np.concatenate([handle.encode_images([photo]) for photo in photos()])
    np.testing.assert_array_equal(encoded, decoded)  # PNG is lossless: the same pixels
    np.testing.assert_allclose(one_by_one, decoded, atol=1e-6)  # packed together or alone


def test_encode_images_refuses_bad_input(library, vision_model, python_model):
    with library.open(vision_model) as handle:
        with pytest.raises(UFormError) as error:
            handle.encode_images([png_bytes(photos()[0]), png_bytes(photos()[1])[:90]])
        assert error.value.status == 3 and "image 1" in error.value.message
    with library.open(python_model) as handle:
        with pytest.raises(UFormError) as error:
            handle.encode_images(photos()[:1])
        assert error.value.status == 5 and "vision" in error.value.message


def test_images_decode_across_threads(library, vision_model):
    """Eleven images (more than a chunk of two a thread) decoded on three threads: the same
    embeddings as one thread, in input order; of two broken files the first is the one named."""
    photos_list = [np.roll(photo, k, axis=1) for k in range(4) for photo in photos()][:11]
    encoded = [png_bytes(photo) for photo in photos_list]
    with library.open(vision_model) as handle:
        handle.set_threads(1)
        serial = handle.encode_images(encoded)
        handle.set_threads(3)
        threaded = handle.encode_images(encoded)
        alone = handle.encode_images(encoded[7:8])
        broken = list(encoded)
        broken[6], broken[9] = broken[6][:90], broken[9][:70]
        with pytest.raises(UFormError) as error:
            handle.encode_images(broken)
    np.testing.assert_array_equal(threaded, serial)
    np.testing.assert_allclose(threaded[7:8], alone, atol=1e-6)
    assert not np.allclose(threaded[7], threaded[8], atol=1e-3)  # distinct images: the order shows
    assert error.value.status == 3 and "image 6" in error.value.message and "image 9" not in error.value.message


@pytest.fixture(scope="module")
def cli_model(cli, tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli_vision")
    subprocess.run([cli, "init", "--tier", "64x2", "--frontends", "vision", "--output", folder / "model"], check=True,
                   capture_output=True)
    return folder


def test_cli_init_info_and_image_encode(cli, cli_model, library):
    info = json.loads(subprocess.run([cli, "info", "--model", cli_model / "model"], check=True, capture_output=True, text=True).stdout)
    assert info["frontends"] == ["bytes", "vision"]
    assert "modalities | text, image" in (cli_model / "model" / "README.md").read_text()
    files = []
    for name, format_ in [("a.png", "PNG"), ("b.jpg", "JPEG"), ("c.webp", "WEBP")]:
        Image.fromarray(photos()[0][:, :, :3]).save(cli_model / name, format=format_)
        files.append(str(cli_model / name))
    run = subprocess.run([cli, "encode", "--model", cli_model / "model", "--image", *files], check=True, capture_output=True, text=True)
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(lines) == 3 and all(abs(np.linalg.norm(v) - 1) < 1e-5 for v in lines)
    with library.open(cli_model / "model") as handle:
        expected = handle.encode_images([(cli_model / "a.png").read_bytes()])
    np.testing.assert_allclose(lines[0], expected[0], atol=1e-6)
    assert np.dot(lines[0], lines[1]) > 0.9 and np.dot(lines[0], lines[2]) > 0.9  # lossy copies of one photo


def test_cli_records_keep_input_order(cli, cli_model):
    Image.fromarray(photos()[1]).save(cli_model / "d.png")
    records = [{"text": "a red fox"}, {"image": str(cli_model / "d.png")}, {"text": "flag of Chile"}]
    stdin = "".join(json.dumps(r) + "\n" for r in records)
    run = subprocess.run([cli, "encode", "--model", cli_model / "model", "--records"], input=stdin, check=True, capture_output=True, text=True)
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    image = json.loads(subprocess.run([cli, "encode", "--model", cli_model / "model", "--image", cli_model / "d.png"], check=True,
                                      capture_output=True, text=True).stdout)
    text = json.loads(subprocess.run([cli, "encode", "--model", cli_model / "model"], input="flag of Chile\n", check=True,
                                     capture_output=True, text=True).stdout)
    assert len(lines) == 3
    np.testing.assert_allclose(lines[1], image, atol=1e-6)
    np.testing.assert_allclose(lines[2], text, atol=1e-6)


@pytest.mark.parametrize("case", ["broken file", "missing file", "bad record", "both inputs"])
def test_cli_refuses_bad_input(cli, cli_model, case):
    broken = cli_model / "broken.png"
    broken.write_bytes(png_bytes(photos()[0])[:80])
    command = [cli, "encode", "--model", cli_model / "model"]
    stdin, words = "", ""
    if case == "broken file":
        command += ["--image", broken]
        words = "broken.png"
    elif case == "missing file":
        command += ["--image", cli_model / "absent.jpg"]
        words = "absent.jpg"
    elif case == "bad record":
        command += ["--records"]
        stdin, words = '{"text": "ok"}\n{"picture": "x.png"}\n', "line 2"
    else:
        command += ["--records", "--image", broken]
        words = "give one"
    run = subprocess.run(command, input=stdin, capture_output=True, text=True)
    assert run.returncode != 0 and words in run.stderr, run.stderr
    assert not run.stdout
