"""``benchmarks/atari_learning.py --seeds``: each seed's figures and the set's spread from made-up episodes, the resume
rule (a finished seed is skipped), and the set's report written into ``--out_dir`` only. Nothing trains; no
TensorFlow (the script reads episodes through it only when it reads a real run directory)."""

import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))  # the scripts import their sibling _common by name

import _common  # noqa: E402
import atari_learning  # noqa: E402


def _episodes(scores):
    """Made-up episodes: the i-th ends at (i + 1) x 1,000 env frames and (i + 1) / 100 training hours."""
    n = len(scores)
    return (np.arange(1, n + 1, dtype=np.int64) * 1000, np.arange(1, n + 1) / 100.0, np.array(scores, np.float64))


# Three seeds of a Pong-like game: 20 episodes at -21 and then 20 at 18 (A), 30 then 20 at 18 (B), 40 then 20 at 10
# (C, which never averages 18).
SEED_A = [-21.0] * 20 + [18.0] * 20
SEED_B = [-21.0] * 30 + [18.0] * 20
SEED_C = [-21.0] * 40 + [10.0] * 20
LEVELS = (0.0, 18.0, 20.0)


def test_one_seeds_figures_are_its_full_windows_and_the_first_window_at_each_level():
    figures = atari_learning.window_figures(*_episodes(SEED_A), levels=(-1.5, 0.0, 18.0, 20.0))
    assert figures["episodes"] == 40 and figures["env_frames"] == 40_000
    assert (figures["first_window_mean"], figures["last_window_mean"], figures["best_window_mean"]) == (-21.0, 18.0,
                                                                                                         18.0)
    assert figures["best_window_frames"] == 40_000  # the first window of 18s ends at the 40th episode
    # The window starting at episode k holds 20 - k scores of -21 and k of 18: its mean is (39k - 420) / 20.
    assert figures["levels"] == {
        "-1.5": {"frames": 30_000, "hours": pytest.approx(0.30)},  # k = 10 is exactly -1.5: reached, not k = 11
        "0": {"frames": 31_000, "hours": pytest.approx(0.31)},  # k = 11: 0.45
        "18": {"frames": 40_000, "hours": pytest.approx(0.40)},  # k = 20: all 18s (exactly 18.0, not 17.99...)
        "20": None}  # never


def test_a_seed_under_one_window_has_no_window_figures():
    figures = atari_learning.window_figures(*_episodes([5.0] * 19), levels=LEVELS)
    assert figures["episodes"] == 19 and figures["env_frames"] == 19_000
    assert figures["first_window_mean"] is figures["last_window_mean"] is figures["best_window_mean"] is None
    assert figures["levels"] == {"0": None, "18": None, "20": None}  # 19 episodes of 5 are not a window of 20
    empty = atari_learning.window_figures(*_episodes([]), levels=LEVELS)
    assert empty["episodes"] == 0 and empty["env_frames"] is None


def _seed(scores, hours):
    return dict(atari_learning.window_figures(*_episodes(scores), levels=LEVELS), training_hours=hours)


def test_across_seeds_gives_the_median_and_range_and_counts_a_seed_that_never_reached_a_level_as_never():
    across = atari_learning.across_seeds([_seed(SEED_A, 0.5), _seed(SEED_B, 0.6), _seed(SEED_C, 0.7)], LEVELS)
    assert across["episodes"] == {"median": 50.0, "min": 40.0, "max": 60.0, "seeds": 3}
    assert across["training_hours"] == {"median": 0.6, "min": 0.5, "max": 0.7, "seeds": 3}
    assert across["last_window_mean"] == {"median": 18.0, "min": 10.0, "max": 18.0, "seeds": 3}
    levels = across["levels"]
    # Level 0: A at episode 31, B at 41, C (windows of -21 and 10, (31j - 420) / 20 >= 0 at j = 14) at 54.
    assert levels["0"]["reached"] == 3 and levels["0"]["seeds"] == 3
    assert levels["0"]["frames"] == {"median": 41_000, "min": 31_000, "max": 54_000}
    assert levels["0"]["hours"] == pytest.approx({"median": 0.41, "min": 0.31, "max": 0.54})
    # Level 18: two of three seeds; the median is B's, the max is never (C).
    assert levels["18"]["reached"] == 2
    assert levels["18"]["frames"] == {"median": 50_000, "min": 40_000, "max": None}
    assert levels["20"] == {"reached": 0, "seeds": 3, "frames": {"median": None, "min": None, "max": None},
                            "hours": {"median": None, "min": None, "max": None}}


