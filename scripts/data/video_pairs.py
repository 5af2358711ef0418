#!/usr/bin/env python3
"""video_pairs.py: caption -> video clip pairs. Most clips are drawn by FFmpeg's generators (lavfi),
so their captions are known by construction: a coloured shape moving one way over a background,
"a red circle moving left on a blue background", "a white square standing still over a Mandelbrot
fractal". A (colour, shape, motion) triple is one group, so dev and test hold triples never seen
in train (each colour, shape and motion is); start, speed and path vary by a seeded draw. The real
clips beside them: python3-imageio's cockatoo and Newton's cradle (captions from imageio's own
list of its files) and GNOME help's screencast, cut at its timed subtitles (gnome-user-docs), each
source one group. WebM/VP9, 128 px, 8 fps. Writes data/video/{train,dev,test}.jsonl, clips/*.webm,
clips.sha256 and manifest.json. Deterministic for a seed. See docs/data.md.
"""

import collections
import html
import itertools
import pathlib
import random
import re
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import av_corpus  # noqa: E402
import debian_archive  # noqa: E402

SIZE = 128
FPS = 8
COLOURS = ("red", "green", "blue", "yellow", "white", "black")
SHAPES = {"square": (32, 32), "circle": (32, 32), "horizontal bar": (48, 14), "vertical bar": (14, 48)}
MOTIONS = ("moving left", "moving right", "moving up", "moving down", "standing still")
# Backgrounds that are not one colour: caption words and the lavfi source that draws them.
GENERATED = {"a test pattern": "testsrc=size={size}:rate={fps}", "colour bars": "smptebars=size={size}:rate={fps}",
             "a Mandelbrot fractal": "mandelbrot=size={size}:rate={fps}",
             "the game of life": "life=size={size}:rate={fps}:mold=10:ratio=0.3:seed={seed}:death_color=#203040:life_color=#a0a0a0"}
# VP9 in WebM with one thread and bit-exact muxing: the same filter graph gives the same bytes.
VP9_OPTIONS = ["-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8", "-row-mt", "0", "-threads", "1",
               "-crf", "36", "-b:v", "0", "-g", str(4 * FPS), "-pix_fmt", "yuv420p", "-an", "-map_metadata", "-1",
               "-fflags", "+bitexact", "-flags:v", "+bitexact"]
IMAGEIO_IMAGES = "usr/lib/python3/dist-packages/imageio/resources/images"
IMAGEIO_REQUEST = "usr/lib/python3/dist-packages/imageio/core/request.py"
GNOME_HELP = "usr/share/help/C/gnome-help"
SEGMENT_SECONDS = 3.0  # a real clip is cut into pieces of at most this
GENERATED_SECONDS = 2.0
BATCH = 16  # clips one ffmpeg writes: its start-up costs more than a small clip's encoding


def generated_specs(limit, seed):
    """[(caption, {colour, shape, motion, background})]: every combination (a shape never on its own
    colour), a seeded `limit` of them (0: all), in a fixed order."""
    backgrounds = [f"on a {colour} background" for colour in COLOURS] + [f"over {words}" for words in GENERATED]
    specs = []
    for colour, shape, motion, background in itertools.product(COLOURS, SHAPES, MOTIONS, backgrounds):
        if background != f"on a {colour} background":
            specs.append((f"a {colour} {shape} {motion} {background}",
                          {"colour": colour, "shape": shape, "motion": motion, "background": background}))
    if limit and limit < len(specs):
        chosen = set(random.Random(seed).sample(range(len(specs)), limit))
        specs = [spec for index, spec in enumerate(specs) if index in chosen]
    return specs


def motion_path(motion, width, height, rng):
    """(x expression, y expression) of ffmpeg's overlay in t: a straight path the caption names, its
    start, length and cross position drawn from `rng`, inside a 4-pixel margin."""
    margin, seconds = 4, GENERATED_SECONDS
    span_x, span_y = SIZE - width - 2 * margin, SIZE - height - 2 * margin
    along = rng.uniform(0.6, 1.0)
    cross_x, cross_y = margin + rng.randrange(span_x + 1), margin + rng.randrange(span_y + 1)
    if motion == "standing still":
        return str(cross_x), str(cross_y)
    horizontal = motion in ("moving left", "moving right")
    span = span_x if horizontal else span_y
    start = margin + rng.uniform(0, (1 - along) * span)
    travel = along * span
    if motion in ("moving left", "moving up"):
        start, travel = start + travel, -travel
    path = f"{start:.2f}+{travel:.2f}*t/{seconds}"
    return (path, str(cross_y)) if horizontal else (str(cross_x), path)


