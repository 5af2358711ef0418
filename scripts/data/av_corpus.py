#!/usr/bin/env python3
"""av_corpus.py: what the audio and video corpus scripts beside it share (speech_pairs, espeak_pairs,
video_pairs). Pairs whose positives are clips, {"query": "...", "positives": [{"audio": "clips/x.flac"}]}
or {"video": "clips/x.webm"}, the path relative to the shard's folder; clips written by the `ffmpeg`
CLI with bit-exact flags, so the same input gives the same bytes; the split of the image corpora
(debian_archive: whole groups, groups sharing a clip joined, no query and no clip across splits);
clips.sha256 and the manifest. Standard library only; ffmpeg and ffprobe must be on PATH.
"""

import concurrent.futures
import json
import os
import pathlib
import shutil
import struct
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import debian_archive  # noqa: E402

CLIP_FOLDER = "clips"
AUDIO_RATE = 16000
AUDIO_SECONDS_MAX = 10.24  # 512 frames of 20 ms, a whole clip in one segment (docs/audio_video.md)
# 16 kHz mono 16-bit FLAC without tags or encoder version, so two machines write the same bytes.
FLAC_OPTIONS = ["-map_metadata", "-1", "-ac", "1", "-ar", str(AUDIO_RATE), "-sample_fmt", "s16", "-c:a", "flac",
                "-compression_level", "8", "-fflags", "+bitexact", "-flags:a", "+bitexact"]


class MediaError(RuntimeError):
    """ffmpeg could not read or write a clip."""


def require_tools():
    """Ends the script with a clear message when ffmpeg or ffprobe is missing."""
    missing = [tool for tool in ("ffmpeg", "ffprobe") if shutil.which(tool) is None]
    if missing:
        sys.exit(f"{' and '.join(missing)} not found on PATH (Debian: apt-get install ffmpeg; scripts/setup.sh installs it)")


def fresh_clip_folder(output):
    """output/clips emptied (the script owns it), so no clip of an earlier build lingers."""
    folder = pathlib.Path(output) / CLIP_FOLDER
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def run_ffmpeg(arguments, what, stdin=None):
    """ffmpeg with `arguments` (quiet, overwriting); MediaError naming `what` and ffmpeg's last words."""
    run = subprocess.run(["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-y", *arguments],
                         input=stdin, capture_output=True)
    if run.returncode != 0:
        message = run.stderr.decode(errors="replace").strip().splitlines()
        raise MediaError(f"{what}: ffmpeg failed (exit {run.returncode}): {message[-1] if message else 'no message'}")


def flac_seconds(path):
    """The duration a FLAC file's STREAMINFO declares (total samples / rate), read from its header."""
    with open(path, "rb") as file:
        head = file.read(42)
    if len(head) < 42 or head[:4] != b"fLaC" or head[4] & 0x7F != 0:
        raise MediaError(f"{path}: not a FLAC file with STREAMINFO first")
    packed = int.from_bytes(head[18:26], "big")  # 20 bits rate, 3 channels, 5 bits per sample, 36 samples
    rate, samples = packed >> 44, packed & ((1 << 36) - 1)
    if not rate or not samples:
        raise MediaError(f"{path}: its STREAMINFO declares no samples")
    return samples / rate


def to_flac(source, output, stem, clips, input_options=(), seconds_max=AUDIO_SECONDS_MAX, stdin=None):
    """Writes `source` (a path, or "-" with the bytes in `stdin`) as output/clips/<stem>.flac, 16 kHz
    mono; returns ({"audio": path}, seconds), or (None, reason) and no file when it is longer than
    `seconds_max` (a cut would cut its transcript). Records its sha256 in `clips`."""
    relative_path = f"{CLIP_FOLDER}/{stem}.flac"
    if relative_path in clips:
        raise ValueError(f"two clips would be {relative_path}")
    path = pathlib.Path(output) / relative_path
    run_ffmpeg([*input_options, "-i", str(source), *FLAC_OPTIONS, str(path)], str(source), stdin)
    seconds = flac_seconds(path)
    if seconds > seconds_max + 1e-9:
        path.unlink()
        return None, f"longer than {seconds_max} s"
    clips[relative_path] = debian_archive.sha256_of(path)
    return {"audio": relative_path}, seconds


def parallel(function, jobs, threads=None):
    """[function(*job)] for each job, run on threads (each job waits on a subprocess), in job order."""
    with concurrent.futures.ThreadPoolExecutor(threads or os.cpu_count() or 1) as pool:
        return list(pool.map(lambda job: function(*job), jobs))


def probe(path):
    """ffprobe's streams and format of a file as a dict (tests and checks use it); MediaError if unreadable."""
    run = subprocess.run(["ffprobe", "-v", "error", "-show_streams", "-show_format", "-of", "json", str(path)],
                         capture_output=True, text=True)
    if run.returncode != 0:
        raise MediaError(f"{path}: ffprobe cannot read it: {run.stderr.strip()}")
    return json.loads(run.stdout)


def progress(script, done, total, every=200):
    if done == total or done % every == 0:
        print(f"{script}: {done}/{total} clips", file=sys.stderr, flush=True)


def split_clip_corpus(groups, clips, seed, dev_fraction, test_fraction, side):
    """The split of docs/data.md for clip pairs: groups sharing a clip (by sha256) joined, whole groups
    to dev and test, one record per clip file within a split (a transcript may recur: one letter read
    in twenty languages), then no query and no clip shared across splits. ({split: [record]}, counts)."""
    joined, joined_count = debian_archive.join_groups_sharing_images(groups, clips, side)
    by_clip = debian_archive.media_keys(clips, with_query=False, side=side)
    records, duplicates, split_of = debian_archive.split_and_dedupe(joined, seed, dev_fraction, test_fraction, by_clip)
    leaks = debian_archive.remove_leaks(records, debian_archive.media_keys(clips, side=side))
    return records, {"groups_per_split": {split: sum(1 for value in split_of.values() if value == split)
                                          for split in debian_archive.SPLITS},
                     "groups_joined_by_a_shared_clip": joined_count,
                     "removed_as_duplicate_clips_within_a_split": duplicates,
                     "removed_from_dev_and_test_as_leaks": leaks}


def build_clip_corpus(script, corpus, arguments, groups, clips, seconds, manifest_extra, source, started, side,
                      describe=None):
    """split_clip_corpus by the script's seed and fractions, then the shards, clips.sha256 (the clips no
    kept record names deleted) and manifest.json in --output, with the clips' seconds and what
    describe({split: [record]}) adds; prints a summary."""
    records, counts = split_clip_corpus(groups, clips, arguments.seed, arguments.dev_fraction,
                                        arguments.test_fraction, side)
    counts.update(describe(records) if describe else {})

    def durations(kept):
        total = sum(seconds[path] for path in kept)
        return {"seconds": round(total, 3), "longest_seconds": round(max((seconds[path] for path in kept), default=0), 3)}

    manifest = debian_archive.write_media_corpus(
        arguments.output, corpus, f"scripts/data/{script}.py", records, clips, arguments.seed,
        {**manifest_extra, **counts, "source": source}, side=side, listing="clips.sha256", summary="clips",
        summary_extra=durations)
    debian_archive.print_summary(script, manifest, started, arguments.output)
    return manifest
