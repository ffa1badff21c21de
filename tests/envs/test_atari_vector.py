"""``--atari_engine=ale_vector``: ale-py's vector engine against the gymnasium path, frame for frame.

Both paths are stepped with the same env seeds and the same random actions, env by env, and give the same
observations, rewards and episode ends (terminated and truncated flags on the same step, the same first
observation of the next episode), over several episodes with life losses (Breakout), sticky actions, the minimal
action set, a frame stack, frame skips 1, 3 and 4, and the episode cap. What the docs list as different is pinned
down here too:

* the engine draws the no-op count after a reset itself (``0..max_random_noops``): the gymnasium side is given
  the engine's count (`ScriptedNoops`, under the real factory), and the frames then agree;
* a cap that falls inside a frame skip ends the episode on the same step, where the engine has played the rest of
  the skip: that step's observation (and only that one) may differ;
* the last observation of a game that ended is not compared (the engine's is stale when the game ended inside
  the skip; the actor sends the reset observation instead).
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import gymnasium
import numpy as np
import pytest

ale_py = pytest.importorskip("ale_py")
pytest.importorskip("cv2")

from seed_rl.config import EnvConfig
from seed_rl.envs import SerialEnvBatch, atari, create_env_batch, create_environment
from seed_rl.envs.atari import AtariOptions
from seed_rl.envs.atari_vector import AleVectorBatch, check_engine, engine_seed

pytestmark = pytest.mark.atari

SEED = 15
"""Env seeds 15, 16, 17: gymnasium's ALE seeds for them have their top bit clear, so the engine's ALE draws the
same sticky actions (`seed_rl.envs.atari_vector.engine_seed`)."""


class ScriptedNoops(gymnasium.Wrapper):
    """Sits under `AtariPreprocessing` and answers its no-op draw with ``count`` (the engine's count)."""

    count = 0

    @property
    def np_random(self):  # what AtariPreprocessing draws its no-op count from (self.env.np_random)
        wrapper = self

        class Draw:
            def integers(self, low, high):
                assert 0 <= wrapper.count < high
                return wrapper.count

        return Draw()


@pytest.fixture
def scripted(monkeypatch):
    """The gymnasium path's raw envs, each under a `ScriptedNoops`, in the order the factory creates them."""
    made: list[ScriptedNoops] = []
    make_ale_env = atari.make_ale_env

    def make(*args, **kwargs):
        made.append(ScriptedNoops(make_ale_env(*args, **kwargs)))
        return made[-1]

    monkeypatch.setattr(atari, "make_ale_env", make)
    return made


def _config(game: str, frame_skip: int, engine: str = "ale_vector", **options) -> EnvConfig:
    return EnvConfig(family="atari", name=game, num_action_repeats=frame_skip, seed=SEED,
                     options=AtariOptions(atari_engine=engine, **options))


def _compare(scripted, config: EnvConfig, steps: int, num_envs: int = 2) -> dict:
    """Steps the engine batch and the gymnasium envs of ``config`` with the same random actions; asserts they
    agree (see the module docstring) and returns what was seen: episode ends, truncations, distinct no-op counts,
    and truncation steps whose observation differed."""
    batch = create_env_batch(config, range(num_envs))
    assert isinstance(batch, AleVectorBatch)
    gym_config = dataclasses.replace(config, options=dataclasses.replace(config.options, atari_engine="gymnasium"))
    envs = [create_environment(gym_config, i) for i in range(num_envs)]
    seen = {"ends": 0, "truncations": 0, "noops": set(), "truncation_observation_differs": 0, "life_losses": 0,
            "life_losses_after_a_cap": 0}
    capped_before = [False] * num_envs
    cap, frame_skip = config.options.max_episode_frames, config.num_action_repeats
    try:
        assert batch.observation_space == envs[0].observation_space
        assert batch.action_space == envs[0].action_space

        def reset_gym(i: int) -> np.ndarray:
            scripted[i].count = int(batch.reset_noops[i])
            seen["noops"].add(scripted[i].count)
            return envs[i].reset()[0]

        firsts = batch.reset(range(num_envs))
        noops = batch.reset_noops.copy()
        for i in range(num_envs):
            np.testing.assert_array_equal(firsts[i], reset_gym(i))
        rng = np.random.default_rng(0)
        for t in range(steps):
            actions = rng.integers(0, batch.action_space.n, size=num_envs)
            results = batch.step(range(num_envs), actions.astype(np.int32))
            for i, result in enumerate(results):
                obs, reward, terminated, truncated, info = envs[i].step(int(actions[i]))
                where = f"step {t}, env {i}"
                assert (result.reward, result.terminated, result.truncated) == (reward, terminated, truncated), where
                life_lost = bool(info.get("life_lost", False))
                assert bool(result.info.get("life_lost", False)) == life_lost, where
                seen["life_losses"] += life_lost
                seen["life_losses_after_a_cap"] += life_lost and capped_before[i]
                assert result.error is None
                if not (terminated or truncated):
                    np.testing.assert_array_equal(result.observation, obs, err_msg=where)
                    assert result.reset_observation is None
                    continue
                seen["ends"] += 1
                if truncated:
                    seen["truncations"] += 1
                    capped_before[i] = True
                    # The cap fell on the last frame of the skip: the same observation; else, up to frame_skip - 1
                    # frames later.
                    if (cap - noops[i]) % frame_skip == 0:
                        np.testing.assert_array_equal(result.observation, obs, err_msg=where)
                    else:
                        seen["truncation_observation_differs"] += not np.array_equal(result.observation, obs)
                np.testing.assert_array_equal(result.reset_observation, reset_gym(i), err_msg=where)
                noops[i] = batch.reset_noops[i]
    finally:
        batch.close()
        for env in envs:
            env.close()
    return seen


@pytest.mark.parametrize("options", [
    {},  # the original's: 30 no-ops, full action set, no sticky actions
    {"sticky_actions": True, "full_action_space": False, "frame_stack": 4, "terminal_on_life_loss": True},
], ids=["original", "sticky-minimal-stack4-life-loss"])
def test_breakout_games_frame_for_frame(scripted, options):
    """Whole games with life losses (not episode ends, as in the original; with ``terminal_on_life_loss`` both
    paths mark the same steps in ``info["life_lost"]``), no-ops after each reset."""
    seen = _compare(scripted, _config("Breakout", 4, **options), steps=400)
    assert seen["ends"] >= 4 and seen["truncations"] == 0
    assert len(seen["noops"]) >= 4 and max(seen["noops"]) <= 30
    if options.get("terminal_on_life_loss"):
        assert seen["life_losses"] >= 4 * seen["ends"], "Breakout: 4 lost lives before each game's end"
    else:
        assert seen["life_losses"] == 0


def test_life_losses_after_a_capped_episode(scripted):
    """Breakout with ``terminal_on_life_loss`` and a 600-frame cap: the episodes the cap cuts start again with all
    their lives, and both paths mark the same lost lives in the episodes after them."""
    seen = _compare(scripted, _config("Breakout", 4, full_action_space=False, terminal_on_life_loss=True,
                                      max_episode_frames=600), steps=450)
    assert seen["truncations"] >= 2 and seen["life_losses_after_a_cap"] >= 2, seen


@pytest.mark.parametrize("frame_skip,cap", [(1, 150), (3, 150), (4, 200)])
def test_pong_to_the_cap_frame_for_frame(scripted, frame_skip, cap):
    """Truncated episodes, where the cap falls on the last frame of a skip (every step at frame skip 1 and 3 with
    no no-ops; no-ops make the frame skip 4 cap fall anywhere)."""
    noops = 5 if frame_skip == 4 else 0
    seen = _compare(scripted, _config("Pong", frame_skip, max_random_noops=noops, max_episode_frames=cap),
                    steps=cap // frame_skip * 3 + 3)
    assert seen["truncations"] == seen["ends"] >= 3


def test_a_cap_inside_the_frame_skip_ends_the_same_step_a_few_frames_later(scripted):
    """Pong, frame skip 4, cap 202 (no no-ops): the gymnasium path stops 2 frames into step 51, the engine plays
    its 4; both truncate on step 51, and only that step's observation differs."""
    seen = _compare(scripted, _config("Pong", 4, max_random_noops=0, max_episode_frames=202), steps=51 * 3)
    assert seen["truncations"] == 2 * 3 and seen["truncation_observation_differs"] >= 1  # 2 envs


def test_engine_seeds_are_gymnasiums_ale_seeds_where_they_can_be():
    for seed in (SEED, SEED + 1, SEED + 2):
        assert engine_seed(seed) == int(np.random.SeedSequence(seed).generate_state(2)[1])
    assert 0 <= engine_seed(0) < 2**31  # gymnasium's is negative as an int32: the engine would not take it


def test_noop_counts_are_the_engines_and_reproducible():
    config = _config("Pong", 4, max_random_noops=7)
    counts, firsts = [], []
    for _ in range(2):
        batch = create_env_batch(config, range(3))
        try:
            first = batch.reset(range(3))
            drawn = [batch.reset_noops.copy()]
            for _ in range(10):
                batch.reset([0, 2])  # partial resets: env 1 keeps its episode
                drawn.append(batch.reset_noops.copy())
        finally:
            batch.close()
        counts.append(np.array(drawn))
        firsts.append(first)
    np.testing.assert_array_equal(counts[0], counts[1])
    np.testing.assert_array_equal(np.array(firsts[0]), np.array(firsts[1]))
    assert counts[0].min() >= 0 and counts[0].max() <= 7
    assert len(np.unique(counts[0][:, [0, 2]])) >= 4
    assert (counts[0][:, 1] == counts[0][0, 1]).all()


def test_envs_left_out_of_a_step_and_an_action_out_of_range():
    """The contract of `seed_rl.envs.batch`: a step of some envs returns theirs only; an action the game does not
    have (which would stop the engine for good) is that env's error alone: it starts again, the others step."""
    config = _config("Pong", 4, max_random_noops=3)
    batch = create_env_batch(config, [5, 6, 7])
    reference = create_env_batch(config, [5, 6, 7])
    try:
        assert batch.env_ids == (5, 6, 7)
        batch.reset([0, 1, 2])
        reference.reset([0, 1, 2])
        results = batch.step([2, 0], np.array([1, 3], np.int32))
        assert len(results) == 2 and all(r.error is None for r in results)
        assert batch.reset([1])[0].shape == (84, 84, 1)
        reference.step([0, 1, 2], np.array([3, 0, 1], np.int32))
        reference.reset([1])
        mixed = batch.step([0, 1, 2], np.array([2, 99, 2], np.int32))
        expected = reference.step([0, 1, 2], np.array([2, 0, 2], np.int32))
        assert isinstance(mixed[1].error, ValueError) and "action 99 is not one of the 18 actions" in str(mixed[1].error)
        np.testing.assert_array_equal(mixed[1].reset_observation, reference.reset([1])[0])
        for k in (0, 2):
            assert mixed[k].error is None and mixed[k].reward == expected[k].reward
            np.testing.assert_array_equal(mixed[k].observation, expected[k].observation)
        assert all(r.error is None for r in batch.step([0, 1, 2], np.zeros(3, np.int32)))
    finally:
        batch.close()
        reference.close()


def test_the_engine_is_chosen_by_the_option_and_single_envs_stay_gymnasium():
    gym = create_env_batch(_config("Pong", 4, engine="gymnasium"), [0, 1])
    vec = create_env_batch(_config("Pong", 4), [0, 1])
    single = create_environment(_config("Pong", 4), 0)  # the learner's specs, seed-rl eval
    try:
        assert isinstance(gym, SerialEnvBatch) and isinstance(vec, AleVectorBatch)
        assert single.spec.id == "PongNoFrameskip-v4"
    finally:
        for env in (gym, vec, single):
            env.close()


def test_an_unknown_engine_and_a_bad_thread_count_are_refused():
    with pytest.raises(ValueError, match="atari_engine must be one of gymnasium, ale_vector, got 'envpool'"):
        AtariOptions(atari_engine="envpool")
    with pytest.raises(ValueError, match="atari_engine_threads must be >= 0"):
        AtariOptions(atari_engine_threads=-1)


def test_an_ale_py_without_a_usable_engine_is_one_line(monkeypatch):
    monkeypatch.setattr(ale_py, "__version__", "0.11.2")
    expected = (r"^--atari_engine=ale_vector needs ale-py >= 0.12.1 \(its vector engine resets single envs "
                r"correctly from that release on\); installed: 0.11.2: pip install -U 'ale-py>=0.12.1', or use "
                r"--atari_engine=gymnasium$")
    with pytest.raises(ValueError, match=expected):
        check_engine()
    with pytest.raises(ValueError, match=expected):  # the learner creates env 0 for its specs: it says so first
        create_environment(_config("Pong", 4), 0)
    with pytest.raises(ValueError, match=expected):  # and an actor's batch
        create_env_batch(_config("Pong", 4), [0])


def _resolve(*args: str):
    from seed_rl import cli

    fv, fields = cli._make_flags("train")
    fv(["seed-rl", *args])
    return cli.resolve_config(fv, fields)


def test_the_flags():
    options = _resolve("--preset=atari_vtrace_fast", "--atari_engine=ale_vector", "--atari_engine_threads=2").env.options
    assert (options.atari_engine, options.atari_engine_threads, options.frame_stack) == ("ale_vector", 2, 4)
    assert _resolve("--env=atari").env.options.atari_engine == "gymnasium"  # the default
    with pytest.raises(ValueError, match="atari_engine must be one of gymnasium, ale_vector, got 'fast'"):
        _resolve("--env=atari", "--atari_engine=fast")


def test_the_flag_on_another_family_is_one_line_and_exit_code_2(tmp_path):
    logdir = tmp_path / "run"
    res = subprocess.run([sys.executable, "-m", "seed_rl", "train", "--env=classic", "--atari_engine=ale_vector",
                          f"--logdir={logdir}"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr[-2000:]
    assert res.stderr.strip() == (
        "seed-rl train: flag(s) --atari_engine do not apply to env family 'classic', which takes no options "
        "(--atari_engine is an option of atari)")
    assert not logdir.exists()
