"""The R2D2 agent: Ape-X epsilons, epsilon-greedy acting, loss and priorities, target copies, eval envs."""

import numpy as np
import pytest
import tensorflow as tf

from seed_rl.agents.r2d2 import R2D2Config
from seed_rl.agents.r2d2.agent import AgentOutput, R2D2Agent, ape_x_epsilons
from seed_rl.ops.priorities import sequence_priorities
from seed_rl.ops.specs import zeros_env_output
from seed_rl.types import ArraySpec, EnvOutput, Unroll

OBS = ArraySpec((4,), "float32")
ACT = ArraySpec((), "int32", num_values=2)


def _agent(num_envs=10, num_eval_envs=0, **kw):
    cfg = R2D2Config(torso="mlp", mlp_sizes=(16,), stack_size=1, lstm_size=8, hidden_size=8, **kw)
    return R2D2Agent(cfg, OBS, ACT, num_envs=num_envs, num_eval_envs=num_eval_envs)


def test_ape_x_epsilons_match_the_original():
    eps = ape_x_epsilons(10)
    np.testing.assert_allclose(eps[0], 0.4, rtol=1e-6)
    np.testing.assert_allclose(eps[-1], 0.4 ** 8, rtol=1e-5)
    assert np.all(np.diff(eps) < 0)
    np.testing.assert_allclose(ape_x_epsilons(1), [0.4])


def test_eval_envs_get_eval_epsilon_and_training_envs_ape_x():
    agent = _agent(num_envs=6, num_eval_envs=2, eval_epsilon=0.0)
    np.testing.assert_allclose(agent.epsilons.numpy()[:4], ape_x_epsilons(4), rtol=1e-6)
    np.testing.assert_allclose(agent.epsilons.numpy()[4:], [0.0, 0.0])


def test_epsilon_greedy_rate_and_greedy_actions_preserved():
    """Env 0 explores with epsilon 0.4: about 0.4 * (1 - 1/A) of its actions differ from the greedy one; the
    last env (epsilon 0.4^8) almost never explores."""
    agent = _agent(num_envs=10)
    n = 4000
    env_ids = tf.constant([0] * n + [9] * n, tf.int32)
    state = agent.initial_state(2 * n)
    env_output = zeros_env_output(OBS, 2 * n)
    out, _ = agent.act(tf.zeros([2 * n], tf.int32), env_output, state, env_ids)
    greedy = tf.argmax(out.q_values, axis=-1, output_type=tf.int32).numpy()
    differs = out.action.numpy() != greedy
    rate0 = differs[:n].mean()
    assert abs(rate0 - 0.4 * 0.5) < 0.05, rate0
    assert differs[n:].mean() < 0.01


def _unroll(agent, L=9, B=3, done=None, abandoned=None, seed=0):
    rng = np.random.default_rng(seed)
    done = np.zeros([L, B], bool) if done is None else done
    abandoned = np.zeros([L, B], bool) if abandoned is None else abandoned
    env = EnvOutput(tf.constant(rng.normal(size=[L, B]), tf.float32), tf.constant(done),
                    tf.constant(rng.normal(size=[L, B, 4]), tf.float32), tf.constant(abandoned),
                    tf.zeros([L, B], tf.int32))
    actions = tf.constant(rng.integers(0, 2, size=[L, B]), tf.int32)
    prev = tf.concat([tf.zeros([1, B], tf.int32), actions[:-1]], 0)
    q, _ = agent.network(prev, env, agent.initial_state(B), unroll=True)
    return Unroll(agent.initial_state(B), prev, env, AgentOutput(actions, q.q_values), tf.zeros([L, B], tf.int64))


def test_loss_priorities_and_importance_weights():
    agent = _agent(burn_in=2, n_steps=3)
    unroll = _unroll(agent)
    loss, metrics, priorities = agent.loss(unroll, tf.ones([3]))
    assert np.isfinite(float(loss))
    assert priorities.shape == [3] and "losses/total" in metrics
    assert np.all(priorities.numpy() >= 0)
    # Importance weights scale each sequence's loss.
    loss_half = agent.loss(unroll, tf.constant([0.5, 0.5, 0.5])).loss
    np.testing.assert_allclose(float(loss_half), 0.5 * float(loss), rtol=1e-5)
    with tf.GradientTape() as tape:
        loss = agent.loss(unroll, tf.ones([3])).loss
    grads = tape.gradient(loss, agent.trainable_variables)
    assert all(g is not None for g in grads)


