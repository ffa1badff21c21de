"""The inference step never sends or stores an action it cannot stand behind (issues 10 and 31).

A policy whose network went to NaN makes ``tf.random.categorical`` draw index ``num_actions``; the learner used to
send it to the actor and store it in the unroll store, where it failed the training step a few steps later
("indices[1,0] = 4 is not in [0, 4)") and took the learner down. Then the step refused the whole call, which let
one actor's extreme observation deny service to every actor of its batch. Now each row is checked (finite outputs
and state, an action inside the spec): a bad row is refused on its own and writes nothing, the other rows are
acted on. The fake agent here is a categorical policy whose logits are ``scale * 50 * observation``: a one-hot
observation picks its action (the other actions have probability ~e^-50), and ``scale = NaN`` (a poisoned weight)
or a NaN observation gives NaN logits. Both call paths (``fast_call`` on and off) are checked.
"""

from typing import NamedTuple

import numpy as np
import pytest
import tensorflow as tf

from seed_rl.learner import fast_call as fast_call_lib
from seed_rl.learner import inference as inference_lib
from seed_rl.learner.inference import InferenceStep
from seed_rl.types import ArraySpec, EnvOutput

NUM_ACTIONS = 4
DISCRETE = ArraySpec((), "int32", num_values=NUM_ACTIONS)
OBSERVATION = ArraySpec((NUM_ACTIONS,), "float32")
PATHS = pytest.mark.parametrize("fast", [True, False], ids=["fast_call", "public_call"])


class Out(NamedTuple):
    action: tf.Tensor
    logits: tf.Tensor


class PoisonableAgent:
    """A categorical policy; its recurrent state counts steps since the reset."""

    def __init__(self):
        self.scale = tf.Variable(1.0)

    def initial_state(self, batch_size):
        return tf.zeros([batch_size], tf.int32)

    def act(self, prev_actions, env_outputs, state, env_ids=None):
        logits = self.scale * 50.0 * env_outputs.observation
        action = tf.random.categorical(logits, 1, dtype=tf.int32)[:, 0]
        return Out(action, logits), state + 1

    def agent_output_spec(self):
        return Out(tf.TensorSpec([None], tf.int32), tf.TensorSpec([None, NUM_ACTIONS], tf.float32))


def make(agent, fast, action_spec=DISCRETE, observation_spec=OBSERVATION):
    return InferenceStep(agent, observation_spec, 3, 2, 1, tf.Variable(5, dtype=tf.int64), fast_call=fast,
                         action_spec=action_spec)


def one_hot(actions):
    return np.eye(NUM_ACTIONS, dtype=np.float32)[actions]


def step(inf, env_ids, run_ids, obs, reward=None, done=None):
    n = len(env_ids)
    eo = EnvOutput(reward=np.asarray(reward if reward is not None else [1.0] * n, np.float32),
                   done=np.asarray(done if done is not None else [False] * n, bool),
                   observation=np.asarray(obs, np.float32), abandoned=np.zeros(n, bool),
                   episode_step=np.zeros(n, np.int32))
    return inf(np.asarray(env_ids, np.int32), np.asarray(run_ids, np.int64), eo, eo.reward)


def tables(inf):
    return {v.name + f"#{i}": v.numpy() for i, v in enumerate(inf.variables)}


def assert_tables_equal(a, b):
    assert sorted(a) == sorted(b)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


# Two steps for envs 0 and 1 (the next one completes their unrolls of 3 steps), one for env 2; then the step that
# is refused once: env 1 finishes its episode, env 2 comes back with a new run id.
WARM_UP = [([0, 1, 2], [1, 1, 1], [0, 1, 2], None), ([0, 1], [1, 1], [1, 2], None)]
LAST = ([0, 1, 2], [1, 1, 9], [2, 3, 0], [False, True, False])


def run_warm_up(inf):
    for env_ids, run_ids, actions, done in WARM_UP:
        out = step(inf, env_ids, run_ids, one_hot(actions), done=done)
        assert out.actions.numpy().tolist() == actions


def test_premise_without_a_spec_nan_logits_give_action_num_actions():
    """What the guard is for: with nothing checked, NaN logits come out as the out-of-range index 4."""
    agent = PoisonableAgent()
    inf = make(agent, fast=True, action_spec=None)
    agent.scale.assign(float("nan"))
    out = step(inf, [0, 1], [1, 1], one_hot([0, 1]))
    assert out.actions.numpy().tolist() == [NUM_ACTIONS, NUM_ACTIONS]


