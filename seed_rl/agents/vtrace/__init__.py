"""V-trace (IMPALA) agent."""

from seed_rl.agents.vtrace.agent import AgentOutput, VTraceAgent
from seed_rl.agents.vtrace.config import VTraceConfig

__all__ = ["AgentOutput", "VTraceAgent", "VTraceConfig"]
