"""Closed-loop load with the standard library: one request built from the case's template and sent with
``http.client``, its output taken from the answer, and ``concurrency`` workers that each send their next
request as soon as their last one returned (the load of a fixed number of users, not a fixed rate).

Only the server's own URL and URLs on loopback or the case's ``serve.host`` are ever contacted: a URL the
server hands back for another host is refused, not fetched. An answer is read in pieces against one
deadline (``request_timeout`` for the whole body, so a server that never finishes its body is timed out)
and refused past ``MAX_ANSWER_BYTES`` (a body larger than memory is never held); a ``path`` output must
be a regular file no larger than that. A URL output that answers 202 Accepted (a job API's result while
the job runs) is polled until it answers otherwise, within the request's deadline (``request_timeout`` from sending
it, one limit for the answer and every poll after it); so is a request's 202 with a Location header, its final answer
read as the output kind says; a request answered 202 with none is a failed one for the other kinds.
An output saved under a video's suffix must begin as a video container does, else it is a failed request.
Whatever a server answers ends as an output or a failed request.
"""

from __future__ import annotations

import base64
import concurrent.futures as cf
import http.client
import itertools
import json
import os
import re
import stat
import threading
import time
from typing import Callable, NamedTuple
from urllib.parse import quote, urljoin, urlsplit

from perfkit.rundata.serve_spec import PER_SERVER, OutputSpec, RequestSpec, allowed_host, fill

EXCERPT_CHARS = 200
READY_POLL_S = 0.1
READY_ANSWER_S = 2.0  # how long one readiness poll waits for an answer
TICK_S = 0.1
# Between polls of a url output that answered 202: a tenth of the request's age, at least JOB_POLL_S and at most
# JOB_POLL_MAX_S, so a long job is not polled 50 times a second and what a poll's wait adds to a job's latency stays
# within a tenth of it (or JOB_POLL_S); a doubling wait could add as much again as the job had taken.
JOB_POLL_S = 0.02
JOB_POLL_SHARE = 0.1
JOB_POLL_MAX_S = 1.0
DRAIN_S = 10.0  # after the server is ended, how long in-flight requests get to fail and be recorded
MAX_ANSWER_BYTES = 2 << 30  # a served output (a video) larger than this is refused, not held in memory
READ_CHUNK = 1 << 20
SUFFIX = re.compile(r"\.[A-Za-z0-9]{1,16}")  # a suffix an output file may take from a URL or path
# An output saved under one of these suffixes must be a video (starts_as_video); any container counts for any of them,
# as ffmpeg reads a file by its content, not its name.
VIDEO_SUFFIXES = frozenset((".mp4", ".m4v", ".mov", ".3gp", ".mkv", ".webm", ".avi", ".gif", ".mpg", ".mpeg", ".ts",
                            ".flv", ".ogv"))
ISO_BOXES = (b"ftyp", b"styp", b"moov", b"mdat", b"free", b"wide", b"skip", b"pnot")  # an ISO BMFF file's first box
# Matroska / WebM, GIF, a start code (MPEG-PS, MPEG-1/2/4 and H.264 / HEVC elementary streams, which ffmpeg writes for
# .mpg / .m4v), FLV, Ogg, NUT, ASF, IVF.
VIDEO_MAGIC = (b"\x1a\x45\xdf\xa3", b"GIF87a", b"GIF89a", b"\x00\x00\x01", b"\x00\x00\x00\x01", b"FLV", b"OggS",
               b"nut/multimedia container", b"\x30\x26\xb2\x75\x8e\x66\xcf\x11", b"DKIF")


class RequestFailed(Exception):
    """A request that got no usable output; ``timed_out`` when the server did not answer in time."""

    def __init__(self, reason: str, status: int | None = None, timed_out: bool = False):
        super().__init__(reason)
        self.status, self.timed_out = status, timed_out


class Reply(NamedTuple):
    """One HTTP answer: its status, its body and the headers perfkit reads of it."""

    status: int
    data: bytes
    content_type: str = ""  # "" where the answer named none
    location: str = ""  # where a 202 Accepted says the job's result will be; "" where none
    url: str = ""  # the URL that answered, which a relative Location is relative to; "" where not known


class Answer(NamedTuple):
    """A served output: its bytes and the suffix its file gets."""

    status: int
    data: bytes
    suffix: str


def excerpt(body: bytes) -> str:
    """The start of a body, on one line."""
    return " ".join(body[:EXCERPT_CHARS].decode(errors="replace").split())


def resolve(url: str, base: str) -> str:
    """``url`` as a reference relative to ``base`` (the server, or the URL that answered): a path on the server
    (``/generate``), a full URL, or a Location's or output field's relative one (HTTP's rule, RFC 3986)."""
    return urljoin(base, url)


