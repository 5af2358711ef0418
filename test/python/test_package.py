# test_package.py: the Python package (python/) against the `uform` CLI on the same inputs. The
# package is built as a wheel by scikit-build-core over the library already in UFORM_BUILD (so the
# only compile is the extension's one file), installed into a temporary folder and imported.
# Every embedding, quantized output and MaxSim score must print as the CLI prints it (%.7g), i.e.
# agree to the CLI's 7 significant digits; integer outputs must be equal. Both run the same library
# on the same bytes, so the one allowed difference is the CLI's printing.

import json
import os
import pathlib
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest

from conftest import built

ROOT = pathlib.Path(__file__).resolve().parents[2]
TEXTS = ["hello world", "Grüße, 世界", "a", "tokenizer-free byte-level encoders", "the cat sat on the mat", "0123456789"]
DOCUMENTS = ["the cat is on the rug", "stock markets fell", "a cat sat on the mat", "cats", "Katze auf der Matte"]


def run_cli(cli, *arguments, stdin=""):
    run = subprocess.run([str(cli), *map(str, arguments)], input=stdin, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"uform {' '.join(map(str, arguments))}: {run.stderr}"
    return run


def printed_rows(rows):
    """Rows as the CLI prints them: '%.7g' per float, the integers as they are."""
    def value(x):
        return "%.7g" % float(x) if isinstance(x, (float, np.floating)) else str(int(x))
    return ["[" + ", ".join(value(x) for x in row) + "]" for row in rows]


def pip_environment():
    """The environment for pip and CMake: the sanitizer run's preloads stay with the tests, not the compilers."""
    environment = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS")}
    environment["CMAKE_BUILD_PARALLEL_LEVEL"] = "2"
    return environment


def build_package(directory, default_model=""):
    """Builds a wheel of python/ over BUILD's libuform.so and installs it into directory/site."""
    try:
        import scikit_build_core  # noqa: F401
    except ImportError:
        pytest.skip("scikit-build-core is not installed (scripts/setup.sh installs it): the package cannot be built")
    library = built("libuform.so").resolve()
    wheels, site = directory / "wheels", directory / "site"
    settings = ["-C", f"cmake.define.UFORM_PREBUILT={library}", "-C", f"cmake.define.UFORM_DEFAULT_MODEL={default_model}",
                "-C", f"build-dir={directory / 'build'}"]
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--quiet", "-w",
                            str(wheels), *settings, str(ROOT / "python")], capture_output=True, text=True,
                           env=pip_environment(), timeout=600)
    assert build.returncode == 0, build.stdout + build.stderr
    wheel = next(wheels.glob("uform-*.whl"))
    install = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", "--target",
                              str(site), str(wheel)], capture_output=True, text=True, env=pip_environment(), timeout=300)
    assert install.returncode == 0, install.stdout + install.stderr
    return site, wheel


@pytest.fixture(scope="module")
def checkpoint(init_model):
    """conftest's 128x2 of seed 7 with rows of 96 bytes: long texts stay cheap, even under the sanitizers."""
    return init_model


@pytest.fixture(scope="module")
def package(tmp_path_factory, checkpoint):
    """The package built once, with `checkpoint` packaged as its default model: (module, wheel)."""
    site, wheel = build_package(tmp_path_factory.mktemp("package"), default_model=str(checkpoint))
    sys.path.insert(0, str(site))
    try:
        import uform as module
    finally:
        sys.path.remove(str(site))
    assert pathlib.Path(module.__file__).parent == site / "uform", f"imported {module.__file__}, not the one just built"
    return module, wheel


@pytest.fixture(scope="module")
def uform(package):
    return package[0]


@pytest.fixture(scope="module")
def vision_checkpoint(cli, tmp_path_factory):
    directory = tmp_path_factory.mktemp("package_vision") / "model"
    run_cli(cli, "init", "--tier", "128x2", "--seed", "6", "--frontends", "vision", "--output", directory)
    return directory


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """An RGBA PNG and an RGB PNG (decoded alike by libpng and Pillow: PNG is lossless), and their pixels."""
    from PIL import Image
    directory = tmp_path_factory.mktemp("package_images")
    generator = np.random.default_rng(3)
    rgba = generator.integers(0, 256, (40, 56, 4), dtype=np.uint8)
    rgb = generator.integers(0, 256, (33, 21, 3), dtype=np.uint8)
    Image.fromarray(rgba, "RGBA").save(directory / "rgba.png")
    Image.fromarray(rgb, "RGB").save(directory / "rgb.png")
    return {"rgba": (directory / "rgba.png", rgba), "rgb": (directory / "rgb.png", rgb)}


