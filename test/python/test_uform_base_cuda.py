# test_uform_base_cuda.py: `uform_base --device cuda` as far as a machine without a GPU can check it:
# the help lists --device and --recompute (0, 1, 2), a run (mlm; contrastive and rerank, each with and without
# TCR and Lipschitz) fails with one clear line and writes nothing when there is no GPU (CUDA build)
# or no CUDA backend (CPU-only build), and what runs on the CPU only so far (TCR and Lipschitz with
# mlm) is refused by name before any GPU is asked for. Where a GPU is present: a head-only run
# (--train-only) leaves every other tensor as it came; mlm, contrastive and
# rerank (the latter two with and without TCR and Lipschitz) train, the first contrastive and rerank
# losses agree with the CPU's within derived bounds, every objective resumes bit for bit from a
# checkpoint, and the three --recompute forms give bitwise the same weights and losses.

import json
import math
import os
import subprocess

import pytest

from cuda_env import cuda_build, gpu_present


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cuda_corpus")
    with open(folder / "text.jsonl", "w") as text, open(folder / "pairs.jsonl", "w") as pairs:
        for index in range(200):
            phrase = f"open file {index} and save it as copy {index * 7 % 13}"
            text.write(json.dumps({"text": phrase}) + "\n")
            pairs.write(json.dumps({"query": phrase, "positives": [phrase.upper()]}) + "\n")
    for objective, source in (("mlm", "text.jsonl"), ("contrastive", "pairs.jsonl"), ("rerank", "pairs.jsonl")):
        mixture = {"objective": objective, "columns": 64, "sources": [{"path": source, "weight": 1.0}]}
        (folder / f"{objective}.json").write_text(json.dumps(mixture))
    # Pairs of uneven lengths (texts of 8 to about 80 bytes): rows of 128 cells hold one to a few
    # pairs and some padding, so the live segments, anchors and candidates change from batch to batch.
    with open(folder / "varied.jsonl", "w") as varied:
        for index in range(300):
            phrase = f"open file {index}" + " and save it as copy" * (index % 4) + f" {index * 7 % 13}"
            varied.write(json.dumps({"query": phrase, "positives": [phrase.upper()[: 8 + index % 29]]}) + "\n")
    for name, objective in (("varied", "contrastive"), ("varied_rerank", "rerank")):
        mixture = {"objective": objective, "columns": 128, "sources": [{"path": "varied.jsonl", "weight": 1.0}]}
        (folder / f"{name}.json").write_text(json.dumps(mixture))
    return folder


def uform_base(build, *arguments):
    return subprocess.run([str(build / "uform_base"), "--quiet", *map(str, arguments)], capture_output=True, text=True,
                          timeout=300)


def common(corpus, objective="mlm"):
    if objective in ("varied", "varied_rerank"):  # contrastive or rerank over uneven pairs
        return ["--mixture", corpus / f"{objective}.json", "--tier", "64x2", "--rows", "4", "--seed", "2", "--threads", "2"]
    return ["--mixture", corpus / f"{objective}.json", "--tier", "64x2", "--rows", "2", "--seed", "2", "--threads", "2"]


SPECTRAL = ["--tcr-lambda", "0.1", "--lipschitz-lambda", "0.1"]


def needs_gpu(build):
    if not (cuda_build(build) and gpu_present()):
        pytest.skip("needs a CUDA build and a GPU")


def log_of(output):
    return [json.loads(line) for line in (output / "log.jsonl").read_text().splitlines()]


def check_pair_log(log, head, idle, extra):
    """8 logged steps of a pair objective: every part finite, the head's loss positive, the idle heads'
    0, the total their sum; off terms report 0, on, TCR subtracts lambda R (R > 0) and Lipschitz adds
    lambda sigma_max > 0."""
    assert [entry["step"] for entry in log] == list(range(1, 9))
    for entry in log:
        parts = entry[head] + entry["tcr"] + entry["lipschitz"]
        assert all(math.isfinite(entry[key]) for key in ("loss", head, "tcr", "lipschitz")), entry
        assert entry[head] > 0 and all(entry[key] == 0 for key in idle) and abs(entry["loss"] - parts) <= 1e-5, entry
        assert (entry["tcr"] < 0 and entry["lipschitz"] > 0) if extra else (entry["tcr"] == entry["lipschitz"] == 0), entry


