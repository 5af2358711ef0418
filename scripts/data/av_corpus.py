#!/usr/bin/env python3
"""av_corpus.py: what the audio and video corpus scripts beside it share (speech_pairs, espeak_pairs,
video_pairs). Pairs whose positives are clips, {"query": "...", "positives": [{"audio": "clips/x.flac"}]}
or {"video": "clips/x.webm"}, the path relative to the shard's folder; clips written by the `ffmpeg`
CLI with bit-exact flags, so the same input gives the same bytes; the split of the image corpora
(debian_archive: whole groups, groups sharing a clip joined, no query and no clip across splits);
clips.sha256 and the manifest. Standard library only; ffmpeg and ffprobe must be on PATH.
"""

import collections
import concurrent.futures
import json
import os
import pathlib
import shutil
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


# Ogg Opus at 24 kb/s for synthesized speech: a tenth of FLAC's bytes, bit-exact muxing as above.
OPUS_OPTIONS = ["-map_metadata", "-1", "-ac", "1", "-ar", str(AUDIO_RATE), "-c:a", "libopus", "-b:a", "24k",
                "-fflags", "+bitexact", "-flags:a", "+bitexact"]


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


def opus_seconds(path):
    """The duration of an Ogg Opus file: its last page's granule position less the header's pre-skip,
    in 48 kHz samples."""
    data = pathlib.Path(path).read_bytes()
    last, head = data.rfind(b"OggS"), data.find(b"OpusHead")
    if last < 0 or head < 0 or len(data) < max(last + 14, head + 12):
        raise MediaError(f"{path}: not an Ogg Opus file")
    granule = int.from_bytes(data[last + 6:last + 14], "little")
    return (granule - int.from_bytes(data[head + 10:head + 12], "little")) / 48000


# codec: (file extension, ffmpeg output options, seconds from the written file)
CODECS = {"flac": (".flac", FLAC_OPTIONS, flac_seconds), "opus": (".opus", OPUS_OPTIONS, opus_seconds)}


AUDIO_FORMATS = {"flac": f"16 kHz mono 16-bit FLAC, at most {AUDIO_SECONDS_MAX} s",
                 "opus": f"Ogg Opus, 24 kb/s, 16 kHz mono, at most {AUDIO_SECONDS_MAX} s"}


def clip_path(stem, codec):
    return f"{CLIP_FOLDER}/{stem}{CODECS[codec][0]}"


def to_audio(source, output, stem, clips, input_options=(), seconds_max=AUDIO_SECONDS_MAX, stdin=None, codec="flac"):
    """Writes `source` (a path, or "-" with the bytes in `stdin`) as output/clips/<stem>.flac (or
    .opus), 16 kHz mono; returns ({"audio": path}, seconds), or (None, reason) and no file when it is
    longer than `seconds_max` (a cut would cut its transcript). Records its sha256 in `clips`."""
    relative_path = clip_path(stem, codec)
    if relative_path in clips:
        raise ValueError(f"two clips would be {relative_path}")
    run_ffmpeg([*input_options, "-i", str(source), *CODECS[codec][1], str(pathlib.Path(output) / relative_path)],
               str(source), stdin)
    return kept_audio(output, relative_path, clips, seconds_max, codec)


def kept_audio(output, relative_path, clips, seconds_max, codec):
    """(positive, seconds) of a written clip, its sha256 recorded; (None, reason) and the file deleted
    when it is longer than `seconds_max`."""
    path = pathlib.Path(output) / relative_path
    seconds = CODECS[codec][2](path)
    if seconds > seconds_max + 1e-9:
        path.unlink()
        return None, f"longer than {seconds_max} s"
    clips[relative_path] = debian_archive.sha256_of(path)
    return {"audio": relative_path}, seconds


def to_audio_many(jobs, output, clips, script, seconds_max=AUDIO_SECONDS_MAX, batch=32, codec="flac"):
    """to_audio of each (source path, stem) with one ffmpeg for `batch` files (its start-up costs more
    than a short clip's encoding), batches on parallel threads; a batch that fails is redone file by
    file so the error names its file. [(positive, seconds) or (None, reason)] in job order."""
    chunks = [jobs[start:start + batch] for start in range(0, len(jobs), batch)]
    stems = collections.Counter(stem for _, stem in jobs)
    for stem, count in stems.items():
        if count > 1 or clip_path(stem, codec) in clips:
            raise ValueError(f"two clips would be {clip_path(stem, codec)}")
    done = [0]

    def one_chunk(chunk):
        arguments = [argument for source, _ in chunk for argument in ("-i", str(source))]
        for index, (_, stem) in enumerate(chunk):
            arguments += ["-map", f"{index}:a:0", *CODECS[codec][1], str(pathlib.Path(output) / clip_path(stem, codec))]
        results = []
        try:
            run_ffmpeg(arguments, f"a batch of {len(chunk)} clips")
            finished = [(clip_path(stem, codec), None) for _, stem in chunk]
        except MediaError:
            finished = []
            for source, stem in chunk:
                try:
                    run_ffmpeg(["-i", str(source), *CODECS[codec][1], str(pathlib.Path(output) / clip_path(stem, codec))],
                               str(source))
                    finished.append((clip_path(stem, codec), None))
                except MediaError as error:
                    finished.append((None, f"does not decode ({str(error).split(': ', 1)[-1]})"))
        for relative_path, reason in finished:
            results.append(kept_audio(output, relative_path, clips, seconds_max, codec) if relative_path else (None, reason))
        done[0] += len(chunk)
        progress(script, done[0], len(jobs), every=1)
        return results

    return [result for results in parallel(lambda chunk: one_chunk(chunk), [(chunk,) for chunk in chunks])
            for result in results]


def records_of(entries, written):
    """{group: [record]}, {clip: seconds} and {reason: count} from (group, {"query", ...}) entries and
    to_audio_many's results for them: each written clip a record {"query", "positives", ...}."""
    groups, seconds_of, left_out = collections.defaultdict(list), {}, collections.Counter()
    for (group, fields), (positive, seconds) in zip(entries, written):
        if positive is None:
            left_out[seconds] += 1
            continue
        seconds_of[positive["audio"]] = seconds
        groups[group].append({"query": fields["query"], "positives": [positive],
                              **{key: value for key, value in fields.items() if key != "query"}})
    return groups, seconds_of, left_out


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
    """A progress line on stderr every `every` clips (every call when 1) and at the end."""
    if done == total or done % every == 0 or every == 1:
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
