# contract.py: the checks of the C library against the float64 reference, each a function that
# returns (ok, report) so that one test can assert ok for the real library and another can assert
# not ok for each planted control. Bounds come from bounds.py (derivation there).

import functools

import numpy as np

import bounds
import reference
from grids import av_grid, longest_segment, packed_grid
from uform_ctypes import PRECISION_BF16, PRECISION_E4M3, PRECISION_F32, PRECISION_INT8

PRECISIONS = {"f32": PRECISION_F32, "bf16": PRECISION_BF16, "e4m3": PRECISION_E4M3, "int8": PRECISION_INT8}
NARROW = ("e4m3", "int8")  # the precisions with a reference of their own (reference.py's bf16_inputs=name)
OUTPUTS = ("hidden", "pooled", "colbert", "logits")


class Report:
    """Lines of `name: error E bound B` and a verdict; str() prints them."""

    def __init__(self, title, deepest=0):
        self.lines = [title]
        self.ok = True
        self.deepest = deepest  # a frontend's product depth (bounds.float32_rounding)

    def compare(self, name, value, expected_f64, expected_bf16, precision, width, longest, coordinate, expected_narrow=None):
        if precision in NARROW:
            expected = expected_narrow
            limit = bounds.bound_rounded(expected_f64, expected_bf16, expected_narrow, width, longest, coordinate, self.deepest)
        else:
            is_bf16 = precision == "bf16"
            expected = expected_bf16 if is_bf16 else expected_f64
            limit = bounds.bound(is_bf16, expected_f64, expected_bf16, width, longest, coordinate, self.deepest)
        error = bounds.relative_error(value, expected)
        passed = bool(np.isfinite(error) and error <= limit)
        self.ok &= passed
        gain = bounds.gain(expected_f64, expected_bf16)
        self.lines.append(f"{'ok  ' if passed else 'FAIL'} {name}: error {error:.3e} bound {limit:.3e} "
                          f"({error / limit:.1%} of bound, G {gain:.2f})")
        return passed

    def require(self, name, passed, detail=""):
        self.ok &= bool(passed)
        self.lines.append(f"{'ok  ' if passed else 'FAIL'} {name}{': ' + detail if detail else ''}")
        return passed

    def __str__(self):
        return "\n".join(self.lines)


@functools.lru_cache(maxsize=None)
def reference_forward(model_directory, columns, seed, images=False, av=False):
    """Both references (float64, BF16 inputs) of the packed grid (`av`: av_grid's audio and video
    beside texts and an image); cached across libraries."""
    model = reference.load_model(model_directory)
    grid = av_grid(columns, seed) if av else packed_grid(columns, seed, images)
    return (model, grid, reference.forward(model, *grid.arrays(), media=grid.media),
            reference.forward(model, *grid.arrays(), bf16_inputs=True, media=grid.media))


@functools.lru_cache(maxsize=None)
def reference_forward_narrow(model_directory, columns, seed, precision, images=False, av=False):
    """The E4M3 or int8 reference of reference_forward's grid."""
    model = reference.load_model(model_directory)
    grid = av_grid(columns, seed) if av else packed_grid(columns, seed, images)
    return reference.forward(model, *grid.arrays(), bf16_inputs=precision, media=grid.media)


