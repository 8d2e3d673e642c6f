"""Every rank's dumped modules, each distinct program parsed once: what ``perfkit.hlo.diff`` compares.

The ranks of one program usually dump byte-identical files, so files are hashed first; ranks that name
the program's instructions apart dumped files equal but for their names, so the distinct contents are
keyed next where they outnumber the processes (``renaming``, a third of a parse), and one file of each
key is parsed. Both the keying and the parsing are dealt out by size to this process and worker
processes (``common.workers.Pool``), one process per core. A worker returns each module's ``Summary``
(fingerprint, where collectives receive, counts) and its whole parses packed as plain tuples through ``marshal``
(pickling the parse's NamedTuples costs about as much as parsing: benchmarks/hlo_rank_diff.py); a
packed parse is unpacked only for a module that a divergence is explained with.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import marshal
from typing import Hashable, NamedTuple

from perfkit.common.workers import Pool, usable_cores
from perfkit.errors import BadInput
from perfkit.hlo.buffers import (Allocation, ReceiveBuffer, collectives, read_buffer_assignment, read_total_bytes,
                                 receive_buffers)
from perfkit.hlo.dumps import DumpFiles, content_key
from perfkit.hlo.fingerprint import FlatInstruction, computation_fingerprints, flatten
from perfkit.hlo.parse import Computation, Instruction, Module, read_module
from perfkit.hlo.renaming import renamed_key

# Distinct HLO text below this many bytes parses here sooner than worker processes start.
POOL_MIN_BYTES = 2_000_000
# Each process keeps the whole parses of the files it parsed, up to this much HLO text (a parse holds
# several times its text) and at least the first; a module past it is parsed again if needed.
KEEP_BYTES = 24_000_000


class RankModule(NamedTuple):
    """One compiled module of one rank, parsed, fingerprinted and placed in canonical order."""

    rank: int
    files: DumpFiles
    module: Module
    fps: dict[str, str]
    flat: list[FlatInstruction]
    roots: dict[str, str]                 # computation -> its ROOT opcode (what an async-start wraps)
    receive: list[ReceiveBuffer] | None   # None without a buffer-assignment file
    allocations: list[Allocation] | None  # likewise
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
    # (label, index, allocation number, offset) of each receive buffer; None: no buffer assignment
    receive: tuple[tuple[str, str, int, int], ...] | None
    # every allocation, its contents as a digest (the pairing only tells them equal or not: ``AllocationPairs``)
    allocations: tuple[Allocation, ...] | None
    assignment: bytes | None  # a digest of all the allocations: ranks alike in it need no pairing
    entry_ops: int
    instructions: int
    collectives: int
    temp_bytes: int | None

    def key(self, with_buffers: bool) -> tuple:
        """Ranks with equal keys run one program (fingerprint) and receive alike (buffer assignments alike); ranks
        whose keys differ in the latter only may still receive alike, in allocations numbered apart (``diff``)."""
        return self.fingerprint, ((self.receive, self.assignment) if with_buffers else ())


Job = tuple[Hashable, int, DumpFiles]     # (content key, the first rank holding it, its files)
Outcome = tuple[Summary | None, tuple | None]  # a Summary, or the BadInput it raised as (reason, path, field)


@contextlib.contextmanager
def no_cyclic_gc():
    """A parse allocates many objects an instruction and no reference cycles: the cyclic collector would
    only rescan them, and each kept parse again at every later collection (refcounting still frees
    everything; benchmarks/hlo_rank_diff.py measures the parse). Nested uses leave it to the outermost."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def load_module(rank: int, files: DumpFiles) -> RankModule:
    with no_cyclic_gc():
        return _load_module(rank, files)


def _load_module(rank: int, files: DumpFiles) -> RankModule:
    module = read_module(files.hlo)
    fps = computation_fingerprints(module)
    flat = flatten(module)
    roots = module.root_opcodes()
    receive = allocations = temp = total = None
    if files.buffer_assignment is not None:
        assignment = read_buffer_assignment(files.buffer_assignment, files.memory_report)
        receive = receive_buffers(flat, roots, assignment, str(files.buffer_assignment))
        allocations, temp = assignment.allocations, assignment.temp_bytes
    if files.memory_report is not None:
        total = read_total_bytes(files.memory_report)
    return RankModule(rank, files, module, fps, flat, roots, receive, allocations, temp, total)


