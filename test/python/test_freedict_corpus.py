# test_freedict_corpus.py: scripts/data/freedict_pairs.py on small FreeDict dictionaries written here (dictd
# .index files and gzip .dict.dz files in the shapes of Debian 12's eng-deu, eng-jpn, eng-pol, eng-tur, eng-hin
# and their X -> English twins), offline: the index numbers and entries against values worked out by hand, the
# sense and translation rules on entries copied from the real dictionaries, the corpus (exact records per
# language, one English headword in one split, the reverse dictionary's choice of sense, malformed entries
# counted and named), CLDR's dev and test English kept out (with a control built without the filter, which the
# check must catch), another corpus's train pairs kept out of dev and test, byte-for-byte repeats, and bad
# files named with the problem. The built corpus in data/freedict is checked when it exists.

import gzip
import json
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "data"))
sys.path.insert(0, str(ROOT / "test" / "python"))
import freedict_pairs  # noqa: E402
from test_corpora import SPLITS, check_manifest, leaks, pair_keys, read_splits  # noqa: E402

DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"  # dictd's base64, written out here


def dictd_number(value):
    digits = ""
    while True:
        digits = DIGITS[value % 64] + digits
        value //= 64
        if not value:
            return digits


def write_dictd(folder, name, entries, index_words=None):
    """folder/freedict-NAME.index and .dict.dz (gzip) holding `entries` [(headword, text)] in order after
    dictfmt's own 00-database entries; the index names each entry by its headword, or by index_words[i]
    (a list of words) where given. Returns the uncompressed data."""
    folder.mkdir(parents=True, exist_ok=True)
    data, index = b"", []
    entries = [("00-database-info", "A FreeDict dictionary written by the test.\n"),
               ("00databaseurl", "https://freedict.org/\n"), *entries]
    for number, (word, text) in enumerate(entries):
        encoded = text.encode()
        for indexed in (index_words or {}).get(number - 2, [word]):
            index.append((indexed, len(data), len(encoded)))
        data += encoded
    (folder / f"freedict-{name}.index").write_text(
        "".join(f"{word}\t{dictd_number(offset)}\t{dictd_number(length)}\n" for word, offset, length in sorted(index)),
        encoding="utf-8")
    (folder / f"freedict-{name}.dict.dz").write_bytes(gzip.compress(data, mtime=0))
    return data


# ---- the index and the entries ------------------------------------------------------------------

def test_base64_numbers_are_dictds():
    # C=2, p=41, Q=16: 2*64*64 + 41*64 + 16; "/" is 63, "BA" is 64.
    assert [freedict_pairs.base64_number(text) for text in ("A", "B", "/", "BA", "CpQ", "Ct/")] == \
        [0, 1, 63, 64, 10832, 2 * 4096 + 45 * 64 + 63]
    with pytest.raises(ValueError, match="'!' is not a base64 digit"):
        freedict_pairs.base64_number("A!")


def test_read_dictionary_gives_each_entry_once_in_file_order(tmp_path):
    write_dictd(tmp_path, "eng-xxx", [("zebra", "zebra /z/\nZebra\n"), ("a-bomb", "A-bomb /ɐ bˈɒm/\nAtombombe\n")],
                index_words={0: ["zebra"], 1: ["abomb", "atom bomb"]})
    assert freedict_pairs.read_dictionary(tmp_path / "freedict-eng-xxx.index", tmp_path / "freedict-eng-xxx.dict.dz") == [
        (["zebra"], "zebra /z/\nZebra\n"), (["abomb", "atom bomb"], "A-bomb /ɐ bˈɒm/\nAtombombe\n")]


