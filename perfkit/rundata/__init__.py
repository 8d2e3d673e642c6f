"""The run-data layer: the run contract, what a run directory holds, read and written, and the types
every stage reads it against. Below analysis, report and run: imports common and errors only.

``case`` (case files: load, override, validate; their ``placement`` and ``serve:`` sections in
``placement`` and ``serve_spec``), ``rundir`` (the run directory on disk), ``metrics`` (the metrics
protocol: its lines as types and their reader), ``exits`` (a rank's recorded end in words). ``summary``
(summary.json), ``trials`` (a ``trials.jsonl`` line) and ``metrics``' events are TypedDicts: the dicts
the code builds and reads are these, checked by a type checker, not wrapped. ``schema`` turns them into
the JSON Schema shipped beside them (``summary.schema.json``), which a summary.json validates against.

In a notebook::

    from perfkit import rundata
    case = rundata.load_case("cases/quickstart.yaml", ["repeats.min=2"])   # a validated Case
"""

from perfkit.common.lazy import exports

__all__ = ["load_case"]
__getattr__, __dir__ = exports(__name__, {"load_case": "case:load"})
