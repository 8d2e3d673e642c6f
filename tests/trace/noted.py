"""The DefinitionNotes a test expects of its input, each asserted: the notes real Kineto traces give (where perfkit's
figures part from HTA's by definition), by the words that open their reason."""

import contextlib

import pytest

from perfkit.errors import DefinitionNote

# what the note of each says, after the file's name
LAUNCHLESS = "device ops have no launch in the trace up to its last ProfilerStep's end"
ROUNDED = r"between whole us: HTA 0\.5\.0 rounds each event inward"
HOST_STREAMS = "host events with a stream argument"
UNSIZED = r"XLA collectives without bytes and GB/s \(\?\)"
KERNELS_UNSIZED = r"communication kernels without bytes and GB/s \(\?\)"


@contextlib.contextmanager
def noted(*notes: str):
    """The block gives a DefinitionNote matching each of ``notes`` (regular expressions, searched in its text); a
    note none of them matches is given on (pytest.warns passes on what it does not match), so it fails the test
    where notes are errors (tests/conftest.py, NOTES_FAIL_IN)."""
    with contextlib.ExitStack() as stack:
        for note in notes:
            stack.enter_context(pytest.warns(DefinitionNote, match=note))
        yield
