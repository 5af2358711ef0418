#!/usr/bin/env python3
"""furniture_pairs.py: name -> picture pairs from Sweet Home 3D's furniture catalogues: sweethome3d-furniture's
five .sh3f catalogues (Scopia, BlendSwap CC-0 and CC-BY, Kator Legaz, Reallusion: furniture, doors and windows,
kitchen and bathroom fittings, lamps, plants, vehicles, people) and the application's own default catalogue in
sweethome3d.jar (the sweethome3d package). Both install under /usr/share/sweethome3d. A catalogue is a zip
archive: BASE.properties (Java properties: name#N, icon#N, category#N...) lists its items, each with a PNG icon
inside the archive, and BASE_LOCALE.properties give name#N per locale (read_properties reads them as Java does).
The caption is the item's name alone: the category names a room or a shop section ("Living room", "Doors and
windows"), which the icon does not show. One record per (picture, language); English from BASE.properties, each
other UForm language from one locale as gettext_pairs ranks them (pt before pt_PT, zh_CN for zh, zh_TW left
out); a translation that is empty, too short or the same as the English name (the Vietnamese and Chinese
catalogues copy many English names untranslated) is left out. Items with the same English name (case-folded)
are one group, and only the first is kept, the default catalogue first, then the .sh3f files by name: no
caption names two pictures. Icons are composited as stamp_pairs does. 15 % dev, 15 % test by
default. Writes data/furniture/{train,dev,test}.jsonl, img/*.png, images.sha256 and manifest.json.
Deterministic for a seed. See docs/data.md.
"""

import collections
import io
import pathlib
import re
import struct
import sys
import zipfile
import zlib

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import debian_archive  # noqa: E402
import stamp_pairs  # noqa: E402
from gettext_pairs import best_locales  # noqa: E402

SCRIPT = "furniture_pairs"
PACKAGE = "sweethome3d-furniture"
APPLICATION = "sweethome3d"
SHARE = "usr/share/sweethome3d"  # both packages install here
FURNITURE = "furniture"
JAR = "sweethome3d.jar"
CATALOGUE = "PluginFurnitureCatalog"
DEFAULT_CATALOGUE = "com/eteks/sweethome3d/io/DefaultFurnitureCatalog"
WHITESPACE = " \t\f"
LINE_BREAK = re.compile(r"\r\n|\r|\n")
ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
# What zipfile and zlib raise on a damaged archive, besides the ValueError of a bad properties file.
ZIP_FAULTS = (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError, struct.error,
              UnicodeDecodeError, OSError)


def unescaped(text, where):
    """`text` with its backslash escapes resolved as Java's Properties does: \\uXXXX, \\t \\n \\r \\f, and a
    backslash before any other character dropped; surrogate pairs joined. Raises ValueError naming `where`
    for a malformed \\uXXXX or a lone surrogate."""
    if "\\" not in text:
        return text
    parts, index = [], 0
    while index < len(text):
        character = text[index]
        index += 1
        if character != "\\" or index == len(text):
            parts.append(character)
            continue
        character = text[index]
        index += 1
        if character == "u":
            digits = text[index:index + 4]
            if len(digits) != 4 or not HEX_DIGITS.issuperset(digits):
                raise ValueError(f"{where}: malformed \\uxxxx escape (\\u{digits})")
            parts.append(chr(int(digits, 16)))
            index += 4
        else:
            parts.append(ESCAPES.get(character, character))
    try:  # \uD83D\uDE00 is one character in Java's UTF-16 strings
        return "".join(parts).encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    except UnicodeDecodeError:
        raise ValueError(f"{where}: a lone UTF-16 surrogate escape") from None


def entry(line):
    """(key, value) of one logical line, still escaped: the key ends at the first unescaped `=`, `:` or
    whitespace; whitespace, then at most one `=` or `:`, then whitespace again separate it from the value."""
    index = 0
    while index < len(line) and (line[index] not in "=:" and line[index] not in WHITESPACE):
        index += 2 if line[index] == "\\" else 1
    key, index = line[:index], min(index, len(line))
    separated = False
    while index < len(line):
        if line[index] in "=:" and not separated:
            separated = True
        elif line[index] not in WHITESPACE:
            break
        index += 1
    return key, line[index:]


def read_properties(data, name):
    """{key: value} of a Java .properties file's bytes, read as java.util.Properties.load(InputStream)
    reads them: ISO-8859-1 text (other characters as \\uXXXX escapes); lines end at CR, LF or CRLF; a line
    whose first non-blank character is `#` or `!` is a comment; a line ending in an odd number of
    backslashes continues on the next, whose leading blanks are dropped; `key=value`, `key: value` and
    `key value` forms; the last of a repeated key wins. Raises ValueError naming `name` and the line of a
    malformed escape."""
    lines = LINE_BREAK.split(data.decode("latin-1"))
    properties, index = {}, 0
    while index < len(lines):
        number, line = index + 1, lines[index].lstrip(WHITESPACE)
        index += 1
        if not line or line[0] in "#!":
            continue
        while (len(line) - len(line.rstrip("\\"))) % 2:
            line = line[:-1]
            if index < len(lines):
                line += lines[index].lstrip(WHITESPACE)
                index += 1
        key, value = entry(line)
        properties[unescaped(key, f"{name}:{number}")] = unescaped(value, f"{name}:{number}")
    return properties


