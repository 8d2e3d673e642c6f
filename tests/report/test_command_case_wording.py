"""report.md of a command case (a user command: perfkit compiles no XLA program of its own) in one process, whose
outputs it did not capture: its Rank consistency said "yes" though no two ranks were compared, and its Not verified
"no oracle: quality is B against A" though no quality was measured at all ("No comparable outputs")."""

from run_fixtures import ab_trials, make_run  # noqa: F401 (a fixture)

ONE = "one process: no other rank to compile another program"


def _cells(report: str, label: str) -> list[str]:
    line = next(x for x in report.splitlines() if x.startswith(f"| {label} |"))
    return [c.strip() for c in line.strip("|").split("|")][1:]


def _not_verified(report: str) -> list[str]:
    return report[report.index("## Not verified"):].splitlines()


def test_a_one_process_command_case_says_what_it_did_not_compare(make_run):
    run = make_run("cmd", trials=ab_trials(), outputs={},
                   case_extra={"capture": {"xla_dump": "none", "trace": [], "outputs": False}})
    report = (run / "report.md").read_text()
    assert "No comparable outputs." in report
    for v in ("a", "b"):
        assert _cells(report, v) == ["one rank: nothing to compare", "rank 0", "-", ONE], _cells(report, v)
    items = _not_verified(report)
    assert "- no oracle: no output was compared with a higher-precision reference" in items, items
    assert not any("quality is B against A" in item for item in items), items
    assert "- output quality (no comparable outputs)" in items


def test_a_run_that_compared_outputs_keeps_its_words(make_run):
    """The fixture's outputs compared (B against A, 45.9 dB): no oracle is the one thing missing, as it was."""
    report = (make_run("outputs").joinpath("report.md")).read_text()
    assert "- no oracle: quality is B against A, not against a higher-precision reference" in _not_verified(report)
