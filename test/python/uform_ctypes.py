# uform_ctypes.py: a small ctypes wrapper over the public C ABI (include/uform/*.h) for tests.
# One `Library` per shared object, so the real library and each planted control can be loaded
# side by side; every non-zero status raises `UFormError` carrying uform_last_error(). The
# train.h calls (TrainOptions, TrainBatch, TrainerHandle) load only where the library has them.

import ctypes
from dataclasses import dataclass

import numpy as np

VOCABULARY = 258
MAX_EMBEDDING_WIDTHS = 8

PRECISION_BF16 = 0
PRECISION_F32 = 1
PRECISION_E4M3 = 2
PRECISION_INT8 = 3

# quantize.h: uform_output_precision_t
OUTPUT_PRECISIONS = ("float32", "int8", "uint8", "binary", "ubinary")
OUTPUT_DTYPES = {"float32": np.float32, "int8": np.int8, "uint8": np.uint8, "binary": np.int8, "ubinary": np.uint8}

# train.h
OBJECTIVE_MLM = 0
OBJECTIVE_CONTRASTIVE = 1
OBJECTIVE_RERANK = 2
SLOT_PARAMETER = 0
SLOT_GRADIENT = 1
SLOT_FIRST_MOMENT = 2
SLOT_ROW_MOMENT = 3  # R for matrices, the unfactored V for vectors
SLOT_COLUMN_MOMENT = 4  # C, matrices only

STATUS_NAMES = {
    0: "ok",
    1: "invalid_argument",
    2: "io",
    3: "format",
    4: "shape",
    5: "missing",
    6: "out_of_memory",
    7: "unsupported",
    8: "device",
}


class UFormError(Exception):
    def __init__(self, function, status, message):
        super().__init__(f"{function} -> {STATUS_NAMES.get(status, status)} ({status}): {message}")
        self.function = function
        self.status = status
        self.message = message


class Ranges(ctypes.Structure):
    _fields_ = [("minimums", ctypes.POINTER(ctypes.c_float)), ("maximums", ctypes.POINTER(ctypes.c_float)),
                ("width", ctypes.c_size_t)]


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


class Media(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("count", ctypes.c_size_t), ("dtype", ctypes.c_int)]


class Pixels(ctypes.Structure):
    _fields_ = [("rgba", ctypes.POINTER(ctypes.c_uint8)), ("height", ctypes.c_size_t), ("width", ctypes.c_size_t),
                ("stride", ctypes.c_size_t)]


class Image(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("size", ctypes.c_size_t), ("pixels", Pixels), ("name", ctypes.c_char_p)]


class Video(ctypes.Structure):
    _fields_ = [("rgb", ctypes.POINTER(ctypes.c_uint8)), ("ticks", ctypes.POINTER(ctypes.c_int32)), ("frames", ctypes.c_size_t),
                ("height", ctypes.c_size_t), ("width", ctypes.c_size_t), ("fps", ctypes.c_double)]


class AudioClip(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("size", ctypes.c_size_t), ("samples", ctypes.POINTER(ctypes.c_float)),
                ("count", ctypes.c_size_t), ("name", ctypes.c_char_p)]


class VideoClip(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("size", ctypes.c_size_t), ("fps", ctypes.c_double), ("video", Video),
                ("name", ctypes.c_char_p)]


class Grid(ctypes.Structure):
    _fields_ = [
        ("rows", ctypes.c_size_t),
        ("columns", ctypes.c_size_t),
        ("kinds", ctypes.POINTER(ctypes.c_uint8)),
        ("values", ctypes.POINTER(ctypes.c_uint32)),
        ("segments", ctypes.POINTER(ctypes.c_int32)),
        ("positions", ctypes.POINTER(ctypes.c_int32)),
        ("media", Media * 3),
    ]


class OutputsStruct(ctypes.Structure):
    _fields_ = [
        ("hidden", ctypes.POINTER(ctypes.c_float)),
        ("pooled", ctypes.POINTER(ctypes.c_float)),
        ("colbert", ctypes.POINTER(ctypes.c_float)),
        ("logits", ctypes.POINTER(ctypes.c_float)),
        ("segments", ctypes.c_size_t),
    ]


