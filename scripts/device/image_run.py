#!/usr/bin/env python3
"""image_run.py: issue 14's run on one GPU. Trains tiny on mixtures/images.json (image <-> caption
beside the gettext pairs, weighted to about half of the cells) for --rows rows a step and, at the
same time on the same card and for the same steps, two text-only controls
(mixtures/images_text_control.json, the same gettext pairs): `text-half` with half the rows (about
the text the image run sees) and `text-all` with all of them (the image run's cells, all text).
Then scores each on the held-out test splits with uform_eval on the GPU: each image corpus,
caption -> image and back (chance beside), and the gettext pairs (TF-IDF beside) for the text
recall the images must not cost. Prints one table and writes OUT/image_run.json.

The step count fills the time given: a probe runs all three for --probe steps at once and times
their steps (log.jsonl's seconds, past the first quarter), then each gets the steps that fit.

    python3 scripts/device/image_run.py --build BUILD [--seconds 300] [--rows 32] [--steps N] [--seed 0]
                                        [--runs images,text-half,text-all] [--gettext-limit 5000] [--tier tiny]
                                        [--device cuda] [--out DIR]

A run may name its peak learning rate, `images@7e-4` (the tier's default otherwise), so one call can
hold the image run and its controls each at several rates: a mixture's cost to the text pairs is
then read between each side's best rate, not at one rate that suits one side. `--seeds 0,1` makes
every run once per seed (`images@7e-4/s1`); the summary averages a kind and rate over its seeds.
An image run may also scale its image pairs' rows of the loss, `images~0.5@7e-4` (mixtures/images.json
with `loss_weight` 0.5 on the image sources --weighted names, every one by default; the gettext pairs
at 1): a cap on the image pairs' share of the shared weights' updates, while the batches stay the same.
And it may end on the text alone, `images^0.2@7e-4`: the last 20% of its steps are a second
uform_base on the text-only mixture at the image run's full rows (`--init-from` the first part with
`--keep-head`, so the pool and SigLIP's scalars carry on; a new warm-up and decay), the same steps
and rows in all as the other runs. `images^0.2+0.1@7e-4` keeps the pictures in view in that tail:
it trains on the image run's own mixture with the image sources' sampling weights times 0.1 (about
a tenth of the cells pictures instead of half), so that a text tail does not wipe out what the
pictures learned.

Before training, the loader alone (uform_bench_loader on mixtures/images.json at the image run's rows
and image cache, --loader-seconds each way) gives the headroom the issue asks of it: the prefetcher's
batches/s times each image run's step seconds (the loader's rate when nothing else runs, against
the step's while the runs share the card and the host).

The corpora must be in data/ (gpu.sh imagerun unpacks scripts/data/device_pack.py's archive there).
"""

import argparse
import json
import os
import pathlib
import shlex
import signal
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import compare_evals  # noqa: E402  (the paired comparison of two runs' gettext recall)
RUNS = {"images": ("mixtures/images.json", 1.0), "text-half": ("mixtures/images_text_control.json", 0.5),
        "text-all": ("mixtures/images_text_control.json", 1.0)}  # name: (mixture, share of --rows)
IMAGE_SETS = ("emoji", "flags", "clipart", "fashion")


def parse_run(run, seed=0):
    """(kind, learning rate or None, seed) of a run: `images`, `text-half@7e-4`, `images~0.5^0.2+0.1@7e-4/s1`."""
    run, _, seeded = run.partition("/s")
    kind, _, rate = run.partition("@")
    kind, _, tail = kind.partition("^")
    tail, _, refresh = tail.partition("+")
    kind, _, weight = kind.partition("~")
    if kind not in RUNS:
        raise ValueError(f"{run}: the run is one of {', '.join(RUNS)}, optionally ~LOSS_WEIGHT (images) and @RATE")
    if rate and not float(rate) > 0:
        raise ValueError(f"{run}: the learning rate must be positive")
    if weight and (kind != "images" or not 0 < float(weight) <= 1000):
        raise ValueError(f"{run}: ~LOSS_WEIGHT is an image run's image-pair loss weight, in (0, 1000]")
    if tail and (kind != "images" or not 0 < float(tail) < 1):
        raise ValueError(f"{run}: ^TAIL is the share of an image run's steps spent on the text alone, in (0, 1)")
    if refresh and (not tail or not 0 < float(refresh) < 1):
        raise ValueError(f"{run}: ^TAIL+SHARE scales the image sources' weights in the tail by SHARE, in (0, 1)")
    return kind, (rate or None), int(seeded) if seeded else seed


