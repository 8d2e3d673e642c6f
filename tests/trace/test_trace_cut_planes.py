"""An xplane.pb cut short exactly where a plane ends parses as an XSpace of fewer planes. A profiler records its
hostname in every XSpace (TSL's ProfilerSession) and adds its Task Environment plane last, and protobuf writes the
hostnames after the planes: every real xplane in tests/data/real ends with one or both. A file with neither at its
end is read, with a note naming the file, its last plane and the device planes read: it may be another program's
whole file or a profiler's cut short, which its bytes do not tell apart. A file whose hostnames lie before its
planes is neither a profiler's file nor one cut from it (the hostnames, written last, would be gone): no note."""

import json

import pytest
from click.testing import CliRunner

from perfkit.cli import cli
from perfkit.trace.protos import XSPACE

CUT = "cut short where a plane ends"


def _top_fields(data: bytes) -> list[tuple[int, int]]:
    """(field number, end) of each top-level field of a serialized XSpace, its LENGTH fields read by hand."""
    out, pos = [], 0

    def varint(at):
        value = shift = 0
        while True:
            byte = data[at]
            value, shift, at = value | (byte & 0x7F) << shift, shift + 7, at + 1
            if byte < 0x80:
                return value, at

    while pos < len(data):
        tag, pos = varint(pos)
        assert tag & 7 == 2  # an XSpace's fields are all LENGTH
        size, pos = varint(pos)
        pos += size
        out.append((tag >> 3, pos))
    return out


def _notes(path):
    result = CliRunner().invoke(cli, ["trace", "breakdown", str(path), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["notes"], json.loads(result.stdout)["rows"]


def test_every_real_xplane_ends_as_a_whole_one_and_has_no_note(fixtures_dir):
    for path in sorted((fixtures_dir / "xplane").glob("*.xplane.pb")):
        data = path.read_bytes()
        space = XSPACE.FromString(data)
        last = _top_fields(data)[-1][0]
        assert last == 4 or space.planes[-1].name == "Task Environment", path.name
        notes, _ = _notes(path)
        assert not any(CUT in n for n in notes), (path.name, notes)


@pytest.mark.parametrize("name, kept, read", [
    ("mi300_jax_conv_8gpu.xplane.pb", 5, "4 device planes read: /device:GPU:0 to 3"),
    ("xprof_tpu_inference_2.xplane.pb", 2, "2 device planes read: /device:TPU:0, 1"),
])
def test_a_file_cut_where_a_plane_ends_is_noted(fixtures_dir, tmp_path, name, kept, read):
    """The real file's first ``kept`` planes, its bytes cut where the last of them ends (found by hand above)."""
    data = (fixtures_dir / "xplane" / name).read_bytes()
    fields = _top_fields(data)
    assert [n for n, _ in fields[:kept]] == [1] * kept
    cut = tmp_path / name
    cut.write_bytes(data[:fields[kept - 1][1]])
    planes = XSPACE.FromString(cut.read_bytes()).planes
    assert len(planes) == kept and not XSPACE.FromString(cut.read_bytes()).hostnames
    notes, rows = _notes(cut)
    assert rows  # still read
    assert [n for n in notes if CUT in n] == [
        f"{cut}: it records no hostnames and ends with its plane {planes[-1].name!r}, where a profiler's XSpace ends "
        f"with its Task Environment plane or its hostnames: written by another program, or {CUT}, the planes after it "
        f"missing ({read})"]


def test_a_file_cut_after_its_task_environment_has_every_plane_and_no_note(fixtures_dir, tmp_path):
    data = (fixtures_dir / "xplane" / "mi300_jax_conv_8gpu.xplane.pb").read_bytes()
    fields = _top_fields(data)
    assert fields[-1][0] == 4 and fields[-2][0] == 1
    cut = tmp_path / "no_hostnames.xplane.pb"
    cut.write_bytes(data[:fields[-2][1]])
    assert XSPACE.FromString(cut.read_bytes()).planes[-1].name == "Task Environment"
    notes, _ = _notes(cut)
    assert not any(CUT in n for n in notes)


def test_hostnames_before_the_planes_are_no_cut_profile_and_have_no_note(fixtures_dir, tmp_path):
    """The real file's first 5 planes (their bytes as written) after its hostnames: no protobuf serializer's order,
    so no profiler's file, and one cut from a profiler's file would have lost its hostnames, written last. Every
    hand-built XSpace of the tests that wrote its hostnames first had the note."""
    data = (fixtures_dir / "xplane" / "mi300_jax_conv_8gpu.xplane.pb").read_bytes()
    fields = _top_fields(data)
    host = data[fields[-2][1]:]  # the hostnames field, written last
    assert [n for n, _ in fields[:5]] == [1] * 5 and fields[-1][0] == 4 and fields[-2][0] == 1
    first = tmp_path / "hostnames_first.xplane.pb"
    first.write_bytes(host + data[:fields[4][1]])
    space = XSPACE.FromString(first.read_bytes())
    assert list(space.hostnames) == ["tw003"] and len(space.planes) == 5
    notes, rows = _notes(first)
    assert rows and not any("cut short" in n for n in notes), notes


@pytest.mark.parametrize("name, planes, read", [
    ("xprof_tpu_inference_2.xplane.pb", [0, 1, 3], "3 device planes read: /device:TPU:0, 1, 3"),
    ("mi300_jax_conv_8gpu.xplane.pb", [0, 1, 2, 3, 5, 6, 7], "6 device planes read: /device:GPU:0 to 2, 4 to 6"),
    ("mi300_jax_conv_8gpu.xplane.pb", [1, 2, 3, 4, 5, 6, 8], "7 device planes read: /device:GPU:0 to 5, 7"),
])
def test_the_device_planes_read_are_named_with_their_gaps(fixtures_dir, tmp_path, name, planes, read):
    """The real file's planes ``planes`` (by position: the MI300 file's /host:metadata, then GPUs 0 to 7; the TPU
    file's TPUs 0 to 3), their bytes as written, no hostnames: the note names the planes read, a gap in their
    numbers shown. '/device:TPU:0 to /device:TPU:3' had hidden that TPU 2 was not read."""
    data = (fixtures_dir / "xplane" / name).read_bytes()
    fields = _top_fields(data)
    starts = [0] + [end for _, end in fields[:-1]]
    cut = tmp_path / name
    cut.write_bytes(b"".join(data[starts[k]:fields[k][1]] for k in planes))
    assert [n for n, _ in fields[:max(planes) + 1]] == [1] * (max(planes) + 1)
    assert not XSPACE.FromString(cut.read_bytes()).hostnames
    notes, _ = _notes(cut)
    (note,) = [n for n in notes if CUT in n]
    assert note.endswith(f"({read})")
