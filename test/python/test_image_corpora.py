# test_image_corpora.py: the image <-> caption corpus scripts of scripts/data (emoji_pairs,
# flag_pairs, fashion_pairs, clipart_pairs, stamp_pairs, gcompris_pairs, art4apps_pairs and the image helpers of
# debian_archive) on small trees
# written here, offline: records of the documented shape with image paths relative to the shard,
# groups kept whole (skin tones with their emoji), no caption and no image (by sha256) in two
# splits, with planted leaks (one picture in two groups, one caption in two groups) that the check
# must catch, manifests that match the files, the same bytes twice. The real font and renderer are
# tried when their packages are unpacked in data/.debian; the built corpora in data/ when built.

import collections
import gzip
import hashlib
import io
import json
import pathlib
import struct
import sys
import zlib

import numpy
import pytest
from PIL import Image

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "data"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import art4apps_pairs  # noqa: E402
import clipart_pairs  # noqa: E402
import debian_archive  # noqa: E402
import emoji_pairs  # noqa: E402
import fashion_pairs  # noqa: E402
import flag_pairs  # noqa: E402
import gcompris_pairs  # noqa: E402
import stamp_pairs  # noqa: E402
from test_corpora import check_manifest, leaks, read_splits  # noqa: E402
from test_data_gettext import write_mo  # noqa: E402

SPLITS = ("train", "dev", "test")
UNPACKED = ROOT / "data" / ".debian" / "root"


def image_digests(folder):
    """{relative path: sha256} of every file under folder/img, read from the files themselves."""
    folder = pathlib.Path(folder)
    return {path.relative_to(folder).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted((folder / "img").iterdir())}


def check_image_corpus(folder, with_query=True):
    """The checks every built image corpus must pass; returns its splits and manifest."""
    manifest = check_manifest(folder)
    splits = read_splits(folder)
    digests = image_digests(folder)
    listed = dict(reversed(line.split("  ")) for line in (pathlib.Path(folder) / "images.sha256").read_text().splitlines())
    assert listed == digests  # every image listed, no image unnamed by a record left behind
    named = set()
    for split in SPLITS:
        for record in splits[split]:
            assert isinstance(record["query"], str) and record["query"]
            assert all(set(positive) == {"image"} for positive in record["positives"]), record
            for positive in record["positives"]:
                path = positive["image"]
                assert path.startswith("img/") and path.endswith(".png") and path.isascii(), path
                named.add(path)
    assert named == set(digests)
    assert manifest["images"]["files"] == len(digests)

    def keys(record):
        found = ["sha256:" + digests[positive["image"]] for positive in record["positives"]]
        return [record["query"].casefold(), *found] if with_query else found

    assert not leaks(splits, keys)
    return splits, manifest


def build_twice(main, arguments, folder, with_query=True):
    """Runs a script into folder/out and folder/again: both must pass check_image_corpus with every
    split non-empty and be the same bytes. Returns the splits, the manifest and every record."""
    main([*arguments, "--output", str(folder / "out")])
    splits, manifest = check_image_corpus(folder / "out", with_query)
    assert all(splits[split] for split in SPLITS)
    main([*arguments, "--output", str(folder / "again")])
    for name in ("train.jsonl", "dev.jsonl", "test.jsonl", "images.sha256", "manifest.json"):
        assert (folder / "out" / name).read_bytes() == (folder / "again" / name).read_bytes(), name
    return splits, manifest, [record for split in SPLITS for record in splits[split]]


def captions_by_source(records):
    """{record's source: {language: query}} of records."""
    captions = collections.defaultdict(dict)
    for record in records:
        captions[record["source"]][record["lang"]] = record["query"]
    return captions


def corrupted_reads(blob, read, named, seed, tries=300, at_start=False):
    """Reads `tries` copies of blob with 1 to 3 random bytes changed (read(changed)): each returns or raises a
    ValueError whose message holds `named` (begins with it, at_start); asserts some were caught (or the check
    proves nothing)."""
    rng, failed = numpy.random.default_rng(seed), 0
    for _ in range(tries):
        changed = bytearray(blob)
        for position in rng.integers(0, len(blob), size=int(rng.integers(1, 4))):
            changed[position] = int(rng.integers(0, 256))
        try:
            read(bytes(changed))
        except ValueError as error:
            assert str(error).startswith(named) if at_start else named in str(error), error
            failed += 1
    assert failed > 0


def split_of_image(splits):
    return {positive["image"]: split for split in SPLITS for record in splits[split] for positive in record["positives"]}


def png(path, colour, size=(32, 24)):
    """A PNG of one colour inside a transparent 2-pixel frame."""
    path.parent.mkdir(parents=True, exist_ok=True)
    image = Image.new("RGBA", size, (0, 0, 0, 0))
    image.paste(colour, (2, 2, size[0] - 2, size[1] - 2))
    image.save(path)


def colour(index):
    return (37 * index % 256, 91 * index % 256, 53 * index % 256, 255)


# ---- shared helpers -----------------------------------------------------------------------------

