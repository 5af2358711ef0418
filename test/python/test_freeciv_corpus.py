# test_freeciv_corpus.py: scripts/data/freeciv_pairs.py on small trees written here, offline: Freeciv's registry
# format read as Freeciv reads it (vectors over lines, tables with a longer row, _() strings, escapes, both comment
# characters, *include) and every malformed file named with its line; random byte changes that either read or raise
# ValueError naming the file; grid cells cut where Freeciv cuts them, cropped to what they draw and never enlarged;
# a terrain's sprite from its top layer; the caption rule (no caption names two pictures); the corpus built twice to
# the same bytes from a planted tree (a fallback tileset, a water terrain left out, names sharing a sprite or an
# English name kept once, Q_ qualifiers, pt over pt_BR); missing sheets, cells outside their sheet and malformed
# spec files named. When data/freeciv is built: no image in two splits, every image path there, the manifest's
# counts those of the files, every language a UForm one, each check shown to fail on a planted fault.

import collections
import copy
import json
import pathlib
import sys

import pytest
from PIL import Image

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "data"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import freeciv_pairs  # noqa: E402
import stamp_pairs  # noqa: E402
from gettext_pairs import DEFAULT_LANGUAGES  # noqa: E402
from test_corpora import leaks, read_splits  # noqa: E402
from test_data_gettext import write_mo  # noqa: E402
from test_image_corpora import SPLITS, build_twice, captions_by_source, check_image_corpus, corrupted_reads, image_digests  # noqa: E402

BUILT = ROOT / "data" / "freeciv"
REAL = ROOT / "data" / ".debian" / "root" / freeciv_pairs.PACKAGE / freeciv_pairs.SHARE


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# ---- the registry format ----------------------------------------------------------------------------

REGISTRY = '''
; a comment line
[datafile]
description = "two \\"quoted\\" words\\nand a line" # a comment after a value
count = -12
flag = true
other = FALSE
readme = *civ2civ3/README*

[unit_workers]
name          = _("?unit:Workers")
graphic       = "u.worker"
flags         = "Settlers", "NonMil",
                "Workers" ; a vector over two lines
helptext      = _("\\
A string; over two lines # not a comment
")
tiles = { "row", "column", "tag"
  ; a comment inside a table
  0, 1, "u.a"
  2, 3, "t.b", "t.c"

  4, 5
}
*include "more.inc"

[unit_workers]
graphic = "u.workers"
'''


def test_read_registry_reads_freeciv_format(tmp_path):
    write(tmp_path / "more.inc", '[included]\nvalue = _( "from the included file" )\n')
    registry = freeciv_pairs.read_registry(write(tmp_path / "units.ruleset", REGISTRY), tmp_path)
    assert registry["datafile"] == {"description": 'two "quoted" words\nand a line', "count": -12, "flag": True,
                                    "other": False, "readme": "civ2civ3/README"}
    assert isinstance(registry["datafile"]["readme"], freeciv_pairs.FileReference)
    workers = registry["unit_workers"]
    assert workers["name"] == "?unit:Workers" and workers["graphic"] == "u.workers"  # a repeated section goes on, the last value wins
    assert workers["flags"] == ["Settlers", "NonMil", "Workers"]
    assert workers["helptext"] == "\nA string; over two lines # not a comment\n"
    assert workers["tiles"] == [{"row": 0, "column": 1, "tag": "u.a"}, {"row": 2, "column": 3, "tag": ["t.b", "t.c"]},
                                {"row": 4, "column": 5}]
    assert registry["included"] == {"value": "from the included file"}
    assert list(registry) == ["datafile", "unit_workers", "included"]


