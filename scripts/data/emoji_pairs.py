#!/usr/bin/env python3
"""emoji_pairs.py: emoji name -> emoji image pairs. The images are the colour bitmaps of Noto Color
Emoji (fonts-noto-color-emoji, the font's CBDT table, read with fontTools); the names are the
fully-qualified entries of Unicode's emoji-test.txt (unicode-data) in English and the CLDR "tts"
names (unicode-cldr-core, common/annotations and annotationsDerived) in the other languages. One
record per (emoji, language); an emoji's skin-tone variants are grouped with it, so an emoji and
all its names and tones stay in one split. Writes data/emoji/{train,dev,test}.jsonl, img/*.png,
images.sha256 and manifest.json. Deterministic for a seed. See docs/data.md.
"""

import collections
import io
import pathlib
import sys
import time
import xml.etree.ElementTree as ElementTree

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import debian_archive  # noqa: E402

FONT = "usr/share/fonts/truetype/noto/NotoColorEmoji.ttf"
EMOJI_TEST = "usr/share/unicode/emoji/emoji-test.txt"
CLDR = "usr/share/unicode/cldr/common"
SKIN_TONES = range(0x1F3FB, 0x1F400)
VARIATION_SELECTOR = 0xFE0F
INHERITED = "↑↑↑"  # CLDR's "same as the parent locale"


def read_emoji_test(path):
    """[(codepoints, English name)] of the fully-qualified lines of emoji-test.txt, in file order."""
    found = []
    with open(path, encoding="utf-8") as file:
        for line in file:
            if line.startswith("#") or "; fully-qualified" not in line:
                continue
            codes, _, comment = line.partition("#")
            # The comment is "<emoji> E<version> <name>".
            name = comment.strip().split(" ", 2)[2]
            found.append((tuple(int(code, 16) for code in codes.split(";")[0].split()), name))
    return found


def cldr_key(codepoints):
    """The emoji as CLDR's annotations spell it: without the emoji variation selector."""
    return "".join(chr(code) for code in codepoints if code != VARIATION_SELECTOR)


def base_of(codepoints):
    """The split group: the emoji without skin tones or variation selectors ("thumbs up" for 👍🏽)."""
    return "_".join(f"{code:x}" for code in codepoints if code not in SKIN_TONES and code != VARIATION_SELECTOR)


def file_stem(codepoints):
    """Noto's own name for an emoji's bitmap: emoji_u1f44d_1f3fd."""
    return "emoji_u" + "_".join(f"{code:x}" for code in codepoints if code != VARIATION_SELECTOR)


def read_annotations(cldr_root, locale):
    """{emoji: tts name} of CLDR's annotations and annotationsDerived (skin tones, sequences, flags)
    for one locale; names CLDR inherits from a parent ("↑↑↑") are left out."""
    names = {}
    for folder in ("annotations", "annotationsDerived"):
        path = pathlib.Path(cldr_root) / folder / f"{locale}.xml"
        if not path.is_file():
            continue
        for annotation in ElementTree.parse(path).getroot().iter("annotation"):
            text = " ".join((annotation.text or "").split())
            if annotation.get("type") == "tts" and text and text != INHERITED:
                names.setdefault(annotation.get("cp"), text)
    return names


def cldr_locales(cldr_root, languages):
    """The CLDR locales to read: the UForm languages' (their codes are CLDR's base locales: zh is
    Simplified Chinese, pt Brazilian Portuguese), or with "all" every base locale of annotations/."""
    if languages == ["all"]:
        return sorted(path.stem for path in (pathlib.Path(cldr_root) / "annotations").glob("*.xml")
                      if "_" not in path.stem and path.stem not in ("root", "en"))
    return [language for language in languages if language != "en"]


def font_bitmaps(font_path, sequences):
    """{codepoints: PNG bytes} of the font's CBDT colour bitmaps for the sequences it draws: one
    codepoint through the cmap, a sequence through the GSUB ligatures (tried with and without its
    variation selectors), as a shaper would find them."""
    from fontTools.ttLib import TTFont  # only this step needs fontTools

    font = TTFont(font_path)
    cmap = font.getBestCmap()
    ligatures = {}
    for lookup in font["GSUB"].table.LookupList.Lookup:
        if lookup.LookupType == 4:
            for subtable in lookup.SubTable:
                for first, entries in subtable.ligatures.items():
                    for entry in entries:
                        ligatures.setdefault((first, *entry.Component), entry.LigGlyph)
    strike = max(font["CBDT"].strikeData, key=len)
    found = {}
    for sequence in sequences:
        for codes in (sequence, tuple(code for code in sequence if code != VARIATION_SELECTOR)):
            glyphs = tuple(cmap.get(code) for code in codes)
            glyph = glyphs[0] if len(glyphs) == 1 else ligatures.get(glyphs)
            if glyph in strike:
                found[sequence] = bytes(strike[glyph].imageData)
                break
    return found


