#!/usr/bin/env python3
"""freedict_pairs.py: English word -> translation pairs from FreeDict's English -> X dictionaries, as
Debian ships them for dictd (dict-freedict-eng-LANG, unpacked, not installed): freedict-eng-LANG.index
(headword, base64 offset, base64 length) into freedict-eng-LANG.dict.dz (dictzip, read as gzip), for
the UForm languages FreeDict covers: ar de es fr hi id it ja pl pt ru tr. An entry is its headword
line (headword, pronunciation, part of speech), then senses: numbered ("1. ..."), grouped under a
Roman numeral ("I. <N> 1. ..."), or one unnumbered; a sense's first line holds its translations,
separated by commas or semicolons, and the lines after it (glosses, notes, examples, synonyms,
cross-references) are not read. Translations are cleaned of grammar tags (<masc>), labels ([bot.],
(müz.)), contexts and descriptions. One record per (English headword, language), one translation:
FreeDict orders neither senses nor a headword's entries by use, so the X -> English dictionary
(dict-freedict-LANG-eng, where Debian has one) picks the sense, and the translation, that it gives
the English headword for first (dictionary_records). The reverse dictionaries are not read as pairs
of their own: inverted, they add few English words (por-eng 40) and many glosses. Each language
keeps at most --per-language records, the headwords found in the most FreeDict dictionaries first
(everyday words are in all of them), ties in a seeded order. An English headword (case-folded) is
one split group in every language: 10 % dev, 10 % test by default. No entry whose English is an
English side of CLDR's dev or test is read, so CLDR's held-out pairs stay held out; a headword that
another corpus (CLDR, gettext, LibreOffice) trains on in one of its languages stays in train, so this
corpus's dev and test stay held out too; and, as in cldr_pairs, train holds no dev or test caption
of the emoji and flag corpora nor English string of gettext's or LibreOffice's dev and test; no text
of train is in dev or test, nor of dev in test. Writes data/freedict/{train,dev,test}.jsonl and
manifest.json. Standard library only; deterministic for a seed. See docs/data.md.
"""

import collections
import gzip
import hashlib
import json
import pathlib
import re
import sys
import time
import zlib

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import debian_archive  # noqa: E402

SCRIPT = "freedict_pairs"
# The UForm languages with an English -> X FreeDict dictionary in Debian 12 (he fa hy ko th uk vi zh have none).
DICTIONARIES = {"ar": "eng-ara", "de": "eng-deu", "es": "eng-spa", "fr": "eng-fra", "hi": "eng-hin", "id": "eng-ind",
                "it": "eng-ita", "ja": "eng-jpn", "pl": "eng-pol", "pt": "eng-por", "ru": "eng-rus", "tr": "eng-tur"}
# The X -> English dictionaries of these languages: only to confirm a translation (below), never read as pairs.
REVERSE = {"ar": "ara-eng", "de": "deu-eng", "es": "spa-eng", "fr": "fra-eng", "it": "ita-eng", "ja": "jpn-eng",
           "pl": "pol-eng", "pt": "por-eng", "tr": "tur-eng"}