@pytest.mark.parametrize("text, senses, examples", [
    # eng-deu: one unnumbered sense; notes, synonyms, cross-references and quoted examples are not senses
    ("rampart /ɹˈampɑːt/\nSchutzwall <masc>, Wall <masc> [mil.]\n      \"rampart of the fortress\"  - Festungswall\n"
     "   Synonyms: {defensive wall}, {bulwark}\n\n see: {ramparts}\n\n", ["Schutzwall <masc>, Wall <masc> [mil.]"], 1),
    # eng-fra (Ergane): numbered senses
    ("influence /infleəns/\n1. influer\n2. empire, influence\n", ["influer", "empire, influence"], 0),
    # eng-jpn (Wiktionary): each sense's translation line, then its English gloss, not read
    ("leap //liːp// <n>\n1. 跳躍\n2. 跳躍距離\ndistance traversed by a leap\n3. 閏\nintercalary\n",
     ["跳躍", "跳躍距離", "閏"], 0),
    # eng-ind: a sense's number glued to the line before, a number alone: an empty sense, its gloss not read
    ("welfare state /wˈɛlfeə stˈeɪt/ <n>\nnegara kesejahteraan 2.\ncountry in which such a system operates\n 3.\n"
     "social system in which the state takes overall responsibility\n", ["negara kesejahteraan 2.", ""], 0),
    # eng-pol: groups by part of speech, no pronunciation, letters, a sense naming an English phrase (None)
    ("abstract\nI.  <Adj> 1.  abstrakcyjny\n 2.  oderwany\nII.  <N>  streszczenie\nIII.  <V> 1.  streszczać\n",
     ["abstrakcyjny", "oderwany", "streszczenie", "streszczać"], 0),
    ("transit /ˈtrænzɪt/ <N>\n 1.  tranzyt\n 2.  in transit (:in :transit)\n - w tranzycie, przejazdem\n",
     ["tranzyt", None], 0),
    ("a/c\nI.\n   See also: {account}\n  konto\nII.\n   See also: {air conditioning}\n  klimatyzacja\n",
     ["konto", "klimatyzacja"], 0),
    ("economy /i:ˈkɒnəmɪ/\nII.  <Adj> 1.  a. oszczędny, tani\n b.\n      \"economy class\"  - najtańsza klasa\n",
     ["oszczędny, tani", ""], 1),
])
def test_parse_entry_reads_each_dictionarys_senses(text, senses, examples):
    headword = text.split(" /")[0].split("\n")[0]
    assert freedict_pairs.parse_entry(text, [headword.replace("/", "")]) == (headword, senses, examples)


def test_parse_entry_finds_the_headword_the_index_names():
    # a headword holding " / " itself, found by dictfmt's index of its letters
    text = "pain in the butt / ass /pˈeɪn ɪnðə bˈʌt ˈas/\n [Am.]  [slang] Ärgernis <neut>\n"
    assert freedict_pairs.parse_entry(text, ["pain in the butt ass"])[0] == "pain in the butt / ass"
    assert freedict_pairs.parse_entry("ostracize, ostracise /ˈɒstrəsaɪz/\n  ostracyzować\n", ["ostracize"])[0] == "ostracize"
    with pytest.raises(freedict_pairs.Malformed, match="names no headword of the index"):
        freedict_pairs.parse_entry("house /hˈaʊs/\nHaus <neut>\n", ["home"])
    with pytest.raises(freedict_pairs.Malformed, match="no translation line"):
        freedict_pairs.parse_entry("house /hˈaʊs/\n   Synonym: {home}\n", ["house"])


@pytest.mark.parametrize("line, language, translations", [
    ("Aale <pl>, Aalartige <pl> [zool.]", "de", ["Aale", "Aalartige"]),
    ("[Am.] Solarium <neut>; Sonnenstudio <neut>", "de", ["Solarium", "Sonnenstudio"]),
    ("बहुत~सारा, प्रचुर, उकसाना{बुरे~काम~के~लिये}", "hi", ["बहुत सारा", "प्रचुर", "उकसाना"]),
    ("के_साथ", "hi", ["के साथ"]),
    ("آل - شجيرة من الهند", "ar", ["آل"]),
    ("الأشعة السّينيّة / أشعّة أكس", "ar", ["الأشعة السّينيّة", "أشعّة أكس"]),
    ("[[suam-suam]] kuku, hangat-hangat", "id", ["suam-suam kuku", "hangat-hangat"]),
    ("negara kesejahteraan 2.", "id", ["negara kesejahteraan"]),
    ("znęcać się (sb - nad kimś)", "pl", ["znęcać się"]),
    ("(müz.) la notası, la perdesi", "tr", ["la notası", "la perdesi"]),
    ("sirke gibi, ekşi. acetic acid  asetik asit, sirke asidi.", "tr", ["sirke gibi", "ekşi"]),
    ("A.B.D kurt: çakal", "tr", ["kurt", "çakal"]),
    ("Аддис\u2010Абеба", "ru", ["Аддис-Абеба"]),
])
def test_sense_translations_clean_and_split(line, language, translations):
    assert freedict_pairs.sense_translations(line, language) == translations


