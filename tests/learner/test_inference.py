"""The inference step's bookkeeping, with a fake agent whose state counts the steps it has seen.

The fake agent's state is the number of steps since its last reset; its action is ``10 * obs + state`` so the
tests can see both the observation and the recurrent state that produced each action.
"""

from typing import NamedTuple

import numpy as np
import pytest
import tensorflow as tf

from seed_rl.learner.inference import InferenceStep
from seed_rl.types import ArraySpec, EnvOutput


class Out(NamedTuple):
    action: tf.Tensor


class CountingAgent:
    def initial_state(self, batch_size):
        return tf.zeros([batch_size], tf.int32)

    def act(self, prev_actions, env_outputs, state, env_ids=None):
        obs = tf.cast(env_outputs.observation[:, 0], tf.int32)
        new_state = tf.where(env_outputs.done, 1, state + 1)
        return Out(action=10 * obs + new_state), new_state

    def agent_output_spec(self):
        return Out(action=tf.TensorSpec([None], tf.int32))


def make(num_envs=2, unroll_length=2, repeats=1, overlap=0, num_eval_envs=0):
    return InferenceStep(CountingAgent(), ArraySpec((1,), "int32"), num_envs, unroll_length, repeats,
                         tf.Variable(7, dtype=tf.int64), num_overlapping_steps=overlap, num_eval_envs=num_eval_envs)


def step(inf, env_ids, run_ids, obs, reward=None, done=None, abandoned=None):
    n = len(env_ids)
    eo = EnvOutput(
        reward=np.asarray(reward if reward is not None else [0.0] * n, np.float32),
        done=np.asarray(done if done is not None else [False] * n, bool),
        observation=np.asarray(obs, np.int32).reshape(n, 1),
        abandoned=np.asarray(abandoned if abandoned is not None else [False] * n, bool),
        episode_step=np.zeros(n, np.int32))
    return inf(np.asarray(env_ids, np.int32), np.asarray(run_ids, np.int64), eo, eo.reward)


def test_state_and_prev_action_round_trip_and_unroll_layout():
    inf = make(num_envs=1, unroll_length=2)
    outs = [step(inf, [0], [1], [o]) for o in (1, 2, 3, 4, 5)]
    assert [int(o.actions[0]) for o in outs] == [11, 22, 33, 44, 55]
    first, second = outs[2], outs[4]
    assert first.completed_env_ids.numpy().tolist() == [0]
    u = first.unrolls
    assert u.env_outputs.observation.numpy()[0, :, 0].tolist() == [1, 2, 3]
    assert u.prev_actions.numpy()[0].tolist() == [0, 11, 22]
    assert u.agent_outputs.action.numpy()[0].tolist() == [11, 22, 33]
    assert u.agent_state.numpy().tolist() == [0]  # state before step 0
    assert u.policy_version.numpy()[0].tolist() == [7, 7, 7]
    u = second.unrolls
    assert u.env_outputs.observation.numpy()[0, :, 0].tolist() == [3, 4, 5]
    assert u.prev_actions.numpy()[0].tolist() == [22, 33, 44]
    assert u.agent_state.numpy().tolist() == [2]  # the state the agent had before seeing obs 3


def test_new_run_id_resets_state_prev_action_and_partial_unroll_of_that_env_only():
    inf = make(num_envs=2, unroll_length=2)
    step(inf, [0, 1], [1, 9], [1, 1])
    step(inf, [0, 1], [1, 9], [2, 2])
    out = step(inf, [0, 1], [5, 9], [3, 3])  # env 0 reconnects with a new run id
    assert out.reset_env_ids.numpy().tolist() == [0]
    assert out.actions.numpy().tolist() == [31, 33]
    assert out.completed_env_ids.numpy().tolist() == [1]
    step(inf, [0], [5], [4])
    out = step(inf, [0], [5], [5])
    assert out.completed_env_ids.numpy().tolist() == [0]
    assert out.unrolls.env_outputs.observation.numpy()[0, :, 0].tolist() == [3, 4, 5]
    assert out.unrolls.prev_actions.numpy()[0].tolist() == [0, 31, 42]
    assert out.unrolls.agent_state.numpy().tolist() == [0]


def test_episode_statistics_and_frames():
    inf = make(num_envs=1, unroll_length=10, repeats=4)
    step(inf, [0], [1], [0])
    step(inf, [0], [1], [0], reward=[1.0])
    out = step(inf, [0], [1], [0], reward=[2.0], done=[True])
    assert out.finished_env_ids.numpy().tolist() == [0]
    assert out.finished.episode_return.numpy().tolist() == [3.0]
    assert out.finished.steps.numpy().tolist() == [2]
    assert out.finished.frames.numpy().tolist() == [8]
    assert int(out.frames) == 4


def test_truncated_episode_does_not_count_the_extra_terminal_step():
    inf = make(num_envs=1, unroll_length=10, repeats=1)
    step(inf, [0], [1], [0])
    step(inf, [0], [1], [0], reward=[1.0])
    step(inf, [0], [1], [0], reward=[1.0])  # terminal observation of a truncated episode (extra message)
    out = step(inf, [0], [1], [0], reward=[0.0], done=[True], abandoned=[True])
    assert out.finished.episode_return.numpy().tolist() == [2.0]
    assert out.finished.steps.numpy().tolist() == [2]
    assert int(out.frames) == 0


def test_first_message_of_a_new_run_never_finishes_an_episode():
    inf = make(num_envs=1)
    step(inf, [0], [1], [0])
    out = step(inf, [0], [2], [0], done=[True])
    assert out.finished_env_ids.numpy().tolist() == []


