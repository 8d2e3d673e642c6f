"""summary.json as types: what ``perfkit.analysis.summary.summarize_run`` builds and report, check and
progression read. docs/architecture.md's "summary.json" contract names these keys (a test holds the two
equal). A key that is not always there is ``NotRequired``; a figure that may be undefined is ``| None``.
More keys may be added (the contract says "at least"): the schema leaves objects open.
"""

from typing import Annotated, Any, Literal, NotRequired, TypedDict

from perfkit.rundata.trials import RankRecord

Db = float | Literal["inf", "-inf"] | None  # a PSNR as json_safe writes it: infinite as a string, NaN null
Verdict = Literal["faster", "slower", "same", "unknown"]
# a confidence level, 0.95 (a bound its JSON Schema keeps: a level of 5 was named "500% CI")
Level = Annotated[float, ("exclusiveMinimum", 0), ("exclusiveMaximum", 1)]
# the trials a side at a verdict's first and last look (the order, which no schema says, ``check`` holds them to)
LooksAt = Annotated[list[Annotated[int, ("minimum", 1)]], ("minItems", 2), ("maxItems", 2)]


class Error(TypedDict):
    """A part that could not be worked out, in one line; the rest of the summary stands."""
    error: str


class StepFigures(TypedDict):
    """Timed steps pooled over a variant's good trials (ms)."""
    median: float | None
    p25: float | None
    p75: float | None
    n: int


class CrashedAlike(TypedDict):
    """A variant whose first two trials crashed with one error (``perfkit.rundata.exits.crashed_alike``) and ran no
    trial after the second's round, though the case allowed more."""
    round: int  # the second trial's round, counted from 1, as report.md words it
    error: str  # the first failing rank's error (``perfkit.rundata.exits.crash_reason``)


class Variant(TypedDict):
    description: str | None
    step_ms: StepFigures
    natural_step_ms: StepFigures
    first_step_ms: StepFigures
    trial_medians_ms: list[float]
    values: dict[str, StepFigures]
    trials: int
    failed: int
    ranks: NotRequired[int]  # processes a good trial ran (its steps are rank 0's); absent in older summaries
    profiled_steps: NotRequired[int]  # steps a good trial ran under a profiler, not timed (the most of any trial)
    crashed_alike: NotRequired[CrashedAlike | None]  # absent in older summaries


class Comparison(TypedDict):
    """B (or ``variant``) against the baseline: ratio of medians of trial medians, bootstrap CI."""
    variant: NotRequired[str]
    metric: Literal["step_ms", "natural_step_ms"]
    ratio: float | None
    ci: list[float | None] | None
    p_value: float | None
    verdict: Verdict
    min_effect: float
    n_a: int
    n_b: int
    n_boot: NotRequired[int]  # the CI's bootstrap resamples (0: none drawn); absent in older summaries
    seed: NotRequired[int]    # the bootstrap's seed (the case's)
    # the intervals of all the verdict's looks hold together at ``confidence`` (0.95), each at ``look_confidence``;
    # ``looks_at``: the trials a side at its first and last look (null: read once); absent in older summaries
    confidence: NotRequired[Level]
    look_confidence: NotRequired[Level]
    looks_at: NotRequired[LooksAt | None]


class NoiseFloor(TypedDict):
    variant: str
    ratio: float | None
    ci: list[float | None] | None
    half_width: float | None
    verdict: Verdict


class QualityOracle(TypedDict):
    path: str
    variants: NotRequired[dict[str, dict[str, Any]]]
    error: NotRequired[str]


class DriftRow(TypedDict):
    """One denoising step's latents, B's against A's (``perfkit quality --drift``'s row)."""
    step: int
    rel_l2: float | None
    cosine: float | None
    psnr_db: Db
    max_abs_diff: float | None
    mean_abs_diff: float | None


class Quality(TypedDict):
    """B's outputs against A's; a file's figures as ``perfkit quality --json`` gives them."""
    file: str
    space: NotRequired[str]
    psnr_db: NotRequired[Db]
    psnr_y_db: NotRequired[Db]
    psnr_yuv_db: NotRequired[Db]
    mean_abs_diff: NotRequired[float | None]
    bit_identical: NotRequired[bool | None]
    files: dict[str, dict[str, Any]]
    oracle: NotRequired[QualityOracle]
    drift: NotRequired[list[DriftRow]]
    drift_error: NotRequired[str]


