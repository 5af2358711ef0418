# test_corpora_cldr.py: scripts/data/cldr_pairs.py on a small CLDR tree written here (no network):
# which names it pairs and which it leaves (patterns, abbreviations, alternatives, skin tones,
# unconfirmed values), that a concept keeps one split in every language, that no text crosses
# splits (with a planted leak the check must catch), that held-out captions and English strings of
# other corpora stay out of train, and that the output matches its manifest and repeats byte for
# byte. The built corpus is checked with the others (test_corpora.py), its languages here.

import json
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "data"))
sys.path.insert(0, str(ROOT / "test" / "python"))
import cldr_pairs  # noqa: E402
from test_corpora import SPLITS, check_manifest, leaks, pair_keys, read_splits  # noqa: E402

TERRITORIES = {"DE": ("Germany", "Deutschland", "Գերմանիա"), "FR": ("France", "Frankreich", "Ֆրանսիա"),
               "JP": ("Japan", "Japan", "Ճապոնիա"), "GE": ("Georgia", "Georgien", "Վրաստան")}
MONTHS = [("January", "Januar", "հունվարի"), ("February", "Februar", "փետրվարի")]


def main_xml(column, language):
    territories = "".join(f'<territory type="{code}">{names[column]}</territory>' for code, names in TERRITORIES.items())
    months = "".join(f'<month type="{i + 1}">{names[column]}</month>' for i, names in enumerate(MONTHS))
    short_months = "".join(f'<month type="{i + 1}">{names[column][:3]}</month>' for i, names in enumerate(MONTHS))
    kilometer = ("kilometers", "Kilometer", "կիլոմետր")[column]
    euro = ("Euro", "Euro", "եվրո")[column]
    draft = ' draft="unconfirmed"' if column else ""
    return f'''<?xml version="1.0" encoding="UTF-8" ?>
<ldml><identity><language type="{language}"/></identity>
<localeDisplayNames>
 <languages><language type="de">{("German", "Deutsch", "գերմաներեն")[column]}</language>
  <language type="sw" alt="short">{("Swahili short", "Suaheli kurz", "սուահիլի")[column]}</language>
  <language type="xx"{draft}>{("Unconfirmed", "Unbestätigt", "Չհաստատված")[column]}</language></languages>
 <territories>{territories}</territories>
 <codePatterns><codePattern type="language">{("Language: {0}", "Sprache: {0}", "Լեզու՝ {0}")[column]}</codePattern></codePatterns>
</localeDisplayNames>
<dates><calendars><calendar type="gregorian"><months>
 <monthContext type="format"><monthWidth type="abbreviated">{short_months}</monthWidth><monthWidth type="wide">{months}</monthWidth></monthContext>
</months></calendar></calendars>
<timeZoneNames><zone type="America/New_York"><exemplarCity>{(None, "New York City", "Նյու Յորք")[column] or ""}</exemplarCity></zone></timeZoneNames>
</dates>
<numbers><currencies><currency type="EUR"><displayName>{euro}</displayName><displayName count="one">{euro} one</displayName>
 <symbol>€</symbol></currency></currencies></numbers>
<units><unitLength type="long"><unit type="length-kilometer"><displayName>{kilometer}</displayName>
 <unitPattern count="other">{{0}} {kilometer}</unitPattern></unit></unitLength>
<unitLength type="short"><unit type="length-meter"><displayName>{("m", "Meter kurz", "մ")[column]}</displayName></unit></unitLength></units>
</ldml>
'''


