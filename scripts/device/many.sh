#!/usr/bin/env bash
# Runs several gpu.sh modes in one device call, in order, within one deadline, and brings back their files
# as one archive (only 8 files of a call come back): each step's files and console under a folder named
# after the step, all tarred into $OUT/many.tgz, the steps' exit codes in $OUT/many.txt.
#   bash scripts/device/many.sh SECONDS "MODE [flags...]" "MODE [flags...]" ...
# e.g. bash scripts/device/many.sh 560 'tests -k e4m3' 'encode --tier small --peer-configs none' contract
# A step gets what is left of SECONDS (counted from the start; at least 5); one that fails or runs out does
# not stop the next. A step is read with the shell's quoting ("tests -k 'e4m3 and not gate_up'"), and variables
# for it alone go before its mode ('UFORM_CUDA_TUNE=0 recall ...'). GPU_SH names another script to run (tests).
set -u
[ $# -ge 2 ] || { echo "usage: bash scripts/device/many.sh SECONDS 'MODE [flags...]'..."; exit 2; }
deadline=$1; shift
case "$deadline" in '' | *[!0-9]*) echo "many.sh: SECONDS must be a whole number, not '$deadline'"; exit 2 ;; esac
root="$(cd "$(dirname "$0")/../.." && pwd)"; cd "$root"; gpu="${GPU_SH:-scripts/device/gpu.sh}"
out="${OUT:-/tmp/uform-out}"; work="$(mktemp -d)"; mkdir -p "$out"
status=0; index=0
for step in "$@"; do
  index=$((index + 1))
  eval "words=($step)" || { echo "many.sh: cannot read step '$step'"; exit 2; }
  environment=(); while [ ${#words[@]} -gt 0 ] && [[ "${words[0]}" == *=* ]]; do environment+=("${words[0]}"); words=("${words[@]:1}"); done
  [ ${#words[@]} -gt 0 ] || { echo "many.sh: step '$step' names no mode"; exit 2; }
  name="$index-${words[0]}"; folder="$work/$name"; mkdir -p "$folder"
  left=$((deadline - SECONDS)); [ "$left" -lt 5 ] && left=5
  echo "== $name: ${words[*]} (up to $left s, at $SECONDS s)"
  (cd "$root" && env "${environment[@]}" OUT="$folder" timeout "$left" bash "$gpu" "${words[@]}") > "$folder/console.txt" 2>&1
  code=$?
  echo "$name exit $code at $SECONDS s" | tee -a "$out/many.txt"
  tail -n 20 "$folder/console.txt"
  [ "$code" -eq 0 ] || status=1
done
tar czf "$out/many.tgz" -C "$work" . && rm -rf "$work"
exit "$status"
