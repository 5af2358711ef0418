"""uform: tokenizer-free multimodal embeddings and MaxSim reranking, over libuform's C ABI.

    import uform
    with uform.Model() as model:                  # the packaged default; or Model("checkpoints/x")
        vectors = model.encode(["a cat", "a dog"])  # float32, (2, widest width), L2-normalized
        ranked = model.rerank("cat", ["the cat sat", "stocks fell"])

Model, Error, calibrate and maxsim_vectors come from the C extension (_uform); docs/python.md is the guide.
"""

from ._uform import Error, Model, calibrate, library_version, maxsim_vectors

__version__ = library_version
__all__ = ["Error", "Model", "calibrate", "library_version", "maxsim_vectors", "__version__"]
