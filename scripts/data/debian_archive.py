#!/usr/bin/env python3
"""debian_archive.py: what the corpus scripts beside it share. Packages come from Debian's archive
without being installed: `apt-get download` into a scratch folder, checked against the archive's
sha256, then `dpkg -x` into scratch/root/<package>. apt runs on a private state folder (its own
package lists, with the description translations), so nothing of the machine's apt state is read
or changed and two scripts never fight over apt's lock. Also: group splits that do not leak, JSONL
shards, and the manifest (package, version, licence, sha256, counts); for image <-> caption corpora,
PNG files, image-aware leak keys and groups joined by shared images (these need Pillow). Otherwise
standard library only.
"""

import argparse
import collections
import hashlib
import json
import os
import pathlib
import random
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from gettext_pairs import DEFAULT_LANGUAGES, assign_splits, write_jsonl  # noqa: E402,F401  (one split rule for every corpus)

SPLITS = ("train", "dev", "test")
REPOSITORY = pathlib.Path(__file__).resolve().parents[2]
DEFAULT_SCRATCH = REPOSITORY / "data" / ".debian"
# Description translations the private package lists fetch (Debian's names: zh_CN, pt_BR).
TRANSLATION_LANGUAGES = "en ar de es fa fr he hi hy id it ja ko pl pt pt_BR ru th tr uk vi zh_CN".split()
# Packages whose copyright file is not machine-readable (no DEP-5 "License:" field).
KNOWN_LICENCES = {"libpython3.11-stdlib": "PSF-2.0", "libpython3.11-minimal": "PSF-2.0",
                  "fortunes": "public-domain and various (see its copyright file)",
                  "fortunes-it": "public-domain (its copyright file)", "fortunes-br": "GPL-2+",
                  "unicode-data": "Unicode-DFS (Unicode data files licence; its copyright file)",
                  "openclipart-svg": "public-domain (Creative Commons Public Domain Dedication; its copyright file)",
                  "dict-gcide": "GPL-2+ (its copyright file)", "dict-foldoc": "GFDL-1.1+ (its copyright file)",
                  # man page packages (manpage_pairs.py) whose copyright file states its licence in prose
                  "manpages-dev": "GPL-2+ and others per page (the manpages source's copyright file)",
                  "strace": "LGPL-2.1+ (its copyright file)", "wget": "GPL-3+ (its copyright file)",
                  "zip": "Info-ZIP", "unzip": "Info-ZIP", "texinfo": "GPL-3+ (its copyright file)",
                  "python3.11": "PSF-2.0", "x11-utils": "MIT/X11", "libx11-doc": "MIT/X11", "xterm": "MIT/X11",
                  "usbutils": "GPL-2+ (its copyright file)", "whois": "GPL-2+ (its copyright file)",
                  "tcpdump": "BSD-3-clause (its copyright file)", "tcl8.6-doc": "TCL (its copyright file)",
                  "pax": "BSD (MirOS; its copyright file)", "initramfs-tools": "GPL-2 (its copyright file)",
                  "libc-bin": "LGPL-2.1+ (its copyright file)", "libc-devtools": "LGPL-2.1+ (its copyright file)",
                  # espeak_pairs.py's synthesizer, run from its unpacked packages
                  **{package: "GPL-3+ (its copyright file)" for package in ("espeak-ng", "libespeak-ng1", "espeak-ng-data")},
                  "libsonic0": "Apache-2.0 (its copyright file)",
                  **{package: "GPL (its copyright file)" for package in
                     ("groff-base", "patch", "m4", "ltrace", "sharutils", "procmail", "quota")},
                  # GNOME programs whose help gnome_help_pairs.py reads (the help's own licence is on its pages)
                  "evince-common": "GPL-2+, GFDL-1.1 (its copyright file)", "brasero-common": "GPL-2+, GFDL (its copyright file)",
                  "totem-common": "GPL-2+ with exception, LGPL (its copyright file)",
                  "evolution-common": "LGPL-2, GPL-2+ (its copyright file)",
                  **{package: "GPL-2+ (its copyright file)" for package in ("eog", "gedit-common", "seahorse", "rhythmbox-data")},
                  **{package: "GPL-3+ (its copyright file)" for package in ("nautilus-data", "vinagre")},
                  # manual_pairs.py's manuals
                  "installation-guide-amd64": "GPL-2 (its copyright file)",
                  **{package: "verbatim and modified copies permitted with the notice (SPI; its copyright file)"
                     for package in ["debian-faq"] + [f"debian-faq-{code}" for code in "de fr it ja ko pt ru zh-cn".split()]},
                  # manpage_translations.py's translations
                  "manpages-ja": "the original pages' licences (its copyright file)",
                  "manpages-tr": "the original pages' licences, else GPL (its copyright file)"}
