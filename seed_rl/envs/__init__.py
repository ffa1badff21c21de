"""Environment factories: one gymnasium.Env per env id, for every family, and their specs.

``create_environment(config, env_id)`` is what actors call (the ``create_env_fn(env_id, config)`` of the
original). Families:

* ``classic``: any gymnasium id (`seed_rl.envs.classic`), e.g. CartPole-v1.
* ``atari``: ALE games preprocessed as in SEED RL (`seed_rl.envs.atari`); needs ale-py and opencv.
* ``test``: deterministic fakes for tests (`seed_rl.envs.testing`).

Env ``env_id`` is seeded with ``config.seed + env_id`` on its first reset. Environments are plain gymnasium envs:
``step`` returns ``(observation, reward, terminated, truncated, info)``; time limits are ``truncated``.

This package imports no TensorFlow (actors import it), and imports ale_py and cv2 only when an Atari env is
created. See docs/environments.md.
"""

from __future__ import annotations

import gymnasium

from seed_rl.config import EnvConfig
from seed_rl.envs.atari import ATARI_57
from seed_rl.envs.classic import SeedOnFirstReset, create_classic_environment
from seed_rl.envs.specs import action_spec, observation_spec
from seed_rl.envs.testing import TEST_ENVS, create_test_environment
from seed_rl.types import ArraySpec, ObservationSpec

__all__ = [
    "ATARI_57",
    "FAMILIES",
    "TEST_ENVS",
    "action_spec",
    "create_environment",
    "env_specs",
    "observation_spec",
]

FAMILIES: tuple[str, ...] = ("classic", "atari", "test")
"""The env families available now."""

_LATER_FAMILIES = ("football", "dmlab", "mujoco")
"""Families of the original that come in later issues."""


def create_environment(config: EnvConfig, env_id: int) -> gymnasium.Env:
    """Creates env ``env_id`` of ``config`` (an EnvConfig), seeded with ``config.seed + env_id``.

    The seed is applied by the first ``reset()`` that passes no seed of its own.

    Raises:
      ValueError: unknown family, unknown gymnasium id / Atari game / test env name, or a negative seed.
    """
    if int(env_id) < 0:
        raise ValueError(f"env_id must be >= 0, got {env_id}")
    family = config.family
    if family == "classic":
        env = create_classic_environment(config.name, config.num_action_repeats)
    elif family == "atari":
        from seed_rl.envs.atari import create_atari_environment

        env = create_atari_environment(config)
    elif family == "test":
        env = create_test_environment(config.name, int(env_id), config.num_action_repeats)
    else:
        later = (
            " (not available yet; it comes in a later issue)" if family in _LATER_FAMILIES else ""
        )
        raise ValueError(
            f"unknown env family {family!r}{later}; known families: {', '.join(FAMILIES)}"
        )
    return SeedOnFirstReset(env, seed=int(config.seed) + int(env_id))


def env_specs(config: EnvConfig) -> tuple[ObservationSpec, ArraySpec]:
    """(observation spec, action spec) of ``config``'s environment, read from env 0 (created, then closed)."""
    env = create_environment(config, 0)
    try:
        return observation_spec(env), action_spec(env)
    finally:
        env.close()