class TrainOptions(ctypes.Structure):
    _fields_ = [
        ("objective", ctypes.c_int),
        ("learning_rate", ctypes.c_double),
        ("warmup_steps", ctypes.c_size_t),
        ("total_steps", ctypes.c_size_t),
        ("beta1", ctypes.c_double),
        ("beta2", ctypes.c_double),
        ("clip", ctypes.c_double),
        ("weight_decay", ctypes.c_double),
        ("tcr_lambda", ctypes.c_double),
        ("lipschitz_lambda", ctypes.c_double),
        ("lipschitz_iterations", ctypes.c_size_t),
        ("device", ctypes.c_int),
        ("rows", ctypes.c_size_t),
        ("anchors", ctypes.c_size_t),
        ("candidates", ctypes.c_size_t),
        ("recompute", ctypes.c_int),
        ("train_only", ctypes.c_char_p),
    ]


class BatchStruct(ctypes.Structure):
    _fields_ = [
        ("grid", Grid),
        ("targets", ctypes.POINTER(ctypes.c_int32)),
        ("anchors", ctypes.POINTER(ctypes.c_uint32)),
        ("anchors_count", ctypes.c_size_t),
        ("candidates", ctypes.POINTER(ctypes.c_uint32)),
        ("candidates_count", ctypes.c_size_t),
        ("labels", ctypes.POINTER(ctypes.c_uint8)),
        ("anchor_weights", ctypes.POINTER(ctypes.c_float)),
    ]


class LossesStruct(ctypes.Structure):
    _fields_ = [
        ("total", ctypes.c_double),
        ("mlm", ctypes.c_double),
        ("siglip", ctypes.c_double),
        ("rerank", ctypes.c_double),
        ("tcr", ctypes.c_double),
        ("lipschitz", ctypes.c_double),
        ("reconstruction", ctypes.c_double),
        ("scored", ctypes.c_size_t),
        ("reconstructed", ctypes.c_size_t),
        ("step", ctypes.c_size_t),
    ]

    def as_dict(self):
        return {name: getattr(self, name) for name, _ in self._fields_}


def _pointer(array, ctype):
    return array.ctypes.data_as(ctypes.POINTER(ctype)) if array is not None else None


def _encoded(data, kept):
    """(pointer, size) of a copy of encoded bytes, kept alive in `kept`."""
    buffer = ctypes.create_string_buffer(bytes(data), len(data))
    kept.append(buffer)
    return ctypes.cast(buffer, ctypes.c_void_p), len(data)


