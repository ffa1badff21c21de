"""Hyperparameters of the SAC agent with the original's defaults and their sources.

"learner flags" = agents/sac/learner.py of the original; "main file" = mujoco/sac_main.py (which does not run as
shipped: it imports the missing ``seed_rl.common.google_utils``; docs/deviations.md).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from seed_rl.config import OptimizerConfig, field

BOOTSTRAP_NETS = ("v", "q")
NETWORKS = ("mlp", "lstm")


@dataclasses.dataclass(frozen=True)
class SACConfig:
    # Loss (learner flags).
    discounting: float = field(0.99, "Discount factor gamma.")
    bootstrap_net: str = field("v", "Bootstrap the Q targets from the target V network (v, the SAC paper) or "
                                    "from min of the target critics at a fresh action plus the entropy bonus (q).")
    entropy_cost: float = field(0.01, "Initial entropy coefficient alpha.")
    target_entropy: Optional[float] = field(None, "Adjust alpha so the policy's entropy approaches this (None: "
                                                   "alpha stays fixed); -action_dims is the SAC paper's choice.")
    entropy_cost_adjustment_speed: float = field(1.0, "k of alpha = exp(k p): how fast alpha adapts.")
    max_abs_reward: float = field(0.0, "Clip rewards to [-x, x] in the loss; 0 means no clipping.")
    # Target network (learner flags).
    update_target_every_n_step: int = field(1, "Polyak-update the target network every n optimizer updates.")
    polyak: float = field(0.9, "target <- polyak * target + (1 - polyak) * online; 0 copies the online weights "
                               "(the original's help says 1 does, which its formula contradicts: 1 freezes them).")
    # Replay (learner flags): uniform, unrolls of unroll_length + 1 steps.
    replay_buffer_size: int = field(1_000_000, "Replay capacity in unrolls.")
    replay_buffer_min_size: int = field(256, "Unrolls inserted before training starts (the original: batch_size).")
    replay_ratio: float = field(4.0, "Times each inserted unroll is replayed: batch_size / replay_ratio unrolls are "
                                     "inserted per training step.")
    optimizer: OptimizerConfig = field(
        OptimizerConfig(kind="adam", learning_rate=3e-4, adam_epsilon=1e-7, clip_norm=0.0),
        "Adam with a constant learning rate (main file).",
        sources={"kind": "mujoco/sac_main.py", "learning_rate": "mujoco/sac_main.py", "lr_schedule": "mujoco/sac_main.py",
                 "adam_epsilon": "Keras' default, as the original's tf.keras Adam",
                 "clip_norm": "the original does not clip"})
    # Network (main file): ActorCriticMLP, or the original's ActorCriticLSTM (networks.py; no main file uses it).
    network: str = field("mlp", "mlp (ActorCriticMLP) or lstm (ActorCriticLSTM: per head a pre-MLP, stacked "
                                "LSTMs reset at episode starts, a parallel feed-forward MLP and a post-MLP; the "
                                "state of each unroll's first step is stored in the replay).")
    num_critics: int = field(2, "Q networks; the targets use their minimum.")
    mlp_sizes: tuple = field((256, 256), "network=mlp: hidden sizes of every MLP (the policy, each critic, V).")
    activation: str = field("relu", "Hidden activation of the MLPs (the original's ActorCriticMLP: relu).")
    lstm_sizes: tuple = field((256,), "network=lstm: units of each stacked LSTM layer (the main file's lstm_size).")
    pre_mlp_sizes: tuple = field((256,), "network=lstm: the MLP before the LSTMs (observation, previous action).")
    post_mlp_sizes: tuple = field((256,), "network=lstm: hidden sizes of the MLP after the LSTM and feed-forward "
                                          "outputs (then the head's output layer).")
    ff_mlp_sizes: tuple = field((256,), "network=lstm: the feed-forward MLP beside the LSTMs (observation, and "
                                        "the action for a critic).")
    continuous_distribution: str = field("tanh", "tanh (tanh-squashed normal) or clipped (normal clipped to the "
                                                 "bounds) for continuous actions.")
    # Testing aid: a learner that maximises the negated reward must fail the learning tests.
    flip_reward_sign: bool = field(False, "Testing only: negate rewards in the targets.")

    def __post_init__(self) -> None:
        if self.network not in NETWORKS:
            raise ValueError(f"network must be one of {', '.join(NETWORKS)}, got {self.network!r}")
        if self.bootstrap_net not in BOOTSTRAP_NETS:
            raise ValueError(f"bootstrap_net must be v or q, got {self.bootstrap_net!r}")
        if not 0.0 <= self.polyak <= 1.0:
            raise ValueError(f"polyak must be in [0, 1], got {self.polyak}")
        if self.update_target_every_n_step < 1:
            raise ValueError(f"update_target_every_n_step must be >= 1, got {self.update_target_every_n_step}")
        if self.num_critics < 1:
            raise ValueError(f"num_critics must be >= 1, got {self.num_critics}")
        if self.replay_ratio <= 0:
            raise ValueError(f"replay_ratio must be > 0, got {self.replay_ratio}")
        if not 0 <= self.replay_buffer_min_size <= self.replay_buffer_size:
            raise ValueError("replay_buffer_min_size must be in [0, replay_buffer_size]")
        if self.entropy_cost <= 0 or self.entropy_cost_adjustment_speed <= 0:
            raise ValueError("entropy_cost and entropy_cost_adjustment_speed must be > 0")
        if self.continuous_distribution not in ("tanh", "clipped"):
            raise ValueError(f"continuous_distribution must be tanh or clipped, got {self.continuous_distribution!r}")
