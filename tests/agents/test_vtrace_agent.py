"""The V-trace agent: network shapes, the LSTM's resets, and the loss's sign, truncation and entropy terms."""

import dataclasses

import numpy as np
import tensorflow as tf

from seed_rl.agents.vtrace import VTraceAgent, VTraceConfig
from seed_rl.ops.specs import zeros_env_output
from seed_rl.types import ArraySpec, EnvOutput, Unroll

OBS = ArraySpec((4,), "float32")
ACT = ArraySpec((), "int32", num_values=3)


def _agent(**kw):
    cfg = VTraceConfig(network="mlp", mlp_sizes=(16,), lstm_size=kw.pop("lstm_size", 8), **kw)
    return VTraceAgent(cfg, OBS, ACT)


def _unroll(agent, T=5, B=3, seed=0, done=None, abandoned=None):
    rng = np.random.default_rng(seed)
    done = np.zeros([T + 1, B], bool) if done is None else done
    abandoned = np.zeros([T + 1, B], bool) if abandoned is None else abandoned
    env = EnvOutput(
        reward=tf.constant(rng.normal(size=[T + 1, B]), tf.float32), done=tf.constant(done),
        observation=tf.constant(rng.normal(size=[T + 1, B, 4]), tf.float32),
        abandoned=tf.constant(abandoned), episode_step=tf.zeros([T + 1, B], tf.int32))
    actions = tf.constant(rng.integers(0, 3, size=[T + 1, B]), tf.int32)
    prev = tf.concat([tf.zeros([1, B], tf.int32), actions[:-1]], 0)
    outputs, _ = agent.network(prev, env, agent.initial_state(B), unroll=True)
    from seed_rl.agents.vtrace.agent import AgentOutput

    behaviour = AgentOutput(actions, outputs.policy_logits + 0.1, outputs.baseline)
    return Unroll(agent.initial_state(B), prev, env, behaviour, tf.zeros([T + 1, B], tf.int64))


def test_act_shapes_and_recurrent_state():
    agent = _agent()
    out, state = agent.act(tf.zeros([2], tf.int32), zeros_env_output(OBS, 2), agent.initial_state(2))
    assert out.action.shape == [2] and out.action.dtype == tf.int32
    assert out.policy_logits.shape == [2, 3] and out.baseline.shape == [2]
    assert [s.shape for s in state] == [[2, 8], [2, 8]]


def test_unroll_equals_step_by_step_with_resets_on_done():
    agent = _agent()
    T, B = 6, 2
    done = np.zeros([T, B], bool)
    done[3, 0] = True
    rng = np.random.default_rng(1)
    env = EnvOutput(tf.constant(rng.normal(size=[T, B]), tf.float32), tf.constant(done),
                    tf.constant(rng.normal(size=[T, B, 4]), tf.float32), tf.zeros([T, B], tf.bool),
                    tf.zeros([T, B], tf.int32))
    prev = tf.zeros([T, B], tf.int32)
    state = (tf.constant(rng.normal(size=[B, 8]), tf.float32), tf.constant(rng.normal(size=[B, 8]), tf.float32))
    unrolled, _ = agent.network(prev, env, state, unroll=True)
    s = state
    for t in range(T):
        step, s = agent.network(prev[t], tf.nest.map_structure(lambda x: x[t], env), s)
        np.testing.assert_allclose(step.baseline, unrolled.baseline[t], rtol=1e-5, atol=1e-5)
    # Episode boundary: the state is zeroed before step 3 of env 0, so env 0 from step 3 on does not depend on
    # the initial state.
    other, _ = agent.network(prev, env, agent.initial_state(B), unroll=True)
    np.testing.assert_allclose(other.baseline[3:, 0], unrolled.baseline[3:, 0], rtol=1e-5, atol=1e-5)
    assert not np.allclose(other.baseline[:3, 0], unrolled.baseline[:3, 0])


def test_impala_deep_network_on_atari_observations():
    agent = VTraceAgent(VTraceConfig(), ArraySpec((84, 84, 1), "uint8"), ArraySpec((), "int32", num_values=18))
    out, state = agent.act(tf.zeros([2], tf.int32), zeros_env_output(ArraySpec((84, 84, 1), "uint8"), 2),
                           agent.initial_state(2))
    assert out.policy_logits.shape == [2, 18]
    assert state[0].shape == [2, 256]
    # conv 16-32-32 with 2 residual blocks each (3 + 12 convs), dense 256, LSTM, 2 heads; the entropy cost is fixed
    # (no target entropy), so not trained.
    assert len(agent.trainable_variables) == 2 * 15 + 2 + 3 + 4


