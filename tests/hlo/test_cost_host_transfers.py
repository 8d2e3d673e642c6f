"""`perfkit cost` on transfers to and from the host: a host callback's send / recv (``is_host_transfer=true``)
crosses PCIe, not the interconnect between devices, so it is no collective and sends nothing a device."""

from perfkit.hlo.program_cost import program_cost
from perfkit.hlo.parse import parse_module


# A device-to-host send as XLA writes a host callback's transfer (``is_host_transfer=true``, a rendezvous name in
# its frontend attributes), beside the same send between devices.
HOST_SEND = """HloModule m, num_partitions=4

ENTRY e {
  p = f32[1024]{0} parameter(0)
  tok = token[] after-all()
  s = (f32[1024]{0}, u32[], token[]) send(p, tok), channel_id=1, is_host_transfer=true, \
frontend_attributes={_xla_host_transfer_handler_name="tf_rendezvous",_xla_host_transfer_rendezvous="dtoh_0"}
  sd = token[] send-done(s), channel_id=1, is_host_transfer=true
  ROOT r = f32[1024]{0} negate(p)
}
"""


def test_a_host_transfer_is_no_collective():
    """A send to the host crosses PCIe, not the interconnect: it was counted as a collective, its 4096 bytes as sent
    to another device; the same send between devices still is."""
    host = program_cost(parse_module(HOST_SEND), 4)
    assert (host.collectives, host.interconnect_bytes) == ([], 0)
    device = program_cost(parse_module(HOST_SEND.replace(", is_host_transfer=true", "")), 4)
    assert device.by_kind() == {"send": {"count": 1, "buffer_bytes": 4096, "sent_bytes": 4096.0}}
