# conftest.py: finds the build (env UFORM_BUILD, default build/ at the repository root) and makes the small
# checkpoints the suites share. A missing library, planted control or CLI fails loudly; nothing
# is skipped silently.

import ctypes
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import checkpoint_files  # noqa: E402
from uform_ctypes import Library  # noqa: E402

BUILD = pathlib.Path(os.environ.get("UFORM_BUILD", HERE.parent.parent / "build"))
PLANTS = ("rope_axis", "mask_leak", "pool_padding")
TRAIN_PLANTS = ("rmsnorm_backward", "transposed_gradient")  # planted trainer bugs (test_gradients.py)
IMAGE_PLANTS = ("patch_transposed", "rope_axis")  # planted bugs that only images show (test_images.py)
AV_PLANTS = ("tube_frames_swapped", "frame_offset")  # planted frontend bugs that audio and video show (test_audio_video.py)
CPU_KERNELS = ("amx", "avx512bf16", "avx512vnni", "avx512f", "avx2", "generic")  # the kernel tables (src/cpu/kernels.h)
COLUMNS = 96  # a short row keeps the suite fast; long enough for the packed grids (>= 52)


def built(name):
    path = BUILD / name
    if not path.exists():
        pytest.fail(f"{path} is missing: build it with `cmake -S . -B build && cmake --build build` "
                    f"or point UFORM_BUILD at a build directory", pytrace=False)
    return path


@pytest.fixture(scope="session")
def library():
    return Library(built("libuform.so"))


@pytest.fixture(scope="session", params=PLANTS)
def plant(request):
    return request.param, Library(built(f"libuform_plant_{request.param}.so"))


def cpu_flags():
    """The ISA flags /proc/cpuinfo reports, read apart from the library's own check."""
    for line in open("/proc/cpuinfo"):
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def amx_granted():
    """Whether Linux grants this process the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM, XTILEDATA)."""
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.syscall(158, 0x1023, 18) == 0  # SYS_arch_prctl on x86-64


def cpu_runs(kernels):
    """Whether this CPU runs a kernel table, by the flags each one needs (kernels.c)."""
    needs = {"amx": {"amx_bf16", "amx_tile", "avx512_bf16", "avx512bw", "avx512vl", "avx512_vnni"},
             "avx512bf16": {"avx512_bf16", "avx512bw", "avx512vl", "avx512_vnni"},
             "avx512vnni": {"avx512_vnni", "avx512bw", "avx512vl"}, "avx512f": {"avx512f"}, "avx2": {"avx2", "fma"},
             "generic": set()}[kernels]
    return needs <= cpu_flags() and (kernels != "amx" or amx_granted())


def pinned(path, kernels, directory):
    """A copy of the library at `path` that runs one kernel table: a file of its own is a library of
    its own in this process, with its own once-only choice (kernels.c), made here under UFORM_CPU.
    Skips, saying so, where this CPU cannot run the table."""
    if not cpu_runs(kernels):
        pytest.skip(f"this CPU cannot run the {kernels} kernels (flags {sorted(cpu_flags() & {'avx2', 'fma', 'avx512f', 'avx512_vnni', 'avx512_bf16', 'amx_bf16', 'amx_tile'})})")
    copy = pathlib.Path(directory) / f"{pathlib.Path(path).stem}_{kernels}.so"
    shutil.copyfile(path, copy)
    saved = os.environ.get("UFORM_CPU")
    os.environ["UFORM_CPU"] = kernels
    try:
        library = Library(copy)
        chosen = library.cpu_kernels()  # the choice is made at this first use
    finally:
        if saved is None:
            del os.environ["UFORM_CPU"]
        else:
            os.environ["UFORM_CPU"] = saved
    assert chosen == kernels, f"UFORM_CPU={kernels} ran {chosen}"
    return library


@pytest.fixture(scope="session", params=CPU_KERNELS)
def cpu_library(request, tmp_path_factory):
    """The library pinned to each kernel table in turn."""
    return request.param, pinned(built("libuform.so"), request.param, tmp_path_factory.mktemp(f"cpu_{request.param}"))


@pytest.fixture(scope="session", params=CPU_KERNELS)
def cpu_plant(request, tmp_path_factory):
    """The planted control whose products skip the last depth pair, pinned to each kernel table."""
    return request.param, pinned(built("libuform_plant_gemm_last_pair.so"), request.param,
                                 tmp_path_factory.mktemp(f"cpu_plant_{request.param}"))


