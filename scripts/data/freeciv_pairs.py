#!/usr/bin/env python3
"""freeciv_pairs.py: name -> picture pairs from Freeciv's rulesets and tileset (freeciv-data: the units,
city improvements, wonders, terrain types and tile resources of the civ2civ3 ruleset, Debian's default, then
of classic, each drawn by the amplio2 tileset, the default). A ruleset (units.ruleset, buildings.ruleset,
terrain.ruleset) names each thing, `name = _("Warriors")`, and gives its sprite's tag, `graphic =
"u.warriors"`; the tileset (amplio2.tilespec and the *.spec files it lists) maps each tag to a cell of a PNG
sheet (`[grid_*]`: x_top_left, y_top_left, dx, dy, pixel_border and a `tiles` table of row, column, tag) or to
a whole PNG (`[extra] sprites`). read_registry reads these files as Freeciv's registry does (sections,
`key = value, value` vectors, `{ }` tables under a header row, "..." strings with `_()` marks, `;` and `#`
comments, `*include`); a tag amplio2 lacks is looked for in the other tilesets, highest priority first. Great
wonders are "wonders", the other improvements (small wonders such as the Palace too) "buildings". A terrain is its tile's top
layer alone, a tile without neighbours ("t.l1.forest_n0e0s0w0", or "t.l0.desert1"); water, drawn from
corner pieces, has no single sprite and is left out, as are extras other than resources (roads, rivers,
irrigation and bases are drawn from pieces too). The English caption is the name with Freeciv's "?unit:"
qualifier dropped; each UForm language's is the full name looked up in freeciv-core.mo (the domain that holds
the rulesets' names; one locale a language as gettext_pairs ranks them), qualifier dropped as Freeciv's Q_()
does. One record per (picture, language); a translation equal to the English name, to another picture's
caption or to another language's caption of the same picture is left out. Names with the same English name,
or with the same sprite ("Aqueduct, Lake" draws b.aqueduct), are one picture, the first kept: civ2civ3 before
classic, units, buildings and wonders, terrain, resources. Each sprite is cropped to what it draws, at most
368 px on its longer side (never enlarged), and composited as stamp_pairs does. 15 % dev, 15 % test by
default. Writes data/freeciv/{train,dev,test}.jsonl, img/*.png, images.sha256 and manifest.json.
Deterministic for a seed. See docs/data.md.
"""

import collections
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import debian_archive  # noqa: E402
import stamp_pairs  # noqa: E402
from gettext_pairs import best_locales, read_mo  # noqa: E402

SCRIPT = "freeciv_pairs"
PACKAGE = "freeciv-data"
SHARE = "usr/share"
GAME = "games/freeciv"  # under SHARE: rulesets, tilesets, sheets
LOCALE = "locale"  # under SHARE: LOCALE/<locale>/LC_MESSAGES/DOMAIN.mo
DOMAIN = "freeciv-core"
TILESET = "amplio2"
RULESETS = ("civ2civ3", "classic")
KINDS = ("units", "buildings", "wonders", "terrain", "resources")
NO_GRAPHIC = "-"
SHEET_SUFFIX = ".png"
WORD_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.+-")
ESCAPES = {"n": "\n"}  # any other escaped character stands for itself, as in Freeciv's remove_escapes


class FileReference(str):
    """A `*file*` value: the name of a file whose text Freeciv reads in its place (not read here)."""


# ---- Freeciv's registry format ---------------------------------------------------------------------------

