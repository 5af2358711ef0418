"""_default.py: where uform.Model() with no path finds its model: the folder named by the
environment variable UFORM_MODEL, else the checkpoint packaged at build time (uform/default/: the
repository's shipped models/default, sharded), else none, and the extension makes the untrained
128x2 of seed 0, with a warning."""

import os
import pathlib

PACKAGED = pathlib.Path(__file__).resolve().parent / "default"
UNTRAINED = "untrained 128x2, seed 0 (no trained default packaged)"


def resolve():
    """(folder or None, origin): the model Model() opens and where it came from."""
    named = os.environ.get("UFORM_MODEL")
    if named:
        return named, "UFORM_MODEL"
    if (PACKAGED / "model.safetensors").is_file() or (PACKAGED / "model.safetensors.index.json").is_file():
        return str(PACKAGED), "packaged default"
    return None, UNTRAINED