def cli_encode(cli, model, texts, *flags):
    return run_cli(cli, "encode", "--model", model, *flags, stdin="\n".join(texts) + "\n").stdout.splitlines()


def test_the_package_ships_its_types(uform):
    folder = pathlib.Path(uform.__file__).parent
    assert (folder / "py.typed").is_file() and (folder / "__init__.pyi").is_file()
    assert "Model" in (folder / "__init__.pyi").read_text()
    assert "thread" in uform.Model.__doc__.lower() and "output_precision" in uform.Model.encode.__doc__


@pytest.mark.parametrize("width", [None, 64])
def test_encode_agrees_with_the_cli(uform, cli, checkpoint, width):
    flags = ["--width", width] if width else []
    wanted = cli_encode(cli, checkpoint, TEXTS, *flags)
    with uform.Model(checkpoint) as model:
        got = model.encode(TEXTS, width=width)
        assert got.dtype == np.float32 and got.shape == (len(TEXTS), width or model.info["dims"])
        assert printed_rows(got) == wanted
        # The batches are packed apart; an embedding does not depend on its neighbours.
        assert printed_rows(model.encode(TEXTS, width=width, batch_size=1)) == wanted
        # The control: another width prints differently, so the comparison can fail.
        assert printed_rows(model.encode(TEXTS, width=192 - (width or 128))) != wanted


def test_encode_in_float32_agrees_with_the_cli(uform, cli, checkpoint):
    wanted = cli_encode(cli, checkpoint, TEXTS, "--precision", "f32")
    with uform.Model(checkpoint, precision="f32") as model:
        got = model.encode(TEXTS)
    assert printed_rows(got) == wanted
    with uform.Model(checkpoint) as model:
        assert printed_rows(model.encode(TEXTS)) != wanted  # bf16 differs from f32: the flag reached the library


@pytest.mark.parametrize("precision", ["e4m3", "int8"])
def test_encode_in_a_narrow_precision_agrees_with_the_cli(uform, cli, checkpoint, precision):
    wanted = cli_encode(cli, checkpoint, TEXTS, "--precision", precision)
    with uform.Model(checkpoint, precision=precision) as model:
        got = model.encode(TEXTS)
        assert model.info["precision"] == precision
    assert printed_rows(got) == wanted
    with uform.Model(checkpoint) as model:
        assert printed_rows(model.encode(TEXTS)) != wanted  # bf16 differs: the flag reached the library


def test_a_long_text_is_cut_as_the_cli_cuts_it(uform, cli, checkpoint):
    texts = ["x" * 200 + " tail", "short"]  # past the checkpoint's row of 96 bytes
    wanted = cli_encode(cli, checkpoint, texts)
    with uform.Model(checkpoint) as model, pytest.warns(UserWarning, match="1 of 2 texts were longer than a row"):
        assert printed_rows(model.encode(texts)) == wanted


@pytest.mark.parametrize("precision", ["int8", "uint8", "binary", "ubinary"])
def test_output_precisions_agree_with_the_cli(uform, cli, checkpoint, precision):
    wanted = cli_encode(cli, checkpoint, TEXTS, "--width", 64, "--output-precision", precision)
    with uform.Model(checkpoint) as model:
        got = model.encode(TEXTS, width=64, output_precision=precision)
    dtype = np.int8 if precision in ("int8", "binary") else np.uint8
    columns = 64 if precision in ("int8", "uint8") else 8
    assert got.dtype == dtype and got.shape == (len(TEXTS), columns)
    assert printed_rows(got) == wanted


