#!/usr/bin/env python3
"""ktuberling_pairs.py: name -> picture pairs from KTuberling's playgrounds (ktuberling-data, KDE's "potato
guy" stamp toy: a potato's eyes, noses, hats and glasses, and nine more themes of things to stamp on a scene:
butterflies, Christmas, Egypt, the moon, a pizzeria, Robin Hood's Tux, a robot workshop, a train valley).
Each playground is pics/THEME.theme, `<playground gameboard="THEME.svg(z)">` with one `<object name="ID"
sound="SOUND">` per stamp: ID is an element of the SVG, SOUND the name the game speaks when it is dragged.
KDE translates no object name as text (ktuberling.mo holds the interface only); names are localized as
recordings, sounds/LANG.soundtheme `<sound name="SOUND" file="LANG/FILE">`. So the English caption is the
sound name read as words (english_name: the theme's prefix dropped, a few run-together or misspelled names
mended), and Indonesian's is the word its translator wrote into each file name ("id/bow_dasi-kupu-kupu.wav"):
Indonesian spells with plain ASCII letters, so the name loses nothing there; the other soundthemes name their
files in English, or with accents dropped and words run together ("fr/patate_oeil.wav", "es/gafasdesol.wav"),
and give no caption. One record per (picture, language); a translation equal to the English name or to an
earlier picture's caption is left out. Objects with the same English name (11 eyes, a bow tie and an
archer's bow) are one group and only the first is kept, the default theme first, then the others by name:
no caption names two pictures. Each object is rendered alone by librsvg's rsvg-convert (unpacked, as
clipart_pairs.py does), cropped to what it draws, at most 368 px on its longer side, and composited as
stamp_pairs does. 15 % dev, 15 % test by default. The recordings (speech_pairs.py's transcript -> clip pairs;
not paired with these pictures yet) are counted per language in the manifest. Writes
data/ktuberling/{train,dev,test}.jsonl, img/*.png, images.sha256 and manifest.json. Deterministic for a seed.
See docs/data.md.
"""

import collections
import gzip
import math
import pathlib
import re
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
import zlib

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import clipart_pairs  # noqa: E402
import debian_archive  # noqa: E402
import stamp_pairs  # noqa: E402
from gettext_pairs import best_locales  # noqa: E402

SCRIPT = "ktuberling_pairs"
PACKAGE = "ktuberling-data"
SHARE = "usr/share/ktuberling"
DEFAULT_THEME = "default_theme"
SVG = "{http://www.w3.org/2000/svg}"
# SVG elements that draw nothing themselves: kept visible so what the object refers to still resolves.
NOT_DRAWN = {"defs", "metadata", "title", "desc", "style", "script", "clipPath", "mask", "marker", "pattern",
             "linearGradient", "radialGradient", "filter", "symbol"}
# The themes' sound name prefixes; a part of a butterfly or a robot keeps what it belongs to.
PREFIXES = {"butterflies_": "butterfly ", "robot_workshop_": "robot ", "xmas_": "", "egypt_": "", "moon_": "",
            "pizzeria_": "", "tv_": "", "tux-": ""}
# Sound names run together, misspelled, or naming an action rather than the thing drawn.
NAMES = {"egypt_palmtree": "palm tree", "egypt_sphynx": "sphinx", "moon_fallingstar": "falling star",
         "moon_moonwalker": "moon rover", "pizzeria_brocolli": "broccoli", "tv_fireengine": "fire engine",
         "tv_volley_net": "volleyball net", "tux-dowe": "dove", "tux-fly": "flying dove", "tux-shoot": "bow and arrow",
         "tux-wanted": "wanted poster", "frier-tux": "friar Tux", "sherif-tux": "sheriff Tux", "whitch-tux": "witch Tux",
         "robin-tux": "Robin Tux"}
# Languages whose recordings' file names spell the name in full after the sound name (plain ASCII orthography).
FILE_NAME_LANGUAGES = {"id"}
FIRST_PASS = 4096  # the whole board's longer side when finding where the object is
GZIP_FAULTS = (OSError, EOFError, zlib.error)


