"""Resolving a run's config: a preset, a config file and flags, checked, into one ``Config``.

Two entry points resolve configs the same way: the ``seed-rl`` command line (``seed_rl/cli.py``) and the Vertex AI
job builder (``seed_rl/launch/vertex.py``, which checks a cloud job's learner flags before the job costs anything).
The flags of ``train`` and ``learner`` are generated here from the config dataclasses (their help text is the
field's documentation), the options dataclass of every registered env family and the config of every registered
agent included. A run starts from a preset (``--preset``, default ``<env>_<agent>``), a ``--config`` file applies
on top of it and every flag given overrides one field of both. An env option given to a family that does not have
it, or an agent field to an agent that does not have it, is an error.

The commands that run (``train``, ``learner``) then fit the config to the env (`fit_to_env`): a network nobody
named follows the env's observation spec (`seed_rl.configs.defaults`), and the specs read for it go on to the
learner, so that env 0 is created once.
"""

from __future__ import annotations

import dataclasses
import json
import os
import typing
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from absl import flags

from seed_rl import agents as agents_lib
from seed_rl import envs as envs_lib
from seed_rl.config import (
    Config,
    EnvConfig,
    RunConfig,
    flat_dict,
    flat_fields,
    flat_values,
    help_of,
    replace,
    replace_flat,
)
from seed_rl.configs import defaults
from seed_rl.types import ArraySpec, ObservationSpec

__all__ = ["MISSING", "Field", "FittedRun", "agent_help", "config_values", "fit_to_env", "flag_values",
           "learner_config", "network_named_by", "resolve_config"]



class Field(NamedTuple):
    """One configurable field and its flag."""

    flag: str
    section: str
    """The part of the config it sets: env, run, agent or options (an env family's option)."""
    key: str
    """Its name in that part: the flag for run and agent (set by flag name, through their sections: `replace_flat`),
    the field's name for env and options."""
    type: Any
    default: Any
    """The default ``--help`` shows when no config resolves: the first registered agent's, for an agent field."""
    help: str


# Flag name -> (section, field). Environment fields get readable names; `--game` is an alias of `--env_name`.
# `--seed` sets both seeds; the family's options have flags of their own (section "options").
_ENV_FLAG_NAMES = {"family": "env", "name": "env_name", "seed": None, "options": None}

# Flags of train/learner that are no config field.
_OTHER_FLAGS = ("game", "agent", "preset", "config", "actor_mode", "seeds", "on_finish", "log_level")


def _type_of(cls: type, name: str) -> Any:
    return typing.get_type_hints(cls)[name]


def families_with_option(name: str) -> List[str]:
    """The registered env families whose options dataclass has a field ``name``."""
    return [family for family in envs_lib.family_names() if name in option_names(envs_lib.get_family(family))]


def option_names(family: envs_lib.EnvFamily) -> List[str]:
    return [f.name for f in dataclasses.fields(family.options)] if family.options is not None else []


def collect_fields() -> List[Field]:
    """Every configurable field with its flag, agents and env families included.

    A field several agents have (``learning_rate``) is one flag; its default and help are the first registered
    agent's (``--help`` shows the chosen agent's: `agent_help`). An option that several families have is one flag
    (they must agree on its type). An option named like another flag is a ValueError: the family must rename it.
    """
    out = []
    for f in dataclasses.fields(EnvConfig):
        name = _ENV_FLAG_NAMES.get(f.name, f.name)
        if name:
            out.append(Field(name, "env", f.name, _type_of(EnvConfig, f.name), f.default, _help(f)))
    out += _flat_fields_of(RunConfig, "run", set())
    seen = {field.flag for field in out}
    for agent in agents_lib.agent_names():
        out += _flat_fields_of(agents_lib.config_class(agent), "agent", seen)
    return out + _option_fields(seen | {"seed", *_OTHER_FLAGS})


def _help(f: dataclasses.Field) -> str:
    return str(f.metadata.get("help", ""))


def _flat_fields_of(cls: type, section: str, seen: set) -> List[Field]:
    """The fields of ``cls`` and its sections by flag name, but those in ``seen``, which gains them."""
    defaults = flat_values(cls())
    out = [Field(flag, section, flag, leaf.type, defaults[flag], help_of(cls, flag))
           for flag, leaf in flat_fields(cls).items() if flag not in seen]
    seen.update(field.flag for field in out)
    return out


