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

import dataclasses
import math
from typing import Any, Callable, Mapping, NamedTuple, Optional, Protocol, Union

import numpy as np

__all__ = [
    "Agent",
    "ArraySpec",
    "DICT",
    "EnvOutput",
    "Feed",
    "IMAGE",
    "LossResult",
    "Nest",
    "ObservationSpec",
    "QueueFeed",
    "ReplayFeed",
    "SMALL_IMAGE",
    "SMALL_IMAGE_MAX_PIXELS",
    "SPLIT_MODES",
    "StepBatch",
    "TransitionAgent",
    "Unroll",
    "UpdateSchedule",
    "VECTOR",
    "observation_kind",
    "spec_of",
    "MAX_ONE_HOT_FEATURES",
    "one_hot_depth",
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


SMALL_IMAGE_MAX_PIXELS = 42 * 42
"""An ``[H, W, C]`` observation is a small image when ``H * W`` is at most this: a quarter of Atari's 84 x 84. The
Atari networks downsample by 8 with their first two layers (8x8 stride 4, then 4x4 stride 2): a 42 x 42 frame
leaves them 3 x 3 positions, a 10 x 10 one none (the Nature CNN refuses frames under 36 pixels a side)."""

VECTOR, SMALL_IMAGE, IMAGE, DICT = "vector", "small image", "image", "dict"
"""The kinds of observation that `seed_rl.configs.defaults` chooses a network by, and that the ``multi_input``
network (`seed_rl.networks.multi_input`) encodes each key of a dict observation by."""


def observation_kind(spec: ObservationSpec) -> str:
    """``SMALL_IMAGE`` or ``IMAGE`` for an ``[H, W, C]`` spec of at least 3 x 3 (by ``H * W``), ``DICT`` for a dict
    of specs, ``VECTOR`` for anything else (the MLPs flatten it). One rule for the defaults (which network a run
    gets) and the dict network (which encoder a key gets), so that the two never disagree."""
    if isinstance(spec, Mapping):
        return DICT
    shape = tuple(int(d) for d in spec.shape)
    if len(shape) == 3 and min(shape[0], shape[1]) >= 3:
        return SMALL_IMAGE if shape[0] * shape[1] <= SMALL_IMAGE_MAX_PIXELS else IMAGE
    return VECTOR


MAX_ONE_HOT_FEATURES = 65_536
"""A discrete observation whose one-hot would have more features than this (elements x values) reaches the MLP as
its integers cast to float instead: a first dense layer of 64 on 65,536 inputs already holds 4M weights."""


def one_hot_depth(spec) -> int:
    """The one-hot depth ``MLPTorso`` encodes an observation of ``spec`` with: ``num_values`` for a discrete one
    (int32 with ``num_values``, values ``0..num_values - 1``: gymnasium's ``Discrete`` and ``MultiDiscrete``), 0
    for anything else (MultiBinary's int8 0/1 included: it is its own one-hot) and for a one-hot of more than
    ``MAX_ONE_HOT_FEATURES`` features. ``spec`` None (not known): 0."""
    if not isinstance(spec, ArraySpec) or spec.dtype != "int32" or spec.num_values < 2:
        return 0
    if math.prod(int(d) for d in spec.shape) * spec.num_values > MAX_ONE_HOT_FEATURES:
        return 0
    return int(spec.num_values)


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
    life_lost: Optional[np.ndarray] = None
    """bool [k] or None (all false): the step lost a life and the game goes on (Atari's
    ``--terminal_on_life_loss``). Such a row also has ``done`` set, so that learning treats the step as terminal
    (no bootstrapping across it, a fresh recurrent state), but the episode goes on: its statistics (return, frames,
    steps) keep counting until a ``done`` row without ``life_lost``. Ignored where ``done`` is false or
    ``abandoned`` is set. Never stored in unrolls: only the learner's episode statistics read it."""


@dataclasses.dataclass(frozen=True)
class QueueFeed:
    """The agent trains on each complete unroll once, from the learner's bounded unroll queue (V-trace, PPO).

    The queue is SEED's back-pressure point: when training falls behind, inference blocks and actors wait.
    """

    replays = False
    """Each unroll trains in the step that consumes it (a split schedule may train its transitions)."""

    def insertions_per_step(self, batch_size: int) -> int:
        """Unrolls a training step consumes: the batch."""
        return batch_size


@dataclasses.dataclass(frozen=True)
class ReplayFeed:
    """The agent trains from a prioritized replay of complete unrolls (sequences), with these settings.

    Each training step first inserts ``insertions_per_step(batch_size)`` sequences from the unroll queue
    (blocking, so the learner runs at the actors' pace), waits until ``min_size`` sequences are stored, then
    samples ``batch_size`` sequences with probability ``p_i^priority_exponent / sum_j p_j^priority_exponent`` and
    importance weights ``(N P(i))^-importance_sampling_exponent`` normalised by their maximum.
    """

    capacity: int
    """Sequences the buffer holds; the oldest is overwritten when full."""
    min_size: int
    """Sequences inserted before training starts."""
    replay_ratio: float
    """Times each inserted sequence is replayed on average: ``batch_size / replay_ratio`` are inserted per step."""
    priority_exponent: float = 0.0
    """alpha; 0 samples uniformly."""
    importance_sampling_exponent: float = 0.0
    """beta; 0 gives every sample weight 1."""
    checkpointed: bool = False
    """The buffer is written with each checkpoint and restored on resume."""
    initial_priorities: Optional[Callable[[Unroll], Any]] = dataclasses.field(default=None, compare=False)
    """``batch-major Unroll [C, ...] -> [C]`` priorities of freshly completed sequences (a TF function of
    tensors); None gives every new sequence priority 1."""

    def __post_init__(self) -> None:
        if self.capacity < 1:
            raise ValueError(f"replay capacity must be >= 1, got {self.capacity}")
        if not 0 <= self.min_size <= self.capacity:
            raise ValueError(f"replay min_size must be in [0, capacity={self.capacity}], got {self.min_size}")
        if self.replay_ratio <= 0:
            raise ValueError(f"replay_ratio must be > 0, got {self.replay_ratio}")

    replays = True
    """Sequences train again after the step that inserted them: no per-batch transitions to split."""

    def insertions_per_step(self, batch_size: int) -> int:
        """Sequences inserted per training step (the original's replay-ratio coupling)."""
        return max(1, int(batch_size / self.replay_ratio))


Feed = Union[QueueFeed, ReplayFeed]
"""How an agent is fed: the learner builds a queue source or a replay source from it, and reads nothing else."""


SPLIT_MODES = ("none", "once", "every_epoch")


@dataclasses.dataclass(frozen=True)
class UpdateSchedule:
    """Optimizer updates per training batch: ``epochs`` passes, each over ``minibatches`` disjoint minibatches
    (a fresh shuffle of the batch's sequences per epoch when there is more than one update). V-trace and R2D2 use
    1 x 1, PPO-style agents several of each."""

    epochs: int = 1
    minibatches: int = 1
    shuffle: bool = True
    """False: the same minibatches (consecutive sequences in batch order) in the same order every epoch, the
    original's ``batch_mode=repeat``; True: a fresh permutation per epoch (its ``shuffle``)."""
    split: str = "none"
    """``none``: minibatches of whole sequences, each trained by the agent's ``loss``. Otherwise minibatches of
    single transitions (an agent that declares ``trains_transitions``): the agent's ``prepare_transitions`` runs
    over the whole batch once per training step (``once``, the original's ``batch_mode=split``) or at the start of
    every epoch (``every_epoch``, its ``split_with_advantage_recomputation``), and its ``transition_loss`` trains
    minibatches of the batch's ``T * B`` transitions, freshly shuffled every epoch. The learner reads the mode
    through :attr:`splits_transitions` and :attr:`prepares_every_epoch`."""

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.minibatches < 1:
            raise ValueError(f"epochs and minibatches must be >= 1, got {self.epochs} and {self.minibatches}")
        if self.split not in SPLIT_MODES:
            raise ValueError(f"split must be one of {', '.join(SPLIT_MODES)}, got {self.split!r}")
        if self.split != "none" and not self.shuffle:
            raise ValueError("a split schedule shuffles its transitions every epoch (shuffle=True)")

    @property
    def updates_per_batch(self) -> int:
        return self.epochs * self.minibatches

    @property
    def splits_transitions(self) -> bool:
        """Whether the minibatches hold single transitions (``split`` is not ``none``) rather than sequences."""
        return self.split != "none"

    @property
    def prepares_every_epoch(self) -> bool:
        """Whether a split schedule's ``prepare_transitions`` runs at the start of every epoch (``every_epoch``)
        rather than once per training step (``once``)."""
        return self.split == "every_epoch"

    @property
    def units(self) -> str:
        """What the minibatches hold, in words: ``transitions`` or ``sequences``."""
        return "transitions" if self.splits_transitions else "sequences"

    def check_minibatches(self, count: int, replicas: int = 1) -> None:
        """Refuses a batch of ``count`` units (:attr:`units`) that does not split into ``minibatches`` equal
        minibatches (each split again over ``replicas``)."""
        if count % (self.minibatches * replicas):
            over = f" over {replicas} replicas" if replicas > 1 else ""
            raise ValueError(f"a batch of {count} {self.units} does not split into {self.minibatches} equal "
                             f"minibatches{over}")


class LossResult(NamedTuple):
    """What an agent's ``loss`` returns."""

    loss: Any
    """Scalar tensor to minimise: a mean over the batch's sequences, each weighing the same (the learner's device
    layer averages the replicas' gradients of their slices of a batch, which is then the whole batch's gradient)."""
    metrics: Mapping[str, Any]
    """Scalar tensors for TensorBoard, keyed by namespaced names (``losses/``, ``policy/``, ``q/`` ...). Under a
    multi-replica strategy a name ending in ``max`` or ``min`` is combined across replicas by maximum or minimum,
    any other by the mean."""
    priorities: Any = None
    """Replay agents: new priorities ``[B]`` of the batch's sequences (written back to the buffer); else None."""


class Agent(Protocol):
    """Everything the algorithm-agnostic learner needs from an agent (V-trace, R2D2, ...).

    Tensors are TensorFlow tensors; ``[B]`` is a batch of env rows, unrolls are time-major ``[T + 1, B, ...]``.
    What differs between algorithms is declared here (``feed``, ``schedule``, ``num_overlapping_steps``) and read
    by the learner; the learner never probes an agent with ``getattr`` and never reads its config fields.
    Agents are built by ``seed_rl.agents.make_agent`` and checked by ``tests/agents/test_contract.py``.
    """

    @property
    def feed(self) -> Feed:
        """Queue (each unroll once) or replay (with its declared settings)."""

    @property
    def schedule(self) -> UpdateSchedule:
        """Epochs and minibatches per training batch."""

    @property
    def num_overlapping_steps(self) -> int:
        """Extra steps shared by consecutive unrolls beyond the usual one (R2D2's burn-in)."""

    @property
    def trains_transitions(self) -> bool:
        """Whether the agent trains single transitions (it has :class:`TransitionAgent`'s ``prepare_transitions``
        and ``transition_loss``), which a ``schedule`` that splits transitions needs. False for an agent that trains
        whole sequences only (recurrent ones, replay); the trainer reads it only for a split schedule."""

    def initial_state(self, batch_size: int) -> Any:
        """The recurrent state of ``batch_size`` fresh envs (a nest of ``[B, ...]`` tensors; ``()`` if none)."""

    def act(self, prev_actions: Any, env_outputs: EnvOutput, agent_state: Any, env_ids: Any = None) -> Any:
        """One inference step: ``(agent_outputs, new agent_state)``; ``agent_outputs`` is a NamedTuple of ``[B, ...]``
        tensors with an ``action`` field (what the env gets; the other fields are stored in the unrolls and served
        by the SavedModel by name). ``env_ids`` None means outside training (evaluation, a served SavedModel): the
        agent acts with its evaluation policy."""

    def greedy_action(self, agent_outputs: Any) -> Any:
        """The deterministic action for ``act``'s outputs (argmax of logits or Q-values, a Gaussian's mean)."""

    def agent_output_spec(self, batch_size: Any = None) -> Any:
        """``tf.TensorSpec`` nest of ``act``'s outputs (with the batch dimension)."""

    def loss(self, unroll: Unroll, weights: Any = None) -> LossResult:
        """The loss of a time-major batch; ``weights`` ``[B]`` are importance weights (replay) or None."""

    def update_targets(self, update: Any) -> Any:
        """Called inside the compiled update after optimizer update number ``update`` (1, 2, ...): target
        networks (R2D2's periodic copy, SAC's Polyak average). Returns a bool tensor: whether a target changed."""

    @property
    def trainable_variables(self) -> list: ...

    @property
    def policy_variables(self) -> list:
        """The variables ``act`` reads (what a served policy needs), as ``tf.Variable``s."""

    def checkpoint_items(self) -> dict:
        """Trackables to checkpoint (weights by position, see ``seed_rl.networks.checkpoint_variables``)."""

    def make_optimizer(self, total_updates: int) -> Any:
        """The Keras optimizer with the agent's learning-rate schedule over ``total_updates`` optimizer updates."""


class TransitionAgent(Protocol):
    """What an agent that declares ``trains_transitions`` adds to :class:`Agent`, for a schedule that splits
    transitions (``schedule.split`` not ``none``): training on minibatches of single transitions with per-step
    quantities (advantages, value targets) computed over the whole batch first. Only feed-forward agents can: a
    transition carries no recurrent state. The trainer refuses a split schedule of an agent that does not declare
    ``trains_transitions``."""

    def prepare_transitions(self, unroll: Unroll) -> Any:
        """Per-transition data of a time-major batch ``[T + 1, B]``: a nest of ``[T, B, ...]`` tensors, one entry
        per transition (its inputs and what the agent computes once over the whole batch). Its gradients are not
        taken; it may update statistics (PopArt's)."""

    def transition_loss(self, transitions: Any) -> LossResult:
        """The loss of a minibatch of transitions: ``prepare_transitions``' nest with ``[T, B]`` flattened to
        ``[N]`` and a subset of the rows taken; a mean over the transitions."""