@pytest.mark.parametrize("translation, english, language, reason", [
    ("Hund", "dog", "de", None), ("猫", "cat", "ja", None), ("し", "-ing", "ja", "one character"),
    ("Hand", "hand", "de", "the same as the English"), ("", "x", "de", "an empty translation"),
    ("Abfall…", "waste", "de", "an elided construction (…)"), ("ne ... guère", "hardly", "fr", "an elided construction (…)"),
    ("mit etw. alles verraten", "give away", "de", "a placeholder (etw., jdn.)"),
    ("Güney Afrika'da bulunan ve karınca yiyen bir hayvan", "aardvark", "tr",
     "a description (over 5 words or 40 characters)"),
    ("ATM", "cash machine", "ja", "not in the language's script"), ("to release control", "privatize", "ja",
                                                                    "not in the language's script"),
    ("ungues) tırnak", "unguis", "tr", "brackets, quotes or markup left (a malformed line)"),
    ("obere/r/s", "upper", "de", "alternatives (a/b)"), ("gü1üş", "laughter", "tr", "a digit inside a word (OCR: gü1üş)"),
    ("contra-", "counter", "pt", "an affix"), ("Vitamin B2", "riboflavin", "de", None), ("2000年問題", "Y2K", "ja", None),
])
def test_drop_reason(translation, english, language, reason):
    assert freedict_pairs.drop_reason(translation, english, language) == reason


@pytest.mark.parametrize("headword, reason", [
    ("house", None), ("ice cream", None), ("Adam's apple", None), ("a", "under 2 characters or no letters"),
    ("????", "under 2 characters or no letters"), ("-ing", "an affix"), ("Indo-", "an affix"),
    ("acct.", "an abbreviation or a sentence"), ("We are running out of supplies.", "an abbreviation or a sentence"),
    ("What?", "an abbreviation or a sentence"), ("know about sth.", "a placeholder (sth., sb.)"),
    ("give the game away by doing", "over 4 words"), ("pain in the butt / ass", "alternatives (a/b)"),
    ("in(sin.)uate", "brackets, quotes or markup (eng-tur's OCR: in(sin.)uate)"),
])
def test_query_reason(headword, reason):
    assert freedict_pairs.query_reason(headword) == reason


def test_a_capitalising_dictionary_is_lowered_except_names():
    records = {word.casefold(): {"query": word, "positives": ["x"], "lang": "ar", "source": f"freedict-eng-ara#{word}"}
               for word in ["Officiously", "Bremen", "USA", *[f"Word{letter}" for letter in "abcdefghijklmnopqrs"]]}
    assert freedict_pairs.capitalised_dictionary(records)
    assert not freedict_pairs.capitalised_dictionary({"house": {"query": "house"}, "Bremen": {"query": "Bremen"}})
    assert freedict_pairs.lower_capitals(records, {"Bremen", "house"}) == 20  # not "Bremen" (a name elsewhere), not "USA"
    assert [records[key]["query"] for key in ("officiously", "bremen", "usa", "worda")] == ["officiously", "Bremen", "USA", "worda"]
    assert records["officiously"]["source"] == "freedict-eng-ara#Officiously"  # the entry as the dictionary writes it


