"""Policy losses of the on-policy family (the original's ``agents/policy_gradient/modules/policy_losses.py`` and
``constraints.py``): one generalized advantage-weighted loss that PG, V-trace, PPO, AWR and V-MPO are settings of,
the advantage preprocessing, and the fixed or Lagrange coefficients (AWR's fixed temperature, V-MPO's adjusted one).

Every loss takes the time-major ``[T, B]`` advantages (from ``seed_rl/ops/advantages.py``, gradients stopped) and
the log-probabilities of the taken actions under the learner's policy (``log_pi``, with gradients) and the
behaviour policy (``log_mu``), and returns ``(loss, metrics)``: the loss a mean over the batch's steps, the metrics
scalar tensors under ``policy/``.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Optional, Tuple

import numpy as np
import tensorflow as tf

__all__ = ["AdvantagePreprocessor", "EntropyCost", "FixedCoefficient", "KLRegularizer", "LagrangeCoefficient", "PolicyLoss", "awr",
           "pg", "ppo", "value_loss", "vmpo", "vtrace"]


class EntropyCost(tf.Module):
    """The original's trainable entropy coefficient of V-trace and SAC: ``cost = exp(k p)``, ``p0 = log(cost0) / k``,
    ``|p| <= 20 / k`` (``k`` = ``entropy_cost_adjustment_speed``). It only moves when the agent adds the
    Lagrange-style adjustment loss ``cost * sg(mean entropy - target entropy)`` (a ``target_entropy`` is set)."""

    def __init__(self, initial_cost: float, adjustment_speed: float, adapts: bool = True):
        super().__init__(name="entropy_cost")
        self.adapts = bool(adapts)  # the agent sets a target entropy: the cost is learned state
        self.k = float(adjustment_speed)
        p0 = np.log(initial_cost) / self.k if initial_cost > 0 else -20.0 / self.k
        self.param = tf.Variable(p0, dtype=tf.float32, trainable=True, name="entropy_cost_param")

    def __call__(self) -> tf.Tensor:
        limit = 20.0 / self.k
        return tf.exp(self.k * tf.clip_by_value(self.param, -limit, limit))

    def trainable(self) -> list:
        """The variables to train: the coefficient's when it adapts, none when it is fixed."""
        return [self.param] if self.adapts else []

    def checkpoint_items(self) -> dict:
        """What a checkpoint keeps of the coefficient: itself when it adapts (its value is learned state), nothing
        when it is fixed, so that a run resumed with another ``--entropy_cost`` takes the new cost instead of the one
        the checkpoint was saved with (an older checkpoint's value is then ignored). The optimizer, which a
        checkpoint also keeps, tracks it only when it is trained (``trainable``)."""
        return {"entropy_cost": self} if self.adapts else {}


class FixedCoefficient(tf.Module):
    """A constant coefficient (AWR's temperature beta); its adjustment loss is 0."""

    def __init__(self, value: float, name: Optional[str] = None):
        super().__init__(name=name)
        self.value = float(value)

    def __call__(self) -> tf.Tensor:
        return tf.constant(self.value, tf.float32)

    def adjustment_loss(self, reference: Any) -> tf.Tensor:
        del reference
        return tf.constant(0.0)

    def scale_loss(self, unscaled: Any) -> tf.Tensor:
        return tf.stop_gradient(self()) * unscaled


class LagrangeCoefficient(tf.Module):
    """A Lagrange multiplier ``alpha`` for the soft constraint ``E[x] <= threshold`` (the original's
    ``LagrangeInequalityCoefficient``): minimise ``f + sg(alpha) x + alpha sg(threshold - E[x])``. Above the threshold
    the second term's gradient raises alpha, which pushes x down. ``alpha = exp(speed * param)`` with ``param``
    clipped so that alpha stays in ``alpha_range``."""

    def __init__(self, threshold: float, init_alpha: float = 1.0, alpha_range: Tuple[float, float] = (1e-6, 1e6),
                 adjustment_speed: float = 1.0, name: Optional[str] = None):
        super().__init__(name=name)
        if not 0 < alpha_range[0] <= init_alpha <= alpha_range[1]:
            raise ValueError(f"LagrangeCoefficient: need 0 < alpha_range[0] <= init_alpha <= alpha_range[1], got "
                             f"{init_alpha} and {alpha_range}")
        self.threshold = float(threshold)
        self.adjustment_speed = float(adjustment_speed)
        low, high = (math.log(a) / self.adjustment_speed for a in alpha_range)
        self.param = tf.Variable(math.log(init_alpha) / self.adjustment_speed, dtype=tf.float32, trainable=True,
                                 constraint=lambda v: tf.clip_by_value(v, low, high), name="lagrange_param")

    def __call__(self) -> tf.Tensor:
        return tf.exp(self.adjustment_speed * self.param)

    def adjustment_loss(self, reference: Any) -> tf.Tensor:
        return self() * tf.stop_gradient(self.threshold - tf.reduce_mean(reference))

    def scale_loss(self, unscaled: Any) -> tf.Tensor:
        return tf.stop_gradient(self()) * unscaled


