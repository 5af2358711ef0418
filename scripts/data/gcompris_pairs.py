#!/usr/bin/env python3
"""gcompris_pairs.py: caption -> picture pairs from GCompris's activities (gcompris-qt-data: photographs
of animals, plants, tools, food, monuments and instruments a child is taught to name). Three sources, all
inside the package's Qt resource files (rcc/*.rcc, read by read_rcc):
  words        the vocabulary activity's sample pictures (lang.rcc, words_sample/STEM.webp), each named
               in English and dozens of languages by the activity's own content-LOCALE.json ("STEM.ogg": name);
  explore      the explore activities' boards (farm animals, world animals, monuments, world music): each
               entry's photograph with its qsTr() title, text and second text, translated by the
               translations/gcompris_LOCALE.qm catalogues (read by read_qm; context: the board's file name);
  categorization  the sorting activity's pictures (tools, fishes, monuments, renewable energy, others):
               English only, the caption from the file's name (measuringTape3 -> "measuring tape"); the first
               picture of a name only (a caption names one picture, and a row of 1024 cells holds one).
One record per (picture, language, caption); one locale a language as gettext_pairs ranks them (pt before
pt_BR, zh_CN for zh, zh_TW left out). Pictures are fitted into 368 px on the longer side (never enlarged)
and composited as stamp_pairs does (on white, on grey where light). A picture is one group: its captions
stay in one split. 15 % dev, 15 % test by default, so each held-out split asks 35 to 40 pictures.
Writes data/gcompris/{train,dev,test}.jsonl, img/*.png, images.sha256 and manifest.json. Deterministic
for a seed. See docs/data.md.
"""

import collections
import io
import json
import pathlib
import re
import struct
import sys
import zlib

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import debian_archive  # noqa: E402
import stamp_pairs  # noqa: E402
from gettext_pairs import best_locales  # noqa: E402

PACKAGE = "gcompris-qt-data"
DATA_ROOT = "usr/share/gcompris-qt"
RCC_MAGIC = b"qres"
QM_MAGIC = bytes.fromhex("3cb86418caef9c95cd211cbf60a1bddd")
QM_MESSAGES, QM_END, QM_TRANSLATION, QM_OBSOLETE = 0x69, 1, 3, 5
QM_TEXTS = {6: "source", 7: "context", 8: "comment"}
WORDS = ("lang.rcc", "/gcompris/src/activities/lang/resource/")
EXPLORE = ("explore_farm_animals", "explore_world_animals", "explore_monuments", "explore_world_music")
CATEGORIES = ("tools", "fishes", "monuments", "renewable", "others")  # alphabets and numbers: glyphs, not things
CATEGORY_FOLDER = "/gcompris/src/activities/categorization/resource/images/"
QSTR = r'qsTr\("((?:[^"\\]|\\.)*)"\)'
ENTRY_FIELDS = {"title": re.compile(r'"title"\s*:\s*' + QSTR), "text": re.compile(r'"text"\s*:\s*' + QSTR),
                "text2": re.compile(r'"text2"\s*:\s*' + QSTR)}
ENTRY_IMAGE = re.compile(r'"image2"\s*:\s*"qrc:([^"]+\.webp)"')


def read_rcc(path):
    """{resource path: bytes} of a Qt resource file (rcc format 1 to 3, zlib-compressed entries
    inflated); raises ValueError naming the file and the fault."""
    blob = pathlib.Path(path).read_bytes()

    def unpack(form, offset):
        if offset < 0 or offset + struct.calcsize(form) > len(blob):
            raise ValueError(f"{path}: truncated (a {struct.calcsize(form)}-byte field at byte {offset} of {len(blob)})")
        return struct.unpack_from(form, blob, offset)

    if blob[:4] != RCC_MAGIC:
        raise ValueError(f"{path}: not a Qt resource file (no 'qres' magic)")
    version, tree, data, names = unpack(">IIII", 4)
    if version not in (1, 2, 3):
        raise ValueError(f"{path}: rcc format {version} (1 to 3 are read)")
    node_size = 14 if version == 1 else 22  # formats 2 and 3 add an 8-byte modification time
    found, pending, seen = {}, [(0, "")], set()
    while pending:
        index, prefix = pending.pop()
        if index in seen:
            raise ValueError(f"{path}: tree node {index} reached twice (corrupt tree)")
        seen.add(index)
        offset = tree + index * node_size
        name_offset, flags = unpack(">IH", offset)
        name = ""
        if index:
            length, = unpack(">H", names + name_offset)
            raw = blob[names + name_offset + 6: names + name_offset + 6 + 2 * length]
            if len(raw) != 2 * length:
                raise ValueError(f"{path}: truncated (a name at byte {names + name_offset})")
            name = raw.decode("utf-16-be", errors="replace")
        if flags & 2:  # a directory: its children's count and first index
            count, first = unpack(">II", offset + 6)
            if count > len(blob) // node_size:
                raise ValueError(f"{path}: a directory of {count} entries (corrupt tree)")
            pending.extend((first + child, f"{prefix}{name}/") for child in range(count))
            continue
        data_offset, = unpack(">I", offset + 10)
        size, = unpack(">I", data + data_offset)
        content = blob[data + data_offset + 4: data + data_offset + 4 + size]
        if len(content) != size:
            raise ValueError(f"{path}: truncated ({prefix}{name}: {size} bytes announced, {len(content)} there)")
        if flags & 4:
            raise ValueError(f"{path}: {prefix}{name} is zstd-compressed (only zlib is read)")
        if flags & 1:  # zlib after a 4-byte length
            try:
                content = zlib.decompress(content[4:])
            except zlib.error as error:
                raise ValueError(f"{path}: {prefix}{name}: bad zlib data ({error})") from None
        found[prefix + name] = content
    return found


