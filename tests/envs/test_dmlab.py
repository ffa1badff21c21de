"""The DMLab family against a fake of the deepmind_lab API (tests/fakes/deepmind_lab): level names, config, the
action set and repeats, seeding, episode ends, the level cache, the errors; and its presets and specs."""

from __future__ import annotations

import importlib
import os
import sys

import numpy as np
import pytest

from seed_rl.config import EnvConfig
from seed_rl.envs import create_environment, env_specs, get_family
from seed_rl.envs.dmlab import (
    ALL_GAMES,
    DEFAULT_ACTION_SET,
    DMLAB_30,
    HUMAN_SCORES,
    RANDOM_SCORES,
    DmLabOptions,
    LevelCache,
    create_dmlab_environment,
    human_normalized_score,
    level_path,
)

FAKES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fakes")


@pytest.fixture
def lab(monkeypatch):
    """The fake deepmind_lab module, importable as deepmind_lab for this test."""
    monkeypatch.syspath_prepend(FAKES)
    sys.modules.pop("deepmind_lab", None)
    module = importlib.import_module("deepmind_lab")
    module.created.clear()
    yield module
    sys.modules.pop("deepmind_lab", None)


def test_tables_are_the_original_games_py():
    assert len(DMLAB_30) == 30 and len(set(DMLAB_30)) == 30
    assert len(ALL_GAMES) == 32  # 30 + the two *_test levels
    test_levels = {("rooms_collect_good_objects_test" if n == "rooms_collect_good_objects_train" else
                    "rooms_exploit_deferred_effects_test" if n == "rooms_exploit_deferred_effects_train" else n)
                   for n in DMLAB_30}
    assert set(HUMAN_SCORES) == set(RANDOM_SCORES) == test_levels
    assert human_normalized_score("rooms_watermaze", [54.0]) == pytest.approx(100.0)
    assert human_normalized_score("rooms_watermaze", [4.065]) == pytest.approx(0.0)
    # a training name is scored on its test level
    assert human_normalized_score("rooms_collect_good_objects_train", [10.0]) == pytest.approx(100.0)
    with pytest.raises(ValueError, match="no human/random scores for DMLab level 'seekavoid_arena_01'"):
        human_normalized_score("seekavoid_arena_01", [1.0])
    assert level_path("rooms_watermaze") == "contributed/dmlab30/rooms_watermaze"
    assert level_path("seekavoid_arena_01") == "seekavoid_arena_01"
    assert len(DEFAULT_ACTION_SET) == 9 and all(len(a) == 7 for a in DEFAULT_ACTION_SET)


def test_env_through_the_family(lab):
    config = EnvConfig(family="dmlab", name="explore_goal_locations_small", num_action_repeats=4, seed=10)
    env = create_environment(config, env_id=3)
    (fake,) = lab.created
    assert fake.level == "contributed/dmlab30/explore_goal_locations_small"
    assert fake.observation_names == ["RGB_INTERLEAVED"]
    assert fake.config == {"width": "96", "height": "72", "logLevel": "WARN"}
    assert fake.level_cache is None
    assert env.observation_space.shape == (72, 96, 3) and env.observation_space.dtype == np.uint8
    assert env.action_space.n == 9
    obs, info = env.reset()
    assert obs.shape == (72, 96, 3) and obs.dtype == np.uint8 and info == {}
    # seeded from config.seed + env_id = 13: Lab's reset seed is the first number of RandomState(13)
    assert fake.reset_seeds == [np.random.RandomState(13).randint(0, 2**31 - 1)]
    assert obs[0, 0, 0] == fake.reset_seeds[0] % 256
    fire = DEFAULT_ACTION_SET.index((0, 0, 0, 0, 1, 0, 0))
    obs, reward, terminated, truncated, _ = env.step(fire)
    assert reward == 4.0 and not terminated and not truncated  # Lab's native repeat: 4 frames, 1 each
    assert fake.num_steps() == 4
    obs, reward, *_ = env.step(DEFAULT_ACTION_SET.index((0, 0, 0, 1, 0, 0, 0)))  # forward: no reward
    assert reward == 0.0 and obs[0, 0, 1] == 2  # the fake shows the last MOVE value + 1
    steps, done = 2, False
    while not done:
        obs, reward, terminated, truncated, _ = env.step(fire)
        steps += 1
        done = terminated or truncated
    assert terminated and not truncated and steps == lab.EPISODE_FRAMES // 4
    assert obs.shape == (72, 96, 3) and not obs.any()  # Lab has no observation after the end
    env.reset()
    assert len(fake.reset_seeds) == 2 and fake.reset_seeds[1] != fake.reset_seeds[0]
    env.close()
    assert not fake.is_running()


def test_same_seed_same_level_seeds(lab):
    config = EnvConfig(family="dmlab", name="rooms_watermaze", seed=5)
    for _ in range(2):
        env = create_environment(config, env_id=0)
        env.reset()
        env.reset()
        env.close()
    first, second = lab.created
    assert first.reset_seeds == second.reset_seeds