@pytest.mark.parametrize("text, problem", [
    ('value = 1\n', r"bad\.ruleset:1: entry value before any \[section\]"),
    ('[a]\nname = "open\n', r"bad\.ruleset:2: a string without its closing quote"),
    ('[a]\nname = _("x"\n', r'bad\.ruleset:2: _\("\.\.\." without its closing \)'),
    ('[a]\nname = _(x)\n', r'bad\.ruleset:2: _\( not followed by a "string"'),
    ('[a]\nname = 1.5\n', r"bad\.ruleset:2: expected a value .*found '1\.5'"),
    ('[a]\nname = "x" "y"\n', r"bad\.ruleset:2: expected the end of the line"),
    ('[a]\nname = "x",\n[b]\n', r"bad\.ruleset:3: expected a value, found 'section'"),
    ('[a]\nname\n', r"bad\.ruleset:2: expected `name =` or a \[section\]"),
    ('[a\nname = 1\n', r"bad\.ruleset:1: a section name without its closing \]"),
    ('[a] junk\n', r"bad\.ruleset:1: expected the end of the line"),
    ('[a]\nname = @\n', r"bad\.ruleset:2: unexpected character '@'"),
    ('[a]\nt = { "row", "tag"\n 1, "x"\n', r"bad\.ruleset:2: table t without its closing \}"),
    ('[a]\nt = { "row", 2\n}\n', r"bad\.ruleset:2: table t's header row is not all column names"),
    ('[a]\nt = { "row"\n 1\n[b]\n', r"bad\.ruleset:2: table t without its closing \}"),
    ('*include "missing.inc"\n', r"bad\.ruleset:1: \*include of .*missing\.inc, which is not there"),
    ('*include missing.inc\n', r'bad\.ruleset:1: \*include wants one "FILE"'),
    ('*include "bad.ruleset"\n', r"bad\.ruleset: \*include of .*bad\.ruleset includes itself"),
    ('[a]\nreadme = *README\n', r"bad\.ruleset:2: a \*file\* reference without its closing \*"),
])
def test_read_registry_names_bad_input(tmp_path, text, problem):
    path = write(tmp_path / "bad.ruleset", text)
    with pytest.raises(ValueError, match=problem):
        freeciv_pairs.read_registry(path, tmp_path)
    write(tmp_path / "missing.inc", "[a]\n")
    write(tmp_path / "good.ruleset", '[a]\nname = 1\n*include "missing.inc"\n')
    assert freeciv_pairs.read_registry(tmp_path / "good.ruleset", tmp_path) == {"a": {"name": 1}}  # the control reads


def test_read_registry_names_bytes_that_are_not_utf8(tmp_path):
    path = tmp_path / "latin1.spec"
    path.write_bytes('[a]\nname = "Wei\xdfe"\n'.encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin1\.spec: not UTF-8 \(invalid continuation byte at byte 15\)"):
        freeciv_pairs.read_registry(path)


def test_qualifiers_and_translations():
    assert freeciv_pairs.without_qualifier("?unit:Workers") == "Workers"
    assert freeciv_pairs.without_qualifier("Workers") == "Workers"
    assert freeciv_pairs.without_qualifier("?no qualifier end") == "?no qualifier end"  # as Freeciv: returned as it is
    catalogue = {"?unit:Workers": "?unit:Travailleurs", "Warriors": " Guerriers  de  base ", "Empty": ""}
    assert freeciv_pairs.translated("?unit:Workers", catalogue) == "Travailleurs"  # a qualifier the translator kept
    assert freeciv_pairs.translated("Warriors", catalogue) == "Guerriers de base"
    assert freeciv_pairs.translated("Workers", catalogue) is None  # the bare msgid is another string
    assert freeciv_pairs.translated("Empty", catalogue) is None


# ---- tilesets, sheets and crops -------------------------------------------------------------------------

CELL = (12, 10)  # dx, dy
BLACK = (0, 0, 0, 255)
COLOURS = {"u.warriors": (200, 0, 0, 255), "u.workers": (0, 150, 0, 255), "u.horsemen": (0, 0, 180, 255),
           "t.l0.grassland1": (60, 160, 40, 255), "t.l1.forest_n0e0s0w0": (20, 90, 20, 255), "ts.wheat": (240, 220, 60, 255),
           "u.galleon": (120, 60, 0, 255), "u.spirit": (150, 150, 250, 255)}


def cell_origin(row, column, left=1, top=1, border=1):
    return left + (CELL[0] + border) * column, top + (CELL[1] + border) * row


def sheet(path, cells, rows=2, columns=4):
    """A sheet of rows x columns cells (1 px borders, from 1,1); each named cell holds its colour from 2,1 to 9,8
    of the cell with a black pixel at its top left (a picture of one colour shows nothing), the rest transparent."""
    image = Image.new("RGBA", cell_origin(rows, columns), (255, 0, 255, 0))
    for (row, column), tag in cells.items():
        x, y = cell_origin(row, column)
        image.paste(COLOURS[tag], (x + 2, y + 1, x + 9, y + 8))
        image.putpixel((x + 2, y + 1), BLACK)
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path)


UNITS_SPEC = '''[spec]
options = "+Freeciv-3.0-spec"

[file]
gfx = "amplio2/units"

[grid_main]
x_top_left = 1
y_top_left = 1
dx = 12
dy = 10
pixel_border = 1

tiles = { "row", "column", "tag"
  0, 0, "u.warriors"  ; a unit
  0, 1, "u.workers"
  0, 2, "u.empty"
  0, 3, "u.horsemen"
  1, 0, "t.l0.grassland1"
  1, 1, "t.l1.forest_n0e0s0w0", "t.l1.forest_n1e0s0w0"
  1, 2, "ts.wheat"
  1, 3, "u.spirit"
}
'''
UNITS_CELLS = {(0, 0): "u.warriors", (0, 1): "u.workers", (0, 3): "u.horsemen", (1, 0): "t.l0.grassland1",
               (1, 1): "t.l1.forest_n0e0s0w0", (1, 2): "ts.wheat", (1, 3): "u.spirit"}