# Packages whose first DEP-5 License is not that of the files the scripts read.
READ_FILES_LICENCES = {"fonts-noto-color-emoji": "SIL-1.1 (OFL, its fonts/*, the font read; the rest Apache-2.0)"}


class FetchError(RuntimeError):
    """A package could not be found, downloaded, verified or unpacked."""


def add_common_arguments(parser, text_limit_help=None, fractions=True):
    """The options every archive corpus script takes: seed, split fractions (unless the source
    brings its own split), --refresh, and --text-limit where the script also writes masked-modelling text."""
    parser.add_argument("--seed", type=int, default=0)
    if fractions:
        parser.add_argument("--dev-fraction", type=float, default=0.05)
        parser.add_argument("--test-fraction", type=float, default=0.05)
    if text_limit_help:
        parser.add_argument("--text-limit", type=int, default=50000, help=text_limit_help)
    parser.add_argument("--refresh", action="store_true", help="fetch fresh package lists first")


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def apt_options(scratch):
    """apt-get options that point apt at the private state under `scratch`."""
    state = pathlib.Path(scratch).resolve() / "apt"  # apt reads a relative folder as under /var/lib/apt
    return ["-o", f"Dir::State::Lists={state / 'lists'}", "-o", f"Dir::Cache={state / 'cache'}",
            "-o", f"Dir::State::status={state / 'status'}",
            "-o", "Acquire::Languages=" + ",".join(TRANSLATION_LANGUAGES), "-o", "APT::Get::List-Cleanup=0"]


def private_lists(scratch, refresh=False):
    """The private package lists (Packages and Translation-* files), fetched by one `apt-get update`
    the first time or when `refresh`; returns their folder."""
    state = pathlib.Path(scratch).resolve() / "apt"
    lists = state / "lists"
    if refresh or not any(lists.glob("*_Packages*")):
        for folder in (lists / "partial", state / "cache" / "archives" / "partial"):
            folder.mkdir(parents=True, exist_ok=True)
        (state / "status").touch()  # an empty dpkg status: apt then knows nothing is installed
        run = subprocess.run(["apt-get", "update", "-q", *apt_options(scratch)], capture_output=True, text=True)
        if run.returncode != 0 or not any(lists.glob("*_Packages*")):
            raise FetchError(f"apt-get update into {lists} failed (exit {run.returncode}): {run.stderr.strip()[-600:]}")
    return lists


# apt's index target for the Contents-* files (every file of every package), as apt-file configures it.
CONTENTS_OPTIONS = ["-o", "Acquire::IndexTargets::deb::Contents-deb::MetaKey=$(COMPONENT)/Contents-$(ARCHITECTURE)",
                    "-o", "Acquire::IndexTargets::deb::Contents-deb::ShortDescription=Contents-$(ARCHITECTURE)",
                    "-o", "Acquire::IndexTargets::deb::Contents-deb::Description=$(RELEASE)/$(COMPONENT) $(ARCHITECTURE) Contents",
                    "-o", "Acquire::IndexTargets::deb::Contents-deb::KeepCompressed=true",
                    "-o", "Acquire::IndexTargets::deb::Contents-deb::PDiffs=false"]


def contents_lists(scratch, refresh=False):
    """The private Contents-* indexes beside the package lists, fetched by one `apt-get update` with
    CONTENTS_OPTIONS the first time or when `refresh`; returns their paths."""
    lists = private_lists(scratch, refresh)
    if refresh or not any(lists.glob("*_Contents-*")):
        run = subprocess.run(["apt-get", "update", "-q", *apt_options(scratch), *CONTENTS_OPTIONS], capture_output=True, text=True)
        if run.returncode != 0 or not any(lists.glob("*_Contents-*")):
            raise FetchError(f"apt-get update of the Contents indexes into {lists} failed (exit {run.returncode}): "
                             f"{run.stderr.strip()[-600:]}")
    return sorted(lists.glob("*_Contents-*"))


