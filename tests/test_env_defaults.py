"""Defaults that fit the env (``seed_rl/configs/defaults.py``): the network a run gets when nobody names one, from
the observation spec; who names it instead (``--network``, ``--config``, ``--preset``, a resumed run directory);
the line printed at start and the run's config.json saying the same. One test per rule: spec in, network and the
other defaults out."""

from __future__ import annotations

import dataclasses
import json
import pathlib

import pytest

from seed_rl import cli
from seed_rl.config import replace
from seed_rl.configs import PRESETS, get_preset, resolve
from seed_rl.configs.defaults import (
    DICT,
    IMAGE,
    RULES,
    SMALL_IMAGE,
    VECTOR,
    fit_network,
    observation_kind,
)
from seed_rl.types import ArraySpec

MINATAR_LIKE = ArraySpec((10, 10, 4), "uint8")  # MinAtar's shape; nothing here knows a MinAtar game
ATARI = ArraySpec((84, 84, 1), "uint8")
VECTOR_SPEC = ArraySpec((4,), "float32")


def _changed_fields(before, after) -> dict:
    return {f.name: getattr(after, f.name) for f in dataclasses.fields(before)
            if getattr(before, f.name) != getattr(after, f.name)}


@pytest.mark.parametrize("spec, kind", [
    (ArraySpec((10, 10, 4), "uint8"), SMALL_IMAGE),
    (ArraySpec((42, 42, 3), "uint8"), SMALL_IMAGE),  # a quarter of Atari's 84 x 84: still small
    (ArraySpec((42, 43, 3), "uint8"), IMAGE),
    (ArraySpec((84, 84, 1), "uint8"), IMAGE),
    (ArraySpec((72, 96, 4), "uint16"), IMAGE),  # Football's packed planes
    (ArraySpec((3, 3, 2), "float32"), SMALL_IMAGE),  # the smallest frame small_conv's 3x3 convolution takes
    (ArraySpec((2, 5, 3), "float32"), VECTOR),  # under 3 x 3: flattened
    (ArraySpec((10, 10), "uint8"), VECTOR),  # no channel axis: not [H, W, C]
    (ArraySpec((4,), "float32"), VECTOR),
    (ArraySpec((), "int32", num_values=16), VECTOR),  # a Discrete observation
    ({"pixels": ArraySpec((10, 10, 3), "uint8"), "speed": ArraySpec((1,), "float32")}, DICT),
])
def test_what_the_rules_take_an_observation_for(spec, kind):
    assert observation_kind(spec) == kind


@pytest.mark.parametrize("preset", ["classic_ppo", "classic_awr", "classic_vmpo", "classic_r2d2"])
def test_a_small_image_gets_the_small_conv_torso_and_nothing_else_changes(preset):
    config = get_preset(preset)
    choice = fit_network(config, MINATAR_LIKE)
    field = "torso" if config.agent_name == "r2d2" else "network"
    assert (choice.field, choice.network) == (field, "small_conv")
    # Only the network: optimizer epsilon, clipping, initialisation, reward clipping stay the preset's.
    assert _changed_fields(config.agent, choice.config.agent) == {field: "small_conv"}
    assert choice.config.env == config.env and choice.config.run == config.run
    assert choice.line() == (f"{field}: small_conv (observation [10, 10, 4] uint8: a small image (at most 42 x 42 "
                             f"pixels); --{field} overrides)")


@pytest.mark.parametrize("preset", ["classic_vtrace", "test_vtrace"])
def test_vtrace_on_a_small_image_also_gets_the_small_image_settings(preset):
    """Batch 32 and learning rate 2e-3 with small_conv (measured on MinAtar, docs/environments.md); the entropy
    cost, the optimizer's kind, epsilon, schedule and clipping, the initialisation and reward clipping stay the
    preset's."""
    config = get_preset(preset)
    choice = fit_network(config, MINATAR_LIKE)
    assert choice.network == "small_conv"
    assert choice.config.run == replace(config.run, batch_size=32)
    agent = choice.config.agent
    assert _changed_fields(config.agent, agent).keys() == {"network", "optimizer"}
    assert agent.optimizer == replace(config.agent.optimizer, learning_rate=2e-3)
    assert choice.line() == ("network: small_conv (observation [10, 10, 4] uint8: a small image (at most 42 x 42 "
                             "pixels); --network overrides); with batch_size=32, learning_rate=0.002 (flags "
                             "override)")
    # A field the run named stays as named; the others still follow the spec.
    named = fit_network(config, MINATAR_LIKE, named={"learning_rate"})
    assert (named.config.run.batch_size, named.config.agent.optimizer.learning_rate) == (
        32, config.agent.optimizer.learning_rate)
    assert named.settings == ("batch_size=32",)
    # Settings go with the network the spec chooses: a vector, or a network named, leaves the preset's.
    assert fit_network(config, VECTOR_SPEC).config.run.batch_size == config.run.batch_size
    assert fit_network(config, MINATAR_LIKE, "--network").config == config


