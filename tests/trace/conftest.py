"""A DefinitionNote that a trace test does not assert fails it: each test here asserts the notes its input gives
(``pytest.warns``, noted.noted), and a hand-built input writes what real profiles hold, so a new note is seen."""

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
NOTES_FAIL = pytest.mark.filterwarnings("error::perfkit.errors.DefinitionNote")


def pytest_collection_modifyitems(items):
    # (the hook sees the whole session's items: those of other folders keep their filters)
    for item in items:
        if HERE in item.path.resolve().parents:
            item.add_marker(NOTES_FAIL, append=False)  # first: a test's own filterwarnings marks come after it
