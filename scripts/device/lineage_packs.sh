#!/usr/bin/env bash
# Makes, on a bare checkout, everything the lineage's refine rounds carry to the GPU machine (rounds 10 to 15,
# docs/evaluation.md): the corpora (scripts/data/build_all.sh, the two wide man page corpora, the description
# translations' mined negatives and family siblings, Tux Paint's stamps, GCompris's, Art4Apps's, the furniture's and
# KTuberling's, Freeciv's, JOSM's and Scratch's pictures, FreeDict's words), runs/recall, and the ten packs under data/:
#   pack-r6img  the four picture corpora (gzipped)      pack-r6a  gettext, LibreOffice, description translations
#   pack-r6b    the other text corpora                  pack-r9w  the wide man page corpora
#   pack-r10s   the description translations' family siblings   pack-r12st  Tux Paint's stamps (round 12)
#   pack-r13ev  the stamps and GCompris's pictures (round 13)   pack-r14art  those, Art4Apps and the furniture (round 14)
#   pack-r15wt  FreeDict's words and KTuberling's pictures (round 15, beside pack-r14art)
#   pack-r15pic  Freeciv's, JOSM's and Scratch's pictures (round 15's third arm, beside pack-r15wt)
# A step whose output is there already is skipped, so a second run only finishes what is missing. About 45
# minutes on two cores the first time, most of it Debian's downloads. `--dry-run` prints the steps, runs none.
#   bash scripts/device/lineage_packs.sh [--dry-run]
set -euo pipefail
cd "$(dirname "$0")/../.."
dry=0
[ "${1:-}" = --dry-run ] && dry=1
[ $# -gt "$dry" ] && { echo "usage: bash scripts/device/lineage_packs.sh [--dry-run]" >&2; exit 2; }

step() {  # step OUTPUT COMMAND...: runs COMMAND unless OUTPUT exists
  local output="$1"; shift
  if [ -e "$output" ]; then echo "lineage_packs: $output is there"; return; fi
  echo "lineage_packs: $*"
  [ "$dry" = 1 ] || "$@"
}

mix=(--mixture mixtures/embedder_manuals.json --splits dev,test --split-limit 2000)
step data/video/manifest.json bash scripts/data/build_all.sh  # its last corpus: there when it finished
step data/manpages-wide/manifest.json python3 scripts/data/manpage_pairs.py --wide 300
step data/manpages-wider/manifest.json python3 scripts/data/manpage_pairs.py --wide 1500 --manpages data/manpages \
  --manpages data/manpages-wide --output data/manpages-wider
step data/description-translations/train-negatives.jsonl python3 scripts/data/mine_negatives.py description-translations
step data/description-translations/train-negatives.siblings.jsonl python3 scripts/data/language_subset.py --siblings 0.7 \
  data/description-translations/train-negatives.jsonl
step data/stamps/manifest.json python3 scripts/data/stamp_pairs.py
step data/gcompris/manifest.json python3 scripts/data/gcompris_pairs.py
step data/art4apps/manifest.json python3 scripts/data/art4apps_pairs.py
step data/furniture/manifest.json python3 scripts/data/furniture_pairs.py
step data/ktuberling/manifest.json python3 scripts/data/ktuberling_pairs.py
step data/freedict/manifest.json python3 scripts/data/freedict_pairs.py
step data/freeciv/manifest.json python3 scripts/data/freeciv_pairs.py
step data/josm/manifest.json python3 scripts/data/josm_pairs.py
step data/scratch/manifest.json python3 scripts/data/scratch_pairs.py
step runs/recall python3 scripts/device/recall_sets.py
step data/pack-r6img/lineage-images.tar.gz bash -c "python3 scripts/data/device_pack.py ${mix[*]} --sources emoji,clipart,flags,fashion \
  --lossy clipart=30 --lossy emoji=75 --lossy flags=75 --output data/pack-r6img/lineage-images.tar && gzip -9 data/pack-r6img/lineage-images.tar"
step data/pack-r6a/lineage-text-a.tar python3 scripts/data/device_pack.py "${mix[@]}" --sources gettext,libreoffice,description-translations \
  --no-images --xz-preset 6 --limit 200 --output data/pack-r6a/lineage-text-a.tar
step data/pack-r6b/lineage-text-b.tar python3 scripts/data/device_pack.py "${mix[@]}" --no-images --xz-preset 6 --limit 200 \
  --output data/pack-r6b/lineage-text-b.tar \
  --skip-sources emoji,clipart,flags,fashion,gettext,libreoffice,description-translations,gettext-scarce,libreoffice-scarce
step data/pack-r9w/lineage-wider.tar python3 scripts/data/device_pack.py --mixture mixtures/embedder_manuals_wider.json \
  --sources manpages-wide,manpages-wider --splits dev,test --no-images --output data/pack-r9w/lineage-wider.tar
step data/pack-r10s/lineage-siblings.tar python3 scripts/data/device_pack.py --mixture mixtures/embedder_siblings.json \
  --sources description-translations-siblings --splits "" --no-images --output data/pack-r10s/lineage-siblings.tar
step data/pack-r12st/lineage-stamps.tar python3 scripts/data/device_pack.py --mixture mixtures/embedder_stamps.json \
  --sources stamps --splits dev,test --lossy stamps=75 --output data/pack-r12st/lineage-stamps.tar
step data/pack-r13ev/lineage-everyday.tar python3 scripts/data/device_pack.py --mixture mixtures/embedder_everyday.json \
  --sources stamps,gcompris --splits dev,test --lossy stamps=75 --lossy gcompris=75 --output data/pack-r13ev/lineage-everyday.tar
step data/pack-r14art/lineage-art.tar python3 scripts/data/device_pack.py --mixture mixtures/embedder_art_furniture_flipped.json \
  --sources stamps,gcompris,art4apps,furniture --splits dev,test --lossy stamps=75 --lossy gcompris=75 --lossy art4apps=75 \
  --lossy furniture=75 --output data/pack-r14art/lineage-art.tar
step data/pack-r15wt/lineage-words-toys.tar python3 scripts/data/device_pack.py --mixture mixtures/embedder_words_toys.json \
  --sources freedict,ktuberling --splits dev,test --lossy ktuberling=75 --xz-preset 6 --output data/pack-r15wt/lineage-words-toys.tar
step data/pack-r15pic/lineage-pictures.tar python3 scripts/data/device_pack.py --mixture mixtures/embedder_words_toys_pictures.json \
  --sources freeciv,josm,scratch --splits dev,test --lossy josm=75 --lossy scratch=75 --output data/pack-r15pic/lineage-pictures.tar
echo "lineage_packs: done; carry third_party/device-libs, third_party/cudnn-frontend and the packs a call names (docs/roadmap.md)"