def loss_weight_of(run):
    """The image pairs' loss weight of `images~0.5@7e-4/s1` (0.5), None without one."""
    weight = run.partition("/s")[0].partition("@")[0].partition("^")[0].partition("~")[2]
    return float(weight) if weight else None


def tail_of(run):
    """The share of `images^0.2@7e-4/s1`'s steps spent on the text alone (0.2), None without one."""
    tail = run.partition("/s")[0].partition("@")[0].partition("^")[2].partition("+")[0]
    return float(tail) if tail else None


def refresh_of(run):
    """The factor on the image sources' weights in `images^0.2+0.1@7e-4`'s tail (0.1), None for a text-only tail."""
    refresh = run.partition("/s")[0].partition("@")[0].partition("^")[2].partition("+")[2]
    return float(refresh) if refresh else None


def label_of(run):
    """A run's kind as the summary groups it: `images~0.5` and `images^0.2` apart from `images`."""
    weight, tail, refresh = loss_weight_of(run), tail_of(run), refresh_of(run)
    return parse_run(run)[0] + (f"~{weight:g}" if weight else "") + (f"^{tail:g}" if tail else "") + (f"+{refresh:g}" if refresh else "")


def folder_of(name):
    """A run's folder and file name: `images~0.5^0.2+0.1@7e-4/s1` -> `images-w0.5-t0.2-m0.1-lr7e-4-s1` (no '@',
    '~', '^', '+' or '/' in $OUT)."""
    return name.replace("~", "-w").replace("^", "-t").replace("+", "-m").replace("@", "-lr").replace("/", "-")


def first_folder_of(name):
    """Where a run trains on its own mixture: the run's folder, or for a run with a text tail the folder
    of its first part (the tail writes the run's folder)."""
    return folder_of(name) + ("-images" if tail_of(name) else "")


def weighted_mixture(mixture, weight, sources, target):
    """`mixture` with loss_weight `weight` on `sources`, its paths made absolute, at `target`."""
    body = json.loads((ROOT / mixture).read_text())
    for source in body["sources"]:
        source["path"] = str(((ROOT / mixture).parent / source["path"]).resolve())
        if source["name"] in sources:
            source["loss_weight"] = weight
    body["description"] = f"{mixture} with the rows of the loss of {', '.join(sources)} at {weight:g} (image_run.py)"
    target.write_text(json.dumps(body, indent=1))
    return str(target)


def refreshed_mixture(mixture, factor, target):
    """`mixture` (a path under ROOT or absolute) with its image sources' sampling weights times `factor`, at `target`."""
    path = mixture if pathlib.Path(mixture).is_absolute() else ROOT / mixture
    body = json.loads(pathlib.Path(path).read_text())
    for source in body["sources"]:
        source["path"] = str((pathlib.Path(path).parent / source["path"]).resolve())
        if source["name"] in IMAGE_SETS:
            source["weight"] = source.get("weight", 1.0) * factor
    body["description"] = f"{mixture} with the image sources' weights times {factor:g}: a text tail that keeps the pictures in view (image_run.py)"
    target.write_text(json.dumps(body, indent=1))
    return str(target)


