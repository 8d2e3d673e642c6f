"""The ``serve`` case kind: one trial is one fresh server process of one variant, measured by closed-loop
load at every concurrency level of the case.

A trial starts the server in a process group of its own on a free port (``perfkit.run.launch``), polls its
readiness URL, then at each level sends the case's ``warmup`` requests and its measured requests from
``concurrency`` workers, and ends the group (SIGTERM, then SIGKILL: nothing it started is left). A server
that exits (``crashed``) or never gets ready, or a request left unanswered past the timeout (``hung``,
with the server's stack dump) ends the trial with the reason and the server's log tail; the run goes on.

Files of a trial (``trials/NN-<variant>/rank0/``): ``stdout.log`` / ``stderr.log`` of the server,
``requests.jsonl`` (one line per request, written as it returns: ``level, phase, index, prompt, seed,
worker, start_s, end_s, latency_ms, status, ok, error, timed_out, output, bytes, sha256``; times in
seconds from the server's start, latency from sending the request to holding its output), every
output as ``requests/c<level>/<w|m><index>-<prompt><suffix>``, and the first good measured output of
each prompt as ``outputs/<prompt><suffix>`` (compared across variants by the runner's quality step).
The trial's record keeps the lowest level's latencies as its steps (warmup included, ``warmup`` = the
good warmup requests), so the single-request latency gets the runner's B/A ratio and CI.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from perfkit.errors import BadInput
from perfkit.quality.media import parse_codec
from perfkit.run.launch import RankProcess, end_group, rank_report, start_rank
from perfkit.run.serve_load import (Deadline, RequestFailed, call, closed_loop, encode_request, resolve,
                                    take_output, wait_ready)
from perfkit.run.trial import (PYTHON_NAMES, RunOptions, Trial, check_program, check_scripts, free_port, process_env,
                               trial_salt)
from perfkit.rundata.case import Case, Variant, expand_matrix
from perfkit.rundata.exits import exit_text
from perfkit.rundata.serve_spec import ServeSpec, fill
from perfkit.rundata.trials import RankRecord, TrialRecord

REQUESTS_FILE = "requests.jsonl"
SETTLE_S = 0.5  # after a dropped connection, how long to wait for the server to be seen exiting


def server_argv(variant: Variant, values: dict) -> list[str]:
    """The variant's server argv and its ``args`` after it, ``{host}`` / ``{port}`` filled in both;
    ``python`` as the program means perfkit's own Python."""
    argv = [str(fill(a, values)) for a in [*variant.serve.argv, *variant.args]]
    return [sys.executable, *argv[1:]] if argv[0] in PYTHON_NAMES else argv


