"""The metrics protocol, seen from the measured program.

perfkit's runner sets ``PERFKIT_METRICS`` (a JSONL path), ``PERFKIT_OUTPUTS`` (a folder for output
frames and videos), ``PERFKIT_RANK`` and ``PERFKIT_TRIAL``. A program reports a step time with
``record.step(12.3)`` and any other figure with ``record.value("denoise_s", 4.38)``. Outside perfkit
(no ``PERFKIT_METRICS``) every call is a no-op, so a bench script can keep the calls in.

Each line is flushed at once: a rank that hangs or crashes later keeps every step it finished.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

_handle = None
_handle_path: str | None = None


def _write(event: dict) -> None:
    global _handle, _handle_path
    path = os.environ.get("PERFKIT_METRICS")
    if not path:
        return
    if _handle is None or _handle_path != path:
        _handle = open(path, "a", buffering=1)
        _handle_path = path
    event.setdefault("t", time.time())
    _handle.write(json.dumps(event) + "\n")
    _handle.flush()


def step(ms: float, **extra) -> None:
    """One timed step, in milliseconds, that waited for the device (``extra`` keys are kept)."""
    _write({"event": "step", "ms": float(ms), **extra})


def natural(ms_per_step: float, steps: int, **extra) -> None:
    """The mean step time of a pass of ``steps`` steps dispatched without waiting, with one wait at
    the end (what a production loop sees; steps overlap host and device work)."""
    step(ms_per_step, kind="natural", steps=int(steps), **extra)


def value(name: str, value: float, **extra) -> None:
    """Any other figure of the run (``denoise_s``, ``compile_s``, ``request_s`` ...)."""
    _write({"event": "value", "name": name, "value": float(value), **extra})


def mark(name: str, **extra) -> None:
    """A progress mark (e.g. ``"ready"``); the watchdog shows a hung rank's last mark."""
    _write({"event": "mark", "name": name, **extra})


def outputs_dir() -> Path | None:
    """The folder where this rank should write its outputs, or None outside perfkit."""
    path = os.environ.get("PERFKIT_OUTPUTS")
    if not path:
        return None
    Path(path).mkdir(parents=True, exist_ok=True)
    return Path(path)
