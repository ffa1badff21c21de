"""One optimizer builder for every agent: each agent's config names its optimizer's settings as fields of its own
(``learning_rate``, ``adam_epsilon``, ``clip_norm``, ...: flags with the agent's defaults and provenance), and
``make_optimizer`` turns them into a Keras optimizer and its learning-rate schedule.

A config may leave out the fields of a choice it does not offer: ``optimizer`` is "adam" when absent (only V-trace
offers RMSprop, as the original's DMLab main file), ``lr_schedule`` "constant" (R2D2 and SAC train with a constant
rate, as the original's main files).
"""

from __future__ import annotations

from typing import Any

import keras

OPTIMIZERS = ("adam", "rmsprop")
LR_SCHEDULES = ("constant", "linear")


def make_optimizer(config: Any, total_updates: int) -> keras.optimizers.Optimizer:
    """The optimizer of an agent config over a run of ``total_updates`` optimizer updates.

    Reads ``learning_rate``, ``clip_norm`` (0: none) and ``adam_epsilon``; ``lr_schedule`` (linear: decay to 0 at
    the last update); with ``optimizer="rmsprop"``, ``rms_decay``, ``rms_momentum`` and ``rms_epsilon``; with Adam,
    ``adam_beta1`` when the config has it (else Keras' 0.9).
    """
    kind = getattr(config, "optimizer", "adam")
    schedule = getattr(config, "lr_schedule", "constant")
    if kind not in OPTIMIZERS or schedule not in LR_SCHEDULES:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS} and lr_schedule one of {LR_SCHEDULES}, got "
                         f"{kind!r} and {schedule!r}")
    lr: Any = config.learning_rate
    if schedule == "linear":
        lr = keras.optimizers.schedules.PolynomialDecay(
            config.learning_rate, decay_steps=max(int(total_updates), 1), end_learning_rate=0.0)
    clip = config.clip_norm or None
    if kind == "rmsprop":
        return keras.optimizers.RMSprop(learning_rate=lr, rho=config.rms_decay, momentum=config.rms_momentum,
                                        epsilon=config.rms_epsilon, global_clipnorm=clip)
    return keras.optimizers.Adam(learning_rate=lr, beta_1=getattr(config, "adam_beta1", 0.9),
                                 epsilon=config.adam_epsilon, global_clipnorm=clip)
