"""Counting torch.compile recompiles in a running program, with the guard that caused each.

A recompile is silent and can cost more than the run it slows: a stride guard that fails on the first
real request recompiles the whole DiT, many times the denoise it interrupts.
Dynamo reports every recompile to its ``recompiles`` logging artifact (what ``TORCH_LOGS=recompiles``
prints); ``RecompileCounter`` turns that artifact on and counts its records, so a bench can report

    with RecompileCounter() as recompiles:
        ...                                   # the compiled steps
    record.value("recompiles", recompiles.count)

The reasons also go to stderr (the rank's ``stderr.log`` under perfkit), as with ``TORCH_LOGS``.
"""

from __future__ import annotations

import logging

# Dynamo's artifact logger for recompiles (torch/_dynamo/guards.py: getArtifactLogger(__name__, "recompiles")).
RECOMPILES_LOGGER = "torch._dynamo.guards.__recompiles"


class RecompileCounter(logging.Handler):
    """Counts dynamo recompiles while active; ``reasons`` keeps each one's guard-failure text."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.count = 0
        self.reasons: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1
        self.reasons.append(record.getMessage())

    def __enter__(self) -> "RecompileCounter":
        from torch._logging import _internal  # private, but the only switch that leaves other TORCH_LOGS alone

        _internal.log_state.enable_artifact("recompiles")
        logger = logging.getLogger(RECOMPILES_LOGGER)
        logger.setLevel(logging.DEBUG)
        logger.addHandler(self)
        return self

    def __exit__(self, *exc) -> None:
        logging.getLogger(RECOMPILES_LOGGER).removeHandler(self)