def test_image_leaks_are_caught_and_shared_images_join_groups():
    images = {"img/a.png": "1" * 64, "img/b.png": "2" * 64, "img/copy_of_a.png": "1" * 64, "img/c.png": "3" * 64}
    keys = debian_archive.image_keys(images)
    records = {"train": [{"query": "a red fox", "positives": [{"image": "img/a.png"}]}],
               "dev": [{"query": "another fox", "positives": [{"image": "img/copy_of_a.png"}]},  # train's picture
                       {"query": "A Red Fox", "positives": [{"image": "img/b.png"}]},  # train's caption
                       {"query": "a blue bird", "positives": [{"image": "img/c.png"}]}],
               "test": []}
    assert leaks({split: list(items) for split, items in records.items()}, keys)  # the control goes red
    assert debian_archive.remove_leaks(records, keys) == {"dev": 2, "test": 0}
    assert [record["query"] for record in records["dev"]] == ["a blue bird"] and not leaks(records, keys)
    # The picture of group "x" recurs in group "z": they become one group, so one split.
    groups = {"x": [{"query": "one", "positives": [{"image": "img/a.png"}]}],
              "y": [{"query": "two", "positives": [{"image": "img/b.png"}]}],
              "z": [{"query": "three", "positives": [{"image": "img/copy_of_a.png"}]}]}
    joined, count = debian_archive.join_groups_sharing_images(groups, images)
    assert count == 1 and sorted(joined) == ["x", "y"] and [record["query"] for record in joined["x"]] == ["one", "three"]
    assert debian_archive.safe_name("science/médecine pills (1).svg") == "science_m_decine_pills_1_.svg"


# ---- emoji --------------------------------------------------------------------------------------