class RequestLog:
    """A trial's requests: each output saved and each row appended to ``requests.jsonl`` as it returns."""

    def __init__(self, rank_dir: Path):
        self.dir, self.rows, self.lock = rank_dir, [], threading.Lock()
        (rank_dir / "requests").mkdir(parents=True, exist_ok=True)

    def add(self, row: dict, data: bytes | None, suffix: str) -> None:
        if data is not None:
            rel = Path("requests") / f"c{row['level']}" / f"{row['phase'][0]}{row['index']:03d}-{row['prompt']}{suffix}"
            (self.dir / rel).parent.mkdir(exist_ok=True)
            (self.dir / rel).write_bytes(data)
            row.update(output=str(rel), bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
        with self.lock:
            self.rows.append(row)
            with open(self.dir / REQUESTS_FILE, "a") as f:
                f.write(json.dumps(row) + "\n")

    def keep_first_outputs(self) -> None:
        """``outputs/<prompt><suffix>``: the first good measured output of each prompt."""
        out = self.dir / "outputs"
        out.mkdir(exist_ok=True)
        for row in sorted(self.rows, key=lambda r: (r["level"], r["index"])):
            if row["ok"] and row["phase"] == "measured":
                src = self.dir / row["output"]
                dest = out / (row["prompt"] + src.suffix)
                if not dest.exists():
                    shutil.copyfile(src, dest)


class ServedTrial:
    """One server process under load: its lifecycle, the trouble that ends it early, its requests."""

    def __init__(self, case: Case, variant: Variant, trial: Trial, rank_dir: Path, hook: Path | None,
                 salt: str | None):
        self.spec: ServeSpec = case.serve
        self.server = variant.serve
        self.port = free_port()
        self.values = {"host": self.spec.host, "port": self.port}  # what the server's argv, env, ready URL know
        self.base = f"http://{self.spec.host}:{self.port}"
        env = process_env({**{k: str(fill(v, self.values)) for k, v in variant.env.items()},
                           "PERFKIT_RANK": "0", "PERFKIT_WORLD": "1", "PERFKIT_TRIAL": str(trial.index),
                           "PERFKIT_VARIANT": variant.name, "PERFKIT_HOST": self.spec.host,
                           "PERFKIT_PORT": str(self.port)}, rank_dir, hook, salt)
        self.proc = RankProcess(0, server_argv(variant, self.values), env, rank_dir)
        self.pgid: int | None = None
        self.log = RequestLog(rank_dir)
        self.t0 = time.perf_counter()
        self.trouble: tuple[str, str] | None = None  # (status, reason) that ended the trial early
        self.mark = "starting"  # where the trial is: starting, ready, c=<level>

    def alive(self) -> bool:
        if self.proc.exit_code is None and self.proc.proc is not None:
            self.proc.exit_code = self.proc.proc.poll()
        return self.proc.proc is not None and self.proc.exit_code is None

    def stopped(self) -> bool:
        if self.trouble is None and not self.alive():
            self.trouble = ("crashed", f"the server exited ({exit_text(self.proc.exit_code)}) at {self.mark}")
        return self.trouble is not None

    def _settle(self) -> None:
        """After a dropped connection: a server that is exiting closes its sockets before it can be seen to
        have exited; wait briefly, so that no further request goes to a dead server."""
        deadline = time.monotonic() + SETTLE_S
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.02)

    def end(self) -> None:
        """End the server's process group, once: the load's abort and the trial's end both call this, and a
        group ended and reaped may hand its id to another group before the second call."""
        if self.pgid is not None:
            end_group(self.pgid, [self.proc], dump_stacks=bool(self.trouble and self.trouble[0] == "hung"))
            self.pgid = None

    def start(self, cwd: str, on_tick: Callable[[], None]) -> float | None:
        """Start the server and wait until it is ready: seconds it took, or None (``trouble`` says why)."""
        try:
            self.pgid = start_rank(self.proc, None, cwd or None)
        except OSError as exc:
            (self.proc.dir / "stderr.log").write_text(f"perfkit: cannot start {self.proc.argv[0]!r}: {exc.strerror}\n")
            self.proc.exit_code = 127
            self.trouble = ("crashed", f"cannot start {self.proc.argv[0]!r}: {exc.strerror}")
            return None
        url = resolve(fill(self.server.ready.url, self.values), self.base)
        ready, last = wait_ready(url, self.server.ready.timeout, self.alive, on_tick)
        if ready:
            self.mark = "ready"
            return round(time.perf_counter() - self.t0, 3)
        if not self.alive():
            self.trouble = ("crashed", f"the server exited ({exit_text(self.proc.exit_code)}) before it was ready "
                                       f"(last answer of {url}: {last})")
        else:
            self.trouble = ("hung", f"not ready within {self.server.ready.timeout:g} s (last answer of {url}: {last})")
        return None

    def send(self, level: int, phase: str, offset: int, i: int, worker: int) -> None:
        """Request ``offset + i`` of a level (prompts cycle), recorded whatever happens."""
        k = offset + i
        prompt = self.spec.prompts[k % len(self.spec.prompts)]
        url, body, headers = encode_request(self.server.request, self.spec.values(prompt, self.port))
        row = {"level": level, "phase": phase, "index": k, "prompt": prompt.name, "seed": prompt.seed, "worker": worker}
        start = time.perf_counter()
        answer, error = None, None
        deadline = Deadline.start(self.spec.request_timeout)  # the answer's and every poll's after it
        try:
            reply = call(self.server.request.method, resolve(url, self.base), body, headers, deadline.seconds)
            answer = take_output(self.server.output, reply, self.base, self.spec.host, deadline)
        except RequestFailed as exc:
            error = exc
        end = time.perf_counter()
        row.update(start_s=round(start - self.t0, 6), end_s=round(end - self.t0, 6),
                   latency_ms=round((end - start) * 1e3, 3), status=answer.status if answer else error.status,
                   ok=answer is not None, error=None if answer else str(error),
                   timed_out=bool(error and error.timed_out))
        self.log.add(row, answer.data if answer else None, answer.suffix if answer else "")
        if error is not None and error.status is None and not error.timed_out:
            self._settle()
        if error is not None and error.timed_out and self.trouble is None:
            self.trouble = ("hung", hang_reason(k, level, error, self.spec.request_timeout))

    def load(self, warmup: int, on_tick: Callable[[], None]) -> None:
        """Every level: ``warmup`` requests, then the measured ones, each phase closed-loop."""
        for level in self.spec.concurrency:
            self.mark = f"c={level}"
            offset = 0
            for phase, count in (("warmup", warmup), ("measured", self.spec.requests)):
                closed_loop(count, level, functools.partial(self.send, level, phase, offset), self.stopped, self.end,
                            on_tick)
                offset += count
                if self.stopped():
                    return

    def record(self, trial: Trial, ready_s: float | None) -> TrialRecord:
        """The trial's line of ``trials.jsonl``."""
        rows = self.log.rows
        first = self.spec.concurrency[0]
        lowest = sorted((r for r in rows if r["level"] == first and r["ok"]), key=lambda r: r["index"])
        steps = [r["latency_ms"] for r in lowest]
        warm = sum(r["phase"] == "warmup" for r in lowest)
        status = self.trouble[0] if self.trouble else "ok" if len(steps) > warm else "no_steps"
        good = [r for r in rows if r["ok"]]
        rank: RankRecord = {**rank_report(self.proc), "steps_done": len(good),
                "last_step_ms": good[-1]["latency_ms"] if good else None, "last_mark": self.mark}
        levels = [{"concurrency": c, "sent": sum(r["level"] == c for r in rows),
                   "ok": sum(r["level"] == c and r["ok"] for r in rows)} for c in self.spec.concurrency]
        return {
            "index": trial.index, "variant": trial.variant, "round": trial.round, "dir": f"trials/{trial.dirname}",
            "status": status, "wall_s": round(time.perf_counter() - self.t0, 3), "warmup": warm,
            "steps_ms": steps, "natural_ms": [], "values": {} if ready_s is None else {"ready_s": ready_s},
            "ranks": [rank],
            "serve": {"url": self.base, "ready_s": ready_s, "failure": self.trouble[1] if self.trouble else None,
                      "requests": f"rank0/{REQUESTS_FILE}", "levels": levels},
            "finished": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        }


