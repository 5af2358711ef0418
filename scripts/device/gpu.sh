#!/usr/bin/env bash
# Runs on the GPU machine (the `device` tool): builds the CUDA backend alone (the image has no
# Jansson, so the CPU library is left out), runs the kernel contract suite, then the training-step
# benchmark beside the PyTorch peer when its copy is present (third_party/peers, carried). Reports
# and JSON go to $OUT.  Usage there: bash scripts/device/gpu.sh [contract|bench|all] [bench flags...]
set -uo pipefail
what="${1:-all}"; shift || true
out="${OUT:-/tmp/uform-out}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
cmake -S . -B build-gpu -DUFORM_CPU=OFF -DUFORM_WERROR=ON -DCMAKE_BUILD_TYPE=Release > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build build-gpu -j 16 > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
status=0
if [ "$what" = contract ] || [ "$what" = all ]; then
  ./build-gpu/uform_contract --json "$out/contract.json" | tee "$out/contract.txt"
  status=${PIPESTATUS[0]}
  if [ "$status" -ne 0 ] && command -v compute-sanitizer > /dev/null; then
    compute-sanitizer --print-limit 5 ./build-gpu/uform_contract 2>&1 | grep -v "^| " | head -40
  fi
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  peer=third_party/peers/torch_mlm_step.py
  if [ -f "$peer" ]; then python3 bench/train_cuda.py --build build-gpu --peer "$peer" --out "$out" "$@"
  else python3 bench/train_cuda.py --build build-gpu --no-peer --out "$out" "$@"; fi
fi
exit "$status"
