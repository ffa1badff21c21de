"""Atari through ale-py's vectorised C++ engine (``ale_py.vector_env.AtariVectorEnv``): ``--atari_engine=ale_vector``.

One engine steps a batch of envs (one group of an actor's envs) in C++: the frame skip, the emulator, the grey
scale and the max over the last two frames run there, for the whole batch in one call from Python, where the
gymnasium path (`seed_rl.envs.atari.AtariPreprocessing`) makes one Python call per env and frame. The result is
that path's preprocessing, frame for frame (tests/envs/test_atari_vector.py steps both with the same seed and
actions):

* the engine's settings: frame skip ``num_action_repeats`` with the rewards summed and unclipped; grey scale
  through the same palette as ``ale.getScreenGrayscale``; max-pooling of the last two frames of the skip; no FIRE
  at reset; no end of episode on a life loss (``terminal_on_life_loss`` marks it in ``info["life_lost"]``, as the
  gymnasium path); the full or minimal action set; sticky actions at 0.25;
* the frame comes back at the full 210 x 160 screen, and this module resizes it to 84 x 84 with OpenCV's
  ``INTER_LINEAR``, as the gymnasium path (the engine's own resize is ``INTER_AREA``, which gives other pixels),
  and stacks the last ``frame_stack`` frames as `seed_rl.envs.atari.FrameStack` does, with the same
  `seed_rl.envs.frame_stack.FrameRing` (a reset fills the stack with the reset frame; the engine's own stack
  starts from zeros);
* the engine is seeded with the ALE seed gymnasium's ``AtariEnv`` derives from the env's seed
  (``SeedSequence(seed)``, second word) with its top bit cleared, since the engine takes non-negative seeds only;
  where that bit was clear already (env seeds 1, 4, 6, 8, ...), the emulator's random stream, and so every
  sticky action, is the gymnasium path's.

What differs (docs/environments.md, "The vector engine"):

* **No-ops after a reset**: the engine draws their count, uniformly in ``0..max_random_noops`` from its own
  generator; the gymnasium path draws ``1..max_random_noops`` from numpy. Given the same count, the frames are
  the same.
* **The episode cap** counts the reset no-ops, as gymnasium's ``TimeLimit`` (the engine's own cap does not): this
  module truncates an episode once ALE's episode frame number reaches ``max_episode_frames``, after a whole frame
  skip, where the gymnasium path stops inside the skip at that very frame. The last step of a truncated episode
  may thus play up to ``num_action_repeats - 1`` frames more (their reward, and a later observation).
* **The last observation of a game that ended inside the frame skip** is the engine's (it stops stepping without
  reading the screen: the frames of the step before). The actor never sends it: a terminated episode's message
  carries the reset observation.
"""

from __future__ import annotations

import re
import types
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

from seed_rl.envs.batch import EnvStep
from seed_rl.envs.frame_stack import FrameRing

__all__ = ["ENGINE_MIN_VERSION", "AleVectorBatch", "check_engine", "engine_seed"]

ENGINE_MIN_VERSION = (0, 12, 1)
"""ale-py's first release whose vector engine resets single envs correctly (partial resets, ale-py PR #716)."""

SCREEN_HEIGHT, SCREEN_WIDTH = 210, 160
"""The ALE screen; the engine returns it unresized (its resize is not the gymnasium path's)."""

_NO_INFO: types.MappingProxyType = types.MappingProxyType({})
_LIFE_LOST: types.MappingProxyType = types.MappingProxyType({"life_lost": True})


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version)[:3])


def check_engine() -> Any:
    """The engine's class, ``ale_py.vector_env.AtariVectorEnv``.

    Raises:
      ValueError: in one line, when ale-py is missing, older than `ENGINE_MIN_VERSION` or has no vector env.
    """
    need = ".".join(map(str, ENGINE_MIN_VERSION))
    advice = f"pip install -U 'ale-py>={need}', or use --atari_engine=gymnasium"
    try:
        import ale_py
    except ImportError:
        raise ValueError(f"--atari_engine=ale_vector needs ale-py >= {need}, which is not installed: {advice}") from None
    version = getattr(ale_py, "__version__", "0")
    if _version_tuple(version) < ENGINE_MIN_VERSION:
        raise ValueError(f"--atari_engine=ale_vector needs ale-py >= {need} (its vector engine resets single envs "
                         f"correctly from that release on); installed: {version}: {advice}")
    try:
        from ale_py.vector_env import AtariVectorEnv
    except ImportError as e:
        raise ValueError(f"--atari_engine=ale_vector: ale-py {version} has no vector env ({e}): {advice}") from None
    return AtariVectorEnv


