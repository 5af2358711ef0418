#!/usr/bin/env python3
"""manpage_pairs.py: summary -> description pairs from English man pages of Debian packages
(manpages, manpages-dev and the common tools of PACKAGES, unpacked, not installed). The query is
the NAME line's summary alone ("list directory contents", not "ls - list directory contents"):
the pairs we are judged on carry no command name, and the name often opens the DESCRIPTION, so a
name in the query would teach matching the name's bytes (what n-gram TF-IDF already does) rather
than the meaning. The positive is the DESCRIPTION's leading paragraphs as plain text (man(7) and
mdoc(7) macros, font escapes and special characters resolved; tables, comments and macro
definitions dropped; an option list only when the prose before it is short), cut at a paragraph
to MAX_BYTES. Split by page name (every section of "kill" in one split), then no query or
description of dev/test is in train. Writes data/manpages/{train,dev,test}.jsonl, text.jsonl
and manifest.json. With --wide MB, the packages are instead those of Debian's Contents index with
pages in sections 1, 5, 7 and 8, the most pages a byte first up to MB of .debs, every page named in
--manpages' corpora (data/manpages by default; repeatable) or sharing a summary or description with
them left out, into data/manpages-wide; there each page's split comes from its name's seeded hash,
so a page keeps its split when the archive's other pages change. Standard library only;
deterministic for a seed and the archive's state. See docs/data.md.
"""

import argparse
import collections
import gzip
import json
import pathlib
import re
import shlex
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import debian_archive  # noqa: E402

MAX_BYTES = 1000  # the description; with its summary it fits a 1024-column row
SHORTEST_DESCRIPTION = 40  # bytes: less is a pointer ("See ls(1).") rather than a description
PROSE_BEFORE_OPTIONS = 200  # bytes of prose after which an option list ends the description
# Common tools' man pages, in the main archive with a licence their copyright file states.
PACKAGES = """manpages manpages-dev coreutils util-linux util-linux-extra procps findutils grep sed tar gzip bzip2
xz-utils zstd diffutils less bash dash dpkg dpkg-dev apt debianutils man-db iproute2 iputils-ping net-tools
openssh-client systemd libsystemd-dev e2fsprogs mount passwd login psmisc lsof strace gdb make git-man curl wget
rsync file zip unzip cron sudo openssl libssl-doc gpg sqlite3 nano tmux screen groff-base texinfo perl perl-doc
python3.11 x11-utils libx11-doc alsa-utils dosfstools fdisk lvm2 mdadm udev usbutils pciutils hdparm smartmontools
ethtool iptables nftables tcpdump nmap netcat-openbsd bind9-dnsutils whois traceroute mtr-tiny htop sysstat time bc
dc gawk mawk patch m4 bison flex autoconf automake libtool-bin ninja-build ltrace moreutils sharutils cpio pax attr
acl quota at logrotate rsyslog xfsprogs btrfs-progs tcl8.6-doc zsh-common xterm graphviz imagemagick-6.q16
vim-common mutt w3m bsdextrautils bsdutils ncurses-bin inetutils-telnet cryptsetup-bin dmsetup iw wpasupplicant
network-manager bluez pulseaudio-utils sox netpbm poppler-utils cups-client mailutils procmail ed libc-bin
libc-devtools kbd initramfs-tools grub-common sysvinit-utils init-system-helpers adduser apache2-utils""".split()
# --wide: the English pages of commands, file formats, overviews and administration, by the Contents index.
WIDE_PAGE = re.compile(r"^usr/share/man/man[1578]/[^/]+\.[1578][a-z0-9]*(?:\.gz)?$")
PAGE = re.compile(r"^(?P<name>.+)\.(?P<section>[1-9][a-z0-9]*)(?:\.gz)?$")
# Special characters, as \(xx or \[xx]; others become nothing.
GLYPHS = {"em": "—", "en": "–", "hy": "-", "mi": "-", "bu": "•", "aq": "'", "dq": '"', "lq": "“", "rq": "”",
          "oq": "‘", "cq": "’", "co": "©", "rg": "®", "tm": "™", "mu": "×", "de": "°", "ga": "`", "ha": "^",
          "ti": "~", "rs": "\\", "sl": "/", "lh": "☜", "rh": "☞", "<=": "≤", ">=": "≥", "!=": "≠", "->": "→",
          "<-": "←", "+-": "±", "pl": "+", "eq": "=", "fm": "′", "sc": "§", "ua": "↑", "da": "↓", "Fo": "«",
          "Fc": "»", "ct": "¢", "Po": "£", "Eu": "€", "ba": "|", "br": "|", "or": "|", "lB": "[", "rB": "]",
          "lC": "{", "rC": "}", "la": "⟨", "ra": "⟩", "aa": "´", "ss": "ß", "e'": "é", "'e": "é", "a\"": "ä",
          ":a": "ä", ":o": "ö", ":u": "ü", "o\"": "ö", "u\"": "ü", "ae": "æ", "ff": "ff", "fi": "fi", "fl": "fl"}
