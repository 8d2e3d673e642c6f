"""The metrics protocol, seen from the measured program.

perfkit's runner sets ``PERFKIT_METRICS`` (a JSONL path), ``PERFKIT_OUTPUTS`` (a folder for output
frames and videos), ``PERFKIT_RANK`` and ``PERFKIT_TRIAL``. A program reports a step time with
``record.step(12.3)`` and any other figure with ``record.value("denoise_s", 4.38)``. Outside perfkit
(no ``PERFKIT_METRICS``) every call is a no-op, so a bench script can keep the calls in.

Each line is flushed at once: a rank that hangs or crashes later keeps every step it finished.

Taps (``record.tap("block3.attn", x)``): intermediate arrays, called in the same order in every variant,
so perfkit can find the first one where B departs from A. Each call appends one line of statistics and
a hash to ``taps.jsonl`` beside ``PERFKIT_METRICS``, and with ``PERFKIT_TAP_ARRAYS=1`` saves the array
as ``taps/<index>-<name>.npy`` there too. ``record.tapping(step)`` says whether the case asked for taps
at that step (``PERFKIT_TAP_STEPS``).

Profiler traces (``capture.trace``): ``record.traced(step)`` is the folder a JAX program profiles step ``step``
into (``PERFKIT_TRACE_DIR``, where ``PERFKIT_TRACE_STEPS`` holds the step), and ``record.jax_trace(folder,
step)`` profiles it there, marked so that ``perfkit trace`` finds the step; report such a step with
``record.step(ms, traced=True)``: the timing leaves it out (the profiler slows it).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import time
from pathlib import Path

_handle = None
_handle_path: str | None = None
_taps = {"path": None, "handle": None, "count": 0}
TAPS_FILE = "taps.jsonl"
TAPS_DIR = "taps"


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


def tapping(step: int) -> bool:
    """Whether the case asks for taps at denoise step ``step`` (``capture.taps``)."""
    steps = os.environ.get("PERFKIT_TAP_STEPS", "")
    return str(int(step)) in steps.split(",")


def traced(step: int) -> str | None:
    """The folder to profile step ``step`` into where the case asks for it (``capture.trace``), else None."""
    steps = os.environ.get("PERFKIT_TRACE_STEPS", "")
    return os.environ.get("PERFKIT_TRACE_DIR") or None if str(int(step)) in steps.split(",") else None


@contextlib.contextmanager
def jax_trace(trace_dir: str | None, index: int):
    """Profile one step of a JAX program into ``trace_dir/step<index>`` (nothing without a folder), inside a
    StepTraceAnnotation numbered by the step index: ``perfkit trace`` finds the step by it."""
    if not trace_dir:
        yield
        return
    import jax  # only a profiled step's program, which has jax to profile

    jax.profiler.start_trace(str(Path(trace_dir) / f"step{index}"))
    try:
        with jax.profiler.StepTraceAnnotation("step", step_num=index):
            yield
    finally:
        jax.profiler.stop_trace()


def _host_array(value):
    """``value`` (numpy, torch or jax array, or anything numpy takes) as a numpy array, without
    importing torch or jax: a torch tensor is detached and copied to the host; dtypes numpy cannot
    save (bfloat16, float8) are widened to float32, which holds each of their values exactly."""
    import numpy as np  # the metrics calls stay free of numpy's import; only taps need it

    dtype = str(getattr(value, "dtype", "")).removeprefix("torch.")
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor
        value = value.detach().cpu()
        try:
            value = value.numpy()
        except TypeError:  # bfloat16 and float8 have no numpy twin in torch's eyes
            value = value.float().numpy()
    arr = np.asarray(value)
    if arr.dtype.kind == "V" or arr.dtype.type.__module__ != "numpy":  # ml_dtypes (jax's bfloat16 ...)
        arr = arr.astype(np.float32)
    return np.ascontiguousarray(arr), dtype or str(arr.dtype)


def tap_stats(arr) -> dict:
    """The statistics a tap line keeps of a numpy array: shape, mean, std, min, max, L2 norm (over its
    finite values, in float64), the count of non-finite values, and the sha256 of its bytes."""
    import numpy as np  # the metrics calls stay free of numpy's import; only taps need it

    wide = arr.astype(np.float64).ravel() if arr.dtype.kind in "biufc" else np.zeros(0)
    finite = wide[np.isfinite(wide)]

    def figure(fn):
        return float(fn(finite)) if len(finite) else None

    return {"shape": list(arr.shape), "mean": figure(np.mean), "std": figure(np.std), "min": figure(np.min),
            "max": figure(np.max), "l2": figure(np.linalg.norm), "nonfinite": int(len(wide) - len(finite)),
            "sha256": hashlib.sha256(arr.tobytes()).hexdigest()}


def tap(name: str, value, *, step: int | None = None, **extra) -> None:
    """One intermediate array by name (the whole logical array: gather a sharded one first), in the
    same order in every variant: a line in ``taps.jsonl``, and the array too with
    ``PERFKIT_TAP_ARRAYS=1``. ``step``: the denoise step it belongs to. A no-op outside perfkit."""
    metrics = os.environ.get("PERFKIT_METRICS")
    if not metrics:
        return
    folder = Path(metrics).parent
    if _taps["path"] != folder:
        _taps.update(path=folder, handle=open(folder / TAPS_FILE, "a", buffering=1), count=0)
    arr, dtype = _host_array(value)
    index = _taps["count"]
    _taps["count"] += 1
    line = {"index": index, "name": str(name), "step": step, "dtype": dtype, **tap_stats(arr), **extra}
    if os.environ.get("PERFKIT_TAP_ARRAYS") == "1":
        import numpy as np  # only taps need numpy

        rel = Path(TAPS_DIR) / f"{index:04d}-{re.sub(r'[^A-Za-z0-9_.-]+', '_', str(name))}.npy"
        (folder / TAPS_DIR).mkdir(exist_ok=True)
        np.save(folder / rel, arr)
        line["array"] = str(rel)
    _taps["handle"].write(json.dumps(line, allow_nan=False) + "\n")
    _taps["handle"].flush()
