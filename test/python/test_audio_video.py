# test_audio_video.py: audio frames and video tubes through the C library against the float64
# reference: the cells (uform_audio_frames, uform_video_tubes against reference.audio_frames and
# reference.video_tubes), the frontends (audio.frame f + audio.bias over 320 samples, video.tube p +
# video.bias over 16x16x2 RGB tubes, SPEC.md section 1) with 1D coordinates for audio and 3D M-RoPE
# for video (t in 40 ms ticks) in uform_forward, on a grid that packs both beside texts and an
# image, in both precisions; and planted controls the same checks must reject. Bounds: bounds.py,
# with the tube product's depth of 1536.

import numpy as np
import pytest

import reference
from conftest import AV_PLANTS, built
from contract import check_forward
from grids import av_grid
from uform_ctypes import Library


def test_the_grid_holds_audio_and_video_segments():
    grid = av_grid(96, 0)
    for kind, width in ((reference.CELL_AUDIO, 320), (reference.CELL_VIDEO, 1536), (reference.CELL_IMAGE, 1024)):
        cells = grid.kinds == kind
        assert cells.sum() == len(grid.media[kind]) and grid.media[kind].shape[1] == width
        assert sorted(grid.values[cells]) == list(range(int(cells.sum())))
    audio = grid.positions[grid.kinds == reference.CELL_AUDIO]
    assert np.all(audio[:, 0] == audio[:, 1]) and np.all(audio[:, 1] == audio[:, 2])
    video = grid.positions[grid.kinds == reference.CELL_VIDEO]
    assert set(video[:, 0]) == {10, 25, 3, 8, 13} and video[:, 1].max() == 1 and video[:, 2].max() == 3


def test_reference_frontends_are_the_projections(av_model):
    """x of one audio and one video cell by hand; a video's states move with its t (ticks) and
    with the order of a tube's two frames; an audio segment's with a one-sample shift."""
    model = reference.load_model(av_model)
    rng = np.random.default_rng(5)
    frames = rng.uniform(-1, 1, size=(6, 320))
    tubes = rng.integers(0, 256, size=(6, 1536)) / 255.0
    kinds = np.array([reference.CELL_AUDIO] * 6)
    x = reference.frontend(model, kinds, np.arange(6), {reference.CELL_AUDIO: frames})
    np.testing.assert_allclose(x[2], model.tensors["audio.frame"] @ frames[2] + model.tensors["audio.bias"], rtol=1e-12)
    x = reference.frontend(model, np.full(6, reference.CELL_VIDEO), np.arange(6), {reference.CELL_VIDEO: tubes})
    np.testing.assert_allclose(x[5], model.tensors["video.tube"] @ tubes[5] + model.tensors["video.bias"], rtol=1e-12)

    def states(kind, rows, positions):
        return reference.encode_segment(model, np.arange(6), positions, kinds=np.full(6, kind), media={kind: rows})

    ticks = np.stack([np.repeat([0, 10, 20], 2), np.zeros(6, int), np.arange(6) % 2], axis=1)
    in_frames = ticks.copy()
    in_frames[:, 0] = np.repeat([0, 2, 4], 2)
    h = states(reference.CELL_VIDEO, tubes, ticks)
    for moved in (states(reference.CELL_VIDEO, tubes, in_frames),
                  states(reference.CELL_VIDEO, np.concatenate([tubes[:, 768:], tubes[:, :768]], axis=1), ticks)):
        assert np.linalg.norm(h - moved) > 1e-3 * np.linalg.norm(h)
    line = np.repeat(np.arange(6)[:, None], 3, axis=1)
    h = states(reference.CELL_AUDIO, frames, line)
    shifted = np.concatenate([frames[:, 1:], np.zeros((6, 1))], axis=1)
    assert np.linalg.norm(h - states(reference.CELL_AUDIO, shifted, line)) > 1e-3 * np.linalg.norm(h)


# ---------------------------------------------------------------------------------------------
# The cells: the C cutters against the reference's statement of docs/audio_video.md
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [1, 319, 320, 641, 163840, 170000])
def test_audio_frames_match_reference(library, count):
    samples = np.random.default_rng(count).uniform(-1, 1, size=count).astype(np.float32)
    frames, positions = library.audio_frames(samples)
    expected, expected_positions = reference.audio_frames(samples)
    assert frames.shape == expected.shape and np.array_equal(frames, expected.astype(np.float32))  # copies: exact
    assert np.array_equal(positions, expected_positions)


def _clip(rng, count, height=32, width=48):
    """RGB frames at the grid's own size (no resize) and ticks of 5 fps (5 ticks a frame)."""
    return rng.integers(0, 256, size=(count, height, width, 3), dtype=np.uint8), 5 * np.arange(count)


def check_tubes(library, frames, ticks):
    """(ok, message): uform_video_tubes against reference.video_tubes; values within 2^-24 relative
    (a byte / 255 rounded once to Float32, both sides), positions exact."""
    tubes, positions, grid = library.video_tubes(frames, ticks)
    expected, expected_positions = reference.video_tubes(frames / 255.0, ticks)
    if tubes.shape != expected.shape:
        return False, f"shape {tubes.shape} vs {expected.shape} (grid {grid})"
    error = float(np.max(np.abs(tubes - expected)))
    if error > 2.0**-24:
        return False, f"values off by {error:.3e} > 2^-24"
    if not np.array_equal(positions, expected_positions):
        return False, f"positions differ: t {positions[:, 0].tolist()} vs {expected_positions[:, 0].tolist()}"
    return True, f"{len(tubes)} tubes, error {error:.3e}"


@pytest.mark.parametrize("count", [1, 2, 5])
def test_video_tubes_match_reference(library, count):
    frames, ticks = _clip(np.random.default_rng(count), count)
    ok, message = check_tubes(library, frames, ticks)
    assert ok, message


def test_planted_tube_time_in_frames_is_rejected():
    """t counted in frames (0, 2, 4) instead of 40 ms ticks (0, 10, 20)."""
    planted = Library(built("libuform_plant_tube_ticks_frames.so"))
    frames, ticks = _clip(np.random.default_rng(9), 5)
    ok, message = check_tubes(planted, frames, ticks)
    assert not ok and "positions differ" in message, message


# ---------------------------------------------------------------------------------------------
# uform_forward with audio and video cells
# ---------------------------------------------------------------------------------------------


# None: the real library; each plant a control the same check must reject: a tube's two frames
# swapped, an audio frame read one sample late, h and w swapped (the 2x3 and 1x4 tube grids move).
@pytest.mark.parametrize("plant", [None, *AV_PLANTS, "rope_axis"])
@pytest.mark.parametrize("precision", ["f32", "bf16"])
def test_forward_with_audio_and_video(av_model, precision, plant):
    checked = Library(built(f"libuform_plant_{plant}.so" if plant else "libuform.so"))
    ok, report = check_forward(checked, av_model, precision, av=True)
    print(report)
    if plant is None:
        assert ok, report
    else:
        assert not ok, f"the forward check with audio and video accepted the planted control {plant}:\n{report}"


def test_video_cells_are_refused_without_the_frontend(library, vision_model):
    from uform_ctypes import UFormError
    grid = av_grid(96, 0)
    with library.open(str(vision_model)) as handle:
        with pytest.raises(UFormError, match="no (audio|video) frontend"):
            handle.forward(*grid.arrays(), media=grid.media)
