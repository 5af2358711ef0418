#!/usr/bin/env bash
# The AArch64 kernel table (src/cpu/kernels_neon.c) built with Debian's cross compiler
# (gcc-aarch64-linux-gnu) and run under qemu-user: test_kernels over the neon and generic tables
# against its float64 references, then the same program with every product skipping its last depth
# pair (UFORM_PLANT_GEMM_LAST_PAIR), which must fail. Only the kernels and what test_kernels calls are
# built: the rest of the library is portable C over x86-64 dependencies. Skips (exit 0, saying so)
# where the cross compiler or qemu is missing; scripts/setup.sh installs both.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
cc=aarch64-linux-gnu-gcc
qemu=qemu-aarch64
if ! command -v "$cc" > /dev/null || ! command -v "$qemu" > /dev/null; then
  echo "cross_aarch64: skipped: no $cc or no $qemu (apt-get install gcc-aarch64-linux-gnu qemu-user)"
  exit 0
fi
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
sources=(src/core/numeric.c src/core/status.c src/cpu/ops.c src/cpu/kernels.c src/cpu/kernels_neon.c test/c/test_kernels.c)
flags=(-std=c11 -O2 -Wall -Wextra -Wshadow -Wstrict-prototypes -Wno-unused-parameter -Werror -D_POSIX_C_SOURCE=200809L
       -DUFORM_HAVE_NEON -Isrc -Iinclude -Itest/c)
"$cc" "${flags[@]}" "${sources[@]}" -lm -lpthread -o "$out/test_kernels" || { echo "cross_aarch64: the build failed"; exit 1; }
"$cc" "${flags[@]}" -DUFORM_PLANT_GEMM_LAST_PAIR "${sources[@]}" -lm -lpthread -o "$out/test_kernels_planted" ||
  { echo "cross_aarch64: the planted build failed"; exit 1; }
sysroot=/usr/aarch64-linux-gnu
"$qemu" -L "$sysroot" "$out/test_kernels" > "$out/kernels.txt" 2>&1
status=$?
grep -E "^kernels neon|passed" "$out/kernels.txt"
[ "$status" -eq 0 ] || { echo "cross_aarch64: test_kernels failed on AArch64"; grep -i fail "$out/kernels.txt" | head -20; exit 1; }
grep -q "^kernels neon: products" "$out/kernels.txt" || { echo "cross_aarch64: the neon table did not run"; exit 1; }
if "$qemu" -L "$sysroot" "$out/test_kernels_planted" > "$out/planted.txt" 2>&1; then
  echo "cross_aarch64: the planted product (last depth pair skipped) passed: the check cannot fail"
  exit 1
fi
echo "cross_aarch64: the planted product was rejected ($(grep -E '^kernels neon: products' "$out/planted.txt"))"
