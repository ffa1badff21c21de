"""The R2D2 network of the paper's Atari runs: frame stacking on the learner -> torso -> LSTM -> dueling Q heads.

Shapes: T = unroll length, B = batch, S = ``stack_size``, A = number of actions. With ``unroll=False`` every input
has a leading ``[B]`` (one step, used by the learner's inference step); with ``unroll=True`` a leading ``[T, B]``
(used by the loss). The agent state is always ``[B, ...]``.

Frame stacking is part of the recurrent state, as in the original: actors send one frame per step and the replay
stores each frame once; the network rebuilds the stack of the last S frames from the ``frame_stacking_state`` (the
previous S - 1 frames) and the current frame. Along the stack axis frames go from newest (index 0, the current frame)
to oldest, like the original's ``stack_frames``. A step with ``done`` (its observation is the first of a new episode)
sees only its own frame, the older slots zeroed; zeroing also reaches the steps after it until the stack has refilled.

Deviation from the original (on purpose): the original bit-packs the S - 1 previous frames into one int32 per pixel
(``[B, H * W]``, at most 4 frames). We keep them as plain ``uint8 [B, H, W, S - 1]``, newest first: simpler, no
limit on S, and smaller (3 x 84 x 84 = 21 KB per env instead of 4 x 84 x 84 = 28 KB for S = 4).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import keras
import tensorflow as tf

from seed_rl.networks.recurrent import ResettingLSTM
from seed_rl.networks.torsos import NatureTorso
from seed_rl.types import EnvOutput

__all__ = ["AgentState", "DQNOutput", "DuelingLSTMDQNNet", "stack_frames"]


class AgentState(NamedTuple):
    """The recurrent state of ``DuelingLSTMDQNNet`` for a batch of environments."""

    core_state: Any
    """(h, c): float32 ``[B, lstm_size]`` each, the LSTM state."""
    frame_stacking_state: Any
    """uint8 ``[B, *observation_shape[:-1], stack_size - 1]``: the previous ``stack_size - 1`` frames, newest first,
    already zeroed across episode boundaries. Zero-size last axis when ``stack_size == 1`` (kept so the state has the
    same structure for every stack size and fits in tf.Variable tables)."""


class DQNOutput(NamedTuple):
    q_values: Any
    """float32 ``[..., A]``: Q(o_t, a) for every action. The agent picks the action (greedy / epsilon-greedy)."""


def stack_frames(frames: tf.Tensor, frame_stacking_state: tf.Tensor, done: tf.Tensor,
                 stack_size: int) -> tuple[tf.Tensor, tf.Tensor]:
    """Stacks each frame with the ``stack_size - 1`` frames before it, zeroing frames from a previous episode.

    Vectorised over time (a Python loop over the static ``stack_size`` only): lag i of step t is frame t - i of the
    sequence ``[previous frames from the state] + frames``, masked out when any of steps t - i + 1 .. t is ``done``.
    Frames older than the unroll come from the state, which was already masked when it was produced.

    Args:
      frames: ``[T, B, *spatial, 1]`` (typically uint8 ``[T, B, H, W, 1]``).
      frame_stacking_state: ``[B, *spatial, stack_size - 1]``, same dtype as ``frames``, newest first.
      done: bool ``[T, B]``: step t starts a new episode.
      stack_size: S >= 1.

    Returns:
      ``(stacked [T, B, *spatial, S]`` newest first, ``new_state [B, *spatial, S - 1])``, both in ``frames.dtype``.
    """
    if stack_size < 1:
        raise ValueError(f"stack_size must be >= 1, got {stack_size}")
    if stack_size == 1:
        return frames, frame_stacking_state
    if frames.shape.rank is not None and frames.shape[-1] != 1:
        raise ValueError(f"frame stacking needs frames with a last axis of size 1, got shape {frames.shape}")
    if done.shape.rank is not None and done.shape.rank != 2:
        raise ValueError(f"done must be [T, B], got shape {done.shape}")
    if frame_stacking_state.dtype != frames.dtype:
        raise ValueError(f"frame_stacking_state dtype {frame_stacking_state.dtype} != frames dtype {frames.dtype}")
    done = tf.cast(done, tf.bool)
    num_steps = tf.shape(frames)[0]
    lag_max = stack_size - 1
    # [T + S - 1, B, *spatial, 1] in time order: oldest state frame (lag S - 1) first, then the unroll's frames.
    history = [frame_stacking_state[None, ..., j - 1:j] for j in range(lag_max, 0, -1)]
    extended = tf.concat(history + [frames], axis=0)
    # Lag i of step t is extended[t + S - 1 - i].
    stacked = tf.concat([extended[lag_max - i:lag_max - i + num_steps] for i in range(stack_size)], axis=-1)

    # mask_i[t] = done[t] or done[t - 1] or ... or done[t - i + 1] (steps before the unroll count as not done).
    done_padded = tf.concat([tf.zeros([lag_max, tf.shape(done)[1]], tf.bool), done], axis=0)
    masks = [tf.zeros_like(done)]
    for i in range(1, stack_size):
        masks.append(masks[-1] | done_padded[stack_size - i:stack_size - i + num_steps])
    mask = tf.stack(masks, axis=-1)  # [T, B, S]
    for _ in range(frames.shape.rank - 3):  # broadcast over the spatial axes
        mask = mask[:, :, None]
    stacked = tf.where(mask, tf.zeros_like(stacked), stacked)
    return stacked, stacked[-1, ..., :lag_max]


class DuelingLSTMDQNNet(keras.Model):
    """Dueling LSTM Q-network of R2D2 (Kapturowski et al. 2019), as in the original's ``atari/networks.py``.

    stack S frames -> torso -> concat [features, unclipped reward, one-hot previous action] -> LSTM (reset on done)
    -> Q = V + (A - mean_a A), with V = Dense(hidden, relu) -> Dense(1) and A = Dense(hidden, relu) ->
    Dense(A, no bias).

    Args:
      num_actions: number of discrete actions.
      observation_shape: shape of one observation without the batch axis, e.g. ``(84, 84, 1)`` or ``(4,)``; None
        for dict observations (no frame stacking: ``stack_size`` 1, and a torso that takes the dict, e.g.
        ``MultiInputTorso``).
      stack_size: number of frames the torso sees (S). S > 1 needs uint8 observations with one channel.
      torso: a layer mapping ``[N, *observation_shape[:-1], S * C]`` to ``[N, F]``; defaults to ``NatureTorso(512)``
        for image observations. Pass e.g. ``MLPTorso((64,))`` for vector observations (with ``stack_size=1``).
      lstm_size: LSTM units.
      hidden_size: units of the hidden layer of each dueling head.
    """

    def __init__(self, num_actions: int, observation_shape: Sequence[int] | None, stack_size: int = 4,
                 torso: keras.layers.Layer | None = None, lstm_size: int = 512, hidden_size: int = 512, **kwargs):
        # Under a mixed-precision policy (the learner's --precision) only the torso computes in the low precision:
        # this network, its LSTM and its heads keep float32 (kwargs may say otherwise).
        super().__init__(**{"dtype": "float32", **kwargs})
        if stack_size < 1:
            raise ValueError(f"stack_size must be >= 1, got {stack_size}")
        self.dict_observations = observation_shape is None
        if self.dict_observations and (stack_size != 1 or torso is None):
            raise ValueError(f"dict observations take no frame stacking (stack_size={stack_size}) and need a torso "
                             f"that takes the dict (multi_input)")
        # Dict observations keep an empty frame-stacking state, [B, 0], as a vector's: the state's structure is the
        # same for every observation.
        observation_shape = (1,) if observation_shape is None else tuple(int(d) for d in observation_shape)
        if stack_size > 1 and (len(observation_shape) < 2 or observation_shape[-1] != 1):
            raise ValueError(f"frame stacking (stack_size={stack_size}) needs single-channel frames [..., 1]; "
                             f"got observation_shape {observation_shape}. Use stack_size=1 for vector observations.")
        if torso is None:
            if len(observation_shape) != 3:
                raise ValueError(f"the default NatureTorso needs [H, W, C] observations, got {observation_shape}; "
                                 "pass a torso (e.g. MLPTorso) for vector observations")
            torso = NatureTorso(512)
        self.num_actions = int(num_actions)
        self.observation_shape = observation_shape
        self.stack_size = int(stack_size)
        # A scalar observation (a gymnasium Discrete: shape ()) has no axis to stack along; stack_size is 1 for it.
        self.torso_input_shape = (observation_shape[:-1] + (observation_shape[-1] * self.stack_size,)
                                  if observation_shape else ())
        self.torso = torso
        policy = self.dtype_policy
        self.core = ResettingLSTM(lstm_size, dtype=policy)
        self.value_hidden = keras.layers.Dense(hidden_size, activation="relu", name="hidden_value", dtype=policy)
        self.value_head = keras.layers.Dense(1, name="value_head", dtype=policy)
        self.advantage_hidden = keras.layers.Dense(hidden_size, activation="relu", name="hidden_advantage",
                                                   dtype=policy)
        self.advantage_head = keras.layers.Dense(self.num_actions, use_bias=False, name="advantage_head",
                                                 dtype=policy)

    def initial_state(self, batch_size) -> AgentState:
        frames = tf.zeros([batch_size, *self.observation_shape[:-1], self.stack_size - 1], tf.uint8)
        return AgentState(core_state=self.core.initial_state(batch_size), frame_stacking_state=frames)

    def call(self, prev_actions, env_outputs: EnvOutput, agent_state: AgentState, unroll: bool = False):
        """prev_actions int ``[(T,) B]``, env_outputs ``[(T,) B, ...]``, agent_state ``[B, ...]`` ->
        ``(DQNOutput(q_values [(T,) B, A]), new AgentState)``."""
        if not unroll:
            prev_actions, env_outputs = tf.nest.map_structure(
                lambda t: tf.expand_dims(t, 0), (prev_actions, env_outputs))
        outputs, agent_state = self._unroll(prev_actions, env_outputs, AgentState(*agent_state))
        if not unroll:
            outputs = tf.nest.map_structure(lambda t: tf.squeeze(t, 0), outputs)
        return outputs, agent_state

    def dueling_heads(self, core_output) -> tuple[tf.Tensor, tf.Tensor]:
        """core_output ``[..., lstm_size]`` -> (q_values ``[..., A]``, value ``[...]``)."""
        value = self.value_head(self.value_hidden(core_output))
        advantage = self.advantage_head(self.advantage_hidden(core_output))
        advantage -= tf.reduce_mean(advantage, axis=-1, keepdims=True)
        return value + advantage, tf.squeeze(value, -1)

    def _unroll(self, prev_actions, env_outputs: EnvOutput, agent_state: AgentState):
        done = tf.cast(env_outputs.done, tf.bool)
        num_steps, batch_size = tf.shape(done)[0], tf.shape(done)[1]
        if self.dict_observations:
            # The torso is feed-forward: one call on all T * B observations of each key.
            torso_input = tf.nest.map_structure(
                lambda t: tf.reshape(t, tf.concat([[-1], tf.shape(t)[2:]], 0)), env_outputs.observation)
            frame_state = agent_state.frame_stacking_state
        else:
            observation = tf.convert_to_tensor(env_outputs.observation)
            if self.stack_size > 1 and observation.dtype != tf.uint8:
                raise ValueError(f"frame stacking keeps uint8 frames; got observations of dtype {observation.dtype}")
            frames, frame_state = stack_frames(observation, agent_state.frame_stacking_state, done, self.stack_size)
            torso_input = tf.reshape(frames, [-1, *self.torso_input_shape])
        features = tf.cast(self.torso(torso_input), tf.float32)
        features = tf.reshape(features, [num_steps, batch_size, features.shape[-1]])
        reward = tf.cast(env_outputs.reward, tf.float32)[..., None]
        one_hot = tf.one_hot(tf.cast(prev_actions, tf.int32), self.num_actions)
        core_input = tf.concat([features, reward, one_hot], axis=-1)
        core_output, core_state = self.core(core_input, done, agent_state.core_state)
        q_values, _ = self.dueling_heads(core_output)
        return DQNOutput(q_values=q_values), AgentState(core_state=core_state, frame_stacking_state=frame_state)
