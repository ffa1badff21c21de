"""Playing whole episodes with an agent in-process, one compiled policy step per env step (of one env, or of
several side by side): what ``seed-rl eval`` does with a checkpoint, what the learner does to check a candidate
for the target (``--target_eval_episodes``) with its live weights, and the videos it records while it trains
(``--video_period_secs``)."""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
import warnings
import weakref
from typing import Callable, Dict, List, Mapping, Optional

import numpy as np
import tensorflow as tf

from seed_rl.types import Agent, EnvOutput

log = logging.getLogger("seed_rl.learner")


@dataclasses.dataclass(frozen=True)
class Episode:
    """One played episode."""

    index: int
    episode_return: float
    steps: int


EVAL_ENVS = 10
"""Envs a greedy evaluation (``seed-rl eval``, the closing evaluation, the learner's check of a target candidate)
plays side by side unless told: the default 10 episodes at once. One after another, with a batch-of-1 policy step
per env step, a good Breakout policy's episodes used up the closing evaluation's two minutes after 2 to 5 of them;
side by side, one batched policy step serves them all."""


def eval_envs(num_episodes: int, video: bool = False) -> int:
    """How many envs a greedy evaluation of ``num_episodes`` plays side by side unless told: one per episode up to
    ``EVAL_ENVS``, and one when it records videos (one file per episode, in order)."""
    return 1 if video else min(num_episodes, EVAL_ENVS)


def make_envs(env_config, first_id: int, count: int) -> list:
    """``count`` envs of ``env_config`` with env ids ``first_id``, ``first_id + 1``, ... (an env's id seeds it, as
    an actor's envs are seeded); those already made are closed when one fails."""
    from seed_rl.envs import create_environment  # the envs' packages load only when an evaluation plays

    envs: list = []
    try:
        for i in range(count):
            envs.append(create_environment(env_config, first_id + i))
    except BaseException:
        for made in envs:
            made.close()
        raise
    return envs


_STEPS: "weakref.WeakKeyDictionary[Agent, Dict[bool, Callable]]" = weakref.WeakKeyDictionary()
_STEPS_LOCK = threading.Lock()


def policy_step(agent: Agent, greedy: bool) -> Callable:
    """The agent's acting step, compiled: ``(prev_action [1], env_output [1], state) -> (action [1], state)``;
    ``greedy`` takes the protocol's ``greedy_action`` of the outputs instead of the sampled action. One step per
    agent and mode: the learner's greedy check and its periodic videos share one compiled graph (tf.function
    calls are thread-safe), instead of tracing the network twice."""
    with _STEPS_LOCK:
        steps = _STEPS.setdefault(agent, {})
        if greedy not in steps:
            ref = weakref.ref(agent)  # the cached step must not keep its key (the agent) alive

            def step(prev_action, env_output, state):
                live = ref()
                output, state = live.act(prev_action, env_output, state)
                action = live.greedy_action(output) if greedy else output.action
                return action, state

            steps[greedy] = tf.function(step, reduce_retracing=True, autograph=False)
        return steps[greedy]


def env_action(action: tf.Tensor, row: int = 0):
    """The action of env ``row`` as the env takes it: a Python int for a discrete action (what Discrete spaces
    take), an array otherwise (Box, MultiDiscrete)."""
    value = (action.numpy() if isinstance(action, tf.Tensor) else np.asarray(action))[row]
    return int(value) if value.ndim == 0 and np.issubdtype(value.dtype, np.integer) else value


def _env_outputs(obs: list, reward: list, done: list, steps: list) -> EnvOutput:
    """One batch of the envs' latest outputs, env ``i`` in row ``i``."""
    stack = lambda *xs: tf.convert_to_tensor(np.stack([np.asarray(x) for x in xs]))  # noqa: E731
    return EnvOutput(reward=tf.constant(reward, tf.float32), done=tf.constant(done),
                     observation=tf.nest.map_structure(stack, *obs), abandoned=tf.constant([False] * len(obs)),
                     episode_step=tf.constant(steps, tf.int32))


