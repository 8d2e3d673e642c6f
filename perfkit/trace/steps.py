"""Which step each device op belongs to.

Step markers come from, in this order: events whose name matches a pattern given on the command line (they
alone: ``mark``); markers of a device (a TPU plane's ``Steps`` line, Kineto's GPU-side ``ProfilerStep#N``); step
annotations of the host (``StepTraceAnnotation``'s ``step_num`` stat with its root mark, Kineto's
``ProfilerStep#N``), which hold for every device of their rank. A device's own markers count only where they span
its steps: where they hold under ``SPANNING`` of its ops (ROCm's GPU-side ProfilerSteps are instants of a few
microseconds) they are demoted (``demote_instants``) and the host's markers hold for that device. A marker's step
number is its ``step_num`` / ``group_id`` stat, else the first number in its name (one below 2**31: a larger one, such
as a program fingerprint in ``jit_step(...)``, numbers no step), else its order. Of events a pattern names, only a
number that is the step's own counts: the number the pattern's first group holds, else a name that is a number, a
number after ``#`` (``ProfilerStep#12``) or after ``step`` / ``iter`` (``step 7``, ``train_iter_3``); a batch
size (sglang's ``step[DECODE bs=32]``) or a layer's size numbers no step, and the output says which numbered them
(``assign``). A Kineto marker is one occurrence of an annotation (its ``External id``, which the GPU-side copies
of a host annotation on each stream share): where the number in the names of the events a pattern names is shared
by two occurrences on a device (the hash in Inductor's ``## Call CompiledFxGraph fp5r5... ##``, a size in
``MoE[experts=64, ...]``), it tells no step apart, and that device's steps are numbered by their occurrences' order
instead (they had read as one step spanning them all). An op belongs
to the marker window ``[start, end)`` holding its start; ops outside every window get step -1, and so
do all ops of a trace without markers (then the whole trace is one span). DCN transfers are placed like
ops; those of the whole host (device -1) in the first chip's windows when the host has no markers.
"""

from __future__ import annotations

import re

import numpy as np

from perfkit.trace.raw import ROLES

_NUMBER = re.compile(r"\d+")
# a step's own number in a name a pattern names: the whole name, after '#', or after a word for a step
_STEP_NUMBER = re.compile(r"^(\d+)$|#(\d+)|(?<![a-z])(?:step|iteration|iter)[\s_#:=-]*(\d+)", re.IGNORECASE)
_STEP_LIMIT = 2**31  # steps are int32 (``RawTrace``'s step column)
PROFILER_STEP = "ProfilerStep#"  # Kineto's step annotation
SPANNING = 0.5  # share of a device's ops its own markers must hold to be its steps


