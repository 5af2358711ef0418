#!/usr/bin/env python3
"""gcide_pairs.py: word -> definition pairs from GCIDE, the Collaborative International Dictionary
of English (Webster's 1913 with later additions), as the Debian package dict-gcide ships it for
dictd (unpacked, not installed): gcide.index (headword, base64 offset, base64 length) into
gcide.dict.dz (gzip-compatible). One record per headword, case-folded: the query is the headword
("bank"), the positives its senses across all its entries, numbered or lettered, in file order
(at most MAX_POSITIVES and RECORD_BYTES, each cut to MAX_BYTES); a run-in phrase of an entry
("{Bank swallow}, a small American ... swallow") is its own record, grouped with the entry's
headword. Cleaned:
pronunciation, etymology, source tags ([1913 Webster]), usage labels ([Obs.]), citations
(--Shak.), quotations, Syn/Usage/Note paragraphs and derived forms go; GCIDE's bracket codes
become Unicode (a["e]roplane -> aëroplane). Split by the case-folded headword, then no query or
definition of dev/test is in train; train also loses every headword that is a query word of
WordNet's dev or test split, and every definition equal to one of theirs, so the WordNet
evaluation stays honest. Writes data/gcide/{train,dev,test}.jsonl, text.jsonl and manifest.json.
Standard library only; deterministic for a seed. See docs/data.md.
"""

import argparse
import collections
import gzip
import json
import pathlib
import re
import sys
import time
import unicodedata

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import debian_archive  # noqa: E402

MAX_POSITIVES = 8  # senses per record: the first ones, as a dictionary orders them, are the common ones
MAX_BYTES = 400  # per definition
RECORD_BYTES = 1000  # query and positives together, so a record fits the embedder's 1024-column rows uncut
BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
# GCIDE's accent codes: [a^] breve, [=a] macron, [.a] dot, ["a] diaeresis, ['a] acute, [`a] grave,
# [~a] tilde, [^a] circumflex, [,c] cedilla; [-a] and [*a] are pronunciation marks with no Unicode letter.
ACCENT_AFTER = {"^": "\u0306"}
ACCENT_BEFORE = {"=": "\u0304", ".": "\u0307", '"': "\u0308", "'": "\u0301", "`": "\u0300", "~": "\u0303",
                 "^": "\u0302", ",": "\u0327", "-": "", "*": ""}
NAMED = {"aum": "ä", "eum": "ë", "ium": "ï", "oum": "ö", "uum": "ü", "add": "ä", "udd": "ü", "imac": "ī",
         "ae": "æ", "AE": "Æ", "oe": "œ", "OE": "Œ", "eth": "ð", "thorn": "þ", "th": "θ", "ng": "ŋ", "yogh": "ȝ",
         "deg": "°", "root": "√", "sect": "§", "pounds": "£", "asl": "a", "oo": "oo", "oo^": "oo", "=oo": "oo",
         "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "Delta": "Δ", "pi": "π", "phi": "φ", "mu": "μ",
         "sigma": "σ", "omega": "ω", "lambda": "λ", "theta": "θ", "bar": "|", "prime": "′", "bprime": "″"}
ENTITY = re.compile(r"\[([^\[\]\s]{1,7})\]")
PRONUNCIATION = re.compile(r"\\[^\\\n]*\\")
HEADWORD = re.compile(r"\s*([^\\,][^\\]*?)\s*\\[^\\\n]*\\")
SOURCE_OR_LABEL_LINE = re.compile(r"^\s*\[[^\]]*\]\s*$")
SENSE = re.compile(r"^\s{1,6}(\d+)\.\s*(.*)$")
SUBSENSE = re.compile(r"^\s{1,10}\(([a-z])\)\s+(.*)$")
PHRASE = re.compile(r"^\s{1,6}\{")
SKIPPED_PARAGRAPH = re.compile(r"^\s*(?:Syn|Usage|Note|Note\s*\d+)\s*[:.]")
LEADING_LABEL = re.compile(r"^(?:\((?:[A-Z][^()]*|[^()]*\.)\)\s*)+")  # "(Zool.)", "(A["e]ronautics)"
CITATION = re.compile(r"\s*--(?=[^\s-]).*$")  # "--Shak.", "--2 Sam. xx. 15." runs to the sense's end
DERIVED = re.compile(r"\s*--\s*\{[^{}]*\}\s*,?\s*(?:[a-z]{1,6}\.\s*)+")  # "-- {Un*wor"thi*ly}, adv."
CROSS_REFERENCE = re.compile(r"^(?:etc\.,?\s*)?(?:See|Same as|Alt\. of|Obs\. form of|Variant of|Pl\. of|Plural of|"
                             r"imp\. of|p\. p\. of|An obsolete form of|Old spelling of)\b", re.IGNORECASE)


