"""What serve cases cost beyond the server: the closed-loop client's floor per request against the test
server answering at once (a tiny npy, no sleep), and the analysis of a run the size of the reference
PR's table (7 variants x 2 server processes x 3 levels x 20 measured requests).

    .venv/bin/python benchmarks/serve_overhead.py [--requests 200]

Figures are medians (wall clock, this machine as loaded as it is). The client floor is what every
measured latency carries on top of the server's own time; a server far slower than it (a video server's
seconds) is measured faithfully, one close to it is not.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from perfkit.analysis.serving import REQUEST_COLUMNS, level_comparisons, per_process, pooled
from perfkit.run.serve_load import call, closed_loop, encode_request, take_output, wait_ready
from perfkit.run.trial import free_port
from perfkit.rundata.serve_spec import OutputSpec, RequestSpec

SERVER = Path(__file__).resolve().parent.parent / "cases" / "serve" / "server.py"
REQUEST = RequestSpec("/generate", "POST", {"prompt": "{prompt}", "seed": "{seed}", "width": 8, "height": 8,
                                            "frames": 1}, {})


def client_floor(requests: int, concurrency: int, base: str) -> tuple[float, float]:
    """(median latency ms, requests per second) of ``requests`` closed-loop requests."""
    latencies = []

    def send(i: int, worker: int) -> None:
        url, body, headers = encode_request(REQUEST, {"prompt": "p", "seed": i})
        t = time.perf_counter()
        status, data = call("POST", base + url, body, headers, 10)
        take_output(OutputSpec("body", None, ".npy"), status, data, base, "127.0.0.1", 10)
        latencies.append((time.perf_counter() - t) * 1e3)

    t0 = time.perf_counter()
    closed_loop(requests, concurrency, send, lambda: False, lambda: None, lambda: None)
    return statistics.median(latencies), requests / (time.perf_counter() - t0)


def pr_sized_requests(rng: np.random.Generator) -> pd.DataFrame:
    rows = []
    for v in range(7):
        for p in range(2):
            trial = v * 2 + p
            for level in (1, 2, 4):
                t = 0.0
                for i in range(22):
                    ms = float(rng.normal(3000 + 200 * v, 60) * (1 + 0.3 * (level > 1)))
                    rows.append({"trial": trial, "variant": f"v{v}", "round": p, "trial_status": "ok", "level": level,
                                 "phase": "warmup" if i < 2 else "measured", "index": i, "prompt": f"p{i % 8:02d}",
                                 "seed": i % 8, "worker": 0, "start_s": t, "end_s": t + ms / 1e3, "latency_ms": ms,
                                 "status": 200, "ok": True, "error": None, "timed_out": False, "output": None,
                                 "sha256": None})
                    t += ms / 1e3 / level
    return pd.DataFrame(rows, columns=REQUEST_COLUMNS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    port = free_port()
    server = subprocess.Popen([sys.executable, str(SERVER), "--port", str(port), "--sleep-ms", "0", "--format", "npy",
                               "--max-concurrency", "64"], stdout=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        if not wait_ready(base + "/health", 30, lambda: server.poll() is None, lambda: None)[0]:
            sys.exit("the test server did not start")
        client_floor(20, 1, base)  # warm both sides
        for c in (1, 4, 16):
            ms, per_s = client_floor(args.requests, c, base)
            print(f"client floor, concurrency {c:>2}: median latency {ms:.2f} ms, {per_s:.0f} requests/s "
                  f"({per_s * 60:.0f}/min) against a server that answers at once")
    finally:
        server.terminate()
        server.wait()
    requests = pr_sized_requests(np.random.default_rng(0))
    t = time.perf_counter()
    procs = per_process(requests)
    pooled(requests, procs)
    mid = time.perf_counter()
    level_comparisons(requests, procs, "v0", [f"v{v}" for v in range(1, 7)], min_effect=0.02, seed=0)
    end = time.perf_counter()
    print(f"analysis of {len(requests)} requests (7 variants x 2 processes x 3 levels x 22): per-process and pooled "
          f"{(mid - t) * 1e3:.0f} ms, B/A ratios with bootstrap CIs {(end - mid) * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
