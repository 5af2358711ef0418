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
import espeak_pairs  # noqa: E402
import speech_pairs  # noqa: E402
import video_pairs  # noqa: E402
from test_corpora import check_manifest, leaks, read_splits  # noqa: E402
from test_data_gettext import write_mo  # noqa: E402

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
    positive, seconds = av_corpus.to_audio(tmp_path / "short.wav", tmp_path, "short", clips)
    assert positive == {"audio": "clips/short.flac"} and seconds == pytest.approx(1.25, abs=1e-3)
    stream = av_corpus.probe(tmp_path / "clips" / "short.flac")["streams"][0]
    assert (stream["codec_name"], stream["sample_rate"], stream["channels"]) == ("flac", "16000", 1)
    assert av_corpus.to_audio(tmp_path / "long.wav", tmp_path, "long", clips) == (None, "longer than 10.24 s")
    assert not (tmp_path / "clips" / "long.flac").exists() and list(clips) == ["clips/short.flac"]
    positive, seconds = av_corpus.to_audio(tmp_path / "short.wav", tmp_path, "short", clips, codec="opus")
    probed = av_corpus.probe(tmp_path / "clips" / "short.opus")
    assert positive == {"audio": "clips/short.opus"} and probed["streams"][0]["codec_name"] == "opus"
    assert seconds == pytest.approx(1.25, abs=1e-3)  # the granule position less the pre-skip, exact to a sample
    (tmp_path / "noise.wav").write_bytes(b"RIFF" + bytes(range(256)) * 4)
    with pytest.raises(av_corpus.MediaError, match="noise.wav: ffmpeg failed"):
        av_corpus.to_audio(tmp_path / "noise.wav", tmp_path, "noise", clips)


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
    speech_pairs.main([*arguments, "--limit", "3", "--codec", "opus", "--output", str(tmp_path / "small")])
    small = [record for records in read_splits(tmp_path / "small").values() for record in records]
    assert 0 < len(small) <= 9 and all(record["positives"][0]["audio"].endswith(".opus") for record in small)


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


# ---- synthesized speech ---------------------------------------------------------------------------

FAKE_ESPEAK = '''import hashlib, math, struct, sys
# Stands in for espeak-ng: a 22.05 kHz WAV on stdout, a tone whose pitch and length follow the text;
# the voice "xx" does not exist and a text saying "silence" gives nothing.
arguments = sys.argv[1:]
voice, text = arguments[arguments.index("-v") + 1], arguments[-1]
if voice == "xx":
    sys.exit("Error: voice 'xx' not found")
if "silence" in text:
    sys.exit(0)
pitch = 200 + int(hashlib.sha256((voice + text).encode()).hexdigest()[:4], 16) % 800
count = int(22050 * (0.2 + 0.02 * len(text)))
data = b"".join(struct.pack("<h", int(9000 * math.sin(2 * math.pi * pitch * i / 22050))) for i in range(count))
sys.stdout.buffer.write(b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVEfmt " +
                        struct.pack("<IHHIIHH", 16, 1, 1, 22050, 44100, 2, 16) + b"data" + struct.pack("<I", len(data)) + data)
'''


def write_iso_tree(root):
    """iso-codes' JSON for 12 countries and 4 currencies with German and Japanese names (one name
    untranslated, one that speaks as nothing), and a fake espeak-ng."""
    countries = [{"alpha_2": f"C{index}", "name": f"Country {index}", **({"common_name": f"Land {index}"} if index % 5 == 0 else {})}
                 for index in range(12)]
    currencies = [{"alpha_3": f"X{index}X", "name": f"Money {index}"} for index in range(4)]
    json_root = root / "iso" / "share" / "iso-codes" / "json"
    json_root.mkdir(parents=True)
    (json_root / "iso_3166-1.json").write_text(json.dumps({"3166-1": countries}))
    (json_root / "iso_4217.json").write_text(json.dumps({"4217": currencies}))
    catalogues = {("de", "iso_3166-1"): {f"Country {index}": f"Staat {index}" for index in range(11)} | {"Country 3": "silence"},
                  ("ja", "iso_3166-1"): {f"Country {index}": f"国 {index}" for index in range(12)},
                  ("de", "iso_4217"): {f"Money {index}": f"Geld {index}" for index in range(4)}}
    for (language, domain), entries in catalogues.items():
        write_mo(root / "iso" / "share" / "locale" / language / "LC_MESSAGES" / f"{domain}.mo", entries)
    write_program(root / "espeak-ng", FAKE_ESPEAK)


def write_program(path, source):
    """An executable Python script at `path` (a stand-in for a program the script runs)."""
    path.write_text(f"#!{sys.executable}\n" + source)
    path.chmod(0o755)


