"""The load generator against the test server run in this process: every way an output comes back, errors
and timeouts as failed requests, readiness, and the closed loop's concurrency."""

import argparse
import base64
import contextlib
import io
import json
import os
import threading
import time
import types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable
from urllib.parse import parse_qs, unquote, urlsplit

import av
import numpy as np
import pytest
from serve_testing import serve_case, server_module

from perfkit.run import serve_load
from perfkit.run.serve_load import (Deadline, Reply, RequestFailed, call, closed_loop, encode_request, take_output,
                                    wait_ready)
from perfkit.run.serve_trial import ServedTrial, hang_reason
from perfkit.run.trial import Trial
from perfkit.rundata.case import validate
from perfkit.rundata.serve_spec import OutputSpec, RequestSpec

SERVER = server_module()
BODY = {"prompt": "{prompt}", "seed": "{seed}", "width": "{width}", "height": "{height}", "frames": "{frames}"}
VALUES = {"prompt": "a fox", "seed": 5, "width": 32, "height": 24, "frames": 3}


def encoded(container: str, codec: str, rate: int = 8) -> bytes:
    """Two black 32x32 frames as PyAV (ffmpeg) writes them in ``container``: a video by the referee's own making."""
    buf = io.BytesIO()
    with av.open(buf, "w", format=container) as out:
        stream = out.add_stream(codec, rate=rate)
        stream.width, stream.height, stream.pix_fmt = 32, 32, "rgb8" if codec == "gif" else "yuv420p"
        for frame in np.zeros((2, 32, 32, 3), np.uint8):
            out.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
        out.mux(stream.encode())
    return buf.getvalue()


MP4 = encoded("mp4", "mpeg4")


@contextlib.contextmanager
def serving(handler: type, release: threading.Event):
    """``handler`` served on a free loopback port in a thread: its base URL. On leaving, ``release`` lets hung
    requests end before the server shuts, so no handler thread outlives the test."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        release.set()
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def served(tmp_path):
    """Start the test server in a thread with the given options; yields a function returning its base URL."""
    with contextlib.ExitStack() as servers:
        def start(**options) -> str:
            defaults = {"sleep_ms": 0, "max_concurrency": 4, "format": "npy", "reply": "body", "noise": 0,
                        "never_ready": False, "crash_after": None, "fail_every": None, "hang_after": None,
                        "out_dir": str(tmp_path)}
            handler = SERVER.make_handler(argparse.Namespace(**{**defaults, **options}))
            return servers.enter_context(serving(handler, handler.release))

        yield start


def generate(base: str, output: OutputSpec, timeout: float = 10):
    url, body, headers = encode_request(RequestSpec("/generate", "POST", BODY, {}), VALUES)
    return take_output(output, call("POST", base + url, body, headers, timeout), base, "127.0.0.1",
                       Deadline.start(timeout))


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


def test_a_url_placeholder_is_percent_encoded_so_a_prompt_fits_a_query():
    # A prompt with spaces sent raw is refused by http.client, and an '&' in it would split the query.
    url, body, _ = encode_request(RequestSpec("http://{host}:{port}/g/{name}?p={prompt}&s={seed}", "GET", None, {}),
                                  {"prompt": "a fox & co? #1 ré", "name": "a/b", "seed": 5, "host": "127.0.0.1",
                                   "port": 8000})
    assert url == "http://127.0.0.1:8000/g/a/b?p=a%20fox%20%26%20co%3F%20%231%20r%C3%A9&s=5" and body is None


def test_a_url_value_is_data_encoded_once_and_the_template_s_own_text_is_sent_as_written():
    """The rule: a placeholder's value is what the server should read, so '%' in it is encoded too ('%20' arrives as
    the three characters '%20', never as a space: '100%' and '50%25' are text as well, and no rule tells those from
    'already encoded'); the URL template's own text, already encoded by its writer, is not touched. Referee: the
    standard library's parse_qs and unquote, as a server decodes the URL."""
    url, _, _ = encode_request(RequestSpec("/g/{name}?style=oil%20paint&p={prompt}", "GET", None, {}),
                               {"prompt": "100% a%20fox+co", "name": "fox%2F1"})
    assert url == "/g/fox%252F1?style=oil%20paint&p=100%25%20a%2520fox%2Bco"
    parts = urlsplit(url)
    assert parse_qs(parts.query) == {"style": ["oil paint"], "p": ["100% a%20fox+co"]}
    assert unquote(parts.path) == "/g/fox%2F1"


