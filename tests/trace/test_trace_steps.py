"""Which step each op belongs to (``perfkit.trace.steps.assign``), against the rule its docstring states,
worked op by op in plain Python on random traces: ops in time order (the readers' order, whose windows
are found by slicing) and shuffled (searched op by op), overlapping and touching step windows, markers
of the chip, of the host (device -1) and none, numbers given, in the name (one too large for a step: a
program fingerprint) and absent."""

import re

import numpy as np
import pytest

from perfkit.trace import steps
from perfkit.trace.raw import ROLES

NAMES = ["step 7", "train_step", "ProfilerStep#3", "op", "jit_step(18446744073709551615)", "step 2147483648"]


def _by_the_rule(cols: dict, names: list[str]) -> list[int]:
    role, device, start, dur = (cols[k].tolist() for k in ("role", "device", "start_ps", "dur_ps"))
    markers = [i for i, r in enumerate(role) if r == ROLES["step"]]
    out = [-1] * len(role)

    def number(i):
        if cols["step"][i] >= 0:
            return int(cols["step"][i])
        found = re.search(r"\d+", names[cols["name"][i]])
        return int(found.group()) if found and int(found.group()) < 2**31 else -1

    for dev in sorted(set(device)):
        ops = [i for i, r in enumerate(role) if r in (ROLES["op"], ROLES["dcn_transfer"]) and device[i] == dev]
        mine = [m for m in markers if device[m] == dev] or [m for m in markers if device[m] == -1]
        if not mine and dev < 0 and markers:
            mine = [m for m in markers if device[m] == min(device[k] for k in markers)]
        if not ops or not mine:
            continue
        mine.sort(key=lambda m: start[m])
        nums = [n if n >= 0 else k for k, n in enumerate(number(m) for m in mine)]
        for m, n in zip(mine, nums):
            out[m] = n
        for i in ops:
            before = [k for k, m in enumerate(mine) if start[m] <= start[i]]
            if before and start[i] < start[mine[before[-1]]] + dur[mine[before[-1]]]:
                out[i] = nums[before[-1]]
    return out


def _trace(rng: np.random.Generator, in_time_order: bool) -> dict:
    n = int(rng.integers(1, 60))
    cols = {
        "role": rng.choice([ROLES["op"]] * 5 + [ROLES["step"], ROLES["step"], ROLES["dcn_transfer"], ROLES["host"]],
                           n).astype(np.int8),
        "device": rng.choice([-1, 0, 0, 1, 2], n).astype(np.int32),
        "start_ps": rng.integers(0, 40, n).astype(np.int64),  # ties: ops at a window's start and end
        "dur_ps": rng.integers(0, 15, n).astype(np.int64),
        "name": rng.integers(0, len(NAMES), n).astype(np.int32),
    }
    cols["step"] = np.where(rng.random(n) < 0.5, rng.integers(0, 9, n), -1).astype(np.int32)
    if in_time_order:
        order = np.argsort(cols["start_ps"], kind="stable")
        cols = {k: v[order] for k, v in cols.items()}
    return cols


@pytest.mark.parametrize("in_time_order", [True, False], ids=["in time order", "shuffled"])
def test_each_op_takes_the_step_whose_window_holds_its_start(in_time_order):
    rng = np.random.default_rng(7)
    for _ in range(300):
        cols = _trace(rng, in_time_order)
        step, _ = steps.assign(cols, NAMES, None)
        assert step.tolist() == _by_the_rule(cols, NAMES), cols


def _annotated(markers: list[tuple[int, int, int]], ops: list[tuple[int, int]]) -> dict:
    """A Kineto-like trace's columns: ``markers`` (device, start, External id; each named ``MoE step 64``,
    100 ps long) and ``ops`` (device, start; 10 ps each)."""
    rows = [(ROLES["step"], d, t, 100, 0, o) for d, t, o in markers] + [(ROLES["op"], d, t, 10, 1, -1) for d, t in ops]
    role, device, start, dur, name, occurrence = (np.array(c) for c in zip(*rows))
    return {"role": role.astype(np.int8), "device": device.astype(np.int32), "start_ps": start.astype(np.int64),
            "dur_ps": dur.astype(np.int64), "name": name.astype(np.int32), "step": np.full(len(rows), -1, np.int32),
            "occurrence": occurrence.astype(np.int64)}


def test_annotations_are_numbered_alike_on_every_device_of_a_file():
    """A reviewer's: whether the number in the pattern's names tells steps apart was decided per device, so a device
    with one MoE annotation kept its step 64 beside a device whose two read 0 and 1 (steps matched across chips by
    number then misalign). One decision for the file: every device numbers its annotations by order."""
    cols = _annotated([(0, 0, 10), (0, 200, 11), (1, 0, 12)], [(0, 50), (0, 250), (1, 50)])
    step, source = steps.assign(cols, ["MoE step 64", "fusion"], re.compile("MoE"))
    assert step[3:].tolist() == [0, 1, 0] and "numbered by their order" in source


def test_annotations_without_an_external_id_keep_their_names_number():
    """The GPU-side copies of one annotation on two streams, with no External id: no evidence that its number is
    two occurrences' (each id-less marker had counted as its own occurrence, and the copies read as steps 0 and 1)."""
    cols = _annotated([(0, 0, -1), (0, 0, -1)], [(0, 50)])
    step, source = steps.assign(cols, ["MoE step 64", "fusion"], re.compile("MoE"))
    assert step.tolist() == [64, 64, 64] and "numbered by their order" not in source


@pytest.mark.parametrize("name, number", [
    ("ProfilerStep#12", 12), ("step 7", 7), ("train_step_5", 5), ("iteration=3", 3), ("41", 41),
    ("step[DECODE bs=32]", 0), ("MoE[experts=64, tokens=16]", 0), ("jit_step(18446744073709551615)", 0)])
def test_a_pattern_s_events_take_only_their_own_step_number(name, number):
    """Of the events a pattern names, a step's own number counts (after '#', after step / iteration, or the whole
    name); a batch size or a layer's size is none, and the one step is numbered by its order, 0."""
    step, source = steps.assign(_annotated([(0, 0, 10)], [(0, 50)]), [name, "fusion"], re.compile("."))
    assert step.tolist() == [number, number], name
    assert source.endswith("(numbered by their own step numbers)" if number else
                           "(numbered by their order: no step number of their own, as ProfilerStep#N has)")
