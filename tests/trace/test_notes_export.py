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
