"""Helpers for runner tests: tiny command cases around tests/runner/programs, perfkit in a subprocess.

A module of its own (not conftest.py): several test folders have a conftest, and `from conftest import`
resolves to whichever was imported first."""

import contextlib
import json
import os
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


def perfkit(*args, timeout=300, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "perfkit.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, timeout=timeout, **kw)


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
