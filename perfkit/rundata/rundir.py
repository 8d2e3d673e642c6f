"""The run directory on disk: trial records, run options, host parts, a matrix run's cells.

One host writes ``trials.jsonl`` and ``run.json`` at the top of the run directory. In a multi-host run
each host writes its own part, ``hosts/host<I>/{trials.jsonl,run.json,env.json,done}``, into the one
shared run directory; the host that finishes last (or ``perfkit report RUN_DIR``) merges the parts into
the top-level ``trials.jsonl`` and writes the summary and report. Each host appends only to its own
files, so no two machines ever write the same file.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import shlex
from collections.abc import Iterable
from pathlib import Path

from perfkit.common.json_figures import json_safe
from perfkit.errors import BadInput
from perfkit.rundata.trials import TrialRecord

CHECK_SUMMARY = "PERFKIT_CHECK_SUMMARY"  # set (the test suite does): each summary.json written is validated

_RANK_DIR = re.compile(r"rank(\d+)")
REPORT_CLAIM = "report.claim"  # hosts/report.claim: taken by the host of a multi-host run that writes the report

STATUS_RANK = {"hung": 0, "crashed": 1, "incomplete": 2, "no_steps": 3, "ok": 4}  # worst first


def run_folder(run_dir: str | Path) -> Path:
    """``run_dir`` as a Path, refused in one line (``BadInput``) when it is no folder or no run directory
    (a run writes ``case.yaml`` before its first trial), rather than read as a run with no trials."""
    path = Path(run_dir)
    if not path.is_dir():
        raise BadInput("no such run directory", path=str(path))
    if not (path / "case.yaml").exists():
        raise BadInput("not a perfkit run directory (no case.yaml)", path=str(path))
    return path


def part_dir(run_dir: Path, host_index: int, hosts: int) -> Path:
    """Where one host keeps its files: the run directory itself, or ``hosts/host<I>`` with many."""
    return run_dir if hosts == 1 else run_dir / "hosts" / f"host{host_index}"


def resume_command(run_dir: Path) -> str:
    """The command that runs the rest of the run ``run_dir`` belongs to: the top of a matrix run (its
    ``cells/NN`` is no run of its own to resume), absolute, and each host's index where there are several."""
    top = matrix_of(run_dir.absolute()) or run_dir.absolute()
    hosts = " --host-index <this host, 0..>" if (top / "hosts").is_dir() else ""
    return f"perfkit run --resume {shlex.quote(str(top))}{hosts}"


def matrix_of(run_dir: Path) -> Path | None:
    """The matrix run whose combination ``run_dir`` is (``cells/NN``: a run directory, but none to resume), or None.
    Its case.yaml marks it: its run.json may be each host's, in ``hosts/host<I>/``."""
    top = run_dir.parent.parent
    return top if run_dir.parent.name == "cells" and (top / "case.yaml").exists() else None


def rank_dirs(trial_dir: Path) -> list[Path]:
    """A trial folder's ``rank<R>`` folders by rank number, not by name (rank10 after rank9); empty when it
    has none or is no folder."""
    if not trial_dir.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in trial_dir.iterdir() if (m := _RANK_DIR.fullmatch(p.name)) and p.is_dir()]
    return [p for _, p in sorted(found)]


def trial_of(paths: Iterable[str | Path]) -> tuple[Path, str, TrialRecord | None] | None:
    """The run directory, folder (``trials/<NN>-<variant>``, as a record's ``dir``) and ``trials.jsonl`` record of the
    one trial folder that all ``paths`` lie in (it, a ``rank<R>`` folder, its ``trace`` folder or a file under them);
    the record None where trials.jsonl holds none (the trial still running, or stopped by Ctrl-C). None where the
    paths lie in no trial folder of a run directory (one with ``case.yaml``), or in several."""
    found = set()
    for path in map(Path, paths):
        path = path.resolve()  # (a relative path's folders above it, and "..", are not in its parts)
        found.add(next((p for p in (path, *path.parents) if p.parent.name == "trials"
                        and (p.parent.parent / "case.yaml").is_file()), None))
    if len(found) != 1 or None in found:
        return None
    trial = found.pop()
    run, folder = trial.parent.parent, f"trials/{trial.name}"
    records = [t for t in read_trials(run) if t.get("dir") == folder]
    return run, folder, records[-1] if records else None


