"""trace diff of two unlike sides (chips, trace format) says how they differ, and still compares them."""

import json

from click.testing import CliRunner

from perfkit.cli import cli


def _diff(a, b):
    result = CliRunner().invoke(cli, ["trace", "diff", str(a), str(b), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_one_chip_torch_trace_against_an_eight_gpu_xspace_says_so(fixtures_dir):
    """rank-0: one GPU of a PyTorch job (Kineto JSON); the XSpace: JAX on 8 GPUs (/device:GPU:0..7, the fixtures'
    README). Before, the per-op deltas came with no word that the sides are of unlike jobs."""
    kineto = fixtures_dir / "kineto" / "rank-0.json.gz"
    xspace = fixtures_dir / "xplane" / "mi300_jax_conv_8gpu.xplane.pb"
    doc = _diff(kineto, xspace)
    assert doc["rows"]  # (compared all the same)
    assert [n for n in doc["notes"] if n.startswith("A and B differ")] == [
        "A and B differ: A 1 chip, B 8 chips; A Kineto JSON, B XSpace; the deltas compare their means per chip and "
        "step all the same"]
    back = _diff(xspace, kineto)
    assert "A and B differ: A 8 chips, B 1 chip; A XSpace, B Kineto JSON; " in " ".join(back["notes"])


def test_like_sides_have_no_such_note(fixtures_dir):
    """Two ranks of one job, one GPU each; HTA's TraceDiff pair; an XSpace against itself: nothing to say."""
    kineto = fixtures_dir / "kineto"
    xspace = fixtures_dir / "xplane" / "mi300_jax_conv_8gpu.xplane.pb"
    for a, b in ((kineto / "rank-0.json.gz", kineto / "rank-1.json.gz"),
                 (kineto / "hta_trace_diff_control.json.gz", kineto / "hta_trace_diff_test.json.gz"), (xspace, xspace)):
        assert not any(n.startswith("A and B differ") for n in _diff(a, b)["notes"]), (a, b)


def test_chips_differ_within_one_format(fixtures_dir, tmp_path):
    """A folder of two ranks' traces (a GPU each) against one of them: A 2 chips, B 1; Kineto both: no word of
    format."""
    kineto = fixtures_dir / "kineto"
    for name in ("rank-0.json.gz", "rank-1.json.gz"):
        (tmp_path / name).symlink_to(kineto / name)
    notes = _diff(tmp_path, kineto / "rank-0.json.gz")["notes"]
    assert [n for n in notes if n.startswith("A and B differ")] == [
        "A and B differ: A 2 chips, B 1 chip; the deltas compare their means per chip and step all the same"]