STRINGS = {"lq": "“", "rq": "”", "R": "®", "Tm": "™", "(Tm": "™"}
ESCAPE = re.compile(r"""\\(?:
    \((?P<glyph2>..) | \[(?P<glyph>[^\]]*)\] | \*(?:\((?P<string2>..)|\[(?P<string>[^\]]*)\]|(?P<string1>.)) |
    f(?:\(..|\[[^\]]*\]|.) | s[-+]?(?:\d|\(\d\d|\[\d+\]) | [nk](?:\(..|\[[^\]]*\]|.) | [hvwlLNxbDoSXYZC]'[^']*' |
    [gmM](?:\(..|\[[^\]]*\]|.) | (?P<other>.))""", re.VERBOSE)
FONT_MACROS = {"B": " ", "I": " ", "SM": " ", "SB": " ", "BR": "", "BI": "", "IB": "", "IR": "", "RB": "", "RI": ""}
PARAGRAPH_MACROS = {"PP", "LP", "P", "sp", "Pp", "Lp", "HP", "in"}
NOFILL_START, NOFILL_END = {"nf", "EX", "Bd", "Vb"}, {"fi", "EE", "Ed", "Ve"}
# mdoc(7) macros that only mark their arguments up (kept as words) or print punctuation.
MDOC_WORDS = {"Ar", "Cm", "Dv", "Em", "Er", "Ev", "Fa", "Ic", "Li", "Ms", "Pa", "Sy", "Va", "Vt", "Tn", "No", "Ad",
              "An", "Cd", "Ft", "Lk", "Mt", "Sx", "Ot", "Bf", "Ef", "Sm", "Ap", "Aq", "Ql"}
MDOC_ENCLOSE = {"Dq": ("“", "”"), "Do": ("“", ""), "Dc": ("", "”"), "Sq": ("‘", "’"), "So": ("‘", ""),
                "Sc": ("", "’"), "Pq": ("(", ")"), "Po": ("(", ""), "Pc": ("", ")"), "Op": ("[", "]"),
                "Oo": ("[", ""), "Oc": ("", "]"), "Bq": ("[", "]"), "Bo": ("[", ""), "Bc": ("", "]"),
                "Brq": ("{", "}"), "Bro": ("{", ""), "Brc": ("", "}"), "Qq": ('"', '"')}
MDOC_NAMES = {"Bx": "BSD", "Bsx": "BSD/OS", "Fx": "FreeBSD", "Nx": "NetBSD", "Ox": "OpenBSD", "Dx": "DragonFly",
              "Ux": "UNIX", "At": "AT&T UNIX", "St": "the standard"}
PUNCTUATION = {".", ",", ";", ":", "?", "!", ")", "]"}
BOILERPLATE = re.compile(r"^This manual page (?:documents|was written|is for|describes briefly)|"
                         r"^This manual page was|^This program is documented fully", re.IGNORECASE)
UNDESCRIBED = re.compile(r"^(?:manual page for\b|undocumented\b|no description\b|\S+$)", re.IGNORECASE)


