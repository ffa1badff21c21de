"""R2D2 agent. ``R2D2Config`` imports no TensorFlow; the agent is loaded on first access."""

from seed_rl.agents.r2d2.config import R2D2Config

__all__ = ["AgentOutput", "R2D2Agent", "R2D2Config"]


def __getattr__(name):
    if name in ("AgentOutput", "R2D2Agent"):
        from seed_rl.agents.r2d2 import agent

        return getattr(agent, name)
    raise AttributeError(f"module 'seed_rl.agents.r2d2' has no attribute {name!r}")
