"""``seed_rl.load_policy``: a trained policy that keeps its own recurrent state and previous action, acting as the
learner's inference step does for one env, from the checkpoint or from the SavedModel."""

from __future__ import annotations

import os

import gymnasium
import keras
import numpy as np
import pytest
import tensorflow as tf

import seed_rl
from seed_rl import agents as agents_lib
from seed_rl.config import replace, replace_flat
from seed_rl.configs import get_preset
from seed_rl.envs import env_specs
from seed_rl.evaluate import checkpoint_path, load_agent
from seed_rl.learner.checkpoints import RunCheckpoint
from seed_rl.learner.export import export_saved_model
from seed_rl.learner.inference import InferenceStep
from seed_rl.ops.distributions import Categorical
from seed_rl.types import EnvOutput


def _run_dir(tmp_path, agent_name: str) -> str:
    """A run directory with a recurrent network that also reads the reward and the previous action."""
    config = get_preset(f"classic_{agent_name}")
    if agent_name == "vtrace":
        agent = replace(config.agent, lstm_size=16, use_reward_and_action=True, separate_value_network=False)
    else:
        agent = replace(config.agent, eval_epsilon=0.0)  # R2D2's eval policy is then its greedy policy
    logdir = str(tmp_path / agent_name)
    config = replace(config, agent=agent, run=replace_flat(config.run, logdir=logdir))
    os.makedirs(logdir)
    with open(os.path.join(logdir, "config.json"), "w") as f:
        f.write(config.to_json())
    obs_spec, act_spec = env_specs(config.env)
    keras.utils.set_random_seed(11)
    built = agents_lib.make_agent(agent_name, config.agent, obs_spec, act_spec, num_envs=1)
    rng = np.random.default_rng(5)
    for v in built.policy_variables:  # large random kernels, no biases: actions that depend on every input
        value = rng.normal(0.0, 1.0, size=v.shape) if len(v.shape) >= 2 else np.zeros(v.shape)
        v.assign(value.astype(v.dtype.as_numpy_dtype))
    RunCheckpoint(logdir, built.checkpoint_items()).save(1)
    export_saved_model(built, os.path.join(logdir, "saved_model"), obs_spec)
    return logdir


def _episode(seed: int = 0, steps: int = 40):
    """A fixed sequence of CartPole observations and the rewards that came with them (fixed actions)."""
    env = gymnasium.make("CartPole-v1")
    obs, _ = env.reset(seed=seed)
    observations, rewards = [obs.astype(np.float32)], [0.0]
    for t in range(steps - 1):
        obs, reward, terminated, truncated, _ = env.step(t % 2)
        if terminated or truncated:
            break
        observations.append(obs.astype(np.float32))
        rewards.append(float(reward))
    return observations, rewards


def _learner_actions(agent, obs_spec, act_spec, observations, rewards):
    """The actions the learner's inference step gives env 1 (its eval env) for the sequence, as an actor sends it."""
    step = InferenceStep(agent, obs_spec, num_envs=2, unroll_length=8, num_action_repeats=1,
                         policy_version=tf.Variable(0, dtype=tf.int64), num_eval_envs=1, action_spec=act_spec)
    actions = []
    for t, (obs, reward) in enumerate(zip(observations, rewards)):
        env_outputs = EnvOutput(reward=np.array([reward], np.float32), done=np.array([False]),
                                observation=obs[None], abandoned=np.array([False]),
                                episode_step=np.array([t], np.int32))
        out = step(np.array([1], np.int32), np.array([7], np.int64), env_outputs, np.array([reward], np.float32))
        actions.append(int(np.asarray(out.actions)[0]))
    return actions


@pytest.fixture
def deterministic_categorical(monkeypatch):
    """V-trace samples its actions: make the sample the mode, in the learner and in the policy alike."""

    @tf.autograph.experimental.do_not_convert
    def mode(self, logits, seed=None):
        return self.mode(logits)

    monkeypatch.setattr(Categorical, "sample", mode)


@pytest.mark.parametrize("agent_name", ["vtrace", "r2d2"])
def test_policy_acts_as_the_learners_inference_step(agent_name, tmp_path, deterministic_categorical):
    logdir = _run_dir(tmp_path, agent_name)
    observations, rewards = _episode()
    config, _ = load_agent(logdir)
    obs_spec, act_spec = env_specs(config.env)
    # The learner's agent, with env 1 an evaluation env (R2D2: eval epsilon, here 0), and the run's weights.
    agent = agents_lib.make_agent(agent_name, config.agent, obs_spec, act_spec, num_envs=2, num_eval_envs=1)
    tf.train.Checkpoint(**agent.checkpoint_items()).restore(checkpoint_path(logdir)).expect_partial()
    expected = _learner_actions(agent, obs_spec, act_spec, observations, rewards)
    assert len(set(expected)) == 2  # the check means something: the recurrent policy uses both actions

    policy = seed_rl.load_policy(logdir)
    for _ in range(2):  # reset() starts over: the same actions again
        policy.reset()
        got = [policy.act(obs, reward) for obs, reward in zip(observations, rewards)]
        assert got == expected
        assert all(isinstance(a, int) for a in got)

    # Without the state carried from step to step the actions differ: the check depends on the bookkeeping.
    stateless = []
    for obs, reward in zip(observations, rewards):
        policy.reset()
        stateless.append(policy.act(obs, reward))
    assert stateless != expected


def test_the_saved_model_acts_like_the_checkpoint(tmp_path, deterministic_categorical):
    logdir = _run_dir(tmp_path, "r2d2")  # eval epsilon 0: the SavedModel's evaluation policy is deterministic
    observations, rewards = _episode(seed=3)
    from_checkpoint = seed_rl.load_policy(logdir)
    from_saved_model = seed_rl.load_policy(logdir, source="saved_model")
    a = [from_checkpoint.act(o, r) for o, r in zip(observations, rewards)]
    b = [from_saved_model.act(o, r) for o, r in zip(observations, rewards)]
    assert a == b


def test_load_policy_refuses_what_it_cannot_do(tmp_path):
    logdir = _run_dir(tmp_path, "vtrace")
    with pytest.raises(ValueError, match="source must be checkpoint or saved_model"):
        seed_rl.load_policy(logdir, source="onnx")
    with pytest.raises(ValueError, match="need source='checkpoint'"):
        seed_rl.load_policy(logdir, source="saved_model", greedy=True)
    os.rename(os.path.join(logdir, "saved_model"), os.path.join(logdir, "elsewhere"))
    with pytest.raises(FileNotFoundError, match="no SavedModel"):
        seed_rl.load_policy(logdir, source="saved_model")
