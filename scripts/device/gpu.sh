#!/usr/bin/env bash
# Runs on the GPU machine (the `device` tool): builds the CUDA backend alone (the image has no
# Jansson, so the CPU library is left out) and runs the kernel contract suite, writing its report
# and JSON into $OUT. Usage there: bash scripts/device/gpu.sh
set -uo pipefail
out="${OUT:-/tmp/uform-out}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
cmake -S . -B build-gpu -DUFORM_CPU=OFF -DUFORM_WERROR=ON -DCMAKE_BUILD_TYPE=Release > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build build-gpu -j 16 > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
./build-gpu/uform_contract --json "$out/contract.json" | tee "$out/contract.txt"
