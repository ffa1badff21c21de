"""Google Research Football (gfootball 2.10.2), prepared as the original's football/env.py.

Install: ``bash scripts/install_football.sh`` (Debian packages, then the engine build, about 8 minutes on 2
cores the first time), then ``pip install -e .[football]``. ``gfootball`` is imported only when a Football env
is created, so that ``import seed_rl.envs`` works without it.

``--env=football --env_name=11_vs_11_easy_stochastic`` (any scenario in ``gfootball/scenarios``) creates
``gfootball.env.create_environment(env_name=..., representation='extracted', stacked=True, rewards=...,
channel_dimensions=...)``, the call the original makes through gym's ``GFootball-<scenario>-SMM-v0`` id, and

* adapts gfootball's gym 0.25 API (``reset() -> obs``, ``step -> (obs, reward, done, info)``) to gymnasium's
  (`OldGymApi`). The end of a match or of an academy scenario is the game's own end: ``terminated``. Each reset
  seeds the game engine from a per-env random stream started at ``config.seed + env_id`` (the original left the
  engine to Python's global ``random``);
* packs the observation's 16 boolean planes (Super Mini Map: 4 planes, left team, right team, ball, active player,
  times 4 stacked frames) into one ``uint16`` channel (`PackedBitsObservation`, the original's wire format: 8
  times fewer bytes on the wire and to the accelerator). The networks unpack ``uint16`` observations back into
  planes (`seed_rl.networks.torsos.unpack_bit_planes`); ``uint16`` means packed planes to every network here.

Options (`FootballOptions`, flags): ``--reward_experiment`` ``scoring`` or ``scoring,checkpoints`` (gfootball's
rewards), ``--smm_size`` ``default`` (96 x 72), ``medium`` (120 x 90) or ``large`` (144 x 108). The raw reward
of a step is gfootball's ``info['score_reward']`` (the goals, whatever the training reward), as the original's
actor counted it: ``episode/raw_return`` in TensorBoard is the original's ``score_reward`` episode statistic (the
goal difference of the episode). ``num_action_repeats`` must be 1, as the original requires.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping
from typing import Any, SupportsFloat

import gymnasium
import numpy as np
from gymnasium import spaces

from seed_rl.config import EnvConfig, field
from seed_rl.envs.registry import EnvFamily

__all__ = [
    "FAMILY",
    "REWARD_EXPERIMENTS",
    "SMM_SIZES",
    "FootballEnv",
    "FootballOptions",
    "OldGymApi",
    "PackedBitsObservation",
    "create_football_environment",
    "football_spaces",
    "pack_bit_planes",
    "unpack_bit_planes_numpy",
]

SMM_SIZES: dict[str, tuple[int, int]] = {"default": (96, 72), "medium": (120, 90), "large": (144, 108)}
"""``--smm_size`` -> gfootball's ``channel_dimensions`` (width, height), from the original's football/env.py."""

REWARD_EXPERIMENTS = ("scoring", "scoring,checkpoints")
"""The original's ``--reward_experiment`` choices."""

BITS_PER_WORD = 16


@dataclasses.dataclass(frozen=True)
class FootballOptions:
    """The Football family's options (``EnvConfig.options``); the defaults are the original's football/env.py."""

    reward_experiment: str = field(
        "scoring", "Football: the training reward, scoring (goals) or scoring,checkpoints (plus gfootball's "
        "checkpoint rewards for carrying the ball towards the goal).")
    smm_size: str = field("default", "Football: Super Mini Map size, default (96x72), medium (120x90) or large "
                          "(144x108).")

    def __post_init__(self) -> None:
        if self.reward_experiment not in REWARD_EXPERIMENTS:
            raise ValueError(f"reward_experiment must be one of {', '.join(REWARD_EXPERIMENTS)}, got "
                             f"{self.reward_experiment!r}")
        if self.smm_size not in SMM_SIZES:
            raise ValueError(f"smm_size must be one of {', '.join(SMM_SIZES)}, got {self.smm_size!r}")


