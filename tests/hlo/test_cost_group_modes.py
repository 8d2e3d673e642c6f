"""`perfkit cost` sizes each collective's groups as XLA forms them from its replica groups, its channel_id and
use_global_device_ids, and the module's replica_count and num_partitions: a module of 2 replicas x 4 partitions
(8 devices), its collectives in each of XLA's four group modes."""

import pytest
from click.testing import CliRunner

from perfkit.cli import cli
from perfkit.errors import BadInput
from perfkit.hlo.dumps import DumpFiles
from perfkit.hlo.program_cost import dump_cost

ADD = "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\n"


def _module(header: str, op: str) -> str:
    """A module whose entry runs one collective ``op`` on a f32[1024] (4096 bytes)."""
    return (f"HloModule m, {header}\n\n{ADD}ENTRY e {{\n  p = f32[1024]{{0}} parameter(0)\n"
            f"  ROOT c = {op}\n}}\n")


def _cost(tmp_path, text: str):
    path = tmp_path / "module.txt"
    path.write_text(text)
    return dump_cost(DumpFiles(0, path, None, None))


MESH = "replica_count=2, num_partitions=4"
# (collective, its group size and the bytes one device sends by hand: an all-reduce sends 2(n-1)/n of its 4096 bytes,
# an all-gather (n-1)/n of the 4096 it gathers, a reduce-scatter and an all-to-all (n-1)/n of the 4096 they take)
MODES = {
    # cross-replica-and-partition: a channel_id, no use_global_device_ids; {0,1} are replica ids, each group spans
    # all 4 partitions: 2 x 4 devices (was 2, 4096 bytes)
    "all-reduce over replicas and partitions": (
        "f32[1024]{0} all-reduce(p), channel_id=1, replica_groups={{0,1}}, to_apply=add", 8, 2 * 4096 * 7 / 8),
    # each replica alone, on all 4 partitions: 4 devices (was 1, nothing sent)
    "reduce-scatter over partitions, one replica each": (
        "f32[256]{0} reduce-scatter(p), channel_id=1, replica_groups={{0},{1}}, dimensions={0}, to_apply=add",
        4, 4096 * 3 / 4),
    # the iota form of {{0,1}}: 2 x 4 devices (was 2, 2048 bytes)
    "all-gather over replicas and partitions, iota groups": (
        "f32[1024]{0} all-gather(f32[128]{0} p), channel_id=1, replica_groups=[1,2]<=[2], dimensions={0}",
        8, 4096 * 7 / 8),
    # empty: every replica on every partition, 8 devices (unchanged)
    "all-reduce over replicas and partitions, empty groups": (
        "f32[1024]{0} all-reduce(p), channel_id=1, replica_groups={}, to_apply=add", 8, 2 * 4096 * 7 / 8),
    # cross-replica: no channel_id; empty groups are every replica within one partition: 2 devices (was 8, 7168)
    "all-reduce over replicas, empty groups": (
        "f32[1024]{0} all-reduce(p), replica_groups={}, to_apply=add", 2, 2 * 4096 / 2),
    "all-reduce over replicas": ("f32[1024]{0} all-reduce(p), replica_groups={{0,1}}, to_apply=add", 2, 4096.0),
    # cross-partition: a channel_id on an all-to-all (it has no use_global_device_ids); empty groups are every
    # partition within one replica: 4 devices (was 8, 3584 bytes)
    "all-to-all over partitions, empty groups": (
        "f32[1024]{0} all-to-all(p), channel_id=1, replica_groups={}, dimensions={0}", 4, 4096 * 3 / 4),
    # flattened ids: the groups list devices (unchanged)
    # a collective-permute's pairs with a channel_id are partition ids: the ring runs over the 4 partitions of each
    # replica, a group of 4 (was 8, every device); each device sends its whole buffer once
    "collective-permute over partitions, a ring": (
        "f32[1024]{0} collective-permute(p), channel_id=1, source_target_pairs={{0,1},{1,2},{2,3},{3,0}}", 4, 4096.0),
    # without a channel_id, replica ids: the 2 replicas of each partition (was 8)
    "collective-permute over replicas": (
        "f32[1024]{0} collective-permute(p), source_target_pairs={{0,1},{1,0}}", 2, 4096.0),
    "all-reduce over flattened ids": (
        "f32[1024]{0} all-reduce(p), channel_id=1, replica_groups=[2,4]<=[8], use_global_device_ids=true, "
        "to_apply=add", 4, 2 * 4096 * 3 / 4),
}