def _marker_numbers(names: list[str], codes: np.ndarray, numbers: np.ndarray, pattern: re.Pattern | None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Step numbers of markers: given ones kept, else the pattern's first group, or the step number in the name
    (``_STEP_NUMBER``; without a pattern its first number), where it is below ``_STEP_LIMIT``, else -1 (numbered
    by order later); and (bool) which numbers are from the whole name of an event a ``pattern`` named
    (``_by_occurrence`` may set them aside)."""
    out = numbers.astype(np.int64, copy=True)
    parsed: dict[int, tuple[int, bool]] = {}
    for code in np.unique(codes[out < 0]):
        name = names[code]
        m = pattern.search(name) if pattern else None
        grouped = bool(m and m.groups() and m.group(1))
        if grouped or pattern is None:
            found = _NUMBER.search(m.group(1) if grouped else name)
            number = int(found.group()) if found else -1
        else:
            found = _STEP_NUMBER.search(name)
            number = int(next(g for g in found.groups() if g)) if found else -1
        parsed[int(code)] = (number if number < _STEP_LIMIT else -1, not grouped)
    missing = np.flatnonzero(out < 0)
    in_name = np.zeros(out.size, bool)
    if missing.size:
        out[missing], in_name[missing] = zip(*(parsed[int(c)] for c in codes[missing]))
    return out, in_name & (out >= 0) & (pattern is not None)  # (a ProfilerStep's number is its step's)


def _numbers_name_no_step(nums: np.ndarray, in_name: np.ndarray, occurrence: np.ndarray) -> bool:
    """Whether a number taken from the markers' names (``in_name``) is two occurrences' (their ``External id``s,
    which an annotation's host event and its GPU-side copies share): it then tells no step apart. Markers without
    an id (-1) are no evidence: an annotation's copies on two streams would read as two occurrences."""
    named = in_name & (occurrence >= 0)
    pairs = np.unique(np.stack([nums[named], occurrence[named]]), axis=1)
    return bool(pairs.size) and np.unique(pairs[0]).size < pairs.shape[1]


def _by_occurrence(nums: np.ndarray, occurrence: np.ndarray, renumber: bool) -> np.ndarray:
    """A device's marker numbers (``nums``, -1 none; markers by start) where ``occurrence`` (-1: a marker of its
    own) says which markers are one annotation's: each its number, or (``renumber``, or where it has none) the
    occurrences' order on the device."""
    occurrence = np.where(occurrence >= 0, occurrence, -1 - np.arange(occurrence.size))
    ids, first, which = np.unique(occurrence, return_index=True, return_inverse=True)
    order = np.empty(ids.size, np.int64)
    order[np.argsort(first, kind="stable")] = np.arange(ids.size)  # (``first``: the markers come by start)
    return order[which] if renumber else np.where(nums >= 0, nums, order[which])


def assign(cols: dict[str, np.ndarray], names: list[str], pattern: re.Pattern | None) -> tuple[np.ndarray, str]:
    """(n,) int32 step per event (markers: their number; ops: their window's; others -1) and where the
    steps came from. ``cols``: a ``RawTrace``'s columns (name, role, device, start_ps, dur_ps, step), with a
    ``pattern`` its events ``mark``ed as the markers first (the pattern numbers them here)."""
    role, device, start = cols["role"], cols["device"], cols["start_ps"]
    marker = role == ROLES["step"]  # (with a pattern, its events: ``mark``)
    source = f"events named /{pattern.pattern}/" if pattern is not None else _source(names, cols["name"], marker,
                                                                                      device)
    step = np.full(role.size, -1, np.int32)
    midx = np.flatnonzero(marker)
    if not midx.size:
        return step, "none"
    numbers, in_name = _marker_numbers(names, cols["name"][midx], cols["step"][midx], pattern)
    occurrence = cols.get("occurrence")  # (a Kineto trace's: which annotation a marker is an occurrence of)
    # decided for the whole file: a device numbered by order beside one numbered by names would misalign steps
    renumbered = occurrence is not None and _numbers_name_no_step(numbers, in_name, occurrence[midx])
    ops = (role == ROLES["op"]) | (role == ROLES["dcn_transfer"])
    for dev in _distinct(device):  # (not device[ops]: a copy of the column)
        which = np.flatnonzero(ops & (device == dev))
        if not which.size:
            continue
        mine = midx[device[midx] == dev]
        if not mine.size:
            mine = midx[device[midx] == -1]
        if not mine.size and dev < 0:  # host-wide DCN transfers: the first chip's steps
            mine = midx[device[midx] == device[midx].min()]
        if not mine.size:
            continue
        order = np.argsort(start[mine], kind="stable")
        at = np.searchsorted(midx, mine[order])
        mine, nums = mine[order], numbers[at]
        end = start[mine] + cols["dur_ps"][mine]
        if occurrence is None:
            nums = np.where(nums >= 0, nums, np.arange(nums.size))
        else:
            nums = _by_occurrence(nums, occurrence[mine], renumbered)
        step[mine] = nums
        at = _window_of(start[which], start[mine], end)
        inside = at >= 0
        if inside.all():
            step[which] = nums[at]
        else:
            step[which[inside]] = nums[at[inside]]
    if pattern is not None:
        source += _numbered_by(numbers, renumbered)
    return step, source


def _numbered_by(numbers: np.ndarray, renumbered: bool) -> str:
    """What numbered the steps of events a pattern named (``numbers``: their own step numbers, -1 none)."""
    if renumbered:
        return " (numbered by their order: the step number in their names is shared by several of them)"
    if (numbers < 0).all():
        return " (numbered by their order: no step number of their own, as ProfilerStep#N has)"
    if (numbers >= 0).all():
        return " (numbered by their own step numbers)"
    return " (numbered by their own step numbers, by their order where one has none)"


def mark(cols: dict[str, np.ndarray], names: list[str], pattern: re.Pattern) -> None:
    """The events ``pattern`` matches (device ops aside) made the step markers, in place of the trace's own (role
    ``other`` from here): every analysis then reads the steps ``assign`` numbers, where the trace's own markers had
    stood for steps it left out and its events for none (``timeline.spans`` reads the markers' rows)."""
    role = cols["role"]
    hits = np.array([bool(pattern.search(s)) for s in names] + [False], bool)
    matched = hits[cols["name"]] & (role != ROLES["op"])
    role[(role == ROLES["step"]) & ~matched] = ROLES["other"]
    role[matched] = ROLES["step"]


def _source(names: list[str], codes: np.ndarray, marker: np.ndarray, device: np.ndarray) -> str:
    if not marker.any():
        return "none"
    return source(names[codes[np.flatnonzero(marker)[0]]], bool((marker & (device >= 0)).any()))


def source(first: str | None, own: bool) -> str:
    """Which markers the steps came from, named for the format (a TPU's Steps line or step annotations, a
    Kineto trace's GPU-side or host ProfilerSteps), from the name of the first marker (None: no markers)
    and whether any marker is a device's own."""
    if first is None:
        return "none"
    if first.startswith(PROFILER_STEP):
        return "ProfilerStep on the GPU (gpu_user_annotation)" if own else "ProfilerStep on the host"
    return "Steps line" if own else "step annotations"


def demote_instants(cols: dict[str, np.ndarray]) -> list[int]:
    """Demote (role ``other``, in place) the markers of each device that hold under ``SPANNING`` of its ops,
    where the host has markers to stand in; the devices demoted. ``cols``: a ``RawTrace``'s columns."""
    role, device = cols["role"], cols["device"]
    marker = role == ROLES["step"]
    if not (marker & (device < 0)).any():
        return []
    demoted = instants(cols)
    for dev in demoted:
        role[marker & (device == dev)] = ROLES["other"]
    return demoted


def instants(cols: dict[str, np.ndarray]) -> list[int]:
    """The devices whose own markers hold under ``SPANNING`` of their ops (``demote_instants`` demotes them
    where the host has markers). ``cols``: a ``RawTrace``'s columns."""
    role, device, start = cols["role"], cols["device"], cols["start_ps"]
    own = (role == ROLES["step"]) & (device >= 0)
    if not own.any():
        return []
    ops = role == ROLES["op"]
    found = []
    for dev in _distinct(device[own]):
        mine = np.flatnonzero(own & (device == dev))
        mine = mine[np.argsort(start[mine], kind="stable")]
        held = _window_of(start[ops & (device == dev)], start[mine], start[mine] + cols["dur_ps"][mine]) >= 0
        if held.size and held.mean() < SPANNING:
            found.append(int(dev))
    return found


def _distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of an int column of a few small values (devices), ascending, counted rather
    than sorted: a sort of a plane's rows would cost more than the counting."""
    lo, hi = (int(values.min()), int(values.max())) if values.size else (0, -1)
    if hi - lo >= 1 << 16:
        return np.unique(values)
    return np.flatnonzero(np.bincount(values - lo)) + lo


def _window_of(times: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """For each of ``times``: the last of the windows ``[starts, ends)`` (ascending starts) that starts at
    or before it, where it is before that window's end; -1 where none. Ops of one line come in time
    order, and then each window holds one slice of them: found by searching the few window bounds
    among the times, not each time among the windows."""
    n = times.size
    if n < 2 or not (times[1:] >= times[:-1]).all():
        at = np.searchsorted(starts, times, side="right") - 1
        return np.where((at >= 0) & (times < ends[np.maximum(at, 0)]), at, -1)
    first = np.searchsorted(times, starts, side="left")  # the first time in each window, from its start
    stop = np.minimum(np.searchsorted(times, ends, side="left"), np.append(first[1:], n))  # a later window wins
    held = np.flatnonzero(stop > first)
    edges = np.zeros(n + 1, np.int64)  # +(k + 1) where window k's slice starts, -(k + 1) where it stops
    np.add.at(edges, first[held], held + 1)
    np.add.at(edges, stop[held], -(held + 1))
    return np.cumsum(edges[:n]) - 1
