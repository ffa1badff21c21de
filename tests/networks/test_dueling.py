"""DuelingLSTMDQNNet: frame stacking on the learner (order, zeroing across done), shapes, unroll vs step, dueling.

Frame-stacking timeline used below (S = 4, stack newest first, "." = zeroed slot):

    step      1     2(done)   3        4        5        6        7(done)  8
    frame     1     2         3        4        5        6        7        8
    stack   1...   2...      32..     432.     5432     6543     7...     87..
"""

import numpy as np
import pytest
import tensorflow as tf

from seed_rl.networks import MLPTorso, NatureTorso
from seed_rl.networks.dueling import AgentState, DQNOutput, DuelingLSTMDQNNet, stack_frames
from seed_rl.types import EnvOutput

OBS = (84, 84, 1)
A = 5


def _env(T, B, obs_shape=OBS, done=None, seed=0, dtype=np.uint8):
    rng = np.random.default_rng(seed)
    done = np.zeros([T, B], bool) if done is None else np.asarray(done, bool)
    if dtype == np.uint8:
        obs = rng.integers(0, 256, size=[T, B, *obs_shape]).astype(np.uint8)
    else:
        obs = rng.normal(size=[T, B, *obs_shape]).astype(dtype)
    return EnvOutput(reward=tf.constant(rng.normal(size=[T, B]) * 3, tf.float32), done=tf.constant(done),
                     observation=tf.constant(obs), abandoned=tf.zeros([T, B], tf.bool),
                     episode_step=tf.zeros([T, B], tf.int32))


def _step(env, t):
    return tf.nest.map_structure(lambda x: x[t], env)


# --- stack_frames on 1-pixel frames: the original's test_stack_frames / test_stack_frames_done ------------------


def _stack(frames, done, state, S=4):
    # frames [T, B=1] of 1-pixel frames -> [T, 1, 1] (obs shape [1]); state [1, S - 1].
    out, state = stack_frames(tf.constant(frames, tf.uint8)[..., None], state, tf.constant(done), S)
    return out.numpy(), state


def test_stack_frames_order_newest_first():
    state = tf.zeros([1, 3], tf.uint8)
    out, state = _stack([[1]], [[False]], state)
    np.testing.assert_array_equal(out, [[[1, 0, 0, 0]]])
    out, state = _stack([[2]], [[False]], state)
    np.testing.assert_array_equal(out, [[[2, 1, 0, 0]]])
    out, state = _stack([[3], [4], [5], [6], [7], [8]], [[False]] * 6, state)
    assert out.shape == (6, 1, 4)
    np.testing.assert_array_equal(out[0], [[3, 2, 1, 0]])
    np.testing.assert_array_equal(out[5], [[8, 7, 6, 5]])
    np.testing.assert_array_equal(state, [[8, 7, 6]])


def test_stack_frames_zeroed_across_done():
    state = tf.zeros([1, 3], tf.uint8)
    out, state = _stack([[1]], [[False]], state)
    np.testing.assert_array_equal(out, [[[1, 0, 0, 0]]])
    out, state = _stack([[2]], [[True]], state)
    np.testing.assert_array_equal(out, [[[2, 0, 0, 0]]])
    out, state = _stack([[3], [4], [5], [6], [7], [8]], [[False]] * 4 + [[True], [False]], state)
    np.testing.assert_array_equal(out[:, 0], [[3, 2, 0, 0], [4, 3, 2, 0], [5, 4, 3, 2], [6, 5, 4, 3],
                                              [7, 0, 0, 0], [8, 7, 0, 0]])
    np.testing.assert_array_equal(state, [[8, 7, 0]])


def test_stack_frames_done_at_first_step_of_unroll_ignores_state():
    state = tf.constant([[9, 8, 7]], tf.uint8)
    out, state = _stack([[1], [2]], [[True], [False]], state)
    np.testing.assert_array_equal(out[:, 0], [[1, 0, 0, 0], [2, 1, 0, 0]])
    np.testing.assert_array_equal(state, [[2, 1, 0]])


def test_stack_frames_stack_size_one_is_identity():
    frames = tf.constant(np.arange(6, dtype=np.uint8).reshape([3, 2, 1]))
    state = tf.zeros([2, 0], tf.uint8)
    out, new_state = stack_frames(frames, state, tf.constant([[False, True]] * 3), 1)
    np.testing.assert_array_equal(out, frames)
    assert new_state.shape == [2, 0]


# --- the network on tiny 2x2 frames: what the torso sees ------------------------------------------------------------

SEEN = []  # observations passed to the recording torsos (a module global, so Keras does not track it)


class RecordingMLP(MLPTorso):
    def call(self, observation):
        SEEN.append(observation)
        return super().call(observation)


class RecordingNature(NatureTorso):
    def call(self, observation):
        SEEN.append(observation)
        return super().call(observation)


