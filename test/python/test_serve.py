# test_serve.py: `uform serve` end to end, only on 127.0.0.1: the official `openai` client and the
# rerank route agree with `uform encode` and `uform rerank` on the same inputs; curl reaches
# /health, /metrics and /v1/embeddings; bad requests get their codes and the server goes on; a
# bounded load test of 64 clients measures throughput, latency and the batching gain; a killed
# half-sent client and a 100 MiB body do not hurt it; SIGTERM drains in-flight requests, exit 0.
# UFORM_SERVE_LOAD_REQUESTS and UFORM_SERVE_LOAD_SECONDS size the load test for a longer local run.

import base64
import http.client
import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from conftest import COLUMNS, init_checkpoint

TEXTS = ["hello world", "Grüße, 世界", "a", "tokenizer-free byte-level encoders", "x" * (COLUMNS + 40)]
DOCUMENTS = ["a cat sat on the mat", "stock markets fell", "the cat is on the rug", "cats", "q" * (COLUMNS + 7)]
QUERY = "a cat on a mat"
REPOSITORY = pathlib.Path(__file__).resolve().parent.parent.parent
# `uform encode` and `uform rerank` print 7 significant digits (%.7g): a printed value is within
# half a unit of the 7th digit, 5e-7 relative, of the Float32 the same call computed.
PRINTED = 5e-7


class Server:
    """A `uform serve` process on 127.0.0.1 and a free port it chose (--port 0), stderr in a file."""

    def __init__(self, cli, model, *flags, directory):
        self.log = pathlib.Path(directory) / f"serve_{time.monotonic_ns()}.log"
        with open(self.log, "w") as stderr:  # the child keeps its own copy
            named = ["--model", str(model)] if model is not None else []  # None: the shipped default
            self.process = subprocess.Popen([str(cli), "serve", *named, "--host", "127.0.0.1", "--port", "0",
                                             *map(str, flags)], stdout=subprocess.DEVNULL, stderr=stderr)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            found = re.search(r"listening on http://127\.0\.0\.1:(\d+)", self.log.read_text())
            if found:
                self.port = int(found.group(1))
                return
            assert self.process.poll() is None, f"uform serve exited {self.process.returncode}: {self.log.read_text()}"
            time.sleep(0.02)
        self.process.kill()
        pytest.fail(f"uform serve did not start in 30 s: {self.log.read_text()}")

    def request(self, method, path, body=None, headers=None, timeout=60):
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        connection.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
        response = connection.getresponse()
        payload = response.read()
        connection.close()
        kind = response.getheader("Content-Type", "")
        return response.status, json.loads(payload) if kind.startswith("application/json") else payload.decode()

    def metric(self, name):
        status, text = self.request("GET", "/metrics")
        assert status == 200
        return float(re.search(rf"^{re.escape(name)} (\S+)$", text, re.M).group(1))

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.process.kill()
                pytest.fail(f"uform serve did not stop within 40 s of SIGTERM: {self.log.read_text()}")
        return self.process.returncode


@pytest.fixture(scope="module")
def serve_model(library, tmp_path_factory):
    """128x2 of seed 5 with conftest's short row, so that truncation is cheap to reach."""
    return init_checkpoint(library, tmp_path_factory.mktemp("serve_model"), "128x2", 5)


@pytest.fixture(scope="module")
def server(cli, serve_model, tmp_path_factory):
    running = Server(cli, serve_model, "--workers", "2", "--name", "served", directory=tmp_path_factory.mktemp("serve"))
    yield running
    assert running.stop() == 0, running.log.read_text()


@pytest.fixture(scope="module")
def maxsim_server(cli, serve_model, tmp_path_factory):
    """A server that ranks by MaxSim alone (--fuse 0), the rerank head's own score."""
    running = Server(cli, serve_model, "--fuse", "0", directory=tmp_path_factory.mktemp("serve_maxsim"))
    yield running
    assert running.stop() == 0, running.log.read_text()


