# test_exports.py: libuform.so exports the C ABI and nothing else: every function that include/uform/
# marks UFORM_API, and no other symbol (internal functions stay hidden, so a binding can only reach
# what the headers promise). The same check must reject a list with one internal name planted in it.

import pathlib
import re
import subprocess

from conftest import built

HEADERS = pathlib.Path(__file__).resolve().parent.parent.parent / "include" / "uform"


def declared():
    names = set()
    for header in HEADERS.glob("*.h"):
        names |= set(re.findall(r"^UFORM_API\b[^(;]*?\b(uform_\w+)\(", header.read_text(), re.MULTILINE))
    return names


def exported(library):
    listing = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True, check=True)
    return {line.split()[-1] for line in listing.stdout.splitlines() if len(line.split()) == 3 and line.split()[1] in "TDBRVW"}


def mismatch(exports, declarations):
    """Exports the headers do not declare, and declarations the library does not export."""
    return sorted(exports - declarations), sorted(declarations - exports)


def test_exports_are_the_headers():
    declarations = declared()
    assert len(declarations) > 40, declarations  # the headers were read
    extra, missing = mismatch(exported(built("libuform.so")), declarations)
    assert not extra, f"libuform.so exports symbols no header declares: {extra}"
    assert not missing, f"libuform.so does not export: {missing}"


def test_an_internal_export_is_caught():
    declarations = declared()
    extra, missing = mismatch(declarations | {"uform_grid_compact"}, declarations)
    assert extra == ["uform_grid_compact"] and not missing
