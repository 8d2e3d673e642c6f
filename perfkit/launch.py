"""Start the rank processes of one trial, watch them, and tear them down.

Each trial's ranks run in one new process group, so a timeout or a crashed rank ends every process the
trial started (children of children included) and nothing is left behind. A hung or crashed rank is a
result: the returned ``TrialOutcome`` says which rank, with its exit code and the tail of its stderr.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import time
from pathlib import Path

GRACE_S = 3.0  # after a rank crashes, how long the others get to exit by themselves
POLL_S = 0.05


@dataclasses.dataclass
class RankProcess:
    rank: int
    argv: list[str]
    env: dict[str, str]
    dir: Path
    proc: subprocess.Popen | None = None
    exit_code: int | None = None


@dataclasses.dataclass
class TrialOutcome:
    status: str  # ok | hung | crashed | interrupted
    wall_s: float
    ranks: list[dict]


def tail(path: Path, lines: int = 20) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 8192))
            return "\n".join(f.read().decode(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def run_ranks(ranks: list[RankProcess], timeout: float, cwd: str | Path | None = None) -> TrialOutcome:
    """Run all ranks to completion, until ``timeout`` seconds, or until one crashes."""
    t0 = time.monotonic()
    pgid = None
    status = "ok"
    try:
        for r in ranks:
            r.dir.mkdir(parents=True, exist_ok=True)
            out = open(r.dir / "stdout.log", "wb")
            err = open(r.dir / "stderr.log", "wb")
            # The first rank leads a new process group; the others join it.
            r.proc = subprocess.Popen(r.argv, env=r.env, cwd=cwd, stdout=out, stderr=err,
                                      stdin=subprocess.DEVNULL, process_group=0 if pgid is None else pgid)
            out.close()
            err.close()
            if pgid is None:
                pgid = r.proc.pid
        crash_at = None
        while True:
            for r in ranks:
                if r.exit_code is None:
                    r.exit_code = r.proc.poll()
            if all(r.exit_code is not None for r in ranks):
                break
            now = time.monotonic()
            if crash_at is None and any(r.exit_code not in (None, 0) for r in ranks):
                crash_at = now
            if crash_at is not None and now - crash_at > GRACE_S:
                status = "crashed"
                break
            if now - t0 > timeout:
                status = "hung"
                break
            time.sleep(POLL_S)
    except KeyboardInterrupt:
        status = "interrupted"
    finally:
        if pgid is not None:
            _end_group(pgid, ranks)
    if status == "ok" and any(r.exit_code != 0 for r in ranks):
        status = "crashed"
    return TrialOutcome(status, time.monotonic() - t0, [_rank_report(r) for r in ranks])


def _end_group(pgid: int, ranks: list[RankProcess]) -> None:
    """SIGTERM the whole group, then SIGKILL what is left; reap every rank."""
    if any(r.proc is not None and r.proc.poll() is None for r in ranks):
        _kill_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and any(r.proc.poll() is None for r in ranks if r.proc):
            time.sleep(POLL_S)
    _kill_group(pgid, signal.SIGKILL)  # grandchildren that outlived their parent rank, too
    for r in ranks:
        if r.proc is not None:
            try:
                r.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass


def _rank_report(r: RankProcess) -> dict:
    code = r.exit_code if r.exit_code is not None else (r.proc.returncode if r.proc else None)
    rep = {"rank": r.rank, "exit_code": code, "running_at_end": r.exit_code is None}
    if code not in (0, None) or r.exit_code is None:
        rep["stderr_tail"] = tail(r.dir / "stderr.log")
        rep["stdout_tail"] = tail(r.dir / "stdout.log", 5)
    return rep
