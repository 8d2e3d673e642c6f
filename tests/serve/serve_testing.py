"""Helpers for the serve tests: the test server (as a program and as a module), a case builder, and the
runner tests' helpers (perfkit in a subprocess, JSONL, a look for processes left behind, polling)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SERVER = REPO / "cases" / "serve" / "server.py"  # the bundled serve case's test server


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def server_module():
    """cases/serve/server.py imported (its ``frames`` is the oracle of what it serves)."""
    return _load(SERVER, "perfkit_test_server")


# The runner tests' helpers, loaded by path (tests/runner is on sys.path only when its tests are collected).
_runner = _load(REPO / "tests" / "runner" / "runner_testing.py", "perfkit_runner_testing")
perfkit, read_jsonl, processes_with, wait_for = (_runner.perfkit, _runner.read_jsonl, _runner.processes_with,
                                                 _runner.wait_for)


def serve_case(variants: dict, tag: str = "", **serve) -> dict:
    """A serve case against the test server; ``serve`` replaces fields of the ``serve`` section."""
    section = {
        "concurrency": [1, 2], "requests": 4, "server_restarts": 1, "request_timeout": 10,
        "prompts": [{"name": "fox", "prompt": "a fox", "seed": 3}, {"name": "owl", "prompt": "an owl", "seed": 4}],
        "params": {"width": 64, "height": 48, "frames": 6},
        "server": ["python", str(SERVER), "--port", "{port}", "--tag", tag or "untagged"],
        "ready": {"url": "/health", "timeout": 20},
        "request": {"url": "/generate", "body": {"prompt": "{prompt}", "seed": "{seed}", "width": "{width}",
                                                 "height": "{height}", "frames": "{frames}"}},
        "output": {"kind": "body", "suffix": ".mkv"},
    }
    section.update(serve)
    return {"name": "serve-test", "warmup": 1, "serve": section, "variants": variants}