def test_help_lists_device_flags(build_dir):
    run = subprocess.run([str(build_dir / "uform_base"), "--help"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0
    assert "--device cpu|cuda" in run.stdout and "--recompute 0|1|2" in run.stdout


@pytest.mark.parametrize("objective, extra", [("mlm", []), ("contrastive", []), ("contrastive", SPECTRAL), ("rerank", []),
                                              ("rerank", SPECTRAL), ("mlm", ["--objective", "rerank"])])
def test_without_gpu_fails_cleanly(build_dir, corpus, tmp_path, objective, extra):
    has_cuda = cuda_build(build_dir)
    if has_cuda and gpu_present():
        pytest.skip("a GPU is present: the GPU tests run instead")
    output = tmp_path / "run"
    run = uform_base(build_dir, *common(corpus, objective), "--steps", "2", "--device", "cuda", *extra, "--output", output)
    assert run.returncode in (1, 2), (run.returncode, run.stderr)  # an exit, not a signal or an abort
    expected = "no CUDA device" if has_cuda else "no CUDA backend"
    assert expected in run.stderr and "--device cuda" in run.stderr, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert not output.exists()


@pytest.mark.parametrize("objective, extra, named", [
    ("mlm", ["--tcr-lambda", "0.1"], "--tcr-lambda with the mlm objective"),
    ("mlm", ["--lipschitz-lambda", "0.1"], "--lipschitz-lambda with the mlm objective"),
])
def test_cpu_only_parts_are_refused(build_dir, corpus, tmp_path, objective, extra, named):
    output = tmp_path / "run"
    run = uform_base(build_dir, *common(corpus, objective), "--steps", "2", "--device", "cuda", *extra, "--output", output)
    assert run.returncode == 2, run.stderr
    assert f"{named} runs on the CPU only so far" in run.stderr, run.stderr
    assert not output.exists()


@pytest.mark.parametrize("flag, value, message", [
    ("--device", "gpu", "--device is cpu or cuda, not 'gpu'"),
    ("--recompute", "3", "--recompute is 0, 1 or 2"),
])
def test_bad_values_are_refused(build_dir, corpus, tmp_path, flag, value, message):
    run = uform_base(build_dir, *common(corpus), flag, value, "--output", tmp_path / "run")
    assert run.returncode == 2 and message in run.stderr, run.stderr


def test_trains_on_gpu(build_dir, corpus, tmp_path):
    needs_gpu(build_dir)
    output = tmp_path / "run"
    run = uform_base(build_dir, *common(corpus), "--steps", "6", "--save-every", "3", "--device", "cuda", "--output", output)
    assert run.returncode == 0, run.stderr
    log = [json.loads(line) for line in (output / "log.jsonl").read_text().splitlines()]
    assert [entry["step"] for entry in log] == list(range(1, 7))
    assert all(math.isfinite(entry["loss"]) and entry["loss"] > 0 for entry in log), log
    assert (output / "step-00000003" / "model.safetensors").exists()
    state = json.loads((output / "latest" / "trainer.json").read_text())
    assert state["step"] == 6 and state["device"] == "cuda"


@pytest.mark.parametrize("extra", [[], SPECTRAL], ids=["siglip", "siglip+tcr+lipschitz"])
def test_contrastive_trains_on_gpu(build_dir, corpus, tmp_path, extra):
    # Batches of a varying number of pairs and padding runs: the step's fixed capacities hold them all.
    needs_gpu(build_dir)
    output = tmp_path / "run"
    run = uform_base(build_dir, *common(corpus, "varied"), "--steps", "8", "--learning-rate", "2e-3", "--device", "cuda",
                     *extra, "--output", output)
    assert run.returncode == 0, run.stderr
    log = log_of(output)
    check_pair_log(log, "siglip", ("mlm",), extra)
    first, last = log[0]["loss"], sum(entry["loss"] for entry in log[-3:]) / 3
    assert last <= first, [entry["loss"] for entry in log]  # falls, or at worst holds
    state = json.loads((output / "latest" / "trainer.json").read_text())
    assert state["step"] == 8 and state["device"] == "cuda"


# The first step's loss on the GPU against a CPU run from the same seed: the same initial weights
# and the same first batch, so only arithmetic differs. The bound, in the manner of
# test/cuda/step_parity.c (u = 2^-8, the BF16 unit roundoff):
# - The CPU computes in Float32 from the same BF16 weights; its own error is negligible here. The
#   GPU rounds to BF16 at F = 8 L + 2 forward points: step_parity.c's 8 per block, then h entering
#   the pool and the pooled rows entering pool.proj (the embeddings, SigLIP and the spectral terms
#   stay Float32 or Float64). L = 2 here: F = 18.
# - Assumed as there: each embedding row, and so each normalized row of Z, is off by at most
#   e = sqrt(F) u relative (conditioning 1, independent roundings adding in quadrature).
# - SigLIP reads the cosine c of two width-m unit vectors through z = s c + b, s = exp(siglip.scale)
#   = 10 at initialization. Only the part of each vector's error along the partner's direction
#   moves c; assumed isotropic (roundings know no direction), that part is e / sqrt(m) of it, so
#   |dz| <= 2 s e / sqrt(m). Each term l = log(1 + exp(-y z)) moves by at most sigmoid(-y z) |dz|
#   <= l |dz| (x / (1 + x) <= log(1 + x)), so the SigLIP loss, a positive sum of such terms, moves
#   relatively by at most 2 s e / sqrt(m): 2.5 e = 0.041 for m = 64, every tier's smallest width.
# - Lipschitz, lambda sigma with sigma the top eigenvalue of Z^T Z / N (the power iteration assumed
#   converged, so the Rayleigh quotient is stationary in v): |d sigma| <= 2 ||Z|| ||dZ|| / N
#   <= 2 sqrt(sigma) e, since ||dZ|| <= sqrt(N) e and ||Z|| = sqrt(N sigma).
# - TCR, -lambda R with R = 1/2 logdet(I + a Z Z^T), a = m / (N 0.5): dR = a <(I + a Z Z^T)^-1 Z, dZ>,
#   and a^2 ||(I + a Z Z^T)^-1 Z||^2 = a sum_i a s_i^2 / (1 + a s_i^2)^2 <= a min(N, m) / 4, so
#   |dR| <= sqrt(a min(N, m) N) e / 2 <= m e / sqrt(2), whatever N.
BF16_UNIT = 2.0 ** -8
FORWARD_POINTS = 8 * 2 + 2  # tier 64x2: L = 2
ROW_ERROR = math.sqrt(FORWARD_POINTS) * BF16_UNIT
SIGLIP_BOUND = 2 * 10.0 / math.sqrt(64) * ROW_ERROR  # relative, s = 10 and m = 64 at initialization


def first_losses(build, corpus, tmp_path, mixture, extra):
    """The first step's log line of a CPU run and of a GPU run from the same seed."""
    logs = {}
    for device in ("cpu", "cuda"):
        output = tmp_path / device
        run = uform_base(build, *common(corpus, mixture), "--steps", "2", "--device", device, *extra, "--output", output)
        assert run.returncode == 0, run.stderr
        logs[device] = log_of(output)[0]
    cpu, gpu = logs["cpu"], logs["cuda"]
    assert cpu["step"] == gpu["step"] == 1 and cpu["cells"] == gpu["cells"], (cpu, gpu)
    return cpu, gpu


def check_first_losses(cpu, gpu, head, bound, extra):
    """The head's loss within `bound`, then TCR and Lipschitz within theirs, and the total within the sum."""
    assert abs(gpu[head] - cpu[head]) <= bound, (cpu, gpu, bound)
    if extra:
        lipschitz_lambda, tcr_lambda, m = 0.1, 0.1, 64
        sigma = cpu["lipschitz"] / lipschitz_lambda
        lipschitz_bound = lipschitz_lambda * 2 * math.sqrt(sigma) * ROW_ERROR
        tcr_bound = tcr_lambda * m / math.sqrt(2) * ROW_ERROR
        assert abs(gpu["lipschitz"] - cpu["lipschitz"]) <= lipschitz_bound, (cpu, gpu, lipschitz_bound)
        assert abs(gpu["tcr"] - cpu["tcr"]) <= tcr_bound, (cpu, gpu, tcr_bound)
        bound += lipschitz_bound + tcr_bound
    assert abs(gpu["loss"] - cpu["loss"]) <= bound, (cpu, gpu, bound)


@pytest.mark.parametrize("extra", [[], SPECTRAL], ids=["siglip", "siglip+tcr+lipschitz"])
def test_gpu_first_contrastive_loss_matches_cpu(build_dir, corpus, tmp_path, extra):
    needs_gpu(build_dir)
    cpu, gpu = first_losses(build_dir, corpus, tmp_path, "varied", extra)
    check_first_losses(cpu, gpu, "siglip", SIGLIP_BOUND * cpu["siglip"], extra)


@pytest.mark.parametrize("extra", [[], SPECTRAL], ids=["rerank", "rerank+tcr+lipschitz"])
def test_rerank_trains_on_gpu(build_dir, corpus, tmp_path, extra):
    # MaxSim over the ColBERT rows of a varying number of queries and documents per batch; the heads
    # the step does not hold keep their values, those it trains move.
    needs_gpu(build_dir)
    from test_uform_base import tensors
    output = tmp_path / "run"
    run = uform_base(build_dir, *common(corpus, "varied_rerank"), "--steps", "8", "--save-every", "4", "--learning-rate",
                     "2e-3", "--device", "cuda", *extra, "--output", output)
    assert run.returncode == 0, run.stderr
    log = log_of(output)
    check_pair_log(log, "rerank", ("mlm", "siglip"), extra)
    middle, last = tensors(output / "step-00000004" / "model.safetensors"), tensors(output / "step-00000008" / "model.safetensors")
    for name in ("rerank.proj", "siglip.scale", "siglip.bias", "final_norm", "blocks.0.qkv"):
        assert middle[name] != last[name], name
    assert middle["mlm.head"] == last["mlm.head"]
    for name in ("pool.proj", "pool.query"):  # trained only where TCR and Lipschitz read the pool
        assert (middle[name] != last[name]) if extra else (middle[name] == last[name]), name
    state = json.loads((output / "latest" / "trainer.json").read_text())
    assert state["step"] == 8 and state["device"] == "cuda"


# The first rerank loss on the GPU against the CPU's, derived as the contrastive bound above:
# - The GPU rounds to BF16 at F = 8 L + 1 forward points before the ColBERT rows: the 8 per block,
#   then h entering rerank.proj (the raw rows, their normalization and MaxSim stay Float32). L = 2:
#   F = 17, and each ColBERT row, a unit vector of width W = 128, is off by at most e = sqrt(F) u
#   (the normalization only drops the error's radial part).
# - A similarity c_i . c_j of two unit rows moves only by the part of each row's error along the
#   other; assumed isotropic, |d(c_i . c_j)| <= 2 e / sqrt(W) for every pair of cells.
# - The largest similarity of a query cell over a document's cells is 1-Lipschitz in the largest
#   change of those similarities (a changed best cell included: the max is continuous), so it moves
#   by at most 2 e / sqrt(W); maxsim / |q| is the mean of these over the query's cells and moves by
#   no more (averaging independent roundings would shrink it by sqrt(|q|), not counted).
# - z = s maxsim / |q| + b with s = exp(siglip.scale) = 10 at initialization: |dz| <= 2 s e / sqrt(W),
#   and, as for SigLIP, each positive term l moves by at most l |dz|, so the loss relatively by at
#   most 2 s e / sqrt(W) = 1.77 e = 0.029.
# - With TCR and Lipschitz the pool's embeddings carry them, with the contrastive derivation's
#   F = 8 L + 2 and bounds.
RERANK_POINTS = 8 * 2 + 1  # tier 64x2: L = 2
COLBERT_ERROR = math.sqrt(RERANK_POINTS) * BF16_UNIT
RERANK_BOUND = 2 * 10.0 / math.sqrt(128) * COLBERT_ERROR  # relative, s = 10 and W = 128


@pytest.mark.parametrize("extra", [[], SPECTRAL], ids=["rerank", "rerank+tcr+lipschitz"])
def test_gpu_first_rerank_loss_matches_cpu(build_dir, corpus, tmp_path, extra):
    needs_gpu(build_dir)
    cpu, gpu = first_losses(build_dir, corpus, tmp_path, "varied_rerank", extra)
    assert cpu["rerank"] > 0 and gpu["siglip"] == cpu["siglip"] == 0, (cpu, gpu)
    check_first_losses(cpu, gpu, "rerank", RERANK_BOUND * cpu["rerank"], extra)


def test_gpu_head_only_run_keeps_the_rest(build_dir, corpus, tmp_path):
    # --train-only rerank,siglip on the GPU skips every update but the head's and the backward pass
    # below the heads: the other tensors come back byte for byte as they went up, the head moves, and
    # the first loss (the same forward) is the CPU's within the rerank bound above.
    needs_gpu(build_dir)
    from test_uform_base import tensors
    embedder = tmp_path / "embedder"
    assert uform_base(build_dir, *common(corpus, "varied"), "--steps", "2", "--output", embedder).returncode == 0
    logs = {}
    for device in ("cpu", "cuda"):
        run = uform_base(build_dir, *common(corpus, "varied_rerank"), "--steps", "3", "--device", device, "--init-from",
                         embedder, "--train-only", "rerank,siglip", "--output", tmp_path / device)
        assert run.returncode == 0, run.stderr
        logs[device] = log_of(tmp_path / device)[0]
    start, trained = tensors(embedder / "latest" / "model.safetensors"), tensors(tmp_path / "cuda" / "latest" / "model.safetensors")
    moved = {"rerank.proj", "siglip.scale", "siglip.bias"}
    assert [name for name in start if name not in moved and trained[name] != start[name]] == []
    assert all(trained[name] != start[name] for name in moved)
    cpu, gpu = logs["cpu"], logs["cuda"]
    assert abs(gpu["rerank"] - cpu["rerank"]) <= RERANK_BOUND * cpu["rerank"], (cpu, gpu)


@pytest.mark.parametrize("objective, extra", [("mlm", []), ("varied", []), ("varied", SPECTRAL), ("varied_rerank", []),
                                              ("varied_rerank", SPECTRAL)],
                         ids=["mlm", "contrastive", "contrastive+tcr+lipschitz", "rerank", "rerank+tcr+lipschitz"])
def test_gpu_run_resumes_exactly(build_dir, corpus, tmp_path, objective, extra):
    # The GPU's optimizer state goes into the checkpoint: 6 steps straight equal a resume from step 3.
    needs_gpu(build_dir)
    from test_uform_base import tensors  # raw bytes by name: numpy may lack bfloat16
    straight, halves = tmp_path / "straight", tmp_path / "halves"
    args = (*common(corpus, objective), "--steps", "6", "--device", "cuda", *extra)
    assert uform_base(build_dir, *args, "--output", straight).returncode == 0
    assert uform_base(build_dir, *args, "--save-every", "3", "--output", halves).returncode == 0
    os.remove(halves / "latest")
    os.symlink("step-00000003", halves / "latest")
    run = uform_base(build_dir, *args, "--resume", halves, "--output", halves)
    assert run.returncode == 0, run.stderr
    for name in ("model.safetensors", "optimizer.safetensors"):
        a, b = tensors(straight / "latest" / name), tensors(halves / "latest" / name)
        assert a.keys() == b.keys() and all(a[k] == b[k] for k in a), [k for k in a if a[k] != b.get(k)]
    # The resumed run appends steps 4..6 to the halves' log: the same losses as the straight run's.
    resumed = [(entry["step"], entry["loss"]) for entry in log_of(halves)[-3:]]
    assert resumed == [(entry["step"], entry["loss"]) for entry in log_of(straight)[3:]]


@pytest.mark.parametrize("objective", ["mlm", "varied"], ids=["mlm", "contrastive"])
def test_gpu_recompute_forms_agree_bitwise(build_dir, corpus, tmp_path, objective):
    # Keeping every activation, replaying every block, and replaying all but attention run the same
    # kernels on the same inputs: the checkpoints and losses after 3 steps are bitwise equal.
    needs_gpu(build_dir)
    from test_uform_base import tensors
    runs = {}
    for recompute in ("0", "1", "2"):
        output = tmp_path / f"recompute-{recompute}"
        run = uform_base(build_dir, *common(corpus, objective), "--steps", "3", "--device", "cuda",
                         "--recompute", recompute, "--output", output)
        assert run.returncode == 0, run.stderr
        runs[recompute] = (tensors(output / "latest" / "model.safetensors"),
                           [entry["loss"] for entry in log_of(output)])
    weights, losses = runs["1"]
    for recompute in ("0", "2"):
        other, other_losses = runs[recompute]
        assert other.keys() == weights.keys(), recompute
        assert [k for k in weights if weights[k] != other[k]] == [], recompute
        assert other_losses == losses, (recompute, other_losses, losses)
