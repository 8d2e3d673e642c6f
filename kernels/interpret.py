"""Pallas TPU kernels off TPU: TPU interpret mode, and its race detector in one call.

Interpret mode runs a TPU kernel on CPU while simulating each device's VMEM, DMAs, semaphores and
barriers; with ``detect_races`` a happens-before race detector watches every buffer access. Traps:
with N simulated devices the interpreter needs more XLA CPU
threads than devices (``NPROC=16`` before jax is imported, or a 4-device kernel hangs on 2 cores), and
after any exception inside an interpreted kernel its global state must be reset.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Callable, Iterator, NamedTuple

import jax
from jax._src.pallas.mosaic.interpret import interpret_pallas_call as _interpreter
from jax.experimental.pallas import tpu as pltpu


DETECT_RACES_ENV = "PERFKIT_DETECT_RACES"  # "1": every interpreted kernel runs with the race detector


def kernel_interpret_mode() -> pltpu.InterpretParams | bool:
    """What a kernel passes as ``pallas_call(interpret=...)``: False on TPU (compiled by Mosaic), TPU
    interpret mode elsewhere, with the race detector when ``PERFKIT_DETECT_RACES=1``.
    ``run_interpreted`` overrides it for the calls it traces."""
    if jax.default_backend() == "tpu":
        return False
    return pltpu.InterpretParams(detect_races=os.environ.get(DETECT_RACES_ENV) == "1")


class Interpreted(NamedTuple):
    """The outputs of an interpreted run, and whether the race detector found a race."""

    outputs: Any
    races_found: bool


def run_interpreted(fn: Callable[..., Any], *args, detect_races: bool = True,
                    dma_execution_mode: str = "on_wait") -> Interpreted:
    """Runs ``fn(*args)`` (e.g. ``jit(shard_map(...))`` around Pallas calls) with every Pallas call in
    it in TPU interpret mode (the mode is part of jax's jit cache key, so a program compiled before is
    traced again), waits for the result, and reports whether any of its kernel calls had a race.
    ``dma_execution_mode``: "on_wait" runs a DMA as late as a wait allows, "eager" as soon as it starts."""
    params = pltpu.InterpretParams(detect_races=detect_races, dma_execution_mode=dma_execution_mode)
    pltpu.reset_tpu_interpret_mode_state()
    try:
        with pltpu.force_tpu_interpret_mode(params), collect_races() as log:
            outputs = jax.block_until_ready(fn(*args))
    except BaseException:
        pltpu.reset_tpu_interpret_mode_state()  # or the next interpreted kernel starts in a bad state
        raise
    return Interpreted(outputs, log.found)


class RaceLog:
    """The race detectors of the interpreted kernel calls made inside ``collect_races``."""

    def __init__(self) -> None:
        self.detectors: list = []

    @property
    def found(self) -> bool:
        return any(d.races_found for d in self.detectors)


@contextlib.contextmanager
def collect_races() -> Iterator[RaceLog]:
    """Keeps the race detector of every kernel call in the body (the interpreter makes a new one per
    call and keeps only the last). Detectors only look where ``detect_races`` is on."""
    log = RaceLog()
    make = _interpreter.RaceDetectionState  # private in jax 0.10; the one place perfkit touches it

    def make_and_keep(*args, **kwargs):
        log.detectors.append(make(*args, **kwargs))
        return log.detectors[-1]

    _interpreter.RaceDetectionState = make_and_keep
    try:
        yield log
    finally:
        _interpreter.RaceDetectionState = make
