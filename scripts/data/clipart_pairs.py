#!/usr/bin/env python3
"""clipart_pairs.py: title (and description) -> clip-art image pairs from openclipart-svg (public
domain SVGs whose Dublin Core metadata holds a title, sometimes a description, and keywords). Each
SVG is rasterized by librsvg's rsvg-convert (librsvg2-bin, unpacked with its library, not installed)
to a PNG at most 368 px on its longer side, on white; an SVG that fails to render or renders as one
colour is dropped and counted by reason. A title of many SVGs is a collection's name ("Lemon SVG
theme"), not a caption, and is left out. Group = the SVG file (SVGs that render alike are one
group). Writes data/clipart/{train,dev,test}.jsonl, img/*.png, images.sha256 and manifest.json.
Deterministic for a seed. See docs/data.md.
"""

import collections
import concurrent.futures
import io
import os
import pathlib
import random
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import debian_archive  # noqa: E402

SVG_ROOT = "usr/share/openclipart/svg"
RENDERER_PACKAGES = ("librsvg2-bin", "librsvg2-2")
RSVG_CONVERT = "usr/bin/rsvg-convert"
LIBRARY_FOLDER = "usr/lib/x86_64-linux-gnu"
NAMESPACES = {"dc": "http://purl.org/dc/elements/1.1/", "cc": "http://web.resource.org/cc/"}
COLLECTION_PREFIX = re.compile(r"^clip ?art by [^-]+ - ", re.IGNORECASE)  # "Clipart by Nicu Buculei - bee"
ARTEFACT = re.compile(r"^HASH\(0x[0-9a-f]+\)$")  # a Perl hash printed where a description should be
MAX_BYTES = 2000  # a description is cut at a word to this, as the other corpora cut their texts
RENDER_SECONDS = 60


def clean(text):
    """Whitespace folded, underscores as spaces, a collection prefix dropped."""
    return COLLECTION_PREFIX.sub("", " ".join((text or "").replace("_", " ").split()))


def metadata(path):
    """(title, description) of an SVG's cc:Work (empty strings where absent), or None when the
    file is not well-formed XML."""
    try:
        root = ElementTree.parse(path).getroot()
    except ElementTree.ParseError:
        return None
    work = root.find(".//cc:Work", NAMESPACES)
    if work is None:
        return "", ""
    title, description = (work.find(f"dc:{field}", NAMESPACES) for field in ("title", "description"))
    return clean(title.text if title is not None else ""), clean(description.text if description is not None else "")


def queries(svgs, most_repeats):
    """{svg: [query]}: the title, then the description as a second query where it says something
    else; and {reason: count} of what was left out. A text on more than `most_repeats` SVGs names
    a collection or an author, not the picture."""
    dropped = collections.Counter()
    repeats = collections.Counter(text.casefold() for texts in svgs.values() if texts for text in texts if text)
    found = {}
    for svg, texts in svgs.items():
        if texts is None:
            dropped["SVG: not well-formed XML"] += 1
            continue
        kept = []
        for kind, text in zip(("title", "description"), texts):
            if not text or ARTEFACT.match(text):
                dropped[f"{kind}: none"] += 1
            elif sum(character.isalpha() for character in text) < 2:
                dropped[f"{kind}: fewer than 2 letters"] += 1
            elif repeats[text.casefold()] > most_repeats:
                dropped[f"{kind}: on more than {most_repeats} SVGs"] += 1
            elif kept and text.casefold() == kept[0].casefold():
                dropped[f"{kind}: the same as the title"] += 1
            else:
                kept.append(debian_archive.cut(text, MAX_BYTES, " "))
        if kept:
            found[svg] = kept
        else:
            dropped["SVG: no caption left"] += 1
    return found, dropped


def renderer(fetched, rsvg_convert=None):
    """(rsvg-convert path, its environment, its version): the one named, or the unpacked librsvg2-bin's, which
    finds the unpacked librsvg2-2 first (cairo, pango ... are the system's)."""
    environment = dict(os.environ)
    if not rsvg_convert:
        rsvg_convert = fetched["librsvg2-bin"]["root"] / RSVG_CONVERT
        library = str(fetched["librsvg2-2"]["root"] / LIBRARY_FOLDER)
        environment["LD_LIBRARY_PATH"] = ":".join(filter(None, [library, environment.get("LD_LIBRARY_PATH")]))
    version = subprocess.run([str(rsvg_convert), "--version"], capture_output=True, text=True,
                             env=environment).stdout.strip() or str(rsvg_convert)
    return rsvg_convert, environment, version


def renderer_command(rsvg_convert, size, background):
    """The rsvg-convert call (the SVG's path follows) that fits an SVG into size x size, keeping its aspect."""
    command = [str(rsvg_convert), "--keep-aspect-ratio", "--width", str(size), "--height", str(size), "--format", "png"]
    return command + (["--background-color", "white"] if background == "white" else [])


