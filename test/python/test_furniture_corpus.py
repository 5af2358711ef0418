# test_furniture_corpus.py: scripts/data/furniture_pairs.py on small catalogues written here, offline: the Java
# properties reader against values written by hand (escapes, continuations, comments, the three separators,
# ISO-8859-1), one locale a language (pt before pt_PT, zh_CN for zh, zh_TW and en_US not read), the corpus
# (the jar's default catalogue and two .sh3f files: exact captions per language, one picture per English name,
# two names on one icon in one split, the drops counted), bad archives named, and random byte changes to a
# properties file and to a zip that either read or raise ValueError naming the file. The real catalogues are
# tried when the packages are unpacked in data/.debian; test_image_corpora checks the built corpus in data/furniture.

import collections
import io
import pathlib
import sys
import zipfile

import pytest
from PIL import Image

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "data"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import furniture_pairs  # noqa: E402
from test_image_corpora import SPLITS, build_twice, captions_by_source, colour, corrupted_reads  # noqa: E402

UNPACKED = ROOT / "data" / ".debian" / "root"
REAL_FURNITURE = UNPACKED / furniture_pairs.PACKAGE / furniture_pairs.SHARE / furniture_pairs.FURNITURE


# ---- the properties reader ------------------------------------------------------------------------

def test_read_properties_reads_as_java_does():
    data = (b"! a comment\n"
            b"   \n"
            b"# a comment \\\n"  # a comment's trailing backslash continues nothing
            b"plain=value\n"
            b"  colon: spaced value  \n"
            b"space\tseparated value\n"
            b"equals = : kept colon\n"
            b"blank  =  \n"
            b"lonely\n"
            b"key\\ with\\=escapes\\:=x\n"
            b"\\#hash=not a comment\n"
            b"long=one, \\\n    two, \\\r\n\t three\n"
            b"even=ends in a backslash\\\\\n"
            b"unicode=caf\\u00E9 \\u5c0f\\u5c4b\r"
            b"latin=\xe9t\xe9 \xe0 \xa7\x85\n"
            b"controls=a\\tb\\nc\\rd\\fe\\q\n"
            b"emoji=\\ud83d\\ude00\n"
            b"repeat=first\n"
            b"repeat=second\r\n"
            b"last=the end\\")
    assert furniture_pairs.read_properties(data, "x.properties") == {
        "plain": "value", "colon": "spaced value  ", "space": "separated value", "equals": ": kept colon",
        "blank": "", "lonely": "", "key with=escapes:": "x", "#hash": "not a comment", "long": "one, two, three",
        "even": "ends in a backslash\\", "unicode": "café 小屋", "latin": "été à §\x85", "controls": "a\tb\nc\rd\x0ceq",
        "emoji": "😀", "repeat": "second", "last": "the end"}


@pytest.mark.parametrize("line, fault", [(b"bad=\\u12G4", "malformed"), (b"short=\\u12", "malformed"),
                                         (b"lone=\\ud800 alone", "lone UTF-16 surrogate")])
def test_read_properties_names_a_bad_escape(line, fault):
    with pytest.raises(ValueError, match=rf"^cat\.properties:3: .*{fault}"):
        furniture_pairs.read_properties(b"# header\nfine=yes\n" + line + b"\nafter=no\n", "cat.properties")


# ---- catalogues written here ----------------------------------------------------------------------

def icon(index, size=(20, 16), visible=True):
    """PNG bytes: a patch of colour(index) inside a transparent 2-pixel frame (all transparent unless visible)."""
    image = Image.new("RGBA", size, (0, 0, 0, 0))
    if visible:
        image.paste(colour(index), (2, 2, size[0] - 2, size[1] - 2))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def write_catalogue(path, base, items, translations, extra=None):
    """A catalogue archive: BASE.properties with name#N and icon#N of each (name, icon member, icon bytes or
    None) item, BASE_LOCALE.properties of each {locale: text}, the icons, and `extra` {member: bytes}."""
    path.parent.mkdir(parents=True, exist_ok=True)
    english = "# a catalogue written by the test\nid=Test#catalogue\nlicense=Free for tests\n\n" + "".join(
        f"id#{number}=test#{number}\nname#{number}={name}\ncategory#{number}=Living room\nicon#{number}=/{member}\n\n"
        for number, (name, member, _) in enumerate(items, 1))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(f"{base}.properties", english.encode("latin-1"))
        for locale, text in translations.items():
            archive.writestr(f"{base}_{locale}.properties", text.encode("latin-1"))
        for _, member, data in items:
            if data is not None:
                archive.writestr(member, data)
        for member, data in (extra or {}).items():
            archive.writestr(member, data)


