#!/usr/bin/env bash
# Unpacks NumKong's C sources from its PyPI source distribution into third_party/numkong.
# NumKong is not in Debian; PyPI's sdist is where its sources come from (docs/dependencies.md).
set -euo pipefail
version="${NUMKONG_VERSION:-7.8.6}"
root="$(cd "$(dirname "$0")/.." && pwd)"
target="$root/third_party/numkong"
if [ -f "$target/include/numkong/dots.h" ] && [ "$(cat "$target/VERSION" 2>/dev/null)" = "$version" ]; then
  exit 0
fi
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
python3 -m pip download --quiet --no-deps --no-binary :all: --dest "$scratch" "numkong==$version"
tar -xzf "$scratch"/numkong-"$version".tar.gz -C "$scratch"
rm -rf "$target"
mkdir -p "$(dirname "$target")"
mv "$scratch/numkong-$version" "$target"
echo "NumKong $version unpacked into $target"
