#!/usr/bin/env bash
# Builds, on this (Debian) machine, the FFmpeg libraries the GPU machine lacks (its image has no
# FFmpeg at all, and Debian's packages pull in some 170 codec libraries, over the device tool's
# carry): Debian's own FFmpeg source (the version this machine's libavcodec comes from, its sha256
# checked against the archive's .dsc), configured with FFmpeg's native decoders for the formats
# docs/audio_video.md lists and nothing else, as shared libraries with their headers and .pc files
# in third_party/ffmpeg-min (a few MB). scripts/device/gpu.sh puts that folder on PKG_CONFIG_PATH
# and LD_LIBRARY_PATH when it is carried, so the device's build decodes audio and video as this one does.
#
#     bash scripts/device/ffmpeg.sh      # then carry third_party/ffmpeg-min
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
prefix="$root/third_party/ffmpeg-min"
[ -f "$prefix/lib/pkgconfig/libavformat.pc" ] && [ -f "$prefix/x86asm" ] && { echo "ffmpeg.sh: $prefix is built"; exit 0; }
rm -rf "$prefix"  # a build without the assembly marker is rebuilt: its decoders run without SIMD
command -v nasm > /dev/null || { [ "$(id -u)" = 0 ] && sudo="" || sudo=sudo; $sudo apt-get install -y nasm > /dev/null; }
version="$(dpkg-query -W -f='${Version}' libavcodec59 2> /dev/null || true)"
version="${version:-7:5.1.9-0+deb12u1}"
upstream="${version#*:}"; upstream="${upstream%%-*}"
pool=http://deb.debian.org/debian/pool/main/f/ffmpeg
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
curl -fsS -o "$work/source.dsc" "$pool/ffmpeg_${version#*:}.dsc"
curl -fsS -o "$work/source.tar.xz" "$pool/ffmpeg_$upstream.orig.tar.xz"
expected="$(awk -v name="ffmpeg_$upstream.orig.tar.xz" '/^Checksums-Sha256:/ {on = 1; next} /^[^ ]/ {on = 0} on && $3 == name {print $1}' "$work/source.dsc")"
actual="$(sha256sum "$work/source.tar.xz" | cut -d' ' -f1)"
[ -n "$expected" ] && [ "$expected" = "$actual" ] || { echo "ffmpeg.sh: the source's sha256 $actual is not the .dsc's '$expected'"; exit 1; }
tar -xJf "$work/source.tar.xz" -C "$work"
cd "$work/ffmpeg-$upstream"
# Native decoders only (no external codec libraries), no programs, devices, filters or network;
# with FFmpeg's x86 assembly (NASM, from Debian), the SIMD its decoders and scalers are fast with.
./configure --prefix="$prefix" --enable-shared --disable-static --disable-programs --disable-doc --disable-network \
  --disable-avdevice --disable-avfilter --disable-postproc --disable-everything --disable-autodetect \
  --enable-protocol=file,pipe \
  --enable-demuxer=wav,flac,mp3,ogg,matroska,mov,avi,ivf,image2 \
  --enable-decoder=pcm_s16le,pcm_s24le,pcm_s32le,pcm_f32le,pcm_u8,flac,mp3,mp3float,opus,vorbis,aac,vp8,vp9,h264,mpeg4,theora,av1 \
  --enable-parser=flac,mpegaudio,opus,vorbis,vp8,vp9,h264,mpeg4video,aac,av1 \
  --enable-swresample --enable-swscale > "$work/configure.log" 2>&1 || { tail -30 "$work/configure.log"; exit 1; }
make -j"$(nproc)" > "$work/make.log" 2>&1 || { tail -40 "$work/make.log"; exit 1; }
make install > /dev/null
rm -rf "$prefix/share"
grep -q "HAVE_X86ASM 1" config.h || { echo "ffmpeg.sh: configure found no NASM"; exit 1; }
touch "$prefix/x86asm"
du -sh "$prefix"
echo "ffmpeg.sh: carry third_party/ffmpeg-min"