def test_dictionary_licence_reads_the_dictionarys_own_stanza(tmp_path):
    doc = tmp_path / "usr" / "share" / "doc" / "dict-freedict-eng-jpn"
    doc.mkdir(parents=True)
    (doc / "copyright").write_text(
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\nUpstream-Name: FreeDict\n\n"
        "Files: debian/*\nCopyright: 2013-2022 Someone\nLicense: GPL-3+\n\n"
        "Files: deu-bul/*\nCopyright: 2000-2022 FreeDict contributors\nLicense: CC-BY-SA-3.0\n\n"
        "Files: eng-jpn/*\nCopyright: 2000-2022 FreeDict contributors\nLicense: CC-BY-SA-3.0\n\n"
        "Files: eng-pol/*\nCopyright: 2000-2022 FreeDict contributors\nLicense: GPL-3+ and GFDL-1.2+\n")
    assert freedict_pairs.dictionary_licence(tmp_path, "dict-freedict-eng-jpn", "eng-jpn") == "CC-BY-SA-3.0"
    assert freedict_pairs.dictionary_licence(tmp_path, "dict-freedict-eng-jpn", "eng-pol") == "GPL-3+ and GFDL-1.2+"
    assert freedict_pairs.dictionary_licence(tmp_path, "dict-freedict-eng-jpn", "eng-rus") is None


# ---- dictionaries written here ----------------------------------------------------------------------

# (English, German, Japanese, Polish) of words every dictionary has: they fill the splits.
COMMON = [("apple", "Apfel", "林檎", "jabłko"), ("bread", "Brot", "パン", "chleb"), ("cat", "Katze", "猫", "kot"),
          ("door", "Tür", "扉", "drzwi"), ("egg", "Ei", "卵", "jajko"), ("fish", "Fisch", "魚", "ryba"),
          ("garden", "Garten", "庭", "ogród"), ("horse", "Pferd", "馬", "koń"), ("island", "Insel", "島", "wyspa"),
          ("king", "König", "王", "król"), ("lake", "See", "湖", "jezioro"), ("milk", "Milch", "牛乳", "mleko"),
          ("night", "Nacht", "夜", "noc"), ("river", "Fluss", "川", "rzeka"), ("salt", "Salz", "塩", "sól"),
          ("tooth", "Zahn", "歯", "ząb"), ("village", "Dorf", "村", "wieś"), ("window", "Fenster", "窓", "okno"),
          ("water", "Wasser", "水", "woda")]