def test_calibration_agrees_with_the_cli(uform, cli, checkpoint, tmp_path):
    ranges = tmp_path / "ranges.json"
    run_cli(cli, "calibrate", "--model", checkpoint, "--width", 64, "--output", ranges, stdin="\n".join(DOCUMENTS) + "\n")
    wanted = cli_encode(cli, checkpoint, TEXTS, "--width", 64, "--output-precision", "int8", "--calibration", ranges)
    with uform.Model(checkpoint) as model:
        assert printed_rows(model.encode(TEXTS, width=64, output_precision="int8", calibration=ranges)) == wanted
        computed = uform.calibrate(model.encode(DOCUMENTS, width=64))
        written = json.loads(ranges.read_text())
        assert computed["count"] == written["count"] and computed["width"] == 64
        np.testing.assert_array_equal(computed["minimums"], np.array(written["minimums"], np.float32))
        assert printed_rows(model.encode(TEXTS, width=64, output_precision="int8", calibration=computed)) == wanted
        widened = {"minimums": computed["minimums"].astype(np.float64), "maximums": list(map(float, computed["maximums"]))}
        assert printed_rows(model.encode(TEXTS, width=64, output_precision="int8", calibration=widened)) == wanted
        own = model.encode(TEXTS, width=64, output_precision="int8")  # the inputs' own ranges differ from DOCUMENTS'
        assert printed_rows(own) != wanted


def test_rerank_and_maxsim_agree_with_the_cli(uform, cli, checkpoint):
    query = "a cat on a mat"
    run = run_cli(cli, "rerank", "--model", checkpoint, "--query", query, stdin="\n".join(DOCUMENTS) + "\n")
    wanted = run.stdout.split()
    with uform.Model(checkpoint) as model:
        scores = model.maxsim(query, DOCUMENTS)
        assert scores.dtype == np.float32 and ["%.7g" % s for s in scores] == wanted
        ranked = model.rerank(query, DOCUMENTS)
        order = sorted(range(len(DOCUMENTS)), key=lambda i: (-float(wanted[i]), i))
        assert [r["index"] for r in ranked] == order
        assert ["%.7g" % r["score"] for r in ranked] == [wanted[i] for i in order]
        assert [r["text"] for r in ranked] == [DOCUMENTS[i] for i in order]
        assert model.rerank(query, DOCUMENTS, top_k=2) == ranked[:2]
        assert model.rerank(query, DOCUMENTS, top_k=50) == ranked
    fused = run_cli(cli, "rerank", "--model", checkpoint, "--query", query, "--fuse", "1", stdin="\n".join(DOCUMENTS) + "\n")
    with uform.Model(checkpoint) as model:  # W = 1: the fused score is symmetric MaxSim alone
        symmetric = model.maxsim(query, DOCUMENTS, symmetric=True)
        assert symmetric.dtype == np.float32 and ["%.7g" % s for s in symmetric] == fused.stdout.split()
        assert ["%.7g" % s for s in symmetric] != ["%.7g" % (s / len(query)) for s in scores]
        ranked = model.rerank(query, DOCUMENTS, fuse=0.5)  # the fused ranking, as `uform rerank --fuse 0.5`
        wanted = run_cli(cli, "rerank", "--model", checkpoint, "--query", query, "--fuse", "0.5",
                         stdin="\n".join(DOCUMENTS) + "\n").stdout.split()
        order = sorted(range(len(DOCUMENTS)), key=lambda i: (-float(wanted[i]), i))
        assert [r["index"] for r in ranked] == order and ["%.7g" % r["score"] for r in ranked] == [wanted[i] for i in order]
        for bad, error in ((0, ValueError), (1.5, ValueError), ("0.5", TypeError), (True, TypeError)):
            with pytest.raises(error, match="fuse"):
                model.rerank(query, DOCUMENTS, fuse=bad)
        # fuse_gate=L, as `uform rerank --fuse-gate L`: the query (14 bytes) and "cats" are gated at 16, the rest not
        gated = model.rerank(query, DOCUMENTS, fuse=0.5, fuse_gate=16)
        wanted = run_cli(cli, "rerank", "--model", checkpoint, "--query", query, "--fuse", "0.5", "--fuse-gate", "16",
                         stdin="\n".join(DOCUMENTS) + "\n").stdout.split()
        order = sorted(range(len(DOCUMENTS)), key=lambda i: (-float(wanted[i]), i))
        assert [r["index"] for r in gated] == order and ["%.7g" % r["score"] for r in gated] == [wanted[i] for i in order]
        assert {r["index"]: r["score"] for r in gated} != {r["index"]: r["score"] for r in ranked}, "the gate is ignored"
        for bad, error in ((-1, ValueError), (1 << 21, ValueError), (2.0, TypeError), (True, TypeError)):
            with pytest.raises(error, match="fuse_gate"):
                model.rerank(query, DOCUMENTS, fuse=0.5, fuse_gate=bad)
        with pytest.raises(ValueError, match="fuse_gate needs fuse"):
            model.rerank(query, DOCUMENTS, fuse_gate=16)