def commands(build, name, steps, args, folder, tail=True):
    """The uform_base commands of one run, in order: one, or with a text tail (and `tail`) the run's
    own mixture for the first steps, then the text-only mixture at full rows from it (or with `+SHARE`,
    the run's mixture with the pictures' weights times SHARE)."""
    kind, rate, seed = parse_run(name, args.seed)
    mixture, share = RUNS[kind]
    if loss_weight_of(name):
        mixture = weighted_mixture(mixture, loss_weight_of(name), args.weighted.split(","), folder / f"{folder_of(name)}.mixture.json")
    rest = int(round(steps * tail_of(name))) if tail and tail_of(name) else 0
    rest = min(rest, steps - 1)
    first = steps - rest
    common = ["--device", args.device, "--seed", str(seed), "--quiet"] + (["--learning-rate", rate] if rate else [])
    found = [[str(build / "uform_base"), "--mixture", mixture, "--tier", args.tier, "--rows", str(max(1, round(args.rows * share))),
              "--steps", str(first), "--image-cache-mb", str(args.image_cache_mb), "--save-every", str(max(1, first // 4)),
              "--output", str(folder / (first_folder_of(name) if rest else folder_of(name))), *common]]
    if rest:
        tail_mixture, pictures = RUNS["text-all"][0], []
        if refresh_of(name):
            tail_mixture = refreshed_mixture(mixture, refresh_of(name), folder / f"{folder_of(name)}.tail.json")
            pictures = ["--image-cache-mb", str(args.image_cache_mb)]
        found.append([str(build / "uform_base"), "--mixture", tail_mixture, "--init-from", str(folder / first_folder_of(name)),
                      "--keep-head", "--rows", str(args.rows), "--steps", str(rest), "--save-every", str(max(1, rest // 4)),
                      *pictures, "--output", str(folder / folder_of(name)), *common])
    return found


def train(build, name, steps, args, folder, tail=True):
    """A started process for one run: its uform_base commands one after the other, in a session of their
    own so that wait_all's SIGTERM reaches the one running."""
    script = " && ".join(shlex.join(command) for command in commands(build, name, steps, args, folder, tail))
    log = open(folder / f"{folder_of(name)}.log", "w")
    return subprocess.Popen(["sh", "-c", script], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def signal_group(process, number):
    """Signals a run's process group; one that has just ended (or a process started without a session of
    its own) is signalled alone, or not at all."""
    try:
        os.killpg(process.pid, number)
    except ProcessLookupError:
        if process.poll() is None:
            process.send_signal(number)


def wait_all(processes, folder, deadline=None):
    """Waits for every run; past the deadline (time.time()) stops them with SIGTERM (uform_base ends
    the step in flight and saves a checkpoint), and returns the names of the runs cut short."""
    cut = []
    for name, process in processes.items():
        try:
            code = process.wait(timeout=None if deadline is None else max(1.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            signal_group(process, signal.SIGTERM)
            try:
                process.wait(timeout=120)
            except subprocess.TimeoutExpired:  # a save that hangs: its last periodic checkpoint stays
                signal_group(process, signal.SIGKILL)
                process.wait()
            cut.append(name)
            continue
        if code != 0:
            sys.exit(f"image_run: the {name} run failed:\n" + (folder / f"{folder_of(name)}.log").read_text()[-3000:])
    return cut


def step_seconds(folder):
    """Median seconds a step took, past the first few (graph capture, cuDNN's plans)."""
    lines = [json.loads(line) for line in (folder / "log.jsonl").read_text().splitlines() if line.strip()]
    return statistics.median(line["seconds"] for line in lines[len(lines) // 4:])


def evaluate(build, run, pairs, args, out, extra=()):
    """uform_eval's JSON for one checkpoint on one test file."""
    target = out / f"eval-{run.name}-{pathlib.Path(pairs).parent.name}.json"
    command = [str(build / "uform_eval"), str(run), "--pairs", pairs, "--device", args.device, "--json", str(target), "--quiet", *extra]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"image_run: {' '.join(command)} failed:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
    return json.loads(target.read_text())


def rows_of(report, method, width=None):
    """{direction: recall@1, recall@10} for one method's language-wide rows (widest width of the model)."""
    rows = [r for r in report["rows"] if r["method"] == method and r["language"] == "all" and r["direction"] != "both"]
    if method == "model":
        width = width or max(r["width"] for r in rows)
        rows = [r for r in rows if r["width"] == width]
    return {r["direction"]: {"r1": r["recall@1"], "r10": r["recall@10"], "mrr": r["mrr"], "placements": r.get("placements")}
            for r in rows}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", required=True)
    parser.add_argument("--seconds", type=float, default=300, help="training time of the two runs together (default 300)")
    parser.add_argument("--rows", type=int, default=32, help="rows of the image run and text-all (default 32)")
    parser.add_argument("--steps", type=int, default=0, help="steps of each run (default: what --seconds allows)")
    parser.add_argument("--probe", type=int, default=60)
    parser.add_argument("--tier", default="tiny")
    parser.add_argument("--device", default="cuda", help="cuda (default), or cpu for a quick look at the script itself")
    parser.add_argument("--image-cache-mb", type=int, default=16384)
    parser.add_argument("--gettext-limit", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0, help="every run's seed (default 0): another seed repeats the comparison")
    parser.add_argument("--seeds", default="", help="make every run once per seed of this list instead (--runs X becomes X/s0, X/s1, ...)")
    parser.add_argument("--runs", default=",".join(RUNS),
                        help="the runs to make, of images,text-half,text-all, each optionally @RATE, images optionally ~LOSS_WEIGHT "
                             "(default all three at the tier's rate)")
    parser.add_argument("--weighted", default=",".join(IMAGE_SETS),
                        help=f"the image sources an images~W run weighs by W (default all: {','.join(IMAGE_SETS)})")
    parser.add_argument("--loader-seconds", type=float, default=5.0,
                        help="seconds of uform_bench_loader's each mode before training, for the loader's headroom (0: none)")
    parser.add_argument("--out", default=os.environ.get("OUT", "/tmp/uform-out"))
    args = parser.parse_args()
    runs = args.runs.split(",")
    if args.seeds:
        runs = [f"{run}/s{int(seed)}" for seed in args.seeds.split(",") for run in runs]
    try:
        kinds = [parse_run(run)[0] for run in runs]
    except ValueError as error:
        parser.error(str(error))
    if "images" not in kinds or len(set(runs)) != len(runs):
        parser.error(f"--runs takes at least one images run and no run twice, not {args.runs}")
    build, out = (ROOT / args.build).resolve(), pathlib.Path(args.out)
    folder = pathlib.Path("/tmp/uform-image-run")
    subprocess.run(["rm", "-rf", str(folder)], check=True)
    folder.mkdir(parents=True)
    out.mkdir(parents=True, exist_ok=True)
    evals = folder / "evals"  # uform_eval's reports stay here: the device brings back 8 files of $OUT
    evals.mkdir()
    if not set(args.weighted.split(",")) <= set(IMAGE_SETS):
        parser.error(f"--weighted names image sources of {', '.join(IMAGE_SETS)}, not {args.weighted}")
    report = {"weighted": args.weighted, "rows": args.rows, "columns": 1024, "tier": args.tier, "device": args.device, "seed": args.seed, "runs": runs, "wall": {}}

    if args.loader_seconds > 0:
        report["loader"] = loader_rate(build, args)
        print(f"image_run: the loader alone, {args.rows} rows of mixtures/images.json: "
              f"{report['loader']['batches_per_s']:.1f} batches/s through the prefetcher", flush=True)
    started = time.time()
    steps = args.steps
    if not steps:
        probe = folder / "probe"
        probe.mkdir()
        wait_all({name: train(build, name, args.probe, args, probe, tail=False) for name in runs}, probe)
        together = max(step_seconds(probe / folder_of(name)) for name in runs)
        steps = max(args.probe, int(args.seconds / together))
        report["probe"] = {"step_seconds_together": together, "wall": time.time() - started}
        print(f"image_run: probe: a step takes up to {together * 1e3:.1f} ms with all {len(runs)} running; {steps} steps each", flush=True)
    report["steps"] = steps
    began = time.time()
    report["cut_short"] = wait_all({name: train(build, name, steps, args, folder) for name in runs}, folder,
                                   began + args.seconds * 1.2)
    report["wall"]["train"] = time.time() - began
    if report["cut_short"]:
        print(f"image_run: {', '.join(report['cut_short'])} ran past 1.2 x --seconds and were stopped: "
              "their last checkpoints are scored", flush=True)
    for name in runs:
        if not (folder / folder_of(name)).exists():  # stopped before its text tail began: its first part is scored
            (folder / folder_of(name)).symlink_to(folder / first_folder_of(name))
        report[f"{name}_step_seconds"] = step_seconds(folder / first_folder_of(name))
        report[f"{name}_log_tail"] = (folder / f"{folder_of(name)}.log").read_text()[-600:]

    began = time.time()
    table, table_tfidf = [], {}
    for name in [run for run in runs if parse_run(run)[0] == "images"]:
        for corpus in IMAGE_SETS:
            result = evaluate(build, folder / folder_of(name), f"data/{corpus}/test.jsonl", args, evals)
            model, chance = rows_of(result, "model"), result["chance"]["recall@1"]
            for direction, row in model.items():
                table.append({"set": corpus, "pairs": result["count"], "direction": direction, "run": name,
                              "r1": row["r1"], "r10": row["r10"], "baseline": "chance", "baseline_r1": chance,
                              "times_baseline": row["r1"] / chance if chance else None})
    gettext = {}  # run -> its gettext report, placements included
    for name in runs:
        extra = ("--limit", str(args.gettext_limit), "--placements") + (("--no-tfidf",) if name != runs[0] else ())
        result = gettext[name] = evaluate(build, folder / folder_of(name), "data/gettext/test.jsonl", args, evals, extra)
        report[f"{name}_checkpoint"] = result["checkpoint"]
        model, tfidf = rows_of(result, "model"), rows_of(result, "tfidf")
        for direction, row in model.items():
            base = tfidf.get(direction, {"r1": None})["r1"] if tfidf else table_tfidf.get(direction)
            table.append({"set": "gettext", "pairs": result["count"], "direction": direction, "run": name,
                          "r1": row["r1"], "r10": row["r10"], "baseline": "tf-idf", "baseline_r1": base,
                          "times_baseline": None})
        if tfidf:
            table_tfidf = {direction: row["r1"] for direction, row in tfidf.items()}
    report["wall"]["eval"] = time.time() - began
    report["table"] = table
    times = ", ".join(f"{name} {report[name + '_step_seconds'] * 1e3:.1f} ms" for name in runs)
    seeds = args.seeds or args.seed
    print(f"\n{args.tier}, rows of 1024 columns, {steps} steps each, seed {seeds}, the {len(runs)} runs at once on one GPU "
          f"(a step: {times})")
    for name in report["cut_short"]:
        print(f"{name} was stopped and scored at {pathlib.Path(report[name + '_checkpoint']).name} of {steps} steps")
    print(f"{'set':8} {'pairs':>6} {'direction':16} {'run':15} {'R@1':>7} {'R@10':>7} {'baseline':>9} {'its R@1':>8} {'x':>7}")
    for row in table:
        times = f"{row['times_baseline']:.0f}x" if row["times_baseline"] is not None else "-"
        base = f"{row['baseline_r1']:.4f}" if row["baseline_r1"] is not None else "-"
        print(f"{row['set']:8} {row['pairs']:>6} {row['direction']:16} {row['run']:15} {row['r1']:7.4f} {row['r10']:7.4f} "
              f"{row['baseline']:>9} {base:>8} {times:>7}")
    scores = {}  # (kind, rate, direction) -> gettext R@1 of each seed
    for row in table:
        if row["set"] == "gettext":
            _, rate, _ = parse_run(row["run"], args.seed)
            scores.setdefault((label_of(row["run"]), rate or "default", row["direction"]), []).append(row["r1"])
    best = {}  # (kind, direction) -> (mean R@1 over seeds, rate, seeds): each kind at its best rate
    for (kind, rate, direction), values in scores.items():
        best[(kind, direction)] = max(best.get((kind, direction), (-1.0, "", 0)), (statistics.mean(values), rate, len(values)))
    report["gettext_best"] = [{"kind": kind, "direction": direction, "r1": r1, "rate": rate, "seeds": count}
                              for (kind, direction), (r1, rate, count) in best.items()]
    if len({kind for kind, _ in best}) > 1:
        print("\ngettext R@1, each kind of run at its best learning rate (mean over seeds):")
        for (kind, direction), (r1, rate, count) in sorted(best.items(), key=lambda item: (item[0][1], item[0][0])):
            print(f"  {direction:16} {kind:11} {r1:.4f} (rate {rate}, {count} seed{'s' if count > 1 else ''})")
    if "loader" in report:
        report["loader"]["headroom"] = {name: report["loader"]["batches_per_s"] * report[f"{name}_step_seconds"]
                                        for name in runs if parse_run(name)[0] == "images"}
        print("\nthe loader's headroom over each image run's step (prefetcher batches/s x step seconds):")
        for name, headroom in report["loader"]["headroom"].items():
            print(f"  {name:24} {headroom:.1f}x ({report['loader']['batches_per_s']:.1f} batches/s, "
                  f"{report[name + '_step_seconds'] * 1e3:.1f} ms a step)")
    report["text_cost"] = text_cost(runs, gettext, args.seed)
    if report["text_cost"]:
        print("\ngettext R@1 of each image run against text-half of its seed, query by query (B - A, paired bootstrap 95%):")
        for entry in report["text_cost"]:
            low, high = entry["interval"]
            print(f"  {entry['run']:24} - {entry['control']:20} {entry['direction']:16} {entry['difference']:+.4f} "
                  f"[{low:+.4f}, {high:+.4f}] sign test p {entry['p']:.2g}: {entry['reading']}")
    (out / "image_run.json").write_text(json.dumps(report, indent=1))


def loader_rate(build, args):
    """uform_bench_loader's prefetch line on the image run's mixture, rows and image cache."""
    command = [str(build / "uform_bench_loader"), RUNS["images"][0], str(args.rows), str(args.loader_seconds), str(args.seed),
               str(args.image_cache_mb)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    prefetch = [line for line in lines if line.get("mode") == "prefetch"]
    if result.returncode or not prefetch:
        raise SystemExit(f"image_run: {shlex.join(command)} failed: {result.stderr.strip()[-600:]}")
    return prefetch[0]


def text_cost(runs, gettext, seed):
    """Each image run's gettext R@1 against every text-half run of the same seed, query by query."""
    costs = []
    for name in runs:
        kind, _, run_seed = parse_run(name, seed)
        if kind != "images":
            continue
        for control in runs:
            control_kind, _, control_seed = parse_run(control, seed)
            if control_kind != "text-half" or control_seed != run_seed:
                continue
            rows = [rows_of(gettext[run], "model") for run in (control, name)]
            for direction in ("query->positive", "positive->query"):
                result = compare_evals.compared(rows[0][direction]["placements"], rows[1][direction]["placements"])
                low, high = result["interval"]
                costs.append({"run": name, "control": control, "direction": direction, "difference": result["difference"],
                              "interval": [low, high], "p": result["p"],
                              "reading": "above" if low > 0 else "below" if high < 0 else "within noise"})
    return costs


if __name__ == "__main__":
    main()