DICTD = "usr/share/dictd"
PER_LANGUAGE = 30000
# One translation a record, as in cldr_pairs: uform_eval reads the first positive only, and each further one
# (a synonym) is one more text that can recur in another split, where the leak rule drops its record.
MAX_POSITIVES = 1
MAX_QUERY_WORDS = 4  # words and short phrases; longer headwords are idioms and example sentences
MAX_WORDS = 5  # a "translation" of more words is a description ("a small animal that ...")
MAX_CHARACTERS = 40
MALFORMED_NAMED = 10  # malformed entries named in the manifest, a dictionary
BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"  # dictd's digits, most significant first
DATABASE_ENTRY = ("00-database", "00database")  # dictfmt's own entries (info, url, ...), not words
# Lines after a sense's translation line that are not translations (quotes are examples: "rampart of the fortress" - ...).
NOT_TRANSLATION = re.compile(r'^(?:"|see:|see also:|synonyms?:|antonyms?:|note:)', re.IGNORECASE)
PHRASE_TRANSLATION = re.compile(r"^-\s")  # eng-pol: a sense naming an English phrase, its translation on the next line
GROUP = re.compile(r"^[IVX]+\.(?:\s+|$)")  # eng-pol: "I.  <N> 1.  ..." groups senses by part of speech
TAGS = re.compile(r"^(?:<[^<>]*>\s*)+")
NUMBER = re.compile(r"^\d+\.(?:\s+|$)")
LETTER = re.compile(r"^[a-z]\.(?:\s+|$)")
TRAILING_NUMBER = re.compile(r"\s+\d+\.$")  # eng-ind, eng-jpn: "negara kesejahteraan 2." (the next sense's number)
CROSS_REFERENCE = ("(bak.)", "(kıs.)", "bak.")  # eng-tur: "see", "abbreviation of", followed by English
# eng-tur is a printed dictionary read by OCR: English run-in phrases after a sense's first sentence ("ekşi. acetic
# acid asetik asit"), labels whose brackets were lost ("A.B.D kurt"), stray dots in headwords ("shoot.ing box").
OCR = {"tr"}
BRACKETS = [re.compile(pattern) for pattern in (r"<[^<>]*>", r"\[[^\[\]]*\]", r"\{[^{}]*\}", r"\([^()]*\)")]
PLACEHOLDER = re.compile(r"(?:^|\s)(?:sth|sb|smth|smb|so|etw|jd|jdn|jdm|jds)\.(?=\s|$)", re.IGNORECASE)
ELLIPSIS = ("…", "...")
SCRIPTS = {"ar": [(0x0600, 0x06FF), (0x0750, 0x077F), (0xFB50, 0xFDFF), (0xFE70, 0xFEFF)],
           "hi": [(0x0900, 0x097F)], "ru": [(0x0400, 0x04FF)],
           "ja": [(0x3040, 0x30FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF)]}
IDEOGRAPHS = [(0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF)]  # a single kanji is a word (猫); a single kana is not
HYPHENS = str.maketrans({"\u2010": "-", "\u2011": "-", "\u00a0": " ", "_": " "})  # eng-hin: "के_साथ"
SEPARATORS = re.compile(r"[,;|]| / |: ")
MARKUP = re.compile(r"[()\[\]{}<>\"“”«»*=#@~]")


def base64_number(text):
    """A dictd index number: base64 digits, most significant first; ValueError for any other character."""
    if not text:
        raise ValueError("an empty number")
    value = 0
    for character in text:
        digit = BASE64.find(character)
        if digit < 0:
            raise ValueError(f"{character!r} is not a base64 digit")
        value = value * 64 + digit
    return value


def read_index(path):
    """[(headword, offset, length, line number)] of a dictd .index file: headword TAB offset TAB length
    (a fourth field, dictfmt's original headword, is allowed and not read)."""
    entries = []
    try:
        with open(path, encoding="utf-8") as file:
            lines = list(file)
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not UTF-8 ({error})") from None
    except OSError as error:
        raise ValueError(f"{path}: cannot be read ({error.strerror or error})") from None
    for number, line in enumerate(lines, 1):
        fields = line.rstrip("\n").split("\t")
        if len(fields) not in (3, 4):  # an empty headword is dictfmt's index of one made of punctuation ("$")
            raise ValueError(f"{path}:{number}: not headword TAB offset TAB length: {line.rstrip()[:80]!r}")
        try:
            entries.append((fields[0], base64_number(fields[1]), base64_number(fields[2]), number))
        except ValueError as error:
            raise ValueError(f"{path}:{number}: an offset or length is not base64 ({error})") from None
    return entries


def read_dictionary(index_path, dict_path):
    """[(index headwords, text or None)] of each distinct entry (offset, length) the index names, in
    file order, dictfmt's own entries left out; None where the entry's bytes are not UTF-8. The whole
    .dict.dz is read as gzip (dictzip's chunk table is a gzip extra field that gzip skips)."""
    index = read_index(index_path)
    try:
        with gzip.open(dict_path) as file:
            data = file.read()
    except (FileNotFoundError, PermissionError, IsADirectoryError) as error:
        raise ValueError(f"{dict_path}: cannot be read ({error.strerror or error})") from None
    except (OSError, EOFError, zlib.error) as error:
        raise ValueError(f"{dict_path}: not a readable gzip (dictzip) file: {error}") from None
    headwords = collections.defaultdict(list)
    for word, offset, length, number in index:
        if word.startswith(DATABASE_ENTRY):
            continue
        if offset + length > len(data):
            raise ValueError(f"{index_path}:{number}: the entry of {word!r} at {offset} (+{length} bytes) runs past "
                             f"the end of {dict_path} ({len(data)} bytes)")
        headwords[(offset, length)].append(word)
    entries = []
    for offset, length in sorted(headwords):
        try:
            text = data[offset:offset + length].decode("utf-8")
        except UnicodeDecodeError:
            text = None
        entries.append((headwords[(offset, length)], text))
    return entries


