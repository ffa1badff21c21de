"""Agents: one folder per algorithm, each registered here by name with its config class and agent class.

Importing this package does not import TensorFlow: a registration names its classes as ``module:attribute``
paths, and ``make_agent`` imports the agent module on demand. An agent is anything that follows the
``seed_rl.types.Agent`` protocol; registering it is all it takes for the CLI (``--agent=NAME`` and its config's
fields as flags), the learner, ``seed-rl eval`` and the agent contract suite (``tests/agents/test_contract.py``)
to use it. See docs/architecture.md, "How to add an agent".
"""

from __future__ import annotations

import importlib
from typing import Any, NamedTuple

from seed_rl.types import Agent


class AgentEntry(NamedTuple):
    name: str
    config_path: str
    """``module:Class`` of the agent's frozen config dataclass (imports no TensorFlow)."""
    agent_path: str
    """``module:Class`` of the agent, called as ``cls(config, observation_spec, action_spec, num_envs=,
    num_eval_envs=)``."""


_REGISTRY: dict[str, AgentEntry] = {}


def register_agent(name: str, config_path: str, agent_path: str) -> None:
    """Registers agent ``name``; registering a name twice with other classes is an error."""
    entry = AgentEntry(name, config_path, agent_path)
    if name in _REGISTRY and _REGISTRY[name] != entry:
        raise ValueError(f"agent {name!r} is already registered as {_REGISTRY[name]}")
    _REGISTRY[name] = entry


register_agent("vtrace", "seed_rl.agents.vtrace.config:VTraceConfig", "seed_rl.agents.vtrace.agent:VTraceAgent")
register_agent("r2d2", "seed_rl.agents.r2d2.config:R2D2Config", "seed_rl.agents.r2d2.agent:R2D2Agent")
# The on-policy family's named agents: one agent class, a config each (their defaults differ).
_ON_POLICY = "seed_rl.agents.policy_gradient"
register_agent("ppo", f"{_ON_POLICY}.config:PPOConfig", f"{_ON_POLICY}.agent:OnPolicyAgent")
register_agent("awr", f"{_ON_POLICY}.config:AWRConfig", f"{_ON_POLICY}.agent:OnPolicyAgent")
register_agent("vmpo", f"{_ON_POLICY}.config:VMPOConfig", f"{_ON_POLICY}.agent:OnPolicyAgent")
register_agent("sac", "seed_rl.agents.sac.config:SACConfig", "seed_rl.agents.sac.agent:SACAgent")

AGENT_NAMES = tuple(_REGISTRY)
"""The agents this package ships (``agent_names()`` also lists agents registered later)."""


def agent_names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def _entry(name: str) -> AgentEntry:
    if name not in _REGISTRY:
        raise ValueError(f"unknown agent {name!r}; known agents: {', '.join(_REGISTRY)}")
    return _REGISTRY[name]


def _load(path: str) -> Any:
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


def config_class(name: str) -> type:
    return _load(_entry(name).config_path)


def make_agent(name: str, config: Any, observation_spec, action_spec, num_envs: int = 1,
               num_eval_envs: int = 0) -> Agent:
    """Builds agent ``name``; ``num_envs``/``num_eval_envs`` describe the env-id layout (R2D2's per-env epsilon)."""
    cls = _load(_entry(name).agent_path)
    return cls(config, observation_spec, action_spec, num_envs=num_envs, num_eval_envs=num_eval_envs)
