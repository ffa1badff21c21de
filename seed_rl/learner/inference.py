"""The learner's inference step: one compiled TF function over a batch of env rows from several actors.

For each row it resets the env's state on a new run id, accounts episode statistics, runs the agent on the
previous action, the env output and the recurrent state read from the per-env tables, appends the step to the
unroll store and writes the new state back. It returns the actions, the unrolls completed by this step (with the
recurrent state at their first step) and the episodes that finished.

This is the original's ``inference`` tf.function (agents/vtrace/learner.py), made algorithm-agnostic: anything
that follows the Agent protocol (``initial_state``, ``act``) plugs in. How the compiled step is called (the public
``tf.function`` call, or ``seed_rl/learner/fast_call.py``'s cheaper path) does not change what it computes.

Every row is checked before anything is written: a row whose network outputs (the agent's outputs and its new
recurrent state) are not finite, or whose action is outside the env's action spec (a network gone to NaN makes
``tf.random.categorical`` draw index ``num_actions``), is refused on its own. The other rows of the call are acted
on and written as usual; a refused row writes nothing (run id, agent state, previous action, episode statistics
and partial unroll stay as they were), and the step reports it in ``InferenceOutput.refused`` with its cause, so
that only the message it came from is refused (docs/transport.md, "Refused rows"). No refused action is ever
sent to an actor or stored in an unroll, where it would later fail the training step.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, NamedTuple, Optional

import numpy as np
import tensorflow as tf

from seed_rl.learner import fast_call as fast_call_lib
from seed_rl.learner.tables import EnvTable, UnrollStore
from seed_rl.ops import specs as specs_lib
from seed_rl.types import ArraySpec, EnvOutput, Unroll

ACTED = 0
"""``InferenceOutput.refused`` of a row that was acted on."""
NON_FINITE_OUTPUT = 1
"""``InferenceOutput.refused``: the agent's outputs or new recurrent state for the row are not finite."""
ACTION_OUT_OF_SPEC = 2
"""``InferenceOutput.refused``: the row's action is outside the action spec (its outputs are finite)."""


def refusal_cause(code: int, action_check: Optional["ActionCheck"] = None) -> str:
    """The words for a refused row's cause code (``InferenceOutput.refused``)."""
    if code == NON_FINITE_OUTPUT:
        return ("the network's output for it is not finite (NaN or inf), e.g. from an extreme observation that "
                "passed the learner's checks")
    spec = f" ({action_check.spec_words()})" if action_check is not None else ""
    return f"the agent's action for it is outside the action spec{spec}"


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
    """int64 scalar: environment frames this step represents (rows acted on only)."""
    refused: Any
    """int32 [N]: per input row, ``ACTED`` (0) or why the row was refused (``NON_FINITE_OUTPUT``,
    ``ACTION_OUT_OF_SPEC``); a refused row wrote nothing, and its action must not be used."""


class ActionCheck:
    """The check of the agent's actions against the env's action spec, row by row.

    Discrete (``num_values > 0``): integers in ``[0, num_values)``. Otherwise: finite when floating, and within
    ``minimum`` / ``maximum`` where the spec has them, compared in the actions' dtype (a float32 Box's bounds are
    float32 values, so an action clipped to a bound passes).

    The spec is kept in this plain object rather than on the ``tf.Module``, whose attribute tracking would wrap
    the spec's tuple and bound lists (and show ``ListWrapper([...])`` in a message).
    """

    def __init__(self, spec: ArraySpec):
        self.spec = spec

    def spec_words(self) -> str:
        """The spec in words, for a refusal's message."""
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

    def row_valid(self, actions):
        """bool ``[N]`` (inside the compiled step): whether row i of ``actions`` ``[N, *shape]`` is inside the
        spec; None when there is nothing to check."""
        spec = self.spec
        dtype = actions.dtype
        if not (dtype.is_integer or dtype.is_floating or dtype.is_bool):
            return None
        ok = []
        if spec.num_values > 0:
            values = tf.cast(actions, tf.float64) if dtype.is_floating else actions
            if dtype.is_floating:
                ok.append(tf.math.is_finite(values) & tf.equal(values, tf.floor(values)))
            ok.append(values >= tf.constant(0, values.dtype))
            ok.append(values < tf.constant(spec.num_values, values.dtype))
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
            return None
        valid = ok[0]
        for more in ok[1:]:
            valid = valid & more
        rank = actions.shape.rank
        if rank == 1 and valid.shape.rank == 1:
            return valid  # one value per row already (the common discrete case: no more ops)
        valid = tf.broadcast_to(valid, tf.shape(actions))
        return tf.reduce_all(valid, axis=list(range(1, rank)))


