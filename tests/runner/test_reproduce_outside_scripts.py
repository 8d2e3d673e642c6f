"""A command case whose script lies outside the repository its commands run in: the report's Reproduce section gave
that checkout's commit and nothing of the script, so the run could not be reproduced from what it named. env.json
names each such script with its SHA-256 as the run started, summary.json's ``reproduce.outside_tree`` repeats them,
and the Reproduce section says each lies outside the checkout; a script inside it is left to the commit."""

import hashlib
import json
import shutil
import subprocess

from runner_testing import PROGRAMS, REPO, perfkit, sleeper_case


def test_a_script_outside_the_checkout_is_named_and_hashed(tmp_path, write_case):
    outside = tmp_path / "elsewhere" / "sleeper.py"
    outside.parent.mkdir()
    shutil.copy(PROGRAMS / "sleeper.py", outside)
    digest = hashlib.sha256(outside.read_bytes()).hexdigest()
    case = sleeper_case(steps=3, sleep_ms=1, repeats={"min": 1, "max": 1})
    case["command"][1] = str(outside)
    res = perfkit("run", write_case(case), "--out", tmp_path / "run")  # run from perfkit's checkout
    assert res.returncode == 0, res.stderr
    run = tmp_path / "run"
    env = json.loads((run / "env.json").read_text())
    assert env["source"]["git"] and env["source"]["root"] == str(REPO)
    assert env["scripts"] == [{"path": str(outside), "sha256": digest}]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["reproduce"]["outside_tree"] == [{"path": str(outside), "sha256": digest}]
    report = (run / "report.md").read_text()
    section = report[report.index("## Reproduce"):report.index("## Not verified")]
    assert (f"`{outside}` lies outside the checkout: no commit holds it; it ran as sha256 `{digest}`, which a copy "
            "must match.") in section.splitlines()


def test_a_script_inside_the_checkout_is_left_to_its_commit(tmp_path, write_case):
    case = sleeper_case(steps=3, sleep_ms=1, repeats={"min": 1, "max": 1})
    res = perfkit("run", write_case(case), "--out", tmp_path / "run")
    assert res.returncode == 0, res.stderr
    assert json.loads((tmp_path / "run" / "env.json").read_text())["scripts"] == []
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["reproduce"]["outside_tree"] == []
    assert "lies outside" not in (tmp_path / "run" / "report.md").read_text()


def test_a_script_git_ignores_inside_the_checkout_is_named_and_hashed(tmp_path, write_case):
    """A script in an ignored folder of the checkout the commands run in (scratch/): the commit and its dirty hash
    leave it out, and env.json named nothing of it."""
    repo = tmp_path / "repo"
    (repo / "scratch").mkdir(parents=True)
    (repo / ".gitignore").write_text("scratch/\n")
    script = repo / "scratch" / "sleeper.py"
    shutil.copy(PROGRAMS / "sleeper.py", script)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo)]
    for args in (["init", "-q"], ["add", ".gitignore"], ["commit", "-q", "-m", "start"]):
        subprocess.run([*git, *args], check=True)
    digest = hashlib.sha256(script.read_bytes()).hexdigest()
    case = sleeper_case(steps=3, sleep_ms=1, repeats={"min": 1, "max": 1})
    case["command"][1] = "scratch/sleeper.py"
    res = perfkit("run", write_case(case), "--out", tmp_path / "run", cwd=repo)
    assert res.returncode == 0, res.stderr
    env = json.loads((tmp_path / "run" / "env.json").read_text())
    assert env["source"]["root"] == str(repo) and not env["source"]["dirty"]
    assert env["scripts"] == [{"path": str(script), "sha256": digest, "ignored": True}]
    report = (tmp_path / "run" / "report.md").read_text()
    assert (f"`{script}` is ignored by git in the checkout: no commit holds it; it ran as sha256 `{digest}`, which a "
            "copy must match.") in report.splitlines()


def test_a_serve_case_s_server_script_outside_the_checkout_is_named_and_hashed(tmp_path):
    """The bundled test server's case, its server.py copied outside perfkit's checkout: env.json named no script of a
    serve case."""
    from perfkit.run import runner
    from perfkit.run.trial import RunOptions
    from perfkit.rundata import case as case_mod

    shutil.copy(REPO / "cases" / "serve" / "server.py", tmp_path / "server.py")
    shutil.copy(REPO / "cases" / "serve" / "test_server.yaml", tmp_path / "test_server.yaml")
    digest = hashlib.sha256((tmp_path / "server.py").read_bytes()).hexdigest()
    env = json.loads(runner._environment(case_mod.load(tmp_path / "test_server.yaml"), RunOptions(cwd=str(REPO))))
    assert env["scripts"] == [{"path": str(tmp_path / "server.py"), "sha256": digest}]
    inside = json.loads(runner._environment(case_mod.load(REPO / "cases" / "serve" / "test_server.yaml"),
                                            RunOptions(cwd=str(REPO))))
    assert inside["scripts"] == []
