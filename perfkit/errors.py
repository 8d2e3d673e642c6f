"""Exit codes and the one exception type that becomes a one-line "bad input" error.

Every command exits 0 on success, 1 when a check fails (divergent ranks, a regression), 2 on bad input
(with one line naming the file and what is wrong) and 3 when a trial failed or hung (the report is
still written) or the command was stopped (Ctrl-C on any command, also SIGTERM on ``perfkit run``): a
stopped ``perfkit check`` or ``hlo-diff`` never reads as a failed check. See docs/architecture.md,
"Exit codes".
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    OK = 0
    CHECK_FAILED = 1
    BAD_INPUT = 2
    TRIAL_FAILED = 3
    STOPPED = 3  # (an alias: a command stopped by Ctrl-C exits as a stopped run does)


class DefinitionNote(UserWarning):
    """Where perfkit's figures part from a referee's by definition (HTA's, on a Kineto trace): the trace
    commands print it as ``perfkit: note: ...``; a run's analysis leaves it out (a line per trial file)."""


class BadInput(Exception):
    """Input that perfkit refuses: printed as one line ``file: field: reason``, exit code 2."""

    def __init__(self, reason: str, *, path: str | None = None, field: str | None = None):
        self.reason = reason
        self.path = str(path) if path is not None else None
        self.field = field
        super().__init__(self.line())

    def line(self) -> str:
        parts = [p for p in (self.path, self.field) if p]
        return ": ".join(parts + [self.reason])