def call(method: str, url: str, body: bytes | None, headers: dict, timeout: float) -> Reply:
    """One HTTP exchange on a fresh connection, the whole of it within ``timeout``.
    Connection errors, timeouts, URLs that are none and answers over ``MAX_ANSWER_BYTES`` raise
    ``RequestFailed``."""
    deadline = time.monotonic() + timeout
    try:
        parts = urlsplit(url)
        conn_type = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        conn = conn_type(parts.hostname, parts.port, timeout=timeout)
    except ValueError as exc:  # a port out of range, a broken IPv6 literal
        raise RequestFailed(f"not a URL: {url[:EXCERPT_CHARS]!r} ({exc})") from None
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        conn.request(method, target, body=body, headers=headers)
        resp = conn.getresponse()
        return Reply(resp.status, _read_body(resp, deadline, timeout), resp.getheader("Content-Type", ""),
                     resp.getheader("Location", ""), url)
    except TimeoutError:
        raise RequestFailed(f"no answer within {timeout:g} s", timed_out=True) from None
    except (OSError, http.client.HTTPException, ValueError) as exc:  # ValueError: a URL http.client cannot send
        raise RequestFailed(f"{type(exc).__name__}: {exc}".rstrip(": ")) from None
    finally:
        conn.close()


def _too_large(size: int, status: int) -> RequestFailed:
    return RequestFailed(f"HTTP {status}: an answer of {size:,}+ bytes, over perfkit's limit of {MAX_ANSWER_BYTES:,}",
                         status)


def _read_body(resp: http.client.HTTPResponse, deadline: float, timeout: float) -> bytes:
    """The body, a piece at a time, until the deadline or the size limit."""
    length = resp.getheader("Content-Length", "")
    if length.isdigit() and int(length) > MAX_ANSWER_BYTES:
        raise _too_large(int(length), resp.status)
    chunks, size = [], 0
    while chunk := resp.read1(READ_CHUNK):
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise _too_large(size, resp.status)
        if time.monotonic() > deadline:
            raise RequestFailed(f"HTTP {resp.status}: the body did not end within {timeout:g} s "
                                f"({size:,} bytes came)", resp.status, timed_out=True)
        chunks.append(chunk)
    if resp.length:  # the server closed before the length it announced
        raise RequestFailed(f"HTTP {resp.status}: the body ended after {size:,} of {length} bytes", resp.status)
    return b"".join(chunks)


def _suffix(name: str, default: str) -> str:
    """An output's suffix from the URL or path it came from, when that has a plain one."""
    suffix = os.path.splitext(name)[1]
    return suffix if SUFFIX.fullmatch(suffix) else default


def _read_local(value: str, status: int) -> bytes:
    """A file the server wrote and named: a regular file (never a FIFO or a device) of bounded size."""
    try:
        fd = os.open(value, os.O_RDONLY | os.O_NONBLOCK)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise RequestFailed(f"HTTP {status}, cannot read {value[:EXCERPT_CHARS]!r}: "
                            f"{getattr(exc, 'strerror', None) or exc}", status) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise RequestFailed(f"HTTP {status}, {value[:EXCERPT_CHARS]!r} is not a regular file", status)
        if info.st_size > MAX_ANSWER_BYTES:
            raise _too_large(info.st_size, status)
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read(info.st_size + 1)  # what it holds now (a read of the limit reserves the limit)
    finally:
        os.close(fd)


def starts_as_video(data: bytes) -> bool:
    """Whether ``data`` begins as a video container or stream does, by the signatures ffmpeg's probes read: ISO BMFF
    (MP4, MOV, 3GP: a box type at byte 4), AVI, an MPEG transport stream (a sync byte every 188) and ``VIDEO_MAGIC``."""
    return (data[4:8] in ISO_BOXES or data.startswith(VIDEO_MAGIC) or (data[:4] == b"RIFF" and data[8:12] == b"AVI ")
            or data[:1] == data[188:189] == b"G")


def _output(status: int, data: bytes, suffix: str, content_type: str = "") -> Answer:
    """An output saved as a video (``suffix``) that is none is a failed request naming what came back: an error page
    or JSON answered 200 was kept as the video, its latency and outputs/min as a generation's."""
    if suffix.lower() in VIDEO_SUFFIXES and not starts_as_video(data):
        said = f"Content-Type {content_type}, " if content_type else ""
        raise RequestFailed(f"HTTP {status}, not a video where a {suffix} file was expected ({said}{len(data):,} "
                            f"bytes): {excerpt(data)}", status)
    return Answer(status, data, suffix)


