"""Classic gymnasium environments (any registered id, CartPole-v1 by default) and the generic wrappers.

The ``classic`` family (`FAMILY`) takes a gymnasium id, or gymnasium's ``module:EnvId`` form: the module is
imported first, and importing it registers ``EnvId`` (with ``gymnasium.register``). That is how a user's own env
runs without editing this package; every process that creates the env imports the module, so actor
subprocesses need it on their ``PYTHONPATH`` too. The family takes no options and counts the env's reward as the
raw reward.

The generic wrappers are shared by every family:

* `CastObservation` makes observations numpy arrays of one fixed dtype, the one the spec announces (float Boxes
  become float32; Discrete observations become int32 scalars counted from 0; a Tuple becomes a Dict).
* `ActionRepeat` repeats an action ``k`` times and sums the rewards (the ``num_action_repeats`` of non-Atari
  families; Atari does its frame skip in `seed_rl.envs.atari.AtariPreprocessing`).
* `SeedOnFirstReset` stores the env's seed so that the first ``reset()`` without a seed uses it.
* `UnitBoxActions` rescales a bounded float Box action space to float32 [-1, 1] in every dimension (gymnasium's
  ``RescaleAction``; the original's ``UniformBoundActionSpaceWrapper``): the classic and mujoco families apply
  it, so that Pendulum-v1's [-2, 2] torque is the [-1, 1] action the continuous policies produce. A Discrete (or
  MultiDiscrete) action space that starts elsewhere than 0 (``Discrete(3, start=-1)``) becomes ``0..n-1``, the
  start added back on the way to the env.

Time limits registered with the gymnasium id (CartPole-v1: 500 steps) stay gymnasium's ``TimeLimit``, so they are
reported as ``truncated`` (sent as ``abandoned``), never as ``terminated``.
"""

from __future__ import annotations

import difflib
import importlib
import sys
from typing import TYPE_CHECKING, Any, SupportsFloat

import gymnasium
import numpy as np
from gymnasium import spaces

from seed_rl.envs.registry import EnvFamily
from seed_rl.envs.specs import tuple_as_dict

if TYPE_CHECKING:
    from seed_rl.config import EnvConfig

__all__ = [
    "FAMILY",
    "ActionRepeat",
    "CastObservation",
    "SeedOnFirstReset",
    "UnitBoxActions",
    "create_classic_environment",
]


def create_classic_environment(name: str, num_action_repeats: int = 1) -> gymnasium.Env:
    """``gymnasium.make(name)``, with observations cast to their spec dtype and optional action repeat.

    ``name`` is a registered gymnasium id, or ``module:EnvId``: ``module`` is imported first (it registers
    ``EnvId``), as ``gymnasium.make`` does with that form; a module whose import registers nothing under that id
    but that has a ``register_envs()`` function (MinAtar's ``minatar.gym``) has it called.

    Raises:
      ValueError: ``name`` is not a registered gymnasium id (the message lists close matches), is malformed, or
        names a module that cannot be imported.
    """
    module, env_id = _import_registering_module(name)
    try:
        env = gymnasium.make(env_id)
    except gymnasium.error.DependencyNotInstalled as e:
        # A known id whose extra (Box2D, mujoco) is missing: gymnasium's message says what to install; a ValueError
        # so that the command line says it in one line.
        raise ValueError(f"gymnasium id {name!r} needs a package that is not installed: {e}") from e
    except gymnasium.error.Error as e:
        prefix = f"{module}:" if module else ""
        close = difflib.get_close_matches(env_id, list(gymnasium.registry), n=5, cutoff=0.5)
        hint = f"; close matches: {', '.join(prefix + c for c in close)}" if close else ""
        registers = f" (did importing {module!r} register it?)" if module else ""
        if env_id.startswith("ALE/") and not module:
            game = env_id[4:].split("-")[0]
            registers = (f"; for Atari, --env=atari --env_name={game} trains with the original's preprocessing "
                         f"(frame skip, grey 84 x 84, no-ops), and ale_py:{env_id} is the raw env")
        raise ValueError(
            f"unknown gymnasium id {name!r} for env family 'classic' ({e}){hint}{registers}. Any id in "
            "gymnasium.registry works (e.g. CartPole-v1, Acrobot-v1, Pendulum-v1), and so does module:EnvId for an "
            "id that importing module registers."
        ) from e
    if num_action_repeats > 1:
        env = ActionRepeat(env, num_action_repeats)
    return CastObservation(UnitBoxActions(env))


