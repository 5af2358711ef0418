#!/usr/bin/env bash
# Runs every test: a Release build with warnings as errors (C unit tests, then the Python suites
# against both CPU kernel tables, then the AArch64 table cross-compiled and run under qemu), then an
# AddressSanitizer + UndefinedBehaviorSanitizer build running the same suites. Prints "N passed, M failed" at the end; exits non-zero on any failure.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
jobs="$(nproc)"
passed=0
failed=0
run() {  # run NAME COMMAND...: one step, counted
  local name="$1"; shift
  echo "=== $name"
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "=== FAILED: $name"; fi
}
build() {  # build DIR CMAKE-OPTIONS...
  local dir="$1"; shift
  mkdir -p "$dir" && cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DUFORM_WERROR=ON "$@" > "$dir/configure.log" 2>&1 &&
    cmake --build "$dir" -j "$jobs" 2>&1 | grep -E "warning|error|Error" ; test "${PIPESTATUS[0]}" -eq 0
}
mkdir -p build build-sanitize

run "release build" build build
run "C unit tests" ctest --test-dir build --output-on-failure
run "Python suites (default kernels)" env UFORM_BUILD=build python3 -m pytest -q --durations=12 test/python
run "Python suites (generic kernels)" env UFORM_BUILD=build UFORM_CPU=generic \
  python3 -m pytest -q test/python/test_reference.py test/python/test_packing.py
run "AArch64 kernels (cross-compiled, under qemu)" bash scripts/cross_aarch64.sh

run "sanitizer build" build build-sanitize -DUFORM_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
asan="$(gcc -print-file-name=libasan.so)"
ubsan="$(gcc -print-file-name=libubsan.so)"
sanitizer_env=(env UFORM_BUILD=build-sanitize LD_PRELOAD="$asan $ubsan"
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1)
run "C unit tests (sanitizers)" env ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-sanitize --output-on-failure
run "Python suites (sanitizers)" "${sanitizer_env[@]}" python3 -m pytest -q -p no:cacheprovider --durations=12 test/python

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