def check_forward(library, model_directory, precision, seed=0, images=False, av=False):
    """uform_forward over a packed grid against the reference: every output, globally and per
    segment; segment count and order; padding cells left as they were (NaN-filled here). With
    `images`, two of its segments are image patches (the model needs the vision frontend)."""
    model_directory = str(model_directory)
    with library.open(model_directory) as handle:
        columns = handle.config().columns
        model, grid, f64, bf16 = reference_forward(model_directory, columns, seed, images, av)
        narrow = reference_forward_narrow(model_directory, columns, seed, precision, images, av) if precision in NARROW else None
        handle.set_precision(PRECISIONS[precision])
        result = handle.forward(*grid.arrays(), media=grid.media)
    label = " with audio and video" if av else " with images" if images else ""
    # the deepest frontend product: a tube's 1536 values, a patch's 1024
    report = Report(f"uform_forward of {library.path} on {model_directory} in {precision}{label}",
                    deepest=1536 if av else 1024 if images else 0)
    width, longest = model.width, longest_segment(grid)
    coordinate = int(grid.positions.max())
    if not report.require("segment count", result.segments == len(f64.segments), f"{result.segments} vs {len(f64.segments)}"):
        return False, str(report)
    padding = grid.kinds == reference.CELL_PADDING
    for name in ("hidden", "colbert", "logits"):
        untouched = np.all(np.isnan(getattr(result, name)[padding]))
        report.require(f"{name} padding cells left as they were", untouched)
    cells = ~padding
    for name in OUTPUTS:
        value, expected_f64, expected_bf16 = getattr(result, name), getattr(f64, name), getattr(bf16, name)
        expected_narrow = getattr(narrow, name) if narrow else None
        if name != "pooled":
            value, expected_f64, expected_bf16 = value[cells], expected_f64[cells], expected_bf16[cells]
            expected_narrow = expected_narrow[cells] if narrow else None
        report.compare(name, value, expected_f64, expected_bf16, precision, width, longest, coordinate, expected_narrow)
        if narrow:  # rounding where the narrow reference rounds, the output follows it, not the BF16 one
            to_narrow, to_bf16 = bounds.relative_error(value, expected_narrow), bounds.relative_error(value, expected_bf16)
            report.require(f"{name} nearer the {precision} reference than the BF16 one", to_narrow < to_bf16,
                           f"{to_narrow:.3e} vs {to_bf16:.3e}")
    for index, (row, start, length) in enumerate(f64.segments):
        span = (row, slice(start, start + length))
        label = f"segment {index} (row {row}, columns {start}..{start + length - 1})"
        for name in OUTPUTS:
            pick = (lambda array: array[index]) if name == "pooled" else (lambda array: array[span])
            report.compare(f"{label} {name}", pick(getattr(result, name)), pick(getattr(f64, name)),
                           pick(getattr(bf16, name)), precision, width, longest, coordinate,
                           pick(getattr(narrow, name)) if narrow else None)
    return report.ok, str(report)


def verb_texts():
    """Texts for the text verbs: ASCII, multi-byte UTF-8, binary bytes, one byte."""
    return [
        b"a",
        "Grüße aus Zürich, 東京 and Kraków".encode(),
        b"def f(x):\n    return x * 2\n",
        bytes(range(0, 256, 7)),
        b"The quick brown fox jumps over the lazy dog. " * 2,
    ]


@functools.lru_cache(maxsize=None)
def reference_texts(model_directory):
    model = reference.load_model(model_directory)
    f64 = [reference.encode_text(model, text) for text in verb_texts()]
    bf16 = [reference.encode_text(model, text, bf16_inputs=True) for text in verb_texts()]
    return model, f64, bf16