def test_priority_mixes_max_and_mean():
    abs_td = tf.constant([[1.0], [3.0]])
    p = sequence_priorities(abs_td, tf.ones([2, 1]), 0.9)
    np.testing.assert_allclose(p.numpy(), [0.9 * 3 + 0.1 * 2], rtol=1e-6)


def test_initial_priorities_from_stored_q_values():
    agent = _agent(burn_in=2, n_steps=3)
    unroll = _unroll(agent)
    batch_major = unroll._replace(
        prev_actions=tf.transpose(unroll.prev_actions),
        env_outputs=tf.nest.map_structure(lambda t: tf.transpose(t, [1, 0, *range(2, t.shape.rank)]),
                                          unroll.env_outputs),
        agent_outputs=tf.nest.map_structure(lambda t: tf.transpose(t, [1, 0, *range(2, t.shape.rank)]),
                                            unroll.agent_outputs),
        policy_version=tf.transpose(unroll.policy_version))
    p = agent.initial_priorities(batch_major)
    assert p.shape == [3] and np.all(np.isfinite(p.numpy()))


def test_target_network_is_copied_every_n_steps():
    agent = _agent(update_target_every_n_step=3)
    online = agent.network.trainable_variables[0]
    target = agent.target_network.trainable_variables[0]
    online.assign(online + 1.0)
    assert not bool(agent.update_targets(tf.constant(1, tf.int64)))
    assert not np.allclose(online.numpy(), target.numpy())
    assert bool(agent.update_targets(tf.constant(3, tf.int64)))
    np.testing.assert_allclose(online.numpy(), target.numpy())


def test_flipped_reward_changes_the_targets():
    a = _agent(burn_in=0, n_steps=2)
    b = R2D2Agent(R2D2Config(torso="mlp", mlp_sizes=(16,), stack_size=1, lstm_size=8, hidden_size=8, burn_in=0,
                             n_steps=2, flip_reward_sign=True), OBS, ACT, num_envs=10)
    b.network.set_weights(a.network.get_weights())
    b.target_network.set_weights(a.target_network.get_weights())
    unroll = _unroll(a)
    assert abs(float(a.loss(unroll).loss) - float(b.loss(unroll).loss)) > 1e-6


def test_needs_a_training_env():
    with pytest.raises(ValueError, match="num_eval_envs"):
        _agent(num_envs=2, num_eval_envs=2)


def test_a_dict_observation_needs_the_multi_input_torso_and_gets_no_frame_stack():
    nested = {"pixels": ArraySpec((4, 4, 1), "uint8"), "state": ArraySpec((3,), "float32")}
    actions = ArraySpec((), "int32", num_values=3)
    with pytest.raises(ValueError, match="torso=mlp takes one array observation.*use torso=multi_input"):
        R2D2Agent(R2D2Config(torso="mlp", mlp_sizes=(8,), stack_size=1, lstm_size=8, hidden_size=8), nested,
                  actions, num_envs=2)
    with pytest.raises(ValueError, match="torso=multi_input takes a dict observation"):
        R2D2Agent(R2D2Config(torso="multi_input", mlp_sizes=(8,), stack_size=1, lstm_size=8, hidden_size=8),
                  ArraySpec((3,), "float32"), actions, num_envs=2)
    agent = R2D2Agent(R2D2Config(torso="multi_input", mlp_sizes=(8,), stack_size=1, lstm_size=8, hidden_size=8),
                      nested, actions, num_envs=2)
    assert agent.initial_state(2).frame_stacking_state.shape == (2, 0)  # no frames kept, as for a vector


@pytest.mark.parametrize("torso,conv_filters", [("nature", [32, 64, 64]), ("impala_shallow", [16, 32])])
def test_image_torsos_build_and_act_on_stacked_frames(torso, conv_filters):
    """Both CNN torsos take 4 stacked 84x84 frames; impala_shallow is the cheaper one atari_r2d2_fast uses."""
    from seed_rl.agents.r2d2.agent import build_network

    obs = ArraySpec((84, 84, 1), "uint8")
    act = ArraySpec((), "int32", num_values=4)
    net = build_network(R2D2Config(torso=torso, lstm_size=16, hidden_size=16), obs, act)
    state = net.initial_state(3)
    env_outputs = zeros_env_output(obs, 3)
    out, state = net(tf.zeros([3], tf.int32), env_outputs, state)
    assert out.q_values.shape == (3, 4)
    assert [layer.filters for layer in net.torso.convs] == conv_filters
    assert net.torso.convs[0].kernel.shape == (8, 8, 4, conv_filters[0])  # the 4 stacked frames are its channels


def test_unknown_torso_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="nature, impala_shallow, mlp"):
        R2D2Config(torso="resnet")
