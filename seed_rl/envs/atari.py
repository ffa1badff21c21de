"""Atari 2600 through gymnasium + ale-py, preprocessed as in the original SEED RL (atari/env.py and
atari/atari_preprocessing.py, itself adapted from Dopamine).

``ale_py`` and ``cv2`` are imported only when an Atari environment is created, so that ``import seed_rl.envs``
works without them (``pip install seed_rl[atari]`` installs both).

The family's options are `AtariOptions` (``EnvConfig.options``; flags ``--max_random_noops``, ``--sticky_actions``,
``--max_episode_frames``, ...). Its raw reward is the default one: the game score summed over the frame skip, before
any clipping (clipping is the agent's: V-trace's ``max_abs_reward``).

Actors step their envs through one of two engines (``--atari_engine``): ``gymnasium`` (the default), the envs
below stepped one after the other, or ``ale_vector``, ale-py's vectorised C++ engine stepping a group of envs in
one call, with the same preprocessing (`seed_rl.envs.atari_vector`, where the few differences are listed). A
single env (the learner's specs, ``seed-rl eval``) is always the gymnasium one.

The environment of env id ``i``:

* ``{game}NoFrameskip-v4`` (``-v0`` with sticky actions, repeat probability 0.25), one raw frame per step, with
  ``full_action_space=True`` (18 actions for every game). Games without a legacy id (Surround) use
  ``ALE/{game}-v5`` with the same settings (frameskip 1, same stickiness), which is the same emulator setup.
* Episodes are capped at ``max_episode_frames`` raw frames (108,000 = 30 minutes at 60 Hz) by gymnasium's
  ``TimeLimit``, which reports ``truncated``; ALE's own cap is set to the same number so it never cuts earlier.
  The random no-ops after a reset count towards the cap, as in the original.
* `AtariPreprocessing`: frame skip ``num_action_repeats`` with summed reward, grayscale, max over the last two
  frames, bilinear resize to 84x84, ``uint8 [84, 84, 1]``, 1..``max_random_noops`` no-ops after each reset.
* Seeded with ``config.seed + i`` on its first reset (done by `seed_rl.envs.create_environment`).

Deviation from the original (see docs/environments.md): with ``frame_skip == 1`` the original resized a frame
buffer that only ``reset()`` writes, so every observation of an episode equaled the reset frame. Here every
observation shows the newest frame, whatever the frame skip. When an episode ends inside the frame skip, the
observation is the last frame reached (max-pooled with the one before it when both were fetched), where the
original returned stale buffers.
"""

from __future__ import annotations

import dataclasses
import difflib
import warnings
from collections.abc import Sequence
from typing import Any, SupportsFloat

import gymnasium
import numpy as np
from gymnasium import spaces

from seed_rl.config import EnvConfig, field
from seed_rl.envs.batch import EnvBatch
from seed_rl.envs.frame_stack import FrameRing
from seed_rl.envs.registry import EnvFamily, resolve_options

__all__ = [
    "ATARI_57",
    "FAMILY",
    "AtariOptions",
    "AtariPreprocessing",
    "ATARI_ENGINES",
    "atari_env_id",
    "create_atari_batch",
    "create_atari_environment",
    "make_ale_env",
]

ATARI_57: tuple[str, ...] = (
    "Alien", "Amidar", "Assault", "Asterix", "Asteroids", "Atlantis", "BankHeist", "BattleZone",
    "BeamRider", "Berzerk", "Bowling", "Boxing", "Breakout", "Centipede", "ChopperCommand",
    "CrazyClimber", "Defender", "DemonAttack", "DoubleDunk", "Enduro", "FishingDerby", "Freeway",
    "Frostbite", "Gopher", "Gravitar", "Hero", "IceHockey", "Jamesbond", "Kangaroo", "Krull",
    "KungFuMaster", "MontezumaRevenge", "MsPacman", "NameThisGame", "Phoenix", "Pitfall", "Pong",
    "PrivateEye", "Qbert", "Riverraid", "RoadRunner", "Robotank", "Seaquest", "Skiing", "Solaris",
    "SpaceInvaders", "StarGunner", "Surround", "Tennis", "TimePilot", "Tutankham", "UpNDown", "Venture",
    "VideoPinball", "WizardOfWor", "YarsRevenge", "Zaxxon",
)  # fmt: skip
"""The 57 games of the Atari-57 benchmark (R2D2, Agent57), spelled as in gymnasium ids."""

