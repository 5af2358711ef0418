# test_josm_corpus.py: scripts/data/josm_pairs.py on small jars written here, offline: JOSM's .lang reader against
# bytes written by hand (lengths, the "as the English" and plural markers, plural forms) and cut short, the preset
# reader (groups, contexts, LOCALE.name, items without icons) and its malformed inputs, trc's lookup (context,
# doubled apostrophes), the caption rule (a caption naming two pictures left out, a translation equal to the English
# or to another picture's caption left out), the corpus built twice to the same bytes from PNG icons (one picture per
# icon file by its bytes, presets sharing an icon in one split, the drops counted), SVG icons rendered to a fixed
# size whatever their nominal one (librsvg unpacked in data/.debian), bad jars, presets, .lang files and icons named
# with their file, random byte changes that either read or raise ValueError naming the file, and the built corpus in
# data/josm when built, with planted controls.

import collections
import io
import json
import pathlib
import sys
import zipfile

import pytest
from PIL import Image

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "data"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import clipart_pairs  # noqa: E402
import josm_pairs  # noqa: E402
from gettext_pairs import DEFAULT_LANGUAGES  # noqa: E402
from test_corpora import leaks, read_splits  # noqa: E402
from test_image_corpora import SPLITS, build_twice, captions_by_source, check_image_corpus, corrupted_reads, image_digests  # noqa: E402
from test_ktuberling_corpus import no_renderer_script, renderer_script  # noqa: E402

UNPACKED = ROOT / "data" / ".debian" / "root"
RSVG = UNPACKED / "librsvg2-bin" / clipart_pairs.RSVG_CONVERT
REAL_JAR = UNPACKED / josm_pairs.PACKAGE / josm_pairs.SHARE / josm_pairs.JAR
BUILT = ROOT / "data" / "josm"
needs_renderer = pytest.mark.skipif(not RSVG.is_file(), reason="librsvg2-bin is not unpacked in data/.debian "
                                                               "(josm_pairs.py fetches it)")


# ---- the .lang format -------------------------------------------------------------------------------------

def entry(text):
    data = text.encode("utf-8")
    return len(data).to_bytes(2, "big") + data


def lang_bytes(singular, plural):
    """A .lang file: each singular text (None: the 0xFFFE "as the English" marker), 0xFFFF, then each plural entry
    (None: the 0xFE marker; else its forms' count and the forms)."""
    return (b"".join(b"\xff\xfe" if text is None else entry(text) for text in singular) + b"\xff\xff" +
            b"".join(b"\xfe" if forms is None else bytes([len(forms)]) + b"".join(map(entry, forms)) for forms in plural))


def test_read_lang_reads_bytes_written_by_hand():
    data = (b"\x00\x06Bakery" b"\xff\xfe" b"\x00\x00" b"\x00\x03\xe5\x9c\xb0"  # a text, "as the English", none, 地
            b"\xff\xff" b"\x02\x00\x08{0} node\x00\x09{0} nodes" b"\xfe" b"\x00")  # plurals: two forms, "as the English", none
    assert josm_pairs.read_lang(data, "x.lang") == (["Bakery", None, "", "地"], [("{0} node", "{0} nodes"), None, ()])
    assert josm_pairs.read_lang(b"", "x.lang") == ([], [])
    assert josm_pairs.read_lang(b"\x00\x02ab", "x.lang") == (["ab"], [])  # no plural part at all


EN = ["Bakery", "Bench", "_:car\nParking", "_:bicycle\nParking", "Bus Route", "Doctor''s Office", "Map", "Kiosk", "Seat",
      "Waste Basket", "Waste Bin", "Open"]
EN_PLURAL = [("{0} node", "{0} nodes")]
DE = ["Bäckerei", "Bank", "Parkplatz", "Fahrradparkplatz", "", "Arztpraxis", None, "Kiosk", "Bank", "Abfalleimer",
      "Abfalleimer", "Öffnen"]