@pytest.fixture
def job():
    """A job API's result URL, served in a thread: 202 Accepted with the job's status for ``done_after`` polls,
    then the video; from poll ``silent_from`` on, no answer until teardown; from poll ``dribbled_from`` on, a 202
    whose body comes in three pieces, 0.3 s and 0.25 s apart. Yields its base URL and handler."""
    release = threading.Event()

    class Job(BaseHTTPRequestHandler):
        polls, done_after, silent_from, dribbled_from = 0, 2, None, None

        def do_GET(self):
            type(self).polls += 1
            if self.silent_from is not None and self.polls >= self.silent_from:
                release.wait(10)
                return
            done = self.polls > self.done_after
            body = MP4 if done else b'{"status": "running"}'
            self.send_response(200 if done else 202)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.dribbled_from is not None and self.polls >= self.dribbled_from:
                for piece, pause in ((body[:5], 0.3), (body[5:10], 0.25), (body[10:], 0)):
                    self.wfile.write(piece)
                    self.wfile.flush()
                    release.wait(pause)
                return
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    with serving(Job, release) as base:
        yield base, Job


class JobAPI(BaseHTTPRequestHandler):
    """A job API: POST /generate answers ``taken`` (status, body, headers) after ``post_s`` seconds; GET answers
    202 Accepted with the job's status until ``done()``, then ``result``. Counts the GETs (the polls)."""

    post_s, taken, result, polls = 0.0, (200, b'{"url": "/jobs/1"}', {}), MP4, 0
    done: Callable[[], bool] = staticmethod(lambda: False)

    def answer(self, status: int, body: bytes, headers: dict) -> None:
        self.send_response(status)
        for key, value in {"Content-Length": str(len(body)), **headers}.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        time.sleep(self.post_s)
        self.answer(*self.taken)

    def do_GET(self):
        type(self).polls += 1
        self.answer(200, self.result, {}) if self.done() else self.answer(202, b'{"status": "running"}', {})

    def log_message(self, *args):
        pass


def served_request(tmp_path, handler: type, **serve) -> dict:
    """One measured request of a serve trial (``serve`` replacing fields of the case's) sent to ``handler``
    served in this process: its requests.jsonl row."""
    case = validate(serve_case({"a": {}, "b": {}}, **serve), "c.yaml")
    trial = ServedTrial(case, case.variants[0], Trial(0, "a", 1), tmp_path / "rank0", None, None)
    with serving(handler, threading.Event()) as base:
        trial.base = base
        trial.send(1, "measured", 0, 0, 0)
    return trial.log.rows[0]


def test_a_job_polled_past_the_request_s_deadline_is_cut_at_it_naming_request_timeout(tmp_path):
    """The request and the polls of its result URL had a request_timeout each: a job API that took 1.5 s of a 2 s
    timeout to take the job on was polled for 2 s more, the request failing after 3.5 s."""
    handler = type("SlowToTake", (JobAPI,), {"post_s": 1.5})
    row = served_request(tmp_path, handler, request_timeout=2, output={"kind": "url", "field": "url"})
    assert not row["ok"] and row["timed_out"] and row["status"] == 202
    assert 2000 <= row["latency_ms"] < 3000, row
    assert row["error"].endswith(': still HTTP 202 when serve.request_timeout ran out, 2 s after sending the '
                                 'request: {"status": "running"}'), row["error"]


def test_a_long_job_is_polled_ever_less_often(tmp_path, monkeypatch):
    """A job done 5 s after the request, on a clock that moves only by the waits between polls. By hand: each wait is
    a tenth of the request's age, at least 0.02 s (at most 1 s, from 10 s on): polls at 0, 0.02, ..., 0.20 (11),
    0.22 (12), then 0.22 x 1.1^n, the first at or past 5 s n = 33 (0.22 x 1.1^33 = 5.11; 1.1^32 x 0.22 = 4.65):
    45 polls, the job seen 0.11 s late (2%). A fixed 0.02 s between polls made 252."""
    clock = {"now": 0.0}
    monkeypatch.setattr(serve_load, "time", types.SimpleNamespace(
        monotonic=lambda: clock["now"], sleep=lambda s: clock.update(now=clock["now"] + s)))
    handler = type("FiveSecondJob", (JobAPI,), {"done": staticmethod(lambda: clock["now"] >= 5)})
    row = served_request(tmp_path, handler, request_timeout=10, output={"kind": "url", "field": "url"})
    assert row["ok"] and handler.polls == 45 and 5.10 < clock["now"] < 5.12, (row, handler.polls, clock)


