"""The one precision rule of the kernels: compute (accumulate, softmax, rotate) in float32, or in the
input's type where that is wider. bfloat16 runs accumulate in float32; float64 runs stay float64, so a
plan can be checked against the plain model to float64 rounding."""

import jax.numpy as jnp


def compute_dtype(dtype) -> jnp.dtype:
    return jnp.promote_types(dtype, jnp.float32)
