"""The ``perfkit`` console script: the command line, and a Ctrl-C that comes while it loads.

A Ctrl-C while the command line (click, perfkit.cli) loads would end in a traceback
and exit 1, the code of a failed check (a CI job cancelled as ``perfkit check`` starts). It ends as a Ctrl-C does
once a command runs (``perfkit.cli``): one line, exit 3."""

from __future__ import annotations

import sys

from perfkit.errors import ExitCode


def main() -> None:
    try:
        from perfkit.cli import main as command_line  # (the load a Ctrl-C may interrupt: see the module docstring)
    except KeyboardInterrupt:
        print("perfkit: stopped", file=sys.stderr)
        sys.exit(ExitCode.STOPPED)
    command_line()
