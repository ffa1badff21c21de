"""Discrete observations (gymnasium's ``Discrete`` and ``MultiDiscrete``: int32 with ``num_values`` in the spec)
reach the MLPs one-hot encoded (``seed_rl.types.one_hot_depth``), in every agent that builds an MLP on them, alone
or as a key of a dict; a state index is a label, not a quantity."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from seed_rl.agents.r2d2.agent import build_network as build_r2d2
from seed_rl.agents.r2d2.config import R2D2Config
from seed_rl.configs import get_preset
from seed_rl.configs.defaults import describe_observation, fit_network
from seed_rl.networks import MLPTorso, MultiInputTorso, OneHotMLPTorso, build_actor_critic, mlp_torso
from seed_rl.types import MAX_ONE_HOT_FEATURES, ArraySpec, one_hot_depth

ACTIONS = ArraySpec((), "int32", num_values=4)


@pytest.mark.parametrize("spec, depth", [
    (ArraySpec((), "int32", num_values=16), 16),  # Discrete(16): FrozenLake's cell
    (ArraySpec((3,), "int32", num_values=5), 5),  # MultiDiscrete
    (ArraySpec((), "int32", num_values=2), 2),  # Discrete(2)
    (ArraySpec((5,), "int8", num_values=2), 0),  # MultiBinary: 0/1 already
    (ArraySpec((4,), "float32"), 0),  # a float vector
    (ArraySpec((), "int32"), 0),  # an integer Box: a quantity, no num_values
    (ArraySpec((), "int32", num_values=MAX_ONE_HOT_FEATURES), MAX_ONE_HOT_FEATURES),
    (ArraySpec((2,), "int32", num_values=MAX_ONE_HOT_FEATURES), 0),  # too wide a one-hot: cast to float instead
    (None, 0),
])
def test_which_observations_are_one_hot_encoded(spec, depth):
    assert one_hot_depth(spec) == depth


def test_the_torso_sees_a_one_hot_so_each_state_has_its_own_weights():
    """State i's features are relu(W[i] + b), row i of the first kernel: neighbouring indices share nothing. The
    control: without the one-hot the first layer sees the index as a number, relu(i * w + b), so state 2's
    pre-activation is exactly the mean of states 1's and 3's."""
    states = tf.constant([0, 1, 2, 3], tf.int32)
    torso = mlp_torso((8,), one_hot_depth=4)
    assert isinstance(torso, OneHotMLPTorso)
    features = torso(states).numpy()
    kernel, bias = (v.numpy() for v in torso.layers_[0].weights)
    assert kernel.shape == (4, 8)
    np.testing.assert_allclose(features, np.maximum(kernel + bias, 0.0), rtol=1e-6)

    plain = mlp_torso((8,))
    assert type(plain) is MLPTorso and plain.one_hot_depth == 0
    plain(states)
    kernel, bias = (v.numpy() for v in plain.layers_[0].weights)
    assert kernel.shape == (1, 8)
    pre = states.numpy()[:, None] * kernel + bias
    np.testing.assert_allclose(pre[2], (pre[1] + pre[3]) / 2, rtol=1e-5)


def test_multidiscrete_elements_are_encoded_each_and_concatenated():
    torso = mlp_torso((6,), one_hot_depth=3)
    torso(tf.constant([[0, 2], [1, 1]], tf.int32))
    assert torso.layers_[0].weights[0].shape == (2 * 3, 6)


def test_the_plain_mlp_still_unpacks_uint16_planes():
    """A uint16 word holds 16 packed planes (Football's SMM): the plain MLP sees 16 features per word, as before the
    one-hot (a torso built from the input shape alone saw one per word and refused the unpacked input)."""
    torso = mlp_torso((8,))
    assert torso(tf.zeros([3, 6], tf.uint16)).shape == (3, 8)
    assert torso.layers_[0].weights[0].shape == (6 * 16, 8)


def test_actor_critic_r2d2_and_dict_networks_take_a_discrete_observation():
    cell = ArraySpec((), "int32", num_values=16)
    batch = tf.constant([0, 5, 15], tf.int32)

    network = build_actor_critic("mlp", 4, 4, (32, 32), True, 0, False, observation_spec=cell)
    assert network.torso.one_hot_depth == 16 and network.value_torso.one_hot_depth == 16
    assert network.torso(batch).shape == (3, 32)

    q_network = build_r2d2(R2D2Config(torso="mlp", stack_size=1, mlp_sizes=(32,)), cell, ACTIONS)
    assert q_network.torso.one_hot_depth == 16 and q_network.torso_input_shape == ()
    assert q_network.torso(batch).shape == (3, 32)

    dict_torso = MultiInputTorso({"cell": cell, "speed": ArraySpec((2,), "float32")}, (8,))
    depths = [encoder.one_hot_depth for encoder in dict_torso.encoders]
    assert depths == [16, 0]  # sorted keys: cell, speed
    out = dict_torso({"cell": batch, "speed": tf.zeros([3, 2])})
    assert out.shape[0] == 3


def test_the_start_line_says_the_observation_is_one_hot_encoded():
    assert describe_observation(ArraySpec((), "int32", num_values=16)).endswith("one-hot over its 16 values")
    assert "one-hot" not in describe_observation(ArraySpec((4,), "float32"))
    words = describe_observation({"0": ArraySpec((), "int32", num_values=32), "1": ArraySpec((2,), "float32")})
    assert "0: [] int32 (vector, discrete: one-hot over its 32 values)" in words and "1: [2] float32 (vector)" in words
    assert "one-hot" not in describe_observation(ArraySpec((), "int32", num_values=16), one_hot=False)


@pytest.mark.parametrize("agent, one_hot", [("ppo", True), ("vtrace", True), ("r2d2", True), ("sac", False)])
def test_the_start_line_promises_a_one_hot_only_where_the_network_makes_one(agent, one_hot):
    """SAC's MLPs take a MultiDiscrete observation as numbers: its line must not say one-hot."""
    config = get_preset(f"classic_{agent}")
    choice = fit_network(config, ArraySpec((3,), "int32", num_values=5))
    assert ("one-hot over its 5 values" in choice.reason) == one_hot, choice.reason
