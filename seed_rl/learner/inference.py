"""The learner's inference step: one compiled TF function over a batch of env rows from several actors.

For each row it resets the env's state on a new run id, accounts episode statistics, runs the agent on the
previous action, the env output and the recurrent state read from the per-env tables, appends the step to the
unroll store and writes the new state back. It returns the actions, the unrolls completed by this step (with the
recurrent state at their first step) and the episodes that finished.

This is the original's ``inference`` tf.function (agents/vtrace/learner.py), made algorithm-agnostic: anything
that follows the Agent protocol (``initial_state``, ``act``) plugs in. How the compiled step is called (the public
``tf.function`` call, or ``seed_rl/learner/fast_call.py``'s cheaper path) does not change what it computes.

Given the env's action spec, the step checks the agent's actions before it writes anything, and refuses the
whole call with ``ActionOutOfSpecError`` when one is outside the spec (a network gone to NaN makes
``tf.random.categorical`` draw index ``num_actions``): no such action is ever sent to an actor or stored in an
unroll, where it would later fail the training step.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any, Callable, NamedTuple, Optional

import numpy as np
import tensorflow as tf

from seed_rl.learner import fast_call as fast_call_lib
from seed_rl.learner.tables import EnvTable, UnrollStore
from seed_rl.ops import specs as specs_lib
from seed_rl.types import ArraySpec, EnvOutput, Unroll

_SHOWN_ROWS = 8
"""Offending rows (env ids and actions) an ``ActionOutOfSpecError`` shows."""


class ActionOutOfSpecError(tf.errors.InvalidArgumentError):
    """The agent produced an action outside the env's action spec; the inference call was refused, its tables
    unchanged. The message names the spec and shows the offending env ids and actions."""


class EpisodeStats(NamedTuple):
    frames: Any
    """int64: environment frames in the episode."""
    steps: Any
    """int32: agent steps in the episode."""
    episode_return: Any
    raw_return: Any


class InferenceOutput(NamedTuple):
    actions: Any
    """[N] actions, one per input row, in input order."""
    completed_env_ids: Any
    """int32 [C]: envs whose unroll completed in this step."""
    unrolls: Unroll
    """Batch-major [C, T + 1, ...] unrolls (agent_state [C, ...])."""
    finished_env_ids: Any
    """int32 [E]: envs whose episode finished in this step."""
    finished: EpisodeStats
    """[E] statistics of the finished episodes."""
    reset_env_ids: Any
    """int32 [R]: envs seen with a new run id in this step."""
    frames: Any
    """int64 scalar: environment frames this step represents."""


class ActionCheck:
    """The check of the agent's actions against the env's action spec, and the error it raises.

    Discrete (``num_values > 0``): integers in ``[0, num_values)``. Otherwise: finite when floating, and within
    ``minimum`` / ``maximum`` where the spec has them, compared in the actions' dtype (a float32 Box's bounds are
    float32 values, so an action clipped to a bound passes).

    The spec is kept in this plain object rather than on the ``tf.Module``, whose attribute tracking would wrap
    the spec's tuple and bound lists (and show ``ListWrapper([...])`` in the message).
    """

    def __init__(self, spec: ArraySpec):
        self.spec = spec
        self.message = (
            f"seed_rl: the agent produced an action outside the action spec ({self._spec_words()}), probably from "
            f"non-finite network outputs (NaN or inf weights or inputs); the call was refused and no table "
            f"changed. Offending rows, env ids then actions:")
        """What an ``ActionOutOfSpecError`` says before the offending env ids and actions."""

    def _spec_words(self) -> str:
        spec = self.spec
        words = f"{spec.dtype} of shape {tuple(spec.shape)}"
        if spec.num_values > 0:
            return f"{words}, integers in [0, {spec.num_values})"
        if np.issubdtype(np.dtype(spec.dtype), np.floating):
            words += ", finite"
        if spec.minimum is not None:
            words += f", >= {spec.minimum}"
        if spec.maximum is not None:
            words += f", <= {spec.maximum}"
        return words

    def ops(self, env_ids, actions) -> list:
        """The assertion ops (inside the compiled step) that fail when a row of ``actions`` ``[N, *shape]`` is
        outside the spec; none when there is nothing to check.

        The assertion is the raw ``Assert`` op: ``tf.debugging.Assert`` wraps its data in a ``tf.cond`` unless
        every tensor is a string or int32, and a lowered cond would keep the step off the single-threaded
        executor (``fast_call.py``).
        """
        spec = self.spec
        dtype = actions.dtype
        if not (dtype.is_integer or dtype.is_floating or dtype.is_bool):
            return []
        ok = []
        if spec.num_values > 0:
            values = tf.cast(actions, tf.float64 if dtype.is_floating else tf.int64)
            if dtype.is_floating:
                ok.append(tf.math.is_finite(values) & tf.equal(values, tf.floor(values)))
            ok.append(values >= 0)
            ok.append(values < spec.num_values)
        else:
            if dtype.is_floating:
                ok.append(tf.math.is_finite(actions))
            if dtype.is_bool:
                actions = tf.cast(actions, tf.int8)
            if spec.minimum is not None:
                ok.append(actions >= tf.constant(np.asarray(spec.minimum), actions.dtype))
            if spec.maximum is not None:
                ok.append(actions <= tf.constant(np.asarray(spec.maximum), actions.dtype))
        if not ok:
            return []
        valid = ok[0]
        for more in ok[1:]:
            valid = valid & more
        valid = tf.broadcast_to(valid, tf.shape(actions))
        row_valid = tf.reduce_all(valid, axis=list(range(1, valid.shape.rank)))
        bad = tf.logical_not(row_valid)
        return [tf.raw_ops.Assert(condition=tf.reduce_all(row_valid),
                                  data=[self.message, tf.boolean_mask(env_ids, bad), tf.boolean_mask(actions, bad)],
                                  summarize=_SHOWN_ROWS * max(1, int(np.prod(spec.shape, dtype=np.int64))))]

    def refusal(self, error: tf.errors.InvalidArgumentError) -> Optional[ActionOutOfSpecError]:
        """The ``ActionOutOfSpecError`` for a call that failed this check, without TensorFlow's text around it
        (the node, where it was defined, the function's name); None when ``error`` is another error.

        TensorFlow's message holds the assertion's data as ``[message] [env ids] [actions]`` on one line, which
        the public call ends with `` [Op:<function name>]``.
        """
        start = error.message.find(self.message)
        if start < 0:
            return None
        rows = error.message[start + len(self.message):].split("\n", 1)[0]
        rows = re.sub(r"\s*\[Op:[^\]]*\]\s*$", "", rows.lstrip("]")).strip()
        return ActionOutOfSpecError(error.node_def, error.op, f"{self.message} {rows}")


_no_scope = contextlib.nullcontext


def _where_rows(mask, a, b):
    def f(x, y):
        m = tf.reshape(mask, tf.concat([tf.shape(mask), tf.ones([tf.rank(x) - 1], tf.int32)], 0))
        return tf.where(m, x, y)
    return tf.nest.map_structure(f, a, b)


class InferenceStep(tf.Module):
    """Owns the per-env tables and the unroll store; ``__call__`` is the compiled inference step.

    ``action_spec`` (the env's ``ArraySpec``; the Learner always gives it) is what the agent's actions are checked
    against: a call where any row's action is outside it raises ``ActionOutOfSpecError`` (a
    ``tf.errors.InvalidArgumentError``) for the whole batch, and leaves every table (run ids, agent states,
    previous actions, episode statistics, unroll store) as it was: all of them are read first and written only
    after the check passed (every write has a control dependency on it: without one, TensorFlow runs a write that
    does not depend on the failing assertion anyway). Outside the tables, a refused call may have advanced the
    random ops the agent samples with, so a later call draws other samples than it would have; the step writes
    nothing else. Without ``action_spec`` (a step built by hand, e.g. in a benchmark) nothing is checked.

    ``fast_call`` (the learner's ``RunConfig.fast_inference_call``) picks how the compiled step is called: on, a
    ``fast_call.FastCaller`` (the graph called through TensorFlow's internal flat entry point, under the
    single-threaded executor where ``fast_call.choose_executor`` allows it); off, the public ``tf.function`` call
    under the default executor. Both give the same outputs and table updates.
    """

    def __init__(self, agent, observation_spec, num_envs: int, unroll_length: int, num_action_repeats: int,
                 policy_version: tf.Variable, num_overlapping_steps: int = 0, num_eval_envs: int = 0,
                 fast_call: bool = True, action_spec: Optional[ArraySpec] = None, device: Optional[str] = None,
                 jit_compile: bool = False):
        super().__init__(name="inference_step")
        self.agent = agent
        self.device = device
        """Where the tables live and the step's ops run (the learner's ``--inference_device``); None: TF's
        placement. The network reads the weights where they are: a mirrored variable's first copy."""
        # XLA compiles the network's call (fixed shapes per batch size); the table reads and writes around it
        # have data-dependent shapes (boolean masks) that XLA does not take.
        self._act = tf.function(agent.act, jit_compile=True) if jit_compile else agent.act
        self.action_check = None if action_spec is None else ActionCheck(action_spec)
        """What the agent's actions are checked against (None: nothing is checked)."""
        self.num_envs = num_envs
        # The highest env ids are evaluation envs: they act and report episodes but never enter the unrolls.
        self.num_train_envs = num_envs - num_eval_envs
        self.num_action_repeats = num_action_repeats
        self.policy_version = policy_version
        state_spec = specs_lib.spec_of_tensors(agent.initial_state(1))
        action_tensor_spec = specs_lib.spec_of_tensors(agent.agent_output_spec().action)
        env_spec = tf.nest.map_structure(lambda s: tf.TensorSpec(s.shape[1:], s.dtype),
                                         specs_lib.env_output_spec(observation_spec))
        agent_output_spec = specs_lib.spec_of_tensors(agent.agent_output_spec())
        with tf.device(device) if device else _no_scope():
            self._make_tables(num_envs, state_spec, action_tensor_spec, env_spec, agent_output_spec, unroll_length,
                              num_overlapping_steps)
        # The compiled step takes the per-env scalars packed into two arrays (ids, run ids, episode step, done,
        # abandoned as int64; reward, raw reward as float32) plus the observation leaves: each tensor handed to a
        # TF function costs Python time on every call, more than a small network's ops take to run (measured:
        # benchmarks/RESULTS.md, "Why the fast paths exist").
        self._observation_spec = specs_lib.observation_tensor_spec(observation_spec)
        self._observation_dtypes = [s.dtype.as_numpy_dtype for s in tf.nest.flatten(self._observation_spec)]
        self.input_signature = (tf.TensorSpec([None, 5], tf.int64), tf.TensorSpec([None, 2], tf.float32),
                                self._observation_spec)
        self._compiled = tf.function(self._packed_step, input_signature=self.input_signature)
        self.fast_call = fast_call
        self._call: Optional[Callable[[list], InferenceOutput]] = None
        self._executor_choice: Optional[fast_call_lib.ExecutorChoice] = None

    def _make_tables(self, num_envs, state_spec, action_tensor_spec, env_spec, agent_output_spec, unroll_length,
                     num_overlapping_steps) -> None:
        self.run_ids = EnvTable(num_envs, tf.TensorSpec([], tf.int64), "run_ids")
        self.agent_states = EnvTable(num_envs, state_spec, "agent_states")
        self.prev_actions = EnvTable(num_envs, action_tensor_spec, "prev_actions")
        self.episode_stats = EnvTable(num_envs, EpisodeStats(
            tf.TensorSpec([], tf.int64), tf.TensorSpec([], tf.int32), tf.TensorSpec([], tf.float32),
            tf.TensorSpec([], tf.float32)), "episode_stats")
        # Each step keeps the recurrent state *before* it, so that every unroll carries the exact state at its
        # first step, whatever the overlap (the original stored the state of position `burn_in` instead).
        step_spec = (action_tensor_spec, env_spec, agent_output_spec, tf.TensorSpec([], tf.int64), state_spec)
        self.store = UnrollStore(num_envs, unroll_length, step_spec, num_overlapping_steps)

    @property
    def executor(self) -> fast_call_lib.ExecutorChoice:
        """The TF executor the compiled step runs under (``fast_call.SINGLE_THREADED_EXECUTOR`` or
        ``fast_call.DEFAULT_EXECUTOR``) and why; with ``fast_call``, reading it traces the step if no call has."""
        if self._executor_choice is None:
            self._call, self._executor_choice = self._make_caller()
        return self._executor_choice

    def _make_caller(self) -> tuple[Callable[[list], InferenceOutput], fast_call_lib.ExecutorChoice]:
        """How the flat inputs ``[ints, floats, *observation leaves]`` reach the compiled step, chosen once."""
        if self.fast_call:
            caller = fast_call_lib.FastCaller(self._compiled.get_concrete_function(*self.input_signature))
            return caller, caller.choice
        return self._public_call, fast_call_lib.ExecutorChoice(
            fast_call_lib.DEFAULT_EXECUTOR, "fast_call is off: the public tf.function call")

    def _public_call(self, flat: list) -> InferenceOutput:
        ints, floats, *observations = flat
        return self._compiled(ints, floats, tf.nest.pack_sequence_as(self._observation_spec, observations))

    def __call__(self, env_ids, run_ids, env_outputs: EnvOutput, raw_rewards) -> InferenceOutput:
        """One inference step over n rows (numpy arrays or tensors): see the module docstring.

        Raises:
          ActionOutOfSpecError: an action was outside the ``action_spec``; nothing was written.
        """
        if self._call is None:
            self._call, self._executor_choice = self._make_caller()
        call = self._call
        ints = np.stack([np.asarray(env_ids), np.asarray(run_ids), np.asarray(env_outputs.episode_step),
                         np.asarray(env_outputs.done), np.asarray(env_outputs.abandoned)], axis=1).astype(np.int64)
        floats = np.stack([np.asarray(env_outputs.reward), np.asarray(raw_rewards)], axis=1).astype(np.float32)
        observations = [np.asarray(x, dtype) for x, dtype in
                        zip(tf.nest.flatten(env_outputs.observation), self._observation_dtypes)]
        try:
            return call([tf.constant(ints), tf.constant(floats), *map(tf.constant, observations)])
        except tf.errors.InvalidArgumentError as e:
            refusal = None if self.action_check is None else self.action_check.refusal(e)
            if refusal is None:
                raise
            raise refusal from None

    def _packed_step(self, ints, floats, observation):
        if self.device:
            with tf.device(self.device):
                return self._unpacked_step(ints, floats, observation)
        return self._unpacked_step(ints, floats, observation)

    def _unpacked_step(self, ints, floats, observation):
        env_outputs = EnvOutput(reward=floats[:, 0], done=tf.cast(ints[:, 3], tf.bool), observation=observation,
                                abandoned=tf.cast(ints[:, 4], tf.bool),
                                episode_step=tf.cast(ints[:, 2], tf.int32))
        return self._step(tf.cast(ints[:, 0], tf.int32), ints[:, 1], env_outputs, floats[:, 1])

    def _step(self, env_ids, run_ids, env_outputs: EnvOutput, raw_rewards):
        # Everything is read and computed first and written at the end, once the actions have passed the action
        # check: a refused call leaves every table as it was (see the class docstring).
        n = tf.shape(env_ids)[0]
        # 1. A new run id means a new actor connection: forget everything about that env.
        reset = tf.not_equal(self.run_ids.read(env_ids), run_ids)
        reset_ids = tf.boolean_mask(env_ids, reset)
        prev_states = _where_rows(reset, self.agent.initial_state(n), self.agent_states.read(env_ids))
        stored_actions = self.prev_actions.read(env_ids)
        prev_actions = _where_rows(reset, tf.nest.map_structure(tf.zeros_like, stored_actions), stored_actions)

        # 2. Episode statistics: this step's reward closes the running episode; a finished episode starts again
        # from zero; then every row counts its frames and one step. A truncated episode was reported with one
        # extra step (the terminal observation, see agents/vtrace/loss.py), which is not counted as a frame.
        repeats = tf.cast(self.num_action_repeats, tf.int64)
        abandoned = tf.cast(env_outputs.abandoned, tf.bool) & tf.cast(env_outputs.done, tf.bool)
        zeros = EpisodeStats(tf.zeros([n], tf.int64), tf.zeros([n], tf.int32), tf.zeros([n]), tf.zeros([n]))
        stats = _where_rows(reset, zeros, self.episode_stats.read(env_ids))
        stats = stats._replace(episode_return=stats.episode_return + env_outputs.reward,
                               raw_return=stats.raw_return + raw_rewards)
        done = tf.cast(env_outputs.done, tf.bool) & ~reset
        finished_ids = tf.boolean_mask(env_ids, done)
        finished = tf.nest.map_structure(lambda t: tf.boolean_mask(t, done), stats)
        fake = tf.cast(tf.boolean_mask(abandoned, done), tf.int64)
        finished = finished._replace(frames=finished.frames - fake * repeats,
                                     steps=finished.steps - tf.cast(fake, tf.int32))
        new_stats = _where_rows(done, zeros, stats)
        new_stats = new_stats._replace(frames=new_stats.frames + repeats, steps=new_stats.steps + 1)
        frames = (tf.cast(n, tf.int64) - tf.reduce_sum(tf.cast(abandoned, tf.int64))) * repeats

        # 3. Act, and check the actions against the action spec.
        agent_outputs, new_states = self._act(prev_actions, env_outputs, prev_states, env_ids)
        checks = [] if self.action_check is None else self.action_check.ops(env_ids, agent_outputs.action)

        # 4. Only then write: reset the new runs, account the episodes, append the training envs' rows to their
        # unrolls, keep the new states and actions. Every op here waits for the checks, and none runs if one fails.
        with tf.control_dependencies(checks):
            self.run_ids.replace(env_ids, run_ids)
            self.store.reset(reset_ids)
            self.episode_stats.replace(env_ids, new_stats)
            version = tf.fill([n], self.policy_version.read_value())
            train = env_ids < self.num_train_envs
            step = tf.nest.map_structure(lambda t: tf.boolean_mask(t, train),
                                         (prev_actions, env_outputs, agent_outputs, version, prev_states))
            _, completed_ids, steps = self.store.append(tf.boolean_mask(env_ids, train), step)
            self.agent_states.replace(env_ids, new_states)
            self.prev_actions.replace(env_ids, agent_outputs.action)
            actions = tf.identity(agent_outputs.action)

        unrolls = Unroll(agent_state=tf.nest.map_structure(lambda t: t[:, 0], steps[4]),
                         prev_actions=steps[0], env_outputs=steps[1], agent_outputs=steps[2],
                         policy_version=steps[3])
        return InferenceOutput(
            actions=actions, completed_env_ids=completed_ids, unrolls=unrolls,
            finished_env_ids=finished_ids, finished=finished, reset_env_ids=reset_ids, frames=frames)