def test_a_median_that_falls_on_a_seed_that_never_reached_the_level_is_never():
    # Two seeds, one reaching 18: the median is the mean of 40,000 and never, so never; with both, their mean.
    one_of_two = atari_learning.across_seeds([_seed(SEED_A, 0.5), _seed(SEED_C, 0.7)], LEVELS)["levels"]["18"]
    assert one_of_two["reached"] == 1 and one_of_two["frames"] == {"median": None, "min": 40_000, "max": None}
    both = atari_learning.across_seeds([_seed(SEED_A, 0.5), _seed(SEED_B, 0.6)], LEVELS)["levels"]["18"]
    assert both["frames"] == {"median": 45_000, "min": 40_000, "max": 50_000}
    # A seed without episodes yet (a set still training) has no figures and has reached nothing.
    unstarted = dict(atari_learning.window_figures(*_episodes([]), levels=LEVELS), training_hours=0.0)
    across = atari_learning.across_seeds([_seed(SEED_A, 0.5), _seed(SEED_B, 0.6), unstarted], LEVELS)
    assert across["last_window_mean"]["seeds"] == 2 and across["levels"]["18"]["reached"] == 2
    assert across["levels"]["18"]["frames"]["median"] == 50_000 and across["levels"]["18"]["frames"]["max"] is None


