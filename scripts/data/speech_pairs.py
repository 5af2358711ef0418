#!/usr/bin/env python3
"""speech_pairs.py: transcript -> recorded speech pairs. The read sentences of pocketsphinx-testdata
(its transcription files), the letters and syllables of klettres-data (each language's sounds.xml
names what a file says) and the words of ktuberling-data (each language's .soundtheme; the file
name is the word, in ASCII). Every clip becomes 16 kHz mono FLAC of at most 10.24 s (longer ones
are left out, not cut). One record per clip; a transcript (case-folded) is one group, and so are
ktuberling's words for one object across languages, so no transcript spans two splits. Writes
data/speech/{train,dev,test}.jsonl, clips/*.flac, clips.sha256 and manifest.json. Deterministic for
a seed. See docs/data.md.
"""

import collections
import pathlib
import random
import re
import sys
import time
import xml.etree.ElementTree as ElementTree

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import av_corpus  # noqa: E402
import debian_archive  # noqa: E402
from gettext_pairs import locale_language  # noqa: E402

PACKAGES = {"pocketsphinx-testdata": "usr/share/pocketsphinx/test/data", "klettres-data": "usr/share/klettres",
            "ktuberling-data": "usr/share/ktuberling/sounds"}
TRANSCRIPT_LINE = re.compile(r"^\s*(?:<s>)?\s*(.*?)\s*(?:</s>)?\s*\(([^()]+)\)\s*$")


def language_of(code):
    return locale_language(code) or code.split("@")[0]


def pocketsphinx_items(root):
    """[(transcript, file, extra)] of every transcription file ("transcription", "*.transcription")
    under root: lines `<s> words </s> (id)` naming id.wav beside them; and the ids without a file."""
    items, missing = [], []
    root = pathlib.Path(root)
    for path in sorted([*root.rglob("transcription"), *root.rglob("*.transcription")]):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            found = TRANSCRIPT_LINE.match(line)
            if not found or not found.group(1):
                continue
            words = " ".join(found.group(1).split())
            audio = path.parent / f"{found.group(2)}.wav"
            name = audio.relative_to(root).as_posix()
            if audio.is_file():
                items.append((words, audio, {"lang": "en", "kind": "sentence", "source": f"pocketsphinx-testdata:{name}"}))
            else:
                missing.append(name)
    return items, missing


def klettres_items(root):
    """[(transcript, file, extra)] of every <language>/sounds.xml under root: each <sound name file>
    of its <alphabet> (a letter) and <syllables>; and the files named but absent."""
    items, missing = [], []
    root = pathlib.Path(root)
    for path in sorted(root.glob("*/sounds.xml")):
        tree = ElementTree.parse(path)
        for language in tree.iter("language"):
            code = language.get("code") or path.parent.name
            for section, kind in (("alphabet", "letter"), ("syllables", "syllable")):
                for block in language.iter(section):
                    for sound in block.iter("sound"):
                        name, file = (sound.get("name") or "").strip(), sound.get("file") or ""
                        if not name or not file:
                            continue
                        if (root / file).is_file():
                            items.append((name, root / file, {"lang": language_of(code), "kind": kind,
                                                              "source": f"klettres-data:{file}"}))
                        else:
                            missing.append(file)
    return items, missing


def theme_sounds(path):
    """[(object name, file)] of a ktuberling .soundtheme file, and its language code."""
    tree = ElementTree.parse(path)
    return [(sound.get("name"), sound.get("file")) for sound in tree.iter("sound")
            if sound.get("name") and sound.get("file")], tree.getroot().get("code") or path.stem


def theme_prefixes(files):
    """First "_" parts that begin at least 3 of a language's file names: its names of the themes
    (fr "patate_", "lune_"), not words."""
    counts = collections.Counter(pathlib.PurePosixPath(file).stem.split("_")[0].casefold()
                                 for file in files if "_" in pathlib.PurePosixPath(file).stem)
    return {part for part, count in counts.items() if count >= 3}


def spoken_word(file, name="", prefixes=()):
    """The word a ktuberling file name spells: its "_" parts after the leading ones that are a theme
    prefix or a part of the object's English name (id "egypt_grass_rumput"), the last part at least;
    hyphens and underscores as spaces, digits after a word dropped ("olive1")."""
    parts = pathlib.PurePosixPath(file).stem.split("_")
    skip = {part.casefold() for part in name.split("_")} | set(prefixes)
    while len(parts) > 1 and parts[0].casefold() in skip:
        parts.pop(0)
    return " ".join(re.sub(r"(?<=[^\W\d])\d+$", "", part).replace("-", " ").strip() for part in parts).strip()


