#!/usr/bin/env python3
"""scratch_pairs.py: name -> picture pairs from Scratch 1.4's media library (the scratch package, MIT's
programming environment for children). /usr/share/scratch/Media holds Costumes/CATEGORY/NAME.gif|png (sprites
drawn or photographed on a transparent ground: Animals, Fantasy, People, Things, Transportation) and
Backgrounds/CATEGORY/NAME.gif|jpg|png (480x360 stages: Indoors, Nature, Outdoors, Sports), named only by their
file names; Scratch's locale/*.po translate the interface and no media name. So the caption is the file name read
as English words (caption): the extension dropped, `-`, `_` and camelCase boundaries as spaces, lower case;
tokens that only number the costumes of one character dropped (one letter, digits, or one letter and digits:
`dog1-a`, `sunglassF2`, `boy4-walking-c`), then digits at a word's end (`dog1` -> "dog"); a colour word after
the noun moved before it (`car-blue` -> "blue car"); run-together words split, proper names capitalized and a
character's first name replaced by who its pictures show (man, woman, girl, boy) by a table of words (WORDS:
`palmtree` "palm tree", `cassy-dancing-1` "woman dancing"), and names that need more than a word changed
by a table of whole names (NAMES: `beach-malibu` "Malibu beach", `route66` "Route 66"). A name that names
nothing the picture shows (Scratch's creature "gobo", the numbered "fantasy1".."fantasy14") is left out, and so
are Costumes/Letters (letters in ten lettering styles, not things), Scratch's own .sprite files (Squeak objects)
and Backgrounds' xy-grid (outside a category). Pictures with the same caption (dog1-a, dog1-b, dog2-a) are one
group and only the first is kept, Costumes before Backgrounds, categories and files by name: no caption names
two pictures. A costume is its first frame, cropped to what it draws (the alpha channel's box), at most 368 px
on its longer side and composited as stamp_pairs does; a background is only scaled to at most 368 px. Media/* is
CC-BY-SA-3.0 (the copyright file's Files: Media/* paragraph), not the program's GPL-2: the manifest says so. 15 %
dev, 15 % test by default. The sounds (Media/Sounds/CATEGORY/NAME.wav|mp3) are counted in the manifest, not
paired. Writes data/scratch/{train,dev,test}.jsonl, img/*.png, images.sha256 and manifest.json. Deterministic
for a seed. See docs/data.md.
"""

import collections
import fnmatch
import pathlib
import re
import struct
import sys
import time
import warnings
import zlib

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import debian_archive  # noqa: E402
import stamp_pairs  # noqa: E402

SCRIPT = "scratch_pairs"
PACKAGE = "scratch"
SHARE = "usr/share/scratch"
MEDIA = "Media"
MEDIA_FILES = "Media/*"  # what the copyright file's paragraph for the media must cover
KINDS = ("Costumes", "Backgrounds")  # the order in which a caption's first picture is chosen
LEFT_OUT_CATEGORIES = {("Costumes", "Letters")}
PICTURE_SUFFIXES = (".gif", ".png", ".jpg", ".jpeg")
SOUND_SUFFIXES = (".wav", ".mp3", ".aif", ".aiff")
SPRITE_SUFFIX = ".sprite"
# What Pillow raises on a damaged file besides OSError: decoders' own faults surface as these.
PICTURE_FAULTS = (OSError, SyntaxError, ValueError, EOFError, IndexError, struct.error, zlib.error)
SEPARATORS = re.compile(r"[-_\s]+")
CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")
VARIANT = re.compile(r"^[a-z]?\d*$")  # "a", "2", "f1": numbers a character's costumes
COLOURS = {"black", "blue", "brown", "green", "grey", "gray", "orange", "pink", "purple", "red", "white", "yellow"}
# One token (its end digits dropped) read as these words; None: it names nothing the picture shows.
WORDS = {
    # run-together words and short forms
    "beachball": "beach ball", "boycurly": "curly-haired boy", "boyshorts": "boy in shorts",
    "chillin": "chilling", "lego": "Lego brick", "magiccarpet": "magic carpet", "manhole": "manhole cover",
    "mic": "microphone", "monkeyking": "Monkey King", "palmtree": "palm tree", "partyhat": "party hat",
    "royalperson": "royal person", "roundman": "round man", "soccer": "soccer ball", "squaregirl": "square girl",
    "squareguy": "square guy", "sunglass": "sunglasses", "tennisball": "tennis ball", "wizardhat": "wizard hat",
    "womanbun": "woman with a bun", "womanwaving": "woman waving",
    # proper names
    "berkeley": "Berkeley", "mit": "MIT", "thai": "Thai",
    # the People's characters: who their pictures show
    "amon": "man", "anjuli": "woman", "anna": "girl", "calvrett": "man", "cassy": "woman", "chamak": "dancer",
    "dan": "man", "ed": "man", "jay": "man", "jodi": "woman", "mako": "man", "marissa": "girl", "nathan": "man",
    "nina": "woman", "paul": "man", "sam": "boy",
    # Scratch's creature, the category's name, an adjective alone
    "gobo": None, "fantasy": None, "wild": None,
}
# A whole name (its tokens after the variants and end digits are dropped, joined by "-") read as this caption.
NAMES = {
    "atom-playground": "playground", "beach-malibu": "Malibu beach", "bench-with-view": "bench with a view",
    "building-fireproof": "fireproof building", "button-pressed": "pressed button", "car-bug": "Beetle car",
    "car-cow": "car with cow spots", "cassy-phone": "woman on the phone", "football-run": "football player running",
    "football-stand": "football player standing", "girl-basketball": "girl playing basketball",
    "grand-canyon": "Grand Canyon", "hallway-outdoors": "outdoor hallway", "lee-fan": "woman with fans",
    "mako-stop": "man saying stop", "mural-faro": "mural in Faro", "night-city": "city at night",
    "night-city-with-street": "city street at night", "route": "Route 66",  # route66: its digits are its name
    "sail-boat": "sailboat", "street-cleaner-mit": "MIT street cleaner", "the-movies": "movie theater",
    "the-movies-inside": "inside a movie theater", "tug-boat": "tugboat",
}


