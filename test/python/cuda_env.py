"""Whether a build has the CUDA backend and the machine a GPU: the GPU tests' common switch."""
import subprocess


def cuda_build(build):
    """Whether the build in `build` (a folder with CMakeCache.txt) compiled the CUDA backend."""
    cache = (build / "CMakeCache.txt").read_text() if (build / "CMakeCache.txt").exists() else ""
    compiler = [line.split("=", 1)[1] for line in cache.splitlines() if line.startswith("CMAKE_CUDA_COMPILER:")]
    return "UFORM_CUDA:BOOL=ON" in cache and bool(compiler) and not compiler[0].endswith("NOTFOUND")


def gpu_present():
    """Whether nvidia-smi lists a GPU."""
    try:
        run = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return run.returncode == 0 and "GPU" in run.stdout
