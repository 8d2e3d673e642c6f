"""Start N ranks of a Python script as subprocesses with the launcher variables (as perfkit's runner
and torchrun set them), wait for all, and fail with every rank's stderr tail if any rank fails."""

import os
import subprocess
import sys
from pathlib import Path

from perfkit.run.trial import free_port

REPO = Path(__file__).resolve().parents[2]


def launch(script: Path, world: int, args: list[str], timeout: float = 120) -> None:
    port = free_port()
    procs = []
    for rank in range(world):
        env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
               "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(world)}
        procs.append(subprocess.Popen([sys.executable, str(script), *map(str, args)], env=env, cwd=REPO,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    failures = []
    try:
        for rank, proc in enumerate(procs):
            _, err = proc.communicate(timeout=timeout)
            if proc.returncode:
                failures.append(f"rank {rank} exit {proc.returncode}:\n{err[-2000:]}")
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert not failures, "\n".join(failures)