SCREEN_SIZE = 84
"""Side of the square, resized observation (Nature DQN)."""

STICKY_ACTION_PROBABILITY = 0.25
"""Machado et al. (2018); what the ``-v0`` ids use."""

ATARI_ENGINES = ("gymnasium", "ale_vector")
"""What actors step Atari with (``--atari_engine``): gymnasium envs one by one, or ale-py's vector engine."""


@dataclasses.dataclass(frozen=True)
class AtariOptions:
    """The Atari family's options (``EnvConfig.options``); the defaults are the original's atari/env.py."""

    max_random_noops: int = field(30, "Atari: up to this many no-op actions after each reset.")
    sticky_actions: bool = field(False, "Atari: sticky actions with probability 0.25 (v0 ids).")
    max_episode_frames: int = field(108_000, "Atari: raw-frame cap per episode (30 minutes at 60 Hz).")
    full_action_space: bool = field(
        True, "Atari: all 18 joystick actions for every game (the original); false: the game's minimal set (6 for "
        "Pong), which the policy learns over faster."
    )
    frame_stack: int = field(
        1, "Atari: the observation holds the last k preprocessed frames on its channel axis ([84, 84, k]); 1 is the "
        "original (a recurrent core, or R2D2's learner-side stack_size, sees the history instead)."
    )
    atari_engine: str = field(
        "gymnasium", "Atari: what actors step their envs with: 'gymnasium' (one env after the other, in Python) or "
        "'ale_vector' (ale-py's vectorised C++ engine, ale-py >= 0.12.1: each group of an actor's envs in one "
        "call). Same preprocessing; the no-op count after a reset is drawn by the engine (0..max_random_noops) "
        "and a truncated episode's last step may run past the cap by up to num_action_repeats - 1 frames "
        "(docs/environments.md). A single env (the learner's specs, eval) is always gymnasium's."
    )
    atari_engine_threads: int = field(
        1, "Atari, --atari_engine=ale_vector only: worker threads of each engine (one per group of an actor's "
        "envs); 0: one per env, at most the cores. Actors are the unit of parallelism, hence 1."
    )
    terminal_on_life_loss: bool = field(
        False, "Atari: a lost life is terminal for learning (no bootstrapping across it, as OpenAI baselines' and "
        "CleanRL's EpisodicLifeEnv) while the game goes on and episode statistics count whole games; false: the "
        "original (a life loss is an ordinary step). Both engines."
    )

    def __post_init__(self) -> None:
        if self.atari_engine not in ATARI_ENGINES:
            raise ValueError(f"atari_engine must be one of {', '.join(ATARI_ENGINES)}, got {self.atari_engine!r}")
        if self.atari_engine_threads < 0:
            raise ValueError(f"atari_engine_threads must be >= 0 (0: one per env), got {self.atari_engine_threads}")
        if self.frame_stack < 1:
            raise ValueError(f"frame_stack must be >= 1, got {self.frame_stack}")
        if self.max_random_noops < 0:
            raise ValueError(f"max_random_noops must be >= 0, got {self.max_random_noops}")
        if self.max_episode_frames < 1:
            raise ValueError(f"max_episode_frames must be >= 1, got {self.max_episode_frames}")


def _import_ale_py() -> Any:
    try:
        import ale_py
    except ImportError as e:
        raise ImportError(
            "Atari environments need ale-py and opencv: pip install 'seed_rl[atari]' "
            "(or: pip install ale-py opencv-python-headless)"
        ) from e
    gymnasium.register_envs(ale_py)  # Gymnasium 1.x no longer loads env plugins by itself.
    return ale_py


