"""Profiles as tidy frames: xplane.pb (TPU, GPU, CPU) and Kineto JSON read into one events frame, and
analyses from that frame to frames (as HTA's analyzers are); ``Profile`` is the facade over them.

In a notebook::

    from perfkit.trace import Profile
    p = Profile("prof/plugins/profile/2026_12_01/host.xplane.pb")  # or Kineto .json[.gz], or a folder
    p.events              # one row per event
    p.breakdown()         # per chip and step: compute / exposed ICI / DMA / idle, hidden communication
    p.collectives()       # each collective: bytes, GB/s, exposed / hidden, skew, the straggler per step
    p.hlo_stats()         # per (program, HLO op): occurrences, total and self time (as xprof's hlo_stats)
    p.diff(Profile("b/")) # device time per op kind, B against A
    p.last_ops()          # each chip's last device ops (hangs)
"""

from perfkit.common.lazy import exports

__all__ = ["Profile", "load"]
__getattr__, __dir__ = exports(__name__, {"Profile": "profile", "load": "events"})
