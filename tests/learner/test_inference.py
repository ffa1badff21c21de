"""The inference step's bookkeeping, with a fake agent whose state counts the steps it has seen.

The fake agent's state is the number of steps since its last reset; its action is ``10 * obs + state`` so the
tests can see both the observation and the recurrent state that produced each action. How the step is called (the
fast path against the public call, and the real agents through both) is tested in test_fast_call.py.
"""

from typing import NamedTuple

import numpy as np
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


def step(inf, env_ids, run_ids, obs, reward=None, done=None, abandoned=None, life_lost=None):
    n = len(env_ids)
    eo = EnvOutput(
        reward=np.asarray(reward if reward is not None else [0.0] * n, np.float32),
        done=np.asarray(done if done is not None else [False] * n, bool),
        observation=np.asarray(obs, np.int32).reshape(n, 1),
        abandoned=np.asarray(abandoned if abandoned is not None else [False] * n, bool),
        episode_step=np.zeros(n, np.int32))
    return inf(np.asarray(env_ids, np.int32), np.asarray(run_ids, np.int64), eo, eo.reward,
               None if life_lost is None else np.asarray(life_lost, bool))


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


def test_a_lost_life_is_done_for_the_unrolls_but_the_episode_statistics_go_on():
    """A done row with life_lost (Atari's terminal_on_life_loss) finishes no episode: the game's return, steps and
    frames add up over its lives until a done row without it; the unroll stores the done row as done."""
    inf = make(num_envs=2, unroll_length=3, repeats=4)
    step(inf, [0, 1], [1, 1], [0, 0])
    out = step(inf, [0, 1], [1, 1], [0, 0], reward=[1.0, 1.0], done=[True, True], life_lost=[True, False])
    assert out.finished_env_ids.numpy().tolist() == [1]  # env 1's game ended; env 0 lost a life only
    step(inf, [0, 1], [1, 1], [0, 0], reward=[2.0, 0.0])
    out = step(inf, [0, 1], [1, 1], [0, 0], reward=[3.0, 0.0], done=[True, False])
    assert out.finished_env_ids.numpy().tolist() == [0]
    assert out.finished.episode_return.numpy().tolist() == [6.0]
    assert out.finished.steps.numpy().tolist() == [3] and out.finished.frames.numpy().tolist() == [12]
    assert out.completed_env_ids.numpy().tolist() == [0, 1]
    assert out.unrolls.env_outputs.done.numpy()[0].tolist() == [False, True, False, True]  # env 0's unroll
    # life_lost on a row without done, or with abandoned, changes nothing: that episode ends or goes on as usual
    out = step(inf, [0, 1], [1, 1], [0, 0], reward=[1.0, 1.0], done=[False, True], abandoned=[False, True],
               life_lost=[True, True])
    assert out.finished_env_ids.numpy().tolist() == [1]


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


def test_staggered_unrolls_spread_the_training_envs_and_keep_each_unrolls_first_state():
    """``stagger_unrolls``: 2 training envs (unrolls of 2) end their unrolls on alternate steps; the evaluation env
    (id 2) never enters an unroll; a kept unroll carries the state before its first step, as without staggering."""
    inf = InferenceStep(CountingAgent(), ArraySpec((1,), "int32"), 3, 2, 1, tf.Variable(7, dtype=tf.int64),
                        num_eval_envs=1, stagger_unrolls=True)
    completed = []
    for t in range(1, 8):
        out = step(inf, [0, 1, 2], [1, 1, 1], [t] * 3)
        completed.append(out.completed_env_ids.numpy().tolist())
        if out.completed_env_ids.numpy().tolist() == [1]:
            last_of_env_1 = out.unrolls
    # env 0 (offset 0): steps 1-3, 3-5, 5-7; env 1 (offset 1): its first unroll (steps 1-2) is dropped, then 2-4, 4-6
    assert completed == [[], [], [0], [1], [0], [1], [0]]
    assert last_of_env_1.env_outputs.observation.numpy()[0, :, 0].tolist() == [4, 5, 6]
    assert last_of_env_1.agent_state.numpy().tolist() == [3]  # the state after steps 1-3
