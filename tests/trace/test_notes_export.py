"""perfkit's own Perfetto export given back to analyse: refused in one line that says what it is."""

import gzip
import json

from click.testing import CliRunner

from perfkit.cli import cli
from perfkit.trace.export import is_export

EXPORT = ("is perfkit's own export (perfkit trace export --perfetto), a view to open in ui.perfetto.dev, not a trace "
          "to analyse: give the traces it merged")


def _export(fixtures_dir, tmp_path):
    ranks = [str(fixtures_dir / "kineto" / f"rank-{r}.json.gz") for r in (0, 1)]
    out = tmp_path / "exp" / "merged.json"
    result = CliRunner().invoke(cli, ["trace", "export", *ranks, "--perfetto", str(out)])
    assert result.exit_code == 0, result.output
    return out


def test_the_export_says_it_is_perfkits_at_its_top_level(fixtures_dir, tmp_path):
    out = _export(fixtures_dir, tmp_path)
    doc = json.loads(out.read_text())
    assert doc["perfkit_export"] == "perfkit trace export --perfetto" and doc["traceEvents"]
    zipped = tmp_path / "merged.json.gz"
    zipped.write_bytes(gzip.compress(out.read_bytes()))
    assert is_export(out) and is_export(zipped)
    assert not any(is_export(p) for p in (fixtures_dir / "kineto").glob("*.json.gz"))


def test_breakdown_and_diff_of_the_export_say_what_it_is(fixtures_dir, tmp_path):
    """Before: 'no device ops in these traces' alone (its categories, compute / ici / host, are the export's)."""
    out = _export(fixtures_dir, tmp_path)
    result = CliRunner().invoke(cli, ["trace", "breakdown", str(out)])
    assert result.exit_code == 2 and result.stdout == "", result.output
    assert result.stderr == f"perfkit: {out}: no device ops in these traces; it {EXPORT}\n"
    rank = str(fixtures_dir / "kineto" / "rank-0.json.gz")
    for args in ([rank, str(out)], [str(out), rank], [rank, str(out), "--last-step", "drop"]):
        result = CliRunner().invoke(cli, ["trace", "diff", *args])
        assert result.exit_code == 2 and result.stdout == "", result.output
        assert result.stderr.splitlines()[-1] == f"perfkit: {out}: no device ops in the trace; it {EXPORT}", args


def test_a_copy_written_again_is_still_known_by_its_marker(fixtures_dir, tmp_path):
    """The export loaded and written again by json (indented, keys sorted, compact), and gzipped: the marker is
    where json put it, not the export's first bytes. Before: 'no device ops in these traces' alone."""
    doc = json.loads(_export(fixtures_dir, tmp_path).read_text())
    copies = {"indented.json": json.dumps(doc, indent=1), "sorted.json": json.dumps(doc, sort_keys=True),
              "compact.json": json.dumps(doc, separators=(",", ":")),
              # (the marker after the events, where a tool writing metadata last would put it)
              "last.json": json.dumps({"traceEvents": doc["traceEvents"], "perfkit_export": doc["perfkit_export"]})}
    for name, text in copies.items():
        (tmp_path / name).write_text(text)
        (tmp_path / f"{name}.gz").write_bytes(gzip.compress(text.encode()))
    for copy in [tmp_path / n for n in copies] + [tmp_path / f"{n}.gz" for n in copies]:
        result = CliRunner().invoke(cli, ["trace", "breakdown", str(copy)])
        assert result.exit_code == 2 and result.stdout == "", result.output
        assert result.stderr == f"perfkit: {copy}: no device ops in these traces; it {EXPORT}\n"


def test_a_trace_naming_the_marker_in_an_event_is_no_export(tmp_path):
    """The marker's words inside an event's name (a string, its quotes escaped) make no export."""
    words = json.dumps({"perfkit_export": "perfkit trace export --perfetto"})
    trace = tmp_path / "host.json"
    trace.write_text(json.dumps({"traceEvents": [{"ph": "X", "name": words, "ts": 1, "dur": 2, "pid": 1, "tid": 1}]}))
    assert not is_export(trace)
