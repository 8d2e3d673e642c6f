"""Fixtures of the runner tests."""

from pathlib import Path

import pytest
import yaml


@pytest.fixture
def write_case(tmp_path):
    def write(case: dict, name: str = "case.yaml") -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(case, sort_keys=False))
        return path
    return write
