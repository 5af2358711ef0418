#!/usr/bin/env python3
"""code_pairs.py: documentation -> code pairs from three standard libraries, unpacked from Debian's
archive without installing anything: Python (libpython3.11-stdlib and -minimal, docstrings through
ast.get_docstring), Go (golang-1.19-src, `//` doc comments above top-level funcs) and Rust (rust-src,
`///` doc comments above fns of the library and the compiler). The query is the documentation, the
positive the code without it; "lang" is the programming language. Split by package or module
folder, then no query or code of dev/test is in train. Writes data/code/{train,dev,test}.jsonl, a
text.jsonl sample for masked modelling and manifest.json. Standard library only. See docs/data.md.
"""

import argparse
import ast
import collections
import pathlib
import re
import sys
import textwrap
import time
import warnings

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import debian_archive  # noqa: E402

MAX_BYTES = 2000  # each side; a pair then always fits one 4096-column row
SHORTEST_DOCUMENTATION = 12  # characters: "Return x." says too little to find its code by
PACKAGES = {"python": ["libpython3.11-stdlib", "libpython3.11-minimal"], "go": ["golang-1.19-src"], "rust": ["rust-src"]}
# Test suites and fixtures: code written to exercise other code, not documented API.
SKIPPED_FOLDERS = {"test", "tests", "testdata", "idle_test", "benches", "site-packages", "dist-packages", "__pycache__"}


def documentation(text):
    """The documentation cut to MAX_BYTES at a paragraph, then a line; None when too short or letterless."""
    text = debian_archive.cut(text.strip(), MAX_BYTES, "\n\n")
    text = debian_archive.cut(text, MAX_BYTES, "\n")
    if len(text) < SHORTEST_DOCUMENTATION or not any(character.isalpha() for character in text):
        return None
    return text


def code(lines):
    """Source lines dedented and cut to MAX_BYTES at a line."""
    return debian_archive.cut(textwrap.dedent("\n".join(lines)).strip("\n"), MAX_BYTES, "\n")


# Python ------------------------------------------------------------------------------------------

def python_definitions(source, path="<source>"):
    """(line, qualified name, docstring, code) of every documented function, method and class.
    Functions keep their body without the docstring; classes become a skeleton (their own
    statements, each method's signature then `...`), since a method's docstring inside its class's
    code would hand the class away as the answer to the method's query."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences in old modules
            tree = ast.parse(source, filename=str(path))
    except (SyntaxError, ValueError):
        return []
    lines = source.splitlines()
    results = []

    def first_line(node):
        return min([node.lineno] + [decorator.lineno for decorator in node.decorator_list])

    def walk(body, prefix):
        for node in body:
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            name = prefix + node.name
            if isinstance(node, ast.ClassDef):
                walk(node.body, name + ".")
            docstring = ast.get_docstring(node, clean=True)
            if docstring is None or node.body[0].lineno == node.lineno:
                continue  # undocumented, or a one-line `def f(): "doc"` whose code cannot be cut apart
            doc_node, rest = node.body[0], node.body[1:]
            if not rest:
                continue  # only a docstring: the signature alone says too little
            kept = lines[first_line(node) - 1: doc_node.lineno - 1]
            if isinstance(node, ast.ClassDef):
                for statement in rest:
                    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        signature = lines[first_line(statement) - 1: statement.body[0].lineno - 1]
                        if statement.body[0].lineno == statement.lineno:  # `def f(self): return 1` on one line
                            signature = [lines[statement.lineno - 1]]
                        indent = re.match(r"\s*", lines[statement.lineno - 1]).group()
                        kept += signature + [indent + "    ..."]
                    else:
                        kept += lines[statement.lineno - 1: statement.end_lineno]
            else:
                kept += lines[doc_node.end_lineno: node.end_lineno]
            text = documentation(docstring)
            if text:
                results.append((node.lineno, name, text, code(kept)))

    walk(tree.body, "")
    return results


def python_files(roots):
    """(module path relative to the library, file) for the standard library under the given roots."""
    found = {}
    for root in roots:
        library = pathlib.Path(root) / "usr" / "lib" / "python3.11"
        if not library.is_dir():
            library = pathlib.Path(root)  # a plain library folder (tests, --python-root)
        for path in sorted(library.rglob("*.py")):
            relative = path.relative_to(library)
            if SKIPPED_FOLDERS & set(relative.parts[:-1]) or relative.parts[0].startswith("config-"):
                continue
            found.setdefault(str(relative), path)
    return sorted(found.items())


def python_group(relative):
    """A module's split group: its top-level package ("email/mime/text.py" -> "email")."""
    first = pathlib.PurePath(relative).parts[0]
    return first[:-3] if first.endswith(".py") else first


