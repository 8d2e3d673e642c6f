"""Real XLA dumps of the quickstart's step (tiny Wan, 4 simulated CPU devices, bfloat16) for the cost
tests: `python tests/hlo/cost_dumps.py FOLDER MODE` dumps one compile of the step into FOLDER and prints
XLA's own cost_analysis() and memory_analysis() as JSON.

MODE ``tp`` or ``sp`` is the quickstart's variant; ``sp-gathers-twice`` is sp with a real program change:
every column-parallel projection of a sharded stream also all-gathers its input once more (XLA's
all-gather), folded into the result so that it is not dead code. Run as its own process: XLA_FLAGS must
hold the dump folder before jax starts.
"""

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MODES = ("tp", "sp", "sp-gathers-twice")


def write(folder: Path, mode: str) -> dict:
    """Run this script for ``mode`` into ``folder``; XLA's figures of the step."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": f"--xla_force_host_platform_device_count=4 --xla_dump_to={folder} --xla_dump_hlo_as_text"}
    res = subprocess.run([sys.executable, __file__, str(folder), mode], capture_output=True, text=True, env=env,
                         cwd=REPO, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def _plan(mode: str):
    from jax import lax

    from perfkit.models.plans import AXIS, SequenceParallel, make_plan

    if mode != "sp-gathers-twice":
        return make_plan(mode, **({"impl": "ring"} if mode == "sp" else {}))

    @dataclasses.dataclass(frozen=True)
    class GathersTwice(SequenceParallel):
        def project(self, x, weights, *, stream):
            out = super().project(x, weights, stream=stream)
            if not self.layout(stream).sharded:
                return out
            again = lax.all_gather(x, AXIS, axis=1, tiled=True)
            return [out[0] + 1e-30 * again.sum(), *out[1:]]

    return GathersTwice(impl="ring")


def compiled_step(family: str, plan):
    """One bfloat16 step of ``family``'s tiny config under ``plan`` on 4 devices, compiled."""
    # jax only once XLA_FLAGS holds the dump folder (this script's own process)
    import jax
    import jax.numpy as jnp

    from perfkit.models.pipeline import DenoiseConfig, Denoiser

    d = Denoiser(family, "tiny", plan, jax.devices()[:4], DenoiseConfig(dtype="bfloat16"))
    return d.program.lower(d.params, d.state, d.conditions, jnp.float32(1), jnp.float32(-0.1)).compile()


def main(folder: str, mode: str) -> None:
    compiled = compiled_step("wan", _plan(mode))
    print(json.dumps({"cost": compiled.cost_analysis(), "temp": compiled.memory_analysis().temp_size_in_bytes}))


if __name__ == "__main__":
    main(*sys.argv[1:])
