"""What every case kind's trial is made of, below the runner and the kinds alike: the run's options, a
trial's identity, its salt, and the environment its processes start with.

A case kind (``perfkit.run.ranks`` for model and command cases, ``perfkit.run.serve_trial`` for serve
cases) is a module with two functions, which the runner calls through ``perfkit.run.runner.KINDS``:

- ``check_runnable(case, cwd)``: raise ``BadInput`` before any trial when the case cannot run here (``cwd``: the
  folder its processes start in);
- ``run_trial(case, trial, trial_dir, options, hook, trial_port, on_tick)``: run one trial in fresh
  processes and return its ``trials.jsonl`` record, or None when it was interrupted.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import socket
from pathlib import Path

from perfkit.errors import BadInput
from perfkit.run import stackdump
from perfkit.rundata.case import Case

# With --salt: caches that would let a trial skip compiling (jax's persistent cache, torch inductor's).
SALT_ENV = {"JAX_ENABLE_COMPILATION_CACHE": "false", "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"}
# A variant's compile_cache: the persistent caches its processes start with (jax's and torch inductor's),
# with jax's thresholds off so that small programs (a CPU run's) are written too.
JAX_CACHE, INDUCTOR_CACHE = "jax", "inductor"  # a cache folder's parts
PYTHON_NAMES = ("python", "python3")  # a command's argv[0] that means "the Python perfkit runs in"


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """How a case is run (beyond the case itself); saved in run.json so --resume continues alike."""

    only: str | None = None  # run this variant only
    salt: bool = False  # every trial compiles fresh: caches off, a new PERFKIT_SALT per trial
    hosts: int = 1  # hosts that share the run directory, each running its share of the ranks
    host_index: int = 0  # which host this is
    coordinator: str | None = None  # multi-host: host:port of rank 0's host; trial k uses port + k
    run_id: str = ""  # names the run in salts (the run directory's name; the same on every host)
    cwd: str = ""  # where commands run (where perfkit was started)


@dataclasses.dataclass(frozen=True)
class Trial:
    """One run of one variant: ``round`` r holds trials r*V .. r*V+V-1 for V variants."""

    index: int
    variant: str
    round: int

    @property
    def dirname(self) -> str:
        return f"{self.index:02d}-{self.variant}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def trial_salt(options: RunOptions, trial_dir: Path, trial: Trial) -> str | None:
    """With ``--salt``: the same on every rank and host of a trial (one program), new for every trial,
    cell and run; None without it."""
    if not options.salt:
        return None
    scope = f"{options.run_id}/{trial_dir.parent.parent.name}/{trial.index}"
    return hashlib.sha256(scope.encode()).hexdigest()[:16]


def compile_cache_env(folder: Path) -> dict[str, str]:
    """The variables that point jax's persistent compilation cache and torch inductor's cache at
    ``folder``."""
    return {"JAX_ENABLE_COMPILATION_CACHE": "true", "JAX_COMPILATION_CACHE_DIR": str(folder / JAX_CACHE),
            "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0", "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "-1",
            "TORCHINDUCTOR_CACHE_DIR": str(folder / INDUCTOR_CACHE)}


def cache_entries(folder: Path) -> dict[str, int]:
    """What a compile cache folder holds, counted on disk (any program, any kind): jax's entries (one
    ``<module>-<key>-cache`` file per compiled program; its ``-atime`` files are not entries) and
    inductor's files."""
    return {"jax_entries": sum(1 for p in (folder / JAX_CACHE).rglob("*-cache") if p.is_file()),
            "inductor_files": sum(1 for p in (folder / INDUCTOR_CACHE).rglob("*") if p.is_file())}


def process_env(overrides: dict[str, str], rank_dir: Path, hook: Path | None, salt: str | None) -> dict[str, str]:
    """The environment a rank or server starts with: perfkit's own with ``overrides`` on top, unbuffered
    output, the stack-dump hook first on PYTHONPATH (dumps into ``rank_dir``), and with a salt the
    compile caches off and ``PERFKIT_SALT`` set."""
    env = dict(os.environ)
    env.pop(stackdump.OWNER_ENV, None)
    env.update(overrides)
    env.update({"PYTHONUNBUFFERED": "1", stackdump.STACKS_ENV: str(rank_dir / "stacks.txt")})
    if salt is not None:
        env.update({**SALT_ENV, "PERFKIT_SALT": salt})
    if hook is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(hook), env.get("PYTHONPATH")]))
    return env


def run_names(case: Case, only: str | None) -> list[str]:
    """Variants the trials run: all (A/A control included), or ``only`` (with its A/A control)."""
    names = [v.name for v in case.run_variants()]
    if only is None:
        return names
    return [only] + ([case.aa_name] if case.aa and only == names[0] else [])


def check_program(prog: str, case: Case, field: str) -> None:
    """A program named on PATH that is not there is bad input (perfkit's own Python always is)."""
    if prog not in PYTHON_NAMES and os.sep not in prog and shutil.which(prog) is None:
        raise BadInput(f"program {prog!r} not found on PATH", path=case.source, field=field)


SCRIPTS = (".py", ".sh")  # an argument with these endings is a script the command reads, never one it writes


def check_scripts(case: Case, argv: list[str], field: str, cwd: str, *, program: bool = False) -> None:
    """A program (``argv[0]`` where ``program``, named by a path) or ``.py`` / ``.sh`` script that is not there is bad
    input: every trial would crash the same way (`can't open file ... [Errno 2]`). A relative path is looked for as the
    launch finds it, from ``cwd``, where the processes start. Only the program and scripts: another path may be an
    output the command writes."""
    folder = None if case.source.startswith("<") else str(Path(case.source).resolve().parent) + os.sep
    for i, arg in enumerate(argv):
        if not ((program and i == 0 and os.sep in arg) or arg.endswith(SCRIPTS)) or (Path(cwd) / arg).exists():
            continue
        if folder is not None and arg.startswith(folder):
            where = f" ({{case_dir}}/{arg[len(folder):]})"
        elif not os.path.isabs(arg):
            beside = folder is not None and Path(folder, arg).exists()
            where = f" (looked for from {cwd}, where commands run" + (
                f"; the case's folder holds one: name it {{case_dir}}/{arg})" if beside else ")")
        else:
            where = ""
        raise BadInput(f"no such file {arg}{where}", path=case.source, field=field)