def _media(grid, media):
    """Fills grid.media from {kind: rows} (Float32 copies, returned to be kept alive)."""
    kept = []
    for kind, rows in (media or {}).items():
        rows = np.ascontiguousarray(rows, dtype=np.float32)
        grid.media[kind - 1] = Media(rows.ctypes.data, rows.shape[0], 0)
        kept.append(rows)
    return kept


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
            "uform_model_save_sharded": [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t],
            "uform_model_save_sharded_as": [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int],
            "uform_model_config": [ctypes.c_void_p, ctypes.POINTER(Config)],
            "uform_model_deepen": [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_double)],
            "uform_model_widen": [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_double)],
            "uform_model_set_threads": [ctypes.c_void_p, ctypes.c_size_t],
            "uform_model_set_precision": [ctypes.c_void_p, ctypes.c_int],
            "uform_model_reserve": [ctypes.c_void_p, ctypes.c_size_t],
            "uform_encode": [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t,
                             ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_size_t)],
            "uform_colbert": [ctypes.c_void_p, Text, ctypes.POINTER(ctypes.c_float), ctypes.c_size_t,
                              ctypes.POINTER(ctypes.c_size_t)],
            "uform_colbert_many": [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_float),
                                   ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)],
            "uform_rerank": [ctypes.c_void_p, Text, ctypes.c_void_p, ctypes.c_size_t,
                             ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_size_t)],
            "uform_rerank_symmetric": [ctypes.c_void_p, Text, ctypes.c_void_p, ctypes.c_size_t,
                                       ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_size_t)],
            "uform_rerank_fused": [ctypes.c_void_p, Text, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_double,
                                   ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_size_t)],
            "uform_rerank_gated": [ctypes.c_void_p, Text, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_double, ctypes.c_size_t,
                                   ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_size_t)],
            "uform_maxsim": [ctypes.POINTER(ctypes.c_float), ctypes.c_size_t, ctypes.POINTER(ctypes.c_float), ctypes.c_size_t,
                             ctypes.c_size_t, ctypes.c_int, ctypes.POINTER(ctypes.c_float)],
            "uform_mlm_logits": [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint16), ctypes.c_size_t,
                                 ctypes.POINTER(ctypes.c_float)],
            "uform_forward": [ctypes.c_void_p, ctypes.POINTER(Grid), ctypes.POINTER(OutputsStruct)],
            "uform_device_name": [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t],
            "uform_encode_images": [ctypes.c_void_p, ctypes.POINTER(Image), ctypes.c_size_t, ctypes.c_size_t,
                                    ctypes.POINTER(ctypes.c_float)],
            "uform_audio_frames": [ctypes.POINTER(ctypes.c_float), ctypes.c_size_t, ctypes.c_size_t, ctypes.POINTER(ctypes.c_float),
                                   ctypes.POINTER(ctypes.c_int32), ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)],
            "uform_video_tubes": [ctypes.POINTER(Video), ctypes.c_size_t, ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_int32),
                                  ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t),
                                  ctypes.POINTER(ctypes.c_size_t)],
            "uform_encode_audio": [ctypes.c_void_p, ctypes.POINTER(AudioClip), ctypes.c_size_t, ctypes.c_size_t,
                                   ctypes.POINTER(ctypes.c_float)],
            "uform_encode_video": [ctypes.c_void_p, ctypes.POINTER(VideoClip), ctypes.c_size_t, ctypes.c_size_t,
                                   ctypes.POINTER(ctypes.c_float)],
            "uform_image_decode": [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.POINTER(Pixels)],
            "uform_image_read": [ctypes.c_char_p, ctypes.POINTER(Pixels)],
            "uform_output_precision_parse": [ctypes.c_char_p, ctypes.POINTER(ctypes.c_int)],
            "uform_output_bytes": [ctypes.c_int, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)],
            "uform_calibrate": [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.POINTER(Ranges)],
            "uform_quantize": [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int, ctypes.POINTER(Ranges),
                               ctypes.c_void_p],
            "uform_quantized_scores": [ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                       ctypes.POINTER(ctypes.c_float)],
            "uform_image_patches": [ctypes.POINTER(Pixels), ctypes.c_size_t, ctypes.POINTER(ctypes.c_float), ctypes.c_size_t,
                                    ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)],
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
        self.dll.uform_pixels_free.restype = None
        self.dll.uform_pixels_free.argtypes = [ctypes.POINTER(Pixels)]
        self.dll.uform_image_grid.restype = None
        self.dll.uform_image_grid.argtypes = [ctypes.c_size_t, ctypes.c_size_t, ctypes.c_size_t,
                                              ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]
        self.dll.uform_output_precision_name.restype = ctypes.c_char_p
        self.dll.uform_output_precision_name.argtypes = [ctypes.c_int]
        self.dll.uform_config_parameters.restype = ctypes.c_size_t
        self.dll.uform_config_parameters.argtypes = [ctypes.POINTER(Config)]
        # train.h: registered only where the shared object has it, so older builds still load.
        self.has_trainer = hasattr(self.dll, "uform_trainer_create")
        if self.has_trainer:
            trainer_functions = {
                "uform_trainer_create": [ctypes.c_void_p, ctypes.POINTER(TrainOptions), ctypes.c_size_t,
                                         ctypes.POINTER(ctypes.c_void_p)],
                "uform_trainer_gradients": [ctypes.c_void_p, ctypes.POINTER(BatchStruct), ctypes.POINTER(LossesStruct)],
                "uform_trainer_apply": [ctypes.c_void_p],
                "uform_trainer_step": [ctypes.c_void_p, ctypes.POINTER(BatchStruct), ctypes.POINTER(LossesStruct)],
                "uform_trainer_read": [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_float),
                                       ctypes.c_size_t],
                "uform_trainer_save_state": [ctypes.c_void_p, ctypes.c_char_p],
                "uform_trainer_load_state": [ctypes.c_void_p, ctypes.c_char_p],
            }
            if hasattr(self.dll, "uform_trainer_gradients_world"):  # the world-N reference (docs/training.md)
                for name in ("uform_trainer_gradients_world", "uform_trainer_step_world"):
                    trainer_functions[name] = [ctypes.c_void_p, ctypes.POINTER(BatchStruct), ctypes.c_size_t,
                                               ctypes.POINTER(LossesStruct)]
            for name, arguments in trainer_functions.items():
                function = getattr(self.dll, name)
                function.argtypes = arguments
                function.restype = ctypes.c_int
            self.dll.uform_train_options_default.restype = None
            self.dll.uform_train_options_default.argtypes = [ctypes.POINTER(TrainOptions)]
            self.dll.uform_trainer_close.restype = None
            self.dll.uform_trainer_close.argtypes = [ctypes.c_void_p]
            self.dll.uform_trainer_steps.restype = ctypes.c_size_t
            self.dll.uform_trainer_steps.argtypes = [ctypes.c_void_p]
            self.dll.uform_trainer_learning_rate.restype = ctypes.c_double
            self.dll.uform_trainer_learning_rate.argtypes = [ctypes.c_void_p]

    def last_error(self):
        return self.dll.uform_last_error().decode("utf-8", "replace")

    def status_name(self, status):
        return self.dll.uform_status_name(status).decode()

    def version(self):
        return self.dll.uform_version().decode()

    def device_name(self, device=0):
        """uform_device_name: for the CPU (0), "<model>, N cores; class ...; kernels <table>"."""
        name = ctypes.create_string_buffer(1024)
        self.call("uform_device_name", device, name, len(name))
        return name.value.decode()

    def cpu_kernels(self):
        """The BF16 kernel table this copy of the library runs (kernels.h), chosen at its first use."""
        return self.device_name(0).rsplit("; kernels ", 1)[1]

    def call(self, name, *arguments):
        """Calls a status-returning function; raises UFormError on a non-zero status."""
        status = getattr(self.dll, name)(*arguments)
        if status != 0:
            raise UFormError(name, status, self.last_error())
        return status

    def maxsim(self, query, document, symmetric=False):
        """uform_maxsim over stored ColBERT vectors, float32 [cells, width] each."""
        query = np.ascontiguousarray(query, dtype=np.float32)
        document = np.ascontiguousarray(document, dtype=np.float32)
        score = ctypes.c_float()
        self.call("uform_maxsim", _pointer(query, ctypes.c_float), query.shape[0], _pointer(document, ctypes.c_float),
                  document.shape[0], query.shape[1], int(symmetric), ctypes.byref(score))
        return score.value

    def calibrate(self, embeddings):
        """uform_calibrate: (minimums, maximums), float32 [width] each."""
        embeddings = np.ascontiguousarray(embeddings, dtype=np.float32)
        count, width = embeddings.shape
        minimums, maximums = np.empty(width, np.float32), np.empty(width, np.float32)
        ranges = Ranges(_pointer(minimums, ctypes.c_float), _pointer(maximums, ctypes.c_float), width)
        self.call("uform_calibrate", embeddings.ctypes.data, count, width, ctypes.byref(ranges))
        return minimums, maximums

    def quantize(self, embeddings, precision, minimums=None, maximums=None):
        """uform_quantize: [count, bytes] of the precision's dtype (its name in OUTPUT_PRECISIONS)."""
        embeddings = np.ascontiguousarray(embeddings, dtype=np.float32)
        count, width = embeddings.shape
        code = OUTPUT_PRECISIONS.index(precision)
        size = ctypes.c_size_t()
        self.call("uform_output_bytes", code, width, ctypes.byref(size))
        dtype = OUTPUT_DTYPES[precision]
        output = np.zeros((count, size.value // np.dtype(dtype).itemsize), dtype)
        ranges = None
        if minimums is not None:
            minimums = np.ascontiguousarray(minimums, dtype=np.float32)
            maximums = np.ascontiguousarray(maximums, dtype=np.float32)
            ranges = ctypes.byref(Ranges(_pointer(minimums, ctypes.c_float), _pointer(maximums, ctypes.c_float), len(minimums)))
        self.call("uform_quantize", embeddings.ctypes.data, count, width, code, ranges, output.ctypes.data)
        return output

    def quantized_scores(self, precision, width, query, documents):
        """uform_quantized_scores of one quantized row against [count, bytes] rows."""
        query, documents = np.ascontiguousarray(query), np.ascontiguousarray(documents)
        scores = np.empty(len(documents), np.float32)
        self.call("uform_quantized_scores", OUTPUT_PRECISIONS.index(precision), width, query.ctypes.data,
                  documents.ctypes.data, len(documents), _pointer(scores, ctypes.c_float))
        return scores

    def decode_image(self, data, name="test image"):
        """uform_image_decode: RGBA [height, width, 4] uint8."""
        pixels = Pixels()
        self.call("uform_image_decode", bytes(data), len(data), name.encode(), ctypes.byref(pixels))
        return self._take_pixels(pixels)

    def read_image(self, path):
        pixels = Pixels()
        self.call("uform_image_read", str(path).encode(), ctypes.byref(pixels))
        return self._take_pixels(pixels)

    def _take_pixels(self, pixels):
        try:
            rows = np.ctypeslib.as_array(pixels.rgba, shape=(pixels.height * pixels.stride,))
            return rows.reshape(pixels.height, pixels.stride)[:, : pixels.width * 4].reshape(pixels.height, pixels.width, 4).copy()
        finally:
            self.dll.uform_pixels_free(ctypes.byref(pixels))

    def image_grid(self, height, width, max_patches=0):
        rows, columns = ctypes.c_size_t(), ctypes.c_size_t()
        self.dll.uform_image_grid(height, width, max_patches, ctypes.byref(rows), ctypes.byref(columns))
        return rows.value, columns.value

    def image_patches(self, rgba, max_patches=0):
        """uform_image_patches of RGBA [height, width, 4] uint8: (patches [rows * columns, 1024], rows, columns)."""
        rgba = np.ascontiguousarray(rgba, dtype=np.uint8)
        height, width = rgba.shape[:2]
        pixels = Pixels(rgba.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)), height, width, width * 4)
        capacity = max_patches or 512
        patches = np.full((capacity, 1024), np.nan, dtype=np.float32)
        rows, columns = ctypes.c_size_t(), ctypes.c_size_t()
        self.call("uform_image_patches", ctypes.byref(pixels), max_patches, _pointer(patches, ctypes.c_float), capacity,
                  ctypes.byref(rows), ctypes.byref(columns))
        return patches[: rows.value * columns.value], rows.value, columns.value

    def audio_frames(self, samples, max_frames=0):
        """uform_audio_frames of 16 kHz samples: (frames [cells, 320], positions [cells, 3])."""
        samples = np.ascontiguousarray(samples, dtype=np.float32)
        capacity = 512
        frames = np.full((capacity, 320), np.nan, dtype=np.float32)
        positions = np.zeros((capacity, 3), dtype=np.int32)
        cells = ctypes.c_size_t(0)
        self.call("uform_audio_frames", _pointer(samples, ctypes.c_float), len(samples), max_frames,
                  _pointer(frames, ctypes.c_float), _pointer(positions, ctypes.c_int32), capacity, ctypes.byref(cells))
        return frames[: cells.value], positions[: cells.value]

    def video_tubes(self, rgb, ticks, max_tubes=0):
        """uform_video_tubes of RGB frames [frames, height, width, 3] uint8 with their ticks:
        (tubes [cells, 1536], positions [cells, 3], (steps, rows, columns))."""
        rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
        ticks = np.ascontiguousarray(ticks, dtype=np.int32)
        video = Video(rgb.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)), _pointer(ticks, ctypes.c_int32), rgb.shape[0],
                      rgb.shape[1], rgb.shape[2], 25.0)
        capacity = max_tubes or 1024
        tubes = np.full((capacity, 1536), np.nan, dtype=np.float32)
        positions = np.zeros((capacity, 3), dtype=np.int32)
        steps, rows, columns = ctypes.c_size_t(0), ctypes.c_size_t(0), ctypes.c_size_t(0)
        self.call("uform_video_tubes", ctypes.byref(video), max_tubes, _pointer(tubes, ctypes.c_float),
                  _pointer(positions, ctypes.c_int32), capacity, ctypes.byref(steps), ctypes.byref(rows), ctypes.byref(columns))
        cells = steps.value * rows.value * columns.value
        return tubes[:cells], positions[:cells], (steps.value, rows.value, columns.value)

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

    def train_options(self, **fields):
        """uform_train_options_default, then the given fields (objective=..., warmup_steps=...)."""
        if not self.has_trainer:
            raise AttributeError(f"{self.path} has no uform_trainer_* symbols (the trainer is not built)")
        options = TrainOptions()
        self.dll.uform_train_options_default(ctypes.byref(options))
        for name, value in fields.items():
            if name not in dict(TrainOptions._fields_):
                raise KeyError(name)
            setattr(options, name, value)
        return options