def test_options(lab, tmp_path):
    options = DmLabOptions(width=64, height=48, homepath="/opt/lab", dataset_path="/data/brady",
                           dmlab_test_mode=True, level_cache_dir=str(tmp_path / "cache"))
    env = create_dmlab_environment("lasertag_one_opponent_small", 1, options, lab_module=lab)
    fake = lab.created[-1]
    assert lab.runfiles_path() == "/opt/lab"
    assert fake.config == {"width": "64", "height": "48", "logLevel": "WARN", "datasetPath": "/data/brady",
                           "allowHoldOutLevels": "true", "mixerSeed": str(0x600D5EED)}
    assert env.reset()[0].shape == (48, 64, 3)
    assert fake.compiled_from_cache is False  # compiled, then written to the cache
    env.close()
    env = create_dmlab_environment("lasertag_one_opponent_small", 1, options, lab_module=lab)
    env.reset()
    assert lab.created[-1].compiled_from_cache is True  # the second env fetches the same map
    cached = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert len(cached) == 1 and len(cached[0].parent.name) == 3 and len(cached[0].name) == 29  # md5 sharded
    env.close()


def test_level_cache_miss_and_atomic_write(tmp_path):
    cache = LevelCache(str(tmp_path))
    pk3 = tmp_path / "map.pk3"
    assert not cache.fetch("k", str(tmp_path / "out.pk3"))
    pk3.write_bytes(b"map")
    cache.write("k", str(pk3))
    cache.write("k", str(pk3))  # a second write of the same key keeps the first
    assert cache.fetch("k", str(tmp_path / "out.pk3")) and (tmp_path / "out.pk3").read_bytes() == b"map"
    assert not list(tmp_path.rglob("*.tmp*"))


def test_clear_errors(lab):
    with pytest.raises(ValueError, match=r"DeepMind Lab cannot open level 'no_such_level' \(--env_name="
                                         r"'no_such_level'\): Failed to open level"):
        create_environment(EnvConfig(family="dmlab", name="no_such_level"), env_id=0)
    env = create_dmlab_environment("rooms_watermaze", lab_module=lab)
    env.reset()
    with pytest.raises(ValueError, match=r"DMLab action 9 is not in \[0, 9\)"):
        env.step(9)
    with pytest.raises(ValueError, match="num_action_repeats must be >= 1"):
        create_dmlab_environment("rooms_watermaze", 0, lab_module=lab)
    with pytest.raises(ValueError, match="width and height must be >= 1"):
        DmLabOptions(width=0)


def test_missing_deepmind_lab_says_how_to_get_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "deepmind_lab", None)  # import fails
    with pytest.raises(ImportError, match="no pip build: build it from source with Bazel.*Dockerfile.dmlab"):
        create_environment(EnvConfig(family="dmlab", name="rooms_watermaze"), env_id=0)


def test_specs_and_options_from_json(lab):
    config = EnvConfig(family="dmlab", name="rooms_watermaze", options={"width": 32, "height": 24})
    obs_spec, action_spec = env_specs(config)
    assert tuple(obs_spec.shape) == (24, 32, 3) and obs_spec.dtype == "uint8"
    assert action_spec.num_values == 9
    assert get_family("dmlab").raw_reward(3.0, {}) == 3.0


def test_specs_need_no_lab(monkeypatch):
    """The learner reads the specs from the family's spaces rule: no deepmind_lab on the learner machine."""
    monkeypatch.setitem(sys.modules, "deepmind_lab", None)
    obs_spec, action_spec = env_specs(EnvConfig(family="dmlab", name="rooms_watermaze"))
    assert tuple(obs_spec.shape) == (72, 96, 3) and action_spec.num_values == 9


def test_spaces_rule_matches_the_env(lab):
    config = EnvConfig(family="dmlab", name="rooms_watermaze", options=DmLabOptions(width=40, height=30))
    env = create_environment(config, 0)
    assert get_family("dmlab").spaces(config) == (env.observation_space, env.action_space)


def test_video_of_an_episode(lab, tmp_path):
    pytest.importorskip("moviepy", reason="needs the video extra")
    from seed_rl.evaluate import record_video

    env = record_video(create_environment(EnvConfig(family="dmlab", name="rooms_watermaze", num_action_repeats=4,
                                                    options=DmLabOptions(width=32, height=24)), 0),
                       str(tmp_path), num_action_repeats=4)
    obs, _ = env.reset()
    np.testing.assert_array_equal(env.unwrapped.render(), obs)
    done = False
    while not done:
        _, _, terminated, truncated, _ = env.step(8)
        done = terminated or truncated
    env.close()
    videos = list(tmp_path.glob("*.mp4"))
    assert len(videos) == 1 and videos[0].stat().st_size > 0