def base64_number(text):
    """A dictd index number: base64 digits, most significant first."""
    value = 0
    for character in text:
        value = value * 64 + BASE64.index(character)
    return value


def read_index(path):
    """[(headword, offset, length)] of a dictd .index file (tab-separated, offsets in base64)."""
    entries = []
    with open(path, encoding="utf-8", errors="replace") as file:
        for number, line in enumerate(file, 1):
            fields = line.rstrip("\n").split("\t")
            if len(fields) < 3:
                raise ValueError(f"{path}:{number}: not headword TAB offset TAB length")
            try:
                entries.append((fields[0], base64_number(fields[1]), base64_number(fields[2])))
            except ValueError:
                raise ValueError(f"{path}:{number}: an offset or length is not base64") from None
    return entries


def read_entries(index_path, dict_path):
    """The text of every distinct entry (offset, length) the index names, in file order; the
    dictd database's own "00-database-*" entries are left out. Several headwords (variants, phrase
    words) point at one entry, so each entry is read once."""
    with gzip.open(dict_path) as file:  # .dict.dz is gzip with a random-access table gzip ignores
        data = file.read()
    spans = sorted({(offset, length) for word, offset, length in read_index(index_path)
                    if not word.startswith("00-database-") and not word.startswith("00-")})
    entries = []
    for offset, length in spans:
        if offset + length > len(data):
            raise ValueError(f"{index_path}: an entry at {offset} runs past the end of {dict_path}")
        chunk = data[offset:offset + length]
        try:
            entries.append(chunk.decode("utf-8"))
        except UnicodeDecodeError:  # a few entries carry stray Windows-1252 punctuation
            entries.append(chunk.decode("cp1252", errors="replace"))
    return entries


def unicode_entities(text):
    """GCIDE's bracket codes (["e], [ae], [deg], ...) as Unicode; other brackets are left as they are."""
    def replace(match):
        code = match.group(1)
        if code in NAMED:
            return NAMED[code]
        if len(code) == 2 and code[1] in ACCENT_AFTER and code[0].isalpha():
            return unicodedata.normalize("NFC", code[0] + ACCENT_AFTER[code[1]])
        if len(code) == 2 and code[0] in ACCENT_BEFORE and code[1].isalpha():
            return unicodedata.normalize("NFC", code[1] + ACCENT_BEFORE[code[0]])
        return match.group(0)
    return ENTITY.sub(replace, text)


def without_brackets(text):
    """text without its [...] groups (usage labels, sources, etymologies), nested ones included."""
    result, depth = [], 0
    for character in text:
        if character == "[":
            depth += 1
        elif character == "]" and depth:
            depth -= 1
        elif not depth:
            result.append(character)
    return "".join(result)


def unbraced(match):
    """A {cross reference} as its words, without the syllable marks of a headword ({Un*wor"thi*ly})."""
    inner = match.group(1).replace("*", "").replace("`", "")
    return re.sub(r'(?<=\w)"(?=\w)', "", inner)


def clean(text):
    """A definition as plain text: entities as Unicode, citations, derived forms, labels and
    brackets gone, cross-reference braces opened, whitespace collapsed."""
    text = " ".join(text.split())
    text = unicode_entities(text)
    text = DERIVED.sub("", text)
    text = CITATION.sub("", text)
    text = without_brackets(text)
    text = re.sub(r"\{([^{}]*)\}", unbraced, text)
    text = LEADING_LABEL.sub("", text.strip())
    text = " ".join(text.replace("[", " ").replace("]", " ").replace("{", "").replace("}", "").split())
    text = re.sub(r"\s+([,;:.])", r"\1", text)
    text = re.sub(r"(?:[;,:]|\s--)+$", "", text).strip()
    return text.lstrip(",;:. ")


def headwords_and_part(first_line):
    """(headwords, part of speech) of an entry's first line: "Banc \\Banc\\, Bank \\Bank\\, n. [OF."
    gives (["Banc", "Bank"], "n.")."""
    words, at = [], 0
    while True:
        found = HEADWORD.match(first_line, at)
        if not found:
            break
        words.append(found.group(1).strip().strip(",").strip())
        at = found.end()
        if first_line[at:at + 1] == ",":
            at += 1
    rest = re.sub(r"\([^()]*\)", "", PRONUNCIATION.sub("", first_line[at:]))
    rest = rest.split("[")[0]
    part = " ".join(rest.replace(",", " ").split())
    return [word for word in words if word], part


def header_length(lines):
    """How many lines an entry's header takes: the first, plus the next ones while an etymology
    bracket is open, the line ends with a comma or the next line holds another headword."""
    count, depth = 0, 0
    while count < len(lines):
        line = lines[count]
        depth += line.count("[") - line.count("]")
        count += 1
        following = lines[count] if count < len(lines) else ""
        if depth <= 0 and not line.rstrip().endswith(",") and not PRONUNCIATION.search(following):
            break
    return count


