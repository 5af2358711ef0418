# test_ktuberling_corpus.py: scripts/data/ktuberling_pairs.py on small playgrounds written here, offline: sound
# names read as captions and Indonesian names read from recordings' file names (values written by hand), an
# object drawn alone wherever it sits (a transformed group whole, a hidden layer's object shown, the board's
# background left out, a light object on grey, an empty one dropped), the corpus built twice to the same bytes
# (one picture per English name, the drops and the recordings counted), bad themes, gameboards and soundthemes
# named with their file, and random byte changes that either read or raise ValueError naming the file. Rendering
# needs librsvg unpacked in data/.debian (ktuberling_pairs.py and clipart_pairs.py fetch it); the real package is
# tried when unpacked; test_image_corpora checks the built corpus in data/ktuberling.

import gzip
import os
import pathlib
import sys
import xml.etree.ElementTree as ElementTree

import numpy
import pytest
from PIL import Image

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "data"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import clipart_pairs  # noqa: E402
import ktuberling_pairs  # noqa: E402
import stamp_pairs  # noqa: E402
from test_corpora import leaks, read_splits  # noqa: E402
from test_image_corpora import SPLITS, build_twice, captions_by_source, corrupted_reads, image_digests  # noqa: E402

UNPACKED = ROOT / "data" / ".debian" / "root"
RSVG = UNPACKED / "librsvg2-bin" / clipart_pairs.RSVG_CONVERT
REAL = UNPACKED / ktuberling_pairs.PACKAGE / ktuberling_pairs.SHARE
needs_renderer = pytest.mark.skipif(not RSVG.is_file(), reason="librsvg2-bin is not unpacked in data/.debian "
                                                               "(ktuberling_pairs.py fetches it)")


# ---- names ------------------------------------------------------------------------------------------

def test_english_name_reads_a_sound_name():
    assert [ktuberling_pairs.english_name(sound) for sound in
            ("nose", "egypt_camel", "tv_breakdown_lorry", "pizzeria_olive1", "robot_workshop_arm", "butterflies_purple_shape",
             "tux-apple", "xmas_tux", "kid-tux", "egypt_palmtree", "tux-dowe", "whitch-tux")] == [
        "nose", "camel", "breakdown lorry", "olive", "robot arm", "butterfly purple shape",
        "apple", "Tux", "kid Tux", "palm tree", "dove", "witch Tux"]


def test_file_name_caption_reads_a_translators_file_name():
    assert ktuberling_pairs.file_name_caption("bow", "id/bow_dasi-kupu-kupu.wav") == "dasi kupu-kupu"
    assert ktuberling_pairs.file_name_caption("egypt_man", "id/egypt_man_laki-laki.wav") == "laki-laki"
    assert ktuberling_pairs.file_name_caption("tv_volley_net", "id/tv_volley_net_net-voli.wav") == "net voli"
    assert ktuberling_pairs.file_name_caption("tv_fireengine", "id/tv_fireengine_mobil-pemadam-kebakaran.wav") == \
        "mobil pemadam kebakaran"
    assert ktuberling_pairs.file_name_caption("egypt_sphynx", "id/egypt_sphynx.wav") is None  # nothing after the name
    assert ktuberling_pairs.file_name_caption("tux-letter-love", "id/tux-love_surat-cinta.wav") is None  # another name's file
    assert ktuberling_pairs.file_name_caption("eye", "fr/patate_oeil.wav") is None
    assert ktuberling_pairs.file_name_caption("hat", "id/hat_-.wav") is None


# ---- playgrounds written here -------------------------------------------------------------------------

BOARD = '''<?xml version="1.0"?>
<svg xmlns="http://www.w3.org/2000/svg" xmlns:inkscape="http://www.inkscape.org/namespaces/inkscape" width="100" height="100">
 <defs><linearGradient id="fade"><stop offset="0" stop-color="#ff0000"/><stop offset="1" stop-color="#ff0000"/></linearGradient></defs>
 <g id="background"><rect x="0" y="0" width="100" height="100" fill="#00ff00"/><rect x="0" y="90" width="100" height="10" fill="#006600"/></g>
 <g id="layer1" inkscape:label="objects" style="display:inline">
  <rect id="hat1" x="10" y="10" width="40" height="20" style="fill:url(#fade)"/>
  <g id="moved" transform="translate(60,60)"><rect x="0" y="0" width="10" height="10" fill="#0000ff"/>
   <rect x="10" y="0" width="10" height="10" fill="#ffff00"/></g>
  <circle id="ghost" cx="50" cy="50" r="5" fill="#ffffff"/>
  <g id="empty"/>
 </g>
 <g id="hidden" style="display:none"><rect id="secret" x="40" y="80" width="10" height="10" fill="#800080"/></g>
</svg>
'''


