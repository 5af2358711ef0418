#!/usr/bin/env python3
"""espeak_pairs.py: text -> synthesized speech pairs in English and the 20 UForm languages, labelled
synthetic. The texts are iso-codes' names of countries (ISO 3166-1) and currencies (ISO 4217), in
English and their translations in its gettext catalogues; each is spoken by espeak-ng (run from its
unpacked Debian packages, or --espeak-ng) in the voice of its language and written as 16 kHz mono
Ogg Opus (--codec flac for FLAC). One record per (name, language); a country or currency with all its names is one group, so
dev and test hold names never heard in train in any language. --limit caps the clips (a seeded
choice of whole groups). Writes data/espeak/{train,dev,test}.jsonl, clips/*.opus, clips.sha256 and
manifest.json. Deterministic for a seed. See docs/data.md.
"""

import json
import os
import pathlib
import random
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import av_corpus  # noqa: E402
import debian_archive  # noqa: E402
from flag_pairs import read_translations  # noqa: E402

PACKAGES = ("espeak-ng", "libespeak-ng1", "espeak-ng-data", "libpcaudio0", "libsonic0")
LIBRARY_FOLDER = "usr/lib/x86_64-linux-gnu"
# espeak-ng's voice for each UForm language where its name differs from the language code.
VOICES = {"zh": "cmn", "en": "en-us"}
# iso-codes domains read: the JSON file's key and the name fields spoken.
DOMAINS = {"iso_3166-1": ("3166-1", "alpha_2", ("name", "common_name")), "iso_4217": ("4217", "alpha_3", ("name",))}


def read_names(iso_codes_root, languages):
    """{group: [(language, name)]}: each country's and currency's English names and their
    translations (a name without one is left out in that language), names in one language once;
    and {language: locale} of the catalogues read."""
    groups, locales = {}, {}
    for domain, (key, code_field, fields) in DOMAINS.items():
        entries = json.loads((pathlib.Path(iso_codes_root) / "share" / "iso-codes" / "json" / f"{domain}.json")
                             .read_text(encoding="utf-8"))[key]
        translations, found = read_translations(iso_codes_root, [language for language in languages if language != "en"],
                                                 domain)
        locales.update({f"{domain}:{language}": locale for language, locale in found.items()})
        for entry in entries:
            english = list(dict.fromkeys(entry[field] for field in fields if entry.get(field)))
            names = [("en", name) for name in english] if "en" in languages else []
            for language, catalogue in translations.items():
                names.extend((language, catalogue[name]) for name in english if catalogue.get(name))
            names = list(dict.fromkeys((language, name.strip()) for language, name in names if name.strip()))
            if names:
                groups[f"{domain}:{entry[code_field]}"] = names
    return groups, locales


def choose(groups, limit, seed):
    """A seeded choice of whole groups holding at most `limit` names (0: all), in sorted order."""
    if not limit:
        return dict(sorted(groups.items()))
    order = sorted(groups)
    random.Random(seed).shuffle(order)
    chosen, total = [], 0
    for group in order:
        if total + len(groups[group]) <= limit:
            chosen.append(group)
            total += len(groups[group])
    return {group: groups[group] for group in sorted(chosen)}


def espeak_runner(espeak, data_path, library_path):
    """synthesize(language, text) -> WAV bytes by espeak-ng at its default rate and pitch."""
    environment = {**os.environ, **({"LD_LIBRARY_PATH": library_path} if library_path else {})}
    environment.pop("LD_PRELOAD", None)  # a sanitizer run's preload is for our library; espeak-ng hangs under it
    command = [str(espeak), *([f"--path={data_path}"] if data_path else []), "--stdout", "-b", "1"]

    def synthesize(language, text):
        try:
            run = subprocess.run([*command, "-v", VOICES.get(language, language), "--", text], capture_output=True,
                                 env=environment, timeout=120)
        except subprocess.TimeoutExpired:
            raise av_corpus.MediaError(f"espeak-ng -v {VOICES.get(language, language)} did not finish in 120 s") from None
        if run.returncode != 0 or len(run.stdout) <= 44:
            message = run.stderr.decode(errors="replace").strip()
            raise av_corpus.MediaError(f"espeak-ng -v {VOICES.get(language, language)} gave no speech ({message or 'empty'})")
        return run.stdout
    return synthesize


