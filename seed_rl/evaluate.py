"""Evaluate a trained agent from its run directory, in-process (no gRPC): the library's "load and act" path."""

from __future__ import annotations

import os
from typing import List

import numpy as np
import tensorflow as tf

from seed_rl import agents as agents_lib
from seed_rl.config import Config
from seed_rl.envs import create_environment, env_specs
from seed_rl.types import Agent, EnvOutput


def load_agent(logdir: str) -> tuple[Config, Agent]:
    """Returns (config, agent) with the weights of the latest checkpoint in ``logdir``."""
    with open(os.path.join(logdir, "config.json")) as f:
        text = f.read()
    raw = Config.from_json(text)
    config = Config.from_json(text, agents_lib.config_class(raw.agent_name))
    obs_spec, act_spec = env_specs(config.env)
    agent = agents_lib.make_agent(config.agent_name, config.agent, obs_spec, act_spec)
    ckpt = tf.train.Checkpoint(**agent.checkpoint_items())
    latest = tf.train.latest_checkpoint(os.path.join(logdir, "checkpoints"))
    if latest is None:
        raise FileNotFoundError(f"no checkpoint in {os.path.join(logdir, 'checkpoints')}")
    ckpt.restore(latest).expect_partial()
    return config, agent


def evaluate(logdir: str, num_episodes: int = 10, greedy: bool = False, env_id: int = 10_000) -> List[float]:
    """Plays ``num_episodes`` episodes with the latest checkpoint and returns their returns.

    The agent acts with its evaluation policy (``act`` without env ids); ``greedy`` takes the protocol's
    ``greedy_action`` of its outputs instead (argmax of the policy logits or of the Q-values)."""
    config, agent = load_agent(logdir)
    env = create_environment(config.env, env_id)
    returns: List[float] = []
    try:
        state = agent.initial_state(1)
        prev_action = tf.zeros([1], tf.int32)
        obs, _ = env.reset()
        reward, done, total = 0.0, False, 0.0
        while len(returns) < num_episodes:
            env_output = EnvOutput(
                reward=tf.constant([reward], tf.float32), done=tf.constant([done]),
                observation=tf.nest.map_structure(lambda x: tf.convert_to_tensor(np.asarray(x)[None]), obs),
                abandoned=tf.constant([False]), episode_step=tf.constant([0], tf.int32))
            output, state = agent.act(prev_action, env_output, state)
            action = agent.greedy_action(output) if greedy else output.action
            prev_action = action
            obs, step_reward, terminated, truncated, _ = env.step(int(action.numpy()[0]))
            reward = float(step_reward)
            total += reward
            done = bool(terminated or truncated)
            if done:
                returns.append(total)
                total = 0.0
                obs, _ = env.reset()
    finally:
        env.close()
    return returns