def test_every_rules_settings_are_fields_of_its_agent():
    from seed_rl.config import RunConfig, flat_fields

    for cls, rule in RULES:
        for kind, by_section in rule.settings.items():
            assert set(by_section) <= {"run", "agent"}, (cls, kind)
            assert set(by_section.get("run", {})) <= set(flat_fields(RunConfig)), (cls, kind)
            assert set(by_section.get("agent", {})) <= set(flat_fields(cls)), (cls, kind)
            assert kind in rule.choose, (cls, kind)


@pytest.mark.parametrize("preset, network", [
    ("classic_vtrace", "impala_deep"),  # atari_vtrace's
    ("classic_ppo", "impala_shallow"),  # atari_ppo's
    ("classic_vmpo", "impala_shallow"),
    ("classic_r2d2", "nature"),  # atari_r2d2's, the original's
])
def test_an_atari_sized_image_gets_the_agents_atari_network(preset, network):
    config = get_preset(preset)
    choice = fit_network(config, ATARI)
    assert choice.network == network
    field = choice.field
    assert _changed_fields(config.agent, choice.config.agent) == {field: network}
    atari = get_preset(f"atari_{'ppo' if config.agent_name in ('awr', 'vmpo') else config.agent_name}")
    assert getattr(atari.agent, field) == network  # the rule is the agent's own Atari preset's network


def test_a_vector_keeps_the_presets_vector_network():
    for preset in ("classic_vtrace", "classic_ppo", "classic_r2d2", "classic_sac", "mujoco_ppo", "test_vtrace"):
        config = get_preset(preset)
        spec = ArraySpec((17,), "float32")
        choice = fit_network(config, spec)
        assert choice.config == config, preset  # control_mlp, SAC's lstm: made for vectors, kept
        assert "the preset's, made for it" in choice.line()


def test_a_vector_under_an_image_preset_gets_an_mlp():
    # A family whose default preset was made for images, on a vector env: the MLP (R2D2's without a frame stack).
    vtrace = fit_network(get_preset("atari_vtrace"), VECTOR_SPEC)
    assert vtrace.network == "mlp" and _changed_fields(get_preset("atari_vtrace").agent, vtrace.config.agent) == {
        "network": "mlp"}
    r2d2 = fit_network(get_preset("atari_r2d2"), VECTOR_SPEC)
    assert (r2d2.network, r2d2.config.agent.stack_size) == ("mlp", 1)
    assert _changed_fields(get_preset("atari_r2d2").agent, r2d2.config.agent) == {"torso": "mlp", "stack_size": 1}


@pytest.mark.parametrize("preset, spec", [
    ("atari_vtrace", ATARI), ("atari_vtrace_fast", ATARI), ("atari_ppo", ATARI), ("atari_ppo_fast", ATARI),
    ("atari_r2d2", ATARI),
    ("atari_r2d2_fast", ATARI), ("football_vtrace", ArraySpec((72, 96, 4), "uint16")),
    ("dmlab_vtrace", ArraySpec((72, 96, 3), "uint8")), ("football_r2d2", ArraySpec((72, 96, 4), "uint16")),
])
def test_the_original_families_presets_keep_their_networks(preset, spec):
    """Atari, DMLab and Football: the preset's network is made for the family's frames and stays (no deviation
    from the original's defaults for its own env families)."""
    config = get_preset(preset)
    assert fit_network(config, spec).config == config


DICT_SPEC = {"speed": ArraySpec((1,), "float32"), "pixels": ArraySpec((10, 10, 3), "uint8")}