def zoo_board(ids):
    """An SVG with one 10x10 square of its own colour per id, in a row of rows, over a green background."""
    squares = "".join(f'<rect id="{name}" x="{10 + 20 * (index % 4)}" y="{10 + 20 * (index // 4)}" width="10" height="10" '
                      f'fill="#{(40 * index) % 200:02x}{(90 * index) % 200:02x}c0"/>' for index, name in enumerate(ids))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="100" height="100"><rect id="bg" width="100" height="100" '
            f'fill="#00ff00"/><g id="things">{squares}</g></svg>')


ZOO = [("lion", "tv_lion"), ("hat2", "hat"), ("bow", "bow"), ("dove", "tux-dowe"), ("kid", "kid-tux"), ("ball", "tv_ball"),
       ("robotball", "robot_workshop_ball"), ("radar", "moon_radar"), ("planet", "moon_planet"), ("palm", "egypt_palmtree"),
       ("camel", "egypt_camel"), ("rock", "tv_rock")]


def theme(gameboard, objects):
    return (f'  <playground gameboard="{gameboard}" desktop="x.desktop" bgcolor="#fff">\n' +
            "".join(f'    <object name="{name}" sound="{sound}" scale="2" />\n' for name, sound in objects) + "  </playground>\n")


def soundtheme(code, sounds):
    return f'<language code="{code}">\n' + "".join(f'  <sound name="{name}" file="{file}" />\n' for name, file in sounds) + "</language>\n"


def write_tree(root):
    """A folder laid out as /usr/share/ktuberling: pics/default_theme (a plain SVG: a red hat, a transformed
    two-colour group, a white ghost, an empty group, an object in a hidden layer) and pics/zoo (an .svgz of
    12 squares: a second "hat", two balls named "bola" in Indonesian, a radar named "radar", a planet whose
    file names nothing); sounds/ in English (two of three recordings there), Indonesian (none there) and French
    (file names without accents, not read as captions)."""
    pics = root / "pics"
    pics.mkdir(parents=True)
    (pics / "default_theme.svg").write_text(BOARD, encoding="utf-8")
    (pics / "default_theme.theme").write_text(theme("default_theme.svg", [
        ("hat1", "hat"), ("moved", "tv_fireengine"), ("ghost", "xmas_snowman"), ("empty", "moon_ufo"),
        ("secret", "robot_workshop_arm")]), encoding="utf-8")
    (pics / "zoo.svgz").write_bytes(gzip.compress(zoo_board([name for name, _ in ZOO]).encode(), mtime=0))
    (pics / "zoo.theme").write_text(theme("zoo.svgz", ZOO), encoding="utf-8")
    sounds = root / "sounds"
    (sounds / "en").mkdir(parents=True)
    (sounds / "fr").mkdir()
    (sounds / "en.soundtheme").write_text(soundtheme("en", [("hat", "en/hat.ogg"), ("tv_lion", "en/tv_lion.ogg"),
                                                            ("bow", "en/bow.ogg")]), encoding="utf-8")
    for name in ("hat", "tv_lion"):
        (sounds / "en" / f"{name}.ogg").write_bytes(b"OggS")
    (sounds / "id.soundtheme").write_text(soundtheme("id", [
        ("hat", "id/hat_topi.wav"), ("bow", "id/bow_dasi-kupu-kupu.wav"), ("tv_fireengine", "id/tv_fireengine_mobil-pemadam-kebakaran.wav"),
        ("xmas_snowman", "id/xmas_snowman_manusia-salju.wav"), ("robot_workshop_arm", "id/robot_workshop_arm_lengan.wav"),
        ("tv_lion", "id/tv_lion_singa.wav"), ("tux-dowe", "id/tux-dowe_merpati-hinggap.wav"), ("kid-tux", "id/kid-tux_tux-pemanah.wav"),
        ("tv_ball", "id/tv_ball_bola.wav"), ("robot_workshop_ball", "id/robot_workshop_ball_bola.wav"),
        ("moon_radar", "id/moon_radar_radar.wav"), ("moon_planet", "id/moon_planet.wav"), ("egypt_palmtree", "id/egypt_palmtree_pohon-palem.wav"),
        ("egypt_camel", "id/egypt_camel_unta.wav"), ("egypt_camel", "id/egypt_camel_onta.wav")]), encoding="utf-8")
    (sounds / "fr.soundtheme").write_text(soundtheme("fr", [("hat", "fr/patate_chapeau.wav"), ("tv_rock", "fr/train_rocher.wav")]),
                                          encoding="utf-8")
    (sounds / "fr" / "patate_chapeau.wav").write_bytes(b"RIFF")


