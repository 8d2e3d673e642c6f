"""Writes tests/hlo/data/custom_calls/: XLA's CPU dump (jax 0.10.2) of one program holding two custom-calls no cost
analysis knows (LAPACK's ``lapack_ssyevd_ffi`` under ``jnp.linalg.eigh``, and ``jax.pure_callback``'s
``xla_ffi_python_cpu_callback``), with XLA's own ``cost_analysis()`` of that compile in ``xla_cost_analysis.json``.

``python tests/hlo/custom_call_dumps.py`` compiles in a process of its own (XLA_FLAGS must hold the dump folder
before jax starts) and keeps the program's text before and after optimizations (no metadata), its buffer assignment
and its memory-usage report.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "hlo" / "data" / "custom_calls"
PROGRAM = "jit_eigh_and_callback"
KEPT = ("before_optimizations.txt", "cpu_after_optimizations.txt", "cpu_after_optimizations-buffer-assignment.txt",
        "cpu_after_optimizations-memory-usage-report.txt")


def compile_program() -> dict:
    """The program compiled (its dump written), and XLA's cost analysis of it."""
    # jax only here: the process XLA_FLAGS was set for
    import jax
    import jax.numpy as jnp
    import numpy as np

    def eigh_and_callback(x):
        w, v = jnp.linalg.eigh(x @ x.T)
        y = jax.pure_callback(np.sin, jax.ShapeDtypeStruct(x.shape, x.dtype), x)
        return v @ y + w[:, None]

    compiled = jax.jit(eigh_and_callback).lower(jax.ShapeDtypeStruct((16, 16), jnp.float32)).compile()
    return compiled.cost_analysis()


def write() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        # no metadata: the stack frames it holds would name this checkout's own path
        env = {**os.environ, "JAX_PLATFORMS": "cpu",
               "XLA_FLAGS": f"--xla_dump_to={tmp} --xla_dump_hlo_as_text --xla_dump_disable_metadata"}
        res = subprocess.run([sys.executable, __file__, "compile"], env=env, check=True, timeout=300,
                             capture_output=True, text=True)
        shutil.rmtree(DATA, ignore_errors=True)
        DATA.mkdir(parents=True)
        for suffix in KEPT:
            (path,) = Path(tmp).glob(f"module_*.{PROGRAM}.{suffix}")
            shutil.copy(path, DATA / path.name)
        (DATA / "xla_cost_analysis.json").write_text(res.stdout)


if __name__ == "__main__":
    if sys.argv[1:] == ["compile"]:
        print(json.dumps(compile_program(), indent=1, sort_keys=True))
    else:
        write()
