"""Evaluate a trained agent from its run directory, in-process (no gRPC): the library's "load and act" path.

``evaluate`` plays episodes with a checkpoint of the run (the latest, or one by number) through the agent's
compiled policy step (one ``tf.function`` call per env step), sampling or greedy, optionally seeded.
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
import warnings
from typing import Any, Callable, List, Optional, Union

import numpy as np
import tensorflow as tf

from seed_rl import agents as agents_lib
from seed_rl.config import Config
from seed_rl.envs import env_specs
from seed_rl.learner.checkpoints import BEST_DIR, CHECKPOINT_DIR
from seed_rl.learner.play import Episode, env_action, eval_envs, make_envs, play_episodes, policy_step, record_video
from seed_rl.types import Agent, EnvOutput


def available_checkpoints(logdir: str) -> List[int]:
    """The checkpoint numbers (the learner's update counter when it saved) that ``logdir`` holds, oldest first."""
    directory = os.path.join(logdir, CHECKPOINT_DIR)
    if not os.path.isdir(directory):
        return []
    numbers = []
    for name in os.listdir(directory):
        m = re.fullmatch(r"ckpt-(\d+)\.index", name)
        if m:
            numbers.append(int(m.group(1)))
    return sorted(numbers)


def checkpoint_path(logdir: str, checkpoint: Union[str, int] = "latest") -> str:
    """The checkpoint prefix of ``logdir`` for ``checkpoint``: ``"latest"``, ``"best"`` (``checkpoints/best``, the
    weights of the best window of episodes) or a number from :func:`available_checkpoints`. Raises
    FileNotFoundError (no checkpoint) or ValueError (unknown number)."""
    directory = os.path.join(logdir, CHECKPOINT_DIR)
    if checkpoint == "best":
        best_dir = os.path.join(logdir, BEST_DIR)
        best = tf.train.latest_checkpoint(best_dir)
        if best is None:
            raise FileNotFoundError(f"no best checkpoint in {best_dir}: the run has not finished a window of "
                                    "episodes with a checkpoint yet (use latest)")
        return best
    numbers = available_checkpoints(logdir)
    if not numbers:
        raise FileNotFoundError(f"no checkpoint in {directory}: the run has not saved one yet")
    if checkpoint == "latest":
        latest = tf.train.latest_checkpoint(directory)
        return latest or os.path.join(directory, f"ckpt-{numbers[-1]}")
    number = int(checkpoint)
    if number not in numbers:
        raise ValueError(f"no checkpoint {number} in {directory}; it holds {', '.join(map(str, numbers))} "
                         "(or use latest)")
    return os.path.join(directory, f"ckpt-{number}")


def load_config(logdir: str) -> Config:
    """The run's ``config.json``, with the agent's config as its dataclass."""
    with open(os.path.join(logdir, "config.json")) as f:
        text = f.read()
    raw = Config.from_json(text)
    return Config.from_json(text, agents_lib.config_class(raw.agent_name))


def load_agent(logdir: str, checkpoint: Union[str, int] = "latest") -> tuple[Config, Agent]:
    """Returns (config, agent) with the weights of ``checkpoint`` (default: the latest) in ``logdir``."""
    config = load_config(logdir)
    path = checkpoint_path(logdir, checkpoint)
    obs_spec, act_spec = env_specs(config.env)
    agent = agents_lib.make_agent(config.agent_name, config.agent, obs_spec, act_spec)
    status = tf.train.Checkpoint(**agent.checkpoint_items()).restore(path)
    try:  # every weight from the file: an untrained network's returns must not be reported as the checkpoint's
        status.assert_existing_objects_matched()
    except AssertionError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"{path} does not hold every weight of the {config.agent_name} agent that {logdir}/config.json "
                         f"describes ({first[:200]})") from e
    status.expect_partial()  # the optimizer's values, which nothing here holds
    return config, agent


def video_prefix(logdir: str, checkpoint: Union[str, int] = "latest") -> str:
    """The file-name prefix of an evaluation's videos: which checkpoint played (its kind and number) and when, so
    that evaluating another checkpoint, or the same one again, never overwrites earlier videos:
    ``eval-best-ckpt-40-20261204-153000``."""
    number = os.path.basename(checkpoint_path(logdir, checkpoint))
    kind = checkpoint if checkpoint in ("latest", "best") else "ckpt"
    label = number if kind == "ckpt" else f"{kind}-{number}"
    return f"eval-{label}-{time.strftime('%Y%m%d-%H%M%S')}"


