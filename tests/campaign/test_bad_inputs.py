"""The bad-input campaign (campaign_inputs.py): damaged copies of real inputs through every reader, and
the classic hostile inputs one by one. Each ends with exit 0-3 and at most one line of refusal, never a
traceback, within the time and memory caps, writing nothing outside its run directory.

CI runs a few derandomized examples per reader (seconds); ``PERFKIT_CAMPAIGN=1 pytest -s tests/campaign`` runs
600 per reader and prints the count (benchmarks/bad_inputs.py runs thousands faster, without Hypothesis).
"""

import gzip
import os
import sys
import time
import zlib

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import campaign_inputs as ci

LONG = os.environ.get("PERFKIT_CAMPAIGN") == "1"
ATTEMPTS: dict[str, int] = {}


@pytest.fixture(scope="module", autouse=True)
def report_count():
    t0 = time.monotonic()
    yield
    if ATTEMPTS:  # on the terminal itself, past pytest's capture (the count is the campaign's result)
        print(f"\nbad-input campaign: {sum(ATTEMPTS.values())} mutated inputs "
              f"({', '.join(f'{k} {v}' for k, v in ATTEMPTS.items())}) in {time.monotonic() - t0:.0f} s",
              file=sys.__stderr__, flush=True)


@pytest.mark.parametrize("reader", ci.READERS)
@settings(max_examples=600 if LONG else 4, deadline=None, derandomize=not LONG, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(rng=st.randoms(use_true_random=False))
def test_a_damaged_real_input_ends_in_an_exit_code_never_a_traceback(reader, rng, tmp_path_factory):
    work = tmp_path_factory.mktemp(reader)
    out, problems, what = ci.reader_for(reader)(rng, work)
    ATTEMPTS[reader] = ATTEMPTS.get(reader, 0) + 1
    assert not problems, f"{what}: {problems}\n{out.output[-2000:]}"


# ---- the classic hostile inputs ---------------------------------------------------------------------

def refused(out: ci.Outcome, *words: str) -> str:
    """The one line of a refusal (exit 2), checked to hold ``words``."""
    assert out.error is None and out.exit_code == 2, (out.exit_code, out.error, out.output)
    lines = [line for line in out.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in out.output, out.output
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def run_case(work, text: bytes) -> ci.Outcome:
    out = ci.attempt("case", ci.Seed("case", ".yaml", b""), text, work)
    assert not ci.problems(out, work), ci.problems(out, work)
    return out


def test_a_case_file_that_is_not_utf8_names_the_file_and_line(tmp_path):
    text = b"name: caf\xe9\ncommand: [python, -c, pass]\nvariants: {a: {}, b: {}}\n"
    line = refused(run_case(tmp_path, text), "case.yaml", "line 1: not UTF-8 text (byte 0xe9 at offset 9)")
    assert line.startswith("perfkit: ")


def alias_bomb(levels: int = 9) -> str:
    """The billion laughs: 9 levels of 9 aliases to the level below, ~4e8 strings once expanded."""
    anchors = ["p0: &a0 [x, x, x, x, x, x, x, x, x]"]
    anchors += [f"p{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return ("name: bomb\ncommand: [python, -c, pass]\nvariants:\n  a: {options: {" + ", ".join(anchors) + "}}\n"
            f"  b: {{args: *a{levels - 1}}}\n")


def test_a_yaml_alias_bomb_is_refused_in_bounded_time_and_memory(tmp_path):
    out = run_case(tmp_path, alias_bomb().encode())
    refused(out, "case.yaml", "once its aliases are expanded", "an alias bomb?")
    assert out.seconds < 5 and out.peak_mb < 50, (out.seconds, out.peak_mb)


def test_a_yaml_alias_that_holds_itself_or_nesting_too_deep_is_refused(tmp_path):
    refused(run_case(tmp_path, b"name: x\nvariants: &v {a: *v}\n"), "an alias refers to a mapping or list that holds it")
    out = run_case(tmp_path, b"[" * 100_000 + b"]" * 100_000)
    line = refused(out, "case.yaml")
    assert "exceeded maximum nesting depth" in line or "nested too deep" in line  # libyaml's words, or ours
    assert out.seconds < 5


@pytest.mark.parametrize("field,value,message", [
    ("processes", 10**9, "processes: must be <= 65536"),
    ("devices", 10**9, "devices: must be <= 1048576"),
    ("repeats", {"min": 10**9, "max": 10**9},
     "repeats: need 1 <= min <= max <= 10000; got min 1000000000, max 1000000000"),
    ("matrix", {"seed": list(range(1000)), "warmup": list(range(1000)), "timeout": list(range(1, 1001))},
     "matrix: more than 10000 combinations"),
])
def test_a_billion_of_anything_in_a_case_is_refused_before_planning(tmp_path, field, value, message):
    case = {"name": "big", "command": ["python", "-c", "pass"], field: value, "variants": {"a": {}, "b": {}}}
    out = run_case(tmp_path, yaml.safe_dump(case).encode())
    refused(out, message)
    assert out.seconds < 5


def test_a_billion_concurrent_requests_in_a_serve_case_are_refused(tmp_path):
    case = {"name": "big", "serve": {"concurrency": [1, 10**9], "prompts": ["a fox"], "server": ["python", "s.py"],
                                     "request": {"url": "/g", "body": {"p": "{prompt}"}}},
            "variants": {"a": {}, "b": {}}}
    refused(run_case(tmp_path, yaml.safe_dump(case).encode()), "serve.concurrency: must be a list of distinct integers in 1..4096")


def gzip_bomb(gigabytes: int) -> bytes:
    """A .json.gz that inflates to ``gigabytes`` GB of spaces: 64 gzip members of 16 MB each a GB."""
    return gzip.compress(b" " * (16 << 20), compresslevel=1, mtime=0) * (64 * gigabytes)


def test_a_gzip_bomb_trace_is_refused_before_it_is_inflated(tmp_path, monkeypatch):
    """1 GB of spaces in 4 MB of gzip against a 32 MB limit (2 GiB in use): refused once the inflated text
    passes it, never holding much more."""
    monkeypatch.setattr("perfkit.trace.kineto.MAX_JSON_BYTES", 32 << 20)
    out = ci.attempt("kineto_gz", ci.Seed("bomb", ".json.gz", b""), gzip_bomb(1), tmp_path)
    refused(out, "bomb.json.gz", "inflates to more than 33,554,432 bytes (a gzip bomb?)")
    assert out.peak_mb < 32 + 3 * 16 and out.seconds < 10, (out.peak_mb, out.seconds)


def test_an_npy_that_needs_pickle_is_refused_never_unpickled(tmp_path):  # its seed is the real video's frames
    (tmp_path / "marker").unlink(missing_ok=True)
    arr = np.array([{"x": 1}, None], dtype=object)
    np.save(tmp_path / "objects.npy", arr, allow_pickle=True)
    out = ci.attempt("npy", ci.Seed("frames", ".npy", ci.seeds("npy")[0].data), (tmp_path / "objects.npy").read_bytes(),
                     tmp_path)
    refused(out, "frames.npy", "not a readable numpy file", "Python objects")


def test_a_truncated_gzip_and_invalid_utf8_json_are_one_line(tmp_path, fixtures_dir):
    gz = (fixtures_dir / "kineto" / "rank-0.json.gz").read_bytes()
    refused(ci.attempt("kineto_gz", ci.Seed("rank-0", ".json.gz", b""), gz[:len(gz) // 2], tmp_path), "rank-0.json.gz")
    text = gzip.decompress(gz)
    refused(ci.attempt("kineto", ci.Seed("rank-0", ".json", b""), text[:100] + b"\xff\xfe" + text[100:], tmp_path),
            "rank-0.json")


def test_the_campaign_finds_a_traceback_when_a_reader_lets_one_out(tmp_path, monkeypatch):
    """The campaign itself can fail: with the case reader as it was before issue 19 (text decoded with no
    care), an invalid byte is a UnicodeDecodeError again and ``problems`` says so."""
    from perfkit.rundata import case

    monkeypatch.setattr(case, "load_raw", lambda path: yaml.safe_load(case.Path(path).read_bytes().decode("utf-8")))
    out = ci.attempt("case", ci.Seed("case", ".yaml", b""), b"name: caf\xe9\n", tmp_path)
    assert [p for p in ci.problems(out, tmp_path) if p.startswith("UnicodeDecodeError")]