# Go ----------------------------------------------------------------------------------------------

GO_DIRECTIVE = re.compile(r"^//(go:|line |export |extern |sys |sysnb |\+build)")


def go_functions(source):
    """(line, name, doc comment, code) of every top-level func preceded by a `//` comment block.
    gofmt puts a top-level func's closing brace alone at column 0, which ends the code."""
    lines = source.splitlines()
    results = []
    for index, line in enumerate(lines):
        if not line.startswith("func "):
            continue
        above = index
        while above > 0 and lines[above - 1].startswith("//"):
            above -= 1
        comment = [text for text in lines[above: index] if not GO_DIRECTIVE.match(text)]
        doc = "\n".join(text[2:][1:] if text[2:].startswith(" ") else text[2:] for text in comment)
        end = None
        for scan in range(index, min(len(lines), index + 2000)):
            if scan > index and (lines[scan] == "}"):
                end = scan
                break
            if scan == index and line.rstrip().endswith("}") and "{" in line:
                end = scan  # a one-line func
                break
            if scan > index and (not lines[scan].strip() or lines[scan].startswith(("func ", "//"))) \
                    and not any(text.rstrip().endswith("{") for text in lines[index: scan]):
                end = scan - 1  # a body-less declaration (implemented in assembly)
                break
        if end is None:
            continue
        match = re.match(r"func\s+(?:\([^)]*\)\s*)?([A-Za-z_]\w*)", line)
        text = documentation(doc)
        if match and text:
            results.append((index + 1, match.group(1), text, code(lines[index: end + 1])))
    return results


def go_files(root):
    source = pathlib.Path(root) / "usr" / "share" / "go-1.19" / "src"
    if not source.is_dir():
        source = pathlib.Path(root)
    for path in sorted(source.rglob("*.go")):
        relative = path.relative_to(source)
        if path.name.endswith("_test.go") or SKIPPED_FOLDERS & set(relative.parts[:-1]):
            continue
        yield str(relative), path


def go_group(relative):
    """A Go file's split group: its package folder ("net/http/server.go" -> "net/http")."""
    return str(pathlib.PurePath(relative).parent)


# Rust --------------------------------------------------------------------------------------------

RUST_FN = re.compile(r'^(\s*)(?:pub(?:\s*\([^)]*\))?\s+)?(?:(?:const|async|unsafe|default|extern\s+"[^"]*")\s+)*fn\s+([A-Za-z_]\w*)')


def rust_functions(source):
    """(line, name, doc prose, code) of every fn preceded by `///` comments. The prose is the text
    before the first heading or code fence (the examples that follow name the function and would
    make the query its own answer). rustfmt puts the closing brace at the fn's indentation."""
    lines = source.splitlines()
    results = []
    index = 0
    while index < len(lines):
        stripped = lines[index].lstrip()
        if not stripped.startswith("///") or stripped.startswith("////"):
            index += 1
            continue
        start = index
        while index < len(lines) and lines[index].lstrip().startswith("///") and not lines[index].lstrip().startswith("////"):
            index += 1
        doc_lines = [text.lstrip()[3:] for text in lines[start: index]]
        doc_lines = [text[1:] if text.startswith(" ") else text for text in doc_lines]
        depth = 0  # attributes between the comment and the item, possibly over several lines
        while index < len(lines) and (depth > 0 or lines[index].lstrip().startswith("#[") or not lines[index].strip()):
            depth += lines[index].count("[") - lines[index].count("]")
            index += 1
        if index >= len(lines):
            break
        match = RUST_FN.match(lines[index])
        if not match:
            continue
        indent, name = match.group(1), match.group(2)
        end = None
        for scan in range(index, min(len(lines), index + 1500)):
            text = lines[scan].rstrip()
            if scan == index and "{" in text and text.endswith("}"):
                end = scan
                break
            if text.endswith(";") and not any("{" in earlier for earlier in lines[index: scan + 1]):
                end = scan  # a trait method's signature without a body
                break
            if scan > index and text == indent + "}":
                end = scan
                break
        prose = []
        for text in doc_lines:
            if text.startswith("# ") or text.startswith("```"):
                break
            prose.append(text)
        doc = documentation("\n".join(prose))
        if end is not None and doc:
            results.append((index + 1, name, doc, code(lines[index: end + 1])))
        index = (end + 1) if end is not None else index + 1
    return results


def rust_files(root):
    source = pathlib.Path(root) / "usr" / "src" / "rustc-1.63.0"
    if not source.is_dir():
        source = pathlib.Path(root)
    for folder in ("library", "compiler"):
        for path in sorted((source / folder).rglob("*.rs")):
            relative = path.relative_to(source)
            if SKIPPED_FOLDERS & set(relative.parts[:-1]):
                continue
            yield str(relative), path


