"""Environment factories: one gymnasium.Env per env id, for every registered family, and their specs.

``create_environment(config, env_id)`` creates one env (the ``create_env_fn(env_id, config)`` of the original).
It looks the family up in the registry (`seed_rl.envs.registry`), resolves ``config.options`` to the family's
options dataclass and calls the family's factory. Actors create their envs in batches, one per group of envs they
step for a message: ``create_env_batch(config, env_ids)`` (`seed_rl.envs.batch`), the family's batched engine
where it has one and the config asks for it, else ``create_environment``'s envs stepped one after the other. The
families registered here:

* ``classic``: any gymnasium id, or ``module:EnvId`` (`seed_rl.envs.classic`), e.g. CartPole-v1.
* ``atari``: ALE games preprocessed as in SEED RL (`seed_rl.envs.atari`); needs ale-py and opencv.
* ``mujoco``: gymnasium's MuJoCo v5 tasks as the original prepares them (`seed_rl.envs.mujoco`); needs mujoco.
* ``football``: Google Research Football scenarios, SMM observations packed as the original (`seed_rl.envs.football`);
  needs gfootball (scripts/install_football.sh).
* ``dmlab``: DeepMind Lab levels as the original (`seed_rl.envs.dmlab`); needs deepmind_lab, built from source.
* ``test``: deterministic fakes for tests (`seed_rl.envs.testing`).

A new family is a module that defines its `EnvFamily`, plus one ``register_family`` line below.

Env ``env_id`` is seeded with ``config.seed + env_id`` on its first reset. Environments are plain gymnasium envs:
``step`` returns ``(observation, reward, terminated, truncated, info)``; time limits are ``truncated``.

This package imports no TensorFlow (actors import it), and imports ale_py and cv2 only when an Atari env is
created (gfootball and deepmind_lab likewise). See docs/environments.md.
"""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium

from seed_rl.config import EnvConfig
from seed_rl.envs import atari, classic, dmlab, football, mujoco, testing
from seed_rl.envs.atari import ATARI_57, AtariOptions
from seed_rl.envs.batch import EnvBatch, EnvStep, SerialEnvBatch
from seed_rl.envs.classic import CastObservation, SeedOnFirstReset
from seed_rl.envs.registry import (
    EnvFamily,
    family_names,
    get_family,
    register_family,
    resolve_env_config,
    reward_itself,
)
from seed_rl.envs.specs import action_space_spec, action_spec, observation_space_spec, observation_spec
from seed_rl.envs.testing import TEST_ENVS
from seed_rl.types import ArraySpec, ObservationSpec

__all__ = [
    "ATARI_57",
    "TEST_ENVS",
    "AtariOptions",
    "EnvBatch",
    "EnvFamily",
    "EnvStep",
    "action_space_spec",
    "action_spec",
    "create_env_batch",
    "create_environment",
    "env_specs",
    "family_names",
    "get_family",
    "observation_space_spec",
    "observation_spec",
    "register_family",
    "resolve_env_config",
    "reward_itself",
]

register_family(classic.FAMILY)
register_family(atari.FAMILY)
register_family(mujoco.FAMILY)
register_family(football.FAMILY)
register_family(dmlab.FAMILY)
register_family(testing.FAMILY)


def create_environment(config: EnvConfig, env_id: int) -> gymnasium.Env:
    """Creates env ``env_id`` of ``config`` (an EnvConfig), seeded with ``config.seed + env_id``.

    The family's factory gets ``config`` with its ``options`` resolved (`resolve_env_config`). The seed is
    applied by the first ``reset()`` that passes no seed of its own.

    Raises:
      ValueError: unknown family, options that are not the family's, unknown gymnasium id / Atari game / test
        env name, or a negative seed.
    """
    if int(env_id) < 0:
        raise ValueError(f"env_id must be >= 0, got {env_id}")
    family = get_family(config.family)
    env = family.factory(resolve_env_config(config), int(env_id))
    if isinstance(env.observation_space, gymnasium.spaces.Tuple):
        # The spec of a Tuple is the dict of its elements (seed_rl.envs.specs): a family that does not cast its
        # observations (the classic one does) gets them as that dict here.
        env = CastObservation(env)
    return SeedOnFirstReset(env, seed=int(config.seed) + int(env_id))


def create_env_batch(config: EnvConfig, env_ids: Sequence[int]) -> EnvBatch:
    """The envs ``env_ids`` of ``config`` as one `EnvBatch` (what an actor steps for one message): the family's
    batched engine (its ``batch_factory``) where it has one and ``config`` asks for it, else a `SerialEnvBatch` of
    ``create_environment``'s envs. Env ``i`` is seeded with ``config.seed + i`` on its first reset either way.

    Raises:
      ValueError: as `create_environment`, and an engine the config asks for that cannot run here.
    """
    if any(int(i) < 0 for i in env_ids):
        raise ValueError(f"env ids must be >= 0, got {list(env_ids)}")
    family = get_family(config.family)
    config = resolve_env_config(config)
    if family.batch_factory is not None:
        batch = family.batch_factory(config, [int(i) for i in env_ids])
        if batch is not None:
            return batch
    return SerialEnvBatch(lambda env_id: create_environment(config, env_id), env_ids)


def env_specs(config: EnvConfig) -> tuple[ObservationSpec, ArraySpec]:
    """(observation spec, action spec) of ``config``'s environment: from the family's ``spaces`` rule where it has
    one (no env is created: the learner of a Football or DMLab run needs no engine), else read from env 0
    (created, then closed)."""
    family = get_family(config.family)
    if family.spaces is not None:
        observation_space, action_space = family.spaces(resolve_env_config(config))
        return observation_space_spec(observation_space), action_space_spec(action_space)
    env = create_environment(config, 0)
    try:
        return observation_spec(env), action_spec(env)
    finally:
        env.close()
