"""A fake of DeepMind Lab's Python module ``deepmind_lab``, written from its documentation (docs/users/python_api.md
of google-deepmind/lab): the same classes, methods, arguments, types and states, with a trivial world.

What is faithful: ``Lab(level, observations, config={}, renderer='software', level_cache=None)`` (config keys and
values must be strings; unknown observation names and unknown levels are refused), ``reset(episode=-1,
seed=None)``, ``step(action, num_steps=1)`` with an ``np.intc [7]`` action within ``action_spec()``'s bounds,
returning the reward summed over the frames, ``is_running()``, ``observations()`` (a dict of the requested
observations; an error when the episode is not running, as the real one), ``num_steps()``, ``fps()``,
``events()``, ``action_spec()``, ``observation_spec()``, ``close()`` (after which only ``is_running()`` works),
module functions ``version()``, ``runfiles_path()``, ``set_runfiles_path(path)``, and the level cache protocol
(``level_cache.fetch(key, pk3_path)`` then ``write(key, pk3_path)`` when a level is compiled for the first time).

The world: an episode lasts `EPISODE_FRAMES` frames; every frame with FIRE pressed earns 1. ``RGB_INTERLEAVED``
is ``uint8 [height, width, 3]`` whose red channel is ``(seed + frame) % 256`` and green channel the last MOVE
value + 1, so tests can see the seed, the frame count and the action.

Put ``tests/fakes`` on ``sys.path`` (or PYTHONPATH for subprocesses) to import it as ``deepmind_lab``.
"""

from __future__ import annotations

import os
import random
import tempfile

import numpy as np

EPISODE_FRAMES = 120
"""Frames per episode of every fake level."""

_ACTION_SPEC = (
    {"min": -512, "max": 512, "name": "LOOK_LEFT_RIGHT_PIXELS_PER_FRAME"},
    {"min": -512, "max": 512, "name": "LOOK_DOWN_UP_PIXELS_PER_FRAME"},
    {"min": -1, "max": 1, "name": "STRAFE_LEFT_RIGHT"},
    {"min": -1, "max": 1, "name": "MOVE_BACK_FORWARD"},
    {"min": 0, "max": 1, "name": "FIRE"},
    {"min": 0, "max": 1, "name": "JUMP"},
    {"min": 0, "max": 1, "name": "CROUCH"},
)
_KNOWN_LEVEL_PREFIXES = ("contributed/dmlab30/", "tests/")
_KNOWN_LEVELS = ("seekavoid_arena_01", "lt_chasm", "nav_maze_static_01", "stairway_to_melon")
_runfiles_path = "/fake/deepmind_lab/runfiles"

created: list = []
"""Every Lab created in this process (tests read their configuration)."""


def version() -> str:
    return "fake-1.0"


def runfiles_path() -> str:
    return _runfiles_path


def set_runfiles_path(path: str) -> None:
    global _runfiles_path
    if not isinstance(path, str):
        raise TypeError("runfiles path must be a string")
    _runfiles_path = path