def atari_env_id(game: str, sticky_actions: bool = False) -> tuple[str, dict[str, Any]]:
    """The gymnasium id for ``game`` with one raw frame per step, and the extra kwargs it needs.

    Registers the ALE ids with gymnasium (imports ale_py). Raises ValueError for an unknown game, listing close
    matches.
    """
    _import_ale_py()
    version = "v0" if sticky_actions else "v4"
    legacy_id = f"{game}NoFrameskip-{version}"
    if legacy_id in gymnasium.registry:
        return legacy_id, {}
    v5_id = f"ALE/{game}-v5"
    if v5_id in gymnasium.registry:
        # Same emulator settings as the legacy NoFrameskip ids (v5 defaults to frameskip 4 and stickiness).
        stickiness = STICKY_ACTION_PROBABILITY if sticky_actions else 0.0
        return v5_id, {"frameskip": 1, "repeat_action_probability": stickiness}
    known = sorted(set(ATARI_57) | _registered_games())
    close = difflib.get_close_matches(game, known, n=5, cutoff=0.5)
    hint = f"did you mean: {', '.join(close)}? " if close else ""
    raise ValueError(
        f"unknown Atari game {game!r}; {hint}Games are CamelCase as in gymnasium ids, e.g. Pong, Breakout, "
        f"MontezumaRevenge (the Atari-57 list is seed_rl.envs.atari.ATARI_57; {len(known)} games are known)."
    )


def _registered_games() -> set[str]:
    games = set()
    for env_id in gymnasium.registry:
        if env_id.startswith("ALE/") and env_id.endswith("-v5"):
            games.add(env_id[len("ALE/") : -len("-v5")])
        elif env_id.endswith("NoFrameskip-v4"):
            games.add(env_id[: -len("NoFrameskip-v4")])
    return games


def make_ale_env(
    game: str,
    sticky_actions: bool = False,
    max_episode_frames: int = 108_000,
    obs_type: str = "grayscale",
    full_action_space: bool = True,
) -> gymnasium.Env:
    """The raw ALE env (one frame per step, 18 actions unless ``full_action_space`` is false, TimeLimit at
    ``max_episode_frames``), unpreprocessed.

    ``obs_type`` is ale-py's (``"grayscale"``, ``"rgb"`` or ``"ram"``): what the raw env's ``step`` returns.
    """
    if max_episode_frames < 1:
        raise ValueError(f"max_episode_frames must be >= 1, got {max_episode_frames}")
    env_id, kwargs = atari_env_id(game, sticky_actions)
    with warnings.catch_warnings():
        # The v0 ids are what SEED RL uses for sticky actions; gymnasium calls them out of date.
        warnings.filterwarnings("ignore", message=".*is out of date", category=DeprecationWarning)
        return gymnasium.make(
            env_id,
            full_action_space=full_action_space,
            obs_type=obs_type,
            max_num_frames_per_episode=max_episode_frames,
            max_episode_steps=max_episode_frames,
            **kwargs,
        )


def create_atari_environment(config: EnvConfig, env_id: int = 0) -> gymnasium.Env:
    """The preprocessed Atari env of the original SEED RL for ``config`` (not yet seeded).

    ``config.options`` is resolved to `AtariOptions` here too (None: the defaults), so that the function also
    works when called directly. Every env id gets the same env; ``env_id`` only seeds it (in the caller).
    """
    del env_id
    options: AtariOptions = resolve_options(FAMILY, config.options)
    if options.atari_engine == "ale_vector":
        # The actors will need the engine: the learner (which creates env 0 for its specs) and a local launch say
        # so before any actor starts, in one line.
        from seed_rl.envs.atari_vector import check_engine

        check_engine()
    # AtariPreprocessing reads the screen from the emulator itself, for the frames it needs (the last two of a
    # step); the observation the raw env renders on every frame is thrown away, and the 128-byte RAM is the
    # cheapest one to render (benchmarks/RESULTS.md, "Why the fast paths exist").
    env = make_ale_env(config.name, options.sticky_actions, options.max_episode_frames, obs_type="ram",
                       full_action_space=options.full_action_space)
    env = AtariPreprocessing(
        env, frame_skip=config.num_action_repeats, max_random_noops=options.max_random_noops,
        terminal_on_life_loss=options.terminal_on_life_loss,
    )
    if options.frame_stack > 1:
        env = FrameStack(env, options.frame_stack)
    return env