def tokens_of(path, data_root, including=()):
    """[(kind, value, path, line)] of a registry file, each `*include "FILE"` line replaced by FILE's tokens
    (FILE under data_root). Kinds: section, word, string, file, "{", "}", ",", "=", newline. Raises ValueError
    naming the file (and line) where it is not UTF-8, a string or section name is not closed, a character
    starts no token, or an include is missing (named with the including line) or recursive."""
    path = pathlib.Path(path)
    if path.resolve() in including:
        raise ValueError(f"{including[-1]}: *include of {path} includes itself")
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise ValueError(f"{path}: not there") from None
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not UTF-8 ({error.reason} at byte {error.start})") from None
    found, index, line, line_start = [], 0, 1, True
    while index < len(text):
        character = text[index]
        where = f"{path}:{line}"
        if character == "\n":
            found.append(("newline", None, path, line))
            index, line, line_start = index + 1, line + 1, True
            continue
        if character in " \t\r\f\v":
            index += 1
            continue
        if character in ";#":  # a comment runs to the end of its line
            end = text.find("\n", index)
            index = len(text) if end < 0 else end
            continue
        if line_start and text.startswith("*include", index) and (index == 0 or text[index - 1] == "\n"):
            end = text.find("\n", index)
            rest = text[index + len("*include"):len(text) if end < 0 else end].split(";")[0].split("#")[0].strip()
            if len(rest) < 2 or rest[0] != '"' or rest[-1] != '"' or '"' in rest[1:-1]:
                raise ValueError(f'{where}: *include wants one "FILE"')
            if data_root is None:
                raise ValueError(f"{where}: *include {rest} with no data folder to find it in")
            target = pathlib.Path(data_root) / rest[1:-1]
            if not target.is_file():
                raise ValueError(f"{where}: *include of {target}, which is not there")
            found.extend(tokens_of(target, data_root, (*including, path.resolve())))
            index = len(text) if end < 0 else end
            continue
        if line_start and character == "[":
            end = text.find("]", index)
            if end < 0 or "\n" in text[index:end]:
                raise ValueError(f"{where}: a section name without its closing ]")
            found.append(("section", text[index + 1:end], path, line))
            index, line_start = end + 1, False
            continue
        line_start = False
        if character in "{},=":
            found.append((character, None, path, line))
            index += 1
        elif character == '"' or text.startswith("_(", index):
            marked = character == "_"
            index = index + 2 if marked else index
            while marked and index < len(text) and text[index] in " \t":
                index += 1
            if index >= len(text) or text[index] != '"':
                raise ValueError(f'{where}: _( not followed by a "string"')
            value, index, lines = string_at(text, index + 1, where)
            found.append(("string", value, path, line))
            line += lines
            if marked:
                while index < len(text) and text[index] in " \t":
                    index += 1
                if index >= len(text) or text[index] != ")":
                    raise ValueError(f"{where}: _(\"...\" without its closing )")
                index += 1
        elif character == "*":
            end = text.find("*", index + 1)
            if end < 0 or "\n" in text[index:end]:
                raise ValueError(f"{where}: a *file* reference without its closing *")
            found.append(("file", FileReference(text[index + 1:end]), path, line))
            index = end + 1
        elif character in WORD_CHARACTERS:
            end = index
            while end < len(text) and text[end] in WORD_CHARACTERS:
                end += 1
            found.append(("word", text[index:end], path, line))
            index = end
        else:
            raise ValueError(f"{where}: unexpected character {character!r}")
    found.append(("newline", None, path, line))
    return found


def string_at(text, index, where):
    """(the string's value, index after its closing quote, newlines it spans) of a "..." string whose
    opening quote ends at `index`; \\n is a newline, \\ before any other character stands for that character."""
    parts, lines = [], 0
    while index < len(text):
        character = text[index]
        if character == '"':
            return "".join(parts), index + 1, lines
        if character == "\\" and index + 1 < len(text):
            index += 1
            character = ESCAPES.get(text[index], text[index])
        lines += text[index] == "\n"
        parts.append(character)
        index += 1
    raise ValueError(f"{where}: a string without its closing quote")


def scalar(token):
    """The value of one value token: a string, an integer, TRUE or FALSE; raises ValueError naming its file
    and line otherwise."""
    kind, value, path, line = token
    if kind in ("string", "file"):
        return value
    if kind == "word":
        if value.upper() in ("TRUE", "FALSE"):  # Freeciv compares without case ("true" in nationlist.ruleset)
            return value.upper() == "TRUE"
        digits = value[1:] if value[:1] == "-" else value
        if digits.isascii() and digits.isdigit():
            return int(value)
    raise ValueError(f"{path}:{line}: expected a value (a string, a number, TRUE or FALSE), found "
                     f"{value if kind == 'word' else kind!r}")