@pytest.mark.parametrize("container,codec,rate", [
    ("mp4", "mpeg4", 8), ("mp4", "libx264", 8), ("mov", "mpeg4", 8), ("3gp", "mpeg4", 8), ("matroska", "ffv1", 8),
    ("webm", "libvpx-vp9", 8), ("avi", "mpeg4", 8), ("gif", "gif", 8), ("mpegts", "mpeg2video", 8),
    ("mpeg", "mpeg1video", 25), ("flv", "flv", 8), ("mpeg1video", "mpeg1video", 25), ("m4v", "mpeg4", 8),
    ("h264", "libx264", 8), ("nut", "mpeg4", 8), ("asf", "mpeg4", 8), ("ivf", "libvpx", 8)])
def test_every_container_ffmpeg_writes_starts_as_a_video(container, codec, rate):
    assert serve_load.starts_as_video(encoded(container, codec, rate))


@pytest.mark.parametrize("body", [b"<!DOCTYPE html><html><body>Bad gateway</body></html>", b'{"error": "oom"}', b"",
                                  b"Gateway timeout", np.zeros(1, np.uint8).tobytes()])
def test_what_ffmpeg_cannot_open_does_not_start_as_a_video(body):
    with pytest.raises(av.error.InvalidDataError):  # the referee: ffmpeg's probe, through PyAV, finds no video
        av.open(io.BytesIO(body))
    assert not serve_load.starts_as_video(body)


def test_an_answer_that_is_no_video_where_the_case_saves_one_is_a_failed_request_naming_it(tmp_path):
    """An HTML error page answered 200 (a proxy's, a framework's) was saved as the video: a good output, its
    latency and outputs/min a generation's."""
    page = b"<!DOCTYPE html><html><body>Internal error</body></html>"
    handler = type("ErrorPage", (JobAPI,), {"taken": (200, page, {"Content-Type": "text/html; charset=utf-8"})})
    row = served_request(tmp_path, handler, output={"kind": "body", "suffix": ".mp4"})
    assert (row["ok"], row["status"], row["error"], row.get("output")) == (
        False, 200, "HTTP 200, not a video where a .mp4 file was expected (Content-Type text/html; charset=utf-8, 55 "
                    "bytes): <!DOCTYPE html><html><body>Internal error</body></html>", None)
    # A field's bytes have no Content-Type of their own; a suffix that is no video's is not checked.
    error = b'{"error": "out of memory"}'
    for output, reply in ((OutputSpec("base64", "b64", ".mkv"), {"b64": base64.b64encode(error).decode()}),
                          (OutputSpec("body", None, ".json"), {"error": "out of memory"})):
        try:
            answer = take_output(output, Reply(200, json.dumps(reply).encode(), "application/json"),
                                 "http://127.0.0.1:9", "127.0.0.1", Deadline.start(1))
        except RequestFailed as exc:
            assert str(exc) == 'HTTP 200, not a video where a .mkv file was expected (26 bytes): {"error": "out of ' \
                               'memory"}'
        else:
            assert answer.suffix == ".json"


@pytest.mark.parametrize("kind, result", [("body", MP4),
                                          ("base64", json.dumps({"b64": base64.b64encode(MP4).decode()}).encode())])
def test_a_202_s_location_is_polled_and_its_final_answer_holds_the_output(tmp_path, kind, result):
    """A job API answering 202 Accepted with a Location, then the video in the body of a later poll's answer, was
    refused ('HTTP 202 Accepted, a job not done'): only a url output polled, at a URL in a JSON field."""
    handler = type("Located", (JobAPI,), {"taken": (202, b'{"status": "queued"}', {"Location": "/jobs/7"}),
                                          "result": result})
    handler.done = staticmethod(lambda: handler.polls > 2)
    row = served_request(tmp_path, handler, output={"kind": kind, "field": "b64", "suffix": ".mp4"})
    assert (row["ok"], row["status"], row["bytes"], handler.polls) == (True, 202, len(MP4), 3), row
    assert (tmp_path / "rank0" / row["output"]).read_bytes() == MP4