def name_key(stem):
    """The tokens of a file name's stem that name its picture, joined by "-": split at `-`, `_`, blanks and
    camelCase boundaries, lower case, variant tokens (VARIANT) dropped, then digits at a token's end."""
    tokens = [token.lower() for part in SEPARATORS.split(stem) for token in CAMEL.split(part)]
    return "-".join(re.sub(r"\d+$", "", token) for token in tokens if not VARIANT.match(token))


def caption(stem):
    """The English caption of a media file's stem, or None where it names nothing the picture shows: NAMES of
    its name_key where listed, else each token by WORDS, a colour word after the first moved before it."""
    key = name_key(stem)
    if not key:
        return None
    if key in NAMES:
        return NAMES[key]
    words = [WORDS.get(token, token) for token in key.split("-")]
    if None in words:
        return None
    colours = [word for word in words[1:] if word in COLOURS]
    return " ".join(colours + [word for index, word in enumerate(words) if index == 0 or word not in colours])


def category_folders(media):
    """[(kind, category, folder)] of Media/{Costumes,Backgrounds}/CATEGORY in KINDS order, categories by name,
    LEFT_OUT_CATEGORIES included (the caller counts them)."""
    return [(kind, folder.name, folder) for kind in KINDS
            for folder in sorted(path for path in (pathlib.Path(media) / kind).glob("*") if path.is_dir())]


def files_with(folder, suffixes):
    """The files of a folder (not below it) whose suffix, lower-cased, is one of `suffixes`, by name."""
    return sorted(path for path in pathlib.Path(folder).iterdir() if path.is_file() and path.suffix.lower() in suffixes)


def first_per_caption(media, dropped, categories):
    """[(caption, kind, category, path)] of the pictures of category_folders(media) outside
    LEFT_OUT_CATEGORIES, the first picture of each caption (case-folded) only, in that order; counts each
    category's pictures in `categories` and every picture left out, by reason, in `dropped`."""
    kept, taken = [], set()
    for kind, category, folder in category_folders(media):
        pictures = files_with(folder, PICTURE_SUFFIXES)
        if (kind, category) in LEFT_OUT_CATEGORIES:
            dropped[f"{kind}/{category}: left out (letters in lettering styles, not things)"] += len(pictures) + sum(
                len(files_with(path, PICTURE_SUFFIXES)) for path in sorted(folder.rglob("*")) if path.is_dir())
            continue
        categories[f"{kind}/{category}"] = {"pictures": len(pictures), "kept": 0}
        for path in pictures:
            text = caption(path.stem)
            if text is None:
                dropped["picture: its name names nothing it shows (Scratch's creature, the category)"] += 1
            elif stamp_pairs.too_short(text):
                dropped["picture: a caption of fewer than 2 letters"] += 1
            elif text.casefold() in taken:
                dropped["picture: the same caption as an earlier picture"] += 1
            else:
                taken.add(text.casefold())
                kept.append((text, kind, category, path))
    return kept


def read_picture(path):
    """The first frame of a GIF, PNG or JPEG as an RGBA Pillow image; raises ValueError naming the file when
    Pillow cannot open or decode it, or its header claims a size Pillow takes for a decompression bomb."""
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)  # a damaged header must not allocate gigabytes
            with Image.open(path) as image:
                image.seek(0)
                return image.convert("RGBA")
    except (*PICTURE_FAULTS, Image.DecompressionBombError, Image.DecompressionBombWarning) as error:
        raise ValueError(f"{path}: not a readable picture ({type(error).__name__}: {error})") from None