def read_registry(path, data_root=None):
    """{section: {entry: value}} of a Freeciv registry file (a ruleset, a .tilespec or a .spec), read as
    Freeciv's secfile reader does: `[section]` lines; `entry = value` where a value is a "string" (a
    `_("string")` alike), an integer, TRUE or FALSE, or several of them separated by commas (a list), a line
    ending in a comma going on to the next; `entry = { "column", ... }` a table, one row a line until `}`, read
    as [{column: value}] (a row with more values than columns gives its last column a list); `;` and `#`
    comments; `*include "FILE"` lines read FILE (under data_root) in their place. A repeated section goes on;
    a repeated entry's last value wins. Raises ValueError naming the file and line of anything else."""
    stream = tokens_of(path, data_root)
    sections, section, index = {}, None, 0

    def at(position):
        return stream[min(position, len(stream) - 1)]

    def skip_newlines(position):
        while position < len(stream) and stream[position][0] == "newline":
            position += 1
        return position

    def values(position):
        """([value tokens], index after them): values separated by commas, a newline allowed after a comma."""
        found = []
        while True:
            token = at(position)
            if token[0] not in ("string", "word", "file"):
                raise ValueError(f"{token[2]}:{token[3]}: expected a value, found {token[0]!r}")
            found.append(token)
            position += 1
            if position >= len(stream) or stream[position][0] != ",":
                return found, position
            position = skip_newlines(position + 1)

    def end_of_line(position):
        token = at(position)
        if position < len(stream) and token[0] != "newline":
            raise ValueError(f"{token[2]}:{token[3]}: expected the end of the line, found {token[1] or token[0]!r}")
        return position + 1

    while True:
        index = skip_newlines(index)
        if index >= len(stream):
            return sections
        kind, value, where, line = stream[index]
        if kind == "section":
            section = sections.setdefault(value, {})
            index = end_of_line(index + 1)
            continue
        if kind != "word" or at(index + 1)[0] != "=":
            raise ValueError(f"{where}:{line}: expected `name =` or a [section], found {value or kind!r}")
        if section is None:
            raise ValueError(f"{where}:{line}: entry {value} before any [section]")
        name, index = value, skip_newlines(index + 2)
        if at(index)[0] != "{":
            found, index = values(index)
            section[name] = scalar(found[0]) if len(found) == 1 else [scalar(token) for token in found]
            index = end_of_line(index)
            continue
        header, index = values(skip_newlines(index + 1))
        columns = [scalar(token) for token in header]
        if not all(isinstance(column, str) and column for column in columns):
            raise ValueError(f"{where}:{line}: table {name}'s header row is not all column names")
        index, rows = end_of_line(index), []
        while True:
            index = skip_newlines(index)
            if at(index)[0] == "}":
                index = end_of_line(index + 1)
                break
            if index >= len(stream) or at(index)[0] == "section":
                raise ValueError(f"{where}:{line}: table {name} without its closing }}")
            found, index = values(index)
            cells = [scalar(token) for token in found]
            row = dict(zip(columns, cells))
            if len(cells) > len(columns):
                row[columns[-1]] = cells[len(columns) - 1:]
            rows.append(row)
            index = end_of_line(index)
        section[name] = rows


def as_list(value):
    """A registry value as a list: a vector as it is, one value as a list of it, none as []."""
    return value if isinstance(value, list) else [] if value is None else [value]


# ---- tilesets ----------------------------------------------------------------------------------------

Sprite = collections.namedtuple("Sprite", "tag spec sheet box")  # box: (left, top, right, bottom), None for the whole file


def integer(table, key, where, default=None):
    value = table.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{where}: {key} is {'missing' if value is None else repr(value)}, not an integer")
    return value


