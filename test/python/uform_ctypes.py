# uform_ctypes.py: a small ctypes wrapper over the public C ABI (include/uform/*.h) for tests.
# One `Library` per shared object, so the real library and each planted control can be loaded
# side by side; every non-zero status raises `UFormError` carrying uform_last_error().

import ctypes
from dataclasses import dataclass

import numpy as np

VOCABULARY = 258
MAX_EMBEDDING_WIDTHS = 8

PRECISION_BF16 = 0
PRECISION_F32 = 1

STATUS_NAMES = {
    0: "ok",
    1: "invalid_argument",
    2: "io",
    3: "format",
    4: "shape",
    5: "missing",
    6: "out_of_memory",
    7: "unsupported",
}


class UFormError(Exception):
    def __init__(self, function, status, message):
        super().__init__(f"{function} -> {STATUS_NAMES.get(status, status)} ({status}): {message}")
        self.function = function
        self.status = status
        self.message = message


class Config(ctypes.Structure):
    _fields_ = [
        ("tier", ctypes.c_char * 32),
        ("width", ctypes.c_size_t),
        ("depth", ctypes.c_size_t),
        ("heads", ctypes.c_size_t),
        ("embedding_widths", ctypes.c_size_t * MAX_EMBEDDING_WIDTHS),
        ("embedding_widths_count", ctypes.c_size_t),
        ("colbert_width", ctypes.c_size_t),
        ("columns", ctypes.c_size_t),
        ("learning_rate", ctypes.c_double),
    ]

    @property
    def widths(self):
        return [int(self.embedding_widths[i]) for i in range(self.embedding_widths_count)]


class Text(ctypes.Structure):
    _fields_ = [("data", ctypes.POINTER(ctypes.c_uint8)), ("length", ctypes.c_size_t)]


class Grid(ctypes.Structure):
    _fields_ = [
        ("rows", ctypes.c_size_t),
        ("columns", ctypes.c_size_t),
        ("kinds", ctypes.POINTER(ctypes.c_uint8)),
        ("values", ctypes.POINTER(ctypes.c_uint32)),
        ("segments", ctypes.POINTER(ctypes.c_int32)),
        ("positions", ctypes.POINTER(ctypes.c_int32)),
    ]


class OutputsStruct(ctypes.Structure):
    _fields_ = [
        ("hidden", ctypes.POINTER(ctypes.c_float)),
        ("pooled", ctypes.POINTER(ctypes.c_float)),
        ("colbert", ctypes.POINTER(ctypes.c_float)),
        ("logits", ctypes.POINTER(ctypes.c_float)),
        ("segments", ctypes.c_size_t),
    ]


def _pointer(array, ctype):
    return array.ctypes.data_as(ctypes.POINTER(ctype)) if array is not None else None


def _texts(items):
    """Keeps the byte buffers alive next to the uform_text_t array that points into them."""
    buffers = [np.frombuffer(bytes(item), dtype=np.uint8).copy() for item in items]
    array = (Text * max(len(items), 1))()
    for index, buffer in enumerate(buffers):
        array[index].data = _pointer(buffer, ctypes.c_uint8) if len(buffer) else None
        array[index].length = len(buffer)
    return array, buffers


def _text(item):
    array, buffers = _texts([item])
    return array[0], buffers


@dataclass
class ForwardOutputs:
    hidden: np.ndarray
    pooled: np.ndarray
    colbert: np.ndarray
    logits: np.ndarray
    segments: int


class Library:
    """The functions of one libuform*.so."""

    def __init__(self, path):
        self.path = str(path)
        self.dll = ctypes.CDLL(self.path)  # RTLD_LOCAL: planted copies do not interpose on each other
        status_functions = {
            "uform_config_from_tier": [ctypes.c_char_p, ctypes.POINTER(Config)],
            "uform_model_init": [ctypes.POINTER(Config), ctypes.c_uint64, ctypes.POINTER(ctypes.c_void_p)],
            "uform_model_open": [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)],
            "uform_model_save": [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p],
            "uform_model_config": [ctypes.c_void_p, ctypes.POINTER(Config)],
            "uform_model_set_threads": [ctypes.c_void_p, ctypes.c_size_t],
            "uform_model_set_precision": [ctypes.c_void_p, ctypes.c_int],
            "uform_model_reserve": [ctypes.c_void_p, ctypes.c_size_t],
            "uform_encode": [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t,
                             ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_size_t)],
            "uform_colbert": [ctypes.c_void_p, Text, ctypes.POINTER(ctypes.c_float), ctypes.c_size_t,
                              ctypes.POINTER(ctypes.c_size_t)],
            "uform_rerank": [ctypes.c_void_p, Text, ctypes.c_void_p, ctypes.c_size_t,
                             ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_size_t)],
            "uform_mlm_logits": [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint16), ctypes.c_size_t,
                                 ctypes.POINTER(ctypes.c_float)],
            "uform_forward": [ctypes.c_void_p, ctypes.POINTER(Grid), ctypes.POINTER(OutputsStruct)],
        }
        for name, arguments in status_functions.items():
            function = getattr(self.dll, name)
            function.argtypes = arguments
            function.restype = ctypes.c_int
        self.dll.uform_last_error.restype = ctypes.c_char_p
        self.dll.uform_last_error.argtypes = []
        self.dll.uform_status_name.restype = ctypes.c_char_p
        self.dll.uform_status_name.argtypes = [ctypes.c_int]
        self.dll.uform_version.restype = ctypes.c_char_p
        self.dll.uform_version.argtypes = []
        self.dll.uform_model_close.restype = None
        self.dll.uform_model_close.argtypes = [ctypes.c_void_p]
        self.dll.uform_model_has_head.restype = ctypes.c_int
        self.dll.uform_model_has_head.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        self.dll.uform_config_parameters.restype = ctypes.c_size_t
        self.dll.uform_config_parameters.argtypes = [ctypes.POINTER(Config)]

    def last_error(self):
        return self.dll.uform_last_error().decode("utf-8", "replace")

    def status_name(self, status):
        return self.dll.uform_status_name(status).decode()

    def version(self):
        return self.dll.uform_version().decode()

    def call(self, name, *arguments):
        """Calls a status-returning function; raises UFormError on a non-zero status."""
        status = getattr(self.dll, name)(*arguments)
        if status != 0:
            raise UFormError(name, status, self.last_error())
        return status

    def config_from_tier(self, tier):
        config = Config()
        self.call("uform_config_from_tier", tier.encode(), ctypes.byref(config))
        return config

    def init(self, config, seed):
        handle = ctypes.c_void_p()
        self.call("uform_model_init", ctypes.byref(config), seed, ctypes.byref(handle))
        return ModelHandle(self, handle)

    def open(self, directory):
        handle = ctypes.c_void_p()
        self.call("uform_model_open", str(directory).encode(), ctypes.byref(handle))
        return ModelHandle(self, handle)


