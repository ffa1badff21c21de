"""The Football family: bit-plane packing against the original's layout, the old-gym-API adapter and the whole
factory against a synthetic gfootball env (default suite); real scenarios when gfootball is installed."""

from __future__ import annotations

import importlib.util

import gymnasium
import numpy as np
import pytest

from seed_rl.config import EnvConfig
from seed_rl.envs import create_environment, get_family
from seed_rl.envs.football import (
    PLANE_BITS,
    FootballOptions,
    OldGymApi,
    PackedBitsObservation,
    create_football_environment,
    pack_bit_planes,
    unpack_bit_planes_numpy,
)

HAVE_GFOOTBALL = importlib.util.find_spec("gfootball") is not None
needs_gfootball = pytest.mark.skipif(
    not HAVE_GFOOTBALL, reason="gfootball is not installed (bash scripts/install_football.sh, then "
    "pip install -e .[football]); the adapter is tested against a synthetic env above")


def _smm(rng, shape=(72, 96, 16)):
    return (rng.random(shape) < 0.1).astype(np.uint8) * 255


def _original_pack(observation):
    """The original's football/observation.py PackedBitsObservation.observation, as the reference."""
    data = np.packbits(observation, axis=-1)
    if data.shape[-1] % 2 == 1:
        data = np.pad(data, [(0, 0)] * (data.ndim - 1) + [(0, 1)], "constant")
    return data.view(np.uint16)