def read_xml(path):
    """The root element of an XML file (gzip-compressed where it ends in .svgz); raises ValueError naming the
    file when it does not decompress or is not well-formed."""
    path = pathlib.Path(path)
    try:
        with (gzip.open(path) if path.suffix == ".svgz" else open(path, "rb")) as file:
            return ElementTree.parse(file).getroot()
    except ElementTree.ParseError as error:
        raise ValueError(f"{path}: not well-formed XML ({error})") from None
    except GZIP_FAULTS as error:
        if not path.is_file():
            raise ValueError(f"{path}: not there") from None
        raise ValueError(f"{path}: not a readable gzip file ({type(error).__name__}: {error})") from None


def read_listing(path, root_tag, key, item, attributes):
    """(the root's `key`, [tuple of each `item` element's `attributes`, stripped]) of an XML file, in its order;
    raises ValueError naming the file when the root is not <root_tag key=...> or an item lacks an attribute."""
    root = read_xml(path)
    if root.tag != root_tag or not root.get(key):
        raise ValueError(f"{path}: no <{root_tag} {key}=...>")
    items = []
    for number, element in enumerate(root.iter(item), 1):
        for attribute in attributes:
            if not (element.get(attribute) or "").strip():
                raise ValueError(f"{path}: {item} {number} has no {attribute}")
        items.append(tuple(element.get(attribute).strip() for attribute in attributes))
    return root.get(key), items


def read_theme(path):
    """(gameboard file name, [(object id, sound name)]) of a .theme file, in its order."""
    return read_listing(path, "playground", "gameboard", "object", ("name", "sound"))


def read_soundtheme(path):
    """(language code, [(sound name, recording's path under sounds/)]) of a .soundtheme file, in its order (a
    name may have several)."""
    return read_listing(path, "language", "code", "sound", ("name", "file"))


def english_name(sound):
    """The caption of a sound name: NAMES where listed, else the theme's prefix replaced (PREFIXES), `_` and
    `-` as spaces, trailing digits dropped, "tux" as "Tux" ("xmas_tux" -> "Tux", "kid-tux" -> "kid Tux")."""
    if sound in NAMES:
        return NAMES[sound]
    prefix = next((prefix for prefix in PREFIXES if sound.startswith(prefix)), "")
    words = [re.sub(r"\d+$", "", word) for word in re.split(r"[_\-\s]+", PREFIXES.get(prefix, "") + sound[len(prefix):])]
    return " ".join("Tux" if word == "tux" else word for word in words if word)


def file_name_caption(sound, recording):
    """The name a translator wrote into a recording's file name after the sound name, or None where it holds
    none: "id/bow_dasi-kupu-kupu.wav" -> "dasi kupu-kupu". A hyphen between two equal words is kept (a
    reduplicated word, "kupu-kupu", "laki-laki"), any other is a space."""
    stem = pathlib.PurePosixPath(recording).stem
    if not stem.startswith(sound + "_") or not stem[len(sound) + 1:].strip("-"):
        return None
    words = [word for word in stem[len(sound) + 1:].split("-") if word]
    text = words[0]
    for before, word in zip(words, words[1:]):
        text += ("-" if word == before else " ") + word
    return text


def themes(root):
    """[(theme path, gameboard path, [(object id, sound name)])] of root/pics/*.theme: the default theme
    first, then the others by file name."""
    paths = sorted((pathlib.Path(root) / "pics").glob("*.theme"), key=lambda path: (path.stem != DEFAULT_THEME, path.name))
    found = []
    for path in paths:
        gameboard, objects = read_theme(path)
        found.append((path, path.parent / gameboard, objects))
    return found


def soundthemes(root):
    """{language code: (soundtheme path, [(sound name, recording)])} of root/sounds/*.soundtheme."""
    found = {}
    for path in sorted((pathlib.Path(root) / "sounds").glob("*.soundtheme")):
        code, sounds = read_soundtheme(path)
        found[code] = (path, sounds)
    return found


def isolated(tree, parents, element, path):
    """Writes `tree` to `path` with only `element` drawn: every sibling of it and of its ancestors hidden
    (display:none), it and its ancestors shown even where a layer is hidden (the game draws an object by id
    whatever its layer); the tree is left as it was."""
    changed, chain = [], []
    while element is not None:
        chain.append(element)
        element = parents.get(element)
    on_chain = set(chain)

    def restyle(node, display):
        changed.append((node, node.get("style")))
        node.set("style", f"{node.get('style')};display:{display}" if node.get("style") else f"display:{display}")

    for node in chain:
        restyle(node, "inline")
    for node in chain[1:]:
        for child in node:
            if child not in on_chain and child.tag.startswith(SVG) and child.tag[len(SVG):] not in NOT_DRAWN:
                restyle(child, "none")
    tree.write(path, encoding="utf-8")
    for node, style in changed:
        if style is None:
            del node.attrib["style"]
        else:
            node.set("style", style)


