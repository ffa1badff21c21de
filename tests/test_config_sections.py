"""RunConfig's sections (transport, devices, tracking) and the agents' embedded OptimizerConfig: the flags stay flat,
each naming one field (`flat_fields`), and a config.json written before the sections loads into them.

The fixtures are config.json files written by seed_rl at commit 2dba86c, the last with the flat layout: a run's
fields all in ``run``, an agent's optimizer fields among its own (``"optimizer": "rmsprop"`` naming the kind)."""

from __future__ import annotations

import dataclasses
import json
import pathlib

import pytest

from seed_rl import agents as agents_lib
from seed_rl.config import (
    ActorConfig,
    Config,
    OptimizerConfig,
    RunConfig,
    field,
    flat_fields,
    flat_values,
    help_of,
    replace,
    replace_flat,
)
from seed_rl.configs import get_preset
from seed_rl.learner.resume import config_changes

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
OLD_R2D2 = (FIXTURES / "config_2dba86c_classic_r2d2.json").read_text()
OLD_VTRACE = (FIXTURES / "config_2dba86c_atari_vtrace.json").read_text()


def _old_r2d2_as_written_today() -> Config:
    """What the fixture's run is in today's layout: classic_r2d2 with the fixture's changes."""
    preset = get_preset("classic_r2d2")
    return replace(preset, run=replace_flat(
        preset.run, logdir="runs/classic_CartPole-v1_r2d2", auth_token="<redacted>", strategy="mirrored",
        virtual_cpu_devices=2, wandb_project="seed-rl", stream_idle_timeout_s=60.0))


def test_an_old_flat_config_json_loads_into_the_sections():
    config = Config.from_json(OLD_R2D2, agents_lib.config_class("r2d2"))
    assert config == _old_r2d2_as_written_today()
    run = config.run
    assert (run.tracking.logdir, run.transport.auth_token, run.devices.strategy) == (
        "runs/classic_CartPole-v1_r2d2", "<redacted>", "mirrored")
    assert (run.devices.virtual_cpu_devices, run.tracking.wandb_project, run.transport.stream_idle_timeout_s) == (
        2, "seed-rl", 60.0)
    assert run.num_actors == 2 and run.tracking.summary_period_secs == 5.0
    # R2D2's config had learning_rate, adam_epsilon and clip_norm; the rest is what make_optimizer assumed then.
    assert config.agent.optimizer == OptimizerConfig(kind="adam", learning_rate=1e-3, lr_schedule="constant",
                                                     adam_epsilon=1e-3, clip_norm=40.0)
    vtrace = Config.from_json(OLD_VTRACE, agents_lib.config_class("vtrace"))
    preset = get_preset("atari_vtrace")
    assert vtrace.agent == preset.agent and vtrace.run == replace_flat(preset.run, logdir="runs/atari_Pong_vtrace")
    assert vtrace.agent.optimizer.kind == "rmsprop" and vtrace.agent.optimizer.rms_epsilon == 0.1


def test_an_old_config_json_resumes_with_no_change_and_feeds_the_command_line(tmp_path):
    # The learner compares a resumed run's config.json with the config it runs: the layout is no change.
    assert config_changes(OLD_R2D2, _old_r2d2_as_written_today().to_json()) == []
    changed = replace_flat(_old_r2d2_as_written_today().run, strategy="auto")
    assert [str(c) for c in config_changes(OLD_R2D2, replace(_old_r2d2_as_written_today(), run=changed).to_json())] \
        == ['run.strategy: "mirrored" -> "auto"']
    # --config=<an old run's config.json> (its logdir, address and token are not taken).
    from seed_rl import cli

    path = tmp_path / "config.json"
    path.write_text(OLD_VTRACE)
    fv, fields = cli._make_flags("train")
    fv(["seed-rl", f"--config={path}", "--logdir=/tmp/new"])
    config = cli.resolve_config(fv, fields)
    assert config.agent == get_preset("atari_vtrace").agent
    assert config.run == replace_flat(get_preset("atari_vtrace").run, logdir="/tmp/new")
    # An actor reading a whole config (config.json) finds its loop setting in either layout.
    assert ActorConfig.from_json(OLD_R2D2).actor_env_groups == 2


