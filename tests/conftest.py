"""Test session set-up: 8 simulated CPU devices, set before anything imports jax; a private temp folder and a
check at the end that the suite left no process, thread or temp file behind."""

import contextlib
import fcntl
import gc
import getpass
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

os.environ["XLA_FLAGS"] = " ".join(
    f for f in os.environ.get("XLA_FLAGS", "").split() if "device_count" not in f
) + " --xla_force_host_platform_device_count=8"
os.environ.setdefault("NPROC", "16")  # Pallas interpret kernels deadlock with fewer threads
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["PERFKIT_CHECK_SUMMARY"] = "1"  # every summary.json a test's run writes holds to the shipped schema

REPO = Path(__file__).resolve().parent.parent
REAL = REPO / "tests" / "data" / "real"  # the real files from other projects (its README: source, licence)


# The folders whose tests assert every DefinitionNote their input gives (``pytest.warns``, trace/noted.py) and whose
# hand-built inputs write what real files hold: a note a test there does not assert fails it.
NOTES_FAIL_IN = tuple(REPO / "tests" / name for name in ("trace", "hlo"))
NOTES_FAIL = pytest.mark.filterwarnings("error::perfkit.errors.DefinitionNote")


def pytest_collection_modifyitems(items):
    for item in items:
        if any(folder in item.path.resolve().parents for folder in NOTES_FAIL_IN):
            item.add_marker(NOTES_FAIL, append=False)  # first: a test's own filterwarnings marks come after it