class Malformed(ValueError):
    """An entry that does not read as FreeDict's plain text: the reason is the message."""


def letters(text):
    """A headword as dictfmt indexes it without --allchars: its letters and digits, case-folded ("A-bomb" -> "abomb")."""
    return "".join(character for character in text.casefold() if character.isalnum())


def headword_of(first_line, index_words):
    """The English headword of an entry's first line: the text before its pronunciation (" /") or part
    of speech (" <"), which must be one the index names the entry by (compared by letters()). A headword
    may hold " / " itself ("pain in the butt / ass /pˈeɪn .../"): the first " /" after which the text
    before is indexed. eng-pol lists spelling variants ("ostracize, ostracise"): the first."""
    head = re.split(r" <", first_line, maxsplit=1)[0]
    ends = [found.start() for found in re.finditer(r" /", head)] + [len(head)]
    indexed = {letters(word) for word in index_words}
    for end in ends:
        headword = head[:end].strip()
        if ", " in headword and letters(headword) not in indexed:
            headword = headword.split(", ")[0]
        if headword and letters(headword) in indexed:
            return headword
    if not head[:ends[0]].strip():
        raise Malformed("no headword on its first line")
    raise Malformed("its first line names no headword of the index")


def sense_line(line):
    """(the text of a body line after its group numeral, part-of-speech tags, sense number and letter,
    whether it has a number or letter, whether it has a group numeral)."""
    group = GROUP.match(line)
    rest = TAGS.sub("", line[group.end():] if group else line)
    numbered = NUMBER.match(rest)
    rest = rest[numbered.end():] if numbered else rest
    letter = LETTER.match(rest)
    rest = rest[letter.end():] if letter else rest
    return rest.strip(), bool(numbered or letter), bool(group)


def parse_entry(text, index_words):
    """(headword, [sense], examples) of one entry: a sense is its translation line (after its number and
    part of speech), "" where a numbered sense has none, or None where it translates an English phrase
    (eng-pol's "in transit (:in :transit)" then "- w tranzycie"); examples counts its quoted example
    lines (a main sense has them: eng-deu's "dog" -> "Hund", not "Bandhaken"). Raises Malformed."""
    lines = [line.rstrip() for line in text.strip("\n").split("\n")]
    headword = headword_of(lines[0].strip(), index_words)
    body = [line.strip() for line in lines[1:] if line.strip()]
    senses, waiting = [], True  # waiting: the next plain line starts a sense (an entry's first, or after a group)
    for at, line in enumerate(body):
        if NOT_TRANSLATION.match(line) or PHRASE_TRANSLATION.match(line):
            continue
        rest, numbered, group = sense_line(line)
        if group and not numbered and not rest:
            waiting = True
            continue
        if not (numbered or group or waiting):
            continue  # a gloss, a continuation or a note of the sense before
        phrase = at + 1 < len(body) and PHRASE_TRANSLATION.match(body[at + 1])
        senses.append(None if phrase else rest)
        waiting = False
    if not senses:
        raise Malformed("no translation line")
    return headword, senses, sum(1 for line in body if line.startswith('"'))


def without_brackets(text):
    """text without its <tags>, [labels], {contexts} and (notes), nested ones too; [[wiki links]] keep their words."""
    text = text.replace("[[", "").replace("]]", "")
    while True:
        before = text
        for pattern in BRACKETS:
            text = pattern.sub(" ", text)
        if text == before:
            return text