def _frame(k):
    # 2x2 frame k with distinct pixels: 10k, 10k + 1, 10k + 2, 10k + 3.
    return (10 * k + np.arange(4)).reshape(2, 2, 1).astype(np.uint8)


def _stacked(*ks):
    return np.concatenate([_frame(k) if k else np.zeros([2, 2, 1], np.uint8) for k in ks], axis=-1)


def test_network_stacks_2x2_frames_newest_first_and_zeroes_across_done():
    net = DuelingLSTMDQNNet(A, (2, 2, 1), stack_size=4, torso=RecordingMLP((8,)), lstm_size=8, hidden_size=8)
    T, B = 8, 1
    done = np.zeros([T, B], bool)
    done[1] = done[6] = True
    env = _env(T, B, (2, 2, 1), done)._replace(
        observation=tf.constant(np.stack([_frame(k) for k in range(1, 9)])[:, None]))
    SEEN.clear()
    _, state = net(tf.zeros([T, B], tf.int32), env, net.initial_state(B), unroll=True)
    seen = SEEN[-1].numpy().reshape([T, 2, 2, 4])
    expected = [_stacked(1, 0, 0, 0), _stacked(2, 0, 0, 0), _stacked(3, 2, 0, 0), _stacked(4, 3, 2, 0),
                _stacked(5, 4, 3, 2), _stacked(6, 5, 4, 3), _stacked(7, 0, 0, 0), _stacked(8, 7, 0, 0)]
    np.testing.assert_array_equal(seen, np.stack(expected))
    assert state.frame_stacking_state.dtype == tf.uint8
    np.testing.assert_array_equal(state.frame_stacking_state[0], _stacked(8, 7, 0))


# --- shapes, dtypes, channels ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("S", [1, 4])
def test_shapes_and_torso_channels(S):
    net = DuelingLSTMDQNNet(A, OBS, stack_size=S, torso=RecordingNature(512))
    T, B = 3, 2
    state = net.initial_state(B)
    assert isinstance(state, AgentState)
    assert [s.shape for s in state.core_state] == [[B, 512], [B, 512]]
    assert state.frame_stacking_state.shape == [B, 84, 84, S - 1]
    assert state.frame_stacking_state.dtype == tf.uint8
    SEEN.clear()
    out, new_state = net(tf.zeros([T, B], tf.int32), _env(T, B), state, unroll=True)
    assert isinstance(out, DQNOutput) and out.q_values.shape == [T, B, A] and out.q_values.dtype == tf.float32
    assert SEEN[-1].shape == [T * B, 84, 84, S] and SEEN[-1].dtype == tf.uint8
    assert tf.nest.map_structure(lambda x: (x.shape, x.dtype), new_state) == \
        tf.nest.map_structure(lambda x: (x.shape, x.dtype), state)
    out, new_state = net(tf.zeros([B], tf.int32), _step(_env(1, B), 0), state)
    assert out.q_values.shape == [B, A]
    assert new_state.frame_stacking_state.shape == [B, 84, 84, S - 1]
    assert len(net.trainable_variables) == 8 + 3 + 2 + 2 + 2 + 1  # convs + fc, LSTM, V hidden, V, A hidden, A (no bias)


def test_constructor_rejects_stacking_vector_observations():
    with pytest.raises(ValueError, match="stack_size"):
        DuelingLSTMDQNNet(2, (4,), stack_size=4, torso=MLPTorso((8,)))
    with pytest.raises(ValueError, match="torso"):
        DuelingLSTMDQNNet(2, (4,), stack_size=1)


# --- unroll == step by step ------------------------------------------------------------------------------------------


def _random_state(net, B, seed):
    rng = np.random.default_rng(seed)
    h, c = (tf.constant(rng.normal(size=[B, net.core.units]), tf.float32) for _ in range(2))
    frames = rng.integers(0, 256, size=[B, *net.observation_shape[:-1], net.stack_size - 1]).astype(np.uint8)
    return AgentState((h, c), tf.constant(frames))


def _assert_unroll_equals_steps(net, env, prev, state):
    T = env.done.shape[0]
    unrolled, final = net(prev, env, state, unroll=True)
    s = state
    for t in range(T):
        step, s = net(prev[t], _step(env, t), s)
        np.testing.assert_allclose(step.q_values, unrolled.q_values[t], atol=1e-4)
    for a, b in zip(tf.nest.flatten(final), tf.nest.flatten(s)):
        np.testing.assert_allclose(a, b, atol=1e-4)


def test_unroll_equals_step_by_step_with_episode_boundary():
    net = DuelingLSTMDQNNet(A, OBS, stack_size=4)
    T, B = 6, 2
    done = np.zeros([T, B], bool)
    done[2, 0] = True
    done[0, 1] = True
    prev = tf.constant(np.random.default_rng(3).integers(0, A, size=[T, B]), tf.int32)
    _assert_unroll_equals_steps(net, _env(T, B, done=done, seed=1), prev, _random_state(net, B, 2))