def play_episodes(agent: Agent, step: Callable, env, num_episodes: int,
                  on_episode: Optional[Callable[[Episode], None]] = None,
                  max_seconds: Optional[float] = None) -> List[float]:
    """Plays ``num_episodes`` episodes with ``step`` (``policy_step``) and returns their returns, in episode order.

    ``env``: a gymnasium env, or a list of them that play side by side, one batched policy step for all of them
    per env step (each reset here). Env ``i`` of ``n`` plays episodes ``i``, ``i + n``, ... so which episodes are
    played, and with a seed their returns, do not depend on which env finishes first. ``on_episode`` is called
    for every finished episode, in episode order. ``max_seconds``: stop after this long with the episodes finished
    by then (an env without a time limit and a policy that never ends one would play forever)."""
    if num_episodes < 1:
        raise ValueError(f"num_episodes must be >= 1, got {num_episodes}")
    envs = list(env) if isinstance(env, (list, tuple)) else [env]
    if not envs:
        raise ValueError("play_episodes needs at least one env")
    envs = envs[:num_episodes]  # an env with no episode to play would only slow the others
    n = len(envs)
    quota = [len(range(i, num_episodes, n)) for i in range(n)]
    played = [0] * n
    state = agent.initial_state(n)
    action_spec = agent.agent_output_spec(n).action
    prev_action = tf.zeros(action_spec.shape, action_spec.dtype)
    obs = [e.reset()[0] for e in envs]
    reward, done, total, steps = [0.0] * n, [False] * n, [0.0] * n, [0] * n
    finished: Dict[int, Episode] = {}  # by episode index
    reported = 0  # on_episode has seen episodes [0, reported)
    deadline, calls = None if max_seconds is None else time.monotonic() + max_seconds, 0
    while any(p < q for p, q in zip(played, quota)) and (deadline is None or calls % 100
                                                          or time.monotonic() < deadline):
        action, state = step(prev_action, _env_outputs(obs, reward, done, steps), state)
        prev_action = action
        actions, calls = action.numpy(), calls + 1
        for i, e in enumerate(envs):
            if played[i] >= quota[i]:
                continue  # done with its episodes: its row keeps the batch's shape, its actions are dropped
            obs[i], step_reward, terminated, truncated, info = e.step(env_action(actions, i))
            reward[i] = float(step_reward)
            total[i] += reward[i]
            steps[i] += 1
            ended = bool(terminated or truncated)
            # The agent's next input is done on a lost life too (--terminal_on_life_loss), as in training; the
            # episode, its return and the env's reset are the game's.
            done[i] = ended or bool(isinstance(info, Mapping) and info.get("life_lost"))
            if not ended:
                continue
            index = i + played[i] * n
            finished[index] = Episode(index, total[i], steps[i])
            played[i] += 1
            total[i], steps[i] = 0.0, 0
            if played[i] < quota[i]:  # no reset after an env's last episode (a video would start)
                obs[i], _ = e.reset()
        while reported in finished:
            if on_episode is not None:
                on_episode(finished[reported])
            reported += 1
    if on_episode is not None:  # cut short: the episodes that ended after one still playing
        for index in sorted(k for k in finished if k >= reported):
            on_episode(finished[index])
    return [finished[k].episode_return for k in sorted(finished)]


def record_video(env, video_dir: str, num_action_repeats: int = 1, name_prefix: str = "eval"):
    """``env`` wrapped in gymnasium's ``RecordVideo``: every episode becomes ``<video_dir>/<prefix>-episode-K.mp4``
    (one frame per env step, plus the reset frame), rendered by the raw env (``rgb_array``) under every wrapper.

    Needs moviepy (and pygame for the classic-control envs): ``pip install 'seed_rl[video]'``.
    """
    check_video_support()
    from gymnasium.wrappers import RecordVideo

    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # pygame renders off-screen; no display needed
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    raw = env.unwrapped
    if raw.render_mode is None:
        raw.render_mode = "rgb_array"  # the envs are made without one; rendering reads the emulator / the state
    fps = max(1, round(float(raw.metadata.get("render_fps", 30)) / max(1, num_action_repeats)))
    return RecordVideo(env, video_dir, episode_trigger=lambda episode: True, name_prefix=name_prefix,
                       disable_logger=True, fps=fps)


def check_video_support() -> None:
    """Raises ImportError, in words that say what to install, when videos cannot be written here."""
    try:
        import moviepy  # noqa: F401 - RecordVideo writes with it
    except ImportError:
        raise ImportError("videos need moviepy (and pygame for classic-control envs): "
                          "pip install 'seed_rl[video]'") from None


class PeriodicVideo:
    """While the learner trains: every ``period_s`` seconds, one greedy episode of the live weights recorded to
    ``<video_dir>/train-<frames>frames-episode-0.mp4`` (``frames``: the env frames when it started), in a daemon
    thread with its own env, so training and inference go on meanwhile (the weights may change during the
    episode). A recording that fails is logged once and the videos stop; the run goes on."""

    def __init__(self, agent: Agent, make_env: Callable[[], object], video_dir: str, period_s: float,
                 frames: Callable[[], int], num_action_repeats: int = 1, max_seconds: float = 60.0):
        self.agent = agent
        self.make_env = make_env
        self.video_dir = video_dir
        self.period_s = float(period_s)
        self.frames = frames
        self.num_action_repeats = num_action_repeats
        self.max_seconds = max_seconds
        self.written: List[str] = []
        self._last_frames = -1
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="training-videos", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: Optional[float] = None) -> None:
        """Stops after the episode being recorded, if any (waits ``timeout`` seconds at most)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(self.max_seconds + 5 if timeout is None else timeout)

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            try:
                self.record_one()
            except Exception as e:  # never the run's end: one line, and no more videos
                log.warning("training videos stopped: recording one failed (%s: %s)", type(e).__name__, e)
                return

    def record_one(self) -> Optional[str]:
        """Records one greedy episode now; returns the video's path, or None when no env frame was played since
        the last video (nothing new to show: the run is starting or waiting for its actors)."""
        frames = int(self.frames())
        if self.written and self._last_frames == frames:
            return None
        self._last_frames = frames
        prefix = f"train-{frames:012d}frames"
        with warnings.catch_warnings():  # every video after the first goes to the folder the first made
            warnings.filterwarnings("ignore", message=".*Overwriting existing videos")
            env = record_video(self.make_env(), self.video_dir, self.num_action_repeats, prefix)
        try:
            play_episodes(self.agent, policy_step(self.agent, greedy=True), env, 1, max_seconds=self.max_seconds)
        finally:
            env.close()  # writes the file (also of an episode cut at max_seconds)
        path = os.path.join(self.video_dir, f"{prefix}-episode-0.mp4")
        self.written.append(path)
        return path