TILESPEC = '''[tilespec]
options = "+Freeciv-3.0-tilespec"
name = "{name}"
priority = {priority}
files =
  {files}

*include "misc/colors.tilespec"

[tile_grassland]
tag = "grassland"
num_layers = 1
layer0_match_type = "land"

[tile_forest]
tag = "forest"
num_layers = 2
layer0_match_type = "land"
layer1_match_type = "forest"
layer1_match_with = "forest"

[tile_coast]
tag = "coast"
num_layers = {coast_layers}
layer0_match_type = "shallow"
layer0_match_with = "deep", "land"
layer0_sprite_type = "corner"
'''


def galleon_tileset(game, name, priority, colour):
    """A tileset NAME with one sprite, u.galleon, of `colour`, and a coast drawn whole (t.l0.coast1)."""
    write(game / f"{name}.tilespec", TILESPEC.format(name=name, priority=priority, files=f'"{name}/units.spec"', coast_layers=1)
          .replace('layer0_sprite_type = "corner"', 'layer0_sprite_type = "whole"').replace('layer0_match_with = "deep", "land"\n', ""))
    write(game / name / "units.spec", '[file]\ngfx = "%s/units"\n[grid_main]\nx_top_left = 0\ny_top_left = 0\ndx = 12\ndy = 10\n'
                                      'tiles = { "row", "column", "tag"\n 0, 0, "u.galleon"\n 0, 1, "t.l0.coast1"\n}\n' % name)
    image = Image.new("RGBA", (24, 10), (0, 0, 0, 0))
    image.paste(colour, (1, 1, 11, 9))
    image.paste((0, 0, 255, 255), (13, 1, 23, 9))
    image.putpixel((1, 1), BLACK)
    image.putpixel((13, 1), BLACK)
    image.save(game / name / "units.png")


RULESETS = {
    "civ2civ3/units.ruleset": '''[datafile]
description = "planted"
[unitclass_land]
name = _("?unitclass:Land")
[unit_warriors]
name = _("Warriors")
graphic = "u.warriors"
graphic_alt = "-"
[unit_workers]
name = _("?unit:Workers")
graphic = "u.workers"
[unit_migrants]
name = _("Migrants")
graphic = "u.workers"
[unit_ghost]
name = _("Ghost")
graphic = "u.empty"
[unit_galleon]
name = _("Galleon")
graphic = "u.galleon"
[unit_leader]
name = _("?unit:Leader")
graphic = "u.leader"
graphic_alt = "u.warriors"
''',
    "civ2civ3/buildings.ruleset": '''[building_granary]
name = _("Granary")
genus = "Improvement"
graphic = "b.granary"
[building_pyramids]
name = _("Pyramids")
genus = "GreatWonder"
graphic = "b.pyramids"
''',
    "civ2civ3/terrain.ruleset": '''[terrain_grassland]
name = _("Grassland")
graphic = "grassland"
[terrain_forest]
name = _("Forest")
graphic = "forest"
[terrain_ocean]
name = _("Ocean")
graphic = "coast"
[resource_wheat]
extra = "Wheat"
[extra_road]
name = _("Road")
causes = "Road"
graphic = "road.road"
[extra_wheat]
name = _("Wheat")
causes = "Resource"
graphic = "ts.wheat"
''',
    "classic/units.ruleset": '''[unit_warriors]
name = _("Warriors")
graphic = "u.horsemen"
[unit_horsemen]
name = _("Horsemen")
graphic = "u.horsemen"
[unit_ghost]
name = _("Ghost")
graphic = "u.spirit"
''',
    "classic/buildings.ruleset": '[building_granary]\nname = _("Granary")\ngenus = "Improvement"\ngraphic = "b.granary"\n',
    "classic/terrain.ruleset": '[datafile]\ndescription = "none"\n',
}

CATALOGUES = {
    "de": {"Warriors": "Krieger", "?unit:Workers": "Arbeiter", "Granary": "Kornspeicher", "Pyramids": "Pyramiden",
           "Horsemen": "Reiter", "Wheat": "Weizen", "Forest": "Wald", "Grassland": "Grasland", "Galleon": "Galleone",
           "Workers": "Arbeiterinnen"},
    "fr": {"Warriors": "Guerriers", "?unit:Workers": "?unit:Travailleurs", "Granary": "Grenier", "Pyramids": "Pyramids",
           "Horsemen": "Krieger", "Forest": "Forêt", "Grassland": "Prairie", "Wheat": "Blé"},
    "es": {"Forest": "Bosque", "Horsemen": "Bosque", "Pyramids": "P", "Granary": "Granero"},
    "pt": {"Forest": "Bosque", "Granary": "Celeiro"},
    "pt_BR": {"Forest": "Floresta", "Granary": "Armazém"},
    "ko": {"Wheat": "밀", "Warriors": "전사"},
    "zh_CN": {"Warriors": "武士"},
    "zh_TW": {"Warriors": "武士們"},
    "en_GB": {"Granary": "Granary store"},
    "sr@latin": {"Granary": "Žitnica"},
}


