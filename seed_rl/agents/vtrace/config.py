"""Hyperparameters of the V-trace (IMPALA) agent, with the original's defaults and where they come from."""

from __future__ import annotations

import dataclasses
from typing import Optional

from seed_rl.config import OptimizerConfig, field

NETWORKS = ("impala_deep", "impala_shallow", "gfootball", "small_conv", "mlp", "multi_input")


@dataclasses.dataclass(frozen=True)
class VTraceConfig:
    # Loss (agents/vtrace/learner.py flags of the original).
    discounting: float = field(0.99, "Discount factor gamma.")
    lambda_: float = field(1.0, "V-trace lambda (trace cutting); 1.0 is the IMPALA paper's V-trace.")
    baseline_cost: float = field(0.5, "Weight of the baseline loss (itself 0.5 * mean squared error).")
    entropy_cost: float = field(0.00025, "Initial entropy bonus coefficient.")
    target_entropy: Optional[float] = field(
        None, "If set, the entropy coefficient is adapted (Lagrange-style) to reach this entropy."
    )
    entropy_cost_adjustment_speed: float = field(
        10.0, "Speed of the entropy coefficient adaptation: cost = exp(speed * p)."
    )
    kl_cost: float = field(0.0, "Weight of the KL(behaviour || target) term.")
    max_abs_reward: float = field(0.0, "Clip rewards to [-x, x] in the loss; 0 means no clipping.")
    clip_rho_threshold: float = field(1.0, "rho-bar of V-trace.")
    clip_pg_rho_threshold: float = field(1.0, "rho-bar of the policy-gradient advantage.")
    optimizer: OptimizerConfig = field(
        OptimizerConfig(kind="rmsprop", learning_rate=0.00031866995608948655, lr_schedule="linear", rms_decay=0.99,
                        rms_momentum=0.0, rms_epsilon=0.1, clip_norm=0.0),
        "DMLab main file: RMSprop with linear decay; MuJoCo main file: constant Adam.",
        sources={"kind": "dmlab/vtrace_main.py; its MuJoCo main file: adam",
                 "learning_rate": "dmlab/vtrace_main.py", "lr_schedule": "dmlab/vtrace_main.py: linear",
                 "rms_decay": "dmlab/vtrace_main.py", "rms_momentum": "dmlab/vtrace_main.py",
                 "rms_epsilon": "dmlab/vtrace_main.py", "clip_norm": "the original clips none"})
    # Network.
    network: str = field(
        "impala_deep", "impala_deep or impala_shallow (image observations; IMPALA's deep ResNet or its shallow "
        "2-conv network), gfootball (the original's Football ResNet: 4 sections, lecun-normal init), small_conv "
        "(small images, e.g. 10 x 10: the MinAtar paper's conv 16 3x3 and dense 128), mlp (vector observations) or "
        "multi_input (dict observations: each key encoded by its kind, the features concatenated and mixed). "
        "Not given (no flag, no --config key, no --preset named), the observation spec chooses it "
        "(docs/environments.md, \"Your own env: the defaults and why\")."
    )
    initializer: str = field(
        "keras", "keras (glorot-uniform kernels, the Keras defaults) or orthogonal (OpenAI baselines' and CleanRL's "
        "Atari init: orthogonal kernels with gain sqrt(2) in the torso, 0.01 on the policy head, 1 on the value head, "
        "zero biases)."
    )
    mlp_sizes: tuple = field((64, 64), "Hidden sizes of the MLP torso (mujoco/vtrace_main.py: 2 x 64).")
    separate_value_network: bool = field(
        False, "mlp and multi_input without an LSTM: give the value head its own torso (the original shares one)."
    )
    lstm_size: int = field(256, "LSTM units of the core; 0 for a feed-forward core.")
    use_reward_and_action: bool = field(
        True, "Feed the clipped reward and the one-hot previous action to the core (DMLab/Atari network)."
    )
    # Testing aid: a learner with the policy-gradient sign flipped must fail the learning tests.
    flip_policy_gradient: bool = field(False, "Testing only: flip the policy-gradient sign.")

    def __post_init__(self) -> None:
        if self.network not in NETWORKS:
            raise ValueError(f"network must be one of {', '.join(NETWORKS)}, got {self.network!r}")
        if self.initializer not in ("keras", "orthogonal"):
            raise ValueError(f"initializer must be keras or orthogonal, got {self.initializer!r}")
        if not 0.0 <= self.discounting <= 1.0:
            raise ValueError(f"discounting must be in [0, 1], got {self.discounting}")
        if not 0.0 <= self.lambda_ <= 1.0:
            raise ValueError(f"lambda_ must be in [0, 1], got {self.lambda_}")
