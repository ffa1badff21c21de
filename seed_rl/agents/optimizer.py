"""One optimizer builder for every agent: each agent config holds an ``OptimizerConfig`` (``seed_rl.config``) as its
``optimizer`` field, with the agent's defaults and their sources, and ``make_optimizer`` turns it into a Keras
optimizer and its learning-rate schedule."""

from __future__ import annotations

from typing import Any

import keras

from seed_rl.config import OptimizerConfig


def make_optimizer(config: OptimizerConfig, total_updates: int) -> keras.optimizers.Optimizer:
    """The optimizer ``config`` describes, over a run of ``total_updates`` optimizer updates: Adam or RMSprop with
    ``learning_rate``, constant or decayed linearly to 0 at the last update (``lr_schedule``), gradients clipped by
    global norm ``clip_norm`` (0: none)."""
    lr: Any = config.learning_rate
    if config.lr_schedule == "linear":
        lr = keras.optimizers.schedules.PolynomialDecay(
            config.learning_rate, decay_steps=max(int(total_updates), 1), end_learning_rate=0.0)
    clip = config.clip_norm or None
    if config.kind == "rmsprop":
        return keras.optimizers.RMSprop(learning_rate=lr, rho=config.rms_decay, momentum=config.rms_momentum,
                                        epsilon=config.rms_epsilon, global_clipnorm=clip)
    return keras.optimizers.Adam(learning_rate=lr, beta_1=config.adam_beta1, epsilon=config.adam_epsilon,
                                 global_clipnorm=clip)
