"""The configurable on-policy family (the original's ``agents/policy_gradient/``) and its named agents PPO, AWR
and V-MPO. The configs import no TensorFlow; the agent is loaded on first access."""

from seed_rl.agents.policy_gradient.config import AWRConfig, OnPolicyConfig, PPOConfig, VMPOConfig

__all__ = ["AWRConfig", "OnPolicyAgent", "OnPolicyConfig", "PPOConfig", "VMPOConfig"]


def __getattr__(name):
    if name == "OnPolicyAgent":
        from seed_rl.agents.policy_gradient import agent

        return agent.OnPolicyAgent
    raise AttributeError(f"module 'seed_rl.agents.policy_gradient' has no attribute {name!r}")