DE_DE = ["", "", "", "", "Buslinie", "", "", "", "", "", "", ""]
PT = ["", "", "", "", "", "", "Mapa", "", "", "", "", "Abrir"]
PT_BR = ["Padaria", "", "", "", "", "Médico d''aqui", "Mapa do Brasil", "", "", "", "", "Abrir"]


def test_lang_round_trip_and_translation_table():
    english = josm_pairs.read_lang(lang_bytes(EN, EN_PLURAL), "en.lang")
    german = josm_pairs.read_lang(lang_bytes(DE, [("{0} Knoten", "{0} Knoten")]), "de.lang")
    assert english == (EN, EN_PLURAL) and german[0] == DE
    table = josm_pairs.translation_table(english, german, "de.lang")
    assert table == {"Bakery": "Bäckerei", "Bench": "Bank", "_:car\nParking": "Parkplatz", "_:bicycle\nParking": "Fahrradparkplatz",
                     "Doctor''s Office": "Arztpraxis", "Kiosk": "Kiosk", "Seat": "Bank", "Waste Basket": "Abfalleimer",
                     "Waste Bin": "Abfalleimer", "Open": "Öffnen"}  # not "Bus Route" (empty), not "Map" (as the English)
    assert josm_pairs.preset_translation(table, "Parking", "car") == "Parkplatz"
    assert josm_pairs.preset_translation(table, "Parking", "bicycle") == "Fahrradparkplatz"
    assert josm_pairs.preset_translation(table, "Parking") is None  # no context-free "Parking"
    assert josm_pairs.preset_translation(table, "Open", "shop") is None  # a context is never dropped
    assert josm_pairs.preset_translation(table, "Doctor's Office") == "Arztpraxis"
    brazil = josm_pairs.translation_table(english, josm_pairs.read_lang(lang_bytes(PT_BR, [None]), "pt_BR.lang"), "pt_BR.lang")
    assert josm_pairs.preset_translation(brazil, "Doctor's Office") == "Médico d'aqui"


@pytest.mark.parametrize("data, message", [
    (b"\x00\x06Baker", r"x\.lang: cut short at byte 0 \(a text of 6 bytes, 5 left\)"),
    (b"\x00\x01a\x00", r"x\.lang: cut short at byte 3 \(a length needs 2 bytes, 1 left\)"),
    (b"\x00\x02\xc3(", r"x\.lang: not UTF-8 at byte 2"),
    (b"\xff\xff\x02\x00\x01a", r"x\.lang: cut short at byte 6 \(a length needs 2 bytes, 0 left\)"),
    (b"\xff\xff\x01\xff\xfe", r"x\.lang: a plural form's length is the marker 0xFFFE at byte 3")])
def test_read_lang_names_a_bad_file(data, message):
    with pytest.raises(ValueError, match=message):
        josm_pairs.read_lang(data, "x.lang")


def test_translation_table_names_a_file_of_another_length():
    english = josm_pairs.read_lang(lang_bytes(EN, EN_PLURAL), "en.lang")
    short = josm_pairs.read_lang(lang_bytes(DE[:-1], [None]), "de.lang")  # cut at an entry's end: it reads, but misaligned
    with pytest.raises(ValueError, match=r"de\.lang: 11 singular and 1 plural entries, but en\.lang has 12 and 1"):
        josm_pairs.translation_table(english, short, "de.lang")
    no_plurals = josm_pairs.read_lang(lang_bytes(DE, [])[:-2], "de.lang")
    with pytest.raises(ValueError, match=r"de\.lang: 12 singular and 0 plural entries"):
        josm_pairs.translation_table(english, no_plurals, "de.lang")


def test_lang_reader_survives_corrupt_bytes():
    """Random byte changes to a translation: each read returns or raises ValueError naming the file, nothing else."""
    english = josm_pairs.read_lang(lang_bytes(EN, EN_PLURAL), "en.lang")

    def read(changed):
        return josm_pairs.translation_table(english, josm_pairs.read_lang(changed, "de.lang"), "de.lang")

    corrupted_reads(lang_bytes(DE, [("{0} Knoten", "{0} Knoten")]), read, "de.lang: ", 5, at_start=True)


