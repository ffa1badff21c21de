"""The ``seed-rl`` command line: ``train`` (learner + local actors), ``learner``, ``actor``, ``eval``.

The flags of ``train`` and ``learner`` and how a preset, a ``--config`` file and flags resolve into one config
are in `seed_rl.configs.resolve` (the Vertex AI job builder resolves with it too); this module runs the commands.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from typing import Any, Dict, List, Sequence, Tuple

from absl import flags

from seed_rl.config import AUTH_TOKEN_ENV, RUN_SECTIONS, Config, EnvConfig, replace, replace_flat
from seed_rl.configs import resolve
from seed_rl.configs.resolve import resolve_config

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

def _make_flags(command: str) -> Tuple[flags.FlagValues, List[resolve.Field]]:
    fv = flags.FlagValues()
    if command in ("train", "learner"):
        return resolve.flag_values(command)
    if command == "actor":
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
        flags.DEFINE_integer("num_envs", None, "Envs played side by side, one batched policy step for all (env i "
                             "plays episodes i, i + num_envs, ...); default min(num_episodes, 10), 1 with --video.",
                             flag_values=fv)
        flags.DEFINE_integer("seed", None, "Seed the env and the policy's sampling (the same seed plays the same "
                             "episodes); default: the env gets the run's seed, sampling is unseeded.", flag_values=fv)
    flags.DEFINE_string("log_level", "WARNING", "Python logging level (DEBUG, INFO, WARNING, ERROR).", flag_values=fv)
    return fv, []


def _flag(fv: flags.FlagValues, name: str) -> Any:
    """The flag's value; absl types every value as Optional, and the flags read this way all have defaults."""
    return fv[name].value


def _default_logdir(config: Config) -> str:
    name = config.env.name.replace("/", "_").replace(":", "_")
    return os.path.join("runs", f"{config.env.family}_{name}_{config.agent_name}")


_COMMAND_FLAGS = ("agent", "preset", "config", "game", "on_finish", "actor_mode", "seeds", "log_level")
"""Flags of train/learner that choose what to run (no config field), listed first."""


def _help(command: str, rest: Sequence[str] = ()) -> str:
    """The flags of ``command``. For train and learner, each flag shows the value the command would use: the
    preset's (``--preset``, or the default ``<env>_<agent>``), changed by the other flags given; a field several
    agents share shows the chosen agent's help (its provenance). They are listed by section (run, env, agent,
    transport, devices, tracking), and only those the chosen agent and env family use (``--helpfull``: all)."""
    fv, fields = _make_flags(command)
    lines = [f"usage: seed-rl {command} [--flag=value ...]", ""]
    if command not in ("train", "learner"):
        return "\n".join(lines + [f"  --{name}: {fv[name].help}" for name in sorted(fv)])
    full = "--helpfull" in rest
    values: Dict[str, Any] = {}
    helps: Dict[str, str] = {}
    args = [a for a in rest if a not in ("-h", "--help", "--helpfull")]
    try:
        fv(["seed-rl", *args])
        config = resolve_config(fv, fields)
    except (flags.Error, ValueError) as e:
        lines += [f"(the flags given do not resolve to a config: {e}; the values shown are the fields' defaults)", ""]
    else:
        preset = fv["preset"].value or f"{fv['env'].value if fv['env'].present else EnvConfig.family}_" \
            f"{fv['agent'].value if fv['agent'].present else 'vtrace'}"
        try:  # the network the run would get (reading the env's spec when that decides)
            fitted = resolve.fit_to_env(fv, config)
            config, network_line = fitted.config, fitted.network_line
        except Exception as e:  # whatever creating a user's env raises, --help still lists the flags
            network_line = f"network: the preset's (the env's observation spec, which may change it, is unknown: {e})"
        values = resolve.config_values(config, fields)
        helps = resolve.agent_help(config)
        lines += [f"values: preset {preset} ({config.agent_name} on {config.env.family}:{config.env.name}) with the "
                  "flags given; pass --preset, --env or --agent before --help to see another", f"  {network_line}",
                  ""]
    run_section = {name: section for section, names in RUN_SECTIONS.items() for name in names}
    sections: Dict[str, List[str]] = {s: [] for s in ("command", "run", "env", "agent", *RUN_SECTIONS)}
    hidden = 0
    for field in fields:
        name, section = field.flag, field.section
        if values.get(name, None) is resolve.MISSING and not full:
            hidden += 1
            continue
        text = fv[name].help
        if name in helps:  # the flag's help is the first registered agent's; show the chosen agent's
            at = text.rfind(" [agent; default ")
            text = helps[name] + text[at:] if at >= 0 else text
        if name in values:
            value = values[name]
            shown = "not used by this agent or env family" if value is resolve.MISSING else f"value {value!r}"
            text = re.sub(r"; default .*\]$", f"; {shown}]", text)
        group = run_section[name] if section == "run" else "env" if section == "options" else section
        sections[group].append(f"  --{name}: {text}")
    sections["command"] = [f"  --{name}: {fv[name].help}" for name in _COMMAND_FLAGS if name in fv]
    for section, rows in sections.items():
        if rows:
            lines += [f"{section}:", *sorted(rows), ""]
    if hidden:
        lines.append(f"({hidden} flags of other agents and env families not shown; --helpfull shows every flag)")
    return "\n".join(lines).rstrip()


