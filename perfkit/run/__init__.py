"""Running cases: case files, the interleaved trial loop, rank processes, the run directory.

In a notebook::

    from perfkit import run
    case = run.load_case("cases/quickstart.yaml", ["repeats.min=2"])
    result = run.run_case(case, "reports/runs/mine")   # trials in fresh processes, then the report

(``perfkit.analysis`` reads the run directory back as frames.)
"""

from perfkit.common.lazy import exports

__all__ = ["load_case", "run_case"]
__getattr__, __dir__ = exports(__name__, {"load_case": "case:load", "run_case": "runner"})