def annotations_xml(column):
    names = {"😀": (("grinning face", "grinsendes Gesicht", "ծիծաղող դեմք"), ("face | grin", "Gesicht | grinsen", "դեմք | ծիծաղ")),
             "👍🏽": (("thumbs up: medium skin tone", "Daumen hoch: mittlere Hautfarbe", "բութ մատը վեր"), None),
             "🍎": (("red apple", "roter Apfel", "կարմիր խնձոր"), None)}
    lines = []
    for emoji, (tts, keywords) in names.items():
        lines.append(f'<annotation cp="{emoji}" type="tts">{tts[column]}</annotation>')
        if keywords:
            lines.append(f'<annotation cp="{emoji}">{keywords[column]}</annotation>')
    return f'<?xml version="1.0" encoding="UTF-8" ?>\n<ldml><annotations>{"".join(lines)}</annotations></ldml>\n'


def write_cldr(root):
    for column, language in enumerate(("en", "de", "hy")):
        for folder, text in (("main", main_xml(column, language)), ("annotations", annotations_xml(column))):
            (root / folder).mkdir(parents=True, exist_ok=True)
            (root / folder / f"{language}.xml").write_text(text, encoding="utf-8")
        (root / "subdivisions").mkdir(exist_ok=True)
        name = ("Bavaria", "Bayern", "Բավարիա")[column]
        (root / "subdivisions" / f"{language}.xml").write_text(
            f'<ldml><localeDisplayNames><subdivisions><subdivision type="deby">{name}</subdivision>'
            f'</subdivisions></localeDisplayNames></ldml>\n', encoding="utf-8")
    return root


def write_held_out(folder, split_records):
    folder.mkdir(parents=True, exist_ok=True)
    for split in SPLITS:
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(record) + "\n" for record in split_records.get(split, [])))
    return folder


def run(tmp_path, output, held_images="", held_text="", seed=0, test_fraction=0.05):
    cldr_pairs.main(["--cldr-root", str(tmp_path / "cldr"), "--languages", "de,hy", "--output", str(output),
                     "--held-out-images", held_images, "--held-out-text", held_text, "--seed", str(seed),
                     "--dev-fraction", "0.0", "--test-fraction", str(test_fraction)])
    return read_splits(output)


def all_pairs(splits):
    return {(record["query"], record["positives"][0], record["lang"]) for split in SPLITS for record in splits[split]}


def test_pairs_kept_and_left(tmp_path):
    write_cldr(tmp_path / "cldr")
    splits = run(tmp_path, tmp_path / "out", test_fraction=0.0)
    pairs = all_pairs(splits)
    for expected in [("Germany", "Deutschland", "de"), ("Germany", "Գերմանիա", "hy"), ("January", "Januar", "de"),
                     ("kilometers", "Kilometer", "de"), ("German", "Deutsch", "de"), ("Bavaria", "Bayern", "de"),
                     ("New York", "New York City", "de"),  # English from the zone id where en.xml has no city
                     ("Euro", "եվրո", "hy"), ("grinning face", "grinsendes Gesicht", "de"), ("face | grin", "Gesicht | grinsen", "de"),
                     ("red apple", "կարմիր խնձոր", "hy")]:
        assert expected in pairs, expected
    assert ("Japan", "Japan", "de") not in pairs and ("Japan", "Ճապոնիա", "hy") in pairs  # a translation equal to its source is left
    texts = {text for pair in pairs for text in pair[:2]}
    for left in ["Jan", "Meter kurz",  # abbreviated month, short unit
                 "Swahili short", "Unbestätigt",  # an alternative, an unconfirmed value
                 "Sprache: {0}", "{0} Kilometer", "Euro one",  # a pattern, a unit pattern, a plural form
                 "thumbs up: medium skin tone", "€"]:  # a skin-tone variant, a symbol
        assert left not in texts, left
    check_manifest(tmp_path / "out")


def test_splits_keep_concepts_whole_and_share_no_text(tmp_path):
    write_cldr(tmp_path / "cldr")
    found_split = False
    for seed in range(8):
        splits = run(tmp_path, tmp_path / f"out{seed}", seed=seed, test_fraction=0.3)
        assert not leaks(splits, pair_keys)
        where = {}
        for split in SPLITS:
            for record in splits[split]:
                where.setdefault(record["query"], set()).add(split)
        assert all(len(places) == 1 for places in where.values()), where  # German and Armenian of a concept together
        found_split = found_split or any(splits["test"])
    assert found_split  # the seeds put some concept in test, so the checks above saw more than one split
    planted = read_splits(tmp_path / "out0")
    moved = next(record for split in ("test", "train") for record in planted[split])
    other = "train" if moved in planted["test"] else "test"
    planted[other].append(dict(moved))
    assert leaks(planted, pair_keys)  # the control: a record in two splits is caught