_NATIVE_NOISE = re.compile(r"WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR$"
                           r"|I\d{4} [\d:.]+ +\d+ [\w.]+:\d+\] ")


def _load_tensorflow() -> None:
    """Imports TensorFlow with its native INFO lines left out of stderr. On CPUs where it turns oneDNN on, TF 2.21
    logs through absl before absl is set up, which TF_CPP_MIN_LOG_LEVEL does not reach: two "WARNING: All log
    messages before absl::InitializeLog()" lines and two "I0000 ... oneDNN custom operations are on" INFO lines,
    around the one line a mistake gets. stderr (fd 2) goes to a file during the import; every other line written
    meanwhile (native warnings and errors, Python's) is written back, in order."""
    if "tensorflow" in sys.modules:
        return
    import tempfile

    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            import tensorflow  # noqa: F401
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            kept = [line for line in captured.read().decode(errors="replace").splitlines(keepends=True)
                    if not _NATIVE_NOISE.match(line)]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()


def main(argv: Sequence[str]) -> int:
    argv = list(argv)
    if len(argv) < 2 or argv[1] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if len(argv) >= 2 else 2
    command, rest = argv[1], argv[2:]
    # TensorFlow's C++ INFO lines (CPU features, oneDNN) say nothing a user acts on; its warnings and errors stay.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
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
    if not config.run.tracking.logdir:
        config = replace(config, run=replace_flat(config.run, logdir=_default_logdir(config)))
    try:  # what the learner would refuse anyway, as the one line of output, before TensorFlow loads
        _refuse_before_start(command, fv, config)
    except ValueError as e:
        print(f"seed-rl {command}: {e}", file=sys.stderr)
        return 2
    if not config.run.transport.auth_token and os.environ.get(AUTH_TOKEN_ENV):
        config = replace(config, run=replace_flat(config.run, auth_token=os.environ[AUTH_TOKEN_ENV]))
    try:  # unreadable TLS files: say so before building anything
        from seed_rl.transport import tls

        tls.server_credentials(config.run.transport.tls_cert_file, config.run.transport.tls_key_file)
        if command == "train":
            tls.channel_credentials(config.run.transport.tls_ca_file or config.run.transport.tls_cert_file)
    except ValueError as e:
        print(f"seed-rl {command}: {e}", file=sys.stderr)
        return 2
    if command == "train" and fv["seeds"].present:
        return _run_seeds(fv, config)
    # Building the learner checks what a config can get wrong (an unknown env id, specs an agent cannot take, a
    # replay buffer that would not fit): one line and exit code 2. Errors while training keep their traceback.
    try:
        # The env first, which needs no TensorFlow: an env id that does not exist is refused in about a second
        # instead of after TensorFlow's import (about 5 s on a 2-core CPU).
        fitted = resolve.fit_to_env(fv, config)  # the network, from the env's observation spec unless named
    except (MemoryError, ValueError) as e:
        print(f"seed-rl {command}: {e}", file=sys.stderr)
        return 2
    _load_tensorflow()  # outside the refusals: an import that fails keeps its traceback
    try:
        config = fitted.config
        print(fitted.network_line, flush=True)
        if command == "train":
            from seed_rl.launch.local import LocalRun, on_free_loopback_port

            if not fv["server_address"].present:
                config = on_free_loopback_port(config)
            local = LocalRun(config, actor_mode=_flag(fv, "actor_mode"), observation_spec=fitted.observation_spec,
                             action_spec=fitted.action_spec)
        else:
            from seed_rl.learner.learner import Learner
            from seed_rl.learner.resume import RunFinishedError

            try:
                learner = Learner(config, fitted.observation_spec, fitted.action_spec)
            except RunFinishedError as e:
                if _flag(fv, "on_finish") != "wait":
                    raise
                # A StatefulSet restarts a learner that exits: on a finished run it waits, as after finishing.
                print(f"seed_rl learner: {e}", flush=True)
                return _wait_for_sigterm()
    except (MemoryError, ValueError) as e:
        print(f"seed-rl {command}: {e}", file=sys.stderr)
        return 2
    from seed_rl.learner.gc_policy import tune_garbage_collector

    # The learner is built: its model and modules leave the collector's scans.
    tune_garbage_collector(config.run.devices.gc_threshold)
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
            return _wait_for_sigterm(terminated)
    except KeyboardInterrupt:
        learner.stop()
    except SkippedUpdatesError as e:
        print(f"seed-rl {command}: the learner stopped: {e}", file=sys.stderr)
        return 1
    return 0


