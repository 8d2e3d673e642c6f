"""How a rank's recorded end reads: its exit code or signal (``exit_text``) and, for a hung rank, where
each thread of its stack dump waited (``where_threads_wait``). ``perfkit.run.launch`` records a rank's
exit code and stacks; report.md and the serve case kind word them with these."""

from __future__ import annotations

import os
import signal


def exit_text(code: int | None) -> str:
    """``exit code 7`` / ``killed by SIGSEGV`` / ``still running``."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _frame(line: str) -> tuple[str, str, bool]:
    """('file.py:12', 'function', in library code) of a dumped ``File "...", line 12 in function``."""
    path, _, rest = line.strip()[len('File "'):].partition('", line ')
    lineno, _, func = rest.partition(" in ")
    library = path.startswith("<frozen") or f"{os.sep}lib{os.sep}python3" in path
    return f"{os.path.basename(path)}:{lineno}", func, library


def where_threads_wait(stacks: str) -> list[str]:
    """One line per dumped thread: its innermost frame and, when that is library code (threading, jax),
    the innermost frame of the program itself, e.g. ``wait (threading.py:327) <- wait_for_peer
    (bench.py:35)``."""
    out = []
    for block in stacks.split("(most recent call first):")[1:]:
        frames = [_frame(x) for x in block.splitlines() if x.strip().startswith('File "')]
        if not frames:
            continue
        where, func, library = frames[0]
        line = f"{func} ({where})"
        own = next((f for f in frames if not f[2]), None)
        if library and own is not None:
            line += f" <- {own[1]} ({own[0]})"
        out.append(line)
    return out
