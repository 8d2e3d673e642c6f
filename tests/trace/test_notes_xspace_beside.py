"""The hint that a JSON trace's device ops are in the XSpace beside it: only where the two pair as JAX's profiler
writes them in a profile folder (<host>.xplane.pb, its <host>.trace.json.gz, and perfetto_trace.json.gz)."""

import gzip
import json

from click.testing import CliRunner

from perfkit.cli import cli

STEP = {"ph": "X", "pid": 701, "tid": 1, "ts": 10.365, "dur": 69.303, "name": "$worker.py:65 traced_step"}
HINT = "; its device ops are in the XSpace beside it, "


def _folder(fixtures_dir, tmp_path, xspace_name):
    folder = tmp_path / "plugins" / "profile" / "run1"
    folder.mkdir(parents=True)
    xspace = folder / xspace_name
    xspace.write_bytes((fixtures_dir / "xplane" / "mi300_jax_conv_8gpu.xplane.pb").read_bytes())
    return folder, xspace


def _breakdown(path):
    result = CliRunner().invoke(cli, ["trace", "breakdown", str(path)])
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    return result.output


def test_an_unrelated_json_trace_beside_an_xspace_gets_no_hint(fixtures_dir, tmp_path):
    """A CPU-only JSON trace of its own beside an XSpace, and a host's viewer copy beside another host's XSpace:
    neither was written from it (the hint named the XSpace for both before)."""
    folder, _ = _folder(fixtures_dir, tmp_path, "mi300_jax_conv_8gpu.xplane.pb")
    torch_cpu = folder / "torch_cpu.json"
    torch_cpu.write_text(json.dumps({"traceEvents": [STEP]}))
    assert _breakdown(torch_cpu) == f"perfkit: {torch_cpu}: no device ops in these traces\n"
    other_host = folder / "vm.trace.json.gz"
    other_host.write_bytes(gzip.compress(json.dumps({"traceEvents": [STEP]}).encode()))
    assert _breakdown(other_host) == f"perfkit: {other_host}: no device ops in these traces\n"


def test_the_copies_jax_writes_beside_their_xspace_get_the_hint(fixtures_dir, tmp_path):
    folder, xspace = _folder(fixtures_dir, tmp_path, "vm.xplane.pb")
    for name in ("vm.trace.json.gz", "perfetto_trace.json.gz"):
        copy = folder / name
        copy.write_bytes(gzip.compress(json.dumps({"traceEvents": [STEP]}).encode()))
        assert _breakdown(copy).endswith(f"no device ops in these traces{HINT}{xspace} (JAX's profiler writes both)\n")
