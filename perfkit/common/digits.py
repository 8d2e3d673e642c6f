"""Figures shown with the digits it takes for the ratio or change printed beside them to follow from them:
rounded to 2 decimals alone, 4.712 and 10.848 ms show as 4.71 and 10.85, which divide to +130.4% where
the change is +130.2%; and to 3 decimals 9.0304 and 12.9946 ms show as 9.030 and 12.995, which differ by
3.965 where the change shows as +3.964."""

from __future__ import annotations

import math
from typing import Callable


MIB, GIB = 1 << 20, 1 << 30
BYTE_DIGITS = 4  # significant digits of a byte figure: 589824 B reads 0.5625 MiB, not 0.562 (to 3, half to even)


def bytes_text(x: float | None, significant: int = BYTE_DIGITS) -> str:
    """Bytes in MiB, or GiB from 1 GiB on (a model's step read 1.89e+04 MiB otherwise), to ``significant`` digits
    as ``significant_text`` shows them (858752 B: ``0.8190 MiB``); ``-`` for None: one figure prints alike in
    ``perfkit cost`` and report.md's Cost table."""
    if x is None:
        return "-"
    scale = bytes_scale(x)
    return f"{significant_text(x / scale, significant)} {'GiB' if scale == GIB else 'MiB'}"


def bytes_scale(x: float) -> int:
    """The unit ``bytes_text`` shows ``x`` in, in bytes."""
    return GIB if x >= GIB else MIB


def significant_text(x: float, n: int = 3) -> str:
    """``x`` to ``n`` significant digits, its trailing zeros kept: ``2.40e+07`` beside ``2.42e+07`` and ``0.8190``
    beside ``0.7974``, where ``2.4e+07`` and ``0.819`` read as figures known to fewer digits; a whole number below
    10^n shown whole (``12``, ``0``), for nothing was rounded off it. The one rule of counts and bytes
    (``bytes_text``): one figure prints alike in ``perfkit cost`` and report.md's Cost table."""
    if math.isfinite(x) and x == int(x) and abs(x) < 10**n:
        return str(int(x))
    return f"{x:#.{n}g}".replace(".e", "e").removesuffix(".")  # (no bare point: 1234. or 1.e+07)


def ratio_text(ratio: float) -> str:
    """A ratio as the reports show it (to 3 decimals)."""
    return f"{ratio:.3f}"


def change_text(ratio: float) -> str:
    """B's change against A from B / A, as the reports show it: a signed percentage to 0.1%."""
    return f"{ratio - 1:+.1%}"


def _shown(x: float, digits: int, significant: bool) -> float:
    return float(f"{x:.{digits}{'g' if significant else 'f'}}")


def _fewest(at_least: int, most: int, holds: Callable[[int], bool]) -> int:
    return next((n for n in range(at_least, most + 1) if holds(n)), most)


def digits(pairs: list[tuple[float, float]], at_least: int = 2, significant: bool = False,
           text: Callable[[float], str] = ratio_text, most: int = 6) -> int:
    """The fewest digits, ``at_least`` or more (decimals; ``significant``: significant digits), with which each
    (a, b) of ``pairs`` shown divides to b / a as ``text`` shows it; ``most`` where none does. A pair whose a
    is 0 has no ratio to show."""
    pairs = [(a, b) for a, b in pairs if a]
    return _fewest(at_least, most, lambda n: all(
        _shown(a, n, significant) and text(_shown(b, n, significant) / _shown(a, n, significant)) == text(b / a)
        for a, b in pairs))


def lone_decimals(figures: list[float | None], at_least: int = 2, significant: int = 4, most: int = 6) -> int:
    """The fewest decimals, ``at_least`` or more (``most`` at most), with which each of ``figures`` (None, NaN and 0
    left out) shows ``significant`` digits: a figure with no ratio beside it to set its digits (0.013443 ms to 2
    decimals read 0.01, a figure that rounds to nothing), as many as ``digits`` gives the figures a ratio divides."""
    shown = [x for x in figures if x and not math.isnan(x)]
    return _fewest(at_least, most, lambda n: all(
        len(f"{abs(x):.{n}f}".replace(".", "").lstrip("0")) >= significant for x in shown))


def difference_digits(pairs: list[tuple[float, float]], at_least: int = 3, most: int = 6) -> int:
    """The fewest decimals, ``at_least`` or more, with which each (a, b) of ``pairs`` shown differs by b - a shown
    to as many decimals (``most`` where none does). Compared as numbers: -0.000 and +0.000 are one figure."""
    return _fewest(at_least, most, lambda n: all(
        round(_shown(b, n, False) - _shown(a, n, False), n) == round(b - a, n) for a, b in pairs))


def shown_difference(a: float, b: float, decimals: int) -> float:
    """The delta to print beside a and b shown to ``decimals``: b - a where it rounds to their shown figures'
    difference (a hair below 0 keeps its sign), else that difference, within the last decimal of b - a (where
    ``decimals`` are fixed, as the report's milliseconds are, or no number of decimals up to ``difference_digits``'
    most serves: means of a third of a nanosecond)."""
    shown = float(f"{b:.{decimals}f}") - float(f"{a:.{decimals}f}")
    return b - a if round(b - a, decimals) == round(shown, decimals) else shown


def signed_decimals(figures: Callable[[int], list[tuple[float, float]]], at_least: int = 3, most: int = 6) -> int:
    """The fewest decimals, ``at_least`` or more, with which each (exact, shown) pair ``figures(n)`` gives shows
    ``shown`` to n decimals as a figure not 0, of ``exact``'s sign (a change of -0.0005 ms whose CI excludes 0
    read +0.000, its CI [-0.001, -0.000]); pairs whose exact is 0, or rounds to 0 at ``most`` decimals (rounding
    noise, not worth the digits; shown as 0), are left out. ``at_least`` where none does."""
    def holds(n: int) -> bool:
        return all(round(x, most) == 0 or (_shown(s, n, False) > 0 if x > 0 else _shown(s, n, False) < 0)
                   for x, s in figures(n))
    n = _fewest(at_least, most, holds)
    return n if holds(n) else at_least


def whole_shares(parts: list[float], decimals: int = 0) -> list[float]:
    """Each part's share of their sum in percent to ``decimals``, adding up to 100 as the parts add up to their
    sum: rounded down, then the units left given to the largest remainders (36%, 40%, 0%, 25% read 101%)."""
    unit, total = 10**decimals, sum(parts)
    exact = [100 * unit * p / total for p in parts]
    shares = [int(x) for x in exact]
    for i in sorted(range(len(parts)), key=lambda i: shares[i] - exact[i])[:100 * unit - sum(shares)]:
        shares[i] += 1
    return [s / unit if decimals else s for s in shares]


def share_text(fraction: float, decimals: int) -> str:
    """A fraction as a percentage to ``decimals``; one above 0 that rounds to 0 as ``<0.01%`` (at 2), not ``0.00%``:
    a few samples over a bound beside a maximum past it are not none; one below 1 that rounds to 1 as ``>99.99%``,
    not ``100.00%``: all but a few are not all."""
    shown = f"{fraction:.{decimals}%}"
    if fraction > 0 and shown == f"{0:.{decimals}%}":
        return f"<{10 ** -decimals:.{decimals}f}%"
    return f">{100 - 10 ** -decimals:.{decimals}f}%" if fraction < 1 and shown == f"{1:.{decimals}%}" else shown
