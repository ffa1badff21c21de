"""Pure TensorFlow RL math: V-trace targets, n-step double-Q targets, value rescaling, action distributions,
replay priorities; plus the spec and layout helpers (``specs``, ``unrolls``) that agents and the learner share.

Everything here is a pure function (or a stateless object of them): no flags, no logging, no I/O.
"""

from seed_rl.ops.distributions import Categorical, get_distribution
from seed_rl.ops.nstep import double_q_bootstrap, n_step_bellman_target
from seed_rl.ops.priorities import sequence_priorities
from seed_rl.ops.unrolls import time_major
from seed_rl.ops.value_rescaling import inverse_value_rescaling, value_rescaling
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
    "double_q_bootstrap",
    "from_importance_weights",
    "from_logits",
    "get_distribution",
    "inverse_value_rescaling",
    "n_step_bellman_target",
    "sequence_priorities",
    "time_major",
    "value_rescaling",
]
