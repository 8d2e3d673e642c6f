"""Where XLA dumps lie: the files of one dump folder, and the per-rank folders of a run or a PATH list.

A dump folder (``--xla_dump_to=DIR``: text, unless another format is asked for without ``--xla_dump_hlo_as_text``)
holds per compiled module
``module_NNNN.NAME.<platform>_after_optimizations.txt`` and, beside it, ``...-buffer-assignment.txt``
and ``...-memory-usage-report.txt``. ``NNNN`` is a per-process counter: it orders one rank's modules
but never matches modules across ranks (that is done by name and content, in ``perfkit.hlo.diff``).
"""

from __future__ import annotations

import hashlib
import re
import warnings
from pathlib import Path
from typing import NamedTuple

from perfkit.errors import BadInput, DefinitionNote
from perfkit.rundata.rundir import rank_dirs

AFTER_OPTIMIZATIONS = "after_optimizations.txt"
BEFORE_OPTIMIZATIONS = ".before_optimizations.txt"
DEBUG_OPTIONS = ".debug_options"
# XLA dumps a module's text as its compile starts and again once its optimization passes have run
AFTER_PASSES = ("XLA writes a module's text after optimizations once its optimization passes finish (the compile was "
                 "stopped, failed or is still running, or those files were not kept)")
_COUNTER = re.compile(r"module_(\d+)\.")
_RANK_DIR = re.compile(r"rank(\d+)$")


class DumpFiles(NamedTuple):
    """One compiled module's files in a dump folder."""

    order: int                       # the per-process counter (compile order on that rank)
    hlo: Path
    buffer_assignment: Path | None
    memory_report: Path | None


class RankDumps(NamedTuple):
    """The dump folder of each rank of one program run (one trial, or the folders given)."""

    label: str                       # "trials/00-a", or the folder(s) given
    variant: str | None              # the trial's variant, for run directories
    ranks: dict[int, Path]


def dump_files(folder: Path) -> list[DumpFiles]:
    """The modules dumped in ``folder``, in compile order (empty when there are none)."""
    out = []
    for k, hlo in enumerate(sorted(folder.glob("*" + AFTER_OPTIMIZATIONS))):
        stem = hlo.name.removesuffix(".txt")
        counter = _COUNTER.match(hlo.name)
        ba, mem = hlo.with_name(stem + "-buffer-assignment.txt"), hlo.with_name(stem + "-memory-usage-report.txt")
        out.append(DumpFiles(int(counter.group(1)) if counter else k, hlo,
                             ba if ba.is_file() else None, mem if mem.is_file() else None))
    return sorted(out, key=lambda d: (d.order, d.hlo.name))


def unfinished(folder: Path) -> list[str]:
    """The modules of a dump folder XLA dumped before optimizations and not after (``module_NNNN.<name>``, sorted):
    their compiles did not finish their optimization passes, or those files were not kept."""
    parts = (p.name.split(".") for p in folder.glob("*" + AFTER_OPTIMIZATIONS))
    done = {".".join(name[:k]) for name in parts for k in range(1, len(name))}  # each name's heads up to a dot
    started = (p.name.removesuffix(BEFORE_OPTIMIZATIONS) for p in folder.glob("*" + BEFORE_OPTIMIZATIONS))
    return sorted(m for m in started if m not in done)


def note_unfinished(folder: Path) -> None:
    """A note naming the modules of ``folder`` that are read as not compiled (``unfinished``), where there are."""
    left = unfinished(folder)
    if left:
        named = ", ".join(left[:4]) + (", ..." if len(left) > 4 else "")
        warnings.warn(f"{folder}: {len(left)} module{'s' * (len(left) != 1)} with no *{AFTER_OPTIMIZATIONS}, only "
                      f"*{BEFORE_OPTIMIZATIONS} ({named}), left out: {AFTER_PASSES}", DefinitionNote, stacklevel=2)


def content_key(files: DumpFiles) -> tuple[str | None, ...]:
    """What two ranks' dumps of a module must share to be one input: the SHA-256 of each of its files."""
    return tuple(None if p is None else _sha256(p) for p in (files.hlo, files.buffer_assignment, files.memory_report))


