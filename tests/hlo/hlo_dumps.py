"""Real XLA dumps for the hlo tests: the demonstration program (cases/repro/rank_constant.py) run as 4
jax.distributed processes on CPU, once with the rank-dependent offset as a Python constant and once as a
runtime array."""

import os
import subprocess
import sys
from pathlib import Path

from perfkit.run.trial import free_port

REPO = Path(__file__).resolve().parents[2]
PROGRAM = REPO / "cases" / "repro" / "rank_constant.py"
WORLD = 4
MODES = ("constant", "array")


def launch(mode: str, out: Path) -> list[subprocess.Popen]:
    """WORLD rank processes of the demonstration program, each dumping to ``out/rank<R>``."""
    port = free_port()
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
    procs = [p for mode in MODES for p in launch(mode, root / mode)]
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
