"""A small video-generation server for serve cases: loopback HTTP, a configurable time per request, a
limit on how many requests it works on at once, and a small deterministic video (or npy) per request.

    python cases/serve/server.py --port P [--sleep-ms 100] [--max-concurrency 1] [--format mkv|npy]
        [--reply body|base64|url|path] [--noise A] [--startup-ms M]
        [--never-ready] [--exit-at-start CODE] [--crash-after K] [--fail-every K] [--hang-after K]
        [--spawn-child] [--tag TAG] [--out-dir DIR]

GET /health answers 200 once it is up (503 forever with --never-ready). POST /generate takes a JSON body
``{prompt, seed, width, height, frames}``; the frames depend only on seed and size (``frames()``, which
tests import as the oracle), plus +-A noise from the seed with --noise. A request holds one of
``--max-concurrency`` slots while it sleeps and encodes; the others wait for a slot, first come first served.

Hostile answers (``--reply``): ``huge`` announces 10 TB and sends zeros until the client hangs up,
``endless`` sends zeros with no length until then, ``stall`` sends 10 of 1000 announced bytes and then
nothing, ``drip`` one byte every 20 ms of a million. A hung request (``--hang-after``, ``stall``) waits
until ``Handler.release`` is set (the in-process tests' teardown sets it). ``--reply path`` files go
to ``--out-dir``, else to a temporary folder made at the first one and removed when the server
ends (SIGTERM included).
"""

from __future__ import annotations

import argparse
import atexit
import base64
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

HOSTILE = ("huge", "endless", "stall", "drip")


def frames(seed: int, width: int, height: int, count: int, noise: int = 0) -> np.ndarray:
    """uint8 (count, height, width, 3): smooth moving waves set by the seed, plus +-noise."""
    rng = np.random.default_rng(seed)
    freq, phase = rng.uniform(0.03, 0.09, (2, 3)), rng.uniform(0, 2 * np.pi, 3)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    t = np.arange(count, dtype=np.float64)[:, None, None, None]
    waves = 127.5 + 90 * np.sin(freq[0] * x[..., None] + freq[1] * y[..., None] + phase + 0.4 * t)
    out = waves.round().astype(np.int16)
    if noise:
        out += np.random.default_rng(seed + 1_000_003).integers(-noise, noise + 1, out.shape, dtype=np.int16)
    return np.clip(out, 0, 255).astype(np.uint8)


def encode(video: np.ndarray, fmt: str) -> bytes:
    buf = io.BytesIO()
    if fmt == "npy":
        np.save(buf, video)
    else:
        from perfkit.quality.media import write_video

        write_video(iter(video), buf)  # x264 CRF 18 yuv420p in Matroska
    return buf.getvalue()


class QueuedSlots:
    """Up to ``n`` holders at once; waiters get a slot in the order they asked. A threading semaphore lets
    a request that arrives just as a slot frees take it before the waiter that release woke, and the
    waiter goes back to the end of the line, so on a loaded machine a request could wait for seven
    others where a queue of four implies three."""

    def __init__(self, n: int):
        self._free, self._line, self._changed = n, [], threading.Condition()

    def __enter__(self):
        me = object()
        with self._changed:
            self._line.append(me)
            self._changed.wait_for(lambda: self._free and self._line[0] is me)
            self._line.pop(0)
            self._free -= 1
            self._changed.notify_all()  # the next in line may have a free slot too

    def __exit__(self, *exc):
        with self._changed:
            self._free += 1
            self._changed.notify_all()


