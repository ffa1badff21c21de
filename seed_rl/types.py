"""Core value types shared by every part of seed_rl.

This module imports numpy only; it is safe to import from actors (no TensorFlow).

Conventions (from the original SEED RL, see docs/architecture.md):

* ``EnvOutput`` is what an environment step produces. When ``done`` is true, ``observation`` is the first
  observation *after the reset* and ``reward`` is the last reward of the finished episode.
* ``abandoned`` marks a truncated episode (time limit): the episode ended but not in a terminal state, so
  algorithms bootstrap through it. ``abandoned`` implies ``done``.
* An unroll holds ``unroll_length + 1`` steps; step ``t`` holds (previous action, EnvOutput_t, AgentOutput_t).
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Protocol, Union

import numpy as np

__all__ = [
    "Agent",
    "ArraySpec",
    "EnvOutput",
    "Nest",
    "ObservationSpec",
    "StepBatch",
    "Unroll",
    "spec_of",
]

Nest = Any
"""A (possibly nested) structure of arrays or tensors: a leaf, a tuple/NamedTuple/list or a dict."""


class EnvOutput(NamedTuple):
    """The outcome of one environment step, as sent by an actor for one env (or a batch of them)."""

    reward: Any
    """float32: the reward of the transition that led to ``observation`` (last reward when ``done``)."""
    done: Any
    """bool: the episode ended with this step; ``observation`` is already the reset observation."""
    observation: Any
    """The observation after the step (after the reset when ``done``); an array or a dict of arrays."""
    abandoned: Any
    """bool: the episode was truncated (time limit), not terminated. Implies ``done``."""
    episode_step: Any
    """int32: steps since the start of the episode that ``observation`` belongs to (0 right after a reset)."""


class Unroll(NamedTuple):
    """A complete unroll of one environment, as produced by the learner's unroll store.

    Leaves are batch-major ``[B, T + 1, ...]`` when they come out of the store and time-major
    ``[T + 1, B, ...]`` when handed to a loss (``agent_state`` is always ``[B, ...]``).
    """

    agent_state: Any
    """The recurrent state of the agent before step 0 of the unroll."""
    prev_actions: Any
    """The action taken before each step (``a_{t-1}``)."""
    env_outputs: EnvOutput
    """The environment outputs ``(r_t, d_t, o_t, ...)``."""
    agent_outputs: Any
    """The agent outputs computed at acting time on ``o_t`` (action ``a_t``, behaviour logits, ...)."""
    policy_version: Any = None
    """int64: the learner step whose weights produced each step's action (for policy-lag summaries)."""


class ArraySpec(NamedTuple):
    """Shape and dtype of one array leaf, without the batch dimension.

    For a discrete action, ``shape == ()``, ``dtype == 'int32'`` and ``num_values`` is the number of actions.
    For a continuous action, ``minimum`` and ``maximum`` hold the bounds (scalars or per-dimension lists).
    """

    shape: tuple[int, ...]
    dtype: str
    num_values: int = 0
    minimum: Any = None
    maximum: Any = None

    def check(self, array: np.ndarray, what: str, batched: bool = True) -> None:
        """Raises ValueError with a readable message if ``array`` does not match this spec."""
        expected_shape = self.shape
        actual_shape = tuple(array.shape[1:]) if batched else tuple(array.shape)
        if np.dtype(array.dtype) != np.dtype(self.dtype):
            raise ValueError(f"{what}: dtype {array.dtype} does not match the learner's spec {self.dtype}")
        if actual_shape != tuple(expected_shape):
            raise ValueError(
                f"{what}: shape {actual_shape} (batch dimension excluded) does not match the learner's "
                f"spec {tuple(expected_shape)}"
            )

    def to_json(self) -> dict:
        return {
            "shape": list(self.shape),
            "dtype": self.dtype,
            "num_values": self.num_values,
            "minimum": _jsonable(self.minimum),
            "maximum": _jsonable(self.maximum),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ArraySpec":
        return cls(
            shape=tuple(int(x) for x in d["shape"]),
            dtype=str(d["dtype"]),
            num_values=int(d.get("num_values", 0)),
            minimum=d.get("minimum"),
            maximum=d.get("maximum"),
        )


ObservationSpec = Union[ArraySpec, Mapping[str, ArraySpec]]
"""A single array spec, or a flat dict of specs for dict observations."""


def _jsonable(x: Any) -> Any:
    if x is None:
        return None
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    return x


def spec_of(array: np.ndarray) -> ArraySpec:
    """The spec of one unbatched array."""
    return ArraySpec(shape=tuple(array.shape), dtype=np.dtype(array.dtype).name)


class StepBatch(NamedTuple):
    """What one actor sends for one step of all of its environments (k rows), as numpy arrays.

    The transport concatenates the StepBatches of several actors into one inference batch.
    """

    env_ids: np.ndarray
    """int32 [k]: global env ids, unique within a message."""
    run_ids: np.ndarray
    """int64 [k]: drawn at random per env on every (re)connection of the actor."""
    env_outputs: EnvOutput
    """Each field [k, ...]; ``observation`` is an array or a flat dict of arrays."""
    raw_rewards: np.ndarray
    """float32 [k]: the unclipped, unscaled reward (e.g. the game score), for episode statistics."""


class Agent(Protocol):
    """What the algorithm-agnostic learner needs from an agent (V-trace, R2D2, ...).

    Tensors are TensorFlow tensors; ``[B]`` is a batch of env rows, unrolls are time-major ``[T + 1, B, ...]``.
    What differs between algorithms is declared by attributes, never probed with ``hasattr``.
    """

    uses_replay: bool
    """False: train on each unroll once from the bounded queue. True: prioritized replay (``initial_priorities``)."""
    num_overlapping_steps: int
    """Extra steps shared by consecutive unrolls beyond the usual one (R2D2's burn-in)."""

    def initial_state(self, batch_size: int) -> Any:
        """The recurrent state of ``batch_size`` fresh envs (a nest of ``[B, ...]`` tensors; ``()`` if none)."""

    def act(self, prev_actions: Any, env_outputs: EnvOutput, agent_state: Any, env_ids: Any = None) -> Any:
        """One inference step: ``(agent_outputs with an .action field, new agent_state)``."""

    def agent_output_spec(self, batch_size: Any = None) -> Any:
        """``tf.TensorSpec`` nest of ``act``'s outputs (with the batch dimension)."""

    def loss(self, unroll: Unroll, weights: Any = None) -> Any:
        """``(loss, metrics)``; scalar metrics are summaries, non-scalar ones per-sequence outputs (priorities)."""

    def initial_priorities(self, unrolls: Unroll) -> Any:
        """Replay agents only: priorities ``[C]`` of freshly completed batch-major unrolls."""

    def after_train_step(self, step: Any) -> Any:
        """Called inside the compiled train step after the update (e.g. target network copies)."""

    @property
    def trainable_variables(self) -> list: ...

    def checkpoint_items(self) -> dict:
        """Trackables to checkpoint (weights by position, see ``seed_rl.networks.checkpoint_variables``)."""

    def make_optimizer(self, total_train_steps: int) -> Any:
        """The Keras optimizer with the agent's learning-rate schedule."""
