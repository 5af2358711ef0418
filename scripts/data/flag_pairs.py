#!/usr/bin/env python3
"""flag_pairs.py: country name -> flag image pairs. The flags are iso-flags-png-320x240 (one PNG per
ISO 3166-1 code); the names are iso-codes' ISO 3166-1 list (name, common name, official name) in
English and their translations in iso-codes' gettext catalogues. One record per (flag, language,
name); a flag and all its names stay in one split, and flags with the same picture (France and
four territories, US and UM, ...) are one group. Writes data/flags/{train,dev,test}.jsonl,
img/*.png, images.sha256 and manifest.json. Deterministic for a seed. See docs/data.md.
"""

import json
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import debian_archive  # noqa: E402
from gettext_pairs import locale_language, locale_rank, read_mo  # noqa: E402

FLAGS = "usr/share/iso-flags-png-320x240"
NAME_FIELDS = ("name", "common_name", "official_name")


def read_countries(iso_codes_root):
    """[{alpha_2, name, ...}] of iso-codes' json/iso_3166-1.json."""
    path = pathlib.Path(iso_codes_root) / "share" / "iso-codes" / "json" / "iso_3166-1.json"
    return json.loads(path.read_text(encoding="utf-8"))["3166-1"]


def read_translations(iso_codes_root, languages, domain="iso_3166-1"):
    """{language: {English name: translation}} from locale/<locale>/LC_MESSAGES/<domain>.mo, one
    locale per language as gettext_pairs ranks them (pt before pt_BR, zh_CN for zh); and {language: locale}."""
    best = {}
    for path in sorted((pathlib.Path(iso_codes_root) / "share" / "locale").glob(f"*/LC_MESSAGES/{domain}.mo")):
        locale = path.parent.parent.name
        language = locale_language(locale)
        if language and language != "en" and (languages == ["all"] or language in languages):
            if language not in best or locale_rank(language, locale) < locale_rank(language, best[language][0]):
                best[language] = (locale, path)
    translations = {language: dict(read_mo(path)) for language, (_, path) in sorted(best.items())}
    return translations, {language: locale for language, (locale, _) in sorted(best.items())}


def records_by_group(countries, translations, flags_root, output, images):
    """{alpha_2: [record]}: each country with a flag, English names first, then each language's
    translations of them (a name without a translation is left out there); and the codes without a flag."""
    from PIL import Image

    groups, without = {}, []
    for country in countries:
        code = country["alpha_2"].lower()
        path = pathlib.Path(flags_root) / f"{code}.png"
        if not path.is_file():
            without.append(country["alpha_2"])
            continue
        with Image.open(path) as flag:
            positive = debian_archive.save_png(flag.convert("RGBA"), output, code, images)
        english = list(dict.fromkeys(country[field] for field in NAME_FIELDS if country.get(field)))
        names = [("en", name) for name in english]
        for language, catalogue in translations.items():
            names.extend((language, catalogue[name]) for name in english if catalogue.get(name))
        groups[country["alpha_2"]] = [{"query": name, "positives": [positive], "lang": language, "country": country["alpha_2"]}
                                      for language, name in names]
    return groups, without


def main(argv=None):
    parser = debian_archive.corpus_parser(__doc__.split("\n\n")[0], "flags",
                                          "comma-separated language codes, or 'all' for every catalogue")
    parser.add_argument("--flags-root", help="a folder of <alpha-2>.png flags to read instead of iso-flags-png-320x240's")
    parser.add_argument("--iso-codes-root",
                        help="a folder with share/iso-codes/json and share/locale to read instead of iso-codes'")
    arguments = parser.parse_args(argv)
    started = time.monotonic()
    local = {"iso-flags-png-320x240": arguments.flags_root, "iso-codes": arguments.iso_codes_root}
    fetched = debian_archive.fetch_unless_local("flag_pairs", local, arguments.scratch, arguments.refresh)
    flags_root = pathlib.Path(arguments.flags_root or fetched["iso-flags-png-320x240"]["root"] / FLAGS)
    iso_codes_root = arguments.iso_codes_root or fetched["iso-codes"]["root"] / "usr"
    try:
        countries = read_countries(iso_codes_root)
        translations, locales = read_translations(iso_codes_root, arguments.languages.split(","))
        images = {}
        debian_archive.fresh_image_folder(arguments.output)
        groups, without = records_by_group(countries, translations, flags_root, arguments.output, images)
    except (OSError, ValueError, KeyError) as error:
        sys.exit(f"flag_pairs: {error}")
    codes = {country["alpha_2"].lower() for country in countries}
    other_flags = sorted(path.stem for path in flags_root.glob("*.png") if path.stem not in codes)
    debian_archive.build_image_corpus(
        "flag_pairs", "flags", arguments, groups, images,
        {"countries": len(countries), "countries_without_a_flag": without,
         "flags_without_an_iso_3166_1_code": other_flags, "locale_per_language": locales,
         "countries_named_per_language": {language: sum(1 for group in groups.values() if any(
             record["lang"] == language for record in group)) for language in ["en", *translations]},
         "groups": len(groups), "group": "the flag (ISO 3166-1 alpha-2 code)",
         "image": "the 320x240 flag as RGBA PNG"},
        debian_archive.image_source(fetched, local), started)


if __name__ == "__main__":
    main()