def _digest(value: tuple) -> bytes:
    """A digest of plain tuples, equal for equal values (marshal format 2 writes no back-references, whose use
    follows reference counts)."""
    return hashlib.blake2b(marshal.dumps(value, 2), digest_size=16).digest()


def summarize(m: RankModule) -> Summary:
    receive = allocations = assignment = None
    if m.receive is not None:
        receive = tuple((b.label, b.index, b.allocation, b.offset) for b in m.receive)
        # a digest of each allocation's contents travels from a worker, not its values (thousands in a temp one)
        allocations = tuple(x._replace(contents=_digest(x.contents)) for x in m.allocations or [])
        assignment = _digest(tuple(map(tuple, allocations)))
    return Summary(m.rank, m.files, m.name, m.fingerprint, receive, allocations, assignment, m.entry_ops, len(m.flat),
                   len(collectives(m.flat, m.roots)), m.temp_bytes)


def _packed(m: RankModule) -> bytes:
    """A whole parse as plain tuples for ``marshal`` (it writes no NamedTuples); ``flat`` and ``roots``
    are recomputed on the other side (cheaper than packing them). Format version 2 keeps no
    back-references, which the parse would not use, and is written and read faster than version 4."""
    comps = [(c.name, c.entry, c.line, [tuple(i) for i in c.instructions]) for c in m.module.computations.values()]
    receive, allocations = (None if xs is None else [tuple(x) for x in xs] for xs in (m.receive, m.allocations))
    return marshal.dumps((m.module.name, m.module.path, m.module.entry, m.module.header, comps, m.fps, receive,
                          allocations, m.temp_bytes, m.total_bytes), 2)


def _unpacked(data: bytes, rank: int, files: DumpFiles) -> RankModule:
    with no_cyclic_gc():
        name, path, entry, header, comps, fps, receive, allocations, temp, total = marshal.loads(data)
        module = Module(name, path, {c: Computation(c, is_entry, list(map(Instruction._make, insts)), line)
                                     for c, is_entry, line, insts in comps}, entry, header)
        return RankModule(rank, files, module, fps, flatten(module), module.root_opcodes(),
                          None if receive is None else list(map(ReceiveBuffer._make, receive)),
                          None if allocations is None else list(map(Allocation._make, allocations)), temp, total)


def _parse_share(jobs: list[Job], kept: dict[Hashable, RankModule]) -> list[Outcome]:
    """Each job's outcome (a BadInput travels as fields: an exception's own pickling keeps only its
    message); the whole parses go into ``kept``, the first one and then up to KEEP_BYTES of text."""
    out: list[Outcome] = []
    room = KEEP_BYTES
    for key, rank, files in jobs:
        try:
            m = load_module(rank, files)
        except BadInput as exc:
            out.append((None, (exc.reason, exc.path, exc.field)))
            continue
        out.append((summarize(m), None))
        size = files.hlo.stat().st_size
        if not kept or size <= room:
            kept[key], room = m, room - size
    return out


def _renamed_key(job: Job) -> Hashable:
    """``renaming.renamed_key`` of a job's files; where one cannot be read, the content key (the file is
    then parsed alone, and its parse says what is wrong)."""
    try:
        return renamed_key(job[2])
    except BadInput:
        return job[0]


def _answers(request: str, jobs: list[Job], kept: dict[Hashable, RankModule]) -> list:
    """What a process answers to a "key" or "parse" request, job by job."""
    return list(map(_renamed_key, jobs)) if request == "key" else _parse_share(jobs, kept)


_HELD: list[dict] = []  # in a worker: the parses it packed, kept until its exit frees them all at once


def _share(request: str, jobs: list[Job]) -> tuple[list, dict[Hashable, bytes]]:
    """A worker's answers to ``request`` and the packed whole parses it kept (``_packed``)."""
    with no_cyclic_gc():
        kept: dict[Hashable, RankModule] = {}
        answers = _answers(request, jobs, kept)
        _HELD.append(kept)  # freed object by object here, they would hold up the answer
        return answers, {key: _packed(m) for key, m in kept.items()}


def pool_size(workers: int | None, distinct: list[DumpFiles]) -> int:
    """Processes parsing ``distinct`` files, this one included: ``workers``, or (None) one per usable core
    when there is enough text to pay for starting workers; 1 means none (parse here)."""
    if workers is not None:
        return workers
    if len(distinct) < 2 or sum(f.hlo.stat().st_size for f in distinct) < POOL_MIN_BYTES:
        return 1
    return usable_cores()