def unescape(text, strings=None):
    """A roff text line as plain text: special characters, strings (`strings`, else STRINGS),
    font changes, size and spacing escapes."""
    def replace(match):
        if match.group("glyph2") or match.group("glyph") is not None:
            name = match.group("glyph2") or match.group("glyph")
            if name.startswith("u") and re.fullmatch(r"u[0-9A-Fa-f]{4,6}", name):
                return chr(int(name[1:], 16))
            return GLYPHS.get(name, "")
        string = match.group("string2") or match.group("string") or match.group("string1")
        if string:
            return (strings or {}).get(string, STRINGS.get(string, ""))
        other = match.group("other")
        if other is None:
            return ""
        return {"-": "-", "e": "\\", "\\": "\\", " ": " ", "~": " ", "0": " ", "'": "´", "`": "`", ".": "."}.get(other, "")
    return ESCAPE.sub(replace, text)


def arguments_of(text):
    """A request's arguments, split as roff does (double quotes group words)."""
    try:
        return shlex.split(text.replace("\\\"", "\0"), posix=True)
    except ValueError:
        return text.split()


def mdoc_text(macro, arguments, name):
    """The text an mdoc line (macro and its arguments, with callable macros among them) prints."""
    words, tokens, closing = [], [macro, *arguments], []
    index, no_space = 0, False
    while index < len(tokens):
        token = tokens[index]
        index += 1
        if token == "Ns":
            no_space = True
            continue
        if token in ("Fl",):
            following = tokens[index] if index < len(tokens) and tokens[index] not in MDOC_WORDS | set(MDOC_ENCLOSE) else ""
            index += 1 if following else 0
            piece = "-" + following
        elif token == "Nm":
            following = tokens[index] if index < len(tokens) and re.match(r"^[\w.+-]+$", tokens[index]) and tokens[index] not in MDOC_WORDS else ""
            index += 1 if following else 0
            piece = following or name
        elif token == "Xr" and index + 1 < len(tokens):
            piece = f"{tokens[index]}({tokens[index + 1]})"
            index += 2
        elif token in ("Fn", "Fo") and index < len(tokens):
            piece = tokens[index] + "()"
            index = len(tokens)
        elif token in MDOC_ENCLOSE:
            opening, close = MDOC_ENCLOSE[token]
            if opening:
                words.append(opening)
                no_space = True
            if close and opening:  # Dq, Op: closed at the line's end
                closing.append(close)
            elif close and words:  # Oc, Dc: closes what an Oo, Do opened before it
                words[-1] += close
            continue
        elif token in MDOC_NAMES:
            piece = MDOC_NAMES[token]
        elif token in MDOC_WORDS or token in ("Pf", "Nd", "Dl", "D1", "It", "Tg"):
            continue
        else:
            piece = unescape(token)
        if not piece:
            continue
        if words and (no_space or piece in PUNCTUATION):
            words[-1] += piece
        else:
            words.append(piece)
        no_space = False
    text = " ".join(words)
    for close in reversed(closing):
        text += close
    return text


def sections(text):
    """{section heading, upper case: [lines]} of a man or mdoc page, comments and continuations removed."""
    lines = text.replace("\\\n", "").split("\n")
    found, heading = collections.defaultdict(list), None
    for line in lines:
        if re.match(r"^[.']\s*\\\"", line) or line.startswith('.\\"') or line.startswith("'\\\""):
            continue
        line = re.sub(r'\\".*$', "", line)
        request = re.match(r"^[.']\s*(SH|Sh)\s*(.*)$", line)
        if request:
            heading = " ".join(unescape(word) for word in arguments_of(request.group(2))).upper()
            continue
        if heading is not None:
            found[heading].append(line)
    return found


def name_summary(lines):
    """(names, summary) of a NAME section: "ls, dir \\- list directory contents" in man(7), .Nm and
    .Nd in mdoc(7)."""
    names, summary, plain = [], "", []
    for line in lines:
        request = re.match(r"^[.']\s*(\S+)\s*(.*)$", line)
        if request and request.group(1) == "Nm":
            names.extend(arguments_of(request.group(2)))
        elif request and request.group(1) == "Nd":
            summary = mdoc_text("Nd", arguments_of(request.group(2)), "")
        elif request and request.group(1) in FONT_MACROS:
            plain.append(FONT_MACROS[request.group(1)].join(arguments_of(request.group(2))))
        elif not request:
            plain.append(line)
    if not summary and plain:
        joined = " ".join(unescape(" ".join(plain)).split())
        parts = re.split(r"\s+(?:-+|—)\s+", joined, maxsplit=1)
        if len(parts) == 2:
            names, summary = [name.strip() for name in parts[0].split(",") if name.strip()], parts[1]
    return names, re.sub(r"\s+\.$", "", " ".join(summary.split()))