class AdvantagePreprocessor:
    """Per-batch advantage preprocessing: ``normalize`` (mean 0, std 1), ``only_top_half`` (a mask keeping the
    advantages at or above the batch median, V-MPO), ``only_positive``, then ``offset`` added. Returns
    ``(mask * advantages, mask)``."""

    def __init__(self, normalize: bool = False, only_positive: bool = False, only_top_half: bool = False,
                 offset: Optional[float] = None):
        self.normalize, self.only_positive, self.only_top_half, self.offset = (
            normalize, only_positive, only_top_half, offset)

    def __call__(self, advantages: Any) -> Tuple[tf.Tensor, tf.Tensor]:
        advantages = tf.convert_to_tensor(advantages, tf.float32)
        mask = tf.ones_like(advantages)
        if self.normalize:
            advantages = advantages - tf.reduce_mean(advantages)
            advantages = advantages / (tf.math.reduce_std(advantages) + 1e-8)
        if self.only_top_half:
            flat = tf.reshape(advantages, [-1])
            half = tf.maximum(tf.size(flat) // 2, 1)
            median = tf.reduce_min(tf.math.top_k(flat, k=half, sorted=False).values)
            mask *= tf.cast(advantages >= median, tf.float32)
        if self.only_positive:
            mask *= tf.cast(advantages > 0.0, tf.float32)
        if self.offset is not None:
            advantages = advantages + self.offset
        return mask * advantages, mask


def _softmax_over_mask(x: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """Softmax over every element where ``mask`` is 1 (all axes together); 0 elsewhere."""
    logits = tf.where(mask > 0, x, tf.fill(tf.shape(x), -math.inf))
    flat = tf.nn.softmax(tf.reshape(logits, [-1]))
    return tf.reshape(flat, tf.shape(x)) * mask


class PolicyLoss:
    """The generalized advantage-weighted policy loss: ``mean(-log_pi * sg(w(A)) [* rho])``.

    * ``use_importance_weights``: times ``rho = pi / mu`` (gradient stopped), truncated at ``max_importance_weight``;
    * ``ppo_epsilon``: PPO's pessimistic clipping, as the original writes it: a step whose ratio is already past
      ``1 + epsilon`` with a positive advantage, or past ``1 / (1 + epsilon)`` with a negative one, gets no
      gradient; otherwise the gradient of ``rho A`` (the clipped surrogate's gradient);
    * ``log_prox`` given to the call (decoupled PPO, Hilton et al. 2021, "Batch size-invariance for policy
      optimization"): the ratio that is clipped is ``pi / prox``, the policy of the update over a proximal policy
      (the learner's at the start of the batch's update), not ``pi / mu``; the step is weighted by
      ``rho = (pi / prox) min(prox / mu, max_proximal_weight)``, so that data acted by an older policy than
      the proximal one is corrected for by an importance weight and not by the clip;
    * ``transformation`` with ``temperature`` (AWR, V-MPO): ``w(A) = transformation(A / temperature)`` over the
      preprocessor's mask, with ``A / temperature`` capped at ``max_advantage``; the temperature's adjustment loss
      (V-MPO) is added, with ``kl = log mean_mask exp(A / temperature)``.
    """

    def __init__(self, preprocessor: Optional[AdvantagePreprocessor] = None, use_importance_weights: bool = False,
                 max_importance_weight: Optional[float] = None, ppo_epsilon: Optional[float] = None,
                 max_advantage: Optional[float] = None, transformation: Optional[str] = None,
                 temperature: Any = None, max_proximal_weight: Optional[float] = None):
        if transformation not in (None, "exp", "softmax"):
            raise ValueError(f"PolicyLoss: transformation must be None, 'exp' or 'softmax', got {transformation!r}")
        if transformation is not None and temperature is None:
            raise ValueError("PolicyLoss: a transformation needs a temperature")
        self.preprocessor = preprocessor or AdvantagePreprocessor()
        self.use_importance_weights = use_importance_weights
        self.max_importance_weight = max_importance_weight
        self.max_proximal_weight = max_proximal_weight
        self.ppo_epsilon = ppo_epsilon
        self.max_advantage = max_advantage
        self.transformation = transformation
        self.temperature = temperature

    def __call__(self, advantages: Any, log_pi: Any, log_mu: Any,
                 log_prox: Any = None) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
        if log_prox is not None and self.ppo_epsilon is None:
            raise ValueError("PolicyLoss: a proximal policy (log_prox) is PPO's clip centre; this loss clips nothing")
        advantages = tf.stop_gradient(tf.convert_to_tensor(advantages, tf.float32))
        log_pi = tf.convert_to_tensor(log_pi, tf.float32)
        metrics: Dict[str, tf.Tensor] = {"policy/mean_advantage": tf.reduce_mean(advantages)}
        advantages, mask = self.preprocessor(advantages)
        scaled = None
        if self.transformation is not None:
            temperature = tf.stop_gradient(self.temperature())
            scaled = advantages / temperature
            if self.max_advantage is not None:
                scaled = tf.minimum(scaled, self.max_advantage)
            if self.transformation == "exp":
                weights = mask * tf.exp(scaled)
            else:
                weights = _softmax_over_mask(scaled, mask)
            metrics["policy/temperature"] = temperature
        else:
            weights = advantages
            if self.max_advantage is not None:
                weights = tf.minimum(weights, self.max_advantage)
            weights = weights * mask
        loss = -log_pi * tf.stop_gradient(weights)
        log_mu = tf.convert_to_tensor(log_mu, tf.float32)
        log_rho = tf.stop_gradient(log_pi - log_mu)
        log_clipped_ratio = log_rho
        log_proximal_weight = None
        if log_prox is not None:
            log_prox = tf.stop_gradient(tf.convert_to_tensor(log_prox, tf.float32))
            log_clipped_ratio = tf.stop_gradient(log_pi - log_prox)
            log_proximal_weight = log_prox - log_mu
            if self.max_proximal_weight is not None:
                log_proximal_weight = tf.minimum(log_proximal_weight, math.log(self.max_proximal_weight))
            log_rho = log_clipped_ratio + log_proximal_weight
            metrics["policy/mean_log_proximal_weight"] = tf.reduce_mean(log_proximal_weight)
        if self.ppo_epsilon is not None:
            bound = math.log1p(self.ppo_epsilon)
            clipped = (((weights > 0) & (log_clipped_ratio > bound))
                       | ((weights < 0) & (log_clipped_ratio < -bound)))
            keep = 1.0 - tf.cast(clipped, tf.float32)
            loss *= keep
            log_rho *= keep  # no overflow in exp where the step is dropped anyway
            metrics["policy/ppo_clipped_fraction"] = 1.0 - tf.reduce_mean(keep)
        if self.max_importance_weight is not None:
            log_rho = tf.minimum(log_rho, math.log(self.max_importance_weight))
        if self.use_importance_weights:
            loss *= tf.exp(log_rho)
        # Softmax weights sum to 1 over the batch: the V-MPO paper's loss is their weighted sum. The original took
        # the mean here as for every other transformation, which divides V-MPO's policy gradient by the number of
        # steps in the batch (docs/deviations.md).
        loss = tf.reduce_sum(loss) if self.transformation == "softmax" else tf.reduce_mean(loss)
        metrics["policy/mean_log_rho"] = tf.reduce_mean(log_rho)
        if scaled is not None:
            # log mean over the mask of exp(A / temperature) (the V-MPO paper's eq. 4, as the original).
            masked = tf.where(mask > 0, scaled, tf.fill(tf.shape(scaled), -math.inf))
            kl = tf.reduce_logsumexp(masked) - tf.math.log(tf.reduce_sum(mask))
            metrics["policy/transformation_kl"] = kl
            loss += self.temperature.adjustment_loss(kl)
        return loss, metrics


def pg() -> PolicyLoss:
    """The plain policy gradient ``-log_pi A``."""
    return PolicyLoss()


def vtrace(max_importance_weight: float = 1.0) -> PolicyLoss:
    """IMPALA-style: ``-min(rho, max_w) log_pi A``."""
    return PolicyLoss(use_importance_weights=True, max_importance_weight=max_importance_weight)


def ppo(epsilon: float, normalize_advantages: bool = False, advantage_offset: Optional[float] = None,
        max_proximal_weight: Optional[float] = None) -> PolicyLoss:
    """PPO's clipped surrogate with ratio bounds ``[1 / (1 + epsilon), 1 + epsilon]`` (the original's).
    ``max_proximal_weight`` truncates the weight ``prox / mu`` of decoupled PPO (a call with ``log_prox``); the
    ratio of a call without one is never truncated."""
    return PolicyLoss(use_importance_weights=True, ppo_epsilon=epsilon, max_proximal_weight=max_proximal_weight,
                      preprocessor=AdvantagePreprocessor(normalize=normalize_advantages, offset=advantage_offset))


def awr(beta: float, w_max: float) -> PolicyLoss:
    """AWR: ``-log_pi min(exp(A / beta), w_max)``."""
    return PolicyLoss(transformation="exp", temperature=FixedCoefficient(beta), max_advantage=math.log(w_max))


def vmpo(e_n: float, temperature: Optional[LagrangeCoefficient] = None) -> PolicyLoss:
    """V-MPO's E-step: the top half of the batch's advantages, weighted by a softmax of ``A / eta`` over that half,
    with ``eta`` a Lagrange temperature (adjustment speed 10, as the original) constrained by ``e_n``. The KL
    regulariser of the M-step is added separately (the original's too)."""
    temperature = temperature or LagrangeCoefficient(threshold=e_n, adjustment_speed=10.0)
    return PolicyLoss(transformation="softmax", temperature=temperature,
                      preprocessor=AdvantagePreprocessor(only_top_half=True))




def value_loss(targets: Any, predictions: Any, old_predictions: Any = None, huber_delta: Optional[float] = None,
               clip_eps: Optional[float] = None) -> tf.Tensor:
    """The value loss, a mean over the steps: squared error ``(target - v)^2`` (no 1/2, as Keras's mean squared
    error, which the original used), or the Huber loss with ``huber_delta``. With ``clip_eps`` (PPO-style value
    clipping, needs ``old_predictions``, the values at acting time): the larger of the loss of ``v`` and of ``v``
    clipped to ``old +- clip_eps``."""
    targets = tf.stop_gradient(tf.convert_to_tensor(targets, tf.float32))
    predictions = tf.convert_to_tensor(predictions, tf.float32)

    def per_step(v):
        error = targets - v
        if huber_delta is None:
            return tf.square(error)
        absolute = tf.abs(error)
        quadratic = tf.minimum(absolute, huber_delta)
        return 0.5 * tf.square(quadratic) + huber_delta * (absolute - quadratic)

    loss = per_step(predictions)
    if clip_eps is not None:
        if old_predictions is None:
            raise ValueError("value_loss: clip_eps needs old_predictions (the values at acting time)")
        old = tf.stop_gradient(tf.convert_to_tensor(old_predictions, tf.float32))
        loss = tf.maximum(loss, per_step(tf.clip_by_value(predictions, old - clip_eps, old + clip_eps)))
    return tf.reduce_mean(loss)


class KLRegularizer:
    """The original's ``KLPolicyRegularizer``: any of ``kl_pi_mu`` (KL(pi || mu)), ``kl_mu_pi`` (KL(mu || pi)),
    ``entropy`` (a bonus: the loss is minus the entropy) and ``kl_ref_pi`` (KL from the distribution with all-zero
    parameters, e.g. uniform, to pi), each with a float or a coefficient object (a ``LagrangeCoefficient`` turns the
    term into the constraint ``E[term] <= threshold``).

    ``__call__(distribution, pi_params, mu_params)`` returns ``(per_step [T, B], global_loss, metrics)``: the
    coefficient-scaled per-step terms and the coefficients' adjustment losses.
    """

    TERMS = ("kl_pi_mu", "kl_mu_pi", "entropy", "kl_ref_pi")

    def __init__(self, **coefficients: Any):
        unknown = set(coefficients) - set(self.TERMS)
        if unknown:
            raise ValueError(f"KLRegularizer: unknown terms {sorted(unknown)}; choose from {', '.join(self.TERMS)}")
        self.coefficients = {name: c if hasattr(c, "adjustment_loss") else FixedCoefficient(c)
                             for name, c in coefficients.items()}

    def __call__(self, distribution: Any, pi_params: Any, mu_params: Any
                 ) -> Tuple[tf.Tensor, tf.Tensor, Dict[str, tf.Tensor]]:
        terms = {
            "kl_pi_mu": lambda: distribution.kl_divergence(pi_params, mu_params),
            "kl_mu_pi": lambda: distribution.kl_divergence(mu_params, pi_params),
            "kl_ref_pi": lambda: distribution.kl_divergence(tf.zeros_like(pi_params), pi_params),
            "entropy": lambda: -distribution.entropy(pi_params),
        }
        per_step = tf.zeros(tf.shape(pi_params)[:-1])
        global_loss = tf.constant(0.0)
        metrics: Dict[str, tf.Tensor] = {}
        for name, coefficient in self.coefficients.items():
            term = terms[name]()
            per_step += coefficient.scale_loss(term)
            global_loss += coefficient.adjustment_loss(term)
            metrics[f"policy/{name}"] = tf.reduce_mean(-term if name == "entropy" else term)
            metrics[f"policy/{name}_coefficient"] = coefficient()
        return per_step, global_loss, metrics
