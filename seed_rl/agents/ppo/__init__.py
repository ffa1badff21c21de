"""PPO: the on-policy family's PPO preset as an agent. ``PPOConfig`` imports no TensorFlow; the agent is loaded on
first access."""

from seed_rl.agents.ppo.config import PPOConfig

__all__ = ["PPOAgent", "PPOConfig"]


def __getattr__(name):
    if name == "PPOAgent":
        from seed_rl.agents.ppo import agent

        return agent.PPOAgent
    raise AttributeError(f"module 'seed_rl.agents.ppo' has no attribute {name!r}")