@pytest.mark.parametrize("name", sorted(MODES))
def test_groups_are_sized_by_their_mode(tmp_path, name):
    op, n, sent = MODES[name]
    (collective,) = _cost(tmp_path, _module(MESH, op)).collectives
    assert (collective.group, collective.sent_bytes) == (n, sent)


def test_a_one_replica_module_reads_listed_groups_as_devices(tmp_path):
    """JAX's SPMD programs (one replica): groups that name more replicas than the module has read as listed (XLA's
    verifier takes a replica count of 1 as possibly unset); a lone replica 0 spans the 4 partitions."""
    listed = "f32[1024]{0} all-reduce(p), channel_id=1, replica_groups={{0,1,2,3}}, to_apply=add"
    (collective,) = _cost(tmp_path, _module("num_partitions=4", listed)).collectives
    assert (collective.group, collective.sent_bytes) == (4, 2 * 4096 * 3 / 4)
    alone = "f32[1024]{0} all-reduce(p), channel_id=1, replica_groups={{0}}, to_apply=add"
    (collective,) = _cost(tmp_path, _module("num_partitions=4", alone)).collectives
    assert (collective.group, collective.sent_bytes) == (4, 2 * 4096 * 3 / 4)


@pytest.mark.parametrize("op, why", [
    ("f32[1024]{0} all-reduce(p), channel_id=1, replica_groups={{0,1,2,3}}, to_apply=add",
     "c's replica groups name 4 replicas, the module has 2, which XLA refuses"),
    ("f32[1024]{0} all-reduce(p), channel_id=1, replica_groups={}, use_global_device_ids=true, to_apply=add",
     "c has use_global_device_ids=true and replica_groups={}: its groups are flattened device ids, which XLA requires "
     "listed (no group of every device stands in), so its group size is not in the text (jaxlib 0.10.2 prints a "
     "profile's program whose groups are in iota form so: cost the program as XLA dumps it, --xla_dump_to)"),
    ("f32[1024]{0} all-reduce(p), replica_groups={{0,1}}, use_global_device_ids=true, to_apply=add",
     "c has use_global_device_ids but no channel_id, which XLA refuses"),
])
def test_groups_xla_refuses_are_refused(tmp_path, op, why):
    with pytest.raises(BadInput) as refused:
        _cost(tmp_path, _module(MESH, op))
    assert refused.value.path == str(tmp_path / "module.txt")
    assert refused.value.reason == f"line 11: {why}"


# XLA's mesh-axes form of replica groups, as jax 0.10.2 prints a jit's all-gather out of a 4-way sharding:
# the group is the listed axes of the mesh, so its size is the product of their sizes (a sub-axis ``name:(pre)size``
# counts its own size), by hand below.
MESH_AXES = {
    "replica_groups=mesh['axis_0'=4,'axis_1'=1] {'axis_0'}": 4,
    "replica_groups=mesh['dp'=2,'sp'=4] {'sp'}": 4,
    "replica_groups=mesh['dp'=2,'sp'=4] {'dp','sp'}": 8,
    "replica_groups=mesh['dp'=2,'sp'=4] {'sp':(1)2}": 2,
    "replica_groups=mesh[dp=2,sp=4] {dp}": 2,
    "replica_groups=mesh['a'=2,'b'=2], device_ids=([[0,2],[1,3]]) {'b'}": 2,
}


@pytest.mark.parametrize("groups", sorted(MESH_AXES))
def test_mesh_axes_groups_are_sized_by_their_axes(tmp_path, groups):
    n = MESH_AXES[groups]
    op = f"f32[1024]{{0}} all-gather(f32[{1024 // n}]{{0}} p), channel_id=1, {groups}, dimensions={{0}}, " \
         "use_global_device_ids=true"
    (collective,) = _cost(tmp_path, _module("num_partitions=8", op)).collectives
    assert (collective.group, collective.sent_bytes) == (n, 4096 * (n - 1) / n)


