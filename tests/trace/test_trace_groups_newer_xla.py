"""Newer XLA writes a collective's iota or mesh-axes groups into fields of the HloInstructionProto itself
(hlo.proto's ``replica_group_list`` oneof: ``collective_device_list`` 87, ``iota_collective_device_list`` 92,
``mesh_axes_replica_group_list`` 93), no longer into ``CollectiveDeviceListProto``'s iota field. The data: the
quickstart's real tp profile (tests/data/jax_cpu_psum, jax 0.10.2: its six all-reduces list their groups in field 87),
its program's HloProto rewritten on the wire here, by hand, into the newer layout. Referee: XLA's dump of the same
program (psum.hlo.txt): replica_groups={{0,1,2,3}}, n = 4, each all-reduce's f32[1,256,64] output 65,536 B, so
2 (n-1)/n of it, 98,304 B, sent per device."""

from pathlib import Path

import pytest

from perfkit.trace import collectives, events
from perfkit.errors import DefinitionNote
from perfkit.trace.protos import XSPACE

DATA = Path(__file__).resolve().parents[1] / "data" / "jax_cpu_psum"
PSUMS = [f"psum.{k}" for k in range(48, 54)]


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append(n & 0x7F | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _read_varint(data: bytes, i: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        byte = data[i]
        n, shift, i = n | (byte & 0x7F) << shift, shift + 7, i + 1
        if byte < 0x80:
            return n, i


def fields(data: bytes) -> list[tuple[int, int, bytes | int]]:
    """A message's fields as (number, wire type, value: an int for a varint, the bytes otherwise), in order."""
    out, i = [], 0
    while i < len(data):
        key, i = _read_varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _read_varint(data, i)
        elif wire == 2:
            size, i = _read_varint(data, i)
            value, i = data[i:i + size], i + size
        else:
            size = {1: 8, 5: 4}[wire]
            value, i = data[i:i + size], i + size
        out.append((number, wire, value))
    return out


def encode(items) -> bytes:
    """(number, value) pairs as a message: an int a varint, bytes length-delimited."""
    out = bytearray()
    for number, value in items:
        if isinstance(value, int):
            out += _varint(number << 3) + _varint(value)
        else:
            out += _varint(number << 3 | 2) + _varint(len(value)) + value
    return bytes(out)


def _rewrite(data: bytes, path: tuple[int, ...], edit) -> bytes:
    """``data`` with every message at ``path`` (field numbers, outermost first) replaced by ``edit(its fields)``."""
    items = []
    for number, _, value in fields(data):
        if path and number == path[0]:
            value = _rewrite(value, path[1:], edit) if len(path) > 1 else edit(fields(value))
        items.append((number, value))
    return encode(items)


def newer_layout(tmp_path, groups: bytes, number: int) -> Path:
    """The tp profile with each all-reduce's field 87 (its listed groups, checked here) replaced by ``groups`` as
    field ``number`` of the instruction."""
    space = XSPACE.FromString((DATA / "tp.xplane.pb").read_bytes())
    (meta,) = [p for p in space.planes if p.name == "/host:metadata"]
    rewritten = []

    def edit(inst):
        if dict((n, v) for n, _, v in inst).get(2) != b"all-reduce":
            return encode((n, v) for n, _, v in inst)
        (listed,) = [v for n, _, v in inst if n == 87]
        assert [fields(g[2]) for g in fields(listed)] == [[(1, 2, bytes([0, 1, 2, 3]))]]  # {{0,1,2,3}}, packed
        assert 49 not in [n for n, _, _ in inst]
        rewritten.append(dict((n, v) for n, _, v in inst)[1].decode())
        return encode([(n, v) for n, _, v in inst if n != 87] + [(number, groups)])

    for m in meta.event_metadata.values():
        for stat in m.stats:
            if stat.bytes_value:
                # HloProto.hlo_module (1) -> computations (3) -> instructions (2)
                stat.bytes_value = _rewrite(stat.bytes_value, (1, 3, 2), edit)
    assert sorted(rewritten) == PSUMS
    path = tmp_path / "tp.xplane.pb"
    path.write_bytes(space.SerializeToString())
    return path


def sized(path: Path) -> dict[str, tuple[int, float]]:
    inst = collectives.instances(events.load([path]))
    return {r.op: (r.group, r.bytes) for r in inst.itertuples()}


def test_iota_groups_in_the_instruction_s_own_field(tmp_path):
    """{{0,1,2,3}} as newer XLA's IotaReplicaGroupList writes it: 1 group of 4, iota [4] untransposed ([1,4]<=[4]).
    Read as the older layout only, the all-reduces had no groups: n unknown, no bytes."""
    # num_replica_groups 1, num_devices_per_group 4, iota_reshape_dims [4] and iota_transpose_perm [0], packed
    iota = encode([(1, 1), (2, 4), (3, bytes([4])), (4, bytes([0]))])
    assert sized(newer_layout(tmp_path, iota, 92)) == {op: (4, 98304.0) for op in PSUMS}


def test_mesh_axes_groups(tmp_path):
    """Over both axes of a mesh x=2, y=2: groups of 2 x 2 = 4 devices."""
    mesh = encode([(1, encode([(1, b"x"), (2, 2)])), (1, encode([(1, b"y"), (2, 2)]))])
    axes = encode([(1, mesh), (2, encode([(1, 0)])), (2, encode([(1, 1)]))])
    assert sized(newer_layout(tmp_path, axes, 93)) == {op: (4, 98304.0) for op in PSUMS}


def test_mesh_sub_axis_groups(tmp_path):
    """Over the sub-axis x:(1)2 of a mesh x=4: groups of 2, so 2 (2-1)/2 x 65,536 = 65,536 B."""
    mesh = encode([(1, encode([(1, b"x"), (2, 4)]))])
    axes = encode([(1, mesh), (2, encode([(1, 0), (2, encode([(1, 1), (2, 2)]))]))])
    assert sized(newer_layout(tmp_path, axes, 93)) == {op: (2, 65536.0) for op in PSUMS}


def test_mesh_axes_naming_no_axis_of_the_mesh_leave_n_unknown(tmp_path):
    """An axis reference past the mesh's one axis: no group is read (not every device), n unknown."""
    mesh = encode([(1, encode([(1, b"x"), (2, 4)]))])
    axes = encode([(1, mesh), (2, encode([(1, 3)]))])
    with pytest.warns(DefinitionNote, match="6 ops \\(6 all-reduce\\) have a group size n"):
        got = sized(newer_layout(tmp_path, axes, 93))
    assert {op: g for op, (g, _) in got.items()} == {op: 0 for op in PSUMS}
