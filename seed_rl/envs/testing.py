"""Deterministic fake environments for tests (``EnvConfig(family="test", name=...)``).

Each fake has a fixed episode length and rewards that are a known function of the step and the action, so a test
can predict every message an actor sends and every return a learner reports. A name is a registered fake,
optionally followed by keyword arguments: ``"counting"``, ``"counting:length=5,num_actions=2"``,
``"crashing:crash_after=7"``. Values are converted to the type of the argument's default (booleans accept
``1/0/true/false``). ``env_id`` comes from the factory and cannot be given in the name.

=====================  ===========================================================================================
name                   behaviour
=====================  ===========================================================================================
``counting``           `CountingEnv`: observation ``int32 [4] = (env_id, episode, step, previous_action)``, with
                       ``episode`` the index of the episode since the last reset with a seed (the factory seeds
                       the first reset: 0, 1, 2, ... over the env's life), ``step`` 0 after reset and
                       ``previous_action`` -1 after reset. The action ``a`` taken at step ``t`` gives reward
                       ``float(t + 1 + a)``. ``terminated`` when ``step == length``. Kwargs: ``length=5``,
                       ``num_actions=3``, ``truncate=False`` (end by ``truncated`` instead), ``image=0`` (when
                       ``N >= 4``: ``uint8 [N, N, 1]``, zeros but row 0 starts with
                       ``(env_id, episode, step, previous_action + 1) % 256``), ``dict_obs=False`` (a dict
                       ``{"counter": int32 [4], "step": float32 [1]}``).
``truncating``         ``counting`` with ``truncate=True``: every episode ends with ``truncated`` (a time limit).
``crashing``           `CrashingEnv`: ``counting`` whose ``step`` raises ``RuntimeError`` once this env object has
                       done ``crash_after`` steps (across episodes; ``crash_after=10``). ``crash_env_id=-1``: when
                       >= 0, only the env with that id crashes; the others never do.
``correct_action``     `CorrectActionEnv`: a contextual bandit. Observation ``float32 [num_actions]``, the one-hot
                       code of a target action drawn uniformly (env ``np_random``) at each step; reward 1 for the
                       target action, else 0; ``terminated`` after ``length`` steps. Kwargs ``num_actions=4``,
                       ``length=10``. Random play returns ``length / num_actions`` on average, the best policy
                       ``length``. The step ``info["target"]`` is the target the action was scored against.
``bandit``             ``correct_action`` with ``contextual=False``: the observation is all zeros and the target is
                       always ``correct=1``.
``catch``              `CatchEnv`: catch a falling ball with a paddle, on ``uint8 [size, size, 1]`` frames (kwargs
                       ``rows=10``, ``columns=5``, ``size=84``): reward +1 or -1 after ``rows - 1`` steps. Random
                       play scores about -0.5, the best policy +1. ``dict_obs=False``: a dict ``{"ball": uint8
                       [size, size, 1], the frame with the ball only, "paddle": float32 [columns], the one-hot
                       column of the paddle}`` (an image and a vector, each key needed to catch).
=====================  ===========================================================================================

Stepping before the first reset, or after the episode ended, raises RuntimeError; an action outside
``[0, num_actions)`` raises ValueError, so actor bugs surface at once.
"""

from __future__ import annotations

import abc
import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, SupportsFloat

import gymnasium
import numpy as np
from gymnasium import spaces

from seed_rl.envs.classic import ActionRepeat
from seed_rl.envs.registry import EnvFamily

if TYPE_CHECKING:
    from seed_rl.config import EnvConfig

__all__ = [
    "FAMILY",
    "CatchEnv",
    "TEST_ENVS",
    "CorrectActionEnv",
    "CountingEnv",
    "CrashingEnv",
    "create_test_environment",
    "parse_test_env_name",
]


