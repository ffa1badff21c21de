"""V-trace (IMPALA) agent. ``VTraceConfig`` imports no TensorFlow; the agent is loaded on first access."""

from seed_rl.agents.vtrace.config import VTraceConfig

__all__ = ["AgentOutput", "VTraceAgent", "VTraceConfig"]


def __getattr__(name):
    if name in ("AgentOutput", "VTraceAgent"):
        from seed_rl.agents.vtrace import agent

        return getattr(agent, name)
    raise AttributeError(f"module 'seed_rl.agents.vtrace' has no attribute {name!r}")