def write_freedict(root):
    """eng-deu, eng-jpn and eng-pol in their real shapes, with deu-eng and jpn-eng to confirm translations."""
    german = [(english, f"{english} /x/\n{word} <noun>\n") for english, word, _, _ in COMMON] + [
        ("house", "house /hˈaʊs/\nGeschlecht <neut>, Familie <fem>\n"),  # a meaning of its own, first in the file
        ("house", "house /hˈaʊs/\nHaus <neut>\n      \"build a house\"  - ein Haus bauen\n"),  # the main one: examples
        ("dog", "dog /dˈɒɡ/\nBandhaken <masc> [techn.]\n         Note: Fassbinderei\n"),
        ("dog", "dog /dˈɒɡ/\nHund <masc> [zool.]\n"),  # deu-eng gives "dog" first for Hund, third for Bandhaken
        ("hand", "hand /hˈand/\nBlatt <neut>\n         Note: gezogene Spielkarten\n"),
        ("hand", "hand /hˈand/\nHand <fem> [anat.]\n      \"hold in the hand\"  - in der Hand halten\n"),
        ("tanning salon", "tanning salon /tˈanɪŋ sˈalɒn/\n [Am.] Solarium <neut>, Sonnenstudio <neut>\n"),
        ("Monday", "Monday /mˈʌndeɪ/\nMontag <masc>\n"),  # an English query of CLDR's dev
        ("face", "face /fˈeɪs/\nGesicht <neut>\n"),  # a word of a keyword list in CLDR's test
        ("know about sth", "know about sth. /nˈəʊ/\nvon etw. wissen\n"),
        ("we are running out of supplies", "We are running out of supplies. /wiː/\nUnsere Vorräte gehen zur Neige.\n"),
        ("waste", "waste /wˈeɪst/\nAbfall…\n"),
        ("broken", "broken /bɹˈəʊkən/\n   Synonym: {damaged}\n"),  # malformed: no translation line
        ("mismatch", "misprint /mˈɪsprɪnt/\nDruckfehler <masc>\n"),  # malformed: not the headword the index names
    ]
    write_dictd(root, "eng-deu", german)
    write_dictd(root, "deu-eng", [
        ("hund", "Hund /hʊnt/ <masc>\ndog, hound\n"), ("bandhaken", "Bandhaken /bˈanthaːkən/\nhoop driver, hoop tool, dog\n"),
        ("hand", "Hand /hant/ <fem>\nhand\n"), ("blatt", "Blatt /blat/ <neut>\nleaf, sheet, hand\n")])
    japanese = [(english, f"{english} //x// <n>\n{word}\n{english}, in a gloss\n") for english, _, word, _ in COMMON] + [
        ("hand", "hand //hænd// <n>\n1. 喝采\napplause\n2. 房\nbunch of bananas\n3. 手, て\npart of the fore limb\n"),
        ("cash machine", "cash machine /kˈaʃ məʃˈiːn/ <n>\nATM, エーティーエム, 現金自動預払機\n"),
        ("privatize", "privatize //ˈpɹaɪvətaɪz// <v>\nto release government control to private industry\n"),
    ]
    write_dictd(root, "eng-jpn", japanese)
    write_dictd(root, "jpn-eng", [("手", "手 /te/, て /te/\n(noun (common) (futsuumeishi))\nhand, arm\n")],
                index_words={0: ["手", "て"]})
    polish = [(english, f"{english} /x/ <N>\n  {word}\n") for english, _, _, word in COMMON] + [
        ("abstract", "abstract\nI.  <Adj> 1.  abstrakcyjny\n 2.  oderwany\nII.  <N>  streszczenie\n"),
        ("transit", "transit /ˈtrænzɪt/ <N>\n 1.  in transit (:in :transit)\n - w tranzycie\n 2.  tranzyt\n"),
        ("acct", "acct\nI.\n   See also: {account}\n  konto\n"),
    ]
    write_dictd(root, "eng-pol", polish)  # no pol-eng here: a dictionary without its twin is read alone
    return root


def write_split_files(folder, records_by_split):
    folder.mkdir(parents=True, exist_ok=True)
    for split in SPLITS:
        (folder / f"{split}.jsonl").write_text(
            "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records_by_split.get(split, [])),
            encoding="utf-8")
    return folder


def write_cldr(folder):
    return write_split_files(folder, {
        "train": [{"query": "January", "positives": ["Januar"], "lang": "de", "source": "dates/calendars"}],
        "dev": [{"query": "Monday", "positives": ["Montag"], "lang": "de", "source": "dates/calendars"}],
        "test": [{"query": "face | grin", "positives": ["Gesicht | grinsen"], "lang": "de", "source": "emoji"}]})


def build(tmp_path, output, cldr="cldr", train_corpora="", seed=0, fractions=("0.3", "0.3"), extra=()):
    freedict_pairs.main(["--freedict-root", str(tmp_path / "freedict"), "--languages", "de,ja,pl", "--output", str(output),
                         "--cldr", cldr if cldr == "none" else str(tmp_path / cldr), "--train-corpora", train_corpora,
                         "--held-out-images", "", "--held-out-text", "", "--seed", str(seed),
                         "--dev-fraction", fractions[0], "--test-fraction", fractions[1], *extra])
    return read_splits(output), json.loads((pathlib.Path(output) / "manifest.json").read_text(encoding="utf-8"))


def pairs_of(splits):
    """{(language, English): translation} of every split."""
    return {(record["lang"], record["query"]): record["positives"][0] for split in SPLITS for record in splits[split]}