def shares(sizes: list[int], processes: int) -> list[list[int]]:
    """Indices of ``sizes`` dealt out to ``processes`` shares of about equal total size (largest first to
    the least loaded share, the last of equals: share 0 is this process's, which has the comparing to do
    after), each in order. Share 0 starts with index 0: the lowest rank's file, usually in the majority
    that divergences are explained against."""
    out: list[list[int]] = [[] for _ in range(processes)]
    totals = [0] * processes
    for i in [0, *sorted(range(1, len(sizes)), key=lambda i: -sizes[i])]:
        least = 0 if i == 0 else min(range(processes), key=lambda s: (totals[s], -s))
        out[least].append(i)
        totals[least] += sizes[i]
    return [sorted(s) for s in out]


class RankModules:
    """The modules of a set of ranks: ``summaries`` of every one, ``full`` parses on demand. Each distinct
    content (up to naming: ``renaming``) is parsed once, from the first rank's file holding it, here or
    (``workers`` > 1, or None and large) also in worker processes, which end once every file is parsed;
    the parses are held until ``close`` (use it as a context manager, inside ``no_cyclic_gc``): call it
    with workers from a single-threaded process (as the CLI is)."""

    def __init__(self, files: dict[int, list[DumpFiles]], workers: int | None = 1):
        content = {f: content_key(f) for r in sorted(files) for f in files[r]}
        distinct: dict[Hashable, tuple[int, DumpFiles]] = {}  # content -> the first (rank, files) holding it
        for r in sorted(files):
            for f in files[r]:
                distinct.setdefault(content[f], (r, f))
        jobs = [(k, *v) for k, v in distinct.items()]
        self._full: dict[Hashable, RankModule] = {}
        self._packed: dict[Hashable, bytes] = {}  # key -> the whole parse a worker kept, packed
        processes = min(pool_size(workers, [f for _, _, f in jobs]), len(jobs))
        parsers = Pool(processes - 1, name="an hlo parse worker process") if processes > 1 else None
        with parsers or contextlib.nullcontext() as pool:
            # Keyed only where files outnumber processes: else each file has a process to itself, and parsing
            # it at once ends no later than keying it and then parsing one file of each key.
            renamed = dict(zip(distinct, self._scatter(pool, "key", jobs))) if len(jobs) > processes else {}
            self._key = {f: renamed.get(k, k) for f, k in content.items()}
            firsts: dict[Hashable, Job] = {}  # key -> the job of the first rank holding it
            for k, rank, f in jobs:
                firsts.setdefault(self._key[f], (self._key[f], rank, f))
            jobs = list(firsts.values())
            self._parsed = {key: f for key, _, f in jobs}  # key -> the file parsed for it
            outcomes = dict(zip(firsts, self._scatter(pool, "parse", jobs)))
        for key, _, _ in jobs:
            bad = outcomes[key][1]
            if bad is not None:
                raise BadInput(bad[0], path=bad[1], field=bad[2])
        self.summaries = {r: [outcomes[self._key[f]][0]._replace(rank=r, files=f) for f in files[r]] for r in files}

    def _scatter(self, pool: Pool | None, request: str, jobs: list[Job]) -> list:
        """Each job's answer to ``request`` ("key" or "parse"), the jobs dealt out by size to this process
        and the pool's workers."""
        split = shares([files.hlo.stat().st_size for _, _, files in jobs], pool.processes + 1 if pool else 1)
        asked = [(pool.submit(_share, request, [jobs[i] for i in share]), share) for share in split[1:]]
        answers = dict(zip(split[0], _answers(request, [jobs[i] for i in split[0]], self._full)))
        for pending, share in asked:
            theirs, packed = pool.result(pending)
            answers.update(zip(share, theirs))
            self._packed.update(packed)
        return [answers[i] for i in range(len(jobs))]

    def full(self, s: Summary) -> RankModule:
        """The whole parse of a summarized module (parsed once per distinct content: a rank whose file differs
        from the first holder's in naming only gets the first holder's parse)."""
        key = self._key[s.files]
        if key not in self._full:
            packed = self._packed.pop(key, None)
            if packed is not None:
                self._full[key] = _unpacked(packed, s.rank, s.files)
            else:
                self._full[key] = load_module(s.rank, self._parsed[key])
        return self._full[key]._replace(rank=s.rank, files=s.files)

    def close(self) -> None:
        """Drop the whole parses (freed here, before a caller's ``no_cyclic_gc`` ends: the collector would
        scan them all once more)."""
        self._packed, self._full = {}, {}

    def __enter__(self) -> RankModules:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
