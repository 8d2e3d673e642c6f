"""Helpers for runner tests: tiny command cases around tests/runner/programs, perfkit in a subprocess.

A module of its own (not conftest.py): several test folders have a conftest, and `from conftest import`
resolves to whichever was imported first."""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


REPO = Path(__file__).resolve().parents[2]
PROGRAMS = Path(__file__).resolve().parent / "programs"


def sleeper_case(steps=6, sleep_ms=5, **over) -> dict:
    """A command case running programs/sleeper.py; ``over`` replaces top-level fields."""
    case = {
        "name": "sleepers",
        "command": ["python", str(PROGRAMS / "sleeper.py"), str(steps), str(sleep_ms)],
        "warmup": 1, "repeats": {"min": 2, "max": 2}, "timeout": 60,
        "variants": {"a": {}, "b": {}},
    }
    case.update(over)
    return case


def perfkit(*args, timeout=300, env=None, cwd=REPO, **kw) -> subprocess.CompletedProcess:
    """``perfkit ARGS`` in a subprocess, its output captured. Past ``timeout`` seconds it is aborted (SIGABRT)
    and the test fails with the Python stacks of its threads (faulthandler), which say where it hung."""
    env = {**(os.environ if env is None else env), "PYTHONFAULTHANDLER": "1"}
    with subprocess.Popen([sys.executable, "-m", "perfkit.cli", *map(str, args)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, cwd=cwd, env=env, **kw) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)
            out, err = proc.communicate()
            raise AssertionError(f"perfkit {' '.join(map(str, args))} still running after {timeout} s; its stacks:\n"
                                 f"{err[-6000:]}") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def wait_for(condition, timeout: float, what: str) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def processes_with(tag: str) -> list[int]:
    """Live processes whose argv mentions ``tag`` (to prove nothing outlived its trial)."""
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            try:
                if tag.encode() in (d / "cmdline").read_bytes():
                    found.append(int(d.name))
            except OSError:
                continue
    return found


def free_ports(n: int) -> int:
    """A port p with p .. p+n-1 all free on loopback now (the OS picks p)."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + n > 65536:
            continue
        try:
            with contextlib.ExitStack() as stack:
                for port in range(base, base + n):
                    stack.enter_context(socket.socket()).bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
    raise RuntimeError(f"no {n} free ports in a row")