def _import_registering_module(name: str) -> tuple[str | None, str]:
    """Splits gymnasium's ``module:EnvId`` form and imports ``module``; ``(None, name)`` for a plain id."""
    if ":" not in name:
        return None, name
    module, _, env_id = name.partition(":")
    if not module or not env_id or ":" in env_id:
        raise ValueError(f"malformed gymnasium id {name!r} for env family 'classic': expected EnvId or "
                         "module:EnvId (one colon), e.g. CartPole-v1 or my_envs:Corridor-v0")
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as e:
        missing = e.name or ""
        own = missing == module or module.startswith(missing + ".")
        where = (" Every process that creates the env imports it, actor subprocesses included: put its folder on "
                 "PYTHONPATH (or install it)." if own else "")
        raise ValueError(
            f"cannot import module {module!r} of gymnasium id {name!r} for env family 'classic': {e}.{where}"
        ) from e
    imported = sys.modules[module]
    register = getattr(imported, "register_envs", None)
    if env_id not in gymnasium.registry and callable(register):
        # Some packages register their ids from a function rather than on import (MinAtar's minatar.gym has
        # register_envs()): called once, when importing the module registered nothing under that id.
        register()
    return module, env_id


def _create(config: EnvConfig, env_id: int) -> gymnasium.Env:
    del env_id  # every env id gets the same env; the id only seeds it
    return create_classic_environment(config.name, config.num_action_repeats)


FAMILY = EnvFamily(
    name="classic",
    factory=_create,
    description="any gymnasium id, e.g. CartPole-v1, Acrobot-v1, or module:EnvId for an id that importing module "
    "registers",
)
"""The classic family (registered by `seed_rl.envs`): no options, the env's reward is the raw reward."""


class CastObservation(gymnasium.ObservationWrapper):
    """Produces observations as numpy arrays of the dtype their spec announces.

    Float Boxes become float32 (bounds cast too); integer and bool Boxes keep their dtype; Discrete becomes an
    int32 scalar array, MultiDiscrete an int32 array, MultiBinary an int8 array; a Dict is cast key by key; a
    Tuple becomes a Dict of its elements under the keys `seed_rl.envs.specs.tuple_keys` (``'0'``, ``'1'``, ...).
    """

    def __init__(self, env: gymnasium.Env):
        super().__init__(env)
        space = env.observation_space
        self._tuple_keys: list[str] | None = None
        if isinstance(space, spaces.Tuple):
            space = tuple_as_dict(space)
            self._tuple_keys = list(space.spaces)
        self._starts = _starts_of(space)
        self.observation_space = _cast_space(space)
        self._dtypes = _dtypes_of(self.observation_space)

    def observation(self, observation: Any) -> Any:
        if self._tuple_keys is not None:
            observation = dict(zip(self._tuple_keys, observation))
        if isinstance(self._dtypes, dict):
            return {k: _from_start(np.asarray(observation[k], dtype=d), self._starts[k]) for k, d in self._dtypes.items()}
        return _from_start(np.asarray(observation, dtype=self._dtypes), self._starts)


def _starts_of(space: spaces.Space) -> Any:
    """The first value of a Discrete or MultiDiscrete space (None when it is 0 or the space is neither); a Dict's
    per key."""
    if isinstance(space, spaces.Dict):
        return {k: _starts_of(s) for k, s in space.spaces.items()}
    if isinstance(space, (spaces.Discrete, spaces.MultiDiscrete)):
        start = np.asarray(space.start)
        return None if not np.any(start) else start.astype(np.int32)
    return None


def _from_start(values: np.ndarray, start: Any) -> np.ndarray:
    return values if start is None else np.asarray(values - start, dtype=values.dtype)


def _cast_space(space: spaces.Space) -> spaces.Space:
    if isinstance(space, spaces.Box) and np.issubdtype(space.dtype, np.floating):
        if space.dtype == np.float32:
            return space
        return spaces.Box(
            low=space.low.astype(np.float32),
            high=space.high.astype(np.float32),
            shape=space.shape,
            dtype=np.float32,
        )
    if isinstance(space, spaces.Dict):
        return spaces.Dict({k: _cast_space(s) for k, s in space.spaces.items()})
    return _zero_based(space)


