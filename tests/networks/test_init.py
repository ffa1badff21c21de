"""orthogonal_init: OpenAI baselines' / CleanRL's Atari initialisation of an actor-critic network, as V-trace's and
the on-policy family's ``--initializer=orthogonal`` apply it."""

import math

import keras
import numpy as np
import pytest

from seed_rl.agents.policy_gradient.agent import OnPolicyAgent
from seed_rl.agents.policy_gradient.config import PPOConfig
from seed_rl.agents.vtrace.agent import VTraceAgent
from seed_rl.agents.vtrace.config import VTraceConfig
from seed_rl.types import ArraySpec

OBS = ArraySpec(shape=(84, 84, 4), dtype="uint8")
ACTIONS = ArraySpec(shape=(), dtype="int32", num_values=6)


def _columns_orthogonal(kernel: np.ndarray, gain: float) -> None:
    flat = kernel.reshape(-1, kernel.shape[-1])  # [fan_in, units]
    rows, cols = flat.shape
    gram = flat.T @ flat if rows >= cols else flat @ flat.T
    np.testing.assert_allclose(gram, gain**2 * np.eye(min(rows, cols)), atol=1e-4 * max(1.0, gain**2))


def _agent(initializer: str, agent: str = "vtrace"):
    keras.utils.set_random_seed(0)
    if agent == "ppo":
        return OnPolicyAgent(PPOConfig(network="impala_shallow", lstm_size=0, initializer=initializer), OBS, ACTIONS)
    return VTraceAgent(VTraceConfig(network="impala_shallow", lstm_size=0, use_reward_and_action=False,
                                    initializer=initializer), OBS, ACTIONS)


AGENTS = pytest.mark.parametrize("agent", ["vtrace", "ppo"])


@AGENTS
def test_orthogonal_kernels_with_the_baselines_gains_and_zero_biases(agent):
    net = _agent("orthogonal", agent).network
    layers = [*net.torso.convs, net.torso.fc]
    for layer in layers:
        _columns_orthogonal(layer.kernel.numpy(), math.sqrt(2.0))
        assert not np.any(layer.bias.numpy())
    _columns_orthogonal(net.policy_head.kernel.numpy(), 0.01)
    _columns_orthogonal(net.baseline_head.kernel.numpy(), 1.0)
    assert not np.any(net.policy_head.bias.numpy()) and not np.any(net.baseline_head.bias.numpy())


@AGENTS
def test_the_first_policy_is_almost_uniform_and_runs_are_reproducible(agent):
    a, b = _agent("orthogonal", agent), _agent("orthogonal", agent)
    for va, vb in zip(a.network.variables, b.network.variables):
        np.testing.assert_array_equal(va.numpy(), vb.numpy())
    obs = np.random.default_rng(0).integers(0, 256, size=(8, *OBS.shape), dtype=np.uint8)
    logits = a.network.policy_head(a.network.torso(obs)).numpy()
    assert np.abs(logits).max() < 0.1  # gain 0.01: the first policy is close to uniform


@AGENTS
def test_keras_default_is_kept_and_unknown_initializers_are_refused(agent):
    net = _agent("keras", agent).network
    kernel = net.policy_head.kernel.numpy()
    assert np.abs(kernel).max() > 0.05  # glorot-uniform, not the 0.01-gain head
    with pytest.raises(ValueError, match="initializer must be keras or orthogonal"):
        (PPOConfig if agent == "ppo" else VTraceConfig)(initializer="he")


def test_control_mlp_refuses_another_initializer():
    """control_mlp initialises its own layers (orthogonal, the original's ContinuousControlAgent): asking it for
    another scheme is refused rather than ignored."""
    with pytest.raises(ValueError, match="control_mlp initialises its own layers"):
        PPOConfig(network="control_mlp", initializer="orthogonal")