def generated_graph(attributes, rng):
    """([input arguments], filter chain) that draw one generated clip of GENERATED_SECONDS; the chain
    reads its inputs as {0} and {1}."""
    width, height = SHAPES[attributes["shape"]]
    size = f"{SIZE}x{SIZE}"
    background = attributes["background"]
    if background.startswith("on a "):
        source = f"color=c={background.split()[2]}:size={size}:rate={FPS}"
    else:
        source = GENERATED[background[len("over "):]].format(size=size, fps=FPS, seed=rng.randrange(1 << 31))
    shape = f"color=c={attributes['colour']}:size={width}x{height}:rate={FPS},format=rgba"
    if attributes["shape"] == "circle":
        radius = width / 2
        shape += f",geq=r='r(X,Y)':g='g(X,Y)':b='b(X,Y)':a='255*lte(hypot(X-{radius - 0.5},Y-{radius - 0.5}),{radius})'"
    x, y = motion_path(attributes["motion"], width, height, rng)
    inputs = [["-f", "lavfi", "-t", str(GENERATED_SECONDS), "-i", graph] for graph in (source, shape)]
    return inputs, f"[{{0}}][{{1}}]overlay=x='{x}':y='{y}':shortest=1,format=yuv420p"


def imageio_captions(root):
    """{file name: caption} from imageio's own list of its files ("cockatoo.mp4": "Video file of a
    cockatoo" -> "a cockatoo"), for the video files it ships."""
    text = (pathlib.Path(root) / IMAGEIO_REQUEST).read_text(encoding="utf-8")
    captions = {}
    for name, description in re.findall(r'"([\w.-]+\.(?:mp4|gif|webm|avi|mov))":\s*"([^"]+)"', text):
        caption = re.sub(r"^(?:Video file|Animated GIF|Movie|Animation) of ", "", description).strip()
        if (pathlib.Path(root) / IMAGEIO_IMAGES / name).is_file() and caption:
            captions[name] = caption
    return captions


def subtitle_segments(page):
    """[(begin s, end s, text)] of the TTML subtitles inside a Mallard page's <media type="video">
    (commented out or not), and the video's src; tags stripped, whitespace collapsed."""
    text = pathlib.Path(page).read_text(encoding="utf-8")
    found = re.search(r'<media[^>]*type="video"[^>]*src="([^"]+)"[^>]*>(.*?)</media>', text, re.S)
    if not found:
        return None, []
    segments = []
    for begin, end, body in re.findall(r'<tt:div begin="([\d.]+)s" end="([\d.]+)s">(.*?)</tt:div>', found.group(2), re.S):
        words = " ".join(html.unescape(re.sub(r"<[^>]+>", "", body)).split())
        if words:
            segments.append((float(begin), float(end), words))
    return found.group(1), segments


def gnome_clips(root):
    """[(caption, video file, begin, end, source)] of every gnome-help page with subtitled video."""
    folder = pathlib.Path(root) / GNOME_HELP
    clips = []
    for page in sorted(folder.glob("*.page")):
        src, segments = subtitle_segments(page)
        if src and (folder / src).is_file():
            clips.extend((words, folder / src, begin, end, f"gnome-user-docs:{page.name}") for begin, end, words in segments)
    return clips


