# test_av_corpora.py: the audio and video corpus scripts of scripts/data (speech_pairs, espeak_pairs,
# video_pairs and av_corpus) on small trees written here: records of the documented shape with clip
# paths relative to the shard, every clip present, listed with its sha256 and decoding (ffprobe),
# no transcript or caption group and no clip in two splits, with planted leaks the check must
# catch, manifests that match the files, the same bytes twice for a seed. The real packages are
# read when they are unpacked in data/.debian; the built corpora in data/ when built. Skips without
# ffmpeg.

import json
import math
import os
import pathlib
import shutil
import struct
import subprocess
import sys
import wave

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "data"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import av_corpus  # noqa: E402
import debian_archive  # noqa: E402
import speech_pairs  # noqa: E402
from test_corpora import check_manifest, leaks, read_splits  # noqa: E402

SPLITS = ("train", "dev", "test")
UNPACKED = ROOT / "data" / ".debian" / "root"
UFORM = next((path for path in (pathlib.Path(os.environ.get("UFORM_BUILD", ROOT / "build")) / "uform",) if path.is_file()), None)
pytestmark = pytest.mark.skipif(not (shutil.which("ffmpeg") and shutil.which("ffprobe")),
                                reason="ffmpeg and ffprobe are not installed (scripts/setup.sh --deps-only installs them)")


def clip_digests(folder):
    folder = pathlib.Path(folder)
    return {path.relative_to(folder).as_posix(): debian_archive.sha256_of(path)
            for path in sorted((folder / "clips").iterdir())}


def check_clip_corpus(folder, side, extension, group_of, decode=True):
    """The checks every built clip corpus must pass: shards, manifest, clips.sha256 and the files
    agree; each record one {side: "clips/...ext"} positive; no group (group_of(record)), query or
    clip in two splits; each clip decodes (ffprobe: one stream of the kind). Returns splits, manifest."""
    manifest = check_manifest(folder)
    splits = read_splits(folder)
    digests = clip_digests(folder)
    listed = dict(reversed(line.split("  ")) for line in (pathlib.Path(folder) / "clips.sha256").read_text().splitlines())
    assert listed == digests
    named = set()
    for split in SPLITS:
        for record in splits[split]:
            assert isinstance(record["query"], str) and record["query"].strip() == record["query"] and record["query"]
            assert len(record["positives"]) == 1 and set(record["positives"][0]) == {side}, record
            path = record["positives"][0][side]
            assert path.startswith("clips/") and path.endswith(extension) and path.isascii(), path
            named.add(path)
    assert named == set(digests)
    assert manifest["clips"]["files"] == len(digests) and "synthetic" in manifest
    assert not leaks(splits, lambda record: [record["query"].casefold(), "sha256:" + digests[record["positives"][0][side]],
                                             "group:" + group_of(record)])
    if decode:
        for path in sorted(digests):
            streams = av_corpus.probe(pathlib.Path(folder) / path)["streams"]
            assert [stream["codec_type"] for stream in streams] == [side], path
    return splits, manifest


def build_twice(main, arguments, folder, side, extension, group_of):
    """Runs a script into folder/out and folder/again: both pass check_clip_corpus with every split
    non-empty and are the same bytes, clips included."""
    main([*arguments, "--output", str(folder / "out")])
    splits, manifest = check_clip_corpus(folder / "out", side, extension, group_of)
    assert all(splits[split] for split in SPLITS)
    main([*arguments, "--output", str(folder / "again")])
    for name in ("train.jsonl", "dev.jsonl", "test.jsonl", "clips.sha256", "manifest.json"):
        assert (folder / "out" / name).read_bytes() == (folder / "again" / name).read_bytes(), name
    return splits, manifest, [record for split in SPLITS for record in splits[split]]


