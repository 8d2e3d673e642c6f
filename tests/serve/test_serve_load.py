"""The load generator against the test server run in this process: every way an output comes back, errors
and timeouts as failed requests, readiness, and the closed loop's concurrency."""

import argparse
import io
import threading
import time
from http.server import ThreadingHTTPServer

import numpy as np
import pytest
from serve_testing import server_module

from perfkit.serve.load import RequestFailed, call, closed_loop, encode_request, take_output, wait_ready
from perfkit.serve.spec import OutputSpec, RequestSpec

SERVER = server_module()
BODY = {"prompt": "{prompt}", "seed": "{seed}", "width": "{width}", "height": "{height}", "frames": "{frames}"}
VALUES = {"prompt": "a fox", "seed": 5, "width": 32, "height": 24, "frames": 3}


@pytest.fixture
def served():
    """Start the test server in a thread with the given options; yields a function returning its base URL."""
    servers = []

    def start(**options) -> str:
        defaults = {"sleep_ms": 0, "max_concurrency": 4, "format": "npy", "reply": "body", "noise": 0,
                    "never_ready": False, "crash_after": None, "fail_every": None, "hang_after": None}
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), SERVER.make_handler(argparse.Namespace(**{**defaults,
                                                                                              **options})))
        httpd.daemon_threads = True
        threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True).start()
        servers.append(httpd)
        return f"http://127.0.0.1:{httpd.server_address[1]}"

    yield start
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()


def generate(base: str, output: OutputSpec, timeout: float = 10):
    url, body, headers = encode_request(RequestSpec("/generate", "POST", BODY, {}), VALUES)
    status, data = call("POST", base + url, body, headers, timeout)
    return take_output(output, status, data, base, "127.0.0.1", timeout)


@pytest.mark.parametrize("reply,output", [
    ("body", OutputSpec("body", None, ".npy")),
    ("base64", OutputSpec("base64", "video", ".npy")),
    ("url", OutputSpec("url", "video.url", ".bin")),
    ("path", OutputSpec("path", "path", ".bin")),
])
def test_every_output_kind_brings_back_the_served_array(served, reply, output):
    answer = generate(served(reply=reply), output)
    expected = SERVER.frames(5, 32, 24, 3)
    np.testing.assert_array_equal(np.load(io.BytesIO(answer.data)), expected)
    assert answer.status == 200
    # The suffix comes from the fetched URL or path when it has one, else from the case.
    assert answer.suffix == ".npy"


def test_a_placeholder_body_is_sent_as_json_with_typed_values():
    url, body, headers = encode_request(RequestSpec("/g?p={name}", "POST", BODY, {"X-Seed": "{seed}"}),
                                        {**VALUES, "name": "fox"})
    assert url == "/g?p=fox" and headers == {"X-Seed": "5", "Content-Type": "application/json"}
    assert body == b'{"prompt": "a fox", "seed": 5, "width": 32, "height": 24, "frames": 3}'


def test_an_error_answer_is_a_failed_request_with_status_and_excerpt(served):
    base = served(fail_every=1)
    with pytest.raises(RequestFailed) as err:
        generate(base, OutputSpec("body", None, ".npy"))
    assert err.value.status == 500 and not err.value.timed_out
    assert str(err.value) == 'HTTP 500: {"error": "injected failure on request 1"}'


def test_a_missing_field_or_a_url_to_another_host_is_a_failed_request():
    with pytest.raises(RequestFailed, match=r"HTTP 200, no field 'video.url': \{\"video\": 1\}"):
        take_output(OutputSpec("url", "video.url", ".mp4"), 200, b'{"video": 1}', "http://127.0.0.1:1", "127.0.0.1", 1)
    with pytest.raises(RequestFailed, match="refused to fetch http://example.com/v.mp4: neither loopback nor"):
        take_output(OutputSpec("url", "url", ".mp4"), 200, b'{"url": "http://example.com/v.mp4"}',
                    "http://127.0.0.1:1", "127.0.0.1", 1)


def test_a_request_without_an_answer_in_time_is_timed_out(served):
    base = served(hang_after=0)
    t0 = time.monotonic()
    with pytest.raises(RequestFailed) as err:
        generate(base, OutputSpec("body", None, ".npy"), timeout=0.5)
    assert err.value.timed_out and str(err.value) == "no answer within 0.5 s"
    assert time.monotonic() - t0 < 3


def test_readiness_waits_for_a_2xx_and_reports_the_last_answer(served):
    ok, last = wait_ready(served() + "/health", 5, lambda: True, lambda: None)
    assert ok and last == "HTTP 200"
    t0 = time.monotonic()
    ok, last = wait_ready(served(never_ready=True) + "/health", 0.6, lambda: True, lambda: None)
    assert not ok and last == 'HTTP 503: {"status": "loading"}' and 0.6 <= time.monotonic() - t0 < 3
    ok, last = wait_ready("http://127.0.0.1:1/health", 5, lambda: False, lambda: None)  # the server exited
    assert not ok and last == "no answer"


@pytest.mark.parametrize("concurrency", [1, 3])
def test_the_closed_loop_keeps_exactly_concurrency_requests_in_flight(concurrency):
    lock, state, sent = threading.Lock(), {"now": 0, "most": 0}, []

    def send(i, worker):
        with lock:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
            sent.append((i, worker))
        time.sleep(0.02)
        with lock:
            state["now"] -= 1

    closed_loop(9, concurrency, send, lambda: False, lambda: None, lambda: None)
    assert sorted(i for i, _ in sent) == list(range(9)) and state["most"] == concurrency
    assert {w for _, w in sent} == set(range(concurrency))


def test_a_stopped_loop_sends_no_more_and_aborts_what_is_in_flight():
    release, aborted, sent = threading.Event(), [], []

    def send(i, worker):
        sent.append(i)
        if i == 2:  # this request hangs until the server is ended
            release.wait(10)

    def abort():
        aborted.append(True)
        release.set()

    t0 = time.monotonic()
    closed_loop(100, 1, send, lambda: len(sent) >= 3, abort, lambda: None)
    assert sent == [0, 1, 2] and aborted and time.monotonic() - t0 < 5