def test_espeak_corpus(tmp_path):
    write_iso_tree(tmp_path)
    arguments = ["--iso-codes-root", str(tmp_path / "iso"), "--espeak-ng", str(tmp_path / "espeak-ng"),
                 "--languages", "en,de,ja", "--seed", "2", "--dev-fraction", "0.2", "--test-fraction", "0.2", "--limit", "0"]
    splits, manifest, every = build_twice(espeak_pairs.main, arguments, tmp_path, "audio", ".opus",
                                          lambda record: record["source"])
    assert manifest["synthetic"] is True and manifest["voices"] == {"en": "en-us", "de": "de", "ja": "ja"}
    assert manifest["failed"] == {"espeak-ng -v de gave no speech (empty)": 1}  # "silence"
    assert {record["lang"] for record in every} == {"en", "de", "ja"}
    country0 = sorted(record["query"] for record in every if record["source"] == "iso_3166-1:C0")
    assert country0 == ["Country 0", "Land 0", "Staat 0", "国 0"]  # the common name has no translation
    assert not any(record["query"] == "Staat 11" for record in every) and any(record["query"] == "Geld 2" for record in every)
    planted = {split: list(records) for split, records in splits.items()}
    moved = planted["train"][0]
    planted["test"].append({**moved, "query": moved["query"] + " (copy)"})  # another text of a train country
    assert leaks(planted, lambda record: [record["source"]])
    espeak_pairs.main([*arguments[:-2], "--limit", "9", "--codec", "flac", "--output", str(tmp_path / "small")])
    small = [record for records in read_splits(tmp_path / "small").values() for record in records]
    assert 0 < len(small) <= 9 and all(record["positives"][0]["audio"].endswith(".flac") for record in small)
    with pytest.raises(SystemExit, match="no clip was synthesized"):
        espeak_pairs.main([*arguments, "--languages", "xx", "--output", str(tmp_path / "none")])


ESPEAK_ROOTS = {package: UNPACKED / package for package in espeak_pairs.PACKAGES}
UNPACKED_ESPEAK = all(root.is_dir() for root in ESPEAK_ROOTS.values())


@pytest.mark.skipif(not UNPACKED_ESPEAK and not shutil.which("espeak-ng"),
                    reason="espeak-ng is neither unpacked in data/.debian (espeak_pairs.py fetches it) nor installed "
                           "(scripts/setup.sh --deps-only installs it)")
def test_real_espeak_voices(tmp_path):
    if UNPACKED_ESPEAK:
        libraries = ":".join(str(ESPEAK_ROOTS[package] / espeak_pairs.LIBRARY_FOLDER)
                             for package in ("libespeak-ng1", "libpcaudio0", "libsonic0"))
        synthesize = espeak_pairs.espeak_runner(ESPEAK_ROOTS["espeak-ng"] / "usr" / "bin" / "espeak-ng",
                                                ESPEAK_ROOTS["espeak-ng-data"] / espeak_pairs.LIBRARY_FOLDER, libraries)
    else:
        synthesize = espeak_pairs.espeak_runner(shutil.which("espeak-ng"), None, None)
    texts = {"en": "Germany", "zh": "德国", "ja": "ドイツ", "ar": "ألمانيا", "th": "ประเทศเยอรมนี", "hy": "Գերմանիա", "he": "גרמניה"}
    for language in ["en", *debian_archive.DEFAULT_LANGUAGES]:  # every UForm language has a voice that speaks
        (tmp_path / f"{language}.wav").write_bytes(synthesize(language, texts.get(language, "Deutschland")))
        with wave.open(str(tmp_path / f"{language}.wav")) as file:
            frames = file.readframes(file.getnframes())
        assert file.getframerate() == 22050 and len(frames) > 22050 * 2 * 0.3, language
        assert max(abs(value) for value in struct.unpack(f"<{len(frames) // 2}h", frames)) > 1000, language


# ---- generated and real video ---------------------------------------------------------------------

def triple(record):
    return f"{record['colour']} {record['shape']} {record['motion']}" if record["source"] == "generated" else record["source"]