def cldr_held_out_found(splits, cldr_folder):
    """English queries of `splits` that are an English side of the CLDR corpus's dev or test (each query, and each
    part of a keyword list): what the filter must leave none of."""
    held = set()
    for split in ("dev", "test"):
        for line in (cldr_folder / f"{split}.jsonl").read_text(encoding="utf-8").splitlines():
            query = json.loads(line)["query"]
            held |= {query.casefold(), *(part.strip().casefold() for part in query.split("|"))}
    return {record["query"] for split in SPLITS for record in splits[split] if record["query"].casefold() in held}


def test_freedict_corpus(tmp_path):
    write_freedict(tmp_path / "freedict")
    write_cldr(tmp_path / "cldr")
    splits, manifest = build(tmp_path, tmp_path / "out", fractions=("0.0", "0.0"))
    pairs = pairs_of(splits)
    for english, german, japanese, polish in COMMON:
        assert (pairs[("de", english)], pairs[("ja", english)], pairs[("pl", english)]) == (german, japanese, polish)
    assert pairs[("de", "house")] == "Haus"  # the entry with example lines, not the first
    assert pairs[("de", "dog")] == "Hund"  # deu-eng gives "dog" first for Hund
    assert ("de", "hand") not in pairs  # the entry chosen ("Hand", deu-eng's first) is the English word itself
    assert pairs[("ja", "hand")] == "手"  # jpn-eng's "hand, arm" picks the third sense
    assert pairs[("de", "tanning salon")] == "Solarium"
    assert pairs[("ja", "cash machine")] == "エーティーエム"  # "ATM" is not Japanese script
    assert pairs[("pl", "abstract")] == "abstrakcyjny" and pairs[("pl", "transit")] == "tranzyt"
    assert pairs[("pl", "acct")] == "konto"
    assert not {english for _, english in pairs} & {"know about sth.", "We are running out of supplies.", "waste",
                                                   "privatize", "broken", "misprint", "Monday", "face"}
    for record in splits["train"]:
        assert record["source"] == f"freedict-{freedict_pairs.DICTIONARIES[record['lang']]}#{record['query']}"
        assert set(record) == {"query", "positives", "lang", "source"} and len(record["positives"]) == 1
    assert manifest["records"]["train"] == {"total": 19 * 3 + 8, "de": 19 + 3, "ja": 19 + 2, "pl": 19 + 3}
    german = manifest["entries"]["de"]
    assert german["malformed: no translation line"] == 1
    assert german["malformed: its first line names no headword of the index"] == 1
    assert german["entries"] == 19 + 14 and german["entries of a headword another entry gives"] == 3
    assert german["headwords whose chosen translation is the English word"] == 1
    assert german["headword: a placeholder (sth., sb.)"] == 1 and german["headword: an abbreviation or a sentence"] == 1
    assert manifest["entries"]["pl"]["senses translating an English phrase"] == 1
    assert manifest["malformed_entries_named"]["de"] == ["freedict-eng-deu#broken: no translation line",
                                                         "freedict-eng-deu#mismatch: its first line names no headword of the index"]
    assert manifest["confirmed_by"] == {"de": {"dictionary": "deu-eng", "pairs": 2 + 3 + 1 + 3},
                                        "ja": {"dictionary": "jpn-eng", "pairs": 4}}
    assert manifest["removed_for_cldr_dev_and_test"]["entries"] == {"de": 2}
    check_manifest(tmp_path / "out")


def test_an_english_headword_keeps_one_split_in_every_language(tmp_path):
    write_freedict(tmp_path / "freedict")
    write_cldr(tmp_path / "cldr")
    seen_test = False
    for seed in range(6):
        splits, manifest = build(tmp_path, tmp_path / f"out{seed}", seed=seed)
        assert not leaks(splits, pair_keys)
        where = {}
        for split in SPLITS:
            for record in splits[split]:
                where.setdefault(record["query"].casefold(), set()).add(split)
        assert all(len(places) == 1 for places in where.values()), where
        seen_test = seen_test or bool(splits["test"] and splits["dev"])
        assert manifest["records"]["dev"]["total"] + manifest["records"]["test"]["total"] > 0
    assert seen_test
    planted = read_splits(tmp_path / "out0")
    planted["dev"].append(dict(planted["train"][0]))
    assert leaks(planted, pair_keys)  # the control: a record in two splits is caught