# ---- the presets ------------------------------------------------------------------------------------------

PRESETS = '''<?xml version="1.0" encoding="UTF-8"?>
<presets xmlns="http://josm.openstreetmap.de/tagging-preset-1.0">
  <!-- a comment -->
  <chunk id="fields"><item name="Not A Preset" icon="presets/nothing.png"/><text key="name" text="Name"/></chunk>
  <group name="Shops" icon="presets/shop/shop.png">
    <item name="Bakery" icon="presets/shop/bakery.png" type="node"><key key="shop" value="bakery"/></item>
    <group name="Outdoors">
      <item name="  Bench " icon="presets/leisure/bench.png" de.name="Sitzbank" pt_BR.name=" Banco "/>
      <item name="Garden Bench" icon="presets/leisure/bench_copy.png"/>
    </group>
  </group>
  <group name="Parking">
    <item name="Parking" name_context="car" icon="presets/parking/car.png"/>
    <item name="Car Park" icon="presets/parking/car.png"/>
    <item name="Parking" name_context="bicycle" icon="presets/parking/bicycle.png"/>
  </group>
  <item name="Bus Route" icon="presets/misc/route.png"/>
  <item name="Tram Route" icon="presets/misc/route.png"/>
  <item name="Bus Stop" icon="presets/transport/bus_stop"/>
  <item name="Doctor's Office" icon="presets/health/doctor.png"/>
  <item name="Map" icon="presets/misc/map.png"/>
  <item name="Kiosk" icon="presets/shop/kiosk.png"/>
  <item name="Bank" icon="presets/money/bank.png"/>
  <item name="Seat" icon="presets/leisure/seat.png"/>
  <item name="Waste Basket" icon="presets/waste/basket.png"/>
  <item name="Waste Bin" icon="presets/waste/bin.png"/>
  <item name="X" icon="presets/misc/x.png"/>
  <item name="Water" name_context="natural" icon="presets/misc/water.png"/>
  <item name="Street"/>
  <item name="Ghost" icon="presets/misc/ghost.png"/>
</presets>
'''


def test_read_presets():
    presets = josm_pairs.read_presets(PRESETS.encode(), "defaultpresets.xml")
    assert len(presets) == 20 and all(preset.name != "Not A Preset" for preset in presets)  # a chunk's items are no presets
    assert presets[0] == josm_pairs.Preset(1, ("Shops",), "Bakery", None, "presets/shop/bakery.png", {})
    assert presets[1] == josm_pairs.Preset(2, ("Shops", "Outdoors"), "Bench", None, "presets/leisure/bench.png",
                                           {"de": "Sitzbank", "pt_BR": "Banco"})
    assert presets[3][1:5] == (("Parking",), "Parking", "car", "presets/parking/car.png")
    assert presets[18][2:5] == ("Street", None, None)


@pytest.mark.parametrize("text, message", [
    ("<presets><item name='A'></presets>", r"defaultpresets\.xml: not well-formed XML \(mismatched tag"),
    ("<?xml version='1.0' encoding='UTF-9'?><presets/>", r"defaultpresets\.xml: not well-formed XML \(unknown encoding"),
    ("<annotations><item name='A'/></annotations>", r"defaultpresets\.xml: the root is <annotations>, not <presets>"),
    ("<presets><group name='G'><item name='A'/><item name=' ' icon='a.svg'/></group></presets>",
     r"defaultpresets\.xml: item 2 \(in G\) has no name"),
    ("<presets><group><item name='A'/></group></presets>", r"defaultpresets\.xml: group 1 \(in the root\) has no name")])
def test_read_presets_names_a_bad_file(text, message):
    with pytest.raises(ValueError, match=message):
        josm_pairs.read_presets(text.encode(), "defaultpresets.xml")


def test_preset_reader_survives_corrupt_bytes():
    corrupted_reads(PRESETS.encode(), lambda changed: josm_pairs.read_presets(changed, "defaultpresets.xml"),
                    "defaultpresets.xml: ", 7, at_start=True)


