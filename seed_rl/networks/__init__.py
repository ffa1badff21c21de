"""Keras 3 networks of the paper: the IMPALA deep ResNet torso, the small-image conv torso, MLP torsos, the dict
observations' torso (each key by its kind), and the actor-critic core with a done-resetting LSTM. Networks return
raw outputs (logits, values); agents sample and compute losses."""

from seed_rl.networks.actor_critic import ActorCriticNetwork, ActorCriticOutput, build_actor_critic
from seed_rl.networks.dueling import DQNOutput, DuelingLSTMDQNNet
from seed_rl.networks.init import orthogonal_init
from seed_rl.networks.multi_input import MultiInputTorso
from seed_rl.networks.recurrent import ResettingLSTM
from seed_rl.networks.torsos import (
    ImpalaDeepTorso,
    ImpalaShallowTorso,
    MLPTorso,
    NatureTorso,
    OneHotMLPTorso,
    SmallConvTorso,
    mlp_torso,
)


def checkpoint_variables(model) -> list:
    """The model's variables as a list of ``tf.Variable``s, for ``tf.train.Checkpoint``.

    TensorFlow's checkpoint dependency tracking does not follow Keras 3 layers kept in Python lists (a torso's
    dense layers, the ResNet sections): a checkpoint of the model object silently misses their weights. A list of
    the variables in the model's (deterministic) creation order is tracked by position instead.
    """
    return [getattr(v, "value", v) for v in model.variables]


__all__ = [
    "build_actor_critic",
    "checkpoint_variables",
    "ActorCriticNetwork",
    "ActorCriticOutput",
    "DQNOutput",
    "DuelingLSTMDQNNet",
    "ImpalaDeepTorso",
    "ImpalaShallowTorso",
    "MLPTorso",
    "mlp_torso",
    "MultiInputTorso",
    "NatureTorso",
    "OneHotMLPTorso",
    "orthogonal_init",
    "ResettingLSTM",
    "SmallConvTorso",
]