def tone(path, frequency, seconds=0.5, rate=22050, channels=1):
    """A 16-bit WAV of a sine at `frequency` Hz (each frequency its own bytes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    count = int(seconds * rate)
    samples = [int(12000 * math.sin(2 * math.pi * frequency * index / rate)) for index in range(count)]
    with wave.open(str(path), "wb") as file:
        file.setnchannels(channels)
        file.setsampwidth(2)
        file.setframerate(rate)
        file.writeframes(b"".join(struct.pack("<" + "h" * channels, *([sample] * channels)) for sample in samples))


def to_ogg(wav, ogg):
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-i", str(wav), "-c:a", "libvorbis", str(ogg)], check=True)
    wav.unlink()


# ---- the split helpers, with planted leaks ---------------------------------------------------------

def test_clip_split_joins_and_removes_leaks():
    """split_clip_corpus on 40 groups with planted leaks: group 3's clip is group 30's (the same
    sha256), group 7's transcript is group 21's in other case. For every seed the shared clip stays in
    one split (once: a clip is one record), the shared transcript in one split or removed as a leak,
    and the leak check goes red on a split that does not keep them apart."""
    clips = {f"clips/{index}.flac": f"{index:064x}" for index in range(40)}
    clips["clips/30.flac"] = clips["clips/3.flac"]
    groups = {f"g{index:02d}": [{"query": f"words {index}", "positives": [{"audio": f"clips/{index}.flac"}]}]
              for index in range(40)}
    groups["g21"][0]["query"] = "WORDS 7"
    keys = debian_archive.media_keys(clips, side="audio")
    planted = {"train": groups["g03"] + groups["g07"], "dev": groups["g30"], "test": groups["g21"]}
    assert leaks(planted, keys) == {"sha256:" + clips["clips/3.flac"], "words 7"}  # the control goes red
    for seed in range(6):
        records, counts = av_corpus.split_clip_corpus(groups, clips, seed, 0.2, 0.2, "audio")
        assert counts["groups_joined_by_a_shared_clip"] == 1 and not leaks(records, keys)
        kept = [record["query"] for split in SPLITS for record in records[split]]
        assert ("words 3" in kept) + ("words 30" in kept) == 1 and all(records[split] for split in SPLITS)
        assert sum(counts["removed_as_duplicate_clips_within_a_split"].values()) == 1  # one clip, one record
        assert sum(query.casefold() == "words 7" for query in kept) == 1 + (counts["removed_from_dev_and_test_as_leaks"] == {"dev": 0, "test": 0})


def test_flac_header_and_length_cap(tmp_path):
    tone(tmp_path / "short.wav", 440, seconds=1.25, rate=44100, channels=2)
    tone(tmp_path / "long.wav", 440, seconds=10.5)
    clips = {}
    (tmp_path / "clips").mkdir()
    positive, seconds = av_corpus.to_flac(tmp_path / "short.wav", tmp_path, "short", clips)
    assert positive == {"audio": "clips/short.flac"} and seconds == pytest.approx(1.25, abs=1e-3)
    stream = av_corpus.probe(tmp_path / "clips" / "short.flac")["streams"][0]
    assert (stream["codec_name"], stream["sample_rate"], stream["channels"]) == ("flac", "16000", 1)
    assert av_corpus.to_flac(tmp_path / "long.wav", tmp_path, "long", clips) == (None, "longer than 10.24 s")
    assert not (tmp_path / "clips" / "long.flac").exists() and list(clips) == ["clips/short.flac"]
    (tmp_path / "noise.wav").write_bytes(b"RIFF" + bytes(range(256)) * 4)
    with pytest.raises(av_corpus.MediaError, match="noise.wav: ffmpeg failed"):
        av_corpus.to_flac(tmp_path / "noise.wav", tmp_path, "noise", clips)


# ---- recorded speech ------------------------------------------------------------------------------

def write_speech_tree(root):
    """pocketsphinx: 6 read sentences (one without its wav, one of 11 s); klettres: letters in three
    languages (the letter "A" in all three, one file named but absent, one Ogg); ktuberling: words
    in English, French (a theme prefix) and Russian (named by English keys, so left out)."""
    sentences = ["ten of clubs", "four queen of clubs", "seven of hearts", "five five", "he was not an ill disposed young man",
                 "eight of spades"]
    folder = root / "pocketsphinx" / "cards"
    lines = [f"<s> {text}  </s> ({index:03d})" for index, text in enumerate(sentences)]
    (folder).mkdir(parents=True)
    (folder / "cards.transcription").write_text("\n".join(lines) + "\n")
    for index in range(len(sentences)):
        if index != 2:
            tone(folder / f"{index:03d}.wav", 200 + 10 * index, seconds=11 if index == 5 else 0.4)
    klettres = root / "klettres"
    for number, code in enumerate(("fr", "de", "en_GB")):
        sounds = []
        for index, letter in enumerate("ABCDEFGH"):
            sounds.append(f'<sound name="{letter}" file="{code}/alpha/{letter.lower()}.wav" />')
            if not (code == "de" and letter == "H"):
                tone(klettres / code / "alpha" / f"{letter.lower()}.wav", 400 + 100 * number + 7 * index, seconds=0.3)
        syllables = [f'<sound name="{code.upper()}{index}" file="{code}/syllab/s{index}.ogg" />' for index in range(4)]
        for index in range(4):
            tone(klettres / code / "syllab" / f"s{index}.wav", 900 + 50 * number + 11 * index, seconds=0.3)
            to_ogg(klettres / code / "syllab" / f"s{index}.wav", klettres / code / "syllab" / f"s{index}.ogg")
        (klettres / code / "sounds.xml").write_text(
            f'<!-- a comment --><klettres><language code="{code}"><menuitem><label>x</label></menuitem>'
            f'<alphabet>{"".join(sounds)}</alphabet><syllables>{"".join(syllables)}</syllables></language></klettres>')
    ktuberling = root / "ktuberling"
    objects = {"eye": ("eye", "patate_oeil", "eye"), "egypt_camel": ("egypt_camel", "egypte_chameau", "egypt_camel"),
               "egypt_man": ("egypt_man", "egypte_homme", "egypt_man"), "hat": ("hat", "patate_chapeau", "hat"),
               "nose": ("nose", "patate_nez", "nose"), "egypt_well": ("egypt_well", "egypte_puits", "egypt_well")}
    for number, code in enumerate(("en", "fr", "ru")):
        body = []
        for index, (name, files) in enumerate(objects.items()):
            body.append(f'<sound name="{name}" file="{code}/{files[number]}.wav" />')
            tone(ktuberling / code / f"{files[number]}.wav", 1500 + 100 * number + 13 * index, seconds=0.3)
        (ktuberling / f"{code}.soundtheme").write_text(f'<language code="{code}">{"".join(body)}</language>')


def speech_group(record):
    return record.get("object", record["query"].casefold())


def test_speech_corpus(tmp_path):
    write_speech_tree(tmp_path)
    arguments = ["--pocketsphinx-root", str(tmp_path / "pocketsphinx"), "--klettres-root", str(tmp_path / "klettres"),
                 "--ktuberling-root", str(tmp_path / "ktuberling"), "--seed", "5", "--dev-fraction", "0.2",
                 "--test-fraction", "0.2"]
    splits, manifest, every = build_twice(speech_pairs.main, arguments, tmp_path, "audio", ".flac", speech_group)
    queries = {record["query"] for record in every}
    assert {"ten of clubs", "A", "H", "FR0", "oeil", "chameau", "camel", "eye"} <= queries
    assert not {"seven of hearts", "eight of spades"} & queries  # no wav; longer than 10.24 s
    assert not any(record["lang"] == "ru" for record in every)  # named by English keys
    assert manifest["left_out"] == {"longer than 10.24 s": 1}
    assert manifest["files_named_but_absent"] == {"pocketsphinx-testdata": 1, "klettres-data": 1}
    assert manifest["ktuberling_left_out"] == {"named by its English key (the spoken word is not written)": 6}
    assert manifest["synthetic"] is False and manifest["clips"]["longest_seconds"] <= 10.24
    owner = {}
    for split in SPLITS:
        for record in splits[split]:
            owner.setdefault(speech_group(record), set()).add(split)
            assert record["lang"] in {"en", "fr", "de"}
    assert all(len(splits_of) == 1 for splits_of in owner.values())
    letters = [record for record in every if record["query"] == "A"]
    assert len(letters) == 3 and len({record["lang"] for record in letters}) == 3  # one transcript, three voices
    # A planted leak: one transcript moved into a second split must turn the check red.
    moved = next(record for record in splits["train"] if record["query"] == "A")
    planted = {split: list(records) for split, records in splits.items()}
    planted["test"].append(moved)
    assert leaks(planted, lambda record: [record["query"].casefold()])
    speech_pairs.main([*arguments, "--limit", "3", "--output", str(tmp_path / "small")])
    assert sum(len(records) for records in read_splits(tmp_path / "small").values()) <= 9


def test_ktuberling_words():
    assert speech_pairs.spoken_word("fr/patate_boucle-d-oreille.wav", "earring", {"patate"}) == "boucle d oreille"
    assert speech_pairs.spoken_word("id/egypt_grass_rumput.wav", "egypt_grass", {"egypt"}) == "rumput"
    assert speech_pairs.spoken_word("id/pizzeria_olive1_biji-zaitun-muda.wav", "pizzeria_olive1", set()) == "biji zaitun muda"
    assert speech_pairs.spoken_word("sr/naocare_za_sunce.ogg", "sunglasses", set()) == "naocare za sunce"
    assert speech_pairs.spoken_word("en/egypt_arch.ogg", "egypt_arch", {"egypt"}) == "arch"


@pytest.mark.skipif(not (UNPACKED / "pocketsphinx-testdata").is_dir(),
                    reason="pocketsphinx-testdata is not unpacked in data/.debian (speech_pairs.py fetches it)")
def test_real_pocketsphinx_sentences():
    items, missing = speech_pairs.pocketsphinx_items(UNPACKED / "pocketsphinx-testdata" / speech_pairs.PACKAGES["pocketsphinx-testdata"])
    texts = {text for text, _, _ in items}
    assert len(items) == 10 and not missing and "he was not an ill disposed young man" in texts and "ten of clubs" in texts


# ---- the corpora in data/, when built -------------------------------------------------------------

CORPORA = {"speech": ("audio", ".flac", speech_group)}


@pytest.mark.parametrize("corpus", sorted(CORPORA))
def test_built_clip_corpus(corpus):
    folder = ROOT / "data" / corpus
    if not (folder / "manifest.json").exists():
        pytest.skip(f"data/{corpus} is not built (scripts/data/*_pairs.py writes it)")
    side, extension, group_of = CORPORA[corpus]
    splits, manifest = check_clip_corpus(folder, side, extension, group_of, decode=False)
    assert all(splits[split] for split in SPLITS)
    for package in manifest["source"]["packages"]:
        assert package["version"] and package["sha256"] and package["licence"], package
    sample = [record["positives"][0][side] for split in SPLITS for record in splits[split][:20]]
    for path in sample:  # a sample decodes with ffprobe, and with our decoder where it is built
        assert av_corpus.probe(folder / path)["streams"][0]["codec_type"] == side
        if UFORM:
            run = subprocess.run([str(UFORM), "decode", f"--{side}", str(folder / path)], capture_output=True, text=True)
            assert run.returncode == 0 and json.loads(run.stdout)["cells"] > 0, run.stderr
