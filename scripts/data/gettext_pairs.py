#!/usr/bin/env python3
"""gettext_pairs.py: the embedded default corpus, built from the gettext catalogues a fresh Debian
machine already has (/usr/share/locale/<locale>/LC_MESSAGES/*.mo): English msgid -> human msgstr
pairs for the UForm languages, cleaned, one translation per (string, language), split by catalogue
group so that no English string of dev or test is in train. Writes JSONL pair records, a small
masked-modelling text file and a manifest (counts, sha256, owning packages) under data/gettext/.
Standard library only; deterministic for a seed. See docs/data.md.
"""

import argparse
import collections
import hashlib
import html
import json
import os
import pathlib
import random
import re
import struct
import subprocess
import sys
import time

# The 20 languages beside English that UForm ships; Simplified Chinese is "zh".
DEFAULT_LANGUAGES = "ar de es fa fr he hi hy id it ja ko pl pt ru th tr uk vi zh".split()
# Locale folders per language, most preferred first: a string translated in several keeps the first.
LOCALE_PREFERENCE = {"zh": ["zh_CN", "zh_Hans", "zh_SG"], "zh-Hant": ["zh_TW", "zh_Hant", "zh_HK"],
                     "pt": ["pt", "pt_PT", "pt_BR"]}
SPLITS = ("train", "dev", "test")
MAX_BYTES = 2000  # each side; a pair then always fits one 4096-column row

MO_MAGIC = 0x950412DE


def locale_language(locale):
    """The language a locale folder holds ("de_CH" -> "de", "zh_TW" -> "zh-Hant"), or None."""
    for language, locales in LOCALE_PREFERENCE.items():
        if locale in locales:
            return language
    if "@" in locale or "." in locale:
        return None  # script variants (sr@latin) and encodings are left out
    return locale.split("_")[0]


def locale_rank(language, locale):
    """Lower is preferred: the listed order, then the bare language code, then the rest by name."""
    listed = LOCALE_PREFERENCE.get(language, [language])
    return (listed.index(locale) if locale in listed else len(listed), locale)


def best_locales(locales, languages):
    """{language: locale}: for each wanted language but English, its preferred locale among `locales` (locale_rank)."""
    chosen = {}
    for locale in sorted(locales):
        language = locale_language(locale)
        if language in languages and language != "en" and \
                (language not in chosen or locale_rank(language, locale) < locale_rank(language, chosen[language])):
            chosen[language] = locale
    return chosen


def read_mo(path):
    """(msgid, msgstr) string pairs of a .mo file; plural entries give their singular forms and
    contexts ("ctxt\\x04msgid") are dropped from the key."""
    data = pathlib.Path(path).read_bytes()
    if len(data) < 20:
        raise ValueError(f"{path}: {len(data)} bytes is too short for a .mo header")
    for order in ("<", ">"):
        if struct.unpack(order + "I", data[:4])[0] == MO_MAGIC:
            break
    else:
        raise ValueError(f"{path}: not a .mo file (bad magic)")
    _, count, originals, translations = struct.unpack(order + "4I", data[4:20])
    entries = []
    for index in range(count):
        olength, ooffset = struct.unpack(order + "2I", data[originals + 8 * index: originals + 8 * index + 8])
        tlength, toffset = struct.unpack(order + "2I", data[translations + 8 * index: translations + 8 * index + 8])
        if ooffset + olength > len(data) or toffset + tlength > len(data):
            raise ValueError(f"{path}: entry {index} points past the end of the file")
        entries.append((data[ooffset: ooffset + olength], data[toffset: toffset + tlength]))
    charset = "utf-8"
    for msgid, msgstr in entries:
        if msgid == b"":
            found = re.search(rb"charset=([A-Za-z0-9_.:-]+)", msgstr)
            if found:
                charset = found.group(1).decode("ascii")
    pairs = []
    for msgid, msgstr in entries:
        if msgid == b"" or not msgstr:
            continue
        msgid = msgid.split(b"\x04", 1)[-1].split(b"\x00")[0]
        msgstr = msgstr.split(b"\x00")[0]
        try:
            pairs.append((msgid.decode(charset), msgstr.decode(charset)))
        except (UnicodeDecodeError, LookupError):
            continue  # a catalogue lying about its charset: skip the entry, not the file
    return pairs