class _FakeEnv(gymnasium.Env, abc.ABC):
    """Shared bookkeeping: episode/step counters, action checks, reset-before-step."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, env_id: int, length: int, num_actions: int):
        if length < 1:
            raise ValueError(f"length must be >= 1, got {length}")
        if num_actions < 1:
            raise ValueError(f"num_actions must be >= 1, got {num_actions}")
        self.env_id = int(env_id)
        self.length = int(length)
        self.num_actions = int(num_actions)
        self.action_space = spaces.Discrete(self.num_actions)
        self.episode = -1  # Incremented by reset(); a seeded reset starts again at 0.
        self.step_count = 0
        self._episode_over = True

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed, options=options)
        # Restarting the count on a seeded reset keeps gymnasium's contract: same seed, same trajectory.
        self.episode = 0 if seed is not None else self.episode + 1
        self.step_count = 0
        self._episode_over = False
        return self._reset_observation(), {}

    def _check_step(self, action: Any) -> int:
        if self._episode_over:
            what = "before the first reset()" if self.episode < 0 else "after the episode ended"
            raise RuntimeError(f"{type(self).__name__}(env_id={self.env_id}): step() called {what}")
        a = np.asarray(action)
        if (
            a.shape != ()
            or not np.issubdtype(a.dtype, np.integer)
            or not 0 <= int(a) < self.num_actions
        ):
            raise ValueError(
                f"{type(self).__name__}(env_id={self.env_id}): action {action!r} is not an integer scalar "
                f"in [0, {self.num_actions})"
            )
        return int(a)

    @abc.abstractmethod
    def _reset_observation(self) -> Any:
        """The observation right after a reset (each fake env defines its own)."""


class CountingEnv(_FakeEnv):
    """Counts steps; the observation encodes (env_id, episode, step, previous action). See the module table."""

    def __init__(
        self,
        env_id: int = 0,
        length: int = 5,
        num_actions: int = 3,
        truncate: bool = False,
        image: int = 0,
        dict_obs: bool = False,
    ):
        super().__init__(env_id, length, num_actions)
        if image and image < 4:
            raise ValueError(f"image must be 0 or >= 4 (the side of the image), got {image}")
        if image and dict_obs:
            raise ValueError("image and dict_obs cannot be combined")
        self.truncate = bool(truncate)
        self.image = int(image)
        self.dict_obs = bool(dict_obs)
        counter_space = spaces.Box(np.iinfo(np.int32).min, np.iinfo(np.int32).max, (4,), np.int32)
        if self.image:
            self.observation_space = spaces.Box(0, 255, (self.image, self.image, 1), np.uint8)
        elif self.dict_obs:
            self.observation_space = spaces.Dict(
                {
                    "counter": counter_space,
                    "step": spaces.Box(0.0, float(length), (1,), np.float32),
                }
            )
        else:
            self.observation_space = counter_space

    def _observe(self, previous_action: int) -> Any:
        counter = np.array(
            [self.env_id, self.episode, self.step_count, previous_action], dtype=np.int32
        )
        if self.image:
            frame = np.zeros((self.image, self.image, 1), dtype=np.uint8)
            frame[0, :4, 0] = (counter + np.array([0, 0, 0, 1])) % 256
            return frame
        if self.dict_obs:
            return {"counter": counter, "step": np.array([self.step_count], dtype=np.float32)}
        return counter

    def _reset_observation(self) -> Any:
        return self._observe(previous_action=-1)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        a = self._check_step(action)
        self.step_count += 1
        reward = float(self.step_count + a)
        ended = self.step_count >= self.length
        self._episode_over = ended
        terminated = ended and not self.truncate
        truncated = ended and self.truncate
        return self._observe(previous_action=a), reward, terminated, truncated, {}


class CrashingEnv(CountingEnv):
    """A CountingEnv whose step raises RuntimeError once it has done ``crash_after`` steps (all episodes)."""

    def __init__(
        self,
        env_id: int = 0,
        crash_after: int = 10,
        crash_env_id: int = -1,
        length: int = 5,
        num_actions: int = 3,
        truncate: bool = False,
    ):
        super().__init__(env_id, length=length, num_actions=num_actions, truncate=truncate)
        if crash_after < 0:
            raise ValueError(f"crash_after must be >= 0, got {crash_after}")
        self.crash_after = int(crash_after)
        self.crash_env_id = int(crash_env_id)
        self.total_steps = 0

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        crashes = self.crash_env_id < 0 or self.crash_env_id == self.env_id
        if crashes and self.total_steps >= self.crash_after:
            raise RuntimeError(
                f"CrashingEnv(env_id={self.env_id}): simulated crash after {self.crash_after} steps"
            )
        result = super().step(action)
        self.total_steps += 1
        return result


class CorrectActionEnv(_FakeEnv):
    """Reward 1 for the target action, else 0; the observation shows the target (one-hot) when contextual."""

    def __init__(
        self,
        env_id: int = 0,
        num_actions: int = 4,
        length: int = 10,
        contextual: bool = True,
        correct: int = 1,
    ):
        super().__init__(env_id, length, num_actions)
        if not 0 <= correct < num_actions:
            raise ValueError(f"correct must be in [0, {num_actions}), got {correct}")
        self.contextual = bool(contextual)
        self.correct = int(correct)
        self.target = self.correct
        self.observation_space = spaces.Box(0.0, 1.0, (self.num_actions,), np.float32)

    def _draw_target_and_observe(self) -> np.ndarray:
        observation = np.zeros((self.num_actions,), dtype=np.float32)
        if self.contextual:
            self.target = int(self.np_random.integers(self.num_actions))
            observation[self.target] = 1.0
        return observation

    def _reset_observation(self) -> Any:
        return self._draw_target_and_observe()

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        a = self._check_step(action)
        rewarded_target = self.target
        reward = 1.0 if a == rewarded_target else 0.0
        self.step_count += 1
        terminated = self.step_count >= self.length
        self._episode_over = terminated
        observation = self._draw_target_and_observe()
        return observation, reward, terminated, False, {"target": rewarded_target}


class CatchEnv(_FakeEnv):
    """Catch (as bsuite's and the R2D2/IMPALA sanity checks): a ball falls one row per step from a random column of
    the top row; the paddle on the bottom row moves left (0), stays (1) or moves right (2). When the ball reaches the
    bottom row the episode ends with reward +1 if the paddle is under it, else -1. The observation is an Atari-like
    ``uint8 [size, size, 1]`` frame (the board scaled up, ball and paddle 255), so that the image agents' whole
    path (uint8 frames, frame stacking, CNN torsos) learns something small. With ``dict_obs`` the paddle leaves the
    frame for a one-hot vector of its own: a dict of an image and a vector, for the dict observations' network."""

    def __init__(self, env_id: int = 0, rows: int = 10, columns: int = 5, size: int = 84, dict_obs: bool = False):
        super().__init__(env_id, rows - 1, 3)
        if columns < 2 or size < max(rows, columns):
            raise ValueError(f"catch needs columns >= 2 and size >= rows, columns; got {rows}, {columns}, {size}")
        self.rows, self.columns, self.size = int(rows), int(columns), int(size)
        self.dict_obs = bool(dict_obs)
        frame_space = spaces.Box(0, 255, (self.size, self.size, 1), np.uint8)
        if self.dict_obs:
            self.observation_space = spaces.Dict(
                {"ball": frame_space, "paddle": spaces.Box(0.0, 1.0, (self.columns,), np.float32)})
        else:
            self.observation_space = frame_space
        self.ball_column = 0
        self.paddle = self.columns // 2

    def _frame(self) -> Any:
        board = np.zeros((self.rows, self.columns), np.uint8)
        board[self.step_count, self.ball_column] = 255
        if not self.dict_obs:
            board[self.rows - 1, self.paddle] = 255
        rows = np.arange(self.size) * self.rows // self.size
        cols = np.arange(self.size) * self.columns // self.size
        frame = board[rows][:, cols][..., None]
        if not self.dict_obs:
            return frame
        paddle = np.zeros((self.columns,), np.float32)
        paddle[self.paddle] = 1.0
        return {"ball": frame, "paddle": paddle}

    def _reset_observation(self) -> Any:
        self.ball_column = int(self.np_random.integers(self.columns))
        self.paddle = self.columns // 2
        return self._frame()

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        a = self._check_step(action)
        self.paddle = min(self.columns - 1, max(0, self.paddle + a - 1))
        self.step_count += 1
        terminated = self.step_count >= self.length
        self._episode_over = terminated
        reward = (1.0 if self.paddle == self.ball_column else -1.0) if terminated else 0.0
        return self._frame(), reward, terminated, False, {}


TEST_ENVS: dict[str, Callable[..., gymnasium.Env]] = {
    "counting": CountingEnv,
    "truncating": functools.partial(CountingEnv, truncate=True),
    "crashing": CrashingEnv,
    "correct_action": CorrectActionEnv,
    "bandit": functools.partial(CorrectActionEnv, contextual=False),
    "catch": CatchEnv,
}
"""Test env names (``EnvConfig.name`` before the optional ``:kwargs``) and their constructors."""


def parse_test_env_name(name: str) -> tuple[str, dict[str, Any]]:
    """Splits ``"counting:length=5,truncate=1"`` into ``("counting", {"length": 5, "truncate": True})``.

    Raises ValueError for an unknown name, an unknown argument or a value of the wrong type.
    """
    base, _, arg_text = name.partition(":")
    base = base.strip()
    if base not in TEST_ENVS:
        raise ValueError(
            f"unknown test env {base!r} (from {name!r}); known test envs: {', '.join(sorted(TEST_ENVS))}. "
            "Arguments follow a colon, e.g. 'counting:length=5,num_actions=2'."
        )
    parameters = inspect.signature(TEST_ENVS[base]).parameters
    accepted = [p for p in parameters if p != "env_id"]
    kwargs: dict[str, Any] = {}
    for item in filter(None, (s.strip() for s in arg_text.split(","))):
        key, eq, value = (s.strip() for s in item.partition("="))
        if not eq or key not in accepted:
            raise ValueError(
                f"test env {name!r}: bad argument {item!r}; {base} accepts "
                f"{', '.join(f'{p}=<{type(parameters[p].default).__name__}>' for p in accepted)}"
            )
        kwargs[key] = _convert(value, parameters[key].default, f"test env {name!r}, argument {key}")
    return base, kwargs


def _convert(value: str, default: Any, what: str) -> Any:
    try:
        if isinstance(default, bool):
            lowered = value.lower()
            if lowered in ("1", "true", "yes"):
                return True
            if lowered in ("0", "false", "no"):
                return False
            raise ValueError(value)
        return type(default)(value)
    except ValueError:
        raise ValueError(f"{what}: cannot read {value!r} as {type(default).__name__}") from None


def create_test_environment(name: str, env_id: int, num_action_repeats: int = 1) -> gymnasium.Env:
    """The fake named ``name`` (see the module table) for env ``env_id`` (not yet seeded).

    With ``num_action_repeats = k > 1`` each agent step is ``k`` inner steps with summed rewards
    (`seed_rl.envs.classic.ActionRepeat`).
    """
    base, kwargs = parse_test_env_name(name)
    env = TEST_ENVS[base](env_id=env_id, **kwargs)
    if num_action_repeats > 1:
        env = ActionRepeat(env, num_action_repeats)
    return env


def _create(config: EnvConfig, env_id: int) -> gymnasium.Env:
    return create_test_environment(config.name, env_id, config.num_action_repeats)


FAMILY = EnvFamily(
    name="test",
    factory=_create,
    description="a deterministic fake of seed_rl.envs.testing, optionally with arguments: counting:length=5",
)
"""The test family (registered by `seed_rl.envs`): no options, the env's reward is the raw reward."""
