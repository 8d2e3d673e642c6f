"""Writes tests/hlo/data/called/: XLA's CPU dumps (jax 0.10.2) of two programs, each compiled twice with one Python
constant changed (2.0, then 3.0), so that the two compiles differ only inside a called computation: ``jit_f``
inside a fusion's body, ``jit_g`` inside a fusion in a while loop's body.

``python tests/hlo/called_dumps.py`` runs each compile in a process of its own (XLA_FLAGS must hold the dump
folder before jax starts) and keeps the after-optimizations text of ``jit_f`` and ``jit_g``.
"""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "called"
CONSTANTS = ("2.0", "3.0")


def programs(c: float) -> None:
    # jax only here: the process XLA_FLAGS was set for
    import jax
    import jax.numpy as jnp

    def f(x):
        return jnp.tanh(x * c + 1.0).sum()

    def g(x):
        return jax.lax.fori_loop(0, 5, lambda i, v: jnp.sin(v) * c + v, x)

    x = jnp.ones((64, 128), jnp.float32)
    jax.block_until_ready((jax.jit(f)(x), jax.jit(g)(x)))


def write() -> None:
    for c in CONSTANTS:
        with tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, "JAX_PLATFORMS": "cpu",
                   "XLA_FLAGS": f"--xla_dump_to={tmp} --xla_dump_hlo_as_text"}
            subprocess.run([sys.executable, __file__, c], env=env, check=True, timeout=300)
            out = DATA / f"c{c[0]}"
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir(parents=True)
            for path in Path(tmp).glob("module_*.jit_[fg].cpu_after_optimizations.txt"):
                shutil.copy(path, out / path.name)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        programs(float(sys.argv[1]))
    else:
        write()
