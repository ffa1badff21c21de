"""Keras 3 networks of the paper: the IMPALA deep ResNet torso, MLP torsos, and the actor-critic core with a
done-resetting LSTM. Networks return raw outputs (logits, values); agents sample and compute losses."""

from seed_rl.networks.actor_critic import ActorCriticNetwork, ActorCriticOutput
from seed_rl.networks.dueling import DQNOutput, DuelingLSTMDQNNet
from seed_rl.networks.recurrent import ResettingLSTM
from seed_rl.networks.torsos import ImpalaDeepTorso, MLPTorso, NatureTorso

__all__ = [
    "ActorCriticNetwork",
    "ActorCriticOutput",
    "DQNOutput",
    "DuelingLSTMDQNNet",
    "ImpalaDeepTorso",
    "MLPTorso",
    "NatureTorso",
    "ResettingLSTM",
]
