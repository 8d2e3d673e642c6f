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
