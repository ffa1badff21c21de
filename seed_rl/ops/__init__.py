"""Pure TensorFlow RL math: V-trace targets and parametric action distributions.

Everything here is a pure function (or a stateless object of them): no flags, no logging, no I/O.
"""

from seed_rl.ops.distributions import Categorical, get_distribution
from seed_rl.ops.vtrace import (
    VTraceFromLogitsReturns,
    VTraceReturns,
    from_importance_weights,
    from_logits,
)

__all__ = [
    "Categorical",
    "VTraceFromLogitsReturns",
    "VTraceReturns",
    "from_importance_weights",
    "from_logits",
    "get_distribution",
]