def write_tree(share):
    """A folder laid out as /usr/share: games/freeciv with amplio2 (a units sheet of 7 sprites, u.empty drawing
    nothing; buildings and wonders as whole files, the granary 40x20; coast drawn from corners), two fallback
    tilesets with u.galleon (trident, priority 5, brown; alio, priority 3, grey), civ2civ3 and classic rulesets,
    and freeciv-core.mo catalogues in 10 locales (pt and pt_BR; zh_CN and zh_TW; en_GB and sr@latin not read)."""
    game = share / "games" / "freeciv"
    write(game / "amplio2.tilespec", TILESPEC.format(name="Amplio2", priority=25, files='"amplio2/units.spec",\n  "misc/buildings.spec"',
                                                     coast_layers=1))
    write(game / "misc" / "colors.tilespec", "[colors]\nbackground = 0\n")
    write(game / "amplio2" / "units.spec", UNITS_SPEC)
    sheet(game / "amplio2" / "units.png", UNITS_CELLS)
    write(game / "misc" / "buildings.spec", '[extra]\nsprites =\n\t{\t"tag", "file"\n\t\t"b.granary", "buildings/granary"\n'
                                             '\t\t"b.pyramids", "wonders/pyramids"\n\t}\n')
    (game / "buildings").mkdir()
    (game / "wonders").mkdir()
    granary = Image.new("RGBA", (40, 20), (30, 60, 200, 255))
    granary.paste((200, 30, 30, 255), (0, 0, 20, 20))
    granary.save(game / "buildings" / "granary.png")
    framed = Image.new("RGBA", (20, 16), (0, 0, 0, 0))
    framed.paste((250, 250, 230, 255), (3, 2, 17, 14))  # light: on grey
    framed.paste((0, 0, 0, 0), (3, 2, 5, 4))  # a transparent corner, where the grey shows
    framed.save(game / "wonders" / "pyramids.png")
    galleon_tileset(game, "trident", 5, (120, 60, 0, 255))
    galleon_tileset(game, "alio", 3, (90, 90, 90, 255))
    for name, text in RULESETS.items():
        write(game / name, text)
    for locale, entries in CATALOGUES.items():
        write_mo(share / "locale" / locale / "LC_MESSAGES" / "freeciv-core.mo", entries)
    write_mo(share / "locale" / "de" / "LC_MESSAGES" / "freeciv-nations.mo", {"Warriors": "nicht diese Domäne"})
    return game


def test_spec_cells_are_cut_where_freeciv_cuts_them(tmp_path):
    game = write_tree(tmp_path)
    sprites = {sprite.tag: sprite for sprite in freeciv_pairs.read_spec(game / "amplio2" / "units.spec", game)}
    assert sprites["u.warriors"].box == (1, 1, 13, 11) and sprites["ts.wheat"].box == (27, 12, 39, 22)
    assert sprites["t.l1.forest_n1e0s0w0"].box == sprites["t.l1.forest_n0e0s0w0"].box  # two tags, one cell
    assert sprites["u.warriors"].sheet == game / "amplio2" / "units.png"
    tiles, tilespec = freeciv_pairs.read_tileset(game, "amplio2")
    assert tiles["b.granary"].box is None and tiles["b.granary"].sheet == game / "buildings" / "granary.png"
    assert tilespec["colors"] == {"background": 0}  # the *include read
    sheets = freeciv_pairs.Sheets()
    for tag, colour in COLOURS.items():
        if tag in tiles:  # every cell holds its own colour and nothing of its neighbours
            image = stamp_pairs.fitted(sheets.cut(tiles[tag]), 368, crop=True)
            assert image.size == (7, 7) and set(image.get_flattened_data()) == {colour, BLACK}, tag
    assert stamp_pairs.composited(stamp_pairs.fitted(sheets.cut(tiles["u.empty"]), 368, crop=True)) == (
        None, "picture: fully transparent (nothing visible)")
    granary = stamp_pairs.fitted(sheets.cut(tiles["b.granary"]), 16, crop=True)
    assert granary.size == (16, 8)  # fitted into --size
    pyramids = stamp_pairs.fitted(sheets.cut(tiles["b.pyramids"]), 368, crop=True)
    assert pyramids.size == (14, 12)  # cropped, never enlarged


