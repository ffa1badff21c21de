"""The inference step's fast call path (seed_rl/learner/fast_call.py) against the public tf.function call.

* The packer is the inverse of ``tf.nest.flatten``, as ``tf.nest.pack_sequence_as`` is.
* ``executor_refusal`` predicts what TensorFlow's single-threaded executor does with a graph, checked against the
  executor itself on small functions (plain ops, tf.cond, tf.scan, control flow in a nested function).
* Two inference steps over the same agent, one with ``fast_call`` and one without, fed the same steps, give
  identical outputs and identical tables, for a deterministic agent without control flow (run under the
  single-threaded executor on a CPU-only host) and one with an LSTM unrolled by ``tf.scan`` (default executor).
"""

from typing import NamedTuple

import keras
import numpy as np
import pytest
import tensorflow as tf

from seed_rl.learner import fast_call
from seed_rl.learner.inference import InferenceStep
from seed_rl.networks.recurrent import ResettingLSTM
from seed_rl.types import ArraySpec, EnvOutput

CPU_ONLY = not (tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU"))
# What the fast path picks for a graph the single-threaded executor accepts.
ACCEPTED = fast_call.SINGLE_THREADED_EXECUTOR if CPU_ONLY else fast_call.DEFAULT_EXECUTOR


# --- the packer -------------------------------------------------------------------------------------------------

class _Pair(NamedTuple):
    a: object
    b: object


def test_packer_is_the_inverse_of_tf_nest_flatten():
    structure = _Pair(a={"z": 1, "b": (2, [3, 4]), "m": _Pair(a=[6], b={})}, b=_Pair(a=(), b=[5, {"k": 7}]))
    flat = tf.nest.flatten(structure)
    assert flat == [2, 3, 4, 6, 1, 5, 7]  # dicts flatten in sorted key order
    values = [10 * x for x in flat]
    packed = fast_call.packer(structure)(values)
    expected = tf.nest.pack_sequence_as(structure, values)
    assert packed == expected
    tf.nest.assert_same_structure(packed, expected)
    assert type(packed.b) is _Pair and type(packed.a["b"][1]) is list and type(packed.a["b"]) is tuple
    assert fast_call.packer(7)([70]) == 70  # a bare leaf


def test_packer_falls_back_to_tf_nest_for_composite_tensors():
    sparse = tf.sparse.from_dense(tf.constant([[0, 2], [3, 0]]))
    structure = {"s": sparse, "t": tf.constant(1)}
    flat = tf.nest.flatten(structure, expand_composites=True)
    packed = fast_call.packer(structure)(flat)
    expected = tf.nest.pack_sequence_as(structure, flat, expand_composites=True)
    assert isinstance(packed["s"], tf.SparseTensor)
    np.testing.assert_array_equal(tf.sparse.to_dense(packed["s"]), tf.sparse.to_dense(expected["s"]))
    assert int(packed["t"]) == 1


def test_flat_caller_gives_what_the_public_call_gives():
    def f(x, pair):
        return {"sum": x + pair.a, "parts": [pair.b * 2, _Pair(a=x, b=pair.b)]}

    spec = (tf.TensorSpec([None], tf.float32), _Pair(tf.TensorSpec([None], tf.float32), tf.TensorSpec([], tf.int32)))
    concrete = tf.function(f).get_concrete_function(*spec)
    args = (tf.constant([1.0, 2.0]), _Pair(tf.constant([3.0, 4.0]), tf.constant(5)))
    assert fast_call.has_flat_entry_point(concrete)  # this TensorFlow has it, so the direct path is tested
    got, expected = fast_call.flat_caller(concrete)(tf.nest.flatten(args)), concrete(*args)
    tf.nest.assert_same_structure(got, expected)
    for x, y in zip(tf.nest.flatten(got), tf.nest.flatten(expected)):
        np.testing.assert_array_equal(x.numpy(), y.numpy())
    assert type(got["parts"]) is list and type(got["parts"][1]) is _Pair


# --- the capability check ---------------------------------------------------------------------------------------

with tf.device("/CPU:0"):  # the probes run on the CPU, where the single-threaded executor applies
    _counter = tf.Variable(0)  # incremented by each probe before its control flow: shows whether ops ran


def _plain(x):
    _counter.assign_add(1)
    return x * 2


def _cond(x):
    _counter.assign_add(1)
    return tf.cond(x > 1, lambda: x + 1, lambda: x - 1)


def _scan(x):
    _counter.assign_add(1)
    return tf.scan(lambda a, b: a + b, tf.range(x))[-1]


_inner_cond = tf.function(lambda s: tf.cond(s > 100, lambda: s, lambda: s + 1))


def _nested_cond(x):
    _counter.assign_add(1)
    return _inner_cond(x)


def _loop_over_nested_cond(x):
    # The loop is traced under the single-threaded executor (so it is not lowered and runs as a functional While),
    # but its body calls a function traced outside it, whose tf.cond is marked for lowering.
    _counter.assign_add(1)
    return tf.while_loop(lambda i, s: i < x, lambda i, s: (i + 1, _inner_cond(s) + _counter * 0), (0, 0))[1]


def _trace(f, under_single_threaded_executor=False):
    spec = tf.TensorSpec([], tf.int32)
    if under_single_threaded_executor:
        _inner_cond.get_concrete_function(spec)  # traced outside the executor's scope
        with tf.experimental.function_executor_type(fast_call.SINGLE_THREADED_EXECUTOR):
            return tf.function(f).get_concrete_function(spec)
    return tf.function(f).get_concrete_function(spec)


@pytest.mark.parametrize("f, traced_under_executor, refused", [
    (_plain, False, False),
    (_cond, False, True),
    (_scan, False, True),
    (_scan, True, False),  # traced under the executor, tf.scan's While is not marked for lowering
    (_nested_cond, False, True),
    (_loop_over_nested_cond, True, True),
], ids=["plain", "cond", "scan", "scan-traced-under-executor", "nested-cond", "loop-over-nested-cond"])
def test_executor_refusal_predicts_what_the_single_threaded_executor_does(f, traced_under_executor, refused):
    with tf.device("/CPU:0"):
        concrete = _trace(f, traced_under_executor)
        reason = fast_call.executor_refusal(concrete)
        assert (reason is not None) == refused, reason
        before = int(_counter.numpy())
        with tf.experimental.function_executor_type(fast_call.SINGLE_THREADED_EXECUTOR):
            if refused:
                with pytest.raises(tf.errors.FailedPreconditionError, match="(?i)single-threaded executor"):
                    concrete(tf.constant(3))
            else:
                concrete(tf.constant(3))
    if f is _loop_over_nested_cond:
        # Refused only when the loop ran its body, after the increment: why the choice is made beforehand.
        assert int(_counter.numpy()) == before + 1
    elif refused:
        assert int(_counter.numpy()) == before  # refused when the executor was created, before any op


def test_choose_executor_refuses_a_graph_with_lowered_control_flow_and_says_why():
    with tf.device("/CPU:0"):
        choice = fast_call.choose_executor(_trace(_nested_cond))
        assert choice.name == fast_call.DEFAULT_EXECUTOR
        if CPU_ONLY:  # else the reason is the accelerator
            assert "lowers to v1 control flow" in choice.reason and "library function" in choice.reason
        assert fast_call.choose_executor(_trace(_plain)).name == ACCEPTED


# --- both paths of the inference step ---------------------------------------------------------------------------

class Out(NamedTuple):
    action: tf.Tensor
    value: tf.Tensor


class CountingAgent:
    """Deterministic, no control flow: the state counts steps since a reset; action ``10 * obs + state``."""

    def initial_state(self, batch_size):
        return tf.zeros([batch_size], tf.int32)

    def act(self, prev_actions, env_outputs, state, env_ids=None):
        obs = tf.cast(env_outputs.observation[:, 0], tf.int32)
        new_state = tf.where(env_outputs.done, 1, state + 1)
        value = tf.cast(prev_actions, tf.float32) * 0.5 + env_outputs.reward
        return Out(action=10 * obs + new_state, value=value), new_state

    def agent_output_spec(self):
        return Out(action=tf.TensorSpec([None], tf.int32), value=tf.TensorSpec([None], tf.float32))


class LSTMAgent:
    """Deterministic, with an LSTM unrolled by tf.scan (as R2D2's and the Atari V-trace networks are): the action
    is the argmax of a linear head on the LSTM output; the state is the LSTM's (h, c), returned by a Keras layer."""

    def __init__(self, units=8, num_actions=3):
        keras.utils.set_random_seed(1)
        self.num_actions = num_actions
        self.core = ResettingLSTM(units)
        self.head = keras.layers.Dense(num_actions)
        self.act(tf.zeros([1], tf.int32), EnvOutput(tf.zeros([1]), tf.zeros([1], tf.bool), tf.zeros([1, 1], tf.int32),
                                                    tf.zeros([1], tf.bool), tf.zeros([1], tf.int32)),
                 self.initial_state(1))  # builds the layers

    def initial_state(self, batch_size):
        return self.core.initial_state(batch_size)

    def act(self, prev_actions, env_outputs, state, env_ids=None):
        x = tf.concat([tf.cast(env_outputs.observation, tf.float32), env_outputs.reward[:, None],
                       tf.one_hot(prev_actions, self.num_actions)], axis=1)
        outputs, new_state = self.core(x[None], tf.cast(env_outputs.done, tf.bool)[None], state)
        q = self.head(outputs[0])
        return Out(action=tf.argmax(q, axis=1, output_type=tf.int32), value=tf.reduce_max(q, axis=1)), new_state

    def agent_output_spec(self):
        return Out(action=tf.TensorSpec([None], tf.int32), value=tf.TensorSpec([None], tf.float32))


# (env ids, run ids, observations, rewards, done, abandoned): several envs in varying order and subsets, a new run
# id for env 1 (a reset), episode ends (one of them a truncation), and enough steps for unrolls of 3 to complete.
STEPS = [
    ([0, 1, 2], [1, 1, 1], [1, 2, 3], [0.0, 0.0, 0.0], [False, False, False], [False, False, False]),
    ([2, 0], [1, 1], [4, 5], [1.0, 0.5], [False, False], [False, False]),
    ([0, 1, 2], [1, 1, 1], [6, 7, 8], [2.0, 1.0, 0.0], [False, False, False], [False, False, False]),
    ([1, 0, 2], [5, 1, 1], [9, 1, 2], [0.0, 1.5, 3.0], [False, True, False], [False, False, False]),
    ([0, 1, 2], [1, 5, 1], [3, 4, 5], [1.0, 1.0, 1.0], [False, False, True], [False, False, True]),
    ([0, 1], [1, 5], [6, 7], [0.0, 2.0], [False, False], [False, False]),
    ([2, 1, 0], [1, 5, 1], [8, 9, 1], [1.0, 0.0, 4.0], [False, True, False], [False, False, False]),
    ([0, 1, 2], [1, 5, 1], [2, 3, 4], [0.5, 0.5, 0.5], [False, False, False], [False, False, False]),
]


def _run(inf, steps):
    outs = []
    for env_ids, run_ids, obs, reward, done, abandoned in steps:
        n = len(env_ids)
        eo = EnvOutput(reward=np.asarray(reward, np.float32), done=np.asarray(done, bool),
                       observation=np.asarray(obs, np.int32).reshape(n, 1), abandoned=np.asarray(abandoned, bool),
                       episode_step=np.arange(n, dtype=np.int32))
        outs.append(inf(np.asarray(env_ids, np.int32), np.asarray(run_ids, np.int64), eo, eo.reward * 2))
    return outs


def _tables(inf):
    """Every variable of the step's tables, by name: run ids, agent states, previous actions, episode statistics,
    the unroll store's rows and positions."""
    tables = {"run_ids": inf.run_ids, "agent_states": inf.agent_states, "prev_actions": inf.prev_actions,
              "episode_stats": inf.episode_stats, "store": inf.store}
    return {f"{name}/{i}": v.numpy() for name, table in tables.items() for i, v in enumerate(table.variables)}


def _assert_identical(a, b):
    tf.nest.assert_same_structure(a, b)
    for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
        assert (x.dtype, x.shape) == (y.dtype, y.shape)
        np.testing.assert_array_equal(x.numpy(), y.numpy())


@pytest.mark.parametrize("agent_cls, fast_executor", [
    (CountingAgent, ACCEPTED),
    (LSTMAgent, fast_call.DEFAULT_EXECUTOR),
], ids=["no-control-flow", "lstm"])
def test_fast_and_public_call_give_identical_outputs_and_tables(agent_cls, fast_executor):
    agent = agent_cls()  # one agent, so both steps use the same weights
    steps = [InferenceStep(agent, ArraySpec((1,), "int32"), 3, 2, 2, tf.Variable(4, dtype=tf.int64),
                           num_overlapping_steps=1, fast_call=fast) for fast in (True, False)]
    fast, public = steps
    assert fast.executor.name == fast_executor, fast.executor.reason
    if agent_cls is LSTMAgent and CPU_ONLY:
        assert "While" in fast.executor.reason  # tf.scan's loop, marked for lowering
    assert public.executor.name == fast_call.DEFAULT_EXECUTOR
    assert isinstance(fast._call, fast_call.FastCaller) and fast._call.direct

    fast_outs, public_outs = _run(fast, STEPS), _run(public, STEPS)
    for a, b in zip(fast_outs, public_outs):
        _assert_identical(a, b)
    tables_fast, tables_public = _tables(fast), _tables(public)
    assert sorted(tables_fast) == sorted(tables_public) and len(tables_fast) >= 10
    for name in tables_fast:
        np.testing.assert_array_equal(tables_fast[name], tables_public[name], err_msg=name)

    # The sequence exercised what it is meant to.
    assert any(o.reset_env_ids.numpy().tolist() == [1] for o in fast_outs[1:])
    assert sum(int(o.finished_env_ids.shape[0]) for o in fast_outs) >= 2
    assert sum(int(o.completed_env_ids.shape[0]) for o in fast_outs) >= 3


def test_public_call_decides_its_executor_without_tracing():
    inf = InferenceStep(CountingAgent(), ArraySpec((1,), "int32"), 1, 2, 1, tf.Variable(0, dtype=tf.int64),
                        fast_call=False)
    assert inf.executor.name == fast_call.DEFAULT_EXECUTOR
    assert inf._compiled.experimental_get_tracing_count() == 0


@pytest.mark.parametrize("preset, fast_executor", [
    ("classic_vtrace", ACCEPTED),
    ("classic_r2d2", fast_call.DEFAULT_EXECUTOR),
])
def test_real_agents_give_the_same_steps_through_both_paths(preset, fast_executor):
    """The real agents' inference steps (V-trace's MLP; R2D2's LSTM, whose tf.scan the single-threaded executor
    refuses once lowered, and whose state Keras returns in tracking wrappers) through both paths: the fast path picks
    the executor the capability check allows, and both give the same structure, dtypes and shapes, and the same
    values wherever the sampled actions play no part."""
    from seed_rl import agents as agents_lib
    from seed_rl.configs import get_preset
    from seed_rl.envs import env_specs

    config = get_preset(preset)
    obs_spec, act_spec = env_specs(config.env)
    runs = []
    for fast in (True, False):
        tf.random.set_seed(3)
        agent = agents_lib.make_agent(config.agent_name, config.agent, obs_spec, act_spec, num_envs=2)
        inf = InferenceStep(agent, obs_spec, 2, 3, 1, tf.Variable(0, dtype=tf.int64),
                            num_overlapping_steps=agent.num_overlapping_steps, fast_call=fast)
        assert inf.executor.name == (fast_executor if fast else fast_call.DEFAULT_EXECUTOR), inf.executor.reason
        rng = np.random.default_rng(0)
        outs = []
        for k in range(3 + inf.store.full_length):
            eo = EnvOutput(reward=np.ones(2, np.float32), done=np.array([k == 3, False]),
                           observation=rng.normal(size=(2, *obs_spec.shape)).astype(np.float32),
                           abandoned=np.zeros(2, bool), episode_step=np.full(2, k, np.int32))
            outs.append(inf(np.arange(2, dtype=np.int32), np.ones(2, np.int64), eo, eo.reward))
        runs.append(outs)
    for a, b in zip(*runs):
        tf.nest.assert_same_structure(a, b)
        for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
            assert (x.dtype, x.shape) == (y.dtype, y.shape)
        # Actions are sampled, so only what does not depend on the draws is compared by value.
        deterministic = [(o.frames, o.completed_env_ids, o.finished_env_ids, o.finished, o.reset_env_ids,
                          o.unrolls.env_outputs) for o in (a, b)]
        for x, y in zip(*map(tf.nest.flatten, deterministic)):
            np.testing.assert_array_equal(x.numpy(), y.numpy())
    assert any(int(o.completed_env_ids.shape[0]) for o in runs[0])  # unrolls did complete
