"""The on-policy family's split batch modes (the original's ``split`` and ``split_with_advantage_recomputation``):
the advantages, value targets and PopArt's statistics computed once over a whole batch, then minibatches of single
transitions. Over all of a batch's transitions at once, the transition loss is the unroll loss (same value, same
gradients): what differs between the modes is only which weights the advantages come from and how the minibatches
are drawn."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from seed_rl import agents as agents_lib
from seed_rl.configs import get_preset
from seed_rl.types import Unroll
from tests.agents.test_contract import SPECS, T, _random_unroll

B = 3


def _agent(preset: str, kind: str, **changes):
    obs_spec, act_spec, _ = SPECS[kind]
    config = get_preset(preset)
    tf.keras.utils.set_random_seed(0)
    return agents_lib.make_agent(config.agent_name, dataclasses.replace(config.agent, **changes), obs_spec, act_spec)


def _flatten(prepared):
    return tf.nest.map_structure(lambda t: tf.reshape(t, [-1, *t.shape[2:]]), prepared)


def _no_truncations(unroll: Unroll) -> Unroll:
    return unroll._replace(env_outputs=unroll.env_outputs._replace(
        abandoned=tf.zeros_like(unroll.env_outputs.abandoned)))


@pytest.mark.parametrize("preset, kind, changes", [
    ("classic_ppo", "vector", {}),
    ("classic_ppo", "vector", {"advantage_estimator": "vtrace", "policy_loss": "vtrace"}),
    ("classic_ppo", "vector", {"advantage_estimator": "nstep", "nstep_n": 2, "value_clip_eps": 0.2,
                               "huber_delta": 1.0}),
    ("classic_awr", "vector", {}),
    ("mujoco_ppo", "continuous", {"reward_normalizer": "none", "normalize_observations": False}),
    ("classic_ppo", "vector", {"advantage_values": "acting"}),
], ids=["ppo-gae", "vtrace", "nstep-clipped-huber", "awr", "ppo-continuous", "acting-values"])
def test_the_transition_loss_over_a_whole_batch_is_the_unroll_loss(preset, kind, changes):
    agent = _agent(preset, kind, batch_mode="split", **changes)
    assert agent.trains_transitions and agent.schedule.splits_transitions and not agent.schedule.prepares_every_epoch
    unroll = _no_truncations(_random_unroll(agent, kind, np.random.default_rng(7)))
    with tf.GradientTape() as tape:
        whole = agent.loss(unroll)
    unroll_grads = tape.gradient(whole.loss, agent.trainable_variables)
    prepared = agent.prepare_transitions(unroll)
    for leaf in tf.nest.flatten(prepared):
        assert leaf.shape[:2] == [T, B]
    transitions = _flatten(prepared)
    with tf.GradientTape() as tape:
        split = agent.transition_loss(transitions)
    split_grads = tape.gradient(split.loss, agent.trainable_variables)
    np.testing.assert_allclose(float(split.loss), float(whole.loss), rtol=1e-5, atol=1e-6)
    for name in ("losses/policy", "losses/value", "losses/regularization", "value/mean_target"):
        np.testing.assert_allclose(float(split.metrics[name]), float(whole.metrics[name]), rtol=1e-5, atol=1e-6)
    for a, b in zip(split_grads, unroll_grads):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6)
    # The order of the transitions does not matter: the loss is a mean over them.
    order = np.random.default_rng(0).permutation(T * B)
    shuffled = agent.transition_loss(tf.nest.map_structure(lambda t: tf.gather(t, order), transitions))
    np.testing.assert_allclose(float(shuffled.loss), float(split.loss), rtol=1e-5)


def test_popart_statistics_take_a_batch_once_per_preparation_and_observations_once_per_minibatch():
    agent = _agent("mujoco_ppo", "continuous")
    assert agent.schedule.split == "once" and agent.schedule.minibatches == 32  # the original's default mode
    unroll = _random_unroll(agent, "continuous", np.random.default_rng(3))
    popart, observations = agent.reward_normalizer, agent.observation_normalizer
    counts = lambda: (float(popart.count.numpy().flat[0]), float(observations.count.numpy().flat[0]))  # noqa: E731
    assert counts() == (0.0, 0.0)
    transitions = _flatten(agent.prepare_transitions(unroll))
    assert counts() == (T * B, 0.0)  # the targets of every transition, no observations
    before = popart.mean_std()
    agent.transition_loss(tf.nest.map_structure(lambda t: t[:5], transitions))
    assert counts() == (T * B, 5.0)  # the minibatch's observations, PopArt untouched
    np.testing.assert_array_equal(popart.mean_std()[0].numpy(), before[0].numpy())
    # The prepared value targets are normalised by the statistics before this batch (PopArt's order).
    targets = transitions["targets"].numpy()
    assert np.all(np.isfinite(targets)) and np.all(np.isfinite(transitions["advantages"].numpy()))


def test_recomputation_mode_and_the_schedule():
    agent = _agent("classic_ppo", "vector", batch_mode="split_with_advantage_recomputation")
    assert agent.schedule.split == "every_epoch" and agent.schedule.shuffle
    assert agent.schedule.prepares_every_epoch and agent.trains_transitions
    # A recurrent network cannot train single transitions (they carry no state), and says so.
    assert _agent("classic_ppo", "vector", lstm_size=8).trains_transitions is False
    assert _agent("classic_ppo", "vector").schedule.split == "none"  # the default stays shuffle (deviation 37)
    assert _agent("classic_ppo", "vector", batch_mode="repeat").schedule.shuffle is False


@pytest.mark.parametrize("batch_mode", ["split", "shuffle"])
def test_acting_values_are_the_stored_baselines_and_the_split_preparation_runs_no_network(batch_mode, monkeypatch):
    """``advantage_values=acting``: the advantages are GAE over the value head's outputs stored at acting time (not
    the network re-run on the batch), and the split modes' preparation runs the network not at all; PopArt's
    statistics unnormalise the stored values. With the vtrace estimator the config refuses it."""
    from seed_rl.agents.policy_gradient import loss as loss_lib
    from seed_rl.agents.policy_gradient.config import PPOConfig
    from seed_rl.ops import advantages as advantages_lib

    acting = _agent("classic_ppo", "vector", batch_mode=batch_mode, advantage_values="acting")
    learner = _agent("classic_ppo", "vector", batch_mode=batch_mode)
    unroll = _no_truncations(_random_unroll(acting, "vector", np.random.default_rng(5)))
    env_next = unroll.env_outputs
    done = tf.cast(env_next.done[1:], tf.bool)
    stored = tf.cast(unroll.agent_outputs.baseline, tf.float32)
    expected_targets, expected = advantages_lib.gae(stored, tf.cast(env_next.reward[1:], tf.float32), done,
                                                    tf.zeros_like(done), 0.99, 0.95)
    if batch_mode == "split":
        calls = []
        real = loss_lib._network_outputs
        monkeypatch.setattr(loss_lib, "_network_outputs", lambda *a: calls.append(1) or real(*a))
        prepared = acting.prepare_transitions(unroll)
        assert calls == []  # no forward pass over the batch
        np.testing.assert_allclose(prepared["advantages"].numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(prepared["targets"].numpy(), expected_targets.numpy(), rtol=1e-5, atol=1e-6)
        other = learner.prepare_transitions(unroll)
        assert calls == [1] and not np.allclose(other["advantages"].numpy(), expected.numpy())
    else:  # the unroll loss runs the network for its loss; its targets are the stored values' all the same
        np.testing.assert_allclose(float(acting.loss(unroll).metrics["value/mean_target"]),
                                   float(tf.reduce_mean(expected_targets)), rtol=1e-5, atol=1e-6)
        assert not np.isclose(float(learner.loss(unroll).metrics["value/mean_target"]),
                              float(tf.reduce_mean(expected_targets)))
    popart = _agent("mujoco_ppo", "continuous", advantage_values="acting")
    popart.reward_normalizer.update(tf.constant([[10.0], [30.0]]))  # mean 20, std 10
    cont = _random_unroll(popart, "continuous", np.random.default_rng(6))
    np.testing.assert_allclose(loss_lib._acting_values(cont, popart.reward_normalizer).numpy(),
                               popart.reward_normalizer.unnormalize(
                                   tf.cast(cont.agent_outputs.baseline, tf.float32)[..., None])[..., 0].numpy())
    with pytest.raises(ValueError, match="advantage_values=acting"):
        PPOConfig(advantage_values="acting", advantage_estimator="vtrace")
    with pytest.raises(ValueError, match="advantage_values must be one of"):
        PPOConfig(advantage_values="stored")


def test_proximal_policy_learner_clips_against_the_preparation_pass_and_weights_by_it_over_the_acting_policy(
        monkeypatch):
    """``proximal_policy=learner`` (decoupled PPO): the split preparation keeps its pass's policy (also with
    ``advantage_values=acting``, which otherwise runs no network), and the transition loss clips the ratio against
    it; the config refuses it where there is no such pass or no clip."""
    from seed_rl.agents.policy_gradient import loss as loss_lib
    from seed_rl.agents.policy_gradient.config import PPOConfig

    agent = _agent("classic_ppo", "vector", batch_mode="split", proximal_policy="learner", epsilon=0.1)
    unroll = _no_truncations(_random_unroll(agent, "vector", np.random.default_rng(9)))
    prepared = agent.prepare_transitions(unroll)
    outputs, _ = agent.network(unroll.prev_actions, unroll.env_outputs, unroll.agent_state, unroll=True)
    np.testing.assert_allclose(prepared["proximal_params"].numpy(), outputs.policy_logits[:-1].numpy(), rtol=1e-5,
                               atol=1e-6)
    transitions = _flatten(prepared)
    # The weights have not moved since the preparation: the ratio against the proximal policy is 1, nothing is
    # clipped, and the policy loss is that of the truncated weights prox / mu times the advantages.
    result = agent.transition_loss(transitions)
    assert float(result.metrics["policy/ppo_clipped_fraction"]) == 0.0
    dist = agent.distribution
    action = transitions["agent_outputs"].action
    log_prox = dist.log_prob(transitions["proximal_params"], action)
    log_mu = dist.log_prob(transitions["agent_outputs"].policy_logits, action)
    advantages, _ = agent.policy_loss.preprocessor(transitions["advantages"])
    # The loss's value is the surrogate -log_pi sg(A rho), whose gradient is the policy gradient (log_pi = log_prox).
    expected = -tf.reduce_mean(log_prox * tf.minimum(tf.exp(log_prox - log_mu), 1.0) * advantages)
    np.testing.assert_allclose(float(result.metrics["losses/policy"]), float(expected), rtol=1e-4, atol=1e-6)
    # Against the acting policy (the default), the same weights clip the steps the acting policy is far from.
    acting = _agent("classic_ppo", "vector", batch_mode="split", epsilon=0.1)
    acting.network.set_weights(agent.network.get_weights())
    plain = acting.transition_loss(_flatten(acting.prepare_transitions(unroll)))
    assert float(plain.metrics["policy/ppo_clipped_fraction"]) > 0.0
    # With the stored values the preparation runs the network once, for the proximal policy only.
    calls = []
    real = loss_lib._network_outputs
    monkeypatch.setattr(loss_lib, "_network_outputs", lambda *a: calls.append(1) or real(*a))
    stored = _agent("classic_ppo", "vector", batch_mode="split", proximal_policy="learner",
                    advantage_values="acting")
    assert "proximal_params" in stored.prepare_transitions(unroll) and calls == [1]
    for bad in ({"batch_mode": "shuffle"}, {"batch_mode": "split", "policy_loss": "awr"}):
        with pytest.raises(ValueError, match="proximal_policy=learner"):
            PPOConfig(proximal_policy="learner", **bad)
    with pytest.raises(ValueError, match="proximal_policy must be one of"):
        PPOConfig(proximal_policy="target")
