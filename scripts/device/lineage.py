#!/usr/bin/env python3
"""lineage.py: issue 16's lineage on one GPU, a stage a call: base (span-masked bytes and masked
patches, mixtures/base.json) -> reranker (ranked sigmoid over MaxSim, mixtures/reranker.json,
--init-from the base) -> embedder (Matryoshka SigLIP, mixtures/embedder_no_negatives.json, or with
mined hard negatives mixtures/embedder.json; --init-from the reranker), then `eval`: every embedder
on every held-out test split with uform_eval (TF-IDF and chance beside, MaxSim of the top 20 by its
own rerank head and by the reranker's), the ship variants on dev (which one ships), and the
effective rank of the pooled embeddings.

Each stage trains its runs at once on the card, for the steps of the plan below (those of the
shipped model, docs/evaluation.md): the tiny tier the issue names, the width x depth that ships (at
most 32 MiB), and the TCR + Lipschitz variant; --ablations adds the base's other learning rate and
the embedder with mined negatives. Stages read the previous stage's runs from --runs (default
runs/lineage, git-ignored so that a warm device machine keeps it between calls); `all` runs the
stages in order. `refine` goes on from a shipped embedder (--refine-from, default models/default)
for more steps: on the same mixture (`more`), with the English definition corpora added
(mixtures/embedder_definitions.json), with their mined negatives too, and with the scarcest
languages sampled again (--ablations: the same at 128 rows, half the steps); `eval` then scores
those runs and their start beside each other, and dev picks among them. `rehead` trains a new
rerank head over --refine-from's frozen encoder and `rehead-eval` picks among the heads by MaxSim
alone and fused with the cosine; `fuse-eval` scores --refine-from's own MaxSim and fusions on the
--split spreads (test, or dev to choose a weight among --fuse-weights).

    python3 scripts/device/lineage.py --build BUILD --stage base|reranker|embedder|refine|rehead|rehead-eval|fuse-eval|eval|all
                                      [--scale 1] [--rows 64] [--ablations] [--runs runs/lineage]
                                      [--eval-limit 2000] [--device cuda] [--out DIR]
                                      [--refine-from DIR] [--only RUN] [--time-limit S] [--rerank K]
                                      [--split test|dev] [--fuse-weights 0.25,0.5,0.75]

--device cpu with --scale 0.005 and micro --ship/--tiny tiers runs the chain on a CPU in minutes,
to check the script and mixtures before a GPU call.
"""

import argparse
import json
import math
import os
import pathlib
import shutil
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from image_run import step_seconds, wait_all  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "data"))
import language_subset  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
TEXT_SETS = ("gettext", "libreoffice", "description-translations", "descriptions", "code", "wordnet")
FUSE_WEIGHTS = "0.25,0.5,0.75"  # rehead-eval's fused rerankings (uform_eval --fuse), beside MaxSim alone
DEFINITION_SETS = ("gcide", "manpages", "foldoc")  # the English definition corpora the refine stage adds; scored, not selected on
IMAGE_SETS = ("emoji", "flags", "clipart", "fashion")
NEW_IMAGE_SETS = ("stamps", "gcompris", "art4apps", "furniture", "ktuberling")  # the picture corpora of everyday things since round 12 (a missing one is skipped)
SCORED_IMAGE_SETS = ("freeciv", "josm", "scratch")  # round 15's third arm's picture corpora: their test splits scored, not picked on
PICTURE_SETS = IMAGE_SETS + NEW_IMAGE_SETS + SCORED_IMAGE_SETS  # every image corpus the stages score
RULE_LEAST_ITEMS = 30  # round 13's rule, fixed before it ran: a dev set ranking fewer distinct items either way is scored, not picked on
RULE_POOLS = {"everyday": NEW_IMAGE_SETS}  # round 15's rule: these dev sets enter the pick as one pooled set (each is too small alone)
NEW_SETS = ("cldr", "gnome-help", "manuals", "manual-sections", "manpage-translations",  # rounds 5, 6, 8 and 9's corpora:
            "manpages-wide", "manpages-wider", "freedict")  # scored, not selected on (a missing one is skipped)