def write_furniture_tree(root):
    """A folder laid out as /usr/share/sweethome3d: sweethome3d.jar's default catalogue (six items, German,
    Chinese in zh_CN and zh_TW, an en_US variant), furniture/A.sh3f (a second "chair", a missing icon, an
    icon that does not decode, a transparent one, two names on one icon; Portuguese in pt and pt_PT,
    Vietnamese copying English) and furniture/B.sh3f (eight more, German)."""
    jar = [(name, f"com/eteks/sweethome3d/io/resources/{index}.png", icon(index))
           for index, name in enumerate(["Chair", "Bed 140x190", "Sofa", "Window", "Lamp", "Piano"])]
    write_catalogue(root / "sweethome3d.jar", furniture_pairs.DEFAULT_CATALOGUE, jar, {
        "de": "name#1=Stuhl\ncategory#1=Wohnzimmer\nname#2=Bett 140x190\nname#3=Sofa\nname#4=Fenster\nname#5=Lampe\n"
              "name#6=Klavier\n",
        "zh_CN": "name#1=\\u6905\\u5b50\nname#4=\\u7a97\nname#6=\\u94a2\\u7434\n",
        "zh_TW": "name#1=\\u6905\\u5b50 TW\nname#2=\\u5e8a TW\n",
        "en_US": "name#4=US window\n"},
        extra={"com/eteks/sweethome3d/SweetHome3D.class": b"\xca\xfe\xba\xbe"})
    desk = icon(10)
    plugin = [("chair ", "a/chair.png", icon(11)), ("Bookcase", "a/bookcase.png", icon(12)), ("Desk", "a/desk.png", desk),
              ("Writing desk", "a/writing-desk.png", desk), ("Table lamp", "a/missing.png", None),
              ("Broken", "a/broken.png", b"\x89PNG\r\n\x1a\n not a picture"), ("Ghost", "a/ghost.png", icon(13, visible=False)),
              ("Stool", "a/stool.png", icon(14))]
    write_catalogue(root / "furniture" / "A.sh3f", furniture_pairs.CATALOGUE, plugin, {
        "pt": "name#1=Cadeira\nname#2=Estante\nname#3=Secret\\u00e1ria\nname#8=Banco\n",
        "pt_PT": "name#2=Estante PT\nname#3=Escrivaninha PT\n",
        "vi": "name#2=Bookcase\nname#3=B\\u00e0n l\\u00e0m vi\\u1ec7c\nname#8=  \n",
        "de": "name#2=B\xfccherregal\nname#3 = Schreib\\\n    tisch\nname#4:Sekret\xe4r\nname#8 Hocker\n"})
    others = ["Bath", "Sink", "Fridge", "Oven", "Stairs", "Plant", "Door", "Rug"]
    german = ["Badewanne", "Sp\xfcle", "K\xfchlschrank", "Ofen", "Treppe", "Pflanze", "T\xfcr", "Teppich"]
    write_catalogue(root / "furniture" / "B.sh3f", furniture_pairs.CATALOGUE,
                    [(name, f"b/{name.lower()}.png", icon(20 + index)) for index, name in enumerate(others)],
                    {"de": "".join(f"name#{number}={name}\n" for number, name in enumerate(german, 1))})


def test_one_locale_a_language(tmp_path):
    write_furniture_tree(tmp_path / "share")
    found = furniture_pairs.collect(tmp_path / "share", {"en", "de", "pt", "zh", "vi"}, collections.Counter())
    captions = {f"{archive}#{number}": captions for archive, number, _, _, captions, _ in found}
    assert captions["sweethome3d.jar#1"] == {"en": "Chair", "de": "Stuhl", "zh": "椅子"}  # zh_CN, not zh_TW
    assert captions["sweethome3d.jar#4"] == {"en": "Window", "de": "Fenster", "zh": "窗"}  # English not from en_US
    assert captions["A.sh3f#2"] == {"en": "Bookcase", "de": "Bücherregal", "pt": "Estante"}  # pt before pt_PT
    assert captions["A.sh3f#3"] == {"en": "Desk", "de": "Schreibtisch", "pt": "Secretária", "vi": "Bàn làm việc"}
    zh_only = furniture_pairs.collect(tmp_path / "share", {"zh"}, collections.Counter())
    assert {language for *_, captions, _ in zh_only for language in captions} == {"en", "zh"}


