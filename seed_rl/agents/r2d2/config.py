"""Hyperparameters of the R2D2 agent (Kapturowski et al. 2019) with the original's defaults and their sources.

"learner flags" = agents/r2d2/learner.py of the original; "main file" = atari/r2d2_main.py.
"""

from __future__ import annotations

import dataclasses

from seed_rl.config import OptimizerConfig, field

TORSOS = ("nature", "impala_shallow", "mlp", "small_conv", "multi_input")


@dataclasses.dataclass(frozen=True)
class R2D2Config:
    # Loss (learner flags).
    discounting: float = field(0.997, "Discount factor gamma.")
    n_steps: int = field(5, "n of the n-step double-Q targets.")
    burn_in: int = field(40, "Steps replayed only to warm up the recurrent state before the loss.")
    value_function_rescaling_epsilon: float = field(1e-3, "epsilon of h(x) = sign(x)(sqrt(|x|+1)-1) + eps x.")
    priority_mix: float = field(0.9, "eta: priority = eta * max|delta| + (1 - eta) * mean|delta| (R2D2 paper).")
    # Replay (learner flags).
    replay_buffer_size: int = field(100, "Replay capacity in sequences.")
    replay_buffer_min_size: int = field(10, "Sequences inserted before training starts.")
    replay_ratio: float = field(1.5, "Times each inserted sequence is replayed: batch_size / replay_ratio "
                                     "sequences are inserted per training step.")
    priority_exponent: float = field(0.9, "alpha of prioritized replay.")
    importance_sampling_exponent: float = field(0.6, "beta of the importance-sampling weights.")
    checkpoint_replay: bool = field(False, "Save the replay buffer with each checkpoint and restore it on resume.")
    # Optimization (learner flags and main file).
    optimizer: OptimizerConfig = field(
        OptimizerConfig(kind="adam", learning_rate=0.00048, adam_epsilon=1e-3, clip_norm=40.0),
        "Adam with a constant learning rate (main file).",
        sources={"kind": "atari/r2d2_main.py", "learning_rate": "atari/r2d2_main.py", "lr_schedule": "atari/r2d2_main.py",
                 "adam_epsilon": "atari/r2d2_main.py", "clip_norm": "agents/r2d2/learner.py"})
    update_target_every_n_step: int = field(2500, "Copy the online network to the target network this often.")
    # Acting.
    eval_epsilon: float = field(1e-3, "Epsilon of the evaluation envs (the highest env ids).")
    # Network (main file).
    torso: str = field("nature", "nature (the Nature DQN CNN, as the original), impala_shallow (IMPALA's shallow "
                                 "CNN, about a third of its cost per frame), small_conv (small images: the MinAtar "
                                 "paper's conv 16 3x3 and dense 128), mlp (vector observations) or multi_input "
                                 "(dict observations: each key encoded by its kind, the features concatenated and "
                                 "mixed). Not given, the observation spec chooses it (docs/environments.md).")
    stack_size: int = field(4, "Frames stacked on the learner as part of the recurrent state.")
    mlp_sizes: tuple = field((64,), "Hidden sizes of the MLP torso (and of multi_input's MLP of each vector key).")
    lstm_size: int = field(512, "LSTM units.")
    hidden_size: int = field(512, "Hidden units of each dueling head.")
    # Testing aid: a learner that maximises the negated reward must fail the learning tests.
    flip_reward_sign: bool = field(False, "Testing only: negate rewards in the targets.")

    def __post_init__(self) -> None:
        if self.n_steps < 1:
            raise ValueError(f"n_steps must be >= 1, got {self.n_steps}")
        if self.burn_in < 0:
            raise ValueError(f"burn_in must be >= 0, got {self.burn_in}")
        if self.replay_ratio <= 0:
            raise ValueError(f"replay_ratio must be > 0, got {self.replay_ratio}")
        if self.replay_buffer_min_size > self.replay_buffer_size:
            raise ValueError("replay_buffer_min_size must not exceed replay_buffer_size")
        if self.torso not in TORSOS:
            raise ValueError(f"torso must be one of {', '.join(TORSOS)}, got {self.torso!r}")
        if self.torso in ("mlp", "multi_input") and self.stack_size != 1:
            raise ValueError("frame stacking (stack_size > 1) needs image observations (an image torso, e.g. nature): "
                             f"torso={self.torso} takes stack_size=1")
