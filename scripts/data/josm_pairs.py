#!/usr/bin/env python3
"""josm_pairs.py: name -> pictogram pairs from JOSM's tagging presets (josm, the OpenStreetMap editor: the named
kinds of mapped things, a bakery, a bench, a fire hydrant, a post box, a playground, each with the pictogram the
editor shows beside it). Everything is read from the package's josm.jar (/usr/share/josm, the layout --local-root
takes): data/defaultpresets.xml lists `<item name="Bakery" icon="presets/shop/groceries/bakery.svg">` inside
`<group name=...>`, the icon's path relative to the jar's images/; data/LOCALE.lang hold the translations in
JOSM's own binary format (read_lang: en.lang every English string, each LOCALE.lang its translations in the same
order). JOSM shows a preset's name as the item's own LOCALE.name attribute, else trc(name_context, name);
preset_captions looks names up the same way, one locale a language as gettext_pairs ranks them (pt before pt_BR,
zh_CN for zh), the first ranked that translates it. Debian builds its .lang files (in the jar, and the same bytes
in josm-l10n) from the interface's strings only, none of the presets' own, so only preset names that are also
interface strings without a context ("Map", "Name") find a translation: the corpus is nearly all English. One
picture per distinct icon file (by its bytes); presets that share an icon are one group, every name a caption of
that picture (the route presets share one). A caption naming two pictures is left out everywhere (the car,
motorcycle and bicycle "Parking"), as is a translation equal to its English name, to another picture's English
name, or to another picture's translation; a caption a picture already has is given once. SVG icons are rendered
by librsvg's rsvg-convert (unpacked, as clipart_pairs.py does) so that what they draw is 256 px on its longer side
(--svg-size, at most --size) whatever their nominal size: the whole page first, then zoomed onto what it draws
(ktuberling_pairs.rendered). PNG icons keep their native size, cropped to what they draw, fitted into --size (368
px), never enlarged. Both are composited as stamp_pairs does. A preset whose icon the jar lacks is counted and
left out; an icon that is malformed or does not render ends the script naming it; one drawn in a single colour (a
swatch) is left out and listed. 15 % dev, 15 % test by default. The licences the SVGs state (cc:license) are
counted in the manifest beside the package's. Writes data/josm/{train,dev,test}.jsonl, img/*.png, images.sha256
and manifest.json. Deterministic for a seed. See docs/data.md.
"""

import collections
import hashlib
import io
import pathlib
import re
import struct
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
import zipfile
import zlib

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import clipart_pairs  # noqa: E402
import debian_archive  # noqa: E402
import ktuberling_pairs  # noqa: E402
import stamp_pairs  # noqa: E402
from gettext_pairs import locale_language, locale_rank  # noqa: E402

SCRIPT = "josm_pairs"
PACKAGE = "josm"
SHARE = "usr/share/josm"
JAR = "josm.jar"
PRESETS = "data/defaultpresets.xml"
LANG_FOLDER = "data/"
ENGLISH = "en"
IMAGES = "images/"  # the presets' icon paths are relative to it
SAME_LENGTH = 0xFFFE  # a .lang entry "translated as the English", no bytes follow
PLURALS_LENGTH = 0xFFFF  # ends the singular entries; plural entries follow
SAME_FORMS = 0xFE  # a plural entry "translated as the English"
LOCAL_NAME = re.compile(r"^([a-z]{2,3}(?:_[A-Za-z]{2,4})?)\.name$")  # de.name, pt_BR.name
ICON_SUFFIXES = (".svg", ".png")  # JOSM tries an icon named without a suffix as SVG, then PNG
NAMESPACES = {"cc": "http://creativecommons.org/ns#", "rdf": "http://www.w3.org/1999/02/22-rdf-syntax-ns#"}
NO_LICENCE = "none stated in the SVG"
ONE_COLOUR = re.compile(r"one colour|fully transparent")  # rasterize's and composited's reasons for a blank picture
# What zipfile and zlib raise on a damaged archive.
ZIP_FAULTS = (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError, struct.error, OSError)

Preset = collections.namedtuple("Preset", "number groups name context icon local_names")


# ---- JOSM's .lang files ---------------------------------------------------------------------------------

