#!/usr/bin/env bash
# Sets up a fresh Debian machine and runs the main job: installs the dependencies (apt-get, pip),
# builds the library and the `uform` tool, creates a tiny checkpoint and encodes and reranks
# sample texts with it. `--deps-only` stops after the installs (CI uses it before the tests).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

packages=(build-essential cmake pkg-config git libopenblas-dev libjansson-dev)
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
python3 -c "import numpy, safetensors, pytest, matplotlib" 2>/dev/null ||
  python3 -m pip install --quiet numpy safetensors pytest matplotlib
[ "${1:-}" = "--deps-only" ] && exit 0

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build build -j "$(nproc)"

checkpoint="checkpoints/tiny-random"
[ -f "$checkpoint/model.safetensors" ] || ./build/uform init --tier tiny --seed 0 --output "$checkpoint"
./build/uform info --model "$checkpoint"
samples="scripts/samples.txt"
echo "setup: embeddings (first 6 of 512 numbers) of $samples:"
./build/uform encode --model "$checkpoint" < "$samples" | cut -c1-90
echo "setup: MaxSim of each sample against the query 'a cat sat on the mat':"
./build/uform rerank --model "$checkpoint" --query "a cat sat on the mat" < "$samples" | paste - "$samples"
echo "setup: done. The weights are random until a trained checkpoint replaces them (docs/roadmap.md)."
