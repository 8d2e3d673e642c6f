"""A ``trials.jsonl`` line as a type: one finished trial, as the runner appends it and every reader of a
run takes it back (docs/architecture.md's "trials.jsonl" contract)."""

from typing import Annotated, Any, Literal, NotRequired, TypedDict

Count = Annotated[int, ("minimum", 0)]  # a number of steps, or a position among them (a bound its JSON Schema keeps)
TrialStatus = Literal["ok", "hung", "crashed", "no_steps", "incomplete"]  # incomplete: a merged multi-host trial


class RankPlacement(TypedDict):
    chips: list[Any]
    env: dict[str, str]


class RankRecord(TypedDict):
    """One rank's process: how it ended and how far it got."""
    rank: int
    exit_code: int | None  # negative: killed by that signal
    running_at_end: bool
    exited_s: NotRequired[float]  # seconds into the trial when it was seen to exit; absent where it was killed
    steps_done: Count
    late_steps: NotRequired[Count]  # steps written after perfkit stopped the trial (not in steps_done); absent: none
    unreadable_steps: NotRequired[Count]  # step events whose ms is no finite number (not in steps_done); absent: none
    last_step_ms: float | None
    last_mark: str | None
    device_kind: NotRequired[str]  # where a mark reported one (the bundled worker's ``ready``)
    placement: NotRequired[RankPlacement]
    stderr_tail: NotRequired[str]
    stdout_tail: NotRequired[str]
    stacks: NotRequired[str | None]


class CacheEntries(TypedDict):
    jax_entries: int
    inductor_files: int


class TrialCache(TypedDict):
    mode: Literal["cold", "warm"]
    before: CacheEntries
    after: CacheEntries


class TrialRecord(TypedDict):
    index: int
    variant: str
    round: int
    dir: str
    status: TrialStatus
    wall_s: float
    finished: NotRequired[str]  # when, UTC, ISO 8601 to the second (model and command trials)
    warmup: Count
    steps_ms: list[float]  # synced, rank 0
    natural_ms: list[float]
    values: dict[str, float]  # the last value of each name
    ranks: list[RankRecord]
    traced: NotRequired[list[Count]]  # positions in steps_ms run under a profiler: kept, never timed
    compile_cache: NotRequired[TrialCache]
    serve: NotRequired[dict[str, Any]]
    missing_hosts: NotRequired[list[int]]  # a merged multi-host trial's hosts that recorded no part of it
    cut_hosts: NotRequired[list[int]]  # its hosts whose line of it is cut short or damaged (no whole record)
    untold_hosts: NotRequired[list[int]]  # its hosts with no record of it but a damaged line naming no trial
