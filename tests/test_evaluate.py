"""``seed-rl eval`` (and ``seed_rl.evaluate``) for every registered agent, sampling and greedy, from a run
directory laid out as the learner writes it (config.json + a checkpoint of the agent's items)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from seed_rl import agents as agents_lib
from seed_rl import cli
from seed_rl.config import replace, replace_flat
from seed_rl.configs import get_preset
from seed_rl.envs import env_specs
from seed_rl.evaluate import available_checkpoints, evaluate, load_agent
from seed_rl.learner.checkpoints import RunCheckpoint


def _run_dir(tmp_path, agent_name: str, seed: int = 3) -> str:
    config = get_preset(f"classic_{agent_name}")
    logdir = str(tmp_path / agent_name)
    config = replace(config, run=replace_flat(config.run, logdir=logdir))
    os.makedirs(logdir)
    with open(os.path.join(logdir, "config.json"), "w") as f:
        f.write(config.to_json())
    obs_spec, act_spec = env_specs(config.env)
    keras.utils.set_random_seed(seed)
    agent = agents_lib.make_agent(agent_name, config.agent, obs_spec, act_spec, num_envs=4)
    RunCheckpoint(logdir, agent.checkpoint_items()).save(1)
    return logdir


@pytest.mark.parametrize("agent_name", agents_lib.agent_names())
def test_eval_restores_the_checkpoint_and_plays_greedily(agent_name, tmp_path):
    logdir = _run_dir(tmp_path, agent_name)
    config, agent = load_agent(logdir)
    assert config.agent_name == agent_name
    # The restored weights are the checkpoint's, not a fresh initialisation.
    keras.utils.set_random_seed(3)
    obs_spec, act_spec = env_specs(config.env)
    reference = agents_lib.make_agent(agent_name, config.agent, obs_spec, act_spec, num_envs=4)
    for a, b in zip(agent.policy_variables, reference.policy_variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    agent_cls = type(agent)
    calls = []
    original = agent_cls.greedy_action

    def counting(self, outputs):
        calls.append(1)
        return original(self, outputs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(agent_cls, "greedy_action", counting)
        greedy = evaluate(logdir, num_episodes=2, greedy=True)
        assert calls  # --greedy acts through the protocol's greedy action (traced into the compiled step)
        assert len(greedy) == 2 and all(np.isfinite(greedy))
        if config.env.name == "CartPole-v1":
            assert all(r >= 1 for r in greedy)  # at least one step per episode
        else:  # Pendulum-v1 (classic_sac): 200 steps, each costing at most about 16.3
            assert all(-16.3 * 200 <= r <= 0 for r in greedy)
        # Greedy play from the same start is deterministic: the same returns twice.
        assert evaluate(logdir, num_episodes=2, greedy=True) == greedy
        calls.clear()
        evaluate(logdir, num_episodes=1, greedy=False)
        assert not calls  # sampling (or the agent's eval policy) does not take the greedy action


@pytest.mark.parametrize("agent_name", agents_lib.agent_names())
def test_seed_rl_eval_greedy_command(agent_name, tmp_path, capsys):
    logdir = _run_dir(tmp_path, agent_name)
    assert cli.main(["seed-rl", "eval", f"--logdir={logdir}", "--num_episodes=1", "--greedy"]) == 0
    out = capsys.readouterr().out
    assert "seed-rl eval: 1 episode, mean return" in out


def _eval_subprocess(*args: str) -> "subprocess.CompletedProcess[str]":
    """``seed-rl eval`` in a fresh interpreter that reports whether TensorFlow got imported."""
    code = ("import sys; from seed_rl import cli; rc = cli.main(['seed-rl', 'eval', *sys.argv[1:]]); "
            "print('TF-IMPORTED' if 'tensorflow' in sys.modules else 'NO-TF'); sys.exit(rc)")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args, message", [
    (("--logdir=/nonexistent/run",), "/nonexistent/run does not exist"),
    (("--logdir=/tmp", "--num_episodes=0"), "--num_episodes must be >= 1, got 0"),
    (("--logdir=/tmp", "--checkpoint=best5"), "--checkpoint must be latest, best or a checkpoint number"),
    ((), "--logdir is required"),
])
def test_eval_refuses_bad_arguments_in_one_line_before_importing_tensorflow(args, message):
    result = _eval_subprocess(*args)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert "NO-TF" in result.stdout


def test_eval_of_a_directory_without_config_json(tmp_path, capsys):
    assert cli.main(["seed-rl", "eval", f"--logdir={tmp_path}"]) == 2
    assert "has no config.json" in capsys.readouterr().err


def test_eval_picks_a_checkpoint_by_number_and_names_the_ones_it_has(tmp_path, capsys):
    logdir = _run_dir(tmp_path, "vtrace")
    config, agent = load_agent(logdir)
    run_checkpoint = RunCheckpoint(logdir, agent.checkpoint_items())  # (restores the latest: before the change)
    for v in agent.policy_variables:
        v.assign(tf.zeros_like(v))  # checkpoint 7: a different (all-zero) network
    run_checkpoint.save(7)
    assert available_checkpoints(logdir) == [1, 7]
    _, latest = load_agent(logdir)
    assert all(not np.any(v.numpy()) for v in latest.policy_variables)
    _, first = load_agent(logdir, checkpoint=1)
    assert any(np.any(v.numpy()) for v in first.policy_variables)
    assert cli.main(["seed-rl", "eval", f"--logdir={logdir}", "--checkpoint=3"]) == 2
    err = capsys.readouterr().err
    assert "no checkpoint 3" in err and "it holds 1, 7" in err
    assert cli.main(["seed-rl", "eval", f"--logdir={logdir}", "--checkpoint=1", "--num_episodes=2"]) == 0
    out = capsys.readouterr().out
    assert "checkpoint 1, 2 episodes, sampling" in out
    assert "episode 1/2: return" in out and "episode 2/2: return" in out
    assert "seed-rl eval: 2 episodes, mean return" in out and ", std " in out


def test_eval_with_a_seed_plays_the_same_episodes(tmp_path):
    logdir = _run_dir(tmp_path, "vtrace")
    episodes: list = []
    first = evaluate(logdir, num_episodes=3, seed=5, on_episode=episodes.append)
    assert evaluate(logdir, num_episodes=3, seed=5) == first
    assert [e.index for e in episodes] == [0, 1, 2]
    assert [e.episode_return for e in episodes] == first
    assert all(e.steps == e.episode_return for e in episodes)  # CartPole: reward 1 per step
    with pytest.raises(ValueError, match="num_episodes must be >= 1"):
        evaluate(logdir, num_episodes=0)


def test_eval_plays_envs_side_by_side_and_says_when_it_cannot(tmp_path, capsys):
    """Envs side by side (the default for several episodes): the same seed plays the same episodes whatever the
    order in which the envs finish; a video takes one env, and the command line refuses another number."""
    logdir = _run_dir(tmp_path, "vtrace")
    episodes: list = []
    four = evaluate(logdir, num_episodes=6, seed=2, num_envs=4, greedy=True, on_episode=episodes.append)
    assert len(four) == 6 and evaluate(logdir, num_episodes=6, seed=2, num_envs=4, greedy=True) == four
    assert [e.index for e in episodes] == list(range(6)) and [e.episode_return for e in episodes] == four
    # Greedy and CartPole are deterministic: env i's first episode is the one a lone env with its id plays.
    for i in range(4):
        assert evaluate(logdir, num_episodes=1, seed=2, num_envs=1, env_id=10_000 + i, greedy=True) == [four[i]]
    with pytest.raises(ValueError, match="num_envs must be >= 1"):
        evaluate(logdir, num_episodes=2, num_envs=0)
    with pytest.raises(ValueError, match="videos are recorded from one env"):
        evaluate(logdir, num_episodes=2, num_envs=2, video_dir=str(tmp_path / "v"))
    assert cli.main(["seed-rl", "eval", f"--logdir={logdir}", "--num_envs=0"]) == 2
    assert "--num_envs must be >= 1" in capsys.readouterr().err
    assert cli.main(["seed-rl", "eval", f"--logdir={logdir}", "--num_episodes=3", "--num_envs=2"]) == 0
    assert "seed-rl eval: 3 episodes, mean return" in capsys.readouterr().out


def test_eval_records_every_episode_as_a_video_that_decodes(tmp_path, capsys):
    pytest.importorskip("moviepy", reason="videos need the video extra (in dev): pip install 'seed_rl[video]'")
    import cv2

    logdir = _run_dir(tmp_path, "vtrace")
    episodes: list = []
    video_dir = str(tmp_path / "videos")
    evaluate(logdir, num_episodes=2, seed=1, on_episode=episodes.append, video_dir=video_dir)
    names = sorted(os.listdir(video_dir))
    # Named by the checkpoint that played and the time: another evaluation never overwrites these.
    assert [re.sub(r"-\d{8}-\d{6}-", "-T-", n) for n in names] == [
        "eval-latest-ckpt-1-T-episode-0.mp4", "eval-latest-ckpt-1-T-episode-1.mp4"], names
    for name, episode in zip(names, episodes):
        capture = cv2.VideoCapture(os.path.join(video_dir, name))
        frames = 0
        while True:
            ok, frame = capture.read()
            if not ok:
                break
            frames += 1
            assert frame.ndim == 3 and frame.shape[2] == 3
        assert frames == episode.steps + 1  # the reset frame, then one per step
    assert cli.main(["seed-rl", "eval", f"--logdir={logdir}", "--num_episodes=1", "--video"]) == 0
    assert f"videos in {os.path.join(logdir, 'videos')}" in capsys.readouterr().out
    written = os.listdir(os.path.join(logdir, "videos"))
    assert len(written) == 1 and re.fullmatch(r"eval-latest-ckpt-\d+-\d{8}-\d{6}-episode-0\.mp4", written[0]), written


def test_eval_into_a_folder_of_videos_does_not_warn_of_overwriting(tmp_path):
    """The names never collide (`video_prefix`), so gymnasium's two-line "Overwriting existing videos" warning,
    which it gives for any existing folder, is left out; the control: gymnasium does warn for that folder."""
    pytest.importorskip("moviepy", reason="videos need the video extra (in dev): pip install 'seed_rl[video]'")
    import warnings

    from seed_rl.envs import create_environment
    from seed_rl.learner.play import record_video

    logdir = _run_dir(tmp_path, "vtrace")
    video_dir = str(tmp_path / "videos")
    os.makedirs(video_dir)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        evaluate(logdir, num_episodes=1, seed=1, video_dir=video_dir)
        assert len(os.listdir(video_dir)) == 1
        assert not [w for w in caught if "Overwriting existing videos" in str(w.message)], [str(w.message)
                                                                                           for w in caught]
        config, _ = load_agent(logdir)
        record_video(create_environment(config.env, 0), video_dir).close()
    assert [w for w in caught if "Overwriting existing videos" in str(w.message)]


def test_a_checkpoint_without_the_agents_weights_is_refused_in_one_line(tmp_path):
    """An evaluation must not play an untrained network and report its returns as the checkpoint's."""
    logdir = _run_dir(tmp_path, "vtrace")
    for name in os.listdir(os.path.join(logdir, "checkpoints")):
        os.remove(os.path.join(logdir, "checkpoints", name))
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(other=tf.Variable(1.0)),
                                         os.path.join(logdir, "checkpoints"), max_to_keep=1)
    manager.save(checkpoint_number=1)
    with pytest.raises(ValueError, match="does not hold every weight of the vtrace agent") as error:
        load_agent(logdir)
    assert "\n" not in str(error.value)
    assert cli.main(["seed-rl", "eval", f"--logdir={logdir}", "--num_episodes=1"]) != 0