def renderer_script(folder):
    """An rsvg-convert that runs the unpacked one with its unpacked library."""
    script = folder / "rsvg-convert"
    library = UNPACKED / "librsvg2-2" / clipart_pairs.LIBRARY_FOLDER
    script.write_text(f'#!/bin/sh\nLD_LIBRARY_PATH="{library}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}" exec "{RSVG}" "$@"\n')
    script.chmod(0o755)
    return script


def no_renderer_script(folder):
    """An rsvg-convert that only tells its version: enough for the inputs refused before anything is drawn."""
    script = folder / "rsvg-convert"
    script.write_text("#!/bin/sh\necho rsvg-convert version 0\n")
    script.chmod(0o755)
    return script


def pixels(image):
    """The set of an RGB image's colours."""
    return set(map(tuple, numpy.asarray(image.convert("RGB")).reshape(-1, 3).tolist()))


@needs_renderer
def test_an_object_is_drawn_alone(tmp_path):
    write_tree(tmp_path / "share")
    tree = ElementTree.ElementTree(ktuberling_pairs.read_xml(tmp_path / "share" / "pics" / "default_theme.svg"))
    elements = {element.get("id"): element for element in tree.iter() if element.get("id")}
    parents = {child: parent for parent in tree.iter() for child in parent}
    rsvg = renderer_script(tmp_path)
    before = ElementTree.tostring(tree.getroot())

    def drawn(name):
        ktuberling_pairs.isolated(tree, parents, elements[name], tmp_path / "object.svg")
        return ktuberling_pairs.rendered(tmp_path / "object.svg", rsvg, dict(os.environ), 32)

    def draw(name):
        image, reason = drawn(name)
        return (stamp_pairs.composited(image)[0] if image is not None else None), reason

    hat, _ = draw("hat1")  # a 2:1 rectangle filling 32 px, through a gradient in <defs>
    assert hat.size[0] == 32 and abs(hat.size[1] - 16) <= 1 and hat.getpixel((16, 8)) == (255, 0, 0)
    moved, _ = draw("moved")  # a translated group: drawn whole, blue half and yellow half
    assert moved.size[0] == 32 and moved.getpixel((8, 8)) == (0, 0, 255) and moved.getpixel((24, 8)) == (255, 255, 0)
    secret, _ = draw("secret")  # in a hidden layer, drawn as the game draws it
    assert secret.size == (32, 32) and secret.getpixel((16, 16)) == (128, 0, 128)
    ghost, _ = draw("ghost")  # white: on grey, the circle's corners showing the background
    assert ghost.getpixel((16, 16)) == (255, 255, 255) and ghost.getpixel((0, 0)) == stamp_pairs.LIGHT_BACKGROUND[:3]
    green = (0, 255, 0)
    assert not any(green in pixels(image) for image in (hat, moved, secret, ghost))  # the board's background stays out
    background, _ = drawn("background")  # the control: the check above sees green where there is some
    assert green in pixels(background)
    assert draw("empty") == (None, "rasterize: one colour (nothing visible)")
    assert ElementTree.tostring(tree.getroot()) == before  # the tree is left as it was