# The narrow precisions' controls. E4M3: a code decoded with bias 8; an input row's scale dropped. int8:
# the inputs' +128 left in the sums (the correction dropped at packing); a weight row's scale dropped
# after it made the codes; the weights' codes rounded toward zero instead of to nearest; a key's scale
# dropped from attention's int8 scores.
NARROW_PLANTS = {"e4m3": ("e4m3_bias", "e4m3_scale"),
                 "int8": ("int8_correction", "int8_weight_scale", "int8_truncate", "int8_key_scale")}


@pytest.fixture(scope="session", params=[(precision, plant, kernels) for precision, plants in NARROW_PLANTS.items()
                                         for plant in plants for kernels in CPU_KERNELS],
                ids=lambda triple: f"{triple[1]}-{triple[2]}")
def narrow_plant(request, tmp_path_factory):
    """Each E4M3 and int8 control, pinned to each kernel table (each table has its own widening of the
    codes and its own int8 product): (precision, plant, kernels, library)."""
    precision, plant, kernels = request.param
    return precision, plant, kernels, pinned(built(f"libuform_plant_{plant}.so"), kernels,
                                             tmp_path_factory.mktemp(f"{plant}_{kernels}"))


@pytest.fixture(scope="session")
def cli():
    return built("uform")


def run_cli(cli, *arguments, stdin=""):
    """Runs the `uform` binary with text input; a run killed by a signal fails the test."""
    run = subprocess.run([str(cli), *map(str, arguments)], input=stdin, capture_output=True, text=True, timeout=120)
    assert run.returncode >= 0, f"uform {' '.join(map(str, arguments))} was killed by signal {-run.returncode}"
    return run


def init_checkpoint(library, directory, tier, seed, columns=COLUMNS):
    """A model made by uform_model_init with a short row, saved by uform_model_save."""
    config = library.config_from_tier(tier)
    config.columns = columns
    with library.init(config, seed) as model:
        model.save(directory, f"pytest init {tier} seed {seed}")
    return directory


def python_checkpoint(directory, width, depth, seed, attention_gain, frontends=()):
    """A model written by the safetensors package: random norm scales and pool query, and q, k
    scaled by `attention_gain` so attention is far from uniform and every rotary axis counts."""
    config = checkpoint_files.small_config(width, depth, COLUMNS)
    tensors = checkpoint_files.random_tensors(config, seed, attention_gain, frontends)
    checkpoint_files.write_checkpoint(directory, config, tensors)
    return directory


@pytest.fixture(scope="session")
def init_model(library, tmp_path_factory):
    """128x2 from uform_model_init (seed 7)."""
    return init_checkpoint(library, tmp_path_factory.mktemp("init_128x2"), "128x2", 7)


@pytest.fixture(scope="session")
def python_model(tmp_path_factory):
    """192x3 written from Python with sharp attention (seed 11)."""
    return python_checkpoint(tmp_path_factory.mktemp("python_192x3"), 192, 3, 11, attention_gain=2.0)


@pytest.fixture(scope="session")
def vision_model(tmp_path_factory):
    """128x2 with the vision frontend, written from Python with sharp attention (seed 19)."""
    return python_checkpoint(tmp_path_factory.mktemp("python_vision_128x2"), 128, 2, 19, attention_gain=2.0,
                             frontends=("vision",))


@pytest.fixture(scope="session")
def av_model(tmp_path_factory):
    """128x2 with the vision, video and audio frontends, written from Python with sharp attention (seed 29)."""
    return python_checkpoint(tmp_path_factory.mktemp("python_av_128x2"), 128, 2, 29, attention_gain=2.0,
                             frontends=("vision", "video", "audio"))


@pytest.fixture(scope="session", params=["init_model", "python_model"])
def any_model(request):
    return request.getfixturevalue(request.param)


@pytest.fixture(scope="session", params=IMAGE_PLANTS)
def image_plant(request):
    return request.param, Library(built(f"libuform_plant_{request.param}.so"))


@pytest.fixture(scope="session", params=TRAIN_PLANTS)
def train_plant(request):
    return request.param, Library(built(f"libuform_plant_{request.param}.so"))


@pytest.fixture(scope="session")
def train_checkpoints(library, tmp_path_factory):
    """The training suites' small checkpoints (train_contract.CHECKPOINTS), by key."""
    import train_contract
    return {key: str(train_contract.make_checkpoint(library, tmp_path_factory.mktemp(f"train_{key}"), key))
            for key in train_contract.CHECKPOINTS}


@pytest.fixture(scope="session")
def build_dir():
    for tool in ("uform_base", "uform_eval"):
        built(tool)
    return BUILD
