"""Real XLA dumps for the hlo tests: the demonstration program (cases/repro/rank_constant.py) run as 4
jax.distributed processes on CPU, once with the rank-dependent offset as a Python constant and once as a
runtime array."""

import contextlib
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROGRAM = REPO / "cases" / "repro" / "rank_constant.py"
WORLD = 4
MODES = ("constant", "array")


def distinct_ports(n: int) -> list[int]:
    """n loopback ports free now and different from each other: the sockets stay bound until all n are
    picked, so the OS cannot hand one port out twice (two groups sharing a coordinator abort)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]


def launch(mode: str, out: Path, port: int) -> list[subprocess.Popen]:
    """WORLD rank processes of the demonstration program meeting at ``port``, each dumping to
    ``out/rank<R>``."""
    procs = []
    for r in range(WORLD):
        env = {k: v for k, v in os.environ.items() if not k.startswith("PERFKIT_")}
        env.update({"PERFKIT_RANK": str(r), "PERFKIT_WORLD": str(WORLD), "PERFKIT_COORDINATOR": f"127.0.0.1:{port}",
                    "OFFSET_AS": mode, "JAX_PLATFORMS": "cpu",
                    "XLA_FLAGS": f"--xla_force_host_platform_device_count=1 --xla_dump_to={out}/rank{r} "
                                 "--xla_dump_hlo_as_text"})
        procs.append(subprocess.Popen([sys.executable, str(PROGRAM), "1"], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    return procs


def generate(root: Path) -> None:
    ports = distinct_ports(len(MODES))
    procs = [p for mode, port in zip(MODES, ports) for p in launch(mode, root / mode, port)]
    try:
        for p in procs:
            log, _ = p.communicate(timeout=180)
            assert p.returncode == 0, log[-3000:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()


def hlo_file(folder: Path) -> Path:
    """The one after-optimizations module of a rank's dump folder."""
    (path,) = folder.glob("*jit_step*after_optimizations.txt")
    return path


def rename_everything(folder: Path, rank: int, tag: str = "renamed") -> dict[str, str]:
    """Rename every instruction and computation of a rank (one bijection over the HLO, its computations'
    parameter lists and the buffer assignment), renumber its module counter, and change its metadata and
    FileNames header: the same program as another process could print it. Returns the renaming."""
    hlo = hlo_file(folder / f"rank{rank}")
    text = hlo.read_text()
    names = list(dict.fromkeys(re.findall(r"%([\w.\-]+)", text)))
    mapping = {n: f"{tag}_{k}.{k * 7}" for k, n in enumerate(names)}
    text = re.sub(r"%([\w.\-]+)", lambda m: "%" + mapping[m.group(1)], text)
    # A computation's first line names its parameters without "%": `(param_0.1: f32[64,128], ...)`.
    text = re.sub(r"(?m)^(\S.*)\((.*)\)( -> .*\{)$", lambda m: m.group(1) + "(" + re.sub(
        r"([\w.\-]+): ", lambda p: mapping.get(p.group(1), p.group(1)) + ": ", m.group(2)) + ")" + m.group(3), text)
    text = text.replace("stack_frame_id=", "stack_frame_id=9").replace('1 "/', '1 "/elsewhere/')
    stem = hlo.name.removesuffix(".txt")
    ba = hlo.with_name(stem + "-buffer-assignment.txt")
    ba_text = re.sub(r"<(\d+) ([^\s{>]+)", lambda m: f"<{m.group(1)} {mapping.get(m.group(2), m.group(2))}",
                     ba.read_text())
    memory = hlo.with_name(stem + "-memory-usage-report.txt").read_text()
    for p in hlo.parent.glob("module_0000.*"):
        p.unlink() if p.is_file() else None
    new = hlo.with_name(hlo.name.replace("module_0000", "module_0042"))
    new.write_text(text)
    for suffix, content in (("-buffer-assignment.txt", ba_text), ("-memory-usage-report.txt", memory)):
        new.with_name(new.name.removesuffix(".txt") + suffix).write_text(content)
    return mapping


def rename_module(folder: Path, rank: int, name: str) -> None:
    """Give a rank's step module another name (its files and its HloModule line): a pipeline stage of its own."""
    for path in list((folder / f"rank{rank}").glob("module_*jit_step*.txt")):
        text = path.read_text().replace("HloModule jit_step", f"HloModule {name}", 1)
        path.with_name(path.name.replace("jit_step", name)).write_text(text)
        path.unlink()


def one_process_dump(folder: Path, flags: str = "", as_text: bool = True) -> None:
    """XLA's dump of a one-process jax program on CPU (``jax.jit(lambda x: x + 1)(jnp.ones(3))``: a few small
    modules) in ``folder``, with ``flags`` added to XLA_FLAGS (and --xla_dump_hlo_as_text, with ``as_text``)."""
    text = "--xla_dump_hlo_as_text" if as_text else ""
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": f"--xla_dump_to={folder} {text} {flags}"}
    program = "import jax, jax.numpy as jnp; jax.jit(lambda x: x + 1)(jnp.ones(3))"
    subprocess.run([sys.executable, "-c", program], env=env, check=True, capture_output=True, timeout=120)