def pack_bit_planes(observation: np.ndarray) -> np.ndarray:
    """``[..., C]`` planes (nonzero = on) -> ``uint16 [..., ceil(C / 16)]``, plane ``k`` in word ``k // 16``.

    The bit of plane ``k`` within its word is the original's: ``np.packbits`` (big-endian within each byte) then
    pairs of bytes read as little-endian ``uint16``, so planes 0-7 are bits 7..0 and planes 8-15 bits 15..8
    (`PLANE_BITS`). Planes past ``C`` are zero. Computed as a product with the bits' weights, which gives the
    same words as the original's packbits at a quarter of its cost (an SMM frame: about 0.2 ms instead of 0.7).
    """
    bits = np.asarray(observation) != 0
    channels = bits.shape[-1]
    words = (channels + BITS_PER_WORD - 1) // BITS_PER_WORD
    if channels % BITS_PER_WORD:
        bits = np.concatenate([bits, np.zeros(bits.shape[:-1] + (words * BITS_PER_WORD - channels,), bool)], -1)
    bits = bits.reshape(bits.shape[:-1] + (words, BITS_PER_WORD))
    return (bits.astype(np.uint16) @ _PLANE_WEIGHTS).astype(np.uint16)


PLANE_BITS: tuple[int, ...] = tuple(7 - k for k in range(8)) + tuple(15 - k for k in range(8))
"""The bit of word ``w`` that holds plane ``16 * w + k``: ``PLANE_BITS[k]``."""

_PLANE_WEIGHTS = (np.uint32(1) << np.array(PLANE_BITS, np.uint32)).astype(np.uint16)


def unpack_bit_planes_numpy(packed: np.ndarray) -> np.ndarray:
    """The inverse of `pack_bit_planes`: ``uint16 [..., W]`` -> ``uint8 [..., 16 * W]`` of 0/1 (a reference for the
    networks' TensorFlow version)."""
    packed = np.asarray(packed, np.uint16)
    bits = (packed[..., None] >> np.array(PLANE_BITS, np.uint16)) & 1
    return bits.reshape(packed.shape[:-1] + (packed.shape[-1] * BITS_PER_WORD,)).astype(np.uint8)


class PackedBitsObservation(gymnasium.ObservationWrapper):
    """Packs a boolean-plane observation ``[H, W, C]`` into ``uint16 [H, W, ceil(C / 16)]`` (`pack_bit_planes`)."""

    def __init__(self, env: gymnasium.Env):
        super().__init__(env)
        shape = env.observation_space.shape
        if shape is None or len(shape) < 1:
            raise ValueError(f"PackedBitsObservation needs an array observation with a channel axis, got "
                             f"{env.observation_space}")
        words = (shape[-1] + BITS_PER_WORD - 1) // BITS_PER_WORD
        self.observation_space = spaces.Box(0, np.iinfo(np.uint16).max, shape=tuple(shape[:-1]) + (words,),
                                            dtype=np.uint16)

    def observation(self, observation: Any) -> np.ndarray:
        return pack_bit_planes(observation)


def _to_gymnasium_space(space: Any) -> spaces.Space:
    """A gym (< 0.26) space as the gymnasium space of the same kind."""
    kind = type(space).__name__
    if kind == "Box":
        return spaces.Box(low=np.asarray(space.low), high=np.asarray(space.high), shape=space.shape,
                          dtype=space.dtype)
    if kind == "Discrete":
        return spaces.Discrete(int(space.n), start=int(getattr(space, "start", 0)))
    if kind == "MultiDiscrete":
        return spaces.MultiDiscrete(np.asarray(space.nvec))
    if kind == "MultiBinary":
        return spaces.MultiBinary(space.n)
    if isinstance(space, spaces.Space):
        return space
    raise ValueError(f"cannot convert the gym space {space!r} ({kind}) to gymnasium: supported are Box, Discrete, "
                     "MultiDiscrete and MultiBinary")