def encode_request(request: RequestSpec, values: dict) -> tuple[str, bytes | None, dict]:
    """The filled URL (its placeholders percent-encoded), body bytes and headers of one request (a mapping or
    list body is sent as JSON)."""
    body = fill(request.body, values)
    headers = {str(k): str(v) for k, v in fill(request.headers, values).items()}
    if isinstance(body, (dict, list)):
        headers.setdefault("Content-Type", "application/json")
        data = json.dumps(body).encode()
    else:
        data = None if body is None else str(body).encode()
    # A prompt in a URL is percent-encoded ('/' kept, for a path in a value): raw spaces make http.client refuse
    # the URL and an '&' would split the query. Its '%' too: a value is the text the server reads, and '100%' or
    # '%20' in a prompt cannot be told from one already encoded. The server's own host and port go in as they are.
    in_url = {k: v if k in PER_SERVER else quote(str(v), safe="/") for k, v in values.items()}
    return fill(request.url, in_url), data, headers


def _field(doc, dotted: str):
    node = doc
    for part in dotted.split("."):
        if isinstance(node, list) and part.lstrip("-").isdigit() and -len(node) <= int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            raise KeyError(dotted)
    return node


class Deadline(NamedTuple):
    """``serve.request_timeout`` counted from sending a request: one limit for its answer and every poll after it."""

    at: float  # time.monotonic() when it runs out
    seconds: float  # the request_timeout

    @classmethod
    def start(cls, seconds: float) -> Deadline:
        return cls(time.monotonic() + seconds, seconds)

    def left(self) -> float:
        return self.at - time.monotonic()

    def ran_out(self, url: str, what: str, status: int | None, body: bytes | None = None) -> RequestFailed:
        """A poll of ``url`` ended by this deadline, naming it: ``what`` the poll had got by then."""
        return RequestFailed(f"fetching {url[:EXCERPT_CHARS]}: {what} when serve.request_timeout ran out, "
                             f"{self.seconds:g} s after sending the request" + ("" if body is None else
                                                                                f": {excerpt(body)}"),
                             status, timed_out=True)


def take_output(output: OutputSpec, reply: Reply, base: str, host: str, deadline: Deadline) -> Answer:
    """The output an answer carries (the body, a base64 field, a URL or a path in a JSON field); a URL is fetched
    within the request's ``deadline``, as is a 202 Accepted's Location."""
    status = reply.status
    if not 200 <= status < 300:
        raise RequestFailed(f"HTTP {status}: {excerpt(reply.data)}", status)
    # 202 Accepted is a job taken on, not done. Its Location (HTTP's word for where the job's result will be) is polled
    # and its final answer read as output.kind says; else only a url output waits, at the URL its field names. Any
    # other kind would keep the job's status as the video (a path, a file still being written), its latency as the
    # job's.
    if status == 202 and reply.location:
        # HTTP's Location is a reference relative to the URL that answered ('jobs/7', '../jobs/7', '//host/jobs/7')
        reply = _fetch(resolve(reply.location, reply.url or base), "its Location", status, host, deadline)
    elif status == 202 and output.kind != "url":
        raise RequestFailed(f"HTTP 202 Accepted with no Location header, a job taken on, not its output: perfkit "
                            f"polls a 202's Location, or with output.kind url the URL in output.field, while it "
                            f"answers 202 and takes the output from its next answer: {excerpt(reply.data)}", status)
    body = reply.data
    if output.kind == "body":
        return _output(status, body, output.suffix, reply.content_type)
    try:
        value = _field(json.loads(body), output.field)
    except (ValueError, RecursionError):  # RecursionError: brackets nested thousands deep
        raise RequestFailed(f"HTTP {status}, not JSON: {excerpt(body)}", status) from None
    except KeyError:
        raise RequestFailed(f"HTTP {status}, no field {output.field!r}: {excerpt(body)}", status) from None
    if not isinstance(value, str):
        raise RequestFailed(f"HTTP {status}, field {output.field!r} is not a string: {excerpt(body)}", status)
    if output.kind == "base64":
        try:
            data = base64.b64decode(value, validate=True)
        except ValueError as exc:  # binascii.Error, or characters outside ASCII
            raise RequestFailed(f"HTTP {status}, field {output.field!r} is not base64 ({exc})", status) from None
        return _output(status, data, output.suffix)
    if output.kind == "path":
        return _output(status, _read_local(value, status), _suffix(value, output.suffix))
    if not value:  # it would resolve to the URL that answered: the request's own endpoint fetched as the output
        raise RequestFailed(f"HTTP {status}, field {output.field!r} is empty, no URL", status)
    try:
        url = resolve(value, reply.url or base)  # relative to the URL that answered, as a Location is
    except ValueError as exc:
        raise RequestFailed(f"HTTP {status}, field {output.field!r} is not a URL ({exc})", status) from None
    got = _fetch(url, f"field {output.field!r}", status, host, deadline)
    return _output(status, got.data, _suffix(urlsplit(url).path, output.suffix), got.content_type)