def _sha256(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    except OSError as exc:
        raise BadInput(f"cannot read: {exc.strerror}", path=str(path)) from None


def has_dumps(folder: Path) -> bool:
    return folder.is_dir() and any(folder.glob("*" + AFTER_OPTIMIZATIONS))


def _dump_folder(rank_dir: Path) -> Path:
    """A rank folder of a run holds its dumps in ``xla_dump/``; a plain dump folder is itself."""
    inner = rank_dir / "xla_dump"
    return inner if inner.is_dir() else rank_dir


def rank_folders(folder: Path) -> dict[int, Path]:
    """``folder/rank<R>/`` sub-folders, each rank's dump folder (empty when there are none)."""
    return {int(sub.name.removeprefix("rank")): _dump_folder(sub) for sub in rank_dirs(folder)}


def trial_order(trial: Path) -> tuple[int, str]:
    """A run's ``trials/<NN>-<variant>`` folder's place among them: by index, not by name (100 after 99)."""
    index = trial.name.split("-", 1)[0]
    return (int(index) if index.isdigit() else 1 << 30), trial.name


def run_trials(run_dir: Path) -> list[RankDumps]:
    """Every multi-rank trial of a run directory whose ranks wrote HLO dumps, in trial order."""
    folder = run_dir / "trials"
    out = []
    for trial in sorted(folder.iterdir() if folder.is_dir() else [], key=trial_order):
        if not trial.is_dir():
            continue
        ranks = rank_folders(trial)
        if len(ranks) > 1 and any(has_dumps(p) for p in ranks.values()):
            variant = trial.name.split("-", 1)[1] if "-" in trial.name else None
            out.append(RankDumps(f"trials/{trial.name}", variant, ranks))
    return out


def resolve(paths: list[str | Path]) -> list[RankDumps]:
    """The rank sets named on the command line: a run directory (every multi-rank trial with dumps), a
    folder of ``rank<R>/`` folders, or several dump folders (one per rank: ``rank<R>`` by name, else in
    argument order)."""
    folders = [Path(p) for p in paths]
    for p in folders:
        if not p.exists():
            raise BadInput("no such file or directory", path=str(p))
        if not p.is_dir():
            raise BadInput("not a folder (give a dump folder, a folder of rank<R>/ folders or a run directory)",
                           path=str(p))
    if len(folders) == 1:
        folder = folders[0]
        if (folder / "trials").is_dir():
            sets = run_trials(folder)
            if not sets:
                raise run_no_dumps(folder, "no multi-rank trial with HLO dumps (capture.xla_dump: none, or "
                                   "processes: 1?)")
            return sets
        ranks = rank_folders(folder)
        if not ranks and find_dumps(folder) is None:
            raise _no_dumps(folder, f"one per rank (`perfkit hlo-diff {folder}/*`)")
        if not ranks:
            raise BadInput("one dump folder: hlo-diff compares ranks (give a folder of rank<R>/ folders, a run "
                           "directory, or one dump folder per rank)", path=str(folder))
        return [RankDumps(str(folder), None, ranks)]
    ranks = dict(sorted(zip(_rank_numbers(folders), map(_dump_folder, folders))))
    return [RankDumps(" ".join(map(str, folders)), None, ranks)]


def _rank_numbers(folders: list[Path]) -> list[int]:
    """The ranks of folders given one per rank: from their ``rank<R>`` names (``rank<R>/xla_dump`` too)
    when every one has a distinct one, else their order."""
    found = []
    for p in folders:
        m = _RANK_DIR.match(p.name) or (p.name == "xla_dump" and _RANK_DIR.match(p.parent.name))
        found.append(int(m.group(1)) if m else None)
    return found if None not in found and len(set(found)) == len(found) else list(range(len(folders)))


def find_dumps(path: Path) -> Path | None:
    """The dump folder a path holds: itself, its ``xla_dump/`` (a rank folder), or the lowest rank's of
    its ``rank<R>/`` folders that has dumps (a trial, a rank-folder set); None when none has."""
    for candidate in (path, path / "xla_dump"):
        if has_dumps(candidate):
            return candidate
    ranks = rank_folders(path) if path.is_dir() else {}
    return next((f for f in ranks.values() if has_dumps(f)), None)


def single_dump(path: str | Path) -> Path:
    """One program's dump folder (``--ab``, ``perfkit cost``): ``find_dumps``'s, refused in one line when
    there is none."""
    folder = Path(path)
    if not folder.is_dir():
        raise BadInput("no such folder" if not folder.exists() else "not a folder", path=str(folder))
    found = find_dumps(folder)
    if found is None:
        raise _no_dumps(folder, "one of them")
    return found


def _no_dumps(folder: Path, give: str) -> BadInput:
    """A folder without dumps, refused: where its own folders hold some (a folder of dump folders, not named
    ``rank<R>``), saying to give them (``give``: how), else how to make dumps."""
    inside = sorted(p.name for p in folder.iterdir() if p.is_dir() and find_dumps(p) is not None)
    if not inside:
        dumps = _dump_folder(folder)
        return BadInput(no_dumps_reason(dumps), path=str(dumps))
    named = ", ".join(inside[:4]) + (", ..." if len(inside) > 4 else "")
    return BadInput(f"no *{AFTER_OPTIMIZATIONS} here, but {len(inside)} of its folders hold dumps ({named}): give "
                    f"{give}", path=str(folder))


def no_dumps_reason(folder: Path) -> str:
    """Why a dump folder holds no module perfkit reads: what XLA did dump there (``_what_was_dumped``), else how to
    make dumps."""
    return (_what_was_dumped(folder) if folder.is_dir() else None) or (
        f"no *{AFTER_OPTIMIZATIONS} here (XLA dumps them with --xla_dump_to=DIR, and beside another format asked for, "
        "--xla_dump_hlo_as_proto or the like, only with --xla_dump_hlo_as_text)")


def _what_was_dumped(folder: Path) -> str | None:
    """Why a folder XLA dumped into holds no module's text after optimizations; None where nothing says XLA dumped
    there (an empty folder, other files)."""
    before = len(list(folder.glob("*" + BEFORE_OPTIMIZATIONS)))
    if before:
        return f"no *{AFTER_OPTIMIZATIONS} here, only {before} *{BEFORE_OPTIMIZATIONS}: {AFTER_PASSES}"
    # XLA writes text unless another format is asked for (--xla_dump_hlo_as_proto, _as_dot, _as_html), then only
    # beside it with --xla_dump_hlo_as_text (seen on jax 0.10.2); the glob takes a module's own file, not its reports
    others = [p.name.rsplit("after_optimizations.", 1)[1] for p in folder.glob("*after_optimizations.*")]
    if others:
        kinds = ", ".join(f"*after_optimizations.{k}" for k in sorted(set(others)))
        return (f"no *{AFTER_OPTIMIZATIONS} here, only {len(others)} module{'s' * (len(others) != 1)} after "
                f"optimizations in another format ({kinds}): XLA dumps the text beside another format only with "
                "--xla_dump_hlo_as_text")
    entries = list(folder.iterdir())
    inputs = sum(p.is_dir() and _COUNTER.match(p.name) is not None for p in entries)
    options = sum(p.is_file() and p.name.endswith(DEBUG_OPTIONS) for p in entries)
    if not entries or inputs + options < len(entries):
        return None
    # A compile's inputs (module.mlir, its options) land in module_NNNN.<name>/ whatever --xla_dump_hlo_module_re
    # says (seen on jax 0.10.2); a module's HLO files, in every format, only where the pattern matches its name.
    # XLA writes a module's *.debug_options after its HLO: with those, the pattern matched.
    held = " and ".join(f"{n} {what}" for n, what in ((inputs, "module_NNNN.<name>/ folders"),
                                                       (options, f"*{DEBUG_OPTIONS}")) if n)
    return (f"no *{AFTER_OPTIMIZATIONS} here, nor any module's HLO: only {held}" +
            ("" if options else " (--xla_dump_hlo_module_re may match none of the modules)"))


def trial_no_dumps(trial: Path) -> BadInput | None:
    """Why a trial's ranks hold no module perfkit reads, where a rank folder holds what XLA dumped without a module's
    text after optimizations (``_what_was_dumped``, the first such in rank order); None where none does."""
    for folder in rank_folders(trial).values():
        said = _what_was_dumped(folder) if folder.is_dir() else None
        if said:
            return BadInput(said, path=str(folder))
    return None


def variant_dumps(run_dir: Path) -> dict[str, Path | BadInput]:
    """Each variant's XLA dumps (its lowest rank's folder): of its first trial in trial order whose dumps are whole (no
    module ``unfinished``), else of its first with any (a trial killed while it compiled may have left the step
    dumped only before optimizations, which a later trial finished). A variant none of whose trials has any, but whose
    ranks dumped something else (``trial_no_dumps``, its first such trial's), has that refusal in its place: it is
    named with why, not left out beside the variants that have dumps."""
    out: dict[str, Path | BadInput] = {}
    trials = run_dir / "trials"
    for trial in sorted(trials.iterdir() if trials.is_dir() else [], key=trial_order):
        variant = trial.name.split("-", 1)[1] if "-" in trial.name else trial.name
        held = out.get(variant)
        if not trial.is_dir() or (isinstance(held, Path) and not unfinished(held)):
            continue
        found = find_dumps(trial)
        if found is not None and not (isinstance(held, Path) and unfinished(found)):
            out[variant] = found
        elif found is None and variant not in out and (why := trial_no_dumps(trial)) is not None:
            out[variant] = why
    return out


def run_no_dumps(run_dir: Path, reason: str) -> BadInput:
    """A run directory without dumps, refused: where a trial's rank folder holds what XLA dumped without a module's
    text after optimizations, the first such in trial order says why (``variant_dumps``), else ``reason``."""
    return next((d for d in variant_dumps(run_dir).values() if isinstance(d, BadInput)),
                BadInput(reason, path=str(run_dir)))
