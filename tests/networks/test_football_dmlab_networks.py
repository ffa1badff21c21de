"""The original's Football network (``network=gfootball``) on packed SMM observations, and the Football and DMLab
presets' agents acting on their envs' specs."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from seed_rl import agents as agents_lib
from seed_rl.configs import get_preset
from seed_rl.envs import env_specs
from seed_rl.envs.football import pack_bit_planes
from seed_rl.networks import build_actor_critic
from seed_rl.types import EnvOutput


def _env_outputs(observation):
    b = observation.shape[0]
    return EnvOutput(reward=tf.zeros([b]), done=tf.zeros([b], tf.bool), observation=tf.constant(observation),
                     abandoned=tf.zeros([b], tf.bool), episode_step=tf.zeros([b], tf.int32))


def test_gfootball_network_reads_every_packed_plane():
    net = build_actor_critic("gfootball", num_actions=19)
    rng = np.random.default_rng(0)
    planes = (rng.random((1, 72, 96, 16)) < 0.05).astype(np.uint8)
    packed = pack_bit_planes(planes)
    out, state = net(tf.zeros([1], tf.int32), _env_outputs(packed), net.initial_state(1))
    assert out.policy_logits.shape == (1, 19) and out.baseline.shape == (1,) and state == ()
    # 4 sections of (conv + 2 residual blocks of 2 convs) = 20 convs, the dense layer and 2 heads; lecun-normal.
    kernels = [v for v in net.trainable_variables if "kernel" in v.path]
    assert len(kernels) == 4 * 5 + 1 + 2
    for k in range(16):  # one more player in plane k (any bit of the word) changes the output
        moved = planes.copy()
        moved[0, 30, 40, k] = 1 - moved[0, 30, 40, k]
        out2, _ = net(tf.zeros([1], tf.int32), _env_outputs(pack_bit_planes(moved)), ())
        assert not np.allclose(out.policy_logits.numpy(), out2.policy_logits.numpy()), k


@pytest.mark.parametrize("preset", ["football_vtrace", "football_r2d2", "dmlab_vtrace"])
def test_presets_act_on_their_envs_specs(preset):
    config = get_preset(preset)
    obs_spec, action_spec = env_specs(config.env)  # no gfootball / deepmind_lab needed for the specs
    agent = agents_lib.make_agent(config.agent_name, config.agent, obs_spec, action_spec, num_envs=2)
    rng = np.random.default_rng(1)
    high = 65535 if obs_spec.dtype == "uint16" else 255
    obs = rng.integers(0, high, size=(2, *obs_spec.shape)).astype(obs_spec.dtype)
    out, _ = agent.act(tf.zeros([2], tf.int32), _env_outputs(obs), agent.initial_state(2), tf.range(2))
    actions = out.action.numpy()
    assert actions.shape == (2,) and ((0 <= actions) & (actions < action_spec.num_values)).all()
