"""The run's TensorBoard file holds plain scalars: any TensorBoard reader sees them, not only the scalar plugin;
the windows of consecutive episodes that the learning tests and the agent suite judge a run by."""

import math

import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from seed_rl.learner.summaries import Episode, SummaryWriter, first_window_reaching, rolling_windows


def _episode(frames: int, ret: float, eval_: bool = False) -> Episode:
    return Episode(env_frames=frames, episode_return=ret, raw_return=ret * 2, episode_frames=40, episode_steps=10,
                   env_id=1, wall_time=0.0, eval=eval_)


def test_scalars_and_episodes_read_back_with_event_accumulator(tmp_path):
    writer = SummaryWriter(str(tmp_path))
    writer.scalars({"learner/steps_per_sec": 12.5, "losses/total": -0.25, "skipped": math.nan, "none": None},
                   step=100)
    writer.scalars({"learner/steps_per_sec": 13.0, "losses/total": -0.5}, step=200)
    writer.episodes([_episode(150, 3.0), _episode(180, -1.0, eval_=True)])
    writer.close()
    acc = EventAccumulator(str(tmp_path))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"learner/steps_per_sec", "losses/total", "episode/return", "episode/raw_return", "episode/frames",
            "eval/return"} <= tags
    assert "skipped" not in tags and "none" not in tags  # NaN and None are not written
    assert [(e.step, e.value) for e in acc.Scalars("learner/steps_per_sec")] == [(100, 12.5), (200, 13.0)]
    assert [(e.step, e.value) for e in acc.Scalars("losses/total")] == [(100, -0.25), (200, -0.5)]
    assert [(e.step, e.value) for e in acc.Scalars("episode/return")] == [(150, 3.0)]
    assert [(e.step, e.value) for e in acc.Scalars("episode/raw_return")] == [(150, 6.0)]
    assert [(e.step, e.value) for e in acc.Scalars("eval/return")] == [(180, -1.0)]


def test_status_line_shows_budget_eta_elapsed_and_the_episodes_behind_the_mean():
    from seed_rl.learner.summaries import format_status

    line = format_status(250_000, 1000.0, 12.5, 0.9, 40, 2, 16, 7, window_episodes=7, elapsed_s=130.0,
                         budget_frames=1_000_000)
    assert "frames     250,000 ( 25%, ETA 12m30s)" in line  # 750,000 frames left at 1,000 frames/s
    assert "return(7)    12.50" in line and "episodes      7" in line
    assert line.endswith("| elapsed 2m10s")
    long_run = format_status(10, 0.0, float("nan"), 0.0, 0, 0, 16, 0, window_episodes=0, elapsed_s=7300.0,
                             budget_frames=100)
    assert "ETA ?" in long_run and "return(0) n/a" in long_run and long_run.endswith("elapsed 2h01m")
    assert "skipped" not in line and "refused" not in line  # a healthy run's line says nothing of them


def test_status_line_shows_skipped_updates_and_refused_rows_once_there_are_any():
    from seed_rl.learner.summaries import format_status

    line = format_status(10, 5.0, 1.0, 0.5, 3, 0, 16, 1, skipped_updates=1_234, refused_rows=0)
    assert line.endswith("| queue 0/16 | 1,234 skipped updates")
    # A full queue can hold up to a chunk more than its capacity: the line says "full", not 19/16.
    assert format_status(10, 5.0, 1.0, 0.5, 3, 19, 16, 1).endswith("| queue full (19 unrolls, capacity 16)")
    line = format_status(10, 5.0, 1.0, 0.5, 3, 0, 16, 1, skipped_updates=2, refused_rows=6, elapsed_s=1.0)
    assert "| 2 skipped updates | 6 refused rows | elapsed" in line


def test_rolling_windows_are_the_means_of_consecutive_episodes_at_their_last_episodes_frames():
    eps = [_episode(100 * (i + 1), float(r)) for i, r in enumerate([0, 0, 3, 6, 9, 0])]
    means, ends = rolling_windows(eps, window=3)
    assert means.tolist() == [1.0, 3.0, 6.0, 5.0] and ends.tolist() == [300, 400, 500, 600]
    assert first_window_reaching(means, ends, 3.0) == 400  # at or above: the first window that gets there
    assert first_window_reaching(means, ends, 6.5) is None
    means, ends = rolling_windows(eps[:2], window=3)  # fewer episodes than a window: no window
    assert len(means) == 0 and len(ends) == 0 and first_window_reaching(means, ends, 0.0) is None
    assert ends.dtype == np.int64


def test_the_seeds_curve_is_titled_like_the_learning_curve(tmp_path, monkeypatch):
    """seeds_curve.png says what the seeds train, as learning_curve.png does (`run_title`): from a seed's
    config.json, with the sweep's directory name; not the directory name alone."""
    import json
    import os

    import matplotlib.axes

    from seed_rl.learner.summaries import EpisodeLog, run_title, write_seed_curves

    titles = []
    monkeypatch.setattr(matplotlib.axes.Axes, "set_title", lambda self, title, *a, **k: titles.append(title))
    parent = tmp_path / "sweep"
    run_dirs = {}
    for seed in (1, 2):
        run_dir = parent / f"seed_{seed}"
        os.makedirs(run_dir)
        (run_dir / "config.json").write_text(json.dumps({"agent_name": "ppo", "env": {"family": "classic",
                                                                                      "name": "CartPole-v1"}}))
        log = EpisodeLog(str(run_dir))
        log.write([_episode(10 * (i + 1), float(i * seed)) for i in range(30)])
        log.close()
        run_dirs[f"seed {seed}"] = str(run_dir)
    assert write_seed_curves(str(parent), run_dirs) == str(parent / "seeds_curve.png")
    assert titles == ["ppo on classic:CartPole-v1 (sweep)"]
    assert run_title(str(parent)) == "sweep"  # the sweep's own directory has no config.json
