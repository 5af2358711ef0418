#!/usr/bin/env python3
"""av_run.py: issue 18's run on one GPU. Trains a tier (tiny by default) on mixtures/audio_video.json
(recorded speech <-> transcript, video <-> caption, Matryoshka SigLIP) for about --seconds, then
scores the checkpoint on the held-out test splits with uform_eval: speech -> transcript and back,
video -> caption and back (at the mixture's video_fps), chance beside each (no text method applies
to a clip side). Prints one table and writes OUT/av_run.json.

The step count fills the time given: a probe of --probe steps times a step (log.jsonl's seconds,
past the first quarter), then the run gets the steps that fit.

    python3 scripts/device/av_run.py --build BUILD [--seconds 300] [--rows 32] [--steps N] [--probe 40]
                                     [--tier tiny] [--seed 0] [--device cuda] [--out DIR]

The corpora must be in data/ (gpu.sh avrun unpacks scripts/data/device_pack.py's archives there).
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
MIXTURE = "mixtures/audio_video.json"
SETS = (("speech", "data/speech/test.jsonl"), ("video", "data/video/test.jsonl"))


def train(build, steps, args, folder, deadline=None):
    """Runs uform_base for `steps` steps into folder/av; past the deadline it is stopped with SIGTERM
    (it ends the step in flight and saves). Returns whether it was cut short."""
    command = [str(build / "uform_base"), "--mixture", MIXTURE, "--tier", args.tier, "--rows", str(args.rows),
               "--steps", str(steps), "--device", args.device, "--seed", str(args.seed),
               "--save-every", str(max(1, steps // 4)), "--output", str(folder / "av"), "--quiet"]
    with open(folder / "av.log", "w") as log:
        process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        try:
            code = process.wait(timeout=None if deadline is None else max(1.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            process.terminate()
            try:
                process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            return True
    if code != 0:
        sys.exit(f"av_run: {' '.join(command)} failed:\n" + (folder / "av.log").read_text()[-3000:])
    return False


def step_seconds(run):
    """Median seconds a step took, past the first quarter (graph capture, the loader's first clips)."""
    lines = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines() if line.strip()]
    return statistics.median(line["seconds"] for line in lines[len(lines) // 4:])


def evaluate(build, run, pairs, fps, args, out):
    """uform_eval's JSON for the checkpoint on one test file."""
    target = out / f"eval-{pathlib.Path(pairs).parent.name}.json"
    command = [str(build / "uform_eval"), str(run), "--pairs", pairs, "--device", args.device, "--fps", str(fps),
               "--json", str(target), "--quiet"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"av_run: {' '.join(command)} failed:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
    return json.loads(target.read_text())


def model_rows(report):
    """{direction: row} for the model's language-wide rows at the widest width."""
    rows = [r for r in report["rows"] if r["method"] == "model" and r["language"] == "all" and r["direction"] != "both"]
    width = max(r["width"] for r in rows)
    return width, {r["direction"]: r for r in rows if r["width"] == width}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", required=True)
    parser.add_argument("--seconds", type=float, default=300, help="training time (default 300)")
    parser.add_argument("--rows", type=int, default=32, help="rows of 1024 cells a step (default 32)")
    parser.add_argument("--steps", type=int, default=0, help="steps (default: what --seconds allows)")
    parser.add_argument("--probe", type=int, default=40)
    parser.add_argument("--tier", default="tiny")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cuda", help="cuda (default), or cpu for a quick look at the script itself")
    parser.add_argument("--out", default=os.environ.get("OUT", "/tmp/uform-out"))
    args = parser.parse_args()
    build, out = (ROOT / args.build).resolve(), pathlib.Path(args.out)
    folder = pathlib.Path("/tmp/uform-av-run")
    subprocess.run(["rm", "-rf", str(folder)], check=True)
    (folder / "probe").mkdir(parents=True)
    out.mkdir(parents=True, exist_ok=True)
    fps = json.loads((ROOT / MIXTURE).read_text())["video_fps"]
    report = {"mixture": MIXTURE, "rows": args.rows, "columns": 1024, "tier": args.tier, "device": args.device,
              "seed": args.seed, "video_fps": fps, "wall": {}}
    started = time.time()
    steps = args.steps
    if not steps:
        train(build, args.probe, args, folder / "probe")
        seconds = step_seconds(folder / "probe" / "av")
        steps = max(args.probe, int(args.seconds / seconds))
        report["probe"] = {"step_seconds": seconds, "wall": time.time() - started}
        print(f"av_run: probe: a step takes {seconds * 1e3:.1f} ms; {steps} steps", flush=True)
    report["steps"] = steps
    began = time.time()
    report["cut_short"] = train(build, steps, args, folder, began + args.seconds * 1.2)
    report["wall"]["train"] = time.time() - began
    report["step_seconds"] = step_seconds(folder / "av")
    lines = [json.loads(line) for line in (folder / "av" / "log.jsonl").read_text().splitlines() if line.strip()]
    report["steps_done"] = lines[-1]["step"] if lines else 0
    report["loss_first"], report["loss_last"] = (lines[0]["loss"], lines[-1]["loss"]) if lines else (None, None)
    report["log_tail"] = (folder / "av.log").read_text()[-600:]

    began = time.time()
    table = []
    for name, pairs in SETS:
        result = evaluate(build, folder / "av", pairs, fps, args, out)
        width, rows = model_rows(result)
        chance = result["chance"]
        for direction, row in rows.items():
            table.append({"set": name, "pairs": result["count"], "direction": direction, "width": width,
                          "r1": row["recall@1"], "r5": row["recall@5"], "r10": row["recall@10"], "mrr": row["mrr"],
                          "chance_r1": chance["recall@1"], "chance_r10": chance["recall@10"],
                          "times_chance_r1": row["recall@1"] / chance["recall@1"] if chance["recall@1"] else None})
    report["wall"]["eval"] = time.time() - began
    report["table"] = table
    print(f"\n{args.tier}, rows of 1024 columns x {args.rows}, {report['steps_done']} steps of {report['step_seconds'] * 1e3:.1f} ms, "
          f"seed {args.seed}, video at {fps} fps; loss {report['loss_first']} -> {report['loss_last']}")
    print(f"{'set':7} {'pairs':>6} {'direction':16} {'R@1':>7} {'R@5':>7} {'R@10':>7} {'chance R@1':>11} {'x chance':>9}")
    for row in table:
        times = f"{row['times_chance_r1']:.1f}x" if row["times_chance_r1"] is not None else "-"
        print(f"{row['set']:7} {row['pairs']:>6} {row['direction']:16} {row['r1']:7.4f} {row['r5']:7.4f} {row['r10']:7.4f} "
              f"{row['chance_r1']:11.4f} {times:>9}")
    (out / "av_run.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
