#!/usr/bin/env python3
"""art4apps_pairs.py: word -> picture pairs from the Art4Apps pictures in pysiogame (about 580 drawings of
animals, actions, food, jobs, fruit and vegetables, clothes, the body, building, sport, nature, people and
transport, 200 x 200 JPEG, res/images/art4apps/CATEGORY/WORD.jpg). The words come from the game's own
vocabulary lists: i18n/custom/a4a_words.py holds the English lists, d["a4a_CATEGORY"] = [word, ...], and
i18n/custom/a4a_py/LOCALE.py the same lists translated, item by item. The files are Python; they are read
as literal syntax (ast), never run. One record per (picture, language); one locale a language as
gettext_pairs ranks them; a translated list whose length differs from the English one is left out for that
category (its items could not be matched). Pictures are composited as stamp_pairs does. A picture is one
group; 15 % dev, 15 % test by default. Writes data/art4apps/{train,dev,test}.jsonl, img/*.png,
images.sha256 and manifest.json. Deterministic for a seed. See docs/data.md.
"""

import ast
import collections
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import debian_archive  # noqa: E402
import stamp_pairs  # noqa: E402
from gettext_pairs import best_locales  # noqa: E402

PACKAGE = "pysiogame"
GAME_ROOT = "usr/share/games/pysiogame"
ENGLISH = "i18n/custom/a4a_words.py"
TRANSLATIONS = "i18n/custom/a4a_py"
PICTURES = "res/images/art4apps"
PREFIX = "a4a_"


def read_lists(path):
    """{category: [word]} of a vocabulary file's `d["a4a_CATEGORY"] = [...]` assignments, read as literals;
    raises ValueError naming the file and the fault."""
    try:
        tree = ast.parse(pathlib.Path(path).read_text(encoding="utf-8"), filename=str(path))
    except (SyntaxError, UnicodeDecodeError, ValueError) as error:
        raise ValueError(f"{path}: not readable as Python literals ({error})") from None
    lists = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        if not (isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant)
                and isinstance(target.slice.value, str) and target.slice.value.startswith(PREFIX)):
            continue
        try:
            words = ast.literal_eval(node.value)
        except ValueError:
            raise ValueError(f"{path}:{node.lineno}: {target.slice.value} is not a literal list") from None
        if not isinstance(words, list) or not all(isinstance(word, str) for word in words):
            raise ValueError(f"{path}:{node.lineno}: {target.slice.value} is not a list of strings")
        lists[target.slice.value.removeprefix(PREFIX)] = [" ".join(word.split()) for word in words]
    if not lists:
        raise ValueError(f"{path}: no {PREFIX}* word lists")
    return lists


def collect(root, languages, dropped):
    """[(group, picture path, {language: caption})] of every listed picture with its words."""
    english = read_lists(root / ENGLISH)
    locales = {path.stem: path for path in sorted((root / TRANSLATIONS).glob("*.py")) if not path.stem.startswith("_")}
    translated = {language: read_lists(locales[locale])
                  for language, locale in best_locales(locales, languages).items()}
    found = []
    for category, words in sorted(english.items()):
        aligned = {}
        for language, lists in sorted(translated.items()):
            if category not in lists:
                continue
            if len(lists[category]) != len(words):
                dropped[f"{language}: a list of another length than the English ({category})"] += 1
                continue
            aligned[language] = lists[category]
        for index, word in enumerate(words):
            picture = root / PICTURES / category / f"{word.replace(' ', '_')}.jpg"
            if not picture.is_file():
                dropped["word: no picture of its name"] += 1
                continue
            captions = {"en": word, **{language: texts[index] for language, texts in aligned.items()}}
            for language in [language for language, text in captions.items() if stamp_pairs.too_short(text)]:
                dropped[f"{language}: fewer than 2 letters (not one CJK or Hangul word sign)"] += 1
                del captions[language]
            if "en" in captions:
                found.append((f"{category}/{picture.stem}", picture, captions))
    return found


def main(argv=None):
    arguments, found, dropped, source, started = debian_archive.one_package_picture_corpus(
        "art4apps_pairs", "art4apps", __doc__.split("\n\n")[0], PACKAGE, GAME_ROOT, "a pysiogame folder (i18n/, res/)", collect, argv)
    images, groups = {}, {}
    for group, path, captions in found:
        image, reason = stamp_pairs.opened(path, arguments.size, "JPEG")
        image, reason = stamp_pairs.composited(image) if image is not None else (None, reason)
        if image is None:
            dropped[reason] += 1
            continue
        positive = debian_archive.save_png(image, arguments.output, debian_archive.safe_name(group.replace("/", "-")), images)
        groups[group] = [{"query": caption, "positives": [positive], "lang": language, "source": group}
                         for language, caption in sorted(captions.items(), key=lambda item: item[0] != "en")]
    per_language = collections.Counter(record["lang"] for records in groups.values() for record in records)
    debian_archive.build_image_corpus(
        "art4apps_pairs", "art4apps", arguments, groups, images,
        {"groups": len(groups), "dropped": dict(sorted(dropped.items())),
         "captions_per_language": dict(sorted(per_language.items())),
         "group": "a picture", "query": "the picture's word: English from a4a_words.py, each other language from its "
                                        "a4a_py/LOCALE.py list at the same place",
         "image": f"the package's Art4Apps JPEGs, at most {arguments.size} px on the longer side (RGB)"},
        source, started)


if __name__ == "__main__":
    main()
