"""Playing whole episodes with an agent in-process, one env and one compiled policy step per env step: what
``seed-rl eval`` does with a checkpoint, and what the learner does to check a candidate for the target
(``--target_eval_episodes``) with its live weights."""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, List, Optional

import numpy as np
import tensorflow as tf

from seed_rl.types import Agent, EnvOutput


@dataclasses.dataclass(frozen=True)
class Episode:
    """One played episode."""

    index: int
    episode_return: float
    steps: int


def policy_step(agent: Agent, greedy: bool) -> Callable:
    """The agent's acting step, compiled: ``(prev_action [1], env_output [1], state) -> (action [1], state)``;
    ``greedy`` takes the protocol's ``greedy_action`` of the outputs instead of the sampled action."""

    def step(prev_action, env_output, state):
        output, state = agent.act(prev_action, env_output, state)
        action = agent.greedy_action(output) if greedy else output.action
        return action, state

    return tf.function(step, reduce_retracing=True)


def env_action(action: tf.Tensor):
    """The action of env 0 as the env takes it: a Python int for a discrete action (what Discrete spaces take),
    an array otherwise (Box, MultiDiscrete)."""
    value = action.numpy()[0]
    return int(value) if value.ndim == 0 and np.issubdtype(value.dtype, np.integer) else value


def play_episodes(agent: Agent, step: Callable, env, num_episodes: int,
                  on_episode: Optional[Callable[[Episode], None]] = None,
                  max_seconds: Optional[float] = None) -> List[float]:
    """Plays ``num_episodes`` episodes of ``env`` (a gymnasium env, reset here) with ``step`` (``policy_step``)
    and returns their returns. ``max_seconds``: stop after this long with the episodes finished by then (an env
    without a time limit and a policy that never ends one would play forever)."""
    if num_episodes < 1:
        raise ValueError(f"num_episodes must be >= 1, got {num_episodes}")
    returns: List[float] = []
    state = agent.initial_state(1)
    action_spec = agent.agent_output_spec(1).action
    prev_action = tf.zeros(action_spec.shape, action_spec.dtype)
    obs, _ = env.reset()
    reward, done, total, steps = 0.0, False, 0.0, 0
    deadline = None if max_seconds is None else time.monotonic() + max_seconds
    while len(returns) < num_episodes and (deadline is None or steps % 100 or time.monotonic() < deadline):
        env_output = EnvOutput(
            reward=tf.constant([reward], tf.float32), done=tf.constant([done]),
            observation=tf.nest.map_structure(lambda x: tf.convert_to_tensor(np.asarray(x)[None]), obs),
            abandoned=tf.constant([False]), episode_step=tf.constant([steps], tf.int32))
        action, state = step(prev_action, env_output, state)
        prev_action = action
        obs, step_reward, terminated, truncated, _ = env.step(env_action(action))
        reward = float(step_reward)
        total += reward
        steps += 1
        done = bool(terminated or truncated)
        if done:
            returns.append(total)
            if on_episode is not None:
                on_episode(Episode(len(returns) - 1, total, steps))
            total, steps = 0.0, 0
            if len(returns) < num_episodes:  # no reset after the last one (a video would start)
                obs, _ = env.reset()
    return returns