class ModelHandle:
    """An open uform_model_t; close() frees it (also on leaving a `with` block)."""

    def __init__(self, library, handle):
        self.library = library
        self.handle = handle

    def __enter__(self):
        return self

    def __exit__(self, *exception):
        self.close()

    def close(self):
        if self.handle:
            self.library.dll.uform_model_close(self.handle)
            self.handle = None

    def _call(self, name, *arguments):
        return self.library.call(name, self.handle, *arguments)

    def save(self, directory, command=None):
        self._call("uform_model_save", str(directory).encode(), command.encode() if command else None)

    def config(self):
        config = Config()
        self._call("uform_model_config", ctypes.byref(config))
        return config

    def has_head(self, head):
        return bool(self.library.dll.uform_model_has_head(self.handle, head.encode()))

    def set_threads(self, threads):
        self._call("uform_model_set_threads", threads)

    def set_precision(self, precision):
        self._call("uform_model_set_precision", precision)

    def reserve(self, cells):
        self._call("uform_model_reserve", cells)

    def encode(self, texts, width=0):
        """Matryoshka embeddings [count, width or E] and the truncated count."""
        config = self.config()
        size = width if width else config.widths[-1]
        array, buffers = _texts(texts)
        embeddings = np.zeros((len(texts), size), dtype=np.float32)
        truncated = ctypes.c_size_t(0)
        self._call("uform_encode", array, len(texts), width, _pointer(embeddings, ctypes.c_float), ctypes.byref(truncated))
        return embeddings, truncated.value

    def colbert(self, text, capacity=None):
        config = self.config()
        capacity = len(text) if capacity is None else capacity
        vectors = np.zeros((max(capacity, 1), config.colbert_width), dtype=np.float32)
        cells = ctypes.c_size_t(0)
        item, buffers = _text(text)
        self._call("uform_colbert", item, _pointer(vectors, ctypes.c_float), capacity, ctypes.byref(cells))
        return vectors[: cells.value]

    def rerank(self, query, documents):
        query_item, query_buffers = _text(query)
        array, buffers = _texts(documents)
        scores = np.zeros(max(len(documents), 1), dtype=np.float32)
        truncated = ctypes.c_size_t(0)
        self._call("uform_rerank", query_item, array, len(documents), _pointer(scores, ctypes.c_float), ctypes.byref(truncated))
        return scores[: len(documents)], truncated.value

    def mlm_logits(self, ids):
        ids = np.ascontiguousarray(ids, dtype=np.uint16)
        logits = np.zeros((len(ids), VOCABULARY), dtype=np.float32)
        self._call("uform_mlm_logits", _pointer(ids, ctypes.c_uint16), len(ids), _pointer(logits, ctypes.c_float))
        return logits

    def forward(self, kinds, values, segments, positions, heads=("hidden", "pooled", "colbert", "logits"),
                fill=np.nan, pooled_capacity=None):
        """uform_forward over a grid; outputs are prefilled with `fill` so untouched cells show."""
        kinds = np.ascontiguousarray(kinds, dtype=np.uint8)
        values = np.ascontiguousarray(values, dtype=np.uint32)
        segments = np.ascontiguousarray(segments, dtype=np.int32)
        positions = np.ascontiguousarray(positions, dtype=np.int32)
        rows, columns = kinds.shape
        config = self.config()
        if pooled_capacity is None:
            pooled_capacity = rows * columns  # at most one segment per cell
        shapes = {
            "hidden": (rows, columns, config.width),
            "pooled": (pooled_capacity, config.widths[-1]),
            "colbert": (rows, columns, config.colbert_width),
            "logits": (rows, columns, VOCABULARY),
        }
        buffers = {name: np.full(shape, fill, dtype=np.float32) if name in heads else None for name, shape in shapes.items()}
        grid = Grid(rows, columns, _pointer(kinds, ctypes.c_uint8), _pointer(values, ctypes.c_uint32),
                    _pointer(segments, ctypes.c_int32), _pointer(positions, ctypes.c_int32))
        outputs = OutputsStruct(*(_pointer(buffers[name], ctypes.c_float) for name in shapes), 0)
        self._call("uform_forward", ctypes.byref(grid), ctypes.byref(outputs))
        pooled = buffers["pooled"][: outputs.segments] if buffers["pooled"] is not None else None
        return ForwardOutputs(buffers["hidden"], pooled, buffers["colbert"], buffers["logits"], outputs.segments)
