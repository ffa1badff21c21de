"""Import rules (actors stay framework-free) and the command line's help."""

import subprocess
import sys

import pytest


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                          timeout=120).stdout.strip()


def test_importing_actors_transport_envs_does_not_import_tensorflow():
    out = _run("import sys, seed_rl, seed_rl.actors, seed_rl.transport, seed_rl.envs, seed_rl.config; "
               "print('tensorflow' in sys.modules, 'keras' in sys.modules)")
    assert out == "False False"


def test_seed_rl_lazy_attributes():
    out = _run("import sys, seed_rl; c = seed_rl.Config(); p = seed_rl.get_preset('atari_vtrace'); "
               "print(type(c).__name__, 'tensorflow' in sys.modules)")
    assert out == "Config False"


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "seed_rl", *args], capture_output=True, text=True, timeout=120)


def test_top_level_help_lists_commands():
    res = _cli("--help")
    assert res.returncode == 0
    for cmd in ("train", "learner", "actor", "eval"):
        assert cmd in res.stdout


def _line(out: str, flag: str) -> str:
    return next(line for line in out.splitlines() if line.strip().startswith(flag))


def test_train_help_lists_every_flag_with_the_value_the_command_would_use():
    res = _cli("train", "--help")
    assert res.returncode == 0
    for flag in ("--env:", "--game:", "--num_actors:", "--env_batch_size:", "--unroll_length:",
                 "--entropy_cost:", "--learning_rate:", "--logdir:", "--inference_batch_size:",
                 "--max_batch_wait_ms:", "--total_environment_frames:", "--num_action_repeats:"):
        assert flag in res.stdout, flag
    assert "values: preset classic_vtrace (vtrace on classic:CartPole-v1)" in res.stdout
    assert _line(res.stdout, "--learning_rate:").endswith("[agent; value 0.001]")  # classic_vtrace's, not 3.19e-4
    # Atari's options do not apply to CartPole, R2D2's fields not to V-trace: --help leaves them out and says so;
    # --helpfull shows them, marked.
    assert "--frame_stack:" not in res.stdout and "--burn_in:" not in res.stdout
    assert "flags of other agents and env families not shown; --helpfull shows every flag" in res.stdout
    full = _cli("train", "--helpfull")
    assert _line(full.stdout, "--frame_stack:").endswith("[env option of atari; not used by this agent or env family]")
    assert "not used by this agent" in _line(full.stdout, "--burn_in:")
    # Sections, in order; a flag sits in its section.
    headings = [line for line in res.stdout.splitlines() if line and not line.startswith((" ", "(", "usage", "values"))]
    assert headings == ["command:", "run:", "env:", "agent:", "transport:", "devices:", "tracking:"], headings
    section_of = {}
    for line in res.stdout.splitlines():
        if line in headings:
            current = line[:-1]
        elif line.startswith("  --"):
            section_of[line.split(":")[0].strip()] = current
    assert (section_of["--num_actors"], section_of["--env_name"], section_of["--learning_rate"],
            section_of["--server_address"], section_of["--strategy"], section_of["--logdir"], section_of["--preset"]) \
        == ("run", "env", "agent", "transport", "devices", "tracking", "command")
    env_line = _line(res.stdout, "--env:")
    for family in ("classic (any gymnasium id", "atari (", "test ("):
        assert family in env_line, env_line


def test_train_help_shows_the_chosen_preset_and_the_flags_given():
    res = _cli("train", "--preset=atari_vtrace_fast", "--learning_rate=0.01", "--help")
    assert res.returncode == 0
    assert "values: preset atari_vtrace_fast (vtrace on atari:Pong)" in res.stdout
    assert _line(res.stdout, "--learning_rate:").endswith("[agent; value 0.01]")
    assert _line(res.stdout, "--frame_stack:").endswith("[env option of atari; value 4]")
    for flag, value in (("--max_random_noops:", "30"), ("--sticky_actions:", "False"),
                        ("--max_episode_frames:", "108000")):
        assert _line(res.stdout, flag).endswith(f"[env option of atari; value {value}]"), flag
    bad = _cli("train", "--env=nope", "--help")
    assert bad.returncode == 0 and "do not resolve to a config: unknown env family 'nope'" in bad.stdout
    assert "default 0.00025" in _line(bad.stdout, "--entropy_cost:")  # then the fields' own defaults


def test_train_help_shows_the_chosen_agents_own_help_for_a_shared_field():
    """learning_rate is a field of every agent and one flag; its help is the chosen agent's, not V-trace's."""
    from seed_rl import agents as agents_lib
    from seed_rl.config import help_of

    for agent in ("ppo", "r2d2"):
        res = _cli("train", f"--agent={agent}", "--help")
        assert res.returncode == 0
        own = help_of(agents_lib.config_class(agent), "learning_rate")
        assert own != help_of(agents_lib.config_class("vtrace"), "learning_rate")
        assert _line(res.stdout, "--learning_rate:").strip().startswith(f"--learning_rate: {own} [agent; value "), agent


def test_actor_help():
    res = _cli("actor", "--help")
    assert res.returncode == 0
    assert "--task:" in res.stdout and "--server_address:" in res.stdout


def test_unknown_command_and_bad_flag_are_clear_errors():
    res = _cli("fly")
    assert res.returncode == 2 and "unknown command 'fly'" in res.stderr
    res = _cli("train", "--no_such_flag=1")
    assert res.returncode == 2 and "no_such_flag" in res.stderr


def test_unknown_env_family_is_a_clear_error(tmp_path):
    logdir = tmp_path / "run"
    res = _cli("train", "--env=nosuch", f"--logdir={logdir}")
    assert res.returncode == 2
    assert res.stderr.strip() == ("seed-rl train: unknown env family 'nosuch'; known families: classic, "
                                  "atari, mujoco, football, dmlab, test")
    assert not logdir.exists()


