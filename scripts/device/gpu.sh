#!/usr/bin/env bash
# Runs on the GPU machine (the `device` tool): builds the CUDA backend alone (the image has no
# Jansson, so the CPU library is left out), runs the kernel contract suite, then the training-step
# benchmark beside the PyTorch peer when its copy is present (third_party/peers, carried). Reports
# and JSON go to $OUT.  Usage there: bash scripts/device/gpu.sh [contract|bench|all|check|parity|tests|cpu|recall|decode|encode|encode-profile|contexts|images-bench|images-profile|gemm|encode-images|imagerun|avrun|loader|ab|trace|profile] [flags...]
# `parity` builds the CPU library too (build-parity) against Jansson and snappy from
# third_party/device-libs (carried: Debian's libjansson4, libjansson-dev, libsnappy1v5, libsnappy-dev,
# the image codecs' libraries and headers, and pkgconf-bin, libpkgconf3 for a machine without
# pkg-config, each unpacked there with dpkg -x by scripts/device/prepare.sh),
# then runs uform_step_parity (the step against the CPU trainer) into $OUT/parity.json; its flags follow.
# `tests` builds the tools there too and runs test_context (contexts of one model on the CPU and the
# GPU from threads at once) and the Python tests that train and infer on the GPU; when they fail, an E4M3 encode of each
# test model (bounded scales, gate_up's output coded, cuDNN's attention) under compute-sanitizer (sanitize-128x2.txt,
# sanitize-192x3.txt) names the first fault.
# `encode` builds uform and uform_bench_encode there and times `uform_encode` on the GPU beside the
# PyTorch inference peer (bench/encode.py --device cuda; the peer's copy in third_party/peers).
# `cpu`: this host's CPU (the H200's Xeon has AMX): test_kernels over every table it runs, uform_bench_gemm's BF16
# and int8 products (CPU_KERNELS, default amx,avx512vnni,avx512f), and bench/encode.py at BF16 and int8 beside the
# PyTorch peer at 2 and 16 threads (CPU_THREADS, CPU_ENCODE_KERNELS default amx; the peer's copy in third_party/peers).
# `recall [precision_recall.py flags] PAIRS...`: held-out recall of a checkpoint at each precision, on this host's 16 cores
# or with `--device cuda` on the GPU (`--precisions bf16,e4m3,e4m3-tensor`); carry the pair files and their pictures
# in an ignored folder, e.g. runs/recall.
# `encode-profile`: one encode call's kernels (ncu) and wall time beside the compiled peer's (bench/profile_encode.py).
# `contexts [contexts.py flags]`: encode throughput against the number of contexts sharing one model, on the GPU
# and this host's CPU (bench/contexts.py).
# `decode` builds uform_image_decode_test there and runs it: JPEGs decoded and resized into patches on
# the GPU (nvJPEG, NPP) against the host path, its planted controls, a truncated and a CMYK JPEG
# refused, and host against GPU images/s; decode.txt and decode.json (docs/images.md, "GPU decoding").
# `images-bench [train_images.py flags]` builds there too and runs, in one call, bench/train_images.py
# (our contrastive step on image-caption pairs beside bench/torch_image_step.py, the PyTorch peer of this
# repository) and bench/encode_images.py (uform_encode_images on a CPU and a CUDA context, images/s).
# `encode-images [encode_images.py flags]`: images/s of uform_encode_images on a CPU and a CUDA context, the CUDA one with
# JPEGs decoded on the host (cuda-host) and on the GPU (cuda-gpu).
# `gemm [flags]`: the block products' TFLOP/s under each E4M3 scaling scheme beside BF16 (bench/gemm_cuda.c), tiny and
# small (GEMM_TIERS), gemm.txt and gemm-TIER.jsonl; out and down add into a BF16 residual stream (`--residual f32`: Float32).
# `images-profile [tier:pairs:ROWSxCOLUMNS:caption_bytes:recompute]` profiles one image-caption step:
# ours under ncu (kernel_times.py: ours-images.txt) beside the peer's under torch.profiler (peer-images.txt).
# `trace` runs our step with cuDNN's attention at 4096-cell segments with every step's loss printed
# (where a NaN begins), each tensor's largest gradient after step 1, the first step's loss per run
# (runs that disagree there went wrong in it) and cuBLASLt's chosen algorithms, tuning cuBLASLt's
# products, cuDNN's attention, or neither.
# `ab` times this tree against an earlier one in the same run (bench/ab.py: the training step's rows
# and GPU encode, alternating): the earlier tree is third_party/baseline (carried; `git archive REV |
# tar -x -C third_party/baseline`), built like this one.
# `loader MIXTURE [ROWS] [SECONDS]` times the data loader (bench/loader.c) on this host's cores; carry
# the mixture's data folders.
# `imagerun [PACK] [flags]` is issue 14's run (scripts/device/image_run.py): tiny on mixtures/images.json
# beside two text-only controls at once, then each scored on the test splits; PACK (default
# data/pack/images.tar, from scripts/data/device_pack.py) carried with data/pack and unpacked into data/.
# `lineage STAGE [flags]` is issue 16's lineage (scripts/device/lineage.py): base, reranker, embedder, refine, eval or all
# (or unpack: build and unpack what was carried, nothing more),
# one stage a call on one warm machine (runs/lineage stays between calls); data/pack*/lineage-*.tar or .tar.gz (device_pack.py)
# carried and unpacked; after eval the shipped width's embedder and reranker come back as 15 MiB parts.
# `avrun [flags]` is issue 18's run (scripts/device/av_run.py): tiny on mixtures/audio_video.json, then each
# clip corpus's test split scored; data/pack*/av-*.tar (device_pack.py) carried and unpacked, and
# third_party/ffmpeg-min (scripts/device/ffmpeg.sh: FFmpeg's native decoders, which the image lacks) carried.
# Any mode that builds the CPU library uses third_party/ffmpeg-min where it is carried, so clips decode there.
# `check` runs contract, trace, parity, tests and decode in one call: check.txt summarizes, check.tgz holds
# each mode's files (it needs the carried folders of all five).
# `profile` times one step of ours kernel by kernel under Nsight Compute (scripts/device/kernel_times.py)
# and the peer's under torch.profiler (bench/profile_peer.py), for tiny at 4096- and 512-byte segments,
# and ours for small's contrastive row.
set -uo pipefail
what="${1:-all}"; shift || true
out="${OUT:-/tmp/uform-out}"
# Unpacks a device_pack.py tar into data/ (its .jsonl.xz decompressed), once a machine: MODE PACK.
unpack_pack() {
  [ -f "$2.unpacked" ] && return 0
  tar -xf "$2" && python3 -c "import lzma, pathlib
for p in pathlib.Path('data').rglob('*.jsonl.xz'): p.with_suffix('').write_bytes(lzma.decompress(p.read_bytes())); p.unlink()" &&
    touch "$2.unpacked" || { echo "gpu.sh $1: $2 does not unpack"; exit 1; }
}
mkdir -p "$out"
if [ "$what" = check ]; then  # every check in one call, each mode's files in one archive (8 files come back)
  status=0
  for mode in contract trace parity tests decode; do
    mkdir -p "$out/check/$mode"
    OUT="$out/check/$mode" TRACE_TUNES="${TRACE_TUNES:-3 3 3 3 2 2}" bash "$0" "$mode" > "$out/check/$mode/console.txt" 2>&1
    code=$?
    echo "$mode: exit $code" | tee -a "$out/check.txt"
    [ "$code" -eq 0 ] || status=1
  done
  tail -n 3 "$out/check/contract/contract.txt" "$out/check/parity/parity.txt" "$out/check/tests/tests.txt" \
    "$out/check/decode/decode.txt" 2> /dev/null | tee -a "$out/check.txt"
  grep -v " loss " "$out/check/trace/trace.txt" 2> /dev/null | cut -c1-300 | tee -a "$out/check.txt"
  tar czf "$out/check.tgz" -C "$out" check && rm -rf "$out/check"
  exit "$status"
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
if [ "$what" = parity ] || [ "$what" = tests ] || [ "$what" = decode ] || [ "$what" = encode ] || [ "$what" = encode-profile ] || [ "$what" = images-bench ] || [ "$what" = images-profile ] || [ "$what" = gemm ] || [ "$what" = encode-images ] || [ "$what" = contexts ] || [ "$what" = cpu ] || [ "$what" = recall ] ||
   [ "$what" = ab ] || [ "$what" = loader ] || [ "$what" = imagerun ] || [ "$what" = lineage ] || [ "$what" = avrun ]; then
  usr="$PWD/third_party/device-libs/usr"
  lib="$usr/lib/x86_64-linux-gnu"
  for needed in libjansson.so libsnappy.so pkgconfig/jansson.pc libwebp.so pkgconfig/libwebp.pc pkgconfig/libjpeg.pc pkgconfig/libpng.pc; do
    [ -e "$lib/$needed" ] || { echo "gpu.sh parity: $lib/$needed is missing: unpack the packages above there and carry third_party/device-libs"; exit 1; }
  done
  # The packages' .pc files say /usr: copies that point at the carried folder instead.
  mkdir -p build-parity/pkgconfig
  for pc in "$lib"/pkgconfig/*.pc; do
    sed -e "s#^prefix=/usr\$#prefix=$usr#" -e "s#^libdir=/usr/#libdir=$usr/#" -e "s#^includedir=/usr/#includedir=$usr/#" \
      -e "/^Requires.private:/d" "$pc" > "build-parity/pkgconfig/$(basename "$pc")"  # private needs (libmicrohttpd: gnutls) are for static links
  done
  export PKG_CONFIG_PATH="$PWD/build-parity/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  ffmpeg="$PWD/third_party/ffmpeg-min"
  if [ -f "$ffmpeg/lib/pkgconfig/libavformat.pc" ]; then  # built elsewhere: its .pc files name that prefix
    for pc in "$ffmpeg"/lib/pkgconfig/*.pc; do
      sed -e "s#^prefix=.*#prefix=$ffmpeg#" -e "s#^libdir=.*#libdir=$ffmpeg/lib#" -e "s#^includedir=.*#includedir=$ffmpeg/include#" \
        "$pc" > "build-parity/pkgconfig/$(basename "$pc")"
    done
    export LD_LIBRARY_PATH="$ffmpeg/lib:$LD_LIBRARY_PATH"
  fi
  pkg_config=()
  if ! command -v pkg-config > /dev/null; then
    [ -x "$usr/bin/pkgconf" ] || { echo "gpu.sh parity: no pkg-config here and no carried $usr/bin/pkgconf"; exit 1; }
    pkg_config=(-DPKG_CONFIG_EXECUTABLE="$usr/bin/pkgconf")
  fi
  # snappy is linked by name (src/data/sources.cmake): its header and library folders by hand;
  # -rpath-link lets programs over libuform.so resolve its libsnappy and libjansson at link time.
  configure() {  # configure SOURCE BUILD: the CPU library and the CUDA backend against the carried libraries
    cmake -S "$1" -B "$2" -DUFORM_CPU=ON -DUFORM_PLANTS=OFF -DUFORM_WERROR=ON -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$usr" "${pkg_config[@]}" -DCMAKE_C_FLAGS="-I$usr/include -I$usr/include/x86_64-linux-gnu" \
      -DCMAKE_SHARED_LINKER_FLAGS="-L$lib" -DCMAKE_EXE_LINKER_FLAGS="-L$lib -Wl,-rpath-link,$lib" \
      > "$out/configure-$(basename "$2").log" 2>&1 || { tail -30 "$out/configure-$(basename "$2").log"; exit 1; }
  }
  configure . build-parity
  if [ "$what" = ab ]; then
    base=third_party/baseline
    [ -f "$base/CMakeLists.txt" ] || { echo "gpu.sh ab: $base is missing: git archive REV | tar -x -C $base, and carry it"; exit 1; }
    mkdir -p "$base/third_party" && ln -sfn "$PWD/third_party/cudnn-frontend" "$base/third_party/cudnn-frontend"
    configure "$base" build-base
    for build in build-base build-parity; do
      cmake --build "$build" -j 16 --target uform_cli uform_bench_encode uform_bench_train_cuda > "$out/build-ab-$build.log" 2>&1 ||
        { tail -40 "$out/build-ab-$build.log"; exit 1; }
    done
    python3 bench/ab.py --base build-base --build build-parity --output "$out/ab.json" "$@" 2>&1 | tee "$out/ab.txt"
    exit "${PIPESTATUS[0]}"
  fi
  if [ "$what" = encode ]; then
    cmake --build build-parity -j 16 --target uform uform_cli uform_bench_encode > "$out/build-encode.log" 2>&1 ||
      { tail -40 "$out/build-encode.log"; exit 1; }
    python3 bench/encode.py --device cuda --build build-parity --peers third_party/peers \
      --output "$out/encode_cuda.json" "$@" 2>&1 | tee "$out/encode.txt"
    exit "${PIPESTATUS[0]}"
  fi
  if [ "$what" = contexts ]; then  # many contexts over one model, on the GPU and the host's CPU
    cmake --build build-parity -j 16 --target uform_cli uform_bench_encode > "$out/build-contexts.log" 2>&1 ||
      { tail -40 "$out/build-contexts.log"; exit 1; }
    python3 bench/contexts.py --build build-parity --output "$out/contexts.json" "$@" 2>&1 | tee "$out/contexts.txt"
    exit "${PIPESTATUS[0]}"
  fi
  if [ "$what" = encode-profile ]; then  # one encode call's kernels and wall time, ours beside the compiled peer's
    cmake --build build-parity -j 16 --target uform uform_cli uform_bench_encode > "$out/build-encode.log" 2>&1 ||
      { tail -40 "$out/build-encode.log"; exit 1; }
    python3 bench/profile_encode.py --build build-parity --peers third_party/peers --output "$out/profile_encode.json" "$@" 2>&1 |
      tee "$out/profile_encode.txt"
    exit "${PIPESTATUS[0]}"
  fi
  if [ "$what" = images-bench ]; then  # image-caption training beside the peer, then image encode on the CPU and the GPU
    cmake --build build-parity -j 16 --target uform_cli uform_bench_encode_images uform_bench_train_cuda \
      > "$out/build-images.log" 2>&1 || { tail -40 "$out/build-images.log"; exit 1; }
    python3 bench/torch_image_step.py --check 2>&1 | tail -5 | tee "$out/train_images.txt"  # M-RoPE and two finite steps, uncompiled
    check=${PIPESTATUS[0]}
    python3 bench/train_images.py --build build-parity --out "$out" "$@" 2>&1 | tee -a "$out/train_images.txt"
    status=${PIPESTATUS[0]}
    [ "$check" -eq 0 ] || status=1
    python3 bench/encode_images.py --devices cpu,cuda-host,cuda-gpu --build build-parity --seconds 2 \
      --output "$out/encode_images.json" 2>&1 | tee "$out/encode_images.txt"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    exit "$status"
  fi
  if [ "$what" = encode-images ]; then  # image encode on a CPU and a CUDA context, JPEGs decoded on the host and on the GPU
    cmake --build build-parity -j 16 --target uform_cli uform_bench_encode_images > "$out/build-encode-images.log" 2>&1 ||
      { tail -40 "$out/build-encode-images.log"; exit 1; }
    python3 bench/encode_images.py --devices cpu,cuda-host,cuda-gpu --build build-parity --seconds 2 \
      --output "$out/encode_images.json" "$@" 2>&1 | tee "$out/encode_images.txt"
    exit "${PIPESTATUS[0]}"
  fi
  if [ "$what" = gemm ]; then  # the E4M3 scaling schemes' product rates beside BF16, at one pass's rows
    cmake --build build-parity -j 16 --target uform_bench_gemm_cuda > "$out/build-gemm.log" 2>&1 || { tail -40 "$out/build-gemm.log"; exit 1; }
    status=0
    for tier in ${GEMM_TIERS:-tiny small}; do
      ./build-parity/uform_bench_gemm_cuda --tier "$tier" --json "$out/gemm-$tier.jsonl" "$@" 2>&1 | tee -a "$out/gemm.txt"
      [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    done
    exit "$status"
  fi
  if [ "$what" = images-profile ]; then  # the image-caption step's kernels: ours (ncu) beside the peer's (torch.profiler)
    # tier:pairs:ROWSxCOLUMNS:caption_bytes:recompute, as bench/train_images.py's plan; 512 pairs take about 85 GiB:
    # on an 80 GB card (H100) the default is 256
    memory=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
    pairs_default=512
    [ "${memory:-0}" -lt 100000 ] && pairs_default=256
    item="${1:-tiny:$pairs_default:22x23:64:0}"
    IFS=: read -r tier pairs grid caption recompute <<< "$item"
    shape=$(python3 -c "import sys; sys.path.insert(0, 'bench'); from train_cuda import TIERS; print(*TIERS['$tier'])")
    cmake --build build-parity -j 16 --target uform_bench_train_cuda > "$out/build-images-profile.log" 2>&1 ||
      { tail -40 "$out/build-images-profile.log"; exit 1; }
    ncu --csv --clock-control none --metrics gpu__time_duration.sum --profile-from-start off ./build-parity/uform_bench_train_cuda \
      --width "${shape% *}" --depth "${shape#* }" --rows 0 --columns 1024 --segment "$caption" --recompute "$recompute" --steps 1 \
      --pairs "$pairs" --text "$caption" --image "$grid" --pack-pairs 0 --cudnn 1 --profile > "$out/ncu-images.csv" 2> "$out/ncu-images.err"
    echo "ours $item (first fit):"
    python3 scripts/device/kernel_times.py "$out/ncu-images.csv" | tee "$out/ours-images.txt"
    python3 bench/torch_image_step.py --profile "$item" 2>&1 | tee "$out/peer-images.txt"
    exit "${PIPESTATUS[0]}"
  fi
  if [ "$what" = loader ]; then  # the loader's rate on this host's cores: MIXTURE [ROWS] [SECONDS] (its data carried)
    cmake --build build-parity -j 16 --target uform_bench_loader > "$out/build-loader.log" 2>&1 || { tail -40 "$out/build-loader.log"; exit 1; }
    ./build-parity/uform_bench_loader "$@" | tee "$out/loader.jsonl"
    exit "${PIPESTATUS[0]}"
  fi
  if [ "$what" = avrun ]; then  # issue 18's run: [av_run.py flags]; data/pack*/av-*.tar and third_party/ffmpeg-min carried
    grep "FFmpeg" "$out/configure-build-parity.log" | tee "$out/ffmpeg.txt"
    grep -q "decoding with FFmpeg" "$out/configure-build-parity.log" || { echo "gpu.sh avrun: the build found no FFmpeg: carry third_party/ffmpeg-min"; exit 1; }
    for pack in data/pack*/av-*.tar; do [ -f "$pack" ] && unpack_pack avrun "$pack"; done
    cmake --build build-parity -j 16 --target uform uform_cli uform_base uform_eval > "$out/build-avrun.log" 2>&1 ||
      { tail -40 "$out/build-avrun.log"; exit 1; }
    python3 scripts/device/av_run.py --build build-parity --out "$out" "$@" 2>&1 | tee "$out/av_run.txt"
    exit "${PIPESTATUS[0]}"
  fi
  if [ "$what" = imagerun ]; then  # issue 14's run: PACK [image_run.py flags]; PACK from scripts/data/device_pack.py, carried
    pack="${1:-data/pack/images.tar}"; shift || true
    [ -f "$pack" ] || { echo "gpu.sh imagerun: $pack is missing: python3 scripts/data/device_pack.py, and carry data/pack"; exit 1; }
    unpack_pack imagerun "$pack"
    cmake --build build-parity -j 16 --target uform_base uform_eval uform_bench_loader > "$out/build-imagerun.log" 2>&1 ||
      { tail -40 "$out/build-imagerun.log"; exit 1; }
    python3 scripts/device/image_run.py --build build-parity --out "$out" "$@" 2>&1 | tee "$out/image_run.txt"
    exit "${PIPESTATUS[0]}"
  fi
  if [ "$what" = lineage ]; then  # issue 16's lineage, a stage a call: STAGE [lineage.py flags]; data/pack*/lineage-*.tar(.gz) carried
    stage="${1:?gpu.sh lineage: name a stage: base, reranker, embedder, refine, eval, all, or unpack (build and unpack only)}"; shift
    for pack in data/pack*/lineage-*.tar data/pack*/lineage-*.tar.gz; do  # tar -x reads either; a warm machine keeps the rest
      [ -f "$pack" ] && unpack_pack lineage "$pack"
    done
    cmake --build build-parity -j 16 --target uform uform_cli uform_base uform_eval > "$out/build-lineage.log" 2>&1 ||
      { tail -40 "$out/build-lineage.log"; exit 1; }
    [ "$stage" = unpack ] && { du -sh data/* | tee "$out/unpacked.txt"; exit 0; }  # a first call of a chain: the data that stays
    python3 scripts/device/lineage.py --build build-parity --stage "$stage" --out "$out" "$@" 2>&1 | tee "$out/lineage-$stage.txt"
    status=${PIPESTATUS[0]}
    runs=runs/lineage
    if [ "$stage" = eval ] || [ "$stage" = all ]; then  # the shipped width's checkpoints come back, in parts under 16 MiB
      best=$(python3 -c "import json; print(json.load(open('$runs/eval/eval.json')).get('best_path') or '$runs/embedder/ship')")
      for pick in "$best" "$runs/reranker/ship"; do  # a best that is the refine stage's start is already here
        folder=$(readlink -f "$pick/latest") && [ -f "$folder/model.safetensors" ] || continue
        name=$(basename "$(dirname "$pick")")-$(basename "$pick")
        split -b 15M -d "$folder/model.safetensors" "$out/$name.safetensors.part"
        cp "$folder/README.md" "$runs/$name-README.md"
      done
    fi
    tar czf "$out/lineage.tgz" $(ls -d $runs/*/stage.json $runs/eval/eval.json $runs/*-README.md $runs/*/*.log 2> /dev/null)
    exit "$status"
  fi
  if [ "$what" = decode ]; then  # GPU JPEG decoding against the host's (built where the toolkit has nvJPEG and NPP)
    grep "JPEG decoding" "$out/configure-build-parity.log"
    cmake --build build-parity -j 16 --target uform_image_decode_test > "$out/build-decode.log" 2>&1 ||
      { tail -40 "$out/build-decode.log"; exit 1; }
    ./build-parity/uform_image_decode_test --json "$out/decode.json" "$@" 2>&1 | tee "$out/decode.txt"
    exit "${PIPESTATUS[0]}"
  fi
  if [ "$what" = cpu ]; then  # this host's CPU: every kernel table it runs checked, then the products and encode beside the peer
    cmake --build build-parity -j 16 --target uform_cli uform_bench_encode uform_bench_gemm test_kernels > "$out/build-cpu.log" 2>&1 ||
      { tail -40 "$out/build-cpu.log"; exit 1; }
    lscpu > "$out/lscpu.txt"
    ./build-parity/test_kernels > "$out/test_kernels.txt" 2>&1
    status=$?
    grep -E "^kernels|int8|FAIL|passed" "$out/test_kernels.txt" | tail -n 20
    tables="${CPU_KERNELS:-amx,avx512vnni,avx512f}"
    ./build-parity/uform_bench_gemm --kernels "$tables" --precisions bf16,int8 --seconds 1 > "$out/gemm.txt" 2>&1 || status=1
    grep -v '^{' "$out/gemm.txt" | sed 's/|{.*$/|/'
    for threads in ${CPU_THREADS:-2 16}; do
      python3 bench/encode.py --build build-parity --peers third_party/peers --threads "$threads" --seconds "${CPU_SECONDS:-3}" \
        --kernels "${CPU_ENCODE_KERNELS:-amx}" --precisions bf16,int8 --output "$out/encode_cpu_$threads.json" 2>&1 |
        tee "$out/encode_cpu_$threads.txt"
      [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    done
    exit "$status"
  fi
  if [ "$what" = recall ]; then  # held-out recall at each precision on this host's cores or the GPU (bench/precision_recall.py)
    cmake --build build-parity -j 16 --target uform_eval > "$out/build-recall.log" 2>&1 || { tail -40 "$out/build-recall.log"; exit 1; }
    python3 bench/precision_recall.py --build build-parity --threads 16 --output "$out/precision_recall.json" "$@" 2>&1 |
      tee "$out/precision_recall.txt"
    exit "${PIPESTATUS[0]}"
  fi
  if [ "$what" = tests ]; then  # the Python tests that drive the GPU through the tools
    cmake --build build-parity -j 16 --target uform uform_cli uform_base uform_eval test_context > "$out/build-tests.log" 2>&1 ||
      { tail -40 "$out/build-tests.log"; exit 1; }
    ./build-parity/test_context 2>&1 | tee "$out/context.txt"  # a CUDA context beside two CPU ones, from threads
    context=${PIPESTATUS[0]}
    UFORM_BUILD=build-parity python3 -m pytest -q -p no:cacheprovider test/python/test_uform_base_cuda.py \
      test/python/test_cuda_inference.py "$@" 2>&1 | tee "$out/tests.txt"
    status=${PIPESTATUS[0]}
    [ "$context" -eq 0 ] || status=1
    if [ "$status" -ne 0 ] && command -v compute-sanitizer > /dev/null; then  # a failure's first fault, named in the same call
      model=$(mktemp -d) && ./build-parity/uform init --tier 128x2 --seed 7 --output "$model/128x2" > /dev/null &&
        python3 -c "import sys; sys.path.insert(0, 'test/python'); import conftest; conftest.python_checkpoint('$model/192x3', 192, 3, 11, 2.0)" &&
        python3 -c "import random; r = random.Random(7); print('\n'.join('x' * r.randint(1, 700) for _ in range(41)))" > "$model/texts.txt"
      for tier in 128x2 192x3; do  # the init model and the tests' sharp one (python_model)
        UFORM_CUDA_E4M3=tensor UFORM_CUDA_GATE_UP=e4m3 UFORM_CUDA_ATTENTION=cudnn timeout 120 compute-sanitizer --print-limit 5 \
          --log-file "$out/sanitize-$tier.txt" ./build-parity/uform encode --model "$model/$tier" --device cuda --precision e4m3 \
          < "$model/texts.txt" > /dev/null 2>> "$out/sanitize-uform.txt"
        echo "compute-sanitizer over uform encode, $tier, E4M3 (sanitize-$tier.txt):"; head -20 "$out/sanitize-$tier.txt"
      done
      head -20 "$out/sanitize-uform.txt"
    fi
    exit "$status"
  fi
  cmake --build build-parity -j 16 --target uform_step_parity > "$out/build-parity.log" 2>&1 || { tail -40 "$out/build-parity.log"; exit 1; }
  ldd build-parity/uform_step_parity | grep -E "jansson|snappy" | tee "$out/parity-libs.txt"
  ./build-parity/uform_step_parity --json "$out/parity.json" "$@" | tee "$out/parity.txt"
  exit "${PIPESTATUS[0]}"
fi
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
if [ "$what" = trace ]; then
  # --tune: 1 times cuBLASLt's candidates, 2 cuDNN's plans, 3 both, 0 none (the NaN runs, since fixed, had tuned).
  for tune in ${TRACE_TUNES:-3 3 3 1 1 1 2 2 2 0}; do
    ./build-gpu/uform_bench_train_cuda --segment 4096 --cudnn 1 --steps 5 --trace --tune "$tune" "$@" \
      >> "$out/trace.jsonl" 2> "$out/run.txt"
    code=$?  # the first step's loss: runs of one setting that disagree there went wrong in their first step
    echo "tune $tune: exit $code $(grep -c nan "$out/run.txt") NaN losses, first $(grep -m1 " loss " "$out/run.txt" | cut -d' ' -f5)" |
      tee -a "$out/trace.txt"
    grep -v " loss " "$out/run.txt" >> "$out/trace.txt"
  done
  rm -f "$out/run.txt"
fi
if [ "$what" = profile ]; then
  for segment in 4096 512; do
    ncu --csv --clock-control none --metrics gpu__time_duration.sum --profile-from-start off ./build-gpu/uform_bench_train_cuda \
      --segment "$segment" --cudnn 1 --steps 1 --profile "$@" > "$out/ncu-$segment.csv" 2> "$out/ncu-$segment.err"
    echo "ours tiny 16x4096 segment $segment:"
    python3 scripts/device/kernel_times.py "$out/ncu-$segment.csv" | tee "$out/ours-$segment.txt"
  done
  # The contrastive row short of its target: small, 1024 pairs of 256-byte texts, recomputation on.
  ncu --csv --clock-control none --metrics gpu__time_duration.sum --profile-from-start off ./build-gpu/uform_bench_train_cuda \
    --width 1024 --pairs 1024 --text 256 --recompute 1 --cudnn 1 --steps 1 --profile > "$out/ncu-pairs.csv" 2> "$out/ncu-pairs.err"
  echo "ours small contrastive, 1024 pairs of 256 bytes, recomputation on:"
  python3 scripts/device/kernel_times.py "$out/ncu-pairs.csv" | tee "$out/ours-pairs.txt"
  [ -f third_party/peers/torch_mlm_step.py ] && python3 bench/profile_peer.py --peer third_party/peers/torch_mlm_step.py --out "$out"
fi
exit "$status"