def files_per_package(contents_text, pattern):
    """{package: [path]} of the paths of a Contents index's text that match `pattern` (a compiled regex);
    a line is "PATH  section/package,section/package"."""
    found = {}
    for line in contents_text.splitlines():
        path, _, owners = line.rstrip().rpartition(" ")
        path = path.strip()
        if not path or not pattern.match(path):
            continue
        for owner in owners.split(","):
            found.setdefault(owner.rpartition("/")[2], []).append(path)
    return found


def download_sizes(scratch):
    """{package: bytes of its .deb} from the private package lists (the largest where several list it)."""
    sizes = {}
    for path in sorted(private_lists(scratch).glob("*_Packages*")):
        for fields in stanzas(read_list(path)):
            if "Package" in fields and fields.get("Size", "").isdigit():
                sizes[fields["Package"]] = max(sizes.get(fields["Package"], 0), int(fields["Size"]))
    return sizes


def read_list(path):
    """The text of an apt list file, decompressed by apt's own helper (lz4, xz, gz) when needed."""
    path = pathlib.Path(path)
    if path.suffix in (".lz4", ".xz", ".gz", ".zst", ".bz2"):
        run = subprocess.run(["/usr/lib/apt/apt-helper", "cat-file", str(path)], capture_output=True)
        if run.returncode != 0:
            raise FetchError(f"{path}: apt-helper cannot read it: {run.stderr.decode(errors='replace').strip()}")
        data = run.stdout
    else:
        data = path.read_bytes()
    return data.decode("utf-8", errors="replace")


def stanzas(text):
    """Deb822 paragraphs as dicts; continuation lines keep their leading space."""
    for block in text.split("\n\n"):
        fields, key = {}, None
        for line in block.split("\n"):
            if not line:
                continue
            if line[0] in " \t" and key:
                fields[key] += "\n" + line
            else:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if fields:
            yield fields


def candidates(packages, scratch):
    """{package: {"version", "sha256", "filename"}} of the packages apt would download now, asked of apt-cache
    in batches of 500."""
    found = {}
    for first in range(0, len(packages), 500):
        batch = packages[first:first + 500]
        run = subprocess.run(["apt-cache", *apt_options(scratch), "show", "--no-all-versions", *batch],
                             capture_output=True, text=True)
        for fields in stanzas(run.stdout):
            if fields.get("Package") in batch and "Version" in fields:
                found.setdefault(fields["Package"], {"version": fields["Version"], "sha256": fields.get("SHA256"),
                                                     "filename": fields.get("Filename", "")})
        missing = [package for package in batch if package not in found]
        if missing:
            raise FetchError(f"{missing[0]}: not in the package lists ({run.stderr.strip()[-300:] or 'no candidate'})")
    return found


def candidate(package, scratch):
    """{"version", "sha256", "filename"} of the package apt would download now."""
    return candidates([package], scratch)[package]


COMMON_LICENCE = re.compile(r"/usr/share/common-licenses/([A-Za-z0-9.+_-]+)")


def licence_of(package, root):
    """The licence of the files read (READ_FILES_LICENCES), else the first DEP-5 License of the
    package's copyright file, else a known one, else None."""
    if package in READ_FILES_LICENCES:
        return READ_FILES_LICENCES[package]
    copyright_file = pathlib.Path(root) / "usr" / "share" / "doc" / package / "copyright"
    try:
        lines = copyright_file.read_text(errors="replace").splitlines()
    except OSError:
        lines = []
    if lines and lines[0].startswith("Format:"):  # a machine-readable (DEP-5) copyright file
        for line in lines:
            if line.startswith("License:") and line[8:].strip():
                return line[8:].strip()
    for line in lines:  # else the common licence the file points to ("see /usr/share/common-licenses/GPL-2")
        named = COMMON_LICENCE.search(line)
        if named and named.group(1).rstrip("."):
            return named.group(1).rstrip(".")
    return KNOWN_LICENCES.get(package)