def plan(args):
    """{stage: [run]}; a run is {name, tier or init, mixture, steps, flags}; `init` names STAGE/RUN.
    The steps are those of the shipped model's runs on one H200 (docs/evaluation.md), runs of a stage
    sharing the card; `ablation` runs train only with --ablations."""
    ship, tiny = args.ship, args.tiny
    regularizers = ["--tcr-lambda", "0.005", "--lipschitz-lambda", "0.05"]  # the shipped embedder's (chosen on dev)

    def kept(name, mixture, rate="5e-4"):  # a refine run from the shipped embedder keeping its head (rounds 4 to 10)
        return {"name": name, "init_path": args.refine_from, "mixture": mixture, "steps": 4800,
                "flags": ["--learning-rate", rate, "--keep-head", *regularizers]}
    return {
        "base": [
            {"name": "tiny", "tier": tiny, "mixture": "mixtures/base.json", "steps": 1100, "flags": ["--learning-rate", "5e-4"]},
            {"name": "ship", "tier": ship, "mixture": "mixtures/base.json", "steps": 2800, "flags": ["--learning-rate", "2e-3"]},
            {"name": "ship-lr1e-3", "tier": ship, "mixture": "mixtures/base.json", "steps": 2800, "ablation": True,
             "flags": ["--learning-rate", "1e-3"]},
        ],
        "reranker": [
            {"name": "tiny", "init": "base/tiny", "mixture": "mixtures/reranker.json", "steps": 300, "flags": ["--learning-rate", "5e-4"]},
            {"name": "ship", "init": "base/ship", "mixture": "mixtures/reranker.json", "steps": 700, "flags": ["--learning-rate", "1e-3"]},
        ],
        "embedder": [
            {"name": "tiny", "init": "reranker/tiny", "mixture": "mixtures/embedder_no_negatives.json", "steps": 450,
             "flags": ["--learning-rate", "5e-4"]},
            {"name": "ship", "init": "reranker/ship", "mixture": "mixtures/embedder_no_negatives.json", "steps": 1100,
             "flags": ["--learning-rate", "1e-3"]},
            {"name": "ship-tcr", "init": "reranker/ship", "mixture": "mixtures/embedder_no_negatives.json", "steps": 1100,
             "flags": ["--learning-rate", "1e-3", "--tcr-lambda", "0.005", "--lipschitz-lambda", "0.05"]},
            {"name": "ship-negatives", "init": "reranker/ship", "mixture": "mixtures/embedder.json", "steps": 1100, "ablation": True,
             "flags": ["--learning-rate", "1e-3"]},
        ],
        "refine": [  # more steps from a shipped embedder (--refine-from), with and without the definition corpora
            {"name": "more", "init_path": args.refine_from, "mixture": "mixtures/embedder_no_negatives.json", "steps": 2400,
             "flags": ["--learning-rate", "1e-3", *regularizers]},
            {"name": "defs", "init_path": args.refine_from, "mixture": "mixtures/embedder_definitions.json", "steps": 2400,
             "flags": ["--learning-rate", "1e-3", *regularizers]},
            {"name": "defs-negatives", "init_path": args.refine_from, "mixture": "mixtures/embedder_definitions_negatives.json",
             "steps": 2400, "flags": ["--learning-rate", "1e-3", *regularizers]},
            {"name": "defs-negatives-scarce", "init_path": args.refine_from, "mixture": "mixtures/embedder_definitions_negatives_scarce.json",
             "steps": 2400, "flags": ["--learning-rate", "1e-3", *regularizers]},
            {"name": "defs-negatives-rows128", "init_path": args.refine_from, "rows": 128, "ablation": True,
             "mixture": "mixtures/embedder_definitions_negatives.json", "steps": 1200, "flags": ["--learning-rate", "1e-3", *regularizers]},
            # round 4: the scarce languages again, man pages and FOLDOC up; with the shipped pool kept or a new one
            {"name": "scarce", "init_path": args.refine_from, "mixture": "mixtures/embedder_definitions_scarce.json", "steps": 4800,
             "flags": ["--learning-rate", "1e-3", *regularizers]},
            kept("scarce-keep", "mixtures/embedder_definitions_scarce.json", "1e-3"),
            kept("defs-keep", "mixtures/embedder_definitions.json", "1e-3"),
            kept("scarce-keep-lr5e-4", "mixtures/embedder_definitions_scarce.json"),
            # round 5: CLDR's everyday vocabulary, then GNOME's help too, beside round 4's mixture (scarce-keep-lr5e-4 the control)
            kept("cldr-keep", "mixtures/embedder_cldr.json"),
            kept("cldr-help-keep", "mixtures/embedder_cldr_help.json"),
            # round 6: Debian's translated manuals beside round 5's mixture (cldr-help-keep again, the control)
            kept("manuals-keep", "mixtures/embedder_manuals.json"),
            # round 7: round 6's mixture with the pictures at twice their weight (manuals-keep again, the control)
            kept("manuals-pictures-keep", "mixtures/embedder_manuals_pictures.json"),
            # round 8: round 6's mixture with the wide man page corpus beside the man pages (manuals-keep, the control)
            kept("manuals-wide-keep", "mixtures/embedder_manuals_wide.json"),
            # round 8's second arm: the English man pages at twice their weight (rounds 6 and 7 ran the control twice)
            kept("manuals-wide2-keep", "mixtures/embedder_manuals_wide2.json"),
            # round 9: the second arm's mixture with the wider man page corpus besides (manuals-wide2-keep beside it)
            kept("manuals-wider-keep", "mixtures/embedder_manuals_wider.json"),
            kept("manuals-wider-keep-lr2e-4", "mixtures/embedder_manuals_wider.json", "2e-4"),
            # round 10: the wider mixture with the description translations' family siblings (mined negatives one word away)
            kept("siblings-keep", "mixtures/embedder_siblings.json"),
            # round 11's second call: the grown start at lower rates (siblings-keep at 5e-4 raised the loss over the run)
            kept("siblings-keep-lr2e-4", "mixtures/embedder_siblings.json", "2e-4"),
            kept("siblings-keep-lr1e-4", "mixtures/embedder_siblings.json", "1e-4"),
            # round 12: Tux Paint's stamps (drawings and photographs captioned in 21 languages) beside round 10's mixture,
            # from the sixth release grown (--refine-from the grown copy) and as it is (--refine-from the release)
            kept("stamps-keep", "mixtures/embedder_stamps.json"),
            kept("stamps-keep-ungrown", "mixtures/embedder_stamps.json"),
            # round 13: the stamps and GCompris's photographs beside round 10's mixture, at two doses, from the
            # sixth release as it is (round 12's growth added nothing); picked by RULE_LEAST_ITEMS' rule
            kept("everyday-keep", "mixtures/embedder_everyday.json"),
            kept("everyday-keep-heavy", "mixtures/embedder_everyday_heavy.json"),
            # round 14: Art4Apps's drawings beside round 13's mixture, with the pictures of things mirrored in half their
            # draws or not, and Sweet Home 3D's furniture besides, from the seventh release
            kept("art-keep", "mixtures/embedder_art.json"),
            kept("art-flipped-keep", "mixtures/embedder_art_flipped.json"),
            kept("art-furniture-flipped-keep", "mixtures/embedder_art_furniture_flipped.json"),
            # round 15: FreeDict's everyday words and KTuberling's stamp objects beside the eighth release's mixture,
            # the pictures of things mirrored in half their draws or never; picked by RULE_POOLS' rule
            kept("words-toys-keep", "mixtures/embedder_words_toys.json"),
            kept("words-toys-unflipped-keep", "mixtures/embedder_words_toys_unflipped.json"),
            # and a third, fixed on 2026-12-08 before any ran: Freeciv's sprites, JOSM's pictograms and Scratch's pictures besides
            kept("words-toys-pictures-keep", "mixtures/embedder_words_toys_pictures.json"),
        ],
        "rehead": [  # a new rerank head over the shipped embedder's frozen encoder: its pooled embedding stays byte for byte
            {"name": name, "init_path": args.refine_from, "mixture": "mixtures/reranker_definitions.json", "steps": steps,
             "rows": 16, "flags": ["--learning-rate", rate, "--train-only", "rerank,siglip"]}  # 16 rows: MaxSim's band grows as rows squared
            for name, steps, rate in (("head", 1500, "2e-3"), ("head-lr5e-3", 1500, "5e-3"), ("head-long", 4000, "2e-3"))
        ],
    }