def cell_dir(run_dir: Path, index: int) -> Path:
    """A matrix run's combination ``index`` (``case.expand_matrix``'s order), a run directory of its own:
    ``cells/NN``, the index in two digits or more."""
    return run_dir / "cells" / f"{index:02d}"


def cell_dirs(run_dir: Path) -> list[Path]:
    """A matrix run's combinations (``cell_dir``), in order: by number, not by name (cells/100 after cells/99)."""
    cells = run_dir / "cells"
    # a longer name is a larger number: the names are the indices zero-padded to the same two digits
    return sorted((p for p in cells.iterdir() if p.is_dir()), key=lambda p: (len(p.name), p.name)) \
        if cells.is_dir() else []


@contextlib.contextmanager
def held(part: Path, run_dir: Path):
    """The run's folder (a host's part) held by the perfkit running it (an flock, gone with the process however it
    ends): a second one on it, a --resume while the run goes on, would run the same trials and both append them to
    trials.jsonl; ``running`` tells a reader, as ``perfkit check``, that the run is still going."""
    fd = os.open(part, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BadInput("another perfkit is running this run: wait for it to end, or stop it (Ctrl-C) before "
                           "--resume", path=str(run_dir)) from None
        yield
    finally:
        os.close(fd)


def running(part: Path) -> bool:
    """Whether a perfkit is running the run in ``part`` now (it holds the folder: ``held``)."""
    fd = os.open(part, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


@contextlib.contextmanager
def disk_full_is_one_line(path: Path):
    """A full disk ends the run with one line naming the file (``BadInput``); what was written stays."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        raise BadInput("no space left on device (finished trials are kept: free some, then --resume)",
                       path=str(path)) from None


def write_atomic(path: Path, text: str) -> None:
    """Readers (other hosts, ``perfkit report``) never see half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with disk_full_is_one_line(path):
        tmp.write_text(text)
        os.replace(tmp, path)


def append_trial(part: Path, record: TrialRecord) -> None:
    """One finished trial, appended and flushed at once (nothing finished is ever lost)."""
    with disk_full_is_one_line(part / "trials.jsonl"), open(part / "trials.jsonl", "a+b") as f:
        size = f.seek(0, os.SEEK_END)
        # After a perfkit killed mid-line, the next record still starts a line of its own.
        torn = size > 0 and os.pread(f.fileno(), 1, size - 1) != b"\n"
        f.write((("\n" if torn else "") + json.dumps(record) + "\n").encode())
        f.flush()
        os.fsync(f.fileno())


def read_trials(part: Path) -> list[TrialRecord]:
    """``part``'s trials.jsonl, a record a whole line, as every reader of a run takes it (the report, --resume,
    check, trace, quality): a line that is no JSON, cut short by a killed perfkit, is skipped (``lost_trials`` and
    ``torn_end`` name it); each record held to ``TrialRecord`` (its JSON Schema), one that is not a record this
    perfkit writes (edited, or another program's) refused (``BadInput``: its line and field), never read as a trial."""
    path = part / "trials.jsonl"
    try:
        stat = path.stat()
    except FileNotFoundError:
        return []
    # jsonschema: only where a run's records are read, off the path of every command's start (the CLI imports this)
    from perfkit.rundata import schema

    # A run's end reads its records several times (its plan, its summary, its frames): the file unchanged since it
    # was last validated is not validated again (validation costs many times the parse on long step lists).
    seen = (str(path.resolve()), stat.st_ino, stat.st_size, stat.st_mtime_ns)
    out = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if seen not in _VALIDATED:
            try:
                schema.validate(record, "trial", path)
            except BadInput as exc:
                raise BadInput(exc.reason, path=str(path), field=": ".join(filter(None, (f"line {number}",
                                                                                         exc.field)))) from None
        out.append(record)
    _VALIDATED.add(seen)
    return out


_VALIDATED: set[tuple] = set()  # trials.jsonl files as they stood when read_trials validated them whole


def lost_trials(trials: list[TrialRecord], planned: Iterable[int]) -> list[int]:
    """The trials of the plan (``planned``: its indices, some places empty where a variant sat rounds out) below the
    highest of ``trials`` (``read_trials``) that ``trials.jsonl`` holds no whole record of: a line damaged or cut
    short, its trial never recorded again (``--resume`` runs it again)."""
    indexes = {t.get("index") for t in trials} - {None}
    done = {i for i in indexes if isinstance(i, int) and i >= 0}
    return sorted(i for i in planned if i < max(done) and i not in done) if done else []


# A record's first keys, as ``append_trial`` writes them, where a cut line still holds them whole
CUT_RECORD = re.compile(rb'\{"index": (?P<index>-?\d+)(?:, "variant": (?P<variant>"(?:[^"\\]|\\.)*"))?[,}]')


def unreadable_trials(part: Path) -> tuple[set[int], list[dict]]:
    """The trials that a line of ``part``'s trials.jsonl begins a record of but holds no whole one of (cut short or
    damaged: ``read_trials`` skips it), as far as the line still names its trial (``CUT_RECORD``); and of each such
    line that names none (damaged before the trial's number), what the rest of its record still says of its trial
    (``told_keys``: ``{}`` where nothing)."""
    path = part / "trials.jsonl"
    found, untold = set(), []
    for line in path.read_bytes().splitlines() if path.exists() else []:
        try:
            json.loads(line)
        except ValueError:
            if start := CUT_RECORD.match(line):
                found.add(int(start["index"]))
            else:
                untold.append(told_keys(line))
    return found, untold


# The keys after a record's index that name its trial, in the order ``append_trial`` writes them
TRIAL_KEYS = ("variant", "round", "dir")


def told_keys(line: bytes) -> dict:
    """What a damaged line's record still says of its trial (``TRIAL_KEYS``): the record read from one of those keys
    on, where that rest of the line is a whole JSON object (the damage lies before it); ``{}`` where none is. A rest
    begun at a key of a nested object is never whole: its object's end would leave the line's brackets unmatched."""
    for key in TRIAL_KEYS:
        at = line.find(b'"%s": ' % key.encode())
        if at < 0:
            continue
        try:
            rest = json.loads(b"{" + line[at:])
        except ValueError:
            continue
        return {k: rest[k] for k in TRIAL_KEYS if k in rest} if isinstance(rest, dict) else {}
    return {}


def torn_end(part: Path) -> dict | None:
    """Where ``trials.jsonl``'s last line is cut short (perfkit was killed while writing a trial, so the run did
    not finish; ``append_trial`` starts the next record on a line of its own), its trial's ``index`` and
    ``variant`` as far as the cut left them whole (``{}``: neither); None where the line is whole."""
    path = part / "trials.jsonl"
    if not path.exists():
        return None
    line = path.read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    try:
        json.loads(line or b"{}")
    except ValueError:
        found = CUT_RECORD.match(line)
        return {k: json.loads(v) for k, v in found.groupdict().items() if v is not None} if found else {}
    return None


def write_summary(run_dir: Path, summary: dict) -> None:
    """``summary.json`` as the contract spells it (NaN null, infinities as strings); with ``CHECK_SUMMARY`` set,
    then validated against the shipped schema: a summary perfkit writes that its own types refuse is a bug,
    found where it is written rather than where ``check`` reads it back."""
    data = json_safe(summary)
    (run_dir / "summary.json").write_text(json.dumps(data, indent=2))
    if os.environ.get(CHECK_SUMMARY):
        # jsonschema: only where asked, off the path of every command's start (the CLI imports this module)
        from perfkit.rundata import schema

        schema.validate(data, "summary", run_dir / "summary.json")


def read_summary(run_dir: Path) -> dict:
    """A run directory's ``summary.json``; bad input when it is missing or not JSON."""
    path = run_dir / "summary.json"
    if not run_dir.is_dir():
        raise BadInput("no such run directory", path=str(run_dir))
    if not path.is_file() and not (run_dir / "case.yaml").is_file():  # (report would refuse it too)
        raise BadInput("not a perfkit run directory (no summary.json, no case.yaml)", path=str(run_dir))
    if not path.is_file():
        raise BadInput(f"no summary.json (write it with `perfkit report {run_dir}`)", path=str(run_dir))
    try:
        return json.loads(path.read_text())
    except ValueError as exc:
        raise BadInput(f"not valid JSON ({exc})", path=str(path)) from None


def write_options(part: Path, options: dict) -> None:
    write_atomic(part / "run.json", json.dumps(options, indent=2))


def read_options(run_dir: Path, host_index: int | None) -> dict:
    """The options a run was started with (for ``--resume``); multi-host runs need the host index."""
    if matrix_of(run_dir):
        raise BadInput(f"a combination of a matrix run: `{resume_command(run_dir)}` runs the rest of the matrix",
                       path=str(run_dir))
    if (run_dir / "run.json").exists():
        return json.loads((run_dir / "run.json").read_text())
    hosts = sorted((run_dir / "hosts").glob("host*/run.json"))
    if not hosts:
        raise BadInput("not a perfkit run directory (no run.json)", path=str(run_dir))
    if host_index is None:
        raise BadInput(f"a multi-host run: say which host this is (--host-index 0..{len(hosts) - 1})",
                       path=str(run_dir), field="--host-index")
    path = part_dir(run_dir, host_index, len(hosts)) / "run.json"
    if not path.exists():
        raise BadInput(f"no part for host {host_index}", path=str(run_dir), field="--host-index")
    return json.loads(path.read_text())


def started_options(run_dir: Path) -> dict:
    """The options a run was started with, as far as its report needs them (``run.json``: of the run, its
    host 0, or the matrix run holding this cell); empty when none is found. ``--resume`` reads its host's
    (``read_options``)."""
    candidates = [run_dir / "run.json", run_dir / "hosts" / "host0" / "run.json"]
    if run_dir.parent.name == "cells":  # (a matrix on several hosts: its host 0's)
        candidates += [run_dir.parent.parent / "run.json", run_dir.parent.parent / "hosts" / "host0" / "run.json"]
    return next((json.loads(p.read_text()) for p in candidates if p.exists()), {})


def left_out_by_only(only: str) -> str:
    """Why a variant the run's ``only`` (``started_options``) left out has no figure: the one phrase its rows of
    ``perfkit check``, its rank summary and its report give."""
    return f"not run, the run was started with --only {only}"


def left_out(summary: dict, run_dir: Path | None) -> dict[str, str]:
    """The variants of ``summary`` the run's ``--only`` left out (run.json's ``only``), each with the phrase saying
    so (``left_out_by_only``): they ran no trial, and the run's only is not them (a run stopped before its only
    variant's first trial left none out)."""
    only = started_options(run_dir).get("only") if run_dir is not None else None
    return {v: left_out_by_only(only) for v, s in summary["variants"].items()
            if only not in (None, v) and s.get("trials", 1) == 0}


def left_out_of(summary: dict) -> dict[str, str]:
    """``left_out`` of the run whose summary this is, from the run.json in its ``run_dir`` (none where it names
    none)."""
    return left_out(summary, Path(summary["run_dir"]) if summary.get("run_dir") else None)


def left_out_text(variants: Iterable[str], left_out: dict[str, str] | None) -> str:
    """Which of ``variants`` the run's ``--only`` left out (``left_out``), as a row's note names them: "a: not run,
    the run was started with --only b"; "" where none was."""
    return "; ".join(f"{v}: {left_out[v]}" for v in variants if v in (left_out or {}))


def mark_done(part: Path, interrupted: bool) -> None:
    write_atomic(part / "done", json.dumps({"interrupted": interrupted}))


def host_parts(run_dir: Path) -> list[Path]:
    return sorted((run_dir / "hosts").glob("host*"), key=lambda p: int(p.name[4:]))


def planned_hosts(run_dir: Path) -> int:
    """How many hosts a multi-host run was started on, as its parts' run.json give it (a matrix's cell: the matrix's):
    a host that never started has no part to count."""
    top = run_dir.parent.parent if run_dir.parent.name == "cells" else run_dir
    started = [json.loads(p.read_text()).get("hosts", 1) for p in (top / "hosts").glob("host*/run.json")]
    return max([len(host_parts(run_dir)), *started])


def absent_hosts(run_dir: Path, hosts: int) -> list[int]:
    """The hosts of ``hosts`` with no part in ``run_dir``."""
    return sorted(set(range(hosts)) - {int(p.name[4:]) for p in host_parts(run_dir)})


def all_hosts_done(run_dir: Path, hosts: int) -> bool:
    return sum((p / "done").exists() for p in host_parts(run_dir)) >= hosts


def claim_report(run_dir: Path) -> bool:
    """True for one caller only, until ``release_report``: of two hosts that finish at once, each sees every
    host done, and one alone may write summary.json, report.md and the plots."""
    (run_dir / "hosts").mkdir(parents=True, exist_ok=True)
    try:
        os.close(os.open(run_dir / "hosts" / REPORT_CLAIM, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def release_report(run_dir: Path) -> None:
    """A resumed host runs again: once every host is done, the report is written anew."""
    (run_dir / "hosts" / REPORT_CLAIM).unlink(missing_ok=True)


def any_host_interrupted(run_dir: Path) -> bool:
    return any(json.loads((p / "done").read_text()).get("interrupted")
               for p in host_parts(run_dir) if (p / "done").exists())


def merge_trial(records: dict[int, TrialRecord], hosts: int, cut: Iterable[int] = (),
                untold: Iterable[int] = ()) -> TrialRecord:
    """One trial as every host saw it (``records`` by host index): steps from the host holding rank 0, all ranks,
    the worst status (``incomplete`` when a host has no whole record of it, so that the report says why: those of
    ``cut``, whose line of it is cut short or damaged, in ``cut_hosts``; those of ``untold``, holding a damaged line
    that names no trial (it may have been this one's), in ``untold_hosts``; the others, e.g. stopped before it, in
    ``missing_hosts``)."""
    ordered = sorted(records.values(), key=lambda r: min((x["rank"] for x in r["ranks"]), default=0))
    merged = ordered[0].copy()  # (a TrialRecord still, as dict() would not be to a type checker)
    merged["ranks"] = sorted((x for r in ordered for x in r["ranks"]), key=lambda x: x["rank"])
    lacking = set(range(hosts)) - set(records)
    statuses = [r["status"] for r in ordered] + (["incomplete"] if lacking else [])
    merged["status"] = min(statuses, key=lambda s: STATUS_RANK.get(s, -1))
    merged["wall_s"] = max(r["wall_s"] for r in ordered)
    cut, untold = lacking & set(cut), (lacking - set(cut)) & set(untold)
    if lacking - cut - untold:
        merged["missing_hosts"] = sorted(lacking - cut - untold)
    if cut:
        merged["cut_hosts"] = sorted(cut)
    if untold:
        merged["untold_hosts"] = sorted(untold)
    return merged


def merge_hosts(run_dir: Path, hosts: int) -> list[TrialRecord]:
    """Merge every host's ``trials.jsonl`` into the top-level one (a trial that one of the run's ``hosts`` has no
    whole record of, its line damaged or cut short as ``read_trials`` skips it, or never written, is incomplete), each
    record checked (``read_trials``); returns the merged trials."""
    by_index: dict[int, dict[int, TrialRecord]] = {}
    cut: dict[int, set[int]] = {}
    untold: dict[int, set[int]] = {}  # trial -> the hosts lacking it whose damaged line naming no trial may hold it
    for part in host_parts(run_dir):
        host = int(part.name[4:])
        for rec in read_trials(part):
            by_index.setdefault(rec["index"], {})[host] = rec
    for part in host_parts(run_dir):
        host = int(part.name[4:])
        named, unnamed = unreadable_trials(part)
        for index in named:
            cut.setdefault(index, set()).add(host)
        lacks = sorted(i for i, recs in by_index.items() if host not in recs)
        maybe: set[int] = set()
        for said in unnamed:
            # the trials whose records agree with what is left of the line's (its folder names one; nothing left, all)
            fits = [i for i, recs in by_index.items()
                    if all(next(iter(recs.values())).get(k) == v for k, v in said.items())]
            if said and len(fits) == 1:
                if fits[0] in lacks:  # (else the host recorded that trial again, whole)
                    cut.setdefault(fits[0], set()).add(host)
            else:
                maybe |= set(fits) & set(lacks)
        if maybe and len(unnamed) == 1 and torn_end(part) == {}:
            # the runner runs the plan in order: where the host recorded every trial below the lowest it lacks and
            # none above, its cut last line began that one (as finish's stderr line names it from the plan)
            if all(i < lacks[0] for i, recs in by_index.items() if host in recs):
                cut.setdefault(lacks[0], set()).add(host)
                maybe = set()
        for index in maybe:
            untold.setdefault(index, set()).add(host)
    merged = [merge_trial(recs, hosts, cut.get(i, ()), untold.get(i, ())) for i, recs in sorted(by_index.items())]
    write_atomic(run_dir / "trials.jsonl", "".join(json.dumps(t) + "\n" for t in merged))
    return merged
