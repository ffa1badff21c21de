"""The run's closing greedy evaluation (``seed_rl.launch.local.final_evaluation``) beside the training windows."""

import json

import seed_rl.evaluate
from seed_rl.launch.local import FINAL_EVAL_FILE, final_evaluation
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
    with open(tmp_path / FINAL_EVAL_FILE) as f:
        assert json.load(f, parse_constant=lambda name: (_ for _ in ()).throw(ValueError(name)))["latest"] \
            ["training_window_mean_return"] is None

    log.write([Episode(200, -900.0, -900.0, 200, 50, 0, 0.0, False)])
    final_evaluation(str(tmp_path), 1, log)
    assert capsys.readouterr().out.strip().endswith("(training window, the last window: -900.0)")
    log.close()
