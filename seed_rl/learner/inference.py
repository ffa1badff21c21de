"""The learner's inference step: one compiled TF function over a batch of env rows from several actors.

For each row it resets the env's state on a new run id, accounts episode statistics, runs the agent on the
previous action, the env output and the recurrent state read from the per-env tables, appends the step to the
unroll store and writes the new state back. It returns the actions, the unrolls completed by this step (with the
recurrent state at their first step) and the episodes that finished.

This is the original's ``inference`` tf.function (agents/vtrace/learner.py), made algorithm-agnostic: anything
that follows the Agent protocol (``initial_state``, ``act``) plugs in. How the compiled step is called (the public
``tf.function`` call, or ``seed_rl/learner/fast_call.py``'s cheaper path) does not change what it computes.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

import numpy as np
import tensorflow as tf

from seed_rl.learner import fast_call as fast_call_lib
from seed_rl.learner.tables import EnvTable, UnrollStore
from seed_rl.ops import specs as specs_lib
from seed_rl.types import EnvOutput, Unroll


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


def _where_rows(mask, a, b):
    def f(x, y):
        m = tf.reshape(mask, tf.concat([tf.shape(mask), tf.ones([tf.rank(x) - 1], tf.int32)], 0))
        return tf.where(m, x, y)
    return tf.nest.map_structure(f, a, b)


class InferenceStep(tf.Module):
    """Owns the per-env tables and the unroll store; ``__call__`` is the compiled inference step.

    ``fast_call`` (the learner's ``RunConfig.fast_inference_call``) picks how the compiled step is called: on, a
    ``fast_call.FastCaller`` (the graph called through TensorFlow's internal flat entry point, under the
    single-threaded executor where ``fast_call.choose_executor`` allows it); off, the public ``tf.function`` call
    under the default executor. Both give the same outputs and table updates.
    """

    def __init__(self, agent, observation_spec, num_envs: int, unroll_length: int, num_action_repeats: int,
                 policy_version: tf.Variable, num_overlapping_steps: int = 0, num_eval_envs: int = 0,
                 fast_call: bool = True):
        super().__init__(name="inference_step")
        self.agent = agent
        self.num_envs = num_envs
        # The highest env ids are evaluation envs: they act and report episodes but never enter the unrolls.
        self.num_train_envs = num_envs - num_eval_envs
        self.num_action_repeats = num_action_repeats
        self.policy_version = policy_version
        state_spec = specs_lib.spec_of_tensors(agent.initial_state(1))
        action_spec = specs_lib.spec_of_tensors(agent.agent_output_spec().action)
        env_spec = tf.nest.map_structure(lambda s: tf.TensorSpec(s.shape[1:], s.dtype),
                                         specs_lib.env_output_spec(observation_spec))
        agent_output_spec = specs_lib.spec_of_tensors(agent.agent_output_spec())
        self.run_ids = EnvTable(num_envs, tf.TensorSpec([], tf.int64), "run_ids")
        self.agent_states = EnvTable(num_envs, state_spec, "agent_states")
        self.prev_actions = EnvTable(num_envs, action_spec, "prev_actions")
        self.episode_stats = EnvTable(num_envs, EpisodeStats(
            tf.TensorSpec([], tf.int64), tf.TensorSpec([], tf.int32), tf.TensorSpec([], tf.float32),
            tf.TensorSpec([], tf.float32)), "episode_stats")
        # Each step keeps the recurrent state *before* it, so that every unroll carries the exact state at its
        # first step, whatever the overlap (the original stored the state of position `burn_in` instead).
        step_spec = (action_spec, env_spec, agent_output_spec, tf.TensorSpec([], tf.int64), state_spec)
        self.store = UnrollStore(num_envs, unroll_length, step_spec, num_overlapping_steps)
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
        """One inference step over n rows (numpy arrays or tensors): see the module docstring."""
        if self._call is None:
            self._call, self._executor_choice = self._make_caller()
        call = self._call
        ints = np.stack([np.asarray(env_ids), np.asarray(run_ids), np.asarray(env_outputs.episode_step),
                         np.asarray(env_outputs.done), np.asarray(env_outputs.abandoned)], axis=1).astype(np.int64)
        floats = np.stack([np.asarray(env_outputs.reward), np.asarray(raw_rewards)], axis=1).astype(np.float32)
        observations = [np.asarray(x, dtype) for x, dtype in
                        zip(tf.nest.flatten(env_outputs.observation), self._observation_dtypes)]
        return call([tf.constant(ints), tf.constant(floats), *map(tf.constant, observations)])

    def _packed_step(self, ints, floats, observation):
        env_outputs = EnvOutput(reward=floats[:, 0], done=tf.cast(ints[:, 3], tf.bool), observation=observation,
                                abandoned=tf.cast(ints[:, 4], tf.bool),
                                episode_step=tf.cast(ints[:, 2], tf.int32))
        return self._step(tf.cast(ints[:, 0], tf.int32), ints[:, 1], env_outputs, floats[:, 1])

    def _step(self, env_ids, run_ids, env_outputs: EnvOutput, raw_rewards):
        n = tf.shape(env_ids)[0]
        # 1. A new run id means a new actor connection: forget everything about that env.
        reset = tf.not_equal(self.run_ids.read(env_ids), run_ids)
        self.run_ids.replace(env_ids, run_ids)
        reset_ids = tf.boolean_mask(env_ids, reset)
        initial_state = self.agent.initial_state(n)
        self.episode_stats.reset(reset_ids)
        self.store.reset(reset_ids)
        prev_states = _where_rows(reset, initial_state, self.agent_states.read(env_ids))
        prev_actions = _where_rows(reset, tf.nest.map_structure(tf.zeros_like, self.prev_actions.read(env_ids)),
                                   self.prev_actions.read(env_ids))

        # 2. Episode statistics. A truncated episode was reported with one extra step (the terminal
        # observation, see agents/vtrace/loss.py), which is not counted as a frame.
        repeats = tf.cast(self.num_action_repeats, tf.int64)
        abandoned = tf.cast(env_outputs.abandoned, tf.bool) & tf.cast(env_outputs.done, tf.bool)
        self.episode_stats.add(env_ids, EpisodeStats(
            tf.zeros([n], tf.int64), tf.zeros([n], tf.int32), env_outputs.reward, raw_rewards))
        done = tf.cast(env_outputs.done, tf.bool) & ~reset
        finished_ids = tf.boolean_mask(env_ids, done)
        finished = self.episode_stats.read(finished_ids)
        fake = tf.cast(tf.boolean_mask(abandoned, done), tf.int64)
        finished = finished._replace(frames=finished.frames - fake * repeats,
                                     steps=finished.steps - tf.cast(fake, tf.int32))
        self.episode_stats.reset(finished_ids)
        self.episode_stats.add(env_ids, EpisodeStats(
            tf.fill([n], repeats), tf.ones([n], tf.int32), tf.zeros([n]), tf.zeros([n])))
        frames = (tf.cast(n, tf.int64) - tf.reduce_sum(tf.cast(abandoned, tf.int64))) * repeats

        # 3. Act.
        agent_outputs, new_states = self.agent.act(prev_actions, env_outputs, prev_states, env_ids)

        # 4. Append the training envs' rows to their unrolls.
        version = tf.fill([n], self.policy_version.read_value())
        train = env_ids < self.num_train_envs
        step = tf.nest.map_structure(lambda t: tf.boolean_mask(t, train),
                                     (prev_actions, env_outputs, agent_outputs, version, prev_states))
        _, completed_ids, steps = self.store.append(tf.boolean_mask(env_ids, train), step)
        self.agent_states.replace(env_ids, new_states)
        self.prev_actions.replace(env_ids, agent_outputs.action)

        unrolls = Unroll(agent_state=tf.nest.map_structure(lambda t: t[:, 0], steps[4]),
                         prev_actions=steps[0], env_outputs=steps[1], agent_outputs=steps[2],
                         policy_version=steps[3])
        return InferenceOutput(
            actions=agent_outputs.action, completed_env_ids=completed_ids, unrolls=unrolls,
            finished_env_ids=finished_ids, finished=finished, reset_env_ids=reset_ids, frames=frames)
