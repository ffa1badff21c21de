"""The ``seed-rl`` command line: ``train`` (learner + local actors), ``learner``, ``actor``, ``eval``.

This is the only module that parses flags. Flags are generated from the config dataclasses (their help text is
the field's documentation), the options dataclass of every registered env family included (`seed_rl.envs`); a
run starts from a preset (``--preset``, default ``<env>_<agent>``) and every flag given on the command line
overrides one field of it. An env option given to a family that does not have it is an error.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import sys
import typing
from typing import Any, Dict, List, Sequence, Tuple

from absl import flags

from seed_rl import agents as agents_lib
from seed_rl import envs as envs_lib
from seed_rl.config import AUTH_TOKEN_ENV, Config, EnvConfig, RunConfig, replace

USAGE = """\
usage: seed-rl <command> [--flag=value ...]

commands:
  train     train locally: a learner in this process and --num_actors actor processes on loopback
  learner   run only the learner (serves actors on --server_address, e.g. 0.0.0.0:8686)
  actor     run one actor (--task=N) against a learner at --server_address; config comes from the learner
  eval      play a few episodes with a checkpoint of --logdir (--checkpoint, --greedy, --seed; no gRPC)
  cluster   one replica of a multi-host job: the learner or --actors_per_worker actors, as $CLUSTER_SPEC
            (Vertex AI), $TF_CONFIG or $JOB_COMPLETION_INDEX (Kubernetes) say; other flags go to the learner