def hang_reason(k: int, level: int, error: RequestFailed, timeout: float) -> str:
    """Why a timed-out request hung its trial: no answer at all, or the server's own (a body that did not end, a
    job still running when the time ran out)."""
    if error.status is None:
        return f"request {k} at c={level} got no answer within {timeout:g} s"
    return f"request {k} at c={level} was not done in time: {error}"  # (the error names the time)


def check_runnable(case: Case, cwd: str) -> None:
    """Each variant's server program and the scripts it names (relative ones from ``cwd``, where it starts), and the
    encoder of the quality floor in this PyAV (every matrix combination's), must be there before any trial runs."""
    for v in case.variants:
        check_program(v.serve.argv[0], case, f"variants.{v.name}.serve.server")
        check_scripts(case, list(v.serve.argv), f"variants.{v.name}.serve.server", cwd, program=True)
        check_scripts(case, [str(a) for a in v.args], f"variants.{v.name}.args", cwd)
    for codec in dict.fromkeys(cell.serve.codec for _, cell in expand_matrix(case)):
        try:
            parse_codec(codec)
        except BadInput as exc:
            raise BadInput(exc.reason, path=case.source, field="serve.codec") from None


def run_trial(case: Case, trial: Trial, trial_dir: Path, options: RunOptions, hook: Path | None,
              trial_port: int, on_tick: Callable[[], None]) -> TrialRecord | None:
    """One server process of the trial's variant under the case's load (on a free port: ``trial_port``
    is for ranks that meet at a coordinator); its record, or None when interrupted."""
    shutil.rmtree(trial_dir, ignore_errors=True)  # what an interrupted attempt left
    variant = case.variant(trial.variant)
    served = ServedTrial(case, variant, trial, trial_dir / "rank0", hook, trial_salt(options, trial_dir, trial))
    try:
        ready_s = served.start(options.cwd, on_tick)
        if ready_s is not None:
            served.load(case.warmup, on_tick)
    except KeyboardInterrupt:
        served.trouble = ("interrupted", "stopped")
        served.end()
        return None
    served.end()
    served.log.keep_first_outputs()
    return served.record(trial, ready_s)
