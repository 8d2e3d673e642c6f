"""perfkit installed, not cloned: the wheel `pip wheel .` builds, installed into a fresh venv, runs the
bundled quickstart from an empty folder and writes its run there.

Kept fast and offline: the wheel is built from a copy of the source (setuptools writes build/ and
*.egg-info beside its input) with this venv's setuptools (`--no-build-isolation`); the fresh venv has no
pip (`venv --without-pip`), the wheel goes in with this venv's pip (`pip --python`, `--no-deps`), and a
.pth file in the fresh venv points at this venv's site-packages for the dependencies (jax, numpy, ...).
A path line in a .pth file is only appended to sys.path; the .pth files inside that folder (this
venv's editable perfkit) are not run, so `import perfkit` finds the installed wheel alone."""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from perfkit.cli import case_path

REPO = Path(__file__).resolve().parents[1]
NOT_SHIPPED = shutil.ignore_patterns(".git", ".venv", "reports", "tests", "benchmarks", "build", "*.egg-info",
                                     "__pycache__", ".ci")
QUICK = ["--set", "repeats.min=1", "--set", "repeats.max=1", "--set", "model.steps=3", "--set", "warmup=1",
         "--set", "capture.trace=[]", "--set", "capture.xla_dump=none"]


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(str(REPO)))
    return env


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel, built once for this module's tests."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    shutil.copytree(REPO, src, ignore=NOT_SHIPPED)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp / "dist"), str(src)], check=True, capture_output=True, timeout=180)
    (wheel,) = (tmp / "dist").glob("perfkit-*.whl")
    return wheel


def fresh_venv(tmp: Path, wheel: Path) -> Path:
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q",
                    str(wheel)], check=True, capture_output=True, timeout=180)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    (Path(site) / "project_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv


def test_the_wheel_holds_every_package_and_the_bundled_cases(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    packages = {p.parent.relative_to(REPO).as_posix() for p in (REPO / "perfkit").rglob("__init__.py")}
    assert {f"{p}/__init__.py" for p in packages} <= set(names), "a package is missing from pyproject's list"
    cases = {p.relative_to(REPO).as_posix() for p in (REPO / "cases").rglob("*.yaml")}
    assert {f"perfkit/{c}" for c in cases} <= set(names)


def test_installed_wheel_runs_the_quickstart_from_an_empty_folder(tmp_path, wheel):
    venv = fresh_venv(tmp_path, wheel)
    here = tmp_path / "empty"
    here.mkdir()
    env = clean_env()
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import perfkit; print(perfkit.__file__)"],
                           cwd=here, env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where).is_relative_to(venv), where  # the wheel, not this clone
    listed = subprocess.run([str(venv / "bin" / "perfkit"), "cases", "--json"], cwd=here, env=env,
                            capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    rows = {r["name"]: r for r in json.loads(listed.stdout)}
    assert Path(rows["quickstart"]["path"]).is_relative_to(venv) and rows["quickstart"]["kind"] == "model"

    res = subprocess.run([str(venv / "bin" / "perfkit"), "run", "quickstart", *QUICK], cwd=here, env=env,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    (run,) = (here / "reports" / "runs").iterdir()
    assert run.name.startswith("quickstart-wan-tp-vs-sp-")
    summary = json.loads((run / "summary.json").read_text())
    assert summary["trials"] == {"total": 2, "ok": 2, "failed": []}
    assert (run / "report.md").read_text().startswith("# perfkit run: quickstart-wan-tp-vs-sp")


def test_editable_install_writes_runs_under_the_folder_it_was_started_in(tmp_path):
    """This clone's own perfkit (an editable install) started elsewhere: the run goes there, not into
    the source tree's reports/."""
    case = tmp_path / "case.yaml"
    program = REPO / "tests" / "runner" / "programs" / "sleeper.py"
    case.write_text(json.dumps({"name": "elsewhere", "command": ["python", str(program), "3", "1"], "warmup": 1,
                                "repeats": {"min": 1, "max": 1}, "variants": {"a": {}, "b": {}}}))
    before = set((REPO / "reports" / "runs").glob("elsewhere-*"))
    res = subprocess.run([sys.executable, "-m", "perfkit.cli", "run", str(case)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert len(list((tmp_path / "reports" / "runs").glob("elsewhere-*/report.md"))) == 1
    assert set((REPO / "reports" / "runs").glob("elsewhere-*")) == before


def test_a_case_is_named_by_file_or_by_bundled_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    quickstart = REPO / "cases" / "quickstart.yaml"
    assert case_path(None) == case_path("quickstart") == case_path("quickstart.yaml") == quickstart
    assert case_path("torch/wan_recompile") == REPO / "cases" / "torch" / "wan_recompile.yaml"
    (tmp_path / "quickstart.yaml").write_text("name: mine\n")
    assert case_path("quickstart.yaml") == Path("quickstart.yaml")  # a file that exists comes first
    assert case_path("nosuch") == Path("nosuch")  # loading it says: no such case file
