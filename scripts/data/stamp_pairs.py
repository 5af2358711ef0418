#!/usr/bin/env python3
"""stamp_pairs.py: caption -> picture pairs from Tux Paint's stamps (tuxpaint-stamps-default: about 950
drawings and photographs of animals, food, vehicles, people, plants, buildings and symbols, each with a
one-sentence description translated by people into dozens of languages). A stamp is a PNG or an SVG
(rasterized by librsvg's rsvg-convert, unpacked, as clipart_pairs.py does) beside STEM.txt, whose first
line is the English description and whose `LOCALE.utf8=TEXT` lines are its translations. One record
per (stamp, language): English and each UForm language, one locale a language as gettext_pairs ranks
them (pt before pt_BR, zh_CN for zh). Each picture is fitted into 368 px on its longer side (never
enlarged), on white, or on mid grey where the picture itself is light. Stamps with the same English
description (one letter in four lettering styles, six flowers) are one picture: the first by path, so no caption names two pictures. A stamp without a description (the
`_mirror` copies) is left out. The held-out splits are larger than the other corpora's (10% dev, 15%
test by default) so that picture -> caption asks a hundred pictures or more, not thirteen. Writes
data/stamps/{train,dev,test}.jsonl, img/*.png, images.sha256 and manifest.json. Deterministic for a
seed. See docs/data.md.
"""

import collections
import pathlib
import sys
import time
import unicodedata

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import clipart_pairs  # noqa: E402
import debian_archive  # noqa: E402
from gettext_pairs import locale_language, locale_rank  # noqa: E402

STAMP_ROOT = "usr/share/tuxpaint/stamps"
PICTURE_SUFFIXES = (".png", ".svg")  # a PNG is taken over an SVG of the same stem: it needs no renderer
TRANSLATION = ".utf8="
LIGHT_LUMA, LIGHT_BACKGROUND = 200, (128, 128, 128, 255)
WORD_SIGNS = ("CJK UNIFIED IDEOGRAPH", "CJK COMPATIBILITY IDEOGRAPH", "HANGUL SYLLABLE", "HIRAGANA", "KATAKANA")


def too_short(caption):
    """True for a caption of fewer than 2 letters, unless its one letter is a CJK ideograph, a Hangul
    syllable or a kana (a word by itself: 꽃 "flower", 熊 "bear"); a lone Latin "A" or a digit says nothing."""
    letters = [character for character in caption if character.isalpha()]
    return len(letters) < 2 and not (letters and unicodedata.name(letters[0], "").startswith(WORD_SIGNS))


def read_descriptions(path):
    """{language: description} of one stamp's STEM.txt: its first line as English, then each
    UForm language's best locale; raises ValueError naming the file when it is not UTF-8 or empty."""
    try:
        lines = pathlib.Path(path).read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not UTF-8 ({error.reason} at byte {error.start})") from None
    lines = [line.strip() for line in lines if line.strip()]
    if not lines or TRANSLATION in lines[0]:
        raise ValueError(f"{path}: no English description on its first line")
    found, ranks = {"en": " ".join(lines[0].split())}, {}
    for line in lines[1:]:
        locale, separator, text = line.partition(TRANSLATION)
        language = locale_language(locale) if separator else None
        text = " ".join(text.split())
        if not language or language == "en" or not text:
            continue
        rank = locale_rank(language, locale)
        if language not in ranks or rank < ranks[language]:
            found[language], ranks[language] = text, rank
    return found


def stamps(root):
    """[(stem, picture path, STEM.txt path or None)] under a stamp folder, sorted by stem; a PNG
    is taken over an SVG of the same stem."""
    pictures = {}
    for path in sorted(pathlib.Path(root).rglob("*")):
        if path.suffix.lower() in PICTURE_SUFFIXES and path.is_file():
            stem = path.relative_to(root).with_suffix("").as_posix()
            if stem not in pictures or path.suffix.lower() == ".png":
                pictures[stem] = path
    return [(stem, path, path.with_suffix(".txt") if path.with_suffix(".txt").is_file() else None)
            for stem, path in sorted(pictures.items())]


def captioned(found, languages, dropped):
    """{stem: (picture path, {language: caption})} of the stamps with a description, one stamp per
    distinct English description (the first by stem), too_short captions left out."""
    kept, owner = {}, {}
    for stem, picture, text in found:
        if text is None:
            dropped["stamp: no description"] += 1
            continue
        captions = {}
        for language, caption in read_descriptions(text).items():
            if language not in languages:
                continue
            if too_short(caption):
                dropped[f"{language}: fewer than 2 letters (not one CJK or Hangul word sign)"] += 1
                continue
            captions[language] = caption
        if "en" not in captions:
            dropped["stamp: no English caption left"] += 1
            continue
        key = captions["en"].casefold()
        if key in owner:
            dropped["stamp: the same English description as an earlier stamp"] += 1
            continue
        owner[key] = stem
        kept[stem] = (picture, captions)
    return kept