def read_lang(data, name):
    """(singular, plural) entries of a JOSM .lang file's bytes, in file order. A singular entry is a big-endian
    16-bit length and that many bytes of UTF-8: its text ("" for the length 0, not translated), or None for the
    length 0xFFFE (translated as the English, no bytes follow); the length 0xFFFF ends the singular entries. A
    plural entry is one byte, its number of forms (0xFE: None, as the English), then each form as a singular
    entry's length and text: a tuple of its forms (() where not translated). Raises ValueError naming `name` and
    the byte where the file is cut short or a text is not UTF-8."""
    singular, plural, at, size = [], [], 0, len(data)

    def text(start):
        if start + 2 > size:
            raise ValueError(f"{name}: cut short at byte {start} (a length needs 2 bytes, {size - start} left)")
        length = int.from_bytes(data[start:start + 2], "big")
        if length in (SAME_LENGTH, PLURALS_LENGTH):
            return length, start + 2
        if start + 2 + length > size:
            raise ValueError(f"{name}: cut short at byte {start} (a text of {length} bytes, {size - start - 2} left)")
        try:
            return data[start + 2:start + 2 + length].decode("utf-8"), start + 2 + length
        except UnicodeDecodeError as error:
            raise ValueError(f"{name}: not UTF-8 at byte {start + 2 + error.start}") from None

    while at < size:
        value, at = text(at)
        if value == PLURALS_LENGTH:
            break
        singular.append(None if value == SAME_LENGTH else value)
    while at < size:
        count, at = data[at], at + 1
        if count == SAME_FORMS:
            plural.append(None)
            continue
        forms = []
        for _ in range(count):
            start = at
            value, at = text(at)
            if not isinstance(value, str):
                raise ValueError(f"{name}: a plural form's length is the marker 0x{value:04X} at byte {start}")
            forms.append(value)
        plural.append(tuple(forms))
    return singular, plural


def translation_table(english, translated, name):
    """{English string: translation} of a translation's read_lang entries against en.lang's, the strings it
    translates only (not the empty ones, not those marked as the English), the first of a repeated English string
    winning as in JOSM. Raises ValueError naming `name` when the two files do not hold as many entries."""
    if any(len(english[part]) != len(translated[part]) for part in (0, 1)):
        raise ValueError(f"{name}: {len(translated[0])} singular and {len(translated[1])} plural entries, but "
                         f"en.lang has {len(english[0])} and {len(english[1])}")
    table = {}
    for source, text in zip(*(entries[0] for entries in (english, translated))):
        if source is not None and text:
            table.setdefault(source, text)
    return table


def preset_translation(table, name, context=None):
    """A preset name as JOSM translates it, trc(context, name) through a translation_table, or None: the key is the
    name with each ' doubled (a MessageFormat pattern, as JOSM writes it) after "_:CONTEXT\\n" when it has a
    context; the translation is read back with '' as '."""
    key = (f"_:{context}\n" if context else "") + name.replace("'", "''")
    text = table.get(key)
    return " ".join(text.replace("''", "'").split()) if text else None


# ---- the presets -----------------------------------------------------------------------------------------

def local_tag(element):
    return element.tag.rpartition("}")[2] if isinstance(element.tag, str) else ""


def read_presets(data, name):
    """[Preset] of a JOSM tagging-preset XML file's bytes, each <item> in file order: its number, the names of
    the <group>s it sits in (outermost first), its name (whitespace folded) and name_context, its icon (None where
    it has none) and {locale: name} of its LOCALE.name attributes. Raises ValueError naming `name` when it is not
    well-formed XML, its root is not <presets>, or a group or an item has no name."""
    try:
        root = ElementTree.fromstring(data)
    except (ElementTree.ParseError, LookupError) as error:  # LookupError: an encoding Python does not know
        raise ValueError(f"{name}: not well-formed XML ({error})") from None
    if local_tag(root) != "presets":
        raise ValueError(f"{name}: the root is <{local_tag(root)}>, not <presets>")
    found, counts = [], collections.Counter()

    def walk(element, groups):
        for child in element:
            tag = local_tag(child)
            if tag not in ("group", "item"):
                continue  # chunks, separators and the items' fields name no preset
            counts[tag] += 1
            text = " ".join((child.get("name") or "").split())
            if not text:
                raise ValueError(f"{name}: {tag} {counts[tag]} (in {'/'.join(groups) or 'the root'}) has no name")
            if tag == "group":
                walk(child, groups + (text,))
                continue
            local_names = {}
            for attribute, value in child.attrib.items():
                locale = LOCAL_NAME.match(attribute)
                if locale and value.strip():
                    local_names[locale.group(1)] = " ".join(value.split())
            found.append(Preset(counts["item"], groups, text, (child.get("name_context") or "").strip() or None,
                                (child.get("icon") or "").strip() or None, local_names))

    walk(root, ())
    return found


