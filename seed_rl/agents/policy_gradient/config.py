"""Hyperparameters of the on-policy family (the original's ``agents/policy_gradient/``: its
``GeneralizedOnPolicyLoss``, advantage estimators, policy losses, regulariser, normalisers and
``ContinuousControlAgent``), and its named agents PPO, AWR and V-MPO as configs that only change defaults.

Imports no TensorFlow. Where a default is the original's, its source is named; the rest say where they come from.
"""

from __future__ import annotations

import dataclasses

from seed_rl.config import OptimizerConfig, field

NETWORKS = ("mlp", "control_mlp", "impala_shallow", "impala_deep", "gfootball", "small_conv", "multi_input")
POLICY_LOSSES = ("ppo", "awr", "vmpo", "pg", "vtrace")
ADVANTAGE_ESTIMATORS = ("gae", "vtrace", "nstep")
ADVANTAGE_VALUES = ("learner", "acting")
PROXIMAL_POLICIES = ("acting", "learner")
BATCH_MODES = ("shuffle", "repeat", "split", "split_with_advantage_recomputation")
REWARD_NORMALIZERS = ("none", "popart")
ACTIVATIONS = ("tanh", "relu", "swish")


@dataclasses.dataclass(frozen=True)
class OnPolicyConfig:
    # Advantages (modules/advantages.py).
    discounting: float = field(0.99, "Discount factor gamma (mujoco/gin/ppo.gin: 0.99).")
    advantage_estimator: str = field("gae", "gae, vtrace (V-trace advantages, importance weights of the learner "
                                            "policy over the behaviour's) or nstep.")
    lambda_: float = field(0.95, "lambda of GAE and V-trace advantages (ppo.gin: 0.95).")
    nstep_n: int = field(5, "n of the nstep estimator.")
    advantage_values: str = field(
        "learner", "The values the estimator bootstraps from: learner (the value head re-run on the batch with the "
                   "weights of the update, the original's) or acting (the value head's output when each step was "
                   "acted, stored with it, as OpenAI baselines' and CleanRL's PPO compute GAE; in the split batch "
                   "modes this saves the learner a forward pass over every batch). Not with the vtrace estimator, "
                   "whose importance weights need the update's policy.")
    max_importance_weight: float = field(1.0, "Truncation of the V-trace advantages' importance weights.")
    # Policy loss (modules/policy_losses.py).
    policy_loss: str = field("ppo", "ppo (clipped surrogate), awr (exponentiated advantages), vmpo (top half, "
                                    "softmax, Lagrange temperature), pg or vtrace (importance-weighted PG).")
    epsilon: float = field(0.2, "PPO clipping: ratios outside [1 / (1 + epsilon), 1 + epsilon] stop the gradient.")
    proximal_policy: str = field(
        "acting", "The policy PPO's clipped ratio is taken against: acting (the policy that acted each step, the "
                  "original's and the PPO paper's) or learner (decoupled PPO, Hilton et al. 2021: the learner's "
                  "policy when the batch's advantages were computed, each step then weighted by that policy over "
                  "the acting one, truncated at max_proximal_weight; data acted some policy versions ago, as "
                  "SEED's asynchronous actors send it, is then corrected by the weight and not by the clip). "
                  "learner needs policy_loss=ppo and a split batch mode; with advantage_values=acting it costs a "
                  "forward pass over each batch.")
    max_proximal_weight: float = field(1.0, "proximal_policy=learner: truncation of the weight of the learner's "
                                            "policy over the acting one (as V-trace's rho-bar).")
    normalize_advantages: bool = field(
        False, "Normalise each minibatch's advantages to mean 0, std 1 (the original's ppo(): off).")
    awr_beta: float = field(1.0, "AWR temperature beta (the AWR paper's 1.0): weights exp(A / beta).")
    awr_w_max: float = field(20.0, "AWR's largest weight (the AWR paper's 20).")
    vmpo_e_n: float = field(0.01, "V-MPO's temperature constraint epsilon_eta (the V-MPO paper's 0.01).")
    vmpo_e_alpha: float = field(0.005, "V-MPO's KL(mu || pi) constraint epsilon_alpha (the paper's 0.005, "
                                       "discrete actions).")
    # Regulariser (KLPolicyRegularizer) and value loss (GeneralizedOnPolicyLoss).
    entropy_cost: float = field(0.01, "Entropy bonus coefficient (ppo.gin: 0 on MuJoCo).")
    baseline_cost: float = field(0.5, "Weight of the value loss (the original's default 1.0; OpenAI baselines' "
                                      "PPO 0.5).")
    huber_delta: float = field(0.0, "Huber loss for the value with this delta; 0 means squared error.")
    value_clip_eps: float = field(0.0, "PPO-style value clipping around the acting-time value; 0 means none.")
    max_abs_reward: float = field(0.0, "Clip rewards to [-x, x] in the loss; 0 means no clipping.")
    reward_normalizer: str = field("none", "none, or popart (PopArt without compensation, as ppo.gin: the value "
                                           "head predicts returns normalised by the running mean and std of the "
                                           "value targets, advantages are divided by the std).")
    normalize_observations: bool = field(False, "Normalise observations by their running mean and std (ppo.gin's "
                                                "InputNormalization(AverageMeanStd)), then clip to "
                                                "+-observation_clipping.")
    observation_clipping: float = field(10.0, "Clip normalised observations to [-x, x] (ppo.gin: 10).")
    # Update schedule: each batch is trained `epochs` times in `minibatches` minibatches, as the original's
    # ppo_training_step_utils: of whole unrolls whose advantages come from the weights of each update (shuffle,
    # repeat), or of single transitions whose advantages were computed over the whole batch (split, once per step;
    # split_with_advantage_recomputation, at the start of every epoch). The original's default is split; here
    # shuffle, which also serves recurrent networks (docs/deviations.md 37).
    epochs: int = field(4, "Passes over each batch (the PPO paper's MuJoCo setting: 10; Atari: 3).")
    minibatches: int = field(4, "Minibatches per pass; batch_size (split modes: batch_size * unroll_length) must "
                                "divide by it.")
    batch_mode: str = field("shuffle", "shuffle (fresh minibatches of unrolls every epoch), repeat (the same "
                            "minibatches in the same order every epoch), split (advantages once per step over the "
                            "whole batch, then shuffled minibatches of single transitions; feed-forward networks) "
                            "or split_with_advantage_recomputation (split, advantages recomputed every epoch): the "
                            "original's four batch modes.")
    optimizer: OptimizerConfig = field(
        OptimizerConfig(kind="adam", learning_rate=3e-4, lr_schedule="constant", adam_epsilon=1e-5, clip_norm=0.5),
        "Adam (mujoco/ppo_main.py).",
        sources={"kind": "mujoco/ppo_main.py", "learning_rate": "mujoco/ppo_main.py: 3e-4",
                 "adam_epsilon": "OpenAI baselines' PPO", "clip_norm": "local_baseline_HalfCheetah: 0.5"})
    # Network.
    network: str = field("mlp", "mlp (a torso shared by a policy and a value head, optionally a separate value "
                                "torso), control_mlp (the original's ContinuousControlAgent: separate policy and "
                                "value MLPs, orthogonal init), impala_shallow, impala_deep or gfootball (images), "
                                "small_conv (small images: the MinAtar paper's conv 16 3x3 and dense 128), "
                                "multi_input (dict observations: each key encoded by its kind, the features "
                                "concatenated and mixed). Not given, the observation spec chooses it "
                                "(docs/environments.md).")
    initializer: str = field(
        "keras", "keras (glorot-uniform kernels, the Keras defaults) or orthogonal (OpenAI baselines' and CleanRL's "
        "Atari init: orthogonal kernels with gain sqrt(2) in the torsos, 0.01 on the policy head, 1 on the value "
        "head, zero biases). control_mlp always initialises its own way (orthogonal, as the original's "
        "ContinuousControlAgent), so it takes keras only.")
    mlp_sizes: tuple = field((64, 64), "Hidden sizes of the MLP torsos (ppo.gin: 2 x 64).")
    activation: str = field("tanh", "control_mlp's hidden activation (ppo.gin: tanh; the original's default swish).")
    layer_norm: bool = field(False, "control_mlp: layer normalisation after every hidden layer.")
    std_independent_of_input: bool = field(
        False, "control_mlp, continuous actions: the std is a trainable vector, not an output (ppo.gin: True).")
    separate_value_network: bool = field(True, "mlp and multi_input without an LSTM: give the value head its own "
                                               "torso.")
    lstm_size: int = field(0, "LSTM units of the core (every network but control_mlp); 0 for a feed-forward core.")
    use_reward_and_action: bool = field(False, "Feed the clipped reward and the previous action to the core.")
    # Continuous actions (parametric_distribution.continuous_action_config).
    continuous_distribution: str = field("tanh", "tanh (tanh-squashed normal, the original's default) or clipped "
                                                 "(normal clipped to [-1, 1]).")
    std_fn: str = field("softplus", "softplus or safe_exp (ppo.gin: safe_exp) maps the std parameter to a std.")
    min_std: float = field(1e-3, "Smallest std (ppo.gin: 1e-3).")
    std_for_zero_param: float = field(1.0, "The std a parameter of 0 gives (ppo.gin: 1).")
    # Testing aid: a learner with the policy-gradient sign flipped must fail the learning tests.
    flip_policy_gradient: bool = field(False, "Testing only: flip the policy-gradient sign.")

    def __post_init__(self) -> None:
        if self.batch_mode.startswith("split") and self.lstm_size:
            raise ValueError(f"batch_mode={self.batch_mode} trains single transitions, which carry no recurrent "
                             f"state: lstm_size={self.lstm_size} needs batch_mode=shuffle or repeat")
        for name, value, choices in (("network", self.network, NETWORKS),
                                     ("policy_loss", self.policy_loss, POLICY_LOSSES),
                                     ("advantage_estimator", self.advantage_estimator, ADVANTAGE_ESTIMATORS),
                                     ("reward_normalizer", self.reward_normalizer, REWARD_NORMALIZERS),
                                     ("activation", self.activation, ACTIVATIONS),
                                     ("continuous_distribution", self.continuous_distribution, ("tanh", "clipped")),
                                     ("std_fn", self.std_fn, ("softplus", "safe_exp")),
                                     ("batch_mode", self.batch_mode, BATCH_MODES),
                                     ("advantage_values", self.advantage_values, ADVANTAGE_VALUES),
                                     ("proximal_policy", self.proximal_policy, PROXIMAL_POLICIES)):
            if value not in choices:
                raise ValueError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
        if self.advantage_values == "acting" and self.advantage_estimator == "vtrace":
            raise ValueError("advantage_values=acting takes the values stored at acting time and runs no policy on "
                             "the batch, which the vtrace estimator's importance weights need: use "
                             "advantage_estimator=gae or nstep, or advantage_values=learner")
        if self.proximal_policy == "learner" and (self.policy_loss != "ppo" or not self.batch_mode.startswith("split")):
            raise ValueError(f"proximal_policy=learner centres PPO's clip on the policy of the split batch modes' "
                             f"pass over the batch: it needs policy_loss=ppo and batch_mode=split or "
                             f"split_with_advantage_recomputation, got policy_loss={self.policy_loss}, "
                             f"batch_mode={self.batch_mode}")
        if self.max_proximal_weight <= 0:
            raise ValueError(f"max_proximal_weight must be > 0, got {self.max_proximal_weight}")
        if self.epochs < 1 or self.minibatches < 1:
            raise ValueError(f"epochs and minibatches must be >= 1, got {self.epochs} and {self.minibatches}")
        if not 0.0 <= self.discounting <= 1.0 or not 0.0 <= self.lambda_ <= 1.0:
            raise ValueError(f"discounting and lambda_ must be in [0, 1], got {self.discounting}, {self.lambda_}")
        if self.epsilon <= 0:
            raise ValueError(f"epsilon must be > 0, got {self.epsilon}")
        if self.awr_beta <= 0 or self.awr_w_max <= 1:
            raise ValueError(f"awr_beta must be > 0 and awr_w_max > 1, got {self.awr_beta}, {self.awr_w_max}")
        if self.vmpo_e_n <= 0 or self.vmpo_e_alpha <= 0:
            raise ValueError("vmpo_e_n and vmpo_e_alpha must be > 0")
        if self.nstep_n < 1:
            raise ValueError(f"nstep_n must be >= 1, got {self.nstep_n}")
        if self.initializer not in ("keras", "orthogonal"):
            raise ValueError(f"initializer must be keras or orthogonal, got {self.initializer!r}")
        if self.network == "control_mlp" and self.initializer != "keras":
            raise ValueError("control_mlp initialises its own layers (orthogonal, as the original's "
                             "ContinuousControlAgent): drop --initializer, or pick another network")
        if self.network == "control_mlp" and self.lstm_size:
            raise ValueError("control_mlp is feed-forward: use lstm_size=0 (or network=mlp for an LSTM core)")