def test_a_url_output_answering_202_is_polled_until_the_job_is_done(job):
    # A job API's result URL answers 202 Accepted while the job runs: its body is no output.
    base, handler = job
    # the request itself answered 202 too: the job taken on, its result URL in the body
    answer = take_output(OutputSpec("url", "url", ".mp4"), Reply(202, b'{"url": "/jobs/1.mkv"}'), base, "127.0.0.1",
                         Deadline.start(5))
    assert (answer.status, answer.data, answer.suffix, handler.polls) == (202, MP4, ".mkv", 3)
    handler.polls, handler.done_after = 0, 10 ** 6
    with pytest.raises(RequestFailed) as err:
        take_output(OutputSpec("url", "url", ".mp4"), Reply(200, b'{"url": "/jobs/2.mkv"}'), base, "127.0.0.1",
                    Deadline.start(0.5))
    assert err.value.timed_out and err.value.status == 202 and handler.polls >= 2
    assert str(err.value) == (f'fetching {base}/jobs/2.mkv: still HTTP 202 when serve.request_timeout ran out, 0.5 s '
                              'after sending the request: {"status": "running"}')


@pytest.mark.parametrize("overslept, silent_from, dribbled_from", [(0.3, None, None), (0, 2, None), (0, None, 2)])
def test_a_job_still_running_at_the_deadline_is_a_timed_out_202_however_the_last_poll_ends(
        job, monkeypatch, overslept, silent_from, dribbled_from):
    # A sleep between polls that overruns the deadline left the next poll a timeout below 0, which the socket
    # refused (a ValueError: no status, not timed out: read as a connection error); a poll the deadline cut short
    # said "no answer within 0.47 s", and one whose 202 body ended past the deadline (its last piece 0.6 s after
    # the request's start, each within a socket's timeout of the one before) "HTTP 202, its body not ended", where
    # the job was last seen running (a flaky test's second message, on a loaded machine).
    base, handler = job
    handler.done_after, handler.silent_from, handler.dribbled_from = 10 ** 6, silent_from, dribbled_from
    monkeypatch.setattr(serve_load, "time", types.SimpleNamespace(
        monotonic=time.monotonic, sleep=lambda s: time.sleep(s + overslept)))
    with pytest.raises(RequestFailed) as err:
        take_output(OutputSpec("url", "url", ".mp4"), Reply(200, b'{"url": "/jobs/3.mkv"}'), base, "127.0.0.1",
                    Deadline.start(0.5))
    assert (err.value.status, err.value.timed_out, str(err.value)) == (
        202, True, f'fetching {base}/jobs/3.mkv: still HTTP 202 when serve.request_timeout ran out, 0.5 s after '
                   'sending the request: {"status": "running"}')


@pytest.mark.parametrize("location, polled", [("jobs/7", "/v1/jobs/7"), ("../jobs/7", "/jobs/7"),
                                               ("//127.0.0.1:{port}/jobs/7", "/jobs/7")])
def test_a_202_s_location_relative_to_the_request_is_polled_where_it_points(tmp_path, location, polled):
    """HTTP's Location is a reference relative to the URL that answered it: by hand, 'jobs/7' answering POST
    /v1/generate is /v1/jobs/7, '../jobs/7' is /jobs/7, '//host:port/jobs/7' the same server's /jobs/7. A Location
    that did not start with one '/' was refused as 'neither loopback nor serve.host', or fetched at a path glued to
    the server's address."""
    paths = []
    handler = type("Relative", (JobAPI,), {"done": staticmethod(lambda: True),
                                           "do_GET": lambda self: (paths.append(self.path), JobAPI.do_GET(self))})
    with serving(handler, threading.Event()) as base:
        reply = Reply(202, b'{"status": "queued"}', "", location.format(port=urlsplit(base).port),
                      f"{base}/v1/generate")
        answer = take_output(OutputSpec("body", None, ".mp4"), reply, base, "127.0.0.1", Deadline.start(5))
    assert (answer.data, paths) == (MP4, [polled])


@pytest.mark.parametrize("value, fetched", [("jobs/7.mp4", "/v1/jobs/7.mp4"), ("/jobs/7.mp4", "/jobs/7.mp4"),
                                             ("//127.0.0.1:{port}/jobs/7.mp4", "/jobs/7.mp4")])
def test_a_url_output_s_field_relative_to_the_request_is_fetched_where_it_points(value, fetched):
    """A url output's field is a reference relative to the URL that answered, as a Location is (by hand: 'jobs/7.mp4'
    answering POST /v1/generate is /v1/jobs/7.mp4): a relative one was refused as 'neither loopback nor serve.host',
    and '//host:port/...' fetched at the path '//127.0.0.1:P/jobs/7.mp4' glued to the server's address (a review's)."""
    paths = []
    handler = type("Relative", (JobAPI,), {"done": staticmethod(lambda: True),
                                           "do_GET": lambda self: (paths.append(self.path), JobAPI.do_GET(self))})
    with serving(handler, threading.Event()) as base:
        body = json.dumps({"url": value.format(port=urlsplit(base).port)}).encode()
        reply = Reply(200, body, "application/json", "", f"{base}/v1/generate")
        answer = take_output(OutputSpec("url", "url", ".mp4"), reply, base, "127.0.0.1", Deadline.start(5))
    assert (answer.data, paths) == (MP4, [fetched])