@pytest.mark.parametrize("preset", ["classic_vtrace", "classic_ppo", "classic_awr", "classic_vmpo", "classic_r2d2",
                                    "test_vtrace", "atari_vtrace", "atari_ppo", "atari_r2d2"])
def test_a_dict_gets_the_multi_input_network_and_nothing_else_changes(preset):
    """Every key encoded by its kind (tests/networks/test_multi_input.py); the line lists the keys in the order
    they are encoded (sorted), each with its kind. R2D2 drops its frame stack, as on a vector."""
    config = get_preset(preset)
    choice = fit_network(config, DICT_SPEC)
    field = "torso" if config.agent_name == "r2d2" else "network"
    assert (choice.field, choice.network) == (field, "multi_input")
    also = {"stack_size": 1} if config.agent_name == "r2d2" and config.agent.stack_size != 1 else {}
    assert _changed_fields(config.agent, choice.config.agent) == {field: "multi_input", **also}
    assert choice.config.env == config.env and choice.config.run == config.run
    assert choice.line() == (f"{field}: multi_input (observation {{pixels: [10, 10, 3] uint8 (small image), "
                             f"speed: [1] float32 (vector)}}: a dict of arrays; --{field} overrides)")


def test_a_dict_keeps_the_presets_network_when_it_takes_dicts():
    config = fit_network(get_preset("classic_vtrace"), DICT_SPEC).config
    choice = fit_network(config, DICT_SPEC)
    assert choice.config == config and "the preset's, made for it" in choice.line()


def test_an_agent_that_takes_no_dict_keeps_its_network_and_says_so():
    config = get_preset("classic_sac")
    choice = fit_network(config, DICT_SPEC)
    assert choice.config == config
    assert choice.line().endswith("a dict of arrays, which no network of the sac agent takes; the preset's)")


def test_an_agent_that_takes_no_images_keeps_its_network():
    config = get_preset("classic_sac")
    choice = fit_network(config, MINATAR_LIKE)
    assert choice.config == config and "which no network of the sac agent takes; the preset's" in choice.line()


def test_an_agent_without_a_rule_keeps_its_presets_network():
    @dataclasses.dataclass(frozen=True)
    class OtherConfig:
        network: str = "mine"

    config = replace(get_preset("classic_vtrace"), agent_name="other", agent=OtherConfig())
    choice = fit_network(config, MINATAR_LIKE)
    assert choice.config == config and choice.line().endswith("no rule for the other agent: the preset's)")


def test_every_rule_names_networks_its_agent_has():
    from seed_rl.agents.policy_gradient.config import NETWORKS as ON_POLICY_NETWORKS
    from seed_rl.agents.r2d2.config import TORSOS
    from seed_rl.agents.sac.config import NETWORKS as SAC_NETWORKS
    from seed_rl.agents.vtrace.config import NETWORKS as VTRACE_NETWORKS

    own = {"VTraceConfig": VTRACE_NETWORKS, "OnPolicyConfig": ON_POLICY_NETWORKS, "R2D2Config": TORSOS,
           "SACConfig": SAC_NETWORKS}
    for cls, rule in RULES:
        named = {n for networks in rule.takes.values() for n in networks} | set(rule.choose.values())
        assert named <= set(own[cls.__name__]), cls.__name__
        assert all(rule.choose[kind] in rule.takes[kind] for kind in rule.choose)


def test_no_preset_or_rule_names_a_minatar_game():
    """The defaults are judged on envs they were not tuned on: none may know a MinAtar game."""
    package = pathlib.Path(__file__).resolve().parents[1] / "seed_rl" / "configs"
    games = ("asterix", "freeway", "seaquest", "space_invaders", "space invaders", "spaceinvaders")
    for path in (package / "defaults.py", package / "presets.py"):
        text = path.read_text().lower()
        assert not [g for g in games if g in text], path
    # Breakout is also an Atari game, named by the Atari presets' docs; no classic or test preset names it.
    for name in PRESETS:
        config = get_preset(name)
        if config.env.family in ("classic", "test"):
            assert "breakout" not in json.dumps(json.loads(config.to_json())).lower(), name


# --- who names the network: the command line ---------------------------------------------------------------------

def _fit(*args: str, logdir: str = ""):
    fv, fields = cli._make_flags("train")
    fv(["seed-rl", *args, *([f"--logdir={logdir}"] if logdir else [])])
    return resolve.fit_to_env(fv, cli.resolve_config(fv, fields))