def test_cartpole_mlp_variant():
    net = DuelingLSTMDQNNet(2, (4,), stack_size=1, torso=MLPTorso((64,)), lstm_size=32, hidden_size=32)
    T, B = 5, 3
    state = net.initial_state(B)
    assert state.frame_stacking_state.shape == [B, 0]
    done = np.zeros([T, B], bool)
    done[2, 1] = True
    env = _env(T, B, (4,), done, dtype=np.float32)
    prev = tf.constant(np.random.default_rng(4).integers(0, 2, size=[T, B]), tf.int32)
    out, new_state = net(prev, env, state, unroll=True)
    assert out.q_values.shape == [T, B, 2] and new_state.frame_stacking_state.shape == [B, 0]
    _assert_unroll_equals_steps(net, env, prev, _random_state(net, B, 5))


def test_inference_step_with_state_in_variables():
    """The state (including the zero-size stacking state of S = 1) round-trips through tf.Variable tables."""
    for S, obs_shape, torso in [(1, (4,), MLPTorso((8,))), (4, (2, 2, 1), MLPTorso((8,)))]:
        net = DuelingLSTMDQNNet(2, obs_shape, stack_size=S, torso=torso, lstm_size=8, hidden_size=8)
        table = tf.nest.map_structure(tf.Variable, net.initial_state(3))
        dtype = tf.uint8 if S > 1 else tf.float32
        env = _env(1, 3, obs_shape, dtype=np.uint8 if S > 1 else np.float32)

        @tf.function(autograph=False)
        def step(prev, env_output):
            out, new = net(prev, env_output, tf.nest.map_structure(lambda v: v.read_value(), table))
            tf.nest.map_structure(lambda v, x: v.assign(x), table, new)
            return out.q_values

        q = step(tf.zeros([3], tf.int32), _step(env, 0))
        assert q.shape == [3, 2] and env.observation.dtype == dtype
        q = step(tf.ones([3], tf.int32), _step(env, 0))
        assert q.shape == [3, 2]
        if S > 1:
            np.testing.assert_array_equal(table.frame_stacking_state[..., 0], env.observation[0, ..., 0])


# --- dueling heads and gradients -------------------------------------------------------------------------------------


def test_dueling_advantage_has_zero_mean():
    net = DuelingLSTMDQNNet(A, (4,), stack_size=1, torso=MLPTorso((8,)), lstm_size=16, hidden_size=16)
    core_output = tf.random.stateless_normal([7, 16], seed=[1, 2])
    q, v = net.dueling_heads(core_output)
    assert q.shape == [7, A] and v.shape == [7]
    np.testing.assert_allclose(tf.reduce_mean(q - v[:, None], -1), np.zeros(7), atol=1e-5)
    assert float(tf.math.reduce_std(q - v[:, None])) > 1e-3  # the advantages are not all zero


def test_gradients_reach_every_trainable_variable():
    net = DuelingLSTMDQNNet(A, OBS, stack_size=4, lstm_size=32, hidden_size=32)
    T, B = 3, 2
    done = np.zeros([T, B], bool)
    done[1, 0] = True
    env = _env(T, B, done=done)
    prev = tf.zeros([T, B], tf.int32)
    state = net.initial_state(B)
    net(prev, env, state, unroll=True)
    # A random weighting: sum(Q) alone would give the advantage head zero gradient (its mean is removed).
    w = tf.random.stateless_normal([T, B, A], seed=[3, 4])
    with tf.GradientTape() as tape:
        out, _ = net(prev, env, state, unroll=True)
        loss = tf.reduce_sum(out.q_values * w)
    grads = tape.gradient(loss, net.trainable_variables)
    assert len(grads) == 18
    for v, g in zip(net.trainable_variables, grads):
        assert g is not None, v.path
        assert float(tf.norm(tf.convert_to_tensor(g))) > 0, v.path


def test_unroll_traces_with_unknown_time_and_batch():
    net = DuelingLSTMDQNNet(2, (2, 2, 1), stack_size=3, torso=MLPTorso((8,)), lstm_size=8, hidden_size=8)
    T, B = 4, 3
    done = np.zeros([T, B], bool)
    done[1, 2] = True
    env, prev, state = _env(T, B, (2, 2, 1), done), tf.ones([T, B], tf.int32), _random_state(net, B, 6)
    eager, _ = net(prev, env, state, unroll=True)
    spec = lambda x: tf.TensorSpec([None, *x.shape[1:]], x.dtype)  # noqa: E731
    signature = tf.nest.map_structure(lambda x: tf.TensorSpec([None, None, *x.shape[2:]], x.dtype), (prev, env))
    traced = tf.function(lambda p, e, s: net(p, e, s, unroll=True)[0].q_values, autograph=False,
                         input_signature=(*signature, tf.nest.map_structure(spec, state)))
    np.testing.assert_allclose(traced(prev, env, state), eager.q_values, atol=1e-5)
