"""The metrics protocol's lines as types: what a rank program writes to ``PERFKIT_METRICS``, one JSON
object a line (``perfkit.record`` writes them; ``perfkit.run.metrics`` reads them)."""

from typing import Literal, NotRequired, TypedDict


class StepEvent(TypedDict):
    """A step waited for (synced); ``traced``: it ran under a profiler (kept, never timed)."""
    event: Literal["step"]
    ms: float
    traced: NotRequired[bool]


class NaturalStepEvent(TypedDict):
    """A pass dispatched without waiting: ``ms`` is its mean step, over ``steps`` steps."""
    event: Literal["step"]
    kind: Literal["natural"]
    ms: float
    steps: int


class ValueEvent(TypedDict):
    event: Literal["value"]
    name: str
    value: float


class MarkEvent(TypedDict):
    """Progress: a hung rank's last mark is reported."""
    event: Literal["mark"]
    name: str
    device_kind: NotRequired[str]


MetricsEvent = StepEvent | NaturalStepEvent | ValueEvent | MarkEvent
