"""MuJoCo continuous-control tasks: gymnasium's v5 ids (``pip install -e .[mujoco]``), as the original's
``mujoco/env.py`` prepares them.

``--env=mujoco --env_name=HalfCheetah-v5`` creates ``gymnasium.make(name)`` with

* observations cast to float32 (`seed_rl.envs.classic.CastObservation`; the original's ``SinglePrecisionWrapper``);
* actions rescaled to [-1, 1] in every dimension (`seed_rl.envs.classic.UnitBoxActions`, gymnasium's
  ``RescaleAction``; the original's ``UniformBoundActionSpaceWrapper``), the bounds the agents' tanh-squashed and
  clipped normal policies produce; a v5 task whose bounds already are [-1, 1] is left as it is;
* the task's time limit (1,000 steps) kept as gymnasium's ``TimeLimit``: reaching it is ``truncated``, sent as
  ``abandoned``, and the agents bootstrap from the last state. The original counted the limit itself and ended
  the episode as if terminated (docs/deviations.md).

Observation normalisation lives in the agents, as in the original (``--normalize_observations`` of the on-policy
agents). ``num_action_repeats`` must be 1, as the original requires. The original's v2 ids (``HalfCheetah-v2``)
belong to gym's mujoco-py bindings, which no longer install: ask for the v5 id (the error says which).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import gymnasium

from seed_rl.envs.classic import CastObservation, UnitBoxActions
from seed_rl.envs.registry import EnvFamily

if TYPE_CHECKING:
    from seed_rl.config import EnvConfig

__all__ = ["FAMILY", "MUJOCO_TASKS", "create_mujoco_environment"]

MUJOCO_TASKS = ("Ant", "HalfCheetah", "Hopper", "Humanoid", "HumanoidStandup", "InvertedDoublePendulum",
                "InvertedPendulum", "Pusher", "Reacher", "Swimmer", "Walker2d")
"""gymnasium's MuJoCo tasks; each has a v5 id (``HalfCheetah-v5``)."""

_VERSION = "v5"


def create_mujoco_environment(name: str, num_action_repeats: int = 1) -> gymnasium.Env:
    """The MuJoCo task ``name`` (e.g. ``HalfCheetah-v5``; a bare ``HalfCheetah`` means its v5 id).

    Raises:
      ValueError: an unknown task, an old version (v2-v4) of a known one, ``num_action_repeats != 1``, or the
        mujoco package is missing (``pip install -e .[mujoco]``).
    """
    if num_action_repeats != 1:
        raise ValueError(f"the mujoco family needs num_action_repeats=1 (the original's rule: the simulator's "
                         f"own frame skip is part of each task), got {num_action_repeats}")
    match = re.fullmatch(r"([A-Za-z0-9]+)(?:-v(\d+))?", name)
    task = match.group(1) if match else None
    if task not in MUJOCO_TASKS:
        raise ValueError(f"unknown MuJoCo task {name!r} for env family 'mujoco'; known tasks (each as -{_VERSION}): "
                         f"{', '.join(MUJOCO_TASKS)}")
    version = match.group(2) if match else None
    if version is not None and f"v{version}" != _VERSION:
        raise ValueError(f"{name!r}: the mujoco family runs gymnasium's {_VERSION} tasks (the original's v2 ids "
                         f"need gym's mujoco-py, which no longer installs); use {task}-{_VERSION}")
    try:
        env = gymnasium.make(f"{task}-{_VERSION}")
    except gymnasium.error.DependencyNotInstalled as e:
        raise ValueError(f"the mujoco family needs the mujoco package (pip install -e '.[mujoco]'): {e}") from e
    return CastObservation(UnitBoxActions(env))


def _create(config: EnvConfig, env_id: int) -> gymnasium.Env:
    del env_id  # every env id gets the same task; the id only seeds it
    return create_mujoco_environment(config.name, config.num_action_repeats)


FAMILY = EnvFamily(
    name="mujoco",
    factory=_create,
    description=f"a gymnasium MuJoCo task, e.g. HalfCheetah-{_VERSION}, Hopper-{_VERSION} (needs .[mujoco])",
)
"""The mujoco family (registered by `seed_rl.envs`): no options, the env's reward is the raw reward."""