def test_held_out_texts_stay_out_of_train(tmp_path):
    write_cldr(tmp_path / "cldr")
    emoji = write_held_out(tmp_path / "emoji", {"test": [{"query": "Roter Apfel", "positives": [{"image": "img/a.png"}]}]})
    gettext = write_held_out(tmp_path / "gettext", {"dev": [{"query": "January", "positives": ["Januar"]}]})
    splits = run(tmp_path, tmp_path / "out", held_images=str(emoji), held_text=str(gettext), test_fraction=0.0)
    texts = {text.casefold() for pair in all_pairs(splits) for text in pair[:2]}
    assert "roter apfel" not in texts and "january" not in texts
    assert "red apple" in texts or "կարմիր խնձոր" in texts  # the Armenian name of the apple stays
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["held_out_corpora_checked"]["images"] == ["emoji"]
    assert manifest["removed_as_leaks"]["train: a dev or test caption of an image corpus"] == 1
    # the control: without the held-out folders the same pairs are kept
    free = all_pairs(run(tmp_path, tmp_path / "free", test_fraction=0.0))
    assert ("January", "Januar", "de") in free and ("red apple", "roter Apfel", "de") in free


def test_output_repeats_byte_for_byte(tmp_path):
    write_cldr(tmp_path / "cldr")
    run(tmp_path, tmp_path / "a", test_fraction=0.3)
    run(tmp_path, tmp_path / "b", test_fraction=0.3)
    for name in ("train.jsonl", "dev.jsonl", "test.jsonl", "manifest.json"):
        a, b = (tmp_path / "a" / name).read_bytes(), (tmp_path / "b" / name).read_bytes()
        if name == "manifest.json":
            a, b = (json.loads(x) for x in (a, b))
            a.pop("source"), b.pop("source")
        assert a == b, name


def test_corrupt_file_is_named(tmp_path):
    write_cldr(tmp_path / "cldr")
    (tmp_path / "cldr" / "main" / "hy.xml").write_text("<ldml><localeDisplayNames>", encoding="utf-8")  # cut short
    with pytest.raises(SystemExit, match="hy.xml: not readable LDML"):
        run(tmp_path, tmp_path / "out")


def test_corrupt_held_out_file_is_named(tmp_path):
    write_cldr(tmp_path / "cldr")
    emoji = write_held_out(tmp_path / "emoji", {"dev": [{"query": "a", "positives": ["b"]}]})
    (emoji / "test.jsonl").write_text('{"query": "cut sho\n')
    with pytest.raises(SystemExit, match="emoji/test.jsonl:1: not a pair record"):
        run(tmp_path, tmp_path / "out", held_images=str(emoji))


def test_missing_language_is_named(tmp_path):
    write_cldr(tmp_path / "cldr")
    with pytest.raises(SystemExit, match="no main/ data for th"):
        cldr_pairs.main(["--cldr-root", str(tmp_path / "cldr"), "--languages", "de,th", "--output", str(tmp_path / "out")])


def test_built_cldr_corpus_covers_the_scarce_languages():
    """Leaks, manifest and packages are test_corpora.py's checks of every built corpus."""
    folder = ROOT / "data" / "cldr"
    if not (folder / "manifest.json").exists():
        pytest.skip("data/cldr is not built (scripts/data/cldr_pairs.py writes it)")
    assert set(json.loads((folder / "manifest.json").read_text())["languages"]) >= {"hy", "th", "ar", "fa", "he", "zh"}
