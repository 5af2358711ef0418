# test_scratch_corpus.py: scripts/data/scratch_pairs.py on a small media tree written here, offline: file names
# read as captions (values written by hand: variant suffixes, camelCase, a colour moved first, the tables of words and
# names, names that name nothing), one picture per caption (the first: Costumes before Backgrounds, then by name),
# Letters, .sprite files and xy-grid left out, the corpus built twice to the same bytes (costumes cropped to what they
# draw, backgrounds scaled whole, two names on one picture joined into one split, sounds counted), the media licence
# read from a DEP-5 copyright file, bad pictures named with their file, and random byte changes to a picture that
# either read or raise ValueError naming the file. The real package is tried when unpacked in data/.debian; the built
# corpus in data/scratch is checked when built, with planted controls.

import collections
import pathlib
import sys

import pytest
from PIL import Image

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "data"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import scratch_pairs  # noqa: E402
from test_corpora import leaks, read_splits  # noqa: E402
from test_image_corpora import (SPLITS, build_twice, captions_by_source, check_image_corpus, colour,  # noqa: E402
                                corrupted_reads, image_digests, png)

UNPACKED = ROOT / "data" / ".debian" / "root" / scratch_pairs.PACKAGE
REAL = UNPACKED / scratch_pairs.SHARE
BUILT = ROOT / "data" / "scratch"


# ---- names ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("stem, expected", [
    ("dog1-a", "dog"), ("dog2", "dog"), ("elephant", "elephant"), ("boy4-walking-c", "boy walking"),
    ("bird-flying", "bird flying"), ("car-blue", "blue car"), ("hatRed", "red hat"), ("sunglassF3", "sunglasses"),
    ("buttonPressed", "pressed button"), ("fortune_cookie", "fortune cookie"), ("train-tracks3", "train tracks"),
    ("basketball-court1-b", "basketball court"), ("route66", "Route 66"), ("beach-malibu", "Malibu beach"),
    ("building-at-mit", "building at MIT"), ("cassy-dancing-2", "woman dancing"), ("calvrett", "man"),
    ("palmtree", "palm tree"), ("the-movies-inside", "inside a movie theater"), ("hallway_outdoors", "outdoor hallway"),
    ("fantasy12", None), ("gobo2", None), ("wild1", None), ("a1", None), ("x", None)])
def test_caption_reads_a_file_name(stem, expected):
    assert scratch_pairs.caption(stem) == expected


def test_name_key_drops_only_variants():
    assert scratch_pairs.name_key("boy4-walking-e") == "boy-walking"
    assert scratch_pairs.name_key("Running Ant") == "running-ant"
    assert scratch_pairs.name_key("sunglassF1") == "sunglass"
    assert scratch_pairs.name_key("b") == ""


# ---- a media tree written here --------------------------------------------------------------------------