def rendered(path, rsvg_convert, environment, size):
    """(RGBA Pillow image of what `path` draws, cropped to it, at most size x size, None), or (None, reason).
    rsvg-convert's --export-id crops some transformed objects short, so the whole board is rendered: once
    to find where the object is, then again zoomed and offset so that place alone fills the page."""
    from PIL import Image

    whole, reason = clipart_pairs.rasterize(path, clipart_pairs.renderer_command(rsvg_convert, FIRST_PASS, "transparent"),
                                            environment, FIRST_PASS, "transparent")
    if whole is None:
        return None, reason
    left, top, right, bottom = whole.getchannel("A").getbbox()
    left, top, right, bottom = max(left - 1, 0), max(top - 1, 0), right + 1, bottom + 1  # a pixel of margin for rounding
    zoom = size / max(right - left, bottom - top)
    command = [str(rsvg_convert), "--width", str(round(whole.width * zoom)), "--height", str(round(whole.height * zoom)),
               "--page-width", str(math.ceil((right - left) * zoom)), "--page-height", str(math.ceil((bottom - top) * zoom)),
               f"--left={-left * zoom:.4f}", f"--top={-top * zoom:.4f}", "--format", "png"]
    image, reason = clipart_pairs.rasterize(path, command, environment, size, "transparent")
    if image is None:
        return None, reason
    image = image.crop(image.getchannel("A").getbbox())
    image.thumbnail((size, size), Image.Resampling.LANCZOS)  # never enlarged: only the margin's rounding can overshoot
    return image, None


def translations(sound, spoken, english, taken, dropped):
    """{language: caption} of a sound name from the file names of `spoken` {language: {sound: recording}},
    each left out (and counted in `dropped`) where absent, too short, the English name or in `taken`."""
    captions = {}
    for language, recordings in sorted(spoken.items()):
        text = file_name_caption(sound, recordings[sound]) if sound in recordings else None
        reason = ("no recording of its sound listed" if sound not in recordings
                  else "no name in its recording's file name" if text is None
                  else "the same as the English name" if text.casefold() == english.casefold()
                  else "fewer than 2 letters (not one CJK or Hangul word sign)" if stamp_pairs.too_short(text)
                  else "the same as an earlier picture's caption" if text.casefold() in taken else None)
        if reason:
            dropped[f"{language}: {reason}"] += 1
        else:
            captions[language] = text
    return captions


def recordings_summary(root, sounds, kept_sounds):
    """{language code: counts} of the recordings: sound names, files listed, files the package holds, their
    formats, and how many kept pictures' sound names have a recording there."""
    summary = {}
    for code, (path, entries) in sorted(sounds.items()):
        present = {name for name, recording in entries if (path.parent / recording).is_file()}
        summary[code] = {"sound_names": len({name for name, _ in entries}), "recordings_listed": len(entries),
                         "recordings_present": sum((path.parent / recording).is_file() for _, recording in entries),
                         "formats": sorted({pathlib.PurePosixPath(recording).suffix.lstrip(".") for _, recording in entries}),
                         "pictures_with_a_recording": len(kept_sounds & present)}
    return summary


