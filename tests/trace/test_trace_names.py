"""Readable kernel names: demangled C++ shortened for text tables, checked against HTA 0.5.0's own
``hta.utils.utils.shorten_name`` on the real kernels of HTA's TraceDiff pair; --json keeps full names."""

import json

import pytest
from click.testing import CliRunner
from noted import LAUNCHLESS, noted

from perfkit.cli import cli
from perfkit.trace import events, names

PAIR = ("kineto/hta_trace_diff_control.json.gz", "kineto/hta_trace_diff_test.json.gz")
# HTA 0.5.0, `shorten_name(n)` over every distinct GPU kernel name (stream != -1) of both traces:
# 201 names, 82 distinct short names (read with /tmp/hta venv, HolisticTraceAnalysis==0.5.0).
HTA_DISTINCT_SHORT = 82
KERNELS = 201


@pytest.fixture(scope="module")
def kernel_names(fixtures_dir, built_once):
    def read(folder):
        with noted(LAUNCHLESS):  # the test side's kernels queued before its profile started
            ev = events.load([fixtures_dir / p for p in PAIR])
        (folder / "names.json").write_text(json.dumps(sorted(events.device_ops(ev)["name"].astype(str).unique())))

    return json.loads((built_once("kernel_names", read) / "names.json").read_text())


def _bare(short: str) -> str:
    """A short name without perfkit's markers, as HTA writes it."""
    return short.replace("<…>", "").replace("(…)", "")


def test_issue_example_and_hand_cases(kernel_names):
    long = [n for n in kernel_names if "adagrad_unweighted_kernel_cta_per_row_1<" in n]
    assert long and all(len(n) > 1000 for n in long)
    assert {names.shorten(n) for n in long} == {
        "split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_cta_per_row_1<…>(…)"}
    anonymous = "void at::native::(anonymous namespace)::k<float>(float const*, int)"
    assert names.shorten(anonymous) == "at::native::k<…>(…)"
    assert names.shorten("Memcpy DtoD (Device -> Device)") == "Memcpy DtoD (Device -> Device)"
    assert names.shorten("%fusion.3 = bf16[8,128]{1,0} fusion(%p), kind=kLoop, calls=%f") == "fusion.3"
    assert names.shorten("f<a>::operator()(int) const") == "f<…>::operator(…)(…)"
    assert names.shorten("fusion.12") == "fusion.12"


def test_agrees_with_hta_shorten_name(kernel_names):
    """Pinned: the HTA figures above. Live: HTA's function on every name, where hta is importable."""
    assert len(kernel_names) == KERNELS
    assert len({_bare(names.shorten(n)) for n in kernel_names}) == HTA_DISTINCT_SHORT
    try:
        from hta.utils.utils import shorten_name
    except ImportError:
        return
    for n in kernel_names:  # HTA keeps an empty "(anonymous namespace)" step as "::::"
        assert _bare(names.shorten(n)) == shorten_name(n).replace("::::", "::"), n


def test_labels_fit_and_stay_distinct(kernel_names):
    table = names.labels(kernel_names)
    assert len(set(table.values())) == len(kernel_names)
    assert max(map(len, table.values())) <= names.WIDTH
    clashing = [v for v in table.values() if " ~" in v]
    assert len(clashing) > 2  # many templated instances of one kernel shorten alike
    again = names.labels(list(reversed(kernel_names))[:50])  # ids come from the name alone
    assert all(table[n] == label for n, label in again.items() if " ~" in table[n] and " ~" in label)
    assert names.labels(["x" * 300], width=40)["x" * 300] == "x" * 26 + "…" + "x" * 13


def test_diff_text_fits_and_json_keeps_full_names(kernel_names, fixtures_dir):
    a, b = (fixtures_dir / p for p in PAIR)
    text = CliRunner().invoke(cli, ["trace", "diff", str(a), str(b), "--by", "op", "-n", "500"])
    assert text.exit_code == 0, text.output
    lines = text.stdout.splitlines()
    table = next(i for i, line in enumerate(lines) if " category " in line)  # (after the lines naming ops outside steps)
    key_width = lines[table].index(" category")
    assert key_width <= names.WIDTH  # the key column holds the widest label, right-aligned
    assert max(len(line) for line in lines[table:]) < names.WIDTH + 80
    assert "GenericPackedTensorAccessor" not in text.stdout  # a parameter list of the long kernels
    tail = CliRunner().invoke(cli, ["trace", "tail", str(b), "-n", "40"])
    assert tail.exit_code == 0 and "<…>(…)" in tail.stdout
    assert "GenericPackedTensorAccessor" not in tail.stdout
    assert max(map(len, tail.stdout.splitlines())) < 2 * names.WIDTH + 80  # name and kind columns
    doc = json.loads(CliRunner().invoke(cli, ["trace", "diff", str(a), str(b), "--by", "op", "--json"]).stdout)
    assert {r["key"] for r in doc["rows"]} == set(kernel_names)
