"""Collectives one by one: each instance of a collective on each chip, what it moved and how long it
took, and, across chips that share a clock, who arrived last and the others' exposed wait for it.

An instance is a sync collective (a CPU ``collective-permute``, an NCCL kernel, a fusion running a
collective) or an async pair (``X-start`` ... ``X-done``, paired by the done's operand where its HLO
text names it, else first in first out per chip and kind). On one chip:

- ``time_ps``: from its start to its end (for a pair, the start of ``X-start`` to the end of ``X-done``);
- ``hidden_ps``: the part of that time under compute on the chip (any line; the innermost op owns an
  instant, as in ``perfkit.trace.breakdown``);
- ``exposed_ps``: time in the collective's own ops not under compute (the breakdown's ICI or DCN);
- ``bytes``: sent per device, from the buffer (the op's output shape; the GPU kernel's message size
  and dtype, its own or those of the ``record_param_comms`` its launch ran under, else the input the ``nccl:*`` span
  around its launch records; a gloo span's inputs' shapes and types; an all-gather's input is one part, n of them
  the buffer, a reduce-scatter's n of its output) and the group size n
  (the HLO text's ``replica_groups``, else its program's HloProto's: ``perfkit.trace.programs.Program.group``;
  the kernel's ``Group size``, else the process group its args name, by its
  ranks or by its name in its trace's ``distributedInfo`` ``pg_config``; a Kineto trace's process groups where they
  are of one size; never the chips that ran the instance: a profile may hold some of an XLA program's hosts only,
  and a Kineto collective's n is never those, not even where the traces given are every rank of the job, whose
  collectives may run on subgroups: unknown, as HTA reads such a kernel's ``Group size`` 0): all-gather and
  reduce-scatter (n-1)/n of the whole buffer, all-reduce 2(n-1)/n, all-to-all (n-1)/n, collective-permute the buffer
  (``perfkit.hlo.program_cost.SENT_SHARE``).

Chips share a clock when they are in XSpaces of one host (its wall clock: one process's file, or several
processes', each a rank) or in Kineto traces of one time base (the same ``baseTimeNanoseconds``, or epoch
timestamps, as HTA assumes); an XSpace whose times count from a profile start it does not record is a clock of
its own (``events.own_clock``). There the same instance (step,
program, op, occurrence in the step) is matched across chips: its arrival on a chip is its start, the
skew is last arrival minus first, and each chip's exposed time splits into ``wait_ps`` (before the last
chip arrived: the exposed wait, its part of the time before that arrival not under compute) and
``transfer_ps`` (after). Per step the chip that arrived last most often is the
straggler (HTA's straggler analysis looks for ranks whose communication kernels start late); the text and
report.md flag it past ``perfkit.trace.straggler.STRAGGLER_SHARE`` of the step.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter, deque
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from perfkit.common.units import PS_PER_MS
from perfkit.errors import BadInput, DefinitionNote
from perfkit.hlo.program_cost import SENT_SHARE, group_size, shape_bytes
from perfkit.hlo.parse import parse_instruction
from perfkit.trace import breakdown, kineto, timeline
from perfkit.trace.classify import classify
from perfkit.trace.events import chip_key, first_rows, is_device_op, packed_key
from perfkit.trace.programs import base_opcode
from perfkit.trace.raw import file_host

# torch.distributed's collective names (Kineto ``Collective name``) and NCCL kernel kinds -> HLO kinds
_TORCH_KINDS = (("allreduce", "all-reduce"), ("all_reduce", "all-reduce"), ("allgather", "all-gather"),
                ("all_gather", "all-gather"), ("reducescatter", "reduce-scatter"), ("reduce_scatter", "reduce-scatter"),
                ("alltoall", "all-to-all"), ("all_to_all", "all-to-all"), ("broadcast", "collective-broadcast"),
                ("sendrecv", "collective-permute"), ("send", "send"), ("recv", "recv"))
POINT_TO_POINT = ("collective-permute", "send", "recv")
# kinds whose bytes sent per device need no group size n (``_sent``)
_SENT_WITHOUT_N = ("collective-permute", "collective-broadcast", "send", "recv")
# A ``nccl:*`` span's recorded input (the tensor reduced, sent or received) by kind: the buffer (an all-to-all's
# whole send buffer) n to this power of it; an all-gather's input is one rank's part, a reduce-scatter's n of its
# output (the buffer, as an HLO op's shape gives it)
_INPUT_PARTS = {"all-reduce": 0, "all-to-all": 0, "collective-broadcast": 0, "send": 0, "recv": 0, "all-gather": 1,
                "reduce-scatter": -1}
# an NCCL kernel's dtype (``Float``) and a recorded input's type (``float``, ``long int``, ``c10::BFloat16``),
# lower case, without ``c10::``
_TORCH_DTYPE_BYTES = {"float": 4, "double": 8, "half": 2, "bfloat16": 2, "int": 4, "long": 8, "short": 2,
                      "byte": 1, "char": 1, "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "long int": 8,
                      "short int": 2, "signed char": 1, "unsigned char": 1, "complex<half>": 4, "complex<float>": 8,
                      "complex<double>": 16}
INSTANCE_COLUMNS = ["rank", "device", "domain", "step", "program_id", "program", "op", "kind", "occurrence",
                    "start_ps", "end_ps", "time_ps", "exposed_ps", "hidden_ps", "bytes", "group", "chips", "skew_ps",
                    "last", "apart", "wait_ps", "transfer_ps"]
OP_COLUMNS = ["step", "op", "kind", "count", "chips", "bytes", "time_ps", "exposed_ps", "hidden_ps", "gbps", "skew_ps",
              "wait_ps", "transfer_ps"]
_KINETO_SUFFIXES = (".json", ".json.gz")
TOP_KINDS = 6  # collective kinds a variant's summary keeps
COMM_CATEGORIES = ("ici", "dcn")  # device-op categories of collectives
# all it and its breakdown read
EVENT_COLUMNS = (*timeline.COLUMNS, "host", "name", "hlo_op", "shape", "group", "program_id")


def _kind(kind: str) -> str:
    """The collective an op kind runs: ``all-gather-done`` -> all-gather, ``reduce-scatter fusion`` ->
    reduce-scatter, ``nccl AllReduce`` / ``c10d allreduce_`` -> all-reduce; "" when unknown."""
    kind = kind.lower()
    if kind.endswith(" fusion"):
        kind = kind.removesuffix(" fusion")
    base = base_opcode(kind)
    if base in SENT_SHARE:
        return base
    squashed = kind.replace("-", "").replace(" ", "")
    return next((hlo for torch, hlo in _TORCH_KINDS if torch in squashed), "")


def _factorized(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """A column's codes (n,) int64 by first appearance and its values as text (an object array) with ""
    last, which code -1 (missing) reads: text made once per distinct value, not once per row."""
    codes, uniques = pd.factorize(column)
    return codes.astype(np.int64), np.array([str(v) for v in uniques] + [""], dtype=object)


_START, _DONE, _UPDATE, _SYNC = range(4)  # an op's part in its instance


def _role(kind: str) -> int:
    return _START if kind.endswith("-start") else _DONE if kind.endswith("-done") else (
        _UPDATE if kind.endswith("-update") else _SYNC)


class _Coverage:
    """Each chip's time under compute (the innermost op of an instant owns it; compute on any line counts),
    from the device ops (n,): chip and line codes, start, end, and which are compute. One sorted sweep of
    the compute ops' entries and exits per chip: its covered time up to any instant is a lookup."""

    def __init__(self, chip: np.ndarray, start: np.ndarray, end: np.ndarray, line: np.ndarray, compute: np.ndarray):
        parent = timeline.parents(chip * (int(line.max(initial=0)) + 1) + line, start, end)
        child = np.flatnonzero((parent >= 0) & compute[np.maximum(parent, 0)])
        own = np.flatnonzero(compute)
        g = np.concatenate([chip[own], chip[own], chip[child], chip[child]])
        t = np.concatenate([start[own], end[own], start[child], np.minimum(end[child], end[parent[child]])])
        d = np.concatenate([np.ones(own.size, np.int64), -np.ones(own.size, np.int64),
                            -np.ones(child.size, np.int64), np.ones(child.size, np.int64)])
        self.base = int(start.min(initial=0))
        self.width = int(end.max(initial=0)) - self.base + 1
        key = g * self.width + (t - self.base)  # chips x trace length in ps: far below 2**63 for any real profile
        order = np.argsort(key, kind="stable")
        self.key, g, self.t, d = key[order], g[order], t[order], d[order]
        self.g = g
        self.running = np.cumsum(d) > 0  # compute running just after each entry (the sums close within each chip)
        step = np.zeros(self.t.size, np.int64)
        same = g[1:] == g[:-1]
        step[1:] = np.where(same & self.running[:-1], self.t[1:] - self.t[:-1], 0)
        before = np.cumsum(step)  # covered time from the chip's first entry up to each entry
        first = np.ones(self.t.size, bool)
        first[1:] = ~same
        self.before = before - np.maximum.accumulate(np.where(first, before, 0))

    def _at(self, c: np.ndarray, x: np.ndarray) -> np.ndarray:
        if not self.key.size:  # no compute anywhere
            return np.zeros(x.size, np.int64)
        i = np.searchsorted(self.key, c * self.width + (x - self.base), side="right") - 1
        ok = (i >= 0) & (self.g[np.maximum(i, 0)] == c)
        i = np.maximum(i, 0)
        return np.where(ok, self.before[i] + np.where(self.running[i], x - self.t[i], 0), 0)

    def covered(self, c: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """(n,) int64 time in [a, b) of each query under compute on its chip ``c``."""
        b = np.maximum(a, b)
        return self._at(c, b) - self._at(c, a)

    def changes(self, c: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The instants strictly inside (a, b) where compute on chip ``c`` may start or stop, for each query
        (n,): (query index, instant), by query and then instant."""
        lo = np.searchsorted(self.key, c * self.width + (a - self.base), side="right")
        hi = np.searchsorted(self.key, c * self.width + (b - self.base), side="left")
        count = np.maximum(hi - lo, 0)
        query = np.repeat(np.arange(c.size), count)
        return query, self.t[np.arange(query.size) - np.repeat(np.cumsum(count) - count - lo, count)]


def _operand(name: str) -> str:
    """The first operand an op's HLO text names ("" when the name is no HLO text)."""
    operands = parse_instruction(name, 0).operands if " = " in name else ()
    return operands[0] if operands else ""


def _pairs(chip: np.ndarray, role: np.ndarray, kind: np.ndarray, op: np.ndarray, operand: np.ndarray) -> np.ndarray:
    """(k, 2) int64 first and last position of each instance among collective ops given in chip and start
    order as (n,) int64 codes (``operand``: the op a done's HLO text names, -1 none): a sync op alone, or an
    ``X-start`` and its ``X-done``; a half without the other is an instance of its own (a done whose start
    was before the trace, a start still running at its end, a GPU kernel of XLA's ``all-reduce-start``:
    there the done is a host-side wait). A done takes the open start its text names, else the oldest open
    start of its kind on its chip. Instances in the order their last op comes, then the unpaired starts
    by chip and kind."""
    named = np.isin(operand[role == _DONE], op[role == _START])
    if named.any():  # some done names its start: the rule as it reads, op by op
        return _pairs_named(chip.tolist(), role.tolist(), kind.tolist(), op.tolist(), operand.tolist())
    return _pairs_oldest_first(chip, role, kind)


def _pairs_oldest_first(chip: np.ndarray, role: np.ndarray, kind: np.ndarray) -> np.ndarray:
    """``_pairs`` where no done names its start, in linear passes: per (chip, kind), the open starts are a
    queue whose length walks +1 at a start and -1 at a done, held at 0 (a done with none open is alone);
    held at 0, it is the walk minus its running minimum below 0. The i-th done that finds a start open
    takes the i-th start of its queue."""
    n = chip.size
    queue, queues = pd.factorize(chip * (int(kind.max(initial=0)) + 2) + kind + 1)
    narrow = np.int16 if queues.size < 2**15 else np.int64  # numpy's stable sort of 16-bit codes is a radix sort
    order = np.argsort(queue.astype(narrow), kind="stable")  # queue by queue, each in chip and start order
    queue = queue.astype(np.int64)
    q, start, done = queue[order], role[order] == _START, role[order] == _DONE
    head = np.ones(n, bool)
    head[1:] = q[1:] != q[:-1]
    heads = np.flatnonzero(head)
    sizes = np.diff(np.append(heads, n))
    walk = np.cumsum(start.astype(np.int64) - done)
    walk -= np.repeat(walk[heads] - (start[heads].astype(np.int64) - done[heads]), sizes)  # from 0 per queue
    span = 2 * n + 1  # each queue shifted below the ones before: one running minimum restarts at every queue
    low = np.minimum(np.minimum.accumulate(walk - q * span) + q * span, 0)
    low_before = np.zeros(n, np.int64)
    low_before[1:] = low[:-1]
    low_before[head] = 0
    taken = done & (walk >= low_before)  # a done that finds a start open
    starts_before = np.repeat(np.cumsum(start)[heads] - start[heads], sizes)  # starts of earlier queues
    taken_rank = np.cumsum(taken) - 1 - np.repeat(np.cumsum(taken)[heads] - taken[heads], sizes)
    start_at = np.flatnonzero(start)
    first = np.arange(n)
    first[order[taken]] = order[start_at[starts_before[taken] + taken_rank[taken]]]
    ends = np.flatnonzero((role == _DONE) | (role == _SYNC))
    taken_per_queue = np.add.reduceat(taken.astype(np.int64), heads)
    start_rank = np.cumsum(start) - 1 - starts_before
    left = np.flatnonzero(start & (start_rank >= taken_per_queue[q]))  # positions in queue order
    first_start = np.full(heads.size, n)  # a queue's place: where its first start comes
    queue_of_start = q[start_at]
    opens = np.flatnonzero(np.diff(queue_of_start, prepend=-1))  # each queue's first start
    first_start[queue_of_start[opens]] = order[start_at[opens]]
    left = order[left][np.lexsort((order[left], first_start[q[left]]))]
    return np.concatenate([np.stack([first[ends], ends], 1), np.stack([left, left], 1)]).astype(np.int64)


def _pairs_named(chip: list, role: list, kind: list, op: list, operand: list) -> np.ndarray:
    """``_pairs`` one op at a time, queues by (chip, op) and by (chip, kind)."""
    out: list[tuple[int, int]] = []
    open_by_op: dict[tuple, deque] = {}
    open_by_kind: dict[tuple, deque] = {}
    for i, r in enumerate(role):
        if r == _START:
            open_by_op.setdefault((chip[i], op[i]), deque()).append(i)
            open_by_kind.setdefault((chip[i], kind[i]), deque()).append(i)
        elif r == _DONE:
            by_op = open_by_op.get((chip[i], operand[i]))
            queue = open_by_kind.get((chip[i], kind[i]))
            if by_op:  # the start its HLO text names
                first = by_op.popleft()
                queue.remove(first)
            elif queue:  # else the oldest open start of its kind
                first = queue.popleft()
                open_by_op[(chip[i], op[first])].remove(first)
            else:
                first = i
            out.append((first, i))
        elif r == _SYNC:
            out.append((i, i))
    return np.array(out + [(i, i) for queue in open_by_kind.values() for i in queue], np.int64).reshape(-1, 2)


def kineto_messages(files: list[str]) -> dict[str, tuple]:
    """Kineto files' collectives as their args size them: file stem (the frame's ``host``) -> (clock base,
    [(name, buffer bytes or nan, group size or 0, kind, parts)] in start order): a GPU trace's communication
    kernels, a CPU trace's gloo spans (``_gloo_messages``); ``parts``: the bytes recorded times n to this power are
    the buffer (1: one rank's part, an all-gather's input; -1: a reduce-scatter's input, n of its output; else 0).
    A note says which gloo collectives are given no bytes, and why; another, which communication kernels."""
    out, unsized, undefined, ungrouped, unrecorded = {}, Counter(), Counter(), Counter(), Counter()
    kernels_unsized, unlaunched, kernels_several, kernels_unrecorded = Counter(), Counter(), Counter(), Counter()
    for f in files:
        path = Path(f)
        if not path.name.endswith(_KINETO_SUFFIXES):
            continue
        doc = kineto.load_json(path)
        found = [e for e in doc["traceEvents"] if isinstance(e, dict)]
        if any(e.get("cat") in kineto.DEVICE_CATS for e in found):
            messages = _kernel_messages(found, doc.get("distributedInfo"), kernels_unsized, unlaunched,
                                        kernels_several, kernels_unrecorded)
        else:
            messages = _gloo_messages(found, doc.get("distributedInfo"), unsized, undefined, ungrouped, unrecorded)
        out[file_host(path)] = (doc.get("baseTimeNanoseconds"), messages)
    why = ([f"{sum(unsized.values())} ({_counted(unsized)}) have no recorded input shape (torch.profiler records "
            "them with record_shapes=True) or none of a known type"] * bool(unsized)
           + [f"{sum(undefined.values())} ({_counted(undefined)}) are of kinds perfkit defines no bytes sent for"]
           * bool(undefined)
           + [f"{sum(ungrouped.values())} ({_counted(ungrouped)}) ran on one of their trace's process groups, "
              "which are of several sizes, and a span does not say which"] * bool(ungrouped)
           + [f"{sum(unrecorded.values())} ({_counted(unrecorded)}) record no group size, nor does their trace list "
              f"its process groups {_UNRECORDED}"] * bool(unrecorded))
    if why:
        warnings.warn(f"gloo collectives without bytes and GB/s (?): {'; '.join(why)}", DefinitionNote, stacklevel=2)
    why = ([f"{sum(kernels_unsized.values())} ({_counted(kernels_unsized)}) record no message size (In msg nelems "
            "and a known dtype), nor do the torch.distributed spans around their launch (record_param_comms, nccl:* "
            "with Input Dims of a known Input type)"] * bool(kernels_unsized)
           + [f"{sum(kernels_unrecorded.values())} ({_counted(kernels_unrecorded)}) record no group size (Group size), "
              "nor do the torch.distributed spans around their launch, nor does their trace list its process groups "
              f"{_UNRECORDED}"] * bool(kernels_unrecorded)
           + [f"{sum(kernels_several.values())} ({_counted(kernels_several)}) ran on one of their trace's process "
              "groups, which are of several sizes, and neither they nor the torch.distributed spans around their "
              "launch say which"] * bool(kernels_several)
           + [f"{sum(unlaunched.values())} ({_counted(unlaunched)}) record none and have no launch in the trace under "
              "record_param_comms (queued before the profiler started, or launched outside torch.distributed)"]
           * bool(unlaunched))
    if why:
        warnings.warn(f"communication kernels without bytes and GB/s (?): {'; '.join(why)}", DefinitionNote,
                      stacklevel=2)
    return out


# why a Kineto collective whose trace records no group size has no n (``matched``)
_UNRECORDED = ("(distributedInfo pg_config): n is unknown, not taken from the ranks given (a job's collectives may run "
               "on groups of fewer of its ranks)")


def _comm_span(name: str) -> bool:
    """Whether a host span is torch.distributed's around a collective's launch: ``record_param_comms`` (its
    ``Collective name``, message sizes, dtype and group size, where the profiler recorded them) or ProcessGroupNCCL's
    ``nccl:all_to_all``-like annotation."""
    return name == "record_param_comms" or name.startswith("nccl:")


def _kernel_messages(found: list[dict], info, unsized: Counter, unlaunched: Counter, ungrouped: Counter,
                     unrecorded: Counter) -> list[tuple]:
    """A GPU trace's communication kernels (``kineto_messages``), sized by their ``In msg nelems`` (an
    all-gather's and a reduce-scatter's ``Out msg nelems``: its output, as an HLO op's shape gives it; PyTorch
    records a reduce-scatter's input as the whole, n of its output), ``dtype`` and ``Group size``: the kernel's
    own, else those of the ``record_param_comms`` its launch ran under, else the input the innermost ``nccl:*`` span
    around its launch records (``Input Dims``, ``Input type``; ``_INPUT_PARTS``); n as ``_kernel_group`` gives it
    (``info``: the trace's ``distributedInfo``). The collective is the kernel's
    ``Collective name``, else that of the spans around its launch (``record_param_comms``, ``nccl:*``): NCCL runs
    an all-to-all's sends and receives, and other collectives, in kernels named SendRecv. Every kernel the
    instances hold (a collective by its name, of some duration) is one, those with neither unsized (``unsized``
    by kind; ``unlaunched``: launched before the profiler started), sized ones on one of process groups of several
    sizes that none of their args names in ``ungrouped`` by kind, sized ones whose trace records no group size in
    ``unrecorded`` by kind: else the k-th message would not be the k-th instance."""
    kernels = sorted((e for e in found if e.get("cat") == "kernel" and isinstance(e.get("dur"), (int, float))
                      and round(e["dur"] * 1e6) > 0
                      and classify(str(e.get("name", "")), "", None, "").category in COMM_CATEGORIES),
                     key=lambda e: e.get("ts", 0))
    groups, messages = _process_groups(info), []
    for e, around in zip(kernels, kineto.launched_under(found, kernels, _comm_span)):
        name = str(e.get("name", ""))
        args = e["args"] if isinstance(e.get("args"), dict) else {}
        recorded = [s["args"] for s in around if isinstance(s.get("args"), dict) and "In msg nelems" in s["args"]]
        if "In msg nelems" not in args and recorded:
            args = recorded[-1]
        names = [str(args.get("Collective name", ""))] + [s["name"].replace(":", " ") for s in reversed(around)]
        kind = next((k for k in map(_kind, names) if k), "")
        count = args.get("Out msg nelems" if kind in ("all-gather", "reduce-scatter") else "In msg nelems")
        size = _TORCH_DTYPE_BYTES.get(str(args.get("dtype", "")).lower())
        buffer = float(count) * size if isinstance(count, (int, float)) and size else np.nan
        inputs = [_input_bytes(s.get("args")) for s in around if s["name"].startswith("nccl:")]
        parts = 0
        if np.isnan(buffer) and inputs and kind in _INPUT_PARTS:
            buffer, parts = inputs[-1], _INPUT_PARTS[kind]
        if np.isnan(buffer):
            (unsized if around else unlaunched)[kind or _kind(name) or "unknown"] += 1
        group = _kernel_group([args] + [s["args"] for s in reversed(around) if s["name"] == "record_param_comms"
                                        and isinstance(s.get("args"), dict)], groups)
        if not np.isnan(buffer) and kind in SENT_SHARE and kind not in _SENT_WITHOUT_N and group <= 0:
            (ungrouped if group == -1 else unrecorded)[kind] += 1
        messages.append((name, buffer, group, kind, parts))
    return messages


def _gloo_messages(found: list[dict], info, unsized: Counter, undefined: Counter, ungrouped: Counter,
                   unrecorded: Counter) -> list[tuple]:
    """A CPU trace's gloo spans (``kineto_messages``; the instances ``chip_instances`` keeps, of some duration),
    sized by their inputs' ``Input Dims`` and ``Input type`` (the tensors gloo reduced, sent or gathered: an
    all-gather's one rank's part, an all-to-all's or a coalesced all-reduce's whole as their sum); the group size,
    that of the trace's process groups where every one ``distributedInfo`` lists has one size (a span does not say
    which group it ran on); -1 where they are of several sizes, 0 where none is listed (no n either way, not the
    chips given: ``matched``).
    Spans without a size are counted in ``unsized`` by kind, those of a kind with no bytes sent defined
    (``SENT_SHARE``: a barrier, a gather) in ``undefined`` by name, sized ones of groups of several sizes in
    ``ungrouped`` by kind, of none listed in ``unrecorded``."""
    group = _process_groups(info)[1]
    several = group == -1
    spans = sorted((e for e in found if e.get("ph") == "X" and e.get("cat") == "user_annotation"
                    and str(e.get("name", "")).startswith("gloo:") and isinstance(e.get("dur"), (int, float))
                    and round(e["dur"] * 1e6) > 0), key=lambda e: e.get("ts", 0))
    messages = []
    for e in spans:
        name = str(e["name"])
        kind = _kind(name.replace(":", " "))
        buffer = _input_bytes(e.get("args"))
        if kind not in SENT_SHARE:
            undefined[name] += 1
        elif np.isnan(buffer):
            unsized[kind] += 1
        elif group <= 0 and kind not in _SENT_WITHOUT_N:
            (ungrouped if several else unrecorded)[kind] += 1
        messages.append((name, buffer, group, kind, int(kind == "all-gather")))
    return messages


def _process_groups(info) -> tuple[dict[str, int], int]:
    """A Kineto trace's process groups as its ``distributedInfo`` lists them (``pg_config``): name (``pg_name``) ->
    size (``pg_size``), and the n of a collective that does not say which group it ran on: the size every one has,
    -1 where they are of several sizes, 0 where none is listed or one has no size (none known)."""
    groups = info.get("pg_config") if isinstance(info, dict) else None
    listed = [g for g in groups if isinstance(g, dict)] if isinstance(groups, list) else []
    sizes = {g.get("pg_size") for g in listed}
    if not listed or len(listed) != len(groups) or not all(type(n) is int and n > 0 for n in sizes):
        return {}, 0
    return {str(g.get("pg_name")): g["pg_size"] for g in listed}, (-1 if len(sizes) > 1 else sizes.pop())


def _kernel_group(sources: list[dict], groups: tuple[dict[str, int], int]) -> int:
    """A kernel's group size n from the first of its args and its ``record_param_comms``' (innermost first) that
    says it: its ``Group size``, else the count of its ``Process Group Ranks`` (a list's text), else the size of the
    process group its ``Process Group Name`` names in its trace's (``_process_groups``); else the n of a collective
    of that trace that names none (-1: its groups are of several sizes; 0: none known)."""
    names, unnamed = groups
    for args in sources:
        size, ranks = args.get("Group size"), str(args.get("Process Group Ranks", "")).strip()
        if type(size) is int and size > 0:
            return size
        listed = ranks[1:-1].split(",") if ranks.startswith("[") and ranks.endswith("]") else []
        if listed and all(r.strip().isdigit() for r in listed):
            return len(listed)
        name = args.get("Process Group Name")
        if name is not None and str(name) in names:
            return names[str(name)]
    return unnamed


def _input_bytes(args) -> float:
    """The bytes of the tensors an op's recorded inputs name (``Input Dims``, ``Input type``); nan where it
    records none or one of a type not known here."""
    dims = args.get("Input Dims") if isinstance(args, dict) else None
    types = args.get("Input type") if isinstance(args, dict) else None
    if not isinstance(dims, list) or not isinstance(types, list) or not dims or len(dims) != len(types):
        return np.nan
    total = 0.0
    for shape, dtype in zip(dims, types):
        size = _TORCH_DTYPE_BYTES.get(str(dtype).lower().replace("c10::", ""))
        if not size or not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
            return np.nan
        total += size * math.prod(shape)
    return total


def _counted(counts: Counter) -> str:
    """``3 all-gather, 1 all-reduce``: counts by name, most first."""
    return ", ".join(f"{n} {name}" for name, n in counts.most_common())


def _domains(rows: pd.DataFrame, messages: dict[str, tuple], own_clocks: tuple[int, ...]) -> np.ndarray:
    """The clock each row's chip reads: its Kineto time base, else its XSpace's host, or the file's own clock
    (the ranks of ``own_clocks``)."""
    pair = _groups(rows, ["host", "rank"])
    first = _first(pair)
    labels = [f"kineto:{messages[h][0]}" if h in messages else f"xspace:{r}:{h}" if r in own_clocks else f"xspace:{h}"
              for h, r in zip(rows["host"].to_numpy()[first], rows["rank"].to_numpy()[first].tolist())]
    return pd.factorize(np.array(labels, object))[0][pair]  # labels by first appearance, as the rows'


def _first(groups: np.ndarray) -> np.ndarray:
    """The first row of each group (``_groups``' codes)."""
    return first_rows(groups, int(groups.max(initial=-1)) + 1)


def _attach_messages(inst: pd.DataFrame, messages: dict[str, tuple]) -> None:
    """GPU kernels' and gloo spans' buffer and group size from their Kineto args, and the power of n that makes the
    bytes recorded the buffer (``parts``), in place: the k-th message of a file in start order is the k-th
    collective instance of that host's rows (same name checked)."""
    inst["parts"] = 0
    for host, (_, found) in messages.items():
        rows = inst.index[inst["host"] == host]
        if not found or len(rows) != len(found):
            continue
        ordered = inst.loc[rows].sort_values("start_ps", kind="stable").index
        names = inst.loc[ordered, "name"].tolist()
        if names != [m[0] for m in found]:
            continue
        inst.loc[ordered, "buffer"] = [m[1] for m in found]
        inst.loc[ordered, "group"] = [m[2] for m in found]
        inst.loc[ordered, "kind"] = [m[3] or k for m, k in zip(found, inst.loc[ordered, "kind"])]
        inst.loc[ordered, "parts"] = [m[4] for m in found]


class ChipInstances(NamedTuple):
    """Each collective instance on each chip as that chip's ops give it, before any matching across chips:
    what a chip's plane gives alone (``perfkit.trace.shards``), and what ``stack`` joins."""

    rows: pd.DataFrame  # rank, device, host, step, program_id, op, name, kind, shape (texts categorical),
    #                     start_ps, end_ps, hidden_ps, exposed_ps, buffer, group
    exposure: np.ndarray  # (3, k) int64: the instances' exposed time, as ``_exposure`` gives it
    own_clocks: tuple[int, ...] = ()  # the ranks whose file is a clock of its own (``events.own_clock``)

    @classmethod
    def none(cls, own_clocks: tuple[int, ...] = ()) -> ChipInstances:
        """No instances (no collective ops)."""
        return cls(pd.DataFrame(), np.zeros((3, 0), np.int64), own_clocks)


def _exposure(own: list[tuple[np.ndarray, np.ndarray]], chip: np.ndarray, coverage: _Coverage
              ) -> tuple[np.ndarray, np.ndarray]:
    """Each instance's exposed time from its start to any instant, as points (3, k) int64: segment (2 x its
    row + which of its own ops), instant, and that op's time not under compute from its start to then;
    per segment its start, the instants inside where compute may start or stop, and its end, so that
    between two points the exposed time grows at a constant rate (0 or 1). And (n,) int64 each instance's
    exposed time in all. ``own``: the instances' two own ops (start, end); empty ones have no points."""
    a = np.stack([own[0][0], own[1][0]], 1).ravel()
    b = np.stack([own[0][1], own[1][1]], 1).ravel()
    c = np.repeat(chip, 2)
    segment = np.flatnonzero(b > a)
    a, b, c = a[segment], b[segment], c[segment]
    query, inside = coverage.changes(c, a, b)
    count = np.bincount(query, minlength=segment.size) + 2
    first = np.cumsum(count) - count
    points = np.empty((3, int(count.sum())), np.int64)
    points[0] = np.repeat(segment, count)
    last = first + count - 1
    exposed = b - a - coverage.covered(c, a, b)
    points[1, first], points[1, last] = a, b
    points[2, first], points[2, last] = 0, exposed
    inner = count - 2
    at = first[query] + 1 + np.arange(query.size) - np.repeat(np.cumsum(inner) - inner, inner)  # after its start
    points[1, at] = inside
    points[2, at] = inside - a[query] - coverage.covered(c[query], a[query], inside)
    total = np.zeros(chip.size, np.int64)
    for part in (0, 1):  # an instance's two own ops
        mine = (segment & 1) == part
        total[segment[mine] >> 1] += exposed[mine]
    return points, total


def _exposed_until(exposure: np.ndarray, count: int, until: np.ndarray) -> np.ndarray:
    """(count,) int64 each instance's exposed time from its start to ``until`` (count,) from its points
    (``_exposure``): in each segment the value at its last point not after ``until``, and the rate up to
    the next point."""
    segment, t, e = exposure
    instance = segment >> 1
    upto = until[instance]
    below = t <= upto  # a prefix of each segment's points
    following = np.zeros(t.size, bool)
    following[:-1] = below[1:] & (segment[1:] == segment[:-1])
    j = np.flatnonzero(below & ~following)
    nxt = np.minimum(j + 1, t.size - 1)
    more = (j + 1 < t.size) & (segment[nxt] == segment[j]) & (t[nxt] > t[j])
    rate = more & (e[nxt] - e[j] == t[nxt] - t[j])  # 1 where it grew all the way to the next point, else 0
    value = e[j] + rate * (upto[j] - t[j])
    out = np.zeros(count, np.int64)
    mine = instance[j]  # ascending: an instance's one or two segments side by side
    first = np.flatnonzero(np.diff(mine, prepend=-1))
    out[mine[first]] = np.add.reduceat(value, first) if first.size else 0
    return out


def instances(events: pd.DataFrame) -> pd.DataFrame:
    """One row per collective instance and chip (``INSTANCE_COLUMNS``; the module docstring says what
    each is): ``last`` is True for the chip that arrived strictly last; ``skew_ps``, ``wait_ps``,
    ``transfer_ps`` need the instance on two or more chips of one clock (else ``chips`` is 1, skew 0,
    wait 0); ``bytes`` is NaN where the buffer or the group size is unknown; ``op`` and ``kind`` are
    categoricals. Texts (kinds, names, shapes) are worked on once per distinct value, rows as codes: a
    production profile has millions of collective ops and a few hundred names."""
    return matched(chip_instances(events), kineto_messages(events.attrs.get("files", [])))


def matched(found: ChipInstances, messages: dict[str, tuple] | None = None) -> pd.DataFrame:
    """``instances`` from each chip's (``chip_instances``, or several ``stack``-ed): the same instance
    matched across the chips of one clock; ``messages``: the Kineto files' communication kernels."""
    inst, messages = found.rows, messages or {}
    if inst.empty:
        return pd.DataFrame(columns=INSTANCE_COLUMNS)
    a1 = inst["start_ps"].to_numpy()
    inst["time_ps"] = inst["end_ps"] - inst["start_ps"]
    if messages:  # their kernels' kinds replace some, as text
        inst["kind"] = inst["kind"].astype(object)
    _attach_messages(inst, messages)
    inst["domain"] = _domains(inst, messages, found.own_clocks)
    inst["program"] = pd.factorize(inst["program_id"].array, use_na_sentinel=False)[0]  # unknown: a program too
    # by kind too: a Kineto kernel's collective is its launch's (NCCL runs several in kernels of one name)
    inst["occurrence"] = inst.groupby(_groups(inst, ["rank", "device", "step", "program", "op", "kind"]),
                                      sort=False).cumcount()
    same = _groups(inst, ["domain", "step", "program", "op", "kind", "occurrence"])  # one instance, its chips
    inst["chips"] = np.bincount(same)[same]
    starts = inst["start_ps"].groupby(same, sort=False)
    arrival = starts.transform("max").to_numpy(np.int64)
    inst["skew_ps"] = arrival - starts.transform("min").to_numpy(np.int64)
    at_last = inst["start_ps"].to_numpy() == arrival
    alone = np.bincount(same, weights=at_last)[same] == 1
    # A rendezvous holds every chip at once: chips whose instances share no instant (one ended before another
    # began) are not one, where matching by order paired other transfers (Kineto's point-to-point kernels).
    # Such an instance has no arrival to wait for: its skew and wait are 0, its exposed time all transfer.
    apart = inst["end_ps"].groupby(same, sort=False).transform("min").to_numpy(np.int64) < arrival
    inst["apart"] = apart
    inst["last"] = at_last & alone & (inst["chips"] > 1).to_numpy() & ~apart
    inst.loc[apart, "skew_ps"] = 0
    inst["wait_ps"] = _exposed_until(found.exposure, len(inst), np.where(apart, a1, np.maximum(arrival, a1)))
    inst["transfer_ps"] = inst["exposed_ps"] - inst["wait_ps"]
    # n only as the op's HLO text, its program or the Kineto trace records it, never the chips matched: a profile may
    # hold some of the program's hosts only, a job's collectives may run on subgroups (as HTA reads a kernel's Group
    # size 0)
    _note_unsized_xla(inst, messages)
    # an all-gather's input is one rank's part (the whole buffer n of them), a reduce-scatter's n of its output
    n = inst["group"].where(inst["group"] > 0)
    parts = inst["parts"]
    inst["buffer"] = inst["buffer"].where(parts == 0, inst["buffer"] * n.where(parts > 0, 1 / n))
    sends = _groups(inst, ["kind", "buffer", "group"])
    each = _first(sends)  # _sent once per (kind, buffer, group)
    sent = [_sent(*key) for key in zip(*(inst[k].to_numpy()[each].tolist() for k in ("kind", "buffer", "group")))]
    inst["bytes"] = np.array(sent, np.float64)[sends]
    inst["group"] = inst["group"].clip(lower=0)  # a gloo span's group of unknown size (-1) is unknown as 0 is
    inst["kind"] = inst["kind"].astype("category")  # again, where Kineto kernels' kinds came in as text
    peers = messages and (inst["kind"].isin(POINT_TO_POINT) & (inst["chips"] > 1)).any()
    if peers:  # (an XLA program runs its collective-permutes in one order on every chip: matched alike)
        warnings.warn("point-to-point kernels (SendRecv, Send, Recv) are matched across ranks by their order in a "
                      "step, not by peer: where ranks run them in other orders (a pipeline schedule), their skew and "
                      "waits pair other transfers", DefinitionNote, stacklevel=2)
    return inst[INSTANCE_COLUMNS].sort_values(["domain", "step", "start_ps", "rank", "device"], kind="stable",
                                              ignore_index=True)


def _note_unsized_xla(inst: pd.DataFrame, messages: dict[str, tuple]) -> None:
    """A note on the XLA collectives whose bytes need a group size n that neither their op's HLO text nor their
    program's HloProto gives."""
    xla = ~inst["host"].isin(list(messages)).to_numpy()
    kind = inst["kind"].astype(str)
    sized = kind.isin([k for k in SENT_SHARE if k not in _SENT_WITHOUT_N]).to_numpy()
    unsized = inst[xla & sized & (inst["group"] == 0).to_numpy() & inst["buffer"].notna().to_numpy()]
    if unsized.empty:
        return
    ops = Counter(unsized.drop_duplicates(["program", "op"])["kind"].astype(str))
    warnings.warn(f"XLA collectives without bytes and GB/s (?): {sum(ops.values())} ops ({_counted(ops)}) have a "
                  "group size n that neither their HLO text in the trace records (a fusion, an op the profile names by "
                  "name only, replica_groups={}: every replica) nor their program's HloProto (the profile holds none, "
                  "or groups that the program's replica and partition counts size, which its device assignment does "
                  "not record): n is unknown, not taken from the chips in the profile (it may hold only some of the "
                  "program's hosts)", DefinitionNote, stacklevel=3)


def stack(parts: list[tuple[ChipInstances, int]]) -> ChipInstances:
    """The chip instances of disjoint sets of chips (each chip's in one part) as one, each part's times
    moved by its shift (ps: to one origin), in order."""
    own_clocks = tuple(rank for p, _ in parts for rank in p.own_clocks)
    parts = [(p, shift) for p, shift in parts if len(p.rows)]
    if not parts:
        return ChipInstances.none(own_clocks)
    rows = [p.rows for p, _ in parts]
    columns = {c: (union_categoricals([r[c] for r in rows]) if isinstance(rows[0][c].dtype, pd.CategoricalDtype)
                   else pd.concat([r[c] for r in rows], ignore_index=True).array) for c in rows[0].columns}
    shifts = np.array([shift for _, shift in parts], np.int64)
    row_shift = np.repeat(shifts, [len(r) for r in rows])
    for column in ("start_ps", "end_ps"):
        columns[column] = columns[column] + row_shift
    points = np.concatenate([p.exposure for p, _ in parts], axis=1)  # a new array: shifted in place
    counts = [p.exposure.shape[1] for p, _ in parts]
    first_row = np.cumsum([0] + [len(r) for r in rows[:-1]])
    points[0] += np.repeat(2 * first_row, counts)  # segments of the stacked rows
    points[1] += np.repeat(shifts, counts)
    return ChipInstances(pd.DataFrame(columns, copy=False), points, own_clocks)


def chip_instances(events: pd.DataFrame) -> ChipInstances:
    """Each collective instance on each chip as its chip's ops give it (``ChipInstances.rows``) and the
    points of its exposed time (``_exposure``), for the waits; no rows without collective ops. The chip's
    temporaries (codes of every device and collective op) end here."""
    dev = np.flatnonzero(is_device_op(events) & (events["dur_ps"].to_numpy() > 0))  # device ops taking time
    # by first appearance; the ranks and devices of every op only for this key (not kept: two int64 per op)
    chip = pd.factorize(chip_key(*(events[c].to_numpy(np.int64)[dev] for c in ("rank", "device"))))[0].astype(np.int64)
    start_ps, dur_ps = (events[c].to_numpy(np.int64)[dev] for c in ("start_ps", "dur_ps"))
    category = events["category"].iloc[dev]
    coverage = _Coverage(chip, start_ps, start_ps + dur_ps, events["line"].cat.codes.to_numpy(np.int64)[dev],
                         (category == "compute").to_numpy())
    comm = np.flatnonzero(category.isin(COMM_CATEGORIES).to_numpy())
    text = {c: _factorized(events[c].iloc[dev[comm]]) for c in ("kind", "hlo_op", "name", "shape", "host")}
    kind_of, kinds = text["kind"]
    role = np.array([_role(k) for k in kinds], np.int64)[kind_of]
    base_of, base_text = pd.factorize(np.array([_kind(k) for k in kinds], object))
    base = base_of.astype(np.int64)[kind_of]
    op, op_text = _op_codes(text["hlo_op"], text["name"])
    kept = role != _UPDATE
    # torch.distributed on gloo: a c10d:: call hands its collective to gloo's thread, whose gloo:* span is the
    # collective; the call and the span are one instance, counted once (by the span)
    wrapper = np.array([k.lower().startswith("c10d") for k in kinds], bool)[kind_of]
    if wrapper.any() and np.array([k.lower().startswith("gloo") for k in kinds], bool).any():
        kept &= ~wrapper
    kept = np.flatnonzero(kept)
    own_clocks = tuple(events.attrs.get("own_clocks", ()))
    if not kept.size:
        return ChipInstances.none(own_clocks)
    seq = kept[_chip_order(chip[comm[kept]], start_ps[comm[kept]])]
    name_of, names = text["name"]
    op_index = {t: i for i, t in enumerate(op_text)}
    named = np.full(names.size, -1, np.int64)  # the op a done's HLO text names
    for code in np.unique(name_of[seq[role[seq] == _DONE]]):
        named[code] = op_index.get(_operand(names[code]), -1)
    pairs = _pairs(chip[comm[seq]], role[seq], base[seq], op[seq], named[name_of[seq]])
    fp, lp = seq[pairs[:, 0]], seq[pairs[:, 1]]  # first and last op of each instance, among the collective ops
    first, last = comm[fp], comm[lp]
    a1, a2 = start_ps[first], start_ps[last]
    b1, b2 = a1 + dur_ps[first], a2 + dur_ps[last]
    paired = fp != lp
    own = [(a1, b1), (np.where(paired, a2, b1), np.where(paired, b2, b1))]
    c = chip[first]
    row = dev[first]  # the events' rows
    inst = pd.DataFrame({
        "rank": events["rank"].to_numpy()[row], "device": events["device"].to_numpy()[row],
        "host": _texts(text["host"][0][fp], text["host"][1]), "step": events["step"].to_numpy()[row],
        "program_id": events["program_id"].array[row], "op": _texts(op[fp], op_text),
        "name": _texts(name_of[fp], names), "kind": _texts(base[fp], base_text),
        "shape": _texts(text["shape"][0][lp], text["shape"][1]), "start_ps": a1, "end_ps": np.maximum(b1, b2),
    })
    exposure, inst["exposed_ps"] = _exposure(own, c, coverage)
    inst["hidden_ps"] = coverage.covered(c, a1, inst["end_ps"].to_numpy())
    inst["buffer"] = _per_text(text["shape"][0][lp], text["shape"][1],
                               lambda s: float(shape_bytes(s)) if s else np.nan, np.float64)
    # n as the op's HLO text in the trace records it, else as its program's HloProto does (a fusion's, the collective
    # it runs; replica_groups={} the device assignment's counts size)
    recorded = events["group"].to_numpy()[dev[comm]]
    text_n = _per_text(name_of[fp], names, _text_group, np.int64)
    inst["group"] = np.where(text_n > 0, text_n, np.maximum(recorded[fp], recorded[lp]).astype(np.int64))
    return ChipInstances(inst, exposure, own_clocks)


def _texts(codes: np.ndarray, texts: np.ndarray) -> pd.Categorical:
    """Codes (n,) into ``texts`` (-1 its last) as a categorical (a worker's result pickles as codes, not
    as strings), each text a category once."""
    remap, unique = pd.factorize(pd.Index(texts, dtype=object))
    return pd.Categorical.from_codes(remap[codes], categories=unique, validate=False)


def _chip_order(chip: np.ndarray, start: np.ndarray) -> np.ndarray:
    """The order (n,) of ops by chip and start, ties as they come; no sort where they come so (a TPU chip's
    collectives are on its one ``XLA Ops`` line)."""
    same = chip[1:] == chip[:-1]
    if ((chip[1:] > chip[:-1]) | (same & (start[1:] >= start[:-1]))).all():
        return np.arange(chip.size)
    return np.lexsort((start, chip))


def _groups(frame: pd.DataFrame, columns: list[str]) -> np.ndarray:
    """Group codes (n,) of the rows of ``frame`` by ``columns``, by first appearance (missing values a
    group of their own): as ``groupby(columns, sort=False)`` groups, through one int64 key, where pandas'
    own grouping by several columns takes ten times longer on a million rows."""
    return pd.factorize(packed_key([_codes(frame[c]) for c in columns]))[0]


def _codes(column: pd.Series) -> np.ndarray:
    """A column as ints >= -1 that are equal where its values are: a categorical's codes, ints >= -1 as they
    are (steps, devices, ranks, counts), else its values factorized."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return column.cat.codes.to_numpy()
    values = column.to_numpy()
    if values.dtype.kind in "iu" and values.size and values.min() >= -1 and values.max() < 2**62:
        return values
    return pd.factorize(column)[0]


def _op_codes(hlo: tuple[np.ndarray, np.ndarray], name: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """What each op is called in its instance, its HLO op name, else its event name, as codes (n,) int64
    and texts; from both columns' ``_factorized`` codes and texts."""
    (hlo_of, hlos), (name_of, names) = hlo, name
    width = names.size  # codes -1..width-2, shifted to 0..width-1
    pair, keys = pd.factorize((hlo_of + 1) * width + name_of + 1)
    texts = [h or n for h, n in zip(hlos[keys // width - 1], names[keys % width - 1])]
    op_of, op_text = pd.factorize(np.array(texts, object))
    return op_of.astype(np.int64)[pair], np.asarray(op_text, object)


def _per_text(codes: np.ndarray, texts: np.ndarray, f, dtype) -> np.ndarray:
    """``f`` of the text of each of ``codes`` (n,) (index into ``texts``, -1 its last), called once per
    distinct code."""
    used = np.unique(codes)
    table = np.zeros(texts.size, dtype)
    table[used] = [f(texts[u]) for u in used]
    return table[codes]


def _text_group(text: str) -> int:
    """The replica group size the op's HLO text names (0 when it names none, or groups only the program's replica
    and partition counts would size: the text has no HloModule line)."""
    inst = parse_instruction(text, 0) if " = " in text else None
    if inst is None or "replica_groups" not in dict(inst.attrs):
        return 0
    try:
        return group_size(inst, 0)
    except BadInput:
        return 0


def _sent(kind: str, buffer: float, n: int) -> float:
    """Bytes one device sends: the whole buffer's share (a reduce-scatter's output is 1/n of its buffer)."""
    share = SENT_SHARE.get(kind)
    if share is None or np.isnan(buffer):
        return np.nan
    if kind in ("collective-permute", "collective-broadcast", "send", "recv"):
        return buffer * share(max(n, 1))
    if n < 1:
        return np.nan
    whole = buffer * n if kind == "reduce-scatter" else buffer
    return whole * share(n)


def by_op(inst: pd.DataFrame) -> pd.DataFrame:
    """Per (step, op, kind): ``count`` (instances per chip), ``chips``, means per instance of
    ``time_ps``, ``exposed_ps``, ``hidden_ps``, ``skew_ps``, ``wait_ps``, ``transfer_ps``, ``bytes``, and
    ``gbps`` (bytes over time summed, GB/s); most exposed time first. Skew, wait and transfer are means over the
    instances that ran on two or more chips of one clock, NaN where none did: the others' are not measured; skew
    over those that are one transfer (``apart`` ones, matched by order but never overlapping, are left out)."""
    if inst.empty:
        return pd.DataFrame(columns=OP_COLUMNS)
    keys = ["step", "op", "kind"]
    groups = _groups(inst, keys)
    means = {c: (c, "mean") for c in ("bytes", "time_ps", "exposed_ps", "hidden_ps", "skew_ps", "wait_ps",
                                      "transfer_ps")}
    # skew, wait and transfer of the instances matched on two or more chips only: the others' are not measured;
    # skew of those whose chips also overlap (one transfer) alone: the others are left out, their 0 none measured
    alone = (inst["chips"] < 2).to_numpy()
    unmeasured = {c: inst[c].mask(alone | (inst["apart"].to_numpy() if c == "skew_ps" else False))
                  for c in ("skew_ps", "wait_ps", "transfer_ps")}
    out = inst.assign(chip=_groups(inst, ["rank", "device"]), **unmeasured).groupby(groups, sort=False).agg(
        rows=("time_ps", "size"), chips=("chip", "nunique"), sum_bytes=("bytes", "sum"), sum_time=("time_ps", "sum"),
        **means).reset_index(drop=True)
    first = _first(groups)
    out = pd.concat([pd.DataFrame({k: inst[k].to_numpy()[first] for k in keys}), out], axis=1)
    out["count"] = out.pop("rows") / out["chips"]
    out["gbps"] = out.pop("sum_bytes") / out.pop("sum_time") * 1e3  # bytes per ps -> GB/s
    out.loc[out["bytes"].isna(), "gbps"] = np.nan
    total = out["exposed_ps"] * out["count"]
    return out.iloc[np.argsort(-total.to_numpy(), kind="stable")].reset_index(drop=True)[OP_COLUMNS]


def stragglers(inst: pd.DataFrame, spans: pd.DataFrame) -> pd.DataFrame:
    """Per (domain, step) with instances on two or more chips: ``matched`` (instances), ``rank``,
    ``device`` of the chip that arrived last most often (ties: the lower rank and device), ``times_last``,
    ``skew_ps`` (summed over the step's instances), ``wait_ps`` (the other chips' mean exposed wait; every chip's
    where none was last alone), ``span_ps`` (mean step span of the domain's chips; ``spans``: breakdown rows) and
    ``skew_share``; of the instances whose chips never overlapped (``apart``: not one rendezvous) only their count,
    ``apart``."""
    columns = ["domain", "step", "matched", "apart", "rank", "device", "times_last", "skew_ps", "wait_ps", "span_ps",
               "skew_share"]
    shared = inst[inst["chips"] > 1]
    if shared.empty:
        return pd.DataFrame(columns=columns)
    step_keys, chip_keys = ["domain", "step"], ["rank", "device"]
    # one row of each instance: its chips share a skew
    instance = shared.iloc[_first(_groups(shared, step_keys + ["program", "op", "kind", "occurrence"]))]
    out = pd.DataFrame({"matched": instance.groupby(step_keys)["apart"].size()})
    out["apart"] = instance.groupby(step_keys)["apart"].sum().astype(int)
    out["matched"] -= out["apart"]
    out["skew_ps"] = instance[~instance["apart"]].groupby(step_keys)["skew_ps"].sum()
    out["skew_ps"] = out["skew_ps"].fillna(0).astype(np.int64)
    met = shared[~shared["apart"]]  # the rendezvous
    # the chip last most often; ties to the lower rank and device
    lasts = met[met["last"]].groupby(step_keys + chip_keys).size().rename("times_last").reset_index()
    lasts = lasts.sort_values(step_keys + ["times_last"] + chip_keys, ascending=[True, True, False, True, True])
    out = out.join(lasts.drop_duplicates(step_keys).set_index(step_keys))
    out[chip_keys + ["times_last"]] = out[chip_keys + ["times_last"]].fillna(-1).astype(int)
    out.loc[out["times_last"] < 0, "times_last"] = 0
    out["wait_ps"] = others_wait(met, out[chip_keys].reset_index()).sum(axis=1).astype(np.float64)
    chips = shared[step_keys + chip_keys].drop_duplicates().merge(spans[["rank", "device", "step", "span_ps"]],
                                                                  on=["rank", "device", "step"])
    out["span_ps"] = chips.groupby(step_keys)["span_ps"].mean()
    out["skew_share"] = out["skew_ps"] / out["span_ps"]
    return out.reset_index()[columns]


def others_wait(inst: pd.DataFrame, lasts: pd.DataFrame) -> pd.DataFrame:
    """Per (domain, step) of ``lasts`` (``stragglers``' rows: ``rank, device`` of the chip last most often, -1 where
    none was last alone), a column per collective kind: the mean, over the step's chips but that one, of each one's
    exposed wait at the kind's rendezvous (``inst``'s instances on two or more chips of one clock, not ``apart``),
    summed over the step; 0 where it ran none. Its columns add up to the step's ``wait_ps``, one definition for both."""
    keys, chip = ["domain", "step"], ["rank", "device"]
    met = inst[(inst["chips"] > 1).to_numpy() & ~inst["apart"].to_numpy().astype(bool)]
    per = met.groupby(keys + chip + ["kind"], observed=True)["wait_ps"].sum().reset_index()
    per = per.merge(lasts[keys + chip].rename(columns={"rank": "last_rank", "device": "last_device"}), on=keys)
    chips = per[keys + chip + ["last_rank", "last_device"]].drop_duplicates(keys + chip)
    others = (chips["rank"] != chips["last_rank"]) | (chips["device"] != chips["last_device"])
    count = chips[others.to_numpy()].groupby(keys).size().rename("others")
    mine = per[((per["rank"] != per["last_rank"]) | (per["device"] != per["last_device"])).to_numpy()]
    sums = mine.assign(kind=mine["kind"].astype(str)).groupby(keys + ["kind"])["wait_ps"].sum().unstack("kind")
    table = sums.div(count.reindex(sums.index), axis=0) if len(sums) else sums
    return table.reindex(pd.MultiIndex.from_frame(lasts[keys])).fillna(0.0)


def analyse(events: pd.DataFrame, spans: pd.DataFrame | None = None) -> dict:
    """``tables`` of an events frame's ``instances`` (``spans``: its breakdown, where the caller has it)."""
    return tables(instances(events), breakdown.breakdown(events) if spans is None else spans)


def tables(inst: pd.DataFrame, spans: pd.DataFrame) -> dict:
    """``instances``, ``ops`` (``by_op``) and ``steps`` (``stragglers``) of the instances of traces whose
    breakdown is ``spans``, ``chip_steps``: how many (chip, step) spans that breakdown measured, and
    ``measured``: its events' (``["device"]``, or "host" among them where host ops stood in)."""
    return {"instances": inst, "ops": by_op(inst), "steps": stragglers(inst, spans), "chip_steps": len(spans),
            "measured": spans.attrs.get("measured", ["device"])}


def by_kind(inst: pd.DataFrame, chip_steps: int, waits: pd.Series) -> pd.DataFrame:
    """Per collective kind, per chip and step (over ``chip_steps``): ``count``, ``bytes`` sent,
    ``time_ps``, ``exposed_ps``, ``hidden_ps``; ``wait_ps``, from ``waits`` (per kind, ``others_wait``'s mean over the
    steps: the chips but the step's last most often wait this long each a step; NaN where no instance of the kind ran
    on two or more chips of one clock: not measured); ``gbps`` (bytes over time summed); most exposed first."""
    sums = inst.groupby("kind").agg(count=("time_ps", "size"), bytes=("bytes", lambda b: b.sum(min_count=len(b))),
                                    time_ps=("time_ps", "sum"), exposed_ps=("exposed_ps", "sum"),
                                    hidden_ps=("hidden_ps", "sum"), matched=("chips", "max"))
    sums["gbps"] = sums["bytes"] / sums["time_ps"] * 1e3
    per = sums.drop(columns=["gbps", "matched"]) / max(chip_steps, 1)
    per["wait_ps"] = [waits.get(str(k), 0.0) for k in per.index]  # (a step, not divided by the chip-steps)
    per.loc[sums["matched"] < 2, "wait_ps"] = np.nan
    per["gbps"] = sums["gbps"]
    return per.sort_values("exposed_ps", ascending=False, kind="stable").reset_index()


def summarize(trials: list[tuple[str, dict]]) -> dict:
    """One variant's collectives for a run's summary, from ``analyse`` of each of its traced trials
    (trial folder name, its analysis; a trial's ranks share clocks, trials do not): ``kinds``
    (``by_kind`` over every chip-step, its wait over every trial's steps, ms, top ``TOP_KINDS``) and ``steps``
    (``stragglers`` rows of each trial, with ``trial``, ms)."""
    # the chips but each step's last: a mean over every trial's steps (with a kind a trial's steps lack at 0)
    waits = [others_wait(a["instances"], a["steps"]) for _, a in trials if len(a["steps"])]
    waits = pd.concat(waits).fillna(0.0).mean() if waits else pd.Series(dtype=np.float64)
    kinds = by_kind(pd.concat([a["instances"] for _, a in trials]), sum(a["chip_steps"] for _, a in trials), waits)
    steps = pd.concat([a["steps"].assign(trial=name) for name, a in trials])
    return {
        "kinds": [{"kind": r.kind, "count": float(r.count), "bytes": None if np.isnan(r.bytes) else float(r.bytes),
                   "time_ms": r.time_ps / PS_PER_MS, "exposed_ms": r.exposed_ps / PS_PER_MS,
                   "hidden_ms": r.hidden_ps / PS_PER_MS,
                   "wait_ms": None if np.isnan(r.wait_ps) else r.wait_ps / PS_PER_MS,
                   "gbps": None if np.isnan(r.gbps) else float(r.gbps)} for r in kinds.head(TOP_KINDS).itertuples()],
        "steps": [{"trial": r.trial, "step": int(r.step), "rank": int(r.rank), "device": int(r.device),
                   "times_last": int(r.times_last), "matched": int(r.matched), "apart": int(r.apart),
                   "skew_ms": r.skew_ps / PS_PER_MS,
                   "span_ms": r.span_ps / PS_PER_MS, "skew_share": float(r.skew_share)} for r in steps.itertuples()],
    }
