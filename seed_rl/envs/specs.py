"""Observation and action specs (`seed_rl.types.ArraySpec`) read from gymnasium spaces.

The learner sizes its tables and networks from these specs, and the handshake compares the actor's specs with the
learner's, so they hold plain Python values only (tuples, ints, floats, lists), never numpy arrays: two specs built
from the same space compare equal with ``==``.

Mapping (unbatched, as produced by the envs of `seed_rl.envs`):

==============================  =============================================================================
space                           spec
==============================  =============================================================================
``Box``                         ``shape``, ``dtype`` name, ``minimum``/``maximum`` (a scalar when the bound is
                                the same for every element, else a nested list)
``Discrete(n)``                 ``shape ()``, ``dtype 'int32'``, ``num_values n`` (actions must start at 0)
``MultiDiscrete`` (same n)      ``shape (d,)``, ``dtype 'int32'``, ``num_values n`` (an observation may have
                                a different n per element: ``num_values`` is the largest)
``MultiBinary``                 ``shape``, ``dtype 'int8'``, ``num_values 2``
``Dict`` of the above           a flat ``dict`` of specs (observations only; nested dicts are refused)
``Tuple`` of the above          the ``dict`` of its elements under the keys ``tuple_keys(n)`` (``'0'``, ``'1'``,
                                ...; zero-padded from eleven elements on, so that sorted keys keep the tuple's
                                order). Observations only; every family's envs produce such dicts
                                (`seed_rl.envs.classic.CastObservation`, applied by ``create_environment``)
==============================  =============================================================================

The networks one-hot encode discrete observations (int32 with ``num_values``; `seed_rl.networks.torsos`).
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from seed_rl.types import ArraySpec, ObservationSpec

__all__ = ["action_space_spec", "action_spec", "observation_space_spec", "observation_spec", "space_to_spec",
           "tuple_as_dict", "tuple_keys"]


def observation_spec(env: gymnasium.Env) -> ObservationSpec:
    """The spec of one (unbatched) observation of ``env``: an ArraySpec, or a flat dict of them."""
    return observation_space_spec(env.observation_space)


def tuple_keys(size: int) -> list[str]:
    """The dict keys of a ``Tuple`` observation's ``size`` elements: their indices, zero-padded to one width so that
    sorted keys (the networks' and tables' order) are the tuple's order."""
    width = len(str(max(size - 1, 0)))
    return [f"{i:0{width}d}" for i in range(size)]


def tuple_as_dict(space: spaces.Tuple) -> spaces.Dict:
    """A Tuple space as the Dict of its elements under `tuple_keys`: the one place the two are matched."""
    return spaces.Dict(dict(zip(tuple_keys(len(space.spaces)), space.spaces)))


def observation_space_spec(space: spaces.Space) -> ObservationSpec:
    """The spec of one observation of ``space``: an ArraySpec, or a flat dict of them (a Dict's, or a Tuple's under
    `tuple_keys`)."""
    if isinstance(space, spaces.Tuple):
        space = tuple_as_dict(space)
    if isinstance(space, spaces.Dict):
        specs = {}
        for key, subspace in space.spaces.items():
            if isinstance(subspace, (spaces.Dict, spaces.Tuple)):
                raise ValueError(  # noqa: TRY004 - one error type for every unsupported space
                    f"observation key {key!r} holds a nested {type(subspace).__name__} space; only a flat "
                    "Dict of arrays is supported"
                )
            specs[str(key)] = space_to_spec(subspace, what=f"observation[{key!r}]", observation=True)
        return specs
    return space_to_spec(space, what="observation", observation=True)


def action_spec(env: gymnasium.Env) -> ArraySpec:
    """The spec of one (unbatched) action of ``env``."""
    return action_space_spec(env.action_space)


def action_space_spec(space: spaces.Space) -> ArraySpec:
    """The spec of one action of ``space``."""
    if isinstance(space, spaces.Dict):
        raise ValueError(  # noqa: TRY004 - one error type for every unsupported space
            "Dict action spaces are not supported; actions must be a single array"
        )
    return space_to_spec(space, what="action")


def space_to_spec(space: spaces.Space, what: str = "space", observation: bool = False) -> ArraySpec:
    """Converts one non-composite gymnasium space into an ArraySpec (see the module docstring). An
    ``observation``'s MultiDiscrete may have a different number of values per element."""
    if isinstance(space, spaces.Box):
        dtype = np.dtype(space.dtype)
        return ArraySpec(
            shape=tuple(int(d) for d in space.shape),
            dtype=dtype.name,
            minimum=_bound(space.low, dtype),
            maximum=_bound(space.high, dtype),
        )
    if isinstance(space, spaces.Discrete):
        if int(space.start) != 0:
            raise ValueError(
                f"{what}: Discrete space with start={int(space.start)}; seed_rl expects values 0..n-1"
            )
        return ArraySpec(shape=(), dtype="int32", num_values=int(space.n))
    if isinstance(space, spaces.MultiDiscrete):
        nvec = np.asarray(space.nvec)
        starts = np.asarray(getattr(space, "start", np.zeros_like(nvec)))
        if nvec.size == 0 or (not observation and np.any(nvec != nvec.flat[0])) or np.any(starts != 0):
            same = "" if observation else " have the same number of values in every dimension and"
            raise ValueError(f"{what}: MultiDiscrete space {space} must{same} start at 0"
                             + ("" if nvec.size else " and have at least one element"))
        return ArraySpec(shape=tuple(nvec.shape), dtype="int32", num_values=int(nvec.max()))
    if isinstance(space, spaces.MultiBinary):
        return ArraySpec(shape=tuple(int(d) for d in space.shape), dtype="int8", num_values=2)
    raise ValueError(
        f"{what}: unsupported gymnasium space {type(space).__name__} ({space}); supported: Box, Discrete, "
        "MultiDiscrete, MultiBinary and (observations only) a flat Dict or Tuple of these"
    )


def _bound(bound: np.ndarray, dtype: np.dtype) -> Any:
    """A Box bound as a plain Python value: a scalar when uniform, else a (nested) list."""
    values = np.asarray(bound)
    python_type = float if np.issubdtype(dtype, np.floating) else int
    if values.size and np.all(values == values.flat[0]):
        return python_type(values.flat[0])
    if np.issubdtype(dtype, np.floating):
        return values.astype(np.float64).tolist()
    return values.astype(np.int64).tolist()