class OldGymApi(gymnasium.Env):
    """A gymnasium env around an env of the old gym API (``reset() -> obs``, ``step -> (obs, reward, done, info)``).

    ``done`` becomes ``terminated``, unless the info says ``TimeLimit.truncated`` (gym's time limit), which becomes
    ``truncated``. ``reset(seed=s)`` starts a per-env random stream at ``s``; before every reset ``seed_fn(env,
    episode_seed)`` is called with the next number of that stream (for gfootball: the game engine's seed), or the
    env's own ``seed(s)`` once when there is no ``seed_fn``.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, env: Any, seed_fn: Any = None):
        self._env = env
        self._seed_fn = seed_fn
        self._rng: np.random.RandomState | None = None
        self.observation_space = _to_gymnasium_space(env.observation_space)
        self.action_space = _to_gymnasium_space(env.action_space)

    @property
    def inner(self) -> Any:
        """The wrapped old-API env."""
        return self._env

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        if seed is not None:
            self._rng = np.random.RandomState(seed)
            if self._seed_fn is None and hasattr(self._env, "seed"):
                self._env.seed(int(seed))
        if self._seed_fn is not None:
            if self._rng is None:
                self._rng = np.random.RandomState()
            self._seed_fn(self._env, int(self._rng.randint(0, 2**31 - 1)))
        observation = self._env.reset()
        if isinstance(observation, tuple) and len(observation) == 2 and isinstance(observation[1], Mapping):
            raise ValueError("the wrapped env already speaks the new API (reset returned (obs, info)): use it "
                             "directly; OldGymApi is for gym < 0.26 envs such as gfootball's")
        return observation, {}

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        result = self._env.step(action)
        if len(result) != 4:
            raise ValueError(f"the wrapped env's step returned {len(result)} values; the old gym API returns 4 "
                             "(obs, reward, done, info)")
        observation, reward, done, info = result
        info = dict(info or {})
        truncated = bool(done) and bool(info.pop("TimeLimit.truncated", False))
        return observation, float(np.asarray(reward).sum()), bool(done) and not truncated, truncated, info

    def close(self) -> None:
        self._env.close()


SMM_COLORS: tuple[tuple[int, int, int], ...] = ((220, 40, 40), (40, 90, 230), (255, 255, 255), (255, 210, 0))
"""Colours of the 4 SMM planes in `FootballEnv.render`: left team, right team, ball, active player."""


class FootballEnv(OldGymApi):
    """gfootball's env through `OldGymApi`, with ``render()`` drawing the newest Super Mini Map frame as RGB.

    gfootball renders 3D frames only when created with ``render=True`` (OpenGL, a display); this draws the
    observation instead, on a dark green pitch, each plane in its colour (`SMM_COLORS`) and scaled ``scale``
    times, so that ``seed-rl eval --video`` works headless. One env step is 100 ms of game time (10 per second).
    """

    metadata: dict[str, Any] = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, env: Any, seed_fn: Any = None, scale: int = 4):
        super().__init__(env, seed_fn)
        self.render_mode: str | None = None
        self._scale = int(scale)
        self._last: np.ndarray | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        observation, info = super().reset(seed=seed, options=options)
        self._last = np.asarray(observation)
        return observation, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        result = super().step(action)
        self._last = np.asarray(result[0])
        return result

    def render(self) -> np.ndarray:  # type: ignore[override]
        if self._last is None:
            raise RuntimeError("render() before reset()")
        planes = self._last[..., -len(SMM_COLORS):] != 0  # the newest of the stacked frames
        frame = np.zeros(planes.shape[:2] + (3,), np.uint8)
        frame[...] = (20, 80, 30)
        for k, color in enumerate(SMM_COLORS):
            frame[planes[..., k]] = color
        return np.repeat(np.repeat(frame, self._scale, axis=0), self._scale, axis=1)


def _seed_game_engine(env: Any, seed: int) -> None:
    """Sets gfootball's ``game_engine_random_seed`` for the next episode (its config, read at each reset)."""
    config = getattr(getattr(env, "unwrapped", env), "_config", None)
    if config is not None:
        config["game_engine_random_seed"] = seed