def main(argv=None):
    parser = debian_archive.corpus_parser(__doc__.split("\n\n")[0], "espeak", "comma-separated language codes")
    parser.add_argument("--limit", type=int, default=2500, help="at most this many clips, whole groups (0: all)")
    parser.add_argument("--espeak-ng", help="an espeak-ng program to run instead of the unpacked package's")
    parser.add_argument("--codec", choices=sorted(av_corpus.CODECS), default="opus",
                        help="clip format: Ogg Opus at 24 kb/s (default, small) or lossless FLAC")
    parser.add_argument("--iso-codes-root",
                        help="a folder with share/iso-codes/json and share/locale to read instead of iso-codes'")
    arguments = parser.parse_args(argv)
    started = time.monotonic()
    av_corpus.require_tools()
    local = {"iso-codes": arguments.iso_codes_root,
             **{package: arguments.espeak_ng for package in PACKAGES}}
    fetched = debian_archive.fetch_unless_local("espeak_pairs", local, arguments.scratch, arguments.refresh)
    iso_codes_root = pathlib.Path(arguments.iso_codes_root or fetched["iso-codes"]["root"] / "usr")
    if arguments.espeak_ng:
        synthesize = espeak_runner(arguments.espeak_ng, None, None)
        version = subprocess.run([arguments.espeak_ng, "--version"], capture_output=True, text=True).stdout.strip()
    else:
        roots = {package: fetched[package]["root"] for package in PACKAGES}
        libraries = ":".join(str(roots[package] / LIBRARY_FOLDER) for package in ("libespeak-ng1", "libpcaudio0", "libsonic0"))
        synthesize = espeak_runner(roots["espeak-ng"] / "usr" / "bin" / "espeak-ng", roots["espeak-ng-data"] / LIBRARY_FOLDER,
                                   libraries)
        version = fetched["espeak-ng"]["version"]
    languages = arguments.languages.split(",")
    try:
        names, locales = read_names(iso_codes_root, languages)
        chosen = choose(names, arguments.limit, arguments.seed)
        clips, jobs = {}, []
        av_corpus.fresh_clip_folder(arguments.output)
        for group, spoken in chosen.items():
            for number, (language, text) in enumerate(spoken):
                jobs.append((group, language, text, debian_archive.safe_name(f"{group.replace(':', '_')}_{language}_{number}")))
    except (OSError, ValueError, KeyError) as error:
        sys.exit(f"espeak_pairs: {error}")
    with tempfile.TemporaryDirectory(prefix="espeak_pairs.") as scratch:
        def speak(group, language, text, stem):
            try:
                (pathlib.Path(scratch) / f"{stem}.wav").write_bytes(synthesize(language, text))
                return None
            except av_corpus.MediaError as error:
                return str(error)

        spoken = av_corpus.parallel(speak, jobs)
        ready = [job for job, error in zip(jobs, spoken) if error is None]
        written = av_corpus.to_audio_many([(pathlib.Path(scratch) / f"{stem}.wav", stem) for *_, stem in ready],
                                         arguments.output, clips, "espeak_pairs", codec=arguments.codec)
    groups, seconds, failed = av_corpus.records_of(
        [(group, {"query": text, "lang": language, "source": group, "voice": VOICES.get(language, language)})
         for group, language, text, _ in ready], written)
    failed.update(error for error in spoken if error)
    if not groups:
        sys.exit(f"espeak_pairs: no clip was synthesized ({dict(failed)})")
    av_corpus.build_clip_corpus(
        "espeak_pairs", "espeak", arguments, dict(groups), clips, seconds,
        {"synthetic": True, "synthesizer": f"espeak-ng {version}, default rate and pitch",
         "voices": {language: VOICES.get(language, language) for language in languages},
         "names_found": sum(len(spoken) for spoken in names.values()), "groups_found": len(names),
         "limit": arguments.limit, "failed": dict(sorted(failed.items())), "locale_per_language": locales,
         "groups": len(groups), "group": "the country (ISO 3166-1) or currency (ISO 4217) with all its names",
         "audio": av_corpus.AUDIO_FORMATS[arguments.codec]},
        debian_archive.image_source(fetched, {"espeak-ng": arguments.espeak_ng, "iso-codes": arguments.iso_codes_root}),
        started, side="audio")


if __name__ == "__main__":
    main()