def read_qm(path):
    """{(context, source text, comment): translation} of a Qt .qm catalogue (its messages section; the
    first form of a plural); raises ValueError naming the file and the fault."""
    blob = pathlib.Path(path).read_bytes()
    if blob[:16] != QM_MAGIC:
        raise ValueError(f"{path}: not a Qt translation catalogue (bad magic)")
    found, offset = {}, 16
    while offset < len(blob):
        if offset + 5 > len(blob):
            raise ValueError(f"{path}: truncated (a section header at byte {offset})")
        tag, length = blob[offset], struct.unpack_from(">I", blob, offset + 1)[0]
        body = blob[offset + 5: offset + 5 + length]
        if len(body) != length:
            raise ValueError(f"{path}: truncated (section {tag:#x} announces {length} bytes, {len(body)} there)")
        offset += 5 + length
        if tag != QM_MESSAGES:
            continue
        position, message = 0, {}
        while position < len(body):
            kind = body[position]
            position += 1
            if kind == QM_END:
                if "translation" in message and "source" in message:
                    found[(message.get("context", ""), message["source"], message.get("comment", ""))] = message["translation"]
                message = {}
                continue
            if kind == QM_OBSOLETE:
                position += 4
                continue
            if kind != QM_TRANSLATION and kind not in QM_TEXTS or position + 4 > len(body):
                raise ValueError(f"{path}: a message tag {kind:#x} at byte {position - 1} of the messages (corrupt)")
            size = struct.unpack_from(">I", body, position)[0]
            position += 4
            if size == 0xFFFFFFFF:  # a null translation
                continue
            text = body[position: position + size]
            if len(text) != size:
                raise ValueError(f"{path}: truncated (a message text at byte {position} of the messages)")
            position += size
            if kind == QM_TRANSLATION:
                message.setdefault("translation", text.decode("utf-16-be", errors="replace"))
            else:
                message[QM_TEXTS[kind]] = text.decode("utf-8", errors="replace")
    return found


def qml_text(escaped):
    """A qsTr() literal's text: QML's backslash escapes undone, whitespace runs made one space."""
    text = re.sub(r"\\(.)", lambda match: {"n": " ", "t": " "}.get(match.group(1), match.group(1)), escaped)
    return " ".join(text.split())


def explore_entries(files, activity):
    """[(board context, picture resource path, {field: English text})] of an explore activity's boards."""
    entries = []
    for name in sorted(files):
        if not (name.startswith(f"/gcompris/src/activities/{activity}/") and "/board/" in name and name.endswith(".qml")):
            continue
        source = files[name].decode("utf-8", errors="replace")
        for block in re.findall(r"\{[^{}]*\}", source):
            image = ENTRY_IMAGE.search(block)
            if not image:
                continue
            fields = {field: qml_text(match.group(1)) for field, pattern in ENTRY_FIELDS.items()
                      if (match := pattern.search(block))}
            entries.append((pathlib.PurePosixPath(name).stem, image.group(1), fields))
    return entries


def category_caption(stem):
    """A caption from a categorization file's stem: camelCase split, trailing digits dropped, lower case
    ("measuringTape3" -> "measuring tape", "IndiaGate" -> "india gate")."""
    words = re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+", re.sub(r"\d+$", "", stem))
    return " ".join(words).lower()


def webp_picture(blob, size):
    """(RGB Pillow image at most size x size, None), or (None, reason)."""
    image, reason = stamp_pairs.opened(io.BytesIO(blob), size, "WebP")
    return stamp_pairs.composited(image) if image is not None else (None, reason)


