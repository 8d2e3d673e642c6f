"""The watchdog and the stack-dump hook, on plain Python processes (no perfkit run around them)."""

import os
import signal
import sys
import time

import pytest

from perfkit.run import stackdump
from perfkit.run.launch import RankProcess, run_ranks
from perfkit.rundata.exits import at_exit, exit_text, where_threads_wait


def rank(tmp_path, r, code, env=None, hook=None):
    rdir = tmp_path / f"rank{r}"
    e = {**os.environ, stackdump.STACKS_ENV: str(rdir / "stacks.txt"), **(env or {})}
    e.pop(stackdump.OWNER_ENV, None)
    if hook is not None:
        e["PYTHONPATH"] = os.pathsep.join(filter(None, [str(hook), e.get("PYTHONPATH")]))
    return RankProcess(r, [sys.executable, "-c", code], e, rdir)


def test_hook_dumps_every_thread_of_a_hung_rank_and_chains_the_users_sitecustomize(tmp_path):
    user = tmp_path / "user_site"
    user.mkdir()
    (user / "sitecustomize.py").write_text(
        "import os, pathlib\npathlib.Path(os.environ['USER_MARK']).write_text('ran')\n")
    hook = stackdump.hook_dir(tmp_path / "hook")
    code = ("import threading, time\n"
            "def spin():\n    while True: time.sleep(0.01)\n"
            "threading.Thread(target=spin, daemon=True).start()\n"
            "def stuck():\n    threading.Event().wait()\n"
            "print('started', flush=True)\nstuck()\n")
    ranks = [rank(tmp_path, 0, "print('done')"),
             rank(tmp_path, 1, code, {"USER_MARK": str(tmp_path / "mark"), "PYTHONPATH": str(user)}, hook)]
    t0 = time.monotonic()
    out = run_ranks(ranks, timeout=1.5)
    assert out.status == "hung" and time.monotonic() - t0 < 1.5 + 5
    done, hung = out.ranks
    assert done["exit_code"] == 0 and not done["running_at_end"] and "stacks" not in done
    assert hung["running_at_end"] and hung["stdout_tail"] == "started"
    assert (tmp_path / "mark").read_text() == "ran"  # the user's sitecustomize still ran
    waits = where_threads_wait(hung["stacks"])
    assert any(w.startswith("spin (<string>:3)") or "<- spin (<string>:3)" in w for w in waits), waits
    assert any("<- stuck (<string>:6)" in w for w in waits), waits


def test_crashed_rank_ends_the_trial_with_its_exit_code_and_stderr(tmp_path):
    ranks = [rank(tmp_path, 0, "import sys; print('bad input', file=sys.stderr); sys.exit(5)"),
             rank(tmp_path, 1, "import time; time.sleep(60)")]
    t0 = time.monotonic()
    out = run_ranks(ranks, timeout=60)
    assert out.status == "crashed" and time.monotonic() - t0 < 15  # not the 60 s of the sleeper
    bad, waiting = out.ranks
    assert bad["exit_code"] == 5 and bad["stderr_tail"] == "bad input"
    # when it was seen to exit (the report names the rank that failed first); the killed one, never seen to
    assert 0 < bad["exited_s"] < time.monotonic() - t0 and "exited_s" not in waiting
    # Without the hook, the stack-dump request (SIGUSR1) already ends it: the group was ending anyway.
    assert waiting["running_at_end"] and exit_text(waiting["exit_code"]).startswith("killed by SIG")


