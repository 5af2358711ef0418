# test_cpu_kernels.py: the one place a BF16 kernel table is chosen (src/cpu/kernels.c). By default
# the best this CPU runs (amx > avx512bf16 > avx512vnni > avx512f > avx2 > generic, with avx512vnni and
# avx512f, whose BF16 products are FMA's, ahead of avx512bf16 on Intel, where they measured faster; by /proc/cpuinfo's flags and vendor and, for amx,
# the OS's grant of the tile state, read here apart from the library's own check); UFORM_CPU=<name> pins any table the CPU runs and is reported
# by uform_device_name; a name the build lacks is refused with a note on stderr. The forward checks
# of each table are in test_reference.py.

import os
import subprocess
import sys

import pytest

from conftest import BUILD, CPU_KERNELS, HERE, built, cpu_runs, pinned

_CHILD = "import sys; sys.path.insert(0, sys.argv[1]); from uform_ctypes import Library; print(Library(sys.argv[2]).device_name())"


def device_name_under(value):
    """uform_device_name(cpu) and stderr of a fresh process with UFORM_CPU=value (None: unset)."""
    env = {k: v for k, v in os.environ.items() if k != "UFORM_CPU"}
    if value is not None:
        env["UFORM_CPU"] = value
    child = subprocess.run([sys.executable, "-c", _CHILD, str(HERE), str(built("libuform.so"))], env=env,
                           capture_output=True, text=True, timeout=60, check=True)
    return child.stdout.strip(), child.stderr


def intel():
    try:
        return any(line.split(":", 1)[1].strip() == "GenuineIntel" for line in open("/proc/cpuinfo") if line.startswith("vendor_id"))
    except OSError:
        return False


def best():
    order = list(CPU_KERNELS)
    if intel() and cpu_runs("avx512f"):
        order.remove("avx512bf16")
    return next(kernels for kernels in order if cpu_runs(kernels))


def test_default_is_the_best_table_this_cpu_runs():
    name, note = device_name_under(None)
    assert name.endswith(f"; kernels {best()}"), name
    assert "; class x86-64" in name or "not x86" in name, name
    assert not note, note


@pytest.mark.parametrize("kernels", CPU_KERNELS)
def test_each_table_is_pinned_by_name(kernels, tmp_path):
    pinned(built("libuform.so"), kernels, tmp_path)  # asserts the choice, or skips saying why


def test_an_unknown_name_is_refused_with_a_note():
    name, note = device_name_under("avx9000")
    assert name.endswith(f"; kernels {best()}"), name
    assert "UFORM_CPU=avx9000" in note and "no kernel table" in note, note


@pytest.mark.parametrize("flags, message", [(["--only", "avx2"], "--only is not a flag"), (["--seconds"], "--seconds needs a value"),
                                           (["--width", "64,0"], "--width 64,0"), (["--seconds", "0"], "--seconds 0")])
def test_the_gemm_benchmark_refuses_what_it_would_ignore(flags, message):
    """A misspelled flag once ran every table silently; each bad flag now stops it, named (the valid run is below)."""
    run = subprocess.run([str(BUILD / "uform_bench_gemm"), *flags], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and message in run.stderr and not run.stdout, (run.returncode, run.stderr)


def test_the_gemm_benchmark_runs_every_table_this_cpu_runs():
    table = subprocess.run([str(BUILD / "uform_bench_gemm"), "--width", "64", "--seconds", "0.01"], capture_output=True,
                           text=True, timeout=120, check=True).stdout
    header = next(line for line in table.splitlines() if line.startswith("| product"))
    assert [kernels for kernels in CPU_KERNELS if f" {kernels} GFLOP/s" in header] == \
        [kernels for kernels in CPU_KERNELS if cpu_runs(kernels)], header