def test_icon_member_resolves_as_josm_does():
    members = {"images/presets/a.svg", "images/presets/a.png", "images/presets/b.png"}
    assert josm_pairs.icon_member("presets/a", members) == "images/presets/a.svg"  # SVG before PNG
    assert josm_pairs.icon_member("presets/b", members) == "images/presets/b.png"
    assert josm_pairs.icon_member("/presets/a.png", members) == "images/presets/a.png"
    assert josm_pairs.icon_member("presets/c.svg", members) is None


# ---- the caption rule -------------------------------------------------------------------------------------

def test_kept_captions_leaves_out_captions_of_two_pictures():
    pictures = {"cafe": [("cafe#Cafe", {"en": "Cafe", "de": "Café", "fr": "café"}), ("cafe#Coffee", {"en": "Coffee", "fr": "Café"})],
                "bar": [("bar#Bar", {"en": "Bar", "de": "Bar", "fr": "Bistro"})],
                "pub": [("pub#Pub", {"en": "Pub", "de": "Kneipe", "fr": "Bar"})],
                "bistro": [("bistro#Bistro", {"en": "Bistro", "de": "Kneipe"})],
                "car": [("car#Parking", {"en": "Parking", "de": "Parkplatz"})],
                "bike": [("bike#Parking", {"en": "Parking", "de": "Fahrradparkplatz"})],
                "x": [("x#X", {"en": "X", "de": "Y"})]}
    dropped = collections.Counter()
    kept = josm_pairs.kept_captions(pictures, dropped)
    assert kept == {"cafe": [("cafe#Cafe", "en", "Cafe"), ("cafe#Cafe", "de", "Café"), ("cafe#Coffee", "en", "Coffee")],
                    "bar": [("bar#Bar", "en", "Bar")],
                    "pub": [("pub#Pub", "en", "Pub")],
                    "bistro": [("bistro#Bistro", "en", "Bistro")],
                    "car": [("car#Parking", "de", "Parkplatz")],
                    "bike": [("bike#Parking", "de", "Fahrradparkplatz")],
                    "x": []}
    assert dropped == {"fr: a caption this picture already has": 2,  # "café" as de's, "Café" again
                       "de: the same as the English name": 1,  # Bar
                       "fr: the same as another picture's English name": 2,  # Bar (pub), Bistro (bar)
                       "de: a caption of another picture too": 2,  # Kneipe, pub's and bistro's
                       "en: a caption of another picture too": 2,  # Parking, car's and bike's
                       "en: fewer than 2 letters (not one CJK or Hangul word sign)": 1, "de: fewer than 2 letters "
                       "(not one CJK or Hangul word sign)": 1}
    owner = {caption.casefold(): picture for picture, captions in kept.items() for _, _, caption in captions}
    assert len(owner) == sum(map(len, kept.values()))  # no caption names two pictures


def test_two_pictures_under_one_caption_are_caught():
    """The control of the rule above: with the rule undone, the same check sees "Parking" on two pictures."""
    pictures = {"car": [("car#Parking", {"en": "Parking"})], "bike": [("bike#Parking", {"en": "Parking"})]}
    every = [(picture, caption) for picture, presets in pictures.items() for _, captions in presets for caption in captions.values()]
    assert len({caption.casefold() for _, caption in every}) < len(every)
    assert josm_pairs.kept_captions(pictures, collections.Counter()) == {"car": [], "bike": []}


# ---- jars written here ------------------------------------------------------------------------------------

