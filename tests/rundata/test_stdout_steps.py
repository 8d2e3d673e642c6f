"""Step times read from a rank's stdout with a case's ``step_regex`` (``perfkit.rundata.metrics.steps_from_stdout``),
a long line in pieces of ``STDOUT_LINE_CHARS`` bytes."""

from perfkit.rundata.metrics import STDOUT_LINE_CHARS, steps_from_stdout


def test_a_character_split_between_pieces_of_a_long_line_is_read_whole(tmp_path):
    """A long line whose two-byte "é" straddles the first piece's end: each piece decoded alone read it as two
    replacement characters, and the step after it was lost."""
    path = tmp_path / "stdout.log"
    head = b"x" * (STDOUT_LINE_CHARS - 1)  # "é" (c3 a9): its first byte the piece's last
    path.write_bytes(head + "é step 5.5 ms\n".encode() + "é step 2.25 ms\n".encode() + b"bad \xff 7.0 ms\n")
    assert steps_from_stdout(path, r"é step (\d+\.\d+) ms") == ([5.5, 2.25], 0, 0)
    # a byte that is no UTF-8 still reads as a replacement character, matched as one
    assert steps_from_stdout(path, "bad \ufffd (\\d+\\.\\d+) ms") == ([7.0], 0, 0)
    path.write_bytes(b"step 1.5 ms\n\xc3")  # the file ends inside a character: nothing more, no error
    assert steps_from_stdout(path, r"step (\d+\.\d+) ms") == ([1.5], 0, 0)


def test_a_step_line_whose_time_is_nan_or_infinite_is_left_out_and_counted(tmp_path):
    """A step_regex program printed 'step nan ms': the NaN was kept as a step time, written to trials.jsonl, and the
    run's own report then refused that record (a number finite). Left out and counted now, as a metrics.jsonl step
    event with no finite ms is; a capture that is no number at all is skipped, as before."""
    path = tmp_path / "stdout.log"
    path.write_text("step 5.0 ms\nstep nan ms\nstep inf ms\nstep -Infinity ms\nstep abc ms\nstep 2.5 ms\n")
    assert steps_from_stdout(path, r"step (\S+) ms") == ([5.0, 2.5], 0, 3)