def test_an_empty_url_field_is_a_failed_request_not_a_fetch_of_the_request_s_own_url():
    """An empty reference resolves to the URL that answered (by hand: urljoin of '' is the base): '' answering
    POST /v1/generate was fetched as GET /v1/generate, its answer taken as the output."""
    paths = []
    handler = type("Relative", (JobAPI,), {"done": staticmethod(lambda: True),
                                           "do_GET": lambda self: (paths.append(self.path), JobAPI.do_GET(self))})
    with serving(handler, threading.Event()) as base:
        reply = Reply(200, b'{"url": ""}', "application/json", "", f"{base}/v1/generate")
        with pytest.raises(RequestFailed) as err:
            take_output(OutputSpec("url", "url", ".mp4"), reply, base, "127.0.0.1", Deadline.start(5))
    assert (str(err.value), err.value.status, paths) == ("HTTP 200, field 'url' is empty, no URL", 200, [])


@pytest.mark.parametrize("kind, field", [("body", ""), ("base64", "b64"), ("path", "path")])
def test_a_request_answered_202_is_a_failed_one_unless_a_url_output_polls_for_the_job(kind, field, tmp_path):
    # A job taken on, not done: its status was kept as the video (or a file still being written was read), and
    # its latency, the time to take the job on, read as a generation's.
    partial = tmp_path / "out.mp4"
    partial.write_bytes(b"\x00\x00\x00\x18ftyp")
    body = json.dumps({"status": "queued", "b64": "AAAA", "path": str(partial)}).encode()
    with pytest.raises(RequestFailed) as err:
        take_output(OutputSpec(kind, field, ".mp4"), Reply(202, body), "http://127.0.0.1:9", "127.0.0.1",
                    Deadline.start(5))
    assert err.value.status == 202 and not err.value.timed_out
    assert str(err.value).startswith(
        "HTTP 202 Accepted with no Location header, a job taken on, not its output: perfkit polls a 202's Location, "
        "or with output.kind url the URL in output.field, while it answers 202 and takes the output from its next "
        'answer: {"status": "queued"'), str(err.value)


def test_an_error_answer_is_a_failed_request_with_status_and_excerpt(served):
    base = served(fail_every=1)
    with pytest.raises(RequestFailed) as err:
        generate(base, OutputSpec("body", None, ".npy"))
    assert err.value.status == 500 and not err.value.timed_out
    assert str(err.value) == 'HTTP 500: {"error": "injected failure on request 1"}'


def test_a_missing_field_or_a_url_to_another_host_is_a_failed_request():
    with pytest.raises(RequestFailed, match=r"HTTP 200, no field 'video.url': \{\"video\": 1\}"):
        take_output(OutputSpec("url", "video.url", ".mp4"), Reply(200, b'{"video": 1}'), "http://127.0.0.1:1",
                    "127.0.0.1", Deadline.start(1))
    with pytest.raises(RequestFailed, match="refused to fetch http://example.com/v.mp4: neither loopback nor"):
        take_output(OutputSpec("url", "url", ".mp4"), Reply(200, b'{"url": "http://example.com/v.mp4"}'),
                    "http://127.0.0.1:1", "127.0.0.1", Deadline.start(1))


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
    ok, last = wait_ready(served(never_ready=True) + "/health", 1.5, lambda: True, lambda: None)
    assert not ok and last == 'HTTP 503: {"status": "loading"}' and 1.5 <= time.monotonic() - t0 < 4
    ok, last = wait_ready("http://127.0.0.1:1/health", 5, lambda: False, lambda: None)  # the server exited
    assert not ok and last == "no answer"


def test_a_poll_the_deadline_cut_short_keeps_the_last_answer_seen():
    """A loaded machine may not answer the last, deadline-clipped poll: the 503 before it is what to report."""
    release = threading.Event()

    class LoadingThenSilent(BaseHTTPRequestHandler):
        polls = 0

        def do_GET(self):
            type(self).polls += 1
            if type(self).polls > 1:
                release.wait(5)
            self.send_response(503)
            self.end_headers()
            self.wfile.write(b"loading")

        def log_message(self, *args):
            pass

    with serving(LoadingThenSilent, release) as base:
        # 1.5 s: the first poll has that long to be answered on a loaded machine, the second is cut short (< 2 s)
        ok, last = wait_ready(f"{base}/health", 1.5, lambda: True, lambda: None)
    assert not ok and last == "HTTP 503: loading"


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