def test_cldr_dev_and_test_english_is_left_out(tmp_path):
    write_freedict(tmp_path / "freedict")
    cldr = write_cldr(tmp_path / "cldr")
    splits, manifest = build(tmp_path, tmp_path / "out")
    assert cldr_held_out_found(splits, cldr) == set()
    assert manifest["removed_for_cldr_dev_and_test"]["total"] == 2
    assert [entry["file"] for entry in manifest["removed_for_cldr_dev_and_test"]["cldr_files"]] == ["cldr/dev.jsonl",
                                                                                                   "cldr/test.jsonl"]
    # the control: without the filter the planted words are read, and the check finds them
    free, free_manifest = build(tmp_path, tmp_path / "free", cldr="none")
    assert cldr_held_out_found(free, cldr) == {"Monday", "face"}
    assert pairs_of(free)[("de", "Monday")] == "Montag"
    assert free_manifest["removed_for_cldr_dev_and_test"]["total"] == 0


def test_another_corpus_train_pairs_stay_out_of_dev_and_test(tmp_path):
    write_freedict(tmp_path / "freedict")
    write_cldr(tmp_path / "cldr")
    gettext = write_split_files(tmp_path / "gettext", {"train": [{"query": "Water", "positives": ["Wasser"], "lang": "de"}]})
    moved = 0
    for seed in range(8):
        splits, manifest = build(tmp_path, tmp_path / f"g{seed}", train_corpora=str(gettext), seed=seed)
        assert {record["lang"] for record in splits["train"] if record["query"] == "water"} == {"de", "ja", "pl"}
        assert manifest["kept_in_train_for_other_corpora_train"]["corpora"] == ["gettext"]
        control, _ = build(tmp_path, tmp_path / f"c{seed}", seed=seed)
        moved += any(record["query"] == "water" for split in ("dev", "test") for record in control[split])
    assert moved  # the control: without gettext's train some seed puts "water" in dev or test


