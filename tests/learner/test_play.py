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
        return types.SimpleNamespace(action=tf.TensorSpec([n], tf.int32))


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


class _ScriptedEnv(gymnasium.Env):
    """Reward 1 per step; episode ``j`` of this env lasts ``lengths[j]`` steps; counts the steps it was asked for."""

    observation_space = gymnasium.spaces.Box(0, 1, (1,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def __init__(self, lengths):
        self.lengths, self.episode, self.t, self.stepped = list(lengths), -1, 0, 0

    def reset(self, *, seed=None, options=None):
        self.episode, self.t = self.episode + 1, 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        self.stepped += 1
        return np.zeros(1, np.float32), 1.0, self.t == self.lengths[self.episode], False, {}


def test_envs_side_by_side_play_their_own_episodes_and_report_them_in_episode_order():
    """Env i of n plays episodes i, i + n, ...: the returns (and ``on_episode``) come in episode order whichever
    env finishes first, every policy step is one batch for all envs, and an env that has played its share is not
    stepped again."""
    from seed_rl.learner.play import play_episodes

    envs = [_ScriptedEnv([9, 2, 1]), _ScriptedEnv([1, 5]), _ScriptedEnv([3, 4])]
    batches, seen = [], []

    def step(prev_action, env_output, state):
        batches.append(int(env_output.observation.shape[0]))
        return tf.zeros([3], tf.int32), state

    returns = play_episodes(_ZeroActionAgent(), step, envs, num_episodes=7, on_episode=seen.append)
    assert returns == [9.0, 1.0, 3.0, 2.0, 5.0, 4.0, 1.0]  # episodes 0..6: env 0, 1, 2, 0, 1, 2, 0
    assert [e.index for e in seen] == list(range(7)) and [e.episode_return for e in seen] == returns
    assert [e.steps for e in seen] == [9, 1, 3, 2, 5, 4, 1]
    assert [env.stepped for env in envs] == [12, 6, 7]  # each its own episodes' steps, none after its share
    assert set(batches) == {3} and len(batches) == 12  # the longest env's steps, one batch of 3 each


def test_more_envs_than_episodes_play_only_the_first_ones_and_a_spent_deadline_plays_none():
    from seed_rl.learner.play import play_episodes

    envs = [_ScriptedEnv([2]), _ScriptedEnv([3]), _ScriptedEnv([4])]

    def step(prev_action, env_output, state):
        return tf.zeros([env_output.observation.shape[0]], tf.int32), state

    assert play_episodes(_ZeroActionAgent(), step, envs, num_episodes=2) == [2.0, 3.0]
    assert envs[2].stepped == 0 and envs[2].episode == -1  # never reset, never stepped
    assert play_episodes(_ZeroActionAgent(), step, [_ScriptedEnv([5])], num_episodes=1, max_seconds=0.0) == []


def test_eval_envs_is_one_per_episode_up_to_the_limit_and_one_with_videos():
    from seed_rl.learner import play

    assert play.eval_envs(3) == 3
    assert play.eval_envs(100) == play.EVAL_ENVS
    assert play.eval_envs(100, video=True) == 1


def test_make_envs_counts_ids_up_and_closes_what_it_made_when_one_fails(monkeypatch):
    import pytest

    import seed_rl.envs as envs_lib
    from seed_rl.learner import play

    made = []

    class Env:
        def __init__(self, env_id):
            self.env_id, self.closed = env_id, False

        def close(self):
            self.closed = True

    def create(config, env_id):
        if env_id == 23:
            raise RuntimeError("no such env")
        made.append(Env(env_id))
        return made[-1]

    monkeypatch.setattr(envs_lib, "create_environment", create)
    assert [e.env_id for e in play.make_envs(None, 20, 3)] == [20, 21, 22]
    made.clear()
    with pytest.raises(RuntimeError, match="no such env"):
        play.make_envs(None, 21, 3)
    assert [(e.env_id, e.closed) for e in made] == [(21, True), (22, True)]
