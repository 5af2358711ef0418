# grids.py: builds cell grids for tests: rows packed with segments of varied lengths, padding
# before, between and after them, segment ids out of order, and three kinds of coordinates on
# byte cells (text: t = h = w; image: t = 0, h = row, w = column; video: t in 40 ms ticks).

from dataclasses import dataclass, field

import numpy as np

from reference import CELL_AUDIO, CELL_BYTE, CELL_IMAGE, CELL_PADDING, CELL_VIDEO, MASK, text_positions


@dataclass
class GridBuilder:
    rows: int
    columns: int
    kinds: np.ndarray = field(init=False)
    values: np.ndarray = field(init=False)
    segments: np.ndarray = field(init=False)
    positions: np.ndarray = field(init=False)
    media: dict = field(init=False)  # a media kind -> its rows [count, values] when such cells are placed

    def __post_init__(self):
        self.media = {}
        self.kinds = np.full((self.rows, self.columns), CELL_PADDING, dtype=np.uint8)
        self.values = np.zeros((self.rows, self.columns), dtype=np.uint32)
        self.segments = np.full((self.rows, self.columns), -1, dtype=np.int32)
        self.positions = np.zeros((self.rows, self.columns, 3), dtype=np.int32)

    def place(self, row, column, values, positions, segment):
        """Puts one segment of byte cells at (row, column)."""
        span = slice(column, column + len(values))
        self.kinds[row, span] = CELL_BYTE
        self.values[row, span] = values
        self.segments[row, span] = segment
        self.positions[row, span] = positions

    def place_image(self, row, column, patches, patch_columns, segment):
        """Puts one image segment: its patches [cells, 1024] join the grid's image rows."""
        self.place_media(row, column, CELL_IMAGE, patches, image_positions(len(patches), patch_columns), segment)

    def place_media(self, row, column, kind, vectors, positions, segment):
        """Puts one segment of media cells of `kind`: its vectors join the grid's rows of that kind."""
        rows = self.media.get(kind, np.zeros((0, vectors.shape[1]), dtype=np.float32))
        span = slice(column, column + len(vectors))
        self.kinds[row, span] = kind
        self.values[row, span] = np.arange(len(rows), len(rows) + len(vectors))
        self.segments[row, span] = segment
        self.positions[row, span] = positions
        self.media[kind] = np.concatenate([rows, vectors.astype(np.float32)])

    def arrays(self):
        return self.kinds, self.values, self.segments, self.positions