def test_what_a_rank_perfkit_stopped_printed_in_answer_to_its_signals_is_left_out_of_its_tails(tmp_path):
    """A hung rank that answers perfkit's SIGTERM on stderr (jax.distributed's ``preemption_notifier.cc:90] SIGTERM
    caught at ...``, the one line of each hung rank's excerpt in report.md, read like the hang's cause: a
    newcomer's) and stdout: its tails end at what it printed before perfkit stopped it; a rank that crashed on its
    own keeps its whole stderr."""
    hook = stackdump.hook_dir(tmp_path / "hook")
    answers = ("import signal, sys, threading\n"
               "def term(*_):\n    print('W preemption_notifier.cc:90] SIGTERM caught at now', file=sys.stderr, "
               "flush=True)\n    print('stopping', flush=True)\n    sys.exit(1)\n"
               "signal.signal(signal.SIGTERM, term)\n"
               "print('waiting for peer 1', file=sys.stderr, flush=True)\nprint('step 3', flush=True)\n")
    hung = rank(tmp_path, 0, answers + "threading.Event().wait(60)\n", hook=hook)
    out = run_ranks([hung], timeout=1)
    [r] = out.ranks
    assert out.status == "hung" and r["running_at_end"] and r["stacks"]
    assert "SIGTERM caught" in (tmp_path / "rank0" / "stderr.log").read_text()  # it did answer: the file keeps it
    assert r["stderr_tail"] == "waiting for peer 1" and r["stdout_tail"] == "step 3"
    ranks = [rank(tmp_path / "c", 0, "import sys; print('bad input', file=sys.stderr); sys.exit(5)"),
             rank(tmp_path / "c", 1, answers + "threading.Event().wait(60)\n", hook=hook)]
    bad, stopped = run_ranks(ranks, timeout=60).ranks
    assert bad["stderr_tail"] == "bad input" and stopped["stderr_tail"] == "waiting for peer 1"


def test_a_rank_that_cannot_start_is_a_crash(tmp_path):
    r = RankProcess(0, [str(tmp_path / "no-such-program")], dict(os.environ), tmp_path / "rank0")
    out = run_ranks([r], timeout=10)
    assert out.status == "crashed" and "cannot start" in out.ranks[0]["stderr_tail"]


def test_exit_text():
    assert exit_text(3) == "exit code 3" and exit_text(-11) == "killed by SIGSEGV" and exit_text(None) == "still running"


def test_a_rank_whose_stack_dump_crashed_is_said_to_have_died_of_the_dump_after_its_own_signal():
    """A newcomer's gloo rank aborted at exit; the hook's dump of its threads crashed, and the report said
    ``killed by SIGSEGV`` alone. Its dump, as it was written (a child process's dump after it is its own)."""
    crashed = ("Fatal Python error: Aborted\n\nThread 0xFatal Python error: Segmentation fault\n\n\n"
               "Extension modules: numpy._core._multiarray_umath, torch._C (total: 2)\n")
    assert exit_text(-11, crashed) == ("got SIGABRT (its stack dump's first fatal error), then killed by SIGSEGV "
                                       "while writing that dump")
    assert exit_text(-6, "Fatal Python error: Aborted\n\nCurrent thread 0x1 (most recent call first):\n"
                         '  File "x.py", line 3 in f\n') == "killed by SIGABRT"
    assert exit_text(-11, "[child process 42]\nFatal Python error: Aborted\n") == "killed by SIGSEGV"
    assert exit_text(-15, "Thread 0x1 (most recent call first):\n") == "killed by SIGTERM"  # a hang's dump


def test_a_rank_aborting_in_its_teardown_dumps_its_own_thread_alone_and_dies_of_its_abort(tmp_path):
    """A newcomer's gloo rank aborted in its teardown (std::terminate); the hook's dump of every thread, walking
    the thread states shutdown frees, crashed, and the rank died of (and was reported as) SIGSEGV. Once the
    interpreter shuts down the dump reads the faulting thread's own state alone: ``Stack``, not ``Current
    thread 0x...`` among every thread. Here an object's finaliser aborts at shutdown."""
    hook = stackdump.hook_dir(tmp_path / "hook")
    code = "import os\nclass Teardown:\n    def __del__(self):\n        os.abort()\nteardown = Teardown()\n"
    [aborted] = run_ranks([rank(tmp_path, 0, code, {"PYTHONFAULTHANDLER": ""}, hook)], timeout=30).ranks
    assert aborted["exit_code"] == -6 and exit_text(aborted["exit_code"], aborted["stacks"]) == "killed by SIGABRT"
    assert aborted["stacks"].startswith("Fatal Python error: Aborted\n\nStack (most recent call first):\n")
    assert where_threads_wait(aborted["stacks"]) == ["__del__ (<string>:4)"]