SMALL_CATCH = ("--env=test", "--env_name=catch:size=10")  # [10, 10, 1] uint8 frames


def test_the_spec_chooses_when_nobody_names_the_network():
    fitted = _fit(*SMALL_CATCH)
    assert fitted.config.agent.network == "small_conv"
    assert fitted.observation_spec == ArraySpec((10, 10, 1), "uint8", minimum=0, maximum=255)
    assert fitted.action_spec.num_values == 3  # read once here, handed to the learner
    assert fitted.network_line.startswith("network: small_conv (observation [10, 10, 1] uint8: a small image")


def test_the_spec_chooses_multi_input_for_a_dict_env():
    fitted = _fit("--env=test", "--env_name=catch:size=10,dict_obs=1")  # {ball: [10, 10, 1] uint8, paddle: [5]}
    assert fitted.config.agent.network == "multi_input"
    assert sorted(fitted.observation_spec) == ["ball", "paddle"]
    assert fitted.network_line == ("network: multi_input (observation {ball: [10, 10, 1] uint8 (small image), "
                                   "paddle: [5] float32 (vector)}: a dict of arrays; --network overrides)")


@pytest.mark.parametrize("flags, named_by, network", [
    (("--network=mlp",), "--network", "mlp"),
    (("--network=impala_shallow",), "--network", "impala_shallow"),
    (("--preset=test_vtrace",), "--preset=test_vtrace", "mlp"),  # a preset named is taken as it is
])
def test_network_overrides_the_spec(flags, named_by, network):
    fitted = _fit(*SMALL_CATCH, *flags)
    assert fitted.config.agent.network == network
    assert fitted.network_line == f"network: {network} (named by {named_by})"
    assert fitted.observation_spec is None  # not read: the learner reads it, as without the rule


def test_a_flag_or_config_key_keeps_its_value_over_the_small_image_settings(tmp_path):
    fitted = _fit(*SMALL_CATCH)
    assert (fitted.config.run.batch_size, fitted.config.agent.optimizer.learning_rate) == (32, 2e-3)
    fitted = _fit(*SMALL_CATCH, "--batch_size=8")
    assert (fitted.config.run.batch_size, fitted.config.agent.optimizer.learning_rate) == (8, 2e-3)
    assert fitted.network_line.endswith("; with learning_rate=0.002 (flags override)")
    config_file = tmp_path / "c.json"
    config_file.write_text(json.dumps({"run": {"batch_size": 4}, "agent": {"optimizer": {"learning_rate": 0.01}}}))
    fitted = _fit(*SMALL_CATCH, f"--config={config_file}")
    assert (fitted.config.run.batch_size, fitted.config.agent.optimizer.learning_rate) == (4, 0.01)
    assert fitted.network_line.endswith("pixels); --network overrides)")  # nothing left to set


def test_r2d2s_torso_flag_overrides_the_spec():
    fitted = _fit("--env=classic", "--agent=r2d2", "--torso=small_conv")
    assert fitted.config.agent.torso == "small_conv" and fitted.network_line == "torso: small_conv (named by --torso)"


def test_a_config_file_names_the_network_or_the_preset(tmp_path):
    agent_key = tmp_path / "network.json"
    agent_key.write_text(json.dumps({"env": {"family": "test", "name": "catch:size=10"},
                                     "agent": {"network": "mlp", "mlp_sizes": [32]}}))
    fitted = _fit(f"--config={agent_key}")
    assert fitted.config.agent.network == "mlp"
    assert fitted.network_line == f"network: mlp (named by --config={agent_key})"
    preset_key = tmp_path / "preset.json"
    preset_key.write_text(json.dumps({"preset": "test_vtrace", "env": {"name": "catch:size=10"}}))
    fitted = _fit(f"--config={preset_key}")
    assert fitted.config.agent.network == "mlp"
    assert fitted.network_line == f"network: mlp (named by the preset test_vtrace of --config={preset_key})"
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"agent": {"learning_rate": 0.01}}))
    assert _fit(*SMALL_CATCH, f"--config={other}").config.agent.network == "small_conv"  # names no network


