"""Python stack dumps of every thread of a hung rank, without changing the rank's program.

The runner writes this very file as ``sitecustomize.py`` into a folder it puts first on the ranks'
``PYTHONPATH``. Every Python process of a rank then registers ``faulthandler`` on SIGUSR1 (a C-level
handler: it dumps even when the main thread is stuck inside a native call such as a hung collective)
writing to ``PERFKIT_STACKS``; the watchdog sends SIGUSR1 to the trial's process group, waits briefly,
then ends the group (``perfkit.run.launch``). Fatal signals (SIGSEGV ...) are dumped to the same file unless the program already
enabled faulthandler: every thread's stack while the program runs, the faulting thread's alone once the interpreter
shuts down (its atexit callbacks done), and the process then dies of its own signal. The sitecustomize that ours
shadows, if any, still runs (we chain to it).

Standard library only: the rank's Python may not have perfkit installed.
"""

from __future__ import annotations

import atexit
import faulthandler
import importlib.machinery
import importlib.util
import os
import signal
import sys
from pathlib import Path

STACKS_ENV = "PERFKIT_STACKS"  # the rank's stacks file; processes it starts write beside it
OWNER_ENV = "PERFKIT_STACKS_PID"  # set by the rank's first Python process, inherited by its children


def install(path: str) -> None:
    """Dump every thread's stack to ``path`` on SIGUSR1 (``path-<pid>.txt`` in the rank's children)."""
    if os.environ.setdefault(OWNER_ENV, str(os.getpid())) != str(os.getpid()):
        path = f"{os.path.splitext(path)[0]}-{os.getpid()}.txt"
    # a bare descriptor, never closed: shutdown closes file objects before a late fatal dump would use it
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
    faulthandler.register(signal.SIGUSR1, file=fd, all_threads=True)
    if not faulthandler.is_enabled():
        faulthandler.enable(file=fd, all_threads=True)
        # Shutdown frees other threads' states while an all-threads dump may walk them: the dump then crashes
        # and the rank dies of SIGSEGV, not of its own signal (a C++ teardown's abort). Registered first, run last.
        atexit.register(_own_thread_at_exit, fd)


def _own_thread_at_exit(fd: int) -> None:
    """From here on a fatal dump shows the faulting thread alone; a program that turned dumps off keeps them off."""
    if faulthandler.is_enabled():
        faulthandler.enable(file=fd, all_threads=False)


def chain_next_sitecustomize() -> None:
    """Run the sitecustomize this file shadows (the next one on sys.path), as Python would have."""
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


def hook_dir(parent: Path) -> Path:
    """Write the hook folder (this file as ``sitecustomize.py``) under ``parent``; returns the folder."""
    folder = parent / "pyhook"
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".sitecustomize.{os.getpid()}.tmp"
    tmp.write_text(Path(__file__).read_text())
    os.replace(tmp, folder / "sitecustomize.py")  # ranks starting meanwhile never read half a file
    return folder


def dumped(path: Path) -> bool:
    return path.exists() and path.stat().st_size > 0


def collect(rank_dir: Path) -> str | None:
    """The stacks a rank's processes dumped, the rank's own first (empty files removed), or None."""
    parts = []
    for p in sorted(rank_dir.glob("stacks*.txt"), key=lambda p: (p.name != "stacks.txt", p.name)):
        text = p.read_text(errors="replace")
        if not text.strip():
            p.unlink()
            continue
        parts.append(text if p.name == "stacks.txt" else f"[child process {p.stem.split('-')[-1]}]\n{text}")
    return "\n".join(parts) if parts else None


if __name__ == "sitecustomize":
    if os.environ.get(STACKS_ENV):
        install(os.environ[STACKS_ENV])
    chain_next_sitecustomize()