def test_spec_problems_are_named_with_their_file(tmp_path):
    game = write_tree(tmp_path)
    spec = game / "amplio2" / "units.spec"
    for change, problem in [(("dx = 12\n", ""), r"units\.spec \[grid_main\]: dx is missing, not an integer"),
                            (("dy = 10", 'dy = "10"'), r"units\.spec \[grid_main\]: dy is '10', not an integer"),
                            (('0, 1, "u.workers"', '0, "u.workers"'), r"units\.spec \[grid_main\] tile 2: column is 'u\.workers', not an integer"),
                            (('0, 1, "u.workers"', "0"), r"units\.spec \[grid_main\] tile 2: column is missing, not an integer"),
                            (('0, 1, "u.workers"', "0, 1"), r"units\.spec \[grid_main\]: tile 2 \(row 0, column 1\) has no tag"),
                            (('gfx = "amplio2/units"', ""), r'units\.spec: \[grid_main\] but no \[file\] gfx = "SHEET"'),
                            (("dx = 12", "dx = 0"), r"units\.spec \[grid_main\]: a cell of 0x10 pixels")]:
        write(spec, UNITS_SPEC.replace(*change))
        with pytest.raises(ValueError, match=problem):
            freeciv_pairs.read_spec(spec, game)
    write(spec, UNITS_SPEC.replace('0, 3, "u.horsemen"', '2, 3, "u.horsemen"'))  # the third row: below the sheet
    sprites = {sprite.tag: sprite for sprite in freeciv_pairs.read_spec(spec, game)}
    sheets = freeciv_pairs.Sheets()
    sheets.cut(sprites["u.warriors"])  # the control: a cell inside is cut
    with pytest.raises(ValueError, match=r'units\.spec: "u\.horsemen" at 40,23 to 52,33 lies outside its sheet units\.png \(53x23\)'):
        sheets.cut(sprites["u.horsemen"])
    (game / "amplio2" / "units.png").unlink()
    with pytest.raises(ValueError, match=r'units\.spec: the sheet of "u\.warriors", .*amplio2/units\.png, is not there'):
        freeciv_pairs.Sheets().cut(sprites["u.warriors"])
    (game / "amplio2" / "units.png").write_bytes(b"\x89PNG\r\n\x1a\n not a picture")
    with pytest.raises(ValueError, match=r"units\.png: not a readable image \(UnidentifiedImageError"):
        freeciv_pairs.Sheets().cut(sprites["u.warriors"])
    write(game / "misc" / "buildings.spec", '[extra]\nsprites = { "tag", "file"\n "b.granary"\n}\n')
    with pytest.raises(ValueError, match=r"buildings\.spec: \[extra\] sprites row 1 wants a tag and a file"):
        freeciv_pairs.read_spec(game / "misc" / "buildings.spec", game)


def test_a_tag_listed_twice_keeps_its_first_sprite(tmp_path):
    """As Freeciv: a later spec file's sprite for a tag already seen is ignored, unless the tilespec says
    +duplicates_ok, where the last wins."""
    for name, number in (("first.spec", 1), ("second.spec", 2)):
        write(tmp_path / "twice" / name, f'[extra]\nsprites = {{ "tag", "file"\n "u.x", "pictures/{number}"\n}}\n')
    for options, kept in (('"+Freeciv-3.0-tilespec"', "1.png"), ('"+Freeciv-3.0-tilespec +duplicates_ok"', "2.png")):
        write(tmp_path / "twice.tilespec", f'[tilespec]\noptions = {options}\nfiles = "twice/first.spec", "twice/second.spec"\n')
        sprites, _ = freeciv_pairs.read_tileset(tmp_path, "twice")
        assert sprites["u.x"].sheet == tmp_path / "pictures" / kept


@pytest.mark.parametrize("name, read", [
    ("amplio2/units.spec", lambda path, game: freeciv_pairs.read_spec(path, game)),
    ("civ2civ3/units.ruleset", lambda path, game: freeciv_pairs.read_registry(path, game)),
    ("amplio2.tilespec", lambda path, game: freeciv_pairs.read_registry(path, game))])
def test_readers_survive_corrupt_bytes(tmp_path, name, read):
    """Random byte changes to a valid file: each read returns or raises ValueError naming the file, nothing else."""
    game = write_tree(tmp_path)
    path = game / name

    def changed_read(changed):
        path.write_bytes(changed)
        return read(path, game)
    corrupted_reads(path.read_bytes(), changed_read, str(path), 13, at_start=True)


def test_terrain_tags_follow_the_top_layer():
    tilespec = {"tile_desert": {"tag": "desert", "num_layers": 1, "layer0_match_type": "land"},
                "tile_forest": {"tag": "forest", "num_layers": 2, "layer0_match_type": "land",
                                "layer1_match_type": "forest", "layer1_match_with": "forest"},
                "tile_hills": {"tag": "hills", "num_layers": 2, "layer0_match_type": "land",
                               "layer1_match_type": "hills", "layer1_match_with": ["hills", "mountains"]},
                "tile_coast": {"tag": "coast", "num_layers": 2, "layer0_match_type": "shallow", "layer0_sprite_type": "corner",
                               "layer0_match_with": ["deep", "land"], "layer1_match_type": "water", "layer1_sprite_type": "Corner"}}
    assert freeciv_pairs.terrain_tags(tilespec, "desert") == ["t.l0.desert1"]
    assert freeciv_pairs.terrain_tags(tilespec, "forest") == ["t.l1.forest_n0e0s0w0", "t.l0.forest1"]
    assert freeciv_pairs.terrain_tags(tilespec, "hills") == ["t.l0.hills1"]  # matched with another type: no lone tile
    assert freeciv_pairs.terrain_tags(tilespec, "coast") == []  # corners only
    assert freeciv_pairs.terrain_tags(tilespec, "lake") is None  # not this tileset's