`seed-rl <command> --help` lists the flags of a command with their defaults and meaning.
"""

# Flag name -> (section, field). Environment fields get readable names; `--game` is an alias of `--env_name`.
# `--seed` sets both seeds; the family's options have flags of their own (section "options").
_ENV_FLAG_NAMES = {"family": "env", "name": "env_name", "seed": None, "options": None}

# Flags of train/learner that are no config field.
_OTHER_FLAGS = ("game", "agent", "preset", "actor_mode", "log_level")


def _type_of(cls: type, name: str) -> Any:
    return typing.get_type_hints(cls)[name]


def _families_with_option(name: str) -> List[str]:
    """The registered env families whose options dataclass has a field ``name``."""
    return [family for family in envs_lib.family_names() if name in _option_names(envs_lib.get_family(family))]


def _option_names(family: envs_lib.EnvFamily) -> List[str]:
    return [f.name for f in dataclasses.fields(family.options)] if family.options is not None else []


def _collect_fields() -> List[Tuple[str, str, dataclasses.Field, Any]]:
    """(flag name, section, field, type) for every configurable field, agents and env families included.

    An option that several families have is one flag (they must agree on its type). An option named like
    another flag is a ValueError: the family must rename it.
    """
    out = []
    for f in dataclasses.fields(EnvConfig):
        name = _ENV_FLAG_NAMES.get(f.name, f.name)
        if name:
            out.append((name, "env", f, _type_of(EnvConfig, f.name)))
    for f in dataclasses.fields(RunConfig):
        out.append((f.name, "run", f, _type_of(RunConfig, f.name)))
    seen = {name for name, *_ in out}
    for agent in agents_lib.agent_names():
        cls = agents_lib.config_class(agent)
        for f in dataclasses.fields(cls):
            if f.name in seen:
                continue
            seen.add(f.name)
            out.append((f.name, "agent", f, _type_of(cls, f.name)))
    taken = seen | {"seed", *_OTHER_FLAGS}
    options: Dict[str, Tuple[str, Any]] = {}
    for family_name in envs_lib.family_names():
        options_cls = envs_lib.get_family(family_name).options
        if options_cls is None:
            continue
        for f in dataclasses.fields(options_cls):
            typ = _type_of(options_cls, f.name)
            if f.name in taken:
                raise ValueError(f"env family {family_name!r}: option {f.name!r} has the name of another flag")
            if f.name in options:
                if options[f.name][1] != typ:
                    raise ValueError(f"env family {family_name!r}: option {f.name!r} is a {typ}, but it is a "
                                     f"{options[f.name][1]} in family {options[f.name][0]!r}")
                continue
            options[f.name] = (family_name, typ)
            out.append((f.name, "options", f, typ))
    return out


def _define(flag_values: flags.FlagValues, name: str, typ: Any, help_text: str) -> None:
    origin = typing.get_origin(typ)
    args = typing.get_args(typ)
    if origin is typing.Union and type(None) in args:
        typ = next(a for a in args if a is not type(None))
    if typ is bool:
        flags.DEFINE_boolean(name, None, help_text, flag_values=flag_values)
    elif typ is int:
        flags.DEFINE_integer(name, None, help_text, flag_values=flag_values)
    elif typ is float:
        flags.DEFINE_float(name, None, help_text, flag_values=flag_values)
    elif typ is tuple or typing.get_origin(typ) is tuple:
        flags.DEFINE_list(name, None, help_text, flag_values=flag_values)
    else:
        flags.DEFINE_string(name, None, help_text, flag_values=flag_values)


def _make_flags(command: str) -> Tuple[flags.FlagValues, List[Tuple[str, str, dataclasses.Field, Any]]]:
    fv = flags.FlagValues()
    fields: List[Tuple[str, str, dataclasses.Field, Any]] = []
    if command in ("train", "learner"):
        fields = _collect_fields()
        for name, section, f, typ in fields:
            default = f.default if f.default is not dataclasses.MISSING else None
            help_text = str(f.metadata.get("help", ""))
            if section == "env" and f.name == "family":
                help_text += " Registered: " + "; ".join(
                    f"{family} ({envs_lib.get_family(family).description})" for family in envs_lib.family_names())
            if section == "options":
                section = f"env option of {', '.join(_families_with_option(name))}"
            _define(fv, name, typ, f"{help_text} [{section}; default {default!r}]")
        flags.DEFINE_string("game", None, "Alias of --env_name, for families whose envs are games (e.g. Pong).",
                            flag_values=fv)
        flags.DEFINE_string("agent", None, f"Agent: one of {', '.join(agents_lib.agent_names())} [default vtrace].",
                            flag_values=fv)
        flags.DEFINE_string("preset", None, "Named preset to start from; default <env>_<agent>.", flag_values=fv)
        flags.DEFINE_string("config", None, "A config file to start from (JSON, or YAML with PyYAML installed), "
                            "e.g. a run's own config.json, or a partial one ({\"agent\": {\"learning_rate\": "
                            "0.001}}, optionally with \"preset\"): its fields apply on top of the preset, the flags on "
                            "top of both. A file's run.logdir, server_address and auth_token are ignored (say "
                            "--logdir).", flag_values=fv)
        if command == "learner":
            flags.DEFINE_enum("on_finish", "exit", ["exit", "wait"],
                              "When training is finished (budget spent or target reached): exit (code 0), or wait "
                              "until SIGTERM or Ctrl-C first. For a Kubernetes StatefulSet, which restarts a learner "
                              "that exits: with wait the pod stays up for kubectl exec and cp (k8s/README.md).",
                              flag_values=fv)
        if command == "train":
            flags.DEFINE_enum("actor_mode", "process", ["process", "thread"],
                              "Run actors as subprocesses (default) or threads of this process.", flag_values=fv)
            flags.DEFINE_list("seeds", None, "Train once per seed, one after another, in <logdir>/seed_<S> (each "
                              "resumable), then write <logdir>/seeds_curve.png and seeds.csv: every seed's mean "
                              "return of 20 episodes and their mean and spread against env frames.", flag_values=fv)
    elif command == "actor":
        flags.DEFINE_string("server_address", "127.0.0.1:8686", "Learner address host:port.", flag_values=fv)
        flags.DEFINE_integer("task", 0, "Actor index; owns env ids [task*env_batch_size, (task+1)*env_batch_size).",
                             flag_values=fv)
        flags.DEFINE_string("auth_token", "", "Shared secret, if the learner requires one; when empty, read from "
                            f"${AUTH_TOKEN_ENV} (keeps it out of `ps`).", flag_values=fv)
        flags.DEFINE_string("tls_ca_file", "", "PEM root certificates to verify the learner with; set when the "
                            "learner serves TLS (--tls_cert_file). Empty: plaintext.", flag_values=fv)
        flags.DEFINE_string("tls_server_name", "", "With TLS, the name the learner's certificate carries when it "
                            "is not the host of --server_address (e.g. connecting by IP).", flag_values=fv)
        flags.DEFINE_float("connect_timeout_s", None, "Give up connecting after this long; default: wait forever.",
                           flag_values=fv)
    elif command == "eval":
        flags.DEFINE_string("logdir", None, "Run directory with config.json and checkpoints.", flag_values=fv)
        flags.DEFINE_integer("num_episodes", 10, "Episodes to evaluate (>= 1).", flag_values=fv)
        flags.DEFINE_boolean("greedy", False, "Act greedily (argmax) instead of sampling.", flag_values=fv)
        flags.DEFINE_string("checkpoint", "latest", "Which checkpoint of the run: latest, best (the weights of its "
                            "best window of 20 episodes, checkpoints/best), or a number (the ckpt-N files in "
                            "<logdir>/checkpoints).", flag_values=fv)
        flags.DEFINE_boolean("video", False, "Record every episode as an MP4 in --video_dir (gymnasium's "
                             "RecordVideo; needs pip install 'seed_rl[video]').", flag_values=fv)
        flags.DEFINE_string("video_dir", None, "Where --video writes; default <logdir>/videos.", flag_values=fv)
        flags.DEFINE_integer("seed", None, "Seed the env and the policy's sampling (the same seed plays the same "
                             "episodes); default: the env gets the run's seed, sampling is unseeded.", flag_values=fv)
    flags.DEFINE_string("log_level", "WARNING", "Python logging level (DEBUG, INFO, WARNING, ERROR).", flag_values=fv)
    return fv, fields


def _flag(fv: flags.FlagValues, name: str) -> Any:
    """The flag's value; absl types every value as Optional, and the flags read this way all have defaults."""
    return fv[name].value