def media_licence(copyright_file):
    """The License of the last paragraph of a DEP-5 copyright file whose Files cover MEDIA_FILES; raises ValueError
    naming the file when it is not machine-readable or no paragraph covers them."""
    try:
        text = pathlib.Path(copyright_file).read_text(encoding="utf-8", errors="replace")
    except OSError as error:
        raise ValueError(f"{copyright_file}: not readable ({type(error).__name__})") from None
    if not text.startswith("Format:"):
        raise ValueError(f"{copyright_file}: not a machine-readable (DEP-5) copyright file; no licence for {MEDIA_FILES}")
    covering = [fields for fields in debian_archive.stanzas(text)
                if "Files" in fields and any(fnmatch.fnmatch(MEDIA_FILES, pattern) for pattern in fields["Files"].split())]
    licence = covering[-1].get("License", "").split("\n")[0].strip() if covering else ""  # DEP-5: the last match wins
    if not licence:
        raise ValueError(f"{copyright_file}: no Files: paragraph with a License covers {MEDIA_FILES}")
    return licence


def sounds_summary(media):
    """{"files", "formats", "per_category"} of Media/Sounds/CATEGORY/*."""
    per_category, formats = {}, collections.Counter()
    for folder in sorted(path for path in (pathlib.Path(media) / "Sounds").glob("*") if path.is_dir()):
        sounds = files_with(folder, SOUND_SUFFIXES)
        per_category[folder.name] = len(sounds)
        formats.update(path.suffix.lower().lstrip(".") for path in sounds)
    return {"files": sum(per_category.values()), "formats": dict(sorted(formats.items())), "per_category": per_category}


def main(argv=None):
    parser = debian_archive.corpus_parser(__doc__.split("\n\n")[0], "scratch")
    parser.set_defaults(dev_fraction=0.15, test_fraction=0.15)
    parser.add_argument("--local-root", help="a folder laid out as /usr/share/scratch (Media/) to read instead of the package's")
    parser.add_argument("--size", type=int, default=368, help="the longer side of each PNG at most, in pixels")
    arguments = parser.parse_args(argv)
    started = time.monotonic()
    root, source = debian_archive.single_package(SCRIPT, PACKAGE, arguments.local_root, SHARE, arguments)
    media = root / MEDIA
    if not media.is_dir():
        sys.exit(f"{SCRIPT}: {media}: not there")
    if source["packages"]:  # the package's first licence is the program's; the pictures have their own
        try:
            licence = media_licence(root.parent / "doc" / PACKAGE / "copyright")
        except ValueError as error:
            sys.exit(f"{SCRIPT}: {error}")
        record = source["packages"][0]
        if not (record["licence"] or "").startswith(licence):
            record["licence"] = f"{licence} (its {MEDIA_FILES}, the files read; the program {record['licence']})"
    dropped, categories = collections.Counter(), {}
    found = first_per_caption(media, dropped, categories)
    if not found:
        sys.exit(f"{SCRIPT}: no captioned pictures under {media}")
    images, groups = {}, {}
    debian_archive.fresh_image_folder(arguments.output)
    for text, kind, category, path in found:
        try:
            image = stamp_pairs.fitted(read_picture(path), arguments.size, crop=kind == "Costumes")
        except ValueError as error:
            sys.exit(f"{SCRIPT}: {error}")
        image, reason = stamp_pairs.composited(image)
        if image is None:
            dropped[reason] += 1
            continue
        categories[f"{kind}/{category}"]["kept"] += 1
        positive = debian_archive.save_png(image, arguments.output, debian_archive.safe_name(f"{kind}-{category}-{path.stem}"), images)
        groups[text.casefold()] = [{"query": text, "positives": [positive], "lang": "en",
                                    "source": path.relative_to(media).as_posix()}]
    left_out = {"sprites": sum(len(files_with(folder, (SPRITE_SUFFIX,))) for _, _, folder in category_folders(media)),
                "backgrounds_outside_a_category": len(files_with(media / "Backgrounds", PICTURE_SUFFIXES))
                if (media / "Backgrounds").is_dir() else 0}
    debian_archive.build_image_corpus(
        SCRIPT, "scratch", arguments, groups, images,
        {"groups": len(groups), "dropped": dict(sorted(dropped.items())), "categories": categories,
         "left_out": {**left_out, "note": "Scratch's .sprite files (Squeak objects, not read) and Backgrounds/*.gif|jpg|png "
                                          "outside a category (xy-grid, a coordinate grid)"},
         "group": "the caption (case-folded), its first picture only: Costumes before Backgrounds, categories and files by name",
         "query": "the file name read as English words (scratch_pairs.caption: variant tokens and end digits dropped, a "
                  "colour word first, WORDS and NAMES tables); Scratch translates no media name",
         "image": f"a costume's first frame cropped to its alpha channel's box, a background whole, at most {arguments.size} px "
                  f"on the longer side, composited on white, or on grey {stamp_pairs.LIGHT_BACKGROUND[:3]} where light (RGB)",
         "sounds": {**sounds_summary(media), "note": "Media/Sounds/CATEGORY/NAME: named clips, not paired with these "
                                                     "pictures (a future caption <-> clip source)"}},
        source, started)


if __name__ == "__main__":
    main()