def write_emoji_tree(root):
    """emoji-test.txt with 30 faces (every fifth with two skin tones) and a heart whose CLDR name is
    found without its variation selector, bitmaps named as Noto names them (one missing, two faces
    drawn alike), and German CLDR names of which three are other faces' English names."""
    lines = ["# group: Smileys & Emotion", "1F3FB ; component # 🏻 E1.0 light skin tone"]
    for index in range(30):
        code = 0x1F600 + index
        lines.append(f"{code:X} ; fully-qualified # {chr(code)} E1.0 face number {index}")
        lines.append(f"{code:X} FE0F ; unqualified # {chr(code)} E1.0 face number {index}")
        if index % 5 == 0:
            for tone, word in ((0x1F3FB, "light"), (0x1F3FC, "medium-light")):
                lines.append(f"{code:X} {tone:X} ; fully-qualified # {chr(code)}{chr(tone)} E1.0 "
                             f"face number {index}: {word} skin tone")
    lines.append("2764 FE0F ; fully-qualified # ❤️ E0.6 red heart")
    (root / "emoji-test.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    sequences = [codepoints for codepoints, _ in emoji_pairs.read_emoji_test(root / "emoji-test.txt")]
    twin = sequences.index((0x1F607,))
    for number, sequence in enumerate(sequences):
        if sequence != (0x1F601,):  # no bitmap: reported, not written
            png(root / "bitmaps" / (emoji_pairs.file_stem(sequence) + ".png"), colour(twin if sequence == (0x1F603,) else number))
    annotations, derived = [], []
    for index in range(30):
        name = f"face number {index + 1}" if index in (2, 9, 16) else f"Gesicht {index}"  # a caption of another emoji
        annotations.append(f'<annotation cp="{chr(0x1F600 + index)}">Gesicht | {index}</annotation>'
                           f'<annotation cp="{chr(0x1F600 + index)}" type="tts">{name}</annotation>')
        if index % 5 == 0:
            derived.append(f'<annotation cp="{chr(0x1F600 + index)}{chr(0x1F3FB)}" type="tts">Gesicht {index}: hell</annotation>')
    annotations.append('<annotation cp="❤" type="tts">rotes Herz</annotation>'
                       '<annotation cp="x" type="tts">↑↑↑</annotation>')
    for folder, body in (("annotations", annotations), ("annotationsDerived", derived)):
        path = root / "cldr" / folder / "de.xml"
        path.parent.mkdir(parents=True)
        path.write_text(f'<ldml><annotations>{"".join(body)}</annotations></ldml>', encoding="utf-8")


def test_emoji_corpus(tmp_path):
    write_emoji_tree(tmp_path)
    splits, manifest, every = build_twice(emoji_pairs.main, [
        "--bitmaps", str(tmp_path / "bitmaps"), "--emoji-test", str(tmp_path / "emoji-test.txt"),
        "--cldr-root", str(tmp_path / "cldr"), "--languages", "en,de", "--seed", "3", "--dev-fraction", "0.2",
        "--test-fraction", "0.2"], tmp_path)
    assert {record["lang"] for record in every} == {"en", "de"}
    heart = [record for record in every if record["emoji"] == "❤️"]
    assert sorted(record["query"] for record in heart) == ["red heart", "rotes Herz"]
    assert not any(record["emoji"] == chr(0x1F601) for record in every)
    assert manifest["emoji_without_a_bitmap"] == ["emoji_u1f601 face number 1"]
    owner = split_of_image(splits)
    for index in range(0, 30, 5):  # skin tones share their emoji's split
        stem = f"img/emoji_u{0x1F600 + index:x}"
        assert owner[f"{stem}.png"] == owner[f"{stem}_1f3fb.png"] == owner[f"{stem}_1f3fc.png"]
    assert owner["img/emoji_u1f603.png"] == owner["img/emoji_u1f607.png"]  # drawn alike: one group
    assert manifest["groups_joined_by_a_shared_image"] == 1
    assert manifest["removed_from_dev_and_test_as_leaks"]["dev"] + manifest["removed_from_dev_and_test_as_leaks"]["test"] > 0
    for index in (3, 10, 17):  # each planted caption survives once, for one emoji
        assert sum(record["query"] == f"face number {index}" for record in every) == 1


@pytest.mark.skipif(not (UNPACKED / "fonts-noto-color-emoji" / emoji_pairs.FONT).is_file(),
                    reason="fonts-noto-color-emoji is not unpacked in data/.debian (emoji_pairs.py fetches it)")
def test_real_font_bitmaps():
    pytest.importorskip("fontTools")
    sequences = [(0x1F600,), (0x1F44D, 0x1F3FD), (0x1F1E9, 0x1F1EA), (0x2764, 0xFE0F),
                 (0x1F468, 0x200D, 0x1F469, 0x200D, 0x1F467), (0x10FFFD,)]
    found = emoji_pairs.font_bitmaps(UNPACKED / "fonts-noto-color-emoji" / emoji_pairs.FONT, sequences)
    assert set(found) == set(sequences[:-1])  # a private-use codepoint has no glyph
    pictures = {}
    for sequence, data in found.items():
        with Image.open(io.BytesIO(data)) as image:
            assert image.format == "PNG" and 100 <= min(image.size) and max(image.size) <= 160
            pictures[sequence] = image.convert("RGBA").tobytes()
    assert len(set(pictures.values())) == len(pictures)  # every sequence its own glyph, not a fallback


# ---- flags --------------------------------------------------------------------------------------

def write_flag_tree(root):
    """24 countries (one without a flag, two whose flags are alike), an extra flag without an ISO
    code, German names (two equal to other countries' English names), pt preferred to pt_BR."""
    countries = []
    for index in range(24):
        code = "A" + chr(ord("A") + index)
        country = {"alpha_2": code, "alpha_3": code + "X", "name": f"Country {index}", "numeric": f"{index:03d}"}
        if index % 4 == 0:
            country["official_name"] = f"Republic of Country {index}"
        countries.append(country)
        if index != 23:
            png(root / "flags" / f"{code.lower()}.png", colour(4 if index == 9 else index), size=(40, 30))
    png(root / "flags" / "_olympic.png", colour(50), size=(40, 30))
    json_path = root / "iso" / "share" / "iso-codes" / "json" / "iso_3166-1.json"
    json_path.parent.mkdir(parents=True)
    json_path.write_text(json.dumps({"3166-1": countries}, ensure_ascii=False), encoding="utf-8")
    german = {f"Country {index}": f"Land {index}" for index in range(24)}
    german.update({"Country 2": "Country 7", "Country 12": "Country 19", "Republic of Country 4": "Republik Land 4"})
    locale = root / "iso" / "share" / "locale"
    write_mo(locale / "de" / "LC_MESSAGES" / "iso_3166-1.mo", german)
    write_mo(locale / "pt" / "LC_MESSAGES" / "iso_3166-1.mo", {f"Country {index}": f"País {index}" for index in range(24)})
    write_mo(locale / "pt_BR" / "LC_MESSAGES" / "iso_3166-1.mo", {"Country 1": "Brasil 1"})


def test_flag_corpus(tmp_path):
    write_flag_tree(tmp_path)
    splits, manifest, every = build_twice(flag_pairs.main, [
        "--flags-root", str(tmp_path / "flags"), "--iso-codes-root", str(tmp_path / "iso"), "--languages", "en,de,pt",
        "--seed", "1", "--dev-fraction", "0.2", "--test-fraction", "0.2"], tmp_path)
    assert {record["lang"] for record in every} == {"en", "de", "pt"}
    assert manifest["locale_per_language"] == {"de": "de", "pt": "pt"}
    assert {record["query"] for record in every if record["country"] == "AB"} >= {"Country 1", "Land 1", "País 1"}
    assert {record["query"] for record in every if record["country"] == "AE"} >= {"Republic of Country 4", "Republik Land 4"}
    assert manifest["countries_without_a_flag"] == ["AX"] and manifest["flags_without_an_iso_3166_1_code"] == ["_olympic"]
    assert manifest["groups_joined_by_a_shared_image"] == 1
    owner = split_of_image(splits)
    assert owner["img/ae.png"] == owner["img/aj.png"]  # alike flags, one split
    for name in ("Country 7", "Country 19"):  # the planted captions survive once
        assert sum(record["query"] == name for record in every) == 1


# ---- Fashion-MNIST ------------------------------------------------------------------------------

def write_idx(path, array):
    header = struct.pack(">BBBB", 0, 0, 8, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wb") as file:
        file.write(header + array.astype(numpy.uint8).tobytes())


def write_fashion_tree(root):
    """60 train and 20 test images; test image 0 repeats train image 5, train image 7 repeats 6."""
    rng = numpy.random.default_rng(0)
    train, test = rng.integers(0, 256, (60, 28, 28)), rng.integers(0, 256, (20, 28, 28))
    test[0], train[7] = train[5], train[6]
    write_idx(root / "train-images-idx3-ubyte.gz", train)
    write_idx(root / "train-labels-idx1-ubyte.gz", numpy.arange(60) % 10)
    write_idx(root / "t10k-images-idx3-ubyte.gz", test)
    write_idx(root / "t10k-labels-idx1-ubyte.gz", numpy.arange(20) % 10)


def test_fashion_corpus(tmp_path):
    write_fashion_tree(tmp_path / "fashion")
    splits, manifest, _ = build_twice(fashion_pairs.main, [
        "--dataset-root", str(tmp_path / "fashion"), "--train-limit", "0", "--dev-limit", "10", "--test-limit", "0",
        "--seed", "2"], tmp_path, with_query=False)
    assert len(splits["dev"]) + len(splits["train"]) == 59 and len(splits["test"]) == 19  # both repeats removed once
    removed = manifest["removed_as_duplicate_images_within_a_split"]
    assert sum(removed.values()) + sum(manifest["removed_from_dev_and_test_as_leaks"].values()) == 2
    for split in SPLITS:
        for record in splits[split]:
            index = int(record["positives"][0]["image"].split("-")[1].split(".")[0])
            assert record["query"] == fashion_pairs.CAPTIONS[index % 10]
            with Image.open(tmp_path / "out" / record["positives"][0]["image"]) as image:
                assert image.size == (28, 28) and image.mode == "L"
    assert {record["query"] for record in splits["test"]} <= set(fashion_pairs.CAPTIONS)
    fashion_pairs.main(["--dataset-root", str(tmp_path / "fashion"), "--train-limit", "12", "--dev-limit", "5",
                        "--test-limit", "4", "--output", str(tmp_path / "small")])
    assert [len(part) for part in read_splits(tmp_path / "small").values()] == [12, 5, 4]


# ---- clip art -----------------------------------------------------------------------------------

FAKE_RSVG = '''import re, struct, sys, zlib
# Stands in for rsvg-convert: the SVG's rect colour inside a 2-pixel white frame, as an RGB PNG.
arguments = sys.argv[1:]
text = open(arguments[-1], encoding="utf-8").read()
if "fail-here" in text:
    sys.exit(f"Error reading SVG {arguments[-1]}: XML parse error: planted on line 3")
width, height = (float(re.search(name + r'="([0-9.]+)"', text).group(1)) for name in ("width", "height"))
box = int(arguments[arguments.index("--width") + 1])
columns, rows = round(width * box / max(width, height)), round(height * box / max(width, height))
fill = bytes.fromhex(re.search(r'fill="#([0-9a-f]{6})"', text).group(1))
white = b"\\xff\\xff\\xff"
inner = b"\\x00" + white * 2 + fill * (columns - 4) + white * 2
lines = [b"\\x00" + white * columns] * 2 + [inner] * (rows - 4) + [b"\\x00" + white * columns] * 2
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
sys.stdout.buffer.write(b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", columns, rows, 8, 2, 0, 0, 0)) +
                        chunk(b"IDAT", zlib.compress(b"".join(lines))) + chunk(b"IEND", b""))
'''


def svg(path, title, description="", fill="336699", size=(200, 100), extra=""):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'''<?xml version="1.0"?>
<svg xmlns="http://www.w3.org/2000/svg" xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:cc="http://web.resource.org/cc/"
 xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" width="{size[0]}" height="{size[1]}">{extra}
<metadata><rdf:RDF><cc:Work><dc:title>{title}</dc:title><dc:description>{description}</dc:description>
<dc:publisher><cc:Agent><dc:title>Someone</dc:title></cc:Agent></dc:publisher></cc:Work></rdf:RDF></metadata>
<rect x="0" y="0" width="{size[0]}" height="{size[1]}" fill="#{fill}"/></svg>''', encoding="utf-8")


def write_clipart_tree(root):
    """20 captioned SVGs; one renders like another (a shared picture), one's title is another's
    description (a shared caption), three share a collection's name, one is broken XML, one fails
    to render, one renders as white on white."""
    def fill(index):
        return f"{(40 * index) % 200:02x}{(70 * index) % 200:02x}{(90 * index) % 200:02x}"

    for index in range(20):
        description = "the same words twice" if index == 4 else (f"A drawing of thing {index}" if index % 3 == 0 else "")
        svg(root / "svg" / f"group{index % 4}" / f"thing_{index}.svg", f"thing_{index}", description, fill=fill(index),
            size=(200, 100) if index % 2 else (90, 240))
    svg(root / "svg" / "group0" / "copy_of_thing_5.svg", "a copy of thing 5", fill=fill(5), size=(200, 100))
    svg(root / "svg" / "group1" / "words.svg", "The same words twice", fill="123456")
    for index in range(3):
        svg(root / "svg" / "icons" / f"icon{index}.svg", "Lemon SVG theme", fill=f"a{index}a0a0")
    (root / "svg" / "icons" / "broken.svg").write_text("<svg><unclosed></svg>")
    svg(root / "svg" / "icons" / "fails.svg", "fails to render", extra="<!-- fail-here -->")
    svg(root / "svg" / "icons" / "blank.svg", "a white square", fill="ffffff")
    script = root / "rsvg-convert"
    script.write_text(f"#!{sys.executable}\n" + FAKE_RSVG)
    script.chmod(0o755)


def test_clipart_corpus(tmp_path):
    write_clipart_tree(tmp_path)
    arguments = ["--svg-root", str(tmp_path / "svg"), "--rsvg-convert", str(tmp_path / "rsvg-convert"),
                 "--most-repeats", "2", "--seed", "4", "--dev-fraction", "0.2", "--test-fraction", "0.2"]
    splits, manifest, every = build_twice(clipart_pairs.main, arguments, tmp_path)
    queries = {record["query"] for record in every}
    assert "thing 7" in queries and "A drawing of thing 9" in queries  # underscores become spaces; descriptions are records
    assert not any("Lemon" in query for query in queries) and "a white square" not in queries
    assert sum(query.casefold() == "the same words twice" for query in queries) == 1
    dropped = manifest["dropped"]
    assert dropped["title: on more than 2 SVGs"] == 3 and dropped["SVG: not well-formed XML"] == 1
    assert dropped["rasterize: Error reading SVG FILE: XML parse error"] == 1
    assert dropped["rasterize: one colour (nothing visible)"] == 1
    owner = {record["source"]: split for split in SPLITS for record in splits[split]}
    assert owner["group0/copy_of_thing_5.svg"] == owner["group1/thing_5.svg"]  # rendered alike: one group
    for record in every:
        with Image.open(tmp_path / "out" / record["positives"][0]["image"]) as image:
            assert max(image.size) == 368 and image.mode == "RGB"
    clipart_pairs.main([*arguments, "--limit", "6", "--size", "64", "--output", str(tmp_path / "small")])
    small = [record for part in read_splits(tmp_path / "small").values() for record in part]
    assert 0 < len({record["source"] for record in small}) <= 6


RSVG = UNPACKED / "librsvg2-bin" / clipart_pairs.RSVG_CONVERT


@pytest.mark.skipif(not RSVG.is_file(), reason="librsvg2-bin is not unpacked in data/.debian (clipart_pairs.py fetches it)")
def test_real_rasterizer(tmp_path):
    environment = {"LD_LIBRARY_PATH": str(UNPACKED / "librsvg2-2" / clipart_pairs.LIBRARY_FOLDER)}
    command = clipart_pairs.renderer_command(RSVG, 368, "white")
    (tmp_path / "wide.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg" width="200" height="100">'
                                       '<rect x="50" y="25" width="100" height="50" fill="#ff0000"/></svg>')
    image, reason = clipart_pairs.rasterize(tmp_path / "wide.svg", command, environment, 368, "white")
    assert reason is None and image.size == (368, 184)
    assert image.getpixel((184, 92)) == (255, 0, 0) and image.getpixel((10, 10)) == (255, 255, 255)
    (tmp_path / "broken.svg").write_text("<svg")
    image, reason = clipart_pairs.rasterize(tmp_path / "broken.svg", command, environment, 368, "white")
    assert image is None and reason.startswith("rasterize: Error reading SVG FILE")


# ---- Tux Paint's stamps -------------------------------------------------------------------------

def stamp_text(path, english, translations):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(english + "\n" + "".join(f"{locale}.utf8={text}\n" for locale, text in translations), encoding="utf-8")


def write_stamp_tree(root):
    """24 described stamps in two categories (PNGs with transparent frames, every fifth an SVG, one
    PNG beside an SVG of its stem, one 900 px wide, one light grey), a `_mirror` copy without a
    description, a second stamp with stamp 3's English description, German, Portuguese (pt and
    pt_BR), Chinese (zh_CN and zh_TW), a British English line, a locale outside the UForm languages
    and a caption of one letter."""
    for index in range(24):
        stem = root / ("animals" if index % 2 else "food") / f"thing{index}"
        if index % 5 == 4:
            svg(stem.with_suffix(".svg"), f"thing {index}", fill=f"{(40 * index) % 200:02x}40a0")
        else:
            png(stem.with_suffix(".png"), (240, 240, 230, 255) if index == 10 else colour(index), size=(900, 300) if index == 6 else (40, 30))
        translations = [("ach", f"ach {index}"), ("de", f"Ding {index}"), ("en_GB", f"Thing {index}, British"),
                        ("pt_BR", f"Coisa {index} (Brasil)"), ("pt", f"Coisa {index}"), ("zh_TW", f"東西 {index}"),
                        ("zh_CN", f"东西 {index}")]
        if index == 8:
            translations[1] = ("de", "D!")
        if index == 9:  # one ideograph is a word ("flower"): kept, unlike German's one letter
            translations[-1] = ("zh_CN", "花")
        stamp_text(stem.with_suffix(".txt"), f"A thing number {index}.", translations)
    svg(root / "food" / "thing2.svg", "vector twin of thing 2", fill="00ff00")  # the PNG of this stem is read
    png(root / "food" / "thing2_mirror.png", colour(2), size=(40, 30))  # no description: left out
    png(root / "zoo" / "again.png", colour(40), size=(40, 30))
    stamp_text(root / "zoo" / "again.txt", "A thing number 3.", [("de", "Noch ein Ding")])
    script = root / "rsvg-convert"
    script.write_text(f"#!{sys.executable}\n" + FAKE_RSVG)
    script.chmod(0o755)


def test_stamp_corpus(tmp_path):
    write_stamp_tree(tmp_path / "stamps")
    arguments = ["--stamp-root", str(tmp_path / "stamps"), "--rsvg-convert", str(tmp_path / "stamps" / "rsvg-convert"),
                 "--languages", "en,de,pt,zh", "--seed", "3", "--dev-fraction", "0.2", "--test-fraction", "0.25", "--size", "64"]
    splits, manifest, every = build_twice(stamp_pairs.main, arguments, tmp_path)
    by_source = captions_by_source(every)
    assert by_source["food/thing0"] == {"en": "A thing number 0.", "de": "Ding 0", "pt": "Coisa 0", "zh": "东西 0"}
    assert "de" not in by_source["food/thing8"] and by_source["animals/thing9"]["zh"] == "花"
    assert manifest["dropped"]["de: fewer than 2 letters (not one CJK or Hangul word sign)"] == 1
    assert "zoo/again" not in by_source and "food/thing2_mirror" not in by_source and len(by_source) == 24
    assert manifest["dropped"]["stamp: the same English description as an earlier stamp"] == 1
    assert manifest["dropped"]["stamp: no description"] == 1
    assert manifest["captions_per_language"] == {"de": 23, "en": 24, "pt": 24, "zh": 24}
    for source in by_source:  # each stamp and its captions in one split, one picture each
        owners = {(split, positive["image"]) for split in SPLITS for record in splits[split] if record["source"] == source
                  for positive in record["positives"]}
        assert len(owners) == 1, (source, owners)
    pictures = {record["source"]: tmp_path / "out" / record["positives"][0]["image"] for record in every}
    with Image.open(pictures["food/thing2"]) as image:  # the PNG, not the green SVG; its transparent frame on white
        assert image.mode == "RGB" and image.size == (40, 30)
        assert image.getpixel((0, 0)) == (255, 255, 255) and image.getpixel((20, 15)) == colour(2)[:3]
    with Image.open(pictures["food/thing10"]) as image:  # a light picture: on grey, or it would vanish on white
        assert image.getpixel((0, 0)) == stamp_pairs.LIGHT_BACKGROUND[:3] and image.getpixel((20, 15)) == (240, 240, 230)
    with Image.open(pictures["food/thing6"]) as image:  # shrunk to --size, never enlarged
        assert image.size == (64, 21)
    with Image.open(pictures["food/thing4"]) as image:  # an SVG rendered by the renderer
        assert image.size == (64, 32) and image.getpixel((32, 16)) == (160, 64, 160)
    assert len({split for split in SPLITS if splits[split]}) == 3


def test_too_short_keeps_one_word_sign_only():
    assert [stamp_pairs.too_short(text) for text in ("꽃", "花", "ね", "クマ", "Ox")] == [False] * 5
    assert [stamp_pairs.too_short(text) for text in ("A", "D!", "7", "", "、", "Ä.")] == [True] * 6


def test_stamp_corpus_names_a_bad_description(tmp_path):
    write_stamp_tree(tmp_path / "stamps")
    (tmp_path / "stamps" / "food" / "thing0.txt").write_bytes(b"A thing\nde.utf8=\xff\xfe\n")
    with pytest.raises(SystemExit, match=r"thing0\.txt: not UTF-8"):
        stamp_pairs.main(["--stamp-root", str(tmp_path / "stamps"), "--rsvg-convert", str(tmp_path / "stamps" / "rsvg-convert"),
                          "--output", str(tmp_path / "out")])
    (tmp_path / "stamps" / "food" / "thing0.txt").write_text("de.utf8=Ding\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"thing0\.txt: no English description"):
        stamp_pairs.main(["--stamp-root", str(tmp_path / "stamps"), "--rsvg-convert", str(tmp_path / "stamps" / "rsvg-convert"),
                          "--output", str(tmp_path / "out")])


# ---- GCompris's activities -------------------------------------------------------------------

def write_rcc(path, files):
    """A Qt resource file (format 3) of {"/a/b/name": bytes}, every fourth node's file zlib-compressed."""
    root = {}
    for name, content in files.items():
        node = root
        *folders, leaf = name.strip("/").split("/")
        for folder in folders:
            node = node.setdefault(folder, {})
        node[leaf] = content
    entries, first_child, position = [("", root)], {}, 0
    while position < len(entries):  # breadth first: a directory's children get consecutive indices
        if isinstance(entries[position][1], dict):
            first_child[position] = len(entries)
            entries.extend(sorted(entries[position][1].items()))
        position += 1
    names, data, tree = bytearray(), bytearray(), bytearray()
    for index, (name, node) in enumerate(entries):
        name_at = len(names)
        if index:
            names.extend(struct.pack(">HI", len(name), 0) + name.encode("utf-16-be"))
        if isinstance(node, dict):
            tree.extend(struct.pack(">IHII", name_at, 2, len(node), first_child[index]) + bytes(8))
        else:
            compressed = index % 4 == 0
            blob = struct.pack(">I", len(node)) + zlib.compress(node) if compressed else node
            tree.extend(struct.pack(">IHHHI", name_at, int(compressed), 0, 0, len(data)) + bytes(8))
            data.extend(struct.pack(">I", len(blob)) + blob)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"qres" + struct.pack(">IIIII", 3, 24, 24 + len(tree) + len(names), 24 + len(tree), 0) + tree + names + data)


def write_qm(path, messages):
    """A Qt .qm catalogue of [(context, source, translation)]: a language section, then the messages."""
    body = bytearray()
    for context, source, translation in messages:
        text = translation.encode("utf-16-be")
        body.extend(struct.pack(">BI", 3, len(text)) + text + struct.pack(">BI", 8, 0))
        for tag, value in ((6, source), (7, context)):
            body.extend(struct.pack(">BI", tag, len(value.encode())) + value.encode())
        body.append(1)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gcompris_pairs.QM_MAGIC + struct.pack(">BI", 0xA7, 2) + b"de" + struct.pack(">BI", 0x69, len(body)) + body)


