"""The actions a policy played in the learner process (greedy checks, videos, ``seed-rl eval``, ``load_policy``)
hands to a gymnasium env: what each kind of action space takes."""

from __future__ import annotations

import types

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


class _LifeEnv(gymnasium.Env):
    """Reward 1 per step; steps 2 and 4 of each game lose a life (info), step 6 ends the game."""

    observation_space = gymnasium.spaces.Box(0, 1, (1,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.zeros(1, np.float32), 1.0, self.t == 6, False, {"life_lost": self.t in (2, 4)}


class _ZeroActionAgent:
    def initial_state(self, n):
        return ()

    def agent_output_spec(self, n=1):
        return types.SimpleNamespace(action=tf.TensorSpec([1], tf.int32))


def test_play_feeds_a_lost_life_as_done_but_counts_whole_games():
    """As in training with --terminal_on_life_loss: the agent's input after a lost life is done, while the
    returns (and resets) are the games'."""
    from seed_rl.learner.play import play_episodes

    dones = []

    def step(prev_action, env_output, state):
        dones.append(bool(env_output.done.numpy()[0]))
        return tf.zeros([1], tf.int32), state

    returns = play_episodes(_ZeroActionAgent(), step, _LifeEnv(), num_episodes=2)
    assert returns == [6.0, 6.0]
    assert dones[:7] == [False, False, True, False, True, False, True]  # the game over is done too
