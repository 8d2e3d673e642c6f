"""report.md's Rank consistency cell for a rank that compiled the same program as the others, its collective receive
buffers placed elsewhere: one moved only to another allocation, at the same offset, read "+0 B"."""

from perfkit.report.markdown import _first_difference


def _first(moved: list[dict]) -> dict:
    """``ranks.<v>.first_difference`` of summary.json for rank 1 against rank 0, one program, ``moved`` its buffers."""
    return {"module": "jit_step", "ranks": [1], "against_rank": 0, "majority": None, "rank": None,
            "same_program": True, "counts": None, "receive_moved": moved}


def test_a_buffer_moved_to_another_allocation_at_the_same_offset_says_so():
    moved = {"collective": "collective-permute #1", "index": None, "majority": 4096, "rank": 4096, "delta": 0,
             "size": 1024, "allocation": {"majority": 2, "rank": 1}, "moved": True}
    cell = _first_difference(_first([moved]))
    assert cell == ("`jit_step`: same program, receive buffers moved on rank 1: collective-permute #1 in allocation "
                    "2 -> 1"), cell


def test_a_buffer_moved_in_its_allocation_and_to_another_says_both():
    by_offset = {"collective": "all-gather #0", "index": None, "majority": 0, "rank": 2048, "delta": 2048,
                 "size": 2048, "allocation": {"majority": 3, "rank": 3}, "moved": True}
    both = {"collective": "collective-permute #1", "index": None, "majority": 4096, "rank": 0, "delta": -4096,
            "size": 1024, "allocation": {"majority": 2, "rank": 1}, "moved": True}
    assert _first_difference(_first([by_offset, both])).endswith(
        "all-gather #0 +2,048 B, collective-permute #1 -4,096 B in allocation 2 -> 1")


def test_an_older_summary_s_rows_without_allocation_read_as_before():
    old = {"collective": "all-reduce #2", "index": None, "majority": 0, "rank": 512, "delta": 512, "size": 512}
    assert _first_difference(_first([old])).endswith("on rank 1: all-reduce #2 +512 B")


def test_two_instructions_that_differ_late_show_where_they_differ():
    """A reviewer's hang: rank 2 reversed the ring's pairs; both cells were cut at their 100th character,
    "source_target_pai ...", and read as the same instruction. Now both show the same 100 characters, here the
    last 100 of 128 (the texts part at character 106, past 40 before it)."""
    head = "%ppermute.10 = f32[64,128]{1,0} collective-permute(%wrapped_tanh.1), channel_id=1, source_target_pairs="
    first = {"module": "jit_step", "ranks": [2], "against_rank": 0, "same_program": False, "counts": None,
             "receive_moved": [], "rank": {"text": head + "{{1,0},{2,1},{3,2},{0,3}}"},
             "majority": {"text": head + "{{0,1},{1,2},{2,3},{3,0}}"}}
    assert _first_difference(first) == (
        "`jit_step`: rank 2 ``... ,0} collective-permute(%wrapped_tanh.1), channel_id=1, source_target_pairs="
        "{{1,0},{2,1},{3,2},{0,3}}``; rank 0 ``... ,0} collective-permute(%wrapped_tanh.1), channel_id=1, "
        "source_target_pairs={{0,1},{1,2},{2,3},{3,0}}``")
    # a short pair is shown whole, a lone instruction from its start
    first.update(rank={"text": "%a = f32[2] add(%x, %y)"}, majority={"text": "%a = f32[2] multiply(%x, %y)"})
    assert _first_difference(first).endswith(
        "rank 2 ``%a = f32[2] add(%x, %y)``; rank 0 ``%a = f32[2] multiply(%x, %y)``")
    first.update(rank=None, majority={"text": head + "{{0,1},{1,2},{2,3},{3,0}}"})
    assert _first_difference(first) == f"`jit_step`: rank 2 (no counterpart); rank 0 ``{head[:100]} ...``"