def test_stored_colbert_vectors_score_as_maxsim(uform, checkpoint):
    """Model.colbert's vectors, scored later by uform.maxsim_vectors, give Model.maxsim's scores, both sides."""
    query = "a cat on a mat"
    with uform.Model(checkpoint) as model:
        vectors = model.colbert(query)
        assert vectors.dtype == np.float32 and vectors.shape == (len(query.encode()), model.info["colbert_width"])
        assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
        for symmetric in (False, True):
            wanted = model.maxsim(query, DOCUMENTS, symmetric=symmetric)
            got = [uform.maxsim_vectors(vectors, model.colbert(document), symmetric=symmetric) for document in DOCUMENTS]
            assert np.allclose(got, wanted, rtol=1e-5, atol=1e-6), (symmetric, got, wanted)
        many = model.colbert(DOCUMENTS)  # one call for a collection: each text's vectors as alone
        assert len(many) == len(DOCUMENTS) and model.colbert([]) == []
        for document, vectors in zip(DOCUMENTS, many):
            np.testing.assert_allclose(vectors, model.colbert(document), rtol=1e-5, atol=1e-6)
        with pytest.raises(ValueError, match="text 1 is empty"):
            model.colbert(["fine", ""])
        with pytest.raises(TypeError, match="text 1 is int"):
            model.colbert(["fine", 3])
        shuffled = model.colbert(DOCUMENTS[0])[::-1]  # the control: MaxSim does not see order, so change the values
        assert uform.maxsim_vectors(vectors, -shuffled) != pytest.approx(float(model.maxsim(query, DOCUMENTS[:1])[0]))
        with pytest.raises(ValueError, match="wide"):
            uform.maxsim_vectors(vectors, vectors[:, :8])
        with pytest.raises(ValueError, match="at least one"):
            uform.maxsim_vectors(vectors[:0], vectors)
        with pytest.raises(ValueError, match="empty"):
            model.colbert("")
        with pytest.raises(TypeError):
            model.colbert(b"bytes")


def test_images_agree_with_the_cli(uform, cli, vision_checkpoint, images):
    (rgba_path, rgba), (rgb_path, rgb) = images["rgba"], images["rgb"]
    wanted = run_cli(cli, "encode", "--model", vision_checkpoint, "--image", rgba_path, rgb_path).stdout.splitlines()
    padded = np.zeros((rgba.shape[0], rgba.shape[1] + 8, 4), np.uint8)
    padded[:, :rgba.shape[1]] = rgba  # rows 4 (W + 8) bytes apart: used in place with that stride
    with uform.Model(vision_checkpoint) as model:
        assert model.info["modalities"] == ["text", "image"]
        by_path = model.encode([{"image": str(rgba_path)}, {"image": rgb_path}])
        assert printed_rows(by_path) == wanted
        assert printed_rows(model.encode([rgba_path.read_bytes(), {"image": rgb_path.read_bytes()}])) == wanted
        assert printed_rows(model.encode([rgba, rgb])) == wanted
        assert printed_rows(model.encode([padded[:, :rgba.shape[1]], np.asfortranarray(rgb)])) == wanted
        assert printed_rows(model.encode(rgba[::-1].copy())) != wanted[:1]  # the control: a flipped image differs
        records = [{"text": "a red fox"}, {"image": str(rgba_path)}, {"text": "flag of Chile"}, {"image": str(rgb_path)}]
        lines = run_cli(cli, "encode", "--model", vision_checkpoint, "--records",
                        stdin="\n".join(json.dumps(r) for r in records) + "\n").stdout.splitlines()
        mixed = ["a red fox", {"image": str(rgba_path)}, "flag of Chile", rgb]
        assert printed_rows(model.encode(mixed)) == lines
        assert printed_rows(model.encode(mixed, batch_size=3)) == lines


