"""The dict observations' network (``multi_input``, ``seed_rl/networks/multi_input.py``): each key encoded by the
kind of its spec, in sorted key order, uint8 scaled as the other torsos scale it, every key's encoder reached by the
gradient; and in every agent that takes dict observations, as the defaults give it to a classic preset on a dict
spec: the agent contract suite's act and loss checks on that spec (``tests/agents/test_contract.py``)."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import tests.agents.test_contract as contract
from seed_rl import agents as agents_lib
from seed_rl.config import replace
from seed_rl.configs import get_preset
from seed_rl.configs.defaults import fit_network
from seed_rl.networks import ImpalaShallowTorso, MLPTorso, MultiInputTorso, SmallConvTorso, build_actor_critic
from seed_rl.types import ArraySpec

ACTIONS = ArraySpec((), "int32", num_values=3)
SPEC = {
    "speed": ArraySpec((2,), "float32"),
    "camera": ArraySpec((48, 48, 1), "uint8"),  # larger than 42 x 42: IMPALA's shallow CNN
    "map": ArraySpec((10, 10, 3), "uint8"),  # a small image: small_conv's torso
    "count": ArraySpec((), "int32"),  # a scalar: a vector of one
}


def _observation(spec, n, rng):
    out = {}
    for key, s in spec.items():
        if s.dtype == "uint8":
            out[key] = tf.constant(rng.integers(0, 256, [n, *s.shape]), tf.uint8)
        elif s.dtype == "int32":
            out[key] = tf.constant(rng.integers(0, 10, [n, *s.shape]), tf.int32)
        else:
            out[key] = tf.constant(rng.normal(size=[n, *s.shape]), tf.float32)
    return out


def test_each_key_gets_the_encoder_of_its_kind_in_sorted_order():
    torso = MultiInputTorso(SPEC, mlp_sizes=(32, 16), output_size=64)
    features = torso(_observation(SPEC, 5, np.random.default_rng(0)))
    assert features.shape == (5, 64) and features.dtype == tf.float32
    assert torso.keys == ("camera", "count", "map", "speed")
    assert [type(e) for e in torso.encoders] == [ImpalaShallowTorso, MLPTorso, SmallConvTorso, MLPTorso]
    # The mixing layer takes the concatenation: 256 (shallow CNN) + 16 (MLP) + 128 (small conv) + 16 (MLP).
    assert tuple(torso.fc.kernel.shape) == (256 + 16 + 128 + 16, 64)


def test_the_keys_order_in_the_dict_does_not_matter():
    """Built from the same spec in another insertion order, under the same seed, the torso has the same variables
    in the same order, and gives the same features for the observation's keys in any order."""
    rng = np.random.default_rng(1)
    observation = _observation(SPEC, 3, rng)
    keras.utils.set_random_seed(7)
    a = MultiInputTorso(SPEC)
    out_a = a(observation)
    keras.utils.set_random_seed(7)
    b = MultiInputTorso(dict(reversed(list(SPEC.items()))))
    out_b = b(dict(reversed(list(observation.items()))))
    assert [v.shape for v in a.variables] == [v.shape for v in b.variables]
    for va, vb in zip(a.variables, b.variables):
        np.testing.assert_array_equal(va.numpy(), vb.numpy())
    np.testing.assert_array_equal(out_a.numpy(), out_b.numpy())


def test_uint8_images_are_scaled_to_unit_range():
    """A uint8 key gives what the same weights give on its values / 255 in float32, as the image torsos do."""
    uint8 = {"frame": ArraySpec((6, 6, 2), "uint8"), "v": ArraySpec((3,), "uint8")}
    floats = {k: s._replace(dtype="float32") for k, s in uint8.items()}
    a, b = MultiInputTorso(uint8), MultiInputTorso(floats)
    observation = _observation(uint8, 4, np.random.default_rng(2))
    a(observation)
    b({k: tf.cast(v, tf.float32) for k, v in observation.items()})
    b.set_weights(a.get_weights())
    np.testing.assert_allclose(a(observation).numpy(),
                               b({k: tf.cast(v, tf.float32) / 255.0 for k, v in observation.items()}).numpy(),
                               rtol=1e-5, atol=1e-6)


def test_the_gradient_reaches_every_keys_encoder():
    torso = MultiInputTorso(SPEC)
    observation = _observation(SPEC, 8, np.random.default_rng(3))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(torso(observation) ** 2)
    grads = tape.gradient(loss, torso.trainable_variables)
    assert len(torso.trainable_variables) == len(grads) > 0
    for encoder in torso.encoders:
        names = {id(v) for v in encoder.trainable_variables}
        reached = [g for v, g in zip(torso.trainable_variables, grads) if id(v) in names]
        assert reached and all(g is not None and float(tf.reduce_max(tf.abs(g))) > 0 for g in reached), encoder.name