def image_positions(length, patch_columns):
    """t = 0, h = patch row, w = patch column."""
    index = np.arange(length)
    return np.stack([np.zeros(length, int), index // patch_columns, index % patch_columns], axis=1)


def video_positions(length, patch_rows, patch_columns, first_tick=0):
    """t = time of the tube's first frame in 40 ms ticks (2 frames at 25 fps: 2 ticks a tube)."""
    index = np.arange(length)
    per_frame = patch_rows * patch_columns
    return np.stack([first_tick + 2 * (index // per_frame), (index % per_frame) // patch_columns, index % patch_columns], axis=1)


def random_bytes(rng, length, mask_fraction=0.1):
    values = rng.integers(0, 256, size=length)
    values[rng.random(length) < mask_fraction] = MASK
    return values


def random_patches(rng, count):
    """Image patches as a decoder gives them: 16x16 RGBA values k / 255, alpha mostly opaque."""
    values = rng.integers(0, 256, size=(count, 16 * 16, 4))
    values[:, :, 3] = np.where(rng.random((count, 16 * 16)) < 0.8, 255, values[:, :, 3])
    return (values / 255.0).reshape(count, 1024)


def random_tubes(rng, count):
    """Video tubes as av_cells.c lays them out: two 16x16 RGB frames of values k / 255, drawn apart
    (a cut between them), so that a tube read with its frames swapped is far from the true one."""
    return rng.integers(0, 256, size=(count, 1536)) / 255.0


def random_frames(rng, count):
    """Audio frames: 320 samples of a few tones and noise in [-1, 1]."""
    t = np.arange(count * 320) / 16000.0
    wave = 0.4 * np.sin(2 * np.pi * 220 * t) + 0.2 * np.sin(2 * np.pi * 1750 * t + 1.0)
    wave += 0.2 * rng.normal(size=wave.shape)
    return np.clip(wave, -1, 1).reshape(count, 320)


def audio_positions(length):
    """Audio frames: t = h = w = frame index (1D, as bytes)."""
    return text_positions(length)


def av_grid(columns, seed):
    """Two rows packing audio and video segments beside texts and an image.
    Row 0: text, audio (1D), padding, video (2 steps of 2x3 tubes from tick 10, then ticks 25 on),
    padding. Row 1: video (3 steps of 1x4 from tick 3, steps 5 ticks apart), audio, image, text."""
    rng = np.random.default_rng(seed)
    grid = GridBuilder(2, columns)
    text, audio = max(columns // 8, 3), max(columns // 4, 6)
    grid.place(0, 0, random_bytes(rng, text), text_positions(text), 3)
    grid.place_media(0, text, CELL_AUDIO, random_frames(rng, audio), audio_positions(audio), 0)
    ticks = np.array([10, 10, 10, 10, 10, 10, 25, 25, 25, 25, 25, 25])
    video = video_positions(12, 2, 3)
    video[:, 0] = ticks
    grid.place_media(0, text + audio + 2, CELL_VIDEO, random_tubes(rng, 12), video, 1)
    video = video_positions(12, 1, 4)
    video[:, 0] = 3 + 5 * (np.arange(12) // 4)
    grid.place_media(1, 0, CELL_VIDEO, random_tubes(rng, 12), video, 5)
    second_audio = max(columns // 6, 4)
    grid.place_media(1, 12, CELL_AUDIO, random_frames(rng, second_audio), audio_positions(second_audio), 2)
    grid.place_image(1, 12 + second_audio, random_patches(rng, 6), 3, 4)
    rest = columns - (18 + second_audio)
    grid.place(1, 18 + second_audio, random_bytes(rng, rest), text_positions(rest), 6)
    return grid


def packed_grid(columns, seed, images=False):
    """Three rows: packed segments with image-, video- and text-like coordinates, and padding.
    Row 0: four segments back to back (lengths 1, 7, 23 and 40% of the row), then padding.
    Row 1: padding, a text segment, padding, an image segment, padding, a video segment, padding.
    Row 2: one text segment filling the whole row.
    Segment ids are not in column order, so output order must follow the cells, not the ids.
    With `images`, the two image segments hold image patches (grid.media) instead of bytes."""
    rng = np.random.default_rng(seed)
    grid = GridBuilder(3, columns)
    column = 0
    long_image = max(columns * 2 // 5, 8)
    row0 = [(1, text_positions(1), 9), (7, text_positions(7) + 3, 2), (23, video_positions(23, 2, 3, 5), 5),
            (long_image, image_positions(long_image, 6), 0)]
    for length, positions, segment in row0:
        if images and segment == 0:
            grid.place_image(0, column, random_patches(rng, length), 6, segment)
        else:
            grid.place(0, column, random_bytes(rng, length), positions, segment)
        column += length
    text, image, video = columns // 6, columns // 3, columns // 6
    grid.place(1, 3, random_bytes(rng, text), text_positions(text), 4)
    if images:
        grid.place_image(1, 5 + text, random_patches(rng, image), 5, 1)
    else:
        grid.place(1, 5 + text, random_bytes(rng, image), image_positions(image, 5), 1)
    grid.place(1, 8 + text + image, random_bytes(rng, video), video_positions(video, 3, 2, 100), 3)
    grid.place(2, 0, random_bytes(rng, columns), text_positions(columns), 0)
    return grid


def longest_segment(grid):
    """n: the longest run of one segment in any row."""
    longest = 0
    for row in range(grid.rows):
        run, previous = 0, None
        for column in range(grid.columns):
            identifier = grid.segments[row, column] if grid.kinds[row, column] != CELL_PADDING else None
            run = run + 1 if identifier is not None and identifier == previous else (1 if identifier is not None else 0)
            previous = identifier
            longest = max(longest, run)
    return longest