def _option_fields(taken: set) -> List[Field]:
    out = []
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
            out.append(Field(f.name, "options", f.name, typ, f.default, _help(f)))
    return out


def _define(fv: flags.FlagValues, name: str, typ: Any, help_text: str) -> None:
    origin = typing.get_origin(typ)
    args = typing.get_args(typ)
    if origin is typing.Union and type(None) in args:
        typ = next(a for a in args if a is not type(None))
    if typ is bool:
        flags.DEFINE_boolean(name, None, help_text, flag_values=fv)
    elif typ is int:
        flags.DEFINE_integer(name, None, help_text, flag_values=fv)
    elif typ is float:
        flags.DEFINE_float(name, None, help_text, flag_values=fv)
    elif typ is tuple or typing.get_origin(typ) is tuple:
        flags.DEFINE_list(name, None, help_text, flag_values=fv)
    else:
        flags.DEFINE_string(name, None, help_text, flag_values=fv)


def flag_values(command: str) -> Tuple[flags.FlagValues, List[Field]]:
    """The flags of ``seed-rl train`` or ``seed-rl learner`` (every config field, and the command's own), unparsed,
    with the config fields they set."""
    if command not in ("train", "learner"):
        raise ValueError(f"only train and learner resolve a config, not {command}")
    fv = flags.FlagValues()
    fields = collect_fields()
    for field in fields:
        default = field.default if field.default is not dataclasses.MISSING else None
        help_text, section = field.help, field.section
        if section == "env" and field.key == "family":
            help_text += " Registered: " + "; ".join(
                f"{family} ({envs_lib.get_family(family).description})" for family in envs_lib.family_names())
        if section == "options":
            section = f"env option of {', '.join(families_with_option(field.flag))}"
        _define(fv, field.flag, field.type, f"{help_text} [{section}; default {default!r}]")
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
    flags.DEFINE_string("log_level", "WARNING", "Python logging level (DEBUG, INFO, WARNING, ERROR).", flag_values=fv)
    return fv, fields


def _convert(value: Any, typ: Any) -> Any:
    if isinstance(value, list):
        return tuple(int(x) if str(x).lstrip("-").isdigit() else float(x) for x in value)
    return value


def resolve_config(fv: flags.FlagValues, fields: Sequence[Field]) -> Config:
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
    # A file's run and agent sections by flag name, in the nested layout or the flat one of older config.json files.
    changes: Dict[str, Dict[str, Any]] = {
        "env": {k: v for k, v in file_env.items() if k != "options"},
        "run": {k: v for k, v in flat_dict(RunConfig, file_config.get("run") or {}).items()
                if k not in _FILE_IGNORED_RUN_FIELDS},
        "agent": flat_dict(type(config.agent), file_config.get("agent") or {}),
        "options": dict(file_env.get("options") or {}),
    }
    for given in changes.values():
        for key, value in given.items():
            if isinstance(value, list):
                given[key] = tuple(value)
    _check_file_keys(str(fv["config"].value), changes)
    given_as = {key: f"agent.{key} of --config" for key in changes["agent"]}  # where an agent field was given
    for field in fields:
        if fv[field.flag].present:
            changes[field.section][field.key] = _convert(fv[field.flag].value, field.type)
            if field.section == "agent":
                given_as[field.key] = f"--{field.flag}"
    if fv["game"].present:
        changes["env"]["name"] = fv["game"].value
    if fv["seed"].present:
        changes["env"]["seed"] = fv["seed"].value
    agent_cfg = config.agent
    unknown = set(changes["agent"]) - set(flat_fields(type(agent_cfg)))
    if unknown:
        names = sorted(unknown)
        raise ValueError(f"{_and([given_as[n] for n in names])} {'does' if len(names) == 1 else 'do'} not apply to "
                         f"the {agent} agent: {_owners(names, agent)}")
    env = _resolve_env(config.env, changes["env"], changes["options"])
    return Config(env=env, run=replace_flat(config.run, **changes["run"]),
                  agent_name=config.agent_name, agent=replace_flat(agent_cfg, **changes["agent"]))


_FILE_IGNORED_RUN_FIELDS = ("logdir", "server_address", "auth_token")