class Determinism(TypedDict):
    runs: int
    bit_identical: bool | None
    differing_runs: int
    sha256: str | None
    sha256_of: NotRequired[str]
    psnr_min_db: NotRequired[Db]
    max_abs_diff: NotRequired[float | None]
    rel_l2_max: NotRequired[float | None]


class Instruction(TypedDict):
    computation: str
    line: int
    opcode: str
    text: str


class FirstDifference(TypedDict):
    module: str
    ranks: list[int]
    against_rank: int
    majority: Instruction | None
    rank: Instruction | None
    same_program: bool
    counts: NotRequired[dict[str, dict[str, int] | None] | None]  # {majority, rank} where they differ; absent before
    receive_moved: list[dict[str, Any]]


class Role(TypedDict):
    ranks: list[int]
    modules: list[str]


class RankCheck(TypedDict):
    """Whether a variant's ranks compiled one program (``hlo_diff``: that trial's hlo-diff check)."""
    consistent: bool | None
    groups: list[list[int]]
    checked: str
    trial: NotRequired[str]
    divergent_ranks: NotRequired[list[int]]
    roles: NotRequired[list[Role]]
    first_difference: NotRequired[FirstDifference | None]
    hlo_diff: NotRequired[dict[str, Any]]


class Priming(TypedDict):
    status: str
    wall_s: float | None
    entries: int | None


class CacheVariant(TypedDict):
    mode: Literal["cold", "warm"]
    trials: int
    first_step_ms: float | None
    compile_s: float | None
    cache_hits: float | None
    ready_s: float | None
    entries_at_start: float | None
    entries_written: float | None
    priming: Priming | None


class CompileCache(TypedDict):
    variants: dict[str, CacheVariant]
    outputs: Determinism | None


class FirstJoined(TypedDict):
    """A chip-step whose span joins step markers of one number that ran apart (a retried step)."""
    trial: str
    rank: int
    device: int
    step: int


class BreakdownVariant(TypedDict):
    """Means over every traced (chip, step) of a variant's good trials (ms)."""
    trials: int
    chip_steps: int
    span_ms: float
    compute_ms: float
    ici_ms: float
    dcn_ms: float
    dma_ms: float
    idle_ms: float
    comm_ms: float
    hidden_ms: float
    overlap: float | None
    steps_from: list[str]
    step_programs: NotRequired[list[str]]  # the XLA programs (hlo_module) of the ops inside its steps, most time first
    measured: Literal["device ops", "host ops"]
    cpu_devices: NotRequired[bool]   # its ops ran on XLA's CPU devices (threads sharing the host's cores)
    outside_ops: NotRequired[int]    # device ops of its trials outside every step's span: not in these means
    outside_ms: NotRequired[float]   # their durations summed
    clock_ops: NotRequired[int]      # its trials' ops carrying their chip's own clock (TPU; absent elsewhere)
    clock_parted_ops: NotRequired[int]  # of those, the ops whose trace duration (these means') parts from it by over 1%
    clock_parted_ms: NotRequired[float]  # the differences summed (trace.clocks.parted)
    past_marker_steps: NotRequired[int]  # chip-steps whose span runs past their step markers (absent where none)
    past_marker_ms: NotRequired[float]   # how far past, summed
    joined_marker_steps: NotRequired[int]  # chip-steps whose span joins markers of one step number (absent where none)
    first_joined: NotRequired[FirstJoined]  # the first of those


class OpDelta(TypedDict):
    key: str
    category: str
    a_ms: float
    b_ms: float
    delta_ms: float


class CollectiveKind(TypedDict):
    kind: str
    count: float
    bytes: float | None
    time_ms: float
    exposed_ms: float
    hidden_ms: float
    wait_ms: float | None  # each of a step's chips but its last; null: no instance ran on two chips of one clock
    gbps: float | None