def fetch(packages, scratch, refresh=False):
    """{package: {"package", "version", "licence", "sha256", "deb", "root"}}: each package downloaded
    (unless the right .deb is already in scratch/debs), its sha256 checked against the archive's, and
    unpacked into scratch/root/<package> (again only when that .deb changed)."""
    scratch = pathlib.Path(scratch)
    private_lists(scratch, refresh)
    debs = scratch / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    wanted = candidates(list(packages), scratch)

    def downloaded(package):  # apt-get names the file itself (epochs as %3a): find it by checksum
        return next((path for path in sorted(debs.glob(f"{package}_*.deb"))
                     if sha256_of(path) == wanted[package]["sha256"]), None)

    missing = [package for package in wanted if downloaded(package) is None]
    if missing:
        run = subprocess.run(["apt-get", "download", "-q", *apt_options(scratch), *missing], cwd=debs,
                             capture_output=True, text=True)
        if run.returncode != 0:
            raise FetchError(f"apt-get download {' '.join(missing)} failed: {run.stderr.strip()[-600:]}")
    result = {}
    for package, want in wanted.items():
        deb = downloaded(package)
        if deb is None:
            raise FetchError(f"{package}: downloaded, but no .deb in {debs} has the archive's sha256 {want['sha256']}")
        digest = want["sha256"]
        root = scratch / "root" / package
        marker = root / ".unpacked-sha256"
        if not marker.is_file() or marker.read_text().strip() != digest:
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir(parents=True)
            run = subprocess.run(["dpkg", "-x", str(deb), str(root)], capture_output=True, text=True)
            if run.returncode != 0:
                raise FetchError(f"dpkg -x {deb} failed: {run.stderr.strip()}")
            marker.write_text(digest + "\n")
        result[package] = {"package": package, "version": want["version"], "licence": licence_of(package, root),
                           "sha256": digest, "deb": deb.name, "root": root}
    return result


def package_record(details, **extra):
    """A package's manifest entry (no local paths, so two machines' manifests compare)."""
    return {"package": details["package"], "version": details["version"], "licence": details["licence"],
            "sha256": details["sha256"], "deb": details["deb"], **extra}


def split_groups(items_per_group, seed, dev_fraction, test_fraction, stable=False):
    """{group: split} by gettext_pairs.assign_splits: whole groups, in a seeded order, fill dev then test;
    with stable, by stable_splits."""
    sizes = collections.Counter({group: len(items) for group, items in items_per_group.items()})
    pick = stable_splits if stable else assign_splits
    return pick(set(items_per_group), sizes, seed, dev_fraction, test_fraction)


def stable_splits(groups, sizes, seed, dev_fraction, test_fraction):
    """{group: split} from each group's own seeded hash, so a group keeps its split while others come and
    go (a corpus drawn from the whole archive, which moves between builds). assign_splits' seeded order
    over every group reshuffles dev and test when one group comes or goes. A group of more than a hundredth of the
    items goes to train, so one huge group cannot swallow a split."""
    total = sum(sizes[group] for group in groups)
    result = {}
    for group in groups:
        digest = hashlib.sha256(f"{seed}\0{group}".encode("utf-8")).digest()
        draw = int.from_bytes(digest[:8], "big") / 2.0 ** 64
        split = "dev" if draw < dev_fraction else "test" if draw < dev_fraction + test_fraction else "train"
        result[group] = "train" if sizes[group] > total / 100 else split
    return result


def pair_keys(record):
    """The texts of a pair record that must not recur across splits: its query and its positives, case-folded."""
    return [record["query"].casefold(), *(positive.casefold() for positive in record["positives"])]


def text_keys(record):
    return [record["text"].casefold()]


def remove_leaks(records, keys=pair_keys):
    """Drops from dev and test every record sharing a key with train, then from test every record
    sharing one with dev, in place; returns {split: removed}."""
    removed = {}
    seen = {key for record in records["train"] for key in keys(record)}
    for split in ("dev", "test"):
        kept = [record for record in records[split] if not any(key in seen for key in keys(record))]
        removed[split] = len(records[split]) - len(kept)
        records[split] = kept
        seen |= {key for record in kept for key in keys(record)}
    return removed