def main(argv=None):
    parser = debian_archive.corpus_parser(__doc__.split("\n\n")[0], "ktuberling", "comma-separated language codes")
    parser.set_defaults(dev_fraction=0.15, test_fraction=0.15)
    parser.add_argument("--local-root", help="a folder laid out as /usr/share/ktuberling (pics/, sounds/) to read instead of the package's")
    parser.add_argument("--rsvg-convert", help="an rsvg-convert to run instead of the unpacked librsvg2-bin's")
    parser.add_argument("--size", type=int, default=368, help="the longer side of each PNG at most, in pixels")
    arguments = parser.parse_args(argv)
    started = time.monotonic()
    local = {PACKAGE: arguments.local_root, **{package: arguments.rsvg_convert for package in clipart_pairs.RENDERER_PACKAGES}}
    fetched = debian_archive.fetch_unless_local(SCRIPT, local, arguments.scratch, arguments.refresh)
    root = pathlib.Path(arguments.local_root or fetched[PACKAGE]["root"] / SHARE)
    rsvg_convert, environment, version = clipart_pairs.renderer(fetched, arguments.rsvg_convert)
    languages = debian_archive.uform_languages(SCRIPT, arguments.languages)
    try:
        playgrounds, sounds = themes(root), soundthemes(root)
    except (OSError, ValueError) as error:
        sys.exit(f"{SCRIPT}: {error}")
    if not any(objects for _, _, objects in playgrounds):
        sys.exit(f"{SCRIPT}: no objects in {root / 'pics'}/*.theme")
    chosen = best_locales(set(sounds) & FILE_NAME_LANGUAGES, languages)
    spoken = {language: dict(reversed(sounds[locale][1])) for language, locale in chosen.items()}  # a name's first recording
    dropped, images, groups, taken, kept_sounds, per_theme = collections.Counter(), {}, {}, set(), set(), {}
    debian_archive.fresh_image_folder(arguments.output)
    with tempfile.TemporaryDirectory() as scratch:
        for theme, gameboard, objects in playgrounds:
            try:
                tree = ElementTree.ElementTree(read_xml(gameboard))
            except ValueError as error:
                sys.exit(f"{SCRIPT}: {error}")
            elements = {element.get("id"): element for element in tree.iter() if element.get("id")}
            missing = next((object_id for object_id, _ in objects if object_id not in elements), None)
            if missing:
                sys.exit(f'{SCRIPT}: {gameboard}: no element with id "{missing}" (named by {theme.name})')
            parents = {child: parent for parent in tree.iter() for child in parent}
            per_theme[theme.stem] = {"gameboard": gameboard.name, "objects": len(objects), "kept": 0}
            for object_id, sound in objects:
                english = english_name(sound)
                if english.casefold() in groups:
                    dropped["object: the same English name as an earlier object"] += 1
                    continue
                if stamp_pairs.too_short(english):
                    dropped["object: an English name of fewer than 2 letters"] += 1
                    continue
                isolated(tree, parents, elements[object_id], pathlib.Path(scratch) / "object.svg")
                image, reason = rendered(pathlib.Path(scratch) / "object.svg", rsvg_convert, environment, arguments.size)
                image, reason = stamp_pairs.composited(image) if image is not None else (None, reason)
                if image is None:
                    dropped[reason] += 1
                    continue
                captions = {"en": english, **translations(sound, spoken, english, taken, dropped)}
                taken |= {caption.casefold() for caption in captions.values()}
                kept_sounds.add(sound)
                per_theme[theme.stem]["kept"] += 1
                positive = debian_archive.save_png(image, arguments.output, debian_archive.safe_name(f"{theme.stem}-{object_id}"), images)
                groups[english.casefold()] = [{"query": caption, "positives": [positive], "lang": language, "source": f"{theme.stem}#{object_id}"}
                                              for language, caption in sorted(captions.items(), key=lambda item: item[0] != "en")]
    per_language = collections.Counter(record["lang"] for records in groups.values() for record in records)
    debian_archive.build_image_corpus(
        SCRIPT, "ktuberling", arguments, groups, images,
        {"groups": len(groups), "dropped": dict(sorted(dropped.items())),
         "captions_per_language": dict(sorted(per_language.items())), "themes": per_theme,
         "group": f"the English name (case-folded), its first picture only: {DEFAULT_THEME} first, then the other themes by name",
         "query": "the object's sound name read as words (english_name); Indonesian from the name its recording's file "
                  "carries after the sound name (id.soundtheme); KDE translates no object name as text",
         "image": f"each object rendered alone by {version}, cropped to what it draws, at most {arguments.size} px on the "
                  f"longer side, composited on white, or on grey {stamp_pairs.LIGHT_BACKGROUND[:3]} where light (RGB)",
         "recordings": {"note": "the object names spoken per language (sounds/LANG.soundtheme): speech_pairs.py reads them as "
                                "transcript -> clip pairs; not paired with these pictures yet (a future picture <-> speech source)",
                        "languages": recordings_summary(root, sounds, kept_sounds)}},
        debian_archive.image_source(fetched, local), started)


if __name__ == "__main__":
    main()
