"""Reference SP kernels: collective matmuls, attention over sharded sequences, RoPE, padding.

Each public function documents the shape of every argument; each has a plain reference next to it.
Rule for all of them: a value that differs by rank enters a compiled program as a runtime array
(``lax.axis_index`` or an input), never as a Python constant, or the ranks compile different programs.
"""
