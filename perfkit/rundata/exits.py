"""How a rank's recorded end reads: its exit code or signal (``exit_text``: with the fatal error its stack dump
records first, where the dump itself crashed) and, for a hung rank, where
each thread of its stack dump waited (``where_threads_wait``); a crashed trial's first failing rank and why
(``crash_reason``); a variant whose first two trials crashed alike (``crashed_alike``) and the round each variant
ends with for it (``ended``). ``perfkit.run.launch`` records a rank's exit code and stacks; report.md, the run's line,
the serve case kind, the plan and the run's summary (a variant crashing alike) word and read them with these."""

from __future__ import annotations

import os
import re
import signal


# faulthandler's words for the fatal signals it dumps on (``Fatal Python error: Aborted``)
_FATAL_ERRORS = {"Segmentation fault": "SIGSEGV", "Aborted": "SIGABRT", "Bus error": "SIGBUS",
                 "Illegal instruction": "SIGILL", "Floating point exception": "SIGFPE"}
_FATAL = re.compile(r"^Fatal Python error: (.+)$", re.M)
_CHILD_DUMP = "[child process "  # heads a child process's dump where ``perfkit.run.stackdump.collect`` joins them


def _first_fatal_signal(stacks: str | None) -> str | None:
    """The signal the rank's own stack dump (its child processes' aside) names first, e.g. ``SIGABRT``."""
    found = _FATAL.search((stacks or "").split(_CHILD_DUMP)[0])
    return _FATAL_ERRORS.get(found.group(1).strip()) if found else None


def exit_text(code: int | None, stacks: str | None = None) -> str:
    """``exit code 7`` / ``killed by SIGSEGV`` / ``still running``; where the rank's stack dump (``stacks``)
    first records another fatal signal, the dump crashed in turn and the rank died of that crash:
    ``got SIGABRT (its stack dump's first fatal error), then killed by SIGSEGV while writing that dump``."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            return f"killed by signal {-code}"
        first = _first_fatal_signal(stacks)
        if first is not None and first != name:
            return f"got {first} (its stack dump's first fatal error), then killed by {name} while writing that dump"
        return f"killed by {name}"
    return f"exit code {code}"


def _frame(line: str) -> tuple[str, str, bool]:
    """('file.py:12', 'function', in library code) of a dumped ``File "...", line 12 in function``."""
    path, _, rest = line.strip()[len('File "'):].partition('", line ')
    lineno, _, func = rest.partition(" in ")
    library = path.startswith("<frozen") or f"{os.sep}lib{os.sep}python3" in path
    return f"{os.path.basename(path)}:{lineno}", func, library


_GC, _NO_FRAME = "  Garbage-collecting\n", "  <no Python frame>\n"


def at_exit(stacks: str) -> bool:
    """Whether a hung rank's program had returned: its own dump (its child processes' aside) holds threads and none
    of them runs a module's top level (``<module>``), which the main thread runs until the program returns (a
    ``-c`` string's, an import's). The rank hung on the way out: an atexit handler (jax.distributed's shutdown), a
    thread it joins, the last garbage collection."""
    own = stacks.split(_CHILD_DUMP)[0]
    return "(most recent call first):" in own and " in <module>\n" not in own


def where_threads_wait(stacks: str) -> list[str]:
    """One line per dumped thread: its innermost frame and, when that is library code (threading, jax),
    the innermost frame of the program itself, e.g. ``wait (threading.py:327) <- wait_for_peer
    (bench.py:35)``; a thread in the garbage collector or with no Python frame (native code alone, as at exit)
    says so."""
    out = []
    for block in stacks.split("(most recent call first):")[1:]:
        frames = [_frame(x) for x in block.splitlines() if x.strip().startswith('File "')]
        head = block.split(_CHILD_DUMP)[0]  # this thread's lines (a child process's dump may follow)
        # faulthandler's words for a thread in the garbage collector, or in native code alone (no Python frame)
        collecting = "garbage-collecting: " if _GC in head else ""
        if not frames:
            if _NO_FRAME in head:
                out.append(f"{collecting}no Python frame (native code)")
            continue
        where, func, library = frames[0]
        line = f"{collecting}{func} ({where})"
        own = next((f for f in frames if not f[2]), None)
        if library and own is not None:
            line += f" <- {own[1]} ({own[0]})"
        out.append(line)
    return out


def _reason(stderr_tail: str) -> str | None:
    """Why a rank crashed, from its stderr's tail: the exception its last traceback ends on (JAX prints a note
    after it, the same for every error), else the last line."""
    lines = [line.rstrip() for line in stderr_tail.splitlines() if line.strip()]  # indents kept: frames have them
    frames = [i for i, line in enumerate(lines) if line.startswith('  File "')]
    after = [line for line in lines[frames[-1] + 1:] if not line[0].isspace()] if frames else []
    return after[0] if after else (lines[-1] if lines else None)


def crash_reason(trial: dict) -> tuple[int, str] | None:
    """A crashed trial's rank that failed first and why (``_reason``), or None (not crashed, or no rank said why).
    The failing ranks by when they exited, as the report's "failed first": the others' errors may follow from it,
    and a rank perfkit ended (no exit time) says nothing of why."""
    if trial.get("status") != "crashed":
        return None
    ranks = sorted(trial.get("ranks") or [], key=lambda r: (r.get("exit_code") in (0, None), r.get("exited_s") is None,
                                                            r.get("exited_s") or 0.0))
    return next(((r["rank"], why) for r in ranks if (why := _reason(r.get("stderr_tail") or ""))), None)


def crashed_alike(trials: list[dict], variant: str) -> tuple[int, str] | None:
    """Where ``variant``'s first two trials both crashed with one error (``crash_reason``): the round of the second,
    and the error; else None."""
    mine = sorted((t for t in trials if t.get("variant") == variant), key=lambda t: t["round"])[:2]
    reasons = [crash_reason(t) for t in mine]
    if len(reasons) == 2 and None not in reasons and reasons[0][1] == reasons[1][1]:
        return mine[1]["round"], reasons[1][1]
    return None


def ended(variants: list[str], baseline: str, aa: str | None, trials: list[dict]) -> dict[str, int]:
    """The round from which each variant that ends runs no trial: one whose first two trials crashed alike
    (``crashed_alike``), from the round after its second (the next would crash alike); every other, from the round
    no comparison is left (the baseline ended, or every variant compared with it did): its trials would be compared
    with nothing."""
    stop = {v: alike[0] + 1 for v in variants if (alike := crashed_alike(trials, v)) is not None}
    compared = [v for v in variants if v not in (baseline, aa)]
    if baseline in stop:
        end = stop[baseline]
    elif compared and all(v in stop for v in compared):
        end = max(stop[v] for v in compared)
    else:
        return stop
    return {v: min(stop.get(v, end), end) for v in variants}
