"""Running cases: the interleaved trial loop, the case kinds' processes, the finished run's report.

In a notebook::

    from perfkit import rundata, run
    case = rundata.load_case("cases/quickstart.yaml", ["repeats.min=2"])
    result = run.run_case(case, "reports/runs/mine")   # trials in fresh processes, then the report

(``perfkit.analysis`` reads the run directory back as frames.)
"""

from perfkit.common.lazy import exports

__all__ = ["run_case"]
__getattr__, __dir__ = exports(__name__, {"run_case": "runner"})