def test_model_info_matches_the_cli(uform, cli, checkpoint):
    described = json.loads(run_cli(cli, "info", "--model", checkpoint).stdout)
    with uform.Model(checkpoint) as model:
        info = model.info
    assert info["widths"] == described["embedding_widths"] and info["dims"] == described["embedding_widths"][-1]
    assert info["tier"] == described["tier"] and info["parameters"] == described["parameters"]
    assert info["heads_present"] == described["heads_present"] and info["modalities"] == ["text"]
    assert info["device"] == "cpu" and info["precision"] == "bf16" and info["origin"] == "path"


def test_the_packaged_default(uform, package, cli, checkpoint, monkeypatch):
    """Built with UFORM_DEFAULT_MODEL, the wheel carries that checkpoint and Model() opens it."""
    import zipfile
    assert "uform/default/model.safetensors" in zipfile.ZipFile(package[1]).namelist()
    monkeypatch.delenv("UFORM_MODEL", raising=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning: this default is a real checkpoint
        model = uform.Model()
    with model:
        assert model.info["origin"] == "packaged default"
        assert printed_rows(model.encode(["hi"])) == cli_encode(cli, checkpoint, ["hi"])


def test_the_shipped_sharded_default_is_packaged(cli, tmp_path):
    """The wheel built as `pip install ./python` builds it carries models/default's shards and index,
    and Model() there opens them: `encode(['hi'])` prints as `uform encode` prints it on models/default."""
    import zipfile
    shipped = ROOT / "models" / "default"
    site, wheel = build_package(tmp_path, default_model=str(shipped))
    names = set(zipfile.ZipFile(wheel).namelist())
    shards = sorted(path.name for path in shipped.glob("model-*-of-*.safetensors"))
    assert shards and {f"uform/default/{name}" for name in shards + ["model.safetensors.index.json"]} <= names, sorted(names)
    script = ("import sys, json; sys.path.insert(0, sys.argv[1]); import uform; m = uform.Model(); "
              "print(m.info['origin']); print('[' + ', '.join('%.7g' % v for v in m.encode(['hi'])[0]) + ']')")
    environment = {k: v for k, v in os.environ.items() if k != "UFORM_MODEL"}
    run = subprocess.run([sys.executable, "-c", script, str(site)], capture_output=True, text=True, timeout=300, env=environment)
    assert run.returncode == 0, run.stderr
    origin, row = run.stdout.splitlines()[-2:]
    assert origin == "packaged default"
    assert row == cli_encode(cli, shipped, ["hi"])[0]


def test_the_default_model_without_a_packaged_one(uform, cli, tmp_path, monkeypatch):
    """Where a build packages none, Model() is the untrained 128x2 of seed 0, and says so; UFORM_MODEL names another."""
    import uform._default as default
    monkeypatch.delenv("UFORM_MODEL", raising=False)
    monkeypatch.setattr(default, "PACKAGED", tmp_path / "absent")
    seed0 = tmp_path / "seed0"
    run_cli(cli, "init", "--tier", "128x2", "--seed", "0", "--output", seed0)
    with pytest.warns(UserWarning, match="untrained 128x2 of seed 0"):
        model = uform.Model()
    with model:
        assert model.info["origin"].startswith("untrained") and model.info["path"] is None
        assert printed_rows(model.encode(["hi"])) == cli_encode(cli, seed0, ["hi"])
    monkeypatch.setenv("UFORM_MODEL", str(seed0))
    with uform.Model() as named:
        assert named.info["origin"] == "UFORM_MODEL" and named.info["path"] == str(seed0)


def test_threads_share_one_model(uform, checkpoint):
    """Calls from several threads at once (a context each) give what one thread gets."""
    with uform.Model(checkpoint, threads=1) as model:
        wanted = printed_rows(model.encode(TEXTS))
        results, errors = [], []

        def work():
            try:
                for _ in range(3):
                    results.append(printed_rows(model.encode(TEXTS)))
            except Exception as error:  # noqa: BLE001: reported below
                errors.append(error)

        workers = [threading.Thread(target=work) for _ in range(4)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    assert not errors and len(results) == 12 and all(r == wanted for r in results)


def test_bad_inputs_raise(uform, checkpoint, vision_checkpoint, tmp_path):
    with uform.Model(checkpoint) as model:
        for inputs, kind, words in [
            (5, TypeError, "list or tuple"), ([1], TypeError, "input 0 is int"), (["a", None], TypeError, "input 1 is NoneType"),
            ([], ValueError, "empty"), ([""], ValueError, "input 0 is an empty text"), ([{"text": "a"}], TypeError, "{'image'"),
            ([np.zeros((4, 4, 2), np.uint8)], TypeError, "HxWx3 or HxWx4"), ([np.zeros((4, 4, 3), np.float32)], TypeError, "uint8"),
            ([np.zeros((0, 4, 4), np.uint8)], ValueError, "empty"), ([b""], ValueError, "empty bytes"),
            (np.array(["a", "b"]), TypeError, "texts go as str"),
        ]:
            with pytest.raises(kind, match=words):
                model.encode(inputs)
        for keywords, kind, words in [
            ({"width": 65}, ValueError, r"\[64, 128\]"), ({"width": "64"}, TypeError, "width"),
            ({"batch_size": 0}, ValueError, "batch_size"), ({"output_precision": "int4"}, ValueError, "int4"),
            ({"normalize": False}, ValueError, "normalize"), ({"calibration": {"minimums": [0]}}, ValueError, "calibration"),
            ({"output_precision": "int8", "calibration": 5}, TypeError, "calibration"),
            ({"output_precision": "int8", "calibration": {"minimums": [0.0], "maximums": [1.0]}}, ValueError, "width 1"),
            ({"output_precision": "int8", "calibration": tmp_path / "absent.json"}, FileNotFoundError, "absent"),
        ]:
            with pytest.raises(kind, match=words):
                model.encode(["a"], **keywords)
        with pytest.raises(uform.Error, match="vision") as error:  # the library's own message
            model.encode([np.zeros((16, 16, 4), np.uint8)])
        assert error.value.status
        for query, documents, keywords, kind, words in [
            ("", ["a"], {}, ValueError, "query is empty"), (3, ["a"], {}, TypeError, "query"),
            ("q", "doc", {}, TypeError, "documents"), ("q", [], {}, ValueError, "empty"),
            ("q", ["a", 3], {}, TypeError, "document 1 is int"), ("q", ["a", ""], {}, ValueError, "document 1 is empty"),
            ("q", ["a"], {"top_k": 0}, ValueError, "top_k"), ("q", ["a"], {"top_k": "1"}, TypeError, "top_k"),
        ]:
            with pytest.raises(kind, match=words):
                model.rerank(query, documents, **keywords)
    with uform.Model(vision_checkpoint) as model:
        with pytest.raises(uform.Error, match="image 0") as error:
            model.encode([b"not an image at all"])
        assert error.value.status in ("format", "unsupported")
        with pytest.raises(uform.Error, match="absent.png"):
            model.encode([{"image": str(tmp_path / "absent.png")}])
    for arguments, keywords, kind, words in [
        ((3,), {}, TypeError, "int"), ((checkpoint,), {"device": "tpu"}, ValueError, "device"),
        ((checkpoint,), {"precision": "fp8"}, ValueError, "precision"),
        ((tmp_path / "absent",), {}, uform.Error, "absent"),
    ]:
        with pytest.raises(kind, match=words):
            uform.Model(*arguments, **keywords)


def test_cuda_is_wired_through(uform, checkpoint):
    """device='cuda' reaches uform_context_create: a library without the CUDA backend (or a GPU) says why."""
    try:
        model = uform.Model(checkpoint, device="cuda")
    except uform.Error as error:
        assert error.status in ("unsupported", "device") and ("CUDA" in str(error) or "GPU" in str(error)), str(error)
        return
    with model:
        assert model.info["device"] == "cuda" and model.encode(TEXTS).shape == (len(TEXTS), 128)


def test_a_closed_model_raises(uform, checkpoint):
    model = uform.Model(checkpoint)
    with model as entered:
        assert entered is model and not model.closed
    assert model.closed and "closed" in repr(model)
    for call in (lambda: model.encode(["a"]), lambda: model.rerank("q", ["a"]), lambda: model.maxsim("q", ["a"]),
                 lambda: model.info, lambda: model.__enter__()):
        with pytest.raises(ValueError, match="closed"):
            call()
    model.close()  # closing twice is harmless
