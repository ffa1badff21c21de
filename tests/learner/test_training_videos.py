"""``--video_period_secs``: while it trains, the learner records greedy episodes of its live weights to
``<logdir>/videos`` (issue 33: no video during training), without stopping training, and a run that cannot write
videos is refused in one line before its run directory is written."""

from __future__ import annotations

import io
import os
import re

import pytest

from seed_rl.config import replace, replace_flat
from seed_rl.configs import get_preset
from seed_rl.launch.local import LocalRun, on_free_loopback_port
from seed_rl.learner import play as play_lib


def _config(tmp_path, frames: int = 8_000, **run):
    config = get_preset("classic_vtrace")  # CartPole: rendered by pygame
    return on_free_loopback_port(replace(config, run=replace_flat(
        config.run, logdir=str(tmp_path / "run"), num_actors=1, env_batch_size=4, total_environment_frames=frames,
        target_return=0.0, final_eval_episodes=0, **run)))


def test_a_run_records_videos_of_its_live_weights_while_it_trains(tmp_path, capsys):
    pytest.importorskip("moviepy", reason="videos need the video extra (in dev): pip install 'seed_rl[video]'")
    import cv2

    run = LocalRun(_config(tmp_path, video_period_secs=2.0), actor_mode="thread", status_stream=io.StringIO())
    run.run()
    out = capsys.readouterr().out
    video_dir = os.path.join(run.config.run.tracking.logdir, "videos")
    names = sorted(os.listdir(video_dir))
    assert names and all(re.fullmatch(r"train-\d{12}frames-episode-0\.mp4", n) for n in names), names
    assert f"{len(names)} training videos in {video_dir}" in out, out
    frames_at = [int(n[6:18]) for n in names]
    assert frames_at == sorted(frames_at) and frames_at[-1] > 0, names  # recorded as training went on
    capture = cv2.VideoCapture(os.path.join(video_dir, names[0]))
    ok, frame = capture.read()
    assert ok and frame.ndim == 3 and frame.shape[2] == 3


def test_a_recording_that_fails_stops_the_videos_and_not_the_run(tmp_path, caplog, monkeypatch):
    pytest.importorskip("moviepy")

    def broken(self):
        raise RuntimeError("no display for you")

    monkeypatch.setattr(play_lib.PeriodicVideo, "record_one", broken)
    # A short run: the first recording is due half a second after the start and fails.
    run = LocalRun(_config(tmp_path, frames=3_000, video_period_secs=0.5), actor_mode="thread",
                   status_stream=io.StringIO())
    run.run()
    assert run.learner.finished
    assert "training videos stopped: recording one failed (RuntimeError: no display for you)" in caplog.text


def test_without_the_video_extra_the_run_is_refused_before_it_writes(tmp_path, monkeypatch):
    def missing():
        raise ImportError("videos need moviepy (and pygame for classic-control envs): pip install 'seed_rl[video]'")

    monkeypatch.setattr(play_lib, "check_video_support", missing)
    with pytest.raises(ValueError, match=r"--video_period_secs: videos need moviepy"):
        LocalRun(_config(tmp_path, video_period_secs=5.0), actor_mode="thread")
    assert not os.path.exists(tmp_path / "run")
