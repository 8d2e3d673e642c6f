"""Every rank's dumped modules, each distinct file parsed once: what ``perfkit.hlo.diff`` compares.

The ranks of one program usually dump byte-identical files, so files are hashed first and each distinct
content is parsed once. Distinct files parse in worker processes, one per core (the parser is pure
Python: threads would share one core). A worker sends back a module's ``Summary`` only (fingerprint,
receive offsets, counts): pickling a whole parse costs about as much as parsing it (measured on a
24k-instruction module: 0.55 s to pickle and unpickle, 0.64 s to parse). The whole parse is kept, or
redone here, only for the modules a divergence is explained with.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from typing import NamedTuple

from perfkit.errors import BadInput
from perfkit.hlo.buffers import (ReceiveBuffer, collectives, read_buffer_assignment, read_total_bytes,
                                 receive_buffers)
from perfkit.hlo.dumps import DumpFiles, content_key
from perfkit.hlo.fingerprint import FlatInstruction, computation_fingerprints, flatten
from perfkit.hlo.parse import Module, read_module

# Distinct HLO text below this many bytes parses here sooner than worker processes start (~0.1 s).
POOL_MIN_BYTES = 2_000_000


class RankModule(NamedTuple):
    """One compiled module of one rank, parsed, fingerprinted and placed in canonical order."""

    rank: int
    files: DumpFiles
    module: Module
    fps: dict[str, str]
    flat: list[FlatInstruction]
    roots: dict[str, str]                 # computation -> its ROOT opcode (what an async-start wraps)
    receive: list[ReceiveBuffer] | None   # None without a buffer-assignment file
    temp_bytes: int | None
    total_bytes: int | None

    @property
    def name(self) -> str:
        return self.module.name

    @property
    def fingerprint(self) -> str:
        return self.fps[self.module.entry]

    @property
    def entry_ops(self) -> int:
        return len(self.module.entry_computation.instructions)


class Summary(NamedTuple):
    """What comparing ranks reads of every rank's module."""

    rank: int
    files: DumpFiles
    name: str
    fingerprint: str
    receive: tuple[tuple[str, str, int], ...] | None  # (label, index, offset) per receive buffer; None: no assignment
    entry_ops: int
    instructions: int
    collectives: int
    temp_bytes: int | None

    def key(self, with_buffers: bool) -> tuple:
        """What must be equal for two ranks to run the same program: fingerprint (and receive offsets)."""
        return self.fingerprint, (self.receive if with_buffers else ())


@contextlib.contextmanager
def _no_cyclic_gc():
    """A parse allocates ~10 objects an instruction and no reference cycles: the cyclic collector would
    only rescan them, a fifth of the parse time (refcounting still frees everything)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def load_module(rank: int, files: DumpFiles) -> RankModule:
    with _no_cyclic_gc():
        return _load_module(rank, files)


def _load_module(rank: int, files: DumpFiles) -> RankModule:
    module = read_module(files.hlo)
    fps = computation_fingerprints(module)
    flat = flatten(module)
    roots = module.root_opcodes()
    receive = temp = total = None
    if files.buffer_assignment is not None:
        assignment = read_buffer_assignment(files.buffer_assignment)
        receive, temp = receive_buffers(flat, roots, assignment), assignment.temp_bytes
    if files.memory_report is not None:
        total = read_total_bytes(files.memory_report)
    return RankModule(rank, files, module, fps, flat, roots, receive, temp, total)


def summarize(m: RankModule) -> Summary:
    receive = None if m.receive is None else tuple((b.label, b.index, b.offset) for b in m.receive)
    return Summary(m.rank, m.files, m.name, m.fingerprint, receive, m.entry_ops, len(m.flat),
                   len(collectives(m.flat, m.roots)), m.temp_bytes)


def _summary_in_worker(rank: int, files: DumpFiles) -> tuple[Summary | None, tuple | None]:
    """A worker's job: one file's summary, or the BadInput it raised as (reason, path, field), which the
    parent raises again (an exception's own pickling would keep only its message)."""
    try:
        return summarize(load_module(rank, files)), None
    except BadInput as exc:
        return None, (exc.reason, exc.path, exc.field)


def pool_size(workers: int | None, distinct: list[DumpFiles]) -> int:
    """Worker processes for parsing ``distinct`` files: ``workers``, or (None) one per usable core when
    there is enough text to pay for starting them; 1 means none (parse here)."""
    if workers is not None:
        return workers
    if len(distinct) < 2 or sum(f.hlo.stat().st_size for f in distinct) < POOL_MIN_BYTES:
        return 1
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class RankModules:
    """The modules of a set of ranks: ``summaries`` of every one, ``full`` parses on demand. Each distinct
    file content is parsed once, here or (``workers`` > 1, or None and large) in forked worker processes:
    call it with workers from a single-threaded process (as the CLI is)."""

    def __init__(self, files: dict[int, list[DumpFiles]], workers: int | None = 1):
        self._key = {f: content_key(f) for r in sorted(files) for f in files[r]}
        distinct: dict[tuple, tuple[int, DumpFiles]] = {}  # content -> the first (rank, files) holding it
        for r in sorted(files):
            for f in files[r]:
                distinct.setdefault(self._key[f], (r, f))
        self._full: dict[tuple, RankModule] = {}
        by_key = self._summaries(distinct, pool_size(workers, [f for _, f in distinct.values()]))
        self.summaries = {r: [by_key[self._key[f]]._replace(rank=r, files=f) for f in files[r]] for r in files}

    def _parse(self, key: tuple, rank: int, files: DumpFiles) -> Summary:
        self._full[key] = load_module(rank, files)
        return summarize(self._full[key])

    def _summaries(self, distinct: dict[tuple, tuple[int, DumpFiles]], workers: int) -> dict[tuple, Summary]:
        keys = list(distinct)
        if workers <= 1 or len(keys) < 2:
            return {k: self._parse(k, *distinct[k]) for k in keys}
        # fork: workers start in milliseconds with this process's imports (forkserver / spawn: ~0.5 s).
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else None
        pool = ProcessPoolExecutor(min(workers, len(keys) - 1), mp_context=multiprocessing.get_context(method))
        try:
            futures = {k: pool.submit(_summary_in_worker, *distinct[k]) for k in keys[1:]}
            # The first file parses here meanwhile and is kept whole: its rank (the lowest) is usually in
            # the majority that divergences are explained against.
            out = {keys[0]: self._parse(keys[0], *distinct[keys[0]])}
            for k, future in futures.items():
                summary, bad = future.result()
                if bad is not None:
                    raise BadInput(bad[0], path=bad[1], field=bad[2])
                out[k] = summary
            return out
        finally:
            pool.shutdown(cancel_futures=True)

    def full(self, s: Summary) -> RankModule:
        """The whole parse of a summarized module (parsed once per distinct content)."""
        key = self._key[s.files]
        if key not in self._full:
            self._full[key] = load_module(s.rank, s.files)
        return self._full[key]._replace(rank=s.rank, files=s.files)