def folder_bitmaps(folder, sequences):
    """{codepoints: PNG bytes} from a folder of PNGs named as Noto names them (emoji_u1f600.png)."""
    found = {}
    for sequence in sequences:
        path = pathlib.Path(folder) / (file_stem(sequence) + ".png")
        if path.is_file():
            found[sequence] = path.read_bytes()
    return found


def records_by_group(emoji, names_per_language, bitmaps, output, images):
    """{group: [record]}: for each emoji with a bitmap, one record per language that names it,
    English first; the bitmap is written to output/img as RGBA PNG."""
    from PIL import Image

    groups = collections.defaultdict(list)
    for codepoints, english in emoji:
        if codepoints not in bitmaps:
            continue
        with Image.open(io.BytesIO(bitmaps[codepoints])) as bitmap:
            positive = debian_archive.save_png(bitmap.convert("RGBA"), output, file_stem(codepoints), images)
        text = "".join(chr(code) for code in codepoints)
        names = [("en", english)] + [(language, names[cldr_key(codepoints)])
                                     for language, names in names_per_language.items() if cldr_key(codepoints) in names]
        for language, name in names:
            groups[base_of(codepoints)].append({"query": name, "positives": [positive], "lang": language, "emoji": text})
    return dict(groups)


def main(argv=None):
    parser = debian_archive.corpus_parser(__doc__.split("\n\n")[0], "emoji",
                                          "comma-separated language codes (CLDR base locales), or 'all'")
    parser.add_argument("--font", help="a CBDT colour font to read instead of fonts-noto-color-emoji's")
    parser.add_argument("--bitmaps", help="a folder of emoji_u<hex>.png images to use instead of a font")
    parser.add_argument("--emoji-test", help="an emoji-test.txt to read instead of unicode-data's")
    parser.add_argument("--cldr-root",
                        help="a CLDR common/ folder (annotations/, annotationsDerived/) instead of unicode-cldr-core's")
    arguments = parser.parse_args(argv)
    started = time.monotonic()
    local = {"fonts-noto-color-emoji": arguments.font or arguments.bitmaps, "unicode-data": arguments.emoji_test,
             "unicode-cldr-core": arguments.cldr_root}
    fetched = debian_archive.fetch_unless_local("emoji_pairs", local, arguments.scratch, arguments.refresh)
    font = arguments.font or (None if arguments.bitmaps else fetched["fonts-noto-color-emoji"]["root"] / FONT)
    emoji_test = arguments.emoji_test or fetched["unicode-data"]["root"] / EMOJI_TEST
    cldr_root = arguments.cldr_root or fetched["unicode-cldr-core"]["root"] / CLDR
    try:
        emoji = read_emoji_test(emoji_test)
        sequences = [codepoints for codepoints, _ in emoji]
        bitmaps = font_bitmaps(font, sequences) if font else folder_bitmaps(arguments.bitmaps, sequences)
        locales = cldr_locales(cldr_root, arguments.languages.split(","))
        names_per_language = {locale: read_annotations(cldr_root, locale) for locale in locales}
    except (OSError, ValueError, ElementTree.ParseError) as error:
        sys.exit(f"emoji_pairs: {error}")
    missing = [locale for locale, names in names_per_language.items() if not names]
    if missing:
        sys.exit(f"emoji_pairs: CLDR has no annotations for {', '.join(missing)} under {cldr_root}")
    images = {}
    debian_archive.fresh_image_folder(arguments.output)
    groups = records_by_group(emoji, names_per_language, bitmaps, arguments.output, images)
    without = [f"{file_stem(codepoints)} {name}" for codepoints, name in emoji if codepoints not in bitmaps]
    debian_archive.build_image_corpus(
        "emoji_pairs", "emoji", arguments, groups, images,
        {"emoji_fully_qualified": len(emoji), "emoji_with_a_bitmap": len(bitmaps), "emoji_without_a_bitmap": without,
         "emoji_named_per_language": {"en": len(emoji), **{
             locale: sum(1 for codepoints, _ in emoji if cldr_key(codepoints) in names)
             for locale, names in names_per_language.items()}},
         "groups": len(groups), "group": "the emoji without skin tones (its tones join it)",
         "image": "the font's bitmap as RGBA PNG, transparent around the glyph"},
        debian_archive.image_source(fetched, local), started)


if __name__ == "__main__":
    main()