def test_loss_is_finite_and_flipping_the_policy_gradient_flips_its_gradient():
    agent = _agent(lstm_size=0)
    unroll = _unroll(agent)
    flipped = VTraceAgent(dataclasses.replace(agent.config, flip_policy_gradient=True), OBS, ACT)
    flipped.network.set_weights(agent.network.get_weights())
    policy_vars = lambda a: a.network.policy_head.trainable_variables  # noqa: E731
    grads = []
    for a in (agent, flipped):
        with tf.GradientTape() as tape:
            loss, metrics, _ = a.loss(unroll)
        assert np.isfinite(float(loss))
        g = tape.gradient(metrics["losses/policy"], policy_vars(a))
        grads.append(g[0].numpy())
    np.testing.assert_allclose(grads[0], -grads[1], rtol=1e-5, atol=1e-7)


def test_truncated_step_has_zero_td_error_and_no_policy_gradient():
    """Step k holds the terminal observation of a truncated episode (the actor's extra message); step k + 1 is
    the reset observation with done = abandoned = True. Step k gets no policy gradient and no value error."""
    T, B, k = 4, 1, 2
    done = np.zeros([T + 1, B], bool)
    abandoned = np.zeros([T + 1, B], bool)
    done[k + 1, 0] = abandoned[k + 1, 0] = True
    agent = _agent(lstm_size=0, entropy_cost=0.0)
    unroll = _unroll(agent, T=T, B=B, done=done, abandoned=abandoned)

    logits_var = agent.network.policy_head.trainable_variables

    def per_step_policy_grad(step):
        mask = np.zeros([T + 1, B], bool)
        mask[step] = True
        with tf.GradientTape() as tape:
            outputs, _ = agent.network(unroll.prev_actions, unroll.env_outputs, unroll.agent_state, unroll=True)
            # Only the policy term of step `step` matters here: recompute the loss with the other steps' logits
            # detached.
            logits = tf.where(mask[..., None], outputs.policy_logits, tf.stop_gradient(outputs.policy_logits))
            patched = unroll._replace(agent_outputs=unroll.agent_outputs)
            del patched
            from seed_rl.agents.vtrace import loss as loss_lib

            def network(*args, **kwargs):
                return outputs._replace(policy_logits=logits), ()

            metrics = loss_lib.compute_loss(agent.config, network, agent.distribution, agent.entropy_cost,
                                            unroll).metrics
        return tape.gradient(metrics["losses/policy"], logits_var)[0].numpy()

    assert np.allclose(per_step_policy_grad(k), 0.0)
    assert not np.allclose(per_step_policy_grad(k - 1), 0.0)


def test_adaptive_entropy_cost_moves_towards_the_target():
    agent = _agent(lstm_size=0, target_entropy=0.0, entropy_cost=0.01)
    unroll = _unroll(agent)
    with tf.GradientTape() as tape:
        loss = agent.loss(unroll).loss
    (g,) = tape.gradient(loss, [agent.entropy_cost.param])
    # Entropy is above the target (0), so the coefficient's gradient is positive: a descent step lowers it.
    assert float(g) > 0


def test_impala_shallow_network_on_stacked_frames():
    from seed_rl.configs import get_preset

    cfg = get_preset("atari_vtrace_fast").agent
    assert cfg.network == "impala_shallow" and cfg.lstm_size == 0
    obs = ArraySpec((84, 84, 4), "uint8")
    agent = VTraceAgent(cfg, obs, ArraySpec((), "int32", num_values=6))
    out, state = agent.act(tf.zeros([2], tf.int32), zeros_env_output(obs, 2), agent.initial_state(2))
    assert out.policy_logits.shape == [2, 6] and state == ()
    kernels = [v.shape for v in agent.network.variables if len(v.shape) == 4]
    assert kernels == [(8, 8, 4, 16), (4, 4, 16, 32)]  # the IMPALA paper's two convolutions