def test_a_program_that_turned_fatal_dumps_off_keeps_them_off_through_its_teardown(tmp_path):
    """The hook enables fatal dumps for a program that did not; at exit it narrows them to the faulting thread.
    It did so even where the program had since called ``faulthandler.disable()``, turning them back on."""
    hook = stackdump.hook_dir(tmp_path / "hook")
    code = ("import faulthandler, os\nfaulthandler.disable()\n"
            "class Teardown:\n    def __del__(self):\n        os.abort()\nteardown = Teardown()\n")
    [aborted] = run_ranks([rank(tmp_path, 0, code, {"PYTHONFAULTHANDLER": ""}, hook)], timeout=30).ranks
    assert aborted["exit_code"] == -6 and "stacks" not in aborted


def test_ranks_stuck_on_their_way_out_read_as_at_exit_and_a_rank_in_its_program_does_not(tmp_path):
    """A newcomer's ranks had written every step and hung in their shutdown (jax.distributed's, the last garbage
    collection): the report gave no "waiting in" line and no hint that no step was to blame. Real dumps here: an
    atexit handler that waits, a finaliser run by the last collection, and a rank waiting in its own program."""
    hook = stackdump.hook_dir(tmp_path / "hook")
    waits_atexit = "import atexit, threading\natexit.register(lambda: threading.Event().wait())\n"
    finaliser = ("import time\nclass Stuck:\n    def __del__(self):\n        time.sleep(600)\n"
                 "s = Stuck()\ns.me = s\ndel s\n")  # a cycle: only the last collection at exit finalises it
    waits_in_program = "import threading\nthreading.Event().wait()\n"
    out = run_ranks([rank(tmp_path, r, code, hook=hook)
                     for r, code in enumerate((waits_atexit, finaliser, waits_in_program))], timeout=2)
    assert out.status == "hung"
    by_atexit, by_finaliser, in_program = (r["stacks"] for r in out.ranks)
    assert at_exit(by_atexit) and at_exit(by_finaliser) and not at_exit(in_program)
    assert where_threads_wait(by_finaliser) == ["garbage-collecting: __del__ (<string>:4)"]
    # faulthandler's words for a thread with no Python frame, as at exit in native code (CPython's traceback.c)
    native = "Current thread 0x00007f1d (most recent call first):\n  Garbage-collecting\n  <no Python frame>\n"
    assert at_exit(native) and where_threads_wait(native) == ["garbage-collecting: no Python frame (native code)"]


def test_ranks_stuck_in_native_code_after_their_program_are_dumped_or_named_and_none_outlives_the_trial(tmp_path):
    """Ranks that hang once their program returned, in native code: one in a file's flush as the interpreter
    finalises its modules (the C code of a module-level object's teardown: ``<no Python frame>``), one in a C exit
    handler after the interpreter shut down, the hook's handler gone with it, so the stack-dump request (SIGUSR1)
    kills it without a dump. Both end with the trial."""
    hook = stackdump.hook_dir(tmp_path / "hook")
    # 512 KiB buffered for a pipe nobody reads: flushed at shutdown, the write blocks once the pipe is full
    in_teardown = "import os\nr, w = os.pipe()\nf = os.fdopen(w, 'wb', buffering=1 << 20)\nf.write(b'x' * (1 << 19))\n"
    # pause() as an exit handler of the C library's: it runs once the interpreter has shut down
    after_python = ("import ctypes\nlibc = ctypes.CDLL(None)\n"
                    "libc.__cxa_atexit(ctypes.cast(libc.pause, ctypes.c_void_p), None, None)\n")
    ranks = [rank(tmp_path, r, code, hook=hook) for r, code in enumerate((in_teardown, after_python))]
    out = run_ranks(ranks, timeout=2)
    teardown, after = out.ranks
    assert out.status == "hung" and teardown["running_at_end"] and after["running_at_end"]
    assert at_exit(teardown["stacks"]) and where_threads_wait(teardown["stacks"]) == ["no Python frame (native code)"]
    assert after["exit_code"] == -signal.SIGUSR1 and "stacks" not in after
    for r in ranks:
        with pytest.raises(ProcessLookupError):
            os.kill(r.proc.pid, 0)