def create_atari_batch(config: EnvConfig, env_ids: Sequence[int]) -> EnvBatch | None:
    """The family's batch factory: env ``env_ids`` of ``config`` stepped by one ale-py vector engine
    (`seed_rl.envs.atari_vector.AleVectorBatch`) with ``--atari_engine=ale_vector``; None with ``gymnasium`` (the
    actor steps `create_atari_environment`'s envs). Env ``i`` is seeded with ``config.seed + i``.

    Raises:
      ValueError: an unknown game (close matches listed), or an engine that cannot run here (one line).
    """
    options: AtariOptions = resolve_options(FAMILY, config.options)
    if options.atari_engine != "ale_vector":
        return None
    from seed_rl.envs.atari_vector import AleVectorBatch

    env_id, _ = atari_env_id(config.name, options.sticky_actions)
    rom = gymnasium.registry[env_id].kwargs["game"]
    return AleVectorBatch(
        rom, env_ids, [config.seed + i for i in env_ids], frame_skip=config.num_action_repeats,
        max_random_noops=options.max_random_noops, sticky_actions=options.sticky_actions,
        full_action_space=options.full_action_space, max_episode_frames=options.max_episode_frames,
        frame_stack=options.frame_stack, num_threads=options.atari_engine_threads, screen_size=SCREEN_SIZE,
        terminal_on_life_loss=options.terminal_on_life_loss)


FAMILY = EnvFamily(
    name="atari",
    factory=create_atari_environment,
    description="an Atari 2600 game as gymnasium spells it, e.g. Pong, Breakout, MontezumaRevenge; needs "
    "pip install 'seed_rl[atari]'",
    options=AtariOptions,
    batch_factory=create_atari_batch,
)
"""The Atari family (registered by `seed_rl.envs`); its raw reward is the default, the unclipped score."""