def _convert(value: Any, typ: Any) -> Any:
    if isinstance(value, list):
        return tuple(int(x) if str(x).lstrip("-").isdigit() else float(x) for x in value)
    return value


def resolve_config(fv: flags.FlagValues, fields) -> Config:
    """Preset + explicitly given flags -> Config, with the env family checked and its options resolved.

    Raises:
      ValueError: unknown env family or preset, a flag that does not apply to the agent or the env family, or a
        value a config refuses.
    """
    from seed_rl.configs import PRESETS, get_preset

    file_config = _read_config_file(str(fv["config"].value)) if fv["config"].present else {}
    file_env = file_config.get("env") or {}
    family = str(fv["env"].value) if fv["env"].present else file_env.get("family", EnvConfig.family)
    envs_lib.get_family(family)  # an unknown family: say so, not "unknown preset"
    agent = str(fv["agent"].value) if fv["agent"].present else file_config.get("agent_name", "vtrace")
    agents_lib.config_class(agent)  # an unknown agent: say so, listing the agents
    preset = fv["preset"].value or file_config.get("preset") or f"{family}_{agent}"
    if not fv["preset"].value and not file_config.get("preset") and preset not in PRESETS:
        of_agent = sorted(p for p in PRESETS if get_preset(p).agent_name == agent)
        raise ValueError(
            f"no default preset for the {agent} agent on the {family} env family ({preset}); start from one with "
            f"--preset=NAME and override its fields with flags (presets of {agent}: {', '.join(of_agent) or 'none'})")
    config = get_preset(preset)
    if file_config.get("agent_name", config.agent_name) != config.agent_name:
        raise ValueError(f"--config names agent {file_config['agent_name']!r} but preset {preset} is "
                         f"{config.agent_name!r}: give --agent or a preset of that agent")
    changes: Dict[str, Dict[str, Any]] = {
        "env": {k: v for k, v in file_env.items() if k != "options"},
        "run": {k: v for k, v in (file_config.get("run") or {}).items() if k not in _FILE_IGNORED_RUN_FIELDS},
        "agent": dict(file_config.get("agent") or {}),
        "options": dict(file_env.get("options") or {}),
    }
    for section in changes.values():
        for key, value in section.items():
            if isinstance(value, list):
                section[key] = tuple(value)
    unknown_run = set(changes["run"]) - {f.name for f in dataclasses.fields(RunConfig)}
    if unknown_run:
        raise ValueError(f"--config: unknown run field(s) {sorted(unknown_run)}")
    for name, section, f, typ in fields:
        if fv[name].present:
            changes[section][f.name] = _convert(fv[name].value, typ)
    if fv["game"].present:
        changes["env"]["name"] = fv["game"].value
    if fv["seed"].present:
        changes["env"]["seed"] = fv["seed"].value
    agent_cfg = config.agent
    known = {f.name for f in dataclasses.fields(agent_cfg)}
    unknown = set(changes["agent"]) - known
    if unknown:
        raise ValueError(f"flag(s) or --config field(s) {sorted(unknown)} do not apply to the {agent} agent")
    env = _resolve_env(config.env, changes["env"], changes["options"])
    return Config(env=env, run=replace(config.run, **changes["run"]),
                  agent_name=config.agent_name, agent=replace(agent_cfg, **changes["agent"]))