def costume(path, index, size=(32, 24)):
    """A PNG: colour(index) on the left and colour(index + 50) on the right of a patch inside a transparent
    2-pixel frame (one colour alone would be dropped as showing nothing)."""
    png(path, colour(index), size)
    with Image.open(path) as image:
        image.load()
    image.paste(colour(index + 50), (size[0] // 2, 2, size[0] - 2, size[1] - 2))
    image.save(path)


def gif(path, index, size=(30, 20)):
    """A palette GIF: costume's two colours inside a transparent 3-pixel frame (palette index 0)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    image = Image.new("P", size, 0)
    image.putpalette([0, 0, 0, *colour(index)[:3], *colour(index + 50)[:3]] + [0] * 759)
    image.paste(1, (3, 3, size[0] // 2, size[1] - 3))
    image.paste(2, (size[0] // 2, 3, size[0] - 3, size[1] - 3))
    image.save(path, transparency=0)


def photo(path, index, size=(96, 72)):
    """An opaque JPEG of two colours (left and right halves)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    image = Image.new("RGB", size, colour(index)[:3])
    image.paste(colour(index + 1)[:3], (size[0] // 2, 0, size[0], size[1]))
    image.save(path, quality=95)


def write_tree(root):
    """A folder laid out as /usr/share/scratch: Costumes (three dogs, a camelCase button, sunglasses, a rock and
    the same picture as "stone", a blue car, an empty costume, two names that name nothing, a .sprite, two Letters),
    Backgrounds (a lake photograph, Route 66, a rock that an earlier costume names, xy-grid outside a category)
    and three sounds."""
    media = root / "Media"
    costumes, backgrounds = media / "Costumes", media / "Backgrounds"
    for name, index in [("dog1-a", 1), ("dog1-b", 2), ("dog2", 3), ("cat1", 4)]:
        costume(costumes / "Animals" / f"{name}.png", index)
    gif(costumes / "Animals" / "bird-flying.gif", 5)
    for name, index in [("dragon1-a", 6), ("ghost", 7), ("fantasy3", 8), ("gobo1", 9)]:
        costume(costumes / "Fantasy" / f"{name}.png", index)
    Image.new("RGBA", (20, 20), (0, 0, 0, 0)).save(costumes / "Fantasy" / "empty.png")
    for name, index in [("buttonPressed", 10), ("sunglassF1", 11), ("rock", 12)]:
        costume(costumes / "Things" / f"{name}.png", index)
    (costumes / "Things" / "stone.png").write_bytes((costumes / "Things" / "rock.png").read_bytes())
    costume(costumes / "Transportation" / "car-blue.png", 13)
    (costumes / "Transportation" / "Rotating Car.sprite").write_bytes(b"ObjS\x01Stch\x01")
    for letter, index in [("a", 14), ("b", 15)]:
        gif(costumes / "Letters" / "circles" / f"{letter}.gif", index)
    photo(backgrounds / "Nature" / "lake.jpg", 16)
    costume(backgrounds / "Nature" / "route66.png", 17, size=(96, 72))
    photo(backgrounds / "Nature" / "rock.jpg", 18)
    gif(backgrounds / "xy-grid.gif", 19)
    for sound in ("Animal/Dog1.wav", "Animal/Cat.mp3", "Effects/Pop.wav"):
        (media / "Sounds" / sound).parent.mkdir(parents=True, exist_ok=True)
        (media / "Sounds" / sound).write_bytes(b"RIFF")
    return media


def test_one_picture_per_caption_the_first(tmp_path):
    media = write_tree(tmp_path / "share")
    dropped, categories = collections.Counter(), {}
    kept = scratch_pairs.first_per_caption(media, dropped, categories)
    assert [(text, path.relative_to(media).as_posix()) for text, _, _, path in kept] == [
        ("bird flying", "Costumes/Animals/bird-flying.gif"), ("cat", "Costumes/Animals/cat1.png"),
        ("dog", "Costumes/Animals/dog1-a.png"),  # dog1-b and dog2 say "dog" too
        ("dragon", "Costumes/Fantasy/dragon1-a.png"), ("empty", "Costumes/Fantasy/empty.png"),
        ("ghost", "Costumes/Fantasy/ghost.png"),
        ("pressed button", "Costumes/Things/buttonPressed.png"), ("rock", "Costumes/Things/rock.png"),
        ("stone", "Costumes/Things/stone.png"), ("sunglasses", "Costumes/Things/sunglassF1.png"),
        ("blue car", "Costumes/Transportation/car-blue.png"),
        ("lake", "Backgrounds/Nature/lake.jpg"), ("Route 66", "Backgrounds/Nature/route66.png")]  # the costume's "rock" came first
    assert dropped == {"Costumes/Letters: left out (letters in lettering styles, not things)": 2,
                       "picture: its name names nothing it shows (Scratch's creature, the category)": 2,
                       "picture: the same caption as an earlier picture": 3}
    assert categories["Costumes/Animals"] == {"pictures": 5, "kept": 0} and "Costumes/Letters" not in categories


def test_scratch_corpus(tmp_path):
    write_tree(tmp_path / "share")
    arguments = ["--local-root", str(tmp_path / "share"), "--seed", "1", "--dev-fraction", "0.25",
                 "--test-fraction", "0.25", "--size", "64"]
    splits, manifest, every = build_twice(scratch_pairs.main, arguments, tmp_path)
    assert {source: captions["en"] for source, captions in captions_by_source(every).items()} == {
        "Costumes/Animals/bird-flying.gif": "bird flying", "Costumes/Animals/cat1.png": "cat",
        "Costumes/Animals/dog1-a.png": "dog", "Costumes/Fantasy/dragon1-a.png": "dragon", "Costumes/Fantasy/ghost.png": "ghost",
        "Costumes/Things/buttonPressed.png": "pressed button", "Costumes/Things/rock.png": "rock",
        "Costumes/Things/stone.png": "stone", "Costumes/Things/sunglassF1.png": "sunglasses",
        "Costumes/Transportation/car-blue.png": "blue car", "Backgrounds/Nature/lake.jpg": "lake",
        "Backgrounds/Nature/route66.png": "Route 66"}
    assert all(record["lang"] == "en" and len(record["positives"]) == 1 for record in every)
    assert manifest["dropped"] == {"Costumes/Letters: left out (letters in lettering styles, not things)": 2,
                                   "picture: fully transparent (nothing visible)": 1,
                                   "picture: its name names nothing it shows (Scratch's creature, the category)": 2,
                                   "picture: the same caption as an earlier picture": 3}
    assert manifest["categories"] == {
        "Costumes/Animals": {"pictures": 5, "kept": 3}, "Costumes/Fantasy": {"pictures": 5, "kept": 2},
        "Costumes/Things": {"pictures": 4, "kept": 4}, "Costumes/Transportation": {"pictures": 1, "kept": 1},
        "Backgrounds/Nature": {"pictures": 3, "kept": 2}}
    assert manifest["left_out"]["sprites"] == 1 and manifest["left_out"]["backgrounds_outside_a_category"] == 1
    assert {key: manifest["sounds"][key] for key in ("files", "formats", "per_category")} == {
        "files": 3, "formats": {"mp3": 1, "wav": 2}, "per_category": {"Animal": 2, "Effects": 1}}
    assert manifest["groups_joined_by_a_shared_image"] == 1  # rock and stone: one picture
    split_of = {record["query"]: split for split in SPLITS for record in splits[split]}
    assert split_of["rock"] == split_of["stone"]
    assert manifest["source"] == {"packages": [], "local": {"scratch": str(tmp_path / "share")}}
    out = tmp_path / "out" / "img"
    with Image.open(out / "Costumes-Animals-dog1-a.png") as image:  # the transparent frame cropped off, on white
        assert image.mode == "RGB" and image.size == (28, 20) and image.getpixel((0, 0)) == colour(1)[:3]
    with Image.open(out / "Costumes-Animals-bird-flying.png") as image:  # a GIF's transparent index cropped off too
        assert image.size == (24, 14) and image.getpixel((0, 0)) == colour(5)[:3]
    with Image.open(out / "Backgrounds-Nature-lake.png") as image:  # a background scaled whole, never cropped
        assert image.size == (64, 48)
    with Image.open(out / "Backgrounds-Nature-route66.png") as image:  # its transparent frame kept: a background whole
        assert image.size == (64, 48) and image.getpixel((0, 0)) == (255, 255, 255)


def test_scratch_corpus_names_bad_input(tmp_path):
    media = write_tree(tmp_path / "share")
    run = ["--local-root", str(tmp_path / "share"), "--output", str(tmp_path / "out")]
    good = (media / "Costumes" / "Animals" / "cat1.png").read_bytes()
    (media / "Costumes" / "Animals" / "cat1.png").write_bytes(good[: len(good) // 2])
    with pytest.raises(SystemExit, match=r"Animals/cat1\.png: not a readable picture \("):
        scratch_pairs.main(run)
    (media / "Costumes" / "Animals" / "cat1.png").write_bytes(b"not a picture at all")
    with pytest.raises(SystemExit, match=r"Animals/cat1\.png: not a readable picture \(UnidentifiedImageError"):
        scratch_pairs.main(run)
    (media / "Costumes" / "Animals" / "cat1.png").write_bytes(good)
    (media / "Backgrounds" / "Nature" / "lake.jpg").write_bytes(b"\xff\xd8\xff\xe0" + b"\x00" * 40)
    with pytest.raises(SystemExit, match=r"Nature/lake\.jpg: not a readable picture"):
        scratch_pairs.main(run)
    with pytest.raises(SystemExit, match=r"nowhere/Media: not there"):
        scratch_pairs.main(["--local-root", str(tmp_path / "nowhere"), "--output", str(tmp_path / "out")])


@pytest.mark.parametrize("name, write", [("dog.png", lambda path: costume(path, 3)), ("bird.gif", lambda path: gif(path, 5)),
                                         ("lake.jpg", lambda path: photo(path, 16))])
def test_read_picture_survives_corrupt_bytes(tmp_path, name, write):
    """Random byte changes to a valid picture: each read returns or raises ValueError naming the file, nothing else."""
    path = tmp_path / name
    write(path)

    def read(changed):
        path.write_bytes(changed)
        return scratch_pairs.read_picture(path)

    corrupted_reads(path.read_bytes(), read, f"{path}: ", 7, at_start=True)


# ---- the media licence ------------------------------------------------------------------------------

COPYRIGHT = """Format: http://dep.debian.net/deps/dep5/
Upstream-Name: scratch

Files: *
Copyright: MIT
License: GPL-2

Files: Help/* Media/* Projects
Copyright: MIT
License: CC-BY-SA-3.0

License: GPL-2
 text
"""


def test_media_licence_is_the_last_matching_paragraphs(tmp_path):
    path = tmp_path / "copyright"
    path.write_text(COPYRIGHT, encoding="utf-8")
    assert scratch_pairs.media_licence(path) == "CC-BY-SA-3.0"
    path.write_text(COPYRIGHT.replace("Help/* Media/* Projects", "Help/* Projects"), encoding="utf-8")
    assert scratch_pairs.media_licence(path) == "GPL-2"  # the control: only Files: * covers the media then
    path.write_text(COPYRIGHT.replace("Files: *\n", "Files: src/*\n").replace("Help/* Media/* Projects", "Help/*"), encoding="utf-8")
    with pytest.raises(ValueError, match=r"copyright: no Files: paragraph with a License covers Media/\*"):
        scratch_pairs.media_licence(path)
    path.write_text("This package was debianized by someone.\nIt is GPL.\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"copyright: not a machine-readable \(DEP-5\)"):
        scratch_pairs.media_licence(path)
    with pytest.raises(ValueError, match=r"missing: not readable"):
        scratch_pairs.media_licence(tmp_path / "missing")


# ---- the real package ------------------------------------------------------------------------------------

@pytest.mark.skipif(not (REAL / "Media" / "Costumes").is_dir(), reason="scratch is not unpacked in data/.debian "
                                                                      "(scratch_pairs.py fetches it)")
def test_real_package():
    assert scratch_pairs.media_licence(UNPACKED / "usr" / "share" / "doc" / "scratch" / "copyright") == "CC-BY-SA-3.0"
    kept = scratch_pairs.first_per_caption(REAL / "Media", collections.Counter(), {})
    sources = {path.relative_to(REAL / "Media").as_posix(): text for text, _, _, path in kept}
    assert sources["Costumes/Animals/dog1-a.png"] == "dog" and sources["Costumes/Transportation/car-blue.gif"] == "blue car"
    assert sources["Backgrounds/Nature/beach-malibu.jpg"] == "Malibu beach"
    assert not any("/Letters/" in source or source.endswith(".sprite") for source in sources)
    assert scratch_pairs.read_picture(REAL / "Media" / "Costumes" / "Animals" / "cat1-a.gif").mode == "RGBA"


# ---- the corpus in data/scratch, when built ----------------------------------------------------------

def captions_on_two_pictures(splits):
    """The captions (case-folded) that name more than one picture within a split."""
    found = set()
    for split in SPLITS:
        pictures = {}
        for record in splits[split]:
            pictures.setdefault(record["query"].casefold(), set()).update(positive["image"] for positive in record["positives"])
        found |= {text for text, images in pictures.items() if len(images) > 1}
    return found


needs_built = pytest.mark.skipif(not (BUILT / "manifest.json").exists(),
                                 reason="data/scratch is not built (scripts/data/scratch_pairs.py writes it)")


@needs_built
def test_built_corpus():
    splits, manifest = check_image_corpus(BUILT)  # every image listed and named, no caption or image in two splits
    assert all(splits[split] for split in SPLITS)
    assert not captions_on_two_pictures(splits)
    every = [record for split in SPLITS for record in splits[split]]
    assert all((BUILT / positive["image"]).is_file() for record in every for positive in record["positives"])
    assert all(record["lang"] == "en" and record["source"].split("/")[0] in scratch_pairs.KINDS
               and "/Letters/" not in record["source"] for record in every)
    assert len({record["query"].casefold() for record in every}) == len(every)  # one picture a caption, all splits
    for split in SPLITS:
        assert manifest["records"][split]["total"] == len(splits[split]) == manifest["images"]["per_split"][split]
    assert manifest["groups"] == len(every) == manifest["images"]["files"] == sum(
        category["kept"] for category in manifest["categories"].values())
    assert manifest["images"]["distinct_sha256"] == len(set(image_digests(BUILT).values()))
    package = manifest["source"]["packages"][0]
    assert package["package"] == "scratch" and package["version"] and package["sha256"]
    assert package["licence"].startswith("CC-BY-SA-3.0")


@needs_built
def test_built_corpus_checks_can_fail():
    """The controls: a dev record naming another picture with a dev caption, and a test record given train's
    picture, are caught by the same checks."""
    splits, digests = read_splits(BUILT), image_digests(BUILT)
    first, second = splits["dev"][0], splits["dev"][1]
    planted = {**splits, "dev": [*splits["dev"], {**second, "query": first["query"]}]}
    assert captions_on_two_pictures(planted) == {first["query"].casefold()}

    def keys(record):
        return [record["query"].casefold(), *("sha256:" + digests[positive["image"]] for positive in record["positives"])]

    assert not leaks(splits, keys)
    planted = {**splits, "test": [{**splits["test"][0], "positives": splits["train"][0]["positives"]}, *splits["test"][1:]]}
    assert leaks(planted, keys) == {"sha256:" + digests[splits["train"][0]["positives"][0]["image"]]}