class StragglerStep(TypedDict):
    trial: str
    step: int
    rank: int
    device: int
    times_last: int
    matched: int
    apart: NotRequired[int]  # instances whose chips never overlapped: not one rendezvous, in no other figure
    skew_ms: float
    span_ms: float
    skew_share: float


class Collectives(TypedDict):
    kinds: list[CollectiveKind]
    steps: list[StragglerStep]


class Breakdown(TypedDict):
    baseline: str
    by: Literal["kind"]
    variants: dict[str, BreakdownVariant | Error]
    op_deltas: dict[str, list[OpDelta]]
    collectives: dict[str, Collectives | Error]


class OtherKeys(TypedDict):
    """How many of the ops or kinds an ``other`` row sums are on B only, on A only, or on both."""

    added: NotRequired[int]
    removed: NotRequired[int]
    changed: NotRequired[int]


class AttributionRow(TypedDict):
    key: str
    category: str
    change: Literal["changed", "added", "removed", "other", "idle", "residual", "total"]
    a_ms: float
    b_ms: float
    delta_ms: float
    ci_lo_ms: float | None
    ci_hi_ms: float | None
    marked: bool
    other_keys: NotRequired[OtherKeys]  # the ``other`` row's only


class Marked(TypedDict):
    rows: int
    marked: int
    chance_allows: int


class AttributionVariant(TypedDict):
    trials: list[int]
    chip_steps: list[int]
    outside_ops: NotRequired[list[int]]   # [a, b]: device ops outside every step's span, not in the figures
    outside_ms: NotRequired[list[float]]  # [a, b]: their durations summed
    # [a, b]: what each side's traces measured, as the breakdown's ``measured`` (absent before it)
    measured: NotRequired[list[Literal["device ops", "host ops"]]]
    same_programs: NotRequired[bool | None]  # both sides compiled the same XLA programs (None: no dumps of a side)
    ops_renamed: NotRequired[int]  # where not: B's step-program ops named as A's aligned ones (absent before it)
    # per module name several programs of a step share: [a, b], how many; their ops keyed ``<op> (<module> #<k>)``
    programs_placed: NotRequired[dict[str, list[int]]]
    confidence: Level
    interval: NotRequired[Literal["welch", "steps", "none"]]  # how the CIs were had (report.attribution.INTERVALS)
    total: AttributionRow
    category: list[AttributionRow]
    kind: list[AttributionRow]
    op: list[AttributionRow]
    marked: Marked


class Attribution(TypedDict):
    baseline: str
    top: NotRequired[int]
    variants: NotRequired[dict[str, AttributionVariant | Error]]
    error: NotRequired[str]


class HungChip(TypedDict):
    rank: int
    device: int
    completed: int
    last_step: int | None
    last_op: str | None
    last_kind: str | None
    waiting_at: str | None
    waiting_from: Literal["program", "own", "others", "ended"] | None


class Hang(TypedDict):
    """Where a hung trial's chips part (``parting``: as ``perfkit trace tail --json`` gives it)."""
    chips: list[HungChip]
    parting: dict[str, Any] | None
    text: str
    last_traced_step: NotRequired[int]  # both only where the traces end before the step the trial hung in
    hung_step: NotRequired[int]


class FailedTrial(TypedDict):
    index: int
    variant: str
    status: str
    dir: str
    ranks: list[RankRecord]
    warmup: NotRequired[int]  # the steps the case drops (a no_steps trial's may all be those); absent in older ones
    missing_hosts: NotRequired[list[int]]  # an incomplete trial's hosts that recorded no part of it
    cut_hosts: NotRequired[list[int]]  # its hosts whose line of it is cut short or damaged (no whole record)
    untold_hosts: NotRequired[list[int]]  # its hosts with no record of it but a damaged line naming no trial


class UnreadableSteps(TypedDict):
    """A trial rank's step events whose ``ms`` is no finite number, left out (trials.jsonl's ``unreadable_steps``)."""
    index: int
    variant: str
    rank: int
    steps: int