def sense_translations(sense, language):
    """The translations of a sense's line, cleaned, in order: "" for a part that is left empty. They are
    separated by commas, semicolons, " / ", "|" or ": " (eng-tur and eng-ara: "çömelmek: çökmek")."""
    text = TRAILING_NUMBER.sub("", sense.translate(HYPHENS))
    if language == "hi":
        text = text.replace("~", " ")  # eng-hin joins the words of a multi-word translation with "~"
    text = without_brackets(text)
    if language in OCR:
        text = re.split(r"\.\s", text, maxsplit=1)[0]
    text = text.split(" - ")[0]  # eng-ara: "آل - شجيرة من الهند", the word, then what it is
    parts = [" ".join(part.split()).strip(" .:;!?'") for part in SEPARATORS.split(text)]
    if language in OCR:  # eng-tur's labels without their brackets: "A.B.D kurt"
        parts = [re.sub(r"^\S*\.\S*(?:\s+|$)", "", part) for part in parts]
    return parts


def in_script(text, ranges):
    return any(low <= ord(character) <= high for character in text for low, high in ranges)


SAME = "the same as the English"


def drop_reason(translation, english, language):
    """Why a cleaned translation is not kept, or None."""
    if not translation:
        return "an empty translation"
    if any(mark in translation for mark in ELLIPSIS):
        return "an elided construction (…)"
    if not any(character.isalpha() for character in translation):
        return "no letters"
    if translation.casefold() == english.casefold():
        return SAME
    if PLACEHOLDER.search(translation):
        return "a placeholder (etw., jdn.)"
    if len(translation.split()) > MAX_WORDS or len(translation) > MAX_CHARACTERS:
        return f"a description (over {MAX_WORDS} words or {MAX_CHARACTERS} characters)"
    if language in SCRIPTS and (not in_script(translation, SCRIPTS[language]) or re.search(r"[A-Za-z]", translation)):
        return "not in the language's script"
    if MARKUP.search(translation):
        return "brackets, quotes or markup left (a malformed line)"
    if "/" in translation:
        return "alternatives (a/b)"
    if re.search(r"[^\W\d_]\d+[^\W\d_]", translation):
        return "a digit inside a word (OCR: gü1üş)"
    if len(translation) < 2 and not in_script(translation, IDEOGRAPHS):
        return "one character"
    if translation.startswith("-") or translation.endswith("-"):
        return "an affix"
    return None


def query_reason(headword):
    """Why an English headword is not a query, or None."""
    if len(headword) < 2 or not any(character.isalpha() for character in headword):
        return "under 2 characters or no letters"
    if headword.startswith("-") or headword.endswith("-"):
        return "an affix"
    if PLACEHOLDER.search(headword):
        return "a placeholder (sth., sb.)"
    if headword.endswith(".") or any(mark in headword for mark in "?!") or any(mark in headword for mark in ELLIPSIS):
        return "an abbreviation or a sentence"
    if "/" in headword:
        return "alternatives (a/b)"
    if MARKUP.search(headword):
        return "brackets, quotes or markup (eng-tur's OCR: in(sin.)uate)"
    if len(headword.split()) > MAX_QUERY_WORDS:
        return f"over {MAX_QUERY_WORDS} words"
    return None


def normalized(text):
    """The key English texts are compared by: case-folded, whitespace collapsed."""
    return " ".join(text.casefold().split())


def english_key(text):
    """An English text as reverse dictionaries are matched: its letters, a verb's leading "to " left out."""
    return letters(re.sub(r"^to\s+", "", text.strip(), flags=re.IGNORECASE))


def reverse_pairs(entries):
    """{(letters of a word, English key): place} of an X -> English dictionary: every headword the index
    names an entry by, with every comma- or semicolon-separated part of every line of its body, placed
    0, 1, 2 ... in order (glosses and part-of-speech lines count too: a pair is only ever looked up, so
    what is not a translation does no harm). The lowest place of a pair is kept: "Hund" gives "dog" at 0."""
    pairs = {}
    for index_words, text in entries:
        if text is None:
            continue
        lines = text.strip("\n").split("\n")
        words = {letters(word) for word in index_words} | {letters(re.split(r" /| <", lines[0], maxsplit=1)[0])}
        words.discard("")
        place = 0
        for line in lines[1:]:
            line = line.strip()
            if not line or NOT_TRANSLATION.match(line):
                continue
            for part in sense_translations(sense_line(line)[0], "en"):
                key = english_key(part)
                if not key:
                    continue
                for word in words:
                    if pairs.get((word, key), place + 1) > place:
                        pairs[(word, key)] = place
                place += 1
    return pairs