def _refuse_before_start(command: str, fv: flags.FlagValues, config: Config) -> None:
    """The mistakes the learner refuses (it checks them again), found before anything else is printed: a run
    directory that cannot be one, a run directory this config cannot resume (another agent or env; a finished run,
    unless ``learner --on_finish=wait`` waits on it), a fixed port something listens on already.

    Raises:
      ValueError: one line saying which (a finished run: how to extend its budget).
    """
    from seed_rl.learner.resume import RunFinishedError, resume_changes
    from seed_rl.transport.grpc_serving import refuse_busy_port

    try:  # checks the directory first; changes that do not block (a larger budget) are the learner's to record
        resume_changes(config.run.tracking.logdir, config.to_json())
    except RunFinishedError:
        if command == "train" or _flag(fv, "on_finish") != "wait":
            raise
    if command == "learner" or fv["server_address"].present:  # train picks a free port unless given one
        try:
            refuse_busy_port(config.run.transport.server_address)
        except OSError as e:
            raise ValueError(str(e)) from None


def _wait_for_sigterm(terminated=None) -> int:
    """``--on_finish=wait``: training is finished; stay up until SIGTERM or Ctrl-C, then exit 0 (a Kubernetes
    StatefulSet restarts a learner that exits, which would train nothing and exit again, in a loop)."""
    import signal
    import threading

    if terminated is None:
        terminated = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: terminated.set())
    print("seed_rl learner: training is finished; waiting for SIGTERM or Ctrl-C (--on_finish=wait)", flush=True)
    try:
        while not terminated.wait(timeout=1.0):
            pass
    except KeyboardInterrupt:
        pass
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
    parent = config.run.tracking.logdir
    try:  # one network for every seed: the spec's unless named, or the one a seed's run directory already holds
        fitted = resolve.fit_to_env(fv, config, [os.path.join(parent, f"seed_{seed}") for seed in seeds])
    except ValueError as e:
        print(f"seed-rl train: {e}", file=sys.stderr)
        return 2
    config = fitted.config
    print(fitted.network_line, flush=True)
    from seed_rl.launch.local import LocalRun, on_free_loopback_port
    from seed_rl.learner.gc_policy import tune_garbage_collector
    from seed_rl.learner.resume import RunFinishedError
    from seed_rl.learner.summaries import write_seed_curves
    from seed_rl.learner.training import SkippedUpdatesError

    run_dirs: Dict[str, str] = {}
    for seed in seeds:
        run_dir = os.path.join(parent, f"seed_{seed}")
        seeded = replace(config, env=replace(config.env, seed=seed), run=replace_flat(config.run, seed=seed,
                                                                                      logdir=run_dir))
        if not fv["server_address"].present:
            seeded = on_free_loopback_port(seeded)
        print(f"seed-rl train: seed {seed} ({len(run_dirs) + 1} of {len(seeds)}) in {run_dir}", flush=True)
        try:
            local = LocalRun(seeded, actor_mode=_flag(fv, "actor_mode"), observation_spec=fitted.observation_spec,
                             action_spec=fitted.action_spec)
        except RunFinishedError as e:  # an earlier command trained this seed to the end: on to the next
            print(f"seed-rl train: seed {seed}: {str(e).split('. ')[0]}", flush=True)
            run_dirs[f"seed {seed}"] = run_dir
            continue
        except (MemoryError, ValueError) as e:
            print(f"seed-rl train: {e}", file=sys.stderr)
            return 2
        tune_garbage_collector(seeded.run.devices.gc_threshold)
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
    num_envs = _flag(fv, "num_envs")
    if num_envs is not None and (num_envs < 1 or (_flag(fv, "video") and num_envs != 1)):
        print(f"seed-rl eval: --num_envs must be >= 1 (and 1 with --video, which records one env), got {num_envs}",
              file=sys.stderr)
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

    _load_tensorflow()
    from seed_rl.evaluate import Episode, evaluate

    mode = "greedy" if _flag(fv, "greedy") else "sampling"
    print(f"seed-rl eval: {logdir}, checkpoint {checkpoint}, {num_episodes} episode{'s' if num_episodes != 1 else ''}, "
          f"{mode}", flush=True)
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
                           on_episode=progress, video_dir=video_dir, num_envs=num_envs)
    except (FileNotFoundError, ValueError, ImportError) as e:
        print(f"seed-rl eval: {e}", file=sys.stderr)
        return 2
    std = statistics.pstdev(returns) if len(returns) > 1 else 0.0
    print(f"seed-rl eval: {len(returns)} episode{'s' if len(returns) != 1 else ''}, mean return {statistics.fmean(returns):.2f}, std {std:.2f}, "
          f"min {min(returns):.2f}, max {max(returns):.2f}")
    if video_dir is not None:
        print(f"seed-rl eval: videos in {video_dir}")
    return 0


def run() -> None:
    """Console-script entry point."""
    sys.exit(main(sys.argv))


if __name__ == "__main__":
    run()
