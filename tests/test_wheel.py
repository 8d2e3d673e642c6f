"""perfkit installed, not cloned: the wheel `pip wheel .` builds, installed into a fresh venv, runs the
bundled quickstart from an empty folder and writes its run there; installed without extras, it runs every
analysis command on the real files with no jax, torch or xprof, printing what the full install prints.

Kept fast and offline: the wheel is built from a copy of the source (setuptools writes build/ and
*.egg-info beside its input) with this venv's setuptools (`--no-build-isolation`); the fresh venv has no
pip (`venv --without-pip`), the wheel goes in with this venv's pip (`pip --python`, `--no-deps`), and a
.pth file in the fresh venv points at the dependencies: this venv's site-packages (the full install), or
for the light install a folder linking only the distributions the wheel's own requirements (no extra)
pull in, found from their metadata as pip resolves them. A path line in a .pth file is only appended to
sys.path; the .pth files inside that folder (this venv's editable perfkit) are not run, so
`import perfkit` finds the installed wheel alone."""

import email.parser
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from reencode import crf30
from perfkit.cli import case_path, cli

REPO = Path(__file__).resolve().parents[1]
REAL = REPO / "tests" / "data" / "real"
HEAVY = ("jax", "jaxlib", "torch", "xprof", "tensorboard_plugin_profile")  # what the light install must lack
NOT_SHIPPED = shutil.ignore_patterns(".git", ".venv", "reports", "tests", "benchmarks", "build", "*.egg-info",
                                     "__pycache__", ".ci")
QUICK = ["--set", "repeats.min=1", "--set", "repeats.max=1", "--set", "model.steps=3", "--set", "warmup=1",
         "--set", "capture.trace=[]", "--set", "capture.xla_dump=none"]


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(str(REPO)))
    return env


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The wheel, built once for this module's tests (its folder removed after them)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    shutil.copytree(REPO, src, ignore=NOT_SHIPPED)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp / "dist"), str(src)], check=True, capture_output=True, timeout=180)
    (wheel,) = (tmp / "dist").glob("perfkit-*.whl")
    yield wheel
    shutil.rmtree(tmp)


def fresh_venv(tmp: Path, wheel: Path, dependencies: str = sysconfig.get_paths()["purelib"]) -> Path:
    """A venv holding the wheel alone, its dependencies found in the folder ``dependencies``."""
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q",
                    str(wheel)], check=True, capture_output=True, timeout=180)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    (Path(site) / "project_dependencies.pth").write_text(dependencies + "\n")
    return venv


def base_requirements(wheel: Path) -> list[Requirement]:
    """The wheel's Requires-Dist that apply with no extra asked for."""
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = email.parser.Parser().parsestr(z.read(name).decode())
    reqs = [Requirement(r) for r in metadata.get_all("Requires-Dist")]
    return [r for r in reqs if r.marker is None or r.marker.evaluate({"extra": ""})]


def closure(requirements: list[Requirement]) -> list[importlib.metadata.Distribution]:
    """The installed distributions ``requirements`` pull in, with their requirements' (and asked-for
    extras'), markers evaluated here; each installed version must satisfy its requirement."""
    found: dict[str, importlib.metadata.Distribution] = {}
    todo = list(requirements)
    while todo:
        req = todo.pop()
        dist = importlib.metadata.distribution(req.name)
        assert req.specifier.contains(dist.version, prereleases=True), (str(req), dist.version)
        key = canonicalize_name(req.name)
        if key in found and not req.extras:
            continue
        found[key] = dist
        for text in dist.requires or []:
            sub = Requirement(text)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in ("", *req.extras)):
                todo.append(sub)
    return list(found.values())


def linked_site(folder: Path, dists: list[importlib.metadata.Distribution]) -> Path:
    """A folder that holds ``dists`` alone: links to their top-level files and folders in site-packages, or
    one level down where a folder holds other distributions' files too (a namespace package: google/)."""
    def tops(dist, depth):
        return {f.parts[:depth] for f in dist.files or [] if f.parts[0] != ".." and "__pycache__" not in f.parts}
    names = {canonicalize_name(d.metadata["Name"]) for d in dists}
    others = set().union(*(tops(d, 1) for d in importlib.metadata.distributions()
                           if canonicalize_name(d.metadata["Name"]) not in names))
    folder.mkdir()
    for dist in dists:
        for parts in tops(dist, 1):
            for link in ([parts] if parts not in others else
                         {p for p in tops(dist, 2) if p[:1] == parts}):
                (folder / Path(*link)).parent.mkdir(parents=True, exist_ok=True)
                if not (folder / Path(*link)).exists():
                    (folder / Path(*link)).symlink_to(dist.locate_file(Path(*link)))
    return folder