NOT_CONFIRMED = 1 << 30  # the place of a translation the reverse dictionary does not give


def dictionary_records(entries, language, name, counts, malformed, confirmed=None):
    """{normalized headword: record} of one dictionary's entries; what was skipped or dropped counted in
    counts (a Counter), and the first malformed entries named in malformed (a list of
    "freedict-eng-lang#HEADWORD: reason"). `confirmed` is reverse_pairs() of the X -> English dictionary:
    a translation is confirmed at a place when that dictionary gives the English headword for it there.
    FreeDict's senses and entries are not ordered by use (eng-deu has an entry a meaning, "hand" ->
    "Blatt" (of cards) before "Hand"; the Wiktionary ones order senses by gloss, "hand" -> "applause"
    first), so the record is the sense whose translation is confirmed at the lowest place, among an
    entry's senses and a headword's entries; ties go to the entry with the most example lines, then the
    most senses, then the first in the file, and within an entry to the first sense. Its positives are
    its kept translations, the confirmed ones first by place (at most MAX_POSITIVES); where the chosen
    sense's translations are all the English word itself ("hand" -> "Hand"), there is no record."""
    confirmed = confirmed or {}
    candidates = collections.defaultdict(list)  # normalized headword: [(rank, record, [(translation, place)])]
    for position, (index_words, text) in enumerate(entries):
        counts["entries"] += 1
        try:
            if text is None:
                raise Malformed("not UTF-8")
            headword, senses, examples = parse_entry(text, index_words)
        except Malformed as error:
            counts[f"malformed: {error}"] += 1
            if len(malformed) < MALFORMED_NAMED:
                malformed.append(f"freedict-{name}#{index_words[0] if index_words else ''}: {error}")
            continue
        headword = " ".join(headword.translate(HYPHENS).split())
        if "," in headword and len(headword.split(",")[0].split()) == 1:
            headword = headword.split(",")[0].strip()  # spelling variants: "spate , spait", "valor , ing. valour"
        reason = query_reason(headword)
        if not reason and language in OCR and "." in headword:
            reason = "a dot inside (eng-tur's OCR: shoot.ing box)"
        if reason:
            counts[f"headword: {reason}"] += 1
            continue
        english = english_key(headword)
        best = None  # [(translation, place)], the best place first
        for sense in senses:
            if sense is None:
                counts["senses translating an English phrase"] += 1
                continue
            if sense.startswith(CROSS_REFERENCE):
                counts["senses that are a cross-reference"] += 1
                continue
            found = []
            for translation in sense_translations(sense, language):
                reason = drop_reason(translation, headword, language)
                if reason and reason != SAME:
                    counts[f"translation: {reason}"] += 1
                elif translation not in found:
                    found.append(translation)
            if not found:
                continue
            placed = sorted(((translation, confirmed.get((letters(translation), english), NOT_CONFIRMED))
                             for translation in found), key=lambda item: item[1])  # stable: the dictionary's order in a tie
            if best is None or placed[0][1] < best[0][1]:
                best = placed
        if best is None:
            counts["entries without a kept translation"] += 1
            continue
        record = {"query": headword, "positives": [], "lang": language, "source": f"freedict-{name}#{headword}"}
        candidates[normalized(headword)].append(((best[0][1], -examples, -len(senses), position), record, best))
    records = {}
    for key, found in candidates.items():
        found.sort(key=lambda item: item[0])
        _, record, placed = found[0]
        counts["entries of a headword another entry gives"] += len(found) - 1
        kept = [(translation, place) for translation, place in placed if translation.casefold() != record["query"].casefold()]
        counts[f"translation: {SAME}"] += len(placed) - len(kept)
        if not kept:
            counts["headwords whose chosen translation is the English word"] += 1
            continue
        counts["translations of the sense kept beyond the positives"] += max(0, len(kept) - MAX_POSITIVES)
        counts["records whose translation the reverse dictionary confirms"] += kept[0][1] < NOT_CONFIRMED
        records[key] = {**record, "positives": [translation for translation, _ in kept[:MAX_POSITIVES]]}
    return records


