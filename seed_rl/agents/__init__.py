"""Agents: one folder per algorithm. ``AGENTS`` maps a name to (config class, agent factory path).

Importing this package does not import TensorFlow; ``make_agent`` imports the agent module on demand.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> (config module:class, agent module:class)
_REGISTRY = {
    "vtrace": ("seed_rl.agents.vtrace.config:VTraceConfig", "seed_rl.agents.vtrace.agent:VTraceAgent"),
    "r2d2": ("seed_rl.agents.r2d2.config:R2D2Config", "seed_rl.agents.r2d2.agent:R2D2Agent"),
}

AGENT_NAMES = tuple(_REGISTRY)


def _load(path: str) -> Any:
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


def config_class(name: str) -> type:
    if name not in _REGISTRY:
        raise ValueError(f"unknown agent {name!r}; known agents: {', '.join(AGENT_NAMES)}")
    return _load(_REGISTRY[name][0])


def make_agent(name: str, config: Any, observation_spec, action_spec, num_envs: int = 1, num_eval_envs: int = 0):
    """Builds agent ``name``; ``num_envs``/``num_eval_envs`` describe the env-id layout (R2D2's per-env epsilon)."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown agent {name!r}; known agents: {', '.join(AGENT_NAMES)}")
    return _load(_REGISTRY[name][1])(config, observation_spec, action_spec, num_envs=num_envs,
                                     num_eval_envs=num_eval_envs)