def _import_gfootball() -> Any:
    try:
        return importlib.import_module("gfootball.env")
    except ImportError as e:
        raise ImportError(
            f"the football env family needs gfootball ({e}); install it with `bash scripts/install_football.sh` "
            "and then `pip install -e .[football]` (docs/environments.md, Football)") from e


def create_football_environment(scenario: str, options: FootballOptions | None = None,
                                num_action_repeats: int = 1, *, create_fn: Any = None) -> gymnasium.Env:
    """The Football scenario ``scenario`` (e.g. ``11_vs_11_easy_stochastic``) as a gymnasium env.

    Args:
      scenario: a gfootball scenario name.
      options: reward experiment and SMM size (default: `FootballOptions()`).
      num_action_repeats: must be 1.
      create_fn: the factory to call instead of ``gfootball.env.create_environment`` (tests pass a fake with the
        same keyword arguments).

    Raises:
      ValueError: ``num_action_repeats != 1`` or an unknown scenario (the message lists gfootball's).
      ImportError: gfootball is not installed (the message says how to install it).
    """
    options = options or FootballOptions()
    if num_action_repeats != 1:
        raise ValueError(f"the football family needs num_action_repeats=1 (the original's rule), got "
                         f"{num_action_repeats}")
    if create_fn is None:
        football_env = _import_gfootball()
        from gfootball.env import scenario_builder  # noqa: PLC0415 (optional dependency)

        known = sorted(scenario_builder.all_scenarios())
        if scenario not in known:
            raise ValueError(f"unknown Football scenario {scenario!r}; gfootball's scenarios: {', '.join(known)}")
        create_fn = football_env.create_environment
    env = create_fn(env_name=scenario, representation="extracted", stacked=True,
                    rewards=options.reward_experiment, channel_dimensions=SMM_SIZES[options.smm_size])
    return PackedBitsObservation(FootballEnv(env, seed_fn=_seed_game_engine))


def score_reward(reward: SupportsFloat, info: Mapping[str, Any]) -> float:
    """The Football raw-reward rule: gfootball's ``info['score_reward']`` (goals), else the reward itself."""
    return float(np.asarray(info.get("score_reward", reward)).sum())


NUM_ACTIONS = 19
"""gfootball's default action set (idle, 8 directions, passes, shot, sprint, dribble, ...): ``Discrete(19)``."""


def football_spaces(config: EnvConfig) -> tuple[spaces.Space, spaces.Space]:
    """The observation and action spaces of a Football env of ``config``, without gfootball: ``uint16 [H, W, 1]``
    (16 packed planes, `SMM_SIZES`) and ``Discrete(19)``."""
    options = config.options or FootballOptions()
    width, height = SMM_SIZES[options.smm_size]
    return (spaces.Box(0, np.iinfo(np.uint16).max, shape=(height, width, 1), dtype=np.uint16),
            spaces.Discrete(NUM_ACTIONS))


def _create(config: EnvConfig, env_id: int) -> gymnasium.Env:
    del env_id  # every env id gets the same scenario; the id only seeds it
    return create_football_environment(config.name, config.options, config.num_action_repeats)


FAMILY = EnvFamily(
    name="football",
    factory=_create,
    description="a Google Research Football scenario, e.g. 11_vs_11_easy_stochastic, academy_empty_goal_close "
    "(needs scripts/install_football.sh)",
    options=FootballOptions,
    raw_reward=score_reward,
    spaces=football_spaces,
)
"""The football family (registered by `seed_rl.envs`)."""
