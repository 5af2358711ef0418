#!/usr/bin/env bash
# Sets up a fresh Debian machine and runs the main job: installs the dependencies (apt-get, pip),
# builds the library and the `uform` tool, then embeds and searches demo/ with the shipped model
# (scripts/search_demo.py). `--deps-only` stops after the installs (CI uses it before the tests).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

packages=(build-essential cmake pkg-config git libopenblas-dev libjansson-dev zlib1g-dev libzstd-dev libsnappy-dev
          libpng-dev libjpeg62-turbo-dev libwebp-dev libmicrohttpd-dev python3-dev curl
          libavformat-dev libavcodec-dev libswresample-dev libswscale-dev libavutil-dev ffmpeg espeak-ng
          spin gcc-aarch64-linux-gnu qemu-user)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_=""; [ "$(id -u)" -eq 0 ] || sudo_="sudo"
  $sudo_ apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq "${missing[@]}"
fi
python3 -c "import numpy, safetensors, pytest, matplotlib, pyarrow, PIL, fontTools, openai, scikit_build_core" 2>/dev/null ||
  python3 -m pip install --quiet numpy safetensors pytest matplotlib pyarrow pillow fonttools openai scikit-build-core
# cuDNN's header-only C++ frontend (for the CUDA backend's fused attention): PyPI ships it inside
# its wheel; only the headers are kept, in third_party/ (git-ignored).
frontend=third_party/cudnn-frontend
if command -v nvcc > /dev/null && [ ! -f "$frontend/include/cudnn_frontend.h" ]; then
  wheels="$(mktemp -d)"
  if python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.11 \
       --platform manylinux_2_28_x86_64 -d "$wheels" nvidia-cudnn-frontend==1.16.0; then
    mkdir -p "$frontend" && python3 -m zipfile -e "$wheels"/nvidia_cudnn_frontend-*.whl "$wheels/unpacked"
    cp -r "$wheels/unpacked/include" "$frontend/"
  else
    echo "setup: could not fetch cuDNN's frontend; the CUDA backend builds without cuDNN attention"
  fi
  rm -rf "$wheels"
fi
# nvJPEG and NPP (the CUDA backend's optional GPU JPEG decoding): headers and libraries from their PyPI
# wheels into site-packages/nvidia/cu13, where CMake also looks; the backend builds without them.
if command -v nvcc > /dev/null && ! python3 -c "import site, os, sys; sys.exit(not any(os.path.exists(os.path.join(p, 'nvidia/cu13/include/nvjpeg.h')) for p in site.getsitepackages()))"; then
  python3 -m pip install --quiet --no-deps "nvidia-nvjpeg>=13,<14" "nvidia-npp>=13,<14" ||
    echo "setup: could not install nvJPEG and NPP; the CUDA backend builds without GPU JPEG decoding"
fi
# NumKong's E4M3 kernels (uform_bench_gemm measures them beside ours, test_numkong checks them): the
# headers and license of its PyPI source distribution, pinned by hash, in third_party/ (git-ignored);
# without them both say so and everything else builds as before.
numkong_version=7.8.6
numkong_sha256=c0c930acdb0f1c3839ab43aaa15368b9266c95a08abf20d51d335abc4ff6db09
numkong=third_party/numkong
if [ "$(cat "$numkong/VERSION" 2>/dev/null)" != "$numkong_version" ]; then
  sdist="$(mktemp -d)"
  if python3 -m pip download --quiet --no-deps --no-binary :all: --require-hashes -d "$sdist" \
       -r <(echo "numkong==$numkong_version --hash=sha256:$numkong_sha256") &&
     tar -xzf "$sdist/numkong-$numkong_version.tar.gz" -C "$sdist"; then
    rm -rf "$numkong" && mkdir -p "$numkong"
    cp -r "$sdist/numkong-$numkong_version/include" "$sdist/numkong-$numkong_version/LICENSE" "$numkong/"
    echo "$numkong_version" > "$numkong/VERSION"
  else
    echo "setup: could not fetch NumKong $numkong_version; the E4M3 benchmark and test_numkong run without it"
  fi
  rm -rf "$sdist"
fi
[ "${1:-}" = "--deps-only" ] && exit 0

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build build -j "$(nproc)"

# The main job: the shipped model (models/default, issue 16's lineage) embeds and searches the small
# real corpus of demo/ (held-out pairs in 21 languages, descriptions, code, pictures) and prints a few
# queries with their top results and its recall beside TF-IDF. The CPU training demo of earlier
# versions is an example in docs/training.md now.
python3 scripts/search_demo.py --model models/default
echo "setup: done. \`pip install ./python\` packages models/default as uform.Model()'s default (docs/python.md)"