def read_spec(path, data_root):
    """[Sprite] of a .spec file: each `[grid_*]`'s tiles, the cell at row, column of the `[file] gfx` sheet
    (x_top_left + (dx + pixel_border) * column, likewise down, dx by dy), and each `[extra] sprites` row's
    whole file; a row may name several tags. Raises ValueError naming the file where a grid misses a
    number, a tile its row, column or tag, or an extra sprite its file."""
    registry = read_registry(path, data_root)
    sprites = []
    for section_name, section in registry.items():
        if not section_name.startswith("grid_"):
            continue
        where = f"{path} [{section_name}]"
        gfx = registry.get("file", {}).get("gfx")
        if not isinstance(gfx, str) or not gfx:
            raise ValueError(f"{path}: [{section_name}] but no [file] gfx = \"SHEET\"")
        left, top = integer(section, "x_top_left", where), integer(section, "y_top_left", where)
        width, height = integer(section, "dx", where), integer(section, "dy", where)
        border = integer(section, "pixel_border", where, 0)
        border_x = integer(section, "pixel_border_x", where, border)
        border_y = integer(section, "pixel_border_y", where, border)
        if width <= 0 or height <= 0:
            raise ValueError(f"{where}: a cell of {width}x{height} pixels")
        sheet = pathlib.Path(data_root) / (gfx + SHEET_SUFFIX)
        for number, tile in enumerate(as_list(section.get("tiles")), 1):
            if not isinstance(tile, dict):
                raise ValueError(f"{where}: tiles is not a table")
            row, column = integer(tile, "row", f"{where} tile {number}"), integer(tile, "column", f"{where} tile {number}")
            tags = as_list(tile.get("tag"))
            if not tags or not all(isinstance(tag, str) and tag for tag in tags):
                raise ValueError(f"{where}: tile {number} (row {row}, column {column}) has no tag")
            x, y = left + (width + border_x) * column, top + (height + border_y) * row
            sprites.extend(Sprite(tag, pathlib.Path(path), sheet, (x, y, x + width, y + height)) for tag in tags)
    for number, extra in enumerate(as_list(registry.get("extra", {}).get("sprites")), 1):
        extra = extra if isinstance(extra, dict) else {}
        tags, file = as_list(extra.get("tag")), extra.get("file")
        if not tags or not all(isinstance(tag, str) and tag for tag in tags) or not isinstance(file, str) or not file:
            raise ValueError(f"{path}: [extra] sprites row {number} wants a tag and a file")
        sprites.extend(Sprite(tag, pathlib.Path(path), pathlib.Path(data_root) / (file + SHEET_SUFFIX), None) for tag in tags)
    return sprites


def read_tileset(data_root, name):
    """({tag: Sprite}, the .tilespec's registry) of data_root/NAME.tilespec and the spec files its `files`
    lists, in order: a tag's first sprite wins (the last with the tilespec's +duplicates_ok), as in Freeciv."""
    path = pathlib.Path(data_root) / f"{name}.tilespec"
    tilespec = read_registry(path, data_root)
    files = as_list(tilespec.get("tilespec", {}).get("files"))
    if not files or not all(isinstance(file, str) and file for file in files):
        raise ValueError(f"{path}: no [tilespec] files = \"SPEC\", ...")
    later_wins = "+duplicates_ok" in str(tilespec["tilespec"].get("options", "")).split()
    sprites = {}
    for file in files:
        for sprite in read_spec(pathlib.Path(data_root) / file, data_root):
            if later_wins or sprite.tag not in sprites:
                sprites[sprite.tag] = sprite
    return sprites, tilespec


def terrain_tags(tilespec, graphic):
    """The sprite tags that may draw a terrain on a tile with no neighbours of its kind, its top layer first,
    from the tilespec's [tile_*] section whose tag is `graphic`: "t.lN.TAG1" for a layer matched with nothing,
    "t.lN.TAG_n0e0s0w0" for one matched with its own type only; a layer drawn from corner pieces or matched
    with other types (water, coast) gives none. None where no section has the tag."""
    for name, section in tilespec.items():
        if not name.startswith("tile_") or section.get("tag") != graphic:
            continue
        layers, tags = section.get("num_layers", 1), []
        for layer in reversed(range(layers if isinstance(layers, int) and not isinstance(layers, bool) else 0)):
            if str(section.get(f"layer{layer}_sprite_type", "whole")).casefold() == "corner":
                continue
            matched_with = as_list(section.get(f"layer{layer}_match_with"))
            if not matched_with:
                tags.append(f"t.l{layer}.{graphic}1")
            elif matched_with == [section.get(f"layer{layer}_match_type")]:
                tags.append(f"t.l{layer}.{graphic}_n0e0s0w0")
        return tags
    return None