def check_verbs(library, model_directory, precision):
    """uform_encode (every Matryoshka width), uform_colbert, uform_rerank and uform_mlm_logits
    against the reference, each text being its own segment with t = h = w = index."""
    model_directory = str(model_directory)
    model, f64, bf16 = reference_texts(model_directory)
    texts = verb_texts()
    report = Report(f"text verbs of {library.path} on {model_directory} in {precision}")
    width = model.width
    longest = max(len(text) for text in texts)
    with library.open(model_directory) as handle:
        handle.set_precision(PRECISIONS[precision])
        for matryoshka in model.embedding_widths:
            embeddings, truncated = handle.encode(texts, matryoshka)
            report.require(f"encode width {matryoshka} truncated", truncated == 0, str(truncated))
            for index in range(len(texts)):
                report.compare(
                    f"encode width {matryoshka} text {index}", embeddings[index],
                    reference.matryoshka(f64[index][1], matryoshka), reference.matryoshka(bf16[index][1], matryoshka),
                    precision, width, longest, longest)
        widest, _ = handle.encode(texts, 0)
        report.require("encode width 0 is the widest", widest.shape[1] == model.embedding_widths[-1])
        colbert = [handle.colbert(text) for text in texts]
        colbert_f64 = [reference.colbert_cells(model, h) for h, _ in f64]
        colbert_bf16 = [reference.colbert_cells(model, h, True) for h, _ in bf16]
        colbert_bounds = []
        for index, text in enumerate(texts):
            report.require(f"colbert text {index} cells", len(colbert[index]) == len(text), f"{len(colbert[index])} vs {len(text)}")
            report.compare(f"colbert text {index}", colbert[index], colbert_f64[index], colbert_bf16[index],
                           precision, width, longest, longest)
            colbert_bounds.append(bounds.bound(precision == "bf16", colbert_f64[index], colbert_bf16[index], width, longest, longest))
        for index, vectors in enumerate(handle.colbert_many(texts)):  # the same texts packed into shared passes
            report.require(f"colbert_many text {index} cells", len(vectors) == len(texts[index]), f"{len(vectors)}")
            report.compare(f"colbert_many text {index}", vectors, colbert_f64[index], colbert_bf16[index],
                           precision, width, longest, longest)
        # |delta maxsim(q, D)| <= sum_i ||dc_i|| + n_q max_j ||dc_j|| <= n_q B_q + n_q sqrt(n_d) B_d
        # (unit vectors, Cauchy-Schwarz over cells; B the relative Frobenius bounds of the ColBERT cells).
        query = 1
        documents = [index for index in range(len(texts)) if index != query]
        scores, truncated = handle.rerank(texts[query], [texts[index] for index in documents])
        expected = colbert_bf16 if precision == "bf16" else colbert_f64
        for position, index in enumerate(documents):
            exact = reference.maxsim(expected[query], expected[index])
            cells = len(texts[query])
            limit = cells * colbert_bounds[query] + cells * np.sqrt(len(texts[index])) * colbert_bounds[index]
            error = abs(float(scores[position]) - exact)
            report.require(f"rerank document {index}", error <= limit, f"{scores[position]:.6f} vs {exact:.6f}, |error| {error:.2e} bound {limit:.2e}")
        # Symmetric: the mean from the shorter side s against the other o, so the bound above over n_s cells:
        # B_s + sqrt(n_o) B_o. The documents are shorter and longer than the query, so both sides are read.
        scores, truncated = handle.rerank_symmetric(texts[query], [texts[index] for index in documents])
        for position, index in enumerate(documents):
            exact = reference.maxsim_symmetric(expected[query], expected[index])
            short, long = (index, query) if len(texts[index]) < len(texts[query]) else (query, index)
            limit = colbert_bounds[short] + np.sqrt(len(texts[long])) * colbert_bounds[long]
            error = abs(float(scores[position]) - exact)
            report.require(f"rerank_symmetric document {index}", error <= limit,
                           f"{scores[position]:.6f} vs {exact:.6f}, |error| {error:.2e} bound {limit:.2e}")
        # uform_maxsim over the vectors uform_colbert gave, against float64 MaxSim of the same vectors: each
        # dot of unit vectors in float32 is off by at most w u (u = 2^-24), a maximum by as much, the sum of
        # n of them (in float64) by n w u, and the float32 result by its own rounding.
        for position, index in enumerate(documents):
            for symmetric in (False, True):
                got = library.maxsim(colbert[query], colbert[index], symmetric)
                exact = (reference.maxsim_symmetric if symmetric else reference.maxsim)(
                    colbert[query].astype(np.float64), colbert[index].astype(np.float64))
                cells = min(len(colbert[query]), len(colbert[index])) if symmetric else len(colbert[query])
                limit = (cells * colbert[query].shape[1] * 2.0**-24) / (cells if symmetric else 1) + abs(exact) * 2.0**-24
                error = abs(got - exact)
                report.require(f"maxsim {'symmetric ' if symmetric else ''}vectors document {index}", error <= limit,
                               f"{got:.6f} vs {exact:.6f}, |error| {error:.2e} bound {limit:.2e}")
        # Fused: (1 - w) cosine at the widest width + w symmetric MaxSim. For unit vectors |delta cosine|
        # <= B_q + B_d (each embedding's relative bound), so the bound is the two bounds mixed.
        widest = model.embedding_widths[-1]
        pooled = [reference.matryoshka(h_e[1], widest) for h_e in (bf16 if precision == "bf16" else f64)]
        pooled_bounds = [bounds.bound(precision == "bf16", reference.matryoshka(f64[index][1], widest),
                                      reference.matryoshka(bf16[index][1], widest), width, longest, longest)
                         for index in range(len(texts))]
        for weight in (0.25, 0.75):
            scores, truncated = handle.rerank_fused(texts[query], [texts[index] for index in documents], weight)
            for position, index in enumerate(documents):
                exact = (1 - weight) * float(pooled[query] @ pooled[index]) + \
                    weight * reference.maxsim_symmetric(expected[query], expected[index])
                short, long = (index, query) if len(texts[index]) < len(texts[query]) else (query, index)
                limit = (1 - weight) * (pooled_bounds[query] + pooled_bounds[index]) + \
                    weight * (colbert_bounds[short] + np.sqrt(len(texts[long])) * colbert_bounds[long])
                error = abs(float(scores[position]) - exact)
                report.require(f"rerank_fused {weight} document {index}", error <= limit,
                               f"{scores[position]:.6f} vs {exact:.6f}, |error| {error:.2e} bound {limit:.2e}")
        for index, text in enumerate(texts):
            ids = np.frombuffer(text, dtype=np.uint8).astype(np.uint16)
            logits = handle.mlm_logits(ids)
            report.compare(f"mlm_logits text {index}", logits, reference.mlm_cells(model, f64[index][0]),
                           reference.mlm_cells(model, bf16[index][0], True), precision, width, longest, longest)
    return report.ok, str(report)
