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
