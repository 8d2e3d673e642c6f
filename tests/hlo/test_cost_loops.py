"""`perfkit cost` on a while loop whose trip count XLA did not work out (a data-dependent ``lax.while_loop``): its
body is costed once, as XLA's cost analysis costs it, and the output says so (it said nothing: a once-through
figure read as the step's cost). The module is XLA's own (jaxlib, CPU), the referee its ``cost_analysis()``."""

from perfkit.hlo.program_cost import ProgramCost, program_cost
from perfkit.hlo.parse import parse_module


def _compiled():
    import jax
    import jax.numpy as jnp
    from jax import lax

    step = jax.jit(lambda x: lax.while_loop(lambda c: c.sum() < 1e6, lambda c: (c @ c) * 2.0, x))
    return step.lower(jnp.ones((64, 64), jnp.float32)).compile()


def test_a_loop_of_unknown_trip_count_is_costed_once_and_named():
    compiled = _compiled()
    text = compiled.as_text()
    assert "while(" in text and '"known_trip_count"' not in text
    mine = program_cost(parse_module(text))
    xla = compiled.cost_analysis()
    xla = xla[0] if isinstance(xla, list) else xla
    # once through: the 64 x 64 matmul, the multiply, the condition's sum and compare, as XLA counts them
    assert mine.dot_flops + mine.other_flops == xla["flops"]
    assert (mine.unknown_trip_loops, mine.repeated_loops) == (1, 0)
    (sentence,) = ProgramCost.definitions(mine.as_json())
    assert sentence.startswith("1 while loop here has a trip count XLA did not work out: counted once")


def test_a_loop_of_known_trip_count_is_not_named_unknown():
    import jax
    import jax.numpy as jnp
    from jax import lax

    step = jax.jit(lambda x: lax.fori_loop(0, 5, lambda i, c: (c @ c) * 2.0, x))
    text = step.lower(jnp.ones((64, 64), jnp.float32)).compile().as_text()
    assert '"known_trip_count":{"n":"5"}' in text
    mine = program_cost(parse_module(text))
    assert (mine.unknown_trip_loops, mine.repeated_loops) == (0, 1)


def test_a_loop_inside_a_loop_is_one_loop_however_often_it_runs():
    """A scan of 3 trips inside a scan of 4: the text said "5 while loops here run more than once" (the inner loop
    once per outer trip, plus the outer) of a program that holds 2. Every trip is still costed: 4 x 3 dots of
    (8, 16) by (16, 16), 2 x 8 x 16 x 16 FLOPs each, by hand."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    def step(a, b):
        def outer(c, bb):
            return lax.scan(lambda d, _: (jnp.sin(d @ bb), None), c, None, length=3)[0], None
        return lax.scan(outer, a, b)[0]

    text = jax.jit(step).lower(jnp.ones((8, 16)), jnp.ones((4, 16, 16))).compile().as_text()
    assert text.count(" while(") == 2 and '"known_trip_count":{"n":"3"}' in text  # by eye: two loops, 3 and 4 trips
    mine = program_cost(parse_module(text))
    assert (mine.dot_flops, mine.repeated_loops, mine.unknown_trip_loops) == (4 * 3 * 2 * 8 * 16 * 16, 2, 0)
    assert ProgramCost.definitions(mine.as_json())[0].startswith("2 while loops here run more than once")