_FILE_IGNORED_RUN_FIELDS = ("logdir", "server_address", "auth_token")


def learner_config(args: Sequence[str]) -> Config:
    """The config ``seed-rl learner ARGS`` would run with, resolved without building anything (seed_rl/launch/
    vertex.py checks a cloud job's flags with it before the job costs anything).

    Raises:
      ValueError: a flag ``seed-rl learner`` does not know or a value it refuses (the message says which).
    """
    fv, fields = _make_flags("learner")
    try:
        fv(["seed-rl", *args])
    except flags.Error as e:
        raise ValueError(str(e)) from None
    return resolve_config(fv, fields)


_CONFIG_FILE_KEYS = {"preset", "agent_name", "env", "run", "agent"}


def _read_config_file(path: str) -> Dict[str, Any]:
    """The dict of a --config file (JSON; YAML when PyYAML is installed); ValueError with one line otherwise."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        raise ValueError(f"--config: cannot read {path}: {e.strerror}") from None
    if path.endswith((".yaml", ".yml")):
        try:
            import yaml
        except ImportError:
            raise ValueError(f"--config: {path} is YAML, which needs PyYAML (pip install pyyaml, or "
                             "seed_rl[yaml]); JSON files need nothing") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ValueError(f"--config: {path} is not valid YAML: {e}") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"--config: {path} is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise ValueError(f"--config: {path} must hold a mapping (keys {', '.join(sorted(_CONFIG_FILE_KEYS))})")
    unknown = set(data) - _CONFIG_FILE_KEYS
    if unknown:
        raise ValueError(f"--config: unknown key(s) {sorted(unknown)} in {path}; a config file has "
                         f"{', '.join(sorted(_CONFIG_FILE_KEYS))}")
    return data


def _resolve_env(preset_env: EnvConfig, env_changes: Dict[str, Any], option_changes: Dict[str, Any]) -> EnvConfig:
    """The preset's EnvConfig with the env flags applied and its options resolved to the family's dataclass."""
    env = replace(preset_env, **env_changes)
    family = envs_lib.get_family(env.family)
    # A preset's options belong to the preset's family; another family starts from its own defaults.
    base = env.options if env.family == preset_env.family else None
    options = envs_lib.resolve_env_config(replace(env, options=base)).options
    foreign = sorted(set(option_changes) - set(_option_names(family)))
    if foreign:
        takes = (f"whose options are {', '.join('--' + n for n in _option_names(family))}" if family.options
                 else "which takes no options")
        owners = "; ".join(f"--{n} is an option of {', '.join(_families_with_option(n))}" for n in foreign)
        raise ValueError(f"flag(s) {', '.join('--' + n for n in foreign)} do not apply to env family "
                         f"{family.name!r}, {takes} ({owners})")
    if option_changes:
        options = replace(options, **option_changes)
    return replace(env, options=options)


def _default_logdir(config: Config) -> str:
    name = config.env.name.replace("/", "_").replace(":", "_")
    return os.path.join("runs", f"{config.env.family}_{name}_{config.agent_name}")


def _config_value(config: Config, section: str, name: str) -> Any:
    """The value of field ``name`` of ``section`` (run, agent, env, options) in ``config``; ``_MISSING`` when the
    config has no such field (another agent's, another family's option)."""
    holder = {"run": config.run, "agent": config.agent, "env": config.env, "options": config.env.options}[section]
    return getattr(holder, name, _MISSING)


_MISSING = object()


def _help(command: str, rest: Sequence[str] = ()) -> str:
    """The flags of ``command``. For train and learner, each flag shows the value the command would use: the
    preset's (``--preset``, or the default ``<env>_<agent>``), changed by the other flags given."""
    fv, fields = _make_flags(command)
    lines = [f"usage: seed-rl {command} [--flag=value ...]", ""]
    values: Dict[str, Any] = {}
    if command in ("train", "learner"):
        args = [a for a in rest if a not in ("-h", "--help", "--helpfull")]
        try:
            fv(["seed-rl", *args])
            config = resolve_config(fv, fields)
        except (flags.Error, ValueError) as e:
            lines += [f"(the flags given do not resolve to a config: {e}; the values shown are the fields' "
                      "defaults)", ""]
        else:
            preset = fv["preset"].value or f"{fv['env'].value if fv['env'].present else EnvConfig.family}_" \
                f"{fv['agent'].value if fv['agent'].present else 'vtrace'}"
            values = {name: _config_value(config, section, f.name) for name, section, f, _ in fields}
            lines += [f"values: preset {preset} ({config.agent_name} on {config.env.family}:{config.env.name}) "
                      "with the flags given; pass --preset, --env or --agent before --help to see another", ""]
    for name in sorted(fv):
        text = fv[name].help
        if name in values:
            value = values[name]
            shown = "not used by this agent or env family" if value is _MISSING else f"value {value!r}"
            text = re.sub(r"; default .*\]$", f"; {shown}]", text)
        lines.append(f"  --{name}: {text}")
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    argv = list(argv)
    if len(argv) < 2 or argv[1] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if len(argv) >= 2 else 2
    command, rest = argv[1], argv[2:]
    if command == "cluster":
        return _run_cluster(argv[0], rest)
    if command not in ("train", "learner", "actor", "eval"):
        print(f"seed-rl: unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
        return 2
    if any(a in ("-h", "--help", "--helpfull") for a in rest):
        print(_help(command, rest))
        return 0
    fv, fields = _make_flags(command)
    try:
        fv([argv[0]] + rest)
    except flags.Error as e:
        print(f"seed-rl {command}: {e}", file=sys.stderr)
        return 2
    logging.basicConfig(level=getattr(logging, str(fv["log_level"].value).upper(), logging.WARNING),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if command == "actor":
        return _run_actor(fv)
    if command == "eval":
        return _run_eval(fv)
    try:
        config = resolve_config(fv, fields)
    except ValueError as e:
        print(f"seed-rl {command}: {e}", file=sys.stderr)
        return 2
    if not config.run.logdir:
        config = replace(config, run=replace(config.run, logdir=_default_logdir(config)))
    if not config.run.auth_token and os.environ.get(AUTH_TOKEN_ENV):
        config = replace(config, run=replace(config.run, auth_token=os.environ[AUTH_TOKEN_ENV]))
    try:  # unreadable TLS files: say so before building anything
        from seed_rl.transport import tls

        tls.server_credentials(config.run.tls_cert_file, config.run.tls_key_file)
        if command == "train":
            tls.channel_credentials(config.run.tls_ca_file or config.run.tls_cert_file)
    except ValueError as e:
        print(f"seed-rl {command}: {e}", file=sys.stderr)
        return 2
    if command == "train" and fv["seeds"].present:
        return _run_seeds(fv, config)
    # Building the learner checks what a config can get wrong (an unknown env id, specs an agent cannot take, a
    # replay buffer that would not fit): one line and exit code 2. Errors while training keep their traceback.
    try:
        if command == "train":
            from seed_rl.launch.local import LocalRun, on_free_loopback_port

            if not fv["server_address"].present:
                config = on_free_loopback_port(config)
            local = LocalRun(config, actor_mode=_flag(fv, "actor_mode"))
        else:
            from seed_rl.learner.learner import Learner

            learner = Learner(config)
    except (MemoryError, ValueError) as e:
        print(f"seed-rl {command}: {e}", file=sys.stderr)
        return 2
    from seed_rl.transport.server import tune_garbage_collector

    tune_garbage_collector(config.run.gc_threshold)  # the learner is built: its model and modules leave the scans
    from seed_rl.learner.training import SkippedUpdatesError

    if command == "train":
        try:
            local.run()  # stops on Ctrl-C / SIGTERM itself
        except SkippedUpdatesError as e:  # every update not finite, for --max_skipped_updates steps: one line
            print(f"seed-rl {command}: the learner stopped: {e}", file=sys.stderr)
            return 1
        return 0
    import signal
    import threading

    terminated = threading.Event()

    def on_sigterm(*_: object) -> None:
        terminated.set()
        learner.stop()

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        learner.run()
        if learner.finished and _flag(fv, "on_finish") == "wait" and not terminated.is_set():
            print("seed_rl learner: training is finished; waiting for SIGTERM or Ctrl-C (--on_finish=wait)",
                  flush=True)
            while not terminated.wait(timeout=1.0):
                pass
    except KeyboardInterrupt:
        learner.stop()
    except SkippedUpdatesError as e:
        print(f"seed-rl {command}: the learner stopped: {e}", file=sys.stderr)
        return 1
    return 0


def _run_seeds(fv: flags.FlagValues, config: Config) -> int:
    """``train --seeds=S1,S2,...``: one run per seed in <logdir>/seed_<S>, then the combined curve in <logdir>."""
    given = [str(s) for s in (fv["seeds"].value or [])]
    try:
        seeds = [int(s) for s in given]
    except ValueError:
        print(f"seed-rl train: --seeds takes integers, got {','.join(given)}", file=sys.stderr)
        return 2
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        print("seed-rl train: --seeds needs distinct seeds >= 0", file=sys.stderr)
        return 2
    from seed_rl.launch.local import LocalRun, on_free_loopback_port
    from seed_rl.learner.summaries import write_seed_curves
    from seed_rl.learner.training import SkippedUpdatesError
    from seed_rl.transport.server import tune_garbage_collector

    parent = config.run.logdir
    run_dirs: Dict[str, str] = {}
    for seed in seeds:
        run_dir = os.path.join(parent, f"seed_{seed}")
        seeded = replace(config, env=replace(config.env, seed=seed), run=replace(config.run, seed=seed,
                                                                                 logdir=run_dir))
        if not fv["server_address"].present:
            seeded = on_free_loopback_port(seeded)
        print(f"seed-rl train: seed {seed} ({len(run_dirs) + 1} of {len(seeds)}) in {run_dir}", flush=True)
        try:
            local = LocalRun(seeded, actor_mode=_flag(fv, "actor_mode"))
        except (MemoryError, ValueError) as e:
            print(f"seed-rl train: {e}", file=sys.stderr)
            return 2
        tune_garbage_collector(seeded.run.gc_threshold)
        try:
            local.run()
        except SkippedUpdatesError as e:  # this seed cannot train: say so in one line, go on with the others
            print(f"seed-rl train: seed {seed}: the learner stopped: {e}", file=sys.stderr)
            continue
        run_dirs[f"seed {seed}"] = run_dir
        if local.interrupted:
            print("seed-rl train: stopped; the remaining seeds did not run (the same command resumes)", flush=True)
            break
    png = write_seed_curves(parent, run_dirs)
    if png:
        print(f"seed-rl train: {len(run_dirs)} seeds, combined curve in {png} and {os.path.join(parent, 'seeds.csv')}",
              flush=True)
    else:
        print("seed-rl train: a seed finished fewer than 20 episodes: no combined curve", flush=True)
    return 0


CLUSTER_USAGE = """\
usage: seed-rl cluster [--actors_per_worker=K] [--learner_address=HOST:PORT] [learner flags ...]

Runs this replica's part of a multi-host job (seed_rl/launch/cluster.py). The role comes from $CLUSTER_SPEC
(Vertex AI: workerpool0 = learner, workerpool1 = actor workers), $TF_CONFIG (chief or master = learner, worker =
actors) or $JOB_COMPLETION_INDEX (a Kubernetes Indexed Job of actors; the learner at --learner_address or
$SEED_RL_LEARNER_ADDRESS).

  --actors_per_worker: actor processes per actor replica; worker w runs tasks w*K .. w*K+K-1 [default 1]
  --learner_address: the learner's host:port, for actor pods whose environment has no cluster spec

The learner replica runs `seed-rl learner` with the other flags, on [::]:<its port in the spec>, with --num_actors =
actor workers x K unless given. Actor replicas pass the connection flags among them (--auth_token, --tls_ca_file,
--tls_server_name, --connect_timeout_s, --log_level) to their actors; their config comes from the learner."""


def _run_cluster(program: str, rest: Sequence[str]) -> int:
    from seed_rl.launch.cluster import actor_tasks, resolve_role, run_actor_worker

    if any(a in ("-h", "--help", "--helpfull") for a in rest):
        print(CLUSTER_USAGE)
        return 0
    own = {"actors_per_worker": "1", "learner_address": ""}
    forwarded: List[str] = []
    for arg in rest:
        name, eq, value = arg.lstrip("-").partition("=")
        if arg.startswith("--") and name in own:
            if not eq:
                print(f"seed-rl cluster: --{name} needs a value (--{name}=...)", file=sys.stderr)
                return 2
            own[name] = value
        else:
            forwarded.append(arg)
    try:
        per_worker = int(own["actors_per_worker"])
        role = resolve_role(learner_address=own["learner_address"])
        actor_tasks(role, per_worker)
    except ValueError as e:
        print(f"seed-rl cluster: {e}", file=sys.stderr)
        return 2
    names = {a.lstrip("-").partition("=")[0] for a in forwarded if a.startswith("--")}
    if role.role == "learner":
        args = list(forwarded)
        if "server_address" not in names:
            args.append(f"--server_address=[::]:{role.learner_port}")
        if "num_actors" not in names and role.num_workers:
            args.append(f"--num_actors={role.num_workers * per_worker}")
        print(f"seed-rl cluster: learner ({role.source}; {role.num_workers} actor workers x {per_worker})",
              flush=True)
        return main([program, "learner", *args])
    actor_names, _ = _make_flags("actor")
    connection = set(actor_names) - {"server_address", "task"}
    passed = [a for a in forwarded if a.startswith("--") and a.lstrip("-").partition("=")[0] in connection]
    ignored = [a.partition("=")[0] for a in forwarded if a not in passed]
    if ignored:  # training flags given to an actor replica: its config comes from the learner
        print(f"seed-rl cluster: actor worker ignores {', '.join(ignored)} (actors take their config from the "
              "learner; they use only " + ", ".join(f"--{n}" for n in sorted(connection)) + ")", file=sys.stderr)
    return run_actor_worker(role, per_worker, passed)


def _run_actor(fv: flags.FlagValues) -> int:
    from seed_rl.actors.actor import LAUNCHER_PID_ENV, Actor, stop_with_parent
    from seed_rl.transport.errors import TransportError

    try:
        actor = Actor(_flag(fv, "server_address"), _flag(fv, "task"),
                      auth_token=_flag(fv, "auth_token") or os.environ.get(AUTH_TOKEN_ENV, ""),
                      connect_timeout_s=_flag(fv, "connect_timeout_s"), tls_ca_file=_flag(fv, "tls_ca_file"),
                      tls_server_name=_flag(fv, "tls_server_name"))
    except ValueError as e:  # an unreadable --tls_ca_file, --tls_server_name without it
        print(f"seed-rl actor {fv['task'].value}: {e}", file=sys.stderr)
        return 2
    import signal

    signal.signal(signal.SIGTERM, lambda *_: actor.stop())
    launcher_pid = os.environ.get(LAUNCHER_PID_ENV)
    if launcher_pid:
        stop_with_parent(actor, int(launcher_pid))
    try:
        actor.run()
    except TransportError as e:  # version/spec mismatch, bad task, wrong token: retrying cannot help
        print(f"seed-rl actor {fv['task'].value}: {e}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        pass
    return 0


def _run_eval(fv: flags.FlagValues) -> int:
    """Checks the flags and the run directory before TensorFlow is imported, then plays and reports."""
    logdir = fv["logdir"].value
    num_episodes = _flag(fv, "num_episodes")
    checkpoint = str(_flag(fv, "checkpoint"))
    if not logdir:
        print("seed-rl eval: --logdir is required (a run directory of seed-rl train)", file=sys.stderr)
        return 2
    if num_episodes < 1:
        print(f"seed-rl eval: --num_episodes must be >= 1, got {num_episodes}", file=sys.stderr)
        return 2
    if checkpoint not in ("latest", "best") and not checkpoint.isdigit():
        print(f"seed-rl eval: --checkpoint must be latest, best or a checkpoint number, got {checkpoint!r}",
              file=sys.stderr)
        return 2
    if not os.path.isfile(os.path.join(logdir, "config.json")):
        what = "does not exist" if not os.path.exists(logdir) else "has no config.json"
        print(f"seed-rl eval: {logdir} {what}: --logdir must be a run directory written by seed-rl train",
              file=sys.stderr)
        return 2
    import statistics
    import time

    from seed_rl.evaluate import Episode, evaluate

    mode = "greedy" if _flag(fv, "greedy") else "sampling"
    print(f"seed-rl eval: {logdir}, checkpoint {checkpoint}, {num_episodes} episodes, {mode}", flush=True)
    if checkpoint == "best":
        from seed_rl.learner.checkpoints import read_best_record

        record = read_best_record(logdir)
        if record:
            print(f"  best checkpoint {record['checkpoint']}: the run's mean return {record['mean_return']:.2f} "
                  f"over {record['episodes']} episodes at {record['env_frames']:,d} frames", flush=True)
    started = time.monotonic()

    def progress(episode: Episode) -> None:
        print(f"  episode {episode.index + 1}/{num_episodes}: return {episode.episode_return:.2f}, "
              f"{episode.steps} steps ({time.monotonic() - started:.0f} s)", flush=True)

    video_dir = (_flag(fv, "video_dir") or os.path.join(logdir, "videos")) if _flag(fv, "video") else None
    try:
        returns = evaluate(logdir, num_episodes=num_episodes, greedy=_flag(fv, "greedy"), seed=_flag(fv, "seed"),
                           checkpoint=checkpoint if not checkpoint.isdigit() else int(checkpoint),
                           on_episode=progress, video_dir=video_dir)
    except (FileNotFoundError, ValueError, ImportError) as e:
        print(f"seed-rl eval: {e}", file=sys.stderr)
        return 2
    std = statistics.pstdev(returns) if len(returns) > 1 else 0.0
    print(f"seed-rl eval: {len(returns)} episodes, mean return {statistics.fmean(returns):.2f}, std {std:.2f}, "
          f"min {min(returns):.2f}, max {max(returns):.2f}")
    if video_dir is not None:
        print(f"seed-rl eval: videos in {video_dir}")
    return 0


def run() -> None:
    """Console-script entry point."""
    sys.exit(main(sys.argv))


if __name__ == "__main__":
    run()