def webp(colour, size=(40, 30)):
    image = Image.new("RGBA", size, (0, 0, 0, 0))
    image.paste(colour, (2, 2, size[0] - 2, size[1] - 2))
    out = io.BytesIO()
    image.save(out, format="WEBP", lossless=True)
    return out.getvalue()


def board(entries):
    """An explore board's QML: entries of (image2 resource, title, text, text2)."""
    items = ",\n".join(f'''        {{
            "image": "qrc:/question.svg",
            "title": qsTr("{title}"),
            "text": qsTr("{text}"),
            "image2": "qrc:{image}",
            "text2": qsTr("{text2}"),
            "x": 0.5
        }}''' for image, title, text, text2 in entries)
    return f"import QtQuick 2.12\nQtObject {{\n    property var tab : [\n{items}\n    ]\n}}\n".encode()


def write_gcompris_tree(root):
    """The four resource files gcompris_pairs reads, small: 14 vocabulary pictures named in English,
    German (de), Portuguese (pt_BR and pt), Chinese (zh_CN and zh_TW) and Hindi (a one-letter name), one
    picture without an English name; two explore boards (the second a light picture), their texts
    translated by German and Brazilian Portuguese catalogues, one entry's text under another board's
    context; categorization with two hammers (the first kept), a measuring tape and an alphabet letter (left out)."""
    words = "/gcompris/src/activities/lang/resource/"
    lang = {f"{words}words_sample/thing{index}.webp": webp(colour(index + 1)) for index in range(15)}
    tables = {"en": {f"thing{index}.ogg": f"thing number {index}" for index in range(14)},
              "de": {f"thing{index}.ogg": f"Ding {index}" for index in range(14)},
              "pt_BR": {f"thing{index}.ogg": f"coisa {index} (Brasil)" for index in range(14)},
              "pt": {f"thing{index}.ogg": f"coisa {index}" for index in range(14)},
              "zh_CN": {"thing3.ogg": "花", "thing4.ogg": "东西"}, "zh_TW": {"thing3.ogg": "東西"},
              "hi": {"thing5.ogg": "क"}}
    lang.update({f"{words}content-{locale}.json": json.dumps(table, ensure_ascii=False).encode() for locale, table in tables.items()})
    write_rcc(root / "rcc" / "lang.rcc", lang)
    for number, activity in enumerate(gcompris_pairs.EXPLORE):
        folder = f"/gcompris/src/activities/{activity}/resource/"
        entries = [(f"{folder}animals/beast{index}.webp", f"Beast {number}{index}", f"The beast {number}{index} says hello.",
                    f"Beast {number}{index}" if index == 1 else f"It has {number}{index} legs") for index in range(3)]
        files = {f"{folder}animals/beast{index}.webp": webp((240, 240, 235, 255) if number == 1 and index == 2 else
                                                            colour(20 + 3 * number + index)) for index in range(3)}
        files[f"{folder}board/board{number + 1}.qml"] = board(entries)
        write_rcc(root / "rcc" / f"{activity}.rcc", files)
    folder = gcompris_pairs.CATEGORY_FOLDER
    write_rcc(root / "rcc" / "categorization.rcc",
              {f"{folder}tools/hammer1.webp": webp(colour(50)), f"{folder}tools/hammer2.webp": webp(colour(51)),
               f"{folder}tools/measuringTape3.webp": webp(colour(52)), f"{folder}alphabets/a.webp": webp(colour(53)),
               f"{folder}tools/README": b"not a picture"})
    write_qm(root / "translations" / "gcompris_de.qm",
             [("board1", "Beast 00", "Bestie 00"), ("board1", "The beast 00 says hello.", "Die Bestie 00 grüßt."),
              ("board2", "Beast 01", "Bestie 01 (falscher Kontext)")])
    write_qm(root / "translations" / "gcompris_pt_BR.qm", [("board1", "Beast 00", "Besta 00")])


