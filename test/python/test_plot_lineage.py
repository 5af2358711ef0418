# test_plot_lineage.py: scripts/plot_lineage.py draws a lineage's runs folder and a refine round's
# stage.json into one PNG, a panel each; a file that is not a stage.json is refused by name.

import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "plot_lineage.py"

pytest.importorskip("matplotlib")


def plot(*arguments):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, arguments)], capture_output=True, text=True, timeout=120)


def test_a_runs_folder_and_a_stage_json_in_one_figure(tmp_path):
    run = tmp_path / "runs" / "embedder" / "ship-tcr"
    run.mkdir(parents=True)
    run.joinpath("log.jsonl").write_text("".join(json.dumps({"step": step, "loss": 3.0 / step - 0.5, "tcr": -0.6,
                                                             "siglip": 3.0 / step}) + "\n" for step in range(1, 60)))
    stage = tmp_path / "round5" / "stage.json"
    stage.parent.mkdir()
    stage.write_text(json.dumps({"stage": "refine", "runs": {"a": {"curve": [[1, 0.4], [11, 0.3], [21, 0.2]]},
                                                             "b": {"curve": [[1, 0.1], [11, -0.1], [21, 0.0]]}}}))
    output = tmp_path / "loss.png"
    result = plot(tmp_path / "runs", stage, "-o", output)
    assert result.returncode == 0, result.stderr
    assert output.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from matplotlib import image
    height, width = image.imread(str(output)).shape[:2]
    assert width > 1.6 * height  # two panels side by side; one alone is about 1.4 wide


def test_what_is_not_a_stage_json_is_named(tmp_path):
    bad = tmp_path / "stage.json"
    bad.write_text(json.dumps({"stage": "refine", "runs": {"a": {"steps": 10}}}))  # no curve
    result = plot(bad, "-o", tmp_path / "x.png")
    assert result.returncode != 0 and str(bad) in result.stderr and "curve" in result.stderr
    empty = tmp_path / "nothing"
    empty.mkdir()
    result = plot(empty, "-o", tmp_path / "y.png")
    assert result.returncode != 0 and "nothing to draw" in result.stderr
    assert not (tmp_path / "x.png").exists() and not (tmp_path / "y.png").exists()
