# test_image_run.py: the pieces of scripts/device/image_run.py that run without a GPU. A run's name
# parses into its kind, rate, seed, loss weight and text tail (and a bad one is refused); names
# become file names without '@', '~', '^' or '/'; a run with a text tail is two uform_base commands
# whose steps add up to the run's, the second on the text-only mixture at full rows from the first
# with its heads kept, while a plain run (and the probe) is one; and the script end to end on the
# CPU at a toy tier scores the tail's checkpoint, not the first part's, for a text tail and a mixed one.

import argparse
import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "device"))
import image_run  # noqa: E402


def test_names_parse():
    assert image_run.parse_run("images~0.5^0.2@7e-4/s1") == ("images", "7e-4", 1)
    assert image_run.loss_weight_of("images~0.5^0.2@7e-4/s1") == 0.5
    assert image_run.tail_of("images~0.5^0.2@7e-4/s1") == 0.2 and image_run.tail_of("images@7e-4") is None
    assert image_run.label_of("images^0.2@7e-4/s1") == "images^0.2"
    assert image_run.folder_of("images~0.5^0.2@7e-4/s1") == "images-w0.5-t0.2-lr7e-4-s1"
    assert image_run.first_folder_of("images^0.2") == "images-t0.2-images" and image_run.first_folder_of("images") == "images"
    assert image_run.refresh_of("images^0.2+0.1@7e-4/s1") == 0.1 and image_run.tail_of("images^0.2+0.1@7e-4") == 0.2
    assert image_run.refresh_of("images^0.2@7e-4") is None and image_run.label_of("images^0.2+0.1@7e-4") == "images^0.2+0.1"
    assert image_run.folder_of("images^0.2+0.1@7e-4/s1") == "images-t0.2-m0.1-lr7e-4-s1"
    for bad in ("text-half^0.2", "images^0", "images^1", "images^x", "pictures", "images+0.1", "images^0.2+1", "images^0.2+0"):
        with pytest.raises(ValueError):
            image_run.parse_run(bad)


def arguments(**extra):
    values = dict(seed=0, weighted="emoji", tier="tiny", rows=32, device="cuda", image_cache_mb=64)
    return argparse.Namespace(**{**values, **extra})


def test_a_text_tail_is_a_second_command(tmp_path):
    build = pathlib.Path("/b")
    first, second = image_run.commands(build, "images^0.25@7e-4", 100, arguments(), tmp_path)
    steps = [int(command[command.index("--steps") + 1]) for command in (first, second)]
    assert steps == [75, 25]
    assert first[first.index("--mixture") + 1] == "mixtures/images.json" and first[first.index("--rows") + 1] == "32"
    assert first[first.index("--output") + 1] == str(tmp_path / "images-t0.25-lr7e-4-images")
    assert second[second.index("--mixture") + 1] == image_run.RUNS["text-all"][0] and second[second.index("--rows") + 1] == "32"
    assert second[second.index("--init-from") + 1] == str(tmp_path / "images-t0.25-lr7e-4-images") and "--keep-head" in second
    assert second[second.index("--output") + 1] == str(tmp_path / "images-t0.25-lr7e-4") and "--tier" not in second
    assert all(command[command.index("--learning-rate") + 1] == "7e-4" for command in (first, second))
    # The probe times the first part alone; a plain run is one command; a tail never takes every step.
    assert len(image_run.commands(build, "images^0.25@7e-4", 100, arguments(), tmp_path, tail=False)) == 1
    (plain,) = image_run.commands(build, "text-half", 100, arguments(), tmp_path)
    assert plain[plain.index("--rows") + 1] == "16" and plain[plain.index("--output") + 1] == str(tmp_path / "text-half")
    first, second = image_run.commands(build, "images^0.9", 2, arguments(), tmp_path)
    assert [int(command[command.index("--steps") + 1]) for command in (first, second)] == [1, 1]


def test_a_mixed_tail_keeps_the_pictures_at_a_share(tmp_path):
    """`^TAIL+SHARE`: the tail trains on the run's own mixture with only the image sources' weights scaled."""
    first, second = image_run.commands(pathlib.Path("/b"), "images^0.25+0.1@7e-4", 100, arguments(), tmp_path)
    tail = json.loads(pathlib.Path(second[second.index("--mixture") + 1]).read_text())
    start = json.loads((ROOT / "mixtures" / "images.json").read_text())
    weights = {source["name"]: source["weight"] for source in start["sources"]}
    for source in tail["sources"]:
        expected = weights[source["name"]] * (0.1 if source["name"] in image_run.IMAGE_SETS else 1.0)
        assert source["weight"] == pytest.approx(expected), source
        assert pathlib.Path(source["path"]).is_absolute()
    assert {source["name"] for source in tail["sources"]} == set(weights) and "--image-cache-mb" in second
    assert second[second.index("--rows") + 1] == "32" and "--keep-head" in second


class _Ended:
    """A process that has ended and whose group is gone."""
    pid = 2 ** 22 + 12345
    signals = []

    def poll(self):
        return 0

    def send_signal(self, number):
        self.signals.append(number)


def test_signalling_an_ended_run_is_not_an_error():
    image_run.signal_group(_Ended(), 15)
    assert _Ended.signals == []


def test_end_to_end_on_the_cpu_scores_the_tail(build_dir, tmp_path):
    if not (ROOT / "data" / "gettext" / "test.jsonl").exists() or not (ROOT / "data" / "emoji" / "test.jsonl").exists():
        pytest.skip("the corpora are not built (bash scripts/data/build_all.sh)")
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "device" / "image_run.py"), "--build", str(build_dir),
                             "--device", "cpu", "--tier", "64x2", "--rows", "2", "--steps", "4", "--runs", "images^0.5,images^0.5+0.5,text-half",
                             "--gettext-limit", "50", "--image-cache-mb", "64", "--loader-seconds", "0.5", "--out", str(out)],
                            cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:] + result.stdout[-3000:]
    report = json.loads((out / "image_run.json").read_text())
    checkpoint = pathlib.Path(report["images^0.5_checkpoint"])
    assert checkpoint.parent.name == "images-t0.5" and checkpoint.name == "step-00000002", checkpoint
    checkpoint = pathlib.Path(report["images^0.5+0.5_checkpoint"])
    assert checkpoint.parent.name == "images-t0.5-m0.5" and checkpoint.name == "step-00000002", checkpoint
    assert {row["run"] for row in report["table"] if row["set"] == "gettext"} == {"images^0.5", "images^0.5+0.5", "text-half"}
    loader = report["loader"]  # the prefetcher's rate on the image run's mixture and rows, then its headroom per image run
    assert loader["mode"] == "prefetch" and loader["rows"] == 2 and loader["batches_per_s"] > 0 and loader["images_per_s"] > 0
    assert set(loader["headroom"]) == {"images^0.5", "images^0.5+0.5"}
    for name, headroom in loader["headroom"].items():
        assert abs(headroom - loader["batches_per_s"] * report[name + "_step_seconds"]) < 1e-9 * headroom
    costs = report["text_cost"]  # each image run against text-half, query by query, both directions
    assert {(entry["run"], entry["direction"]) for entry in costs} == {
        (run, direction) for run in ("images^0.5", "images^0.5+0.5") for direction in ("query->positive", "positive->query")}
    for entry in costs:
        r1 = {row["run"]: row["r1"] for row in report["table"] if row["set"] == "gettext" and row["direction"] == entry["direction"]}
        assert abs(entry["difference"] - (r1[entry["run"]] - r1["text-half"])) < 1e-5
        assert entry["interval"][0] <= entry["difference"] <= entry["interval"][1]