# The program jit__psum of tests/data/real/xplane/xprof_tpu_inference_2.xplane.pb (8 TPU chips), its /host:metadata
# HloProto printed by jaxlib 0.10.2 (XlaComputation(module).as_hlo_text()), the all-reduce's backend_config left out.
# The header names no replica_count or num_partitions (the proto carries no module config). XLA reads channel_id with
# use_global_device_ids=true as its flattened-id mode, where replica groups list device ids and may not be empty
# (collective_ops_utils.cc, GetParticipatingDevicesGroups: "replica groups cannot be empty for kFlattenedID mode"):
# no empty-means-everyone default exists there. The proto itself, by hand (its raw fields: HloInstructionProto field
# 87, collective_device_list), holds the iota list [4,2]<=[2,4]T(1,0): 4 groups of 2 devices, not the 8 of the
# sharding's devices=[2,1,1,1,1,4]<=[8], which the printed {} would have read as.
PSUM = "\n".join([
    "HloModule jit__psum, is_scheduled=true, entry_computation_layout="
    "{(f32[1,5,1024,1024,256]{4,3,2,1,0:T(8,128)})->f32[5,1024,1024,256]{3,2,1,0:T(8,128)}}",
    "",
    "region_0.3.clone {",
    "  Arg_1.0 = f32[]{:T(128)} parameter(1)",
    "  Arg_0.0 = f32[]{:T(128)} parameter(0)",
    "  ROOT add.0 = f32[]{:T(128)} add(Arg_0.0, Arg_1.0)",
    "}",
    "",
    "ENTRY main.10_spmd {",
    "  param = f32[1,5,1024,1024,256]{4,3,2,1,0:T(8,128)} parameter(0), "
    "sharding={devices=[2,1,1,1,1,4]<=[8] last_tile_dim_replicate}",
    "  bitcast = f32[5,1024,1024,256]{3,2,1,0:T(8,128)} bitcast(param)",
    "  ROOT all-reduce = f32[5,1024,1024,256]{3,2,1,0:T(8,128)} all-reduce(bitcast), channel_id=1, replica_groups={}, "
    "use_global_device_ids=true, to_apply=region_0.3.clone",
    "}",
    ""])  # the printed lines, long ones cut in two here


def test_a_printed_psum_whose_groups_cannot_be_known_is_refused_saying_why(tmp_path):
    """`perfkit cost` on the printed jit__psum refused in one line that read only 'has use_global_device_ids but no
    replica groups, which XLA refuses': it now says why its group size is unknown and what to cost instead."""
    (tmp_path / "module_0001.jit__psum.tpu_after_optimizations.txt").write_text(PSUM)
    result = CliRunner().invoke(cli, ["cost", str(tmp_path)])
    assert result.exit_code == 2 and result.output.count("\n") == 1
    assert result.output == (
        f"perfkit: {tmp_path / 'module_0001.jit__psum.tpu_after_optimizations.txt'}: line 12: all-reduce has "
        "use_global_device_ids=true and replica_groups={}: its groups are flattened device ids, which XLA requires "
        "listed (no group of every device stands in), so its group size is not in the text (jaxlib 0.10.2 prints a "
        "profile's program whose groups are in iota form so: cost the program as XLA dumps it, --xla_dump_to)\n")


def test_the_counts_are_read_off_the_hlo_module_line_wherever_it_lies(tmp_path):
    """A text whose HloModule line is not its first (a blank line, a note above it): every replica is 4 devices,
    an all-reduce of 4096 bytes sends 2 x 3/4 of them (it read the counts off the first line alone: 1 device,
    nothing sent)."""
    op = "f32[1024]{0} all-reduce(p), replica_groups={}, to_apply=add"
    (collective,) = _cost(tmp_path, "\n// printed by hand\n" + _module("replica_count=4", op)).collectives
    assert (collective.group, collective.sent_bytes) == (4, 2 * 4096 * 3 / 4)


# A header that names neither count: a one-device program (XLA prints each count only where it is not 1), or one
# printed from its HloProto (a profile's, which keeps no module config), as jit__psum above ran on 8 chips. What
# sizes a collective's groups by those counts is refused saying so (it was a group of 1 and nothing sent).
COUNTED = ("is sized by the module's replica and partition counts ({}), which its HloModule line does not name (XLA "
           "prints replica_count and num_partitions only where they are not 1, and a program printed from its "
           "HloProto, as a profile keeps it, names neither): its group size is not in the text")
UNKNOWN_COUNTS = {
    "f32[1024]{0} all-reduce(p), replica_groups={}, to_apply=add": "replica_groups={} and no channel_id: every replica",
    "f32[1024]{0} all-reduce(p), channel_id=1, replica_groups={}, to_apply=add":
        "replica_groups={}, a channel_id and no use_global_device_ids: every device",
    "f32[1024]{0} all-to-all(p), channel_id=1, replica_groups={}, dimensions={0}":
        "replica_groups={} and a channel_id: every partition",
    "f32[1024]{0} all-reduce(p), channel_id=1, replica_groups={{0}}, to_apply=add":
        "replica groups with a channel_id and no use_global_device_ids: each group's replicas on every partition",
    "f32[1024]{0} collective-permute(p), channel_id=1, source_target_pairs={{0,1},{1,0}}":
        "source-target pairs with a channel_id: every partition",
    "f32[1024]{0} collective-permute(p), source_target_pairs={{0,1},{1,0}}": "source-target pairs: every replica",
}