def engine_seed(seed: int) -> int:
    """The engine's seed for an env seeded with ``seed``: the ALE seed gymnasium's ``AtariEnv.seed_game`` derives
    (``SeedSequence(seed)``, second 32-bit word), top bit cleared (the engine ignores negative seeds)."""
    return int(np.random.SeedSequence(int(seed)).generate_state(2)[1]) & 0x7FFF_FFFF


class AleVectorBatch:
    """An `seed_rl.envs.batch.EnvBatch` of Atari envs stepped by one ``AtariVectorEnv``.

    Args:
      rom: the ROM id (``pong``, ``montezuma_revenge``), as ale-py names it.
      env_ids: the envs of the batch; env ``i`` is seeded with ``seeds[k]`` for ``env_ids[k] == i``.
      seeds: one seed per env (the caller's ``config.seed + env_id``).
      frame_skip, max_random_noops, sticky_actions, full_action_space, max_episode_frames, frame_stack,
        terminal_on_life_loss: as the gymnasium path's (`seed_rl.envs.atari.AtariOptions`, ``num_action_repeats``);
        with ``terminal_on_life_loss`` a step that loses a life, the game not over, carries ``info["life_lost"]``,
        as `seed_rl.envs.atari.AtariPreprocessing` marks it (the engine's lives before and after the step).
      num_threads: the engine's worker threads (0: as many as envs, at most the cores).
    """

    def __init__(self, rom: str, env_ids: Sequence[int], seeds: Sequence[int], *, frame_skip: int,
                 max_random_noops: int, sticky_actions: bool, full_action_space: bool, max_episode_frames: int,
                 frame_stack: int, num_threads: int, screen_size: int = 84, terminal_on_life_loss: bool = False):
        import cv2  # Lazy, as the gymnasium path: only Atari needs OpenCV.

        engine_class = check_engine()
        self._cv2 = cv2
        self.env_ids = tuple(int(i) for i in env_ids)
        if not self.env_ids or len(seeds) != len(self.env_ids):
            raise ValueError(f"an engine batch needs env ids and one seed each, got {env_ids} and {seeds}")
        if frame_skip < 1 or max_random_noops < 0 or max_episode_frames < 1 or frame_stack < 1 or num_threads < 0:
            raise ValueError(f"invalid engine settings: frame_skip={frame_skip}, max_random_noops={max_random_noops},"
                             f" max_episode_frames={max_episode_frames}, frame_stack={frame_stack}, "
                             f"num_threads={num_threads}")
        self.max_episode_frames = int(max_episode_frames)
        self.screen_size = screen_size
        self._seeds = np.array([engine_seed(s) for s in seeds], dtype=np.int64)
        self._vec: Any = engine_class(
            game=rom, num_envs=len(self.env_ids), num_threads=num_threads, autoreset_mode="SameStep",
            # The cap is this module's (it counts the reset no-ops); the engine's, which does not, lies beyond it.
            max_num_frames_per_episode=self.max_episode_frames + frame_skip,
            repeat_action_probability=0.25 if sticky_actions else 0.0, full_action_space=full_action_space,
            img_height=SCREEN_HEIGHT, img_width=SCREEN_WIDTH, grayscale=True, stack_num=1, frameskip=frame_skip,
            maxpool=frame_skip > 1,
            noop_max=max_random_noops + 1,  # the engine draws 0..noop_max-1
            episodic_life=False, life_loss_info=False, reward_clipping=False, use_fire_reset=False)
        self._started = False
        self._rings = [FrameRing(frame_stack) for _ in self.env_ids]
        self.observation_space = spaces.Box(0, 255, (screen_size, screen_size, frame_stack), dtype=np.uint8)
        self.action_space = self._vec.single_action_space
        self.reset_noops = np.zeros(len(self.env_ids), dtype=np.int64)
        """The no-ops the engine played after the last reset of each env (ALE's episode frame number then)."""
        self.terminal_on_life_loss = bool(terminal_on_life_loss)
        self._lives = np.zeros(len(self.env_ids), dtype=np.int64)
        """Each env's lives after its last step or reset (read only with ``terminal_on_life_loss``)."""

    @property
    def num_envs(self) -> int:
        return len(self.env_ids)

    def _resize(self, screen: np.ndarray) -> np.ndarray:
        return self._cv2.resize(screen, (self.screen_size, self.screen_size),
                                interpolation=self._cv2.INTER_LINEAR)

    def _first(self, index: int, screen: np.ndarray) -> np.ndarray:
        """Starts env ``index``'s frame stack with ``screen``: the first observation of an episode."""
        return self._rings[index].start(self._resize(screen))

    def _next(self, index: int, screen: np.ndarray) -> np.ndarray:
        """Pushes ``screen`` onto env ``index``'s frame stack (the oldest frame drops out)."""
        return self._rings[index].push(self._resize(screen))

    def reset(self, indices: Sequence[int]) -> list[Any]:
        indices = [int(i) for i in indices]
        if not self._started:
            if sorted(indices) != list(range(self.num_envs)):
                raise ValueError("the first reset of an engine batch must reset all of its envs")
            screens, info = self._vec.reset(seed=self._seeds)
            self._started = True
        else:
            mask = np.zeros(self.num_envs, dtype=np.bool_)
            mask[indices] = True
            screens, info = self._vec.reset(options={"reset_mask": mask})
        self.reset_noops[indices] = info["episode_frame_number"][indices]
        self._lives[indices] = info["lives"][indices]
        return [self._first(i, screens[i, 0]) for i in indices]

    def step(self, indices: Sequence[int], actions: Sequence[Any]) -> list[EnvStep]:
        indices = [int(i) for i in indices]
        chosen = np.asarray(actions).reshape(len(indices))
        if not np.issubdtype(chosen.dtype, np.integer):
            raise ValueError(f"Atari actions are integers, got {chosen.dtype}")
        # An action out of range would stop the engine for good (a worker's exception leaves its batch unfinished,
        # and the call waits forever): that env plays a no-op instead and starts again, with the error, as a
        # gymnasium env that raises is re-created.
        valid = (chosen >= 0) & (chosen < self.action_space.n)
        full = np.zeros(self.num_envs, dtype=np.int32)  # the envs left out play a no-op; they are reset next
        full[np.asarray(indices)[valid]] = chosen[valid]
        screens, rewards, terminated, truncated, info = self._vec.step(full)
        ended = terminated | truncated  # reset by the engine already (SameStep): ``final_obs`` is the last frame
        # The cap counts the reset no-ops (ALE's episode frame number), as gymnasium's TimeLimit does.
        frame_numbers = info["episode_frame_number"]  # of the next episode where the engine reset an env
        capped = ~ended & (frame_numbers >= self.max_episode_frames)
        self.reset_noops[ended] = frame_numbers[ended]
        life_lost = None
        if self.terminal_on_life_loss:  # the lives of the next episode where the engine reset an env
            lives = np.asarray(info["lives"], dtype=np.int64)
            # As AtariPreprocessing (and baselines' EpisodicLifeEnv): fewer lives, not none, and the episode goes on.
            life_lost = ~ended & ~capped & (lives > 0) & (lives < self._lives)
            self._lives[:] = lives
        first_screens: Any = None
        if capped.any():
            first_screens, first_info = self._vec.reset(options={"reset_mask": capped})
            self.reset_noops[capped] = first_info["episode_frame_number"][capped]
            self._lives[capped] = first_info["lives"][capped]
        out = []
        for i in indices:
            first: np.ndarray | None = None
            if ended[i]:
                observation = self._next(i, info["final_obs"][i, 0])
                first = self._first(i, screens[i, 0])
            else:
                observation = self._next(i, screens[i, 0])
                if capped[i]:
                    first = self._first(i, first_screens[i, 0])
            marks = _LIFE_LOST if life_lost is not None and life_lost[i] else _NO_INFO
            out.append(EnvStep(observation, float(rewards[i]), bool(terminated[i]),
                               bool(truncated[i] or capped[i]), marks, first))
        if not valid.all():
            bad = [k for k in range(len(indices)) if not valid[k]]
            firsts = self.reset([indices[k] for k in bad])
            for k, first in zip(bad, firsts):
                error = ValueError(f"action {chosen[k]} is not one of the {self.action_space.n} actions")
                out[k] = EnvStep(first, 0.0, False, False, _NO_INFO, first, error)
        return out

    def close(self) -> None:
        vec, self._vec = self._vec, None
        if vec is not None:
            vec.close()  # the engine's threads stop when it is freed, with the last reference (here)