def on_background(image):
    """An RGBA picture composited into RGB: on white, or on mid grey where its visible pixels are light
    (mean luma over 200: a ghost, a white flag, a lightning bolt would vanish on white)."""
    import numpy
    from PIL import Image

    pixels = numpy.asarray(image, dtype=numpy.float64)
    visible = pixels[pixels[..., 3] > 128]
    luma = float((visible[:, :3] @ numpy.array([0.299, 0.587, 0.114])).mean()) if len(visible) else 0.0
    shade = LIGHT_BACKGROUND if luma > LIGHT_LUMA else (255, 255, 255, 255)
    return Image.alpha_composite(Image.new("RGBA", image.size, shade), image).convert("RGB")


def opened(source, size, kind):
    """(RGBA Pillow image of a path or file object, at most size x size, None), or (None, reason)."""
    from PIL import Image

    try:
        with Image.open(source) as image:
            image = image.convert("RGBA")
    except OSError as error:
        return None, f"{kind}: unreadable ({type(error).__name__})"
    return fitted(image, size), None


def fitted(image, size, crop=False):
    """An RGBA Pillow image cropped to what it draws (its alpha's bounding box) where `crop` and it draws
    anything, then at most size x size."""
    from PIL import Image

    box = image.getchannel("A").getbbox() if crop else None
    image = image.crop(box) if box else image
    if max(image.size) > size:  # never enlarged: the patch grid resizes at encode time
        image.thumbnail((size, size), Image.Resampling.LANCZOS)
    return image


def composited(image):
    """(on_background of an RGBA picture, None), or (None, reason) where nothing of it would be seen."""
    if image.getextrema()[3][1] == 0:
        return None, "picture: fully transparent (nothing visible)"
    image = on_background(image)
    if all(low == high for low, high in image.getextrema()):
        return None, "picture: one colour (nothing visible)"
    return image, None


def picture(path, command, environment, size):
    """(RGB Pillow image at most size x size, None), or (None, reason)."""
    if path.suffix.lower() == ".svg":
        image, reason = clipart_pairs.rasterize(path, command, environment, size, "transparent")
    else:
        image, reason = opened(path, size, "PNG")
    return composited(image) if image is not None else (None, reason)


def main(argv=None):
    parser = debian_archive.corpus_parser(__doc__.split("\n\n")[0], "stamps", "comma-separated language codes")
    parser.set_defaults(dev_fraction=0.10, test_fraction=0.15)
    parser.add_argument("--stamp-root", help="a folder of stamps to read instead of tuxpaint-stamps-default's")
    parser.add_argument("--rsvg-convert", help="an rsvg-convert to run instead of the unpacked librsvg2-bin's")
    parser.add_argument("--size", type=int, default=368, help="the longer side of each PNG, in pixels")
    arguments = parser.parse_args(argv)
    started = time.monotonic()
    local = {"tuxpaint-stamps-default": arguments.stamp_root,
             **{package: arguments.rsvg_convert for package in clipart_pairs.RENDERER_PACKAGES}}
    fetched = debian_archive.fetch_unless_local("stamp_pairs", local, arguments.scratch, arguments.refresh)
    root = pathlib.Path(arguments.stamp_root or fetched["tuxpaint-stamps-default"]["root"] / STAMP_ROOT)
    rsvg_convert, environment, version = clipart_pairs.renderer(fetched, arguments.rsvg_convert)
    languages = debian_archive.uform_languages("stamp_pairs", arguments.languages)
    found = stamps(root)
    if not found:
        sys.exit(f"stamp_pairs: no PNG or SVG stamps under {root}")
    dropped = collections.Counter()
    try:
        kept = captioned(found, languages, dropped)
    except ValueError as error:
        sys.exit(f"stamp_pairs: {error}")
    command = clipart_pairs.renderer_command(rsvg_convert, arguments.size, "transparent")
    images, groups, stems = {}, {}, set()
    debian_archive.fresh_image_folder(arguments.output)
    for stem, (path, captions) in kept.items():
        image, reason = picture(path, command, environment, arguments.size)
        if image is None:
            dropped[reason] += 1
            continue
        name = debian_archive.safe_name(stem.replace("/", "-"))
        while name in stems:
            name += "_"
        stems.add(name)
        positive = debian_archive.save_png(image, arguments.output, name, images)
        groups[stem] = [{"query": caption, "positives": [positive], "lang": language, "source": stem}
                        for language, caption in sorted(captions.items(), key=lambda item: item[0] != "en")]
    per_language = collections.Counter(record["lang"] for records in groups.values() for record in records)
    debian_archive.build_image_corpus(
        "stamp_pairs", "stamps", arguments, groups, images,
        {"stamps": len(found), "stamps_kept": len(groups), "dropped": dict(sorted(dropped.items())),
         "captions_per_language": dict(sorted(per_language.items())),
         "groups": len(groups), "group": "the stamp (one per distinct English description)",
         "query": "the stamp's description: English from STEM.txt's first line, each other language from its "
                  "LOCALE.utf8= line (one locale a language)",
         "image": f"PNG stamps, and SVG stamps rendered by {version}, at most {arguments.size} px on the longer side, "
                  f"composited on white, or on grey {LIGHT_BACKGROUND[:3]} where the visible pixels' mean luma is over "
                  f"{LIGHT_LUMA} (RGB)"},
        debian_archive.image_source(fetched, local), started)


if __name__ == "__main__":
    main()
