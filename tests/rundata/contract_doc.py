"""docs/architecture.md's contracts (summary.json, trials.jsonl), read as the names they give: the keys and
values their backticked spans name (``variants.<name>.step_ms.{median,p25,p75,n}``, ``{chip, ...}``).

A contract's section is its bullet (``- **summary.json**``) of the Contracts, and every passage elsewhere
in them that starts with its backticked name and a key (summary.json's taps, serve), up to the end of its
sentence. In a span, a parenthesis is prose (``group (devices in its replica group)``), ``<name>`` a
placeholder, a quoted word a value; a span naming a module, command, option, path or file
(``perfkit.cost``, ``perfkit run``, ``--resume``, ``outputs/latents.npy``) names no key."""

from __future__ import annotations

import re
import typing
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "architecture.md"
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def contracts(text: str) -> str:
    return text.split("## Contracts", 1)[1].split("\n## ", 1)[0]


def _sentence_from(text: str, start: int) -> str:
    """From ``start`` to the first full stop outside backticks."""
    ticks = 0
    for i in range(start, len(text) - 1):
        ticks += text[i] == "`"
        if text[i] == "." and ticks % 2 == 0 and text[i + 1].isspace():
            return text[start:i + 1]
    return text[start:]


def section(name: str = "summary.json", text: str | None = None) -> str:
    """A contract's text (``summary.json``, ``trials.jsonl``), lines joined."""
    body = " ".join(line.strip() for line in contracts(text or DOC.read_text()).splitlines())
    bullet = body.split(f"- **{name}**", 1)[1].split(" - **", 1)[0]
    elsewhere = [_sentence_from(body, m.start()) for m in re.finditer(rf"`{re.escape(name)}` (adds )?`", body)]
    return " ".join([bullet, *elsewhere])


def spans(text: str) -> list[str]:
    return re.findall(r"`([^`]+)`", text)


def _strip_parentheses(span: str) -> str:
    while True:
        shorter = re.sub(r"\([^()]*\)", " ", span)
        if shorter == span:
            return span
        span = shorter


def names_a_key(span: str, values: set[str]) -> bool:
    """False for a span naming a module, command, path, file, heading or values rather than keys."""
    if span.startswith(("perfkit", "#", "--")) or set(re.split(r"\s*\|\s*", span)) <= values:
        return False
    return bool(re.search(r"\s", span)) or not (set(span) & set("/$") or re.search(r"\.(yaml|json|np[yz]|png)\b", span))


def doc_keys(text: str, values: set[str]) -> set[str]:
    """Every word a section's spans name as a key (values, placeholders and prose taken out)."""
    out = set()
    for span in spans(text):
        if not names_a_key(span, values):
            continue
        span = re.sub(r'"[^"]*"', " ", re.sub(r"<[^<>]*>", " ", _strip_parentheses(span)))
        out |= set(WORD.findall(span))
    return out - {"null", "true", "false"}  # JSON's literals


def type_names(root, within: str | None = None) -> tuple[set[str], set[str]]:
    """The keys of every TypedDict ``root`` holds, and the values of every Literal it holds; ``within``:
    only TypedDicts of that module (others have their own section)."""
    keys, values, seen = set(), set(), set()

    def walk(tp):
        if typing.is_typeddict(tp):
            if tp in seen or within and tp.__module__ != within:
                return
            seen.add(tp)
            for k, t in typing.get_type_hints(tp).items():
                keys.add(k)
                walk(t)
        elif typing.get_origin(tp) is typing.Literal:
            values.update(a for a in typing.get_args(tp) if isinstance(a, str))
        else:
            for a in typing.get_args(tp):
                walk(a)

    walk(root)
    return keys, values
