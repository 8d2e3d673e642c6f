"""Op and kernel names short enough for a text table.

GPU kernel names are demangled C++ (``void ns::kernel<float, 4ul>(at::GenericPackedTensorAccessor<...>,
...)``), thousands of characters long; a table shows the function name with the template and argument
lists elided (``ns::kernel<…>(…)``), as HTA's ``shorten_name`` does without the markers. Names that
shorten alike get a stable id from the full name (``kernel<…>(…) ~3fa2c1``), so two rows never read the
same; ``--json`` outputs keep the full names. HLO text used as an event name (TPU ``XLA Ops``) shortens
to the instruction's name.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

import pandas as pd

WIDTH = 96  # the widest name a text table prints
ELLIPSIS = "…"
_ANONYMOUS = "(anonymous namespace)::"
_CLOSING = {">": ("<", "<…>"), ")": ("(", "(…)")}
# a CPU trace's gloo transfer spans (op ``gloo:send``, kind ``gloo send``), each on a line of its own beside the
# thread that started it (``kineto._gloo_lines``): their time is time in flight, not the thread's
_IN_FLIGHT = re.compile(r"gloo[: ]", re.IGNORECASE)
IN_FLIGHT_MARK = "†"
IN_FLIGHT_NOTE = (f"{IN_FLIGHT_MARK}: gloo's transfers in flight (a CPU trace's spans, each on a line of its own "
                  "beside the thread that started it): host-side time that overlaps the thread's ops and one another, "
                  "so it is no part of the step's sum and may pass the step; ")


def in_flight(key: str) -> bool:
    """Whether an op or op kind of a table is gloo's transfers in flight (``IN_FLIGHT_NOTE``)."""
    return bool(_IN_FLIGHT.match(key))


def shorten(name: str) -> str:
    """``name`` without return type, template arguments and parameter list (each elided as ``<…>`` /
    ``(…)``); HLO text (``%fusion.3 = bf16[8] fusion(...)``) as its instruction name."""
    head, eq, _ = name.partition(" = ")
    if eq and " " not in head.strip():
        return head.strip().lstrip("%")
    if "<" not in name and "(" not in name:
        return name
    # a stack of characters; a closing bracket pops back to its opening one and pushes one marker, so
    # nested lists fold into the outermost ("->" is no bracket)
    stack: list[str] = []
    for c in name.replace(_ANONYMOUS, "").replace("->", "→"):
        if c in _CLOSING:
            opening, marker = _CLOSING[c]
            while stack and stack[-1] != opening:
                stack.pop()
            if stack:
                stack[-1] = marker
                continue
        stack.append(c)
    words = "".join(stack).split(" ")
    words = [w for w in words if w and w != "const"]  # "... operator(…) const": the name is before it
    if not words or words[-1][0] in "<(":  # no C++ name: "Memcpy DtoD (Device -> Device)" stays whole
        return name
    return words[-1]


def _fit(text: str, width: int) -> str:
    """``text`` cut in the middle to ``width`` characters (the start and the end say most)."""
    if len(text) <= width:
        return text
    keep = width - 1
    return text[: keep - keep // 3] + ELLIPSIS + text[len(text) - keep // 3:]


def short_id(name: str) -> str:
    """A stable 6-hex-digit id of a full name."""
    return hashlib.sha1(name.encode()).hexdigest()[:6]


def labels(names: Iterable[str], width: int = WIDTH) -> dict[str, str]:
    """Full name -> a short label of at most ``width`` characters, distinct for distinct names."""
    unique = list(dict.fromkeys(str(n) for n in names))
    short = {n: shorten(n) for n in unique}
    cut = {n: _fit(s, width) for n, s in short.items()}
    seen = pd.Series(list(cut.values())).value_counts()
    out = {}
    for n in unique:
        if seen[cut[n]] > 1:
            tag = f" ~{short_id(n)}"
            out[n] = _fit(short[n], width - len(tag)) + tag
        else:
            out[n] = cut[n]
    return out


def readable(frame: pd.DataFrame, columns: list[str], width: int = WIDTH) -> pd.DataFrame:
    """A copy of ``frame`` with the name ``columns`` shortened (``labels`` over all their values together)."""
    out = frame.copy()
    present = [c for c in columns if c in out.columns]
    table = labels(pd.concat([out[c].astype(str) for c in present]) if present else [], width)
    for c in present:
        out[c] = out[c].astype(str).map(table)
    return out