def icon_member(icon, members):
    """The jar member an icon path names (relative to images/, as JOSM reads it; tried as .svg, then .png where it
    has no suffix), or None where the jar holds none."""
    base = IMAGES + icon.lstrip("/")
    tries = [base] if pathlib.PurePosixPath(base).suffix else [base + suffix for suffix in ICON_SUFFIXES]
    return next((member for member in tries if member in members), None)


def svg_licence(data, name):
    """The licence an SVG's metadata states (cc:Work's cc:license), or NO_LICENCE; raises ValueError naming
    `name` when it is not well-formed XML."""
    try:
        root = ElementTree.fromstring(data)
    except (ElementTree.ParseError, LookupError) as error:  # LookupError: an encoding Python does not know
        raise ValueError(f"{name}: not well-formed XML ({error})") from None
    licence = root.find(".//cc:Work/cc:license", NAMESPACES)
    resource = licence.get(f"{{{NAMESPACES['rdf']}}}resource", "").strip() if licence is not None else ""
    return resource or NO_LICENCE


# ---- the jar ---------------------------------------------------------------------------------------------

def read_jar(path, languages):
    """(presets, {language: [(locale, table)]} ranked best first, {icon member: bytes}, {locale: counts}) of a
    josm.jar: the presets of data/defaultpresets.xml, the translation tables of the wanted languages'
    data/LOCALE.lang (read_lang against data/en.lang; none where the jar holds no en.lang), and the icons the
    presets name. Raises ValueError naming the jar and the member when it is not a readable zip or a member does
    not parse."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = set(archive.namelist())
            if PRESETS not in members:
                raise ValueError(f"{path}: no {PRESETS}")
            presets = read_presets(archive.read(PRESETS), f"{path}!{PRESETS}")
            locales = sorted(pathlib.PurePosixPath(member).stem for member in members
                             if member.startswith(LANG_FOLDER) and member.endswith(".lang") and member.count("/") == 1)
            tables, summary = collections.defaultdict(list), {}
            english_member = f"{LANG_FOLDER}{ENGLISH}.lang"
            english = read_lang(archive.read(english_member), f"{path}!{english_member}") if english_member in members else None
            for locale in locales:
                language = locale_language(locale)
                if english is None or language not in languages or language == ENGLISH:
                    continue
                member = f"{LANG_FOLDER}{locale}.lang"
                entries = read_lang(archive.read(member), f"{path}!{member}")
                table = translation_table(english, entries, f"{path}!{member}")
                tables[language].append((locale, table))
                summary[locale] = {"strings": len(english[0]), "translated": len(table),
                                   "marked_as_the_english": sum(text is None for text in entries[0])}
            icons = {}
            for preset in presets:
                member = icon_member(preset.icon, members) if preset.icon else None
                if member and member not in icons:
                    icons[member] = archive.read(member)
    except ZIP_FAULTS as error:
        raise ValueError(f"{path}: not a readable zip archive ({type(error).__name__}: {error})") from None
    for language in tables:
        tables[language].sort(key=lambda entry: locale_rank(language, entry[0]))
    return presets, dict(tables), icons, summary


def preset_captions(preset, tables, languages, dropped):
    """{language: caption} of a preset: its English name, and for each other wanted language its LOCALE.name
    attribute (the best ranked locale), else the first ranked locale's .lang translation (preset_translation);
    a language without either counted in `dropped`."""
    captions = {ENGLISH: preset.name}
    for language in sorted(languages - {ENGLISH}):
        own = sorted((locale for locale in preset.local_names if locale_language(locale) == language),
                     key=lambda locale: locale_rank(language, locale))
        text = preset.local_names[own[0]] if own else next(
            (found for _, table in tables.get(language, []) if (found := preset_translation(table, preset.name, preset.context))), None)
        if text:
            captions[language] = text
        else:
            dropped[f"{language}: not translated"] += 1
    return captions


def kept_captions(pictures, dropped):
    """{picture: [(source, language, caption)]} of {picture: [(source, {language: caption})]} (pictures and their
    presets in order) with the captions that name one picture only: a caption shorter than 2 letters, a translation
    equal to its English name, or one a picture already has (another preset's or language's) is left out; an
    English caption of several pictures is left out from all of them, a translation equal to another picture's
    English caption too, and a translation shared by several pictures from all of them. Each counted in `dropped`
    by reason."""
    candidates = {}
    for picture, presets in pictures.items():
        seen, kept = set(), []
        for source, captions in presets:
            for language, caption in sorted(captions.items(), key=lambda item: item[0] != ENGLISH):
                key = caption.casefold()
                reason = ("fewer than 2 letters (not one CJK or Hangul word sign)" if stamp_pairs.too_short(caption)
                          else "the same as the English name" if language != ENGLISH and key == captions[ENGLISH].casefold()
                          else "a caption this picture already has" if key in seen else None)
                if reason:
                    dropped[f"{language}: {reason}"] += 1
                    continue
                seen.add(key)
                kept.append((source, language, caption))
        candidates[picture] = kept
    owners = {True: collections.defaultdict(set), False: collections.defaultdict(set)}  # English or not
    for picture, kept in candidates.items():
        for _, language, caption in kept:
            owners[language == ENGLISH][caption.casefold()].add(picture)
    result = {}
    for picture, kept in candidates.items():
        result[picture] = []
        for source, language, caption in kept:
            key = caption.casefold()
            reason = ("a caption of another picture too" if len(owners[language == ENGLISH][key]) > 1
                      else "the same as another picture's English name" if language != ENGLISH and owners[True][key] - {picture}
                      else None)
            if reason:
                dropped[f"{language}: {reason}"] += 1
            else:
                result[picture].append((source, language, caption))
    return result


# ---- the pictures ----------------------------------------------------------------------------------------

def icon_image(member, data, scratch, rsvg_convert, environment, size, svg_size):
    """(RGB Pillow image of an icon, None) or (None, reason): an SVG rendered so that what it draws is svg_size
    px on its longer side (at most size), a PNG at its native size cropped to what it draws and fitted into size;
    composited as stamp_pairs does."""
    if member.lower().endswith(".svg"):
        path = pathlib.Path(scratch) / "icon.svg"
        path.write_bytes(data)
        image, reason = ktuberling_pairs.rendered(path, rsvg_convert, environment, min(svg_size, size))
    else:
        image, reason = stamp_pairs.opened(io.BytesIO(data), sys.maxsize, "PNG")  # cropped before it is fitted
        image = stamp_pairs.fitted(image, size, crop=True) if image is not None else None
    return stamp_pairs.composited(image) if image is not None else (None, reason)


def main(argv=None):
    parser = debian_archive.corpus_parser(__doc__.split("\n\n")[0], "josm", "comma-separated language codes")
    parser.set_defaults(dev_fraction=0.15, test_fraction=0.15)
    parser.add_argument("--local-root", help=f"a folder laid out as /usr/share/josm ({JAR}) to read instead of the package's")
    parser.add_argument("--rsvg-convert", help="an rsvg-convert to run instead of the unpacked librsvg2-bin's")
    parser.add_argument("--size", type=int, default=368, help="the longer side of each PNG at most, in pixels")
    parser.add_argument("--svg-size", type=int, default=256, help="the longer side of what an SVG icon draws, in pixels")
    arguments = parser.parse_args(argv)
    started = time.monotonic()
    local = {PACKAGE: arguments.local_root, **{package: arguments.rsvg_convert for package in clipart_pairs.RENDERER_PACKAGES}}
    fetched = debian_archive.fetch_unless_local(SCRIPT, local, arguments.scratch, arguments.refresh)
    jar = pathlib.Path(arguments.local_root or fetched[PACKAGE]["root"] / SHARE) / JAR
    rsvg_convert, environment, version = clipart_pairs.renderer(fetched, arguments.rsvg_convert)
    languages = debian_archive.uform_languages(SCRIPT, arguments.languages)
    dropped = collections.Counter()
    try:
        presets, tables, icons, lang_summary = read_jar(jar, languages)
        licences = {member: svg_licence(data, f"{jar}!{member}") for member, data in sorted(icons.items()) if member.endswith(".svg")}
    except (OSError, ValueError) as error:
        sys.exit(f"{SCRIPT}: {error}")
    pictures, first_member = collections.defaultdict(list), {}
    for preset in presets:
        member = icon_member(preset.icon, icons) if preset.icon else None
        if member is None:
            dropped["preset: no icon" if not preset.icon else "preset: its icon is not in the jar"] += 1
            continue
        picture = hashlib.sha256(icons[member]).hexdigest()  # icon files with the same bytes are one picture
        first_member.setdefault(picture, member)
        pictures[picture].append((f"{member[len(IMAGES):]}#{preset.name}", preset_captions(preset, tables, languages, dropped)))
    if not pictures:
        sys.exit(f"{SCRIPT}: no preset with an icon in {jar}!{PRESETS}")
    captions = kept_captions(pictures, dropped)
    images, groups, stems, one_colour, kept_icons = {}, {}, set(), [], []
    debian_archive.fresh_image_folder(arguments.output)
    with tempfile.TemporaryDirectory() as scratch:
        for picture, kept in captions.items():
            member = first_member[picture]
            icon = member[len(IMAGES):]
            if not kept:
                dropped["picture: no caption left"] += 1
                continue
            image, reason = icon_image(member, icons[member], scratch, rsvg_convert, environment, arguments.size, arguments.svg_size)
            if image is None and ONE_COLOUR.search(reason):  # drawn, but a bare swatch (Water: a blue square)
                dropped[reason] += 1
                one_colour.append(icon)
                continue
            if image is None:
                sys.exit(f"{SCRIPT}: {jar}!{member}: does not render ({reason})")
            stem = debian_archive.safe_name(re.sub(r"^presets/", "", icon.rpartition(".")[0]).replace("/", "-"))
            while stem in stems:  # two paths that differ only in unsafe characters
                stem += "_"
            stems.add(stem)
            positive = debian_archive.save_png(image, arguments.output, stem, images)
            kept_icons.append(member)
            groups[icon] = [{"query": caption, "positives": [positive], "lang": language, "source": source}
                            for source, language, caption in kept]
    per_language = collections.Counter(record["lang"] for records in groups.values() for record in records)
    debian_archive.build_image_corpus(
        SCRIPT, "josm", arguments, groups, images,
        {"presets": len(presets), "presets_with_an_icon": sum(len(entries) for entries in pictures.values()),
         "icon_files": len(icons), "pictures": len(pictures), "groups": len(groups), "dropped": dict(sorted(dropped.items())),
         "captions_per_language": dict(sorted(per_language.items())), "left_out_as_one_colour": one_colour,
         "group": "the icon file (by its bytes): every preset drawn with it",
         "query": "the preset's name: English from defaultpresets.xml's <item name>, each other language from the item's "
                  "LOCALE.name, else JOSM's own lookup trc(name_context, name) in data/LOCALE.lang (one locale a language, "
                  "the best ranked that translates it)",
         "translations": {"note": "Debian's .lang files hold JOSM's interface strings only, none of the presets' own; only "
                                  "preset names that are also interface strings find a translation",
                          "files": lang_summary},
         "image": f"SVG icons rendered by {version} so that what they draw is {min(arguments.svg_size, arguments.size)} px on "
                  f"the longer side; PNG icons at their native size, cropped to what they draw, at most {arguments.size} px; "
                  f"composited on white, or on grey {stamp_pairs.LIGHT_BACKGROUND[:3]} where light (RGB)",
         "licences": {"presets and translations": "GPL-2+ (the package's copyright file)",
                      "icons": "public-domain (the package's copyright file: resources/images/presets/*)",
                      "stated_in_the_rendered_svgs": dict(sorted(collections.Counter(licences[member] for member in kept_icons
                                                                                 if member in licences).items())),
                      "rendered_svgs_stating_another_licence": sorted(
                          member[len(IMAGES):] for member in kept_icons if member in licences
                          and not re.search(r"publicdomain", licences[member], re.IGNORECASE) and licences[member] != NO_LICENCE)}},
        debian_archive.image_source(fetched, local), started)


if __name__ == "__main__":
    main()