class Sheets:
    """Cuts sprites out of their sheets, each sheet opened once."""

    def __init__(self):
        self.opened = {}

    def sheet(self, sprite):
        from PIL import Image

        if sprite.sheet not in self.opened:
            if not sprite.sheet.is_file():
                raise ValueError(f'{sprite.spec}: the sheet of "{sprite.tag}", {sprite.sheet}, is not there')
            try:
                with Image.open(sprite.sheet) as image:
                    self.opened[sprite.sheet] = image.convert("RGBA")
            except (OSError, ValueError, Image.DecompressionBombError) as error:
                raise ValueError(f"{sprite.sheet}: not a readable image ({type(error).__name__}: {error})") from None
        return self.opened[sprite.sheet]

    def cut(self, sprite):
        """The RGBA pixels of a sprite: its cell of the sheet, or the whole file. Raises ValueError naming the
        spec file where the cell does not lie inside its sheet."""
        image = self.sheet(sprite)
        if sprite.box is None:
            return image.copy()
        left, top, right, bottom = sprite.box
        if left < 0 or top < 0 or right > image.width or bottom > image.height:
            raise ValueError(f'{sprite.spec}: "{sprite.tag}" at {left},{top} to {right},{bottom} lies outside its sheet '
                             f"{sprite.sheet.name} ({image.width}x{image.height})")
        return image.crop(sprite.box)


# ---- rulesets and names --------------------------------------------------------------------------------

Entry = collections.namedtuple("Entry", "ruleset section kind name graphic")


def without_qualifier(text):
    """Freeciv's skip_intl_qualifier_prefix: "?unit:Workers" -> "Workers"; text not starting with "?" as it is."""
    if text.startswith("?") and ":" in text:
        return text.split(":", 1)[1]
    return text


def ruleset_entries(game_root, ruleset):
    """[Entry] of a ruleset folder, in file order: units.ruleset's [unit_*], buildings.ruleset's
    [building_*] (genus GreatWonder: "wonders", else "buildings"), terrain.ruleset's [terrain_*]
    ("terrain") and its [extra_*] caused by "Resource" ("resources"). Raises ValueError naming the file of a
    section without a name string."""
    folder = pathlib.Path(game_root) / ruleset
    plan = (("units.ruleset", "unit_", lambda section: "units"),
            ("buildings.ruleset", "building_", lambda section: "wonders" if section.get("genus") == "GreatWonder" else "buildings"),
            ("terrain.ruleset", "terrain_", lambda section: "terrain"),
            ("terrain.ruleset", "extra_", lambda section: "resources" if "Resource" in as_list(section.get("causes")) else None))
    entries = []
    for file, prefix, kind_of in plan:
        for name, section in read_registry(folder / file, game_root).items():
            if not name.startswith(prefix):
                continue
            kind = kind_of(section)
            if kind is None:
                continue
            if not isinstance(section.get("name"), str) or not without_qualifier(section["name"]).strip():
                raise ValueError(f"{folder / file}: [{name}] has no name = _(\"...\")")
            graphic = section.get("graphic")
            entries.append(Entry(ruleset, name, kind, section["name"], graphic if isinstance(graphic, str) else NO_GRAPHIC))
    return entries


def read_catalogues(locale_root, languages):
    """({language: {msgid: msgstr}} of locale_root/LOCALE/LC_MESSAGES/freeciv-core.mo, one locale a language
    (best_locales), {language: locale})."""
    paths = {path.parent.parent.name: path for path in sorted(pathlib.Path(locale_root).glob(f"*/LC_MESSAGES/{DOMAIN}.mo"))}
    chosen = best_locales(set(paths), languages)
    return {language: dict(read_mo(paths[locale])) for language, locale in sorted(chosen.items())}, chosen


def translated(name, catalogue):
    """The name as Freeciv shows it in a catalogue's language (Q_: the full msgid looked up, a qualifier the
    translation kept dropped, spaces tidied), or None where the catalogue has no translation."""
    text = catalogue.get(name)
    return " ".join(without_qualifier(text).split()) if text else None


