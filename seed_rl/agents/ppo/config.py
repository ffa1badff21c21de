"""Hyperparameters of the PPO agent, with the original's defaults where it has one (its on-policy family,
``agents/policy_gradient/``: ``ppo(epsilon, normalize_advantages=False)``, GAE, Adam) and where else they come from."""

from __future__ import annotations

import dataclasses

from seed_rl.config import field


@dataclasses.dataclass(frozen=True)
class PPOConfig:
    # Advantages and losses (agents/policy_gradient/modules of the original).
    discounting: float = field(0.99, "Discount factor gamma.")
    lambda_: float = field(0.95, "GAE lambda (the PPO paper's 0.95).")
    epsilon: float = field(0.2, "PPO clipping: ratios outside [1 / (1 + epsilon), 1 + epsilon] stop the gradient.")
    normalize_advantages: bool = field(
        False, "Normalise each minibatch's advantages to mean 0, std 1 (the original's default: off)."
    )
    baseline_cost: float = field(0.5, "Weight of the value loss (mean squared error).")
    huber_delta: float = field(0.0, "Huber loss for the value with this delta; 0 means squared error.")
    value_clip_eps: float = field(0.0, "PPO-style value clipping around the acting-time value; 0 means none.")
    entropy_cost: float = field(0.01, "Entropy bonus coefficient.")
    max_abs_reward: float = field(0.0, "Clip rewards to [-x, x] in the loss; 0 means no clipping.")
    # Update schedule: each batch of unrolls is trained `epochs` times in `minibatches` shuffled minibatches; the
    # advantages of a minibatch are computed with the weights of that update (the original's
    # split_with_advantage_recomputation batch mode).
    epochs: int = field(4, "Passes over each batch (the PPO paper's MuJoCo setting: 10; Atari: 3).")
    minibatches: int = field(4, "Minibatches per pass; batch_size must divide by it.")
    # Optimizer.
    learning_rate: float = field(3e-4, "Adam learning rate (the PPO paper's MuJoCo 3e-4).")
    lr_schedule: str = field("constant", "constant, or linear (decay to 0 at the last update).")
    adam_epsilon: float = field(1e-5, "Adam epsilon (OpenAI baselines' PPO).")
    clip_norm: float = field(0.5, "Clip gradients by global norm (OpenAI baselines' PPO); 0 means none.")
    # Network.
    network: str = field("mlp", "mlp (vector observations), impala_shallow or impala_deep (images).")
    mlp_sizes: tuple = field((64, 64), "Hidden sizes of the MLP torso.")
    separate_value_network: bool = field(True, "MLP only: give the value head its own torso.")
    lstm_size: int = field(0, "LSTM units of the core; 0 for a feed-forward core.")
    use_reward_and_action: bool = field(False, "Feed the clipped reward and the one-hot previous action to the core.")
    # Testing aid: a learner with the policy-gradient sign flipped must fail the learning tests.
    flip_policy_gradient: bool = field(False, "Testing only: flip the policy-gradient sign.")

    def __post_init__(self) -> None:
        if self.network not in ("impala_deep", "impala_shallow", "mlp"):
            raise ValueError(f"network must be impala_deep, impala_shallow or mlp, got {self.network!r}")
        if self.lr_schedule not in ("linear", "constant"):
            raise ValueError(f"lr_schedule must be linear or constant, got {self.lr_schedule!r}")
        if self.epochs < 1 or self.minibatches < 1:
            raise ValueError(f"epochs and minibatches must be >= 1, got {self.epochs} and {self.minibatches}")
        if not 0.0 <= self.discounting <= 1.0 or not 0.0 <= self.lambda_ <= 1.0:
            raise ValueError(f"discounting and lambda_ must be in [0, 1], got {self.discounting}, {self.lambda_}")
        if self.epsilon <= 0:
            raise ValueError(f"epsilon must be > 0, got {self.epsilon}")
