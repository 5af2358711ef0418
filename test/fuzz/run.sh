#!/usr/bin/env bash
# run.sh [SECONDS] [TARGET...]: fuzzes each TARGET (default: all of parquet, safetensors, config, jsonl,
# mixture and av, one after another) for SECONDS (default 60) on one core. Target T is test/fuzz/fuzz_T.c,
# built with clang (libFuzzer, AddressSanitizer, UndefinedBehaviorSanitizer) into build-fuzz/T/; its
# seeds come from make_seeds.py when build-fuzz/T/seeds is empty, its dictionary is test/fuzz/T.dict
# when there is one, and its grown corpus stays in build-fuzz/T/corpus. After each run the corpus is
# replayed through a coverage build and the line coverage of the target's parser file is printed.
# A crash leaves its input as build-fuzz/T/crash-* and makes the script exit non-zero once the other
# targets have run; once fixed, its input goes to test/fuzz/regressions/T/, which every run replays first.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root" # the mixture target resolves its sources in test/fuzz/, relative to here
seconds=60
if [ "$#" -gt 0 ] && [[ "$1" =~ ^[0-9]+$ ]]; then seconds="$1"; shift; fi
every=(parquet safetensors config jsonl mixture av)
targets=("$@")
[ "${#targets[@]}" -gt 0 ] || targets=("${every[@]}")
flags=(-std=c11 -g -O1 -D_POSIX_C_SOURCE=200809L -Iinclude -Isrc)
libraries=(-ljansson -lzstd -lsnappy -lz -lpng -ljpeg -lwebp -lm)

# The parser file whose coverage is printed, the sources a target links, and its longest input; where the
# file also holds what the target cannot reach (file readers, writers), its functions are printed too.
settings() {
  functions=yes
  extra=()
  case "$1" in
    parquet) parser=src/data/parquet.c; sources=(src/data/parquet.c src/data/jsonl.c src/media/image.c src/media/grid.c); longest=16384; functions=no ;;
    safetensors) parser=src/model/safetensors.c; sources=(src/model/safetensors.c); longest=16384 ;;
    config) parser=src/model/config.c; sources=(src/model/config.c src/model/tensors.c); longest=4096 ;;
    jsonl) parser=src/data/jsonl.c; sources=(src/data/jsonl.c src/media/image.c src/media/grid.c); longest=8192 ;;
    mixture) parser=src/data/mixture.c; sources=(src/data/mixture.c); longest=8192 ;;
    av) parser=src/media/av.c; sources=(src/media/av.c src/media/av_cells.c src/media/image.c src/media/grid.c); longest=65536
        read -r -a extra <<< "-DUFORM_HAVE_FFMPEG $(pkg-config --cflags --libs libavformat libavcodec libswresample libswscale libavutil)" ;;
    *) echo "run.sh: unknown target '$1' (expected ${every[*]})" >&2; exit 2 ;;
  esac
  sources=("test/fuzz/fuzz_$1.c" "${sources[@]}" src/core/status.c src/core/file.c)
}
for target in "${targets[@]}"; do settings "$target"; done # refuses a misspelt target before any build
if [ "${#targets[@]}" -gt 1 ]; then
  failed=0
  for target in "${targets[@]}"; do
    status=0
    bash "$0" "$seconds" "$target" || status=$?
    [ "$failed" -ne 0 ] || failed="$status"
  done
  exit "$failed"
fi

target="${targets[0]}"
out="build-fuzz/$target"
settings "$target"
mkdir -p "$out/corpus" "$out/seeds"
clang "${flags[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  "${sources[@]}" "${extra[@]}" "${libraries[@]}" -o "$out/fuzz"
if [ -z "$(ls -A "$out/seeds")" ]; then python3 test/fuzz/make_seeds.py "$target" "$out/seeds"; fi
options=(-max_total_time="$seconds" -max_len="$longest" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1
         -artifact_prefix="$out/")
if [ -f "test/fuzz/$target.dict" ]; then options+=(-dict="test/fuzz/$target.dict"); fi
folders=("$out/corpus" "$out/seeds")
if [ -d "test/fuzz/regressions/$target" ]; then folders+=("test/fuzz/regressions/$target"); fi
echo "== $target: $seconds s"
status=0
ASAN_OPTIONS=detect_leaks=1 "$out/fuzz" "${options[@]}" "${folders[@]}" > "$out/fuzz.log" 2>&1 || status=$?
grep -E "^#[0-9]+[[:space:]]+(INITED|DONE)|stat::|ERROR|SUMMARY|runtime error" "$out/fuzz.log" || true
if [ "$status" -ne 0 ]; then
  echo "fuzz_$target failed (exit $status): see $out/fuzz.log and $out/crash-*" >&2
  exit "$status"
fi

# Coverage: a plain build with a main that reads each file, run over the seeds and the grown corpus.
clang "${flags[@]}" -fprofile-instr-generate -fcoverage-mapping -fsanitize=fuzzer-no-link \
  "${sources[@]}" "${extra[@]}" -x c - "${libraries[@]}" -o "$out/cover" <<'MAIN'
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
find "${folders[@]}" -type f -print0 | LLVM_PROFILE_FILE="$out/cover-%p.profraw" xargs -0 "$out/cover"
llvm-profdata merge -o "$out/cover.profdata" "$out"/cover-*.profraw
llvm-cov report "$out/cover" -instr-profile="$out/cover.profdata" "$parser" | tail -n 3
if [ "$functions" = yes ]; then
  llvm-cov report "$out/cover" -instr-profile="$out/cover.profdata" -show-functions "$parser" | sed -n '2p;4,/^---/{/^---/q;p}'
fi