class Lab:
    def __init__(self, level, observations, config=None, renderer="software", level_cache=None):
        if not isinstance(level, str):
            raise TypeError("level must be a string")
        config = {} if config is None else config
        for key, value in config.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise TypeError(f"config keys and values must be strings, got {key!r}: {value!r}")
        if renderer not in ("software", "hardware"):
            raise ValueError(f"renderer must be 'software' or 'hardware', got {renderer!r}")
        self.width = int(config.get("width", "320"))
        self.height = int(config.get("height", "240"))
        self._spec = {
            "RGB_INTERLEAVED": {"dtype": np.uint8, "name": "RGB_INTERLEAVED", "shape": (self.height, self.width, 3)},
            "RGBD_INTERLEAVED": {"dtype": np.uint8, "name": "RGBD_INTERLEAVED", "shape": (self.height, self.width, 4)},
            "RGB": {"dtype": np.uint8, "name": "RGB", "shape": (3, self.height, self.width)},
            "INSTR": {"dtype": str, "name": "INSTR", "shape": ()},
            "VEL.TRANS": {"dtype": np.float64, "name": "VEL.TRANS", "shape": (3,)},
        }
        for name in observations:
            if name not in self._spec:
                raise ValueError(f"Unknown observation '{name}'.")
        if not (level.startswith(_KNOWN_LEVEL_PREFIXES) or level in _KNOWN_LEVELS):
            raise RuntimeError(f"Failed to open level '{level}'")
        self.level = level
        self.observation_names = list(observations)
        self.config = dict(config)
        self.renderer = renderer
        self.level_cache = level_cache
        self.compiled_from_cache: bool | None = None
        self.reset_seeds: list = []
        self._running = False
        self._closed = False
        self._frame = 0
        self._seed = 0
        self._move = 0
        self._episode = -1
        created.append(self)

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("Environment is closed")

    def _compile_level(self) -> None:
        if self.level_cache is None or self.compiled_from_cache is not None:
            return
        key = f"{self.level}:{sorted(self.config.items())}"
        with tempfile.TemporaryDirectory() as tmp:
            pk3_path = os.path.join(tmp, "map.pk3")
            if self.level_cache.fetch(key, pk3_path):
                with open(pk3_path, "rb") as f:
                    if f.read() != key.encode():
                        raise RuntimeError("level cache returned a different map")
                self.compiled_from_cache = True
            else:
                with open(pk3_path, "wb") as f:
                    f.write(key.encode())
                self.level_cache.write(key, pk3_path)
                self.compiled_from_cache = False

    def reset(self, episode=-1, seed=None):
        self._check_open()
        if seed is not None and not isinstance(seed, (int, np.integer)):
            raise TypeError(f"seed must be an integer, got {seed!r}")
        self._compile_level()
        self._episode = self._episode + 1 if episode is None or episode < 0 else int(episode)
        self._seed = int(seed) if seed is not None else random.randrange(2**31)
        self.reset_seeds.append(seed)
        self._frame = 0
        self._move = 0
        self._running = True
        return True

    def num_steps(self) -> int:
        self._check_open()
        return self._frame

    def is_running(self) -> bool:
        return self._running and not self._closed

    def step(self, action, num_steps=1):
        self._check_open()
        if not self._running:
            raise RuntimeError("Environment in wrong status to advance.")
        if not isinstance(action, np.ndarray) or action.dtype != np.intc or action.shape != (len(_ACTION_SPEC),):
            raise ValueError(f"action must be a numpy array of dtype np.intc and shape ({len(_ACTION_SPEC)},), "
                             f"got {action!r}")
        for value, spec in zip(action, _ACTION_SPEC):
            if not spec["min"] <= value <= spec["max"]:
                raise ValueError(f"action {spec['name']} = {value} outside [{spec['min']}, {spec['max']}]")
        if int(num_steps) < 1:
            raise ValueError(f"num_steps must be >= 1, got {num_steps}")
        reward = 0.0
        for _ in range(int(num_steps)):
            self._frame += 1
            reward += float(action[4])
            if self._frame >= EPISODE_FRAMES:
                self._running = False
                break
        self._move = int(action[3])
        return reward

    def observations(self) -> dict:
        self._check_open()
        if not self._running:
            raise RuntimeError("Environment in wrong status for call to observations()")
        out = {}
        for name in self.observation_names:
            spec = self._spec[name]
            if name == "INSTR":
                out[name] = "fake instruction"
                continue
            frame = np.zeros(spec["shape"], spec["dtype"])
            if name == "RGB_INTERLEAVED":
                frame[..., 0] = (self._seed + self._frame) % 256
                frame[..., 1] = self._move + 1
            out[name] = frame
        return out

    def events(self) -> list:
        self._check_open()
        return []

    def fps(self) -> int:
        return int(self.config.get("fps", "60"))

    def action_spec(self) -> list:
        return [dict(spec) for spec in _ACTION_SPEC]

    def observation_spec(self) -> list:
        return [dict(spec) for spec in self._spec.values()]

    def close(self) -> None:
        self._closed = True
        self._running = False