def _zero_based(space: spaces.Space) -> spaces.Space:
    """A Discrete or MultiDiscrete space counted from 0 (the same space when it already is)."""
    if isinstance(space, spaces.Discrete) and int(space.start) != 0:
        return spaces.Discrete(int(space.n))
    if isinstance(space, spaces.MultiDiscrete) and np.any(space.start):
        return spaces.MultiDiscrete(space.nvec)
    return space


def _dtypes_of(space: spaces.Space) -> Any:
    if isinstance(space, spaces.Dict):
        return {k: _dtypes_of(s) for k, s in space.spaces.items()}
    if isinstance(space, spaces.Box):
        return np.dtype(space.dtype)
    if isinstance(space, (spaces.Discrete, spaces.MultiDiscrete)):
        return np.dtype(np.int32)
    if isinstance(space, spaces.MultiBinary):
        return np.dtype(np.int8)
    raise ValueError(
        f"unsupported observation space {type(space).__name__} ({space}); supported: Box, Discrete, "
        "MultiDiscrete, MultiBinary and a flat Dict or Tuple of these"
    )


class UnitBoxActions(gymnasium.ActionWrapper):
    """Takes float32 actions in [-1, 1] and maps them affinely onto the env's bounded float Box action space.

    Envs whose action space is not a float Box, or is one already bounded to [-1, 1], are passed through (a
    float32 [-1, 1] space is set either way, so the spec the learner sees is exactly that). A float Box with an
    infinite bound cannot be rescaled: the env keeps its own space, and the continuous agents refuse it with a
    message that says so. Actions outside [-1, 1] never reach this wrapper: the learner refuses to send actions
    outside the action spec (``seed_rl.learner.inference.ActionCheck``). A Discrete or MultiDiscrete action space
    that starts elsewhere than 0 is presented counted from 0, and the start is added to each action.
    """

    def __init__(self, env: gymnasium.Env):
        super().__init__(env)
        space = env.action_space
        self._inner: gymnasium.Env | None = None
        self._start = _starts_of(space)
        if self._start is not None:
            self.action_space = _zero_based(space)
        if (isinstance(space, spaces.Box) and np.issubdtype(space.dtype, np.floating)
                and np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
            if not (np.all(space.low == -1.0) and np.all(space.high == 1.0)):
                self._inner = gymnasium.wrappers.RescaleAction(env, np.float32(-1.0), np.float32(1.0))
            self.action_space = spaces.Box(np.full(space.shape, -1.0, np.float32), np.full(space.shape, 1.0, np.float32),
                                           dtype=np.float32)

    def action(self, action):
        if self._inner is not None:
            return self._inner.action(np.asarray(action, np.float32))
        if self._start is not None:
            shifted = np.asarray(action) + self._start
            return shifted.item() if shifted.ndim == 0 else shifted
        return action


class ActionRepeat(gymnasium.Wrapper):
    """Repeats each action ``num_repeats`` times and sums the rewards; stops early when the episode ends.

    The observation, flags and info are those of the last inner step.
    """

    def __init__(self, env: gymnasium.Env, num_repeats: int):
        if num_repeats < 1:
            raise ValueError(f"num_repeats must be >= 1, got {num_repeats}")
        super().__init__(env)
        self._num_repeats = num_repeats

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        total_reward = 0.0
        for _ in range(self._num_repeats):
            observation, reward, terminated, truncated, info = self.env.step(action)
            total_reward += float(reward)
            if terminated or truncated:
                break
        return observation, total_reward, terminated, truncated, info


class SeedOnFirstReset(gymnasium.Wrapper):
    """Seeds the env on its first ``reset()`` (unless that call passes its own seed).

    Later resets without a seed continue the env's random stream, as gymnasium intends. The action space is
    seeded too, so that ``env.action_space.sample()`` is reproducible.
    """

    def __init__(self, env: gymnasium.Env, seed: int):
        if seed < 0:
            raise ValueError(f"the env seed must be >= 0 (config.seed + env_id), got {seed}")
        super().__init__(env)
        self._pending_seed: int | None = int(seed)
        self.env.action_space.seed(int(seed))

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        if seed is None:
            seed = self._pending_seed
        self._pending_seed = None
        return self.env.reset(seed=seed, options=options)
