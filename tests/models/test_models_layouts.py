"""Where each plan puts a family's rows: layouts against hand-computed row orders, the real configs'
padding against the reference PRs' numbers, per-token tables, joining and splitting streams on 4
simulated devices, and the registry's and plans' errors for bad names and options."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P
from model_testing import CONFIGS

from perfkit import models
from perfkit.errors import BadInput
from perfkit.models.mmdit import JOINT
from perfkit.models.plans import AXIS, make_plan


def _bind(family, config, plan, ranks=4, **options):
    fam = models.get(family)
    return make_plan(plan, **options).bind(fam.streams(fam.config(config)), ranks)


def _shard_map(fn, out_specs, in_specs=()):
    mesh = Mesh(np.asarray(jax.devices()[:4]), (AXIS,))
    return jax.jit(jax.shard_map(fn, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False))


def test_interleaved_joint_rows_are_each_ranks_shards_side_by_side():
    # FLUX, 10 text + 35 image rows, each padded to a multiple of 8 (text 16: 4 a rank; image 40: 10).
    plan = _bind("flux", CONFIGS["flux"]["odd"], "sp", pad="halves")
    pad = [-1]
    want = np.array([
        [0, 1, 2, 3, *range(10, 20)],
        [4, 5, 6, 7, *range(20, 30)],
        [8, 9, *pad * 2, *range(30, 40)],
        [*pad * 4, *range(40, 45), *pad * 5],
    ])
    np.testing.assert_array_equal(plan.layout(JOINT).order, want)
    assert plan.layout("text").pad.padded == 16 and plan.layout("image").pad.padded == 40


def test_contiguous_joint_chunks_straddle_the_video_text_boundary():
    plan = _bind("hunyuan", "tiny", "sp")  # 64 video + 12 text rows: 4 chunks of 19, no padding
    order = plan.layout(JOINT).order
    np.testing.assert_array_equal(order, np.arange(76).reshape(4, 19))
    assert order[3].min() < 64 <= order[3].max()  # rank 3 holds video rows 57-63 and text rows 64-75
    padded = _bind("hunyuan", CONFIGS["hunyuan"]["odd"], "ulysses", pad="halves")  # 35 + 10 -> 48
    np.testing.assert_array_equal(padded.layout(JOINT).order[3], [36, 37, 38, 39, 40, 41, 42, 43, 44, -1, -1, -1])


def test_tensor_parallel_keeps_every_stream_whole():
    plan = _bind("ltx2", "tiny", "tp")  # 90 video rows do not split, which tp does not need
    for stream in ("video", "audio", "text"):
        assert not plan.layout(stream).sharded and plan.stream_spec(stream) == P()
    sp = _bind("ltx2", "tiny", "sp", pad="halves")
    assert sp.stream_spec("video") == P(None, AXIS) and sp.stream_spec("audio") == P()


def test_real_configs_split_as_in_the_reference_prs():
    assert _bind("ltx2", "real", "sp", pad="halves").layout("video").pad.padded == 2312  # 2310 -> 2312 at 4
    assert _bind("hunyuan", "real", "sp").layout(JOINT).pad.shard_rows == 2624  # 10496 joined rows = 4 x 2624
    assert _bind("wan", "real", "sp", pad="tiles").layout("video").pad.padded == 32768  # 21 x 30 x 52 = 32760
    with pytest.raises(BadInput, match="'video' has 2310 rows"):
        _bind("ltx2", "real", "ulysses")


def test_per_token_tables_follow_the_gathered_order_with_zero_pad_rows():
    plan = _bind("flux", CONFIGS["flux"]["odd"], "sp", pad="halves")
    table = np.arange(1, 46, dtype=np.float32)[:, None] * np.ones((1, 3), np.float32)  # row r holds r + 1
    got = np.asarray(plan.projected_rows(jnp.asarray(table), stream=JOINT))  # sp: every row, gathered order
    order = plan.layout(JOINT).gathered
    np.testing.assert_array_equal(got[:, 0], np.where(order >= 0, order + 1, 0))


def test_ulysses_tables_hold_each_ranks_own_rows():
    plan = _bind("hunyuan", CONFIGS["hunyuan"]["odd"], "ulysses", pad="halves")
    table = jnp.arange(1, 46, dtype=jnp.float32)[:, None]
    got = np.asarray(_shard_map(lambda: plan.projected_rows(table, stream=JOINT), P(AXIS))())
    order = plan.layout(JOINT).gathered
    np.testing.assert_array_equal(got[:, 0], np.where(order >= 0, order + 1, 0))


@pytest.mark.parametrize("family,plan_name", [("hunyuan", "sp"), ("flux", "ulysses")])
def test_join_and_split_move_rows_where_the_layouts_say(family, plan_name):
    """Each rank's rows of the joined stream are the rows its layout names (the contiguous join
    gathers, concatenates and cuts a chunk at a runtime offset); split inverts join."""
    plan = _bind(family, CONFIGS[family]["odd"], plan_name, pad="halves")
    parts = plan.streams[JOINT].parts
    offsets = dict(zip(parts, np.cumsum([0] + [plan.layout(p).rows for p in parts[:-1]])))

    def rows_of(stream, offset=0):  # (1, padded rows, 1): plain row + 1 (+ offset in the joint), pads 0
        order = plan.layout(stream).gathered
        return jnp.asarray(np.where(order >= 0, order + 1 + offset, 0), jnp.float32)[None, :, None]

    inputs = [rows_of(p, offsets[p]) for p in parts]

    def join_split(*xs):
        h = plan.join(list(xs), joint=JOINT)
        return (h, *plan.split(h, joint=JOINT))

    spec = P(None, AXIS)
    joined, *back = _shard_map(join_split, (spec,) * (1 + len(parts)), (spec,) * len(parts))(*inputs)
    np.testing.assert_array_equal(joined, rows_of(JOINT))
    for got, want in zip(back, inputs):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name,options,field,message", [
    ("pipeline", {}, "options.plan", "unknown plan 'pipeline'"),
    ("tp", {"pad": "halves"}, "options", "plan 'tp' takes options ['split_rope'], not ['pad']"),
    ("sp", {"pad": "even"}, "options.pad", "pad must be one of"),
    ("sp", {"impl": "cuda"}, "options.impl", "impl must be one of ['xla', 'ring', 'pallas']"),
])
def test_bad_plan_names_and_options_are_bad_input(name, options, field, message):
    with pytest.raises(BadInput) as err:
        make_plan(name, **options)
    assert err.value.field == field and message in err.value.reason


def test_bad_model_names_are_bad_input():
    with pytest.raises(BadInput) as err:
        models.get("sora")
    assert err.value.field == "model.name" and "known: flux, hunyuan, ltx2, wan" in err.value.reason
    with pytest.raises(BadInput) as err:
        models.get("wan").config("huge")
    assert err.value.field == "model.config"