def read_catalogue(path, base=CATALOGUE):
    """(the catalogue's own properties, [(number, icon path, icon bytes or None, {locale: name})]) of a
    furniture catalogue archive (a .sh3f zip, or a jar): items numbered from 1 until the first number
    without `name#N` in BASE.properties (as Sweet Home 3D reads them), their names from it under ""
    and from each BASE_LOCALE.properties under LOCALE. Raises ValueError naming the archive (and the
    member) when it is not a readable zip or a properties file does not parse."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = set(archive.namelist())
            if f"{base}.properties" not in members:
                raise ValueError(f"{path}: no {base}.properties")
            tables = {}
            for member in sorted(members):
                if member.startswith(base) and member.endswith(".properties"):
                    locale = member[len(base):-len(".properties")]
                    if locale == "" or locale.startswith("_"):
                        tables[locale.lstrip("_")] = read_properties(archive.read(member), f"{path}!{member}")
            english, items = tables[""], []
            while f"name#{len(items) + 1}" in english:
                number = len(items) + 1
                icon = english.get(f"icon#{number}", "").strip().lstrip("/")
                data = archive.read(icon) if icon in members else None
                names = {locale: table[f"name#{number}"] for locale, table in tables.items() if f"name#{number}" in table}
                items.append((number, icon, data, names))
    except ZIP_FAULTS as error:
        raise ValueError(f"{path}: not a readable zip archive ({type(error).__name__}: {error})") from None
    header = {key: value for key, value in english.items() if "#" not in key}
    return header, items


def catalogue_archives(root):
    """[(path, properties base name)] of the catalogues under a folder laid out as /usr/share/sweethome3d:
    sweethome3d.jar's default catalogue first (when present), then furniture/*.sh3f by name."""
    root = pathlib.Path(root)
    default = [(root / JAR, DEFAULT_CATALOGUE)] if (root / JAR).is_file() else []
    return default + [(path, CATALOGUE) for path in sorted((root / FURNITURE).glob("*.sh3f"))]


def collect(root, languages, dropped):
    """[(catalogue file name, item number, icon path, icon bytes, {language: caption}, the catalogue's licence)]
    of the items of catalogue_archives(root) with an icon and an English name of 2 letters or more, in
    catalogue order; the other languages' names are left out where empty, too short or the same as the English."""
    found = []
    for path, base in catalogue_archives(root):
        header, items = read_catalogue(path, base)
        chosen = best_locales({locale for *_, names in items for locale in names if locale}, languages)
        for number, icon, data, names in items:
            english = " ".join(names[""].split())
            if data is None:
                dropped["item: its icon is not in its catalogue"] += 1
                continue
            if stamp_pairs.too_short(english):
                dropped["item: an English name of fewer than 2 letters"] += 1
                continue
            captions = {"en": english}
            for language, locale in sorted(chosen.items()):
                text = " ".join(names.get(locale, "").split())
                reason = ("no name" if not text else "the same as the English name" if text.casefold() == english.casefold()
                          else "fewer than 2 letters (not one CJK or Hangul word sign)" if stamp_pairs.too_short(text) else None)
                if reason:
                    dropped[f"{language}: {reason}"] += 1
                else:
                    captions[language] = text
            found.append((path.name, number, icon, data, captions, " ".join(header.get("license", "").split())))
    return found


def main(argv=None):
    arguments, found, dropped, source, started = debian_archive.one_package_picture_corpus(
        SCRIPT, "furniture", __doc__.split("\n\n")[0], PACKAGE, SHARE,
        "a folder laid out as /usr/share/sweethome3d (furniture/*.sh3f, and sweethome3d.jar if present)", collect, argv)
    if arguments.local_root:
        if (pathlib.Path(arguments.local_root) / JAR).is_file():
            source["local"][APPLICATION] = arguments.local_root
    else:  # the default catalogue comes in the application's own package
        fetched = debian_archive.fetch_unless_local(SCRIPT, {APPLICATION: None}, arguments.scratch, arguments.refresh)[APPLICATION]
        source["packages"].insert(0, debian_archive.package_record(fetched))
        try:
            found = collect(fetched["root"] / SHARE, debian_archive.uform_languages(SCRIPT, arguments.languages), dropped) + found
        except ValueError as error:
            sys.exit(f"{SCRIPT}: {error}")
    images, groups, catalogues = {}, {}, collections.defaultdict(dict)
    for archive, number, icon, data, captions, licence in found:
        catalogues[archive] = {"items": catalogues[archive].get("items", 0) + 1, "licence": licence}
        group = captions["en"].casefold()
        if group in groups:
            dropped["item: the same English name as an earlier item"] += 1
            continue
        image, reason = stamp_pairs.opened(io.BytesIO(data), arguments.size, "icon")
        image, reason = stamp_pairs.composited(image) if image is not None else (None, reason)
        if image is None:
            dropped[reason] += 1
            continue
        stem = debian_archive.safe_name(f"{pathlib.Path(archive).stem}-{number}-{pathlib.PurePosixPath(icon).stem}")
        positive = debian_archive.save_png(image, arguments.output, stem, images)
        groups[group] = [{"query": caption, "positives": [positive], "lang": language, "source": f"{archive}#{number}"}
                         for language, caption in sorted(captions.items(), key=lambda item: item[0] != "en")]
    per_language = collections.Counter(record["lang"] for records in groups.values() for record in records)
    debian_archive.build_image_corpus(
        SCRIPT, "furniture", arguments, groups, images,
        {"groups": len(groups), "dropped": dict(sorted(dropped.items())),
         "captions_per_language": dict(sorted(per_language.items())), "catalogues": dict(catalogues),
         "group": "the English name (case-folded), its first picture only",
         "query": "the item's name: English from the catalogue's BASE.properties name#N, each other language from its "
                  "BASE_LOCALE.properties (one locale a language)",
         "image": f"the catalogues' PNG icons, at most {arguments.size} px on the longer side, composited on white, or on "
                  f"grey {stamp_pairs.LIGHT_BACKGROUND[:3]} where light (RGB)"},
        source, started)


if __name__ == "__main__":
    main()