def held_out_records(folders):
    """Each pair record of the dev and test splits of the corpus folders where they exist; a line that
    is not a pair record ends the script with its file and line."""
    for folder in folders:
        for split in ("dev", "test"):
            path = pathlib.Path(folder) / f"{split}.jsonl"
            if not path.is_file():
                continue
            with path.open(encoding="utf-8") as file:
                for number, line in enumerate(file, 1):
                    if not line.strip():
                        continue
                    try:
                        record = json.loads(line)
                        _ = (record["query"], *record["positives"])  # a pair record: a query and its positives
                    except (json.JSONDecodeError, KeyError, TypeError) as error:
                        sys.exit(f"{path}:{number}: not a pair record: {error}")
                    yield record


def held_out_sides(folders):
    """[query, *positives] of each pair record of held_out_records (a side is a text or a media object)."""
    for record in held_out_records(folders):
        yield [record["query"], *record["positives"]]


def append_page_pairs(groups, page, pairs, language):
    """Appends one page's (English, translation) pairs in `language` to groups[page] as pair records, a
    repeated English string of the page once (a page without pairs adds no group); returns whether it gave any."""
    seen = set()
    for source, text in pairs:
        if source.casefold() not in seen:
            seen.add(source.casefold())
            groups.setdefault(page, []).append({"query": source, "positives": [text], "lang": language, "page": page})
    return bool(pairs)


def held_out_queries(folders):
    """Case-folded queries of the dev and test splits of pair corpora: what another corpus's train must not hold."""
    return {sides[0].casefold() for sides in held_out_sides(folders) if isinstance(sides[0], str)}


def add_held_out_text(parser):
    """--held-out-text: the corpora whose dev and test English strings a translation corpus keeps out of its train."""
    data = pathlib.Path(default_output(""))
    parser.add_argument("--held-out-text", default=f"{data / 'gettext'},{data / 'libreoffice'}",
                        help="corpus folders whose dev and test English strings must not be in train (comma-separated)")


def drop_held_out_captions(records, folders, removed):
    """In place: train's records whose query or a positive is (case-folded) a text side of the dev or test
    splits of these image corpora, counted in `removed`; returns how many such texts there are."""
    captions = {side.casefold() for sides in held_out_sides(folders) for side in sides if isinstance(side, str)}
    kept = []
    for record in records["train"]:
        if record["query"].casefold() in captions or any(isinstance(positive, str) and positive.casefold() in captions
                                                         for positive in record["positives"]):
            removed["train: a dev or test caption of an image corpus"] += 1
        else:
            kept.append(record)
    records["train"] = kept
    return len(captions)


def drop_held_out_english(records, held_out_text, removed):
    """In place: train's records whose query is an English string of --held-out-text's corpora's dev or
    test, counted in `removed`; returns the names of the corpora checked."""
    folders = [folder for folder in held_out_text.split(",") if folder]
    held = held_out_queries(folders)
    before = len(records["train"])
    records["train"] = [record for record in records["train"] if record["query"].casefold() not in held]
    removed["train: an English string of a text corpus's dev or test"] = before - len(records["train"])
    return [pathlib.Path(folder).name for folder in folders if pathlib.Path(folder).is_dir()]


def one_per_language_without_leaks(records, removed):
    """In place on {split: [record]} of translation pairs ("lang" set): the first record of each
    (English, language) within a split, then remove_leaks; the drops counted by reason in `removed`."""
    for split in SPLITS:
        unique, seen = [], set()
        for record in records[split]:
            key = (record["query"].casefold(), record["lang"])
            if key in seen:
                removed[f"{split}: an English string repeated in a language"] += 1
            else:
                seen.add(key)
                unique.append(record)
        records[split] = unique
    for split, count in remove_leaks(records).items():
        removed[f"{split}: a text of an earlier split"] += count


def dedupe(records, keys=pair_keys):
    """Keeps the first record of each distinct query (and text), so a split holds each query once."""
    seen, kept = set(), []
    for record in records:
        key = keys(record)[0]
        if key not in seen:
            seen.add(key)
            kept.append(record)
    return kept


def dedupe_every_key(records, keys=pair_keys):
    """Keeps a record only if none of its keys (query and positives) came before, kept or not."""
    seen, kept = set(), []
    for record in records:
        record_keys = keys(record)
        if not any(key in seen for key in record_keys):
            kept.append(record)
        seen.update(record_keys)
    return kept