def test_pack_layout_is_the_originals():
    # The original: np.packbits (plane 0 -> bit 7 of byte 0) and bytes read as little-endian uint16.
    planes = np.zeros((1, 1, 16), np.uint8)
    for k in range(16):
        planes[:] = 0
        planes[..., k] = 255
        assert pack_bit_planes(planes)[0, 0, 0] == 1 << PLANE_BITS[k]
    assert PLANE_BITS[:8] == (7, 6, 5, 4, 3, 2, 1, 0) and PLANE_BITS[8:] == (15, 14, 13, 12, 11, 10, 9, 8)
    rng = np.random.default_rng(0)
    for channels in (16, 4, 20):
        obs = _smm(rng, (5, 7, channels))
        packed = pack_bit_planes(obs)
        assert packed.dtype == np.uint16 and packed.shape == (5, 7, (channels + 15) // 16)
        np.testing.assert_array_equal(packed, _original_pack(obs))
        unpacked = unpack_bit_planes_numpy(packed)
        np.testing.assert_array_equal(unpacked[..., :channels], obs != 0)
        assert not unpacked[..., channels:].any()  # the planes past C are zero


def test_tensorflow_unpacking_matches():
    tf = pytest.importorskip("tensorflow")
    from seed_rl.networks.torsos import _to_float, unpack_bit_planes

    rng = np.random.default_rng(1)
    obs = _smm(rng, (3, 72, 96, 16))
    packed = pack_bit_planes(obs)
    planes = unpack_bit_planes(tf.constant(packed)).numpy()
    assert planes.shape == (3, 72, 96, 16) and planes.dtype == np.float32
    np.testing.assert_array_equal(planes, (obs != 0).astype(np.float32))
    np.testing.assert_array_equal(_to_float(tf.constant(packed)).numpy(), planes)  # what every torso does


class FakeGFootballEnv:
    """gfootball's env as seed_rl sees it: gym 0.25 API, spaces from gym, SMM observations, score_reward info."""

    def __init__(self, env_name, representation, stacked, rewards, channel_dimensions, episode_steps=5):
        import types

        self.kwargs = dict(env_name=env_name, representation=representation, stacked=stacked, rewards=rewards,
                           channel_dimensions=channel_dimensions)
        width, height = channel_dimensions
        box = types.SimpleNamespace(low=np.zeros((height, width, 16), np.uint8),
                                    high=np.full((height, width, 16), 255, np.uint8), shape=(height, width, 16),
                                    dtype=np.dtype(np.uint8))
        self.observation_space = type("Box", (), dict(vars(box)))()
        self.action_space = type("Discrete", (), {"n": 19})()
        self.unwrapped = self
        self._config = {}
        self.seeds = []
        self._steps = 0
        self._episode_steps = episode_steps
        self._rng = np.random.default_rng(0)
        self.closed = False

    def reset(self):
        self.seeds.append(self._config.get("game_engine_random_seed"))
        self._steps = 0
        self.last = _smm(self._rng, self.observation_space.shape)
        return self.last

    def step(self, action):
        assert 0 <= int(action) < 19
        self._steps += 1
        self.last = _smm(self._rng, self.observation_space.shape)
        goal = 1.0 if self._steps == 3 else 0.0
        reward = goal + (0.1 if "checkpoints" in self.kwargs["rewards"] else 0.0)
        return self.last, np.float32(reward), self._steps >= self._episode_steps, {"score_reward": goal}

    def close(self):
        self.closed = True


def test_factory_with_a_synthetic_gfootball():
    made = []

    def create_fn(**kwargs):
        made.append(FakeGFootballEnv(**kwargs))
        return made[-1]

    env = create_football_environment("academy_empty_goal_close", FootballOptions("scoring,checkpoints", "medium"),
                                      create_fn=create_fn)
    (inner,) = made
    assert inner.kwargs == dict(env_name="academy_empty_goal_close", representation="extracted", stacked=True,
                                rewards="scoring,checkpoints", channel_dimensions=(120, 90))
    assert env.observation_space == gymnasium.spaces.Box(0, 65535, (90, 120, 1), np.uint16)
    assert env.action_space == gymnasium.spaces.Discrete(19)
    obs, info = env.reset(seed=7)
    assert obs.dtype == np.uint16 and obs.shape == (90, 120, 1) and info == {}
    np.testing.assert_array_equal(unpack_bit_planes_numpy(obs), inner.last != 0)
    total, score, done = 0.0, 0.0, False
    raw_reward = get_family("football").raw_reward
    while not done:
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        total += reward
        score += raw_reward(reward, info)
        done = terminated or truncated
    assert terminated and not truncated  # the end of the scenario is the game's own end
    assert total == pytest.approx(1.5) and score == 1.0  # training reward with checkpoints; raw reward = goals
    env.reset()
    # every reset gives the engine the next seed of the env's own stream, started at the reset seed
    rng = np.random.RandomState(7)
    assert inner.seeds == [rng.randint(0, 2**31 - 1), rng.randint(0, 2**31 - 1)]
    env.close()
    assert inner.closed


def test_adapter_truncation_and_refusals():
    class TimeLimited(FakeGFootballEnv):
        def step(self, action):
            obs, reward, done, info = super().step(action)
            if done:
                info["TimeLimit.truncated"] = True
            return obs, reward, done, info

    env = OldGymApi(TimeLimited("x", "extracted", True, "scoring", (8, 6), episode_steps=1))
    env.reset()
    _, _, terminated, truncated, info = env.step(0)
    assert truncated and not terminated and "TimeLimit.truncated" not in info

    class NewApi(FakeGFootballEnv):
        def reset(self):
            return super().reset(), {}

    with pytest.raises(ValueError, match="already speaks the new API"):
        OldGymApi(NewApi("x", "extracted", True, "scoring", (8, 6))).reset()
    with pytest.raises(ValueError, match="num_action_repeats=1"):
        create_football_environment("academy_empty_goal_close", num_action_repeats=4, create_fn=FakeGFootballEnv)
    with pytest.raises(ValueError, match="reward_experiment must be one of scoring, scoring,checkpoints"):
        FootballOptions(reward_experiment="goals")
    with pytest.raises(ValueError, match="smm_size must be one of default, medium, large"):
        FootballOptions(smm_size="huge")


def test_packed_bits_wrapper_needs_channels():
    env = gymnasium.make("CartPole-v1")
    env.observation_space = gymnasium.spaces.Box(0, 1, shape=(), dtype=np.uint8)
    with pytest.raises(ValueError, match="needs an array observation with a channel axis"):
        PackedBitsObservation(env)


@pytest.mark.skipif(HAVE_GFOOTBALL, reason="gfootball is installed")
def test_missing_gfootball_says_how_to_install():
    with pytest.raises(ImportError, match="scripts/install_football.sh"):
        create_environment(EnvConfig(family="football", name="academy_empty_goal_close"), env_id=0)


@needs_gfootball
def test_real_scenario_steps():
    config = EnvConfig(family="football", name="academy_empty_goal_close", seed=3)
    env = create_environment(config, env_id=0)
    assert env.observation_space.shape == (72, 96, 1) and env.observation_space.dtype == np.uint16
    assert env.action_space.n == 19
    obs, _ = env.reset()
    assert obs.shape == (72, 96, 1) and obs.dtype == np.uint16
    planes = unpack_bit_planes_numpy(obs)
    assert planes.shape == (72, 96, 16) and planes.any() and not planes.all()
    assert env.unwrapped.render().shape == (288, 384, 3)  # seed-rl eval --video draws the SMM
    steps, done = 0, False
    while not done and steps < 500:
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        steps += 1
        done = terminated or truncated
        assert "score_reward" in info
    assert done  # academy scenarios end within 400 steps
    env.close()
    with pytest.raises(ValueError, match="unknown Football scenario 'no_such_game'.*academy_empty_goal_close"):
        create_environment(EnvConfig(family="football", name="no_such_game"), env_id=0)


@pytest.mark.parametrize("size", ["default", "large"])
def test_spaces_rule_matches_the_env_and_needs_no_gfootball(size):
    config = EnvConfig(family="football", name="academy_empty_goal_close", options=FootballOptions(smm_size=size))
    env = create_football_environment(config.name, config.options, create_fn=FakeGFootballEnv)
    assert get_family("football").spaces(config) == (env.observation_space, env.action_space)
    from seed_rl.envs import env_specs

    obs_spec, action_spec = env_specs(config)  # gfootball is not imported for this
    assert obs_spec.dtype == "uint16" and tuple(obs_spec.shape) == env.observation_space.shape
    assert action_spec.num_values == 19


@needs_gfootball
def test_spaces_rule_matches_real_gfootball():
    config = EnvConfig(family="football", name="academy_empty_goal_close")
    env = create_environment(config, 0)
    assert get_family("football").spaces(config) == (env.observation_space, env.action_space)
    env.close()


def test_render_draws_the_newest_smm_frame():
    env = create_football_environment("academy_empty_goal_close", create_fn=FakeGFootballEnv)
    obs, _ = env.reset(seed=0)
    frame = env.unwrapped.render()
    assert frame.shape == (72 * 4, 96 * 4, 3) and frame.dtype == np.uint8
    planes = unpack_bit_planes_numpy(obs)[..., 12:16]  # the newest of the 4 stacked frames
    y, x = np.argwhere(planes[..., 2] & ~planes[..., 3])[0]  # a ball pixel not under the active player
    assert tuple(frame[4 * y, 4 * x]) == (255, 255, 255)
    empty = np.argwhere(~planes.any(-1))[0]
    assert tuple(frame[4 * empty[0], 4 * empty[1]]) == (20, 80, 30)


@needs_gfootball
def test_real_engine_gets_the_seed_stream():
    """Each reset hands the engine the next seed of the env's stream (config.seed + env_id). gfootball's engine is
    not bit-for-bit reproducible even then: identically seeded episodes were seen to drift apart after 2 steps
    here (under load, and inside pytest's process), so this checks the seeds it gets, not the frames."""
    env = create_environment(EnvConfig(family="football", name="academy_empty_goal_close", seed=4), env_id=1)
    config = env.unwrapped.inner.unwrapped._config
    rng = np.random.RandomState(5)
    for _ in range(2):
        env.reset()
        assert config["game_engine_random_seed"] == rng.randint(0, 2**31 - 1)
    env.close()
