"""The run-data layer: the run contract, what a run directory holds, read and written, and the types
every stage reads it against. Below analysis, report and run: imports common and errors only.

``case`` (case files: load, override, validate; their ``placement`` and ``serve:`` sections in
``placement`` and ``serve_spec``), ``rundir`` (the run directory on disk), ``metrics`` (the metrics
protocol: its lines as types and their reader), ``exits`` (a rank's recorded end in words). ``summary``
(summary.json), ``trials`` (a ``trials.jsonl`` line) and ``metrics``' events are TypedDicts, not wrappers:
the code builds and reads plain dicts, annotated with these types. No type checker runs (``make test`` has
none); what is checked is this. ``schema`` turns ``summary`` into the JSON Schema shipped beside it
(``summary.schema.json``), which the tests hold equal to the types; a summary.json is validated against it by
``perfkit check`` as it reads one and, where PERFKIT_CHECK_SUMMARY is set (the test suite sets it), as it is
written. The tests hold the demo run's ``trials.jsonl`` lines to ``TrialRecord``'s keys (no more, none
missing), and docs/architecture.md's summary.json and trials.jsonl keys to the types'. Elsewhere the types are
annotations: ``TrialRecord`` where ``run.ranks`` and ``run.serve_trial`` build a record and ``rundir`` writes and
merges it (``rundir.read_trials``, every reader's, holds each line to its schema), the event types in
``metrics.read_metrics``, which checks each line's fields itself.

In a notebook::

    from perfkit import rundata
    case = rundata.load_case("cases/quickstart.yaml", ["repeats.min=2"])   # a validated Case
"""

from perfkit.common.lazy import exports

__all__ = ["load_case"]
__getattr__, __dir__ = exports(__name__, {"load_case": "case:load"})