# ---- captions -------------------------------------------------------------------------------------------

def distinct(pictures):
    """Whether no caption (case-folded) is given twice, in any language, over all pictures."""
    captions = [caption.casefold() for captions in pictures for caption in captions.values()]
    return len(captions) == len(set(captions))


def test_no_caption_names_two_pictures():
    dropped = collections.Counter()
    pictures = [("lion", {"en": "Lion", "de": "Löwe", "es": "León", "fr": "lion", "it": "Tiger", "ko": "사", "pt": "León"}),
                ("tiger", {"en": "Tiger", "de": "Tiger", "es": "Tigre", "fr": "Löwe", "it": "Tigre"}),
                ("cat", {"en": "Cat", "de": "Katze", "es": "X", "fr": "Tigre", "ja": "猫"})]
    assert not distinct([captions for _, captions in pictures])  # the control: the check sees the planted clashes
    kept = freeciv_pairs.kept_captions(pictures, dropped)
    assert kept == {"lion": {"en": "Lion", "de": "Löwe", "es": "León", "ko": "사"},  # 사 is one Hangul word sign
                    "tiger": {"en": "Tiger", "es": "Tigre"},  # "Tiger" is its English, so the lion's Italian goes
                    "cat": {"en": "Cat", "de": "Katze", "ja": "猫"}}
    assert dropped == {"de: the same as the English name": 1, "fr: the same as the English name": 1,
                       "it: the same as another picture's caption": 1, "fr: the same as another picture's caption": 2,
                       "pt: the same as another language's caption of the picture": 1,
                       "it: the same as another language's caption of the picture": 1,
                       "es: fewer than 2 letters (not one CJK or Hangul word sign)": 1}
    assert distinct(kept.values())


# ---- the corpus from a planted tree ----------------------------------------------------------------------

def test_freeciv_corpus(tmp_path):
    write_tree(tmp_path / "share")
    arguments = ["--local-root", str(tmp_path / "share"), "--languages", "en,de,fr,es,pt,zh,ko", "--seed", "1",
                 "--dev-fraction", "0.25", "--test-fraction", "0.25", "--size", "24"]
    splits, manifest, every = build_twice(freeciv_pairs.main, arguments, tmp_path)
    assert captions_by_source(every) == {
        "civ2civ3#unit_warriors": {"en": "Warriors", "de": "Krieger", "fr": "Guerriers", "ko": "전사", "zh": "武士"},
        "civ2civ3#unit_workers": {"en": "Workers", "de": "Arbeiter", "fr": "Travailleurs"},  # "?unit:Workers" looked up whole
        "civ2civ3#unit_galleon": {"en": "Galleon", "de": "Galleone"},  # trident's sprite: amplio2 has none
        "civ2civ3#building_granary": {"en": "Granary", "de": "Kornspeicher", "fr": "Grenier", "es": "Granero", "pt": "Celeiro"},
        "civ2civ3#building_pyramids": {"en": "Pyramids", "de": "Pyramiden"},  # fr the English, es "P" too short
        "civ2civ3#terrain_grassland": {"en": "Grassland", "de": "Grasland", "fr": "Prairie"},
        "civ2civ3#terrain_forest": {"en": "Forest", "de": "Wald", "fr": "Forêt", "es": "Bosque"},  # pt "Bosque" is es's
        "civ2civ3#extra_wheat": {"en": "Wheat", "de": "Weizen", "fr": "Blé", "ko": "밀"},
        "classic#unit_horsemen": {"en": "Horsemen", "de": "Reiter"},  # fr "Krieger" and es "Bosque" name other pictures
        "classic#unit_ghost": {"en": "Ghost"}}  # civ2civ3's Ghost draws nothing, so classic's is the picture
    assert manifest["pictures_per_kind"] == {"units": 5, "buildings": 1, "wonders": 1, "terrain": 2, "resources": 1}
    assert manifest["pictures_per_tileset"] == {"amplio2": 9, "trident": 1}
    assert manifest["tilesets_searched"] == ["amplio2", "trident", "alio"]  # by priority
    assert manifest["names_without_a_sprite"] == ["civ2civ3/unit_leader (Leader, u.leader)",  # its graphic_alt draws another unit
                                                  "civ2civ3/terrain_ocean (Ocean, coast)"]  # corners in amplio2; trident's tile not taken
    assert manifest["locale_per_language"] == {"de": "de", "es": "es", "fr": "fr", "ko": "ko", "pt": "pt", "zh": "zh_CN"}
    assert manifest["captions_per_language"] == {"de": 9, "en": 10, "es": 2, "fr": 6, "ko": 2, "pt": 1, "zh": 1}
    assert manifest["dropped"] == {
        "de: no translation": 1, "es: no translation": 6, "fr: no translation": 2, "ko: no translation": 8,
        "pt: no translation": 8, "zh: no translation": 9,
        "es: fewer than 2 letters (not one CJK or Hangul word sign)": 1, "es: the same as another picture's caption": 1,
        "fr: the same as another picture's caption": 1, "fr: the same as the English name": 1,
        "pt: the same as another language's caption of the picture": 1,
        "name: the same English name as an earlier one": 2, "name: the same sprite as an earlier name": 1,
        "picture: fully transparent (nothing visible)": 1, "terrain: no single sprite in any tileset": 1,
        "units: no single sprite in any tileset": 1}
    assert manifest["source"] == {"packages": [], "local": {"freeciv-data": str(tmp_path / "share")}}
    out = tmp_path / "out" / "img"
    with Image.open(out / "amplio2-u.warriors.png") as image:  # cropped to its 7x7, never enlarged, on white
        assert image.mode == "RGB" and image.size == (7, 7) and image.getpixel((3, 3)) == (200, 0, 0)
    with Image.open(out / "trident-u.galleon.png") as image:  # trident's (priority 5) over alio's (3)
        assert image.size == (10, 8) and image.getpixel((5, 4)) == (120, 60, 0)
    with Image.open(out / "amplio2-b.granary.png") as image:  # fitted into --size
        assert image.size == (24, 12)
    with Image.open(out / "amplio2-t.l1.forest_n0e0s0w0.png") as image:  # the forest's top layer
        assert image.getpixel((3, 3)) == (20, 90, 20)
    assert {record["lang"] for record in every} <= {"en", *DEFAULT_LANGUAGES}
    assert set(every[0]) == {"query", "positives", "lang", "source"}