def _fetch(url: str, named: str, status: int, host: str, deadline: Deadline) -> Reply:
    """The 2xx answer of a URL an answer ``named`` (on loopback or the case's host), polled while it answers 202."""
    try:
        hostname = urlsplit(url).hostname
    except ValueError as exc:
        raise RequestFailed(f"HTTP {status}, {named} is not a URL ({exc})", status) from None
    if not allowed_host(hostname, host):
        raise RequestFailed(f"HTTP {status}, refused to fetch {url[:EXCERPT_CHARS]}: neither loopback nor serve.host",
                            status)
    got = _poll(url, deadline)
    if not 200 <= got.status < 300:
        raise RequestFailed(f"fetching {url[:EXCERPT_CHARS]}: HTTP {got.status}: {excerpt(got.data)}", got.status)
    return got


def _poll(url: str, deadline: Deadline) -> Reply:
    """GET ``url`` until it answers other than 202 Accepted (a job API's result URL while the job runs), all of it
    within the request's deadline, which cuts a poll short: a poll outliving the request read as a hang of twice
    request_timeout."""
    last = None  # the last 202's body: a poll the deadline cut short leaves the job as last seen, still running
    while (left := deadline.left()) > 0:  # read after a sleep, which may overrun: a socket refuses a timeout below 0
        try:
            got = call("GET", url, None, {}, left)
        except RequestFailed as exc:
            if not exc.timed_out:
                raise
            # a 202 cut short is the job as last seen, still running, where an earlier poll saw it so
            if exc.status is not None and (exc.status != 202 or last is None):
                raise deadline.ran_out(url, f"HTTP {exc.status}, its body not ended", exc.status) from None
            break
        if got.status != 202:
            return got
        last = got.data
        age = deadline.seconds - deadline.left()
        time.sleep(min(JOB_POLL_MAX_S, max(JOB_POLL_S, JOB_POLL_SHARE * age), max(0.0, deadline.left())))
    if last is None:
        raise deadline.ran_out(url, "no answer", None)
    raise deadline.ran_out(url, "still HTTP 202", 202, last)


def wait_ready(url: str, timeout: float, alive: Callable[[], bool], on_tick: Callable[[], None]) -> tuple[bool, str]:
    """Poll ``url`` until it answers 2xx (True), the server exits or ``timeout`` seconds pass (False);
    the second item is the last answer (or error) seen."""
    deadline = time.monotonic() + timeout
    last = "no answer"
    while alive() and time.monotonic() < deadline:
        wait = min(READY_ANSWER_S, max(READY_POLL_S, deadline - time.monotonic()))
        try:
            status, body, *_ = call("GET", url, None, {}, wait)
            if 200 <= status < 300:
                return True, f"HTTP {status}"
            last = f"HTTP {status}: {excerpt(body)}"
        except RequestFailed as exc:
            # A poll cut short by the deadline that timed out says nothing of the server: an answer seen keeps.
            if not (exc.timed_out and wait < READY_ANSWER_S and last.startswith("HTTP ")):
                last = str(exc)
        on_tick()
        time.sleep(READY_POLL_S)
    return False, last


def closed_loop(count: int, concurrency: int, send: Callable[[int, int], None], stopped: Callable[[], bool],
                abort: Callable[[], None], on_tick: Callable[[], None]) -> None:
    """Send requests ``0 .. count-1`` from ``concurrency`` workers (``send(index, worker)``), each taking
    the next index when its last request returned, until all are sent or ``stopped()``. When stopped
    with requests in flight, ``abort()`` (which ends the server) lets them fail before this returns."""
    lock, indices = threading.Lock(), itertools.count()

    def worker(w: int) -> None:
        while not stopped():
            with lock:
                i = next(indices)
            if i >= count:
                return
            send(i, w)

    pool = cf.ThreadPoolExecutor(concurrency, thread_name_prefix="perfkit-load")
    futures = [pool.submit(worker, w) for w in range(concurrency)]
    try:
        while cf.wait(futures, timeout=TICK_S).not_done:
            on_tick()
            if stopped():
                abort()
                cf.wait(futures, timeout=DRAIN_S)
                break
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    for f in futures:
        if f.done() and f.exception() is not None:
            raise f.exception()
