"""SAC's recurrent actor-critic (``--network=lstm``, the original's ``ActorCriticLSTM``): one LSTM state per head,
reset at episode starts; a sequence run in one call equals the same sequence stepped one step at a time (the
original's networks_test); the agent acts with and returns every head's state, its loss reaches every variable,
and a training step through the trainer changes them. The MLP path is what it was (tests/agents/test_contract.py).
"""

from __future__ import annotations

import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf

from seed_rl import agents as agents_lib
from seed_rl.agents.sac.config import SACConfig
from seed_rl.configs import get_preset
from seed_rl.learner.training import Trainer
from seed_rl.networks.continuous import SACLSTMNetwork
from seed_rl.types import ArraySpec, EnvOutput, Unroll
from tests.agents.test_contract import SPECS

SIZES = dict(lstm_sizes=(10, 20), pre_mlp_sizes=(30, 40), post_mlp_sizes=(50,), ff_mlp_sizes=(25, 35, 45))


def _env(rng, steps, batch, obs_size, done_rate=0.2) -> EnvOutput:
    return EnvOutput(reward=tf.constant(rng.normal(size=(steps, batch)), tf.float32),
                     done=tf.constant(rng.random((steps, batch)) < done_rate),
                     observation=tf.constant(rng.normal(size=(steps, batch, obs_size)), tf.float32),
                     abandoned=tf.zeros((steps, batch), tf.bool), episode_step=tf.ones((steps, batch), tf.int32))


def test_a_sequence_in_one_call_equals_it_step_by_step():
    keras.utils.set_random_seed(0)
    net = SACLSTMNetwork(15, 3, 6, num_critics=2, **SIZES)
    rng = np.random.default_rng(0)
    steps, batch = 12, 6
    env = _env(rng, steps, batch, 15)
    prev = tf.constant(rng.normal(size=(steps, batch, 3)), tf.float32)
    action = tf.constant(rng.normal(size=(steps, batch, 3)), tf.float32)
    # A non-zero first state (a stored one), as the replay gives the loss.
    state = tf.nest.map_structure(lambda t: tf.constant(rng.normal(size=t.shape), tf.float32), net.initial_state(batch))
    features, final = net.features(prev, env, state)
    whole = (net.action_params(features), net.value(features), net.q_values(features, action))
    assert [t.shape for t in whole] == [[steps, batch, 6], [steps, batch], [steps, batch, 2]]
    stepped: list = [[], [], []]
    s = state
    for i in range(steps):
        f, s = net.features(prev[i:i + 1], tf.nest.map_structure(lambda t, i=i: t[i:i + 1], env), s)
        for out, value in zip(stepped, (net.action_params(f), net.value(f), net.q_values(f, action[i:i + 1]))):
            out.append(value[0])
    for a, b in zip(whole, stepped):
        np.testing.assert_allclose(a.numpy(), tf.stack(b).numpy(), rtol=1e-4, atol=1e-5)
    for a, b in zip(tf.nest.flatten(final), tf.nest.flatten(s)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-5)


def test_the_state_is_reset_where_an_episode_starts():
    keras.utils.set_random_seed(1)
    net = SACLSTMNetwork(4, 2, 4, num_critics=2, **SIZES)
    rng = np.random.default_rng(1)
    env = _env(rng, 5, 3, 4, done_rate=0.0)
    env = env._replace(done=tf.constant([[False] * 3, [False] * 3, [True] * 3, [False] * 3, [False] * 3]))
    prev = tf.constant(rng.normal(size=(5, 3, 2)), tf.float32)
    random_state = tf.nest.map_structure(lambda t: tf.constant(rng.normal(size=t.shape), tf.float32),
                                         net.initial_state(3))
    a, _ = net.features(prev, env, random_state)
    b, _ = net.features(prev, env, net.initial_state(3))
    v_a, v_b = net.value(a).numpy(), net.value(b).numpy()
    assert not np.allclose(v_a[:2], v_b[:2])  # before the reset the first state matters
    np.testing.assert_allclose(v_a[2:], v_b[2:], rtol=1e-5, atol=1e-6)  # from the new episode on it does not


def _lstm_agent(**changes):
    obs_spec, act_spec, _ = SPECS["continuous"]
    sizes = dict(lstm_sizes=(16,), pre_mlp_sizes=(16,), post_mlp_sizes=(16,), ff_mlp_sizes=(16,))
    config = dataclasses.replace(get_preset("mujoco_sac").agent, network="lstm", **{**sizes, **changes})
    keras.utils.set_random_seed(0)
    return agents_lib.make_agent("sac", config, obs_spec, act_spec, num_envs=4, num_eval_envs=1)


