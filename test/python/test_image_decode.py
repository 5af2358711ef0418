# test_image_decode.py: images into patches (include/uform/image.h, docs/images.md). Decoding:
# PNG (RGBA, RGB, grey, palette with transparency), JPEG and WebP (lossless and lossy) against
# Pillow, a decoder of its own; truncated, corrupt, empty and unsupported files refused with
# messages naming the file. The grid rule against its statement in docs/images.md, and the resize
# (area average when shrinking, bilinear when growing) against a float64 reference written here,
# within a derived bound, which a planted control (samples half a pixel early) must fail.

import io
import math

import numpy as np
import pytest
from PIL import Image

from conftest import built
from uform_ctypes import Library, UFormError

UNIT_F32 = 2.0**-24


def encoded(array, format_, **options):
    """The bytes Pillow writes for an RGBA / RGB / L array."""
    mode = {4: "RGBA", 3: "RGB"}.get(array.shape[2], "L") if array.ndim == 3 else "L"
    image = Image.fromarray(array if array.ndim == 2 or array.shape[2] > 1 else array[:, :, 0], mode)
    stream = io.BytesIO()
    image.save(stream, format=format_, **options)
    return stream.getvalue()


def pillow_rgba(data):
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGBA"))


def smooth_image(rng, height, width, channels):
    """A photo-like image: smooth gradients and a few edges, so lossy codecs keep it close."""
    y, x = np.mgrid[0:height, 0:width]
    planes = [127 + 100 * np.sin(x / (7 + 5 * c) + y / (11 + 3 * c) + c) for c in range(channels)]
    image = np.stack(planes, axis=2) + rng.normal(0, 4, size=(height, width, channels))
    image[height // 3 : height // 2, width // 4 : width // 2] = 240
    return np.clip(image, 0, 255).astype(np.uint8)


# ---------------------------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("channels", [4, 3, 1])
def test_png_decodes_exactly(library, channels):
    rng = np.random.default_rng(channels)
    array = rng.integers(0, 256, size=(37, 53, channels), dtype=np.uint8)
    data = encoded(array if channels > 1 else array[:, :, 0], "PNG")
    rgba = library.decode_image(data)
    assert rgba.shape == (37, 53, 4)
    np.testing.assert_array_equal(rgba, pillow_rgba(data))
    if channels < 4:
        assert np.all(rgba[:, :, 3] == 255)


def test_png_palette_with_transparency_decodes_exactly(library):
    rng = np.random.default_rng(5)
    image = Image.fromarray(rng.integers(0, 16, size=(20, 30), dtype=np.uint8), "P")
    image.putpalette(list(rng.integers(0, 256, size=48)))
    stream = io.BytesIO()
    image.save(stream, format="PNG", transparency=3)
    data = stream.getvalue()
    rgba = library.decode_image(data)
    np.testing.assert_array_equal(rgba, pillow_rgba(data))
    assert np.any(rgba[:, :, 3] == 0) and np.any(rgba[:, :, 3] == 255)


def test_webp_lossless_decodes_exactly(library):
    array = np.random.default_rng(6).integers(0, 256, size=(31, 45, 4), dtype=np.uint8)
    data = encoded(array, "WEBP", lossless=True, exact=True)  # exact: RGB kept under alpha 0 too
    rgba = library.decode_image(data)
    np.testing.assert_array_equal(rgba, array)


@pytest.mark.parametrize("format_, options", [("JPEG", {"quality": 90}), ("WEBP", {"quality": 90})])
def test_lossy_formats_decode_like_pillow(library, format_, options):
    """Two decoders of one file: libjpeg-turbo's and libwebp's integer transforms are specified, so
    Pillow's copies agree with ours within one level (their versions may round differently)."""
    array = smooth_image(np.random.default_rng(7), 48, 64, 3)
    data = encoded(array, format_, **options)
    rgba = library.decode_image(data)
    expected = pillow_rgba(data)
    assert rgba.shape == expected.shape
    difference = np.abs(rgba.astype(int) - expected.astype(int))
    assert difference.max() <= 1, f"{format_}: largest difference {difference.max()}"
    assert np.all(rgba[:, :, 3] == 255)
    assert np.abs(rgba[:, :, :3].astype(int) - array.astype(int)).mean() < 8  # and close to what was encoded


def test_greyscale_jpeg_is_grey_rgba(library):
    grey = smooth_image(np.random.default_rng(8), 24, 24, 1)[:, :, 0]
    rgba = library.decode_image(encoded(grey, "JPEG", quality=95))
    assert np.all(rgba[:, :, 0] == rgba[:, :, 1]) and np.all(rgba[:, :, 1] == rgba[:, :, 2])
    assert np.all(rgba[:, :, 3] == 255)


def test_read_names_the_file(library, tmp_path):
    path = tmp_path / "fox.png"
    array = np.random.default_rng(9).integers(0, 256, size=(8, 8, 4), dtype=np.uint8)
    path.write_bytes(encoded(array, "PNG"))
    np.testing.assert_array_equal(library.read_image(path), array)
    with pytest.raises(UFormError) as error:
        library.read_image(tmp_path / "absent.png")
    assert error.value.status == 2 and "absent.png" in error.value.message


def broken_files():
    rng = np.random.default_rng(10)
    photo = smooth_image(rng, 64, 64, 3)
    png, jpeg = encoded(photo, "PNG"), encoded(photo, "JPEG", quality=90)
    webp = encoded(photo, "WEBP", quality=90)
    corrupt_png = bytearray(png)
    corrupt_png[60:80] = bytes(20)  # inside the first chunk: its CRC no longer matches
    return {
        "truncated PNG": (png[: len(png) // 2], 3, "PNG"),
        "corrupt PNG": (bytes(corrupt_png), 3, "PNG"),
        "truncated JPEG": (jpeg[: len(jpeg) // 2], 3, "JPEG"),
        "JPEG header only": (jpeg[:20], 3, "JPEG"),
        "truncated WebP": (webp[: len(webp) // 2], 3, "WebP"),
        "empty": (b"", 3, "empty"),
        "GIF": (encoded(photo, "GIF"), 7, "not a PNG, JPEG or WebP"),
        "text": (b"a red fox jumps", 7, "not a PNG, JPEG or WebP"),
    }


@pytest.mark.parametrize("case", list(broken_files()))
def test_broken_files_are_refused_by_name(library, case):
    data, status, words = broken_files()[case]
    with pytest.raises(UFormError) as error:
        library.decode_image(data, name="img/broken.bin")
    assert error.value.status == status, error.value
    assert "img/broken.bin" in error.value.message and words in error.value.message, error.value.message


def test_hostile_dimensions_are_refused(library):
    """A PNG header that claims 100000 x 100000 pixels is refused before any allocation."""
    import struct
    import zlib

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", 100000, 100000, 8, 6, 0, 0, 0)
    data = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b"")
    with pytest.raises(UFormError) as error:
        library.decode_image(data, name="huge.png")
    assert "huge.png" in error.value.message


# ---------------------------------------------------------------------------------------------
# The grid rule and the resize
# ---------------------------------------------------------------------------------------------


def grid_rule(height, width, most=512):
    """docs/images.md: scale the area to `most` patches (never enlarging), round each side to whole
    patches (at least 1), then take patches from the side more over its share until they fit."""
    area = height * width / 256.0
    scale = math.sqrt(most / area) if area > most else 1.0
    rows = max(1, math.floor(height * scale / 16 + 0.5))  # halves round up
    columns = max(1, math.floor(width * scale / 16 + 0.5))
    while rows * columns > most:
        if rows > 1 and (columns == 1 or rows * width >= columns * height):
            rows -= 1
        else:
            columns -= 1
    return rows, columns


def test_grid_of_a_square_photo_is_the_spec_example(library):
    assert library.image_grid(1024, 1024) == (22, 23)  # SPEC.md: 22x23 patches, 352x368 px
    assert library.image_grid(28, 28) == (2, 2)  # Fashion-MNIST: a 32x32 resize
    assert library.image_grid(240, 320) == (15, 20)  # a flag: kept at its own size
    assert library.image_grid(5, 3000) == (1, 188)  # a strip


def test_grid_rule_over_many_shapes(library):
    rng = np.random.default_rng(11)
    for height, width in rng.integers(1, 5000, size=(400, 2)):
        rows, columns = library.image_grid(int(height), int(width))
        assert (rows, columns) == grid_rule(int(height), int(width)), (height, width)
        assert 1 <= rows * columns <= 512
        if rows > 2 and columns > 2:  # the aspect kept within a patch's rounding on each side
            assert abs(math.log(rows / columns) - math.log(height / width)) < 1.0 / min(rows, columns) + 0.08


def axis_weights(size_in, size_out):
    """W [out, in] of one axis: area average when shrinking or equal, bilinear (half-pixel
    centres, edges clamped) when growing."""
    weights = np.zeros((size_out, size_in))
    scale = size_in / size_out
    for o in range(size_out):
        if scale >= 1:
            low, high = o * scale, (o + 1) * scale
            for i in range(int(math.floor(low)), min(int(math.ceil(high)), size_in)):
                weights[o, i] = (min(high, i + 1) - max(low, i)) / scale
        else:
            x = (o + 0.5) * scale - 0.5
            if x <= 0:
                weights[o, 0] = 1
            elif int(math.floor(x)) + 1 >= size_in:
                weights[o, size_in - 1] = 1
            else:
                i = int(math.floor(x))
                weights[o, i], weights[o, i + 1] = 1 - (x - i), x - i
    return weights


def reference_patches(rgba, rows, columns):
    """float64 patches [rows * columns, 1024] of RGBA [h, w, 4]: resized, then cut row by row."""
    height, width = rows * 16, columns * 16
    wh, ww = axis_weights(rgba.shape[0], height), axis_weights(rgba.shape[1], width)
    across = np.einsum("ijc,xj->ixc", rgba.astype(np.float64), ww, optimize=True)
    resized = np.einsum("yi,ixc->yxc", wh, across, optimize=True) / 255.0
    return resized.reshape(rows, 16, columns, 16, 4).transpose(0, 2, 1, 3, 4).reshape(rows * columns, 1024)


def patches_bound(shape, rows, columns):
    """Float32 sums of t_h then t_w taps of values <= 255 with weights rounded once each, then one
    division: |error| <= (t_h + t_w + 3) 2^-24 in units of 1 (a value / 255), t the taps a sample."""
    taps_h = math.ceil(shape[0] / (rows * 16)) + 1
    taps_w = math.ceil(shape[1] / (columns * 16)) + 1
    return (taps_h + taps_w + 3) * UNIT_F32 * 2  # the weights' own rounding doubles each term at most


def check_patches(library, rgba, most=0):
    patches, rows, columns = library.image_patches(rgba, most)
    expected = reference_patches(rgba, rows, columns)
    return float(np.max(np.abs(patches - expected))), patches_bound(rgba.shape, rows, columns), (rows, columns)


SHAPES = [(1024, 1024), (333, 517), (28, 28), (240, 320), (3, 700), (16, 16), (100, 37)]


@pytest.mark.parametrize("shape", SHAPES)
def test_patches_match_the_float64_resize(library, shape):
    rgba = np.random.default_rng(shape[0] * 7 + shape[1]).integers(0, 256, size=(*shape, 4), dtype=np.uint8)
    error, bound, grid = check_patches(library, rgba)
    assert grid == grid_rule(*shape)
    assert error <= bound, f"{shape} -> {grid}: error {error:.3e} bound {bound:.3e}"


def test_patches_are_channel_last_rows_of_pixels(library):
    """At its own size (no resize) patch p holds pixels exactly: value (y, x, c) at (y * 16 + x) * 4 + c."""
    rgba = np.random.default_rng(12).integers(0, 256, size=(32, 48, 4), dtype=np.uint8)
    patches, rows, columns = library.image_patches(rgba)
    assert (rows, columns) == (2, 3)
    np.testing.assert_array_equal(patches[1 * 3 + 2].reshape(16, 16, 4), rgba[16:32, 32:48] / np.float32(255))


def test_planted_resize_shift_is_rejected():
    planted = Library(built("libuform_plant_resize_shift.so"))
    for shape in [(1024, 1024), (28, 28)]:  # one shrinking, one growing
        rgba = np.random.default_rng(13).integers(0, 256, size=(*shape, 4), dtype=np.uint8)
        error, bound, _ = check_patches(planted, rgba)
        assert error > bound, f"the resize check accepted the planted shift at {shape}: {error:.3e} <= {bound:.3e}"
