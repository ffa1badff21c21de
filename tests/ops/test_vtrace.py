"""Tests for seed_rl.ops.vtrace.

The reference is a slow numpy V-trace written as IMPALA eq. (1) (an explicit sum over t of products of traces,
not the recursion the implementation uses), plus golden numbers from rlax, hand-computed cases and limiting cases.
T = unroll length, B = batch.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from seed_rl.ops import vtrace

# ---------------------------------------------------------------------------------------------------------------
# Slow reference in the paper's notation.
# ---------------------------------------------------------------------------------------------------------------


def vtrace_paper(
    log_rhos, discounts, rewards, values, bootstrap_value, rho_bar=1.0, pg_rho_bar=1.0, lambda_=1.0
):
    """IMPALA eq. (1), with per-step discounts gamma_i in place of gamma^(t-s) and c_i = lambda min(1, rho_i).

    v_s = V(x_s) + sum_{t=s}^{T-1} (prod_{i=s}^{t-1} gamma_i c_i) delta_t V,
    delta_t V = min(rho_bar, rho_t) (r_t + gamma_t V(x_{t+1}) - V(x_t)),
    A_s = min(pg_rho_bar, rho_s) (r_s + gamma_s v_{s+1} - V(x_s)), with V(x_T) = v_T = bootstrap.
    """
    log_rhos, discounts, rewards, values, bootstrap_value = (
        np.asarray(a, np.float64) for a in (log_rhos, discounts, rewards, values, bootstrap_value)
    )
    num_steps = len(rewards)
    rho = np.exp(log_rhos)
    c = lambda_ * np.minimum(1.0, rho)
    clipped_rho = rho if rho_bar is None else np.minimum(rho_bar, rho)
    clipped_pg_rho = rho if pg_rho_bar is None else np.minimum(pg_rho_bar, rho)
    V = np.concatenate([values, bootstrap_value[None]], axis=0)  # V[t] = V(x_t), t = 0..T.

    vs = np.zeros_like(values)
    for s in range(num_steps):
        vs[s] = V[s]
        for t in range(s, num_steps):
            # prod over i = s..t-1; the empty product (t = s) is 1.
            trace = np.prod(discounts[s:t] * c[s:t], axis=0)
            delta_t = clipped_rho[t] * (rewards[t] + discounts[t] * V[t + 1] - V[t])
            vs[s] = vs[s] + trace * delta_t

    vs_next = np.concatenate([vs[1:], bootstrap_value[None]], axis=0)
    pg_advantages = clipped_pg_rho * (rewards + discounts * vs_next - values)
    return vs, pg_advantages


def random_inputs(num_steps, batch_size, seed, trailing=()):
    rng = np.random.default_rng(seed)
    shape = (num_steps, batch_size, *trailing)
    discounts = rng.uniform(0.0, 1.0, shape)
    discounts[rng.uniform(size=shape) < 0.1] = 0.0  # Some episode ends.
    return {
        "log_rhos": rng.uniform(-2.5, 2.5, shape).astype(np.float32),  # rho in ~[0.08, 12.2].
        "discounts": discounts.astype(np.float32),
        "rewards": rng.normal(size=shape).astype(np.float32),
        "values": rng.normal(size=shape).astype(np.float32),
        "bootstrap_value": rng.normal(size=shape[1:]).astype(np.float32),
    }


def run_vtrace(inputs, rho_bar=1.0, pg_rho_bar=1.0, lambda_=1.0):
    out = vtrace.from_importance_weights(
        **inputs, clip_rho_threshold=rho_bar, clip_pg_rho_threshold=pg_rho_bar, lambda_=lambda_
    )
    return out.vs.numpy(), out.pg_advantages.numpy()


# ---------------------------------------------------------------------------------------------------------------
# Against the slow reference.
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("num_steps,batch_size", [(1, 1), (2, 3), (5, 5), (20, 4)])
@pytest.mark.parametrize("lambda_", [1.0, 0.5])
@pytest.mark.parametrize("rho_bar,pg_rho_bar", [(1.0, 1.0), (3.7, 2.2), (None, None)])
def test_matches_paper_formula(num_steps, batch_size, lambda_, rho_bar, pg_rho_bar):
    inputs = random_inputs(num_steps, batch_size, seed=num_steps * 100 + batch_size)
    vs, pg = run_vtrace(inputs, rho_bar, pg_rho_bar, lambda_)
    expected_vs, expected_pg = vtrace_paper(
        **inputs, rho_bar=rho_bar, pg_rho_bar=pg_rho_bar, lambda_=lambda_
    )
    np.testing.assert_allclose(vs, expected_vs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(pg, expected_pg, rtol=1e-5, atol=1e-5)


def test_original_seed_rl_test_case():
    """The inputs of the original SEED RL tests/vtrace_test.py: rho in ~[0.08, 12.2), rho_bar 3.7, pg_rho_bar 2.2."""
    num_steps, batch_size = 5, 5
    arange = np.arange(num_steps * batch_size, dtype=np.float32).reshape(num_steps, batch_size)
    inputs = {
        "log_rhos": 5.0 * (arange / (num_steps * batch_size) - 0.5),
        "discounts": np.tile(0.9 / (np.arange(batch_size, dtype=np.float32) + 1), (num_steps, 1)),
        "rewards": arange,
        "values": arange / batch_size,
        "bootstrap_value": np.arange(batch_size, dtype=np.float32) + 1.0,
    }
    vs, pg = run_vtrace(inputs, 3.7, 2.2)
    expected_vs, expected_pg = vtrace_paper(**inputs, rho_bar=3.7, pg_rho_bar=2.2)
    np.testing.assert_allclose(vs, expected_vs, rtol=1e-5)
    np.testing.assert_allclose(pg, expected_pg, rtol=1e-5)


def test_trailing_dimensions_are_elementwise():
    inputs = random_inputs(6, 3, seed=7, trailing=(2,))
    vs, pg = run_vtrace(inputs, 3.7, 2.2, 0.5)
    for k in range(2):
        channel = {name: x[..., k] for name, x in inputs.items()}
        expected_vs, expected_pg = vtrace_paper(**channel, rho_bar=3.7, pg_rho_bar=2.2, lambda_=0.5)
        np.testing.assert_allclose(vs[..., k], expected_vs, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(pg[..., k], expected_pg, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------------------------------
# Golden numbers.
# ---------------------------------------------------------------------------------------------------------------

# T = 4, B = 2. Column 1 has an episode end (discount 0) at t = 1, column 0 at t = 2.
GOLDEN_INPUTS = {
    "log_rhos": np.array([[-0.5, 1.2], [0.3, -1.0], [2.0, 0.0], [-0.2, 0.7]], np.float32),
    "discounts": np.array([[0.9, 0.99], [0.9, 0.0], [0.0, 0.99], [0.9, 0.99]], np.float32),
    "rewards": np.array([[1.0, -1.0], [0.5, 2.0], [-0.3, 0.0], [2.0, 1.5]], np.float32),
    "values": np.array([[0.2, 1.0], [-0.4, 0.5], [1.1, -0.6], [0.3, 0.8]], np.float32),
    "bootstrap_value": np.array([0.7, -0.2], np.float32),
}

# Computed with rlax 0.1.9 (jax 0.10.2, float64) from GOLDEN_INPUTS, one batch column at a time:
#   out = rlax.vtrace_td_error_and_advantage(v_tm1=values[:, b], v_t=concat(values[1:, b], bootstrap[b]),
#       r_t=rewards[:, b], discount_t=discounts[:, b], rho_tm1=exp(log_rhos[:, b]), lambda_=...,
#       clip_rho_threshold=..., clip_pg_rho_threshold=...)
#   vs = out.errors + values[:, b]; pg_advantages = out.pg_advantage.
# rlax's pg_advantage differs from SEED RL's when lambda < 1 (rlax bootstraps the advantage on
# lambda * vs_{t+1} + (1 - lambda) * V(x_{t+1}), SEED RL on vs_{t+1}), so only rlax's vs is used for lambda = 0.5.
RLAX_GOLDEN = [
    # (lambda_, rho_bar, pg_rho_bar, vs, pg_advantages or None)
    (
        1.0, 1.0, 1.0,
        [[0.8107763743, 0.0413009701], [0.23, 1.0518191618], [-0.3, 1.28898], [2.2076426547, 1.302]],
        [[0.6107763743, -0.9586990299], [0.63, 0.5518191618], [-1.4, 1.88898], [1.9076426547, 0.502]],
    ),
    (
        1.0, 3.7, 2.2,
        [[-0.6853468408, -3.4504749986], [-2.5107668537, 1.0518191618], [-4.08, 1.7927948206],
         [2.2076426547, 1.8109038592]],
        [[-0.8853468408, -2.1091378657], [-3.7418086146, 0.5518191618], [-3.08, 2.3927948206],
         [1.9076426547, 1.0109038592]],
    ),
    (
        0.5, 3.7, 2.2,
        [[0.5269836603, -3.7236254836], [-0.1797668537, 1.0518191618], [-4.08, 1.2923974103],
         [2.2076426547, 1.8109038592]],
        None,
    ),
]  # fmt: skip


@pytest.mark.parametrize("lambda_,rho_bar,pg_rho_bar,expected_vs,expected_pg", RLAX_GOLDEN)
def test_rlax_golden_numbers(lambda_, rho_bar, pg_rho_bar, expected_vs, expected_pg):
    vs, pg = run_vtrace(GOLDEN_INPUTS, rho_bar, pg_rho_bar, lambda_)
    np.testing.assert_allclose(vs, expected_vs, rtol=1e-5, atol=1e-6)
    if expected_pg is not None:
        np.testing.assert_allclose(pg, expected_pg, rtol=1e-5, atol=1e-6)


def test_hand_computed_off_policy():
    """T = 2, B = 1, gamma = 0.9: rho = (2, 0.5) so rho_bar = 1 clips step 0 and c = (1, 0.5)."""
    inputs = {
        "log_rhos": np.log([[2.0], [0.5]]).astype(np.float32),
        "discounts": np.full((2, 1), 0.9, np.float32),
        "rewards": np.array([[1.0], [2.0]], np.float32),
        "values": np.array([[0.5], [3.0]], np.float32),
        "bootstrap_value": np.array([10.0], np.float32),
    }
    vs, pg = run_vtrace(inputs)
    delta_1 = 0.5 * (2 + 0.9 * 10 - 3)
    delta_0 = 1.0 * (1 + 0.9 * 3 - 0.5)
    vs_1 = 3 + delta_1
    # The trace from step 0 to step 1 is gamma_0 * c_0 = 0.9 * min(1, 2); c_1 is not part of it.
    vs_0 = 0.5 + delta_0 + 0.9 * 1.0 * delta_1
    np.testing.assert_allclose(vs[:, 0], [vs_0, vs_1], rtol=1e-6)
    np.testing.assert_allclose(
        pg[:, 0], [1.0 * (1 + 0.9 * vs_1 - 0.5), 0.5 * (2 + 0.9 * 10 - 3)], rtol=1e-6
    )


def test_on_policy_lambda_one_is_the_n_step_return():
    """rho = 1: vs_t is the discounted return to the end of the unroll, bootstrapped on V(x_T)."""
    inputs = {
        "log_rhos": np.zeros((3, 1), np.float32),
        "discounts": np.full((3, 1), 0.9, np.float32),
        "rewards": np.array([[1.0], [2.0], [3.0]], np.float32),
        # The values are irrelevant to vs on-policy with lambda = 1.
        "values": np.array([[5.0], [-7.0], [11.0]], np.float32),
        "bootstrap_value": np.array([100.0], np.float32),
    }
    vs, pg = run_vtrace(inputs)
    vs_2 = 3 + 0.9 * 100
    vs_1 = 2 + 0.9 * 3 + 0.9**2 * 100
    vs_0 = 1 + 0.9 * 2 + 0.9**2 * 3 + 0.9**3 * 100
    np.testing.assert_allclose(vs[:, 0], [vs_0, vs_1, vs_2], rtol=1e-6)
    # On-policy advantage: the n-step return minus the baseline.
    np.testing.assert_allclose(pg[:, 0], [vs_0 - 5, vs_1 + 7, vs_2 - 11], rtol=1e-6)


def test_on_policy_is_the_lambda_return():
    """rho = 1: vs_t = G_t^lambda = r_t + gamma_t ((1 - lambda) V(x_{t+1}) + lambda G_{t+1}^lambda), G_T = V(x_T).

    The reference uses the forward-view lambda-return recursion, not V-trace's TD-error recursion.
    """
    inputs = random_inputs(8, 3, seed=11)
    inputs["log_rhos"] = np.zeros_like(inputs["log_rhos"])
    lambda_ = 0.5
    vs, _ = run_vtrace(inputs, lambda_=lambda_)

    next_values = np.concatenate([inputs["values"][1:], inputs["bootstrap_value"][None]], axis=0)
    lambda_return = np.zeros_like(vs)
    g_next = inputs["bootstrap_value"].astype(np.float64)
    for t in reversed(range(8)):
        g_next = inputs["rewards"][t] + inputs["discounts"][t] * (
            (1 - lambda_) * next_values[t] + lambda_ * g_next
        )
        lambda_return[t] = g_next
    np.testing.assert_allclose(vs, lambda_return, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------------------------------
# Limiting cases.
# ---------------------------------------------------------------------------------------------------------------


def test_lambda_zero_is_one_step_td():
    inputs = random_inputs(6, 4, seed=3)
    vs, _ = run_vtrace(inputs, rho_bar=3.7, lambda_=0.0)
    clipped_rho = np.minimum(3.7, np.exp(inputs["log_rhos"]))
    next_values = np.concatenate([inputs["values"][1:], inputs["bootstrap_value"][None]], axis=0)
    expected = inputs["values"] + clipped_rho * (
        inputs["rewards"] + inputs["discounts"] * next_values - inputs["values"]
    )
    np.testing.assert_allclose(vs, expected, rtol=1e-5, atol=1e-6)


def test_zero_discount_ignores_the_future():
    inputs = random_inputs(5, 3, seed=4)
    inputs["discounts"] = np.zeros_like(inputs["discounts"])
    vs, pg = run_vtrace(inputs, rho_bar=3.7, pg_rho_bar=2.2)
    rho = np.exp(inputs["log_rhos"])
    td = inputs["rewards"] - inputs["values"]
    np.testing.assert_allclose(
        vs, inputs["values"] + np.minimum(3.7, rho) * td, rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(pg, np.minimum(2.2, rho) * td, rtol=1e-5, atol=1e-6)


def test_episode_boundary_splits_the_trace():
    """discount_k = 0: steps <= k see nothing after k, and steps > k are V-trace on their own sub-unroll."""
    k = 3
    inputs = random_inputs(8, 4, seed=5)
    inputs["discounts"] = np.full_like(inputs["discounts"], 0.95)
    inputs["discounts"][k] = 0.0
    vs, pg = run_vtrace(inputs, 3.7, 2.2, 0.8)

    # Changing everything after k leaves the first k + 1 steps unchanged.
    changed = random_inputs(8, 4, seed=6)
    perturbed = {name: x.copy() for name, x in inputs.items()}
    for name in ("log_rhos", "rewards", "values"):
        perturbed[name][k + 1 :] = changed[name][k + 1 :]
    perturbed["bootstrap_value"] = changed["bootstrap_value"]
    vs_perturbed, pg_perturbed = run_vtrace(perturbed, 3.7, 2.2, 0.8)
    np.testing.assert_allclose(vs_perturbed[: k + 1], vs[: k + 1], rtol=1e-6)
    np.testing.assert_allclose(pg_perturbed[: k + 1], pg[: k + 1], rtol=1e-6)

    # Each half on its own gives the same targets (the first half's bootstrap value is multiplied by zero).
    first = {name: x[: k + 1] for name, x in inputs.items() if name != "bootstrap_value"}
    first["bootstrap_value"] = np.full_like(inputs["bootstrap_value"], 1e3)
    second = {name: x[k + 1 :] for name, x in inputs.items() if name != "bootstrap_value"}
    second["bootstrap_value"] = inputs["bootstrap_value"]
    vs_first, pg_first = run_vtrace(first, 3.7, 2.2, 0.8)
    vs_second, pg_second = run_vtrace(second, 3.7, 2.2, 0.8)
    np.testing.assert_allclose(np.concatenate([vs_first, vs_second]), vs, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.concatenate([pg_first, pg_second]), pg, rtol=1e-5, atol=1e-6)


def test_no_clipping_uses_raw_importance_weights():
    """rho_bar = None: a large rho (e^2) multiplies the TD error unclipped; the trace c stays clipped at 1."""
    inputs = {
        "log_rhos": np.array([[2.0], [2.0]], np.float32),
        "discounts": np.full((2, 1), 0.5, np.float32),
        "rewards": np.array([[1.0], [1.0]], np.float32),
        "values": np.zeros((2, 1), np.float32),
        "bootstrap_value": np.array([2.0], np.float32),
    }
    vs, pg = run_vtrace(inputs, rho_bar=None, pg_rho_bar=None)
    rho = np.exp(2.0)
    vs_1 = rho * (1 + 0.5 * 2)
    vs_0 = rho * (1 + 0.5 * 0) + 0.5 * 1.0 * vs_1
    np.testing.assert_allclose(vs[:, 0], [vs_0, vs_1], rtol=1e-5)
    np.testing.assert_allclose(pg[:, 0], [rho * (1 + 0.5 * vs_1), rho * (1 + 0.5 * 2)], rtol=1e-5)


# ---------------------------------------------------------------------------------------------------------------
# Gradients, graph mode, errors.
# ---------------------------------------------------------------------------------------------------------------


def test_no_gradient_flows_through_the_targets():
    inputs = {name: tf.Variable(x) for name, x in random_inputs(4, 2, seed=8).items()}
    with tf.GradientTape() as tape:
        out = vtrace.from_importance_weights(**inputs)
        total = tf.reduce_sum(out.vs) + tf.reduce_sum(out.pg_advantages)
    grads = tape.gradient(total, list(inputs.values()))
    assert all(g is None for g in grads), grads


def test_works_in_tf_function_with_unknown_unroll_length():
    matrix = tf.TensorSpec([None, None], tf.float32)

    @tf.function(autograph=False, input_signature=[matrix] * 4 + [tf.TensorSpec([None], tf.float32)])
    def vtrace_graph(log_rhos, discounts, rewards, values, bootstrap_value):
        return vtrace.from_importance_weights(
            log_rhos, discounts, rewards, values, bootstrap_value, 3.7, 2.2, 0.5
        )

    for num_steps in (3, 9):
        inputs = random_inputs(num_steps, 2, seed=num_steps)
        out = vtrace_graph(**inputs)
        expected_vs, expected_pg = vtrace_paper(**inputs, rho_bar=3.7, pg_rho_bar=2.2, lambda_=0.5)
        np.testing.assert_allclose(out.vs.numpy(), expected_vs, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(out.pg_advantages.numpy(), expected_pg, rtol=1e-5, atol=1e-5)
    assert vtrace_graph.experimental_get_tracing_count() == 1


def test_graph_size_does_not_grow_with_unroll_length():
    """The recursion is a tf.scan (one while loop), not one op per time step."""

    def num_ops(num_steps):
        spec = tf.TensorSpec([num_steps, 2], tf.float32)
        fn = tf.function(vtrace.from_importance_weights, autograph=False).get_concrete_function(
            spec, spec, spec, spec, tf.TensorSpec([2], tf.float32)
        )
        return len(fn.graph.get_operations())

    assert num_ops(5) == num_ops(50)


@pytest.mark.parametrize(
    "name,bad,match",
    [
        ("log_rhos", np.zeros(4, np.float32), "log_rhos.*rank"),
        ("values", np.zeros(4, np.float32), "values.*rank"),
        ("rewards", np.zeros((4, 2, 1), np.float32), "rewards.*rank"),
        ("discounts", np.zeros((4, 3), np.float32), "discounts.*incompatible"),
        ("bootstrap_value", np.zeros((4, 2), np.float32), "bootstrap_value"),
        ("bootstrap_value", np.zeros(3, np.float32), "bootstrap_value"),
        ("clip_rho_threshold", np.ones(2, np.float32), "clip_rho_threshold.*scalar"),
        ("lambda_", 1.5, "lambda_"),
    ],
)
def test_bad_shapes_raise_value_error(name, bad, match):
    kwargs = dict(random_inputs(4, 2, seed=9), **{name: bad})
    with pytest.raises(ValueError, match=match):
        vtrace.from_importance_weights(**kwargs)


@pytest.mark.parametrize("name", ["log_rhos", "values", "bootstrap_value"])
@pytest.mark.parametrize("dtype", [tf.float64, tf.int32])
def test_non_float32_tensors_raise_type_error(name, dtype):
    inputs = random_inputs(4, 2, seed=10)
    inputs[name] = tf.cast(inputs[name], dtype)
    with pytest.raises(TypeError, match=f"{name}.*float32"):
        vtrace.from_importance_weights(**inputs)


def test_shape_errors_fire_at_trace_time():
    @tf.function(autograph=False)
    def misaligned(values):
        inputs = random_inputs(4, 2, seed=12)
        inputs["values"] = values
        return vtrace.from_importance_weights(**inputs)

    with pytest.raises(ValueError, match="values"):
        misaligned.get_concrete_function(tf.TensorSpec([4, 3], tf.float32))


# ---------------------------------------------------------------------------------------------------------------
# from_logits.
# ---------------------------------------------------------------------------------------------------------------


def _log_softmax(logits):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def test_from_logits_matches_from_importance_weights():
    rng = np.random.default_rng(13)
    num_steps, batch_size, num_actions = 5, 3, 4
    behaviour_logits = rng.normal(size=(num_steps, batch_size, num_actions)).astype(np.float32)
    target_logits = rng.normal(size=(num_steps, batch_size, num_actions)).astype(np.float32)
    actions = rng.integers(0, num_actions, size=(num_steps, batch_size)).astype(np.int32)
    inputs = random_inputs(num_steps, batch_size, seed=14)
    del inputs["log_rhos"]

    target_logits_var = tf.Variable(target_logits)
    with tf.GradientTape() as tape:
        out = vtrace.from_logits(
            behaviour_logits, target_logits_var, actions, **inputs, lambda_=0.5
        )
        policy_loss = -tf.reduce_sum(out.target_action_log_probs * out.pg_advantages)

    def pick(logits):
        return np.take_along_axis(_log_softmax(logits), actions[..., None], -1)[..., 0]

    expected_log_rhos = pick(target_logits) - pick(behaviour_logits)
    np.testing.assert_allclose(
        out.target_action_log_probs, pick(target_logits), rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
        out.behaviour_action_log_probs, pick(behaviour_logits), rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(out.log_rhos, expected_log_rhos, rtol=1e-5, atol=1e-6)
    expected_vs, expected_pg = vtrace_paper(expected_log_rhos, **inputs, lambda_=0.5)
    np.testing.assert_allclose(out.vs, expected_vs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out.pg_advantages, expected_pg, rtol=1e-5, atol=1e-5)
    # The policy gradient reaches the target logits through the log-probabilities only.
    assert tape.gradient(policy_loss, target_logits_var) is not None


def test_from_logits_rejects_bad_actions():
    logits = np.zeros((3, 2, 4), np.float32)
    inputs = random_inputs(3, 2, seed=15)
    del inputs["log_rhos"]
    with pytest.raises(TypeError, match="actions"):
        vtrace.from_logits(logits, logits, np.zeros((3, 2), np.float32), **inputs)
    with pytest.raises(ValueError, match="actions"):
        vtrace.from_logits(logits, logits, np.zeros((3, 2, 1), np.int32), **inputs)
    with pytest.raises(ValueError, match="target_policy_logits"):
        vtrace.from_logits(logits, logits[0], np.zeros((3, 2), np.int32), **inputs)