def test_the_agent_acts_with_every_heads_state():
    agent = _lstm_agent()
    state = agent.initial_state(3)
    assert len(state) == 2 + agent.config.num_critics  # policy, V, the critics
    rng = np.random.default_rng(2)
    obs_spec, act_spec, _ = SPECS["continuous"]
    env = tf.nest.map_structure(lambda t: t[0], _env(rng, 1, 3, obs_spec.shape[0], done_rate=0.0))
    outputs, new_state = agent.act(tf.zeros([3, *act_spec.shape]), env, state)
    assert outputs.action.shape == [3, *act_spec.shape]
    assert np.all(np.abs(outputs.action.numpy()) <= 1.0)
    tf.nest.assert_same_structure(state, new_state)
    assert all(not np.allclose(a.numpy(), 0.0) for a in tf.nest.flatten(new_state))  # every head advanced
    # The served policy needs every head's LSTM: the policy variables are the whole network's.
    assert len(agent.policy_variables) == len(agent.network.variables)
    # The greedy action depends on the state.
    again, _ = agent.act(tf.zeros([3, *act_spec.shape]), env, new_state)
    assert not np.allclose(agent.greedy_action(again).numpy(), agent.greedy_action(outputs).numpy())


def _unroll(agent, rng, batch: int, length: int = 5, batch_major: bool = False) -> Unroll:
    """A time-major [L, B] unroll of random steps, actions in [-1, 1] and a random (stored) first state."""
    obs_spec, act_spec, _ = SPECS["continuous"]
    action = lambda: tf.constant(rng.uniform(-1, 1, (length, batch, *act_spec.shape)), tf.float32)  # noqa: E731
    outputs = agent.agent_output_spec()._replace(action=action(), policy_params=tf.constant(
        rng.normal(size=(length, batch, agent.distribution.param_size())), tf.float32))
    state = tf.nest.map_structure(lambda t: tf.constant(rng.normal(size=t.shape), tf.float32),
                                  agent.initial_state(batch))
    unroll = Unroll(agent_state=state, prev_actions=action(), env_outputs=_env(rng, length, batch, obs_spec.shape[0]),
                    agent_outputs=outputs, policy_version=tf.zeros([length, batch], tf.int64))
    if not batch_major:
        return unroll
    swap = lambda t: tf.transpose(t, [1, 0, *range(2, t.shape.rank)])  # noqa: E731
    return unroll._replace(**{name: tf.nest.map_structure(swap, getattr(unroll, name))
                              for name in ("prev_actions", "env_outputs", "agent_outputs", "policy_version")})


@pytest.mark.parametrize("bootstrap_net", ["v", "q"])
def test_the_loss_reaches_every_variable_from_the_stored_state(bootstrap_net):
    agent = _lstm_agent(bootstrap_net=bootstrap_net, target_entropy=-2.0)
    unroll = _unroll(agent, np.random.default_rng(4), batch=4)
    with tf.GradientTape() as tape:
        result = agent.loss(unroll)
    assert np.isfinite(float(result.loss)) and all(np.isfinite(float(v)) for v in result.metrics.values())
    grads = tape.gradient(result.loss, agent.trainable_variables)
    missing = [v.path for v, g in zip(agent.trainable_variables, grads) if g is None]
    assert not missing, missing
    # The stored first state matters to the loss (it is not silently replaced by zeros).
    zero = agent.loss(unroll._replace(agent_state=agent.initial_state(4)))
    assert float(zero.metrics["V/value"]) != float(result.metrics["V/value"])


def test_a_training_step_changes_the_weights_and_averages_the_target():
    agent = _lstm_agent()
    trainer = Trainer(agent, agent.make_optimizer(10), tf.Variable(0, dtype=tf.int64))
    before = [v.numpy().copy() for v in agent.trainable_variables]
    target_before = [v.numpy().copy() for v in agent.target_network.variables]
    step = trainer.step(_unroll(agent, np.random.default_rng(5), batch=4, batch_major=True),
                        np.ones([4], np.float32))
    assert all(np.isfinite(float(v)) for v in step.metrics.values())
    assert float(step.metrics["learner/target_updated"]) == 1.0  # Polyak every update
    assert any(not np.array_equal(a, b.numpy()) for a, b in zip(before, agent.trainable_variables))
    assert any(not np.array_equal(a, b.numpy()) for a, b in zip(target_before, agent.target_network.variables))


def test_config_and_specs():
    with pytest.raises(ValueError, match="network must be one of mlp, lstm"):
        SACConfig(network="gru")
    with pytest.raises(ValueError, match="at least one LSTM layer"):
        _lstm_agent(lstm_sizes=())
    with pytest.raises(ValueError, match="vector observation"):
        agents_lib.make_agent("sac", SACConfig(network="lstm"), ArraySpec((8, 8, 1), "uint8"),
                              SPECS["continuous"][1])
