# test_images.py: image patches through the C library against the float64 reference: the vision
# frontend (vision.patch p + vision.bias over 16x16 RGBA patches, SPEC.md section 1) and 2D M-RoPE
# (t = 0, h = patch row, w = patch column) in uform_forward, on a grid that packs images beside
# texts, in both precisions, with planted controls the same check must reject. Bounds: bounds.py,
# with the patch product's depth of 1024.

import numpy as np
import pytest

import reference
from contract import check_forward
from grids import packed_grid


def test_the_grid_holds_image_segments():
    grid = packed_grid(96, 0, images=True)
    image = grid.kinds == reference.CELL_IMAGE
    assert image.sum() == len(grid.media[reference.CELL_IMAGE])
    assert sorted(grid.values[image]) == list(range(int(image.sum())))
    assert np.all(grid.positions[image][:, 0] == 0) and grid.positions[image][:, 1].max() > 0


def test_reference_image_frontend_is_the_patch_projection(vision_model):
    """x of one image cell by hand, and the image's states move with its patch columns (w)."""
    model = reference.load_model(vision_model)
    rng = np.random.default_rng(3)
    patches = rng.integers(0, 256, size=(6, 1024)) / 255.0
    kinds = np.full(6, reference.CELL_IMAGE)
    x = reference.frontend(model, kinds, np.arange(6), {reference.CELL_IMAGE: patches})
    expected = model.tensors["vision.patch"] @ patches[4] + model.tensors["vision.bias"]
    np.testing.assert_allclose(x[4], expected, rtol=1e-12)
    positions = np.stack([np.zeros(6, int), np.arange(6) // 3, np.arange(6) % 3], axis=1)
    h = reference.encode_segment(model, np.arange(6), positions, kinds=kinds, media={reference.CELL_IMAGE: patches})
    swapped = reference.encode_segment(model, np.arange(6), positions[:, [0, 2, 1]], kinds=kinds,
                                       media={reference.CELL_IMAGE: patches})
    assert np.linalg.norm(h - swapped) > 1e-3 * np.linalg.norm(h)


@pytest.mark.parametrize("precision", ["f32", "bf16"])
def test_forward_with_images_matches_reference(library, vision_model, precision):
    ok, report = check_forward(library, vision_model, precision, images=True)
    print(report)
    assert ok, report


@pytest.mark.parametrize("precision", ["f32", "bf16"])
def test_planted_controls_are_rejected_with_images(image_plant, vision_model, precision):
    """A patch read transposed; the h and w coordinates swapped."""
    name, planted = image_plant
    ok, report = check_forward(planted, vision_model, precision, images=True)
    assert not ok, f"the forward check with images accepted the planted control {name}:\n{report}"
