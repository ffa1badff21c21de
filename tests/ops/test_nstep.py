"""Tests for seed_rl.ops.nstep.

The reference is a slow numpy n-step return written as the explicit sum of R2D2 section 2.3 with per-step
discounts (a double loop over t and i), plus hand-computed tables, limiting cases and the original SEED RL
agents/r2d2/learner_test.py numbers. T = unroll length, B = batch, A = number of actions.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from seed_rl.ops.nstep import double_q_bootstrap, n_step_bellman_target

# ---------------------------------------------------------------------------------------------------------------
# Slow reference in the paper's notation.
# ---------------------------------------------------------------------------------------------------------------


def n_step_paper(rewards, discounts, bootstrap_values, n_steps):
    """target_t = sum_{i<k} (prod_{j<i} d_{t+j}) r_{t+i} + (prod_{j<k} d_{t+j}) Q'_{t+k-1}, k = min(n, T - t).

    Q'_{t} = bootstrap_values[t] is the value of s_{t+1}; d_t = gamma (1 - done_{t+1}).
    """
    r, d, q = (np.asarray(a, np.float64) for a in (rewards, discounts, bootstrap_values))
    num_steps = len(r)
    target = np.zeros_like(r)
    for t in range(num_steps):
        k = min(n_steps, num_steps - t)
        discount_product = np.ones_like(r[0])  # prod_{j<i} d_{t+j}; the empty product is 1.
        for i in range(k):
            target[t] += discount_product * r[t + i]
            discount_product = discount_product * d[t + i]
        target[t] += discount_product * q[t + k - 1]
    return target


def random_inputs(num_steps, batch_size, seed):
    rng = np.random.default_rng(seed)
    shape = (num_steps, batch_size)
    discounts = np.full(shape, 0.97)
    discounts[rng.uniform(size=shape) < 0.15] = 0.0  # Some episode ends.
    discounts *= rng.uniform(0.5, 1.0, shape)  # And non-constant discounts, to catch misalignment.
    return {
        "rewards": rng.normal(size=shape).astype(np.float32),
        "discounts": discounts.astype(np.float32),
        "bootstrap_values": rng.normal(scale=10.0, size=shape).astype(np.float32),
    }


def run(inputs, n_steps):
    return n_step_bellman_target(**inputs, n_steps=n_steps).numpy()


def column(values):
    """A [T] list as a [T, 1] float32 array (one batch column)."""
    return np.array(values, np.float32)[:, None]


# ---------------------------------------------------------------------------------------------------------------
# Against the slow reference.
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("num_steps,batch_size", [(1, 1), (2, 3), (5, 4), (20, 3), (81, 2)])
@pytest.mark.parametrize("n_steps", [1, 2, 3, 5, 10, 100])
def test_matches_paper_formula(num_steps, batch_size, n_steps):
    inputs = random_inputs(num_steps, batch_size, seed=1000 * n_steps + num_steps)
    np.testing.assert_allclose(run(inputs, n_steps), n_step_paper(**inputs, n_steps=n_steps), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("num_steps", [1, 3, 6])
def test_n_at_least_t_is_the_full_truncated_return(num_steps):
    """n >= T: every target runs to the end of the sequence and bootstraps on Q'(s_T); larger n changes nothing."""
    inputs = random_inputs(num_steps, 3, seed=num_steps)
    full = run(inputs, num_steps)
    for n_steps in (num_steps + 1, 2 * num_steps + 3):
        np.testing.assert_allclose(run(inputs, n_steps), full, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(full, n_step_paper(**inputs, n_steps=10**6), rtol=1e-5, atol=1e-5)


def test_trailing_dimensions_are_elementwise():
    rng = np.random.default_rng(3)
    inputs = {name: np.stack([x, rng.permutation(x)], axis=-1) for name, x in random_inputs(7, 2, seed=3).items()}
    out = run(inputs, 3)
    for c in range(2):
        channel = {name: x[..., c] for name, x in inputs.items()}
        np.testing.assert_allclose(out[..., c], n_step_paper(**channel, n_steps=3), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------------------------------
# Hand-computed tables (gamma = 0.9 unless said otherwise).
# ---------------------------------------------------------------------------------------------------------------


def test_one_step_is_td():
    inputs = {
        "rewards": column([1.0, 2.0, 3.0]),
        "discounts": column([0.9, 0.9, 0.9]),
        "bootstrap_values": column([10.0, 20.0, 30.0]),
    }
    np.testing.assert_allclose(run(inputs, 1)[:, 0], [1 + 0.9 * 10, 2 + 0.9 * 20, 3 + 0.9 * 30], rtol=1e-6)


def test_one_step_is_td_on_random_inputs():
    inputs = random_inputs(9, 4, seed=5)
    expected = inputs["rewards"] + inputs["discounts"] * inputs["bootstrap_values"]
    np.testing.assert_allclose(run(inputs, 1), expected, rtol=1e-6, atol=1e-6)


def test_three_steps_no_episode_end():
    """T = 5, n = 3: the first three targets are full 3-step returns, the last two are truncated."""
    inputs = {
        "rewards": column([1.0, 2.0, 3.0, 4.0, 5.0]),
        "discounts": column([0.9] * 5),
        "bootstrap_values": column([10.0, 20.0, 30.0, 40.0, 50.0]),
    }
    expected = [
        1 + 0.9 * 2 + 0.9**2 * 3 + 0.9**3 * 30,
        2 + 0.9 * 3 + 0.9**2 * 4 + 0.9**3 * 40,
        3 + 0.9 * 4 + 0.9**2 * 5 + 0.9**3 * 50,
        4 + 0.9 * 5 + 0.9**2 * 50,  # Truncated to 2 steps, bootstraps on the last value.
        5 + 0.9 * 50,  # Truncated to 1 step.
    ]
    np.testing.assert_allclose(run(inputs, 3)[:, 0], expected, rtol=1e-6)


def test_episode_end_inside_the_window_cuts_the_sum_and_drops_the_bootstrap():
    """discount_1 = 0: the episode ends on arriving in s_2; r_2.. and Q'(s_2..) belong to the next episode."""
    inputs = {
        "rewards": column([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
        "discounts": column([0.9, 0.0, 0.9, 0.9, 0.9, 0.9]),
        "bootstrap_values": column([10.0, 20.0, 30.0, 40.0, 50.0, 60.0]),
    }
    expected = [
        1 + 0.9 * 2,  # r_0 + d_0 r_1, then d_1 = 0 drops r_2 and the bootstrap.
        2,  # The terminal transition: just its reward.
        3 + 0.9 * 4 + 0.9**2 * 5 + 0.9**3 * 50,  # The new episode: a full 3-step return.
        4 + 0.9 * 5 + 0.9**2 * 6 + 0.9**3 * 60,
        5 + 0.9 * 6 + 0.9**2 * 60,  # Truncated at the sequence end.
        6 + 0.9 * 60,
    ]
    np.testing.assert_allclose(run(inputs, 3)[:, 0], expected, rtol=1e-6)


def test_episode_end_at_the_last_step_drops_the_truncated_bootstrap():
    inputs = {
        "rewards": column([1.0, 2.0, 3.0]),
        "discounts": column([0.9, 0.9, 0.0]),
        "bootstrap_values": column([10.0, 20.0, 1e6]),  # Q'(s_3) would be the first state of a new episode.
    }
    expected = [1 + 0.9 * 2 + 0.9**2 * 3, 2 + 0.9 * 3, 3]
    np.testing.assert_allclose(run(inputs, 5)[:, 0], expected, rtol=1e-6)


def test_per_step_discounts_multiply_in_order():
    inputs = {
        "rewards": column([1.0, 2.0, 4.0]),
        "discounts": column([0.5, 0.25, 0.1]),
        "bootstrap_values": column([8.0, 16.0, 32.0]),
    }
    expected = [
        1 + 0.5 * 2 + 0.5 * 0.25 * 4 + 0.5 * 0.25 * 0.1 * 32,
        2 + 0.25 * 4 + 0.25 * 0.1 * 32,
        4 + 0.1 * 32,
    ]
    np.testing.assert_allclose(run(inputs, 3)[:, 0], expected, rtol=1e-6)
    expected_two_steps = [1 + 0.5 * 2 + 0.5 * 0.25 * 16, 2 + 0.25 * 4 + 0.25 * 0.1 * 32, 4 + 0.1 * 32]
    np.testing.assert_allclose(run(inputs, 2)[:, 0], expected_two_steps, rtol=1e-6)


def test_zero_discount_everywhere_gives_the_rewards():
    inputs = random_inputs(6, 3, seed=7)
    inputs["discounts"] = np.zeros_like(inputs["discounts"])
    np.testing.assert_array_equal(run(inputs, 4), inputs["rewards"])


def test_batch_columns_are_independent():
    inputs = {
        "rewards": np.array([[1.0, 1.0], [2.0, 2.0]], np.float32),
        "discounts": np.array([[0.9, 0.0], [0.9, 0.9]], np.float32),
        "bootstrap_values": np.array([[10.0, 10.0], [20.0, 20.0]], np.float32),
    }
    expected = [[1 + 0.9 * 2 + 0.9**2 * 20, 1], [2 + 0.9 * 20, 2 + 0.9 * 20]]
    np.testing.assert_allclose(run(inputs, 2), expected, rtol=1e-6)


# ---------------------------------------------------------------------------------------------------------------
# The original SEED RL agents/r2d2/learner_test.py numbers.
#
# The original's n_step_bellman_target(rewards, done, q_target, gamma, n_steps) uses the same time alignment as
# ours: rewards[t] = r_t, done[t] = "episode done just after r_t" and q_target[t] = Q_target(s_{t+1}, a*). So the
# conversion is only discounts = gamma * (1 - done) and bootstrap_values = q_target, index for index.
# ---------------------------------------------------------------------------------------------------------------


def original_inputs(rewards, done, q_target, gamma=0.9):
    return {
        "rewards": column(rewards),
        "discounts": column(gamma * (1.0 - np.array(done, np.float32))),
        "bootstrap_values": column(q_target),
    }


def test_original_one_step():
    inputs = original_inputs([1.0, 2.0, 3.0], [False] * 3, [100.0, 200.0, 300.0])
    np.testing.assert_allclose(run(inputs, 1)[:, 0], [1 + 0.9 * 100, 2 + 0.9 * 200, 3 + 0.9 * 300], rtol=1e-6)


def test_original_one_step_with_done():
    inputs = original_inputs([1.0, 2.0, 3.0], [False, True, False], [100.0, 200.0, 300.0])
    np.testing.assert_allclose(run(inputs, 1)[:, 0], [1 + 0.9 * 100, 2, 3 + 0.9 * 300], rtol=1e-6)


def test_original_two_steps():
    inputs = original_inputs([1.0, 2.0, 3.0], [False] * 3, [100.0, 200.0, 300.0])
    expected = [
        1 + 0.9 * 2 + 0.9**2 * 200,
        2 + 0.9 * 3 + 0.9**2 * 300,
        3 + 0.9 * 300,  # Last target is actually 1-step.
    ]
    np.testing.assert_allclose(run(inputs, 2)[:, 0], expected, rtol=1e-6)


def test_original_three_steps_done():
    inputs = original_inputs(
        [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
        [False, False, False, True, False, False, False],
        [100.0, 200.0, 300.0, 400.0, 500.0, 600.0, 700.0],
    )
    expected = [
        1 + 0.9 * 2 + 0.9**2 * 3 + 0.9**3 * 300,
        2 + 0.9 * 3 + 0.9**2 * 4,
        3 + 0.9 * 4,
        4,
        5 + 0.9 * 6 + 0.9**2 * 7 + 0.9**3 * 700,
        6 + 0.9 * 7 + 0.9**2 * 700,  # Actually 2-step.
        7 + 0.9 * 700,  # Actually 1-step.
    ]
    np.testing.assert_allclose(run(inputs, 3)[:, 0], expected, rtol=1e-6)


def test_truncation_matches_the_original_gamma_power_padding():
    """The original pads the values with Q'_{T-1} / gamma^k and the rewards/dones with zeros, then runs n
    one-step backups; with a constant gamma that equals our truncation at the sequence end."""
    gamma, n_steps = 0.9, 4
    inputs = random_inputs(7, 3, seed=11)
    done = inputs["discounts"] == 0
    inputs["discounts"] = (gamma * (1 - done)).astype(np.float32)

    q = inputs["bootstrap_values"].astype(np.float64)
    padded_target = np.concatenate([np.zeros_like(q[:1]), q] + [q[-1:] / gamma**k for k in range(1, n_steps)])
    padded_done = np.concatenate([done] + [np.zeros_like(done[:1])] * n_steps).astype(np.float64)
    padded_rewards = np.concatenate([inputs["rewards"]] + [np.zeros_like(inputs["rewards"][:1])] * n_steps)
    for _ in range(n_steps):
        padded_rewards, padded_done = padded_rewards[:-1], padded_done[:-1]
        padded_target = padded_rewards + gamma * (1 - padded_done) * padded_target[1:]
    np.testing.assert_allclose(run(inputs, n_steps), padded_target, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------------------------------
# double_q_bootstrap.
# ---------------------------------------------------------------------------------------------------------------


def test_double_q_picks_the_online_argmax_not_the_target_max():
    # T = 2, B = 1, A = 3.
    q_online = np.array([[[1.0, 5.0, 2.0]], [[0.0, -1.0, 3.0]]], np.float32)
    q_target = np.array([[[9.0, 4.0, 7.0]], [[8.0, 6.0, -2.0]]], np.float32)
    out = double_q_bootstrap(q_online, q_target).numpy()
    # argmax online = (1, 2) -> target values (4, -2); the target maxima would be (9, 8).
    np.testing.assert_array_equal(out, [[4.0], [-2.0]])
    assert not np.allclose(out, q_target.max(axis=-1))


def test_double_q_matches_numpy_on_random_inputs():
    rng = np.random.default_rng(13)
    q_online = rng.normal(size=(6, 5, 4)).astype(np.float32)
    q_target = rng.normal(size=(6, 5, 4)).astype(np.float32)
    best = q_online.argmax(axis=-1)
    expected = np.take_along_axis(q_target, best[..., None], axis=-1)[..., 0]
    np.testing.assert_array_equal(double_q_bootstrap(q_online, q_target).numpy(), expected)


def test_double_q_with_the_same_network_is_the_max():
    q = np.random.default_rng(14).normal(size=(3, 2, 5)).astype(np.float32)
    np.testing.assert_array_equal(double_q_bootstrap(q, q).numpy(), q.max(axis=-1))


def test_double_q_ties_go_to_the_lowest_action():
    q_online = np.array([[[2.0, 2.0, 1.0]]], np.float32)
    q_target = np.array([[[10.0, 20.0, 30.0]]], np.float32)
    np.testing.assert_array_equal(double_q_bootstrap(q_online, q_target).numpy(), [[10.0]])


def test_r2d2_target_composition():
    """h(n_step(r, d, h^-1(double_q(q_online, q_target)), n)) on a hand table, with the value-rescaling module."""
    from seed_rl.ops.value_rescaling import inverse_value_rescaling, value_rescaling

    q_online = np.array([[[0.0, 1.0]], [[1.0, 0.0]]], np.float32)
    q_target = np.array([[[5.0, 3.0]], [[2.0, 4.0]]], np.float32)  # Picked: (3, 2) in the rescaled space.
    bootstrap = inverse_value_rescaling(double_q_bootstrap(q_online, q_target))
    target = value_rescaling(n_step_bellman_target(column([1.0, 2.0]), column([0.9, 0.9]), bootstrap, 2))

    def h_inv(y):
        s = np.sqrt(1 + 4e-3 * (abs(y) + 1 + 1e-3))
        return np.sign(y) * (((s - 1) / 2e-3) ** 2 - 1)

    def h(x):
        return np.sign(x) * (np.sqrt(abs(x) + 1) - 1) + 1e-3 * x

    expected = [h(1 + 0.9 * 2 + 0.9**2 * h_inv(2.0)), h(2 + 0.9 * h_inv(2.0))]
    np.testing.assert_allclose(target.numpy()[:, 0], expected, rtol=1e-5)


# ---------------------------------------------------------------------------------------------------------------
# Gradients, graph mode, errors.
# ---------------------------------------------------------------------------------------------------------------


def test_no_gradient_flows_through_the_targets():
    inputs = {name: tf.Variable(x) for name, x in random_inputs(4, 2, seed=8).items()}
    q_online = tf.Variable(tf.random.normal([4, 2, 3]))
    q_target = tf.Variable(tf.random.normal([4, 2, 3]))
    with tf.GradientTape() as tape:
        total = tf.reduce_sum(n_step_bellman_target(**inputs, n_steps=3))
        total += tf.reduce_sum(double_q_bootstrap(q_online, q_target))
    grads = tape.gradient(total, [*inputs.values(), q_online, q_target])
    assert all(g is None for g in grads), grads


def test_works_in_tf_function_with_unknown_unroll_length():
    matrix = tf.TensorSpec([None, None], tf.float32)
    cube = tf.TensorSpec([None, None, 4], tf.float32)

    @tf.function(autograph=False, input_signature=[matrix, matrix, cube, cube])
    def targets(rewards, discounts, q_online, q_target):
        return n_step_bellman_target(rewards, discounts, double_q_bootstrap(q_online, q_target), n_steps=3)

    for num_steps in (2, 3, 9):
        inputs = random_inputs(num_steps, 2, seed=num_steps)
        rng = np.random.default_rng(num_steps)
        q_online = rng.normal(size=(num_steps, 2, 4)).astype(np.float32)
        q_target = rng.normal(size=(num_steps, 2, 4)).astype(np.float32)
        out = targets(inputs["rewards"], inputs["discounts"], q_online, q_target)
        bootstrap = np.take_along_axis(q_target, q_online.argmax(-1)[..., None], axis=-1)[..., 0]
        expected = n_step_paper(inputs["rewards"], inputs["discounts"], bootstrap, n_steps=3)
        np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-5)
    assert targets.experimental_get_tracing_count() == 1


def test_graph_size_does_not_grow_with_unroll_length():
    def num_ops(num_steps, n_steps=5):
        spec = tf.TensorSpec([num_steps, 2], tf.float32)
        fn = tf.function(lambda r, d, q: n_step_bellman_target(r, d, q, n_steps), autograph=False).get_concrete_function(
            spec, spec, spec
        )
        return len(fn.graph.get_operations())

    assert num_ops(5) == num_ops(80)


@pytest.mark.parametrize(
    "name,bad,match",
    [
        ("rewards", np.zeros(4, np.float32), "rewards.*rank"),
        ("discounts", np.zeros(4, np.float32), "discounts.*shape"),
        ("bootstrap_values", np.zeros((4, 3), np.float32), "bootstrap_values.*shape"),
        ("bootstrap_values", np.zeros((5, 2), np.float32), "bootstrap_values.*shape"),
        ("n_steps", 0, "n_steps"),
        ("n_steps", 2.0, "n_steps"),
        ("n_steps", True, "n_steps"),
    ],
)
def test_bad_arguments_raise_value_error(name, bad, match):
    kwargs = dict(random_inputs(4, 2, seed=9), n_steps=3)
    kwargs[name] = bad
    with pytest.raises(ValueError, match=match):
        n_step_bellman_target(**kwargs)


@pytest.mark.parametrize("name", ["rewards", "discounts", "bootstrap_values"])
@pytest.mark.parametrize("dtype", [tf.float64, tf.int32])
def test_non_float32_tensors_raise_type_error(name, dtype):
    inputs = random_inputs(4, 2, seed=10)
    inputs[name] = tf.cast(inputs[name], dtype)
    with pytest.raises(TypeError, match=f"{name}.*float32"):
        n_step_bellman_target(**inputs, n_steps=2)


def test_shape_errors_fire_at_trace_time():
    @tf.function(autograph=False)
    def misaligned(discounts):
        inputs = random_inputs(4, 2, seed=12)
        return n_step_bellman_target(inputs["rewards"], discounts, inputs["bootstrap_values"], 2)

    with pytest.raises(ValueError, match="discounts"):
        misaligned.get_concrete_function(tf.TensorSpec([4, 3], tf.float32))


@pytest.mark.parametrize(
    "q_online,q_target,error,match",
    [
        (np.zeros((2, 3)), np.zeros((2, 3)), ValueError, r"q_online.*\[T, B, A\]"),
        (np.zeros((2, 3, 4)), np.zeros((2, 3, 5)), ValueError, "same shape"),
        (tf.zeros((2, 3, 4), tf.int32), tf.zeros((2, 3, 4)), TypeError, "q_online.*floating"),
        (tf.zeros((2, 3, 4), tf.float64), tf.zeros((2, 3, 4)), TypeError, "same dtype"),
    ],
)
def test_double_q_bad_arguments(q_online, q_target, error, match):
    with pytest.raises(error, match=match):
        double_q_bootstrap(q_online, q_target)