def deduped_splits(records, dedupe_split):
    """Applies dedupe_split to each split of {split: [record]} in place; {split: records dropped}."""
    duplicates = {}
    for split in SPLITS:
        before = len(records[split])
        records[split] = dedupe_split(records[split])
        duplicates[split] = before - len(records[split])
    return duplicates


def split_records(groups, split_of):
    """{split: [record]} from {group: [record]} and {group: split}, groups in sorted order."""
    records = {split: [] for split in SPLITS}
    for group in sorted(groups):
        records[split_of[group]].extend(groups[group])
    return records


def split_and_dedupe(groups, seed, dev_fraction, test_fraction, keys=pair_keys):
    """Splits {group: [record]} by whole groups (split_groups) and dedupes each split by its first key
    (dedupe): {split: [record]}, {split: records dropped} and {group: split}."""
    split_of = split_groups(groups, seed, dev_fraction, test_fraction)
    records = split_records(groups, split_of)
    return records, deduped_splits(records, lambda records_of_split: dedupe(records_of_split, keys)), split_of


def write_corpus(output, name, script, records, seed, manifest_extra, texts=None, text_limit=None):
    """Writes output/{train,dev,test}.jsonl (records shuffled by the seed), optional text.jsonl (a
    seeded sample of train texts for masked modelling) and manifest.json; returns the manifest."""
    output = pathlib.Path(output)
    output.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    files, counts = {}, {}
    for split in SPLITS:
        ordered = sorted(records[split], key=lambda record: json.dumps(record, sort_keys=True, ensure_ascii=False))
        rng.shuffle(ordered)
        files[f"{split}.jsonl"] = {"sha256": write_jsonl(output / f"{split}.jsonl", ordered), "records": len(ordered)}
        per_language = collections.Counter(record.get("lang", "") for record in ordered)
        counts[split] = {"total": len(ordered), **{language: count for language, count in sorted(per_language.items()) if language}}
    if texts is not None:
        texts = sorted(set(texts))
        rng.shuffle(texts)
        texts = texts[:text_limit] if text_limit else texts
        files["text.jsonl"] = {"sha256": write_jsonl(output / "text.jsonl", [{"text": text} for text in texts]),
                               "records": len(texts)}
    manifest = {"corpus": name, "script": script, "seed": seed, "records": counts, **manifest_extra, "files": files}
    (output / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return manifest


def cut(text, limit, separator="\n"):
    """`text` cut to at most `limit` UTF-8 bytes at the last `separator` that fits (a whole line or
    paragraph), or at a character boundary when none does."""
    data = text.encode()
    if len(data) <= limit:
        return text
    head = data[:limit].decode("utf-8", errors="ignore")
    at = head.rfind(separator)
    return (head[:at] if at > 0 else head).rstrip()


def default_output(corpus):
    return str(REPOSITORY / "data" / corpus)


def relative(path, root):
    return os.path.relpath(path, root)


# ---- image <-> caption corpora ------------------------------------------------------------------
# Records are pairs whose positives are images: {"query": "...", "positives": [{"image": "img/x.png"}]},
# the path relative to the shard's folder. `images` maps each such path to its file's sha256.

IMAGE_FOLDER = "img"
UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(text):
    """An ASCII file name stem from `text`: runs of other characters become one "_"."""
    return UNSAFE_NAME.sub("_", text).strip("._") or "image"


def fresh_image_folder(output):
    """output/img emptied (the script owns it), so no image of an earlier build lingers."""
    folder = pathlib.Path(output) / IMAGE_FOLDER
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def save_png(image, output, stem, images):
    """Writes a Pillow image as output/img/<stem>.png (the same pixels give the same bytes), records its
    sha256 in `images` and returns the record's image object {"image": "img/<stem>.png"}."""
    relative_path = f"{IMAGE_FOLDER}/{stem}.png"
    if relative_path in images:
        raise ValueError(f"two images would be {relative_path}")
    path = pathlib.Path(output) / relative_path
    image.save(path, format="PNG", compress_level=6)
    images[relative_path] = sha256_of(path)
    return {"image": relative_path}


def media_keys(media, with_query=True, side="image"):
    """keys(record) for a media corpus whose positives are {side: PATH}: the case-folded query (unless
    not `with_query`, for a corpus whose few captions recur by design) and "sha256:<digest>" of each
    positive's file, `media` mapping each path to its sha256."""
    def keys(record):
        found = ["sha256:" + media[positive[side]] for positive in record["positives"]]
        return [record["query"].casefold(), *found] if with_query else found
    return keys


def image_keys(images, with_query=True):
    return media_keys(images, with_query, "image")


def join_groups_sharing(groups, keys):
    """{group: [record]} with every set of groups whose records share a key (keys(record) lists them)
    joined under the first group's name, so they land in one split; and how many groups were joined."""
    parent = {group: group for group in groups}

    def root(group):
        while parent[group] != group:
            parent[group] = parent[parent[group]]
            group = parent[group]
        return group

    owner = {}
    for group in sorted(groups):
        for record in groups[group]:
            for key in keys(record):
                first = root(owner.setdefault(key, group))
                mine = root(group)
                if first != mine:
                    parent[max(first, mine)] = min(first, mine)
    joined = collections.defaultdict(list)
    for group in sorted(groups):
        joined[root(group)].extend(groups[group])
    return dict(joined), len(groups) - len(joined)


def join_groups_sharing_images(groups, images, side="image"):
    """join_groups_sharing by the sha256 of each positive's file, so one picture (or clip) never
    lands in two splits."""
    return join_groups_sharing(groups, media_keys(images, with_query=False, side=side))


def split_image_corpus(groups, images, seed, dev_fraction, test_fraction):
    """The docs/data.md split for image pairs: groups sharing an image joined, whole groups to dev
    and test, one record per query within a split, then no query and no image shared across splits.
    Returns ({split: [record]}, the manifest's counts)."""
    joined, joined_count = join_groups_sharing_images(groups, images)
    keys = image_keys(images)
    records, duplicates, split_of = split_and_dedupe(joined, seed, dev_fraction, test_fraction, keys)
    leaks = remove_leaks(records, keys)
    return records, {"groups_per_split": {split: sum(1 for value in split_of.values() if value == split) for split in SPLITS},
                     "groups_joined_by_a_shared_image": joined_count,
                     "removed_as_duplicate_queries_within_a_split": duplicates,
                     "removed_from_dev_and_test_as_leaks": leaks}


def write_media_corpus(output, name, script, records, media, seed, manifest_extra, side="image",
                       listing="images.sha256", summary="images", summary_extra=None):
    """write_corpus for pairs whose positives are {side: PATH}: deletes the files no kept record
    names, lists the rest with their sha256 in `listing` (`sha256sum -c` reads it) and counts them
    per split under manifest[summary] (with summary_extra({path}) merged in)."""
    output = pathlib.Path(output)
    used = {split: sorted({positive[side] for record in records[split] for positive in record["positives"]})
            for split in SPLITS}
    kept = {path for paths in used.values() for path in paths}
    for path in sorted(media):
        if path not in kept:
            (output / path).unlink()
    text = "".join(f"{media[path]}  {path}\n" for path in sorted(kept))
    (output / listing).write_text(text, encoding="ascii")
    sizes = {path: (output / path).stat().st_size for path in kept}
    extra = {**manifest_extra,
             summary: {"files": len(kept), "bytes": sum(sizes.values()),
                       "per_split": {split: len(used[split]) for split in SPLITS},
                       "distinct_sha256": len({media[path] for path in kept}),
                       **(summary_extra(kept) if summary_extra else {})}}
    manifest = write_corpus(output, name, script, records, seed, extra)
    manifest["files"][listing] = {"sha256": sha256_of(output / listing), "records": len(kept)}
    (output / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return manifest


def write_image_corpus(output, name, script, records, images, seed, manifest_extra):
    return write_media_corpus(output, name, script, records, images, seed, manifest_extra)


def corpus_parser(description, corpus, languages_help=None, fractions=True):
    """An argument parser with --output (data/<corpus>), --scratch and add_common_arguments' options,
    and --languages (default: English and the UForm languages) where `languages_help` says what it takes."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--output", default=default_output(corpus))
    parser.add_argument("--scratch", default=str(DEFAULT_SCRATCH), help="downloads and unpacked packages")
    if languages_help:
        parser.add_argument("--languages", default=",".join(["en", *DEFAULT_LANGUAGES]), help=languages_help)
    add_common_arguments(parser, fractions=fractions)
    return parser


def fetch_unless_local(script, local, scratch, refresh):
    """fetch() of each package of {package: local folder or None} that has no local folder; a
    failure ends the script with its message."""
    wanted = [package for package, path in local.items() if not path]
    try:
        return fetch(wanted, scratch, refresh) if wanted else {}
    except FetchError as error:
        sys.exit(f"{script}: {error}")


def package_folder(script, package, local, subfolder, scratch, refresh):
    """(folder to read, [manifest entry]): the local folder when given (no entry), else `package`
    fetched and its `subfolder`; a failure ends the script with its message."""
    if local:
        return pathlib.Path(local), []
    fetched = fetch_unless_local(script, {package: None}, scratch, refresh)[package]
    return fetched["root"] / subfolder, [package_record(fetched)]


def one_package_picture_corpus(script, corpus, description, package, subfolder, folder_help, collect, argv):
    """The start of a picture corpus read from one package: parses argv (--languages, --output, 15 % dev and test
    by default, --size, --local-root FOLDER to read instead of the package), fetches the package, runs
    collect(folder, languages, dropped) (a ValueError or OSError, or nothing found, ends the script with its
    message) and empties the image folder. Returns (arguments, what collect found, dropped, the manifest's
    "source", the start time)."""
    parser = corpus_parser(description, corpus, "comma-separated language codes")
    parser.set_defaults(dev_fraction=0.15, test_fraction=0.15)
    parser.add_argument("--local-root", help=f"{folder_help} to read instead of the package's")
    parser.add_argument("--size", type=int, default=368, help="the longer side of each PNG at most, in pixels")
    arguments = parser.parse_args(argv)
    started = time.monotonic()
    root, source = single_package(script, package, arguments.local_root, subfolder, arguments)
    dropped = collections.Counter()
    try:
        found = collect(root, uform_languages(script, arguments.languages), dropped)
    except (OSError, ValueError) as error:
        sys.exit(f"{script}: {error}")
    if not found:
        sys.exit(f"{script}: nothing to keep under {root}")
    fresh_image_folder(arguments.output)
    return arguments, found, dropped, source, started


def single_package(script, package, local, subfolder, arguments):
    """(folder to read, the manifest's "source") of a corpus read from one package: package_folder, with the
    local folder named in the source when one was given."""
    root, entries = package_folder(script, package, local, subfolder, arguments.scratch, arguments.refresh)
    return root, {"packages": entries, "local": {package: str(local)} if local else {}}


def uform_languages(script, text):
    """The set of a comma-separated --languages value; ends the script naming any not English or a UForm language."""
    from gettext_pairs import DEFAULT_LANGUAGES

    languages = set(text.split(","))
    unknown = languages - {"en", *DEFAULT_LANGUAGES}
    if unknown:
        sys.exit(f"{script}: --languages: {', '.join(sorted(unknown))} not among en and {' '.join(DEFAULT_LANGUAGES)}")
    return languages


def image_source(fetched, local):
    """The manifest's "source": the packages fetched, and the local folders read instead of the others."""
    return {"packages": [package_record(details) for details in fetched.values()],
            "local": {name: str(path) for name, path in local.items() if path}}


def print_summary(script, manifest, started, output):
    images = "".join(f", {manifest[kind]['files']} {kind}" for kind in ("images", "clips") if kind in manifest)
    print(f"{script}: " + ", ".join(f"{split} {manifest['records'][split]['total']}" for split in SPLITS) +
          f" pairs{images} in {time.monotonic() - started:.1f} s -> {output}", file=sys.stderr)


def build_image_corpus(script, corpus, arguments, groups, images, manifest_extra, source, started):
    """split_image_corpus of {group: [record]} by the script's seed and fractions, then
    write_image_corpus into its --output with the split's counts and the source; prints a summary."""
    records, counts = split_image_corpus(groups, images, arguments.seed, arguments.dev_fraction, arguments.test_fraction)
    manifest = write_image_corpus(arguments.output, corpus, f"scripts/data/{script}.py", records, images, arguments.seed,
                                  {**manifest_extra, **counts, "source": source})
    print_summary(script, manifest, started, arguments.output)
    return manifest
