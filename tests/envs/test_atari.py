"""Atari family: ids, specs, seeding, frame skip, the frame-skip-1 fix, truncation, game-name errors.

The preprocessed env is checked against a reference computed from the raw ALE env (same seed, same actions):
rewards summed over the skip, the max of the last two frames of a full skip (else the newest frame), resized with
cv2.INTER_LINEAR.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ale_py")
cv2 = pytest.importorskip("cv2")

from seed_rl.config import EnvConfig
from seed_rl.envs import ATARI_57, create_environment, env_specs
from seed_rl.envs.atari import AtariOptions, atari_env_id, make_ale_env
from seed_rl.types import ArraySpec

pytestmark = pytest.mark.atari


_OPTIONS = {f for f in AtariOptions.__dataclass_fields__}


def atari_config(**kwargs) -> EnvConfig:
    """An Atari EnvConfig; the keyword arguments that are AtariOptions fields go into its options."""
    kwargs.setdefault("name", "Pong")
    options = AtariOptions(**{k: kwargs.pop(k) for k in list(kwargs) if k in _OPTIONS})
    return EnvConfig(family="atari", options=options, **kwargs)


def test_specs_pong():
    obs_spec, act_spec = env_specs(atari_config(num_action_repeats=4))
    assert obs_spec == ArraySpec(shape=(84, 84, 1), dtype="uint8", minimum=0, maximum=255)
    assert act_spec == ArraySpec(shape=(), dtype="int32", num_values=18)


def test_ids_full_action_space_and_observations():
    env = create_environment(atari_config(num_action_repeats=4), env_id=0)
    try:
        assert env.spec.id == "PongNoFrameskip-v4"
        assert env.action_space.n == 18
        assert env.unwrapped.ale.getFloat("repeat_action_probability") == 0.0
        # The preprocessing reads the screens it needs from the emulator; the raw env renders only its RAM.
        assert env.unwrapped.observation_space.shape == (128,)
        obs, _ = env.reset()
        assert obs.shape == (84, 84, 1) and obs.dtype == np.uint8
        assert env.observation_space.contains(obs)
        for action in (np.int32(3), 17, np.int64(0)):
            obs, reward, terminated, truncated, _ = env.step(action)
            assert obs.shape == (84, 84, 1) and obs.dtype == np.uint8
            assert isinstance(reward, float) and np.isfinite(reward)
            assert not terminated and not truncated
    finally:
        env.close()


def test_sticky_actions_use_v0():
    env = create_environment(atari_config(sticky_actions=True), env_id=0)
    try:
        assert env.spec.id == "PongNoFrameskip-v0"
        assert env.unwrapped.ale.getFloat("repeat_action_probability") == pytest.approx(0.25)
    finally:
        env.close()


def test_surround_without_legacy_id_uses_v5_with_one_frame_per_step():
    env_id, kwargs = atari_env_id("Surround")
    assert env_id == "ALE/Surround-v5"
    assert kwargs == {"frameskip": 1, "repeat_action_probability": 0.0}
    env = make_ale_env("Surround")
    try:
        assert env.action_space.n == 18
        assert env.unwrapped.ale.getFloat("repeat_action_probability") == 0.0
        _, info = env.reset(seed=0)
        start = info["episode_frame_number"]  # Surround's reset already plays a starting frame.
        for step in range(1, 4):
            _, _, _, _, info = env.step(0)
            assert info["episode_frame_number"] == start + step
    finally:
        env.close()


def test_atari_57_all_resolve():
    assert len(ATARI_57) == 57 and len(set(ATARI_57)) == 57
    for game in ATARI_57:
        atari_env_id(game)  # raises for an unknown game


@pytest.mark.parametrize(
    "game, suggestion", [("Pongg", "Pong"), ("MontezumasRevenge", "MontezumaRevenge")]
)
def test_unknown_game_lists_close_matches(game, suggestion):
    with pytest.raises(ValueError, match=f"unknown Atari game '{game}'.*{suggestion}"):
        create_environment(atari_config(name=game), env_id=0)


def test_same_seed_same_first_observation_and_noops():
    config = atari_config(num_action_repeats=4, seed=10)
    firsts = []
    for _ in range(2):
        env = create_environment(config, env_id=3)
        obs, info = env.reset()
        firsts.append((obs, info["noops"], env.step(1)[0]))
        env.close()
    (obs_a, noops_a, next_a), (obs_b, noops_b, next_b) = firsts
    assert noops_a == noops_b
    np.testing.assert_array_equal(obs_a, obs_b)
    np.testing.assert_array_equal(next_a, next_b)
    # config.seed + env_id is the seed: (seed 10, env 3) and (seed 13, env 0) are the same env.
    env = create_environment(atari_config(num_action_repeats=4, seed=13), env_id=0)
    obs_c, info_c = env.reset()
    env.close()
    assert info_c["noops"] == noops_a
    np.testing.assert_array_equal(obs_c, obs_a)


def test_noops_are_uniform_in_1_to_max_and_vary_with_the_seed():
    noops = []
    for env_id in range(8):
        env = create_environment(atari_config(max_random_noops=30), env_id=env_id)
        _, info = env.reset()
        noops.append(info["noops"])
        assert info["episode_frame_number"] == info["noops"]
        env.close()
    assert all(1 <= n <= 30 for n in noops)
    assert len(set(noops)) > 1
    env = create_environment(atari_config(max_random_noops=0), env_id=0)
    _, info = env.reset()
    env.close()
    assert info["noops"] == 0 and info["episode_frame_number"] == 0


def reference_run(config: EnvConfig, env_id: int, num_steps: int, action_seed: int = 0):
    """Steps the preprocessed env and a raw ALE env side by side; yields (expected, actual) per step."""
    frame_skip = config.num_action_repeats
    env = create_environment(config, env_id)
    raw = make_ale_env(config.name, config.options.sticky_actions, config.options.max_episode_frames)
    rng = np.random.default_rng(action_seed)

    def resize(frame):
        return cv2.resize(frame, (84, 84), interpolation=cv2.INTER_LINEAR)[:, :, None]

    try:
        obs, info = env.reset()
        frame, _ = raw.reset(seed=config.seed + env_id)
        for _ in range(info["noops"]):
            frame, *_ = raw.step(0)
        yield (resize(frame), 0.0, False, False), (obs, 0.0, False, False)
        for _ in range(num_steps):
            action = int(rng.integers(18))
            frames, reward = [], 0.0
            for _ in range(frame_skip):
                frame, r, terminated, truncated, _ = raw.step(action)
                frames.append(frame)
                reward += r
                if terminated or truncated:
                    break
            full_skip = len(frames) == frame_skip
            expected_frame = (
                np.maximum(frames[-1], frames[-2]) if full_skip and frame_skip > 1 else frames[-1]
            )
            expected = (resize(expected_frame), reward, terminated, truncated)
            actual = env.step(action)[:4]
            yield expected, actual
            if terminated or truncated:
                return
    finally:
        env.close()
        raw.close()


@pytest.mark.parametrize("frame_skip, num_steps", [(4, 120), (2, 60), (1, 100)])
def test_matches_raw_env_reference(frame_skip, num_steps):
    config = atari_config(num_action_repeats=frame_skip, seed=5)
    rewards = []
    for (e_obs, e_reward, e_term, e_trunc), (obs, reward, term, trunc) in reference_run(
        config, 1, num_steps
    ):
        np.testing.assert_array_equal(obs, e_obs)
        assert reward == e_reward and term == e_term and trunc == e_trunc
        rewards.append(reward)
    assert len(rewards) == num_steps + 1
    if frame_skip == 4:
        assert any(r != 0 for r in rewards), (
            "no point scored: the reward comparison would be vacuous"
        )


def test_episode_ending_inside_the_skip_returns_the_newest_frame():
    # 402 raw frames at frame skip 4: step 101 ends after 2 of its 4 frames (truncated by the cap).
    config = atari_config(num_action_repeats=4, max_random_noops=0, max_episode_frames=402)
    steps = list(reference_run(config, 0, num_steps=200))
    assert len(steps) == 1 + 101
    for (e_obs, e_reward, e_term, e_trunc), (obs, reward, term, trunc) in steps:
        np.testing.assert_array_equal(obs, e_obs)
        assert (reward, term, trunc) == (e_reward, e_term, e_trunc)
    assert steps[-1][1][2:] == (False, True)


@pytest.mark.parametrize("frame_skip", [1, 4])
def test_observations_show_the_newest_frame(frame_skip):
    # The original returned the reset frame for the whole episode at frame skip 1 (seed_rl_inventory 3.1).
    config = atari_config(num_action_repeats=frame_skip, max_random_noops=0)
    env = create_environment(config, env_id=0)
    rng = np.random.default_rng(1)
    try:
        reset_obs, _ = env.reset()
        previous = reset_obs
        differ_from_reset = changed = 0
        for _ in range(100):
            obs, *_ = env.step(int(rng.integers(18)))
            differ_from_reset += not np.array_equal(obs, reset_obs)
            changed += not np.array_equal(obs, previous)
            previous = obs
    finally:
        env.close()
    assert differ_from_reset >= 90
    assert changed >= 50


def test_truncation_at_max_episode_frames():
    # 400 raw frames at frame skip 4, no no-ops: steps 1..99 run on, step 100 is truncated (not terminated).
    config = atari_config(num_action_repeats=4, max_random_noops=0, max_episode_frames=400)
    env = create_environment(config, env_id=0)
    try:
        env.reset()
        for step in range(1, 100):
            _, _, terminated, truncated, info = env.step(0)
            assert not terminated and not truncated, step
        _, _, terminated, truncated, info = env.step(0)
        assert truncated and not terminated
        assert info["episode_frame_number"] == 400
        # The next episode starts over.
        _, info = env.reset()
        _, _, terminated, truncated, _ = env.step(0)
        assert not terminated and not truncated
    finally:
        env.close()


def test_noops_count_towards_the_frame_cap():
    config = atari_config(num_action_repeats=4, max_random_noops=30, max_episode_frames=400, seed=2)
    env = create_environment(config, env_id=0)
    try:
        _, info = env.reset()
        expected_steps = -(-(400 - info["noops"]) // 4)  # ceil
        for step in range(1, expected_steps + 1):
            _, _, terminated, truncated, _ = env.step(0)
            assert not terminated
            assert truncated == (step == expected_steps)
    finally:
        env.close()


def test_an_episode_that_ends_during_the_noops_is_reset():
    # An 8-frame cap ends the episode every 8 no-ops; the wrapper resets and carries on with the rest.
    config = atari_config(num_action_repeats=4, max_episode_frames=8, max_random_noops=30)
    noops = []
    for env_id in range(4):
        env = create_environment(config, env_id)
        _, info = env.reset()
        noops.append(info["noops"])
        assert info["episode_frame_number"] == info["noops"] % 8
        _, _, terminated, truncated, _ = env.step(0)
        assert not terminated
        assert truncated == (info["noops"] % 8 + 4 >= 8)
        env.close()
    assert max(noops) >= 8, "no episode ended during the no-ops: the test would be vacuous"


def test_frame_stack_holds_the_last_frames_oldest_first_and_restarts_on_reset():
    stacked = create_environment(atari_config(num_action_repeats=4, frame_stack=4, max_random_noops=0), 0)
    single = create_environment(atari_config(num_action_repeats=4, max_random_noops=0), 0)
    assert env_specs(atari_config(frame_stack=4))[0].shape == (84, 84, 4)
    obs, _ = stacked.reset(seed=3)
    first, _ = single.reset(seed=3)
    # A reset fills the stack with the reset frame: nothing of an earlier episode.
    np.testing.assert_array_equal(obs, np.repeat(first, 4, axis=2))
    frames = [first]
    rng = np.random.default_rng(0)
    for _ in range(6):
        action = int(rng.integers(18))
        obs, *_ = stacked.step(action)
        frame, *_ = single.step(action)
        frames.append(frame)
        expected = np.concatenate((frames[:1] * 4 + frames)[-4:], axis=2)
        np.testing.assert_array_equal(obs, expected)
    again, _ = stacked.reset(seed=4)
    np.testing.assert_array_equal(again, np.repeat(again[..., :1], 4, axis=2))


def test_minimal_action_set_and_bad_frame_stack():
    obs_spec, act_spec = env_specs(atari_config(full_action_space=False))
    assert act_spec.num_values == 6 and obs_spec.shape == (84, 84, 1)  # Pong's minimal set
    with pytest.raises(ValueError, match="frame_stack"):
        AtariOptions(frame_stack=0)


def _play_breakout(terminal_on_life_loss: bool, seed: int = 0):
    """One whole game of Breakout with random minimal-set actions: per step (lives, info's life_lost,
    terminated)."""
    env = create_environment(atari_config(name="Breakout", full_action_space=False, max_random_noops=0,
                                          terminal_on_life_loss=terminal_on_life_loss), 0)
    ale = env.unwrapped.ale
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    steps = []
    for _ in range(20_000):
        _, _, terminated, truncated, info = env.step(int(rng.integers(4)))
        steps.append((ale.lives(), bool(info.get("life_lost")), terminated))
        if terminated or truncated:
            break
    env.close()
    return steps


def test_terminal_on_life_loss_reports_each_lost_life_and_the_game_goes_on():
    """Each life lost before the last is one step with info["life_lost"] and no termination; the game ends on
    the last life with terminated (not life_lost), as OpenAI baselines' EpisodicLifeEnv ends learning episodes
    but not games. Off (the original), no step says life_lost and the game is the same."""
    steps = _play_breakout(True)
    lost = [i for i, (_, life_lost, _) in enumerate(steps) if life_lost]
    lives = [lv for lv, _, _ in steps]
    assert steps[-1][2] and not steps[-1][1], "the game ends with terminated, not a life loss"
    assert not any(terminated for _, _, terminated in steps[:-1])
    assert len(lost) == 4, f"Breakout's 5 lives: 4 losses before the game ends, got {len(lost)}"
    for i in lost:  # the step that lost the life is where the count drops
        assert lives[i] == (lives[i - 1] if i else 5) - 1
    assert _play_breakout(False) == [(lv, False, t) for lv, _, t in steps]  # same game, nothing reported


def test_terminal_on_life_loss_takes_either_engine():
    for engine in ("gymnasium", "ale_vector"):  # the vector engine marks the same steps: test_atari_vector.py
        assert AtariOptions(terminal_on_life_loss=True, atari_engine=engine).terminal_on_life_loss