def test_a_resumed_run_keeps_the_network_its_config_json_records(tmp_path):
    """A run directory made before the rule (or under another rule) resumes with its own network, not one that
    would not fit its checkpoint."""
    logdir = tmp_path / "run"
    logdir.mkdir()
    old = replace(get_preset("test_vtrace"), env=replace(get_preset("test_vtrace").env, name="catch:size=10"))
    (logdir / "config.json").write_text(old.to_json())
    fitted = _fit(*SMALL_CATCH, logdir=str(logdir))
    assert fitted.config.agent.network == "mlp"
    assert fitted.network_line == f"network: mlp (named by {logdir / 'config.json'}, the run this one resumes)"
    # Another env in that directory is not this run (the learner refuses it); the spec chooses.
    assert _fit("--env=test", "--env_name=catch:size=12", logdir=str(logdir)).config.agent.network == "small_conv"
    assert _fit(*SMALL_CATCH, "--network=impala_deep", logdir=str(logdir)).config.agent.network == "impala_deep"


def test_a_resumed_run_keeps_the_settings_its_config_json_records(tmp_path):
    """A run that took the small-image settings (or one from before them) resumes with what it trained with, not
    with today's rule; a flag given again still wins."""
    logdir = tmp_path / "run"
    logdir.mkdir()
    first = _fit(*SMALL_CATCH, "--learning_rate=3e-3", logdir=str(logdir))
    old = replace(first.config, run=replace(first.config.run, batch_size=24))  # as if the rule had said 24
    (logdir / "config.json").write_text(old.to_json())
    resumed = _fit(*SMALL_CATCH, logdir=str(logdir))
    assert (resumed.config.run.batch_size, resumed.config.agent.optimizer.learning_rate,
            resumed.config.agent.network) == (24, 3e-3, "small_conv")
    assert _fit(*SMALL_CATCH, "--batch_size=16", logdir=str(logdir)).config.run.batch_size == 16


def test_the_printed_line_and_config_json_agree(tmp_path, monkeypatch, capsys):
    """``seed-rl train`` prints the choice before building the learner, whose config.json records it; the env is
    created once (for the spec), not again by the learner."""
    import seed_rl.envs as envs_lib
    import seed_rl.launch.local as local

    created = []
    real_create = envs_lib.create_environment

    def counting_create(config, env_id):
        created.append(env_id)
        return real_create(config, env_id)

    monkeypatch.setattr(envs_lib, "create_environment", counting_create)
    monkeypatch.setattr(local.LocalRun, "run", lambda self: None)  # built (config.json written), not trained
    logdir = tmp_path / "run"
    assert cli.main(["seed-rl", "train", *SMALL_CATCH, f"--logdir={logdir}", "--num_actors=1"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("network: "))
    written = json.loads((logdir / "config.json").read_text())
    assert line.split(" ")[1] == written["agent"]["network"] == "small_conv"
    assert created == [0]


def test_help_shows_the_network_the_run_would_get():
    text = cli._help("train", [*SMALL_CATCH, "--help"])
    assert "\n  network: small_conv (observation [10, 10, 1] uint8: a small image" in text
    assert next(line for line in text.splitlines() if line.startswith("  --network:")).endswith(
        "[agent; value 'small_conv']")
    unknown = cli._help("train", ["--env=classic", "--env_name=no_such_module:Env-v0", "--help"])
    assert "\n  network: the preset's (the env's observation spec, which may change it, is unknown: cannot import" \
        in unknown


def test_an_env_whose_engine_is_missing_is_one_line(monkeypatch):
    import seed_rl.envs as envs_lib

    def no_engine(env_config):
        raise ImportError("the atari env family needs ale-py: pip install 'seed_rl[atari]'")

    monkeypatch.setattr(envs_lib, "env_specs", no_engine)
    with pytest.raises(ValueError, match=r"needs ale-py: pip install"):
        _fit(*SMALL_CATCH)


def test_choosing_the_network_loads_no_tensorflow():
    """The command line chooses (and prints) before the learner is built: the rules need no TensorFlow."""
    import subprocess
    import sys

    code = ("import sys; from seed_rl import cli; from seed_rl.configs import resolve; "
            "fv, fields = cli._make_flags('train'); fv(['x', '--env=test', '--env_name=catch:size=10']); "
            "print(resolve.fit_to_env(fv, cli.resolve_config(fv, fields)).network_line.split(' ')[1], "
            "'tensorflow' in sys.modules, 'keras' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["small_conv", "False", "False"]
