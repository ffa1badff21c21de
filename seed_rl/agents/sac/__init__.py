"""SAC (Haarnoja et al. 2018): twin critics, a V or Q bootstrap, Polyak target updates, a trainable entropy
coefficient and a uniform replay. ``SACConfig`` imports no TensorFlow; the agent is loaded on first access."""

from seed_rl.agents.sac.config import SACConfig

__all__ = ["SACAgent", "SACConfig"]


def __getattr__(name):
    if name == "SACAgent":
        from seed_rl.agents.sac import agent

        return agent.SACAgent
    raise AttributeError(f"module 'seed_rl.agents.sac' has no attribute {name!r}")