@needs_renderer
def test_ktuberling_corpus(tmp_path):
    write_tree(tmp_path / "share")
    arguments = ["--local-root", str(tmp_path / "share"), "--rsvg-convert", str(renderer_script(tmp_path)),
                 "--languages", "en,id,fr", "--seed", "1", "--dev-fraction", "0.25", "--test-fraction", "0.25", "--size", "24"]
    splits, manifest, every = build_twice(ktuberling_pairs.main, arguments, tmp_path)
    by_source = captions_by_source(every)
    assert by_source == {
        "default_theme#hat1": {"en": "hat", "id": "topi"},
        "default_theme#moved": {"en": "fire engine", "id": "mobil pemadam kebakaran"},
        "default_theme#ghost": {"en": "snowman", "id": "manusia salju"},
        "default_theme#secret": {"en": "robot arm", "id": "lengan"},
        "zoo#lion": {"en": "lion", "id": "singa"},
        "zoo#bow": {"en": "bow", "id": "dasi kupu-kupu"},
        "zoo#dove": {"en": "dove", "id": "merpati hinggap"},
        "zoo#kid": {"en": "kid Tux", "id": "tux pemanah"},
        "zoo#ball": {"en": "ball", "id": "bola"},
        "zoo#robotball": {"en": "robot ball"},  # "bola" names the ball already
        "zoo#radar": {"en": "radar"},  # "radar" is the English name
        "zoo#planet": {"en": "planet"},  # its file names nothing after the sound name
        "zoo#palm": {"en": "palm tree", "id": "pohon palem"},
        "zoo#camel": {"en": "camel", "id": "unta"},  # the first of two recordings
        "zoo#rock": {"en": "rock"}}  # no Indonesian recording; French file names are no captions
    assert manifest["dropped"] == {"id: no name in its recording's file name": 1, "id: no recording of its sound listed": 1,
                                   "id: the same as an earlier picture's caption": 1, "id: the same as the English name": 1,
                                   "object: the same English name as an earlier object": 1,
                                   "rasterize: one colour (nothing visible)": 1}
    assert manifest["captions_per_language"] == {"en": 15, "id": 11}
    assert manifest["themes"] == {"default_theme": {"gameboard": "default_theme.svg", "objects": 5, "kept": 4},
                                  "zoo": {"gameboard": "zoo.svgz", "objects": 12, "kept": 11}}
    assert manifest["recordings"]["languages"] == {
        "en": {"sound_names": 3, "recordings_listed": 3, "recordings_present": 2, "formats": ["ogg"], "pictures_with_a_recording": 2},
        "fr": {"sound_names": 2, "recordings_listed": 2, "recordings_present": 1, "formats": ["wav"], "pictures_with_a_recording": 1},
        "id": {"sound_names": 14, "recordings_listed": 15, "recordings_present": 0, "formats": ["wav"], "pictures_with_a_recording": 0}}
    assert manifest["source"] == {"packages": [], "local": {"ktuberling-data": str(tmp_path / "share"),
                                                            "librsvg2-bin": str(tmp_path / "rsvg-convert"),
                                                            "librsvg2-2": str(tmp_path / "rsvg-convert")}}
    owner = {record["source"]: split for split in SPLITS for record in splits[split]}
    assert all(len({owner[record["source"]] for record in every if record["source"] == source}) == 1 for source in by_source)
    with Image.open(tmp_path / "out" / "img" / "zoo-lion.png") as image:  # a square fills --size, on white
        assert image.mode == "RGB" and image.size == (24, 24) and image.getpixel((12, 12)) == (0, 0, 192)