def ktuberling_items(root):
    """[(transcript, file, extra)] of every .soundtheme under root. English files say their object's
    name; another language's file whose words are all English (a part of an object's name, a plural,
    a word of an English file: ru/ball.ogg, ca/tv_ladder.ogg) says a word its name does not give,
    and is left out. Also {reason: count} of what was left out."""
    root = pathlib.Path(root)
    themes = {path: theme_sounds(path) for path in sorted(root.glob("*.soundtheme"))}
    english = {part.casefold() for sounds, _ in themes.values() for name, _ in sounds for part in re.split(r"[_-]", name)}
    english |= {part.casefold() for sounds, code in themes.values() if language_of(code) == "en"
                for name, file in sounds for part in spoken_word(file).split()}
    english |= {word + "s" for word in english}
    items, left_out = [], collections.Counter()
    for path, (sounds, code) in themes.items():
        language = language_of(code)
        prefixes = theme_prefixes(file for _, file in sounds)
        for name, file in sounds:
            word = spoken_word(file, name, prefixes)
            if not (root / file).is_file():
                left_out["file missing"] += 1
            elif not word:
                left_out["no word in the file name"] += 1
            elif language != "en" and all(part in english for part in word.casefold().split()):
                left_out["named by its English key (the spoken word is not written)"] += 1
            else:
                items.append((word, root / file, {"lang": language, "kind": "word", "object": name,
                                                  "source": f"ktuberling-data:{file}"}))
    return items, dict(sorted(left_out.items()))


def limited(items, limit, seed):
    """At most `limit` items (0: all), a seeded choice, in their listed order."""
    if not limit or len(items) <= limit:
        return items
    chosen = set(random.Random(seed).sample(range(len(items)), limit))
    return [item for index, item in enumerate(items) if index in chosen]


def transcode(items, output, clips, script, codec="flac"):
    """{transcript: [record]} of the items written as clips, {reason: count} of those left out, {clip: seconds}."""
    jobs, stems, left_out = [], {}, collections.Counter()
    for transcript, path, extra in items:
        stem = debian_archive.safe_name(extra["source"].replace(":", "_").rsplit(".", 1)[0])
        if stem in stems:  # one file named twice (two objects, one recording) is read once
            if stems[stem] != path:
                raise ValueError(f"two clips would be {stem}: {stems[stem]} and {path}")
            left_out["the same file named again"] += 1
            continue
        stems[stem] = path
        jobs.append((transcript, path, extra, stem))
    written = av_corpus.to_audio_many([(path, stem) for _, path, _, stem in jobs], output, clips, script, codec=codec)
    groups, seconds_of, failed = av_corpus.records_of(
        [(transcript.casefold(), {"query": transcript, **extra}) for transcript, _, extra, _ in jobs], written)
    return groups, dict(sorted((left_out + failed).items())), seconds_of


def main(argv=None):
    parser = debian_archive.corpus_parser(__doc__.split("\n\n")[0], "speech")
    parser.add_argument("--pocketsphinx-root", help="a folder to read instead of pocketsphinx-testdata's test/data")
    parser.add_argument("--klettres-root", help="a folder of <language>/sounds.xml to read instead of klettres-data's")
    parser.add_argument("--ktuberling-root", help="a folder of *.soundtheme to read instead of ktuberling-data's sounds")
    parser.add_argument("--limit", type=int, default=0, help="at most this many clips of each package (0: all)")
    parser.add_argument("--codec", choices=sorted(av_corpus.CODECS), default="flac",
                        help="clip format: lossless FLAC (default) or Ogg Opus at 24 kb/s (a tenth of the bytes)")
    arguments = parser.parse_args(argv)
    started = time.monotonic()
    av_corpus.require_tools()
    local = {"pocketsphinx-testdata": arguments.pocketsphinx_root, "klettres-data": arguments.klettres_root,
             "ktuberling-data": arguments.ktuberling_root}
    fetched = debian_archive.fetch_unless_local("speech_pairs", local, arguments.scratch, arguments.refresh)
    roots = {package: pathlib.Path(local[package] or fetched[package]["root"] / folder) for package, folder in PACKAGES.items()}
    try:
        readers = {"pocketsphinx-testdata": pocketsphinx_items, "klettres-data": klettres_items,
                   "ktuberling-data": ktuberling_items}
        found = {package: reader(roots[package]) for package, reader in readers.items()}
        items = [item for package, (listed, _) in found.items()
                 for item in limited(listed, arguments.limit, arguments.seed)]
        clips = {}
        av_corpus.fresh_clip_folder(arguments.output)
        groups, left_out, seconds = transcode(items, arguments.output, clips, "speech_pairs", arguments.codec)
    except (OSError, ValueError, ElementTree.ParseError) as error:
        sys.exit(f"speech_pairs: {error}")
    objects, _ = debian_archive.join_groups_sharing(
        groups, lambda record: ["object:" + record["object"]] if "object" in record else [])
    per_package = collections.Counter(record["source"].split(":")[0] for group in objects.values() for record in group)
    av_corpus.build_clip_corpus(
        "speech_pairs", "speech", arguments, objects, clips, seconds,
        {"synthetic": False, "clips_per_package": dict(sorted(per_package.items())),
         "found_per_package": {package: len(listed) for package, (listed, _) in found.items()},
         "files_named_but_absent": {"pocketsphinx-testdata": len(found["pocketsphinx-testdata"][1]),
                                    "klettres-data": len(found["klettres-data"][1])},
         "ktuberling_left_out": found["ktuberling-data"][1], "left_out": left_out,
         "groups": len(objects), "group": "the transcript (case-folded); ktuberling's words of one object together",
         "audio": av_corpus.AUDIO_FORMATS[arguments.codec],
         "transcripts": {"pocketsphinx-testdata": "its transcription files", "klettres-data": "sounds.xml",
                         "ktuberling-data": "the file name (ASCII, diacritics lost)"}},
        debian_archive.image_source(fetched, local), started, side="audio")


if __name__ == "__main__":
    main()
