#!/usr/bin/env bash
# Sets up a fresh Debian machine and runs the main job: installs the dependencies (apt-get, pip),
# builds the library and the `uform` tool, creates a tiny checkpoint and encodes and reranks
# sample texts with it. `--deps-only` stops after the installs (CI uses it before the tests).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

packages=(build-essential cmake pkg-config git libopenblas-dev libjansson-dev zlib1g-dev libzstd-dev libsnappy-dev
          libpng-dev libjpeg62-turbo-dev libwebp-dev libmicrohttpd-dev python3-dev curl)
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
[ "${1:-}" = "--deps-only" ] && exit 0

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build build -j "$(nproc)"

# The embedded default corpus: English <-> translation pairs from the machine's gettext catalogues.
[ -f data/gettext/train.jsonl ] || python3 scripts/data/gettext_pairs.py
steps="${UFORM_DEMO_STEPS:-1000}"
run="checkpoints/demo-embedder"
dev="data/gettext/dev.jsonl"
untrained="checkpoints/demo-untrained"
rm -rf "$untrained" "$run"
./build/uform init --tier 128x2 --seed 0 --output "$untrained" 2> /dev/null
echo "setup: training a 128x2 embedder (Matryoshka SigLIP) for $steps steps on the CPU"
./build/uform_base --mixture mixtures/demo_contrastive.json --tier 128x2 --rows 8 --steps "$steps" \
  --learning-rate 2e-3 --seed 0 --output "$run"
python3 scripts/plot_loss.py "$run/log.jsonl" -o "$run/loss.png" > /dev/null || true
./build/uform_eval "$untrained" --pairs "$dev" --limit 2000 --quiet --json "$untrained/eval.json" > /dev/null
./build/uform_eval "$run" --pairs "$dev" --limit 2000 --quiet --json "$run/eval.json" > /dev/null
python3 - "$untrained/eval.json" "$run/eval.json" <<'PYTHON'
import json, sys
untrained, trained = (json.load(open(path)) for path in sys.argv[1:3])
def row(report, width):
    return next(r for r in report["widths"] if r["width"] == width and r["direction"] == "query->positive")
print(f"\nheld-out Recall@1, English -> translation, {trained['count']} dev pairs (data/gettext/dev.jsonl):\n")
print("| width | chance | untrained | trained |\n|---|---|---|---|")
for width in sorted({r["width"] for r in trained["widths"]}):
    print(f"| {width} | {trained['chance']['recall@1']:.4f} | {row(untrained, width)['recall@1']:.4f} | {row(trained, width)['recall@1']:.4f} |")
PYTHON
checkpoint="checkpoints/demo-embedder/latest"
samples="scripts/samples.txt"
echo
echo "setup: MaxSim of each sample against the query 'a cat sat on the mat' (untrained rerank head):"
./build/uform rerank --model "$checkpoint" --query "a cat sat on the mat" < "$samples" | paste - "$samples"
echo "setup: done. Loss curve: $run/loss.png; checkpoint: $checkpoint"
echo "setup: \`pip install ./python\` now packages this checkpoint as uform.Model()'s default (docs/python.md)"
