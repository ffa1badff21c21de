"""The run's closing greedy evaluation (``seed_rl.launch.local.final_evaluation``) beside the training windows."""

import json

import seed_rl.evaluate
from seed_rl.launch.local import FINAL_EVAL_FILE, FINAL_EVAL_MAX_SECONDS, final_evaluation
from seed_rl.learner.summaries import Episode, EpisodeLog


def test_a_run_without_a_finished_episode_says_so_instead_of_a_nan_window(tmp_path, monkeypatch, capsys):
    """Pendulum at 2,000 frames ends before its first 200-step episode: the latest checkpoint's line read
    "(training window, the last window: nan)" and final_eval.json held NaN, which is not JSON. The control: once
    an episode has ended, the window is printed and recorded."""
    monkeypatch.setattr(seed_rl.evaluate, "evaluate", lambda *args, **kwargs: [-1069.6])
    log = EpisodeLog(str(tmp_path))
    out = final_evaluation(str(tmp_path), 1, log)
    line = capsys.readouterr().out.strip()
    assert line == ("seed_rl: greedy evaluation, latest checkpoint: mean return -1069.6 over 1 episode "
                    "(no training episode ended)"), line
    assert out["latest"]["training_window_mean_return"] is None
    assert (out["envs"], out["max_seconds"]) == (1, FINAL_EVAL_MAX_SECONDS)  # how it played, for a reader of the file
    with open(tmp_path / FINAL_EVAL_FILE) as f:
        assert json.load(f, parse_constant=lambda name: (_ for _ in ()).throw(ValueError(name)))["latest"] \
            ["training_window_mean_return"] is None

    log.write([Episode(200, -900.0, -900.0, 200, 50, 0, 0.0, False)])
    final_evaluation(str(tmp_path), 1, log)
    assert capsys.readouterr().out.strip().endswith("(training window, the last window: -900.0)")
    log.close()


def test_the_closing_line_holds_the_greedy_evaluation():
    """The run's last line (after the greedy evaluation's lines): how it ended, the windows, then the greedy means."""
    from seed_rl.launch.local import closing_line

    summary = {"finished": True, "env_frames": 120_000, "elapsed_s": 90.0, "episodes": 812, "window_episodes": 20,
               "eval_window": False, "mean_return_last_20": 431.25,
               "best": {"mean_return": 480.0, "env_frames": 100_000},
               "final_eval": {"episodes": 10, "best": {"greedy_mean_return": 500.0, "returns": [500.0] * 10},
                              "latest": {"greedy_mean_return": 321.0, "returns": [321.0]}}}
    assert closing_line(summary) == (
        "finished after 120,000 env frames in 1.5 min (812 episodes); mean return of the last 20 episodes: 431.2; "
        "best window 480.0 at 100,000 frames; greedy evaluation: best checkpoint 500.0 over 10 episodes, latest "
        "checkpoint 321.0 over 1 episode")
    skipped = {**summary, "best": None, "window_episodes": 0, "eval_window": True, "final_eval": {"episodes": 10}}
    assert closing_line(skipped).endswith("(812 episodes); no evaluation episodes ended; no greedy evaluation")