class AtariPreprocessing(gymnasium.Wrapper):
    """Dopamine / SEED RL Atari preprocessing on a one-frame-per-step ALE env.

    * Frame skip: each action is repeated ``frame_skip`` times; the rewards are summed. An episode that ends
      inside the skip stops it early.
    * Grayscale screens are read with ``ale.getScreenGrayscale``; when ``frame_skip > 1`` the observation is
      the pixel-wise max of the last two frames of the skip (removes sprite flicker).
    * The frame is resized to ``screen_size x screen_size`` with ``cv2.INTER_LINEAR``: ``uint8 [84, 84, 1]``.
    * After each reset, 1..``max_random_noops`` no-op actions (action 0, uniform, drawn from the env's
      ``np_random``), resetting again if the game ends during them; the reset ``info`` holds ``noops``.
    * ``terminal_on_life_loss`` (off in SEED RL): a step that loses a life, the game not over, says so in its
      ``info["life_lost"]``; ``terminated`` stays false and the game goes on (the actor makes that step terminal
      for learning only: `seed_rl.types.StepBatch.life_lost`).

    ``terminated`` and ``truncated`` pass through from the inner env (a time limit stays a truncation).
    """

    def __init__(
        self,
        env: gymnasium.Env,
        frame_skip: int = 4,
        max_random_noops: int = 0,
        screen_size: int = SCREEN_SIZE,
        terminal_on_life_loss: bool = False,
    ):
        if frame_skip < 1:
            raise ValueError(f"frame_skip must be >= 1, got {frame_skip}")
        if screen_size < 1:
            raise ValueError(f"screen_size must be >= 1, got {screen_size}")
        if max_random_noops < 0:
            raise ValueError(f"max_random_noops must be >= 0, got {max_random_noops}")
        super().__init__(env)
        import cv2  # Lazy: only Atari needs OpenCV.

        self._cv2 = cv2
        self._ale = env.unwrapped.ale  # type: ignore[attr-defined]  # an AtariEnv
        self.frame_skip = frame_skip
        self.max_random_noops = max_random_noops
        self.screen_size = screen_size
        self.terminal_on_life_loss = terminal_on_life_loss
        height, width = self._ale.getScreenDims()
        # The last two grayscale frames of a step; slot 0 is the newest when only one was fetched.
        self._screens = np.zeros((2, height, width), dtype=np.uint8)
        self._lives = 0
        self.observation_space = spaces.Box(
            low=0, high=255, shape=(screen_size, screen_size, 1), dtype=np.uint8
        )

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        _, info = self.env.reset(seed=seed, options=options)
        num_noops, info = self._apply_random_noops(info)
        self._lives = self._ale.lives()
        self._ale.getScreenGrayscale(self._screens[0])
        return self._observation(num_frames=1), {**info, "noops": num_noops}

    def _apply_random_noops(self, info: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if self.max_random_noops <= 0:
            return 0, info
        # At least one no-op, as the implementations SEED RL follows (Dopamine) do.
        num_noops = int(self.np_random.integers(1, self.max_random_noops + 1))
        for _ in range(num_noops):
            _, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:
                _, info = self.env.reset()
        return num_noops, info

    def step(self, action: Any) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        total_reward = 0.0
        num_frames = 0  # Frames fetched into self._screens during this step (0, 1 or 2).
        terminated = truncated = False
        info: dict[str, Any] = {}
        for time_step in range(self.frame_skip):
            _, reward, terminated, truncated, info = self.env.step(action)
            total_reward += float(reward)
            ended = terminated or truncated
            # Fetch the last two frames of the skip (only the last one when frame_skip == 1, the fix of the
            # original's bug), and the frame where the episode ended.
            if ended or time_step >= self.frame_skip - 2:
                self._ale.getScreenGrayscale(self._screens[num_frames])
                num_frames += 1
            if ended:
                break
        if self.terminal_on_life_loss:
            lives = self._ale.lives()
            if 0 < lives < self._lives and not (terminated or truncated):  # as baselines' EpisodicLifeEnv
                info = {**info, "life_lost": True}
            self._lives = lives
        return self._observation(num_frames), total_reward, terminated, truncated, info

    def _observation(self, num_frames: int) -> np.ndarray:
        """Max-pools the fetched frames (when there are two) and resizes: uint8 [size, size, 1]."""
        frame = self._screens[0]
        if num_frames == 2:
            frame = np.maximum(self._screens[0], self._screens[1])
        resized = self._cv2.resize(
            frame, (self.screen_size, self.screen_size), interpolation=self._cv2.INTER_LINEAR
        )
        return np.asarray(resized, dtype=np.uint8)[:, :, np.newaxis]


class FrameStack(gymnasium.Wrapper):
    """The last ``k`` observations ``[H, W, C]`` concatenated on the channel axis: ``[H, W, k * C]``, oldest
    first (`seed_rl.envs.frame_stack.FrameRing`). A reset fills the stack with the reset observation, so no frame
    of a previous episode leaks into the next one (the actor sends the reset observation as the step that ends an
    episode)."""

    def __init__(self, env: gymnasium.Env, k: int):
        if k < 1:
            raise ValueError(f"frame stack size must be >= 1, got {k}")
        super().__init__(env)
        space = env.observation_space
        assert isinstance(space, spaces.Box) and len(space.shape) == 3, space
        height, width, channels = space.shape
        self.k = k
        self._ring = FrameRing(k)
        self.observation_space = spaces.Box(
            low=np.min(space.low), high=np.max(space.high), shape=(height, width, k * channels), dtype=space.dtype
        )

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        observation, info = self.env.reset(seed=seed, options=options)
        return self._ring.start(observation), info

    def step(self, action: Any) -> tuple[np.ndarray, Any, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        return self._ring.push(observation), reward, terminated, truncated, info