def description_paragraphs(lines, name):
    """The DESCRIPTION's paragraphs as plain text, and whether each began a tagged (option) item."""
    paragraphs, current, tagged = [], [], False
    nofill, skip_until = False, None

    def flush(next_tagged=False):
        nonlocal current, tagged
        text = ("\n" if nofill else " ").join(part for part in current if part.strip())
        text = text.strip() if nofill else " ".join(text.split())
        if re.search(r"\w", text):
            paragraphs.append((text, tagged))
        current, tagged = [], next_tagged

    for line in lines:
        if skip_until:
            if re.match(skip_until, line):
                skip_until = None
            continue
        request = re.match(r"^[.']\s*([A-Za-z]{1,3}|\.)(?:\s+(.*))?$", line)
        if not request:
            if line.strip() or nofill:
                current.append(unescape(line) if nofill else unescape(line).strip())
            elif current:
                flush()
            continue
        macro, rest = request.group(1), request.group(2) or ""
        arguments = arguments_of(rest)
        if macro in ("TS", "Sm"):  # a table, or mdoc's spacing mode (its "off"/"on" are no words)
            skip_until = r"^[.']\s*TE" if macro == "TS" else None
        elif macro in ("de", "ig", "am"):
            skip_until = r"^[.']\s*\.\.?"
        elif macro in PARAGRAPH_MACROS:
            flush()
        elif macro in ("TP", "IP", "It", "TQ"):
            flush(next_tagged=True)
            if macro in ("IP",) and arguments and arguments[0] not in ("•", "\\(bu", "-", "*"):
                current.append(unescape(arguments[0]))
            elif macro == "It":
                current.append(mdoc_text("It", arguments, name))
        elif macro in ("SS", "Ss"):
            flush()
            paragraphs.append((" ".join(unescape(word) for word in arguments), True))
        elif macro == "br":
            current.append("\n" if nofill else "")
        elif macro in NOFILL_START:
            flush()
            nofill = True
        elif macro in NOFILL_END:
            flush()
            nofill = False
        elif macro in FONT_MACROS:
            current.append(unescape(FONT_MACROS[macro].join(arguments)))
        elif macro in ("UR", "UE", "MT", "ME", "RS", "RE", "Bl", "El", "ne", "ft", "ad", "na", "hy", "nh", "ll",
                       "ds", "nr", "so", "ti", "if", "ie", "el", "ce", "ta", "fam", "cs", "ss", "mso", "Dd", "Dt",
                       "Os", "Vb", "OP", "YS", "SY", "Ed", "Ef", "Ek", "Bk", "IX", "\\"):
            continue
        elif macro[0].isupper() and len(macro) <= 3:
            current.append(mdoc_text(macro, arguments, name))
    flush()
    return paragraphs


def description(lines, name):
    """The positive: leading prose paragraphs of DESCRIPTION (boilerplate about the man page left
    out), stopping at an option list once there is enough prose, cut at a paragraph to MAX_BYTES."""
    kept, prose = [], 0
    for text, tagged in description_paragraphs(lines, name):
        if BOILERPLATE.match(text):
            continue
        if tagged and prose >= PROSE_BEFORE_OPTIONS:
            break
        kept.append(text)
        prose += 0 if tagged else len(text.encode())
        if len("\n\n".join(kept).encode()) > MAX_BYTES:
            break
    return debian_archive.cut("\n\n".join(kept), MAX_BYTES, "\n\n")


def read_page(path):
    """The page's text (gzip or plain), or None for a .so link to another page."""
    data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    text = data.decode("utf-8", errors="replace")
    first = next((line for line in text.split("\n") if line.strip() and not line.startswith(('.\\"', "'\\\""))), "")
    return None if re.match(r"^[.']\s*so\s", first) else text


def page_strings(text):
    """{name: value} of the page's `.ds` strings; of a conditional pair, the nroff (`n`) branch,
    as a terminal would show it."""
    strings = {}
    for match in re.finditer(r"^[.'][ \t]*(?:(?:ie|if)[ \t]+n[ \t]+[.']?[ \t]*)?ds[ \t]+(\S+)[ \t]?\"?(.*)$", text, re.MULTILINE):
        strings[match.group(1)] = unescape(match.group(2), strings)
    return strings