class Trials(TypedDict):
    total: int
    ok: int
    failed: list[FailedTrial]
    unreadable_steps: NotRequired[list[UnreadableSteps]]  # only where some
    timeout_s: NotRequired[float]  # the case's timeout, past which a trial hung; absent in older summaries
    # the round (from 1) the run ended with, short of the case's rounds: nothing was left to compare once variants
    # crashed alike; absent in older summaries
    ended_after_round: NotRequired[int | None]


class Env(TypedDict):
    """env.json's fields the report shows (null where env.json lacks them)."""
    source: dict[str, Any] | None
    packages: dict[str, str | None] | None
    devices: dict[str, Any] | None
    python: str | None
    host: str | None
    cpus: int | None
    platform: str | None
    flags: dict[str, str] | None
    hosts: NotRequired[dict[str, int] | None]  # {count, index}: the hosts the run shared; absent in older summaries


class OutsideScript(TypedDict):
    path: str
    sha256: str
    ignored: NotRequired[bool]  # inside the checkout, but ignored by git: the tree's hash does not cover it


class Reproduce(TypedDict):
    command: str
    cwd: str | None
    case_file: str
    checkout: NotRequired[str | None]  # the checkout the commit is of, where the run's folder is not inside it
    commit: str | None
    tree: str | None
    dirty: bool | None
    dirty_hash: str | None
    case_yaml: str
    outside_tree: NotRequired[list[OutsideScript]]  # a command or serve case's scripts no commit holds; absent in older


class CollectiveCount(TypedDict):
    count: int | float
    buffer_bytes: int | float
    sent_bytes: int | float


class CollectiveShape(TypedDict):
    kind: str
    shape: str
    group: int | None
    count: int | float
    buffer_bytes: int | float


class Program(TypedDict):
    """One compiled program's cost, per device and per run of it."""
    module: str
    file: str
    devices: int | None  # null where its HloModule line names neither replica_count nor num_partitions
    flops: float
    dot_flops: float
    other_flops: float
    transcendentals: float
    hbm_bytes: float
    interconnect_bytes: float
    collectives: dict[str, CollectiveCount]
    collective_shapes: list[CollectiveShape]
    temp_bytes: int | None
    peak_bytes: int | None
    uncosted: dict[str, int | float]
    async_pairs: int
    repeated_loops: int
    unknown_trip_loops: NotRequired[int]  # written since perfkit counts them: absent from older summaries


class Cost(TypedDict):
    dumps: str
    programs: NotRequired[list[Program]]
    step: NotRequired[Program]
    step_from: NotRequired[Literal["step_module", "bundled", "traced", "most_flops"]]  # how the step was picked
    error: NotRequired[str]


class Roofline(TypedDict):
    chip: str
    compute_ms: float
    memory_ms: float
    interconnect_ms: float
    bound_ms: float
    serial_ms: float
    binding: Literal["compute", "memory", "interconnect"]
    measured_ms: float | None
    measured_over_bound: float | None


class TapSide(TypedDict):
    variant: str
    trial: int
    dir: str


class TapRow(TypedDict):
    index: int
    step: int | None
    name: str
    dtype: str
    bit_identical: bool
    rel_l2: float | None
    psnr_db: Db
    max_abs_diff: float | None
    repeat_rel_l2: float | None
    allowance: float | None
    basis: Literal["dtype", "repeats"] | None
    departs: bool | None


class TapMismatch(TypedDict):
    index: int
    a: Any
    b: Any


class Taps(TypedDict):
    """The first good trial of B against A's, tap by tap (``perfkit.quality.departure``)."""
    a: TapSide
    b: TapSide
    taps: int
    repeats: int
    arrays: bool
    basis: str | None
    allowances: dict[str, float]
    repeat_factor: float
    rows: list[TapRow]
    first: TapRow | None
    mismatch: TapMismatch | None


class ServeLevel(TypedDict):
    variant: str
    level: int
    processes: int
    sent: int
    failed: int
    latency_p50_ms: float | None
    latency_p90_ms: float | None
    latency_max_ms: float | None
    outputs_per_min: float | None
    outputs_per_min_min: float | None
    outputs_per_min_max: float | None