def rasterize(path, command, environment, size, background):
    """(Pillow image, None) of one SVG, or (None, reason) when it does not render or renders as one colour."""
    from PIL import Image

    try:
        run = subprocess.run([*command, str(path)], capture_output=True, env=environment, timeout=RENDER_SECONDS)
    except subprocess.TimeoutExpired:
        return None, f"rasterize: took more than {RENDER_SECONDS} s"
    if run.returncode != 0 or not run.stdout:
        message = run.stderr.decode(errors="replace").strip().splitlines()
        first = (re.sub(r"\d+", "N", message[0].replace(str(path), "FILE")) if message
                 else f"exit {run.returncode}, nothing written")
        return None, "rasterize: " + ":".join(first.split(":")[:2]).strip()
    try:
        image = Image.open(io.BytesIO(run.stdout))
        image.load()
    except OSError as error:
        return None, f"rasterize: the PNG written is unreadable ({type(error).__name__})"
    image = image.convert("RGB" if background == "white" else "RGBA")
    if max(image.size) > size:  # rounding in the renderer; never enlarge, only fit
        image.thumbnail((size, size), Image.Resampling.LANCZOS)
    extrema = image.getextrema()
    if all(low == high for low, high in extrema) or (background != "white" and extrema[3][1] == 0):
        return None, "rasterize: one colour (nothing visible)"
    return image, None


def main(argv=None):
    parser = debian_archive.corpus_parser(__doc__.split("\n\n")[0], "clipart")
    parser.add_argument("--svg-root", help="a folder of SVGs to read instead of openclipart-svg's")
    parser.add_argument("--rsvg-convert", help="an rsvg-convert to run instead of the unpacked librsvg2-bin's")
    parser.add_argument("--size", type=int, default=368, help="the longer side of each PNG, in pixels")
    parser.add_argument("--background", choices=("white", "transparent"), default="white")
    parser.add_argument("--limit", type=int, default=0, help="most SVGs, a seeded sample (0: all)")
    parser.add_argument("--most-repeats", type=int, default=8, help="a title or description on more SVGs is no caption")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="rsvg-convert processes at once")
    arguments = parser.parse_args(argv)
    started = time.monotonic()
    local = {"openclipart-svg": arguments.svg_root, **{package: arguments.rsvg_convert for package in RENDERER_PACKAGES}}
    fetched = debian_archive.fetch_unless_local("clipart_pairs", local, arguments.scratch, arguments.refresh)
    svg_root = pathlib.Path(arguments.svg_root or fetched["openclipart-svg"]["root"] / SVG_ROOT)
    rsvg_convert, environment, version = renderer(fetched, arguments.rsvg_convert)
    paths = sorted(svg_root.rglob("*.svg"))
    if not paths:
        sys.exit(f"clipart_pairs: no SVGs under {svg_root}")
    if arguments.limit and arguments.limit < len(paths):
        paths = sorted(random.Random(arguments.seed).sample(paths, arguments.limit))
    names = {path: path.relative_to(svg_root).as_posix() for path in paths}
    captions, dropped = queries({names[path]: metadata(path) for path in paths}, arguments.most_repeats)
    command = renderer_command(rsvg_convert, arguments.size, arguments.background)
    captioned = [path for path in paths if names[path] in captions]
    images, groups, stems = {}, {}, set()
    debian_archive.fresh_image_folder(arguments.output)
    with concurrent.futures.ThreadPoolExecutor(max(1, arguments.jobs)) as pool:
        # Saved in order as they come, so only the images still rendering are held at once.
        rendered = pool.map(lambda path: rasterize(path, command, environment, arguments.size, arguments.background), captioned)
        for path, (image, reason) in zip(captioned, rendered):
            name = names[path]
            if image is None:
                dropped[reason] += 1
                continue
            stem = debian_archive.safe_name(name[: -len(".svg")].replace("/", "-"))
            while stem in stems:  # two names that only differ in unsafe characters
                stem += "_"
            stems.add(stem)
            positive = debian_archive.save_png(image, arguments.output, stem, images)
            groups[name] = [{"query": query, "positives": [positive], "source": name} for query in captions[name]]
    debian_archive.build_image_corpus(
        "clipart_pairs", "clipart", arguments, groups, images,
        {"svgs": len(paths), "svgs_rendered": len(groups), "dropped": dict(sorted(dropped.items())),
         "groups": len(groups), "group": "the SVG file",
         "query": "the title, and the description as a second record where it differs; no language tag (mostly "
                  "English, some Italian, French, Spanish; dc:language says en for nearly all)",
         "image": f"rendered by {version} to at most {arguments.size} px on the longer side, "
                  f"{'on white (RGB)' if arguments.background == 'white' else 'transparent (RGBA)'}",
         "limit": arguments.limit},
        debian_archive.image_source(fetched, local), started)


if __name__ == "__main__":
    main()