def test_freeciv_corpus_names_bad_input(tmp_path):
    share = tmp_path / "share"
    game = write_tree(share)
    run = ["--local-root", str(share), "--output", str(tmp_path / "out"), "--languages", "en,de"]
    freeciv_pairs.main(run)  # the control: the tree as written builds
    write(game / "amplio2" / "units.spec", UNITS_SPEC.replace("}\n", ""))
    with pytest.raises(SystemExit, match=r"freeciv_pairs: .*amplio2/units\.spec:14: table tiles without its closing \}"):
        freeciv_pairs.main(run)
    write(game / "amplio2" / "units.spec", UNITS_SPEC.replace('0, 0, "u.warriors"', '5, 0, "u.warriors"'))
    with pytest.raises(SystemExit, match=r'units\.spec: "u\.warriors" at 1,56 to 13,66 lies outside its sheet units\.png \(53x23\)'):
        freeciv_pairs.main(run)
    write(game / "amplio2" / "units.spec", UNITS_SPEC)
    (game / "wonders" / "pyramids.png").unlink()
    with pytest.raises(SystemExit, match=r'buildings\.spec: the sheet of "b\.pyramids", .*wonders/pyramids\.png, is not there'):
        freeciv_pairs.main(run)
    Image.new("RGBA", (4, 4), BLACK).save(game / "wonders" / "pyramids.png")  # one colour: dropped, not an error
    write(game / "civ2civ3" / "units.ruleset", RULESETS["civ2civ3/units.ruleset"].replace('name = _("Ghost")', 'name = _("")'))
    with pytest.raises(SystemExit, match=r'units\.ruleset: \[unit_ghost\] has no name = _\("\.\.\."\)'):
        freeciv_pairs.main(run)
    write(game / "civ2civ3" / "units.ruleset", RULESETS["civ2civ3/units.ruleset"])
    (game / "classic" / "terrain.ruleset").unlink()
    with pytest.raises(SystemExit, match=r"classic/terrain\.ruleset: not there"):
        freeciv_pairs.main(run)
    write(game / "classic" / "terrain.ruleset", RULESETS["classic/terrain.ruleset"])
    write(game / "amplio2.tilespec", '[tilespec]\nname = "Amplio2"\n')
    with pytest.raises(SystemExit, match=r'amplio2\.tilespec: no \[tilespec\] files = "SPEC", \.\.\.'):
        freeciv_pairs.main(run)
    write_tree(tmp_path / "again")
    (tmp_path / "again" / "locale" / "de" / "LC_MESSAGES" / "freeciv-core.mo").write_bytes(b"\0" * 40)
    with pytest.raises(SystemExit, match=r"de/LC_MESSAGES/freeciv-core\.mo: not a \.mo file \(bad magic\)"):
        freeciv_pairs.main(["--local-root", str(tmp_path / "again"), "--output", str(tmp_path / "out"), "--languages", "en,de"])


# ---- the real package, when unpacked ---------------------------------------------------------------------

