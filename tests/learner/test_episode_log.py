"""The episode log behind episodes.csv and the learner's early stop (--target_return)."""

import math

from seed_rl.learner.summaries import Episode, EpisodeLog, read_episodes


def _episodes(returns, eval_=False, start=0):
    return [Episode(start + 100 * i, float(r), float(r), 100, 25, 0, 0.0, eval_) for i, r in enumerate(returns)]


def test_a_crossing_inside_one_drained_batch_is_not_missed(tmp_path):
    # 19 episodes of 0, three of 7,000, then 20 of 0, all drained at once: the mean of 20 is 1,050 after the
    # 22nd episode and 0 at the end of the batch; the peak remembers the crossing.
    log = EpisodeLog(str(tmp_path))
    assert log.peak_window_return() == -math.inf
    log.write(_episodes([0] * 19 + [7000] * 3 + [0] * 20))
    assert log.mean_recent_return() == 0.0
    assert log.peak_window_return() == 3 * 7000 / 20
    assert log.peak_window_return(eval=True) == -math.inf  # evaluation episodes are tracked apart
    log.write(_episodes([500] * 20, eval_=True))
    assert log.peak_window_return(eval=True) == 500.0
    log.close()


def test_the_log_appends_and_a_resumed_log_starts_from_the_last_window(tmp_path):
    log = EpisodeLog(str(tmp_path))
    log.write(_episodes(range(30)))
    log.close()
    resumed = EpisodeLog(str(tmp_path))
    assert resumed.mean_recent_return() == sum(range(10, 30)) / 20
    assert resumed.peak_window_return() == sum(range(10, 30)) / 20
    resumed.write(_episodes([1.0], start=3000))
    resumed.close()
    rows = read_episodes(resumed.path)
    assert len(rows) == 31 and rows[-1].env_frames == 3000 and rows[0].episode_return == 0.0


def test_episodes_whose_return_is_not_finite_stay_out_of_the_windows(tmp_path):
    """One actor's extreme rewards make its episode's return inf: it must not decide the mean, the peak or the
    target (issue 31); the row stays in episodes.csv."""
    from seed_rl.learner.summaries import Episode, EpisodeLog, read_episodes

    log = EpisodeLog(str(tmp_path), window=2)
    log.write([Episode(10, 1.0, 1.0, 5, 5, 0, 0.0, False), Episode(20, float("inf"), float("inf"), 5, 5, 1, 0.0, False),
               Episode(30, 3.0, 3.0, 5, 5, 0, 0.0, False)])
    log.close()
    assert log.mean_recent_return() == 2.0 and log.peak_window_return() == 2.0
    assert log.total == 3 and log.non_finite == 1
    assert [e.episode_return for e in read_episodes(str(tmp_path / "episodes.csv"))] == [1.0, float("inf"), 3.0]
