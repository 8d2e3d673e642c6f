"""env.json's source: what counts as an uncommitted change of the tree a run came from."""

import json
import subprocess
from pathlib import Path

from perfkit.run.envinfo import source_tree

ROOT = Path(__file__).resolve().parents[2]


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                   capture_output=True, timeout=60)


def _repo(tmp_path: Path, main: str) -> Path:
    """A checkout with one committed module, ``main.py`` holding ``main``."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "main.py").write_text(main)
    _git(repo, "init", "-q")
    _git(repo, "add", "main.py")
    _git(repo, "commit", "-q", "-m", "x")
    return repo


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

    repo = _repo(tmp_path, "import helper\n")
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


def test_a_source_folder_holding_a_run_json_still_counts_its_untracked_code(tmp_path):
    """A folder of the user's code that holds a file named run.json (a config of its own) hid its untracked modules
    from dirty: the tree read clean, so the commit alone was taken as the code that ran."""
    repo = _repo(tmp_path, "import pkg.model\n")
    (repo / "pkg").mkdir()
    (repo / "pkg" / "run.json").write_text('{"lr": 0.1}')
    (repo / "pkg" / "model.py").write_text("X = 1\n")
    assert source_tree(repo)["dirty"] is True
    (repo / "conf" / "hosts" / "host1").mkdir(parents=True)  # a host's folder, but no run's part
    (repo / "conf" / "hosts" / "host1" / "run.json").write_text('{"port": 1}')
    (repo / "conf" / "hosts" / "host1" / "deploy.py").write_text("")
    _git(repo, "add", "pkg")
    _git(repo, "commit", "-q", "-m", "pkg")
    assert source_tree(repo)["dirty"] is True  # conf/hosts/host1/deploy.py, untracked still


def test_perfkits_own_run_directories_are_still_left_out(tmp_path):
    """A run's folder (run.json beside case.yaml), a multi-host run's top (case.yaml beside hosts/) and a host's part
    before host 0 wrote case.yaml (hosts/host<I>/run.json naming host I) hold no code."""
    repo = _repo(tmp_path, "import pkg.model\n")
    (repo / "pkg").mkdir()
    (repo / "pkg" / "model.py").write_text("X = 1\n")
    _git(repo, "add", "pkg")
    _git(repo, "commit", "-q", "-m", "pkg")
    one = repo / "runs" / "one"
    (one / "trials" / "00-a" / "rank0").mkdir(parents=True)
    (one / "case.yaml").write_text("name: x\n")
    (one / "run.json").write_text(json.dumps({"hosts": 1, "host_index": 0}))
    (one / "trials" / "00-a" / "rank0" / "out.py").write_text("")
    part = repo / "runs" / "many" / "hosts" / "host1"
    part.mkdir(parents=True)
    (part / "run.json").write_text(json.dumps({"hosts": 2, "host_index": 1}))
    (part / "trials.jsonl").write_text("")
    assert source_tree(repo)["dirty"] is False
