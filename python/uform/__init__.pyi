# __init__.pyi: the types of the uform package (its extension, _uform, is C).
import os
from typing import Any, Literal, Mapping, Sequence, TypedDict, Union, overload

import numpy as np
import numpy.typing as npt

__version__: str
library_version: str

ImageInput = Union[bytes, Mapping[str, Union[str, bytes, os.PathLike[str]]], npt.NDArray[np.uint8]]
Input = Union[str, ImageInput]
Calibration = Union[str, bytes, os.PathLike[str], Mapping[str, Any]]

class Error(RuntimeError):
    """A failure of the UForm library; the message is the C library's, `status` its status name."""
    status: str

class RerankResult(TypedDict):
    index: int
    score: float
    text: str

class Ranges(TypedDict):
    width: int
    count: int
    minimums: npt.NDArray[np.float32]
    maximums: npt.NDArray[np.float32]

class Model:
    """A UForm encoder over one checkpoint; thread-safe (a context per concurrent call)."""
    def __init__(
        self,
        path: Union[str, os.PathLike[str], None] = None,
        *,
        device: Literal["cpu", "cuda"] = "cpu",
        precision: Literal["bf16", "e4m3", "int8", "f32"] = "bf16",
        threads: int = 0,
    ) -> None: ...
    def encode(
        self,
        inputs: Union[Input, Sequence[Input]],
        *,
        batch_size: int = 256,
        width: Union[int, None] = None,
        normalize: bool = True,
        output_precision: Literal["float32", "int8", "uint8", "binary", "ubinary"] = "float32",
        calibration: Union[Calibration, None] = None,
        show_progress: bool = False,
    ) -> npt.NDArray[Any]:
        """A 2D array, one row per input: float32 (count, width), int8/uint8 (count, width), or
        binary/ubinary int8/uint8 (count, (width + 7) // 8)."""
    def maxsim(self, query: str, documents: Sequence[str], *, symmetric: bool = False) -> npt.NDArray[np.float32]: ...
    @overload
    def colbert(self, text: str) -> npt.NDArray[np.float32]: ...
    @overload
    def colbert(self, text: Sequence[str]) -> list[npt.NDArray[np.float32]]: ...
    def colbert(self, text: Union[str, Sequence[str]]) -> Any:
        """Per-byte ColBERT vectors, float32 (cells, colbert_width), rows L2-normalized; a list of them for a list."""
    def rerank(self, query: str, documents: Sequence[str], top_k: Union[int, None] = None, *,
               fuse: Union[float, None] = None) -> list[RerankResult]: ...
    @property
    def info(self) -> dict[str, Any]: ...
    @property
    def closed(self) -> bool: ...
    def close(self) -> None: ...
    def __enter__(self) -> "Model": ...
    def __exit__(self, *exc: object) -> None: ...

def calibrate(embeddings: npt.ArrayLike) -> Ranges: ...
def maxsim_vectors(query: npt.ArrayLike, document: npt.ArrayLike, *, symmetric: bool = False) -> float: ...