def kept_captions(pictures, dropped):
    """{picture: {language: caption}} from [(picture, {language: caption})] in order, English first in
    each: a translation is left out (counted in `dropped`) where it is the same (case-folded) as the picture's
    English caption, as another picture's caption (another's English always; another's translation where that
    picture comes first) or as an earlier language's caption of the same picture, or too short; so no caption
    names two pictures and no picture has one caption twice."""
    owner = {}
    for picture, captions in pictures:
        owner[captions["en"].casefold()] = picture
    for picture, captions in pictures:
        for language, caption in sorted(captions.items()):
            owner.setdefault(caption.casefold(), picture)
    kept = {}
    for picture, captions in pictures:
        english = captions["en"]
        kept[picture], seen = {"en": english}, {english.casefold()}
        for language, caption in sorted(captions.items()):
            if language == "en":
                continue
            key = caption.casefold()
            reason = ("the same as the English name" if key == english.casefold()
                      else "the same as another picture's caption" if owner[key] != picture
                      else "the same as another language's caption of the picture" if key in seen
                      else "fewer than 2 letters (not one CJK or Hangul word sign)" if stamp_pairs.too_short(caption) else None)
            if reason:
                dropped[f"{language}: {reason}"] += 1
            else:
                kept[picture][language] = caption
                seen.add(key)
    return kept


def sprite_for(entry, tilesets):
    """(tileset name, Sprite) of an entry's graphic in the first tileset that has its tag, or None.
    A terrain's is its terrain_tags' first sprite in the first tileset with a [tile_*] section for it: a
    tileset that draws the terrain from pieces gives none, rather than another tileset's unlike tile.
    `tilesets` is [(name, {tag: Sprite}, tilespec)], amplio2 first."""
    if entry.graphic == NO_GRAPHIC:
        return None
    for name, sprites, tilespec in tilesets:
        tags = terrain_tags(tilespec, entry.graphic) if entry.kind == "terrain" else [entry.graphic]
        if tags is None:
            continue
        found = next((tag for tag in tags if tag in sprites), None)
        if found is not None:
            return name, sprites[found]
        if entry.kind == "terrain":
            return None
    return None


def fallback_tilesets(game_root):
    """The other tilesets' names (NAME.tilespec), Freeciv's preference first: by [tilespec] priority, highest
    first, then by name."""
    ranked = []
    for path in sorted(pathlib.Path(game_root).glob("*.tilespec")):
        if path.stem != TILESET:
            priority = read_registry(path, game_root).get("tilespec", {}).get("priority", 0)
            ranked.append((-priority if isinstance(priority, int) else 0, path.stem))
    return [name for _, name in sorted(ranked)]


def collect(share, languages, size, dropped):
    """[(Entry, tileset name, Sprite, {language: caption}, RGB picture)] of the rulesets' named things with a
    sprite that shows something (cropped, at most size x size, composited as stamp_pairs does), one per
    English name and one per sprite (the first, in RULESETS and ruleset_entries order), and the {"lacking":
    [...], "tilesets": ..., "locales": ...} details for the manifest."""
    game_root, locale_root = pathlib.Path(share) / GAME, pathlib.Path(share) / LOCALE
    tilesets = [(name, *read_tileset(game_root, name)) for name in (TILESET, *fallback_tilesets(game_root))]
    catalogues, locales = read_catalogues(locale_root, languages)
    found, names, sprites, lacking, sheets = [], set(), set(), [], Sheets()
    for ruleset in RULESETS:
        for entry in ruleset_entries(game_root, ruleset):
            english = " ".join(without_qualifier(entry.name).split())
            if english.casefold() in names:
                dropped["name: the same English name as an earlier one"] += 1
                continue
            located = sprite_for(entry, tilesets)
            if located is None:
                dropped[f"{entry.kind}: no single sprite in any tileset"] += 1
                lacking.append(f"{entry.ruleset}/{entry.section} ({english}, {entry.graphic})")
                continue
            tileset, sprite = located
            if (sprite.sheet, sprite.box) in sprites:
                dropped["name: the same sprite as an earlier name"] += 1
                continue
            if stamp_pairs.too_short(english):
                dropped["name: an English name of fewer than 2 letters"] += 1
                continue
            image, reason = stamp_pairs.composited(stamp_pairs.fitted(sheets.cut(sprite), size, crop=True))
            if image is None:  # a later name of the same English may still have a picture
                dropped[reason] += 1
                continue
            names.add(english.casefold())
            sprites.add((sprite.sheet, sprite.box))
            captions = {"en": english}
            for language, catalogue in catalogues.items():
                text = translated(entry.name, catalogue)
                if text is None:
                    dropped[f"{language}: no translation"] += 1
                else:
                    captions[language] = text
            found.append((entry, tileset, sprite, captions, image))
    return found, {"lacking": lacking, "tilesets": [name for name, *_ in tilesets], "locales": locales}