def test_the_wheel_holds_every_package_and_the_bundled_cases(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    packages = {p.parent.relative_to(REPO).as_posix() for p in (REPO / "perfkit").rglob("__init__.py")}
    assert {f"{p}/__init__.py" for p in packages} <= set(names), "a package is missing from pyproject's list"
    cases = {p.relative_to(REPO).as_posix() for pattern in ("*.yaml", "*.py") for p in (REPO / "cases").rglob(pattern)}
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
    # (quickstart.yaml's timeout)
    assert summary["trials"] == {"total": 2, "ok": 2, "failed": [], "timeout_s": 120, "ended_after_round": None}
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


# ---- the light install: the wheel without extras ----------------------------------------------------

HLO = REPO / "tests" / "hlo" / "data"
LIGHT_DRIVER = textwrap.dedent("""\
    import json, sys
    from click.testing import CliRunner
    from perfkit.cli import cli
    out = {}
    for name, args in json.loads(sys.argv[1]).items():
        r = CliRunner().invoke(cli, args)
        out[name] = [r.exit_code, r.stdout, repr(r.exception) if r.exit_code not in (0, 1, 2) else None]
    print(json.dumps(out))
""")


def dump_folder(folder: Path, name: str, module: str) -> Path:
    """An XLA dump folder (one module and its buffer assignment) from a dump of tests/hlo/data."""
    folder.mkdir(parents=True)
    stem = f"module_0001.{module}_after_optimizations"
    shutil.copyfile(HLO / f"{name}.txt", folder / f"{stem}.txt")
    shutil.copyfile(HLO / f"{name}-buffer-assignment.txt", folder / f"{stem}-buffer-assignment.txt")
    return folder


@pytest.fixture(scope="module")
def light(wheel, tmp_path_factory):
    """The wheel in a fresh venv with the distributions of its base requirements alone: its bin/ (the venv
    removed after this module's tests)."""
    tmp = tmp_path_factory.mktemp("light")
    site = linked_site(tmp / "site", closure(base_requirements(wheel)))
    yield fresh_venv(tmp, wheel, str(site)) / "bin"
    shutil.rmtree(tmp)


def test_light_install_has_no_jax_torch_or_xprof(light, wheel):
    names = {canonicalize_name(r.name) for r in base_requirements(wheel)}
    assert names.isdisjoint({"jax", "torch", "tensorboard-plugin-profile", "xprof"}), names
    probe = "import importlib.util as u, sys; print([m for m in sys.argv[1:] if u.find_spec(m)])"
    found = subprocess.run([light / "python", "-c", probe, *HEAVY], env=clean_env(), capture_output=True,
                           text=True, check=True).stdout
    assert found.strip() == "[]"
    for module in HEAVY:
        res = subprocess.run([light / "python", "-c", f"import {module}"], env=clean_env(), capture_output=True,
                             text=True)
        assert res.returncode == 1 and f"No module named '{module}'" in res.stderr, res.stderr
    # the venv's requirements all met (pip reads the venv's metadata, the linked folder's included)
    checked = subprocess.run([sys.executable, "-m", "pip", "--python", light / "python", "check"], env=clean_env(),
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.slow
def test_light_install_prints_what_the_full_install_prints(light, tmp_path, monkeypatch):
    """Every analysis command on real files (Kineto, xplane, video, MI300 HLO), XLA dumps and runs it records
    itself (a command case and a serve case, then report and check on them): exit 0 and the same --json (or
    file) as this full install's, in process; jax, torch and xprof never present."""
    kineto = [REAL / "kineto" / f"rank-{r}.json.gz" for r in (0, 1)]
    xplane = REAL / "xplane" / "mi300_jax_conv_8gpu.xplane.pb"
    video = REAL / "video" / "cogvideox_horse_720x480_49f.mp4"
    dumps = tmp_path / "dumps"
    for rank in (0, 1):
        dump_folder(dumps / f"rank{rank}", "tpu_ring", "jit_ring_step.tpu")
    gpu = dump_folder(tmp_path / "gpu", "gpu_async", "jit_step.gpu")
    monkeypatch.chdir(tmp_path)
    env = clean_env()

    # runs recorded by the light install: a command case and a serve case, small
    program = REPO / "tests" / "runner" / "programs" / "sleeper.py"
    (tmp_path / "case.yaml").write_text(json.dumps({
        "name": "light", "command": ["python", str(program), "3", "1", "--frames"], "warmup": 1,
        "repeats": {"min": 1, "max": 1}, "variants": {"a": {}, "b": {"env": {"SLEEP_MS": "2"}}}}))
    # a lossless codec floor: `report` encodes it again on each side, and x264's is not bit-reproducible
    # two requests a side: one measures no noise, and `check` fails a ratio without a CI
    serve = ["--set", "serve.concurrency=[1]", "--set", "serve.requests=2", "--set", "serve.server_restarts=1",
             "--set", "warmup=0", "--set", "serve.codec=ffv1"]
    for case, out, extra, cwd in (("case.yaml", "run", [], tmp_path),
                                  (str(REPO / "cases" / "serve" / "test_server.yaml"), "serve", serve, REPO)):
        res = subprocess.run([light / "perfkit", "run", case, "--out", tmp_path / out, *extra], cwd=cwd, env=env,
                             capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr[-3000:]
        shutil.copytree(tmp_path / out, tmp_path / f"{out}-full")  # `report` rewrites it: one copy each

    commands = {
        "breakdown kineto": ["trace", "breakdown", *kineto, "--json"],
        "breakdown xplane": ["trace", "breakdown", xplane, "--json"],
        "diff": ["trace", "diff", *kineto, "--json"],
        "diff xplane by op": ["trace", "diff", xplane, xplane, "--by", "op", "--json"],
        "tail": ["trace", "tail", xplane, "--json"],
        "collectives": ["trace", "collectives", *kineto, "--json"],
        "export": ["trace", "export", xplane, "--perfetto", "{side}.export.json"],
        "quality": ["quality", video, crf30(video, tmp_path / "crf30.mp4"), "--json"],
        "hlo-diff": ["hlo-diff", dumps, "--json"],
        "hlo-diff --ab": ["hlo-diff", "--ab", dumps / "rank0", gpu, "--json"],
        "cost": ["cost", dumps / "rank0", "--chip", "v6e", "--json"],
        "hlo-diff --ab real": ["hlo-diff", "--ab", REAL / "hlo" / "mi300_jax08_gemm",
                               REAL / "hlo" / "mi300_jax08_attention", "--json"],
        "cost real": ["cost", REAL / "hlo" / "amd_te_fused_attn", "--chip", "mi300x", "--json"],
        "report": ["report", "{side}"],
        "report serve": ["report", "serve{suffix}"],
        "check": ["check", "{side}", "--baseline", "run/summary.json", "--json"],
        "check serve": ["check", "serve{suffix}", "--baseline", "serve/summary.json", "--json"],
    }

    def spelt(side: str) -> dict[str, list[str]]:
        fill = {"side": "run" if side == "light" else "run-full", "suffix": "" if side == "light" else "-full"}
        return {name: [str(a).format(**fill) for a in args] for name, args in commands.items()}

    res = subprocess.run([light / "python", "-c", LIGHT_DRIVER, json.dumps(spelt("light"))], env=env,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    theirs = json.loads(res.stdout)
    for name, args in spelt("full").items():
        ours = CliRunner().invoke(cli, args)
        assert ours.exit_code == theirs[name][0] == 0, (name, ours.output[-2000:], theirs[name])
        if args[-1] == "--json":
            assert json.loads(theirs[name][1]) == json.loads(ours.stdout), name
    assert (tmp_path / "run.export.json").read_bytes() == (tmp_path / "run-full.export.json").read_bytes()
    for run in ("run", "serve"):
        for name in ("summary.json", "report.md"):
            full = (tmp_path / f"{run}-full" / name).read_text().replace(f"{run}-full", run)  # (its folder's name)
            assert (tmp_path / run / name).read_text() == full, (run, name)


def test_light_install_names_the_extra_a_command_needs(light, tmp_path):
    """The bundled JAX models (cost --model, a model case, `perfkit models`), a bundled case whose script imports
    jax, and the torch models (a bundled torch case): one line naming the extra, exit 2, before anything runs;
    `perfkit env` says why it probed no devices."""
    needs = {("cost", "--model", "wan"): "cost --model: needs the 'jax' extra: pip install 'perfkit[jax]'",
             ("models",): "models: needs the 'jax' extra: pip install 'perfkit[jax]'",
             ("run", "quickstart"): "a model case: needs the 'jax' extra: pip install 'perfkit[jax]'",
             ("run", "repro/added_collectives"): "command: added_collectives.py: needs the 'jax' extra: "
                                                 "pip install 'perfkit[jax]'",
             ("run", "torch/wan_recompile"): "command: perfkit.models.torch_bench: needs the 'torch' extra: "
                                             "pip install 'perfkit[torch]'"}
    for args, line in needs.items():
        res = subprocess.run([light / "perfkit", *args], cwd=tmp_path, env=clean_env(), capture_output=True,
                             text=True, timeout=120)
        assert res.returncode == 2 and res.stdout == "", (args, res.stdout, res.stderr)
        assert res.stderr.count("\n") == 1 and res.stderr.startswith("perfkit: ") and res.stderr.rstrip().endswith(
            line), (args, res.stderr)
    assert not (tmp_path / "reports").exists()
    env = subprocess.run([light / "perfkit", "env", "--json"], cwd=tmp_path, env=clean_env(), capture_output=True,
                         text=True, timeout=120)
    assert env.returncode == 0, env.stderr
    assert json.loads(env.stdout)["devices"] == {"error": "no device probe: jax is not installed (the 'jax' extra)"}


def test_a_missing_extra_is_one_line_naming_it(monkeypatch):
    """In process, jax hidden from perfkit.common.extras: each command that needs it refuses in one line."""
    from perfkit.common import extras

    monkeypatch.setattr(extras.importlib.util, "find_spec", lambda name: None)
    assert extras.of_module("perfkit.kernels.bench") == "jax"
    assert extras.of_module("perfkit.models.torch_bench") == "torch" and extras.of_module("perfkit.cli") is None
    for args, line in ((["cost", "--model", "wan"], "cost --model: needs the 'jax' extra: pip install 'perfkit[jax]'"),
                       (["models"], "models: needs the 'jax' extra: pip install 'perfkit[jax]'")):
        res = CliRunner().invoke(cli, args)
        assert res.exit_code == 2 and res.output == f"perfkit: {line}\n", res.output