def phrase_record_parts(text):
    """(names, definition) of a run-in phrase, "{To bank a fire}, {To bank up a fire}, to cover ..."."""
    names, at = [], 0
    while True:
        found = re.match(r"\s*,?\s*(?:or\s+)?\{([^{}]+)\}", text[at:])
        if not found:
            break
        names.append(unbraced(found))
        at += found.end()
    return names, text[at:]


def parse_entry(text):
    """(headwords, part of speech, [definition], [(phrase names, definition)]) of one entry."""
    lines = text.rstrip("\n").split("\n")
    if not lines or not PRONUNCIATION.search(lines[0]):
        return [], "", [], []
    words, part = headwords_and_part(lines[0])
    items, current, skipping = [], None, False  # items: (kind, [text lines])

    def close():
        nonlocal current
        if current is not None:
            items.append(current)
        current = None

    for line in lines[header_length(lines):]:
        if not line.strip():
            close()
            skipping = False
            continue
        if SOURCE_OR_LABEL_LINE.match(line):
            close()
            continue
        sense, subsense = SENSE.match(line), SUBSENSE.match(line)
        if sense or subsense:
            close()
            skipping = False
            current = ("sense" if sense else "subsense", [(sense or subsense).group(2)])
        elif SKIPPED_PARAGRAPH.match(line):
            close()
            skipping = True
        elif PHRASE.match(line) and current is None:
            skipping = False
            current = ("phrase", [line])
        elif skipping:
            continue
        elif current is None:
            indent = len(line) - len(line.lstrip())
            if indent >= 8:  # a quotation, indented under its sense
                skipping = True
            else:
                current = ("sense", [line])
        else:
            current[1].append(line)
    close()
    definitions, phrases = [], []
    for index, (kind, parts) in enumerate(items):
        joined = " ".join(part.strip() for part in parts)
        if kind == "phrase":
            names, definition = phrase_record_parts(joined)
            definition = clean(definition)
            if names and keep(definition):
                phrases.append(([" ".join(name.split()) for name in names], definition))
            continue
        definition = clean(joined)
        followed_by_subsenses = index + 1 < len(items) and items[index + 1][0] == "subsense"
        if kind == "sense" and followed_by_subsenses and (not definition or definition.endswith(":") or len(definition) < 40):
            continue  # a lead ("Of voluntary action:") or a label its lettered senses define
        if keep(definition):
            definitions.append(definition)
    return words, part, definitions, phrases


def keep(definition):
    """A definition worth a pair: some words, and more than a pointer to another headword."""
    if len(definition) < 8 or not re.search(r"[A-Za-z]{2}", definition):
        return False
    return not (CROSS_REFERENCE.match(definition) and len(definition) < 60)


def query_spelling(word, part):
    """The headword as a query: GCIDE capitalises every headword, so a capital followed by lower
    case is lowered unless the entry is a proper noun; acronyms and mixed case stay."""
    if part.startswith("prop") or len(word) < 2 or not word[0].isupper() or any(character.isupper() for character in word[1:]):
        return word
    return word[0].lower() + word[1:]


def records_by_group(entries):
    """{headword, case-folded: [record]}: one headword record (its entries' senses, at most
    MAX_POSITIVES, in file order) and one record per run-in phrase of its entries; counts."""
    headword_records, phrase_records = {}, collections.defaultdict(dict)
    counts = collections.Counter()
    for text in entries:
        words, part, definitions, phrases = parse_entry(text)
        if not words:
            counts["entries without a headword"] += 1
            continue
        counts["entries"] += 1
        group = words[0].casefold()
        if definitions:
            record = headword_records.setdefault(group, {"query": query_spelling(words[0], part), "positives": [],
                                                         "lang": "en", "pos": part, "kind": "headword"})
            for definition in definitions:
                definition = debian_archive.cut(definition, MAX_BYTES, " ")
                if definition not in record["positives"]:
                    record["positives"].append(definition)
        else:
            counts["entries without a definition"] += 1
        for names, definition in phrases:
            query = ", ".join(dict.fromkeys(query_spelling(name, "") for name in names))
            record = phrase_records[group].setdefault(query.casefold(), {"query": query, "positives": [], "lang": "en",
                                                                         "kind": "phrase", "headword": words[0]})
            definition = debian_archive.cut(definition, MAX_BYTES, " ")
            if definition not in record["positives"]:
                record["positives"].append(definition)
    groups = collections.defaultdict(list)
    for group, records in [(group, [record]) for group, record in headword_records.items()] + \
            [(group, list(records.values())) for group, records in phrase_records.items()]:
        for record in records:
            kept = capped(record["query"], record["positives"])
            counts["senses beyond the caps"] += len(record["positives"]) - len(kept)
            record["positives"] = kept
            groups[group].append(record)
    return dict(groups), counts