class _Handle:
    """An open C object; close() frees it with `closer` (also on leaving a `with` block)."""

    closer = None

    def __init__(self, library, handle):
        self.library = library
        self.handle = handle

    def __enter__(self):
        return self

    def __exit__(self, *exception):
        self.close()

    def close(self):
        if self.handle:
            getattr(self.library.dll, self.closer)(self.handle)
            self.handle = None

    def _call(self, name, *arguments):
        return self.library.call(name, self.handle, *arguments)


class ModelHandle(_Handle):
    """An open uform_model_t."""

    closer = "uform_model_close"

    def save(self, directory, command=None):
        self._call("uform_model_save", str(directory).encode(), command.encode() if command else None)

    def save_sharded(self, directory, max_shard_bytes):
        self._call("uform_model_save_sharded", str(directory).encode(), max_shard_bytes)

    def config(self):
        config = Config()
        self._call("uform_model_config", ctypes.byref(config))
        return config

    def deepen(self, blocks):
        """uform_model_deepen: (the grown model, the lowest cosine of the check)."""
        grown, cosine = ctypes.c_void_p(), ctypes.c_double()
        self._call("uform_model_deepen", blocks, ctypes.byref(grown), ctypes.byref(cosine))
        return ModelHandle(self.library, grown), cosine.value

    def widen(self):
        """uform_model_widen: (the grown model, the lowest cosine of the check)."""
        grown, cosine = ctypes.c_void_p(), ctypes.c_double()
        self._call("uform_model_widen", ctypes.byref(grown), ctypes.byref(cosine))
        return ModelHandle(self.library, grown), cosine.value

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

    def _encode_items(self, function, struct, items, width, describe):
        """Embeddings [count, width or E] of media items through `function`: describe(i, item,
        kept) makes each one's struct, keeping its buffers alive in `kept`."""
        size = width if width else self.config().widths[-1]
        structs, kept = (struct * len(items))(), []
        for i, item in enumerate(items):
            structs[i] = describe(i, item, kept)
        embeddings = np.zeros((len(items), size), dtype=np.float32)
        self._call(function, structs, len(items), width, _pointer(embeddings, ctypes.c_float))
        return embeddings

    def encode_images(self, images, width=0):
        """Matryoshka embeddings [count, width or E] of images: each encoded bytes, or RGBA
        [height, width, 4] uint8 pixels."""
        def describe(i, image, kept):
            if isinstance(image, (bytes, bytearray)):
                return Image(*_encoded(image, kept), Pixels(), f"image {i}".encode())
            rgba = np.ascontiguousarray(image, dtype=np.uint8)
            kept.append(rgba)
            pixels = Pixels(rgba.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)), rgba.shape[0], rgba.shape[1], rgba.shape[1] * 4)
            return Image(None, 0, pixels, None)
        return self._encode_items("uform_encode_images", Image, images, width, describe)

    def encode_audio(self, clips, width=0):
        """Matryoshka embeddings of audio clips: each encoded bytes, or 16 kHz samples (floats)."""
        def describe(i, clip, kept):
            if isinstance(clip, (bytes, bytearray)):
                return AudioClip(*_encoded(clip, kept), None, 0, f"clip {i}".encode())
            samples = np.ascontiguousarray(clip, dtype=np.float32)
            kept.append(samples)
            return AudioClip(None, 0, _pointer(samples, ctypes.c_float), len(samples), None)
        return self._encode_items("uform_encode_audio", AudioClip, clips, width, describe)

    def encode_video(self, clips, width=0, fps=0.0):
        """Matryoshka embeddings of video clips: each encoded bytes (sampled at `fps`), or a pair
        (RGB frames [frames, height, width, 3] uint8, ticks)."""
        def describe(i, clip, kept):
            if isinstance(clip, (bytes, bytearray)):
                return VideoClip(*_encoded(clip, kept), fps, Video(), f"clip {i}".encode())
            rgb = np.ascontiguousarray(clip[0], dtype=np.uint8)
            ticks = np.ascontiguousarray(clip[1], dtype=np.int32)
            kept += [rgb, ticks]
            video = Video(rgb.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)), _pointer(ticks, ctypes.c_int32), rgb.shape[0],
                          rgb.shape[1], rgb.shape[2], 25.0)
            return VideoClip(None, 0, 0.0, video, None)
        return self._encode_items("uform_encode_video", VideoClip, clips, width, describe)

    def colbert(self, text, capacity=None):
        config = self.config()
        capacity = len(text) if capacity is None else capacity
        vectors = np.zeros((max(capacity, 1), config.colbert_width), dtype=np.float32)
        cells = ctypes.c_size_t(0)
        item, buffers = _text(text)
        self._call("uform_colbert", item, _pointer(vectors, ctypes.c_float), capacity, ctypes.byref(cells))
        return vectors[: cells.value]

    def colbert_many(self, texts, capacity=None):
        """uform_colbert_many: each text's ColBERT vectors, a list of [cells, colbert_width] arrays."""
        config = self.config()
        capacity = sum(min(len(text), config.columns) for text in texts) if capacity is None else capacity
        vectors = np.zeros((max(capacity, 1), config.colbert_width), dtype=np.float32)
        offsets = np.zeros(len(texts) + 1, dtype=np.uintp)
        array, buffers = _texts(texts)
        self._call("uform_colbert_many", array, len(texts), _pointer(vectors, ctypes.c_float), capacity,
                   offsets.ctypes.data_as(ctypes.POINTER(ctypes.c_size_t)))
        return [vectors[offsets[i]: offsets[i + 1]] for i in range(len(texts))]

    def rerank(self, query, documents):
        query_item, query_buffers = _text(query)
        array, buffers = _texts(documents)
        scores = np.zeros(max(len(documents), 1), dtype=np.float32)
        truncated = ctypes.c_size_t(0)
        self._call("uform_rerank", query_item, array, len(documents), _pointer(scores, ctypes.c_float), ctypes.byref(truncated))
        return scores[: len(documents)], truncated.value

    def rerank_symmetric(self, query, documents):
        query_item, query_buffers = _text(query)
        array, buffers = _texts(documents)
        scores = np.zeros(max(len(documents), 1), dtype=np.float32)
        truncated = ctypes.c_size_t(0)
        self._call("uform_rerank_symmetric", query_item, array, len(documents), _pointer(scores, ctypes.c_float),
                   ctypes.byref(truncated))
        return scores[: len(documents)], truncated.value

    def rerank_fused(self, query, documents, weight):
        query_item, query_buffers = _text(query)
        array, buffers = _texts(documents)
        scores = np.zeros(max(len(documents), 1), dtype=np.float32)
        truncated = ctypes.c_size_t(0)
        self._call("uform_rerank_fused", query_item, array, len(documents), weight, _pointer(scores, ctypes.c_float),
                   ctypes.byref(truncated))
        return scores[: len(documents)], truncated.value

    def rerank_gated(self, query, documents, weight, gate):
        query_item, query_buffers = _text(query)
        array, buffers = _texts(documents)
        scores = np.zeros(max(len(documents), 1), dtype=np.float32)
        truncated = ctypes.c_size_t(0)
        self._call("uform_rerank_gated", query_item, array, len(documents), weight, gate, _pointer(scores, ctypes.c_float),
                   ctypes.byref(truncated))
        return scores[: len(documents)], truncated.value

    def mlm_logits(self, ids):
        ids = np.ascontiguousarray(ids, dtype=np.uint16)
        logits = np.zeros((len(ids), VOCABULARY), dtype=np.float32)
        self._call("uform_mlm_logits", _pointer(ids, ctypes.c_uint16), len(ids), _pointer(logits, ctypes.c_float))
        return logits

    def trainer(self, options, cells):
        """uform_trainer_create over this model for batches of up to `cells` cells."""
        handle = ctypes.c_void_p()
        self._call("uform_trainer_create", ctypes.byref(options), cells, ctypes.byref(handle))
        return TrainerHandle(self, handle)

    def forward(self, kinds, values, segments, positions, heads=("hidden", "pooled", "colbert", "logits"),
                fill=np.nan, pooled_capacity=None, media=None):
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
        kept = _media(grid, media)
        outputs = OutputsStruct(*(_pointer(buffers[name], ctypes.c_float) for name in shapes), 0)
        self._call("uform_forward", ctypes.byref(grid), ctypes.byref(outputs))
        del kept
        pooled = buffers["pooled"][: outputs.segments] if buffers["pooled"] is not None else None
        return ForwardOutputs(buffers["hidden"], pooled, buffers["colbert"], buffers["logits"], outputs.segments)