def parse_page(text, name):
    """(summary, description) of a page's text; either may be empty."""
    strings = page_strings(text)
    if strings:  # the page's own strings ("\\*n", "\\*(C+") replaced before the macros are read
        text = re.sub(r"\\\*(?:\((..)|\[([^\]]*)\]|(.))",
                      lambda match: strings.get(next(group for group in match.groups() if group), match.group(0)), text)
    found = sections(text)
    _, summary = name_summary(found.get("NAME", []))
    body = found.get("DESCRIPTION") or found.get("OVERVIEW") or []
    return summary, description(body, name)


def page_files(root):
    """[(name, section, path)] of the English pages under root/usr/share/man/man*/ (translated
    pages live in usr/share/man/<lang>/ and are not read), symlinks left out, in sorted order."""
    found = []
    for path in sorted((pathlib.Path(root) / "usr" / "share" / "man").glob("man*/*")):
        match = PAGE.match(path.name)
        if match and path.is_file() and not path.is_symlink():
            found.append((match.group("name"), match.group("section"), path))
    return found


def records_by_group(roots):
    """{page name, case-folded: [record]} from {package: root}; counts of what was dropped."""
    groups, counts = collections.defaultdict(list), collections.Counter()
    for package, root in roots.items():
        for name, section, path in page_files(root):
            counts["pages"] += 1
            text = read_page(path)
            if text is None:
                counts["links to another page (.so)"] += 1
                continue
            summary, text = parse_page(text, name)
            if not summary or UNDESCRIBED.match(summary) or len(summary) < 8:
                counts["no usable NAME summary"] += 1
            elif len(text.encode()) < SHORTEST_DESCRIPTION:
                counts["no usable DESCRIPTION"] += 1
            else:
                groups[name.casefold()].append({"query": summary, "positives": [text], "lang": "en",
                                                "page": f"{name}({section})", "package": package})
    return dict(groups), counts


def wide_packages(pages, sizes, budget, exclude):
    """Packages for --wide: of {package: [page path]} those not in `exclude` with a known .deb size, most
    pages a byte first (ties by name), taken while their .deb sizes sum to at most `budget` bytes."""
    ranked = sorted((package for package in pages if package not in exclude and sizes.get(package)),
                    key=lambda package: (-len(pages[package]) / sizes[package], package))
    chosen, used = [], 0
    for package in ranked:
        if used + sizes[package] <= budget:
            chosen.append(package)
            used += sizes[package]
    return sorted(chosen)


def corpus_records(folder):
    """Every record of every split of a man page corpus folder (none if absent)."""
    for split in debian_archive.SPLITS:
        path = pathlib.Path(folder) / f"{split}.jsonl"
        if path.is_file():
            with path.open(encoding="utf-8") as file:
                yield from (json.loads(line) for line in file if line.strip())


def corpus_keys(folder):
    """The case-folded queries and descriptions of a man page corpus folder."""
    return {key for record in corpus_records(folder) for key in debian_archive.pair_keys(record)}


