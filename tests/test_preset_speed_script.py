"""``benchmarks/preset_speed.py``: the order of each round, the config it measures, and the summary's ratios, on
made-up measurements. Nothing trains."""

import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

import preset_speed  # noqa: E402


def test_the_order_flips_every_round():
    presets = ["a", "b", "c"]
    assert [preset_speed.round_order(presets, i) for i in range(3)] == [["a", "b", "c"], ["c", "b", "a"],
                                                                        ["a", "b", "c"]]


def test_a_measurement_runs_the_preset_as_it_is_on_the_game_without_checkpoints_or_an_end():
    from seed_rl.configs import get_preset

    preset = get_preset("atari_ppo_fast")
    config = preset_speed.measured_config("atari_ppo_fast", "Breakout", "/tmp/x")
    assert config.env.name == "Breakout" and config.env.options == preset.env.options
    assert config.agent == preset.agent and config.agent_name == "ppo"
    run = config.run
    assert (run.num_actors, run.env_batch_size, run.unroll_length, run.batch_size) == (
        preset.run.num_actors, preset.run.env_batch_size, preset.run.unroll_length, preset.run.batch_size)
    assert run.tracking.logdir == "/tmp/x" and run.tracking.save_checkpoint_secs >= 1e9
    assert run.total_environment_frames >= 10**12 and run.final_eval_episodes == 0


def test_ratios_are_paired_by_round_and_the_summary_is_their_median():
    per_round = [{"base": {"fps": 1000.0}, "new": {"fps": 1100.0}},
                 {"base": {"fps": 500.0}, "new": {"fps": 450.0}},  # a slow round: both slow, the ratio holds
                 {"base": {"fps": 1000.0}, "new": {"fps": 1050.0}}]
    summary = preset_speed.summarize(["base", "new"], per_round)
    assert summary["median_fps"] == {"base": 1000.0, "new": 1050.0}
    assert summary["ratios"]["new"]["per_round"] == pytest.approx([1.1, 0.9, 1.05])
    assert summary["ratios"]["new"]["median"] == pytest.approx(1.05)
    assert summary["ratios"]["base"]["median"] == 1.0
    assert summary["passed"] == {"new": True}
    assert preset_speed.summarize(["base", "new"], per_round, goal=1.2)["passed"] == {"new": False}


def test_unknown_presets_or_one_preset_are_refused(capsys):
    for argv in (["--presets=atari_vtrace_fast,nope"], ["--presets=atari_vtrace_fast"], ["--rounds=0"]):
        with pytest.raises(SystemExit):
            preset_speed.main(argv)
        assert "--presets needs two or more known presets" in capsys.readouterr().err


def test_a_preset_of_another_env_family_is_refused(capsys):
    with pytest.raises(SystemExit):
        preset_speed.main(["--presets=atari_vtrace_fast,classic_vtrace"])
    assert "Atari presets only (--game names the game); not Atari: classic_vtrace" in capsys.readouterr().err


def test_an_entry_may_add_train_flags_to_its_preset():
    """A candidate is measured before it becomes a preset: ``PRESET --flag=value ...`` is what ``seed-rl train``
    resolves from those flags."""
    from seed_rl.configs import get_preset

    config = preset_speed.measured_config("atari_ppo_fast --batch_mode=shuffle --env_batch_size=4", "Pong", "/tmp/x")
    assert config.agent.batch_mode == "shuffle" and config.run.env_batch_size == 4
    preset = get_preset("atari_ppo_fast")
    assert (config.agent.epochs, config.run.num_actors) == (preset.agent.epochs, preset.run.num_actors)
    with pytest.raises(ValueError, match="no_such_flag"):
        preset_speed.entry_config("atari_ppo_fast --no_such_flag=1")


def test_an_entry_with_a_bad_flag_or_named_twice_is_refused(capsys):
    with pytest.raises(SystemExit):
        preset_speed.main(["--presets=atari_vtrace_fast,atari_ppo_fast --batch_mode=sideways"])
    assert "--presets: 'atari_ppo_fast --batch_mode=sideways'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        preset_speed.main(["--presets=atari_ppo_fast,atari_ppo_fast"])
    assert "named twice" in capsys.readouterr().err


def test_entries_with_flags_are_references_and_only_presets_are_judged():
    import render_results

    assert preset_speed.is_preset("atari_ppo_fast") and not preset_speed.is_preset("atari_ppo_fast --epochs=1")
    assert render_results._preset_speed_verdict({"a --x=1": False, "b": True}) == render_results._pass(True)
    assert render_results._preset_speed_verdict({"a --x=1": True, "b": False}) == render_results._pass(False)
    assert render_results._preset_speed_verdict({"a --x=1": True}).startswith("nothing judged")
    with pytest.raises(ValueError, match="may not name another preset"):
        preset_speed.entry_config("atari_ppo_fast --preset=atari_vtrace_fast")
