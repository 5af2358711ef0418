# isolated.py: runs one call into the library in a child Python process, so that a crash on a bad
# input (which the ABI promises never happens) fails one test with its signal instead of taking
# the whole suite down. The child prints the status and uform_last_error() as JSON.

import json
import pathlib
import subprocess
import sys
from dataclasses import dataclass

HERE = pathlib.Path(__file__).resolve().parent

_CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import ctypes
import numpy as np
from uform_ctypes import *
from uform_ctypes import _text, _texts
def row(kind=0, value=65, segment=0, columns=16, rows=1):
    # A grid of `rows` rows filled with one kind of cell: (kinds, values, segments, positions).
    shape = (rows, columns)
    return np.full(shape, kind), np.full(shape, value), np.full(shape, segment), np.zeros(shape + (3,))
library = Library(sys.argv[2])
model = library.open(sys.argv[3]) if sys.argv[3] else None
try:
    exec(sys.argv[4])
    print(json.dumps({"status": 0, "message": ""}))
except UFormError as error:
    print(json.dumps({"status": error.status, "message": error.message}))
"""


@dataclass
class Outcome:
    status: int  # None when the child died
    message: str
    returncode: int
    stderr: str

    def __str__(self):
        return f"status {self.status}, message {self.message!r}, exit {self.returncode}, stderr {self.stderr[-500:]!r}"


def assert_refused(case, outcome, statuses, words):
    """The call failed cleanly: no crash, a status in `statuses`, and a message naming the problem
    (one of `words`, lower case)."""
    assert outcome.status is not None, f"{case}: the library crashed: {outcome}"
    assert outcome.status != 0, f"{case}: the call was accepted"
    message = outcome.message.lower()
    assert message.strip(), f"{case}: no message"
    assert any(word in message for word in words), f"{case}: the message does not say the problem ({words}): {outcome.message!r}"
    assert outcome.status in statuses, f"{case}: status {outcome.status} not in {statuses}: {outcome.message!r}"


def run(library_path, code, model_directory=None, timeout=60):
    """Runs `code` with `library` (a Library), `model` (opened from model_directory, or None) and
    `row(kind, value, segment, columns, rows)` to build a uniform grid."""
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, str(HERE), str(library_path), str(model_directory or ""), code],
        capture_output=True, text=True, timeout=timeout)
    if child.returncode != 0 or not child.stdout.strip():
        return Outcome(None, "", child.returncode, child.stderr)
    result = json.loads(child.stdout.strip().splitlines()[-1])
    return Outcome(result["status"], result["message"], child.returncode, child.stderr)