def test_ktuberling_corpus_names_bad_input(tmp_path):
    write_tree(tmp_path / "share")
    pics, sounds = tmp_path / "share" / "pics", tmp_path / "share" / "sounds"
    run = ["--local-root", str(tmp_path / "share"), "--rsvg-convert", str(no_renderer_script(tmp_path)),
           "--output", str(tmp_path / "out")]
    good = (pics / "zoo.theme").read_text(encoding="utf-8")
    (pics / "zoo.theme").write_text('<playground gameboard="zoo.svgz"><object name="lion" sound="tv_lion">', encoding="utf-8")
    with pytest.raises(SystemExit, match=r"zoo\.theme: not well-formed XML \(no element found"):
        ktuberling_pairs.main(run)
    (pics / "zoo.theme").write_text(theme("zoo.svgz", [("lion", "tv_lion"), ("hat2", " ")]), encoding="utf-8")
    with pytest.raises(SystemExit, match=r"zoo\.theme: object 2 has no sound"):
        ktuberling_pairs.main(run)
    (pics / "zoo.theme").write_text('<theme gameboard="zoo.svgz"/>', encoding="utf-8")
    with pytest.raises(SystemExit, match=r"zoo\.theme: no <playground gameboard=\.\.\.>"):
        ktuberling_pairs.main(run)
    (pics / "zoo.theme").write_text(good, encoding="utf-8")
    blob = (sounds / "id.soundtheme").read_bytes()
    (sounds / "id.soundtheme").write_bytes(blob[: len(blob) // 2])
    with pytest.raises(SystemExit, match=r"id\.soundtheme: not well-formed XML"):
        ktuberling_pairs.main(run)
    (sounds / "id.soundtheme").write_text('<sounds code="id"><sound name="hat" file="id/hat_topi.wav"/></sounds>', encoding="utf-8")
    with pytest.raises(SystemExit, match=r"id\.soundtheme: no <language code=\.\.\.>"):
        ktuberling_pairs.main(run)
    (sounds / "id.soundtheme").write_bytes(blob)
    theme_text = (pics / "default_theme.theme").read_text(encoding="utf-8")
    (pics / "default_theme.theme").write_text(theme_text.replace('name="ghost"', 'name="gost"'), encoding="utf-8")
    with pytest.raises(SystemExit, match=r'default_theme\.svg: no element with id "gost" \(named by default_theme\.theme\)'):
        ktuberling_pairs.main(run)
    (pics / "default_theme.theme").write_text(theme_text, encoding="utf-8")
    board = (pics / "zoo.svgz").read_bytes()
    (pics / "zoo.svgz").write_bytes(board[: len(board) // 2])
    with pytest.raises(SystemExit, match=r"zoo\.svgz: not a readable gzip file \(EOFError"):
        ktuberling_pairs.main(run)
    (pics / "zoo.svgz").write_bytes(gzip.compress(b"<svg><g></svg>"))
    with pytest.raises(SystemExit, match=r"zoo\.svgz: not well-formed XML \(mismatched tag"):
        ktuberling_pairs.main(run)
    (pics / "zoo.svgz").unlink()
    with pytest.raises(SystemExit, match=r"zoo\.svgz: not there"):
        ktuberling_pairs.main(run)


@pytest.mark.parametrize("reader, name", [(ktuberling_pairs.read_theme, "default_theme.theme"),
                                          (ktuberling_pairs.read_soundtheme, "id.soundtheme")])
def test_readers_survive_corrupt_bytes(tmp_path, reader, name):
    """Random byte changes to a valid file: each read returns or raises ValueError naming the file, nothing else."""
    write_tree(tmp_path / "share")
    path = next((tmp_path / "share").rglob(name))
    def read(changed):
        path.write_bytes(changed)
        return reader(path)
    corrupted_reads(path.read_bytes(), read, f"{path}: ", 11, at_start=True)


# ---- the real package ------------------------------------------------------------------------------------

@pytest.mark.skipif(not (REAL / "pics" / "default_theme.theme").is_file(),
                    reason="ktuberling-data is not unpacked in data/.debian (ktuberling_pairs.py fetches it)")
def test_real_package():
    gameboard, objects = ktuberling_pairs.read_theme(REAL / "pics" / "default_theme.theme")
    assert gameboard == "default_theme.svg" and len(objects) == 77
    assert objects[:2] == [("eyes_1", "eye"), ("eyes_2", "eye")] and ("glass_1", "sunglasses") in objects
    code, sounds = ktuberling_pairs.read_soundtheme(REAL / "sounds" / "id.soundtheme")
    assert code == "id" and len(sounds) == 199 and ("bow", "id/bow_dasi-kupu-kupu.wav") in sounds
    assert [path.stem for path, _, _ in ktuberling_pairs.themes(REAL)][:3] == ["default_theme", "butterflies", "christmas"]
    egypt = ElementTree.ElementTree(ktuberling_pairs.read_xml(REAL / "pics" / "egypt.svg"))
    _, objects = ktuberling_pairs.read_theme(REAL / "pics" / "egypt.theme")
    assert {object_id for object_id, _ in objects} <= {element.get("id") for element in egypt.iter()}


def test_built_corpus_leak_check_can_fail():
    """The control of test_image_corpora's leak check on the built corpus: a test record given train's picture is caught."""
    folder = ROOT / "data" / "ktuberling"
    if not (folder / "manifest.json").exists():
        pytest.skip("data/ktuberling is not built (scripts/data/ktuberling_pairs.py writes it)")
    splits, digests = read_splits(folder), image_digests(folder)

    def keys(record):
        return [record["query"].casefold(), *("sha256:" + digests[positive["image"]] for positive in record["positives"])]

    assert not leaks(splits, keys)
    planted = {**splits, "test": [{**splits["test"][0], "positives": splits["train"][0]["positives"]}, *splits["test"][1:]]}
    assert leaks(planted, keys) == {"sha256:" + digests[splits["train"][0]["positives"][0]["image"]]}