def test_gcompris_corpus(tmp_path):
    write_gcompris_tree(tmp_path / "gc")
    arguments = ["--local-root", str(tmp_path / "gc"), "--languages", "en,de,pt,zh,hi", "--seed", "2",
                 "--dev-fraction", "0.2", "--test-fraction", "0.2", "--size", "32"]
    splits, manifest, every = build_twice(gcompris_pairs.main, arguments, tmp_path)
    by_source = collections.defaultdict(lambda: collections.defaultdict(list))
    for record in every:
        by_source[record["source"]][record["lang"]] = sorted([*by_source[record["source"]][record["lang"]], record["query"]])
    assert by_source["words/thing3"] == {"en": ["thing number 3"], "de": ["Ding 3"], "pt": ["coisa 3"], "zh": ["花"]}
    assert by_source["words/thing4"]["zh"] == ["东西"] and "hi" not in by_source["words/thing5"]
    assert "words/thing14" not in by_source and manifest["dropped"]["words: no English name"] == 1
    beast = by_source["explore_farm_animals/beast0"]  # title, second text, text; translated where the board's context has it
    assert beast == {"en": ["Beast 00", "It has 00 legs", "The beast 00 says hello."], "de": ["Bestie 00", "Die Bestie 00 grüßt."],
                     "pt": ["Besta 00"]}
    assert by_source["explore_farm_animals/beast1"] == {"en": ["Beast 01", "The beast 01 says hello."]}  # text2 == title: once
    assert by_source["categorization/hammer"] == {"en": ["hammer"]}
    assert set(by_source) >= {"categorization/measuring tape"} and not any("/a" == key[-2:] for key in by_source)
    hammers = [record for record in every if record["source"] == "categorization/hammer"]
    assert len(hammers) == 1 and hammers[0]["positives"][0]["image"] == "img/categorization-hammer1.png"
    assert manifest["dropped"]["categorization: another picture of a name taken"] == 1
    assert manifest["source"] == {"packages": [], "local": {"gcompris-qt-data": str(tmp_path / "gc")}}
    assert manifest["groups_per_source"] == {"categorization": 2, "explore_farm_animals": 3, "explore_monuments": 3,
                                             "explore_world_animals": 3, "explore_world_music": 3, "words": 14}
    pictures = {record["source"]: tmp_path / "out" / record["positives"][0]["image"] for record in every}
    with Image.open(pictures["words/thing3"]) as image:  # the transparent frame on white, shrunk to --size
        assert image.mode == "RGB" and image.size == (32, 24) and image.getpixel((0, 0)) == (255, 255, 255)
        assert image.getpixel((16, 12)) == colour(4)[:3]
    with Image.open(pictures["explore_world_animals/beast2"]) as image:  # a light picture on grey
        assert image.getpixel((0, 0)) == stamp_pairs.LIGHT_BACKGROUND[:3]


