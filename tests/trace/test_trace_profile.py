"""``trace.Profile``, the notebook facade: its analyses go the commands' path (``trace.shards``, planes
analysed apart in workers) and equal the analyses of the whole events frame, on the real MI300 profile."""

import pandas as pd
import pytest
from noted import ROUNDED, noted

from perfkit.errors import BadInput
from perfkit.trace import Profile, breakdown, collectives, diff, events, export, hlo_stats, shards, tail, xplane

MI300 = "xplane/mi300_jax_conv_8gpu.xplane.pb"


@pytest.fixture
def planes_apart(monkeypatch):
    """Shards of single planes in forked workers, however small the file."""
    monkeypatch.setattr(xplane, "PARALLEL_BYTES", 0)
    monkeypatch.setattr(shards, "SMALL_PLANE_BYTES", 0)
    monkeypatch.setattr(xplane, "may_start_workers", lambda: True)
    monkeypatch.setattr(shards, "may_start_workers", lambda: True)


def test_the_facade_equals_the_whole_frames_analyses(fixtures_dir, planes_apart, monkeypatch, tmp_path):
    path = fixtures_dir / MI300
    whole = events.load([path], workers=1)
    expected = {"breakdown": breakdown.breakdown(whole), "chips": tail.chips(whole), "last": tail.last_ops(whole, 3),
                "diff": diff.diff(whole, whole, "op"), "collectives": collectives.analyse(whole)}
    assert shards.cut([path]).shards[0].planes is not None  # the profile is cut into planes
    profile = Profile(path)
    loads = []
    monkeypatch.setattr(events, "load", lambda *a, **k: loads.append(a) or whole)
    pd.testing.assert_frame_equal(profile.breakdown(), expected["breakdown"])
    pd.testing.assert_frame_equal(profile.chips(), expected["chips"], check_categorical=False)
    pd.testing.assert_frame_equal(profile.last_ops(3), expected["last"], check_categorical=False)
    pd.testing.assert_frame_equal(profile.diff(Profile(path), "op"), expected["diff"])
    got = profile.collectives()
    for key in ("ops", "steps"):
        pd.testing.assert_frame_equal(got[key], expected["collectives"][key])
    assert not loads  # every analysis above went shard by shard, none through the whole frame
    assert profile.events is whole and len(loads) == 1  # the frame itself: read on first use, once
    assert profile.events is whole and len(loads) == 1
    pd.testing.assert_frame_equal(profile.hlo_stats(), hlo_stats.hlo_stats(whole))  # the two on the whole frame
    written = profile.write_perfetto(tmp_path / "a.json")
    assert written == export.write_perfetto(whole, tmp_path / "b.json") > 0 and len(loads) == 1
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


def test_the_facade_refuses_host_time_against_device_time(fixtures_dir):
    """A CPU-only trace (its host ops stand in) against a GPU trace, either way round: refused as ``perfkit trace
    diff`` refuses it (one BadInput, the same line), not a table of CPU time against kernel time."""
    cpu, gpu = fixtures_dir / "kineto" / "hta_rank_non_gpu.json.gz", fixtures_dir / "kineto" / "hta_nccl_data.json.gz"
    for a, b, host in ((cpu, gpu, "A"), (gpu, cpu, "B")):
        with pytest.raises(BadInput) as refused, noted(ROUNDED):  # the GPU trace's ns times, read before refused
            Profile(a).diff(Profile(b))
        assert refused.value.line() == (f"{a} vs {b}: {host} has no device events (its CPU ops stand in, host time), "
                                        f"{'AB'[host == 'A']} has: their times do not compare")
    assert not Profile(cpu).diff(Profile(cpu)).empty  # host against host compares