def _finite_rows(n, nest):
    """bool ``[n]``: whether every floating-point value of row i of each leaf ``[n, ...]`` of ``nest`` is finite."""
    finite = None
    for leaf in tf.nest.flatten(nest):
        if not leaf.dtype.is_floating:
            continue
        rank = leaf.shape.rank
        finite_values = tf.math.is_finite(leaf)
        rows = finite_values if rank == 1 else tf.reduce_all(finite_values, axis=list(range(1, rank)))
        finite = rows if finite is None else finite & rows
    return tf.ones([n], tf.bool) if finite is None else finite


_no_scope = contextlib.nullcontext


def _where_rows(mask, a, b):
    """Row i of each leaf from ``a`` where ``mask[i]``, else from ``b``. The leaves' ranks are known when the step
    is traced, so the mask is reshaped with a constant shape (one op, none for ``[N]`` leaves): each op of the
    step costs Python-free but real time on every call (benchmarks/RESULTS.md, "Why the fast paths exist")."""
    def f(x, y):
        rank = x.shape.rank
        m = mask if rank == 1 else tf.reshape(mask, [-1] + [1] * (rank - 1))
        return tf.where(m, x, y)
    return tf.nest.map_structure(f, a, b)


class InferenceStep(tf.Module):
    """Owns the per-env tables and the unroll store; ``__call__`` is the compiled inference step.

    Every row is checked before anything is written (the module docstring): ``action_spec`` (the env's
    ``ArraySpec``; the Learner always gives it) is what the agent's actions are checked against, and the agent's
    outputs and new state must be finite. A refused row leaves every table (run id, agent state, previous action,
    episode statistics, unroll store) as it was: each write takes, for a refused row, the value just read. Outside
    the tables, a call with refused rows has advanced the random ops the agent samples with like any other call.
    Without ``action_spec`` (a step built by hand, e.g. in a benchmark) only finiteness is checked.

    ``fast_call`` (the learner's ``DevicesConfig.fast_inference_call``) picks how the compiled step is called: on, a
    ``fast_call.FastCaller`` (the graph called through TensorFlow's internal flat entry point, under the
    single-threaded executor where ``fast_call.choose_executor`` allows it); off, the public ``tf.function`` call
    under the default executor. Both give the same outputs and table updates.
    """

    def __init__(self, agent, observation_spec, num_envs: int, unroll_length: int, num_action_repeats: int,
                 policy_version: tf.Variable, num_overlapping_steps: int = 0, num_eval_envs: int = 0,
                 fast_call: bool = True, action_spec: Optional[ArraySpec] = None, device: Optional[str] = None,
                 jit_compile: bool = False, stagger_unrolls: bool = False):
        super().__init__(name="inference_step")
        self.agent = agent
        self.device = device
        """Where the tables live and the step's ops run (the learner's ``--inference_device``); None: TF's
        placement. The network reads the weights where they are: a mirrored variable's first copy."""
        # XLA compiles the network's call (fixed shapes per batch size); the table reads and writes around it
        # have data-dependent shapes (boolean masks) that XLA does not take.
        self._act = tf.function(agent.act, jit_compile=True, autograph=False) if jit_compile else agent.act
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
                              num_overlapping_steps, self.num_train_envs if stagger_unrolls else 0)
        # The compiled step takes the per-env scalars packed into two arrays (ids, run ids, episode step, done,
        # abandoned, life lost as int64; reward, raw reward as float32) plus the observation leaves: each tensor handed to a
        # TF function costs Python time on every call, more than a small network's ops take to run (measured:
        # benchmarks/RESULTS.md, "Why the fast paths exist").
        self._observation_spec = specs_lib.observation_tensor_spec(observation_spec)
        self._observation_dtypes = [s.dtype.as_numpy_dtype for s in tf.nest.flatten(self._observation_spec)]
        self.input_signature = (tf.TensorSpec([None, 6], tf.int64), tf.TensorSpec([None, 2], tf.float32),
                                self._observation_spec)
        self._compiled = tf.function(self._packed_step, input_signature=self.input_signature, autograph=False)
        self.fast_call = fast_call
        self._call: Optional[Callable[[list], InferenceOutput]] = None
        self._executor_choice: Optional[fast_call_lib.ExecutorChoice] = None

    def _make_tables(self, num_envs, state_spec, action_tensor_spec, env_spec, agent_output_spec, unroll_length,
                     num_overlapping_steps, stagger_envs) -> None:
        self.run_ids = EnvTable(num_envs, tf.TensorSpec([], tf.int64), "run_ids")
        self.agent_states = EnvTable(num_envs, state_spec, "agent_states")
        self.prev_actions = EnvTable(num_envs, action_tensor_spec, "prev_actions")
        self.episode_stats = EnvTable(num_envs, EpisodeStats(
            tf.TensorSpec([], tf.int64), tf.TensorSpec([], tf.int32), tf.TensorSpec([], tf.float32),
            tf.TensorSpec([], tf.float32)), "episode_stats")
        # Each step keeps the recurrent state *before* it, so that every unroll carries the exact state at its
        # first step, whatever the overlap (the original stored the state of position `burn_in` instead).
        step_spec = (action_tensor_spec, env_spec, agent_output_spec, tf.TensorSpec([], tf.int64), state_spec)
        self.store = UnrollStore(num_envs, unroll_length, step_spec, num_overlapping_steps, stagger_envs=stagger_envs)

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

    def __call__(self, env_ids, run_ids, env_outputs: EnvOutput, raw_rewards, life_lost=None) -> InferenceOutput:
        """One inference step over n rows (numpy arrays or tensors): see the module docstring. Rows that were
        refused are marked in ``InferenceOutput.refused``. ``life_lost`` (None: all false) marks ``done`` rows
        whose episode goes on (`seed_rl.types.StepBatch.life_lost`): only the episode statistics read it."""
        if self._call is None:
            self._call, self._executor_choice = self._make_caller()
        call = self._call
        lost = np.zeros(np.shape(env_ids), np.int64) if life_lost is None else np.asarray(life_lost)
        ints = np.stack([np.asarray(env_ids), np.asarray(run_ids), np.asarray(env_outputs.episode_step),
                         np.asarray(env_outputs.done), np.asarray(env_outputs.abandoned), lost],
                        axis=1).astype(np.int64)
        floats = np.stack([np.asarray(env_outputs.reward), np.asarray(raw_rewards)], axis=1).astype(np.float32)
        observations = [np.asarray(x, dtype) for x, dtype in
                        zip(tf.nest.flatten(env_outputs.observation), self._observation_dtypes)]
        return call([tf.constant(ints), tf.constant(floats), *map(tf.constant, observations)])

    def cause(self, code: int) -> str:
        """The words for a refused row's cause (``InferenceOutput.refused``)."""
        return refusal_cause(code, self.action_check)

    def _packed_step(self, ints, floats, observation):
        if self.device:
            with tf.device(self.device):
                return self._unpacked_step(ints, floats, observation)
        return self._unpacked_step(ints, floats, observation)

    def _unpacked_step(self, ints, floats, observation):
        env_outputs = EnvOutput(reward=floats[:, 0], done=tf.cast(ints[:, 3], tf.bool), observation=observation,
                                abandoned=tf.cast(ints[:, 4], tf.bool),
                                episode_step=tf.cast(ints[:, 2], tf.int32))
        return self._step(tf.cast(ints[:, 0], tf.int32), ints[:, 1], env_outputs, floats[:, 1],
                          tf.cast(ints[:, 5], tf.bool))

    def _step(self, env_ids, run_ids, env_outputs: EnvOutput, raw_rewards, life_lost):
        # Everything is read and computed first; the writes at the end keep a refused row's values as they were
        # read (see the class docstring).
        n = tf.shape(env_ids)[0]
        # 1. A new run id means a new actor connection: forget everything about that env.
        stored_run_ids = self.run_ids.read(env_ids)
        reset = tf.not_equal(stored_run_ids, run_ids)
        stored_states = self.agent_states.read(env_ids)
        prev_states = _where_rows(reset, self.agent.initial_state(n), stored_states)
        stored_actions = self.prev_actions.read(env_ids)
        prev_actions = _where_rows(reset, tf.nest.map_structure(tf.zeros_like, stored_actions), stored_actions)

        # 2. Act, and check each row: finite outputs and state, an action inside the spec.
        agent_outputs, new_states = self._act(prev_actions, env_outputs, prev_states, env_ids)
        finite = _finite_rows(n, (agent_outputs, new_states))
        in_spec = None if self.action_check is None else self.action_check.row_valid(agent_outputs.action)
        ok = finite if in_spec is None else finite & in_spec
        refused = tf.where(finite, tf.where(ok, ACTED, ACTION_OUT_OF_SPEC), NON_FINITE_OUTPUT)

        # 3. Episode statistics of the rows acted on.
        stored_stats, new_stats, finished_ids, finished, frames = self._episode_statistics(
            n, env_ids, env_outputs, raw_rewards, life_lost, reset, ok)

        # 4. Write: reset the new runs, account the episodes, append the training envs' rows to their unrolls,
        # keep the new states and actions; a refused row writes back what was read.
        self.run_ids.replace(env_ids, tf.where(ok, run_ids, stored_run_ids))
        reset_ids = tf.boolean_mask(env_ids, reset & ok)
        self.store.reset(reset_ids)
        self.episode_stats.replace(env_ids, _where_rows(ok, new_stats, stored_stats))
        version = tf.fill([n], self.policy_version.read_value())
        train = (env_ids < self.num_train_envs) & ok
        step = tf.nest.map_structure(lambda t: tf.boolean_mask(t, train),
                                     (prev_actions, env_outputs, agent_outputs, version, prev_states))
        _, completed_ids, steps = self.store.append(tf.boolean_mask(env_ids, train), step)
        self.agent_states.replace(env_ids, _where_rows(ok, new_states, stored_states))
        self.prev_actions.replace(env_ids, _where_rows(ok, agent_outputs.action, stored_actions))

        unrolls = Unroll(agent_state=tf.nest.map_structure(lambda t: t[:, 0], steps[4]),
                         prev_actions=steps[0], env_outputs=steps[1], agent_outputs=steps[2],
                         policy_version=steps[3])
        return InferenceOutput(
            actions=agent_outputs.action, completed_env_ids=completed_ids, unrolls=unrolls,
            finished_env_ids=finished_ids, finished=finished, reset_env_ids=reset_ids, frames=frames,
            refused=refused)

    def _episode_statistics(self, n, env_ids, env_outputs: EnvOutput, raw_rewards, life_lost, reset, ok) -> tuple:
        """The step's episode statistics, read and computed, nothing written: ``(stored, new, finished_ids,
        finished, frames)``, the rows' statistics as read and after this step, the ids and statistics of the
        episodes this step finished, and the frames it acted.

        For the rows acted on (``ok``): this step's reward closes the running episode (a new run, ``reset``, starts
        from zero); a finished episode starts again from zero; then every row counts its frames and one step. A
        truncated episode was reported with one extra step (the terminal observation, see agents/vtrace/loss.py),
        which is not counted as a frame. A ``done`` row that lost a life (``life_lost``, not abandoned) finishes no
        episode: the game goes on, and so do its statistics."""
        repeats = tf.cast(self.num_action_repeats, tf.int64)
        abandoned = tf.cast(env_outputs.abandoned, tf.bool) & tf.cast(env_outputs.done, tf.bool)
        zeros = EpisodeStats(tf.zeros([n], tf.int64), tf.zeros([n], tf.int32), tf.zeros([n]), tf.zeros([n]))
        stored_stats = self.episode_stats.read(env_ids)
        stats = _where_rows(reset, zeros, stored_stats)
        stats = stats._replace(episode_return=stats.episode_return + env_outputs.reward,
                               raw_return=stats.raw_return + raw_rewards)
        done = tf.cast(env_outputs.done, tf.bool) & ~(life_lost & ~abandoned) & ~reset & ok
        finished_ids = tf.boolean_mask(env_ids, done)
        finished = tf.nest.map_structure(lambda t: tf.boolean_mask(t, done), stats)
        fake = tf.cast(tf.boolean_mask(abandoned, done), tf.int64)
        finished = finished._replace(frames=finished.frames - fake * repeats,
                                     steps=finished.steps - tf.cast(fake, tf.int32))
        new_stats = _where_rows(done, zeros, stats)
        new_stats = new_stats._replace(frames=new_stats.frames + repeats, steps=new_stats.steps + 1)
        frames = tf.reduce_sum(tf.cast(ok & ~abandoned, tf.int64)) * repeats
        return stored_stats, new_stats, finished_ids, finished, frames