def icon_png(index, size=(20, 16), frame=2):
    """PNG bytes: two colours of their own, side by side, inside a transparent frame."""
    image = Image.new("RGBA", size, (0, 0, 0, 0))
    width, height = size[0] - 2 * frame, size[1] - 2 * frame
    image.paste((40 * index % 256, 90 * index % 256, 200, 255), (frame, frame, frame + width // 2, frame + height))
    image.paste((200, 30 * index % 256, 60 * index % 256, 255), (frame + width // 2, frame, frame + width, frame + height))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def swatch_png():
    out = io.BytesIO()
    Image.new("RGBA", (16, 16), (32, 144, 207, 255)).save(out, format="PNG")
    return out.getvalue()


PNG_ICONS = ["shop/bakery", "leisure/bench", "parking/car", "parking/bicycle", "misc/route", "transport/bus_stop",
             "health/doctor", "misc/map", "shop/kiosk", "money/bank", "leisure/seat", "waste/basket", "waste/bin", "misc/x"]


def write_jar(folder, members=None, presets=PRESETS, extra=None):
    """folder/josm.jar: the presets above, en, de, de_DE, pt and pt_BR .lang files, a broken fr.lang (read only when
    French is asked for), and a PNG icon per preset (bench_copy the same bytes as bench, water one colour)."""
    folder.mkdir(parents=True, exist_ok=True)
    if members is None:
        members = {"data/defaultpresets.xml": presets.encode(), "data/en.lang": lang_bytes(EN, EN_PLURAL),
                   "data/de.lang": lang_bytes(DE, [("{0} Knoten", "{0} Knoten")]), "data/de_DE.lang": lang_bytes(DE_DE, [()]),
                   "data/pt.lang": lang_bytes(PT, [None]), "data/pt_BR.lang": lang_bytes(PT_BR, [("{0} nó", "{0} nós")]),
                   "data/fr.lang": lang_bytes(DE, EN_PLURAL)[:-3],
                   **{f"images/presets/{name}.png": icon_png(index + 1) for index, name in enumerate(PNG_ICONS)},
                   "images/presets/leisure/bench_copy.png": icon_png(2), "images/presets/misc/water.png": swatch_png()}
    members.update(extra or {})
    with zipfile.ZipFile(folder / "josm.jar", "w") as jar:
        for name, data in sorted(members.items()):
            jar.writestr(zipfile.ZipInfo(name, (2023, 1, 31, 0, 0, 0)), data)
    return folder


def test_josm_corpus_from_png_icons(tmp_path):
    write_jar(tmp_path / "share")
    arguments = ["--local-root", str(tmp_path / "share"), "--rsvg-convert", str(no_renderer_script(tmp_path)),
                 "--languages", "en,de,pt", "--seed", "1", "--dev-fraction", "0.25", "--test-fraction", "0.25"]
    splits, manifest, every = build_twice(josm_pairs.main, arguments, tmp_path)
    assert captions_by_source(every) == {
        "presets/shop/bakery.png#Bakery": {"en": "Bakery", "de": "Bäckerei", "pt": "Padaria"},  # pt from pt_BR: pt has none
        "presets/leisure/bench.png#Bench": {"en": "Bench", "de": "Sitzbank", "pt": "Banco"},  # LOCALE.name before .lang
        "presets/leisure/bench_copy.png#Garden Bench": {"en": "Garden Bench"},  # the same bytes: bench's picture
        "presets/parking/car.png#Parking": {"de": "Parkplatz"},  # "Parking" names two pictures
        "presets/parking/car.png#Car Park": {"en": "Car Park"},
        "presets/parking/bicycle.png#Parking": {"de": "Fahrradparkplatz"},  # trc("bicycle", "Parking")
        "presets/misc/route.png#Bus Route": {"en": "Bus Route", "de": "Buslinie"},  # de_DE's: de leaves it empty
        "presets/misc/route.png#Tram Route": {"en": "Tram Route"},
        "presets/transport/bus_stop.png#Bus Stop": {"en": "Bus Stop"},  # named without a suffix
        "presets/health/doctor.png#Doctor's Office": {"en": "Doctor's Office", "de": "Arztpraxis", "pt": "Médico d'aqui"},
        "presets/misc/map.png#Map": {"en": "Map", "pt": "Mapa"},  # de marks it as the English; pt before pt_BR
        "presets/shop/kiosk.png#Kiosk": {"en": "Kiosk"},  # de "Kiosk" is the English
        "presets/money/bank.png#Bank": {"en": "Bank"},
        "presets/leisure/seat.png#Seat": {"en": "Seat"},  # de "Bank" is another picture's English name
        "presets/waste/basket.png#Waste Basket": {"en": "Waste Basket"},  # de "Abfalleimer" names two pictures
        "presets/waste/bin.png#Waste Bin": {"en": "Waste Bin"}}
    assert manifest["dropped"] == {
        "de: a caption of another picture too": 2, "de: not translated": 8, "de: the same as another picture's English name": 1,
        "de: the same as the English name": 1, "en: a caption of another picture too": 2,
        "en: fewer than 2 letters (not one CJK or Hangul word sign)": 1, "picture: no caption left": 1,
        "picture: one colour (nothing visible)": 1, "preset: its icon is not in the jar": 1, "preset: no icon": 1,
        "pt: not translated": 14}
    assert manifest["captions_per_language"] == {"de": 6, "en": 14, "pt": 4}
    assert manifest["left_out_as_one_colour"] == ["presets/misc/water.png"]
    assert (manifest["presets"], manifest["presets_with_an_icon"], manifest["icon_files"], manifest["pictures"],
            manifest["groups"]) == (20, 18, 16, 15, 13)
    assert manifest["translations"]["files"]["de"] == {"strings": 12, "translated": 10, "marked_as_the_english": 1}
    assert set(manifest["translations"]["files"]) == {"de", "de_DE", "pt", "pt_BR"}  # fr is not asked for
    assert manifest["source"] == {"packages": [], "local": {"josm": str(tmp_path / "share"), "librsvg2-bin": str(tmp_path / "rsvg-convert"),
                                                            "librsvg2-2": str(tmp_path / "rsvg-convert")}}
    owner = {record["source"]: split for split in SPLITS for record in splits[split]}
    route = {owner["presets/misc/route.png#Bus Route"], owner["presets/misc/route.png#Tram Route"]}
    bench = {owner["presets/leisure/bench.png#Bench"], owner["presets/leisure/bench_copy.png#Garden Bench"]}
    assert len(route) == 1 and len(bench) == 1  # presets sharing a picture share a split
    assert len(list((tmp_path / "out" / "img").iterdir())) == 13
    with Image.open(tmp_path / "out" / "img" / "shop-bakery.png") as image:  # native size, cropped to what it draws
        assert image.mode == "RGB" and image.size == (16, 12)


def test_a_large_png_icon_is_cropped_then_fitted(tmp_path):
    image = Image.new("RGBA", (400, 100), (0, 0, 0, 0))
    image.paste((255, 0, 0, 255), (10, 10, 110, 60))
    image.paste((0, 0, 255, 255), (110, 10, 210, 60))
    data = io.BytesIO()
    image.save(data, format="PNG")
    fitted, reason = josm_pairs.icon_image("images/presets/wide.png", data.getvalue(), tmp_path, None, {}, 50, 256)
    assert reason is None and fitted.size[0] == 50 and abs(fitted.size[1] - 12.5) <= 1  # 200 x 50 drawn, fitted whole
    assert fitted.getpixel((5, 6)) == (255, 0, 0) and fitted.getpixel((45, 6)) == (0, 0, 255)


@needs_renderer
def test_svg_icons_are_drawn_at_one_size(tmp_path):
    small = ('<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 16 16">'
             '<rect x="4" y="2" width="4" height="12" fill="#ff0000"/><rect x="8" y="2" width="4" height="12" fill="#0000ff"/></svg>')
    large = small.replace('width="16" height="16" viewBox="0 0 16 16"', 'width="400" height="400" viewBox="0 0 64 64"')
    presets = ('<presets><item name="Red Blue" icon="presets/small.svg"/><item name="Large Canvas" icon="presets/large.svg"/>'
               '<item name="Pixel Icon" icon="presets/pixel.png"/></presets>')
    write_jar(tmp_path / "share", {"data/defaultpresets.xml": presets.encode(), "images/presets/small.svg": small.encode(),
                                   "images/presets/large.svg": large.encode(), "images/presets/pixel.png": icon_png(1)})
    arguments = ["--local-root", str(tmp_path / "share"), "--rsvg-convert", str(renderer_script(tmp_path)), "--languages", "en",
                 "--svg-size", "48", "--dev-fraction", "0.34", "--test-fraction", "0.34"]
    splits, manifest, _ = build_twice(josm_pairs.main, arguments, tmp_path)
    for name in ("small", "large"):  # what the icon draws, 8 x 12 of either canvas, at 48 px on its longer side
        with Image.open(tmp_path / "out" / "img" / f"{name}.png") as image:
            assert image.size[1] == 48 and abs(image.size[0] - 32) <= 1, (name, image.size)
            assert image.getpixel((4, 24)) == (255, 0, 0) and image.getpixel((image.size[0] - 5, 24)) == (0, 0, 255)
    with Image.open(tmp_path / "out" / "img" / "pixel.png") as image:
        assert image.size == (16, 12)  # a PNG is never enlarged
    assert manifest["translations"]["files"] == {} and manifest["captions_per_language"] == {"en": 3}
    image, _ = josm_pairs.icon_image("images/presets/small.svg", small.encode(), tmp_path, renderer_script(tmp_path),
                                     {}, 30, 48)
    assert image.size[1] == 30  # --size caps --svg-size


def test_josm_corpus_names_bad_input(tmp_path):
    share = tmp_path / "share"
    run = ["--local-root", str(share), "--rsvg-convert", str(no_renderer_script(tmp_path)), "--output", str(tmp_path / "out"),
           "--languages", "en,de,pt"]
    share.mkdir()
    (share / "josm.jar").write_bytes(b"not a zip")
    with pytest.raises(SystemExit, match=r"josm\.jar: not a readable zip archive \(BadZipFile"):
        josm_pairs.main(run)
    write_jar(share, {"data/en.lang": lang_bytes(EN, EN_PLURAL)})
    with pytest.raises(SystemExit, match=r"josm\.jar: no data/defaultpresets\.xml"):
        josm_pairs.main(run)
    write_jar(share, presets=PRESETS[:-11])  # its closing tag gone
    with pytest.raises(SystemExit, match=r"josm\.jar!data/defaultpresets\.xml: not well-formed XML \(no element found"):
        josm_pairs.main(run)
    write_jar(share, extra={"data/de.lang": lang_bytes(DE, [("{0} Knoten", "{0} Knoten")])[:-4]})
    with pytest.raises(SystemExit, match=r"josm\.jar!data/de\.lang: cut short at byte \d+ \(a text of 10 bytes, 6 left\)"):
        josm_pairs.main(run)
    write_jar(share, extra={"data/pt.lang": lang_bytes(PT + ["Extra"], [None])})
    with pytest.raises(SystemExit, match=r"josm\.jar!data/pt\.lang: 13 singular and 1 plural entries, but en\.lang has 12 and 1"):
        josm_pairs.main(run)
    write_jar(share)
    with pytest.raises(SystemExit, match=r"josm\.jar!data/fr\.lang: cut short"):  # read once French is asked for
        josm_pairs.main([*run[:-1], "en,fr"])
    write_jar(share, extra={"images/presets/misc/map.svg": b"<svg><g></svg>"},
              presets=PRESETS.replace("presets/misc/map.png", "presets/misc/map.svg"))
    with pytest.raises(SystemExit, match=r"josm\.jar!images/presets/misc/map\.svg: not well-formed XML \(mismatched tag"):
        josm_pairs.main(run)
    write_jar(share, extra={"images/presets/misc/map.svg": b'<svg xmlns="http://www.w3.org/2000/svg"/>'},
              presets=PRESETS.replace("presets/misc/map.png", "presets/misc/map.svg"))
    with pytest.raises(SystemExit, match=r"josm\.jar!images/presets/misc/map\.svg: does not render \(rasterize: "):
        josm_pairs.main(run)  # this rsvg-convert only tells its version: no PNG comes back


@needs_renderer
def test_an_icon_librsvg_cannot_draw_is_named(tmp_path):
    write_jar(tmp_path / "share", {"data/defaultpresets.xml": b'<presets><item name="Broken" icon="presets/b.svg"/></presets>',
                                   "images/presets/b.svg": b'<html xmlns="http://www.w3.org/1999/xhtml"><p>no SVG</p></html>'})
    with pytest.raises(SystemExit, match=r"josm\.jar!images/presets/b\.svg: does not render \(rasterize: "):
        josm_pairs.main(["--local-root", str(tmp_path / "share"), "--rsvg-convert", str(renderer_script(tmp_path)),
                         "--languages", "en", "--output", str(tmp_path / "out")])


# ---- the real package -------------------------------------------------------------------------------------

@pytest.mark.skipif(not REAL_JAR.is_file(), reason="josm is not unpacked in data/.debian (josm_pairs.py fetches it)")
def test_real_jar():
    presets, tables, icons, summary = josm_pairs.read_jar(REAL_JAR, {"en", "de", "pt", "zh"})
    names = {preset.name for preset in presets}
    assert {"Bakery", "Bench", "Fire Hydrant", "Post Box"} <= names and len(presets) > 800
    assert [locale for locale, _ in tables["de"]] == ["de", "de_DE"] and [locale for locale, _ in tables["pt"]] == ["pt", "pt_BR"]
    assert [locale for locale, _ in tables["zh"]] == ["zh_CN"]
    german = dict(tables["de"])["de"]
    assert josm_pairs.preset_translation(german, "Map") == "Karte"
    assert josm_pairs.preset_translation(german, "Bakery") is None  # Debian's .lang files hold no preset's name
    assert all(member.startswith("images/presets/") for member in icons)


# ---- the corpus in data/josm, when built ------------------------------------------------------------------

def languages_outside(splits, languages):
    """The records' languages that are not among `languages`."""
    return {record["lang"] for split in SPLITS for record in splits[split]} - set(languages)


def built():
    if not (BUILT / "manifest.json").exists():
        pytest.skip("data/josm is not built (scripts/data/josm_pairs.py writes it)")
    return read_splits(BUILT), json.loads((BUILT / "manifest.json").read_text(encoding="utf-8"))


def test_built_corpus():
    _, _ = built()
    splits, manifest = check_image_corpus(BUILT)  # manifest counts and hashes, every image there and listed, no leak
    assert all(splits[split] for split in SPLITS)
    assert not languages_outside(splits, ["en", *DEFAULT_LANGUAGES])
    records = [record for split in SPLITS for record in splits[split]]
    assert all(set(record) == {"query", "positives", "lang", "source"} for record in records)
    assert all((BUILT / positive["image"]).is_file() for record in records for positive in record["positives"])
    per_language = collections.Counter(record["lang"] for record in records)
    for split in SPLITS:
        counts = collections.Counter(record["lang"] for record in splits[split])
        assert manifest["records"][split] == {"total": len(splits[split]), **counts}
    assert sum(per_language.values()) <= sum(manifest["captions_per_language"].values())
    split_of = collections.defaultdict(set)
    for split in SPLITS:
        for record in splits[split]:
            split_of[record["positives"][0]["image"]].add(split)
    assert all(len(places) == 1 for places in split_of.values())  # no image in two splits
    package = manifest["source"]["packages"][0]
    assert package["package"] == "josm" and package["version"] and package["sha256"] and package["licence"]


def test_built_corpus_checks_can_fail():
    """Controls of the checks above: a test record given train's picture is a leak, a Greek record is out of the list."""
    splits, _ = built()
    digests = image_digests(BUILT)

    def keys(record):
        return [record["query"].casefold(), *("sha256:" + digests[positive["image"]] for positive in record["positives"])]

    assert not leaks(splits, keys)
    planted = {**splits, "test": [{**splits["test"][0], "positives": splits["train"][0]["positives"]}, *splits["test"][1:]]}
    assert leaks(planted, keys) == {"sha256:" + digests[splits["train"][0]["positives"][0]["image"]]}
    greek = {**splits, "dev": [*splits["dev"], {**splits["dev"][0], "lang": "el"}]}
    assert languages_outside(greek, ["en", *DEFAULT_LANGUAGES]) == {"el"}
