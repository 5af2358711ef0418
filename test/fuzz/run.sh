#!/usr/bin/env bash
# run.sh [SECONDS]: builds test/fuzz/fuzz_parquet.c with clang (libFuzzer, AddressSanitizer,
# UndefinedBehaviorSanitizer) into build-fuzz/, makes the seed corpus with pyarrow if it is missing,
# and fuzzes for SECONDS (default 60) on one core, keeping the grown corpus in build-fuzz/corpus.
# Then it replays the corpus through a coverage build and prints parquet.c's line coverage.
# A crash leaves its input as build-fuzz/crash-* and makes the script exit non-zero; once fixed, its
# input goes to test/fuzz/regressions/, which every run replays first.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
seconds="${1:-60}"
out=build-fuzz
mkdir -p "$out/corpus" "$out/seeds"
sources=(test/fuzz/fuzz_parquet.c src/data/parquet.c src/data/jsonl.c src/core/status.c)
flags=(-std=c11 -g -O1 -D_POSIX_C_SOURCE=200809L -Iinclude -Isrc)
libraries=(-ljansson -lzstd -lsnappy -lz -lm)
clang "${flags[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  "${sources[@]}" "${libraries[@]}" -o "$out/fuzz_parquet"
if [ -z "$(ls -A "$out/seeds")" ]; then python3 test/fuzz/make_seeds.py "$out/seeds"; fi
status=0
ASAN_OPTIONS=detect_leaks=1 "$out/fuzz_parquet" -max_total_time="$seconds" -dict=test/fuzz/parquet.dict \
  -max_len=16384 -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 -artifact_prefix="$out/" \
  "$out/corpus" "$out/seeds" test/fuzz/regressions > "$out/fuzz.log" 2>&1 || status=$?
grep -E "^#[0-9]+[[:space:]]+(INITED|DONE)|stat::|ERROR|SUMMARY|runtime error" "$out/fuzz.log" || true
if [ "$status" -ne 0 ]; then
  echo "fuzz_parquet failed (exit $status): see $out/fuzz.log and $out/crash-*" >&2
  exit "$status"
fi

# Coverage: a plain build with a main that reads each file, run over the seeds and the grown corpus.
clang "${flags[@]}" -fprofile-instr-generate -fcoverage-mapping -fsanitize=fuzzer-no-link \
  "${sources[@]}" -x c - "${libraries[@]}" -o "$out/cover_parquet" <<'MAIN'
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
int LLVMFuzzerTestOneInput(uint8_t const *data, size_t size);
int main(int argc, char **argv) {
    static uint8_t buffer[1 << 20];
    for (int i = 1; i < argc; ++i) {
        FILE *file = fopen(argv[i], "rb");
        if (!file) continue;
        size_t size = fread(buffer, 1, sizeof(buffer), file);
        fclose(file);
        LLVMFuzzerTestOneInput(buffer, size);
    }
    return 0;
}
MAIN
rm -f "$out"/cover-*.profraw
find "$out/corpus" "$out/seeds" test/fuzz/regressions -type f -print0 |
  LLVM_PROFILE_FILE="$out/cover-%p.profraw" xargs -0 "$out/cover_parquet"
llvm-profdata merge -o "$out/cover.profdata" "$out"/cover-*.profraw
llvm-cov report "$out/cover_parquet" -instr-profile="$out/cover.profdata" src/data/parquet.c | tail -n 3