def test_output_repeats_byte_for_byte(tmp_path):
    write_freedict(tmp_path / "freedict")
    write_cldr(tmp_path / "cldr")
    build(tmp_path, tmp_path / "a", seed=3)
    build(tmp_path, tmp_path / "b", seed=3)
    for name in ("train.jsonl", "dev.jsonl", "test.jsonl", "manifest.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_the_per_language_cap_keeps_the_words_most_dictionaries_have(tmp_path):
    write_freedict(tmp_path / "freedict")
    write_cldr(tmp_path / "cldr")
    splits, manifest = build(tmp_path, tmp_path / "out", fractions=("0.0", "0.0"), extra=["--per-language", "19"])
    assert manifest["records"]["train"] == {"total": 57, "de": 19, "ja": 19, "pl": 19}
    # the 19 words of all three dictionaries come before "house", "dog", "hand" ... (two or one)
    assert {record["query"] for record in splits["train"]} == {english for english, *_ in COMMON}
    assert manifest["left_out_by_the_per_language_cap"] == {"de": 3, "ja": 2, "pl": 3}


# ---- bad input --------------------------------------------------------------------------------------

def test_a_malformed_index_line_is_named(tmp_path):
    root = write_freedict(tmp_path / "freedict")
    write_cldr(tmp_path / "cldr")
    index = root / "freedict-eng-deu.index"
    lines = index.read_text(encoding="utf-8").splitlines(keepends=True)
    index.write_text("".join(lines[:3] + ["apple\tBA\n"] + lines[3:]), encoding="utf-8")
    with pytest.raises(SystemExit, match=r"freedict-eng-deu\.index:4: not headword TAB offset TAB length: 'apple\\tBA'"):
        build(tmp_path, tmp_path / "out")
    index.write_text("".join(lines[:3] + ["apple\tB!\tC\n"] + lines[3:]), encoding="utf-8")
    with pytest.raises(SystemExit, match=r"freedict-eng-deu\.index:4: an offset or length is not base64 \('!' is not"):
        build(tmp_path, tmp_path / "out")


def test_an_offset_past_the_end_is_named(tmp_path):
    root = write_freedict(tmp_path / "freedict")
    write_cldr(tmp_path / "cldr")
    size = len(gzip.decompress((root / "freedict-eng-deu.dict.dz").read_bytes()))
    with open(root / "freedict-eng-deu.index", "a", encoding="utf-8") as file:
        file.write(f"zebra\t{dictd_number(size - 4)}\t{dictd_number(10)}\n")
    with pytest.raises(SystemExit, match=rf"freedict-eng-deu\.index:\d+: the entry of 'zebra' at {size - 4} \(\+10 bytes\) "
                                         rf"runs past the end of .*freedict-eng-deu\.dict\.dz \({size} bytes\)"):
        build(tmp_path, tmp_path / "out")


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_a_corrupt_gzip_is_named(tmp_path, damage):
    root = write_freedict(tmp_path / "freedict")
    write_cldr(tmp_path / "cldr")
    path = root / "freedict-eng-pol.dict.dz"
    data = path.read_bytes()
    path.write_bytes(b"\x1f\x8b\x08\x00 not deflate data at all" if damage == "garbage" else data[:len(data) // 2])
    with pytest.raises(SystemExit, match=r"freedict-eng-pol\.dict\.dz: not a readable gzip \(dictzip\) file: "):
        build(tmp_path, tmp_path / "out")


def test_missing_files_and_languages_are_named(tmp_path):
    root = write_freedict(tmp_path / "freedict")
    write_cldr(tmp_path / "cldr")
    with pytest.raises(SystemExit, match="no English -> X FreeDict dictionary for zh"):
        freedict_pairs.main(["--freedict-root", str(root), "--languages", "de,zh", "--output", str(tmp_path / "out")])
    (tmp_path / "cldr" / "test.jsonl").unlink()  # a silent skip would let train see CLDR's test
    with pytest.raises(SystemExit, match=r"cldr/test\.jsonl: cannot be read"):
        build(tmp_path, tmp_path / "out")
    write_cldr(tmp_path / "cldr")
    (root / "freedict-eng-jpn.index").unlink()
    with pytest.raises(SystemExit, match=r"freedict-eng-jpn\.index: cannot be read"):
        build(tmp_path, tmp_path / "out")


def test_a_corrupt_cldr_line_is_named(tmp_path):
    write_freedict(tmp_path / "freedict")
    cldr = write_cldr(tmp_path / "cldr")
    (cldr / "dev.jsonl").write_text('{"query": "Monday", "positives": ["Montag"]}\n{"query": "cut sho\n', encoding="utf-8")
    with pytest.raises(SystemExit, match=r"cldr/dev\.jsonl:2: not a pair record"):
        build(tmp_path, tmp_path / "out")


# ---- the built corpus ---------------------------------------------------------------------------------

def test_built_freedict_corpus():
    folder = ROOT / "data" / "freedict"
    if not (folder / "manifest.json").exists():
        pytest.skip("data/freedict is not built (scripts/data/freedict_pairs.py writes it)")
    manifest = check_manifest(folder)
    splits = read_splits(folder)
    assert all(splits[split] for split in SPLITS) and not leaks(splits, pair_keys)
    assert set(manifest["languages"]) == {"ar", "de", "es", "fr", "hi", "id", "it", "ja", "pl", "pt", "ru", "tr"}
    assert all(manifest["records"]["dev"].get(language) for language in manifest["languages"])
    for package in manifest["source"]["packages"]:
        assert package["version"] and package["sha256"] and package["licence"], package
    cldr = ROOT / "data" / "cldr"
    if (cldr / "test.jsonl").exists() and manifest["removed_for_cldr_dev_and_test"]["cldr_files"]:
        assert cldr_held_out_found(splits, cldr) == set()