def test_gcompris_readers_name_a_bad_file(tmp_path):
    write_gcompris_tree(tmp_path / "gc")
    lang = tmp_path / "gc" / "rcc" / "lang.rcc"
    blob = lang.read_bytes()
    lang.write_bytes(blob[: len(blob) // 2])
    with pytest.raises(SystemExit, match=r"lang\.rcc: truncated"):
        gcompris_pairs.main(["--local-root", str(tmp_path / "gc"), "--output", str(tmp_path / "out")])
    lang.write_bytes(b"qrez" + blob[4:])
    with pytest.raises(SystemExit, match=r"lang\.rcc: not a Qt resource file"):
        gcompris_pairs.main(["--local-root", str(tmp_path / "gc"), "--output", str(tmp_path / "out")])
    lang.write_bytes(blob)
    catalogue = tmp_path / "gc" / "translations" / "gcompris_de.qm"
    catalogue.write_bytes(catalogue.read_bytes()[:-9])
    with pytest.raises(SystemExit, match=r"gcompris_de\.qm: truncated"):
        gcompris_pairs.main(["--local-root", str(tmp_path / "gc"), "--output", str(tmp_path / "out")])


@pytest.mark.parametrize("reader", ["rcc", "qm"])
def test_gcompris_readers_survive_corrupt_bytes(tmp_path, reader):
    """Random byte changes to a valid file: each read returns or raises ValueError naming the file, nothing else."""
    write_gcompris_tree(tmp_path / "gc")
    path = tmp_path / "gc" / ("rcc/explore_farm_animals.rcc" if reader == "rcc" else "translations/gcompris_de.qm")
    def read(changed):
        path.write_bytes(changed)
        return (gcompris_pairs.read_rcc if reader == "rcc" else gcompris_pairs.read_qm)(path)
    corrupted_reads(path.read_bytes(), read, str(path), 5)


# ---- Art4Apps's pictures in pysiogame --------------------------------------------------------

def write_art4apps_tree(root):
    """Two categories of words with JPEG pictures: English, German, French (its animals list one item
    short: left out for that category), Portuguese, an English (US) list that is not read, a word
    without a picture and a German word of one letter."""
    words = {"animals": ["cat", "baby rabbit", "dog", "owl", "ghost"], "food": [f"dish {index}" for index in range(8)]}
    translations = {"de": {"animals": ["Katze", "Babyhase", "Hund", "E", "Geist"], "food": [f"Gericht {i}" for i in range(8)]},
                    "fr": {"animals": ["chat", "lapereau", "chien", "hibou"], "food": [f"plat {i}" for i in range(8)]},
                    "pt": {"animals": ["gato", "coelhinho", "cão", "coruja", "fantasma"], "food": [f"prato {i}" for i in range(8)]},
                    "en_US": {"animals": ["US cat"] * 5, "food": ["US dish"] * 8}}

    def lists(table):
        return "# -*- coding: utf-8 -*-\n\nd = dict()\n" + "".join(f'd["a4a_{name}"] = {items!r}\n' for name, items in table.items())
    (root / "i18n" / "custom" / "a4a_py").mkdir(parents=True)
    (root / "i18n" / "custom" / "a4a_words.py").write_text(lists(words), encoding="utf-8")
    for locale, table in translations.items():
        (root / "i18n" / "custom" / "a4a_py" / f"{locale}.py").write_text(lists(table), encoding="utf-8")
    for number, (category, items) in enumerate(words.items()):
        for index, word in enumerate(items):
            if word != "ghost":
                path = root / "res" / "images" / "art4apps" / category / f"{word.replace(' ', '_')}.jpg"
                path.parent.mkdir(parents=True, exist_ok=True)
                image = Image.new("RGB", (40, 40), colour(10 * number + index)[:3])
                image.paste((255, 255, 255), (10, 10, 30, 30))  # two colours: a picture of one is dropped
                image.save(path, quality=95)


def test_art4apps_corpus(tmp_path):
    write_art4apps_tree(tmp_path / "game")
    arguments = ["--local-root", str(tmp_path / "game"), "--languages", "en,de,fr,pt", "--seed", "1",
                 "--dev-fraction", "0.25", "--test-fraction", "0.25", "--size", "32"]
    splits, manifest, every = build_twice(art4apps_pairs.main, arguments, tmp_path)
    by_source = captions_by_source(every)
    assert by_source["animals/baby_rabbit"] == {"en": "baby rabbit", "de": "Babyhase", "pt": "coelhinho"}  # fr: one item short
    assert by_source["food/dish_3"] == {"en": "dish 3", "de": "Gericht 3", "fr": "plat 3", "pt": "prato 3"}
    assert "de" not in by_source["animals/owl"] and "animals/ghost" not in by_source and len(by_source) == 12
    assert manifest["dropped"] == {"de: fewer than 2 letters (not one CJK or Hangul word sign)": 1,
                                   "fr: a list of another length than the English (animals)": 1, "word: no picture of its name": 1}
    assert manifest["source"] == {"packages": [], "local": {"pysiogame": str(tmp_path / "game")}}
    with Image.open(tmp_path / "out" / next(record for record in every if record["source"] == "animals/cat")["positives"][0]["image"]) as image:
        assert image.mode == "RGB" and image.size == (32, 32)  # shrunk to --size


def test_art4apps_corpus_names_a_bad_list(tmp_path):
    write_art4apps_tree(tmp_path / "game")
    german = tmp_path / "game" / "i18n" / "custom" / "a4a_py" / "de.py"
    german.write_text('d = dict()\nd["a4a_food"] = [name.upper() for name in ()]\n', encoding="utf-8")
    with pytest.raises(SystemExit, match=r"de\.py:2: a4a_food is not a literal list"):
        art4apps_pairs.main(["--local-root", str(tmp_path / "game"), "--output", str(tmp_path / "out")])
    german.write_text('d = dict()\nd["a4a_food"] = ["Brot", 7]\n', encoding="utf-8")
    with pytest.raises(SystemExit, match=r"de\.py:2: a4a_food is not a list of strings"):
        art4apps_pairs.main(["--local-root", str(tmp_path / "game"), "--output", str(tmp_path / "out")])
    german.write_text('d = dict(\n', encoding="utf-8")
    with pytest.raises(SystemExit, match=r"de\.py: not readable as Python literals"):
        art4apps_pairs.main(["--local-root", str(tmp_path / "game"), "--output", str(tmp_path / "out")])


# ---- the corpora in data/, when built -----------------------------------------------------------

@pytest.mark.parametrize("corpus", ["emoji", "flags", "fashion", "clipart", "stamps", "gcompris", "art4apps", "furniture",
                                    "ktuberling", "freeciv", "scratch", "josm"])
def test_built_image_corpus(corpus):
    folder = ROOT / "data" / corpus
    if not (folder / "manifest.json").exists():
        pytest.skip(f"data/{corpus} is not built (scripts/data/*_pairs.py writes it)")
    splits, manifest = check_image_corpus(folder, with_query=corpus != "fashion")
    assert all(splits[split] for split in SPLITS)
    for package in manifest["source"]["packages"]:
        assert package["version"] and package["sha256"] and package["licence"], package
