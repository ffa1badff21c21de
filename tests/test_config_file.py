"""``seed-rl train --config=FILE``: a JSON or YAML file as the starting point (a run's own config.json, or a partial
file), the preset under it and the flags over it; bad files are refused in one line."""

from __future__ import annotations

import json

import pytest

from seed_rl import cli
from seed_rl.config import replace, replace_flat
from seed_rl.configs import get_preset


def _resolve(*args: str):
    fv, fields = cli._make_flags("train")
    fv(["seed-rl", *args])
    return cli.resolve_config(fv, fields)


def test_a_runs_own_config_json_reproduces_its_config(tmp_path):
    original = get_preset("atari_vtrace_fast")
    original = replace(original, run=replace_flat(original.run, logdir="/somewhere/else", batch_size=6),
                       agent=replace_flat(original.agent, learning_rate=1e-3))
    path = tmp_path / "config.json"
    path.write_text(original.to_json())
    config = _resolve(f"--config={path}", "--logdir=/tmp/new")
    assert config.agent == original.agent and config.env == original.env
    assert config.run == replace_flat(original.run, logdir="/tmp/new")  # the file's logdir is not taken


def test_a_partial_file_applies_over_the_preset_and_flags_over_the_file(tmp_path):
    path = tmp_path / "tweak.json"
    path.write_text(json.dumps({"preset": "atari_vtrace_fast", "agent": {"learning_rate": 0.001, "entropy_cost": 0.02},
                                "run": {"batch_size": 8}, "env": {"name": "Breakout", "options": {"frame_stack": 2}}}))
    config = _resolve(f"--config={path}", "--entropy_cost=0.005")
    preset = get_preset("atari_vtrace_fast")
    assert config.agent == replace_flat(preset.agent, learning_rate=0.001, entropy_cost=0.005)
    assert config.run.batch_size == 8 and config.run.unroll_length == preset.run.unroll_length
    assert config.env.name == "Breakout" and config.env.options.frame_stack == 2
    assert config.env.options.full_action_space == preset.env.options.full_action_space


def test_yaml_files_work_too(tmp_path):
    pytest.importorskip("yaml", reason="PyYAML is a dev dependency; YAML config files need it")
    path = tmp_path / "tweak.yaml"
    path.write_text("agent_name: r2d2\nenv:\n  family: classic\nagent:\n  learning_rate: 0.0005\n  mlp_sizes: [32]\n")
    config = _resolve(f"--config={path}")
    assert config.agent_name == "r2d2"
    assert config.agent.optimizer.learning_rate == 0.0005 and config.agent.mlp_sizes == (32,)


@pytest.mark.parametrize("content, message", [
    ("{not json", "is not valid JSON"),
    ('["a list"]', "must hold a mapping"),
    ('{"agents": {}}', "unknown key(s) ['agents']"),
    ('{"run": {"batch_sise": 3}}', "unknown run key(s): batch_sise (did you mean batch_size"),
    ('{"agent": {"burn_in": 3}}', "agent.burn_in of --config does not apply to the vtrace agent: burn_in is a "
                                  "field of r2d2, not of vtrace"),
    ('{"agent_name": "r2d2", "preset": "classic_vtrace"}', "names agent 'r2d2' but preset classic_vtrace"),
])
def test_bad_files_are_refused_in_one_line(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ValueError) as error:
        _resolve(f"--config={path}")
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_missing_file_through_the_command(tmp_path, capsys):
    assert cli.main(["seed-rl", "train", f"--config={tmp_path}/nope.json"]) == 2
    assert "--config: cannot read" in capsys.readouterr().err
