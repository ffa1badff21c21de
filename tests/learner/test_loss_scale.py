"""``--precision=float16``: torsos in float16 under Keras's mixed_float16 policy, and the trainer's dynamic loss
scaling (seed_rl/learner/loss_scale.py): a step whose gradients overflow is skipped and the scale halves, finite
steps grow it. On the CPU (float16 kernels run there, slowly); the mirrored case is in mirrored_probe.py."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from seed_rl.config import DevicesConfig
from seed_rl.learner import devices as devices_lib
from seed_rl.learner.loss_scale import MAX_SCALE, DynamicLossScale
from seed_rl.learner.training import Trainer
from seed_rl.types import ReplayFeed, UpdateSchedule
from tests.agents import test_contract as contract


# -- the scale on its own ---------------------------------------------------------------------------------------
def test_unscale_divides_in_float32():
    scale = DynamicLossScale(initial_scale=8.0)
    grads = scale.unscale([tf.constant([8.0, 16.0], tf.float16), None, tf.constant(4.0)])
    assert grads[1] is None and grads[0].numpy().tolist() == [1.0, 2.0] and float(grads[2]) == 0.5
    assert grads[0].dtype == tf.float32


def test_the_scale_halves_on_overflow_and_doubles_after_the_growth_interval():
    scale = DynamicLossScale(initial_scale=4.0, growth_interval=3)
    history = []
    for finite in (True, True, False, True, True, True, True, False, False, False, False):
        scale.update(tf.constant(finite))
        history.append((float(scale.scale), int(scale.good_steps)))
    assert history == [(4.0, 1), (4.0, 2),  # two finite steps: counted
                       (2.0, 0),            # overflow: halved, count restarts
                       (2.0, 1), (2.0, 2), (4.0, 0),  # the third finite step in a row doubles it
                       (4.0, 1),
                       (2.0, 0), (1.0, 0), (1.0, 0), (1.0, 0)]  # never below 1
    top = DynamicLossScale(initial_scale=MAX_SCALE, growth_interval=1)
    top.update(tf.constant(True))
    assert float(top.scale) == MAX_SCALE
    with pytest.raises(ValueError, match="must be >= 1"):
        DynamicLossScale(growth_interval=0)


# -- the trainer under --precision=float16 ------------------------------------------------------------------------
def _float16_trainer(case):
    layer = devices_lib.DeviceLayer("auto", precision="float16")
    assert layer.loss_scaling and layer.describe().endswith("mixed float16")
    with devices_lib.dtype_policy(layer.dtype_policy()):
        agent = contract._build(*case, seed=1)
    assert keras.config.dtype_policy().name == "float32"  # restored
    # One update per step (PPO's preset trains 10 epochs of 32 minibatches of transitions; the scaling is the same).
    trainer = Trainer(agent, agent.make_optimizer(10), tf.Variable(0, dtype=tf.int64), schedule=UpdateSchedule(),
                      devices=layer)
    return agent, trainer


def _step(agent, trainer, case, seed=2):
    unroll = contract._random_unroll(agent, case[1], np.random.default_rng(seed), batch_major=True)
    weights = np.ones([contract.B], np.float32) if isinstance(agent.feed, ReplayFeed) else None
    return trainer.step(unroll, weights)


@pytest.mark.parametrize("case", [("vtrace", "image"), ("r2d2", "vector"), ("ppo", "continuous"),
                                  ("sac", "continuous")], ids=contract._ids)
def test_float16_trains_the_torso_in_float16_with_a_finite_scaled_step(case):
    agent, trainer = _float16_trainer(case)
    network = agent.network
    torsos = [t for t in (getattr(network, "torso", None), getattr(network, "value_torso", None)) if t is not None]
    torso_layers = [sub for t in torsos for sub in t._flatten_layers()]
    assert all(sub.compute_dtype == "float16" for sub in torso_layers)
    assert all(v.dtype == "float32" for v in agent.trainable_variables)  # mixed precision: float32 weights
    before = [v.numpy().copy() for v in agent.trainable_variables]
    result = _step(agent, trainer, case)
    metrics = {k: float(v) for k, v in result.metrics.items()}
    assert np.isfinite(metrics["losses/total"]) and metrics["learner/grad_norm"] > 0, metrics
    assert metrics["learner/skipped_updates"] == 0.0 and metrics["learner/loss_scale"] == 2.0**15
    assert any(not np.array_equal(b, v.numpy()) for b, v in zip(before, agent.trainable_variables))


def test_float32_has_no_loss_scale():
    layer = devices_lib.DeviceLayer("auto")
    agent = contract._build("vtrace", "vector")
    trainer = Trainer(agent, agent.make_optimizer(10), tf.Variable(0, dtype=tf.int64), devices=layer)
    assert not layer.loss_scaling and trainer.loss_scale is None
    assert "learner/loss_scale" not in _step(agent, trainer, ("vtrace", "vector")).metrics


def test_a_step_whose_gradients_overflow_is_skipped_and_the_scale_halves():
    """With a scale far beyond float16's range the torso's float16 gradients overflow: nothing of the optimizer
    (weights, moments, iterations) changes, the scale halves, and a later step at a sane scale trains. V-trace's
    vector network: its float16 torso overflows the same way, and the image network's float16 steps cost CI most of
    a minute (``test_float16_trains_the_torso_in_float16_with_a_finite_scaled_step`` trains it)."""
    case = ("vtrace", "vector")
    agent, trainer = _float16_trainer(case)
    optimizer = trainer.optimizer
    trainer.loss_scale.scale.assign(MAX_SCALE)
    weights = [v.numpy().copy() for v in agent.trainable_variables]
    slots = [v.numpy().copy() for v in optimizer.variables]
    result = _step(agent, trainer, case)
    metrics = {k: float(v) for k, v in result.metrics.items()}
    assert metrics["learner/skipped_updates"] == 1.0 and metrics["learner/grad_norm"] == 0.0, metrics
    assert metrics["learner/loss_scale"] == MAX_SCALE  # the scale the step ran with
    assert float(trainer.loss_scale.scale) == MAX_SCALE / 2
    assert all(np.array_equal(w, v.numpy()) for w, v in zip(weights, agent.trainable_variables))
    assert all(np.array_equal(s, v.numpy()) for s, v in zip(slots, optimizer.variables))
    assert int(trainer.policy_version.numpy()) == 1  # the train step counts; the optimizer update was skipped
    trainer.loss_scale.scale.assign(2.0**10)
    result = _step(agent, trainer, case, seed=3)
    assert float(result.metrics["learner/skipped_updates"]) == 0.0
    assert any(not np.array_equal(w, v.numpy()) for w, v in zip(weights, agent.trainable_variables))


def test_float16_is_a_precision_the_config_takes():
    assert DevicesConfig(precision="float16").precision == "float16"
    with pytest.raises(devices_lib.DeviceError, match="choose one of float32, bfloat16, float16"):
        devices_lib.DeviceLayer("auto", precision="float8")


@pytest.mark.parametrize("precision", ["bfloat16", "float16"])
def test_the_continuous_control_networks_keep_float32_heads_under_mixed_precision(precision):
    """SAC's MLP and LSTM networks and the on-policy family's control network have no torso: their hidden MLP
    layers compute in the low precision, their LSTMs and output layers in float32, and what they give the loss is
    float32 (before, their output layers computed in the policy's dtype and a concatenation with a float32 tensor
    failed)."""
    from seed_rl.networks.continuous import ContinuousControlNetwork, SACLSTMNetwork, SACNetwork
    from seed_rl.types import EnvOutput

    with devices_lib.dtype_policy(f"mixed_{precision}"):
        sac = SACNetwork(5, 2, 4, mlp_sizes=(8, 8))
        lstm = SACLSTMNetwork(5, 2, 4, lstm_sizes=(8,), pre_mlp_sizes=(8,), post_mlp_sizes=(8,), ff_mlp_sizes=(8,))
        control = ContinuousControlNetwork(4, sizes=(8, 8), std_independent_of_input=True, layer_norm=True)
    obs = tf.random.normal([3, 5])
    assert sac.action_params(obs).dtype == tf.float32 and sac.q_values(obs, tf.zeros([3, 2])).dtype == tf.float32
    assert sac.actor.hidden[0].compute_dtype == precision and sac.actor.out.compute_dtype == "float32"
    env = EnvOutput(reward=tf.zeros([2, 3]), done=tf.zeros([2, 3], tf.bool), observation=tf.random.normal([2, 3, 5]),
                    abandoned=tf.zeros([2, 3], tf.bool), episode_step=tf.zeros([2, 3], tf.int32))
    features, state = lstm.features(tf.zeros([2, 3, 2]), env, lstm.initial_state(3))
    assert all(t.dtype == tf.float32 for t in tf.nest.flatten((features, state)))
    assert lstm.action_params(features).dtype == tf.float32 and lstm.value(features).dtype == tf.float32
    outputs, _ = control(tf.zeros([3, 2]), env._replace(observation=obs), ())
    assert outputs.policy_logits.dtype == tf.float32 and outputs.baseline.dtype == tf.float32
    assert all(v.dtype == "float32" for v in [*sac.trainable_variables, *lstm.trainable_variables,
                                             *control.trainable_variables])
