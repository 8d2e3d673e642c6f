"""The run-data layer: what a run directory holds, as types every stage reads against.

``summary`` (summary.json), ``trials`` (a ``trials.jsonl`` line), ``metrics`` (a line of the metrics
protocol) are TypedDicts: the dicts the code builds and reads are these, checked by a type checker, not
wrapped. ``schema`` turns them into the JSON Schema shipped beside them (``summary.schema.json``), which a
summary.json validates against. Below analysis, report and serve: imports common and errors only.
"""