def command(build, run, steps, args, folder):
    """uform_base's argument list for one run into folder/NAME."""
    line = [str(build / "uform_base"), "--mixture", run["mixture"], "--rows", str(run.get("rows", args.rows)), "--steps", str(steps),
            "--device", args.device, "--seed", str(args.seed), "--image-cache-mb", str(args.image_cache_mb),
            "--save-every", str(max(1, steps // 4) if args.time_limit else steps), "--keep", "1", "--output", str(folder / run["name"]), "--quiet", *run["flags"]]
    if "init" in run:
        stage, name = run["init"].split("/")
        source = pathlib.Path(args.runs) / stage / name
        if not (source / "latest").exists():
            sys.exit(f"lineage: {run['name']} starts from {source}, which has no checkpoint: run its stage first")
        line += ["--init-from", str(source)]
    elif "init_path" in run:
        if not any((pathlib.Path(run["init_path"]) / name).exists() for name in ("model.safetensors.index.json", "model.safetensors", "latest")):
            sys.exit(f"lineage: {run['name']} starts from {run['init_path']}, which holds no checkpoint (--refine-from)")
        line += ["--init-from", str(run["init_path"])]
    else:
        line += ["--tier", run["tier"]]
    return line


def start(build, run, steps, args, folder):
    log = open(folder / f"{run['name']}.log", "w")
    return subprocess.Popen(command(build, run, steps, args, folder), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)  # wait_all's SIGTERM goes to the process group


def losses(run_folder):
    """[(step, loss, seconds)] of a run's log.jsonl ([] before its first step)."""
    path = run_folder / "log.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    return [(line["step"], line["loss"], line["seconds"]) for line in lines]


def tail_loss(log, share=0.1):
    """Mean loss over the last share of a run's steps (losses()): the ablations' measure at equal data."""
    values = [loss for _, loss, _ in log]
    last = values[-max(1, int(len(values) * share)):]
    return sum(last) / len(last) if last else math.inf


def plain_trains(data=ROOT / "data"):
    """data/NAME/train.jsonl from train-negatives.jsonl where only the latter travelled (one copy of
    the pairs fits the carry limit): the same records, without the mined negatives."""
    for name in TEXT_SETS + DEFINITION_SETS:
        mined, plain = pathlib.Path(data) / name / "train-negatives.jsonl", pathlib.Path(data) / name / "train.jsonl"
        if mined.is_file() and not plain.is_file():
            with open(mined, encoding="utf-8") as lines, open(plain.with_suffix(".partial"), "w", encoding="utf-8") as out:
                for line in lines:
                    if line.strip():
                        record = json.loads(line)
                        record.pop("negatives", None)
                        out.write(json.dumps(record, ensure_ascii=False) + "\n")
            os.replace(plain.with_suffix(".partial"), plain)


def language_subsets(mixtures):
    """data/NAME/FILE.GROUP.jsonl that the mixtures sample, written from FILE.jsonl where they are
    missing (scripts/data/language_subset.py: the packs carry one copy of each record)."""
    for mixture in mixtures:
        path = ROOT / mixture
        for source in json.loads(path.read_text(encoding="utf-8"))["sources"]:
            target = (path.parent / source["path"]).resolve()
            stem, _, group = target.stem.rpartition(".")
            whole = target.with_name(stem + target.suffix)
            if stem and group in language_subset.GROUPS and not target.is_file() and whole.is_file():
                _, kept, read = language_subset.write_subset(whole, language_subset.GROUPS[group], group)
                print(f"lineage: {target}: {kept} of {read} records of {whole.name}", flush=True)


def train_stage(stage, build, args):
    plain_trains()
    runs = [run for run in plan(args)[stage] if (args.ablations or not run.get("ablation")) and (not args.only or run["name"] in args.only)]
    language_subsets({run["mixture"] for run in runs})
    folder = pathlib.Path(args.runs) / stage
    folder.mkdir(parents=True, exist_ok=True)
    report = {"stage": stage, "rows": args.rows, "device": args.device, "scale": args.scale, "runs": {}}
    began = time.time()
    steps = {run["name"]: max(1, round(run["steps"] * args.scale)) for run in runs}
    for run in runs:
        shutil.rmtree(folder / run["name"], ignore_errors=True)
    deadline = began + args.time_limit if args.time_limit else None  # runs cut there save their last step's checkpoint
    cut = wait_all({run["name"]: start(build, run, steps[run["name"]], args, folder) for run in runs}, folder, deadline)
    report["cut_short"] = cut
    for run in runs:
        log = losses(folder / run["name"])
        report["runs"][run["name"]] = {"command": " ".join(command(build, run, steps[run["name"]], args, pathlib.Path("RUNS"))),
                                       "steps": log[-1][0] if log else 0,
                                       "step_seconds_together": step_seconds(folder / run["name"]) if log else None,
                                       "first_loss": log[0][1] if log else None, "tail_loss": tail_loss(log),
                                       "curve": [(step, loss) for step, loss, _ in log[:: max(1, len(log) // 200)]]}
    report["wall"] = time.time() - began
    (folder / "stage.json").write_text(json.dumps(report, indent=1))
    for name, run in report["runs"].items():
        if run["first_loss"] is None:
            print(f"lineage {stage}: {name}: no step logged (see {folder / name}.log)")
            continue
        print(f"lineage {stage}: {name}: {run['steps']} steps, {run['step_seconds_together'] * 1e3:.0f} ms a step together, "
              f"loss {run['first_loss']:.4f} -> {run['tail_loss']:.4f} (last 10%)" + (" CUT SHORT at --time-limit" if name in cut else ""))
    return report


def eval_sets(args, split="test", names=TEXT_SETS + IMAGE_SETS, limit=None, pools=None):
    """{name: path} of the held-out sets: each corpus's split, thinned to --eval-limit records by a
    spread (every k-th line, so every catalogue and language keeps its share) into RUNS/eval-sets;
    then each of {pool: members}, the spreads of its members present in one file (pooled())."""
    folder = pathlib.Path(args.runs) / f"eval-sets-{split}"
    folder.mkdir(parents=True, exist_ok=True)
    sets, limit = {}, limit or args.eval_limit
    for name in names:
        source = ROOT / "data" / name / f"{split}.jsonl"
        if not source.is_file():
            print(f"lineage eval: {source} is missing: skipped", flush=True)
            continue
        lines = [line for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
        if len(lines) > limit:
            stride = len(lines) / limit
            lines = [lines[int(i * stride)] for i in range(limit)]
        target = folder / f"{name}.jsonl"
        if name in PICTURE_SETS:  # image paths are relative to their corpus folder
            target = source.parent / f"{split}-eval-{limit}.jsonl"
        target.write_text("\n".join(lines) + "\n", encoding="utf-8")
        sets[name] = target
    for pool, members in (pools or {}).items():
        present = {member: sets[member] for member in members if member in sets}
        if present:
            sets[pool] = pooled(present, ROOT / "data" / f"{split}-{pool}-eval-{limit}.jsonl")
    return sets


def pooled(members, target):
    """Writes the records of {name: pair file} into one file at target, each image path rewritten to stay
    the same file from target's folder (uform_eval reads an image path from its pair file's folder); target."""
    lines = []
    for path in members.values():
        path = pathlib.Path(path)
        prefix = os.path.relpath(path.parent, target.parent)
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                for side in [record["query"], *record["positives"]]:
                    if isinstance(side, dict) and "image" in side:
                        side["image"] = os.path.join(prefix, side["image"])
                lines.append(json.dumps(record, ensure_ascii=False))
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return target


def spectrum(vectors):
    """A matrix's spectrum summary (rows centred): the effective rank exp(H(p)), p the normalized
    singular values (Roy and Vetterli), and the dimensions holding 90% and 99% of the energy."""
    import numpy

    vectors = numpy.asarray(vectors, dtype=numpy.float64)
    values = numpy.linalg.svd(vectors - vectors.mean(axis=0), compute_uv=False)
    p = values / values.sum()
    energy = numpy.cumsum(values**2) / (values**2).sum()
    return {"texts": len(vectors), "width": vectors.shape[1], "effective_rank": float(math.exp(-(p[p > 0] * numpy.log(p[p > 0])).sum())),
            "dims_90": int(numpy.searchsorted(energy, 0.90) + 1), "dims_99": int(numpy.searchsorted(energy, 0.99) + 1)}


def effective_rank(build, checkpoint, texts, args):
    """spectrum() of a checkpoint's pooled embeddings of texts (`uform encode --records`), or None."""
    folder = pathlib.Path(checkpoint) / "latest" if (pathlib.Path(checkpoint) / "latest").exists() else checkpoint  # `uform encode` reads a checkpoint, not a run folder
    line = [str(build / "uform"), "encode", "--model", str(folder), "--records", "--device", args.device]
    records = "".join(json.dumps({"text": text}) + "\n" for text in texts)
    result = subprocess.run(line, cwd=ROOT, input=records, capture_output=True, text=True)
    if result.returncode != 0:
        print(f"lineage eval: effective rank: {' '.join(line)} failed:\n{result.stderr[-800:]}", flush=True)
        return None
    return spectrum([json.loads(row) for row in result.stdout.splitlines() if row.strip()])


def candidates(args):
    """{name: checkpoint folder} of every embedder to score: the embedder stage's runs (by their
    names), the refine stage's (refine-NAME) and, with refine runs, the checkpoint they started
    from (`start`), so that dev says whether refining helped."""
    runs, found = pathlib.Path(args.runs), {}
    stages = plan(args)
    for run in stages["embedder"]:
        if (runs / "embedder" / run["name"] / "latest").exists():
            found[run["name"]] = runs / "embedder" / run["name"]
    for run in stages["refine"]:
        if (runs / "refine" / run["name"] / "latest").exists():
            found.setdefault("start", pathlib.Path(run["init_path"]))
            found[f"refine-{run['name']}"] = runs / "refine" / run["name"]
    return found


def eval_stage(build, args):
    runs = pathlib.Path(args.runs)
    folder = runs / "eval"
    folder.mkdir(parents=True, exist_ok=True)
    sets = eval_sets(args, names=TEXT_SETS + DEFINITION_SETS + NEW_SETS + PICTURE_SETS)
    checkpoints = candidates(args)
    embedders = list(checkpoints)
    report = {"sets": {name: str(path) for name, path in sets.items()}, "embedders": embedders,
              "checkpoints": {name: str(path) for name, path in checkpoints.items()}, "results": {}, "ranks": {}}
    began = time.time()
    texts = []
    for name in TEXT_SETS:
        if name in sets:
            records = [json.loads(line) for line in sets[name].read_text(encoding="utf-8").splitlines()[:300]]
            texts += [side for record in records for side in (record["query"], record["positives"][0]) if isinstance(side, str)]
    jobs = []
    rerank = ("--rerank", str(args.rerank)) if args.rerank else ()
    for embedder, checkpoint in checkpoints.items():
        reranker = runs / "reranker" / ("tiny" if embedder == "tiny" else "ship")
        for name, path in sets.items():
            tag = f"{embedder}-{name}"
            if name in PICTURE_SETS:
                jobs.append((tag, checkpoint, path, ()))
            else:
                jobs.append((tag, checkpoint, path, rerank))
                if rerank and checkpoint.parent.name == "embedder" and (reranker / "latest").exists():  # the chain's own reranker
                    jobs.append((f"{tag}-reranker", checkpoint, path, ("--rerank", str(args.rerank), "--reranker", str(reranker), "--no-tfidf")))
    dev = eval_sets(args, "dev", TEXT_SETS + DEFINITION_SETS + IMAGE_SETS + NEW_IMAGE_SETS, 2000, RULE_POOLS)  # what ships is chosen on dev, not test
    shippable = [name for name in embedders if name != "tiny"]
    for embedder in shippable:
        for name, path in dev.items():
            jobs.append((f"dev-{embedder}-{name}", checkpoints[embedder], path, ("--no-tfidf",)))
    for reranker in ("tiny", "ship"):  # the reranker's own pooled embeddings and MaxSim alone, for the table
        if (runs / "reranker" / reranker / "latest").exists() and "gettext" in sets:
            jobs.append((f"reranker-{reranker}-gettext", runs / "reranker" / reranker, sets["gettext"], ("--rerank", str(args.rerank), "--no-tfidf")))
    running = []
    for tag, checkpoint, path, extra in jobs:  # a few at once: the GPU encodes, the CPU ranks and sums MaxSim
        while len(running) >= args.jobs:
            running = [(t, p) for t, p in running if p.poll() is None]
            time.sleep(0.2)
        line = [str(build / "uform_eval"), str(checkpoint), "--pairs", str(path), "--device", args.device, "--json",
                str(folder / f"{tag}.json"), "--quiet", "--threads", str(max(1, (os.cpu_count() or 2) // args.jobs)), *extra]
        running.append((tag, subprocess.Popen(line, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=open(folder / f"{tag}.err", "w"))))
    for tag, process in running:
        process.wait()
    for tag, _, _, _ in jobs:
        target = folder / f"{tag}.json"
        if target.exists():
            report["results"][tag] = json.loads(target.read_text())
        else:
            print(f"lineage eval: {tag} failed:\n{(folder / (tag + '.err')).read_text()[-1200:]}", flush=True)
    for embedder in embedders:
        report["ranks"][embedder] = effective_rank(build, checkpoints[embedder], texts, args)
    report["rule_sets"] = rule_sets(dev)
    report["rule_sets_round13"] = rule_sets({name: path for name, path in dev.items() if name not in RULE_POOLS}, pools={})
    report.update(dev_pick(report["results"], shippable, list(dev), report["rule_sets"], report["rule_sets_round13"]))
    scored = {name: value for name, value in report["dev_r1"].items() if value is not None}
    report["best_ship"] = max(scored, key=scored.get) if scored else None
    report["best_path"] = str(checkpoints[report["best_ship"]]) if scored else None
    report["wall"] = time.time() - began
    (folder / "eval.json").write_text(json.dumps(report, indent=1))
    print_summary(report)
    return report


def rehead_eval(build, args):
    """The rehead stage's heads, and the start's own (stale) head, by MaxSim of the top --rerank, alone
    and fused with the cosine (FUSE_WEIGHTS), on the first --eval-limit / 2 dev pairs of every text set
    (the pooled ranking is the same for all: the encoder is frozen); the best mean R@1 gain over the
    pooled embedding, both directions, picks the head and the method, which is then scored on the test spreads beside TF-IDF. Its rerank.proj and SigLIP scalars
    come back as OUT/rehead.safetensors (lineage_head.py puts them into the shipped shards)."""
    runs = pathlib.Path(args.runs)
    folder = runs / "rehead-eval"
    folder.mkdir(parents=True, exist_ok=True)
    heads = {"start": pathlib.Path(args.refine_from)}
    for run in plan(args)["rehead"]:
        if (runs / "rehead" / run["name"] / "latest").exists():
            heads[run["name"]] = runs / "rehead" / run["name"]
    dev = eval_sets(args, "dev", TEXT_SETS + DEFINITION_SETS, args.eval_limit // 2)
    fuse = ("--fuse", FUSE_WEIGHTS)
    methods = [f"model+maxsim@{args.rerank}"] + [f"model+fuse{w}@{args.rerank}" for w in FUSE_WEIGHTS.split(",")]
    jobs = [(f"dev-{head}-{name}", checkpoint, path, ("--no-tfidf", *fuse)) for head, checkpoint in heads.items() for name, path in dev.items()]
    results = run_jobs(build, args, folder, jobs)
    report = {"heads": {name: str(path) for name, path in heads.items()}, "dev": {}, "results": {}}
    scored = {}  # (head, method): mean dev R@1 gain over the pooled ranking
    for head in heads:
        for method in methods:
            gains = []
            for name in dev:
                result = results.get(f"dev-{head}-{name}")
                if not result:
                    continue
                for direction in ("query->positive", "positive->query"):
                    pooled, reranked = widest_r1(result, direction), widest_r1(result, direction, method)
                    report["dev"].setdefault(head, {}).setdefault(method, {})[f"{name} {direction}"] = [pooled, reranked]
                    gains.append(reranked - pooled)
            if gains:
                report["dev"][head][method]["mean_gain"] = scored[(head, method)] = sum(gains) / len(gains)
    best, best_method = max(scored, key=scored.get) if scored else (None, None)
    report["best"], report["best_method"] = best, best_method
    if best:
        sets = eval_sets(args, names=TEXT_SETS + DEFINITION_SETS)
        jobs = [(f"test-{best}-{name}", heads[best], path, fuse) for name, path in sets.items()]
        if best != "start":
            jobs += [(f"test-start-{name}", heads["start"], path, ("--no-tfidf", *fuse)) for name, path in sets.items()]
        report["results"] = run_jobs(build, args, folder, jobs)
        if best != "start":
            export_head(heads[best], pathlib.Path(args.out) / "rehead.safetensors")
    for (head, method), gain in sorted(scored.items()):
        print(f"lineage rehead: {head}: mean dev R@1 gain of {method} over the pooled ranking {gain:.4f}", flush=True)
    for tag, result in sorted(report["results"].items()):
        for direction in ("query->positive", "positive->query"):
            print(f"lineage rehead: {tag:36} {direction:16} TF-IDF {widest_r1(result, direction, 'tfidf')} pooled "
                  f"{widest_r1(result, direction)} " + " ".join(f"{m} {widest_r1(result, direction, m)}" for m in methods), flush=True)
    print(f"lineage rehead: best head: {best}, by {best_method}")
    (folder / "rehead.json").write_text(json.dumps(report, indent=1))
    return report


def run_jobs(build, args, folder, jobs):
    """{tag: report} of uform_eval jobs (tag, checkpoint, pairs, extra flags), --jobs at once, each with
    --rerank; a failed job is named with its error's tail."""
    running = []
    for tag, checkpoint, path, extra in jobs:
        while len(running) >= args.jobs:
            running = [(t, p) for t, p in running if p.poll() is None]
            time.sleep(0.2)
        line = [str(build / "uform_eval"), str(checkpoint), "--pairs", str(path), "--device", args.device, "--json",
                str(folder / f"{tag}.json"), "--quiet", "--threads", str(max(1, (os.cpu_count() or 2) // args.jobs)),
                "--rerank", str(args.rerank), *extra]
        running.append((tag, subprocess.Popen(line, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=open(folder / f"{tag}.err", "w"))))
    for _, process in running:
        process.wait()
    results = {}
    for tag, _, _, _ in jobs:
        target = folder / f"{tag}.json"
        if target.exists():
            results[tag] = json.loads(target.read_text())
        else:
            print(f"lineage: {tag} failed:\n{(folder / (tag + '.err')).read_text()[-1200:]}", flush=True)
    return results


def export_head(run, target):
    """The rerank head and SigLIP scalars of a run's latest checkpoint, alone, as SafeTensors at target
    (raw bytes: BF16 needs no decoding to be copied)."""
    source = pathlib.Path(run) / "latest" / "model.safetensors"
    data = source.read_bytes()
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + size])
    kept, blobs, offset = {"__metadata__": {"source": str(source)}}, [], 0
    for name, entry in header.items():
        if name != "__metadata__" and name.split(".")[0] in ("rerank", "siglip"):
            blob = data[8 + size + entry["data_offsets"][0] : 8 + size + entry["data_offsets"][1]]
            kept[name] = {"dtype": entry["dtype"], "shape": entry["shape"], "data_offsets": [offset, offset + len(blob)]}
            blobs.append(blob)
            offset += len(blob)
    text = json.dumps(kept).encode()
    text += b" " * (-len(text) % 8)
    target.write_bytes(len(text).to_bytes(8, "little") + text + b"".join(blobs))


def dev_mean(results, embedder, names):
    """Mean R@1 of an embedder's dev reports (results["dev-EMBEDDER-NAME"]) over `names`, both directions
    (the issue holds every set both ways), at the widest width; None where one is missing or names is empty."""
    reports = [results.get(f"dev-{embedder}-{name}") for name in names]
    scores = [widest_r1(result, direction) for result in reports if result for direction in ("query->positive", "positive->query")]
    return sum(scores) / len(scores) if names and len(scores) == 2 * len(names) and None not in scores else None


def distinct_items(path):
    """(distinct queries, distinct first positives) of a pair file: the items each direction ranks."""
    queries, positives = set(), set()
    for line in pathlib.Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            queries.add(json.dumps(record["query"], sort_keys=True))
            positives.add(json.dumps(record["positives"][0], sort_keys=True))
    return len(queries), len(positives)


def rule_sets(dev, pools=RULE_POOLS):
    """The dev sets of {name: path} the pick is made on: those whose both directions rank at least
    RULE_LEAST_ITEMS distinct items (round 13's rule: flags' 12 pictures and Fashion-MNIST's 10 captions are
    out), a pool of `pools` present in dev standing for its members (round 15's rule)."""
    kept = [name for name, path in dev.items() if min(distinct_items(path)) >= RULE_LEAST_ITEMS]
    members = {member for pool, names in pools.items() if pool in kept for member in names}
    return [name for name in kept if name not in members]


def dev_pick(results, embedders, dev_names, rule_names, round13_names=()):
    """The dev means of each embedder: dev_r1 (the pick: the rule_sets), dev_r1_round13 (rounds 13 and 14's rule:
    round13_names, each picture set alone), dev_r1_round12 (rounds 4 to 12's rule: every dev set but NEW_IMAGE_SETS
    and the pools), dev_r1_text (the six text sets) and dev_r1_new (the new picture sets alone)."""
    return {"dev_r1_text": {e: dev_mean(results, e, [n for n in TEXT_SETS if n in dev_names]) for e in embedders},
            "dev_r1": {e: dev_mean(results, e, rule_names) for e in embedders},
            "dev_r1_round13": {e: dev_mean(results, e, list(round13_names)) for e in embedders},
            "dev_r1_round12": {e: dev_mean(results, e, [n for n in dev_names if n not in NEW_IMAGE_SETS + tuple(RULE_POOLS)])
                               for e in embedders},
            "dev_r1_new": {e: dev_mean(results, e, [n for n in NEW_IMAGE_SETS if n in dev_names]) for e in embedders}}


def widest_r1(result, direction, method="model"):
    """A report's R@1 by `method` (model, model+maxsim@K, tfidf), all languages, at its widest width; None where absent."""
    rows = [r for r in result["rows"] if r["method"] == method and r["language"] == "all" and r["direction"] == direction]
    return max(rows, key=lambda r: r["width"] or 0)["recall@1"] if rows else None


def summary_rows(report):
    """[(embedder, set, direction, chance, tfidf, model R@1 at the widest width, reranked own, reranked by the reranker)]."""
    rows = []
    for embedder in report["embedders"]:
        for name in report["sets"]:
            result = report["results"].get(f"{embedder}-{name}")
            if not result:
                continue
            reranked = report["results"].get(f"{embedder}-{name}-reranker")
            for direction in ("query->positive", "positive->query"):
                def r1(source, method, width=None):
                    picked = [r for r in (source or {}).get("rows", []) if r["method"] == method and r["language"] == "all"
                              and r["direction"] == direction and (width is None or r["width"] == width)]
                    return picked[-1]["recall@1"] if picked else None
                widths = [r["width"] for r in result["rows"] if r["method"] == "model" and r["width"]]
                widest = max(widths) if widths else None
                maxsim = f"model+maxsim@{result.get('rerank_top')}"
                rows.append((embedder, name, direction, r1(result, "chance"), r1(result, "tfidf"), r1(result, "model", widest),
                             r1(result, maxsim, widest), r1(reranked, maxsim, widest)))
    return rows


def print_summary(report):
    def cell(value):
        return f"{value:.4f}" if value is not None else "-"
    print(f"\n{'embedder':18} {'set':25} {'direction':16} {'chance':>7} {'TF-IDF':>7} {'model':>7} {'+own':>7} {'+rrk':>7}")
    for row in summary_rows(report):
        print(f"{row[0]:18} {row[1]:25} {row[2]:16} " + " ".join(f"{cell(value):>7}" for value in row[3:]))
    for embedder, value in report.get("dev_r1", {}).items():
        print(f"dev R@1 (both directions, widest) {embedder}: the rule's sets {value}, round 13's rule "
              f"{report.get('dev_r1_round13', {}).get(embedder)}, round 12's rule "
              f"{report.get('dev_r1_round12', {}).get(embedder)}, the six text sets {report.get('dev_r1_text', {}).get(embedder)}, "
              f"the new picture sets {report.get('dev_r1_new', {}).get(embedder)}")
    print(f"the rule's sets: {' '.join(report.get('rule_sets', []))}")
    print(f"ships: {report.get('best_ship')}")
    for embedder, rank in report["ranks"].items():
        if rank:
            print(f"effective rank {embedder}: {rank['effective_rank']:.1f} of {rank['width']} "
                  f"(90% energy in {rank['dims_90']}, 99% in {rank['dims_99']} dims; {rank['texts']} texts)")


def fuse_name(entry):
    """uform_eval's row name of one --fuse entry, W or W:GATE."""
    weight, _, gate = entry.partition(":")
    return f"fuse{float(weight):.3g}" + (f"s{int(gate)}" if gate else "")


def fuse_eval(build, args):
    """The --refine-from checkpoint on the --split spreads of every text set: TF-IDF, the pooled ranking,
    MaxSim of the top --rerank and its fusions with the cosine (--fuse-weights); RUNS/fuse-eval/fuse.json."""
    folder = pathlib.Path(args.runs) / "fuse-eval"
    folder.mkdir(parents=True, exist_ok=True)
    sets = eval_sets(args, split=args.split, names=TEXT_SETS + DEFINITION_SETS)
    results = run_jobs(build, args, folder, [(f"{args.split}-{name}", args.refine_from, path, ("--fuse", args.fuse_weights))
                                             for name, path in sets.items()])
    methods = ["tfidf", "model", f"model+maxsim@{args.rerank}"] + [f"model+{fuse_name(w)}@{args.rerank}" for w in args.fuse_weights.split(",")]
    report = {"checkpoint": str(args.refine_from), "split": args.split, "rows": {}}
    for tag, result in sorted(results.items()):
        for direction in ("query->positive", "positive->query"):
            report["rows"][f"{tag} {direction}"] = row = {m: widest_r1(result, direction, m) for m in methods}
            print(f"lineage fuse-eval: {tag:32} {direction:16} " + " ".join(f"{m} {row[m]}" for m in methods), flush=True)
    (folder / "fuse.json").write_text(json.dumps(report, indent=1))
    return report


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", required=True)
    parser.add_argument("--stage", required=True, choices=["base", "reranker", "embedder", "refine", "rehead", "rehead-eval", "fuse-eval", "eval", "all"])
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies every run's steps (a CPU check of the chain: 0.005 or so)")
    parser.add_argument("--ablations", action="store_true", help="also train the ablation runs (the base's other learning rate, the embedder with mined negatives)")
    parser.add_argument("--only", action="append", help="train only this run of the stage (repeat for several; default all)")
    parser.add_argument("--time-limit", type=float, default=0,
                        help="seconds a stage may train; runs still going then stop with a checkpoint of their last step (default 0: no limit)")
    parser.add_argument("--rows", type=int, default=64, help="rows of 1024 columns a step (default 64)")
    parser.add_argument("--tiny", default="tiny", help="the issue's tier (default tiny)")
    parser.add_argument("--ship", default="384x6", help="the width x depth that ships, at most 32 MiB (default 384x6)")
    parser.add_argument("--runs", default=str(ROOT / "runs" / "lineage"))
    parser.add_argument("--eval-limit", type=int, default=2000, help="records of each test split scored (a spread; default 2000)")
    parser.add_argument("--rerank", type=int, default=20, help="MaxSim reranks each query's top K (default 20; 0 skips it)")
    parser.add_argument("--split", default="test", choices=("dev", "test"), help="fuse-eval's split (default test; dev to choose a weight)")
    parser.add_argument("--fuse-weights", default=FUSE_WEIGHTS, help=f"fuse-eval's fusion weights, at most 4, each W or W:GATE (uform_eval --fuse; default {FUSE_WEIGHTS})")
    parser.add_argument("--refine-from", default=str(ROOT / "models" / "default"),
                        help="the checkpoint the refine stage starts from (default models/default)")
    parser.add_argument("--jobs", type=int, default=4, help="uform_eval processes at once (default 4)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--image-cache-mb", type=int, default=8192)
    parser.add_argument("--out", default=os.environ.get("OUT", "/tmp/uform-out"))
    args = parser.parse_args()
    build = (ROOT / args.build).resolve()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stages = ["base", "reranker", "embedder", "eval"] if args.stage == "all" else [args.stage]
    for stage in stages:
        evaluations = {"eval": eval_stage, "rehead-eval": rehead_eval, "fuse-eval": fuse_eval}
        report = evaluations[stage](build, args) if stage in evaluations else train_stage(stage, build, args)
        (out / f"lineage-{stage}.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
