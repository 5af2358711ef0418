#!/usr/bin/env bash
# Rebuilds every corpus under data/ from Debian's archive (each script writes its shards and a
# manifest with packages, versions, licences, sha256 and counts, the image corpora also their
# PNGs, the audio and video corpora their clips; docs/data.md). Deterministic for the archive's
# state; takes a few minutes and about 1 GB of downloads into data/.debian.
set -euo pipefail
cd "$(dirname "$0")/../.."
python3 scripts/data/gettext_pairs.py
for script in code_pairs wordnet_pairs description_pairs text_corpus libreoffice_pairs \
              gcide_pairs manpage_pairs foldoc_pairs emoji_pairs flag_pairs cldr_pairs gnome_help_pairs manual_pairs manpage_translations fashion_pairs clipart_pairs \
              speech_pairs espeak_pairs video_pairs; do
  if [ -f "scripts/data/$script.py" ]; then
    echo "build_all: $script"
    python3 "scripts/data/$script.py"
  fi
done
# CLDR's train leaves out gettext's held-out strings; this pass takes CLDR's held-out pairs out of gettext's train.
echo "build_all: gettext_pairs --held-out-pairs data/cldr"
python3 scripts/data/gettext_pairs.py --held-out-pairs data/cldr
echo "build_all: done:"
ls data