def page_names(folder):
    """Case-folded page names ("ls" of "ls(1)") of a man page corpus folder."""
    return {record["page"].rpartition("(")[0].casefold() for record in corpus_records(folder)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", default=debian_archive.default_output("manpages"))
    parser.add_argument("--scratch", default=str(debian_archive.DEFAULT_SCRATCH), help="downloads and unpacked packages")
    parser.add_argument("--packages", default=",".join(PACKAGES), help="comma-separated packages whose man pages to read")
    parser.add_argument("--man-root", action="append", default=[],
                        help="PACKAGE=FOLDER: a folder holding usr/share/man/ to read instead of fetching (repeatable)")
    parser.add_argument("--wide", type=float, default=0, metavar="MEGABYTES",
                        help="instead of --packages: the packages outside PACKAGES with English pages in sections 1, 5, 7 "
                             "and 8 (Debian's Contents index), most pages a byte first, up to this many MB of .debs; every "
                             "page named in --manpages' corpus left out; output data/manpages-wide unless --output")
    parser.add_argument("--manpages", action="append", default=[],
                        help="with --wide: a man page corpus whose page names the wide one leaves out (repeatable; "
                             "default data/manpages)")
    debian_archive.add_common_arguments(parser, "most records in text.jsonl")
    arguments = parser.parse_args(argv)
    started = time.monotonic()
    if arguments.wide < 0:
        parser.error("--wide takes a size in MB")
    packages = arguments.packages.split(",")
    if arguments.wide:
        if arguments.output == debian_archive.default_output("manpages"):
            arguments.output = debian_archive.default_output("manpages-wide")
        try:
            pages = {}
            for path in debian_archive.contents_lists(arguments.scratch, arguments.refresh):
                for package, found in debian_archive.files_per_package(debian_archive.read_list(path), WIDE_PAGE).items():
                    pages.setdefault(package, []).extend(found)
            sizes = debian_archive.download_sizes(arguments.scratch)
        except debian_archive.FetchError as error:
            sys.exit(f"manpage_pairs: {error}")
        packages = wide_packages(pages, sizes, arguments.wide * 1e6, set(PACKAGES))
        print(f"manpage_pairs: --wide {arguments.wide:g} MB: {len(packages)} of {len(pages)} packages with such pages",
              file=sys.stderr)
    local = {package: None for package in packages if package}
    for entry in arguments.man_root:
        package, _, folder = entry.partition("=")
        local[package] = pathlib.Path(folder)
    fetched = debian_archive.fetch_unless_local("manpage_pairs", local, arguments.scratch, arguments.refresh)
    unlicensed = sorted(package for package, details in fetched.items() if not details["licence"])
    if arguments.wide:  # a package whose copyright file states no licence we can read is left out
        for package in unlicensed:
            del local[package], fetched[package]
    elif unlicensed:
        sys.exit(f"manpage_pairs: no licence found in the copyright file of {', '.join(unlicensed)}")
    roots = {package: local[package] or fetched[package]["root"] for package in local}
    try:
        groups, counts = records_by_group(roots)
    except OSError as error:
        sys.exit(f"manpage_pairs: {error}")
    if arguments.wide:  # disjoint from the man page corpus: none of its pages, held out or trained on, again
        counts["packages without a stated licence, left out"] = len(unlicensed)
        excluded = arguments.manpages or [debian_archive.default_output("manpages")]
        named = set().union(*(page_names(folder) for folder in excluded))
        counts["pages named in --manpages' corpus"] = sum(len(groups.pop(name)) for name in sorted(named & set(groups)))
        seen = set().union(*(corpus_keys(folder) for folder in excluded))  # a page copied under another name
        for name in list(groups):
            kept = [record for record in groups[name] if not any(key in seen for key in debian_archive.pair_keys(record))]
            counts["pages whose summary or description is in --manpages' corpus"] += len(groups[name]) - len(kept)
            if kept:
                groups[name] = kept
            else:
                del groups[name]
    # The wide corpora draw on the whole archive, whose pages move between builds: each page keeps its split.
    split_of = debian_archive.split_groups(groups, arguments.seed, arguments.dev_fraction, arguments.test_fraction,
                                           stable=bool(arguments.wide))
    records = debian_archive.split_records(groups, split_of)
    # One record per summary and per description within a split: pages copied between packages recur.
    duplicates = debian_archive.deduped_splits(records, debian_archive.dedupe_every_key)
    leaks = debian_archive.remove_leaks(records)
    texts = [text for record in records["train"] for text in (f"{record['page']}: {record['query']}", *record["positives"])]
    pages_per_package = {split: dict(sorted(collections.Counter(record["package"] for record in records[split]).items()))
                         for split in debian_archive.SPLITS}
    manifest = debian_archive.write_corpus(
        arguments.output, "manpages", "scripts/data/manpage_pairs.py", records, arguments.seed,
        {"pages": dict(sorted(counts.items())), "records_per_package": pages_per_package,
         "groups_per_split": dict(collections.Counter(split_of.values())),
         "removed_as_duplicates_within_a_split": duplicates,
         "removed_from_dev_and_test_as_leaks": leaks,
         "source": debian_archive.image_source(fetched, local)},
        texts=texts, text_limit=arguments.text_limit)
    debian_archive.print_summary("manpage_pairs", manifest, started, arguments.output)


if __name__ == "__main__":
    main()