def test_train_on_an_engine_that_is_not_installed_is_a_clear_error(tmp_path):
    """A local run's actors are on this host: a missing deepmind_lab is one line before anything starts (the learner
    itself would not notice, since the dmlab family gives its specs without an env)."""
    logdir = tmp_path / "run"
    res = _cli("train", "--env=dmlab", "--env_name=rooms_watermaze", f"--logdir={logdir}")
    assert res.returncode == 2, res.stderr[-2000:]
    assert res.stderr.strip().splitlines()[-1].startswith(
        "seed-rl train: the dmlab env family needs DeepMind Lab's Python module deepmind_lab"), res.stderr[-2000:]
    assert "Dockerfile.dmlab" in res.stderr and not logdir.exists()


def _resolve(command, *args):
    from seed_rl import cli

    fv, fields = cli._make_flags(command)
    fv(["seed-rl", *args])
    return cli.resolve_config(fv, fields)


@pytest.mark.parametrize("command", ["train", "learner"])
def test_atari_option_flags_set_the_families_options(command):
    from seed_rl.envs.atari import AtariOptions

    config = _resolve(command, "--env=atari", "--max_random_noops=5", "--sticky_actions", "--max_episode_frames=400")
    assert config.env.options == AtariOptions(max_random_noops=5, sticky_actions=True, max_episode_frames=400)
    assert _resolve(command, "--env=atari").env.options == AtariOptions()  # the preset's, resolved
    assert _resolve(command, "--preset=atari_r2d2", "--nosticky_actions").env.options == AtariOptions()
    assert _resolve(command).env.options is None  # classic has no options


def test_an_env_option_for_a_family_without_it_is_a_clear_error(tmp_path):
    logdir = tmp_path / "run"
    res = _cli("train", "--env=classic", "--max_random_noops=5", "--sticky_actions", f"--logdir={logdir}")
    assert res.returncode == 2, res.stderr[-2000:]
    assert res.stderr.strip() == (
        "seed-rl train: flag(s) --max_random_noops, --sticky_actions do not apply to env family 'classic', which "
        "takes no options (--max_random_noops is an option of atari; --sticky_actions is an option of atari)")
    assert not logdir.exists()
    with pytest.raises(ValueError, match="max_random_noops must be >= 0"):
        _resolve("train", "--env=atari", "--max_random_noops=-1")


@pytest.mark.parametrize("command", ["train", "learner"])
def test_an_unknown_env_id_is_one_line_and_exit_code_2_before_any_run_directory(tmp_path, command):
    logdir = tmp_path / "run"
    res = _cli(command, "--env=classic", "--env_name=CartPol-v1", f"--logdir={logdir}", "--server_address=127.0.0.1:0")
    assert res.returncode == 2, res.stderr[-2000:]
    assert f"seed-rl {command}: unknown gymnasium id 'CartPol-v1'" in res.stderr
    assert "Traceback" not in res.stderr
    assert not logdir.exists()


def test_an_unknown_env_id_is_refused_before_tensorflow_is_imported(tmp_path):
    # The env is made first: a typo costs a second, not TensorFlow's import.
    code = ("import sys\nfrom seed_rl import cli\n"
            f"rc = cli.main(['seed-rl', 'train', '--env=classic', '--env_name=CartPol-v1', '--logdir={tmp_path}'])\n"
            "print(rc, 'tensorflow' in sys.modules)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.stdout.split() == ["2", "False"], (res.stdout, res.stderr[-2000:])


def test_a_replay_that_does_not_fit_is_refused_with_a_clear_message(tmp_path):
    # The original's Google Cloud preset needs about 85 GB of replay; this machine has far less.
    res = _cli("learner", "--preset=atari_r2d2_gcp", f"--logdir={tmp_path}", "--server_address=127.0.0.1:0")
    assert res.returncode == 2, res.stderr[-2000:]
    assert "replay" in res.stderr and "GiB" in res.stderr


def test_split_batch_modes_that_cannot_work_are_clear_errors(tmp_path):
    # Transitions that do not divide into the minibatches (the learner's check), and a recurrent network in a mode
    # that trains single transitions (the config's).
    res = _cli("learner", "--env=classic", "--env_name=CartPole-v1", "--agent=ppo", "--batch_mode=split",
               "--batch_size=3", "--unroll_length=5", "--minibatches=4", f"--logdir={tmp_path / 'a'}",
               "--server_address=127.0.0.1:0")
    assert res.returncode == 2, res.stderr[-2000:]
    assert "batch_size x unroll_length = 15: a batch of 15 transitions does not split into 4 equal minibatches" in (
        res.stderr)
    res = _cli("learner", "--env=classic", "--env_name=CartPole-v1", "--agent=ppo", "--lstm_size=8",
               "--batch_mode=split_with_advantage_recomputation", f"--logdir={tmp_path / 'b'}",
               "--server_address=127.0.0.1:0")
    assert res.returncode == 2, res.stderr[-2000:]
    assert "carry no recurrent state: lstm_size=8 needs batch_mode=shuffle or repeat" in res.stderr


def test_every_run_field_has_exactly_one_help_section():
    from seed_rl.config import RUN_SECTIONS, RunConfig, flat_fields

    listed = [name for names in RUN_SECTIONS.values() for name in names]
    assert sorted(listed) == sorted(flat_fields(RunConfig))  # each once, none missing
    assert list(RUN_SECTIONS) == ["run", "transport", "devices", "tracking"]  # RunConfig's own fields, its sections