# Cleaning: placeholders go first (their % and { would confuse the rest), then markup, then
# accelerators, then whitespace and what the placeholders leave behind.
PERCENT = "\x00"  # stands for a literal "%%" while the placeholders are removed
GAP = "\x01"  # marks where a placeholder was, so only the spaces it leaves are tidied
PRINTF = re.compile(r"%(?:\d+\$)?[-+ #0']*(?:\*(?:\d+\$)?|\d+)?(?:\.(?:\*(?:\d+\$)?|\d+))?"
                    r"(?:hh|h|ll|l|L|q|j|z|Z|t|I64|I32)?(?:p[A-Za-z]|[diouxXeEfFgGaAcCsSpnm])")
PRINTF_MACRO = re.compile(r"%<PRI[a-zA-Z0-9]+>|%\"\s*PRI[a-zA-Z0-9]+\s*\"")
PYTHON_NAMED = re.compile(r"%\([A-Za-z_][A-Za-z0-9_]*\)[-+ #0]*\d*(?:\.\d+)?[diouxXeEfFgGcrsa]")
BRACES = re.compile(r"\{[A-Za-z0-9_.\[\]]*(?:![rsa])?(?::[^{}]*)?\}")
QT_NUMBERED = re.compile(r"%L?\d+")
SHELL_VARIABLE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")
# Markup only: "<path>" in a usage line is a metavariable, translated like words, so it stays.
TAG = re.compile(r"</?(?:a|b|i|u|s|tt|big|small|sub|sup|span|br|p|em|strong|code|kbd|var|markup|link|"
                 r"ul|ol|li|quote|emphasis|literal|filename|command|option|replaceable|guilabel|"
                 r"application|cmd|file|key|output|input|gui|sys|app)(?:\s+[^<>]*)?/?>", re.IGNORECASE)
CJK_ACCELERATOR = re.compile(r"\s*[(（][_&~]?[A-Za-z0-9][)）]")
UNDERSCORE_ACCELERATOR = re.compile(r"_(?=[^\W_])")
AMPERSAND_ACCELERATOR = re.compile(r"&(?=[^\W_])")
EMPTY_QUOTES = re.compile(r"(?:'|\"|`|«|“|‘|„|「|『|\(|\[)[\s\x01]*\x01[\s\x01]*(?:'|\"|»|”|’|“|」|』|\)|\])")
GAP_BEFORE_PUNCTUATION = re.compile(r"[\s\x01]*\x01[\s\x01]*(?=[,.:;!?)\]])")
LEADING_GAP = re.compile(r"^[\s\x01]*\x01[\s\x01:;,.：，、；]*")
SPACE = re.compile(r"[\s\x01]+")


def clean(text, other=""):
    """`text` cleaned; `other` is the other side of the pair, where an identifier such as
    "new_value" appears verbatim and so is code, not an accelerator."""
    text = text.replace(PERCENT, "").replace(GAP, "").replace("%%", PERCENT)
    for pattern in (PRINTF_MACRO, PYTHON_NAMED, PRINTF, BRACES, QT_NUMBERED, SHELL_VARIABLE):
        text = pattern.sub(GAP, text)
    text = text.replace(PERCENT, "%")
    text = TAG.sub("", text)
    text = CJK_ACCELERATOR.sub("", text)
    # One "_" or "&" before a letter is an accelerator (GTK, Qt), unless its word recurs in the
    # other side; more than one is more likely snake_case or prose, which stays.
    for mark, pattern in (("_", UNDERSCORE_ACCELERATOR), ("&", AMPERSAND_ACCELERATOR)):
        if text.count(mark) == 1 and not re.search(r"&[#A-Za-z0-9]+;", text):
            word = re.search(r"\w*" + re.escape(mark) + r"\w*", text).group()
            if word not in other:
                text = pattern.sub("", text)
    text = text.replace("&&", "&")
    text = html.unescape(text)
    text = EMPTY_QUOTES.sub(GAP, text)
    text = LEADING_GAP.sub("", text)
    text = GAP_BEFORE_PUNCTUATION.sub("", text)
    return SPACE.sub(" ", text).strip()


