"""Closed-loop load with the standard library: one request built from the case's template and sent with
``http.client``, its output taken from the answer, and ``concurrency`` workers that each send their next
request as soon as their last one returned (the load of a fixed number of users, not a fixed rate).

Only the server's own URL and URLs on loopback or the case's ``serve.host`` are ever contacted: a URL the
server hands back for another host is refused, not fetched.
"""

from __future__ import annotations

import base64
import binascii
import concurrent.futures as cf
import http.client
import itertools
import json
import threading
import time
from pathlib import Path
from typing import Callable, NamedTuple
from urllib.parse import urlsplit

from perfkit.serve.spec import OutputSpec, RequestSpec, allowed_host, fill

EXCERPT_CHARS = 200
READY_POLL_S = 0.1
TICK_S = 0.1
DRAIN_S = 10.0  # after the server is ended, how long in-flight requests get to fail and be recorded


class RequestFailed(Exception):
    """A request that got no usable output; ``timed_out`` when the server did not answer in time."""

    def __init__(self, reason: str, status: int | None = None, timed_out: bool = False):
        super().__init__(reason)
        self.status, self.timed_out = status, timed_out


class Answer(NamedTuple):
    """A served output: its bytes and the suffix its file gets."""

    status: int
    data: bytes
    suffix: str


def excerpt(body: bytes) -> str:
    """The start of a body, on one line."""
    return " ".join(body[:EXCERPT_CHARS].decode(errors="replace").split())


def resolve(url: str, base: str) -> str:
    """A path on the server (``/generate``) or a full URL."""
    return base + url if url.startswith("/") else url


def call(method: str, url: str, body: bytes | None, headers: dict, timeout: float) -> tuple[int, bytes]:
    """One HTTP exchange on a fresh connection: (status, body). Connection errors and timeouts raise
    ``RequestFailed``."""
    parts = urlsplit(url)
    conn_type = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = conn_type(parts.hostname, parts.port, timeout=timeout)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        conn.request(method, target, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    except TimeoutError:
        raise RequestFailed(f"no answer within {timeout:g} s", timed_out=True) from None
    except (OSError, http.client.HTTPException) as exc:
        raise RequestFailed(f"{type(exc).__name__}: {exc}".rstrip(": ")) from None
    finally:
        conn.close()


def encode_request(request: RequestSpec, values: dict) -> tuple[str, bytes | None, dict]:
    """The filled URL, body bytes and headers of one request (a mapping or list body is sent as JSON)."""
    body = fill(request.body, values)
    headers = {str(k): str(v) for k, v in fill(request.headers, values).items()}
    if isinstance(body, (dict, list)):
        headers.setdefault("Content-Type", "application/json")
        data = json.dumps(body).encode()
    else:
        data = None if body is None else str(body).encode()
    return fill(request.url, values), data, headers


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


def take_output(output: OutputSpec, status: int, body: bytes, base: str, host: str, timeout: float) -> Answer:
    """The output an answer carries (the body, a base64 field, a URL or a path in a JSON field)."""
    if not 200 <= status < 300:
        raise RequestFailed(f"HTTP {status}: {excerpt(body)}", status)
    if output.kind == "body":
        return Answer(status, body, output.suffix)
    try:
        value = _field(json.loads(body), output.field)
    except ValueError:
        raise RequestFailed(f"HTTP {status}, not JSON: {excerpt(body)}", status) from None
    except KeyError:
        raise RequestFailed(f"HTTP {status}, no field {output.field!r}: {excerpt(body)}", status) from None
    if not isinstance(value, str):
        raise RequestFailed(f"HTTP {status}, field {output.field!r} is not a string: {excerpt(body)}", status)
    if output.kind == "base64":
        try:
            return Answer(status, base64.b64decode(value, validate=True), output.suffix)
        except binascii.Error as exc:
            raise RequestFailed(f"HTTP {status}, field {output.field!r} is not base64 ({exc})", status) from None
    if output.kind == "path":
        try:
            return Answer(status, Path(value).read_bytes(), Path(value).suffix or output.suffix)
        except OSError as exc:
            raise RequestFailed(f"HTTP {status}, cannot read {value}: {exc.strerror}", status) from None
    url = resolve(value, base)
    if not allowed_host(urlsplit(url).hostname, host):
        raise RequestFailed(f"HTTP {status}, refused to fetch {url}: neither loopback nor serve.host", status)
    got, data = call("GET", url, None, {}, timeout)
    if not 200 <= got < 300:
        raise RequestFailed(f"fetching {url}: HTTP {got}: {excerpt(data)}", got)
    return Answer(status, data, Path(urlsplit(url).path).suffix or output.suffix)


def wait_ready(url: str, timeout: float, alive: Callable[[], bool], on_tick: Callable[[], None]) -> tuple[bool, str]:
    """Poll ``url`` until it answers 2xx (True), the server exits or ``timeout`` seconds pass (False);
    the second item is the last answer (or error) seen."""
    deadline = time.monotonic() + timeout
    last = "no answer"
    while alive() and time.monotonic() < deadline:
        try:
            status, body = call("GET", url, None, {}, min(2.0, max(0.1, deadline - time.monotonic())))
            if 200 <= status < 300:
                return True, f"HTTP {status}"
            last = f"HTTP {status}: {excerpt(body)}"
        except RequestFailed as exc:
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