@pytest.mark.skipif(not (REAL / freeciv_pairs.GAME / "amplio2.tilespec").is_file(),
                    reason="freeciv-data is not unpacked in data/.debian (freeciv_pairs.py fetches it)")
def test_real_package():
    game = REAL / freeciv_pairs.GAME
    sprites, tilespec = freeciv_pairs.read_tileset(game, "amplio2")
    assert sprites["u.warriors"].box == (1 + 65 * 18, 1, 1 + 65 * 18 + 64, 49)  # units.spec: row 0, column 18 of 64x48 cells
    assert freeciv_pairs.terrain_tags(tilespec, "forest")[0] == "t.l1.forest_n0e0s0w0"
    assert freeciv_pairs.terrain_tags(tilespec, "coast") == []
    sheets = freeciv_pairs.Sheets()
    for sprite in sprites.values():  # every sprite amplio2 lists lies inside its sheet
        sheets.cut(sprite)
    entries = freeciv_pairs.ruleset_entries(game, "civ2civ3")
    assert ("unit_worker", "units", "?unit:Workers", "u.worker") in {(e.section, e.kind, e.name, e.graphic) for e in entries}
    assert {e.kind for e in entries} == set(freeciv_pairs.KINDS)
    catalogues, locales = freeciv_pairs.read_catalogues(REAL / freeciv_pairs.LOCALE, {"de", "zh"})
    assert locales == {"de": "de", "zh": "zh_CN"} and freeciv_pairs.translated("?unit:Workers", catalogues["de"]) == "Arbeiter"


# ---- the built corpus, when built ------------------------------------------------------------------------

def corpus_faults(splits, manifest, present):
    """What is wrong with a built corpus's {split: [record]}, manifest and set of image paths on disk: an image
    in two splits, an image path not there, manifest counts not those of the records and files, a language
    neither English nor a UForm one."""
    faults, owner = [], {}
    for split in SPLITS:
        for record in splits[split]:
            for positive in record["positives"]:
                if owner.setdefault(positive["image"], split) != split:
                    faults.append(f"{positive['image']} in {owner[positive['image']]} and {split}")
                if positive["image"] not in present:
                    faults.append(f"{positive['image']} is not there")
            if record["lang"] not in {"en", *DEFAULT_LANGUAGES}:
                faults.append(f"{record['query']}: language {record['lang']}")
        counts = collections.Counter(record["lang"] for record in splits[split])
        if manifest["records"][split] != {"total": len(splits[split]), **counts}:
            faults.append(f"{split}: manifest counts {manifest['records'][split]}, the file {dict(counts)}")
        if manifest["images"]["per_split"][split] != len({p["image"] for r in splits[split] for p in r["positives"]}):
            faults.append(f"{split}: manifest's image count")
    if manifest["images"]["files"] != len(present) or manifest["groups"] != sum(manifest["pictures_per_kind"].values()):
        faults.append("manifest's picture counts")
    return faults


def built():
    if not (BUILT / "manifest.json").exists():
        pytest.skip("data/freeciv is not built (scripts/data/freeciv_pairs.py writes it)")
    manifest = json.loads((BUILT / "manifest.json").read_text(encoding="utf-8"))
    return read_splits(BUILT), manifest, set(image_digests(BUILT))


def test_built_corpus():
    splits, manifest, present = built()
    check_image_corpus(BUILT)  # files, listing, sha256s, no caption or picture in two splits
    assert corpus_faults(splits, manifest, present) == []
    assert all(splits[split] for split in SPLITS) and manifest["source"]["packages"][0]["licence"] == "GPL-2+"


def test_built_corpus_checks_can_fail():
    """The controls: each planted fault in a copy of the built corpus is caught by the checks above."""
    splits, manifest, present = built()
    train_image = splits["train"][0]["positives"]
    plants = []
    moved = copy.deepcopy(splits)
    moved["test"][0]["positives"] = train_image  # a test caption of a train picture
    plants.append((moved, manifest, present, "in train and test"))
    foreign = copy.deepcopy(splits)
    foreign["dev"][0]["lang"] = "xx"
    plants.append((foreign, manifest, present, "language xx"))
    plants.append((splits, manifest, present - {train_image[0]["image"]}, "is not there"))
    miscounted = copy.deepcopy(manifest)
    miscounted["records"]["dev"]["total"] += 1
    plants.append((splits, miscounted, present, "dev: manifest counts"))
    for planted_splits, planted_manifest, planted_present, fault in plants:
        assert any(fault in found for found in corpus_faults(planted_splits, planted_manifest, planted_present)), fault
    digests = image_digests(BUILT)

    def keys(record):
        return [record["query"].casefold(), *("sha256:" + digests[positive["image"]] for positive in record["positives"])]

    assert leaks(moved, keys) == {"sha256:" + digests[train_image[0]["image"]]}  # check_image_corpus's leak check sees it
