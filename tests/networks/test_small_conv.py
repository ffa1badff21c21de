"""The small-image torso (``small_conv``, the MinAtar paper's conv 16 3x3 stride 1 and dense 128) in every agent that
takes images, as the defaults give it to a classic preset on a ``[10, 10, C]`` observation: the agent contract
suite's act and loss checks on that spec (``tests/agents/test_contract.py``; the suite itself covers the presets'
own kinds)."""

from __future__ import annotations

import keras
import numpy as np
import pytest

import tests.agents.test_contract as contract
from seed_rl import agents as agents_lib
from seed_rl.configs import get_preset
from seed_rl.configs.defaults import fit_network
from seed_rl.networks import SmallConvTorso
from seed_rl.types import ArraySpec

ACTIONS = ArraySpec((), "int32", num_values=5)


def test_the_torso_is_the_minatar_papers_network():
    torso = SmallConvTorso()
    features = torso(np.zeros([2, 10, 10, 4], np.uint8))
    assert features.shape == (2, 128)
    kernels = [tuple(w.shape) for w in torso.weights if len(w.shape) > 1]
    assert kernels == [(3, 3, 4, 16), (8 * 8 * 16, 128)]  # no padding: 10 x 10 -> 8 x 8 positions of 16 filters


@pytest.mark.parametrize("agent_name, dtype", [("vtrace", "uint8"), ("vtrace", "bool"), ("ppo", "uint8"),
                                               ("r2d2", "uint8")])
def test_an_agent_acts_and_learns_through_the_small_conv_torso(agent_name, dtype, monkeypatch):
    spec = ArraySpec((10, 10, 4), dtype)
    monkeypatch.setitem(contract.SPECS, "small_image", (spec, ACTIONS, "classic"))
    config = fit_network(get_preset(f"classic_{agent_name}"), spec).config
    keras.utils.set_random_seed(0)
    agent = agents_lib.make_agent(agent_name, config.agent, spec, ACTIONS, num_envs=contract.NUM_ENVS,
                                  num_eval_envs=1)
    assert isinstance(agent.network.torso, SmallConvTorso)

    def built(*case):
        return agent

    contract.test_act_on_a_batch_matches_the_declared_specs((agent_name, "small_image"), built)
    contract.test_loss_is_finite_and_gradients_reach_every_trainable_variable((agent_name, "small_image"), built)


@pytest.mark.parametrize("agent_name", ["vtrace", "ppo"])
def test_a_dict_observation_under_an_array_network_is_refused_in_one_line(agent_name):
    """A network named for one array (here the preset's mlp, as ``--network=mlp`` would name it) refuses a dict
    and names the one that takes it (tests/networks/test_multi_input.py)."""
    spec = {"pixels": ArraySpec((10, 10, 3), "uint8"), "speed": ArraySpec((1,), "float32")}
    with pytest.raises(ValueError, match="network=mlp takes one array observation; this env's is a dict: .*: use "
                                         "network=multi_input"):
        agents_lib.make_agent(agent_name, get_preset(f"classic_{agent_name}").agent, spec, ACTIONS)