def make_handler(args: argparse.Namespace):
    slots = QueuedSlots(args.max_concurrency)
    lock = threading.Lock()
    state = {"requests": 0}
    stored: dict[str, bytes] = {}
    release = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt, *a):  # one line per request on stdout (the server's log)
            print(f"{self.command} {self.path} -> " + (a[1] if len(a) > 1 else ""), flush=True)

        def reply(self, status: int, body: bytes, kind: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def hostile(self, kind: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            length = {"huge": 10 ** 13, "stall": 1000, "drip": 10 ** 6}.get(kind)
            if length is not None:
                self.send_header("Content-Length", str(length))
            self.end_headers()
            if kind == "stall":
                self.wfile.write(bytes(10))
                self.wfile.flush()
                release.wait()
                return
            block, pause = (b"x", 0.02) if kind == "drip" else (bytes(1 << 16), 0)
            try:
                while not release.is_set():
                    self.wfile.write(block)
                    time.sleep(pause)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up, as it should
                pass

        def do_GET(self):
            if self.path == "/health":
                if args.never_ready:
                    return self.reply(503, b'{"status": "loading"}')
                return self.reply(200, b'{"status": "ok"}')
            name = self.path.rpartition("/")[2]
            if self.path.startswith("/outputs/") and name in stored:
                return self.reply(200, stored[name], "application/octet-stream")
            self.reply(404, b'{"error": "not found"}')

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            with lock:
                state["requests"] += 1
                n = state["requests"]
            if args.crash_after is not None and n > args.crash_after:
                print(f"crashing on request {n}", file=sys.stderr, flush=True)
                os._exit(3)
            if args.hang_after is not None and n > args.hang_after:
                print(f"hanging on request {n}", file=sys.stderr, flush=True)
                release.wait()
                return
            if args.reply in HOSTILE:
                return self.hostile(args.reply)
            if args.fail_every and n % args.fail_every == 0:
                return self.reply(500, json.dumps({"error": f"injected failure on request {n}"}).encode())
            with slots:
                time.sleep(args.sleep_ms / 1e3)
                video = frames(int(body["seed"]), int(body.get("width", 64)), int(body.get("height", 48)),
                               int(body.get("frames", 8)), args.noise)
                data = encode(video, args.format)
            name = f"{n:04d}.{args.format}"
            if args.reply == "body":
                return self.reply(200, data, "application/octet-stream")
            if args.reply == "base64":
                return self.reply(200, json.dumps({"video": base64.b64encode(data).decode()}).encode())
            if args.reply == "url":
                stored[name] = data
                return self.reply(200, json.dumps({"video": {"url": f"/outputs/{name}"}}).encode())
            with lock:
                if args.out_dir is None:  # made at the first path reply only: a killed server leaves no folder
                    args.out_dir = tempfile.mkdtemp(prefix="perfkit-test-server-")
                    atexit.register(shutil.rmtree, args.out_dir, True)
            path = os.path.join(args.out_dir, name)
            with open(path, "wb") as f:
                f.write(data)
            self.reply(200, json.dumps({"path": path}).encode())

    Handler.release = release
    return Handler


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--sleep-ms", type=float, default=100)
    p.add_argument("--max-concurrency", type=int, default=1)
    p.add_argument("--format", choices=("mkv", "npy"), default="mkv")
    p.add_argument("--reply", choices=("body", "base64", "url", "path", *HOSTILE), default="body")
    p.add_argument("--noise", type=int, default=0)
    p.add_argument("--startup-ms", type=float, default=0)
    p.add_argument("--never-ready", action="store_true")
    p.add_argument("--exit-at-start", type=int)
    p.add_argument("--crash-after", type=int)
    p.add_argument("--fail-every", type=int)
    p.add_argument("--hang-after", type=int)
    p.add_argument("--spawn-child", action="store_true", help="start a sleeping child (teardown checks)")
    p.add_argument("--tag", default="", help="a marker in the argv, for tests that look for leftovers")
    p.add_argument("--out-dir", help="where --reply path writes (default: a temporary folder, removed at exit)")
    args = p.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # perfkit ends servers with SIGTERM: clean up
    if args.exit_at_start is not None:
        print("test server: refusing to start", file=sys.stderr, flush=True)
        sys.exit(args.exit_at_start)
    if args.spawn_child:
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", args.tag])
    time.sleep(args.startup_ms / 1e3)
    ThreadingHTTPServer.request_queue_size = 128  # the default 5 drops connections under concurrent load
    server = ThreadingHTTPServer((args.host, args.port), make_handler(args))
    server.daemon_threads = True
    print(f"serving on {args.host}:{args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