@PATHS
def test_nan_logits_refuse_every_row_leave_every_table_unchanged_and_change_nothing_after(fast):
    agent = PoisonableAgent()
    inf = make(agent, fast)
    run_warm_up(inf)
    before = tables(inf)
    assert sum(1 for name in before if "unroll_store" in name) >= 5 and len(before) >= 10

    agent.scale.assign(float("nan"))
    env_ids, run_ids, actions, done = LAST
    out = step(inf, env_ids, run_ids, one_hot(actions), done=done)
    assert out.refused.numpy().tolist() == [inference_lib.NON_FINITE_OUTPUT] * 3
    assert out.completed_env_ids.numpy().tolist() == [] and out.finished_env_ids.numpy().tolist() == []
    assert out.reset_env_ids.numpy().tolist() == [] and int(out.frames.numpy()) == 0
    assert "not finite" in inf.cause(inference_lib.NON_FINITE_OUTPUT)
    assert_tables_equal(tables(inf), before)

    # A healthy agent state works again, and the step is exactly what it is for a step that never saw the refusal.
    agent.scale.assign(1.0)
    out = step(inf, env_ids, run_ids, one_hot(actions), done=done)
    reference = make(PoisonableAgent(), fast)
    run_warm_up(reference)
    expected = step(reference, env_ids, run_ids, one_hot(actions), done=done)
    assert out.actions.numpy().tolist() == actions
    assert out.refused.numpy().tolist() == [0, 0, 0]
    assert out.reset_env_ids.numpy().tolist() == [2]  # the refused call did not write env 2's new run id
    assert out.completed_env_ids.numpy().tolist() == [0, 1]  # ... nor append a step to the unrolls
    assert out.unrolls.prev_actions.numpy().tolist() == [[0, 0, 1], [0, 1, 2]]
    assert out.finished.episode_return.numpy().tolist() == [3.0]  # ... nor add env 1's reward once more
    for got, want in zip(tf.nest.flatten(out), tf.nest.flatten(expected)):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert_tables_equal(tables(inf), tables(reference))


@PATHS
def test_one_bad_row_is_refused_alone_and_the_others_are_acted_on(fast):
    """A NaN observation (a non-finite input; through a real network an extreme input does the same) in one row:
    that row is refused and writes nothing; the other rows get their actions and their writes, exactly as a call
    without the bad row would."""
    inf = make(PoisonableAgent(), fast)
    run_warm_up(inf)
    reference = make(PoisonableAgent(), fast)
    run_warm_up(reference)
    obs = one_hot([2, 3, 0])
    obs[1] = np.nan
    out = step(inf, [0, 1, 2], [1, 1, 9], obs, done=[False, True, False])
    assert out.refused.numpy().tolist() == [0, inference_lib.NON_FINITE_OUTPUT, 0]
    assert out.actions.numpy()[[0, 2]].tolist() == [2, 0]
    expected = step(reference, [0, 2], [1, 9], one_hot([2, 0]))
    assert out.completed_env_ids.numpy().tolist() == [0] == expected.completed_env_ids.numpy().tolist()
    assert out.reset_env_ids.numpy().tolist() == [2]
    assert out.finished_env_ids.numpy().tolist() == []  # env 1's episode end was refused with its row
    assert int(out.frames.numpy()) == 2
    assert_tables_equal(tables(inf), tables(reference))


class Box(NamedTuple):
    action: tf.Tensor


class IdentityAgent:
    """Acts with its observation: a continuous action of shape [2]."""

    def initial_state(self, batch_size):
        return ()

    def act(self, prev_actions, env_outputs, state, env_ids=None):
        return Box(tf.identity(env_outputs.observation)), state

    def agent_output_spec(self):
        return Box(tf.TensorSpec([None, 2], tf.float32))


@PATHS
def test_continuous_actions_must_be_finite_and_within_the_bounds(fast):
    spec = ArraySpec((2,), "float32", minimum=-1.0, maximum=[1.0, 0.1])
    inf = make(IdentityAgent(), fast, action_spec=spec, observation_spec=ArraySpec((2,), "float32"))
    at_bounds = np.array([[-1.0, np.float32(0.1)], [1.0, -1.0]], np.float32)  # the float32 bound passes
    out = step(inf, [0, 1], [1, 1], at_bounds)
    np.testing.assert_array_equal(out.actions.numpy(), at_bounds)
    assert out.refused.numpy().tolist() == [0, 0]
    before = tables(inf)
    for bad, cause in (([0.0, 0.11], inference_lib.ACTION_OUT_OF_SPEC), ([-1.01, 0.0], inference_lib.ACTION_OUT_OF_SPEC),
                       ([np.inf, 0.0], inference_lib.NON_FINITE_OUTPUT), ([0.0, np.nan], inference_lib.NON_FINITE_OUTPUT)):
        obs = np.array([[0.0, 0.0], bad], np.float32)
        out = step(inf, [0, 1], [1, 1], obs)
        assert out.refused.numpy().tolist() == [0, cause], bad
        np.testing.assert_array_equal(out.actions.numpy()[0], [0.0, 0.0])
    assert "float32 of shape (2,), finite, >= -1.0, <= [1.0, 0.1]" in inf.cause(inference_lib.ACTION_OUT_OF_SPEC)
    # Env 0 was acted on each time (its tables moved); env 1's rows of every table never changed.
    after = tables(inf)
    assert any(not np.array_equal(before[name], after[name]) for name in before)
    length = inf.store.full_length
    for name in (name for name in before if before[name].ndim):  # (not the policy version, a scalar)
        rows = slice(length, 2 * length) if before[name].shape[0] == 3 * length else slice(1, 2)
        np.testing.assert_array_equal(before[name][rows], after[name][rows], err_msg=name)


def test_the_check_keeps_the_step_on_the_single_threaded_executor():
    """The per-row check adds no control flow: the step stays on the single-threaded executor."""
    inf = make(PoisonableAgent(), fast=True)
    concrete = inf._compiled.get_concrete_function(*inf.input_signature)
    assert not any(node.op == "Assert" for node in concrete.graph.as_graph_def().node)
    assert fast_call_lib.executor_refusal(concrete) is None
