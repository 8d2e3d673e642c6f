"""env.json's dirty flag leaves out perfkit's own run directories alone, not every folder holding a run.json."""

import json
import subprocess

from perfkit.run.envinfo import source_tree


def _git(repo, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                   capture_output=True, timeout=60)


def _repo(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "main.py").write_text("import pkg.model\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "main.py")
    _git(repo, "commit", "-q", "-m", "x")
    return repo


def test_a_source_folder_holding_a_run_json_still_counts_its_untracked_code(tmp_path):
    """A folder of the user's code that holds a file named run.json (a config of its own) hid its untracked modules
    from dirty: the tree read clean, so the commit alone was taken as the code that ran."""
    repo = _repo(tmp_path)
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
    repo = _repo(tmp_path)
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