def test_burn_in_overlap_stores_the_state_at_the_first_step_of_each_sequence():
    """R2D2-style overlap (burn_in = 2, unroll_length = 2): sequences of 5 steps sharing 3 steps. The stored state
    must be the one the agent had before the sequence's first step (the original stored the state of position
    burn_in instead). The fake agent's state counts steps, so the state before obs k (k = 1, 2, ...) is k - 1."""
    inf = make(num_envs=1, unroll_length=2, overlap=2)
    got = []
    for o in range(1, 12):
        out = step(inf, [0], [1], [o])
        if out.completed_env_ids.shape[0]:
            got.append((out.unrolls.env_outputs.observation.numpy()[0, :, 0].tolist(),
                        int(out.unrolls.agent_state.numpy()[0])))
    assert got == [
        ([1, 2, 3, 4, 5], 0),
        ([3, 4, 5, 6, 7], 2),
        ([5, 6, 7, 8, 9], 4),
        ([7, 8, 9, 10, 11], 6),
    ]


def test_eval_envs_act_and_finish_episodes_but_never_enter_unrolls():
    inf = make(num_envs=3, unroll_length=1, num_eval_envs=1)
    for o in range(4):
        out = step(inf, [0, 1, 2], [1, 1, 1], [o, o, o], done=[o == 3] * 3)
        assert 2 not in out.completed_env_ids.numpy().tolist()
        assert len(out.actions.numpy()) == 3
    assert out.finished_env_ids.numpy().tolist() == [0, 1, 2]


class _Pair(NamedTuple):
    a: object
    b: object


def test_packer_is_the_inverse_of_tf_nest_flatten():
    from seed_rl.learner.inference import _packer

    structure = _Pair(a={"z": 1, "b": (2, [3, 4])}, b=_Pair(a=(), b=5))
    flat = tf.nest.flatten(structure)
    assert flat == [2, 3, 4, 1, 5]  # dicts flatten in sorted key order
    packed = _packer(structure)([10 * x for x in flat])
    assert packed == tf.nest.map_structure(lambda x: 10 * x, structure)
    assert type(packed.b) is _Pair and type(packed.a["b"][1]) is list


def test_the_direct_call_gives_what_the_public_call_gives():
    """InferenceStep calls its graph through TensorFlow's internal flat entry point; two identical steps, one
    through it and one through the concrete function's public call, return the same structure and values."""
    fast, slow = make(num_envs=2, unroll_length=1), make(num_envs=2, unroll_length=1)
    concrete = slow._compiled.get_concrete_function(*slow.input_signature)
    slow._call = lambda flat: concrete(*flat[:2], flat[2])
    for k, obs in enumerate(([1, 2], [3, 4], [5, 6])):
        a = step(fast, [0, 1], [1, 1], obs, done=[k == 2, False])
        b = step(slow, [0, 1], [1, 1], obs, done=[k == 2, False])
        tf.nest.assert_same_structure(a, b)
        for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
            np.testing.assert_array_equal(x.numpy(), y.numpy())
    assert fast._call.__qualname__.startswith("_flat_caller.<locals>.call")  # the direct path was taken


@pytest.mark.parametrize("preset", ["classic_vtrace", "classic_r2d2"])
def test_real_agents_give_the_same_steps_through_the_direct_call(preset):
    """The real agents' inference steps (V-trace's MLP; R2D2's LSTM, whose scan the single-threaded executor
    refuses, and whose state Keras returns in tracking wrappers) give what the public call gives: the same
    structure, dtypes and shapes, and the same values wherever the sampled actions play no part."""
    from seed_rl import agents as agents_lib
    from seed_rl.configs import get_preset
    from seed_rl.envs import env_specs

    config = get_preset(preset)
    obs_spec, act_spec = env_specs(config.env)
    steps = []
    for direct in (True, False):
        tf.random.set_seed(3)
        agent = agents_lib.make_agent(config.agent_name, config.agent, obs_spec, act_spec, num_envs=2)
        inf = InferenceStep(agent, obs_spec, 2, 3, 1, tf.Variable(0, dtype=tf.int64),
                            num_overlapping_steps=agent.num_overlapping_steps)
        if not direct:
            concrete = inf._compiled.get_concrete_function(*inf.input_signature)
            inf._call = lambda flat, concrete=concrete: concrete(*flat[:2], flat[2])
            inf._executor = None
        rng = np.random.default_rng(0)
        outs = []
        for k in range(3 + inf.store.full_length):
            eo = EnvOutput(reward=np.ones(2, np.float32), done=np.array([k == 3, False]),
                           observation=rng.normal(size=(2, 4)).astype(np.float32),
                           abandoned=np.zeros(2, bool), episode_step=np.full(2, k, np.int32))
            outs.append(inf(np.arange(2, dtype=np.int32), np.ones(2, np.int64), eo, eo.reward))
        steps.append(outs)
    for a, b in zip(*steps):
        tf.nest.assert_same_structure(a, b)
        for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
            assert (x.dtype, x.shape) == (y.dtype, y.shape)
        # Actions are sampled, so only what does not depend on the draws is compared by value.
        deterministic = (a.frames, a.completed_env_ids, a.finished_env_ids, a.finished, a.reset_env_ids,
                         a.unrolls.env_outputs), (b.frames, b.completed_env_ids, b.finished_env_ids, b.finished,
                                                  b.reset_env_ids, b.unrolls.env_outputs)
        for x, y in zip(*map(tf.nest.flatten, deterministic)):
            np.testing.assert_array_equal(x.numpy(), y.numpy())
    assert any(int(o.completed_env_ids.shape[0]) for o in steps[0])  # unrolls did complete
