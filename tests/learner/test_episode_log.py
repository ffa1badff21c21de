"""The episode log behind episodes.csv and the learner's early stop (--target_return)."""

import math

from seed_rl.learner.summaries import Episode, EpisodeLog, read_episodes


def _episodes(returns, eval_=False, start=0):
    return [Episode(start + 100 * i, float(r), float(r), 100, 25, 0, 0.0, eval_) for i, r in enumerate(returns)]


def test_the_window_is_the_last_20_episodes_now_not_the_peak_of_every_window_seen(tmp_path):
    # 19 episodes of 0, three of 7,000, then 20 of 0, drained at once: a sliding window over the batch peaked at
    # 1,050 after the 22nd episode, but the last 20 episodes average 0, and 0 is what the target and the best
    # checkpoint read (the learner checks as episodes arrive, so a window that counts is one it saw).
    log = EpisodeLog(str(tmp_path))
    assert log.window_return() == -math.inf
    log.write(_episodes([0] * 19 + [7000] * 3 + [0] * 20))
    assert log.mean_recent_return() == 0.0 and log.window_return() == 0.0
    assert log.window_end_frames() == 100 * 41  # the frames when the window's last episode ended
    assert log.window_return(eval=True) == -math.inf  # evaluation episodes are tracked apart
    log.write(_episodes([500] * 20, eval_=True))
    assert log.window_return(eval=True) == 500.0
    log.write(_episodes([7000] * 20))
    assert log.window_return() == 7000.0
    log.close()


def test_the_log_appends_and_a_resumed_log_starts_from_the_last_window(tmp_path):
    log = EpisodeLog(str(tmp_path))
    log.write(_episodes(range(30)))
    log.close()
    resumed = EpisodeLog(str(tmp_path))
    assert resumed.mean_recent_return() == sum(range(10, 30)) / 20
    assert resumed.window_return() == sum(range(10, 30)) / 20 and resumed.window_end_frames() == 2900
    resumed.write(_episodes([1.0], start=3000))
    resumed.close()
    rows = read_episodes(resumed.path)
    assert len(rows) == 31 and rows[-1].env_frames == 3000 and rows[0].episode_return == 0.0


def test_episodes_whose_return_is_not_finite_stay_out_of_the_windows(tmp_path):
    """One actor's extreme rewards make its episode's return inf: it must not decide the mean, the window or the
    target (issue 31); the row stays in episodes.csv."""
    from seed_rl.learner.summaries import Episode, EpisodeLog, read_episodes

    log = EpisodeLog(str(tmp_path), window=2)
    log.write([Episode(10, 1.0, 1.0, 5, 5, 0, 0.0, False), Episode(20, float("inf"), float("inf"), 5, 5, 1, 0.0, False),
               Episode(30, 3.0, 3.0, 5, 5, 0, 0.0, False)])
    log.close()
    assert log.mean_recent_return() == 2.0 and log.window_return() == 2.0
    assert log.total == 3 and log.non_finite == 1
    assert [e.episode_return for e in read_episodes(str(tmp_path / "episodes.csv"))] == [1.0, float("inf"), 3.0]


def test_the_closing_line_says_no_episode_ended_rather_than_a_mean_of_none(tmp_path):
    """A run shorter than one episode (MountainCarContinuous at a few thousand frames) closed with "mean return of
    the last 0 episodes: nan"; it says that no episode ended, and once one has, the mean of what it has."""
    import time
    from types import SimpleNamespace

    from seed_rl.learner.learner import Learner

    log = EpisodeLog(str(tmp_path))
    learner = SimpleNamespace(_start_time=time.time(), _report_eval=False, episode_log=log, env_frames=3736,
                              best=SimpleNamespace(record=None))
    line = Learner._summary_line(learner, True)
    assert line.startswith("finished after 3,736 env frames") and line.endswith("; no episodes ended"), line
    assert "nan" not in line
    log.write(_episodes([1, 3]))
    assert Learner._summary_line(learner, False).endswith("; mean return of the last 2 episodes: 2.0")
    log.close()