def main(argv=None):
    parser = debian_archive.corpus_parser(__doc__.split("\n\n")[0], "freeciv", "comma-separated language codes")
    parser.set_defaults(dev_fraction=0.15, test_fraction=0.15)
    parser.add_argument("--local-root", help="a folder laid out as /usr/share (games/freeciv/ with the rulesets and "
                                             "tilesets, locale/*/LC_MESSAGES/freeciv-core.mo) to read instead of the package's")
    parser.add_argument("--size", type=int, default=368, help="the longer side of each PNG at most, in pixels")
    arguments = parser.parse_args(argv)
    started = time.monotonic()
    share, source = debian_archive.single_package(SCRIPT, PACKAGE, arguments.local_root, SHARE, arguments)
    dropped = collections.Counter()
    try:
        pictures, details = collect(share, debian_archive.uform_languages(SCRIPT, arguments.languages), arguments.size, dropped)
    except (OSError, ValueError) as error:
        sys.exit(f"{SCRIPT}: {error}")
    if not pictures:
        sys.exit(f"{SCRIPT}: nothing to keep under {share}")
    kept = kept_captions([(index, captions) for index, (_, _, _, captions, _) in enumerate(pictures)], dropped)
    debian_archive.fresh_image_folder(arguments.output)
    images, groups, per_kind, per_tileset = {}, {}, collections.Counter(), collections.Counter()
    for index, (entry, tileset, sprite, _, image) in enumerate(pictures):
        positive = debian_archive.save_png(image, arguments.output, debian_archive.safe_name(f"{tileset}-{sprite.tag}"), images)
        per_kind[entry.kind] += 1
        per_tileset[tileset] += 1
        groups[kept[index]["en"].casefold()] = [
            {"query": caption, "positives": [positive], "lang": language, "source": f"{entry.ruleset}#{entry.section}"}
            for language, caption in sorted(kept[index].items(), key=lambda item: item[0] != "en")]
    per_language = collections.Counter(record["lang"] for records in groups.values() for record in records)
    debian_archive.build_image_corpus(
        SCRIPT, "freeciv", arguments, groups, images,
        {"groups": len(groups), "dropped": dict(sorted(dropped.items())),
         "captions_per_language": dict(sorted(per_language.items())), "locale_per_language": details["locales"],
         "pictures_per_kind": {kind: per_kind[kind] for kind in KINDS}, "pictures_per_tileset": dict(sorted(per_tileset.items())),
         "rulesets": list(RULESETS), "tilesets_searched": details["tilesets"], "names_without_a_sprite": details["lacking"],
         "group": "the English name (case-folded), its first picture only; a sprite named twice is kept once",
         "query": f"the ruleset's name: English with its ?qualifier: dropped, each other language from {DOMAIN}.mo "
                  "(the full name looked up, as Freeciv's Q_ does; one locale a language)",
         "image": f"the {TILESET} sprite of the name's graphic tag (another tileset's where {TILESET} has none; a terrain's "
                  f"top layer on a lone tile), cropped to what it draws, at most {arguments.size} px on the longer side "
                  f"(never enlarged), composited on white, or on grey {stamp_pairs.LIGHT_BACKGROUND[:3]} where light (RGB)"},
        source, started)


if __name__ == "__main__":
    main()
