"""env.json's source: what counts as an uncommitted change of the tree a run came from."""

import subprocess
from pathlib import Path

from perfkit.run.envinfo import source_tree

ROOT = Path(__file__).resolve().parents[2]


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                   capture_output=True, timeout=60)


def test_a_venv_link_is_not_an_uncommitted_change(tmp_path):
    """A checkout whose .venv is a link to a shared environment (as a second clone's often is) is clean under the
    project's .gitignore; an untracked file still makes it dirty."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".gitignore").write_text((ROOT / ".gitignore").read_text())
    _git(repo, "init", "-q")
    _git(repo, "add", ".gitignore")
    _git(repo, "commit", "-q", "-m", "x")
    (tmp_path / "shared-venv").mkdir()
    (repo / ".venv").symlink_to(tmp_path / "shared-venv")
    assert source_tree(repo)["dirty"] is False and source_tree(repo)["root"] == str(repo.resolve())
    (repo / "new.py").write_text("")
    assert source_tree(repo)["dirty"] is True


def test_a_runs_own_outputs_and_logs_are_no_uncommitted_change(tmp_path):
    """A newcomer's run with --out inside the checkout (not ignored) reported 'uncommitted changes ... the commit
    alone is not the code that ran', where only that run's outputs and a log were untracked. A run directory's files
    (a folder holding run.json beside case.yaml, or each host's run.json) and logs are no code: the tree is clean.
    An untracked module the program imports is: dirty, and hashed as the diff (none here) then each counted
    untracked file's path and bytes."""
    import hashlib

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "main.py").write_text("import helper\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "main.py")
    _git(repo, "commit", "-q", "-m", "x")
    run = repo / "runs" / "r1"
    (run / "trials" / "00-a" / "rank0").mkdir(parents=True)
    for name in ("case.yaml", "run.json", "env.json", "report.md", "trials/00-a/rank0/stdout.log"):
        (run / name).write_text("{}")
    (repo / "runs" / "multi" / "hosts" / "host1").mkdir(parents=True)
    (repo / "runs" / "multi" / "hosts" / "host1" / "run.json").write_text('{"hosts": 2, "host_index": 1}')
    (repo / "runs" / "multi" / "hosts" / "host1" / "trials.jsonl").write_text("{}")
    (repo / "train.log").write_text("step 1\n")
    assert source_tree(repo)["dirty"] is False and source_tree(repo)["dirty_hash"] is None
    (repo / "helper.py").write_text("X = 1\n")
    (run / "report.md").write_text("changed")  # a run's output: in no hash
    tree = source_tree(repo / "runs")  # from a folder inside the checkout, the whole tree's
    assert tree["dirty"] is True
    assert tree["dirty_hash"] == hashlib.sha256(b"helper.py" + b"X = 1\n").hexdigest()[:12]
    (repo / "runs" / "case.yaml").write_text("")  # a case file with no run beside it: a file of the checkout
    expected = hashlib.sha256(b"helper.py" + b"X = 1\n" + b"runs/case.yaml").hexdigest()[:12]
    assert source_tree(repo)["dirty_hash"] == expected
