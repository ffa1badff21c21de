"""A user's own gymnasium env, outside the package: importing this module registers ``SeedRlCorridor-v0``.

Selected as ``EnvConfig(family="classic", name="tests.envs.custom_env_module:SeedRlCorridor-v0")`` (or
``seed-rl train --env=classic --env_name=tests.envs.custom_env_module:SeedRlCorridor-v0``): the ``module:EnvId``
form makes every process that creates the env import this module first, actor subprocesses included.

``Corridor``: cells ``0..length-1``, the agent starts in cell 0 and observes the one-hot ``float32 [length]`` code
of its cell. Action 1 moves right, action 0 left (walls stop it). Reaching the last cell gives reward 1 and ends
the episode (``terminated``); ``max_episode_steps`` (20) truncates it. Deterministic: the seed changes nothing.

``SeedRlExtremeReward-v0`` is a buggy one (``EXTREME_NAME``): the same corridor whose every step pays 3e38, a
finite reward near float32's largest value, as a reward-scale bug would (issue 31).
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

ENV_ID = "SeedRlCorridor-v0"
NAME = f"{__name__}:{ENV_ID}"
"""What ``EnvConfig.name`` / ``--env_name`` says to select the env."""


class Corridor(gymnasium.Env):
    """Walk right along a corridor of ``length`` cells; reward 1 at its end."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, length: int = 4):
        self.length = int(length)
        self.observation_space = spaces.Box(0.0, 1.0, shape=(self.length,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.position = 0

    def _observe(self) -> np.ndarray:
        obs = np.zeros(self.length, np.float32)
        obs[self.position] = 1.0
        return obs

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.position = 0
        return self._observe(), {}

    def step(self, action: Any):
        move = 1 if int(action) == 1 else -1
        self.position = min(max(self.position + move, 0), self.length - 1)
        terminated = self.position == self.length - 1
        return self._observe(), float(terminated), terminated, False, {}


gymnasium.register(id=ENV_ID, entry_point=Corridor, max_episode_steps=20)


class ExtremeRewardCorridor(Corridor):
    """The corridor with a reward-scale bug: every step pays 3e38."""

    def step(self, action: Any):
        observation, _, terminated, truncated, info = super().step(action)
        return observation, 3e38, terminated, truncated, info


EXTREME_ID = "SeedRlExtremeReward-v0"
EXTREME_NAME = f"{__name__}:{EXTREME_ID}"
gymnasium.register(id=EXTREME_ID, entry_point=ExtremeRewardCorridor, max_episode_steps=20)