def real_jobs(imageio_root, gnome_root):
    """[(caption, file, start s, seconds, attributes)] of the real clips: each file or subtitle cut
    into pieces of at most SEGMENT_SECONDS, each piece captioned as its whole."""
    jobs = []
    if imageio_root:
        for name, caption in sorted(imageio_captions(imageio_root).items()):
            path = pathlib.Path(imageio_root) / IMAGEIO_IMAGES / name
            seconds = float(av_corpus.probe(path)["format"]["duration"])
            for index in range(max(1, int(seconds // SEGMENT_SECONDS))):
                jobs.append((caption, path, index * SEGMENT_SECONDS, SEGMENT_SECONDS,
                             {"source": f"python3-imageio:{name}", "begin": index * SEGMENT_SECONDS}))
    if gnome_root:
        for caption, path, begin, end, source in gnome_clips(gnome_root):
            for start in [begin + step * SEGMENT_SECONDS for step in range(max(1, int((end - begin) // SEGMENT_SECONDS)))]:
                jobs.append((caption, path, start, min(SEGMENT_SECONDS, end - start), {"source": source, "begin": start}))
    return jobs


def real_input(path, start, seconds):
    """([input arguments], chain) of a piece of a real file, fitted into SIZE x SIZE (aspect kept, even
    sides) at FPS. Decoded from the file's start on one thread and trimmed: a seek into cockatoo.mp4
    lands where its frames do not decode alone, and threads conceal those errors differently each run."""
    return [["-threads", "1", "-i", str(path)]], (
        f"[{{0}}:v:0]trim=start={start:g}:duration={seconds:g},setpts=PTS-STARTPTS,fps={FPS},"
        f"scale={SIZE}:{SIZE}:force_original_aspect_ratio=decrease:force_divisible_by=2,format=yuv420p")


def encode_batch(batch, output):
    """One ffmpeg writing each (stem, inputs, chain) of `batch` as output/clips/<stem>.webm: the
    inputs one after another, each chain's {n} renumbered to its own, each chain's end mapped to its file."""
    arguments, chains, outputs, first = [], [], [], 0
    for index, (stem, inputs, chain) in enumerate(batch):
        arguments += [argument for one in inputs for argument in one]
        chains.append(chain.format(*range(first, first + len(inputs))) + f"[v{index}]")
        outputs += ["-map", f"[v{index}]", *VP9_OPTIONS, str(pathlib.Path(output) / av_corpus.CLIP_FOLDER / f"{stem}.webm")]
        first += len(inputs)
    av_corpus.run_ffmpeg([*arguments, "-filter_complex", ";".join(chains), *outputs],
                         batch[0][0] if len(batch) == 1 else f"a batch of {len(batch)} clips")


def encode(jobs, output, clips, script):
    """Writes each (stem, caption, inputs, chain, record extra, group, seconds or None) as
    output/clips/<stem>.webm, BATCH drawn clips to an ffmpeg, batches on parallel threads (a failed
    batch is redone clip by clip so the error names its clip); a clip of unknown seconds (a real one,
    cut from a file) gets its own ffmpeg, and its seconds from ffprobe.
    Returns {group: [record]}, {path: seconds} and {reason: count} of what failed."""
    done = [0]

    def one_batch(batch):
        try:
            encode_batch([(stem, inputs, chain) for stem, _, inputs, chain, *_ in batch], output)
            errors = [None] * len(batch)
        except av_corpus.MediaError:
            errors = []
            for stem, _, inputs, chain, *_ in batch:
                try:
                    encode_batch([(stem, inputs, chain)], output)
                    errors.append(None)
                except av_corpus.MediaError as error:
                    errors.append(str(error).split(": ", 1)[-1])
        results = []
        for (stem, caption, _, _, extra, group, seconds), error in zip(batch, errors):
            relative_path = f"{av_corpus.CLIP_FOLDER}/{stem}.webm"
            if error is None and seconds is None:
                try:
                    seconds = float(av_corpus.probe(pathlib.Path(output) / relative_path)["format"]["duration"])
                except (av_corpus.MediaError, KeyError, ValueError) as failure:
                    error = str(failure).split(": ", 1)[-1]
            results.append((None if error else relative_path, caption, extra, group, error or seconds))
        done[0] += len(batch)
        av_corpus.progress(script, done[0], len(jobs), every=1)
        return results

    # A real clip goes alone: it decodes a whole file, which would hold up its batch-mates.
    drawn = [job for job in jobs if job[-1] is not None]
    batches = [(drawn[start:start + BATCH],) for start in range(0, len(drawn), BATCH)]
    batches += [([job],) for job in jobs if job[-1] is None]
    groups, seconds_of, failed = collections.defaultdict(list), {}, collections.Counter()
    for relative_path, caption, extra, group, seconds in (result for results in av_corpus.parallel(one_batch, batches)
                                                          for result in results):
        if relative_path is None:
            failed[seconds] += 1
            continue
        clips[relative_path] = debian_archive.sha256_of(pathlib.Path(output) / relative_path)
        seconds_of[relative_path] = seconds
        groups[group].append({"query": caption, "positives": [{"video": relative_path}], **extra})
    return groups, seconds_of, dict(sorted(failed.items()))


def main(argv=None):
    parser = debian_archive.corpus_parser(__doc__.split("\n\n")[0], "video", fractions=False)
    parser.add_argument("--dev-fraction", type=float, default=0.1)
    parser.add_argument("--test-fraction", type=float, default=0.1)
    parser.add_argument("--limit", type=int, default=600, help="at most this many generated clips (0: all 1 080)")
    parser.add_argument("--no-real", action="store_true", help="generated clips only (no packages fetched)")
    parser.add_argument("--imageio-root", help="a folder to read instead of python3-imageio's (its usr/lib/python3/...)")
    parser.add_argument("--gnome-help-root", help="a folder to read instead of gnome-user-docs' (its usr/share/help/C/...)")
    arguments = parser.parse_args(argv)
    started = time.monotonic()
    av_corpus.require_tools()
    local = {} if arguments.no_real else {"python3-imageio": arguments.imageio_root,
                                          "gnome-user-docs": arguments.gnome_help_root}
    fetched = debian_archive.fetch_unless_local("video_pairs", local, arguments.scratch, arguments.refresh)
    roots = {package: local[package] or fetched[package]["root"] for package in local}
    jobs = []
    for caption, attributes in generated_specs(arguments.limit, arguments.seed):
        rng = random.Random(f"{arguments.seed}:{caption}")
        group = f"{attributes['colour']} {attributes['shape']} {attributes['motion']}"
        jobs.append((debian_archive.safe_name(caption), caption, *generated_graph(attributes, rng),
                     {"lang": "en", **attributes, "source": "generated"}, group, GENERATED_SECONDS))
    try:
        for caption, path, start, length, extra in real_jobs(roots.get("python3-imageio"), roots.get("gnome-user-docs")):
            stem = debian_archive.safe_name(f"{extra['source'].replace(':', '_')}_{extra['begin']:g}")
            jobs.append((stem, caption, *real_input(path, start, length), {"lang": "en", **extra}, extra["source"], None))
        clips = {}
        av_corpus.fresh_clip_folder(arguments.output)
        groups, seconds, failed = encode(jobs, arguments.output, clips, "video_pairs")
    except (OSError, ValueError, av_corpus.MediaError) as error:
        sys.exit(f"video_pairs: {error}")
    per_source = collections.Counter(record["source"].split(":")[0] for group in groups.values() for record in group)
    av_corpus.build_clip_corpus(
        "video_pairs", "video", arguments, dict(groups), clips, seconds,
        {"synthetic": {"generated": True, "python3-imageio": False, "gnome-user-docs": False},
         "clips_per_source": dict(sorted(per_source.items())), "failed": failed,
         "video": f"WebM/VP9, at most {SIZE}x{SIZE}, {FPS} fps; generated clips 2 s, real ones cut to at most {SEGMENT_SECONDS:g} s",
         "vocabulary": {"colours": list(COLOURS), "shapes": list(SHAPES), "motions": list(MOTIONS),
                        "backgrounds": [f"a {colour} background" for colour in COLOURS] + list(GENERATED)},
         "groups": len(groups), "group": "generated: the (colour, shape, motion) triple; real: the source file"},
        debian_archive.image_source(fetched, local), started, side="video", describe=held_out_triples)


def held_out_triples(records):
    """{"held_out_triples": {split: [triple]}}: the generated (colour, shape, motion) triples of dev and test."""
    return {"held_out_triples": {split: sorted({f"{record['colour']} {record['shape']} {record['motion']}"
                                                for record in records[split] if record["source"] == "generated"})
                                 for split in ("dev", "test")}}


if __name__ == "__main__":
    main()