@dataclasses.dataclass(frozen=True)
class PPOConfig(OnPolicyConfig):
    """PPO (Schulman et al. 2017): the family with its defaults (clipped surrogate, GAE)."""


@dataclasses.dataclass(frozen=True)
class AWRConfig(OnPolicyConfig):
    """AWR (Peng et al. 2019) as the family's ``awr`` policy loss: advantage-weighted regression with TD(lambda)
    advantages, one pass over each batch in several minibatches."""

    policy_loss: str = field("awr", "ppo, awr, vmpo, pg or vtrace (the policy loss of the family).")
    epochs: int = field(1, "Passes over each batch.")


@dataclasses.dataclass(frozen=True)
class VMPOConfig(OnPolicyConfig):
    """V-MPO (Song et al. 2019) as the family's ``vmpo`` policy loss: the top half of each minibatch's advantages
    weighted by a softmax with a Lagrange temperature, and KL(mu || pi) held under epsilon_alpha by a second
    Lagrange multiplier (no entropy bonus: the KL constraint regularises)."""

    policy_loss: str = field("vmpo", "ppo, awr, vmpo, pg or vtrace (the policy loss of the family).")
    entropy_cost: float = field(0.0, "Entropy bonus coefficient (V-MPO: none).")
    epochs: int = field(1, "Passes over each batch.")