def test_the_new_layout_nests_by_concern_and_round_trips():
    config = _old_r2d2_as_written_today()
    written = json.loads(config.to_json())
    assert written["run"]["transport"]["auth_token"] == "<redacted>" and written["run"]["tracking"]["logdir"]
    assert written["run"]["num_actors"] == 2 and "logdir" not in written["run"]
    assert written["agent"]["optimizer"]["kind"] == "adam" and "learning_rate" not in written["agent"]
    assert Config.from_json(config.to_json(), type(config.agent)) == config


def test_every_flag_of_the_flat_layout_is_still_one_field():
    old = json.loads(OLD_R2D2)
    # Every flag of the old layout is still one field; the fields added since name themselves here.
    assert set(flat_fields(RunConfig)) - set(old["run"]) == {"target_eval_episodes", "video_period_secs",
                                                             "stagger_unrolls"}
    assert set(old["run"]) <= set(flat_fields(RunConfig))
    for text, agent in ((OLD_R2D2, "r2d2"), (OLD_VTRACE, "vtrace")):
        assert set(json.loads(text)["agent"]) <= set(flat_fields(agents_lib.config_class(agent)))
    assert flat_fields(RunConfig)["logdir"].path == ("tracking", "logdir")
    assert flat_fields(agents_lib.config_class("ppo"))["optimizer"].path == ("optimizer", "kind")


def test_replace_flat_sets_each_flag_in_its_section_and_refuses_unknown_names():
    run = replace_flat(RunConfig(), logdir="/x", num_actors=3, precision="bfloat16", local_stream=False)
    assert (run.tracking.logdir, run.num_actors, run.devices.precision, run.transport.local_stream) == (
        "/x", 3, "bfloat16", False)
    assert flat_values(run)["precision"] == "bfloat16"
    agent = replace_flat(agents_lib.config_class("vtrace")(), optimizer="adam", learning_rate=0.01, lambda_=0.9)
    assert (agent.optimizer.kind, agent.optimizer.learning_rate, agent.lambda_) == ("adam", 0.01, 0.9)
    with pytest.raises(ValueError, match=r"unknown RunConfig field\(s\): \['batch_sise'\]"):
        replace_flat(RunConfig(), batch_sise=3)
    with pytest.raises(ValueError, match="strategy must be one of"):
        replace_flat(RunConfig(), strategy="horovod")  # each section checks its own fields


def test_a_shared_field_has_the_help_of_the_agent_that_sets_it():
    # The agent's own default beside its source: a preset's value (--help shows it too) may differ.
    assert help_of(agents_lib.config_class("vtrace"), "learning_rate") == \
        "Initial learning rate (dmlab/vtrace_main.py: 0.00031867)."
    assert help_of(agents_lib.config_class("r2d2"), "learning_rate") == \
        "Initial learning rate (atari/r2d2_main.py: 0.00048)."
    assert help_of(agents_lib.config_class("ppo"), "learning_rate") == \
        "Initial learning rate (mujoco/ppo_main.py: 3e-4)."
    assert help_of(agents_lib.config_class("r2d2"), "rms_decay") == "RMSprop decay (rho)."  # no source: a default


def test_two_fields_that_would_take_one_flag_are_refused():
    @dataclasses.dataclass(frozen=True)
    class Clashing:
        optimizer: OptimizerConfig = field(OptimizerConfig(), "An optimizer.")
        learning_rate: float = field(0.1, "Another learning rate.")

    with pytest.raises(TypeError, match=r"two fields would take the flag\(s\) \['learning_rate'\]"):
        flat_fields(Clashing)