@pytest.mark.parametrize("op", sorted(UNKNOWN_COUNTS))
def test_groups_sized_by_counts_the_header_does_not_name_are_refused(tmp_path, op):
    (tmp_path / "module_0001.m.gpu_after_optimizations.txt").write_text(_module("is_scheduled=true", op))
    result = CliRunner().invoke(cli, ["cost", str(tmp_path)])
    assert result.exit_code == 2 and result.output.count("\n") == 1
    assert result.output == (f"perfkit: {tmp_path / 'module_0001.m.gpu_after_optimizations.txt'}: line 11: c "
                             f"{COUNTED.format(UNKNOWN_COUNTS[op])}\n")


# Listed groups size themselves whatever the counts: kept, by hand.
LISTED = {
    "f32[1024]{0} all-reduce(p), replica_groups={{0,1},{2,3}}, to_apply=add": (2, 2 * 4096 / 2),
    "f32[1024]{0} all-reduce(p), channel_id=1, replica_groups=[2,4]<=[8], use_global_device_ids=true, to_apply=add":
        (4, 2 * 4096 * 3 / 4),
    "f32[1024]{0} all-to-all(p), channel_id=1, replica_groups={{0,1,2,3}}, dimensions={0}": (4, 4096 * 3 / 4),
}


@pytest.mark.parametrize("op", sorted(LISTED))
def test_listed_groups_need_no_counts(tmp_path, op):
    (collective,) = _cost(tmp_path, _module("is_scheduled=true", op)).collectives
    assert (collective.group, collective.sent_bytes) == LISTED[op]


# Each group form and kind against a count by hand, the module's counts named: (header, collective, group size,
# bytes one device sends of the 4096 it takes or gathers).
FORMS = {
    # iota [2,4]<=[8]: ids 0..7 in 2 rows of 4, each row a group of 4 flattened ids
    "all-reduce, iota": ("num_partitions=8", "f32[1024]{0} all-reduce(p), channel_id=1, replica_groups=[2,4]<=[8], "
                         "use_global_device_ids=true, to_apply=add", 4, 2 * 4096 * 3 / 4),
    # iota [4,2]<=[2,4]T(1,0): ids 0..7 as 2x4, transposed to 4x2 ({0,4},{1,5},{2,6},{3,7}), 4 groups of 2
    "all-gather, transposed iota": ("num_partitions=8", "f32[1024]{0} all-gather(f32[512]{0} p), channel_id=1, "
                                    "replica_groups=[4,2]<=[2,4]T(1,0), dimensions={0}, use_global_device_ids=true",
                                    2, 4096 / 2),
    # {{0,1},{2,3}} of 4 replicas, no channel_id: groups of 2 replicas
    "reduce-scatter, listed": ("replica_count=4", "f32[512]{0} reduce-scatter(p), replica_groups={{0,1},{2,3}}, "
                               "dimensions={0}, to_apply=add", 2, 4096 / 2),
    # {{0,1},{2,3}} with a channel_id on an all-to-all: partition ids, groups of 2 partitions
    "all-to-all, listed partitions": ("num_partitions=4", "f32[1024]{0} all-to-all(p), channel_id=1, "
                                      "replica_groups={{0,1},{2,3}}, dimensions={0}", 2, 4096 / 2),
    # a ring over 4 partitions: each device sends its whole buffer once
    "collective-permute, ring": ("num_partitions=4", "f32[1024]{0} collective-permute(p), channel_id=1, "
                                 "source_target_pairs={{0,1},{1,2},{2,3},{3,0}}", 4, 4096.0),
}


@pytest.mark.parametrize("name", sorted(FORMS))
def test_group_forms_by_hand(tmp_path, name):
    header, op, n, sent = FORMS[name]
    (collective,) = _cost(tmp_path, _module(header, op)).collectives
    assert (collective.group, collective.sent_bytes) == (n, sent)


def test_pairs_naming_more_ids_than_the_module_has_are_refused(tmp_path):
    """A ring over 4 partitions in a module of 2 (XLA's verifier refuses it): refused saying so."""
    op = "f32[1024]{0} collective-permute(p), channel_id=1, source_target_pairs={{0,1},{1,2},{2,3},{3,0}}"
    (tmp_path / "module_0001.m.gpu_after_optimizations.txt").write_text(_module("num_partitions=2", op))
    result = CliRunner().invoke(cli, ["cost", str(tmp_path)])
    assert result.exit_code == 2 and result.output == (
        f"perfkit: {tmp_path / 'module_0001.m.gpu_after_optimizations.txt'}: line 11: c's source-target pairs name "
        "partition 3, the module has 2, which XLA refuses\n")