def capitalised_dictionary(records):
    """Whether a dictionary writes (nearly) every headword with a capital: eng-ara ("Officiously")."""
    capitals = sum(1 for record in records.values() if record["query"][:1].isupper())
    return len(records) >= 20 and capitals >= 0.9 * len(records)


def lower_capitals(records, spellings):
    """A capitalising dictionary's queries with their first capital lowered ("Officiously" -> "officiously")
    unless another dictionary spells the headword capitalised too (a name: "Bremen"); `spellings` is every
    other dictionary's headwords as written. Returns how many were lowered."""
    lowered = 0
    for record in records.values():
        query = record["query"]
        if query[:1].isupper() and query[1:] == query[1:].lower() and query not in spellings:
            record["query"] = query[0].lower() + query[1:]  # the source keeps the entry's spelling
            lowered += 1
    return lowered


def english_sides(folder, splits):
    """The normalized English texts of a pair corpus's splits: each query, and each part of a CLDR keyword
    list ("face | grin"); a missing split is an error (a silent skip would let train see the evaluation)."""
    found, files = set(), []
    for split in splits:
        path = pathlib.Path(folder) / f"{split}.jsonl"
        try:
            files.append({"file": f"{path.parent.name}/{path.name}", "sha256": debian_archive.sha256_of(path)})
            with open(path, encoding="utf-8") as file:
                for number, line in enumerate(file, 1):
                    if not line.strip():
                        continue
                    try:
                        query = json.loads(line)["query"]
                    except (json.JSONDecodeError, KeyError, TypeError) as error:
                        raise ValueError(f"{path}:{number}: not a pair record: {error}") from None
                    if isinstance(query, str):
                        found.add(normalized(query))
                        found.update(normalized(part) for part in query.split(" | ") if part.strip())
        except OSError as error:
            raise ValueError(f"{path}: cannot be read ({error.strerror or error})") from None
    return found, files


def train_pairs(folders):
    """{(normalized English, language)} of the train splits of these pair corpora, where built."""
    found, read = set(), []
    for folder in folders:
        path = pathlib.Path(folder) / "train.jsonl"
        if not path.is_file():
            continue
        read.append(pathlib.Path(folder).name)
        with open(path, encoding="utf-8") as file:
            for number, line in enumerate(file, 1):
                try:
                    record = json.loads(line)
                    found.add((normalized(record["query"]), record.get("lang", "")))
                except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as error:
                    raise ValueError(f"{path}:{number}: not a pair record: {error}") from None
    return found, read


def ranked(records, coverage, seed):
    """A language's headwords in the order they are kept: found in more dictionaries first, then a seeded hash."""
    def key(headword):
        digest = hashlib.sha256(f"{seed}\0{headword}".encode("utf-8")).hexdigest()
        return (-coverage[headword], digest)
    return sorted(records, key=key)


def dictionary_licence(root, package, name):
    """The licence of the dictionary itself: its "Files: eng-lang/*" stanza of the package's DEP-5
    copyright file (the file's first License is that of debian/*, the packaging)."""
    path = pathlib.Path(root) / "usr" / "share" / "doc" / package / "copyright"
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for stanza in text.split("\n\n"):
        fields = dict(line.split(":", 1) for line in stanza.splitlines() if ":" in line and not line.startswith(" "))
        if fields.get("Files", "").split() == [f"{name}/*"] and fields.get("License", "").strip():
            return fields["License"].strip()
    return None