# ---------------------------------------------------------------------------------------------
# train.h
# ---------------------------------------------------------------------------------------------


@dataclass
class TrainBatch:
    """A uform_batch_t in NumPy: the grid [rows, columns] (positions [rows, columns, 3]), MLM
    `targets` [rows, columns] (-1 where not scored), and for the pair objectives `anchors`,
    `candidates` (segment indices), `labels` [anchors, candidates] (1 for a positive) and optional
    `anchor_weights` [anchors] (each anchor's row scale in the pair loss, a source's loss_weight)."""
    kinds: np.ndarray
    values: np.ndarray
    segments: np.ndarray
    positions: np.ndarray
    targets: np.ndarray = None
    anchors: np.ndarray = None
    candidates: np.ndarray = None
    labels: np.ndarray = None
    media: dict = None  # media kind (CELL_IMAGE, ...) -> rows [count, width], float32
    anchor_weights: np.ndarray = None

    @property
    def cells(self):
        return int(np.asarray(self.kinds).size)

    def struct(self):
        """(BatchStruct, buffers): the buffers must stay alive while the struct is used."""
        kinds = np.ascontiguousarray(self.kinds, dtype=np.uint8)
        values = np.ascontiguousarray(self.values, dtype=np.uint32)
        segments = np.ascontiguousarray(self.segments, dtype=np.int32)
        positions = np.ascontiguousarray(self.positions, dtype=np.int32)
        rows, columns = kinds.shape
        targets = None if self.targets is None else np.ascontiguousarray(self.targets, dtype=np.int32)
        anchors = None if self.anchors is None else np.ascontiguousarray(self.anchors, dtype=np.uint32)
        candidates = None if self.candidates is None else np.ascontiguousarray(self.candidates, dtype=np.uint32)
        labels = None if self.labels is None else np.ascontiguousarray(self.labels, dtype=np.uint8)
        weights = None if self.anchor_weights is None else np.ascontiguousarray(self.anchor_weights, dtype=np.float32)
        grid = Grid(rows, columns, _pointer(kinds, ctypes.c_uint8), _pointer(values, ctypes.c_uint32),
                    _pointer(segments, ctypes.c_int32), _pointer(positions, ctypes.c_int32))
        media = _media(grid, self.media)
        batch = BatchStruct(grid, _pointer(targets, ctypes.c_int32),
                            _pointer(anchors, ctypes.c_uint32), 0 if anchors is None else anchors.size,
                            _pointer(candidates, ctypes.c_uint32), 0 if candidates is None else candidates.size,
                            _pointer(labels, ctypes.c_uint8), _pointer(weights, ctypes.c_float))
        return batch, (kinds, values, segments, positions, targets, anchors, candidates, labels, weights, media)