def keep(english, translation):
    """The reason to drop a cleaned pair, or None to keep it."""
    if not any(character.isalpha() for character in english):
        return "no letters in the English string"
    if len(english) < 2 or len(translation) < 2:
        return "shorter than 2 characters"
    if translation.casefold() == english.casefold():
        return "translation equals the source"
    if len(english.encode()) > MAX_BYTES or len(translation.encode()) > MAX_BYTES:
        return f"longer than {MAX_BYTES} bytes"
    return None


def kept_pairs(raw, cleaner, dropped):
    """The (english, translation) pairs of a catalogue's raw pairs, each side cleaned by `cleaner`
    (given the other side), that `keep` keeps; counts the reasons of the rest in `dropped`."""
    kept = []
    for msgid, msgstr in raw:
        english, translation = cleaner(msgid, msgstr), cleaner(msgstr, msgid)
        reason = keep(english, translation)
        if reason:
            dropped[reason] += 1
        else:
            kept.append((english, translation))
    return kept


def aligned_pairs(english, translated, dropped, unaligned):
    """[(english, translation)] of one translated document's blocks, [(kind, text)] each, paired by order
    and kept by `keep`; [] (counted as `unaligned`) where the two sequences of kinds differ, or where a
    side could not be read (None)."""
    if english is None or translated is None:
        dropped["a page that does not read"] += 1
        return []
    if [kind for kind, _ in english] != [kind for kind, _ in translated]:
        dropped[unaligned] += 1
        return []
    return kept_pairs([(source, text) for (_, source), (_, text) in zip(english, translated)], lambda text, other: text, dropped)


def catalogue_group(path):
    """What a split keeps together: one catalogue (domain) in every language, its version dropped
    so that "psql-15" and a later "psql-16" stay one catalogue."""
    return re.sub(r"[-_]\d+(?:\.\d+)*$", "", pathlib.Path(path).stem)


def dpkg_owners(paths):
    """{path: package} from one `dpkg -S` per chunk of paths; {} where dpkg is absent."""
    owners = {}
    for start in range(0, len(paths), 500):
        try:
            result = subprocess.run(["dpkg", "-S", *paths[start: start + 500]], capture_output=True, text=True)
        except OSError:
            return {}
        for line in result.stdout.splitlines():
            packages, _, path = line.partition(": ")
            if path and not packages.startswith("diversion by"):
                owners[path.strip()] = packages.split(",")[0].strip().split(":")[0]
    return owners


def package_details(packages):
    """{package: {"version", "licence"}} from dpkg-query and the DEP-5 copyright files."""
    details = {package: {"version": None, "licence": None} for package in packages}
    if not packages:
        return details
    try:
        result = subprocess.run(["dpkg-query", "-W", "-f", "${Package}\t${Version}\n", *sorted(packages)],
                                capture_output=True, text=True)
        for line in result.stdout.splitlines():
            package, _, version = line.partition("\t")
            if package in details:
                details[package]["version"] = version
    except OSError:
        pass
    for package in packages:
        copyright_file = pathlib.Path("/usr/share/doc") / package / "copyright"
        try:
            for line in copyright_file.read_text(errors="replace").splitlines():
                if line.startswith("License:") and line[8:].strip():
                    details[package]["licence"] = line[8:].strip()
                    break
        except OSError:
            pass
    return details


def assign_splits(groups, sizes, seed, dev_fraction, test_fraction):
    """{group: split}: groups in a seeded order fill dev, then test, to their targets; a group that
    would overshoot a target by half goes to train instead, so one huge group cannot swallow a split."""
    order = sorted(groups)
    random.Random(seed).shuffle(order)
    total = sum(sizes[group] for group in order)
    targets = {"dev": dev_fraction * total, "test": test_fraction * total}
    filled = {"dev": 0, "test": 0}
    result = {}
    for group in order:
        result[group] = "train"
        for split in ("dev", "test"):
            if filled[split] < targets[split] and filled[split] + sizes[group] <= 1.5 * targets[split]:
                result[group] = split
                filled[split] += sizes[group]
                break
    return result