def read_sources(arguments, languages):
    """{dictionary name: folder} of the English -> X dictionaries of `languages` and the X -> English ones
    that confirm them (REVERSE), and the manifest's package entries. With --freedict-root, that folder
    for each, an X -> English dictionary only where its files are there."""
    names = [DICTIONARIES[language] for language in languages] + [REVERSE[language] for language in languages
                                                                   if language in REVERSE]
    if arguments.freedict_root:
        root = pathlib.Path(arguments.freedict_root)
        return {name: root for name in names if name in DICTIONARIES.values() or (root / f"freedict-{name}.index").is_file()}, []
    packages = {f"dict-freedict-{name}": name for name in names}
    fetched = debian_archive.fetch_unless_local(SCRIPT, dict.fromkeys(packages), arguments.scratch, arguments.refresh)
    folders, entries = {}, []
    for package, name in sorted(packages.items()):
        details = fetched[package]
        licence = dictionary_licence(details["root"], package, name) or details["licence"]
        entries.append(debian_archive.package_record({**details, "licence": licence}, packaging_licence=details["licence"],
                                                     read_as="pairs" if name in DICTIONARIES.values() else "confirmation"))
        folders[name] = details["root"] / DICTD
    return folders, entries


def read_named(folders, name):
    """read_dictionary of freedict-NAME.index and .dict.dz in their folder."""
    return read_dictionary(folders[name] / f"freedict-{name}.index", folders[name] / f"freedict-{name}.dict.dz")