def rust_group(relative):
    """A Rust file's split group: its module folder ("library/core/src/iter/mod.rs" -> "library/core/src/iter")."""
    return str(pathlib.PurePath(relative).parent)


# The corpus --------------------------------------------------------------------------------------

def collect(language, files, extract, group_of):
    """{group: [record]} of one language, in file and line order."""
    groups = collections.defaultdict(list)
    for relative, path in files:
        if path.is_symlink() or not path.is_file():
            continue  # links into the installed system (sysconfig data) are not the package's text
        source = path.read_text(encoding="utf-8", errors="replace")
        for line, name, doc, body in extract(source):
            groups[f"{language}:{group_of(relative)}"].append(
                {"query": doc, "positives": [body], "lang": language, "name": name, "source": f"{relative}:{line}"})
    return groups


def build(groups_per_language, seed, dev_fraction, test_fraction):
    """{split: [record]}: each language's groups split on their own (so every language reaches dev and
    test), each split keeps one record per query and per code, then the leaks are removed."""
    records = {split: [] for split in debian_archive.SPLITS}
    group_counts = {}
    for language, groups in sorted(groups_per_language.items()):
        split_of = debian_archive.split_groups(groups, seed, dev_fraction, test_fraction)
        group_counts[language] = collections.Counter(split_of.values())
        for group in sorted(groups):
            records[split_of[group]].extend(groups[group])
    duplicates = debian_archive.deduped_splits(records, debian_archive.dedupe_every_key)
    leaks = debian_archive.remove_leaks(records)
    return records, group_counts, duplicates, leaks


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", default=debian_archive.default_output("code"))
    parser.add_argument("--scratch", default=str(debian_archive.DEFAULT_SCRATCH), help="downloads and unpacked packages")
    parser.add_argument("--python-root", help="a Python library folder to read instead of the Debian packages")
    parser.add_argument("--go-root", help="a Go source folder to read instead of golang-1.19-src")
    parser.add_argument("--rust-root", help="a Rust source folder (with library/, compiler/) instead of rust-src")
    parser.add_argument("--languages", default="python,go,rust")
    debian_archive.add_common_arguments(parser, "most records in text.jsonl")
    arguments = parser.parse_args(argv)
    started = time.monotonic()
    languages = arguments.languages.split(",")
    overrides = {"python": arguments.python_root, "go": arguments.go_root, "rust": arguments.rust_root}
    unknown = set(languages) - set(PACKAGES)
    if unknown:
        sys.exit(f"code_pairs: unknown languages {sorted(unknown)}; known: {sorted(PACKAGES)}")
    wanted = [package for language in languages if not overrides[language] for package in PACKAGES[language]]
    try:
        fetched = debian_archive.fetch(wanted, arguments.scratch, arguments.refresh) if wanted else {}
    except debian_archive.FetchError as error:
        sys.exit(f"code_pairs: {error}")
    roots = {language: [overrides[language]] if overrides[language] else [fetched[package]["root"] for package in PACKAGES[language]]
             for language in languages}
    readers = {"python": (lambda: python_files(roots["python"]), python_definitions, python_group),
               "go": (lambda: go_files(roots["go"][0]), go_functions, go_group),
               "rust": (lambda: rust_files(roots["rust"][0]), rust_functions, rust_group)}
    groups = {}
    for language in languages:
        files, extract, group_of = readers[language]
        groups[language] = collect(language, files(), extract, group_of)
        if not groups[language]:
            sys.exit(f"code_pairs: no documented {language} code under {roots[language]}")
    records, group_counts, duplicates, leaks = build(groups, arguments.seed, arguments.dev_fraction, arguments.test_fraction)
    texts = [text for record in records["train"] for text in (record["query"], record["positives"][0])]
    manifest = debian_archive.write_corpus(
        arguments.output, "code", "scripts/data/code_pairs.py", records, arguments.seed,
        {"groups_per_split": {language: {split: counts[split] for split in debian_archive.SPLITS}
                              for language, counts in group_counts.items()},
         "definitions_found": {language: sum(len(items) for items in groups[language].values()) for language in languages},
         "removed_as_duplicates_within_a_split": duplicates,
         "removed_from_dev_and_test_as_leaks": leaks,
         "source": {"packages": [debian_archive.package_record(fetched[package], language=language)
                                 for language in languages if not overrides[language] for package in PACKAGES[language]],
                    "local_roots": {language: str(overrides[language]) for language in languages if overrides[language]}}},
        texts=texts, text_limit=arguments.text_limit)
    print("code_pairs: " + ", ".join(f"{split} {manifest['records'][split]['total']}" for split in debian_archive.SPLITS) +
          f" pairs in {time.monotonic() - started:.1f} s -> {arguments.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