def write_jsonl(path, records):
    with open(path, "w", encoding="utf-8", newline="\n") as file:
        for record in records:
            file.write(json.dumps(record, ensure_ascii=False, separators=(", ", ": ")) + "\n")
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--locale-root", default="/usr/share/locale", help="folder of <locale>/LC_MESSAGES/*.mo")
    parser.add_argument("--output", default=str(pathlib.Path(__file__).resolve().parents[2] / "data" / "gettext"))
    parser.add_argument("--languages", default=",".join(DEFAULT_LANGUAGES),
                        help="comma-separated language codes, or 'all' for every locale found")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dev-fraction", type=float, default=0.05)
    parser.add_argument("--test-fraction", type=float, default=0.05)
    parser.add_argument("--text-limit", type=int, default=50000, help="most records in text.jsonl")
    parser.add_argument("--no-dpkg", action="store_true", help="do not ask dpkg which packages own the catalogues")
    parser.add_argument("--held-out-pairs", default="",
                        help="corpus folders (comma-separated) whose dev and test (English, language) pairs leave train: "
                             "data/cldr in build_all.sh's second pass (CLDR's train already leaves out gettext's held-out strings)")
    arguments = parser.parse_args(argv)
    started = time.monotonic()
    root = pathlib.Path(arguments.locale_root)
    wanted = None if arguments.languages == "all" else set(arguments.languages.split(","))

    # Catalogues: real files only (iso-codes links iso_639.mo -> iso_639-2.mo), one locale per language ranked.
    catalogues = []  # (language, locale, path)
    seen_real = set()
    for mo in sorted(root.glob("*/LC_MESSAGES/*.mo")):
        locale = mo.parent.parent.name
        language = locale_language(locale)
        if language is None or language == "en" or (wanted is not None and language not in wanted):
            continue
        real = os.path.realpath(mo)
        if mo.is_symlink() or real in seen_real:
            continue
        seen_real.add(real)
        catalogues.append((language, locale, str(mo)))
    if not catalogues:
        sys.exit(f"gettext_pairs: no catalogues for {arguments.languages} under {root}")
    owners = {} if arguments.no_dpkg else dpkg_owners([path for _, _, path in catalogues])

    # Cleaned pairs per catalogue, and a group per catalogue.
    dropped = collections.Counter()
    pairs_of = {}
    group_of = {}
    for language, locale, path in catalogues:
        try:
            raw = read_mo(path)
        except ValueError as error:
            print(f"gettext_pairs: skipping {error}", file=sys.stderr)
            dropped["unreadable catalogue"] += 1
            continue
        pairs_of[path] = kept_pairs(raw, clean, dropped)
        group_of[path] = catalogue_group(path)
    sizes = collections.Counter()
    for path, kept in pairs_of.items():
        sizes[group_of[path]] += len(kept)
    split_of_group = assign_splits(set(group_of.values()), sizes, arguments.seed, arguments.dev_fraction,
                                   arguments.test_fraction)

    # One translation per (English, language) within a split: the most frequent across its
    # catalogues, ties to the preferred locale, then to the first catalogue by path.
    candidates = {split: collections.defaultdict(collections.Counter) for split in SPLITS}
    first_seen = {}
    for language, locale, path in catalogues:
        split = split_of_group[group_of[path]] if path in pairs_of else None
        for english, translation in pairs_of.get(path, ()):
            candidates[split][(english, language)][translation] += 1
            key = (split, english, language, translation)
            rank = (locale_rank(language, locale), path)
            if key not in first_seen or rank < first_seen[key][0]:
                first_seen[key] = (rank, pathlib.Path(path).stem)
    chosen = {split: {} for split in SPLITS}
    for split in SPLITS:
        for (english, language), counts in candidates[split].items():
            translation = min(counts, key=lambda t: (-counts[t], first_seen[(split, english, language, t)][0]))
            chosen[split][(english, language)] = (translation, first_seen[(split, english, language, translation)][1])

    # No leaks: an English string (compared case-folded) of train leaves dev and test; one of dev leaves test.
    train_english = {english.casefold() for english, _ in chosen["train"]}
    dev_english = set()
    leaked = collections.Counter()
    for split in ("dev", "test"):
        for key in list(chosen[split]):
            folded = key[0].casefold()
            if folded in train_english or (split == "test" and folded in dev_english):
                del chosen[split][key]
                leaked[split] += 1
        if split == "dev":
            dev_english = {english.casefold() for english, _ in chosen["dev"]}

    # Another corpus's held-out pairs leave train, after the leak check, so dev and test stay as they are.
    held_corpora, held_removed = [], 0
    if arguments.held_out_pairs:
        import debian_archive  # lazily: it imports this module

        folders = [pathlib.Path(folder) for folder in arguments.held_out_pairs.split(",") if folder]
        missing = [str(folder) for folder in folders if not (folder / "dev.jsonl").is_file() and not (folder / "test.jsonl").is_file()]
        if missing:
            sys.exit(f"gettext_pairs: --held-out-pairs: {', '.join(missing)} holds no dev.jsonl or test.jsonl (build it first)")
        held = {(record["query"].casefold(), record.get("lang")) for record in debian_archive.held_out_records(folders)
                if isinstance(record["query"], str)}
        before = len(chosen["train"])
        chosen["train"] = {key: value for key, value in chosen["train"].items() if (key[0].casefold(), key[1]) not in held}
        held_corpora, held_removed = [folder.name for folder in folders], before - len(chosen["train"])

    output = pathlib.Path(arguments.output)
    output.mkdir(parents=True, exist_ok=True)
    rng = random.Random(arguments.seed)
    files = {}
    counts = {}
    for split in SPLITS:
        records = [{"query": english, "positives": [translation], "lang": language, "catalogue": catalogue}
                   for (english, language), (translation, catalogue) in sorted(chosen[split].items())]
        rng.shuffle(records)
        name = f"{split}.jsonl"
        files[name] = {"sha256": write_jsonl(output / name, records), "records": len(records)}
        per_language = collections.Counter(record["lang"] for record in records)
        counts[split] = {"total": len(records), **dict(sorted(per_language.items()))}

    # Masked modelling text: a seeded sample of the distinct train strings, both sides.
    texts = sorted({text for (english, _), (translation, _) in chosen["train"].items() for text in (english, translation)})
    rng.shuffle(texts)
    texts = texts[: arguments.text_limit]
    files["text.jsonl"] = {"sha256": write_jsonl(output / "text.jsonl", [{"text": text} for text in texts]),
                           "records": len(texts)}

    per_language_catalogues = collections.Counter(language for language, _, path in catalogues if path in pairs_of)
    catalogues_per_split = collections.Counter(split_of_group[group_of[path]] for path in pairs_of)
    packages = collections.Counter(owners[path] for path in pairs_of if path in owners)
    details = package_details(set(packages))
    manifest = {
        "corpus": "gettext",
        "script": "scripts/data/gettext_pairs.py",
        "seed": arguments.seed,
        "locale_root": str(root),
        "languages": sorted(per_language_catalogues),
        "catalogues_per_language": dict(sorted(per_language_catalogues.items())),
        "catalogues_per_split": {split: catalogues_per_split[split] for split in SPLITS},
        "groups_per_split": {split: sum(1 for s in split_of_group.values() if s == split) for split in SPLITS},
        "pairs": counts,
        "removed_from_dev_and_test_as_leaks": {split: leaked[split] for split in ("dev", "test")},
        "removed_from_train_as_held_out_pairs": {"corpora": held_corpora, "pairs": held_removed},
        "dropped_pairs": dict(sorted(dropped.items())),
        "files": files,
        "source": {
            "packages": [{"package": package, "version": details[package]["version"],
                          "licence": details[package]["licence"], "catalogues": packages[package]}
                         for package in sorted(packages)],
            "catalogues_without_known_package": sum(1 for path in pairs_of if path not in owners),
        },
    }
    (output / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"gettext_pairs: {len(pairs_of)} catalogues, pairs " +
          ", ".join(f"{split} {counts[split]['total']}" for split in SPLITS) +
          f", {len(texts)} texts, in {time.monotonic() - started:.1f} s -> {output}", file=sys.stderr)


if __name__ == "__main__":
    main()
