#!/usr/bin/env bash
# Prepares, on this (Debian) machine, the git-ignored folders a GPU run carries with it:
#   third_party/device-libs     Jansson, snappy, pkgconf, libmicrohttpd (`uform serve`) and the image codecs
#                               (libwebp, which the GPU image lacks, with libpng and libjpeg-turbo beside it)
#                               from Debian, unpacked
#   third_party/peers           the PyTorch peers from ../shared/peers
#   third_party/cudnn-frontend  cuDNN's frontend headers (fetched by scripts/setup.sh)
# Then, through the device tool: carry those folders and run `bash scripts/device/gpu.sh MODE`.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
libs=third_party/device-libs
if [ ! -e "$libs/usr/lib/x86_64-linux-gnu/libjansson.so" ] || [ ! -e "$libs/usr/lib/x86_64-linux-gnu/libwebp.so" ] ||
   [ ! -e "$libs/usr/lib/x86_64-linux-gnu/libmicrohttpd.so" ]; then
  debs="$(mktemp -d)"
  (cd "$debs" && apt-get download libjansson4 libjansson-dev libsnappy1v5 libsnappy-dev pkgconf-bin libpkgconf3 \
     libwebp7 libwebp-dev libwebpdemux2 libwebpmux3 libjpeg62-turbo libjpeg62-turbo-dev libpng16-16 libpng-dev \
     libmicrohttpd12 libmicrohttpd-dev)
  mkdir -p "$libs"
  for deb in "$debs"/*.deb; do dpkg -x "$deb" "$libs"; done
  # Static archives and documentation: the device links the shared libraries, and the carry is 64 MiB.
  rm -rf "$libs/usr/share/doc" "$libs/usr/share/man" "$libs/usr/share/info" "$libs/usr/share/lintian" "$libs/usr/share/doc-base"
  find "$libs" -name '*.a' -delete
  rm -rf "$debs"
fi
if [ -d ../shared/peers ]; then mkdir -p third_party/peers && cp ../shared/peers/*.py third_party/peers/; fi
[ -f third_party/cudnn-frontend/include/cudnn_frontend.h ] || bash scripts/setup.sh --deps-only
echo "prepare: carry third_party/device-libs third_party/peers third_party/cudnn-frontend"
