"""Start the rank processes of one trial, watch them, and tear them down.

Each trial's ranks run in one new process group, so a timeout or a crashed rank ends every process the
trial started (children of children included) and nothing is left behind. Before the group is ended,
ranks still running are asked for a Python stack dump of every thread (``perfkit.run.stackdump``). A hung or
crashed rank is a result: the returned ``TrialOutcome`` says which rank, with its exit code, the tail of
its output and its stacks.

A perfkit that dies itself (``kill -9``, an out-of-memory kill) takes its processes along: every rank
gets the Linux parent-death signal (SIGKILL), and each group has a watcher outside it, a tiny process
that waits on a pipe from perfkit and kills the whole group when the pipe closes (children of ranks get
no parent-death signal of their own). Both hang on the thread that started them: start ranks from the
main thread.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from perfkit.run import stackdump

GRACE_S = 3.0  # after a rank crashes, how long the others get to exit by themselves
TERM_WAIT_S = 2.0  # after SIGTERM, before SIGKILL
STACKS_WAIT_S = 2.0  # after asking for stack dumps
POLL_S = 0.05
STACKS_KEPT_CHARS = 6000


@dataclasses.dataclass
class RankProcess:
    """One rank: its argv, its full environment and its folder (logs, metrics, stacks)."""

    rank: int
    argv: list[str]
    env: dict[str, str]
    dir: Path
    proc: subprocess.Popen | None = None
    exit_code: int | None = None
    exited_s: float | None = None  # seconds into the trial when its exit was seen (which rank failed first)
    # its logs' sizes (bytes, by name) when perfkit began to stop it, where it did (``end_group``): what follows
    # answers perfkit's signals (a shutdown log, jax's ``SIGTERM caught at``) or came after the stop
    printed_at_stop: dict[str, int] | None = None


@dataclasses.dataclass
class TrialOutcome:
    status: str  # ok | hung | crashed | interrupted
    wall_s: float
    ranks: list[dict]
    # Unix time (s) when perfkit began to stop ranks still running (the timeout, or a crash's grace past): the
    # metrics protocol's ``t`` clock, so a step a rank wrote later (one that ran on past SIGTERM) is told apart
    stopped_t: float | None = None
    # each stopped rank's stdout.log size (bytes) then: stdout has no clock, so a step line past it came after the stop
    stdout_at_stop: dict[int, int] = dataclasses.field(default_factory=dict)


def tail(path: Path, lines: int = 20, until: int | None = None) -> str:
    """The last ``lines`` lines of the file, of its first ``until`` bytes where given."""
    try:
        with open(path, "rb") as f:
            end = f.seek(0, os.SEEK_END) if until is None else min(until, f.seek(0, os.SEEK_END))
            f.seek(max(0, end - 8192))
            return "\n".join(f.read(end - f.tell()).decode(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


PR_SET_PDEATHSIG = 1  # linux/prctl.h
_prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform == "linux" else None
# The group's watcher: blocks until perfkit's end of the pipe closes, then kills the group.
WATCHER = "import os, sys\nsys.stdin.buffer.read()\ntry:\n    os.killpg(int(sys.argv[1]), 9)\nexcept OSError:\n    pass\n"
_watchers: dict[int, subprocess.Popen] = {}  # pgid -> its watcher


def _die_with(parent: int) -> Callable[[], None]:
    """preexec_fn of a rank: SIGKILL when perfkit dies (or at once, when it died before this ran)."""
    def preexec() -> None:
        if _prctl is not None:
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:
            os._exit(137)
    return preexec


def _watch_group(pgid: int) -> None:
    """Start the watcher that kills group ``pgid`` if perfkit dies without ending it (own session, so
    neither the group's signals nor a terminal's Ctrl-C reach it)."""
    _watchers[pgid] = subprocess.Popen([sys.executable, "-I", "-S", "-c", WATCHER, str(pgid)],
                                       stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL, start_new_session=True)


def _unwatch_group(pgid: int) -> None:
    """The group is ended: stop its watcher without letting it signal (the group id may be reused)."""
    watcher = _watchers.pop(pgid, None)
    if watcher is not None:
        watcher.kill()
        watcher.wait()
        watcher.stdin.close()


def start_rank(r: RankProcess, pgid: int | None, cwd: str | Path | None) -> int:
    """Start one rank in the trial's process group (a new group, led by it and watched, when ``pgid``
    is None)."""
    r.dir.mkdir(parents=True, exist_ok=True)
    with open(r.dir / "stdout.log", "wb") as out, open(r.dir / "stderr.log", "wb") as err:
        r.proc = subprocess.Popen(r.argv, env=r.env, cwd=cwd, stdout=out, stderr=err,
                                  stdin=subprocess.DEVNULL, process_group=0 if pgid is None else pgid,
                                  preexec_fn=_die_with(os.getpid()))
    if pgid is None:
        _watch_group(r.proc.pid)
    return pgid or r.proc.pid


@contextlib.contextmanager
def _interrupts_deferred():
    """Hold Ctrl-C / SIGTERM while ranks start, so a rank started mid-interrupt is recorded (and later
    ended) before the interrupt is raised. Handlers, unlike a signal mask, are not inherited by ranks."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending = []
    held = (signal.SIGINT, signal.SIGTERM)
    previous = {s: signal.signal(s, lambda signum, _frame: pending.append(signum)) for s in held}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if pending:
            raise KeyboardInterrupt


