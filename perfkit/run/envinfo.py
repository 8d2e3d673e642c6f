"""What a run ran on: package versions, devices, the source tree and the flags that change programs.

Devices are probed in a child process: importing jax's backend in perfkit's own process would hold a
TPU that the trial processes then cannot open.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import socket
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from perfkit.common import extras

PACKAGES = ("perfkit", "jax", "jaxlib", "libtpu", "torch", "torch_tpu", "numpy")
FLAG_VARS = ("XLA_FLAGS", "LIBTPU_INIT_ARGS", "JAX_PLATFORMS", "NPROC")
SOURCE_ROOT = Path(__file__).resolve().parents[2]  # the checkout perfkit runs from: a run's source tree

_DEVICE_PROBE = (
    "import json, jax; d = jax.devices(); "
    "print(json.dumps({'platform': d[0].platform, 'kind': d[0].device_kind, 'count': len(d), "
    "'process_count': jax.process_count()}))"
)


def package_versions() -> dict[str, str | None]:
    """Installed version of each of ``PACKAGES`` (None when absent); importlib.metadata matches
    ``torch_tpu`` and ``torch-tpu`` alike."""
    out = {}
    for name in PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        res = subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return res.stdout.decode(errors="replace") if res.returncode == 0 else None


def source_tree(cwd: str | Path = ".") -> dict:
    """Git commit, tree hash, a hash of uncommitted changes (tracked diff plus the untracked files that may be code,
    ``_code``) and the checkout's root folder (where the commit is)."""
    cwd = Path(cwd)
    commit = _git(["rev-parse", "HEAD"], cwd)
    if commit is None:
        return {"git": False}
    tree = _git(["rev-parse", "HEAD^{tree}"], cwd) or ""
    root = (_git(["rev-parse", "--show-toplevel"], cwd) or "").strip() or None
    top = Path(root) if root else cwd
    changed = (_git(["status", "--porcelain", "--untracked-files=no"], cwd) or "").strip()
    untracked = _code(top, _git(["ls-files", "--others", "--exclude-standard", "-z"], top) or "")
    dirty = bool(changed or untracked)
    digest = None
    if dirty:
        h = hashlib.sha256((_git(["diff", "HEAD", "--binary"], cwd) or "").encode())
        for name in untracked:
            h.update(name.encode())
            try:
                h.update((top / name).read_bytes())
            except OSError:
                pass
        digest = h.hexdigest()[:12]
    return {"git": True, "commit": commit.strip(), "tree": tree.strip()[:12], "dirty": dirty,
            "dirty_hash": digest, "root": root}


def _code(top: Path, listed: str) -> list[str]:
    """The untracked files of ``listed`` (``git ls-files -z`` under ``top``) that may be code the run ran, by name:
    not logs, nor files inside a run directory (a run's outputs, its own where ``--out`` lies in the checkout:
    ``_run_dir``)."""
    runs: dict[Path, bool] = {}  # each folder looked at once
    return [name for name in sorted(filter(None, listed.split("\0"))) if not name.endswith(".log")
            and not any(_run_dir(top / folder, runs) for folder in list(Path(name).parents)[:-1])]  # [-1]: "."


def _run_dir(folder: Path, seen: dict[Path, bool]) -> bool:
    """Whether ``folder`` is one of perfkit's run directories, or one host's part of one: run.json beside case.yaml,
    case.yaml beside hosts/ (a run writes both before it collects this), or ``hosts/host<I>`` holding a run.json of
    host I (host 0 alone writes case.yaml, maybe after this host collects this). A run.json elsewhere is the user's:
    its folder's files may be code."""
    if folder not in seen:
        seen[folder] = (folder / "case.yaml").is_file() and ((folder / "run.json").is_file()
                                                             or (folder / "hosts").is_dir()) or _host_part(folder)
    return seen[folder]


def _host_part(folder: Path) -> bool:
    """Whether ``folder`` is ``hosts/host<I>`` holding the run.json perfkit writes there: the options of host I."""
    host = re.fullmatch(r"host([0-9]+)", folder.name)
    if folder.parent.name != "hosts" or not host:
        return False
    try:
        options = json.loads((folder / "run.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(options, dict) and options.get("host_index") == int(host[1])


def outside_scripts(argvs: list[list[str]], cwd: Path, root: str | None, suffixes: tuple[str, ...]) -> list[dict]:
    """The scripts (files ending in ``suffixes``) that ``argvs`` name outside the checkout ``root`` (every one where
    there is none), or inside it but ignored by git (``ignored: true``), each ``{path, sha256}`` as it is now: the
    commit and its dirty hash cover the files git tracks, or would (untracked, not ignored), alone, so these are named
    and hashed for the run to be reproduced."""
    paths = dict.fromkeys(p for p in ((cwd / a).resolve() for argv in argvs for a in argv if a.endswith(suffixes))
                          if p.is_file())
    inside = [p for p in paths if root and p.is_relative_to(Path(root).resolve())]
    # git check-ignore prints those of the paths given that the checkout ignores (none: exit 1, read as none)
    ignored = set((_git(["check-ignore", "--", *map(str, inside)], Path(root)) or "").splitlines()) if inside else set()
    out = []
    for path in paths:
        if path in inside and str(path) not in ignored:
            continue
        try:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            continue
        out.append({"path": str(path), "sha256": digest, **({"ignored": True} if path in inside else {})})
    return out


def probe_devices(env: dict[str, str] | None = None, timeout: float = 60) -> dict:
    """jax's devices as a child process sees them with ``env`` (platform, kind, count)."""
    if extras.missing("jax"):
        return {"error": "no device probe: jax is not installed (the 'jax' extra)"}
    try:
        res = subprocess.run([sys.executable, "-c", _DEVICE_PROBE], capture_output=True,
                             timeout=timeout, env=env)
        return json.loads(res.stdout.decode().strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as exc:
        return {"error": f"device probe failed: {exc}"}


def collect(cwd: str | Path = SOURCE_ROOT, *, devices_env: dict[str, str] | None = None,
            probe: bool = True) -> dict:
    info = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "host": socket.gethostname(),
        "cpus": os.cpu_count(),
        "packages": package_versions(),
        "source": source_tree(cwd),
        "flags": {k: os.environ.get(k) for k in FLAG_VARS if os.environ.get(k)},
    }
    if probe:
        info["devices"] = probe_devices(devices_env)
    return info