def capped(query, positives):
    """The leading positives, at most MAX_POSITIVES and RECORD_BYTES with the query (the first always)."""
    kept, size = [], len(query.encode())
    for positive in positives[:MAX_POSITIVES]:
        size += len(positive.encode())
        if kept and size > RECORD_BYTES:
            break
        kept.append(positive)
    return kept


def wordnet_held_out(folder):
    """(query words, definitions, files read) of WordNet's dev and test splits, case-folded; a
    missing split is an error (a silent skip would let train see the WordNet evaluation)."""
    words, definitions, files = set(), set(), []
    for split in ("dev", "test"):
        path = pathlib.Path(folder) / f"{split}.jsonl"
        files.append({"file": f"{path.parent.name}/{path.name}", "sha256": debian_archive.sha256_of(path)})
        with open(path, encoding="utf-8") as file:
            for line in file:
                record = json.loads(line)
                words.update(word.strip().casefold() for word in record["query"].split(","))
                definitions.update(positive.casefold() for positive in record["positives"])
    return words, definitions, files


def drop_wordnet_held_out(train, words, definitions):
    """train without records whose query words are WordNet dev/test query words and without
    positives equal to a WordNet dev/test definition (a record left with none goes); counts."""
    kept, dropped_records, dropped_positives = [], 0, 0
    for record in train:
        if any(word.strip().casefold() in words for word in record["query"].split(",")):
            dropped_records += 1
            continue
        positives = [positive for positive in record["positives"] if positive.casefold() not in definitions]
        dropped_positives += len(record["positives"]) - len(positives)
        if not positives:
            dropped_records += 1
            continue
        kept.append({**record, "positives": positives})
    return kept, {"records_with_a_wordnet_dev_or_test_word": dropped_records,
                  "positives_equal_to_a_wordnet_dev_or_test_definition": dropped_positives}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", default=debian_archive.default_output("gcide"))
    parser.add_argument("--scratch", default=str(debian_archive.DEFAULT_SCRATCH), help="downloads and unpacked packages")
    parser.add_argument("--gcide-root", help="a folder of gcide.index and gcide.dict.dz to read instead of dict-gcide")
    parser.add_argument("--wordnet", default=str(debian_archive.REPOSITORY / "data" / "wordnet"),
                        help="the WordNet corpus whose dev and test words and definitions leave gcide's train "
                             "('none': keep them)")
    debian_archive.add_common_arguments(parser, "most records in text.jsonl")
    arguments = parser.parse_args(argv)
    started = time.monotonic()
    folder, packages = debian_archive.package_folder("gcide_pairs", "dict-gcide", arguments.gcide_root, "usr/share/dictd",
                                                     arguments.scratch, arguments.refresh)
    try:
        entries = read_entries(folder / "gcide.index", folder / "gcide.dict.dz")
        words, definitions, wordnet_files = (set(), set(), []) if arguments.wordnet == "none" else wordnet_held_out(arguments.wordnet)
    except (OSError, ValueError) as error:
        sys.exit(f"gcide_pairs: {error}")
    groups, counts = records_by_group(entries)
    records, duplicates, split_of = debian_archive.split_and_dedupe(groups, arguments.seed, arguments.dev_fraction,
                                                                   arguments.test_fraction)
    records["train"], wordnet_dropped = drop_wordnet_held_out(records["train"], words, definitions)
    leaks = debian_archive.remove_leaks(records)
    texts = [f"{record['query']}: {positive}" for record in records["train"] for positive in record["positives"]]
    manifest = debian_archive.write_corpus(
        arguments.output, "gcide", "scripts/data/gcide_pairs.py", records, arguments.seed,
        {"entries": dict(sorted(counts.items())),
         "records_per_kind": {split: dict(sorted(collections.Counter(record["kind"] for record in records[split]).items()))
                              for split in debian_archive.SPLITS},
         "groups_per_split": dict(collections.Counter(split_of.values())),
         "removed_as_duplicate_queries_within_a_split": duplicates,
         "removed_from_train_for_wordnet": {**wordnet_dropped, "wordnet_words": len(words),
                                            "wordnet_definitions": len(definitions), "wordnet_files": wordnet_files},
         "removed_from_dev_and_test_as_leaks": leaks,
         "source": {"packages": packages, "local_root": None if packages else str(folder)}},
        texts=texts, text_limit=arguments.text_limit)
    debian_archive.print_summary("gcide_pairs", manifest, started, arguments.output)


if __name__ == "__main__":
    main()