def test_wrong_keys_and_wrong_specs_are_refused():
    torso = MultiInputTorso(SPEC)
    torso(_observation(SPEC, 1, np.random.default_rng(4)))
    with pytest.raises(ValueError, match=r"built for the keys \['camera', 'count', 'map', 'speed'\], got \['map'\]"):
        torso({"map": tf.zeros([1, 10, 10, 3], tf.uint8)})
    with pytest.raises(ValueError, match="non-empty dict"):
        MultiInputTorso({})
    with pytest.raises(ValueError, match="nested dict"):
        MultiInputTorso({"a": {"b": ArraySpec((1,), "float32")}})
    with pytest.raises(ValueError, match="network=multi_input takes a dict observation; this env's is one array"):
        build_actor_critic("multi_input", 3, observation_spec=ArraySpec((4,), "float32"))
    with pytest.raises(ValueError, match="network=mlp takes one array observation; this env's is a dict.*"
                                         "use network=multi_input"):
        build_actor_critic("mlp", 3, observation_spec=SPEC)


SMALL_DICT = {"ball": ArraySpec((10, 10, 1), "uint8"), "paddle": ArraySpec((5,), "float32")}


@pytest.mark.parametrize("agent_name, lstm", [("vtrace", 0), ("vtrace", 8), ("ppo", 0), ("vmpo", 0), ("r2d2", 8)])
def test_an_agent_acts_and_learns_through_the_multi_input_torso(agent_name, lstm, monkeypatch):
    """The classic preset on a dict spec gets ``multi_input`` from the defaults; with an LSTM (V-trace: and the
    reward and previous action) the concatenated features feed the core."""
    monkeypatch.setitem(contract.SPECS, "dict", (SMALL_DICT, ACTIONS, "classic"))
    config = fit_network(get_preset(f"classic_{agent_name}"), SMALL_DICT).config
    agent_config = config.agent
    if agent_name == "vtrace" and lstm:
        agent_config = replace(agent_config, lstm_size=lstm, use_reward_and_action=True,
                               separate_value_network=False)
    elif agent_name == "r2d2":
        agent_config = replace(agent_config, lstm_size=lstm, hidden_size=8)
    keras.utils.set_random_seed(0)
    agent = agents_lib.make_agent(agent_name, agent_config, SMALL_DICT, ACTIONS, num_envs=contract.NUM_ENVS,
                                  num_eval_envs=1)
    assert isinstance(agent.network.torso, MultiInputTorso)
    assert [type(e) for e in agent.network.torso.encoders] == [SmallConvTorso, MLPTorso]

    def built(*case):
        return agent

    contract.test_act_on_a_batch_matches_the_declared_specs((agent_name, "dict"), built)
    contract.test_loss_is_finite_and_gradients_reach_every_trainable_variable((agent_name, "dict"), built)


def test_r2d2_takes_no_frame_stack_on_a_dict():
    config = fit_network(get_preset("atari_r2d2"), SMALL_DICT).config
    assert (config.agent.torso, config.agent.stack_size) == ("multi_input", 1)
    with pytest.raises(ValueError, match="torso=multi_input takes stack_size=1"):
        replace(config.agent, stack_size=4)


def test_the_orthogonal_initialisation_reaches_every_keys_encoder():
    """V-trace's ``--initializer=orthogonal`` re-initialises the torso's layers, the ones of every key's encoder
    and the mixing layer included (gain sqrt(2): ``K^T K = 2 I`` on the smaller side)."""
    config = replace(fit_network(get_preset("classic_vtrace"), SMALL_DICT).config.agent, initializer="orthogonal")
    agent = agents_lib.make_agent("vtrace", config, SMALL_DICT, ACTIONS)
    layers = [layer for torso in (agent.network.torso, agent.network.value_torso)
              for layer in torso._flatten_layers(include_self=False)
              if isinstance(layer, (keras.layers.Dense, keras.layers.Conv2D))]
    assert len(layers) == 2 * (2 + 2 + 1)  # per torso: conv + dense (ball), 2 x dense (paddle), the mixing layer
    for layer in layers:
        kernel = np.reshape(layer.kernel.numpy(), [-1, layer.kernel.shape[-1]])
        gram = kernel.T @ kernel if kernel.shape[0] >= kernel.shape[1] else kernel @ kernel.T
        np.testing.assert_allclose(gram, 2.0 * np.eye(len(gram)), atol=1e-4, err_msg=layer.name)
