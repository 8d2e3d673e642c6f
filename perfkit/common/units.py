"""The time unit conversions every stage shares, defined once: the traces' times are integer picoseconds
(``perfkit.trace.raw``'s columns), the figures shown and written are milliseconds. Stdlib only, so the
command line may import it without loading a trace reader."""

PS_PER_MS = 1e9