def write_real_video_tree(root):
    """imageio's request.py with two described files (one absent) and a 5 s clip; a gnome-help page
    whose commented-out <media> has three timed subtitles over a 10 s screencast."""
    images = root / "imageio" / video_pairs.IMAGEIO_IMAGES
    images.mkdir(parents=True)
    request = root / "imageio" / video_pairs.IMAGEIO_REQUEST
    request.parent.mkdir(parents=True)
    request.write_text('EXAMPLE_IMAGES = {\n    "chelsea.png": "The cat",\n    "bird.mp4": "Video file of a bird",\n'
                       '    "absent.mp4": "Video file of nothing",\n}\n')
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=320x240:rate=25:duration=5",
                    "-pix_fmt", "yuv420p", str(images / "bird.mp4")], check=True)
    help_folder = root / "gnome" / video_pairs.GNOME_HELP
    (help_folder / "figures").mkdir(parents=True)
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "mandelbrot=size=200x120:rate=10",
                    "-t", "10", "-c:v", "libvpx-vp9", "-deadline", "realtime", str(help_folder / "figures" / "demo.webm")], check=True)
    (help_folder / "demo.page").write_text('''<page xmlns="http://projectmallard.org/1.0/"><title>Demo</title>
<!-- TODO: update video
<media its:translate="no" type="video" width="500" mime="video/webm" src="figures/demo.webm">
  <tt:tt xmlns:tt="http://www.w3.org/ns/ttml"><tt:body>
    <tt:div begin="1s" end="3s"><tt:p>Type <input>displays</input> in the
       <gui>Activities</gui> overview.</tt:p></tt:div>
    <tt:div begin="3s" end="9.5s"><tt:p>Click &amp; drag the monitor.</tt:p></tt:div>
    <tt:div begin="9.5s" end="10s"><tt:p>Done.</tt:p></tt:div>
  </tt:body></tt:tt></media> -->
<p>Other text.</p></page>''')


def test_video_corpus(tmp_path):
    write_real_video_tree(tmp_path)
    arguments = ["--imageio-root", str(tmp_path / "imageio"), "--gnome-help-root", str(tmp_path / "gnome"),
                 "--limit", "60", "--seed", "3", "--dev-fraction", "0.2", "--test-fraction", "0.2"]
    splits, manifest, every = build_twice(video_pairs.main, arguments, tmp_path, "video", ".webm", triple)
    generated = [record for record in every if record["source"] == "generated"]
    assert len(generated) == 60 and manifest["clips_per_source"]["generated"] == 60
    for record in generated:  # the caption is built from the attributes the clip was drawn with
        assert record["query"].startswith(f"a {record['colour']} {record['shape']} {record['motion']} ")
        assert record["colour"] not in record["background"]
    train = {triple(record) for record in splits["train"]}
    for split in ("dev", "test"):  # held-out combinations: the triple is new, its parts are not
        held = {triple(record) for record in splits[split] if record["source"] == "generated"}
        assert held and not held & train and held == set(manifest["held_out_triples"][split])
    seen = {word for record in splits["train"] if record["source"] == "generated"
            for word in (record["colour"], record["shape"], record["motion"])}
    assert {word for record in splits["test"] if record["source"] == "generated"
            for word in (record["colour"], record["shape"], record["motion"])} <= seen
    real = sorted((record["query"], record["begin"]) for record in every if record["source"] != "generated")
    assert real == [("Click & drag the monitor.", 3.0), ("Click & drag the monitor.", 6.0), ("Done.", 9.5),
                    ("Type displays in the Activities overview.", 1.0), ("a bird", 0.0)]
    streams = av_corpus.probe(tmp_path / "out" / "clips" / "python3-imageio_bird.mp4_0.webm")["streams"][0]
    assert (streams["codec_name"], streams["width"], streams["height"], streams["r_frame_rate"]) == ("vp9", 128, 96, "8/1")
    planted = {split: list(records) for split, records in splits.items()}
    moved = next(record for record in planted["test"] if record["source"] == "generated")
    planted["train"].append({**moved, "query": moved["query"].replace(" on a ", " over a ")})  # a held-out triple in train
    assert leaks(planted, lambda record: [triple(record)])


def test_video_motion_paths():
    """Each motion moves the shape the way its caption says, inside the frame, over the 2 s."""
    import random
    rng = random.Random(0)
    for motion in video_pairs.MOTIONS:
        for shape, (width, height) in video_pairs.SHAPES.items():
            x, y = video_pairs.motion_path(motion, width, height, rng)
            at = {t: (eval(x, {"t": t}), eval(y, {"t": t})) for t in (0.0, 2.0)}  # the expressions are arithmetic in t
            for point in at.values():
                assert 0 <= point[0] <= video_pairs.SIZE - width and 0 <= point[1] <= video_pairs.SIZE - height
            (x0, y0), (x1, y1) = at[0.0], at[2.0]
            expected = {"moving left": x1 < x0 and y1 == y0, "moving right": x1 > x0 and y1 == y0,
                        "moving up": y1 < y0 and x1 == x0, "moving down": y1 > y0 and x1 == x0,
                        "standing still": (x0, y0) == (x1, y1)}
            assert expected[motion], (motion, shape, at)


# ---- the corpora in data/, when built -------------------------------------------------------------

CORPORA = {"speech": ("audio", ".flac", speech_group), "espeak": ("audio", ".opus", lambda record: record["source"]),
           "video": ("video", ".webm", triple)}


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
