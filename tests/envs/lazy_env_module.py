"""A package that registers its gymnasium ids from a function, not on import (as MinAtar's ``minatar.gym`` does):
``register_envs()`` registers ``SeedRlLazyCorridor-v0``, the corridor of ``custom_env_module``."""

from __future__ import annotations

import gymnasium

ENV_ID = "SeedRlLazyCorridor-v0"
NAME = f"{__name__}:{ENV_ID}"
CALLS = []


def register_envs() -> None:
    CALLS.append(1)
    gymnasium.register(id=ENV_ID, entry_point="tests.envs.custom_env_module:Corridor", max_episode_steps=20)
