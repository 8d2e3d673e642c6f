"""A ``perfkit check`` baseline as types: what ``perfkit.report.check.baseline_from_summary`` keeps of a run's
summary (``reports/baselines/*.json``, written by ``--update-baseline``) and ``check`` reads back. The schema
``perfkit.rundata.schema`` generates from them refuses a file that is not one, in one line naming the field.
"""

from typing import Any, Literal, NotRequired, TypedDict

from perfkit.rundata.summary import Db, Level, LooksAt

BASELINE_VERSION = 1


class BaselineFrom(TypedDict):
    """The run the baseline was written from."""
    run_dir: str | None  # the run directory's name (older baselines: its absolute path, read alike: none gates on it)
    commit: str | None
    tree: str | None
    dirty: bool | None
    devices: dict[str, Any] | None  # env.json's devices: platform, kind, count, process_count (a command case's:
    # count, process_count as its case asked, platform null, asked true)


class BaselineComparison(TypedDict):
    """A B/A ratio of the run, with its CI at the level its run's verdict was read at."""
    variant: str
    metric: Literal["step_ms", "natural_step_ms"]
    ratio: float
    ci: list[float | None]
    # the summary comparison's: each look's level (0.95 read once) and the trials a side at the first and last look
    # (null: read once); none in a baseline written before they were kept, whose level is not known
    look_confidence: NotRequired[Level]
    looks_at: NotRequired[LooksAt | None]


class BaselineServeComparison(TypedDict):
    """A serve case's B/A ratio at one concurrency level, with its 95% CI (a serve.comparisons row: a serve run reads
    each level's verdict once)."""
    variant: str
    level: int
    metric: Literal["latency_ms", "outputs_per_min"]
    ratio: float
    ci: list[float | None]


class BaselineQuality(TypedDict):
    """B's headline output against A's (and each variant's against the oracle)."""
    file: str
    psnr_db: Db  # the mean over the frames that differ
    psnr_pooled_db: NotRequired[Db]  # of the MSE pooled over all frames (none in a baseline written before it was kept)
    bit_identical: bool | None
    oracle: dict[str, Db]


class BaselineCost(TypedDict):
    """A variant's compiled step: its collectives by kind (counts) and the figures gated within a tolerance."""
    collectives: dict[str, int]
    flops: float | None
    hbm_bytes: float | None
    interconnect_bytes: float | None
    temp_bytes: float | None


class BaselineTaps(TypedDict):
    """Where B's taps first departed from A's in the baseline's run (``summary["taps"]["first"]``)."""
    variant: str
    first: str  # "block1.attn at step 0", or "none"


# (the functional form: a baseline's key ``from`` is a Python keyword)
Baseline = TypedDict("Baseline", {
    "perfkit_baseline": Literal[1],  # BASELINE_VERSION
    "case": str,
    "baseline_variant": NotRequired[str],
    "from": NotRequired[BaselineFrom],
    "comparisons": list[BaselineComparison],
    # a serve case's every level (the comparisons above are the single request's latency alone); a serve baseline
    # without them, written before they were kept, is refused: it would pass any loss of throughput
    "serve": NotRequired[list[BaselineServeComparison]],
    "quality": BaselineQuality | None,
    "determinism": dict[str, bool | None],
    "ranks": dict[str, bool | None],
    # the run's failed or hung trials: 0 in a file --update-baseline writes, a summary.json's own as a baseline
    "failed_trials": NotRequired[int],
    "cost": NotRequired[dict[str, BaselineCost]],  # (none in a baseline written before costs were kept)
    "taps": NotRequired[BaselineTaps],  # (only from a run with taps)
})
Baseline.__doc__ = "What a CI gate compares a run with: nothing that depends on the machine's speed."
