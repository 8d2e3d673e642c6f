"""report.md of a command case (a user command: perfkit compiles no XLA program of its own) in one process, whose
outputs it did not capture: its Rank consistency said "yes" though no two ranks were compared, and its Not verified
"no oracle: quality is B against A" though no quality was measured at all ("No comparable outputs")."""

from run_fixtures import A_STEPS, ab_trials, make_run, trial  # noqa: F401 (a fixture)

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


def test_a_case_with_no_natural_pass_is_not_told_what_natural_means(make_run):
    """A plain command case prints its steps synced alone (no natural pass): its Timing had no natural row, yet its
    paragraph explained how the natural figure reads beside the synced one (a newcomer's)."""
    trials = [trial(2 * r + i, v, [s * (1.2 if v == "b" else 1.0) for s in steps])
              for r, steps in enumerate(A_STEPS) for i, v in enumerate(("a", "b") if r % 2 == 0 else ("b", "a"))]
    report = (make_run("plain", trials=trials, outputs={}).joinpath("report.md")).read_text()
    timing = report[report.index("## Timing"):report.index("## Quality")]
    assert "step, natural" not in timing and "natural step time" not in timing
    assert "natural" not in timing, [line for line in timing.splitlines() if "natural" in line]
    # the run with natural passes keeps its explanation
    natural = (make_run("natural", outputs={}).joinpath("report.md")).read_text()
    assert "so natural can read above synced." in natural