def test_the_median_curve_is_on_the_grid_where_every_seed_has_data():
    grid = atari_learning.common_grid([(np.array([0.0, 10.0]), np.array([0.0, 10.0])),
                                       (np.array([5.0, 20.0]), np.array([0.0, 30.0])),
                                       (np.array([2.0, 12.0]), np.array([4.0, 4.0]))], points=6)
    assert grid["x"].tolist() == [5.0, 6.0, 7.0, 8.0, 9.0, 10.0]  # latest start to earliest end
    assert grid["min"].tolist() == [0.0, 2.0, 4.0, 4.0, 4.0, 4.0]
    assert grid["max"].tolist() == [5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
    assert grid["median"].tolist() == [4.0, 4.0, 4.0, 6.0, 8.0, 10.0]
    assert atari_learning.common_grid([(np.array([0.0, 1.0]), np.zeros(2)), (np.array([2.0, 3.0]), np.zeros(2))]) \
        is None  # no overlap


# --- the resume rule --------------------------------------------------------------------------------------------


def _trained(logdir: Path, hours: float, finished: dict | None = None) -> None:
    logdir.mkdir(parents=True)
    (logdir / atari_learning.SESSIONS_FILE).write_text(json.dumps([{"start": 0.0, "end": hours * 3600.0}]))
    if finished is not None:
        (logdir / atari_learning.FINISHED_FILE).write_text(json.dumps(finished))


def test_a_seed_is_finished_when_its_hours_or_its_frame_budget_are_spent_or_its_target_reached(tmp_path):
    reason = atari_learning.finished_reason
    assert reason(str(tmp_path / "new"), hours=1.0, total_frames=10**6) is None
    _trained(tmp_path / "hours", 0.99)  # less than a minute left: train() would not start
    assert "trained 0.99 h of the 1 h budget" in reason(str(tmp_path / "hours"), 1.0, 10**6)
    assert reason(str(tmp_path / "hours"), 2.0, 10**6) is None  # a larger budget trains on
    _trained(tmp_path / "frames", 0.2, {"env_frames": 1_000_320, "reason": "budget"})
    assert "budget of 1,000,000 env frames is spent" in reason(str(tmp_path / "frames"), 1.0, 10**6)
    assert reason(str(tmp_path / "frames"), 1.0, 2 * 10**6) is None  # seed-rl train resumes a raised budget
    _trained(tmp_path / "target", 0.2, {"env_frames": 5000, "reason": "target", "target_return": 450.0})
    assert "reached its target return 450" in reason(str(tmp_path / "target"), 1.0, 10**6)


def _args(tmp_path, seeds, **kw):
    import argparse

    return argparse.Namespace(**{"logdir": str(tmp_path / "Pong_vtrace"), "seeds": seeds, "hours": 1.0,
                                 "total_frames": 10**6, "env": "atari", "game": "Pong", "agent": "vtrace", "tag": "",
                                 "results_dir": str(tmp_path / "results"), **kw})


def test_train_seeds_skips_finished_seeds_and_trains_the_others_in_their_own_directories(tmp_path, monkeypatch):
    _trained(tmp_path / "Pong_vtrace_seed_1", 1.0)
    _trained(tmp_path / "Pong_vtrace_seed_2", 0.3, {"env_frames": 10**6, "reason": "budget"})
    calls = []

    def train(args, extra):
        calls.append((args.logdir, extra, args.hours, args.total_frames))
        return 0

    monkeypatch.setattr(atari_learning, "train", train)
    assert atari_learning.train_seeds(_args(tmp_path, [1, 2, 3]), ["--num_actors=3"]) == 0
    assert calls == [(str(tmp_path / "Pong_vtrace_seed_3"), ["--num_actors=3", "--seed=3"], 1.0, 10**6)]


def test_train_seeds_stops_when_interrupted_and_goes_on_after_a_failed_seed(tmp_path, monkeypatch):
    calls = []

    def train(args, extra, outcome):
        calls.append(args.logdir.rsplit("_", 1)[1])
        rc, args.interrupted = outcome[len(calls) - 1]
        return rc

    monkeypatch.setattr(atari_learning, "train", lambda a, e: train(a, e, [(1, False), (0, True)]))
    assert atari_learning.train_seeds(_args(tmp_path, [1, 2, 3]), []) == 1  # seed 1 failed; 2 interrupted
    assert calls == ["1", "2"]


# --- the set's report, into --out_dir ---------------------------------------------------------------------------


def test_the_sets_report_writes_its_files_into_out_dir_only(tmp_path, monkeypatch):
    runs = {"1": SEED_A, "2": SEED_B, "3": SEED_C}
    for seed in runs:
        _trained(tmp_path / f"Pong_vtrace_seed_{seed}", 0.7)  # each seed's budget spent
    # Seed 1's greedy evaluation at the end (the learner's file: the latest checkpoint played none); seed 2's is
    # unreadable, seed 3 has none.
    (tmp_path / "Pong_vtrace_seed_1" / atari_learning.FINAL_EVAL_FILE).write_text(json.dumps(
        {"episodes": 10, "greedy": True, "best": {"greedy_mean_return": 19.5, "returns": [19.5] * 10}}))
    (tmp_path / "Pong_vtrace_seed_2" / atari_learning.FINAL_EVAL_FILE).write_text("{not json")
    monkeypatch.setattr(atari_learning, "_read_run", lambda logdir: (atari_learning._read_sessions(logdir),
                                                                     *_episodes(runs[logdir[-1]])))
    plots = []
    monkeypatch.setattr(atari_learning, "_plot_seeds", lambda path, curves, *rest: plots.append((path, curves)))
    monkeypatch.setattr(_common, "RESULTS_DIR", _common.RESULTS_DIR)  # main points it at --out_dir; restored after
    out = tmp_path / "out"
    atari_learning.main(["--seeds=1,2,3", "--levels=18,0", "--report_only", "--hours=0.7",
                         f"--logdir={tmp_path / 'Pong_vtrace'}", f"--out_dir={out}"])
    assert sorted(os.listdir(out)) == ["RESULTS.md", "atari_Pong_vtrace_seed_1.csv", "atari_Pong_vtrace_seed_2.csv",
                                       "atari_Pong_vtrace_seed_3.csv", "atari_Pong_vtrace_seeds.json"]
    with open(out / "atari_Pong_vtrace_seeds.json") as f:
        data = json.load(f)["data"]
    assert data["seeds"] == [1, 2, 3] and data["levels"] == [0.0, 18.0] and data["complete"] is True
    assert [s["finished"] for s in data["per_seed"]] == ["trained 0.70 h of the 0.7 h budget"] * 3
    assert data["across_seeds"]["levels"]["18"]["frames"] == {"median": 50_000, "min": 40_000, "max": None}
    assert data["run_command"] == ("python benchmarks/atari_learning.py --game=Pong --agent=vtrace --hours=0.7 "
                                   "--seeds=1,2,3 --levels=0,18")
    assert [s["greedy_eval"] for s in data["per_seed"]] == [
        {"episodes": 10, "best": 19.5, "latest": None}, None, None]  # seed 1's final_eval.json (below)
    rows = (out / "atari_Pong_vtrace_seed_2.csv").read_text().splitlines()
    assert rows[0] == "env_frames,training_hours,score,mean_score_last_20" and len(rows) == 51
    assert rows[-1] == "50000,0.5000,18,18.000"
    section = (out / "RESULTS.md").read_text()
    assert "<!-- BEGIN atari_learning_Pong_vtrace_seeds -->" in section
    assert "| median [min, max] |" in section and "2/3 seeds: 50K [40K, never] (0.50 [0.40, never] h)" in section
    assert "(`final_eval.json`; mean return of the best checkpoint, then of the latest): seed 1 19.50 and - (10 " \
           "episodes)." in section
    assert "| 3 | 60,000 | 0.70 | 60 | -21.00 | 10.00 | 10.00 | 54K (0.54 h) | never |" in section
    (path, curves), = plots
    assert path == str(out / "atari_Pong_vtrace_seeds.png") and [c["seed"] for c in curves] == [1, 2, 3]
    assert curves[1]["means"][-1] == 18.0 and len(curves[1]["frames"]) == len(curves[1]["means"]) == 31

    # The README's table of longer runs quotes the set (median [min, max]) and keeps the one-seed Pong curve,
    # which went further (14.5M frames); a set that goes as far replaces it.
    import render_results
    real_load = render_results._load_json
    monkeypatch.setattr(render_results, "seeds_files", lambda: ["atari_Pong_vtrace_seeds.json"])
    monkeypatch.setattr(render_results, "_load_json", lambda name: (
        json.loads((out / name).read_text()) if name.endswith("_seeds.json") else real_load(name)))
    table = render_results.curves_table_short()
    assert ("| Atari Pong, V-trace `atari_vtrace_fast`, 3 seeds | 50K frames, 0.70 h per seed | "
            "18.00 [10.00, 18.00] (last window of 20; median [min, max]) | `atari_Pong_vtrace_seeds.json` |") in table
    assert "`atari_Pong_vtrace.csv`" in table and "`atari_Breakout_r2d2.csv`" in table
    data = json.loads((out / "atari_Pong_vtrace_seeds.json").read_text())
    data["data"]["across_seeds"]["env_frames"]["median"] = 15_000_000
    monkeypatch.setattr(render_results, "_load_json", lambda name: data if name.endswith("_seeds.json")
                        else real_load(name))
    table = render_results.curves_table_short()
    assert "`atari_Pong_vtrace.csv`" not in table and "`atari_Pong_vtrace_seeds.json`" in table


def test_a_finished_seed_whose_run_directory_is_gone_is_reported_and_skipped_from_its_record(tmp_path, monkeypatch):
    """A machine that keeps the repository and loses ``runs/``: a seed that the committed results file records as
    finished, with its CSV, is reported from them (the same figures, marked ``recorded``) and not trained again;
    a record for another budget is not used, and a seed with a run directory is read from it."""
    runs = {"1": SEED_A, "2": SEED_B, "3": SEED_C}
    for seed in runs:
        _trained(tmp_path / f"Pong_vtrace_seed_{seed}", 0.7)

    def read_run(logdir):
        if not os.path.isdir(logdir):
            return [], *_episodes([])
        return atari_learning._read_sessions(logdir), *_episodes(runs[logdir[-1]])

    monkeypatch.setattr(atari_learning, "_read_run", read_run)
    monkeypatch.setattr(atari_learning, "_plot_seeds", lambda *a: None)
    monkeypatch.setattr(atari_learning, "_config_text", lambda logdir: f"config of {logdir[-1]}"
                        if os.path.isdir(logdir) else "")
    monkeypatch.setattr(_common, "RESULTS_DIR", _common.RESULTS_DIR)
    out = tmp_path / "out"
    argv = ["--seeds=1,2,3", "--report_only", "--hours=0.7", "--total_frames=1000000",
            f"--logdir={tmp_path / 'Pong_vtrace'}", f"--out_dir={out}"]
    atari_learning.main(argv)
    first = json.loads((out / "atari_Pong_vtrace_seeds.json").read_text())["data"]
    shutil.rmtree(tmp_path / "Pong_vtrace_seed_1")  # seed 1, whose config line the file holds, and seed 2: gone
    shutil.rmtree(tmp_path / "Pong_vtrace_seed_2")
    atari_learning.main(argv)
    again = json.loads((out / "atari_Pong_vtrace_seeds.json").read_text())["data"]
    assert [s.get("recorded", {}).get("config") for s in again["per_seed"]] == ["config of 1", None, None]
    assert again["config"] == "config of 1" and again["config_seed"] == 1 and again["complete"] is True
    for before, after in zip(first["per_seed"], again["per_seed"]):
        after.pop("recorded", None)
        assert after == before
    assert again["across_seeds"] == first["across_seeds"]
    section = (out / "RESULTS.md").read_text()
    assert "Seed 1 is reported from the results file of" in section and "Seed 2 is reported" in section
    assert "Seed 3 is reported" not in section

    calls = []
    monkeypatch.setattr(atari_learning, "train", lambda args, extra: calls.append(args.logdir) or 0)
    args = _args(tmp_path, [1, 2, 3], hours=0.7, results_dir=str(out))
    assert atari_learning.train_seeds(args, []) == 0
    assert calls == []  # 1 and 2 recorded as finished, 3 finished in its run directory
    args.hours = 0.8  # another budget: the record does not count
    assert atari_learning.train_seeds(args, []) == 0
    assert calls == [str(tmp_path / f"Pong_vtrace_seed_{s}") for s in (1, 2, 3)]
    atari_learning.main([a.replace("0.7", "0.8") for a in argv])
    other = json.loads((out / "atari_Pong_vtrace_seeds.json").read_text())["data"]
    assert [s["episodes"] for s in other["per_seed"]] == [0, 0, 60] and other["complete"] is False


def test_seeds_flags_are_checked():
    with pytest.raises(SystemExit):
        atari_learning.main(["--seeds=1,1", "--report_only"])
    with pytest.raises(SystemExit):
        atari_learning.main(["--seeds=1,x", "--report_only"])
    with pytest.raises(SystemExit):
        atari_learning.main(["--seeds=1,2", "--report_only", "--", "--seed=4"])
    with pytest.raises(SystemExit):
        atari_learning.main(["--levels=1", "--report_only"])  # levels belong to a set of seeds


def test_the_ppo_probes_results_were_made_with_what_the_atari_ppo_fast_preset_now_holds(tmp_path):
    """The preset is what the committed PPO probe on Pong (``--tag=lay``) trained: each seed's recorded train
    command, resolved today, is the preset's config but for the run's own seed, budget and paths (which catches a
    change of the fields those commands name); and the config line its results file recorded from the run's own
    config.json (the layout, the optimiser and the PPO loss's settings) is the one the preset's config gives
    (which catches a change of any field the line shows)."""
    import dataclasses
    import shlex

    from seed_rl import cli
    from seed_rl.config import to_dict
    from seed_rl.configs import get_preset

    recorded = json.loads((BENCHMARKS / "results" / "atari_Pong_ppo_lay_seeds.json").read_text())["data"]
    preset = get_preset("atari_ppo_fast")
    expected = to_dict(preset)
    for per_seed in recorded["per_seed"]:
        for train_command in per_seed["train_commands"]:
            command = shlex.split(train_command)
            assert command[:2] == ["seed_rl", "train"] and "--preset=atari_ppo_fast" in command
            fv, fields = cli._make_flags("train")
            fv(["seed-rl", *command[2:]])
            probe = to_dict(cli.resolve_config(fv, fields))
            for config in (probe, expected):  # the run's own: its seed, budget, run directory and paths
                for section, key in (("run", "seed"), ("env", "seed"), ("run", "total_environment_frames")):
                    config[section].pop(key, None)
                config["run"]["tracking"].pop("logdir", None)
            assert probe == expected

    config = dataclasses.replace(preset, run=dataclasses.replace(preset.run, seed=recorded["config_seed"]))
    (tmp_path / "config.json").write_text(config.to_json())
    # The on-policy family's initializer field is younger than these runs (commit b715e5b); its default, keras,
    # is what they ran with, and their config.json has no such key, so their line does not show it.
    line = atari_learning._config_text(str(tmp_path))
    assert "initializer=keras, " in line
    assert line.replace("initializer=keras, ", "") == recorded["config"]
