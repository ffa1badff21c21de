"""The actions a policy played in the learner process (greedy checks, videos, ``seed-rl eval``, ``load_policy``)
hands to a gymnasium env: what each kind of action space takes."""

from __future__ import annotations

import gymnasium
import numpy as np
import tensorflow as tf

from seed_rl.learner.play import env_action


def test_a_discrete_action_is_a_python_int_and_the_space_contains_it():
    action = env_action(tf.constant([3], tf.int32))
    assert type(action) is int and action == 3
    assert gymnasium.spaces.Discrete(4).contains(action)


def test_a_multi_discrete_action_stays_an_array_the_space_contains():
    action = env_action(tf.constant([[1, 0, 2]], tf.int32))
    assert isinstance(action, np.ndarray) and action.tolist() == [1, 0, 2]
    assert gymnasium.spaces.MultiDiscrete([2, 2, 3]).contains(action.astype(np.int64))


def test_a_continuous_action_stays_a_float_array():
    action = env_action(tf.constant([[0.5, -0.25]], tf.float32))
    assert action.dtype == np.float32 and action.tolist() == [0.5, -0.25]


def test_policy_step_is_compiled_once_per_agent_and_mode_and_does_not_keep_the_agent_alive():
    import gc
    import weakref

    from seed_rl.agents.vtrace import VTraceAgent, VTraceConfig
    from seed_rl.learner import play
    from seed_rl.ops.specs import zeros_env_output
    from seed_rl.types import ArraySpec

    obs_spec, act_spec = ArraySpec((4,), "float32"), ArraySpec((), "int32", num_values=3)
    agent = VTraceAgent(VTraceConfig(network="mlp", mlp_sizes=(8,), lstm_size=4), obs_spec, act_spec)
    greedy = play.policy_step(agent, greedy=True)
    action, _ = greedy(tf.zeros([1], tf.int32), zeros_env_output(obs_spec, 1), agent.initial_state(1))  # traced
    assert action.shape == [1]
    assert play.policy_step(agent, greedy=True) is greedy
    assert play.policy_step(agent, greedy=False) is not greedy
    ref = weakref.ref(agent)
    del agent, greedy
    gc.collect()
    assert ref() is None