def test_furniture_corpus(tmp_path):
    write_furniture_tree(tmp_path / "share")
    arguments = ["--local-root", str(tmp_path / "share"), "--languages", "en,de,pt,zh,vi", "--seed", "2",
                 "--dev-fraction", "0.25", "--test-fraction", "0.25", "--size", "16"]
    splits, manifest, every = build_twice(furniture_pairs.main, arguments, tmp_path)
    by_source = captions_by_source(every)
    assert by_source["sweethome3d.jar#1"] == {"en": "Chair", "de": "Stuhl", "zh": "椅子"}
    assert by_source["sweethome3d.jar#3"] == {"en": "Sofa"}  # the German "Sofa" is the English name
    assert by_source["A.sh3f#8"] == {"en": "Stool", "de": "Hocker", "pt": "Banco"}
    assert by_source["B.sh3f#2"] == {"en": "Sink", "de": "Spüle"}
    # "chair " of A.sh3f is the jar's "Chair": one group, its first picture only, so no caption names two.
    assert "A.sh3f#1" not in by_source and "Cadeira" not in {record["query"] for record in every}
    assert sorted(by_source) == sorted([f"sweethome3d.jar#{number}" for number in range(1, 7)] +
                                       ["A.sh3f#2", "A.sh3f#3", "A.sh3f#4", "A.sh3f#8"] + [f"B.sh3f#{number}" for number in range(1, 9)])
    # Desk and Writing desk share an icon: joined, so both land in one split.
    split_of_source = {record["source"]: split for split in SPLITS for record in splits[split]}
    assert split_of_source["A.sh3f#3"] == split_of_source["A.sh3f#4"] and manifest["groups_joined_by_a_shared_image"] == 1
    assert manifest["dropped"] == {"de: the same as the English name": 1, "de: no name": 3, "icon: unreadable (UnidentifiedImageError)": 1,
                                   "item: its icon is not in its catalogue": 1, "item: the same English name as an earlier item": 1,
                                   "picture: fully transparent (nothing visible)": 1, "pt: no name": 3,
                                   "vi: no name": 5, "vi: the same as the English name": 1, "zh: no name": 3}
    assert manifest["catalogues"]["A.sh3f"] == {"items": 7, "licence": "Free for tests"}
    assert manifest["source"] == {"packages": [], "local": {"sweethome3d-furniture": str(tmp_path / "share"),
                                                            "sweethome3d": str(tmp_path / "share")}}
    with Image.open(tmp_path / "out" / "img" / "sweethome3d-1-0.png") as image:  # shrunk to --size, on white
        assert image.mode == "RGB" and image.size == (16, 13) and image.getpixel((0, 0)) == (255, 255, 255)


def test_furniture_corpus_names_a_bad_catalogue(tmp_path):
    write_furniture_tree(tmp_path / "share")
    run = ["--local-root", str(tmp_path / "share"), "--output", str(tmp_path / "out")]
    archive = tmp_path / "share" / "furniture" / "A.sh3f"
    blob = archive.read_bytes()
    archive.write_bytes(blob[: len(blob) // 2])
    with pytest.raises(SystemExit, match=r"A\.sh3f: not a readable zip archive \(BadZipFile"):
        furniture_pairs.main(run)
    archive.write_bytes(blob)
    write_catalogue(tmp_path / "share" / "furniture" / "B.sh3f", furniture_pairs.CATALOGUE, [("Bath", "b/bath.png", icon(1))],
                    {"de": "# German\nname#1=Badewanne \\uD\n"})
    with pytest.raises(SystemExit, match=r"B\.sh3f!PluginFurnitureCatalog_de\.properties:2: malformed \\uxxxx escape"):
        furniture_pairs.main(run)
    with zipfile.ZipFile(tmp_path / "share" / "furniture" / "B.sh3f", "w") as renamed:
        renamed.writestr("Catalog.properties", b"name#1=Bath\n")
    with pytest.raises(SystemExit, match=r"B\.sh3f: no PluginFurnitureCatalog\.properties"):
        furniture_pairs.main(run)


@pytest.mark.parametrize("target", ["properties", "zip"])
def test_readers_survive_corrupt_bytes(tmp_path, target):
    """Random byte changes to a valid file: each read returns or raises ValueError naming the file, nothing else."""
    write_furniture_tree(tmp_path / "share")
    archive = tmp_path / "share" / "sweethome3d.jar"
    if target == "properties":
        path = tmp_path / "zh.properties"
        path.write_bytes(b"# Chinese\n" + b"".join(b"name#%d=\\u%04x\\u%04x \\\n  \\u%04x\n" % (number, 0x4E00 + number, 0x5000 + number,
                                                                                                   0x6000 + number) for number in range(1, 30)))

        def read(changed):
            return furniture_pairs.read_properties(changed, str(path))
    else:
        path = archive

        def read(changed):
            path.write_bytes(changed)
            return furniture_pairs.read_catalogue(path, furniture_pairs.DEFAULT_CATALOGUE)
    corrupted_reads(path.read_bytes(), read, str(path), 7)


# ---- the real catalogues ------------------------------------------------------------------------------

@pytest.mark.skipif(not (REAL_FURNITURE / "KatorLegaz.sh3f").is_file(),
                    reason="sweethome3d-furniture is not unpacked in data/.debian (furniture_pairs.py fetches it)")
def test_real_catalogue():
    header, items = furniture_pairs.read_catalogue(REAL_FURNITURE / "KatorLegaz.sh3f")
    assert header["name"] == "Kator Legaz catalog" and len(items) == 90
    number, icon_path, data, names = items[1]
    assert (number, icon_path, data[:8]) == (2, "katorlegaz/bathroom-tissue.png", b"\x89PNG\r\n\x1a\n")
    assert {locale: names[locale] for locale in ("", "de", "zh_CN", "ru")} == {
        "": "Toilet paper dispenser", "de": "Toilettenpapierhalter ", "zh_CN": "卫生纸卷轴", "ru": "Рулон туалетной бумаги"}
    assert items[0][3]["de"] == "Insektenschutztür"  # ISO-8859-1 in the file

