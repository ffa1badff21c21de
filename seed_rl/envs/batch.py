"""A batch of environments stepped together: what an actor steps for one message.

An actor splits its envs into groups (``actor_env_groups``) and sends one message per group step; each group is
one `EnvBatch`. `seed_rl.envs.create_env_batch` asks the env family for a batched engine (its ``batch_factory``,
e.g. Atari's ``--atari_engine=ale_vector``) and otherwise builds a `SerialEnvBatch`, which steps gymnasium envs
one after the other: the same envs `seed_rl.envs.create_environment` makes, so the two ways differ only in who
loops over the envs.

The contract every batch keeps (the actor relies on it):

* ``reset(indices)`` starts a new episode of those envs and returns their first observations. The first reset of
  an env seeds it with ``config.seed + env_id`` (the seeding of `seed_rl.envs.create_environment`).
* ``step(indices, actions)`` steps the envs at ``indices`` (positions in ``env_ids``) with one action each and
  returns one `EnvStep` per index, in that order. An env whose episode ended in the step (terminated or truncated)
  has been reset already: its `EnvStep` holds the last observation of the episode and, in ``reset_observation``,
  the first one of the next. Envs left out of ``indices`` may be stepped too (a vector engine steps them all), so
  the caller must reset them before it steps them again; the actor leaves out only envs it starts again.
* An env that fails in ``step`` (a gymnasium env that raises, which the serial batch then re-creates; an action
  the Atari engine does not have, whose env it then resets) has ``error`` set in its `EnvStep` and the first
  observation of a new episode in ``reset_observation``; the caller starts it as a new run. The other envs of the
  step are not affected.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

import gymnasium

__all__ = ["EnvBatch", "EnvStep", "SerialEnvBatch"]

log = logging.getLogger("seed_rl.envs")


class EnvStep(NamedTuple):
    """What one env of a batch returned for one step."""

    observation: Any
    """The observation after the step; when the episode ended, its last one (the terminal observation)."""
    reward: float
    terminated: bool
    truncated: bool
    info: Mapping[str, Any]
    reset_observation: Any = None
    """The first observation of the next episode when this step ended one (or raised), else None."""
    error: BaseException | None = None
    """Why the env failed; the batch started it again (``reset_observation`` is its first observation)."""


class EnvBatch(Protocol):
    """Envs stepped together; see the module docstring for the contract."""

    @property
    def env_ids(self) -> tuple[int, ...]: ...

    @property
    def observation_space(self) -> gymnasium.spaces.Space:
        """The space of one env's observation (every env of a batch has the same spaces)."""

    @property
    def action_space(self) -> gymnasium.spaces.Space: ...

    def reset(self, indices: Sequence[int]) -> list[Any]: ...

    def step(self, indices: Sequence[int], actions: Sequence[Any]) -> list[EnvStep]: ...

    def close(self) -> None: ...


class SerialEnvBatch:
    """gymnasium envs, one per env id, stepped one after the other; an env that raises is re-created alone.

    ``make_env(env_id)`` creates env ``env_id`` (seeded on its first reset, as `seed_rl.envs.create_environment`
    does). The envs are created here, so a failing factory fails the constructor.
    """

    def __init__(self, make_env: Callable[[int], gymnasium.Env], env_ids: Sequence[int]):
        self.env_ids = tuple(int(i) for i in env_ids)
        if not self.env_ids:
            raise ValueError("an env batch needs at least one env id")
        self._make_env = make_env
        self.envs: list[gymnasium.Env | None] = []
        try:
            for env_id in self.env_ids:
                self.envs.append(make_env(env_id))
        except BaseException:
            self.close()
            raise
        self.observation_space = self._env(0).observation_space
        self.action_space = self._env(0).action_space

    def _env(self, index: int) -> gymnasium.Env:
        env = self.envs[index]
        if env is None:
            raise RuntimeError(f"env {self.env_ids[index]} of this batch is closed")
        return env

    def reset(self, indices: Sequence[int]) -> list[Any]:
        return [self._env(i).reset()[0] for i in indices]

    def step(self, indices: Sequence[int], actions: Sequence[Any]) -> list[EnvStep]:
        out = []
        for i, action in zip(indices, actions):
            env = self._env(i)
            try:
                obs, reward, terminated, truncated, info = env.step(action)
            except Exception as e:
                out.append(self._recreate(i, e))
                continue
            reset_obs = env.reset()[0] if terminated or truncated else None
            out.append(EnvStep(obs, float(reward), bool(terminated), bool(truncated), info or {}, reset_obs))
        return out

    def _recreate(self, index: int, error: Exception) -> EnvStep:
        try:
            self._env(index).close()
        except Exception:  # closing a broken env must not stop the actor
            log.debug("closing env %d failed", self.env_ids[index], exc_info=True)
        self.envs[index] = None
        self.envs[index] = self._make_env(self.env_ids[index])
        obs = self._env(index).reset()[0]
        return EnvStep(obs, 0.0, False, False, {}, obs, error)

    def close(self) -> None:
        for index, env in enumerate(self.envs):
            if env is not None:
                self.envs[index] = None
                env.close()
