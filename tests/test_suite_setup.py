"""The suite's own set-up (tests/conftest.py), where nothing else shows it at work."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from hypothesis import given, settings, strategies as st
from hypothesis.configuration import storage_directory


def test_hypothesis_keeps_its_files_in_the_session_temp_folder():
    """No .hypothesis/ folder left in the checkout: what Hypothesis stores (the examples it tried, its caches)
    goes to the session's temp folder, which the suite removes at its end."""

    @settings(max_examples=3)
    @given(st.integers())
    def tried(x):
        pass

    tried()
    home = storage_directory().home_directory
    assert home.parent == Path(tempfile.gettempdir()) and home.parent.name.startswith("pytest-perfkit-session-")
    assert os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] == str(home)


def test_a_passing_tests_tmp_path_is_removed(request):
    """pytest removes a passing test's tmp_path (by default it keeps every test's of the last three sessions,
    hundreds of MB here): a failing test's stays to look into."""
    assert request.config.getini("tmp_path_retention_policy") == "failed"


def test_a_passing_session_leaves_no_pytest_folder(tmp_path):
    """A session of its own (a passing test that asks for a tmp_path), with pytest's temp root in a fresh
    folder: that folder ends empty, the ``pytest-of-<user>`` folder above the tmp_paths removed too."""
    root = tmp_path / "root"
    root.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PERFKIT_TEST_SESSION", "PYTEST_XDIST_WORKER")}
    env.update(PYTEST_DEBUG_TEMPROOT=str(root), TMPDIR=str(tmp_path))
    test = "tests/trace/test_trace_export.py::test_processes_and_threads_by_first_appearance"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", test],
                          cwd=Path(__file__).parent.parent, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:]
    assert list(root.iterdir()) == []