def _watch(ranks: list[RankProcess], timeout: float, t0: float, on_tick: Callable[[], None] | None) -> str:
    """Poll until every rank exits (ok), one crashed and the others did not follow (crashed), or the
    timeout passes (hung)."""
    crash_at = None
    while True:
        for r in ranks:
            if r.exit_code is None:
                r.exit_code = r.proc.poll()
                if r.exit_code is not None:
                    r.exited_s = round(time.monotonic() - t0, 2)
        if all(r.exit_code is not None for r in ranks):
            return "crashed" if any(r.exit_code != 0 for r in ranks) else "ok"
        now = time.monotonic()
        if crash_at is None and any(r.exit_code not in (None, 0) for r in ranks):
            crash_at = now
        if crash_at is not None and now - crash_at > GRACE_S:
            return "crashed"
        if now - t0 > timeout:
            return "hung"
        if on_tick is not None:
            on_tick()
        time.sleep(POLL_S)


def run_ranks(ranks: list[RankProcess], timeout: float, cwd: str | Path | None = None,
              on_tick: Callable[[], None] | None = None) -> TrialOutcome:
    """Run all ranks to completion, until ``timeout`` seconds, or until one crashes.

    A Ctrl-C (KeyboardInterrupt) ends the group at once and returns status ``interrupted``."""
    t0 = time.monotonic()
    pgid, stopped_t = None, None
    status = "interrupted"
    try:
        with _interrupts_deferred():
            for r in ranks:
                pgid = start_rank(r, pgid, cwd)
        status = _watch(ranks, timeout, t0, on_tick)
    except OSError as exc:  # a rank that cannot start (missing program, not executable)
        status = "crashed"
        failed = next(r for r in ranks if r.proc is None)
        (failed.dir / "stderr.log").write_text(f"perfkit: cannot start {failed.argv[0]!r}: {exc.strerror}\n")
        failed.exit_code = 127
    except KeyboardInterrupt:
        status = "interrupted"
    finally:
        if pgid is not None:
            if any(r.proc is not None and r.proc.poll() is None for r in ranks):
                stopped_t = time.time()
            end_group(pgid, ranks, dump_stacks=status != "interrupted")
    return TrialOutcome(status, time.monotonic() - t0, [rank_report(r) for r in ranks], stopped_t,
                        {r.rank: r.printed_at_stop["stdout.log"] for r in ranks if r.printed_at_stop})


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _request_stacks(pgid: int, running: list[RankProcess]) -> None:
    """SIGUSR1 to the group (the hook dumps every thread), then wait until each rank wrote its dump or
    exited (a program without the hook dies of SIGUSR1), at most STACKS_WAIT_S."""
    _kill_group(pgid, signal.SIGUSR1)
    deadline = time.monotonic() + STACKS_WAIT_S
    files = {r.rank: Path(r.env.get(stackdump.STACKS_ENV, r.dir / "stacks.txt")) for r in running}
    while time.monotonic() < deadline:
        if all(r.proc.poll() is not None or stackdump.dumped(files[r.rank]) for r in running):
            time.sleep(0.1)  # the other threads' frames, and the rank's child processes
            return
        time.sleep(POLL_S)


def end_group(pgid: int, ranks: list[RankProcess], dump_stacks: bool) -> None:
    """Stack dumps from ranks still running, SIGTERM the whole group, then SIGKILL what is left. Each rank still
    running keeps in ``printed_at_stop`` what it had printed before."""
    running = [r for r in ranks if r.proc is not None and r.proc.poll() is None]
    for r in running:
        r.printed_at_stop = {name: _size(r.dir / name) for name in ("stdout.log", "stderr.log")}
    if running and dump_stacks:
        _request_stacks(pgid, running)
    if running:
        _kill_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + TERM_WAIT_S
        while time.monotonic() < deadline and any(r.proc.poll() is None for r in running):
            time.sleep(POLL_S)
    _kill_group(pgid, signal.SIGKILL)  # grandchildren that outlived their parent rank, too
    for r in ranks:
        if r.proc is not None:
            try:
                r.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
    _unwatch_group(pgid)


def rank_report(r: RankProcess) -> dict:
    """What trials.jsonl keeps of a rank's end (a trial's rank, a served trial's server). A rank perfkit stopped:
    its tails end at what it had printed then (``printed_at_stop``), what it printed in answer to perfkit's signals
    left out, as it reads like the cause of the stop where it follows from it."""
    code = r.exit_code if r.exit_code is not None else (r.proc.returncode if r.proc else None)
    rep = {"rank": r.rank, "exit_code": code, "running_at_end": r.proc is not None and r.exit_code is None,
           **({"exited_s": r.exited_s} if r.exited_s is not None else {})}
    if code not in (0, None) or r.exit_code is None:
        at_stop = r.printed_at_stop or {}
        rep["stderr_tail"] = tail(r.dir / "stderr.log", until=at_stop.get("stderr.log"))
        rep["stdout_tail"] = tail(r.dir / "stdout.log", 5, until=at_stop.get("stdout.log"))
    stacks = stackdump.collect(r.dir)
    if stacks is not None:
        rep["stacks"] = stacks[:STACKS_KEPT_CHARS]  # the whole dump stays in the rank's stacks*.txt
    return rep