@pytest.fixture(scope="module")
def guarded(cli, serve_model, tmp_path_factory):
    """A server with an API key and a small request limit."""
    running = Server(cli, serve_model, "--api-key", "sesame", "--max-request-bytes", "4096",
                     directory=tmp_path_factory.mktemp("serve_guarded"))
    yield running
    assert running.stop() == 0, running.log.read_text()


def cli_encode(cli, model, texts, width):
    run = subprocess.run([str(cli), "encode", "--model", str(model), "--width", str(width)], input="\n".join(texts) + "\n",
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return np.array([json.loads(line) for line in run.stdout.splitlines()], dtype=np.float64)


def cli_rerank(cli, model, query, documents, *flags):
    run = subprocess.run([str(cli), "rerank", "--model", str(model), "--query", query, *flags],
                         input="\n".join(documents) + "\n", capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return np.array([float(line) for line in run.stdout.split()])


def assert_printed_equal(served, printed, what):
    gap = np.abs(served - printed) - PRINTED * np.abs(printed)
    assert (gap <= 1e-12).all(), f"{what}: {np.max(gap):.3g} beyond the print bound"


def test_help_names_every_flag(cli):
    run = subprocess.run([str(cli), "serve", "--help"], capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    for flag in ("--model", "--host", "--port", "--workers", "--threads", "--api-key", "--max-request-bytes",
                 "--batch-bytes", "--timeout", "--connections", "--drain-seconds", "--name", "--precision", "--device",
                 "--fuse", "--fuse-gate", "--verbose"):
        assert flag in run.stdout, flag
    usage = subprocess.run([str(cli), "--help"], capture_output=True, text=True, timeout=30)
    assert "serve" in usage.stdout


def test_bad_flags_are_refused(cli, serve_model):
    for flags in (["--workers", "0"], ["--port", "70000"], ["--bogus", "1"], ["--precision", "f16"], ["--fuse", "1.5"],
                  ["--fuse", "x"], ["--fuse"], ["--fuse-gate", "x"], ["--fuse-gate", "2000000"]):
        run = subprocess.run([str(cli), "serve", "--model", str(serve_model), *flags], capture_output=True, text=True, timeout=30)
        assert run.returncode == 2 and "uform serve:" in run.stderr, (flags, run.stderr)
    run = subprocess.run([str(cli), "serve", "--model", "/nonexistent/model", "--port", "0"], capture_output=True,
                         text=True, timeout=30)
    assert run.returncode == 1 and "/nonexistent/model" in run.stderr, run.stderr


@pytest.mark.parametrize("width", [64, 128])
@pytest.mark.parametrize("encoding_format", ["float", "base64"])
def test_openai_client_agrees_with_cli(cli, serve_model, server, width, encoding_format):
    openai = pytest.importorskip("openai", reason="pip install openai (scripts/setup.sh does)")
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key="unused", max_retries=0)
    response = client.embeddings.create(model="uform-test", input=TEXTS, dimensions=width, encoding_format=encoding_format)
    assert response.model == "uform-test" and [item.index for item in response.data] == list(range(len(TEXTS)))
    assert response.usage.prompt_tokens == response.usage.total_tokens == sum(len(t.encode()) for t in TEXTS)
    if encoding_format == "float":
        served = np.array([item.embedding for item in response.data], dtype=np.float64)
    else:  # the client hands base64 strings back as they came when it was asked for them
        served = np.array([np.frombuffer(base64.b64decode(item.embedding), dtype="<f4") for item in response.data],
                          dtype=np.float64)
    printed = cli_encode(cli, serve_model, TEXTS, width)
    assert served.shape == printed.shape == (len(TEXTS), width)
    assert_printed_equal(served, printed, f"width {width}, {encoding_format}")
    np.testing.assert_allclose(np.linalg.norm(served, axis=1), 1, atol=1e-5)
    # the control: the other width's embeddings, cut to this width, are a different vector
    other = cli_encode(cli, serve_model, TEXTS, 192 - width)[:, :min(width, 192 - width)]
    assert np.abs(served[:, :other.shape[1]] - other).max() > 100 * PRINTED


def test_openai_default_format_and_one_string(server):
    openai = pytest.importorskip("openai", reason="pip install openai (scripts/setup.sh does)")
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key="unused", max_retries=0)
    one = client.embeddings.create(model="m", input="hello world")  # the client asks for base64 and decodes it
    listed = client.embeddings.create(model="m", input=["hello world"], encoding_format="float")
    assert len(one.data) == 1 and len(one.data[0].embedding) == 128
    np.testing.assert_array_equal(np.float32(one.data[0].embedding), np.float32(listed.data[0].embedding))


def test_truncated_inputs_are_named(server):
    status, body = server.request("POST", "/v1/embeddings", {"input": TEXTS})
    assert status == 200 and body["model"] == "served"
    assert body["truncated"] == [i for i, text in enumerate(TEXTS) if len(text.encode()) > COLUMNS]


def test_rerank_agrees_with_cli(cli, serve_model, server):
    """By default /v1/rerank ranks as `uform rerank --fuse 0.5 --fuse-gate 64`: each result's `fused` is the
    printed score and relevance_score = (fused + 1) / 2; the controls, MaxSim's mean and the ungated fusion
    (four of the documents and the query are shorter than 64 bytes), differ."""
    documents = [text if i % 2 else {"text": text} for i, text in enumerate(DOCUMENTS)]
    status, body = server.request("POST", "/v1/rerank", {"model": "r", "query": QUERY, "documents": documents,
                                                          "return_documents": True})
    assert status == 200, body
    fused = cli_rerank(cli, serve_model, QUERY, DOCUMENTS, "--fuse", "0.5", "--fuse-gate", "64")
    order = sorted(range(len(DOCUMENTS)), key=lambda i: (-fused[i], i))
    assert [result["index"] for result in body["results"]] == order
    served = np.array([result["fused"] for result in body["results"]])
    assert_printed_equal(served, fused[order], "the fused score")
    scores = np.array([result["relevance_score"] for result in body["results"]])
    assert (np.abs(scores - (fused[order] + 1) / 2) <= PRINTED * np.abs(fused[order]) / 2 + 4 * 2.0 ** -24).all()
    assert ((scores >= 0) & (scores <= 1)).all() and list(scores) == sorted(scores, reverse=True)
    maxsim = cli_rerank(cli, serve_model, QUERY, DOCUMENTS)
    cells = min(len(QUERY.encode()), COLUMNS)
    assert np.abs(served - maxsim[order] / cells).max() > 0.01, "the served score is MaxSim's mean: the fusion is not read"
    ungated = cli_rerank(cli, serve_model, QUERY, DOCUMENTS, "--fuse", "0.5")
    assert np.abs(served - ungated[order]).max() > 1e-4, "the served score is the ungated fusion's: the gate is not read"
    assert [result["document"]["text"] for result in body["results"]] == [DOCUMENTS[i] for i in order]
    assert body["truncated"] == [i for i, text in enumerate(DOCUMENTS) if len(text) > COLUMNS]
    assert body["usage"]["total_tokens"] == len(QUERY) + sum(len(text) for text in DOCUMENTS)
    status, top = server.request("POST", "/v1/rerank", {"query": QUERY, "documents": DOCUMENTS, "top_n": 2})
    assert status == 200 and [result["index"] for result in top["results"]] == order[:2]


def test_rerank_by_maxsim_agrees_with_cli(cli, serve_model, maxsim_server):
    server = maxsim_server
    documents = [text if i % 2 else {"text": text} for i, text in enumerate(DOCUMENTS)]
    status, body = server.request("POST", "/v1/rerank", {"model": "r", "query": QUERY, "documents": documents,
                                                          "return_documents": True})
    assert status == 200, body
    maxsim = cli_rerank(cli, serve_model, QUERY, DOCUMENTS)
    order = sorted(range(len(DOCUMENTS)), key=lambda i: (-maxsim[i], i))
    assert [result["index"] for result in body["results"]] == order
    served = np.array([result["maxsim"] for result in body["results"]])
    assert_printed_equal(served, maxsim[order], "MaxSim")
    # relevance_score = (MaxSim / query cells + 1) / 2, the mean best cosine mapped onto 0..1;
    # its Float32 arithmetic adds a few ulp of 1 to the printed MaxSim's bound
    cells = min(len(QUERY.encode()), COLUMNS)
    expected = (maxsim[order] / cells + 1) / 2
    scores = np.array([result["relevance_score"] for result in body["results"]])
    assert (np.abs(scores - expected) <= PRINTED * np.abs(maxsim[order]) / cells / 2 + 4 * 2.0 ** -24).all()
    assert ((scores >= 0) & (scores <= 1)).all() and list(scores) == sorted(scores, reverse=True)
    assert [result["document"]["text"] for result in body["results"]] == [DOCUMENTS[i] for i in order]
    status, top = server.request("POST", "/v1/rerank", {"query": QUERY, "documents": DOCUMENTS, "top_n": 2})
    assert status == 200 and [result["index"] for result in top["results"]] == order[:2]
    assert "document" not in top["results"][0]


def test_curl(server):
    def curl(*arguments):
        # curl is not ours: the sanitizer suite's preloaded runtimes are not for it
        environment = {key: value for key, value in os.environ.items() if key != "LD_PRELOAD"}
        run = subprocess.run(["curl", "-s", "-S", "--max-time", "30", *arguments], capture_output=True, text=True, timeout=60,
                             env=environment)
        assert run.returncode == 0, run.stderr
        return run.stdout
    base = f"http://127.0.0.1:{server.port}"
    assert json.loads(curl(f"{base}/health")) == {"status": "ok"}
    body = json.loads(curl(f"{base}/v1/embeddings", "-H", "Content-Type: application/json",
                           "-d", '{"input": ["hello", "world"], "dimensions": 64}'))
    assert [len(item["embedding"]) for item in body["data"]] == [64, 64] and body["object"] == "list"
    metrics = curl(f"{base}/metrics")
    for name in ("uform_requests_total{route=\"/v1/embeddings\",code=\"200\"}", "uform_request_bytes_total",
                 "uform_errors_total", "uform_request_duration_seconds_bucket", "uform_queue_depth",
                 "uform_batch_inputs_bucket", "uform_batch_requests_count"):
        assert name in metrics, name


BAD = [  # (route, body, what the message names)
    ("/v1/embeddings", b'{"input": ["unclosed"', "not JSON"),
    ("/v1/embeddings", b"", "not JSON"),
    ("/v1/embeddings", b'["input"]', "JSON object"),
    ("/v1/embeddings", {"model": "m"}, "'input' is required"),
    ("/v1/embeddings", {"input": 5}, "'input' must be"),
    ("/v1/embeddings", {"input": [[1, 2, 3]]}, "input[0]"),
    ("/v1/embeddings", {"input": ["ok", 7]}, "input[1]"),
    ("/v1/embeddings", {"input": []}, "empty list"),
    ("/v1/embeddings", {"input": ["ok", ""]}, "empty string"),
    ("/v1/embeddings", {"input": "x", "dimensions": 7}, "dimensions"),
    ("/v1/embeddings", {"input": "x", "dimensions": 256}, "dimensions"),
    ("/v1/embeddings", {"input": "x", "dimensions": "64"}, "dimensions"),
    ("/v1/embeddings", {"input": "x", "encoding_format": "hex"}, "encoding_format"),
    ("/v1/embeddings", {"input": "x", "model": 3}, "'model'"),
    ("/v1/rerank", {"documents": ["a"]}, "'query'"),
    ("/v1/rerank", {"query": "", "documents": ["a"]}, "'query'"),
    ("/v1/rerank", {"query": "q"}, "'documents'"),
    ("/v1/rerank", {"query": "q", "documents": []}, "empty list"),
    ("/v1/rerank", {"query": "q", "documents": [{"txt": "a"}]}, "documents[0]"),
    ("/v1/rerank", {"query": "q", "documents": ["a", 1]}, "documents[1]"),
    ("/v1/rerank", {"query": "q", "documents": ["a"], "top_n": 0}, "top_n"),
    ("/v1/rerank", {"query": "q", "documents": ["a"], "top_n": 1.5}, "top_n"),
    ("/v1/rerank", {"query": "q", "documents": ["a"], "return_documents": "yes"}, "return_documents"),
]


@pytest.mark.parametrize("route,body,names", BAD, ids=[f"{r[4:]}-{i}" for i, (r, _, _) in enumerate(BAD)])
def test_bad_requests_get_400(server, route, body, names):
    status, answer = server.request("POST", route, body)
    assert status == 400, answer
    assert names in answer["error"]["message"] and answer["error"]["type"] == "invalid_request_error", answer
    assert server.request("GET", "/health") == (200, {"status": "ok"})


def test_mutated_requests_never_get_500(server):
    """Seeded byte mutations of valid bodies: each is answered 200 or 400, never 500, never a crash."""
    generator = np.random.default_rng(17)
    valid = [(b"/v1/embeddings", json.dumps({"input": ["hello", "world"], "dimensions": 64, "encoding_format": "base64"}).encode()),
             (b"/v1/rerank", json.dumps({"query": "cat", "documents": ["a", {"text": "b"}], "top_n": 1}).encode())]
    for trial in range(300):
        route, body = valid[trial % 2]
        mutated = bytearray(body)
        for _ in range(int(generator.integers(1, 4))):
            position = int(generator.integers(0, len(mutated)))
            choice = int(generator.integers(0, 3))
            if choice == 0:
                mutated[position] = int(generator.integers(0, 256))
            elif choice == 1:
                del mutated[position]
            else:
                mutated[position:position] = bytes([int(generator.integers(0, 256))])
        status, answer = server.request("POST", route.decode(), bytes(mutated))
        assert status in (200, 400), (bytes(mutated), status, answer)
        assert status == 200 or answer["error"]["message"], answer
    assert server.request("GET", "/health") == (200, {"status": "ok"})


def test_routes_and_methods(server):
    assert server.request("GET", "/nowhere")[0] == 404
    assert server.request("POST", "/v1/chat/completions", {"x": 1})[0] == 404
    status, answer = server.request("GET", "/v1/embeddings")
    assert status == 405 and "POST" in answer["error"]["message"]
    assert server.request("POST", "/health", {})[0] == 405
    assert server.request("GET", "/health") == (200, {"status": "ok"})


def test_api_key_and_request_limit(guarded):
    body = {"input": "hello"}
    assert guarded.request("POST", "/v1/embeddings", body)[0] == 401
    assert guarded.request("POST", "/v1/embeddings", body, {"Authorization": "Bearer wrong"})[0] == 401
    assert guarded.request("POST", "/v1/rerank", {"query": "q", "documents": ["d"]}, {"Authorization": "sesame"})[0] == 401
    status, answer = guarded.request("POST", "/v1/embeddings", body, {"Authorization": "Bearer sesame"})
    assert status == 200 and len(answer["data"]) == 1
    assert guarded.request("GET", "/health")[0] == 200  # health and metrics take no key
    status, answer = guarded.request("POST", "/v1/embeddings", {"input": "y" * 5000}, {"Authorization": "Bearer sesame"})
    assert status == 413 and answer["error"]["type"] == "request_too_large", answer
    # a chunked body carries no length: it is refused once it passes the limit
    connection = http.client.HTTPConnection("127.0.0.1", guarded.port, timeout=30)
    connection.request("POST", "/v1/embeddings", body=iter([b'{"input": "'] + [b"z" * 1024] * 16 + [b'"}']),
                       headers={"Authorization": "Bearer sesame", "Content-Type": "application/json"}, encode_chunked=True)
    response = connection.getresponse()
    assert response.status == 413 and json.loads(response.read())["error"]["type"] == "request_too_large"
    connection.close()
    assert guarded.request("POST", "/v1/embeddings", body, {"Authorization": "Bearer sesame"})[0] == 200
    assert guarded.metric('uform_requests_total{route="/v1/embeddings",code="401"}') == 2


def test_fault_half_request_and_100_mib(cli, server, tmp_path):
    # a client that sends half a request and is killed
    half = ("import socket, sys, time\n"
            f"s = socket.create_connection(('127.0.0.1', {server.port}))\n"
            "s.sendall(b'POST /v1/embeddings HTTP/1.1\\r\\nHost: x\\r\\nContent-Type: application/json\\r\\n'"
            " b'Content-Length: 1000\\r\\n\\r\\n{\"input\": [\"half')\n"
            "print('sent', flush=True)\n"
            "time.sleep(60)\n")
    client = subprocess.Popen([sys.executable, "-c", half], stdout=subprocess.PIPE, text=True)
    assert client.stdout.readline().strip() == "sent"
    assert server.request("POST", "/v1/embeddings", {"input": "meanwhile"})[0] == 200
    client.kill()
    client.wait()
    # 100 MiB streamed: refused from its headers, long before the body could be held
    peak_before = vm_peak(server.process.pid)
    connection = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    connection.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       b"Content-Length: 104857600\r\n\r\n")
    chunk, sent = b"[" * (1 << 20), 0
    try:
        while sent < 100 << 20:
            connection.sendall(chunk)
            sent += len(chunk)
    except (BrokenPipeError, ConnectionResetError):
        pass
    head = b""
    try:
        while b"\r\n\r\n" not in head:
            part = connection.recv(65536)
            if not part:
                break
            head += part
    except ConnectionResetError:
        pass
    connection.close()
    assert head.startswith(b"HTTP/1.1 413"), head[:200]
    # the server's peak resident memory grew by less than a tenth of the body
    assert vm_peak(server.process.pid) - peak_before < 10 << 20
    status, answer = server.request("POST", "/v1/embeddings", {"input": ["after", "the faults"]})
    assert status == 200 and len(answer["data"]) == 2