def _and(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return " and ".join(items) if len(items) < 3 else f"{', '.join(items[:-1])} and {items[-1]}"


def _owners(names: Sequence[str], agent: str) -> str:
    """Which agents have the fields ``names`` (none of them ``agent``'s), for an error message: "burn_in is a field
    of r2d2, not of vtrace; ..."."""
    said = []
    for name in names:
        owners = [a for a in agents_lib.agent_names() if name in flat_fields(agents_lib.config_class(a))]
        said.append(f"{name} is a field of {_and(owners)}, not of {agent}" if owners
                    else f"{name} is a field of no agent")
    return "; ".join(said)


def _check_file_keys(path: str, changes: Dict[str, Dict[str, Any]]) -> None:
    """A key of a --config file that is no field of its section anywhere (a typo) is named as such, with the
    section's fields it may have meant; before the flags apply (whose names absl checks)."""
    import difflib

    every_agent_field = {n for a in agents_lib.agent_names() for n in flat_fields(agents_lib.config_class(a))}
    every_option = {n for family in envs_lib.family_names() for n in option_names(envs_lib.get_family(family))}
    known = {"run": set(flat_fields(RunConfig)), "agent": every_agent_field,
             "env": {f.name for f in dataclasses.fields(EnvConfig)} - {"options"}, "options": every_option}
    for section, fields in known.items():
        unknown = sorted(set(changes[section]) - fields)
        if unknown:
            where = "env.options" if section == "options" else section
            hints = [f"{n} (did you mean {', '.join(close)}?)" if (close := difflib.get_close_matches(n, fields, 2))
                     else n for n in unknown]
            raise ValueError(f"--config: {path} has unknown {where} key(s): {'; '.join(hints)}")


class FittedRun(NamedTuple):
    """A resolved config fitted to its env (`fit_to_env`)."""

    config: Config
    observation_spec: Optional[ObservationSpec]
    """The env's specs when they were read to choose the network (pass them to the learner); None otherwise."""
    action_spec: Optional[ArraySpec]
    network_line: str
    """What the run prints at start: ``network: small_conv (observation [10, 10, 4] uint8: ...)``."""


def network_named_by(fv: flags.FlagValues, config: Config) -> Optional[str]:
    """Who named the network of ``config``'s agent: its flag (``--network``; R2D2's ``--torso``), a key of the
    ``--config`` file, or a preset named by ``--preset`` or by the file; None when nobody did (the default preset's
    network, which the observation spec may replace)."""
    rule = defaults.rule_for(config.agent)
    field = rule.field if rule is not None else "network"
    if field in fv and fv[field].present:
        return f"--{field}"
    file_config = _read_config_file(str(fv["config"].value)) if fv["config"].present else {}
    if field in (file_config.get("agent") or {}):
        return f"--config={fv['config'].value}"
    if fv["preset"].value:
        return f"--preset={fv['preset'].value}"
    if file_config.get("preset"):
        return f"the preset {file_config['preset']} of --config={fv['config'].value}"
    return None


def fit_to_env(fv: flags.FlagValues, config: Config, run_dirs: Sequence[str] = ()) -> FittedRun:
    """``config`` (resolved from ``fv``) with the network its env's observation spec calls for, unless somebody
    named one (`network_named_by`) or a run directory in ``run_dirs`` (default ``config.run.tracking.logdir``)
    already holds this run, whose network its config.json keeps: resuming never changes the network under a
    checkpoint.

    Reads the env's specs (``seed_rl.envs.env_specs``: env 0 created and closed, or the family's ``spaces`` rule)
    only when the spec decides.

    Raises:
      ValueError: the env cannot be created (an unknown id, an engine not installed), or the chosen network does not
        go with the agent's other fields.
    """
    rule = defaults.rule_for(config.agent)
    field = rule.field if rule is not None else "network"
    named_by = network_named_by(fv, config)
    named = named_flags(fv, config)
    if named_by is None:
        recorded = _recorded_network(config, field, run_dirs or [config.run.tracking.logdir])
        if recorded is not None:
            path, network, values = recorded
            # The rule's settings the run took with its network come back with it, unless named again.
            kept = {flag: value for flag, value in values.items() if flag not in named}
            config = replace(config, agent=replace_flat(config.agent, **{field: network}, **{
                flag: value for flag, value in kept.items() if flag in flat_fields(type(config.agent))}),
                run=replace_flat(config.run, **{flag: value for flag, value in kept.items()
                                                if flag in flat_fields(RunConfig)}))
            named_by = f"{path}, the run this one resumes"
    if named_by is not None:
        choice = defaults.fit_network(config, None, named_by)
        return FittedRun(choice.config, None, None, choice.line())
    try:
        observation_spec, action_spec = envs_lib.env_specs(config.env)
    except ImportError as e:  # the family's engine is not installed: its message says how to install it
        raise ValueError(str(e)) from e
    choice = defaults.fit_network(config, observation_spec, named=named)
    return FittedRun(choice.config, observation_spec, action_spec, choice.line())


def named_flags(fv: flags.FlagValues, config: Config) -> frozenset:
    """The run and agent fields (by flag name) the run gave a value: a flag on the command line or a key of the
    ``--config`` file's run and agent sections. A spec's settings (`seed_rl.configs.defaults`) leave them be."""
    names = {name for name in fv if fv[name].present}
    if fv["config"].present:
        file_config = _read_config_file(str(fv["config"].value))
        names.update(flat_dict(RunConfig, file_config.get("run") or {}))
        names.update(flat_dict(type(config.agent), file_config.get("agent") or {}))
    return frozenset(names)


def _recorded_network(config: Config, field: str,
                      run_dirs: Sequence[str]) -> Optional[Tuple[str, Any, Dict[str, Any]]]:
    """(config.json path, network, {flag: value} of the fields the agent's rule may set with a network) of the first
    run directory whose config.json is a run of this agent on this env and names its network; None when there is
    none (a new run, or one another command will refuse)."""
    for run_dir in run_dirs:
        path = os.path.join(run_dir, "config.json") if run_dir else ""
        try:
            with open(path) as f:
                recorded = json.load(f)
        except (OSError, ValueError):
            continue
        if not isinstance(recorded, dict):
            continue
        env = recorded.get("env") or {}
        same_run = (recorded.get("agent_name") == config.agent_name and env.get("family") == config.env.family
                    and env.get("name") == config.env.name)
        network = (recorded.get("agent") or {}).get(field)
        if same_run and isinstance(network, str):
            rule = defaults.rule_for(config.agent)
            flags_kept = rule.setting_flags() if rule is not None else ()
            values = {**flat_dict(RunConfig, recorded.get("run") or {}),
                      **flat_dict(type(config.agent), recorded.get("agent") or {})}
            return path, network, {flag: _as_field_value(values[flag]) for flag in flags_kept if flag in values}
    return None


def _as_field_value(value: Any) -> Any:
    """A value read from config.json as its field holds it (JSON lists are tuples)."""
    return tuple(value) if isinstance(value, list) else value


def learner_config(args: Sequence[str]) -> Config:
    """The config ``seed-rl learner ARGS`` would run with, resolved without building anything (seed_rl/launch/
    vertex.py checks a cloud job's flags with it before the job costs anything).

    Raises:
      ValueError: a flag ``seed-rl learner`` does not know or a value it refuses (the message says which).
    """
    fv, fields = flag_values("learner")
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
    foreign = sorted(set(option_changes) - set(option_names(family)))
    if foreign:
        takes = (f"whose options are {', '.join('--' + n for n in option_names(family))}" if family.options
                 else "which takes no options")
        owners = "; ".join(f"--{n} is an option of {', '.join(families_with_option(n))}" for n in foreign)
        raise ValueError(f"flag(s) {', '.join('--' + n for n in foreign)} do not apply to env family "
                         f"{family.name!r}, {takes} ({owners})")
    if option_changes:
        options = replace(options, **option_changes)
    return replace(env, options=options)


def config_values(config: Config, fields: Sequence[Field]) -> Dict[str, Any]:
    """The value in ``config`` of each field by flag name; ``MISSING`` for a field the config does not have
    (another agent's, another family's option)."""
    values = {"run": flat_values(config.run), "agent": flat_values(config.agent), "env": _by_name(config.env),
              "options": _by_name(config.env.options)}
    return {field.flag: values[field.section].get(field.key, MISSING) for field in fields}


def _by_name(obj: Any) -> Dict[str, Any]:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    return dict(obj or {})


MISSING = object()


def agent_help(config: Config) -> Dict[str, str]:
    """The help text of every flag of ``config``'s agent. A field several agents share (``learning_rate``) is one
    flag whose help is the first registered agent's; this is the chosen agent's, with the sources of its own
    defaults (`seed_rl.config.help_of`)."""
    return {flag: help_of(type(config.agent), flag) for flag in flat_fields(type(config.agent))}