class ServeProcess(TypedDict):
    variant: str
    trial: int
    trial_status: str
    level: int
    sent: int
    ok: int
    failed: int
    latency_p50_ms: float | None
    latency_p90_ms: float | None
    latency_max_ms: float | None
    outputs_per_min: float | None
    span_s: float | None


class ServeComparison(TypedDict):
    variant: str
    level: int
    metric: Literal["latency_ms", "outputs_per_min"]
    baseline_median: float | None  # what ratio divides: median over processes (latency: of each one's median)
    variant_median: float | None
    ratio: float | None
    ci_lo: float | None
    ci_hi: float | None
    verdict: Verdict
    n_a: int
    n_b: int


class ServeServer(TypedDict):
    trial: int
    variant: str
    status: str
    url: str | None
    ready_s: float | None
    failure: str | None


class ServedOutput(TypedDict):
    """A variant's first good output of a prompt against the reference, beside the codec's floor."""
    prompt: str
    variant: str
    reference: str | None
    codec_floor_db: Db
    psnr_db: NotRequired[Db]
    psnr_pooled_db: NotRequired[Db]
    psnr_min_db: NotRequired[Db]
    bit_identical: NotRequired[bool | None]
    max_abs_diff: NotRequired[float | None]
    error: NotRequired[str | None]  # null where the comparison was made (the rows are a frame's: its columns shared)


class ServeQuality(TypedDict):
    reference: str
    codec: str | None
    rows: list[ServedOutput]


class Serve(TypedDict):
    """A serve case's load figures (``perfkit.analysis.serving``)."""
    concurrency: list[int]
    requests: int
    warmup: int
    server_restarts: int
    prompts: int
    levels: list[ServeLevel]
    processes: list[ServeProcess]
    comparisons: list[ServeComparison]
    servers: list[ServeServer]
    failed_requests: list[dict[str, Any]]
    failed_count: int
    latency_samples_ms: dict[str, dict[str, list[float]]]
    quality: ServeQuality
    not_verified: list[str]


class Summary(TypedDict):
    """summary.json of a run, or of one combination of a matrix run (``cells/NN/``)."""
    case: str
    kind: Literal["model", "command", "serve"]
    run_dir: str
    baseline: str
    description: str | None
    variants: dict[str, Variant]
    comparison: Comparison
    comparisons: list[Comparison]
    noise_floor: NoiseFloor | None
    quality: Quality | Error | None
    taps: Taps | Error | None
    determinism: dict[str, Determinism | None]
    ranks: dict[str, RankCheck]
    compile_cache: CompileCache | None
    breakdown: Breakdown | None
    attribution: Attribution | None
    trials: Trials
    hangs: dict[str, Hang | Error] | None
    env: Env
    reproduce: Reproduce
    interrupted: bool
    cost: dict[str, Cost]
    roofline: dict[str, Roofline]
    serve: NotRequired[Serve]
    not_verified: list[str]


class MatrixRow(TypedDict):
    """One combination of a matrix run that has a summary (a row of matrix.csv, whose columns spell
    ``values`` and ``step_ms`` out as ``<field>`` and ``<variant>_ms``, and ``ci`` as ``ci_lo``, ``ci_hi``)."""
    cell: str                   # its run directory under cells/
    values: dict[str, Any]      # the matrix fields' values in this combination: dotted field -> value
    step_ms: dict[str, float | None]  # each variant's median of trial medians
    ratio: float | None
    ci: list[float | None]       # [lo, hi]; [null, null] without one
    verdict: Verdict
    failed: int                 # its failed trials
    interrupted: bool


class MatrixTrials(TypedDict):
    failed: list[str]  # the cells with failed trials


class MatrixSummary(TypedDict):
    """summary.json at the top of a matrix run: a row per combination (each has its own ``Summary``)."""
    case: str
    kind: Literal["matrix"]
    run_dir: str
    matrix: list[MatrixRow]
    combinations: int
    missing: int       # combinations with no summary (the run was stopped before them)
    interrupted: bool  # whether any is missing
    trials: MatrixTrials
    env: Env              # the matrix run's env.json, as a run's summary keeps it
    reproduce: Reproduce  # ``perfkit run`` on the matrix's own case.yaml