def vm_peak(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def test_sigterm_drains_in_flight_requests(cli, serve_model, tmp_path):
    running = Server(cli, serve_model, "--workers", "1", "--batch-bytes", "0", directory=tmp_path)
    texts = [f"text {i} " + "y" * 80 for i in range(100)]
    results = []

    def client():
        results.append(running.request("POST", "/v1/embeddings", {"input": texts, "dimensions": 64}, timeout=60))
    clients = [threading.Thread(target=client) for _ in range(4)]
    for thread in clients:
        thread.start()
    deadline = time.monotonic() + 20
    while running.metric("uform_in_flight_requests") < 5 and time.monotonic() < deadline:  # this request is one
        time.sleep(0.01)
    running.process.send_signal(signal.SIGTERM)
    for thread in clients:
        thread.join(timeout=60)
    assert running.process.wait(timeout=40) == 0, running.log.read_text()
    assert len(results) == 4 and all(status == 200 and len(body["data"]) == 100 for status, body in results), \
        [status for status, _ in results]
    draining = re.search(r"draining (\d+) in-flight requests", running.log.read_text())
    assert draining and int(draining.group(1)) >= 2, running.log.read_text()  # the signal came while they ran
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", running.port), timeout=5)


def test_verbose_logs_one_line_per_request(cli, serve_model, server, tmp_path):
    running = Server(cli, serve_model, "--verbose", directory=tmp_path)
    assert running.request("POST", "/v1/embeddings", {"input": "one"})[0] == 200
    assert running.request("GET", "/nowhere")[0] == 404
    assert running.stop() == 0
    lines = [line for line in running.log.read_text().splitlines() if " ms" in line and "bytes in" in line]
    assert len(lines) == 2 and "/v1/embeddings 200" in lines[0] and "other 404" in lines[1], lines
    assert "bytes in" not in server.log.read_text()  # without --verbose: no line per request


def test_sigint_with_pool_threads_exits_0(cli, serve_model, tmp_path):
    """SIGINT, with the contexts' pool threads running beside the workers, ends as SIGTERM does."""
    running = Server(cli, serve_model, "--workers", "2", "--threads", "2", directory=tmp_path)
    assert running.request("POST", "/v1/embeddings", {"input": ["one", "two"]})[0] == 200
    running.process.send_signal(signal.SIGINT)
    assert running.process.wait(timeout=40) == 0, running.log.read_text()
    assert "SIGINT" in running.log.read_text()


def load(server, clients, total, seconds, text):
    """`clients` threads, each on one keep-alive connection, post one-text embedding requests until
    `total` are sent or `seconds` pass. Returns the figures."""
    latencies, errors, lock, issued = [], [], threading.Lock(), [0]
    stop_at = time.monotonic() + seconds
    body = json.dumps({"input": [text]}).encode()

    def client():
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        while time.monotonic() < stop_at:
            with lock:
                if issued[0] >= total:
                    break
                issued[0] += 1
            start = time.perf_counter()
            try:
                connection.request("POST", "/v1/embeddings", body=body, headers={"Content-Type": "application/json"})
                response = connection.getresponse()
                answer = response.read()
                ok = response.status == 200 and len(json.loads(answer)["data"]) == 1
            except (OSError, http.client.HTTPException, ValueError) as error:
                ok, answer = False, repr(error).encode()
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
            elapsed = time.perf_counter() - start
            with lock:
                (latencies if ok else errors).append(elapsed if ok else answer[:200])
        connection.close()
    started = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    done = np.array(latencies)
    return {"clients": clients, "requests": len(latencies), "errors": len(errors), "first_errors": [e.decode(errors="replace") for e in errors[:3]],
            "seconds": round(wall, 3), "requests_per_second": round(len(latencies) / wall, 1),
            "p50_ms": round(1e3 * float(np.percentile(done, 50)), 2) if len(done) else None,
            "p99_ms": round(1e3 * float(np.percentile(done, 99)), 2) if len(done) else None}


def test_load_and_batching_gain(cli, library, tmp_path_factory):
    total = int(os.environ.get("UFORM_SERVE_LOAD_REQUESTS", "2000"))
    # under the sanitizer suite's runtimes the server runs some twenty times slower: a shorter cap keeps CI's total
    sanitized = "asan" in os.environ.get("LD_PRELOAD", "")
    seconds = float(os.environ.get("UFORM_SERVE_LOAD_SECONDS", "6" if sanitized else "20"))
    # short texts, as queries are: a pass over one is too small to keep the cores' products busy
    model = init_checkpoint(library, tmp_path_factory.mktemp("serve_load_model"), "128x2", 9, columns=512)
    text = "a query of about sixty bytes: where is the cat sitting now?"
    directory = tmp_path_factory.mktemp("serve_load")
    figures = {"model": "128x2, 512-byte rows", "text_bytes": len(text), "cores": os.cpu_count()}
    for name, flags in (("batched", ["--workers", "2"]), ("one_at_a_time", ["--workers", "1", "--batch-bytes", "0"])):
        running = Server(cli, model, *flags, directory=directory)
        try:
            figures[name] = load(running, 64, total, seconds, text)
            figures[name]["flags"] = " ".join(flags)
            figures[name]["mean_requests_per_batch"] = round(
                running.metric("uform_batch_requests_sum") / max(1.0, running.metric("uform_batch_requests_count")), 2)
        finally:
            assert running.stop() == 0, running.log.read_text()
    figures["batching_gain"] = round(figures["batched"]["requests_per_second"] / figures["one_at_a_time"]["requests_per_second"], 2)
    out = REPOSITORY / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    temporary = out / "serve_load.json.part"
    temporary.write_text(json.dumps(figures, indent=1) + "\n")
    os.replace(temporary, out / "serve_load.json")
    print("\nuform serve load test:", json.dumps(figures, indent=1))
    for name in ("batched", "one_at_a_time"):
        assert figures[name]["errors"] == 0, figures[name]
        assert figures[name]["requests"] > 0, figures[name]
    assert figures["batched"]["mean_requests_per_batch"] > 1.5, figures  # 64 clients queue: batches join them
    assert figures["one_at_a_time"]["mean_requests_per_batch"] == 1, figures


def test_without_model_serves_the_shipped_default(cli, tmp_path):
    """No --model: the build's models/default, said on stderr, embedding as `uform encode` with it does."""
    shipped = pathlib.Path(__file__).resolve().parents[2] / "models" / "default"
    server = Server(cli, None, directory=tmp_path)
    try:
        assert f"serving the shipped default {shipped}" in server.log.read_text()
        status, body = server.request("POST", "/v1/embeddings", {"input": ["a cat", "eine Katze"], "dimensions": 64})
        assert status == 200, body
        assert_printed_equal(np.array([row["embedding"] for row in body["data"]]), cli_encode(cli, shipped, ["a cat", "eine Katze"], 64),
                             "the shipped default's embeddings")
    finally:
        assert server.stop() == 0



def served_concurrently(server, requests):
    """The responses to requests ((route, body)) sent at once from threads, so that workers join them."""
    answers = [None] * len(requests)

    def send(index):
        answers[index] = server.request("POST", *requests[index])
    threads = [threading.Thread(target=send, args=(index,)) for index in range(len(requests))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def test_cuda_workers(cli, serve_model, tmp_path):
    """--device cuda: each worker's context on the GPU. Without a GPU (or the CUDA backend) the
    server refuses to start with one line; with one, embeddings of concurrent, batched requests and
    MaxSim scores hold test_cuda_inference's bound against the CPU, whose control (one byte
    changed) the same check rejects."""
    from cuda_env import cuda_build, gpu_present
    import test_cuda_inference as cuda

    if not (cuda_build(cli.parent) and gpu_present()):
        run = subprocess.run([str(cli), "serve", "--model", str(serve_model), "--port", "0", "--device", "cuda"],
                             capture_output=True, text=True, timeout=60)
        assert run.returncode != 0 and "cuda" in run.stderr.lower() and len(run.stderr.strip().splitlines()) <= 2, run.stderr
        pytest.skip("needs a CUDA build and a GPU (the refusal was tested instead)")
    texts = [text.decode() for text in cuda.TEXTS]
    server = Server(cli, serve_model, "--device", "cuda", "--workers", "2", "--fuse", "0", directory=tmp_path)  # MaxSim's bound
    try:
        middle = len(texts) // 2
        spans = [(0, middle), (middle, len(texts))] * 4  # eight requests of two halves: batches join some of them
        answers = served_concurrently(server, [("/v1/embeddings", {"input": texts[a:b], "dimensions": 64}) for a, b in spans])
        assert all(status == 200 for status, _ in answers), answers
        cpu = cuda.encode(cli, str(serve_model), cuda.TEXTS, "cpu", 64)
        for (a, b), (_, body) in zip(spans, answers):  # every copy, whatever batch it joined, within the bound
            half = np.array([row["embedding"] for row in body["data"]], dtype=np.float64)
            check = cuda.check_embeddings(str(serve_model), cuda.TEXTS[a:b], 64, half, cpu[a:b], printed=True)
            assert check.ok, str(check)
        served = np.array([row["embedding"] for _, body in answers[:2] for row in body["data"]], dtype=np.float64)
        control = cuda.encode(cli, str(serve_model), [cuda.one_byte_changed(text) for text in cuda.TEXTS], "cpu", 64)
        assert not cuda.check_embeddings(str(serve_model), cuda.TEXTS, 64, served, control, printed=True).ok
        status, body = server.request("POST", "/v1/rerank", {"query": cuda.QUERY.decode(), "documents": texts})
        assert status == 200, body
        scores = np.zeros(len(texts))
        for result in body["results"]:
            scores[result["index"]] = result["maxsim"]
        cpu_scores = cuda.rerank(cli, str(serve_model), cuda.QUERY, cuda.TEXTS, "cpu")
        check = cuda.check_scores(str(serve_model), cuda.QUERY, cuda.TEXTS, scores, cpu_scores, printed=True)
        assert check.ok, str(check)
    finally:
        assert server.stop() == 0, server.log.read_text()