class TrainerHandle(_Handle):
    """An open uform_trainer_t. The model it trains must stay open longer."""

    closer = "uform_trainer_close"

    def __init__(self, model, handle):
        super().__init__(model.library, handle)
        self.model = model

    def gradients(self, batch):
        """uform_trainer_gradients: the losses as a dict (total, mlm, siglip, rerank, tcr, lipschitz, scored)."""
        struct, buffers = batch.struct()
        losses = LossesStruct()
        self._call("uform_trainer_gradients", ctypes.byref(struct), ctypes.byref(losses))
        return losses.as_dict()

    def _world(self, name, batches):
        structs = [batch.struct() for batch in batches]
        array = (BatchStruct * max(len(structs), 1))(*[struct for struct, _ in structs])
        losses = LossesStruct()
        self._call(name, array, len(structs), ctypes.byref(losses))
        return losses.as_dict()

    def gradients_world(self, batches):
        """uform_trainer_gradients_world: one batch a rank; the world's losses as a dict."""
        return self._world("uform_trainer_gradients_world", batches)

    def step_world(self, batches):
        """uform_trainer_step_world: the world's gradients, then one Adafactor step."""
        return self._world("uform_trainer_step_world", batches)

    def apply(self):
        self._call("uform_trainer_apply")

    def step(self, batch):
        struct, buffers = batch.struct()
        losses = LossesStruct()
        self._call("uform_trainer_step", ctypes.byref(struct), ctypes.byref(losses))
        return losses.as_dict()

    def steps(self):
        return int(self.library.dll.uform_trainer_steps(self.handle))

    def learning_rate(self):
        return float(self.library.dll.uform_trainer_learning_rate(self.handle))

    def read(self, name, slot, count):
        """uform_trainer_read: `count` floats of one tensor's slot."""
        values = np.zeros(max(count, 1), dtype=np.float32)
        self._call("uform_trainer_read", name.encode(), slot, _pointer(values, ctypes.c_float), count)
        return values[:count]

    def save_state(self, path):
        self._call("uform_trainer_save_state", str(path).encode())

    def load_state(self, path):
        self._call("uform_trainer_load_state", str(path).encode())
