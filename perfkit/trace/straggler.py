"""When a step's arrival skew names a straggler, in words the text of ``perfkit trace collectives`` and report.md's
collectives section share. Constants only, importing nothing: the report reads them without loading the trace
analyses (``perfkit.trace.collectives`` pulls the readers, the timeline and the HLO parser)."""

STRAGGLER_SHARE = 0.05  # the report names a straggler when the skew summed over a step passes this share of it
# why a step's summed arrival skew may pass the step itself
SKEW_PAST_STEP = "more than the step: collectives in flight at once each count their own skew"
