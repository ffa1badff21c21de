"""DeepMind Lab, prepared as the original's dmlab/env.py, against the ``deepmind_lab`` Python API.

DeepMind Lab has no pip build for current Pythons: its engine is built from source with Bazel
(``docker/Dockerfile.dmlab`` does it, as the original's image did). Where ``import deepmind_lab`` works,
``--env=dmlab --env_name=explore_goal_locations_small`` runs; elsewhere creating a DMLab env says how to get it.
This project tests the adapter against a fake of the API (tests/fakes/deepmind_lab), never against the real
engine: see docs/environments.md.

The environment of env id ``i``:

* ``deepmind_lab.Lab(level, ['RGB_INTERLEAVED'], config={'width', 'height', 'logLevel': 'WARN',
  'datasetPath'[, 'allowHoldOutLevels', 'mixerSeed']}, level_cache=...)``. A DMLab-30 name (`DMLAB_30`, and the
  test variants of `ALL_GAMES`) is the level ``contributed/dmlab30/<name>``; any other name goes to Lab as given
  (``seekavoid_arena_01``, ``tests/...``, your own levels).
* Observations ``uint8 [height, width, 3]`` (``RGB_INTERLEAVED``; 72 x 96 by default), the only observation the
  original requests: the language levels are played from pixels, as in the original.
* 9 discrete actions (`DEFAULT_ACTION_SET`: forward, backward, strafe left/right, look left/right by 20 pixels,
  look left/right + forward, fire), sent as ``np.intc [7]`` with Lab's native repeat
  ``step(action, num_steps=num_action_repeats)``; the reward is the sum Lab returns over the repeats.
* ``terminated`` when ``is_running()`` turns false (DMLab levels end by their own timers, which are part of the
  task); the observation then is zeros, since Lab has none after the end (the original returned None; the actor
  resets and never uses it).
* Each reset seeds the level with the next number of a per-env stream started at ``config.seed + i`` (the
  original's ``RandomState(task + 1)``).

Options (`DmLabOptions`, flags ``--width --height --level_cache_dir --homepath --dataset_path --dmlab_test_mode``).
A level cache (``--level_cache_dir``) keeps compiled maps, md5-sharded as the original's ``LevelCache``; local paths
here, any fsspec URL (``gs://``, with gcsfs) where fsspec is installed (the original used tf.io.gfile; actors here
import no TensorFlow). Test mode sets ``allowHoldOutLevels`` and the evaluation ``mixerSeed`` (0x600D5EED).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import os
import shutil
from typing import Any, SupportsFloat

import gymnasium
import numpy as np
from gymnasium import spaces

from seed_rl.config import EnvConfig, field
from seed_rl.envs.registry import EnvFamily

__all__ = [
    "ALL_GAMES",
    "DEFAULT_ACTION_SET",
    "DMLAB_30",
    "FAMILY",
    "HUMAN_SCORES",
    "RANDOM_SCORES",
    "TEST_LEVEL_OF",
    "DmLab",
    "DmLabOptions",
    "LevelCache",
    "create_dmlab_environment",
    "dmlab_spaces",
    "human_normalized_score",
    "level_path",
]

DEFAULT_ACTION_SET: tuple[tuple[int, ...], ...] = (
    (0, 0, 0, 1, 0, 0, 0),    # forward
    (0, 0, 0, -1, 0, 0, 0),   # backward
    (0, 0, -1, 0, 0, 0, 0),   # strafe left
    (0, 0, 1, 0, 0, 0, 0),    # strafe right
    (-20, 0, 0, 0, 0, 0, 0),  # look left
    (20, 0, 0, 0, 0, 0, 0),   # look right
    (-20, 0, 0, 1, 0, 0, 0),  # look left + forward
    (20, 0, 0, 1, 0, 0, 0),   # look right + forward
    (0, 0, 0, 0, 1, 0, 0),    # fire
)  # fmt: skip
"""The IMPALA/SEED action set, in Lab's action order: look left/right (pixels), look down/up, strafe left/right,
move back/forward, fire, jump, crouch."""

DMLAB_30: tuple[str, ...] = (
    "rooms_collect_good_objects_train", "rooms_exploit_deferred_effects_train", "rooms_select_nonmatching_object",
    "rooms_watermaze", "rooms_keys_doors_puzzle", "language_select_described_object",
    "language_select_located_object", "language_execute_random_task", "language_answer_quantitative_question",
    "lasertag_one_opponent_small", "lasertag_three_opponents_small", "lasertag_one_opponent_large",
    "lasertag_three_opponents_large", "natlab_fixed_large_map", "natlab_varying_map_regrowth",
    "natlab_varying_map_randomized", "skymaze_irreversible_path_hard", "skymaze_irreversible_path_varied",
    "psychlab_arbitrary_visuomotor_mapping", "psychlab_continuous_recognition", "psychlab_sequential_comparison",
    "psychlab_visual_search", "explore_object_locations_small", "explore_object_locations_large",
    "explore_obstructed_goals_small", "explore_obstructed_goals_large", "explore_goal_locations_small",
    "explore_goal_locations_large", "explore_object_rewards_few", "explore_object_rewards_many",
)  # fmt: skip
"""The 30 training levels of DMLab-30 (the original's games.DMLAB_30)."""

TEST_LEVEL_OF: dict[str, str] = {
    **{name: name for name in DMLAB_30},
    "rooms_collect_good_objects_train": "rooms_collect_good_objects_test",
    "rooms_exploit_deferred_effects_train": "rooms_exploit_deferred_effects_test",
}
"""Training level -> the level its scores are reported on (the original's games.GAME_MAPPING)."""

ALL_GAMES: frozenset[str] = frozenset(DMLAB_30) | frozenset(TEST_LEVEL_OF.values())
"""Every name that is a ``contributed/dmlab30/`` level."""

HUMAN_SCORES: dict[str, float] = {
    "rooms_collect_good_objects_test": 10, "rooms_exploit_deferred_effects_test": 85.65,
    "rooms_select_nonmatching_object": 65.9, "rooms_watermaze": 54, "rooms_keys_doors_puzzle": 53.8,
    "language_select_described_object": 389.5, "language_select_located_object": 280.7,
    "language_execute_random_task": 254.05, "language_answer_quantitative_question": 184.5,
    "lasertag_one_opponent_small": 12.65, "lasertag_three_opponents_small": 18.55,
    "lasertag_one_opponent_large": 18.6, "lasertag_three_opponents_large": 31.5, "natlab_fixed_large_map": 36.9,
    "natlab_varying_map_regrowth": 24.45, "natlab_varying_map_randomized": 42.35,
    "skymaze_irreversible_path_hard": 100, "skymaze_irreversible_path_varied": 100,
    "psychlab_arbitrary_visuomotor_mapping": 58.75, "psychlab_continuous_recognition": 58.3,
    "psychlab_sequential_comparison": 39.5, "psychlab_visual_search": 78.5, "explore_object_locations_small": 74.45,
    "explore_object_locations_large": 65.65, "explore_obstructed_goals_small": 206,
    "explore_obstructed_goals_large": 119.5, "explore_goal_locations_small": 267.5,
    "explore_goal_locations_large": 194.5, "explore_object_rewards_few": 77.7, "explore_object_rewards_many": 106.7,
}  # fmt: skip
"""Human scores of the DMLab-30 test levels (the original's games.HUMAN_SCORES, from the IMPALA paper)."""

RANDOM_SCORES: dict[str, float] = {
    "rooms_collect_good_objects_test": 0.073, "rooms_exploit_deferred_effects_test": 8.501,
    "rooms_select_nonmatching_object": 0.312, "rooms_watermaze": 4.065, "rooms_keys_doors_puzzle": 4.135,
    "language_select_described_object": -0.07, "language_select_located_object": 1.929,
    "language_execute_random_task": -5.913, "language_answer_quantitative_question": -0.33,
    "lasertag_one_opponent_small": -0.224, "lasertag_three_opponents_small": -0.214,
    "lasertag_one_opponent_large": -0.083, "lasertag_three_opponents_large": -0.102,
    "natlab_fixed_large_map": 2.173, "natlab_varying_map_regrowth": 2.989, "natlab_varying_map_randomized": 7.346,
    "skymaze_irreversible_path_hard": 0.1, "skymaze_irreversible_path_varied": 14.4,
    "psychlab_arbitrary_visuomotor_mapping": 0.163, "psychlab_continuous_recognition": 0.224,
    "psychlab_sequential_comparison": 0.129, "psychlab_visual_search": 0.085,
    "explore_object_locations_small": 3.575, "explore_object_locations_large": 4.673,
    "explore_obstructed_goals_small": 6.76, "explore_obstructed_goals_large": 2.61,
    "explore_goal_locations_small": 7.66, "explore_goal_locations_large": 3.14,
    "explore_object_rewards_few": 2.073, "explore_object_rewards_many": 2.438,
}  # fmt: skip
"""Random-agent scores of the DMLab-30 test levels (the original's games.RANDOM_SCORES)."""

EVALUATION_MIXER_SEED = 0x600D5EED
"""The ``mixerSeed`` of DMLab-30's evaluation episodes (Lab's python_api.md)."""


def human_normalized_score(level: str, returns) -> float:
    """Mean of ``returns`` as a percentage between the random (0) and the human (100) score of ``level`` (a
    training name maps to its test level)."""
    level = TEST_LEVEL_OF.get(level, level)
    if level not in HUMAN_SCORES:
        raise ValueError(f"no human/random scores for DMLab level {level!r}; DMLab-30 levels: {', '.join(DMLAB_30)}")
    human, random = HUMAN_SCORES[level], RANDOM_SCORES[level]
    return float((np.mean(returns) - random) / (human - random) * 100.0)


def level_path(name: str) -> str:
    """The Lab level script of ``name``: ``contributed/dmlab30/<name>`` for DMLab-30 names, else ``name``."""
    return f"contributed/dmlab30/{name}" if name in ALL_GAMES else name


@dataclasses.dataclass(frozen=True)
class DmLabOptions:
    """The DMLab family's options (``EnvConfig.options``); the defaults are the original's dmlab/env.py."""

    width: int = field(96, "DMLab: observation width in pixels.")
    height: int = field(72, "DMLab: observation height in pixels.")
    level_cache_dir: str = field("", "DMLab: directory (or fsspec URL) of a shared level cache; empty: none.")
    homepath: str = field("", "DMLab: Lab's runfiles path (deepmind_lab.set_runfiles_path); empty: Lab's own.")
    dataset_path: str = field("", "DMLab: dataset directory the psychlab levels need (brady_konkle_oliva2008).")
    dmlab_test_mode: bool = field(False, "DMLab: evaluation episodes (allowHoldOutLevels, mixerSeed 0x600D5EED).")

    def __post_init__(self) -> None:
        if self.width < 1 or self.height < 1:
            raise ValueError(f"DMLab width and height must be >= 1, got {self.width} x {self.height}")


class LevelCache:
    """Lab's level cache: compiled maps stored under ``cache_dir/<md5[:3]>/<md5[3:]>`` of their key.

    Lab calls ``fetch(key, pk3_path)`` (copy a cached map to ``pk3_path``; False when absent) and ``write(key,
    pk3_path)`` (store a newly compiled one). ``cache_dir`` is a local path, or any fsspec URL when fsspec (and
    the filesystem's package, e.g. gcsfs) is installed.
    """

    def __init__(self, cache_dir: str):
        self._cache_dir = cache_dir
        self._fs: Any = None
        if "://" in cache_dir:
            try:
                fsspec = importlib.import_module("fsspec")
            except ImportError as e:
                raise ValueError(f"level_cache_dir {cache_dir!r} is a URL: install fsspec (and its filesystem, "
                                 "e.g. gcsfs for gs://) to use it") from e
            self._fs, _ = fsspec.core.url_to_fs(cache_dir)

    def get_path(self, key: str) -> str:
        digest = hashlib.md5(key.encode("utf-8")).hexdigest()
        return "/".join((self._cache_dir.rstrip("/"), digest[:3], digest[3:]))

    def fetch(self, key: str, pk3_path: str) -> bool:
        path = self.get_path(key)
        try:
            if self._fs is not None:
                self._fs.get(path, pk3_path)
            else:
                shutil.copyfile(path, pk3_path)
            return True
        except (OSError, FileNotFoundError):
            return False

    def write(self, key: str, pk3_path: str) -> None:
        path = self.get_path(key)
        if self._fs is not None:
            if not self._fs.exists(path):
                self._fs.put(pk3_path, path)
            return
        if not os.path.exists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.tmp{os.getpid()}"
            shutil.copyfile(pk3_path, tmp)
            os.replace(tmp, path)  # atomic: several actors may compile the same level at once


def _import_deepmind_lab() -> Any:
    try:
        return importlib.import_module("deepmind_lab")
    except ImportError as e:
        raise ImportError(
            f"the dmlab env family needs DeepMind Lab's Python module deepmind_lab ({e}). It has no pip build: "
            "build it from source with Bazel (docker/Dockerfile.dmlab does it; docs/environments.md, DeepMind Lab)"
        ) from e


class DmLab(gymnasium.Env):
    """A DeepMind Lab level as a gymnasium env (see the module docstring)."""

    metadata: dict[str, Any] = {"render_modes": ["rgb_array"], "render_fps": 60}
    """``render()`` returns the last observation; Lab runs 60 frames per second (``fps``), one step is
    ``num_action_repeats`` of them."""

    def __init__(self, level: str, num_action_repeats: int = 1, options: DmLabOptions | None = None,
                 action_set=DEFAULT_ACTION_SET, lab_module: Any = None):
        options = options or DmLabOptions()
        if num_action_repeats < 1:
            raise ValueError(f"num_action_repeats must be >= 1, got {num_action_repeats}")
        lab = lab_module if lab_module is not None else _import_deepmind_lab()
        config: dict[str, Any] = {"width": options.width, "height": options.height, "logLevel": "WARN"}
        if options.dataset_path:
            config["datasetPath"] = options.dataset_path
        if options.dmlab_test_mode:
            config["allowHoldOutLevels"] = "true"
            config["mixerSeed"] = EVALUATION_MIXER_SEED
        if options.homepath:
            lab.set_runfiles_path(options.homepath)
        self.level = level_path(level)
        self._num_action_repeats = int(num_action_repeats)
        self._action_set = np.array(action_set, dtype=np.intc)
        self._rng = np.random.RandomState()
        try:
            self._env = lab.Lab(
                self.level, ["RGB_INTERLEAVED"], config={k: str(v) for k, v in config.items()},
                level_cache=LevelCache(options.level_cache_dir) if options.level_cache_dir else None)
        except (RuntimeError, ValueError) as e:
            raise ValueError(f"DeepMind Lab cannot open level {self.level!r} (--env_name={level!r}): {e}") from e
        self._shape = (options.height, options.width, 3)
        self._last = np.zeros(self._shape, np.uint8)
        self.render_mode: str | None = None
        self.action_space = spaces.Discrete(len(self._action_set))
        self.observation_space = spaces.Box(0, 255, shape=self._shape, dtype=np.uint8)

    def _observation(self) -> np.ndarray:
        frame = np.asarray(self._env.observations()["RGB_INTERLEAVED"], dtype=np.uint8)
        if frame.shape != self._shape:
            raise ValueError(f"DeepMind Lab returned an RGB_INTERLEAVED frame of shape {frame.shape}, expected "
                             f"{self._shape} (width/height options)")
        self._last = frame
        return frame

    def render(self) -> np.ndarray:  # type: ignore[override]
        """The last frame the agent saw (``RGB_INTERLEAVED``), for ``seed-rl eval --video``."""
        return self._last.copy()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        if seed is not None:
            self._rng = np.random.RandomState(seed)
        self._env.reset(seed=int(self._rng.randint(0, 2**31 - 1)))
        return self._observation(), {}

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        index = int(np.asarray(action))
        if not 0 <= index < len(self._action_set):
            raise ValueError(f"DMLab action {index} is not in [0, {len(self._action_set)})")
        reward = float(self._env.step(self._action_set[index], num_steps=self._num_action_repeats))
        if not self._env.is_running():
            return np.zeros(self._shape, np.uint8), reward, True, False, {}
        return self._observation(), reward, False, False, {}

    def close(self) -> None:
        self._env.close()


def create_dmlab_environment(level: str, num_action_repeats: int = 1, options: DmLabOptions | None = None,
                             lab_module: Any = None) -> gymnasium.Env:
    """The DMLab level ``level`` (a DMLab-30 name or a Lab level path) as a gymnasium env.

    Raises:
      ImportError: deepmind_lab is not importable (the message says how to build it).
      ValueError: Lab cannot open the level, or invalid options.
    """
    return DmLab(level, num_action_repeats, options, lab_module=lab_module)


def dmlab_spaces(config: EnvConfig) -> tuple[spaces.Space, spaces.Space]:
    """The observation and action spaces of a DMLab env of ``config``, without deepmind_lab: ``uint8 [height,
    width, 3]`` and ``Discrete(9)``."""
    options = config.options or DmLabOptions()
    return (spaces.Box(0, 255, shape=(options.height, options.width, 3), dtype=np.uint8),
            spaces.Discrete(len(DEFAULT_ACTION_SET)))


def _create(config: EnvConfig, env_id: int) -> gymnasium.Env:
    del env_id  # every env id gets the same level; the id only seeds it
    return create_dmlab_environment(config.name, config.num_action_repeats, config.options)


FAMILY = EnvFamily(
    name="dmlab",
    factory=_create,
    description="a DeepMind Lab level, e.g. explore_goal_locations_small (a DMLab-30 name) or a Lab level path "
    "(needs deepmind_lab, built from source)",
    options=DmLabOptions,
    spaces=dmlab_spaces,
)
"""The dmlab family (registered by `seed_rl.envs`): the raw reward is Lab's reward."""