def collect(root, languages, dropped):
    """[(group, source, [(resource, rcc path)], {language: [caption]})]: every picture set with its captions."""
    languages = languages | {"en"}
    rcc_folder, catalogues = root / "rcc", {}
    for path in sorted((root / "translations").glob("gcompris_*.qm")):
        catalogues[path.stem.removeprefix("gcompris_")] = path
    chosen = best_locales(catalogues, languages)
    translations = {language: read_qm(catalogues[locale]) for language, locale in chosen.items()}
    found = []

    def keep(captions):
        kept = {}
        for language, texts in captions.items():
            for text in texts:
                if stamp_pairs.too_short(text):
                    dropped[f"{language}: fewer than 2 letters (not one CJK or Hangul word sign)"] += 1
                elif text not in kept.setdefault(language, []):
                    kept[language].append(text)
        return {language: texts for language, texts in kept.items() if texts}

    files = read_rcc(rcc_folder / WORDS[0])
    contents = {name.rsplit("content-", 1)[1].removesuffix(".json"): name for name in files
                if name.startswith(WORDS[1] + "content-") and name.endswith(".json")}
    if "en" not in contents:
        raise ValueError(f"{rcc_folder / WORDS[0]}: no content-en.json")
    names = {}
    for language, locale in [("en", "en"), *best_locales(contents, languages).items()]:
        try:
            names[language] = json.loads(files[contents[locale]].decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ValueError(f"{rcc_folder / WORDS[0]}: {contents[locale]}: not JSON ({error})") from None
    for resource in sorted(name for name in files if name.startswith(WORDS[1] + "words_sample/") and name.endswith(".webp")):
        stem = pathlib.PurePosixPath(resource).stem
        captions = keep({language: [" ".join(str(table[f"{stem}.ogg"]).split())]
                         for language, table in names.items() if table.get(f"{stem}.ogg")})
        if "en" not in captions:
            dropped["words: no English name"] += 1
            continue
        found.append((f"words/{stem}", "words", [(resource, rcc_folder / WORDS[0])], captions))

    for activity in EXPLORE:
        files = read_rcc(rcc_folder / f"{activity}.rcc")
        for context, resource, fields in explore_entries(files, activity):
            if resource not in files:
                dropped["explore: a picture the board names is not in the resource file"] += 1
                continue
            english = [fields[field] for field in ("title", "text2", "text") if field in fields]
            captions = {"en": english}
            for language, catalogue in translations.items():
                captions[language] = [catalogue[(context, text, "")] for text in english if (context, text, "") in catalogue]
            captions = keep(captions)
            if "en" not in captions:
                dropped["explore: no English caption"] += 1
                continue
            found.append((f"{activity}/{pathlib.PurePosixPath(resource).stem}", "explore", [(resource, rcc_folder / f"{activity}.rcc")], captions))

    files = read_rcc(rcc_folder / "categorization.rcc")
    by_caption = collections.defaultdict(list)
    for resource in sorted(files):
        folder, _, name = resource.removeprefix(CATEGORY_FOLDER).rpartition("/")
        if resource.startswith(CATEGORY_FOLDER) and folder in CATEGORIES and name.endswith(".webp"):
            caption = category_caption(pathlib.PurePosixPath(name).stem)
            if stamp_pairs.too_short(caption):
                dropped["categorization: no caption in the file name"] += 1
            else:
                by_caption[caption].append((resource, rcc_folder / "categorization.rcc"))
    for caption, resources in sorted(by_caption.items()):
        dropped["categorization: another picture of a name taken"] += len(resources) - 1
        found.append((f"categorization/{caption}", "categorization", resources[:1], {"en": [caption]}))
    return found


def main(argv=None):
    arguments, found, dropped, source, started = debian_archive.one_package_picture_corpus(
        "gcompris_pairs", "gcompris", __doc__.split("\n\n")[0], PACKAGE, DATA_ROOT, "a gcompris-qt data folder (rcc/, translations/)", collect, argv)
    images, groups, stems, cache = {}, {}, set(), {}
    for group, kind, resources, captions in found:
        positives = []
        for resource, rcc in resources:
            if rcc not in cache:
                cache = {rcc: read_rcc(rcc)}  # one resource file held at a time
            image, reason = webp_picture(cache[rcc][resource], arguments.size)
            if image is None:
                dropped[reason] += 1
                continue
            name = debian_archive.safe_name(f"{kind}-{pathlib.PurePosixPath(resource).stem}")
            while name in stems:
                name += "_"
            stems.add(name)
            positives.append(debian_archive.save_png(image, arguments.output, name, images))
        if positives:
            groups[group] = [{"query": caption, "positives": positives, "lang": language, "source": group}
                             for language, texts in sorted(captions.items(), key=lambda item: item[0] != "en")
                             for caption in texts]
    per_source = collections.Counter(group.split("/")[0] for group in groups)
    per_language = collections.Counter(record["lang"] for records in groups.values() for record in records)
    debian_archive.build_image_corpus(
        "gcompris_pairs", "gcompris", arguments, groups, images,
        {"groups": len(groups), "groups_per_source": dict(sorted(per_source.items())),
         "dropped": dict(sorted(dropped.items())), "captions_per_language": dict(sorted(per_language.items())),
         "group": "a picture",
         "query": "words: the vocabulary activity's name of the picture per language (content-LOCALE.json); explore: the "
                  "entry's title, second text and text, translated by gcompris_LOCALE.qm; categorization: the file name",
         "image": f"the package's WebP pictures, at most {arguments.size} px on the longer side, composited on white, or on "
                  f"grey {stamp_pairs.LIGHT_BACKGROUND[:3]} where the visible pixels' mean luma is over {stamp_pairs.LIGHT_LUMA} (RGB)"},
        source, started)


if __name__ == "__main__":
    main()