def pytest_configure(config):
    # Started as a background job of a non-interactive shell (`make test &`), the suite has SIGINT ignored,
    # and every process it starts would inherit that: the tests that stop a run with Ctrl-C need it delivered.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _collector_unfrozen():
    """A trace command run here (CliRunner) sets aside the objects of this process as a command's own process
    (``perfkit.cli.trace._prepare``): the next test starts with them collectable again."""
    yield
    gc.unfreeze()


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """tests/data/real, the real files the repository carries: a test reading one that is missing fails."""
    return REAL


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory, worker_id) -> Path:
    """The demo's run, once a session and shared by xdist's workers (a file lock): the quickstart case with two
    trials a variant (its traces, XLA dumps and outputs, so summary.json holds breakdown, attribution, cost and
    quality; two repeats, so the gate's determinism rows have something to compare). Read it only; a test that
    writes into a run copies it into its tmp_path."""
    base = tmp_path_factory.getbasetemp()
    root = (base if worker_id == "master" else base.parent) / "demo_run"
    root.mkdir(exist_ok=True)
    run = root / "quickstart"
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / "done").exists():
            shutil.rmtree(run, ignore_errors=True)
            done = subprocess.run([sys.executable, "-m", "perfkit.cli", "run", "cases/quickstart.yaml", "--out",
                                   str(run), "--set", "repeats.min=2", "--set", "repeats.max=2"],
                                  cwd=REPO, capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, done.stdout + done.stderr[-3000:]
            (root / "done").touch()
    return run


@pytest.fixture(scope="session")
def built_once(tmp_path_factory, worker_id):
    """built_once(name, build): the folder ``name``, filled by ``build(folder)`` once a session and shared by
    xdist's workers (a file lock a name), for a module's fixture that compiles models or runs programs: worksteal
    may run one module's tests on both workers, and each would build it. Read it only."""
    base = tmp_path_factory.getbasetemp()
    root = (base if worker_id == "master" else base.parent) / "built_once"
    root.mkdir(exist_ok=True)

    def get(name: str, build) -> Path:
        folder = root / name
        with open(root / f"{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (root / f"{name}.done").exists():
                shutil.rmtree(folder, ignore_errors=True)
                folder.mkdir()
                build(folder)
                (root / f"{name}.done").touch()
        return folder

    return get


def _running(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie has ended: it only waits to be reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class HeldCommand:
    """``perfkit ARGS`` in a child process of its own process group, after ``setup`` (Python run first in
    that process, which holds the command's worker processes busy in ``busy``), stopped while ``n`` workers
    run: a Ctrl-C while they are being set up (each held 1 s after its fork), a kill once they are busy."""

    def __init__(self):
        self.started: list[subprocess.Popen] = []

    def ends_with_its_workers(self, setup: str, args: list[str], how: str, n: int = 2) -> None:
        """Start it, wait for ``n`` workers, stop it ``how`` ("Ctrl-C": SIGINT to the process group, as a
        terminal sends it; "the command killed": SIGKILL to the command), and check that no worker runs 10 s
        later and that a Ctrl-C printed one line, ``perfkit: stopped``, with exit code 3, the contract's
        "stopped" (no worker's traceback)."""
        with tempfile.TemporaryDirectory() as ready, tempfile.TemporaryFile() as err:  # (a worker that
            # outlived the command would hold a pipe open)
            script = ("import os, sys, time\n"
                      "os.register_at_fork(after_in_child=lambda: time.sleep(1))\n"
                      f"def busy(*args):\n    open(os.path.join({ready!r}, str(os.getpid())), 'w').close()\n"
                      "    time.sleep(300)\n"
                      f"{setup}\nfrom perfkit.cli import main\nsys.argv = ['perfkit', *{args!r}]\nmain()\n")
            child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.DEVNULL, stderr=err,
                                     start_new_session=True)
            self.started.append(child)
            deadline = time.monotonic() + 60
            workers: list[int] = []
            while True:
                busy = {int(f.name) for f in Path(ready).iterdir()}
                if len([w for w in workers if _running(w) and (how == "Ctrl-C" or w in busy)]) >= n:
                    break
                if child.poll() is not None or time.monotonic() > deadline:
                    err.seek(0)
                    raise AssertionError(f"{n} workers never ran: {err.read().decode()[-2000:]}")
                time.sleep(0.05)
                with contextlib.suppress(OSError):  # (the command ended: said above on the next round)
                    workers = [int(w) for w in Path(f"/proc/{child.pid}/task/{child.pid}/children").read_text().split()]
            if how == "Ctrl-C":
                os.killpg(child.pid, signal.SIGINT)
            else:
                child.kill()
            child.wait(timeout=30)
            deadline = time.monotonic() + 10
            while any(_running(w) for w in workers) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert [w for w in workers if _running(w)] == []
            err.seek(0)
            if how == "Ctrl-C":
                printed = err.read().decode()
                assert child.returncode == 3 and printed == "perfkit: stopped\n", printed

    def close(self) -> None:
        for child in self.started:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait()


@pytest.fixture
def held_command():
    """A ``HeldCommand``; whatever it started is killed at the end."""
    held = HeldCommand()
    yield held
    held.close()


# ---- the suite leaves nothing behind --------------------------------------------------------------
# Every process a test starts inherits a session mark and a private temp folder (one per session,
# shared by xdist's workers). At the end, a process still carrying the mark, anything in that folder
# or a thread a test started that is still running fails the session; the leftovers are named, the
# processes ended and the folder removed.
SESSION_MARK = "PERFKIT_TEST_SESSION"
THREADS_LEFT = "threads-left.txt"  # xdist workers report their threads here, for the controller
LEFT_GRACE_S = 5.0  # for processes and threads still on their way out
HYPOTHESIS_DIR = "hypothesis"  # its examples and caches: in the temp folder, not .hypothesis/ in the checkout
TOOL_CACHES = ("torchinductor_", HYPOTHESIS_DIR)  # caches tools keep in the temp folder: removed with it, not reported
_owner = SESSION_MARK not in os.environ  # this process opened the session (not an xdist worker)
if _owner:
    os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", tempfile.gettempdir())  # pytest's tmp_path stays put
    os.environ.update({SESSION_MARK: str(os.getpid()), "TMPDIR": tempfile.mkdtemp(prefix="pytest-perfkit-session-")})
    os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = os.path.join(os.environ["TMPDIR"], HYPOTHESIS_DIR)
    tempfile.tempdir = None  # found again from TMPDIR
_SESSION_TEMP = Path(os.environ["TMPDIR"])
_PYTEST_TEMP = Path(os.environ["PYTEST_DEBUG_TEMPROOT"]) / f"pytest-of-{getpass.getuser()}"  # tmp_path's parent
_pytest_temp_was_there = _PYTEST_TEMP.exists()
_threads_at_start: set[int] = set()


def _marked_processes() -> dict[int, str]:
    """Live processes (not this one) that inherited this session's mark: pid -> command line."""
    mark = f"{SESSION_MARK}={os.environ[SESSION_MARK]}".encode()
    found = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            if mark in (d / "environ").read_bytes().split(b"\0"):
                cmdline = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
                if cmdline:  # a zombie has none: it is gone, only not yet reaped
                    found[int(d.name)] = cmdline[:200]
        except OSError:
            continue
    return found


def _threads_left() -> list[str]:
    deadline = time.monotonic() + LEFT_GRACE_S
    while True:
        left = [t for t in threading.enumerate()
                if t is not threading.main_thread() and t.ident not in _threads_at_start and t.is_alive()]
        if not left or time.monotonic() > deadline:
            return [f"thread {t.name!r} ({type(t).__name__}, daemon={t.daemon})" for t in left]
        time.sleep(0.1)


def pytest_unconfigure(config):
    """pytest removes a passing session's tmp_path folders but not the ``pytest-of-<user>`` folder above them
    (by now, after every session-finish hook): removed where this session made it and left it empty (a failing
    test's tmp_path stays there, to look into)."""
    if _owner and not _pytest_temp_was_there:
        with contextlib.suppress(OSError):
            _PYTEST_TEMP.rmdir()


def pytest_sessionstart(session):
    _threads_at_start.update(t.ident for t in threading.enumerate())


def pytest_sessionfinish(session, exitstatus):
    threads = _threads_left()
    if not _owner:
        if threads:
            with open(_SESSION_TEMP / THREADS_LEFT, "a") as f:
                f.write("".join(f"xdist worker {os.getpid()}: {t}\n" for t in threads))
        return
    deadline = time.monotonic() + LEFT_GRACE_S
    while (processes := _marked_processes()) and time.monotonic() < deadline:
        time.sleep(0.1)
    report = _SESSION_TEMP / THREADS_LEFT
    if report.exists():
        threads += report.read_text().splitlines()
        report.unlink()
    files = sorted(p.name for p in _SESSION_TEMP.iterdir() if not p.name.startswith(TOOL_CACHES))
    left = ([f"process {pid}: {cmd}" for pid, cmd in processes.items()] + threads
            + [f"temp: {tempfile.gettempdir()}/{name}" for name in files])
    for pid in processes:  # started by this session's tests: end them, by pid
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    shutil.rmtree(_SESSION_TEMP, ignore_errors=True)
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        lines = ["", "the suite left these behind:", *(f"  {x}" for x in left)]
        if reporter is not None:
            reporter.write_line("\n".join(lines), red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
