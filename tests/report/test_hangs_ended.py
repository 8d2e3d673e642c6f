"""report.md's line for a chip whose trace ends after its last collective: the trace shows no wait, and no
leaving of the program either."""

from perfkit.report import hangs


def test_a_chip_whose_trace_ended_is_not_said_to_wait_at_none():
    hang = {"text": "rank 3 device 0's trace ends after its last collective", "last_traced_step": 1,
            "chips": [{"rank": 0, "device": 0, "completed": 3, "last_op": "cp.2", "waiting_at": "cp.3",
                       "waiting_from": "program"},
                      {"rank": 3, "device": 0, "completed": 4, "last_op": "cp.3", "waiting_at": None,
                       "waiting_from": "ended"}]}
    waits, ended = hangs.lines(hang, "RUN/trials/01-sp")[-2:]
    assert waits.endswith("waiting at `cp.3`, its program's next collective")
    assert "waiting at none" not in ended
    assert ended.startswith("    - rank 3 device 0: 4 completed, the last `cp.3`; waiting at unknown: its trace ends "
                            "after its last collective")
    assert ended.endswith("(whether it waits at its program's next collective or has left the program, its trace "
                          "cannot say)")


def test_a_rank_whose_program_returned_still_waits_at_none():
    hang = {"text": "t", "last_traced_step": 1,
            "chips": [{"rank": 3, "device": 0, "completed": 4, "last_op": "cp.3", "waiting_at": None,
                       "waiting_from": "ended"}]}
    assert hangs.lines(hang, "RUN", left=[3])[-1].endswith("waiting at none: its program had returned, past these")
