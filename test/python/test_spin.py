# test_spin.py: the Promela models of the step's synchronization protocols (test/spin/, planned in
# docs/distributed.md) checked with Spin. Each clean model's whole state space must hold its
# properties (no assertion violated, no invalid end state, its LTL claims), and each planted bug
# (spin -DPLANT=N) must be caught, by the kind of error its model's header names. Spin generates a C
# verifier (pan.c), gcc compiles it, and it runs in a temporary folder. Skipped, with the reason,
# where Debian's `spin` or gcc is missing (scripts/setup.sh installs spin).

import os
import pathlib
import re
import shutil
import subprocess

import pytest

MODELS = pathlib.Path(__file__).resolve().parent.parent / "spin"

pytestmark = pytest.mark.skipif(shutil.which("spin") is None or shutil.which("gcc") is None,
                                reason="Spin's models need `spin` and gcc: apt-get install spin gcc "
                                       "(scripts/setup.sh installs spin)")

ASSERTION, DEADLOCK, CYCLE = "assertion violated", "invalid end state", "acceptance cycle"

# (model, -D definitions, LTL claim or None for a safety run, kinds of error the plant may give or
# None for a clean run that must pass)
CASES = [
    ("step_pipeline", [], None, None),
    ("step_pipeline", ["NO_TOP_WAIT"], None, None),  # the redundant wait removed: still correct
    ("step_pipeline", ["PLANT=1"], None, (ASSERTION,)),
    ("step_pipeline", ["PLANT=2"], None, (ASSERTION,)),
    ("step_pipeline", ["PLANT=3"], None, (ASSERTION,)),
]
for ranks in (2, 3):
    rank = f"RANKS={ranks}"
    CASES += [
        ("launch_order", [rank], None, None),
        ("launch_order", [rank, "PLANT=1"], None, (DEADLOCK, ASSERTION)),
        ("launch_order", [rank, "PLANT=2"], None, (ASSERTION, DEADLOCK)),
        ("launch_order", [rank, "PLANT=3"], None, (ASSERTION,)),
        ("stop_agreement", [rank], None, None),
        ("stop_agreement", [rank], "finish", None),
        ("stop_agreement", [rank], "agree", None),
        ("stop_agreement", [rank, "PLANT=1"], None, (ASSERTION,)),
        ("stop_agreement", [rank, "PLANT=2"], None, (ASSERTION,)),
        ("stop_agreement", [rank, "PLANT=3"], None, (DEADLOCK, ASSERTION)),
        ("stop_agreement", [rank, "PLANT=3"], "finish", (CYCLE,)),
    ]


def verify(folder, model, defines, claim):
    """Spin's verifier for `model` built and run in `folder`: its output and what it reports."""
    source = folder / f"{model}.pml"
    shutil.copy(MODELS / source.name, source)
    # test.sh's sanitizer run preloads ASan and UBSan into the suites: none of that belongs in spin, gcc or pan
    environment = {key: value for key, value in os.environ.items() if key != "LD_PRELOAD"}
    run = lambda command: subprocess.run(command, cwd=folder, env=environment, capture_output=True, text=True, timeout=300)
    generated = run(["spin", "-a", *(f"-D{d}" for d in defines), source.name])
    assert generated.returncode == 0, f"spin -a {source.name}: {generated.stdout}{generated.stderr}"
    # a safety run checks assertions and end states; the LTL claims need the full verifier
    flags = ["-DSAFETY", "-DNOCLAIM"] if claim is None else []
    compiled = run(["gcc", "-O0", "-w", *flags, "-o", "pan", "pan.c"])
    assert compiled.returncode == 0, f"gcc pan.c: {compiled.stderr[-2000:]}"
    checked = run(["./pan"] + ([] if claim is None else ["-a", "-N", claim]))
    output = checked.stdout + checked.stderr
    number = lambda pattern: int(re.search(pattern, output).group(1)) if re.search(pattern, output) else None
    return output, dict(errors=number(r"errors: (\d+)"), states=number(r"(\d+) states, stored"),
                        depth=number(r"depth reached (\d+)"))


@pytest.mark.parametrize("model,defines,claim,kinds", [
    pytest.param(*case, id=f"{case[0]}-{','.join(case[1]) or 'clean'}-{case[2] or 'safety'}") for case in CASES])
def test_spin(tmp_path, model, defines, claim, kinds):
    output, report = verify(tmp_path, model, defines, claim)
    described = f"{model} {defines} {claim or 'safety'}: {report}\n{output[-3000:]}"
    assert report["errors"] is not None, described
    if kinds is None:  # clean: the whole state space holds every property
        assert report["errors"] == 0, described
        assert "Full statespace search" in output and "max search depth too small" not in output, described
        assert "out of memory" not in output.lower(), described
        assert report["states"] and report["depth"], described
        print(f"{model} {' '.join(defines)} {claim or 'safety'}: {report['states']} states, depth {report['depth']}")
    else:  # planted: Spin must find it, as the kind of error the model says
        assert report["errors"] >= 1, described
        assert any(kind in output for kind in kinds), described


def test_every_model_has_clean_and_planted_runs():
    """A model added to test/spin/ is checked here, clean and with each plant its header lists."""
    files = {path.stem for path in MODELS.glob("*.pml")}
    assert files == {case[0] for case in CASES}
    for model in files:
        text = (MODELS / f"{model}.pml").read_text()
        listed = set(re.findall(r"^ \*  (\d)  ", text, re.M))  # the header's numbered plants
        run = {d.split("=")[1] for case in CASES if case[0] == model for d in case[1] if d.startswith("PLANT=")}
        assert listed and listed == run, f"{model}: plants listed {sorted(listed)}, run {sorted(run)}"
        assert any(case[0] == model and case[3] is None for case in CASES)