def evaluate(logdir: str, num_episodes: int = 10, greedy: bool = False, env_id: int = 10_000,
             seed: Optional[int] = None, checkpoint: Union[str, int] = "latest",
             on_episode: Optional[Callable[[Episode], None]] = None,
             video_dir: Optional[str] = None, max_seconds: Optional[float] = None,
             num_envs: Optional[int] = None) -> List[float]:
    """Plays ``num_episodes`` episodes with a checkpoint of ``logdir`` and returns their returns.

    The agent acts with its evaluation policy (``act`` without env ids); ``greedy`` takes the protocol's
    ``greedy_action`` of its outputs instead (argmax of the policy logits or of the Q-values). ``seed`` seeds the
    env's first reset and TensorFlow's sampling, so two evaluations with the same seed play the same episodes;
    None seeds the env with the run's seed + ``env_id`` (as the actors' are) and leaves the sampling unseeded.
    ``on_episode`` is called after every episode (progress reports). ``video_dir``: record every episode as an MP4
    there (`record_video`). ``max_seconds``: stop after this long and return the episodes finished by then (an
    env without a time limit and a policy that never ends one would play forever). ``num_envs``: envs played side
    by side, one batched policy step for all (env ``i`` plays episodes ``i``, ``i + num_envs``, ...; its env id is
    ``env_id + i``); default ``eval_envs(num_episodes, video)``: up to ``EVAL_ENVS``, and 1 with videos.
    """
    if num_episodes < 1:
        raise ValueError(f"num_episodes must be >= 1, got {num_episodes}")
    if num_envs is None:
        num_envs = eval_envs(num_episodes, video=video_dir is not None)
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    if video_dir is not None and num_envs != 1:
        raise ValueError(f"videos are recorded from one env: num_envs must be 1 with video_dir, got {num_envs}")
    config, agent = load_agent(logdir, checkpoint)
    if seed is not None:
        tf.random.set_seed(seed)
    step = policy_step(agent, greedy)
    env_config = config.env if seed is None else dataclasses.replace(config.env, seed=int(seed))
    envs = make_envs(env_config, env_id, min(num_envs, num_episodes))
    if video_dir is not None:
        # gymnasium warns (two lines) whenever the folder exists, but the names (video_prefix) never collide here.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*Overwriting existing videos")
            envs[0] = record_video(envs[0], video_dir, config.env.num_action_repeats, video_prefix(logdir, checkpoint))
    try:
        return play_episodes(agent, step, envs, num_episodes, on_episode, max_seconds)
    finally:
        for env in envs:
            env.close()


class Policy:
    """A trained policy that acts on one env's observations and keeps its own recurrent state and previous action.

    ``reset()`` at the start of every episode, then ``act(observation, reward)`` for every observation, where
    ``reward`` is the reward the previous action earned (the network's input when it has one; 0 on the first step).
    For a run trained with ``--terminal_on_life_loss``, pass ``life_lost=True`` with the observation that follows
    a lost life (the env's ``info["life_lost"]``): the agent saw that step as ``done`` in training.
    ``act`` returns the action as a numpy value of the action spec's dtype (a Python int for discrete actions).
    Built by :func:`load_policy`; the step is the agent's compiled policy step, the same graph the learner's
    inference runs for one env.
    """

    def __init__(self, step: Callable, initial_state: Callable[[int], Any], config: Config,
                 observation_spec, action_spec):
        self._step = step
        self._initial_state = initial_state
        self.config = config
        self.observation_spec = observation_spec
        self.action_spec = action_spec
        self.reset()

    def reset(self) -> None:
        """Starts a new episode: zero recurrent state, previous action 0."""
        self._state = self._initial_state(1)
        self._prev_action = tf.zeros([1], tf.int32)
        self._steps = 0

    def act(self, observation: Any, reward: float = 0.0, life_lost: bool = False) -> Any:
        env_output = EnvOutput(
            reward=tf.constant([reward], tf.float32), done=tf.constant([bool(life_lost)]),
            observation=tf.nest.map_structure(lambda x: tf.convert_to_tensor(np.asarray(x)[None]), observation),
            abandoned=tf.constant([False]), episode_step=tf.constant([self._steps], tf.int32))
        action, self._state = self._step(self._prev_action, env_output, self._state)
        self._prev_action = action
        self._steps += 1
        return env_action(action)


def load_policy(logdir: str, checkpoint: Union[str, int] = "latest", greedy: bool = False,
                source: str = "checkpoint", seed: Optional[int] = None) -> Policy:
    """The policy of a run directory, ready to act: ``policy.reset(); action = policy.act(observation)``.

    Args:
      logdir: the run directory (``config.json``, ``checkpoints/``, ``saved_model/``).
      checkpoint: ``"latest"``, ``"best"`` or a checkpoint number (:func:`available_checkpoints`); checkpoint
        source only.
      greedy: act with the agent's greedy action (argmax of the logits or Q-values) instead of its evaluation
        policy (sampling; R2D2: epsilon-greedy with the eval epsilon). Checkpoint source only.
      source: ``"checkpoint"`` (the agent rebuilt from config.json with the checkpoint's weights) or
        ``"saved_model"`` (``<logdir>/saved_model``, which the learner exports at the end of a run; needs
        TensorFlow only, no seed_rl agent code).
      seed: seeds TensorFlow's sampling (two policies with the same seed act alike on the same observations).
    """
    if source not in ("checkpoint", "saved_model"):
        raise ValueError(f"source must be checkpoint or saved_model, got {source!r}")
    if seed is not None:
        tf.random.set_seed(seed)
    if source == "checkpoint":
        config, agent = load_agent(logdir, checkpoint)
        obs_spec, act_spec = env_specs(config.env)
        return Policy(policy_step(agent, greedy), agent.initial_state, config, obs_spec, act_spec)
    if greedy or checkpoint != "latest":
        raise ValueError("greedy and checkpoint need source='checkpoint': the SavedModel holds the evaluation "
                         "policy of the run's last weights")
    path = os.path.join(logdir, "saved_model")
    if not os.path.isdir(path):
        raise FileNotFoundError(f"no SavedModel in {path}: the learner exports it when a run ends")
    config = load_config(logdir)
    model = tf.saved_model.load(path)

    def step(prev_action, env_output, state):
        out = model.step(prev_action, env_output, state)
        return out["outputs"]["action"], out["agent_state"]

    def initial_state(batch_size: int):
        return model.initial_state(tf.constant(batch_size, tf.int32))

    obs_spec, act_spec = env_specs(config.env)
    return Policy(step, initial_state, config, obs_spec, act_spec)