def test_a_body_larger_than_memory_is_refused_not_held(served, monkeypatch):
    """10 TB announced: refused on the header. No length and no end: refused at the limit (8 MB here,
    MAX_ANSWER_BYTES in use), holding no more than that."""
    import tracemalloc

    with pytest.raises(RequestFailed, match=r"HTTP 200: an answer of 10,000,000,000,000\+ bytes, over perfkit's limit"):
        generate(served(reply="huge"), OutputSpec("body", None, ".npy"))
    monkeypatch.setattr("perfkit.run.serve_load.MAX_ANSWER_BYTES", 8 << 20)
    tracemalloc.start()
    try:
        with pytest.raises(RequestFailed, match=r"an answer of [89],\d{3},\d{3}\+ bytes, over perfkit's limit of 8,388,608"):
            generate(served(reply="endless"), OutputSpec("body", None, ".npy"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40 << 20


@pytest.mark.parametrize("reply", ["stall", "drip"])
def test_a_body_that_never_ends_is_timed_out_on_one_deadline(served, reply):
    """``stall`` sends 10 bytes and waits (the socket timeout), ``drip`` a byte every 20 ms for 5.5 hours
    (each byte within the socket timeout: only a deadline for the whole body ends it)."""
    t0 = time.monotonic()
    with pytest.raises(RequestFailed) as err:
        generate(served(reply=reply), OutputSpec("body", None, ".npy"), timeout=0.5)
    assert err.value.timed_out and time.monotonic() - t0 < 2.5
    if reply == "drip":
        assert str(err.value).startswith("HTTP 200: the body did not end within 0.5 s (")


def test_a_path_output_must_be_a_regular_file_and_a_suffix_a_plain_one(tmp_path):
    fifo = tmp_path / "pipe.mp4"
    os.mkfifo(fifo)
    spec = OutputSpec("path", "path", ".mp4")
    for value, message in (("/dev/zero", "is not a regular file"), (str(fifo), "is not a regular file"),
                           (str(tmp_path), "is not a regular file"), ("/no/such/file.mp4", "No such file"),
                           ("a\0b.mp4", "embedded null byte")):
        with pytest.raises(RequestFailed, match=message):  # never blocks on the FIFO, never reads /dev/zero
            take_output(spec, Reply(200, json.dumps({"path": value}).encode()), "http://127.0.0.1:1", "127.0.0.1",
                        Deadline.start(1))
    odd = tmp_path / "out.mp4\n"
    odd.write_bytes(MP4)
    answer = take_output(spec, Reply(200, json.dumps({"path": str(odd)}).encode()), "http://127.0.0.1:1",
                         "127.0.0.1", Deadline.start(1))
    assert answer == (200, MP4, ".mp4")  # the case's suffix, not ".mp4\n"


@pytest.mark.parametrize("url", ["http://[::1/v.mp4", "http://127.0.0.1:99999/v.mp4", "/v\u00e9.mp4"])
def test_a_url_output_that_is_no_url_is_a_failed_request(url):
    with pytest.raises(RequestFailed):
        take_output(OutputSpec("url", "url", ".mp4"), Reply(200, json.dumps({"url": url}).encode()),
                    "http://127.0.0.1:1", "127.0.0.1", Deadline.start(1))


def test_a_request_the_server_answered_but_did_not_finish_hangs_its_trial_for_the_server_s_reason():
    """A job still at 202, or a body that did not end, when the time ran out: the trial read 'got no answer within
    10 s' of a server that had answered (a reviewer's)."""
    silent = RequestFailed("no answer within 10 s", timed_out=True)
    assert hang_reason(3, 2, silent, 10) == "request 3 at c=2 got no answer within 10 s"
    job = Deadline.start(10).ran_out("http://127.0.0.1:1/v/3", "still HTTP 202", 202, b'{"status": "running"}')
    assert hang_reason(3, 2, job, 10) == ('request 3 at c=2 was not done in time: fetching http://127.0.0.1:1/v/3: '
                                          'still HTTP 202 when serve.request_timeout ran out, 10 s after sending the '
                                          'request: {"status": "running"}')  # the limit said once