def main(argv=None):
    parser = debian_archive.corpus_parser(__doc__.split("\n\n")[0], "freedict")
    parser.set_defaults(dev_fraction=0.1, test_fraction=0.1)
    parser.add_argument("--languages", default=",".join(sorted(DICTIONARIES)),
                        help="comma-separated languages with an English -> X FreeDict dictionary")
    parser.add_argument("--per-language", type=int, default=PER_LANGUAGE, help="most records a language")
    parser.add_argument("--freedict-root", help="a folder of freedict-eng-LANG.index and .dict.dz files to read "
                                                "instead of the packages")
    data = pathlib.Path(debian_archive.default_output(""))
    parser.add_argument("--cldr", default=str(data / "cldr"),
                        help="the CLDR corpus whose dev and test English sides no entry may have ('none': keep them)")
    parser.add_argument("--train-corpora", default=f"{data / 'cldr'},{data / 'gettext'},{data / 'libreoffice'}",
                        help="corpus folders whose train (English, language) pairs stay out of this corpus's dev and "
                             "test (comma-separated; those not built are skipped)")
    parser.add_argument("--held-out-images", default=f"{data / 'emoji'},{data / 'flags'}",
                        help="corpus folders whose dev and test captions must not be in train (comma-separated)")
    debian_archive.add_held_out_text(parser)
    arguments = parser.parse_args(argv)
    started = time.monotonic()
    languages = sorted(set(arguments.languages.split(",")))
    unknown = [language for language in languages if language not in DICTIONARIES]
    if unknown:
        sys.exit(f"{SCRIPT}: --languages: no English -> X FreeDict dictionary for {', '.join(unknown)} "
                 f"(there are {' '.join(sorted(DICTIONARIES))})")
    if arguments.per_language < 1:
        sys.exit(f"{SCRIPT}: --per-language must be at least 1")
    folders, packages = read_sources(arguments, languages)
    try:
        if arguments.cldr == "none":
            cldr_english, cldr_files = set(), []
        else:
            cldr_english, cldr_files = english_sides(arguments.cldr, ("dev", "test"))
        train_folders = [folder for folder in arguments.train_corpora.split(",") if folder]
        trained, trained_read = train_pairs(train_folders)
        per_language, counts, malformed, reverse_read = {}, {}, {}, {}
        for language in languages:
            reverse = REVERSE.get(language)
            confirmed = reverse_pairs(read_named(folders, reverse)) if reverse in folders else {}
            if reverse in folders:
                reverse_read[language] = {"dictionary": reverse, "pairs": len(confirmed)}
            name = DICTIONARIES[language]
            counts[language], malformed[language] = collections.Counter(), []
            per_language[language] = dictionary_records(read_named(folders, name), language, name, counts[language],
                                                        malformed[language], confirmed)
            del confirmed
    except ValueError as error:
        sys.exit(f"{SCRIPT}: {error}")
    lowered = {}
    for language, records in per_language.items():
        if capitalised_dictionary(records):
            others = {record["query"] for other, kept in per_language.items() if other != language for record in kept.values()}
            lowered[language] = lower_capitals(records, others)

    cldr_dropped = collections.Counter()
    for language, records in per_language.items():
        for headword in [headword for headword in records if headword in cldr_english]:
            del records[headword]
            cldr_dropped[language] += 1
    coverage = collections.Counter(headword for records in per_language.values() for headword in records)
    # One English headword a translation in each language ("ache" and "pain" -> "боль": "pain", in more
    # dictionaries) while splitting: where two share one, a split would hold a text of another, and the
    # leak rule would drop it from dev and test (more than half of the Russian, Spanish and Italian ones).
    # The others ("ache") join train after the split where both headwords are there. Then the cap.
    groups = collections.defaultdict(list)
    capped, twins = {}, {}
    for language, records in sorted(per_language.items()):
        order, first = [], {}
        twins[language] = []
        for headword in ranked(records, coverage, arguments.seed):
            translation = records[headword]["positives"][0].casefold()
            if translation in first:
                twins[language].append((headword, first[translation]))
            else:
                first[translation] = headword
                order.append(headword)
        capped[language] = max(0, len(order) - arguments.per_language)
        for headword in order[:arguments.per_language]:
            groups[headword].append(records[headword])

    # A headword that another corpus trains on in one of its languages stays in train; the other groups fill
    # dev and test to their fractions of all records.
    forced = {group for group, records in groups.items()
              if any((group, record["lang"]) in trained for record in records)}
    total = sum(len(records) for records in groups.values())
    free = {group: records for group, records in groups.items() if group not in forced}
    free_total = sum(len(records) for records in free.values()) or 1
    split_of = debian_archive.split_groups(free, arguments.seed, arguments.dev_fraction * total / free_total,
                                           arguments.test_fraction * total / free_total)
    split_of.update(dict.fromkeys(forced, "train"))
    records = debian_archive.split_records(groups, split_of)
    shared = collections.Counter()
    for language, pairs in sorted(twins.items()):
        room = arguments.per_language - sum(1 for found in groups.values() for record in found if record["lang"] == language)
        for headword, twin in pairs:
            if split_of.get(twin) == "train" and split_of.get(headword, "train") == "train" and room > 0:
                records["train"].append(per_language[language][headword])
                shared[f"{language}: in train beside it"] += 1
                room -= 1
            else:
                shared[f"{language}: left out"] += 1

    image_folders = [folder for folder in arguments.held_out_images.split(",") if folder]
    removed = collections.Counter()
    captions = debian_archive.drop_held_out_captions(records, image_folders, removed)
    text_checked = debian_archive.drop_held_out_english(records, arguments.held_out_text, removed)
    debian_archive.one_per_language_without_leaks(records, removed)

    manifest = debian_archive.write_corpus(
        arguments.output, "freedict", "scripts/data/freedict_pairs.py", records, arguments.seed,
        {"languages": languages,
         "dictionaries": {language: DICTIONARIES[language] for language in languages},
         "per_language": arguments.per_language,
         "entries": {language: dict(sorted(counts[language].items())) for language in languages},
         "malformed_entries_named": {language: malformed[language] for language in languages if malformed[language]},
         "confirmed_by": reverse_read,
         "headwords_per_language": {language: len(per_language[language]) for language in languages},
         "capitals_lowered": lowered,
         "translation_of_a_headword_before": dict(sorted(shared.items())),
         "left_out_by_the_per_language_cap": capped,
         "dictionaries_per_kept_headword": dict(sorted(collections.Counter(
             coverage[group] for group in groups).items())),
         "removed_for_cldr_dev_and_test": {"entries": dict(sorted(cldr_dropped.items())), "total": sum(cldr_dropped.values()),
                                           "cldr_english_sides": len(cldr_english), "cldr_files": cldr_files},
         "kept_in_train_for_other_corpora_train": {"groups": len(forced), "corpora": trained_read,
                                                   "pairs_found": len(trained)},
         "groups_per_split": {split: sum(1 for value in split_of.values() if value == split) for split in debian_archive.SPLITS},
         "held_out_corpora_checked": {"images": [pathlib.Path(folder).name for folder in image_folders if pathlib.Path(folder).is_dir()],
                                      "text": text_checked, "captions_found": captions},
         "removed_as_leaks": dict(sorted(removed.items())),
         "source": {"packages": packages, "local_root": arguments.freedict_root}})
    debian_archive.print_summary(SCRIPT, manifest, started, arguments.output)


if __name__ == "__main__":
    main()
